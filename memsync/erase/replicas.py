"""Erasure with ``[protect]``: Litestream's replicas start over in a new generation.

An erased text lives on in what Litestream shipped: the WAL segments and snapshots of the
replica's generations, and its local shadow WAL beside each file (``.<name>-litestream/``).
Litestream 0.3 holds a read transaction on each file, so an erasure's checkpoint cannot
truncate a ``-wal`` file while it runs. ``renewal`` therefore stops it first: through the
daemon (``protect-hold.json``; the supervisor stops it and says so in ``protect-state.json``),
or directly when it runs without one. Inside, the erasure rewrites the files; ``renew`` then
removes each file's local Litestream state (a file without a ``generation`` makes Litestream
0.3.13 start a new generation, with a fresh snapshot of the rewritten file), lets Litestream run
again (the daemon, or a ``litestream replicate`` of memsync's own until the snapshots are
shipped, recorded in ``protect-erasure.json`` first: a retry stops one a kill left running),
waits until every file's new generation holds a snapshot on the replica, and only then removes
the older generations from it (every object version in a bucket). The restore points of the
older generations are lost: the report says from when to when. When a new
generation is not observed, nothing is removed and the report says what to do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import jobs, protection
from memsync.config import Config, ProtectConfig
from memsync.deployment import Deployment
from memsync.errors import MemsyncError, TryLaterError
from memsync.state import write_json_atomic
from memsync.stores import journal_mode
from memsync.stores.journal_mode import LiveFile
from memsync.utc import iso

logger = structlog.get_logger(__name__)

WAIT_S = 60.0  # for Litestream to stop, and for a new generation's snapshot on the replica
POLL_S = 0.2
SNAPSHOT_SUFFIX = ".snapshot.lz4"


def _files(deployment: Deployment) -> list[LiveFile]:
    config = deployment.config
    found = journal_mode.live_files(deployment.vector_store, config.history_db_path)
    return [f for f in found if f.mode == journal_mode.WAL]


def _first_time(objects: list[protection.ReplicaObject]) -> str | None:
    return iso(min(o.modified for o in objects)) if objects else None


def _entry(
    protect: ProtectConfig,
    config: Config,
    live: LiveFile,
    held: dict[str, list[protection.ReplicaObject]],
) -> dict[str, Any]:
    """One file's entry, before any change: its replica and the generations it holds."""
    objects = [o for found in held.values() for o in found]
    return {
        "label": live.label,
        "replica": protection.replica_where(protect, config, protection.replica_name(live)),
        "generations": sorted(held),
        "new_generation": None,
        "removed_generations": [],
        "restore_points_lost": {"from": _first_time(objects), "to": None},
    }


def plan(deployment: Deployment) -> dict[str, Any] | None:
    """What an erasure would do to the replicas (``forget --erase --dry-run``), or None.

    None without ``[protect]``. Reads the replicas only.

    Raises:
        UnavailableError: the store's metadata or the bucket cannot be read.
    """
    config = deployment.config
    protect = config.protect
    if protect is None:
        return None
    files = [
        _entry(
            protect,
            config,
            f,
            protection.generations(
                protection.replica_objects(protect, config, protection.replica_name(f))
            ),
        )
        for f in _files(deployment)
    ]
    return {"dry_run": True, "renewed": False, "files": files, "problem": None}


