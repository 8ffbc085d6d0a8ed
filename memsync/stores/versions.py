"""The known-bad mem0ai releases, one table read by doctor (report) and forget (refuse)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownBad:
    """A range of mem0ai releases with a known defect (from mem0's public issue tracker; listed in docs/reference/commands/doctor.md).

    Attributes:
        first: the first bad release (inclusive).
        last: the last bad release (inclusive).
        problem: what goes wrong.
        status: how ``doctor`` reports it: ``"error"`` or ``"warning"``.
        fix: what to do.
        refuses_bulk_delete: ``forget``/``prune`` refuse bulk deletes through these releases.
        harmless_with_on_disk: ``vector_store.config.on_disk = true`` avoids the defect.
    """

    first: str
    last: str
    problem: str
    status: str
    fix: str
    refuses_bulk_delete: bool = False
    harmless_with_on_disk: bool = False


# The one table of known-bad mem0ai releases, read by doctor (report) and forget (refuse).
MEM0_KNOWN_BAD: tuple[KnownBad, ...] = (
    KnownBad(
        first="0.0.7",
        last="1.0.7",
        status="error",
        harmless_with_on_disk=True,
        problem="deletes the embedded Qdrant directory at every start unless on_disk=True",
        fix="upgrade mem0ai (>= 1.0.8) or set vector_store.config.on_disk = true",
    ),
    KnownBad(
        first="0.1.99",
        last="0.1.106",
        status="error",
        problem="history migration can hang at start-up on an unexpected column set",
        fix="upgrade mem0ai",
    ),
    KnownBad(
        first="0.1.118",
        last="1.0.5",
        status="error",
        refuses_bulk_delete=True,
        problem="delete_all(user_id=...) also wipes every other user's points",
        fix="upgrade mem0ai (>= 1.0.6); memsync refuses bulk deletes through it",
    ),
    KnownBad(
        first="0.0.0",
        last="1.0.7",
        status="warning",
        problem="writes DELETE rows with NULL timestamps (memsync orders history by rowid)",
        fix="upgrade mem0ai",
    ),
    KnownBad(
        first="0.0.0",
        last="2.0.14",
        status="warning",
        problem="delete_all removes only the first 100 memories",
        fix="upgrade mem0ai (>= 2.0.15); memsync re-reads after every bulk delete",
    ),
)


def known_bad_mem0(version: str) -> list[KnownBad]:
    """The rows of ``MEM0_KNOWN_BAD`` whose range holds mem0ai ``version``, in table order. Pure.

    Raises:
        packaging.version.InvalidVersion: ``version`` is not a PEP 440 version (a ValueError).
    """
    parsed = Version(version)
    return [row for row in MEM0_KNOWN_BAD if Version(row.first) <= parsed <= Version(row.last)]
