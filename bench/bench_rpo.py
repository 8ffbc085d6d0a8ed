"""Issue 27's promises measured: memories lost on a lost disk (RPO), and the bytes shipped an hour.

Usage::

    .venv/bin/python bench/bench_rpo.py [--size 100000] [--rounds 3] [--window 15 45]
                                        [--cost-seconds 300] [--skip-cost] [--skip-rpo]

``make tools`` first (the pinned Litestream binary). Every round and the cost run work on a
fresh copy of ``app_deployment``'s template of ``--size`` memories under ``bench/out/``
(removed after it), with ``[protect]`` (a directory replica beside the store), ``memsync
protect`` and ``memsync daemon`` running Litestream, and the benchmark's app
(``app_process.py --acks FILE``: mem0's ``Memory.add`` every 50 ms, each acknowledged add logged
with its time and memory id, flushed; the demo's app searches before each add, which at 100,000
points in embedded Qdrant takes seconds).

**RPO rounds.** A ``snapshot create`` and ``snapshot verify`` first (the daily snapshot), then protection and the app;
at a random moment in ``--window`` seconds after the app is ready (the seed is printed), a lost
disk: the app, the daemon and Litestream SIGKILLed (the moment is taken just before), then the
store directories deleted (``qdrant/``, and history.db with its ``-wal`` and ``-shm``: in this
layout history.db's directory also holds the config and the replica). Then ``memsync restore
--at latest --force`` and, memory by memory, each add acknowledged before the loss looked up in
the restored pair (its history ADD row and its point, by qdrant-client's own key): missing ones
are lost (exit 4, the seam or the check after unsettled, is counted too and reported as a
miss, its JSON kept under ``bench/out/``). Reported per round: acknowledged, lost, the seconds between the newest kept write and
the loss, lost writes older than a kept one (holes: must be 0), the restore's wall seconds, and
what restoring the daily snapshot would have lost (every add since it). Target: the lost writes
are all within 10 s of the loss in every round, no hole (exit 1 otherwise).

**Cost run.** ``snapshot create`` of the same deployment (its ``size_bytes``: the full
snapshot), then protection, Litestream's first snapshot of each file waited for, and the app
for ``--cost-seconds``. Bytes shipped: the growth of the replica directory's files over the
run (Litestream's lz4 WAL segments; the generation's first snapshots before it are reported
apart). WAL bytes written: the frames SQLite appended, read back as the shipped segments
decompressed (``lz4 -dc``: every frame Litestream copied from the WAL); the app's ``wchar``
from ``/proc/<pid>/io`` over the same run (every byte it passed to ``write``, its ack log
subtracted: WAL frames plus any checkpoint it ran) is printed beside it. Extrapolated to an
hour at the measured rate. Targets: shipped ≤ 2x the WAL bytes, and shipped an hour < 2% of the
full snapshot (exit 1 on a miss).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pickle
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
import app_deployment  # noqa: E402

from tests.helpers import litestream  # noqa: E402

OUT = REPO / "bench" / "out"
PY = sys.executable
RPO_TARGET_S = 10.0
SHIPPED_PER_WAL = 2.0
HOUR_SHARE = 0.02


def memsync(config: Path, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "memsync", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def must(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise SystemExit(f"{what} exited {done.returncode}: {done.stderr[-3000:]}")
    return done.stdout


class Protected:
    """A fresh copy with [protect], ``memsync protect`` and the daemon running Litestream."""

    def __init__(self, template: Path, name: str) -> None:
        self.root = app_deployment.fresh_copy(template, OUT / name)
        self.replica = self.root / "replica"
        binary = litestream.ensure()
        section = (  # [app] python: reconcile's writes (the seam) run in the app's interpreter
            f'\n[app]\npython = "{PY}"\n'
            f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{self.replica}"\n'
        )
        self.config = app_deployment.write_config(self.root, app=section)
        self.acks = self.root.parent / f"{name}-acks.log"
        self.acks.unlink(missing_ok=True)
        self.daemon: subprocess.Popen[bytes] | None = None
        self.app: subprocess.Popen[str] | None = None

    def snapshot(self) -> dict:
        """``snapshot create`` then ``snapshot verify`` (restore --at takes meta.json from it)."""
        made = json.loads(must(memsync(self.config, "snapshot", "create", "--json"), "snapshot"))
        must(memsync(self.config, "snapshot", "verify", made["id"]), "snapshot verify")
        return made

    def protect(self) -> None:
        must(memsync(self.config, "protect", "--json"), "protect")
        self.daemon = subprocess.Popen(
            [PY, "-m", "memsync", "--config", str(self.config), "daemon"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "daemon.log").open("w"),
            start_new_session=True,  # its own group: Litestream dies with it on the loss
        )
        deadline = time.monotonic() + 300
        while memsync(self.config, "protect", "--status", "--json").returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("the daemon never got every file replicated in 300 s")
            time.sleep(0.5)

    def start_app(self) -> float:
        self.app = subprocess.Popen(
            [PY, str(REPO / "bench/app_process.py"), str(self.root), "--acks", str(self.acks)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=(self.root / "app.log").open("w"),
            text=True,
        )
        assert self.app.stdout is not None
        line = self.app.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit(
                f"the app did not start: {(self.root / 'app.log').read_text()[-2000:]}"
            )
        return time.time()

    def lose_disk(self) -> float:
        """SIGKILL the app, the daemon and Litestream; delete the store; the loss's moment."""
        assert self.app is not None and self.daemon is not None
        lost_at = time.time()
        self.app.kill()
        os.killpg(self.daemon.pid, signal.SIGKILL)
        self.app.wait()
        self.daemon.wait()
        shutil.rmtree(self.root / "qdrant")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.root / 'history.db'}{suffix}").unlink(missing_ok=True)
        return lost_at

    def stop(self) -> None:
        for process in (self.app, self.daemon):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=120)

    def acked(self) -> list[tuple[float, str]]:
        rows = [line.split() for line in self.acks.read_text().splitlines() if line.strip()]
        return [(float(at), memory_id) for at, memory_id in rows]

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.acks.unlink(missing_ok=True)


