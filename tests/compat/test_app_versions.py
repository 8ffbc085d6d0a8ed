"""Every memsync write, on an app of each mem0ai version, leaves the app reading every memory.

Each version's app environment (``tests/helpers/app_envs.py``: mem0ai with a qdrant-client of
its time, never memsync) builds a real deployment through its own ``Memory``; memsync runs
its commands from its own environment; after each write the app's own version opens the store
and reads every memory back (``get_all`` per user, and ``search`` finds each one).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memsync.stores import interpreter
from memsync.stores.interpreter import STATE_FILE
from tests.helpers import app_envs
from tests.helpers.compat import APP, ROOT, VERSIONS, App, assert_reads, ensure_built, files_of


@pytest.fixture(scope="session")
def built() -> None:
    """Every app environment, built once (``make test`` builds them before pytest starts)."""
    ensure_built()


SLOW = pytest.mark.slow(
    reason="an app process of an old mem0ai after each write, and a writer process per write: "
    "about 1.5 s of imports each"
)


@SLOW
@pytest.mark.parametrize("version", VERSIONS)
def test_deletes_and_recover_leave_the_app_reading_every_memory(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    app = App(tmp_path / "deployment", version)
    ids = app.run(("seed", "10"))[0]["ids"]
    seeded = app.read()
    assert set(seeded) == set(ids)
    config = app.config
    assert cli("check", "--json", config=config).code == 0
    created = cli("snapshot", "create", "--json", config=config)
    assert created.code == 0, created.err
    assert cli("snapshot", "verify", created.json()["id"], config=config).code == 0
    gone: set[str] = set()

    result = cli("forget", ids[0], "--yes", "--no-snapshot", "--json", config=config)
    assert result.code == 0, result.err
    assert result.json()["route"] == "direct"
    gone.add(ids[0])
    assert_reads(app, seeded, gone)

    result = cli("forget", ids[1], "--erase", "--yes", "--no-snapshot", config=config)
    assert result.code == 0, result.err
    gone.add(ids[1])
    assert_reads(app, seeded, gone, ("expire", ids[2]))

    result = cli("prune", "--json", config=config)
    assert result.code == 0, result.err
    gone.add(ids[2])
    assert_reads(app, seeded, gone, ("delete", ids[3]))

    result = cli("recover", ids[3], "--json", config=config)
    assert result.code == 0, result.err
    text = "a text written after the snapshot"
    assert_reads(app, seeded, gone, ("update", ids[4], text), ("delete", ids[4]))
    assert cli("check", config=config).code == 0

    # Changed after the snapshot, then deleted: back with its last text, embedded again by the
    # app's own embedder in the app's interpreter, with the snapshot's metadata.
    snapshot = created.json()["id"]
    result = cli("recover", ids[4], "--from", snapshot, "--json", config=config)
    assert result.code == 0, result.err
    assert result.json()["counts"]["recovered"] == 1 and result.json()["memories"][0]["re_embedded"]
    assert_reads(app, {**seeded, ids[4]: {**seeded[ids[4]], "memory": text}}, gone)
    assert cli("check", config=config).code == 0


@SLOW
@pytest.mark.parametrize("version", VERSIONS)
def test_reconcile_migrate_and_restore_leave_the_app_reading_every_memory(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    app = App(tmp_path / "deployment", version)
    ids = app.run(("seed", "10"))[0]["ids"]
    seeded = app.read()
    config = app.config
    created = cli("snapshot", "create", "--json", config=config)
    assert created.code == 0, created.err

    # A resurrected point (an older Qdrant copy under newer history) and a missing one.
    older = tmp_path / "qdrant-older"
    shutil.copytree(app.qdrant, older)
    app.run(("delete", ids[0]))
    shutil.rmtree(app.qdrant)
    shutil.copytree(older, app.qdrant)
    app.run(("drop-point", ids[1]))
    report = cli("check", "--json", config=config)
    assert report.code == 3
    codes = {(f["code"], f.get("memory_id")) for f in report.json()["findings"]}
    assert ("resurrected-point", ids[0]) in codes and ("missing-point", ids[1]) in codes
    result = cli("reconcile", "--json", config=config)
    assert result.code == 0, result.err
    assert cli("check", config=config).code == 0
    assert_reads(app, seeded, {ids[0]})

    # A migration to a new embedded store, by the app's own version; the app reads the target.
    target = tmp_path / "target"
    target.mkdir()
    new_toml = target / "new.toml"
    new_toml.write_text(
        config.read_text().replace(f'path = "{app.qdrant}"', f'path = "{target / "qdrant"}"'),
        encoding="utf-8",
    )
    result = cli("migrate", "--to", str(new_toml), "--json", config=config)
    assert result.code == 0, result.err
    app.write_mem0_config(target / "mem0.json", target / "qdrant")
    on_target = app.read(mem0_config=target / "mem0.json")
    assert set(on_target) == set(seeded) - {ids[0]}

    result = cli("restore", created.json()["id"], "--force", "--json", config=config)
    assert result.code == 0, result.err
    assert_reads(app, seeded, set())  # the snapshot of the seeded deployment, whole


@SLOW
@pytest.mark.parametrize("version", VERSIONS)
def test_confirm_and_a_text_update_keep_the_memorys_metadata(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    """The two updates whose call differs by version (``ops._update``): ``confirm`` (metadata
    alone) and reconcile's text update of a point older than its history."""
    app = App(tmp_path / "deployment", version)
    ids = app.run(("seed", "6"))[0]["ids"]
    seeded = app.read()
    config = app.config

    result = cli("confirm", ids[0], "--json", config=config)
    assert result.code == 0, result.err
    assert result.json()["route"] == "direct" and result.json()["confirmed"] == [ids[0]]
    assert_reads(app, seeded, set())
    stamped = app.read()[ids[0]]["metadata"] or {}
    assert datetime.fromisoformat(stamped["confirmed_at"]) == datetime.fromisoformat(
        result.json()["confirmed_at"]
    ), stamped

    older = tmp_path / "qdrant-older"  # the point as it was; history then moves on
    shutil.copytree(app.qdrant, older)
    app.run(("update", ids[1], "moved to Tromsø"))
    shutil.rmtree(app.qdrant)
    shutil.copytree(older, app.qdrant)
    report = cli("check", "--json", config=config)
    assert ("text-mismatch", ids[1]) in {
        (f["code"], f.get("memory_id")) for f in report.json()["findings"]
    }, report.out
    result = cli("reconcile", "--no-snapshot", "--json", config=config)
    assert result.code == 0, result.err
    assert "update-point" in [a["kind"] for a in result.json()["actions"]]
    assert cli("check", config=config).code == 0
    expected = {**seeded, ids[1]: {**seeded[ids[1]], "memory": "moved to Tromsø"}}
    assert_reads(app, expected, set())  # the new text, its topic kept (mem0 before 2.0.7 drops it)


