"""Doctor's probe of mem0ai and qdrant-client versions, here and in the app's interpreter.

``app-interpreter`` says which interpreter memsync's writes run with (``stores.interpreter``).

Known-bad mem0ai releases come from the one table, ``memsync.stores.versions.MEM0_KNOWN_BAD``.
"""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion

from memsync.agent import support
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import MemsyncError
from memsync.model import DoctorResult
from memsync.stores import app_process, interpreter, versions
from memsync.stores.interpreter import AppInterpreter


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


def probe_versions(deployment: Deployment) -> list[DoctorResult]:
    """The app's mem0ai and qdrant-client (its interpreter's) vs known-bad ones; its meta.json.

    memsync's own environment is not judged: its writes never use its mem0ai
    (docs/reference/compatibility.md).
    """
    config = deployment.config
    results = []
    vector_store = config.mem0.get("vector_store") or {}
    store_config = (vector_store.get("config") if isinstance(vector_store, dict) else None) or {}
    on_disk = isinstance(store_config, dict) and store_config.get("on_disk") is True
    holder = deployment.vector_store.holder()
    app_found = interpreter.known(
        deployment.vector_store, config, holder.pid if holder is not None else None
    )
    app_versions = (
        []
        if app_found is None
        else [
            (
                f"the app's interpreter {app_found.python}",
                {"mem0ai": app_found.mem0ai, "qdrant-client": app_found.qdrant_client},
            )
        ]
    )
    for where, found in app_versions:
        mem0_version = found.get("mem0ai")
        if mem0_version is None:
            results.append(
                DoctorResult(
                    code="mem0-version",
                    status=WARNING,
                    message=f"mem0ai is not installed in {where}",
                    fix="set [app] python to the interpreter the app runs with",
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
    checked: dict[str, Any] | MemsyncError | None = None
    if app_found is not None and app_found.mem0ai is not None and app_found.python_version:
        try:  # one run of the app's interpreter: its plugins, and its view of meta.json
            checked = app_process.app_doctor(deployment.vector_store, config, app_found)
        except MemsyncError as error:
            checked = error
    results.append(probe_app_interpreter(config, app_found, checked))
    if isinstance(checked, dict) and checked.get("meta") is not None and app_found is not None:
        results.append(store_meta_result(app_found, checked["meta"]))
    if isinstance(checked, dict) and checked.get("decode") is not None and app_found is not None:
        where = deployment.vector_store.where
        results.append(store_decode_result(app_found, where, checked["decode"]))
    return results


def store_decode_result(app: AppInterpreter, where: str, found: dict[str, Any]) -> DoctorResult:
    """``store-decode``: whether the app's qdrant-client loads every stored point. Pure.

    ``found``: ``agent.meta.undecodable``'s answer, from the app's interpreter. One row it
    cannot load stops its whole open of the store: the app does not start, and no write
    through mem0 can run.
    """
    bad = {name: c for name, c in found.items() if c.get("error") or c.get("undecodable")}
    rows = sum(c.get("rows", 0) for c in found.values())
    client = f"the app's qdrant-client {app.qdrant_client}"
    if not bad:
        return DoctorResult(
            code="store-decode",
            status=OK,
            path=where,
            message=f"{client} loads every point ({rows} rows in {len(found)} collections)",
        )
    parts = []
    for name, c in sorted(bad.items()):
        if c.get("error"):
            parts.append(f"collection {name}: not read ({c['error']})")
            continue
        ids = ", ".join(f"{row['id']} (rowid {row['rowid']})" for row in c["named"])
        more = c["undecodable"] - len(c["named"])
        parts.append(
            f"collection {name}: {c['undecodable']} of {c['rows']} rows: {ids}"
            + (f" and {more} more" if more > 0 else "")
            + f" ({c['named'][0]['error']})"
        )
    return DoctorResult(
        code="store-decode",
        status=ERROR,
        path=where,
        message=f"{client} cannot load these stored points of {where}: {'; '.join(parts)}: "
        "written by another qdrant-client or pydantic, they stop its open of the store, so the "
        "app does not start and memsync cannot write through mem0",
        fix="run the app with the qdrant-client and pydantic that wrote them, or restore a "
        "snapshot from before they were written (memsync snapshot list)",
    )


def probe_app_interpreter(
    config: Config, found: AppInterpreter | None, checked: Any = None
) -> DoctorResult:
    """Which interpreter memsync's writes would use, and whether they may (see compatibility.md).

    ok: known, with a mem0ai memsync writes through; warning: unknown (writes are refused);
    error: it does not run, has no mem0ai, or runs a mem0ai memsync will not write through.
    """
    if found is None:
        return DoctorResult(
            code="app-interpreter",
            status=WARNING,
            message="the app's interpreter is unknown: memsync will refuse every write "
            "(forget, prune, reconcile, recover, migrate) rather than use its own mem0ai",
            fix=interpreter.UNKNOWN_HINT,
        )
    problem = None
    if found.python_version is None:
        problem = "does not run"
    elif found.mem0ai is None:
        problem = "has no mem0ai installed"
    else:
        problem = support.refusal(found.mem0ai, dict(config.mem0))
    if problem is None and isinstance(checked, MemsyncError):
        return DoctorResult(
            code="app-interpreter", status=ERROR, message=checked.message, fix=checked.hint
        )
    if problem is not None:
        return DoctorResult(
            code="app-interpreter",
            status=ERROR,
            message=f"writes would run with {found.describe()}, which {problem}"
            if not problem.startswith("mem0ai")
            else f"writes would run with {found.describe()}: {problem}",
            fix="set [app] python to the interpreter the app runs with; "
            "docs/reference/compatibility.md lists the mem0ai versions memsync writes through",
        )
    return DoctorResult(
        code="app-interpreter",
        status=OK,
        message=f"writes run with the app's interpreter {found.describe()}",
    )


def store_meta_result(app: AppInterpreter, found: dict[str, Any]) -> DoctorResult:
    """``store-meta``: whether the app's qdrant-client loads the store's ``meta.json``. Pure.

    ``found``: ``agent.meta.inspect``'s answer, from the app's interpreter.
    """
    if found["loads"]:
        return DoctorResult(
            code="store-meta",
            status=OK,
            message=f"the app's qdrant-client {app.qdrant_client} loads {found['path']}",
        )
    refused = "; ".join(
        f"collection {name}: {', '.join(c['refused'] + c['problems'])}"
        for name, c in found["collections"].items()
    )
    repairable = all(c["repairable"] for c in found["collections"].values())
    keys = [key for c in found["collections"].values() for key in c["refused"]]
    # id_tracker: written by qdrant-client 1.20.0, refused by 1.19.1 (measured)
    writer = (
        "qdrant-client 1.20 or later"
        if any(key.endswith("id_tracker") for key in keys)
        else f"a qdrant-client newer than {app.qdrant_client}"
    )
    return DoctorResult(
        code="store-meta",
        status=ERROR,
        message=f"the app's qdrant-client {app.qdrant_client} cannot load {found['path']} "
        f"(keys it does not know: {refused}): the app will not start on this store; "
        f"written by {writer} (memsync 0.1's own writes, or another tool)",
        fix="stop the app, then memsync repair-meta (a snapshot first; the old file kept)"
        if repairable
        else "restore a snapshot from before, or run the app with the qdrant-client that wrote it",
        path=found["path"],
    )
