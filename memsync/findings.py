"""The one registry of finding codes: severity, documentation anchor, fix, emitter and repair.

Every finding memsync reports (``check``, ``snapshot verify``, ``snapshot create``'s tripwire,
``forget``, ``doctor``) has one entry here, and everything else reads it: ``check``, ``snapshot
verify`` and the tripwire build findings through ``make``, the reconcile planner answers exactly
the codes whose ``repair`` is not ``NONE`` (one rule per code, in ``memsync.reconcile.plan``),
the renderers take the fix and anchor from here, and
``tests/unit/test_findings_registry.py`` proves docs/reference/findings.md agrees with it.
Adding a code means one entry here, one section in findings.md, and (when reconcile repairs it)
one planner rule. Codes are never renamed. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from memsync.model import Finding, Severity

DOCS_PAGE = "docs/reference/findings.md"


class Source(enum.Enum):
    """Which command emits a code."""

    CHECK = "check"
    VERIFY = "snapshot verify"
    CREATE = "snapshot create"
    FORGET = "forget"
    DOCTOR = "doctor"


class Repair(enum.Enum):
    """How ``reconcile`` answers a code.

    ``DAMAGE`` codes are answered by a plain ``reconcile``; ``POLICY`` codes only when named with
    ``--only`` (deleting them is a choice, not a repair); ``NONE`` codes have no planner rule.
    """

    DAMAGE = "damage"
    POLICY = "policy"
    NONE = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """One finding code's registry entry.

    Attributes:
        code: the stable kebab-case code (``check --json`` → ``findings[].code``).
        severity: the severity every finding of this code has.
        source: the command that emits it.
        fix: the default fix text (a finding may carry a more precise one).
        repair: how reconcile answers it.
    """

    code: str
    severity: Severity
    source: Source
    fix: str
    repair: Repair = Repair.NONE

    @property
    def anchor(self) -> str:
        """Where the code is explained: ``docs/reference/findings.md#<code>``."""
        return f"{DOCS_PAGE}#{self.code}"


FIX_RECONCILE = "memsync reconcile"
FIX_OTHER_SNAPSHOT = "use another snapshot"

