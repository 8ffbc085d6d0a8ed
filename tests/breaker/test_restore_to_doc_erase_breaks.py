"""Breaker: restore.md still says ``forget --erase`` does not know about a ``restore --to`` copy.

Since 621a055 ``forget --erase`` lists every copy ``restore --to DIR`` made that still holds the
text (``state_dir/restored-to.json``, kind ``restore-to-copy``, with ``rm -r DIR``; the
CHANGELOG says so), but the ``--to DIR`` section of docs/reference/commands/restore.md tells the
operator the opposite, so one who reads it does not expect the erasure to name the copy.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_restore_to_section_does_not_deny_what_forget_erase_does() -> None:
    text = (ROOT / "docs/reference/commands/restore.md").read_text(encoding="utf-8")
    assert "`forget --erase` does not know about it" not in text
