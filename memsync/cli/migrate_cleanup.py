"""``memsync migrate --cleanup``: the CLI half (confirmation, text and JSON report)."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime

from memsync.cli import render
from memsync.cli.common import confirm, open_deployment
from memsync.migrate.cleanup import Cleaned, run_cleanup
from memsync.stores.vector_store import VectorStore


def run(args: argparse.Namespace) -> int:
    """Remove the old store of a switched migration; exit 0, 10 (refused), 11, 12."""
    deployment = open_deployment(args)

    def ask(store: VectorStore, size_bytes: int) -> None:
        confirm(
            args,
            f"remove the old store {store.where} ({size_bytes} bytes) for good",
            "what would be removed",
        )

    done = run_cleanup(deployment, os.environ, datetime.now(UTC), dry_run=args.dry_run, confirm=ask)
    return render.emit(args.json, done.document(), _text(done))


def _text(done: Cleaned) -> str:
    if done.already:
        return f"migrate --cleanup: nothing to do: the old store was removed at {done.cleaned_at}"
    what = f"the old store {done.where} ({done.kind}, {done.size_bytes} bytes)"
    if done.dry_run:
        return f"would remove {what}\nmigrate --cleanup --dry-run: nothing changed"
    kept = (
        f"\nthe app's old mem0 config is kept as {done.backup_kept} (out of the way of a later "
        "switch's .bak)"
        if done.backup_kept
        else ""
    )
    return (
        f"removed {what}{kept}\n"
        f"migrate --cleanup: the migration is cleaned (switched at {done.switched_at}); "
        "history.db is kept: the app's new store uses it"
    )
