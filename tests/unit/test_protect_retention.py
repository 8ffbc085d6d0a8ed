"""Replica retention follows snapshot retention: the rule, and the refusal of a longer value."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config import parse
from memsync.config.schema import retention_horizon
from memsync.errors import ConfigError
from memsync.protection import replica_retention

PROTECT = {"directory": "/r"}


def load(snapshot, protect=PROTECT):
    return parse(
        {"snapshot": snapshot, "protect": protect}, source="t.toml", base_dir=Path("/"), environ={}
    )


@pytest.mark.parametrize(
    ("snapshot", "horizon"),
    [
        ({"keep_daily": 7}, timedelta(days=7)),
        ({"keep_hourly": 6, "keep_within": "2h"}, timedelta(hours=6)),
        ({"keep_within": "36h", "keep_hourly": 24}, timedelta(hours=36)),
        ({"keep_weekly": 2, "keep_monthly": 1}, timedelta(days=31)),
        ({"keep_yearly": 1, "keep_last": 3}, timedelta(days=366)),
        ({"keep_last": 10}, None),  # a count: its age depends on how often snapshots are taken
        ({}, None),
    ],
)
def test_the_snapshots_horizon_is_their_longest_time_rule(snapshot, horizon):
    assert retention_horizon(snapshot) == horizon
    loaded = load(snapshot)
    assert retention_horizon(loaded.snapshot.model_dump()) == horizon  # the loaded section too


def test_the_default_retention_is_capped_to_the_horizon_and_a_shorter_one_kept():
    assert replica_retention(*_both(load({"keep_hourly": 6}))) == timedelta(hours=6)
    assert replica_retention(*_both(load({"keep_daily": 7}))) == timedelta(hours=24)
    assert replica_retention(*_both(load({"keep_last": 3}))) == timedelta(hours=24)
    shorter = load({"keep_daily": 7}, {**PROTECT, "retention": "2h"})
    assert replica_retention(*_both(shorter)) == timedelta(hours=2)
    equal = load({"keep_daily": 2}, {**PROTECT, "retention": "48h"})
    assert replica_retention(*_both(equal)) == timedelta(hours=48)


def test_a_retention_longer_than_the_snapshots_is_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        load({"keep_daily": 3}, {**PROTECT, "retention": "7d"})
    [problem] = refused.value.problems
    assert problem == (
        "protect.retention: 7d keeps replica restore points older than the oldest snapshot "
        "[snapshot] keep_* keeps (3d): what the app deleted would outlive the snapshots in the "
        "replicas; set at most 3d, or keep snapshots longer"
    )


def _both(config):
    assert config.protect is not None
    return config.protect, config
