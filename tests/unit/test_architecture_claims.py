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


def calls(source: str, name: str) -> int:
    """How many times a source calls ``name`` (a plain or an attribute call)."""
    return sum(
        1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
    )


def test_the_vector_store_is_built_only_where_the_architecture_says():
    paragraph = DOC[DOC.index("Every command works on one **deployment**") :].split("\n\n")[0]
    listed = set(re.findall(r"`([a-z_]+(?:/[a-z_]+)?\.py)`", paragraph.split("keeps this list")[1]))
    building = {
        path
        for path, source in modules().items()
        if calls(source, "vector_store_for") and path != "stores/vector_store.py"
    }
    assert building == listed
    assert calls(modules()["deployment.py"], "vector_store_for") == 1  # Deployment.open


def module_imports(name: str) -> set[str]:
    """The modules ``name`` imports when it is imported: module level, outside TYPE_CHECKING."""
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    if not path.is_file():
        path = PACKAGE.parent / name.replace(".", "/") / "__init__.py"
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            for alias in node.names:  # ``from memsync.stores import capture``: a module
                candidate = f"{node.module}.{alias.name}"
                base = PACKAGE.parent / candidate.replace(".", "/")
                if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
                    found.add(candidate)
    return found


def test_opening_a_deployment_imports_neither_boto3_nor_psycopg():
    """``check`` on an embedded store imports no S3 or Postgres library for its Deployment."""
    seen: set[str] = set()
    todo = ["memsync.deployment"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for parent in [name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)]:
            todo.append(parent)  # importing a.b.c imports a.b's __init__ first
        todo += [m for m in module_imports(name) if m.startswith("memsync")]
        seen |= {m for m in module_imports(name) if not m.startswith("memsync")}
    libraries = {name.split(".")[0] for name in seen}
    assert not libraries & {"boto3", "botocore", "psycopg"}
    assert "memsync.repository" not in seen and "memsync.stores.pgvector" not in seen
