"""Doctor's probe of mem0ai and qdrant-client versions, here and in the app's interpreter.

Known-bad mem0ai releases come from the one table, ``memsync.stores.versions.MEM0_KNOWN_BAD``.
"""

from __future__ import annotations

import json
import subprocess

from packaging.version import InvalidVersion

from memsync.config import Config
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.model import DoctorResult
from memsync.stores import versions


def judge_mem0_version(version: str, on_disk: bool) -> list[tuple[str, str, str]]:
    """Return ``(status, problem, fix)`` for each known-bad range ``version`` falls in. Pure."""
    try:
        rows = versions.known_bad_mem0(version)
    except InvalidVersion:
        return [(WARNING, f"unparseable mem0ai version {version!r}", "check the install")]
    return [
        (row.status, row.problem, row.fix)
        for row in rows
        if not (row.harmless_with_on_disk and on_disk)
    ]


def probe_versions(config: Config) -> list[DoctorResult]:
    """mem0ai and qdrant-client versions here (and in the app's interpreter) vs known-bad ones."""
    ours = versions.tracked_versions()
    results = []
    vector_store = config.mem0.get("vector_store") or {}
    store_config = (vector_store.get("config") if isinstance(vector_store, dict) else None) or {}
    on_disk = isinstance(store_config, dict) and store_config.get("on_disk") is True
    app_versions = _app_versions(config)  # one run of the app's interpreter
    for where, found in [("memsync's environment", ours), *app_versions]:
        mem0_version = found.get("mem0ai")
        if mem0_version is None:
            results.append(
                DoctorResult(
                    code="mem0-version",
                    status=WARNING,
                    message=f"mem0ai is not installed in {where}",
                    fix="install mem0ai (memsync's writing commands need it)",
                )
            )
        else:
            problems = judge_mem0_version(mem0_version, on_disk)
            worst = ERROR if any(p[0] == ERROR for p in problems) else WARNING if problems else OK
            text = "; ".join(p[1] for p in problems)
            results.append(
                DoctorResult(
                    code="mem0-version",
                    status=worst,
                    message=f"mem0ai {mem0_version} in {where}" + (f": {text}" if text else ""),
                    fix="; ".join(p[2] for p in problems) or None,
                )
            )
        results.append(
            DoctorResult(
                code="qdrant-client-version",
                status=OK if found.get("qdrant-client") else WARNING,
                message=f"qdrant-client {found.get('qdrant-client') or 'not installed'} in {where}",
            )
        )
    app = dict(app_versions)
    if app:
        theirs = next(iter(app.values()))
        mismatched = [name for name in ours if theirs.get(name) != ours[name]]
        if mismatched:
            results.append(
                DoctorResult(
                    code="version-mismatch",
                    status=WARNING,
                    message="the app and memsync use different "
                    + ", ".join(
                        f"{n} ({theirs.get(n) or 'not installed'} vs {ours[n] or 'not installed'})"
                        for n in mismatched
                    ),
                    fix="install the app's versions in memsync's environment, so repairs "
                    "write what the app expects",
                )
            )
    return results


_APP_VERSION_SCRIPT = (
    "import importlib.metadata as m, json\n"
    "def v(n):\n"
    "    try: return m.version(n)\n"
    "    except m.PackageNotFoundError: return None\n"
    "print(json.dumps({n: v(n) for n in ('mem0ai', 'qdrant-client')}))\n"
)


def _app_versions(config: Config) -> list[tuple[str, dict[str, str | None]]]:
    if config.app_python is None:
        return []
    try:
        completed = subprocess.run(  # noqa: S603 - the configured interpreter, fixed script
            [str(config.app_python), "-I", "-c", _APP_VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        reported = json.loads(completed.stdout)
        if not isinstance(reported, dict):
            raise ValueError("not an object")
        return [
            (
                f"the app's interpreter {config.app_python}",
                {k: v for k, v in reported.items() if isinstance(v, str)},
            )
        ]
    except (OSError, subprocess.SubprocessError, ValueError):
        return [(f"the app's interpreter {config.app_python} (unreadable)", {})]
