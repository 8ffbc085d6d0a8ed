"""The configuration reference, generated from the schema (``memsync.config.schema``).

``render_reference`` makes the key tables of ``docs/reference/config.md`` (the part between
``BEGIN``/``END``); ``mentioned_keys`` reads which keys a commented example file shows. Both
are pure. Regenerate the page from the repository root::

    python -m memsync.config.reference            # rewrite docs/reference/config.md
    python -m memsync.config.reference --check    # exit 1 when the page is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from memsync.config.schema import ConfigFile

BEGIN = "<!-- BEGIN GENERATED: python -m memsync.config.reference -->"
END = "<!-- END GENERATED -->"
DOC_PATH = Path("docs/reference/config.md")
_TYPES: dict[Any, str] = {
    int: "integer",
    float: "number",
    bool: "boolean",
    str: "string",
    Path: "path",
    list: "array",
}
_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
_SECTION_LINE = re.compile(r"^\s*#?\s*\[([A-Za-z0-9_.]+)\]\s*(#.*)?$")
_KEY_LINE = re.compile(r"^\s*#?\s*([a-z_][a-z0-9_]*)\s*=\s*[^\s)]")


@dataclass(frozen=True, slots=True)
class Key:
    """One row of the reference: a key's table, name, type, default and description."""

    section: str
    name: str
    type: str
    default: str
    description: str
    secret: bool

    @property
    def dotted(self) -> str:
        """``section.name`` (``name`` at the top level)."""
        return f"{self.section}.{self.name}" if self.section else self.name


@dataclass(frozen=True, slots=True)
class Section:
    """One table of the configuration: its dotted name, its model, whether extra keys pass."""

    name: str
    model: type[BaseModel]
    open: bool


def sections(model: type[BaseModel] = ConfigFile, name: str = "") -> list[Section]:
    """Every table the schema declares, depth first (the top level is ``""``). Pure."""
    found = [Section(name, model, model.model_config.get("extra") == "allow")]
    for key, info in model.model_fields.items():
        dotted = f"{name}.{key}" if name else key
        for number, nested in enumerate(_models_of(info.annotation)):
            # a table of either model (the vector store's config): the later ones are labelled
            label = getattr(nested, "provider_label", "") if number else ""
            found += sections(nested, f"{dotted} ({label})" if label else dotted)
    return found


def keys() -> list[Key]:
    """Every key the schema declares, table by table. Pure."""
    rows = []
    for section in sections():
        for name, info in section.model.model_fields.items():
            if not _models_of(info.annotation):
                extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
                rows.append(
                    Key(
                        section.name,
                        name,
                        str(extra.get("toml") or _type_text(info)),
                        str(extra.get("shown") or _default_text(info.default)),
                        info.description or "",
                        bool(extra.get("secret")),
                    )
                )
    return rows


def render_reference() -> str:
    """The generated block of ``docs/reference/config.md``: one table per section. Pure."""
    lines = [BEGIN, ""]
    for section in sections():
        rows = [key for key in keys() if key.section == section.name]
        if not rows:
            continue
        title = f"`[{section.name}]`" if section.name else "Top level"
        doc = (section.model.__doc__ or "").strip().splitlines()[0].replace("``", "`")
        doc = doc.split(": ", 1)[-1] if section.name else "Keys outside any table."
        lines += [f"### {title}", "", doc, ""]
        if section.open:
            lines += ["Only the keys memsync reads are listed; mem0's other keys pass through.", ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        lines += [
            f"| `{k.name}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.description)} |"
            for k in rows
        ]
        lines.append("")
    return "\n".join([*lines, END])


def replace_block(page: str, block: str) -> str:
    """``page`` with the text from ``BEGIN`` to ``END`` replaced by ``block``. Pure.

    Raises:
        ValueError: the page has no such block.
    """
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} block")
    return page[:start] + block + page[end + len(END) :]


def mentioned_keys(example: str) -> set[str]:
    """Dotted keys an example TOML file sets or shows commented (``# key = ...``). Pure."""
    found, section = set(), ""
    for line in example.splitlines():
        if header := _SECTION_LINE.match(line):
            section = header.group(1)
            label = re.search(r"\((provider = \"\w+\")\)", header.group(2) or "")
            if label:  # "# [mem0.vector_store.config]  # (provider = "pgvector")"
                section = f"{section} ({label.group(1)})"
        elif key := _KEY_LINE.match(line):
            found.add(f"{section}.{key.group(1)}" if section else key.group(1))
    return found


def unknown_keys(mentioned: set[str]) -> set[str]:
    """The ``mentioned`` keys the schema does not declare, outside tables that pass extra keys. Pure."""
    known = {key.dotted for key in keys()} | {s.name for s in sections() if s.name}
    open_tables = tuple(f"{s.name}." for s in sections() if s.open)
    return {name for name in mentioned if name not in known and not name.startswith(open_tables)}


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or ``--check``) the generated block of the reference page; 1 when out of date."""
    parser = argparse.ArgumentParser(prog="python -m memsync.config.reference")
    parser.add_argument(
        "--check", action="store_true", help="only report whether the page is current"
    )
    parser.add_argument("page", nargs="?", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    page = args.page.read_text(encoding="utf-8")
    fresh = replace_block(page, render_reference())
    if fresh == page:
        return 0
    if args.check:
        sys.stderr.write(f"{args.page} is out of date: run python -m memsync.config.reference\n")
        return 1
    args.page.write_text(fresh, encoding="utf-8")
    return 0


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for candidate in typing.get_args(annotation):  # a union, Annotated[...], or both
        found += [model for model in _models_of(candidate) if model not in found]
    return found


def _type_text(info: FieldInfo) -> str:
    annotation: Any = info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is typing.Literal:
        text = " or ".join(f"`{value!r}`" for value in typing.get_args(annotation))
    else:
        text = _TYPES.get(typing.get_origin(annotation) or annotation, str(annotation))
    bounds = [
        f"{sign} {getattr(m, attr)}"
        for m in info.metadata
        for attr, sign in _BOUNDS
        if getattr(m, attr, None) is not None
    ]
    return ", ".join([text, *bounds])


def _default_text(default: Any) -> str:
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "—"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, str | Path):
        return f'`"{default}"`'
    return f"`{default!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
