"""Benchmark snapshot capture against a bare VACUUM INTO, and S3 upload against boto3's upload_file.

Usage: ``python bench/bench_snapshot.py [--sizes 20000,100000] [--out bench/out] [--repeat 3]``
       ``python bench/bench_snapshot.py --create-only [--pairs 5]``   (the issue 26 target alone)

Reuses (or generates) the deployments of ``bench_check.py``. For each size, in the same run:

* ``capture``: memsync's capture step of ``snapshot create`` (meta.json, then ``VACUUM INTO`` of
  every collection and of history.db into a fresh directory), median of ``--repeat`` runs;
* ``vacuum``: a bare ``VACUUM INTO`` of the same files (baseline); ``cp``: a plain file copy
  (reference only: it is not a consistent copy of a live file);
* ``create``: the whole ``snapshot create`` (capture + integrity_check + decoding + check +
  sha256 + fsync), for reference;
* ``upload``: memsync's upload of the snapshot to an S3 protocol server on 127.0.0.1 (moto)
  against a plain ``boto3`` ``upload_file`` of the same files to the same server;
* **pairs** (issue 26): ``--pairs`` interleaved pairs, in this process, of a bare ``VACUUM INTO``
  of both files with an fsync of each copy (the floor) and a whole ``create_snapshot`` (no
  agent: the deployment is at rest); the CPU seconds (user + system, every thread) and wall
  seconds of each, and the median of the per-pair ratios. Each snapshot is removed after its
  pair. Exits 1 when the median CPU ratio is over ``TARGET_CPU_RATIO`` (printing it and the
  target).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from memsync import config as config_module
from memsync.demo.bulk import generate
from memsync.deployment import Deployment
from memsync.snapshot import create_snapshot, object_store, upload_snapshot
from memsync.stores import capture
from memsync.stores.backends import vector_store_for

HERE = Path(__file__).resolve().parent
TARGET_CPU_RATIO = 2.0  # issue 26: snapshot create within 2x of bare VACUUM INTO + fsync


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def median_of(repeat: int, make) -> float:
    return statistics.median(make() for _ in range(repeat))


def bare_vacuum(sources: list[Path], dest: Path, fsync: bool = False) -> None:
    for index, source in enumerate(sources):
        connection = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        copy = dest / f"{index}.sqlite"
        connection.execute("VACUUM INTO ?", (str(copy),))
        connection.close()
        if fsync:
            descriptor = os.open(copy, os.O_RDONLY)
            os.fsync(descriptor)
            os.close(descriptor)


def cpu_s() -> float:
    """User + system CPU seconds of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured(function) -> tuple[float, float]:
    """``(cpu s, wall s)`` of ``function()``."""
    cpu, wall = cpu_s(), time.perf_counter()
    function()
    return cpu_s() - cpu, time.perf_counter() - wall


def create_pairs(config, sources: list[Path], out: Path, pairs: int) -> dict:
    """Interleaved pairs of bare VACUUM INTO + fsync and ``create_snapshot``; medians of ratios."""
    rows = []
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(dir=out) as scratch:
            floor = measured(lambda: bare_vacuum(sources, Path(scratch), fsync=True))
        made = []
        deployment = Deployment.open(config)
        create = measured(lambda: made.append(create_snapshot(deployment, datetime.now(UTC))))
        shutil.rmtree(made[0].path)
        rows.append({"floor": floor, "create": create})
    return {
        "pairs": rows,
        "floor_cpu_s": statistics.median(r["floor"][0] for r in rows),
        "create_cpu_s": statistics.median(r["create"][0] for r in rows),
        "floor_wall_s": statistics.median(r["floor"][1] for r in rows),
        "create_wall_s": statistics.median(r["create"][1] for r in rows),
        "cpu_ratio": statistics.median(r["create"][0] / r["floor"][0] for r in rows),
        "wall_ratio": statistics.median(r["create"][1] / r["floor"][1] for r in rows),
    }


def prepared(size: int, out: Path) -> tuple[Path, Path, list[Path]]:
    """The deployment of ``size`` points (generated when missing), its sources, a snapshot dir."""
    root = out / f"deployment-{size}"
    if not (root / "memsync.toml").exists():
        root.mkdir(parents=True, exist_ok=True)
        generate(root, size)
    sources = [root / "qdrant/collection/mem0/storage.sqlite", root / "history.db"]
    return root, Path(tempfile.mkdtemp(dir=out, prefix="snapshots-")), sources


