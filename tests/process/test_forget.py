"""forget, prune and erase on real deployments: deletes through mem0, proven, refusals harmless."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memsync.demo import deployment as build
from tests.conftest import error_findings, findings_of
from tests.helpers.holders import app_holding
from tests.process.test_cli import fingerprint


def run(cli, deployment, *argv):
    deployment.close()
    result = cli(*argv, "--json", config=deployment.config)
    return result.code, (result.json() if result.out else json.loads(result.err))


def points(deployment) -> dict[str, dict]:
    memory = deployment.reopen()
    try:
        listed, _ = memory.vector_store.client.scroll("mem0", limit=100_000)
        return {str(p.id): p.payload for p in listed}
    finally:
        deployment.close()


def test_forget_deletes_through_mem0_cleans_entity_links_and_proves_it(deployment, cli):
    target = deployment.seeded.live[0]
    deployment.memory.entity_store.insert(
        vectors=[[0.1] * 384],
        ids=["00000000-0000-4000-8000-00000000000a"],
        payloads=[{"data": "Porto", "linked_memory_ids": [target], "user_id": "alice"}],
    )
    code, outcome = run(cli, deployment, "forget", target, "--yes", "--no-snapshot")
    assert code == 0, outcome
    assert outcome["deleted"] == [target] and outcome["unproven"] == []
    assert target not in points(deployment)
    memory = deployment.reopen()
    assert memory.history(target)[-1]["event"] == "DELETE"
    assert memory.entity_store.get(vector_id="00000000-0000-4000-8000-00000000000a") is None
    deployment.close()
    report = cli("check", "--json", config=deployment.config).json()
    assert error_findings(report) == {} and "dangling-entity-link" not in findings_of(
        report, "warning"
    )


def test_forget_closes_a_memory_that_exists_only_in_history(deployment, cli):
    victim = build.delete_with_failing_history(
        deployment.memory, deployment.paths, deployment.seeded.live[1]
    )
    code, outcome = run(cli, deployment, "forget", victim, "--yes")
    assert code == 0 and outcome["recorded"] == [victim]
    assert error_findings(cli("check", "--json", config=deployment.config).json()) == {}


def test_unknown_id_is_memory_not_found_and_touches_nothing(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    unknown = "0b7e2c1a-5d4f-4e3b-9a8c-7f6e5d4c3b2a"  # a well-formed id no memory has
    code, outcome = run(cli, deployment, "forget", deployment.seeded.live[0], unknown, "--yes")
    assert code == 3 and [f["code"] for f in outcome["findings"]] == ["memory-not-found"]
    assert fingerprint(deployment.paths.root) == before
    looked = cli("forget", unknown, "--dry-run", config=deployment.config)
    assert looked.code == 3 and f"memory-not-found {unknown}: nothing was touched" in looked.out


def test_a_scope_that_matches_no_memory_is_memory_not_found_and_touches_nothing(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    typo = cli("forget", "--user", "alcie", "--erase", "--yes", config=deployment.config)
    assert typo.code == 3 and typo.out.count("\n") == 1, typo.out + typo.err
    assert "memory-not-found: no memory of user_id=alcie in the store" in typo.out
    dry = cli("forget", "--user", "alcie", "--dry-run", "--json", config=deployment.config)
    assert dry.code == 3  # the real run would exit 3
    assert [f["code"] for f in dry.json()["findings"]] == ["memory-not-found"]
    assert fingerprint(deployment.paths.root) == before


def test_a_malformed_id_is_a_usage_error_and_an_uppercase_one_is_found(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    result = cli("forget", "no-such-memory", "--yes", "--json", config=deployment.config)
    assert result.code == 2 and "is not a memory id" in result.err
    assert "export-context" in result.err
    assert fingerprint(deployment.paths.root) == before
    victim = deployment.seeded.live[0]
    code, outcome = run(cli, deployment, "forget", victim.upper(), "--yes")
    assert code == 0 and outcome["targets"] == [victim], outcome


def test_forget_needs_confirmation_without_a_terminal(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    result = cli("forget", deployment.seeded.live[0], config=deployment.config)
    assert result.code == 2 and "--yes" in result.err
    assert fingerprint(deployment.paths.root) == before


def test_forget_is_queued_untouched_while_the_app_holds_the_store_without_a_route(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    with app_holding(deployment.paths.qdrant):
        code, outcome = run(cli, deployment, "forget", deployment.seeded.live[0], "--yes")
    assert code == 5 and outcome["route"] == "queued" and outcome["pending_id"]
    assert outcome["deleted"] == [] and outcome["targets"] == [deployment.seeded.live[0]]
    assert fingerprint(deployment.paths.root) == before


def test_forget_a_scope_of_more_than_a_thousand_memories(make_deployment, cli):
    deployment = make_deployment(count=0)
    memory = deployment.memory
    for batch in range(52):
        memory.add(
            [{"role": "user", "content": f"bulk fact {batch}-{i}"} for i in range(20)],
            user_id="bulk-user",
            infer=True,
        )
    keep = memory.add("someone else's memory", user_id="other", infer=False)["results"][0]["id"]
    assert sum(1 for p in points(deployment).values() if p.get("user_id") == "bulk-user") == 1040
    code, outcome = run(cli, deployment, "forget", "--user", "bulk-user", "--yes", "--no-snapshot")
    assert code == 0 and len(outcome["deleted"]) == 1040 and outcome["unproven"] == []
    remaining = points(deployment)
    assert (
        not [p for p in remaining.values() if p.get("user_id") == "bulk-user"] and keep in remaining
    )


def test_dry_run_lists_and_changes_nothing(deployment, cli):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    code, outcome = run(cli, deployment, "forget", "--user", "alice", "--dry-run")
    assert code == 0 and outcome["dry_run"] is True and outcome["targets"]
    said = cli("forget", "--user", "alice", "--erase", "--dry-run", config=deployment.config)
    assert said.code == 0 and "would erase their text: history rows" in said.out
    assert "safety snapshot" not in said.out  # an erasure takes none: it would keep the text
    plain = cli("forget", "--user", "alice", "--dry-run", config=deployment.config)
    assert "would take a safety snapshot first" in plain.out and "would erase" not in plain.out
    bare = cli("forget", "--user", "alice", "--dry-run", "--no-snapshot", config=deployment.config)
    assert "safety snapshot" not in bare.out
    assert fingerprint(deployment.paths.root) == before


def test_prune_removes_exactly_the_expired_and_is_idempotent(make_deployment, cli):
    deployment = make_deployment(count=20)
    today = datetime.now(UTC).date()
    memory = deployment.memory
    expired = [
        memory.add(
            f"expired {i}",
            user_id="ana",
            infer=False,
            expiration_date=(today - timedelta(days=i + 1)).isoformat(),
        )["results"][0]["id"]
        for i in range(3)
    ]
    future = memory.add(
        "valid for a month",
        user_id="ana",
        infer=False,
        expiration_date=(today + timedelta(days=30)).isoformat(),
    )["results"][0]["id"]
    before = points(deployment)
    code, outcome = run(cli, deployment, "prune")
    assert code == 0, outcome
    assert set(outcome["deleted"]) == set(expired) | set(deployment.seeded.expired)
    after = points(deployment)
    assert future in after and not set(expired) & set(after)
    assert {k: v for k, v in before.items() if k in after} == after  # other payloads unchanged
    code, outcome = run(cli, deployment, "prune")
    assert code == 0 and outcome["deleted"] == []


def all_bytes(roots: list[Path]) -> list[tuple[Path, bytes]]:
    return [
        (p, p.read_bytes())
        for root in roots
        if root.exists()
        for p in root.rglob("*")
        if p.is_file()
    ]


def test_erase_leaves_no_byte_of_any_version_of_the_text(make_deployment, cli):
    deployment = make_deployment(count=15)
    memory = deployment.memory
    first = "my bank PIN is 8346 and my passport number is X1234567"
    second = "my bank PIN is 9921 and my passport number is X1234567"
    target = memory.add([{"role": "user", "content": first}], user_id="zed", infer=True)["results"][
        0
    ]["id"]
    memory.update(target, second)
    deployment.close()
    code, outcome = run(cli, deployment, "forget", target, "--erase", "--yes")
    assert code == 0, outcome
    assert outcome["erased"]["history_rows_blanked"] >= 2
    roots = [deployment.paths.root]
    for path, data in all_bytes(roots):
        for text in (first, second, "X1234567"):
            assert text.encode() not in data, (path, text)
    memory = deployment.reopen()
    events = memory.history(target)
    assert [e["event"] for e in events][-1] == "DELETE" and all(
        e["old_memory"] is None and e["new_memory"] is None for e in events
    )


def test_erase_then_purge_memory_leaves_no_byte_locally_or_in_the_bucket(
    make_deployment, cli, s3_endpoint, bucket
):
    import boto3

    from tests.conftest import s3_section

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket))
    secret = "my therapist's name is Dr. Quillfeather"
    target = deployment.memory.add(secret, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    code, outcome = run(cli, deployment, "forget", target, "--erase", "--yes")
    assert code == 0 and outcome["erased"]["snapshots_holding"] == [made["id"]]
    result = cli(
        "snapshot", "purge-memory", target, "--remote", "--yes", "--json", config=deployment.config
    )
    assert result.code == 0, result.err
    purged = result.json()
    assert purged["rewritten"] == [made["id"]] and purged["uploaded"] == [made["id"]]
    assert purged["old_versions"]  # the versioned bucket still has the old objects: listed
    for path, data in all_bytes([deployment.paths.root]):
        assert secret.encode() not in data, path
    listed = client.list_objects_v2(Bucket=bucket)["Contents"]
    for item in listed:
        body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        assert secret.encode() not in body, item["Key"]
    assert cli("snapshot", "verify", made["id"], config=deployment.config).code == 0
    assert (
        cli(
            "snapshot",
            "verify",
            f"s3://{bucket}/memsync/test/{made['id']}",
            config=deployment.config,
        ).code
        == 0
    )


def test_erase_reaches_a_memory_deleted_earlier_when_named_by_id(deployment, cli):
    secret = "old secret VX-99-ALPHA"
    target = deployment.memory.add(
        [{"role": "user", "content": secret}], user_id="vic", agent_id="a1", infer=True
    )["results"][0]["id"]
    deployment.memory.delete(
        target
    )  # the app deleted it long ago; history and messages keep the text
    code, outcome = run(cli, deployment, "forget", target, "--erase", "--yes")
    assert code == 0, outcome
    for path, data in all_bytes([deployment.paths.root]):
        assert b"VX-99-ALPHA" not in data, path


def test_purged_snapshots_verify_and_a_later_remote_purge_reuploads(
    make_deployment, cli, s3_endpoint, bucket
):
    import boto3

    from tests.conftest import s3_section

    deployment = make_deployment(count=8, extra_config=s3_section(s3_endpoint, bucket))
    target = deployment.memory.add("temporary code QQ-4411", user_id="zed", infer=False)["results"][
        0
    ]["id"]
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    assert run(cli, deployment, "forget", target, "--erase", "--yes")[0] == 0
    assert (
        cli("snapshot", "purge-memory", target, "--yes", config=deployment.config).code == 0
    )  # local only
    assert cli("snapshot", "verify", made["id"], config=deployment.config).code == 0
    result = cli(
        "snapshot", "purge-memory", target, "--remote", "--yes", "--json", config=deployment.config
    )
    assert result.code == 0 and result.json()["uploaded"] == [made["id"]]
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    for item in client.list_objects_v2(Bucket=bucket)["Contents"]:
        assert b"QQ-4411" not in client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read(), (
            item["Key"]
        )


def test_prune_leaves_what_mem0_does_not_consider_expired(deployment, cli):
    kept = [
        deployment.memory.add(
            f"odd date {i}", user_id="ana", infer=False, metadata={"expiration_date": value}
        )["results"][0]["id"]
        for i, value in enumerate(("2020-01-01T00:00:00Z", "2020-01-01 "))
    ]
    code, outcome = run(cli, deployment, "prune")
    assert code == 0 and not set(kept) & set(outcome["deleted"])


def test_a_bad_mem0_config_never_shows_a_secret(deployment, cli, monkeypatch):
    monkeypatch.setenv("MEMSYNC_SECRET_KEY", "hunter2-secret")
    deployment.config.write_text(
        deployment.config.read_text().replace(
            '[mem0.embedder]\nprovider = "memsync_hash"',
            '[mem0.embedder]\nprovider = "opneai"\n[mem0.embedder.config]\napi_key = {env = "MEMSYNC_SECRET_KEY"}',
        )
    )
    deployment.close()
    result = cli(
        "forget",
        deployment.seeded.live[0],
        "--yes",
        "--no-snapshot",
        "--json",
        "--log-level",
        "debug",
        config=deployment.config,
    )
    assert result.code == 10
    assert "hunter2-secret" not in result.err + result.out
