"""pydantic's validation errors as memsync's one-line problems: ``dotted.path: what (got VALUE)``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from memsync.config.schema import ConfigFile

_TEXTS = {
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "model_type": "must be a table",
    "dict_type": "must be a table",
    "missing": "required",
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "literal_error": "must be {expected}",
}
_NO_VALUE = ("missing", "extra_forbidden")


def describe_errors(error: ValidationError) -> list[str]:
    """One problem line per pydantic error, in document order. Pure."""
    return [describe(detail) for detail in error.errors(include_url=False)]


def describe(detail: Any) -> str:
    """``dotted.path: what is wrong (got VALUE)`` for one pydantic error detail. Pure."""
    loc = [str(part) if isinstance(part, str) else f"[{part}]" for part in detail["loc"]]
    dotted = ".".join(loc).replace(".[", "[")
    kind = detail["type"]
    if kind == "extra_forbidden":
        known = ", ".join(sorted(section_keys(tuple(detail["loc"][:-1]))))
        return f"{dotted}: unknown key (known: {known})"
    template = _TEXTS.get(kind)
    text = template.format(**detail.get("ctx", {})) if template else str(detail["msg"])
    if kind in _NO_VALUE:
        return f"{dotted}: {text}"
    return f"{dotted}: {text} (got {detail['input']!r})"


def section_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema declares for the table at ``loc`` (``()`` is the top level). Pure."""
    model: type[BaseModel] = ConfigFile
    for part in loc:
        annotation = model.model_fields[str(part)].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next(c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel))
    return list(model.model_fields)