def point_key(memory_id: str) -> str:
    """qdrant-client's local key of a point id (``CollectionPersistence.encode_key``)."""
    return base64.b64encode(pickle.dumps(memory_id, protocol=4)).decode()


def kept(root: Path, memory_ids: list[str]) -> set[str]:
    """The memory ids with both a history ADD row and a point in the store at ``root``."""
    history = sqlite3.connect(f"file:{root / 'history.db'}?mode=ro", uri=True)
    added = {
        row[0]
        for row in history.execute("SELECT memory_id FROM history WHERE event = 'ADD'")
        if row[0] in set(memory_ids)
    }
    history.close()
    points = sqlite3.connect(f"file:{app_deployment.storage_path(root)}?mode=ro", uri=True)
    present = {
        memory_id
        for memory_id in added
        if points.execute("SELECT 1 FROM points WHERE id = ?", (point_key(memory_id),)).fetchone()
    }
    points.close()
    return present


def rpo_round(template: Path, number: int, window: tuple[float, float], seed: int) -> dict:
    deployment = Protected(template, f"rpo-{number}")
    try:
        daily = deployment.snapshot()
        daily_at = time.time()
        deployment.protect()
        ready = deployment.start_app()
        delay = random.Random(seed).uniform(*window)
        time.sleep(delay)  # the unannounced moment: the wait is the experiment, not a poll
        lost_at = deployment.lose_disk()
        began = time.perf_counter()
        restored = memsync(deployment.config, "restore", "--at", "latest", "--force", "--json")
        restore_s = time.perf_counter() - began
        if restored.returncode not in (0, 4):  # 4: restored, but the seam or check failed
            must(restored, "restore --at latest")
        report = json.loads(restored.stdout)
        if restored.returncode:
            kept_report = OUT / f"rpo-{number}-restore.json"
            kept_report.write_text(restored.stdout)
            print(f"restore --at exited 4: its report kept in {kept_report}", file=sys.stderr)
        acked = [(at, memory_id) for at, memory_id in deployment.acked() if at <= lost_at]
        back = kept(deployment.root, [memory_id for _, memory_id in acked])
        lost = [(at, memory_id) for at, memory_id in acked if memory_id not in back]
        newest_kept = max((at for at, memory_id in acked if memory_id in back), default=ready)
        holes = [memory_id for at, memory_id in lost if at < newest_kept]
        return {
            "round": number,
            "seed": seed,
            "loss_after_s": round(lost_at - ready, 1),
            "acked": len(acked),
            "lost": len(lost),
            "newest_kept_to_loss_s": round(lost_at - newest_kept, 2),
            "oldest_lost_to_loss_s": round(
                lost_at - min((at for at, _ in lost), default=lost_at), 2
            ),
            "holes": len(holes),
            "restore_s": round(restore_s, 1),
            "exit": restored.returncode,
            "seam": len(report["at"]["seam"]),
            "reconciled": report["at"]["reconciled"],
            "check_error": report.get("check_error"),
            "daily_snapshot_lost": len(acked),
            "daily_snapshot_lost_s": round(lost_at - daily_at, 1),
            "daily_snapshot_id": daily["id"],
        }
    finally:
        deployment.stop()
        deployment.remove()


def replica_bytes(replica: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in replica.rglob("*") if p.is_file()}


