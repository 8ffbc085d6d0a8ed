"""The command line's contract: exit statuses, --config positions, stdout/stderr, JSON shapes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.demo import deployment as build

CHECK_KEYS = {"command", "ok", "backend", "counts", "capture", "findings"}
FINDING_KEYS = {
    "code",
    "severity",
    "collection",
    "memory_id",
    "path",
    "message",
    "fix",
    "scope",
    "expected",
    "observed",
}  # keys are only ever added (json-output.md)


def fingerprint(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` except Qdrant's lock file and memsync's own directories.

    memsync's state directory (``memsync-state``; ``state`` in bulk-generated deployments) and
    the snapshot directory are memsync's, not the deployment's.
    """
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and path.name != ".lock"
        and not {"memsync-state", "state", "snapshots"} & set(path.relative_to(root).parts)
    }


def run_memsync(
    *args: str, env: dict[str, str] | None = None, **kwargs
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
        **kwargs,
    )


def test_config_works_before_and_after_the_command(deployment, cli):
    after = cli("check", "--json", config=deployment.config)
    before = cli("--config", str(deployment.config), "check", "--json")
    assert after.code == before.code == 0
    assert after.json()["counts"] == before.json()["counts"]


def test_config_from_environment_when_no_flag(deployment, cli, monkeypatch):
    monkeypatch.setenv("MEMSYNC_CONFIG", str(deployment.config))
    result = cli("check", "--json")
    assert result.code == 0
    assert result.json()["counts"]["points"] == len(deployment.seeded.live)