_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO
_SPECS = (
    # check: the stores disagree (docs/reference/findings.md's first table).
    Spec(code="collection-missing", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE,
         fix="check the path first ([mem0] Qdrant path; pgvector dbname, search_path, collection_name: memsync config show); if it is right: memsync restore <snapshot>"),
    Spec(code="history-missing", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE,
         fix="check the path first (mem0_dir, [mem0] history_db_path: memsync config show); if it is "
             "right: memsync restore <snapshot>, or memsync reconcile --create-history"),
    Spec(code="dimension-mismatch", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE,
         fix="set the config to the collection's size, or re-embed into a new collection of the right size"),
    Spec(code="missing-point", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="resurrected-point", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="orphan-point", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="text-mismatch", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="hash-mismatch", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="missing-payload", severity=_E, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="dangling-entity-link", severity=_W, source=Source.CHECK, repair=Repair.DAMAGE, fix=FIX_RECONCILE),
    Spec(code="expired-memory", severity=_W, source=Source.CHECK, repair=Repair.POLICY, fix="memsync prune"),
    Spec(code="duplicate-memory", severity=_W, source=Source.CHECK, repair=Repair.POLICY,
         fix="memsync reconcile --only duplicate-memory (or memsync forget <memory_id>)"),
    Spec(code="orphan-messages", severity=_W, source=Source.CHECK, repair=Repair.POLICY,
         fix="if its memories were deleted by mistake (a bulk delete_all), memsync recover "
             "--user/--agent/--run ID --dry-run first; else memsync reconcile --only orphan-messages"),
    Spec(code="in-flight", severity=_I, source=Source.CHECK, fix="none needed; run check again"),
    Spec(code="private-tmp-mismatch", severity=_E, source=Source.CHECK,
         fix="move the store out of /tmp (docs/how-to/move-store-off-tmp.md), or set PrivateTmp=no "
             "on the app's unit; then run check again"),
    Spec(code="app-undecodable", severity=_E, source=Source.CHECK,
         fix="run the app with the qdrant-client and pydantic that wrote them, or restore a snapshot "
             "from before they were written (memsync snapshot list)"),
    Spec(code="legacy-point-store", severity=_E, source=Source.CHECK,
         fix="stop the app, copy the Qdrant directory aside, move the empty storage.sqlite away (if there is one) and open the "
             "store once with an older qdrant-client that migrates dbm files to sqlite; reconcile nothing before"),
    # snapshot verify: the snapshot itself is damaged (docs/reference/commands/snapshot.md).
    Spec(code="manifest-missing", severity=_E, source=Source.VERIFY, fix=FIX_OTHER_SNAPSHOT),
    Spec(code="file-missing", severity=_E, source=Source.VERIFY, fix=FIX_OTHER_SNAPSHOT),
    Spec(code="checksum-mismatch", severity=_E, source=Source.VERIFY,
         fix="the file was changed or truncated after the snapshot: use another snapshot"),
    Spec(code="integrity-failed", severity=_E, source=Source.VERIFY, fix=FIX_OTHER_SNAPSHOT),
    Spec(code="point-undecodable", severity=_E, source=Source.VERIFY, fix=FIX_OTHER_SNAPSHOT),
    Spec(code="signature-invalid", severity=_E, source=Source.VERIFY,
         fix="use another snapshot, or the signing key it was made with"),
    Spec(code="restore-unclean", severity=_E, source=Source.VERIFY,
         fix="use another snapshot (or restore it and run memsync reconcile for what it can repair)"),
    # snapshot create: the tripwire (memsync.snapshot.tripwire) saw far fewer memories than before.
    Spec(code="mass-deletion", severity=_W, source=Source.CREATE,
         fix="if the deletion was a mistake: memsync recover --user <id> --from <the pinned snapshot "
             "before the drop>; then (or if it was wanted) memsync snapshot unpin <that snapshot>"),
    Spec(code="vanished-memories", severity=_E, source=Source.CREATE,
         fix="memsync reconcile puts the points back from the newest snapshot holding them (the "
             "pinned one); when history lost them too: memsync restore <the pinned snapshot>"),
    # doctor: the deployment's set-up puts the app's writes at risk.
    Spec(code="wal-recommended", severity=_W, source=Source.DOCTOR,
         fix="memsync tune --wal (with the app stopped, or through its memsync agent)"),
    Spec(code="replica-generation-changed", severity=_E, source=Source.DOCTOR,
         fix="find the other Litestream writing to this replica (another host or unit with the same "
             "[protect] directory or prefix) and stop it, or give each deployment its own replica; "
             "then memsync protect --status"),
    # forget: a target id names nothing.
    Spec(code="memory-not-found", severity=_E, source=Source.FORGET,
         fix="check the id (memsync export-context --user ID --json lists a user's memory ids)"),
)  # fmt: skip


def changed_embedder_fix(key: str, stored_size: int) -> str:
    """The fix of a collection whose points are of ``stored_size`` while ``key`` says otherwise.

    Points stored under the old size mean the embedder (or its size) changed after they were
    written: ``memsync migrate`` re-embeds them into a new collection. Pure.
    """
    return (
        f"if the embedder changed: put the old embedder and {key} = {stored_size} back in this "
        "config (it describes the store as it is), write the new one into NEW.toml with a new "
        "collection_name (or Qdrant path), run memsync migrate --to NEW.toml --dry-run, then "
        f"without --dry-run; if it did not change: set {key} back to {stored_size}"
    )


REGISTRY: Mapping[str, Spec] = MappingProxyType({spec.code: spec for spec in _SPECS})


def codes(source: Source) -> tuple[str, ...]:
    """Return the codes ``source`` emits, in registry order."""
    return tuple(spec.code for spec in _SPECS if spec.source is source)


def repaired(repair: Repair) -> frozenset[str]:
    """Return the codes reconcile answers as ``repair`` (``DAMAGE`` or ``POLICY``)."""
    return frozenset(spec.code for spec in _SPECS if spec.repair is repair)


def spec(code: str) -> Spec:
    """Return the registry entry of ``code``.

    Raises:
        KeyError: ``code`` is not a registered finding code (a bug: register it first).
    """
    return REGISTRY[code]


def make(
    code: str,
    message: str,
    *,
    collection: str | None = None,
    memory_id: str | None = None,
    path: str | None = None,
    fix: str | None = None,
    scope: str | None = None,
    expected: str | int | None = None,
    observed: str | int | None = None,
) -> Finding:
    """Build a finding of a registered code: its severity, and its fix unless one is given.

    Raises:
        KeyError: ``code`` is not registered.
    """
    entry = REGISTRY[code]
    return Finding(
        code=code,
        severity=entry.severity,
        message=message,
        collection=collection,
        memory_id=memory_id,
        path=path,
        fix=fix if fix is not None else entry.fix,
        scope=scope,
        expected=expected,
        observed=observed,
    )