def first_snapshots_in(replica: Path, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    names = ("history.db", "collection/mem0")
    while not all(any((replica / n).glob("generations/*/snapshots/*")) for n in names):
        if time.monotonic() > deadline:
            raise SystemExit(f"Litestream wrote no first snapshot in {timeout_s:.0f} s")
        time.sleep(0.5)


def wchar(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise SystemExit(f"no wchar in /proc/{pid}/io")


def cost_run(template: Path, seconds: float) -> dict:
    deployment = Protected(template, "rpo-cost")
    try:
        full = deployment.snapshot()["size_bytes"]
        deployment.protect()
        first_snapshots_in(deployment.replica)
        deployment.start_app()
        assert deployment.app is not None
        time.sleep(2)  # let the first segments after the first snapshots land before counting
        before = replica_bytes(deployment.replica)
        acks_before = deployment.acks.stat().st_size if deployment.acks.exists() else 0
        written_before = wchar(deployment.app.pid)
        adds_before = len(deployment.acked())
        began = time.monotonic()
        time.sleep(seconds)  # the measured hour, shortened: nothing to poll for
        written = wchar(deployment.app.pid) - written_before
        written -= deployment.acks.stat().st_size - acks_before
        adds = len(deployment.acked()) - adds_before
        elapsed = time.monotonic() - began
        deployment.stop()  # SIGTERM: the daemon stops Litestream after its last sync
        after = replica_bytes(deployment.replica)
        new = {path: size for path, size in after.items() if path not in before}
        grown = sum(size - before[path] for path, size in after.items() if path in before)
        shipped = sum(new.values()) + grown
        wal = 0
        for path in new:
            if "/wal/" in path:
                wal += len(
                    subprocess.run(["lz4", "-dc", path], capture_output=True, check=True).stdout
                )
        snapshots_new = sum(size for path, size in new.items() if "/snapshots/" in path)
        per_hour = shipped / elapsed * 3600
        return {
            "seconds": round(elapsed, 1),
            "adds": adds,
            "adds_per_s": round(adds / elapsed, 2),
            "shipped_bytes": shipped,
            "shipped_snapshot_bytes_in_run": snapshots_new,
            "first_snapshots_bytes": sum(before.values()),
            "wal_frames_bytes": wal,
            "app_wchar_bytes": written,
            "shipped_per_wal": round(shipped / wal, 3) if wal else None,
            "shipped_per_hour_bytes": round(per_hour),
            "full_snapshot_bytes": full,
            "hour_share_of_snapshot": round(per_hour / full, 4),
            "bytes_per_add": round(shipped / adds) if adds else None,
        }
    finally:
        deployment.stop()
        deployment.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, nargs=2, default=(15.0, 45.0))
    parser.add_argument("--cost-seconds", type=float, default=300)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-rpo", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    template = app_deployment.template(OUT, args.size, 0)
    missed = []
    if not args.skip_rpo:
        seeds = random.SystemRandom()
        rounds = []
        for number in range(args.rounds):
            rounds.append(rpo_round(template, number, tuple(args.window), seeds.randrange(2**32)))
            print(json.dumps(rounds[-1]), flush=True)
        worst = max(r["oldest_lost_to_loss_s"] for r in rounds)
        print(
            f"RPO: lost {[r['lost'] for r in rounds]} memories of {[r['acked'] for r in rounds]} "
            f"acknowledged; newest kept write {[r['newest_kept_to_loss_s'] for r in rounds]} s "
            f"before the loss; oldest lost write at most {worst} s before it (target <= "
            f"{RPO_TARGET_S} s); the daily snapshot would have lost "
            f"{[r['daily_snapshot_lost'] for r in rounds]}; restore --at "
            f"{statistics.median(r['restore_s'] for r in rounds)} s (median)"
        )
        if worst > RPO_TARGET_S or any(r["holes"] for r in rounds):
            missed.append(f"RPO: {worst} s of memories lost (target <= {RPO_TARGET_S} s)")
        partial = [r["round"] for r in rounds if r["exit"]]
        if partial:
            missed.append(f"restore --at exited 4 (seam or check unsettled) in rounds {partial}")
    if not args.skip_cost:
        cost = cost_run(template, args.cost_seconds)
        print(json.dumps(cost), flush=True)
        print(
            f"cost: {cost['shipped_bytes'] / 1e6:.2f} MB shipped in {cost['seconds']} s "
            f"({cost['adds']} adds), {cost['shipped_per_wal']}x the {cost['wal_frames_bytes'] / 1e6:.2f} "
            f"MB of WAL frames (target <= {SHIPPED_PER_WAL}x); an hour at this rate: "
            f"{cost['shipped_per_hour_bytes'] / 1e6:.1f} MB, {cost['hour_share_of_snapshot']:.1%} "
            f"of the {cost['full_snapshot_bytes'] / 1e6:.1f} MB full snapshot (target < "
            f"{HOUR_SHARE:.0%}), extrapolated"
        )
        if cost["shipped_per_wal"] is None or cost["shipped_per_wal"] > SHIPPED_PER_WAL:
            missed.append(f"shipped {cost['shipped_per_wal']}x the WAL (target <= 2x)")
        if cost["hour_share_of_snapshot"] >= HOUR_SHARE:
            missed.append(
                f"an hour ships {cost['hour_share_of_snapshot']:.1%} of a full snapshot "
                f"(target < {HOUR_SHARE:.0%})"
            )
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
