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


# Backend branching: the config's attribute of one backend, isinstance on a backend's class or
# settings, a kind/mode/provider compared with a backend's name, an import of a backend package.
BACKEND_NAMES = r"""['"](?:pgvector|embedded-qdrant|embedded|qdrant)['"]"""
BRANCHING = re.compile(
    rf"""config\.pgvector\b|\.qdrant_path\b
    |isinstance\([^)]*\b(?:PgVector|EmbeddedQdrant|PGVectorSettings|QdrantSettings)\b
    |(?:kind|mode|provider)\s*[!=]=\s*{BACKEND_NAMES}|{BACKEND_NAMES}\s*[!=]=\s*\S*\b(?:kind|mode|provider)\b
    |^\s*(?:from|import)\s+memsync\.stores\.(?:pgvector|qdrant_embedded)\b
    |^\s*from\s+memsync\.stores\s+import\s[^\n]*\b(?:pgvector|qdrant_embedded)\b""",
    re.VERBOSE | re.MULTILINE,
)
# Where branching on the backend belongs: each backend's package, the registry, the config's
# union; and the in-app agent, which runs in the app's interpreter on the standard library
# alone and reads mem0's own dict (mem0 wipes an embedded Qdrant without on_disk).
BACKEND_HOMES = (
    "stores/pgvector/",
    "stores/qdrant_embedded/",
    "stores/backends.py",
    "config/",
    "agent/",
)


def backend_branching(sources: dict[str, str]) -> list[str]:
    """``path:line: text`` of every backend branching outside its homes."""
    return [
        f"{path}:{source.count(chr(10), 0, hit.start()) + 1}: {hit.group(0).strip()}"
        for path, source in sources.items()
        if not path.startswith(BACKEND_HOMES)
        for hit in BRANCHING.finditer(source)
    ]


def test_nothing_outside_the_backends_their_registry_and_the_config_branches_on_the_backend():
    assert backend_branching(modules()) == []


def test_the_backend_grep_sees_each_kind_of_branching():
    planted = {
        "doctor/a.py": "if config.pgvector is not None:\n",
        "erase/b.py": "if isinstance(store, PgVector):\n",
        "snapshot/c.py": 'x = "pgvector" if manifest.mode == "pgvector" else "embedded"\n',
        "problems.py": 'if around.store_kind == "pgvector":\n',
        "restore/d.py": "from memsync.stores.pgvector import PgVector, load\n",
        "doctor/e.py": "from memsync.stores import qdrant_embedded\n",
        "stores/backends.py": "from memsync.stores.pgvector import PgVector\n",  # allowed
    }
    assert [hit.split(":")[0] for hit in backend_branching(planted)] == [
        "doctor/a.py", "erase/b.py", "snapshot/c.py", "problems.py", "restore/d.py", "doctor/e.py",
    ]  # fmt: skip


def test_the_port_imports_no_backend_and_only_the_registry_builds_one():
    port = (PACKAGE / "stores" / "vector_store.py").read_text(encoding="utf-8")
    assert not {"pgvector", "qdrant_embedded"} & {
        name.split(".")[-1] for name in imported_modules(port)
    }
    builders = re.compile(r"\b(?:PgVector|EmbeddedQdrant)\(")
    built = {p for p, source in modules().items() if builders.search(source)}
    assert built <= {
        "stores/pgvector/__init__.py",
        "stores/qdrant_embedded/store.py",
        "stores/pgvector/staging.py",
    }


def imported_modules(source: str) -> set[str]:
    """The full dotted names of every module a source imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


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
