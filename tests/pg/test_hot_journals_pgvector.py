"""What a crashed app leaves in history.db on pgvector, met by every command.

The app (mem0's REST server), stopped, was killed inside a write of history.db: its hot
``-journal`` stays beside the file (tests/helpers/hot_journal.py).
"""

from __future__ import annotations

from tests.helpers.hot_journal import (
    assert_read_or_refused,
    crash,
)


def test_a_command_that_reads_reads_or_refuses_with_75_and_changes_nothing(
    pg_deployment, cli, tmp_path
):
    assert_read_or_refused(crash(pg_deployment, cli, "history"), cli, tmp_path)
