"""What a crashed app leaves, met by every command (embedded Qdrant, mem0's rollback journals).

The app, stopped, was killed inside a write of history.db or of a collection's
``storage.sqlite``: its hot ``-journal`` stays beside the file (tests/helpers/hot_journal.py).
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


@pytest.mark.parametrize("file", ["history", "storage"])
@pytest.mark.parametrize("command", list(WRITERS))
def test_a_command_that_writes_rolls_the_hot_journal_back_and_keeps_every_committed_row(
    deployment, cli, tmp_path, command, file
):
    crashed = crash(deployment, cli, file)
    result = cli(*argv(crashed, WRITERS[command], tmp_path), config=deployment.config)
    assert_rolled_back_and_kept(crashed, cli, command, result)


@pytest.mark.parametrize("file", ["history", "storage"])
def test_a_command_that_reads_reads_or_refuses_with_75_and_changes_nothing(
    deployment, cli, tmp_path, file
):
    assert_read_or_refused(crash(deployment, cli, file), cli, tmp_path)
