"""``memsync check``: prove that the stores agree, finding by finding (reads only)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime

from memsync import check, findings
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.deployment import Deployment
from memsync.errors import UnavailableError
from memsync.model import Finding

HELP = "prove that vectors and history agree (reads only; exit 3 on error findings)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``check`` subcommand."""
    parser = add_command(subparsers, "check", HELP, common, epilog)
    parser.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="findings shown in the text report (default 50; --json shows all)",
    )
    parser.add_argument(
        "--app",
        action="store_true",
        help="also ask the app's interpreter whether its qdrant-client loads every stored point "
        "(one run of it, as doctor's store-decode; app-undecodable names each row it cannot)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Capture both stores, judge them, print the report; return 0 or 3."""
    deployment = open_deployment(args)
    with render.progress("reading points") as progress:
        report = check.run_check(deployment, datetime.now(UTC), progress=progress)
    if args.app:
        found = app_undecodable(deployment)
        report = replace(report, findings=(*found, *report.findings))
    if args.json:
        render.emit_json(report.to_json(deployment.vector_store.kind))
    else:
        render.emit_text(render.check_text(report, limit=max(args.limit, 0)))
    return int(report.exit_code)


def app_undecodable(deployment: Deployment) -> list[Finding]:
    """``app-undecodable``: each stored point the app's qdrant-client cannot load.

    One run of the app's interpreter (``app_process.app_doctor``, as doctor's). [] for a server
    store (pgvector: no pickled rows).

    Raises:
        ConfigError: (exit 10) the app's interpreter is unknown, or does not start there.
        UnavailableError: (exit 11) it cannot read the store.
    """
    from memsync.stores import app_process, interpreter  # only for --app: the agent's modules

    store, config = deployment.vector_store, deployment.config
    if not store.local_dirs():  # nothing on this machine the app's client loads rows from
        return []
    holder = store.holder()
    app = interpreter.require(
        deployment.vector_store, config, holder.pid if holder is not None else None
    )
    decoded = app_process.app_doctor(deployment.vector_store, config, app).get("decode") or {}
    found = []
    for name, collection in sorted(decoded.items()):
        if collection.get("error"):
            raise UnavailableError(
                f"the app's interpreter {app.python} could not read collection {name} of "
                f"{store.where}: {collection['error']}",
                "run memsync check again; memsync doctor reads the same",
            )
        for row in collection["named"]:
            found.append(
                findings.make(
                    "app-undecodable",
                    f"the app's qdrant-client {app.qdrant_client} cannot load point {row['id']} "
                    f"(rowid {row['rowid']}) of {store.where}: {row['error']}; one such row "
                    "stops its open of the store, so the app does not start",
                    collection=name,
                    memory_id=str(row["id"]),
                )
            )
        more = collection["undecodable"] - len(collection["named"])
        if more > 0:
            found.append(
                findings.make(
                    "app-undecodable",
                    f"and {more} more rows of collection {name} the app's qdrant-client cannot "
                    f"load ({collection['undecodable']} of {collection['rows']})",
                    collection=name,
                    observed=collection["undecodable"],
                )
            )
    return found