def create_only(sizes: list[int], out: Path, pairs: int) -> int:
    """The issue 26 pairs alone (no S3 server); exit 1 when a median CPU ratio misses the target."""
    print(
        "| points | store MB | VACUUM INTO + fsync CPU s | create CPU s | CPU ratio "
        "| VACUUM INTO + fsync wall s | create wall s | wall ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    missed = []
    for size in sizes:
        root, snapshots_dir, sources = prepared(size, out)
        text = (root / "memsync.toml").read_text().split("\n[snapshot]")[0]
        config_path = root / "memsync-snapshot.toml"
        config_path.write_text(text + f'\n[snapshot]\ndirectory = "{snapshots_dir}"\n')
        config = config_module.load(config_path, os.environ)
        found = create_pairs(config, sources, out, pairs)
        shutil.rmtree(snapshots_dir)
        store_mb = sum(p.stat().st_size for p in sources) / 1e6
        print(
            f"| {size:,} | {store_mb:.0f} | {found['floor_cpu_s']:.2f} | {found['create_cpu_s']:.2f} "
            f"| {found['cpu_ratio']:.2f} | {found['floor_wall_s']:.2f} | {found['create_wall_s']:.2f} "
            f"| {found['wall_ratio']:.2f} |"
        )
        if found["cpu_ratio"] > TARGET_CPU_RATIO:
            missed.append(
                f"{size:,} points: CPU ratio {found['cpu_ratio']:.2f} > {TARGET_CPU_RATIO}"
            )
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--create-only", action="store_true", help="the issue 26 pairs alone")
    args = parser.parse_args()
    if args.create_only:
        sizes = [int(s) for s in args.sizes.split(",")]
        return create_only(sizes, Path(args.out).resolve(), args.pairs)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench-secret")
    import socket
    import subprocess

    import boto3

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The server runs in its own process, so it does not share the client's GIL.
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        root = Path(args.out) / f"deployment-{size}"
        if not (root / "memsync.toml").exists():
            root.mkdir(parents=True, exist_ok=True)
            generate(root, size)
        bucket = f"bench-{size}"
        client.create_bucket(Bucket=bucket)
        text = (root / "memsync.toml").read_text().split("\n[snapshot]")[0]
        snapshots_dir = Path(tempfile.mkdtemp(dir=args.out, prefix="snapshots-"))
        config_path = root / "memsync-snapshot.toml"
        config_path.write_text(
            text + f'\n[snapshot]\ndirectory = "{snapshots_dir}"\nkeep_last = 1\n'
            f'[s3]\nbucket = "{bucket}"\nprefix = "p"\nendpoint_url = "{endpoint}"\n'
            'region = "us-east-1"\n'
        )
        config = config_module.load(config_path, os.environ)
        sources = [root / "qdrant/collection/mem0/storage.sqlite", root / "history.db"]
        store_bytes = sum(p.stat().st_size for p in sources)

        def capture_once() -> float:
            with tempfile.TemporaryDirectory(dir=args.out) as scratch:
                return timed(
                    lambda: capture.capture(vector_store_for(config), config, Path(scratch) / "c")
                )

        def vacuum_once() -> float:
            with tempfile.TemporaryDirectory(dir=args.out) as scratch:
                return timed(lambda: bare_vacuum(sources, Path(scratch)))

        def cp_once() -> float:
            with tempfile.TemporaryDirectory(dir=args.out) as scratch:
                return timed(
                    lambda: [
                        shutil.copyfile(s, Path(scratch) / f"{i}") for i, s in enumerate(sources)
                    ]
                )

        capture_s = median_of(args.repeat, capture_once)
        vacuum_s = median_of(args.repeat, vacuum_once)
        cp_s = median_of(args.repeat, cp_once)
        created = None

        def create_once() -> None:
            nonlocal created
            created = create_snapshot(Deployment.open(config), datetime.now(UTC))

        create_s = timed(create_once)
        assert created is not None
        files = sorted(
            p for p in created.path.rglob("*") if p.is_file() and p.name != "manifest.json"
        )
        upload_bytes = sum(p.stat().st_size for p in files)

        def empty_bucket() -> None:
            for item in client.list_objects_v2(Bucket=bucket).get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])

        store = object_store(config)  # built once, like the plain client
        uploads, plains = [], []
        for _ in range(args.repeat):  # alternate, emptying the bucket each time
            uploads.append(timed(lambda: upload_snapshot(config, created.path, store=store)))
            empty_bucket()
            plains.append(
                timed(
                    lambda: [
                        client.upload_file(str(p), bucket, f"plain/{p.relative_to(created.path)}")
                        for p in files
                    ]
                )
            )
            empty_bucket()
        upload_s, plain_s = statistics.median(uploads), statistics.median(plains)
        shutil.rmtree(snapshots_dir)
        rows.append(
            (
                size,
                store_bytes,
                capture_s,
                vacuum_s,
                cp_s,
                create_s,
                upload_bytes,
                upload_s,
                plain_s,
            )
        )
    server.terminate()
    server.wait()
    print(
        f"{'points':>8} {'store MB':>9} {'capture s':>10} {'VACUUM s':>9} {'cp s':>6} {'capture/VACUUM':>15} "
        f"{'create s':>9} {'upload MB/s':>12} {'boto3 MB/s':>11} {'upload/boto3':>13}"
    )
    for (
        size,
        store_bytes,
        capture_s,
        vacuum_s,
        cp_s,
        create_s,
        upload_bytes,
        upload_s,
        plain_s,
    ) in rows:
        print(
            f"{size:>8} {store_bytes / 1e6:>9.0f} {capture_s:>10.2f} {vacuum_s:>9.2f} {cp_s:>6.2f} "
            f"{capture_s / vacuum_s:>15.2f} {create_s:>9.2f} {upload_bytes / 1e6 / upload_s:>12.0f} "
            f"{upload_bytes / 1e6 / plain_s:>11.0f} {plain_s / upload_s:>13.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
