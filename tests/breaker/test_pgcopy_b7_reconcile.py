"""Breaker 7: reconcile reads a binary (.pgcopy) snapshot only where it lies in place."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from memsync.demo import deployment as build
from tests.conftest import s3_section
from tests.pg.test_restore_pgvector import ids
from tests.process.test_reconcile import reconcile


def test_a_missing_row_comes_back_from_an_encrypted_binary_pg_snapshot(
    make_deployment, cli, tmp_path
):
    deployment = make_deployment(count=10, pg=True)
    text = deployment.config.read_text()
    if "keep_last = 3" in text:
        text = text.replace(
            "keep_last = 3", f'keep_last = 3\nencrypt_key_file = "{tmp_path / "k"}"'
        )
    else:
        raise AssertionError(text)
    (tmp_path / "k").write_text(os.urandom(32).hex())
    deployment.config.write_text(text)
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    root = deployment.paths.root / "snapshots" / made.json()["id"]
    assert any(p.name.startswith("mem0.pgcopy") for p in (root / "pgvector").iterdir())
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, json.dumps(outcome)[:1500]
    assert victim in ids(deployment.paths.pg_url, "mem0"), outcome


def test_a_missing_row_comes_back_from_a_bucket_only_binary_pg_snapshot(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment = make_deployment(count=10, pg=True, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
    assert made.code == 0, made.err
    root = deployment.paths.root / "snapshots" / made.json()["id"]
    assert (root / "pgvector" / "mem0.pgcopy").is_file()
    shutil.rmtree(root)  # only the bucket has it now
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, json.dumps(outcome)[:1500]
    assert victim in ids(deployment.paths.pg_url, "mem0"), outcome


@pytest.mark.parametrize("kind", ["binary", "csv"])
def test_a_missing_row_comes_back_from_a_local_pg_snapshot(make_deployment, cli, kind):
    from tests.helpers.pg import as_csv_snapshot

    deployment = make_deployment(count=10, pg=True)
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    if kind == "csv":
        root = deployment.paths.root / "snapshots" / made.json()["id"]
        as_csv_snapshot(root, deployment.paths.pg_url)
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, json.dumps(outcome)[:1500]
    assert victim in ids(deployment.paths.pg_url, "mem0"), outcome


def test_reconcile_over_a_damaged_newest_pgcopy_fails_in_one_line_or_uses_the_older(
    make_deployment, cli
):
    from tests.breaker import test_pgcopy_b7_hostile as hostile
    from tests.pg.test_restore_pgvector import memsync

    deployment = make_deployment(count=10, pg=True)
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code in (0, 3)
    import time

    time.sleep(1.1)  # snapshot ids are per second
    newest = cli("snapshot", "create", "--json", config=deployment.config).json()["id"]
    root = deployment.paths.root / "snapshots" / newest
    relative = "pgvector/mem0.pgcopy"
    rows = hostile.parse((root / relative).read_bytes())
    rows[0][hostile.columns(root).index("id")] = b"\x01" * 15  # before every row it may seek
    hostile.write(root, relative, hostile.pack(rows))
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    deployment.close()
    result = memsync(deployment, "reconcile", "--no-snapshot", "--json")
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    if result.returncode == 0:
        assert victim in ids(deployment.paths.pg_url, "mem0"), result.stdout[-800:]
    else:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "mem0.pgcopy" in result.stderr, result.stderr
