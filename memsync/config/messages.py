"""pydantic's validation errors as memsync's one-line problems: ``dotted.path: what (got VALUE)``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from memsync.config.redact import is_secret_name, scrub_url
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
_LONGEST_VALUE = 200  # characters of an echoed value
NOT_SHOWN = "a value, not shown"


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
    return f"{dotted}: {text} (got {shown_value(tuple(detail['loc']), detail['input'])})"


def shown_value(loc: tuple[Any, ...], value: Any) -> str:
    """How a message echoes ``value`` found at ``loc``: never a secret, never URL credentials. Pure.

    A key the schema marks ``secret``, or one in mem0's dict under a secret-like name
    (``memsync.config.redact``), gives ``a value, not shown``; anything else its ``repr``, URL
    credentials redacted, cut to 200 characters.
    """
    names = [part for part in loc if isinstance(part, str)] if loc[:1] == ("mem0",) else []
    if _is_secret_field(loc) or any(is_secret_name(name, value) for name in names):
        return NOT_SHOWN
    text = scrub_url(repr(value))
    return text if len(text) <= _LONGEST_VALUE else text[: _LONGEST_VALUE - 3] + "..."


def _is_secret_field(loc: tuple[Any, ...]) -> bool:
    """Whether ``loc`` is, or is inside, a key the schema marks ``secret``."""
    model: type[BaseModel] | None = ConfigFile
    for part in loc:
        info = model.model_fields.get(part) if model and isinstance(part, str) else None
        if info is None:
            return False
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("secret"):
            return True
        model = _model_of(info.annotation)
    return False


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def section_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema declares for the table at ``loc`` (``()`` is the top level). Pure."""
    model: type[BaseModel] | None = ConfigFile
    for part in loc:
        model = _model_of(model.model_fields[str(part)].annotation) if model else None
    return list(model.model_fields) if model else []
