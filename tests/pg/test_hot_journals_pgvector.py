"""What a crashed app leaves in history.db on pgvector, met by every command.

The app (mem0's REST server), stopped, was killed inside a write of history.db: its hot
``-journal`` stays beside the file (tests/helpers/hot_journal.py).
"""

from __future__ import annotations

import pytest

from tests.helpers.hot_journal import (
    WRITERS,
    argv,
    assert_read_or_refused,
    assert_rolled_back_and_kept,
    crash,
)


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_command_that_writes_rolls_the_hot_journal_back_and_keeps_every_committed_row(
    pg_deployment, cli, tmp_path, command
):
    crashed = crash(pg_deployment, cli, "history")
    result = cli(*argv(crashed, WRITERS[command], tmp_path), config=pg_deployment.config)
    assert_rolled_back_and_kept(crashed, cli, command, result)


def test_a_command_that_reads_reads_or_refuses_with_75_and_changes_nothing(
    pg_deployment, cli, tmp_path
):
    assert_read_or_refused(crash(pg_deployment, cli, "history"), cli, tmp_path)