@dataclass
class Renewal:
    """Litestream held stopped for an erasure, then each replica renewed (``renew``)."""

    deployment: Deployment
    daemon: bool = False  # the daemon's supervisor runs Litestream (else memsync does, here)
    process: subprocess.Popen[bytes] | None = None  # a Litestream memsync started itself
    report: dict[str, Any] | None = None
    stopped: int | None = None  # a Litestream running without the daemon, stopped directly
    held_at: float = 0.0  # monotonic: when Litestream was held (writes since are not shipped)
    recorded: bool = False  # ``protect-erasure.json`` names the Litestream memsync started here

    @property
    def config(self) -> Config:
        """The deployment's configuration."""
        return self.deployment.config

    def stop(self) -> None:
        """Hold Litestream stopped: the daemon's (acknowledged), or an orphan's, directly.

        Raises:
            TryLaterError: Litestream did not stop within ``WAIT_S``.
        """
        config = self.config
        token = uuid.uuid4().hex  # the daemon echoes it once Litestream is stopped for this hold
        write_json_atomic(
            config.state_dir / protection.HOLD_FILE,
            {"pid": os.getpid(), "token": token, "why": "erasure"},
        )
        daemon = jobs.daemon_pid(config)
        self.held_at = self.held_at or time.monotonic()
        deadline = time.monotonic() + WAIT_S
        self._stop_orphan(deadline)
        supervised = (config.state_dir / protection.STATE_FILE).exists()  # it ran Litestream
        if daemon is not None and daemon > 0 and supervised:
            while time.monotonic() < deadline:  # the supervisor answers within a tick
                if _state(config).get("hold") == token:
                    self.daemon = True
                    return
                time.sleep(POLL_S)
        pid = protection.running_pid(config)  # no daemon (or one not supervising): directly
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            self.stopped = pid
            while protection.running_pid(config) == pid and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if protection.running_pid(config) == pid:
                raise TryLaterError(
                    f"Litestream (pid {pid}) did not stop within {WAIT_S:g} s for the erasure",
                    f"stop it (kill {pid}), then run the same command again",
                )
            logger.info("litestream_stopped_for_erasure", pid=pid)

    def _stop_orphan(self, deadline: float) -> None:
        """Stop the Litestream a killed erasure started (``protect-erasure.json``); drop the record.

        Only the process the record proves (``protection.erasure_litestream``), and only when
        the erasure that started it is gone. One it handed over to ``protect-state.json`` (it
        replaced a Litestream it stopped) is stopped as that one is, and replaced again.

        Raises:
            TryLaterError: it did not stop within ``WAIT_S``.
        """
        config = self.config
        found = protection.erasure_litestream(config)
        if found is None or found[1] is not None:  # nothing recorded, or its erasure runs
            return
        pid = found[0]
        if pid is not None and pid != protection.running_pid(config):
            started = protection.started_at(pid)
            os.kill(pid, signal.SIGTERM)
            while protection.started_at(pid) == started and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if protection.started_at(pid) == started:
                raise TryLaterError(
                    f"Litestream (pid {pid}), left running by a killed erasure, did not stop "
                    f"within {WAIT_S:g} s",
                    f"stop it (kill {pid}), then run the same command again",
                )
            logger.warning("litestream_orphan_stopped", pid=pid)
        (config.state_dir / protection.ERASURE_FILE).unlink(missing_ok=True)

    def renew(self, unverified: list[str]) -> dict[str, Any]:
        """New generations for every file, then the older ones removed from the replicas.

        ``unverified``: why the erasure is not proven in the live files (then the older
        generations are kept: a new one would ship the text again). Returns the report
        (``forget --json``'s ``replicas``); its ``problem`` is None when every replica renewed.
        """
        protect = self.config.protect
        assert protect is not None
        try:
            self.stop()  # again: another renewal of this process (pending apply) let it run
            self.report = self._renew(protect, unverified)
        except MemsyncError as error:
            self.report = {
                "dry_run": False, "renewed": False, "files": [],
                "problem": f"{error.message} -> {error.hint or 'fix it'}, then run the same "
                "forget --erase again: the older generations are kept",
            }  # fmt: skip
        return self.report

    def _renew(self, protect: ProtectConfig, unverified: list[str]) -> dict[str, Any]:
        config = self.config
        files = _files(self.deployment)
        before = {
            f.path: protection.generations(
                protection.replica_objects(protect, config, protection.replica_name(f))
            )
            for f in files
        }
        entries = [_entry(protect, config, f, before[f.path]) for f in files]
        if not files:  # nothing in WAL mode: Litestream replicates nothing here
            return _report(entries, None)
        if unverified:
            return _report(entries, "the live files are not verified free of the text, so a new "
                           "generation would ship it again: the older generations are kept -> run "
                           "the same forget --erase again")  # fmt: skip
        for live in files:  # no generation: Litestream starts a new one with a snapshot
            shutil.rmtree(protection.meta_dir(live.path), ignore_errors=True)
        self._run_litestream()
        released = time.monotonic()
        deadline = time.monotonic() + WAIT_S
        fresh: dict[Path, tuple[str, list[protection.ReplicaObject]]] = {}
        while len(fresh) < len(files) and time.monotonic() < deadline:
            for live in files:
                if live.path not in fresh and (found := _new(protect, config, live, before)):
                    fresh[live.path] = found
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(POLL_S)
        missing = [f for f in files if f.path not in fresh]
        if missing:
            where = ", ".join(
                e["replica"] for e, f in zip(entries, files, strict=True) if f in missing
            )
            return _report(entries, f"no new generation reached {where} within {WAIT_S:g} s: "
                           "the older generations (which hold the erased text) are kept -> check "
                           "memsync protect --status and Litestream's log, then run the same "
                           "forget --erase again")  # fmt: skip
        for entry, live in zip(entries, files, strict=True):
            generation, snapshot = fresh[live.path]
            _remove(protect, config, live, entry["generations"])
            entry["removed_generations"] = entry["generations"]
            entry["new_generation"] = generation
            first_new = iso(min(o.modified for o in snapshot))
            lost = entry["restore_points_lost"]
            lost.update({"from": lost["from"] or first_new, "to": first_new})
        logger.info(
            "replicas_renewed", files=len(files), held_s=round(released - self.held_at, 3),
            snapshot_wait_s=round(time.monotonic() - released, 3),
        )  # fmt: skip
        return _report(entries, None)

    def _run_litestream(self) -> None:
        """Let Litestream run again: the daemon's (the hold goes), or one of memsync's own."""
        if self.daemon:
            release(self.config)
            return
        protect = self.config.protect
        assert protect is not None
        binary = shutil.which(protect.litestream) or protect.litestream
        path = str(protection.config_file(self.config))
        argv = [binary, "replicate", "-no-expand-env", "-config", path]
        record = self.config.state_dir / protection.ERASURE_FILE  # a kill leaves it findable
        token = uuid.uuid4().hex  # in its environment: ours even if killed before its pid is
        _record(record, token, None)
        self.recorded = True
        self.process = subprocess.Popen(  # noqa: S603 - the configured binary, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=self.stopped is not None,  # it replaces the one stopped: it stays
            env={**os.environ, protection.ERASURE_ENV: token},
        )
        pid = self.process.pid
        _record(record, token, pid)
        if self.stopped is not None:  # recorded as the daemon records its own
            write_json_atomic(
                self.config.state_dir / protection.STATE_FILE,
                {"pid": pid, "at": iso(datetime.now(UTC)), "replaced": self.stopped},
            )
            record.unlink()  # handed over: it stays, as the one it replaced did
            self.recorded = False

    def close(self) -> None:
        """Release the hold; stop a Litestream memsync started itself.

        Unless it replaces one that ran without the daemon, stopped for the erasure: then it
        stays, and protection with it.
        """
        release(self.config)
        process, self.process = self.process, None
        if process is not None and process.poll() is None and self.stopped is None:
            process.terminate()
            try:
                process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.recorded:  # stopped (or never started): nothing of this erasure runs on
            (self.config.state_dir / protection.ERASURE_FILE).unlink(missing_ok=True)
            self.recorded = False


