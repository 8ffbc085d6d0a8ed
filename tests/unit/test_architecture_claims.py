"""docs/architecture.md's checkable claims hold: where each library is imported, and which
modules still branch on the vector-store backend outside its package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memsync"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def modules() -> dict[str, str]:
    """Every module of the package: its path under memsync/ and its source."""
    return {
        path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def imported(source: str) -> set[str]:
    """The top-level names of every module a source imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def library_table() -> dict[str, list[str]]:
    """The table "library | imported only in" of docs/architecture.md."""
    table: dict[str, list[str]] = {}
    row = re.compile(r"^\| (`[a-z0-9_]+`(?:, `[a-z0-9_]+`)*) \| (.+) \|$", re.M)
    for libraries, places in row.findall(DOC):
        homes = re.findall(r"`([a-z0-9_/]+(?:/|\.py))`", places)
        for library in re.findall(r"`([a-z0-9_]+)`", libraries):
            table[library] = homes
    return table


def test_each_library_is_imported_only_where_the_architecture_says():
    table = library_table()
    assert {"mem0", "qdrant_client", "psycopg", "boto3", "psutil", "argparse"} <= set(table)
    imports = {path: imported(source) for path, source in modules().items()}
    strays = [
        f"{path} imports {library} (docs/architecture.md: only in {', '.join(homes)})"
        for path, names in imports.items()
        for library, homes in table.items()
        if library in names and not any(path.startswith(home) for home in homes)
    ]
    assert strays == []
    for library, homes in table.items():  # and each home named does import it
        for home in homes:
            assert any(p.startswith(home) and library in n for p, n in imports.items()), home


def test_the_list_of_modules_branching_on_the_backend_is_exact():
    paragraph = DOC[DOC.index("For the vector store that is not yet true") :].split("\n\n")[0]
    listed = set(re.findall(r"`([a-z_]+/[a-z_]+\.py)`", paragraph))
    branching = re.compile(r"config\.pgvector|stores\.pgvector|stores import [^\n]*\bpgvector\b")
    found = {
        path
        for path, source in modules().items()
        if not path.startswith(("stores/pgvector/", "config/")) and branching.search(source)
    }
    assert listed == found


def documents_built_in_cli() -> list[str]:
    """Dict literals in memsync/cli/ that build a command's JSON document: those with a
    ``"command"`` key, and the error document (``"type"``), as ``path:line``."""
    found = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value in ("command", "type")
                for key in node.keys
            ):
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}")
    return found


def test_the_command_line_renders_typed_results_and_assembles_no_json_document():
    assert "the CLI renders, never assembles" in DOC
    assert documents_built_in_cli() == []