def test_check_json_has_the_contract_shape(deployment, cli):
    build.delete_history_rows(deployment.paths, deployment.seeded.live[0])
    result = cli("check", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 3
    assert set(report) == CHECK_KEYS and report["command"] == "check" and report["ok"] is False
    assert report["backend"] == "embedded-qdrant"
    assert {"points", "history_memories", "errors", "warnings", "infos"} <= set(report["counts"])
    assert {"vectors_at", "history_at"} <= set(report["capture"])
    assert report["capture"]["vectors_at"].endswith("Z")
    assert all(set(finding) == FINDING_KEYS for finding in report["findings"])
    assert result.out.count("\n") == 1  # exactly one JSON document


def test_check_text_report_names_findings_and_ends_with_a_summary(deployment, cli):
    target = deployment.seeded.live[0]
    build.delete_history_rows(deployment.paths, target)
    result = cli("check", config=deployment.config)
    assert result.code == 3
    assert target in result.out and "orphan-point" in result.out
    assert result.out.strip().splitlines()[-1].startswith("check: STORES DISAGREE: 1 errors")


def test_usage_error_exits_2(cli):
    stray = cli("check", "--no-such-flag")
    assert stray.code == 2 and "usage: memsync check " in stray.err  # the command's own usage
    assert "memsync check: error: unrecognized arguments: --no-such-flag" in stray.err
    nested = cli("snapshot", "create", "--jsn")
    assert nested.code == 2 and "usage: memsync snapshot create " in nested.err
    assert cli("no-such-command").code == 2


def test_missing_config_exits_10_with_one_line(cli, tmp_path):
    result = cli("check", config=tmp_path / "absent.toml")
    assert result.code == 10
    assert result.out == ""
    assert (
        result.err.count("\n") == 1
        and "absent.toml" in result.err
        and "file not found" in result.err
    )


def test_invalid_config_lists_every_problem_as_json_error(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('state_dir = 3\n[snapshot]\nkeep_daily = -1\n[daemon]\ncheck_every = "soon"\n')
    result = cli("check", "--json", config=bad)
    assert result.code == 10 and result.out == ""
    error = json.loads(result.err)
    assert error["type"] == "exit_error" and error["code"] == 10
    for dotted in ("state_dir", "snapshot.keep_daily", "daemon.check_every"):
        assert dotted in error["message"]


@pytest.mark.parametrize("damage", ["garbage", "truncated"], ids=["garbage", "truncated"])
def test_damaged_history_db_exits_11_and_is_left_as_it_was(deployment, cli, damage):
    deployment.close()
    history = deployment.paths.history_db
    if damage == "garbage":
        history.write_bytes(os.urandom(8192))
    else:
        data = history.read_bytes()
        history.write_bytes(data[: len(data) // 2])
    before = fingerprint(deployment.paths.root)
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 11, result.err
    assert result.out == ""
    error = json.loads(result.err)
    assert str(history) in error["message"] and error["hint"]
    assert fingerprint(deployment.paths.root) == before


def test_truncated_collection_store_exits_11(deployment, cli):
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    data = storage.read_bytes()
    storage.write_bytes(data[: len(data) // 3])
    result = cli("check", config=deployment.config)
    assert result.code == 11
    assert str(storage) in result.err and result.err.count("\n") == 1


def test_garbage_meta_json_exits_11(deployment, cli):
    deployment.close()
    (deployment.paths.qdrant / "meta.json").write_text("{not json")
    result = cli("check", config=deployment.config)
    assert result.code == 11 and "meta.json" in result.err


def test_both_stores_absent_exits_11(cli, tmp_path):
    paths = build.Paths(tmp_path / "nothing")
    config = build.write_memsync_config(paths)
    result = cli("check", config=config)
    assert result.code == 11 and "neither" in result.err


def test_busy_history_db_exits_75(deployment, cli):
    deployment.close()
    holder = sqlite3.connect(deployment.paths.history_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = cli("check", "--json", config=deployment.config)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.code == 75, result.err
    assert json.loads(result.err)["code"] == 75 and result.out == ""


def test_unreadable_history_db_exits_11(deployment):
    deployment.close()
    deployment.paths.history_db.chmod(0o000)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it
        assert shutil.which("setpriv"), "util-linux setpriv is needed to test as root"
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    try:
        result = subprocess.run(
            [*prefix, sys.executable, "-m", "memsync", "check", "--config", str(deployment.config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        deployment.paths.history_db.chmod(0o644)
    assert result.returncode == 11, result.stderr
    assert str(deployment.paths.history_db) in result.stderr
    assert result.stdout == ""


def test_check_and_doctor_change_nothing_and_never_import_mem0(deployment, tmp_path):
    deployment.close()
    before = fingerprint(deployment.paths.root)
    fresh_mem0_dir = tmp_path / "fresh-mem0-dir"
    fresh_mem0_dir.mkdir()
    probe = (
        "import sys; from memsync.cli import main; "
        f"codes = [main(['check', '--config', {str(deployment.config)!r}]), "
        f"main(['doctor', '--json', '--config', {str(deployment.config)!r}])]; "
        "print('MEM0_IMPORTED' if 'mem0' in sys.modules else 'NO_MEM0', codes)"
    )
    env = {**os.environ, "MEM0_DIR": str(fresh_mem0_dir), "OPENAI_API_KEY": ""}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "NO_MEM0" in result.stdout, result.stdout + result.stderr
    assert fingerprint(deployment.paths.root) == before
    assert list(fresh_mem0_dir.iterdir()) == []


def test_doctor_json_shape_and_exit_0_on_a_healthy_deployment(deployment, cli):
    result = cli("doctor", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 0, [r for r in report["results"] if r["status"] == "error"]
    assert set(report) == {"command", "ok", "counts", "results", "check"}
    assert report["check"]["errors"] == 0
    codes = {r["code"] for r in report["results"]}
    assert {
        "path-mount",
        "disk-space",
        "store-lock",
        "sqlite-integrity",
        "journal-mode",
        "sqlite-version",
        "collection-params",
        "mem0-version",
        "check",
        "last-snapshot",
    } <= codes
    for item in report["results"]:
        assert set(item) == {"code", "status", "path", "message", "fix"}


def test_doctor_names_the_process_holding_the_store(deployment, cli):
    deployment.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from qdrant_client import QdrantClient; "
            f"c = QdrantClient(path={str(deployment.paths.qdrant)!r}); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        report = cli("doctor", "--json", config=deployment.config).json()
    finally:
        holder.kill()
        holder.wait()
    locks = [
        r
        for r in report["results"]
        if r["code"] == "store-lock" and r["path"].startswith(str(deployment.paths.qdrant))
    ]
    assert f"pid {holder.pid}" in locks[0]["message"]


def test_doctor_flags_a_store_on_tmpfs(make_deployment, cli, tmp_path):
    shm = Path("/dev/shm")
    assert shm.is_dir(), "this test needs a tmpfs at /dev/shm"
    from memsync.stores.locks import mount_of

    assert mount_of(shm)[1] == "tmpfs"
    deployment = make_deployment(count=5)
    deployment.close()
    volatile = shm / f"memsync-test-{os.getpid()}-qdrant"
    build.copy_qdrant(deployment.paths, volatile)
    try:
        deployment.config.write_text(
            deployment.config.read_text().replace(
                f'path = "{deployment.paths.qdrant}"', f'path = "{volatile}"'
            )
        )
        result = cli("doctor", "--json", config=deployment.config)
    finally:
        shutil.rmtree(volatile)
    volatile_results = [r for r in result.json()["results"] if r["code"] == "path-volatile"]
    assert result.code == 3
    assert volatile_results[0]["status"] == "error" and volatile_results[0]["path"] == str(volatile)


def test_doctor_reads_the_app_interpreters_versions(make_deployment, cli):
    deployment = make_deployment(count=3, extra_config="")
    assert f'app_python = "{sys.executable}"' in deployment.config.read_text()
    report = cli("doctor", "--json", config=deployment.config).json()
    messages = [r["message"] for r in report["results"] if r["code"] == "mem0-version"]
    assert any("the app's interpreter" in message for message in messages)
    [app] = [r for r in report["results"] if r["code"] == "app-interpreter"]
    assert app["status"] == "ok" and sys.executable in app["message"]


def test_status_and_manifests_show_the_configured_interpreters_versions(make_deployment, cli):
    """[app] python measured once (doctor) is recorded: status and a snapshot's manifest
    name the app's mem0ai and qdrant-client without running it."""
    from importlib import metadata

    deployment = make_deployment(count=3, extra_config="")
    before = cli("status", "--json", config=deployment.config).json()["app_interpreter"]
    assert before["source"] == "config" and before["mem0ai"] is None
    assert cli("doctor", "--json", config=deployment.config).code in (0, 3)
    shown = cli("status", "--json", config=deployment.config).json()["app_interpreter"]
    assert shown["python"] == sys.executable and shown["source"] == "config"
    assert shown["mem0ai"] == metadata.version("mem0ai")
    assert shown["qdrant_client"] == metadata.version("qdrant-client")
    text = cli("status", config=deployment.config).out
    assert f"(mem0ai {metadata.version('mem0ai')})" in text
    created = cli("snapshot", "create", "--json", config=deployment.config)
    assert created.code == 0, created.err
    manifest = Path(created.json()["path"]) / "manifest.json"
    versions = json.loads(manifest.read_text())["versions"]
    assert versions["mem0ai"] == metadata.version("mem0ai")


def test_doctor_flags_an_app_that_sees_another_tmp(deployment, cli, tmp_path):
    """The app runs in its own mount namespace (as under PrivateTmp=yes) with a private
    tmpfs over the store's parent: it holds a store memsync cannot see."""
    assert shutil.which("unshare"), "util-linux unshare is needed"
    deployment.close()
    private = deployment.paths.root
    script = (
        f"mount -t tmpfs tmpfs {private} && exec {sys.executable} -c "
        f'"import time; from qdrant_client import QdrantClient; '
        f"c = QdrantClient(path='{deployment.paths.qdrant}'); print('ready', flush=True); time.sleep(60)\""
    )
    app = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = app.stdout.readline().strip()
        assert line == "ready", app.stderr.read()
        result = cli("doctor", "--json", config=deployment.config)
    finally:
        app.kill()
        app.wait()
    mismatches = [r for r in result.json()["results"] if r["code"] == "private-tmp-mismatch"]
    assert result.code == 3
    assert len(mismatches) == 1 and "another mount namespace" in mismatches[0]["message"]


def test_version_and_help_import_no_command():
    probe = (
        "import sys; from memsync.cli import main; "
        "codes = [main(['--version']), main(['--help'])]; "
        "print(codes, sorted(m for m in sys.modules if m.startswith('memsync')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    last = result.stdout.strip().splitlines()[-1]
    assert last == "[0, 0] ['memsync', 'memsync.cli', 'memsync.errors']", result.stdout