def _record(path: Path, token: str, pid: int | None) -> None:
    """``protect-erasure.json``: this erasure, the token, and its Litestream once started."""
    me = os.getpid()
    started = None if pid is None else protection.started_at(pid)
    write_json_atomic(
        path,
        {"by": me, "by_started": protection.started_at(me), "token": token, "pid": pid,
         "started": started},
    )  # fmt: skip


def _report(entries: list[dict[str, Any]], problem: str | None) -> dict[str, Any]:
    return {"dry_run": False, "renewed": problem is None, "files": entries, "problem": problem}


def _state(config: Config) -> dict[str, Any]:
    try:
        found = json.loads((config.state_dir / protection.STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def release(config: Config) -> None:
    """Remove this process's hold (another process's stays)."""
    hold = protection.held_by(config)
    if hold is not None and hold[0] == os.getpid():
        (config.state_dir / protection.HOLD_FILE).unlink(missing_ok=True)


def _new(
    protect: ProtectConfig,
    config: Config,
    live: LiveFile,
    before: dict[Path, dict[str, list[protection.ReplicaObject]]],
) -> tuple[str, list[protection.ReplicaObject]] | None:
    """A generation the replica did not hold before, with its snapshot shipped; else None."""
    now = protection.generations(
        protection.replica_objects(protect, config, protection.replica_name(live))
    )
    for generation, objects in now.items():
        snapshots = [o for o in objects if o.key.endswith(SNAPSHOT_SUFFIX)]
        if generation not in before[live.path] and snapshots:
            return generation, snapshots
    return None


def _remove(protect: ProtectConfig, config: Config, live: LiveFile, old: list[str]) -> None:
    """Remove the ``old`` generations from the file's replica (every object version).

    Raises:
        UnavailableError: the bucket refused (the generations not yet removed stay).
    """
    name = protection.replica_name(live)
    if protect.directory is not None:
        for generation in old:
            shutil.rmtree(protect.directory / name / "generations" / generation)
        return
    from memsync.s3.store import ObjectStore  # boto3 loads only for an S3 replica

    assert config.s3 is not None
    store = ObjectStore(config.s3.model_copy(update={"prefix": ""}))
    key = protection.replica_of(protect, config, name)["path"]
    for generation in old:
        store.delete_versions(store.list_versions(f"{key}/generations/{generation}/"))


def hold(deployment: Deployment) -> Renewal | None:
    """Litestream held stopped now (None without ``[protect]``): ``renewal`` releases it.

    Raises:
        TryLaterError: Litestream did not stop (the hold is released).
    """
    if deployment.config.protect is None:
        return None
    held = Renewal(deployment)
    try:
        held.stop()
    except BaseException:
        held.close()
        raise
    return held


@contextmanager
def renewal(deployment: Deployment, held: Renewal | None = None) -> Iterator[Renewal | None]:
    """Litestream held stopped for the block (None without ``[protect]``); released after.

    ``held``: a hold taken earlier (``hold``: an erasure inside a maintenance window), kept
    for the block and released after it.

    Raises:
        TryLaterError: Litestream did not stop.
    """
    held = held if held is not None else hold(deployment)
    try:
        yield held
    finally:
        if held is not None:
            held.close()


def _generations(count: int) -> str:
    return f"{count} older generation{'' if count == 1 else 's'}"


def restore_points_note(report: dict[str, Any]) -> list[str]:
    """The text lines of a ``replicas`` report (``forget --erase``). Pure."""
    lines = []
    for entry in report["files"]:
        if report["dry_run"]:
            lines.append(
                f"would start a new generation of {entry['label']} at {entry['replica']} and "
                f"remove its {_generations(len(entry['generations']))}: the restore points from "
                f"{entry['restore_points_lost']['from'] or 'none'} until the erasure would be lost"
            )
        elif entry["new_generation"] is not None:
            lost = entry["restore_points_lost"]
            lines.append(
                f"replica {entry['replica']}: new generation {entry['new_generation']}, "
                f"{_generations(len(entry['removed_generations']))} removed: the restore points "
                f"from {lost['from']} to {lost['to']} are lost"
            )
    if report.get("problem"):
        lines.append(f"replicas NOT renewed: {report['problem']}")
    return lines