@SLOW
@pytest.mark.parametrize("version", VERSIONS)
def test_agent_writes_and_the_learned_interpreter(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    app = App(tmp_path / "deployment", version, app_python=False)
    ids = app.run(("seed", "6"))[0]["ids"]
    seeded = app.read()
    socket_path = tmp_path / "memsync-agent.sock"
    control = tmp_path / "control"
    environ = app.environ()
    environ.update(
        COMPAT_MEMSYNC_AGENT_PATH=str(ROOT), COMPAT_AGENT_SOCKET=str(socket_path),
        COMPAT_WRITE_EVERY_S="0.2", COMPAT_CONTROL=str(control),
    )  # fmt: skip
    serving = subprocess.Popen(
        [str(app.python), str(APP), "serve"], env=environ, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def in_the_app(*command: str) -> None:
        control.write_text(" ".join(command))
        deadline = time.monotonic() + 60
        while control.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not control.exists(), f"the app did not run {command}"

    try:
        assert serving.stdout is not None
        assert "serving" in serving.stdout.readline()
        created = cli("snapshot", "create", "--json", config=app.config)
        assert created.code == 0 and created.json()["quiesced"] is True, created.err
        result = cli("forget", ids[0], "--yes", "--no-snapshot", "--json", config=app.config)
        assert result.code == 0, result.err
        assert result.json()["route"] == "agent"
        result = cli("forget", ids[1], "--erase", "--yes", "--no-snapshot", config=app.config)
        assert result.code == 0, result.err
        in_the_app("delete", ids[3])  # a mistaken delete, through the app's mem0
        result = cli("recover", ids[3], "--from", created.json()["id"], "--json", config=app.config)
        assert result.code == 0, result.err
        in_the_app("drop-point", ids[4])  # a point lost, its history intact
        result = cli("reconcile", "--no-snapshot", "--json", config=app.config)
        assert result.code == 0, result.err
        assert result.json()["route"] == "agent"
        in_the_app("expire", ids[5])  # an expiration date passed: prune deletes it in the app
        result = cli("prune", "--json", config=app.config)
        assert result.code == 0, result.err
        assert result.json()["route"] == "agent"
    finally:
        serving.send_signal(signal.SIGTERM)
        _, err = serving.communicate(timeout=60)
    assert serving.returncode == 0, err[-2000:]
    memories = app.read()
    assert not {ids[0], ids[1], ids[5]} & set(memories)
    assert set(seeded) - {ids[0], ids[1], ids[5]} <= set(memories)  # ids[3], ids[4] back

    # The agent's hello named the app's interpreter: a direct write later uses it, when
    # nobody but root could have put it there (a checkout under /tmp could be anyone's).
    result = cli("forget", ids[2], "--yes", "--no-snapshot", "--json", config=app.config)
    if not interpreter.trusted(str(app.python)):
        assert not (app.state / STATE_FILE).exists()
        assert result.code == 10 and "[app] python" in result.err
        return
    learned = json.loads((app.state / STATE_FILE).read_text())
    assert learned["python"] == str(app.python) and learned["mem0ai"] == version
    assert result.code == 0, result.err
    assert result.json()["route"] == "direct"
    assert ids[2] not in app.read()


def test_a_write_with_no_known_interpreter_is_refused_and_touches_nothing(
    built: None, tmp_path: Path, cli: Any
) -> None:
    app = App(tmp_path / "deployment", VERSIONS[0], app_python=False)
    ids = app.run(("seed", "4"))[0]["ids"]
    older = tmp_path / "qdrant-older"
    shutil.copytree(app.qdrant, older)
    app.run(("delete", ids[0]))
    shutil.rmtree(app.qdrant)
    shutil.copytree(older, app.qdrant)  # ids[0] resurrected: reconcile has a write to make
    app.run(("expire", ids[1]))  # prune has one too
    stores = [app.qdrant, app.history, app.mem0_dir]
    before = [files_of(p) if p.is_dir() else p.read_bytes() for p in stores]
    for argv in (("forget", ids[2], "--yes"), ("reconcile",), ("prune",)):
        result = cli(*argv, config=app.config)
        assert result.code == 10, (argv, result.err)
        assert "[app] python" in result.err
    assert [files_of(p) if p.is_dir() else p.read_bytes() for p in stores] == before
    snapshots = app.root / "snapshots"
    assert not snapshots.exists() or not any(snapshots.iterdir())  # refused before the snapshot
    assert set(app.read()) == set(ids)  # ids[0] resurrected still, ids[1] expired still


def test_the_interpreter_of_the_process_holding_the_store_is_learned(
    built: None, tmp_path: Path, cli: Any
) -> None:
    """No [app] python, no agent: doctor learns the app's interpreter from the process that
    holds the store (its argv[0], a venv's python) and records it with its versions."""
    version = "0.1.118"
    app = App(tmp_path / "deployment", version, app_python=False)
    app.run(("seed", "2"))
    holding = subprocess.Popen(
        [str(app.python), "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
         "import compat_app; m = compat_app.memory(); print('holding', flush=True); "
         "time.sleep(120)", str(APP.parent)],
        env=app.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holding.stdout is not None and "holding" in holding.stdout.readline()
        report = cli("doctor", "--json", config=app.config)
    finally:
        holding.kill()
        holding.communicate(timeout=60)
    [found] = [r for r in report.json()["results"] if r["code"] == "app-interpreter"]
    if not interpreter.trusted(str(app.python)):  # a checkout anyone could have written
        assert found["status"] == "warning" and not (app.state / STATE_FILE).exists()
        return
    assert found["status"] == "ok", found
    assert "learned from the process holding the store" in found["message"]
    learned = json.loads((app.state / STATE_FILE).read_text())
    assert learned["python"] == str(app.python) and learned["source"] == "holder"
    assert learned["mem0ai"] == version
    assert learned["qdrant_client"] == app_envs.APP_ENVS[version][1].split("==")[1]
    shown = cli("status", "--json", config=app.config).json()["app_interpreter"]
    assert shown["source"] == "holder" and shown["mem0ai"] == version


def break_meta_like_memsync_0_1(app: App) -> None:
    """Open the store with memsync's own mem0ai and qdrant-client, as memsync 0.1 wrote."""
    script = (
        "import json, sys, memsync.demo.providers\n"
        "from mem0 import Memory\n"
        "m = Memory.from_config(json.loads(open(sys.argv[1]).read()))\n"
        "m.entity_store\n"
        "m.close()\n"
    )
    environ = {**os.environ, "MEM0_DIR": str(app.root / "memsync-0.1-mem0")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(app.mem0_config)], env=environ,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@SLOW
@pytest.mark.parametrize("version", ["0.1.118", "2.0.0", "2.1.0"])
def test_a_store_broken_by_a_newer_qdrant_client_is_found_and_repaired(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    app = App(tmp_path / "deployment", version)
    ids = app.run(("seed", "6"))[0]["ids"]
    seeded = app.read()
    break_meta_like_memsync_0_1(app)
    broken = subprocess.run(
        [str(app.python), str(APP), "read"], env=app.environ(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert broken.returncode != 0 and "Extra inputs are not permitted" in broken.stderr

    report = cli("doctor", "--json", config=app.config)
    [meta] = [r for r in report.json()["results"] if r["code"] == "store-meta"]
    client = app_envs.APP_ENVS[version][1].split("==")[1]
    assert meta["status"] == "error" and client in meta["message"]
    assert "written by qdrant-client 1.20 or later" in meta["message"]  # both versions named
    assert "repair-meta" in meta["fix"] and report.code == 3

    before = (app.qdrant / "meta.json").read_bytes()
    dry = cli("repair-meta", "--dry-run", "--json", config=app.config)
    assert dry.code == 3 and "id_tracker" in dry.json()["refused"]["mem0"]
    assert (app.qdrant / "meta.json").read_bytes() == before

    repaired = cli("repair-meta", "--json", config=app.config)
    assert repaired.code == 0, repaired.err
    done = repaired.json()
    assert done["repaired"] and done["loads"] and done["safety_snapshot"]
    assert Path(done["kept"]).read_bytes() == before  # the old file, kept beside it
    memories = app.read()
    assert set(memories) == set(ids) == set(seeded)
    again = cli("doctor", "--json", config=app.config).json()["results"]
    assert [r["status"] for r in again if r["code"] == "store-meta"] == ["ok"]


def test_memsyncs_own_environment_never_reaches_the_writer(
    built: None, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PYTHONPATH naming memsync's own site-packages (mem0ai 2.2.1, qdrant-client 1.20) does not
    make a write on a 0.1.118 app use them: the writer runs the app's interpreter isolated."""
    app = App(tmp_path / "deployment", "0.1.118")
    ids = app.run(("seed", "4"))[0]["ids"]
    seeded = app.read()
    meta = (app.qdrant / "meta.json").read_bytes()
    [ours] = Path(sys.prefix).glob("lib/python*/site-packages")
    monkeypatch.setenv("PYTHONPATH", str(ours))
    result = cli("forget", ids[0], "--yes", "--no-snapshot", config=app.config)
    assert result.code == 0, result.err
    monkeypatch.delenv("PYTHONPATH")
    assert (app.qdrant / "meta.json").read_bytes() == meta  # not rewritten by qdrant-client 1.20
    assert set(app.read()) == set(seeded) - {ids[0]}


def test_a_plugin_the_apps_interpreter_cannot_import_is_named_by_doctor_and_refused(
    built: None, tmp_path: Path, cli: Any
) -> None:
    app = App(tmp_path / "deployment", "2.1.0")
    ids = app.run(("seed", "2"))[0]["ids"]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "app_own_plugin.py").write_text("import memsync_app_providers  # noqa: F401\n")
    app.config.write_text(
        app.config.read_text().replace(
            f'plugins = ["{app_envs.PLUGIN}"]', 'plugins = ["app_own_plugin"]'
        )
    )
    report = cli("doctor", "--json", config=app.config)
    [found] = [r for r in report.json()["results"] if r["code"] == "app-interpreter"]
    assert found["status"] == "error" and "app_own_plugin" in found["message"]
    assert "python_path" in found["fix"]
    result = cli("forget", ids[0], "--yes", "--no-snapshot", config=app.config)
    assert result.code == 10 and "python_path" in result.err

    with app.config.open("a") as config:  # the app's own directory, named for the writer
        config.write(f'python_path = ["{plugins}"]\n')
    result = cli("forget", ids[0], "--yes", "--no-snapshot", config=app.config)
    assert result.code == 0, result.err
    assert ids[0] not in app.read()


def _transactions(storage: Path) -> int:
    """The SQLite file change counter (header bytes 24-27): one per committed write transaction."""
    return int.from_bytes(storage.read_bytes()[24:28], "big")


@SLOW
@pytest.mark.parametrize("version", VERSIONS)
def test_a_migration_writes_each_batch_in_one_transaction_and_the_app_reads_every_point(
    built: None, tmp_path: Path, cli: Any, version: str
) -> None:
    app = App(tmp_path / "deployment", version)
    app.run(("seed", "12"))
    seeded = app.read()
    target = tmp_path / "target"
    target.mkdir()
    new_toml = target / "new.toml"
    new_toml.write_text(
        app.config.read_text().replace(f'path = "{app.qdrant}"', f'path = "{target / "qdrant"}"'),
        encoding="utf-8",
    )
    result = cli("migrate", "--to", str(new_toml), "--batch-size", "5", "--json", config=app.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["copied"] == 12 and report["batches"] == 3 and report["verified"] is True
    # the collection's table made (one transaction), then one per batch, never one per point
    assert _transactions(target / "qdrant" / "collection" / "mem0" / "storage.sqlite") <= 1 + 3
    app.write_mem0_config(target / "mem0.json", target / "qdrant")
    on_target = app.read(mem0_config=target / "mem0.json")  # the app's qdrant-client loads them
    assert on_target == seeded
