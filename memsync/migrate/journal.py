"""The migration's journal: ``<state_dir>/migrate.json``, written atomically after each batch.

It names the new config (``to``, resolved), the source and target stores, the phase and
the batches written, so a killed migration re-run with the same ``--to`` resumes (the ids the
target holds are skipped) and a run with another ``--to`` is refused while it is there. The
journal is kept after the copy: the switch and the cleanup read it.

Phases: ``copy`` (copying), ``verified`` or ``differs`` (copied, then compared), ``switched``
(the app runs on the target: ``switched_at``, the old store described by
``<state_dir>/migrate-source.json``, see ``migrate.source_record``), ``cleaned`` (the old
store was removed by ``migrate --cleanup``: ``cleaned_at``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsync.errors import ConfigError, UnavailableError
from memsync.state import write_json_atomic

JOURNAL = "migrate.json"


def path_of(state_dir: Path) -> Path:
    """The journal's path in ``state_dir``. Pure."""
    return state_dir / JOURNAL


def load(state_dir: Path) -> dict[str, Any] | None:
    """The journal, or None when there is none. Reads only.

    Raises:
        UnavailableError: (exit 11) the file is there but unreadable, not a JSON object, or a
            field is missing or of the wrong type (the hint: move it aside); nothing is written.
    """
    path = path_of(state_dir)
    hint = "move it aside to start the migration afresh (the target is left as it is)"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise UnavailableError(f"migration journal {path} is unreadable: {error}", hint) from error
    problem = _problem(document)
    if problem is not None:
        raise UnavailableError(f"migration journal {path} is damaged: {problem}", hint)
    return dict(document)


# The journal's fields and their types; ``points_copied`` is written after the first batch.
FIELDS: dict[str, tuple[type, ...]] = {
    "to": (str,),
    "source": (str,),
    "target": (str,),
    "started_at": (str,),
    "batches_done": (int,),
}
PHASES = ("copy", "verified", "differs", "switched", "cleaned")
OPTIONAL: dict[str, tuple[type, ...]] = {
    "points_copied": (int,),
    "phase": (str,),
    "captured_at": (str,),
    "history_rowid": (int,),
    "switched_at": (str,),  # ISO 8601 UTC, when the app was started on the target
    "source_snapshot": (str,),  # the snapshot id of the source taken before the switch
    "app_config": (str,),  # the app's mem0 config file the switch wrote
    "app_config_backup": (str,),  # its old content, kept beside it (``.bak``)
    "cleaned_at": (str,),  # ISO 8601 UTC, when --cleanup removed the old store
}


def _problem(document: Any) -> str | None:
    """What is wrong with a parsed journal (None when its fields have their types). Pure."""
    if not isinstance(document, dict):
        return "not a JSON object"
    for key, types in [*FIELDS.items(), *OPTIONAL.items()]:
        if key not in document:
            if key in FIELDS:
                return f"{key} is missing"
            continue
        value = document[key]
        if isinstance(value, bool) or not isinstance(value, types):
            return (
                f"{key} is {json.dumps(value)}, not {'an integer' if int in types else 'a string'}"
            )
        if isinstance(value, int) and value < 0:
            return f"{key} is {value}, not a count"
    if document.get("phase", "copy") not in PHASES:
        return f"phase is {json.dumps(document['phase'])}, not one of {', '.join(PHASES)}"
    return None


def save(state_dir: Path, document: dict[str, Any]) -> None:
    """Write the journal atomically (``state.write_json_atomic``); creates ``state_dir``."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(path_of(state_dir), document)


def set_aside_cleaned(state_dir: Path, document: dict[str, Any]) -> Path | None:
    """Rename a ``cleaned`` journal to ``migrate-<cleaned_at>.json``; return its new path.

    A finished migration no longer blocks a new one (``require_same_target``): the next
    ``memsync migrate`` starts afresh, the old record kept beside it. Returns None (and
    renames nothing) for a journal in any other phase. Idempotent.
    """
    if document.get("phase") != "cleaned":
        return None
    stamp = str(document.get("cleaned_at") or document.get("started_at"))
    archived = state_dir / f"migrate-{stamp}.json"
    path_of(state_dir).replace(archived)
    return archived


def require_same_target(
    journal: dict[str, Any], to: str, target: str, source: str, state_dir: Path
) -> None:
    """Return when the journal is this migration's (same ``--to``, same target); else refuse.

    Raises:
        ConfigError: (exit 10) a journal of a migration to another config, or to another
            target (``NEW.toml`` edited since), is there; the message names it and its target.
    """
    if journal.get("to") == to and journal.get("target") == target:
        return
    recorded = f"a migration to {journal.get('to')} (target {journal.get('target')})"
    if journal.get("phase") == "cleaned":
        raise ConfigError(
            source,
            [f"{recorded} is finished (cleaned at {journal.get('cleaned_at')}); none to {to}"],
            f"run memsync migrate --to {to} first: it starts afresh, copies and verifies",
        )
    if journal.get("phase") == "switched":
        raise ConfigError(
            source,
            [
                f"{recorded} was switched to at {journal.get('switched_at')}; its old store is "
                f"kept until memsync migrate --cleanup removes it (this one goes to {to})"
            ],
            "run memsync migrate --cleanup once [migrate] keep_source_days have passed since "
            "the switch (or lower the key), then this migration",
        )
    raise ConfigError(
        source,
        [
            f"{recorded} is recorded in {path_of(state_dir)}; this one goes to {to} (target {target})"
        ],
        "run memsync migrate --to with that config to finish it, or move the journal aside "
        "(its target is left as it is) to start another",
    )
