"""docs/reference/json-output.md as data: each section's documented key paths, and a checker.

A section is a ``## `` heading. Its key paths are the first column of its ``| field |`` tables
(several names in one cell share the first name's parent: `` `jobs[].last_success_at`,
`last_run_at` `` is ``jobs[].last_run_at`` too; a parenthesised remark is not a field) and the
lines of its ```` ```fields ```` blocks. ``a.b`` is key ``b`` of object ``a``; ``a[]`` is a list,
``a[].b`` key ``b`` of each of its items.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "json-output.md"

_NAME = re.compile(r"`([a-z_][a-z0-9_]*(?:\[\])?(?:\.[a-z_][a-z0-9_]*(?:\[\])?)*)`")


def _cell_paths(cell: str) -> list[str]:
    cell = re.sub(r"\([^)]*\)", "", cell)
    paths: list[str] = []
    parent = ""
    for index, name in enumerate(_NAME.findall(cell)):
        if index == 0:
            cut = max(name.rfind("."), name.rfind("[]."))
            parent = name[: name.rfind(".") + 1] if cut >= 0 else ""
            paths.append(name)
        else:
            paths.append(name if "." in name else parent + name)
    return paths


def sections(text: str | None = None) -> dict[str, list[str]]:
    """``{heading: [key path, ...]}`` in the page's order (headings without fields included)."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    found: dict[str, list[str]] = {}
    heading = ""
    in_fields = False
    in_table = False
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            found[heading] = []
            in_table = in_fields = False
        elif line.strip() == "```fields":
            in_fields = True
        elif in_fields:
            if line.startswith("```"):
                in_fields = False
            elif line.strip():
                found[heading].append(line.strip())
        elif line.startswith("| field |"):
            in_table = True
        elif in_table and line.startswith("|"):
            cell = line.split("|")[1]
            if not set(cell.strip()) <= {"-"}:
                found[heading] += _cell_paths(cell)
        else:
            in_table = False
    return found


_MISSING = object()
_UNSEEN = object()


def _walk(value: Any, parts: list[str]) -> Any:
    """The values at ``parts`` below ``value``: ``_MISSING`` when a key is absent, ``_UNSEEN``
    when a null or an empty list stands on the way (nothing to check in this document)."""
    if not parts:
        return value
    if value is None:
        return _UNSEEN
    head, rest = parts[0], parts[1:]
    is_list = head.endswith("[]")
    key = head.removesuffix("[]")
    if not isinstance(value, dict) or key not in value:
        return _MISSING
    child = value[key]
    if not is_list:
        return _walk(child, rest)
    if child is None:
        return _UNSEEN
    if not isinstance(child, list):
        return _MISSING
    if not rest:
        return child
    if not child:
        return _UNSEEN
    results = [_walk(item, rest) for item in child]
    if any(r is _MISSING for r in results):
        return _MISSING
    return _UNSEEN if all(r is _UNSEEN for r in results) else results


def check_section(
    documents: list[dict[str, Any]], paths: list[str], *, closed: list[str] | None = None
) -> list[str]:
    """What is wrong: a documented path absent from a document, a path no document showed
    (always null or empty on the way), and with ``closed`` (the section's every path) a
    top-level key it does not document."""
    problems: list[str] = []
    for path in paths:
        seen = False
        for index, document in enumerate(documents):
            result = _walk(document, path.split("."))
            if result is _MISSING:
                problems.append(f"{path}: absent from document {index} ({document.get('command')})")
            elif result is not _UNSEEN:
                seen = True
        if not seen:
            problems.append(f"{path}: no document shows it (null or empty on the way)")
    if closed is not None:
        top = {path.split(".")[0].removesuffix("[]") for path in closed}
        for index, document in enumerate(documents):
            extra = set(document) - top
            if extra:
                problems.append(f"document {index}: undocumented keys {sorted(extra)}")
    return problems
