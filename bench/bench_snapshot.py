"""Benchmark snapshot capture against a bare VACUUM INTO, and S3 upload against boto3's upload_file.

Usage: ``python bench/bench_snapshot.py [--sizes 20000,100000] [--out bench/out] [--repeat 3]``

Reuses (or generates) the deployments of ``bench_check.py``. For each size, in the same run:

* ``capture``: memsync's capture step of ``snapshot create`` (meta.json, then ``VACUUM INTO`` of
  every collection and of history.db into a fresh directory), median of ``--repeat`` runs;
* ``vacuum``: a bare ``VACUUM INTO`` of the same files (baseline); ``cp``: a plain file copy
  (reference only: it is not a consistent copy of a live file);
* ``create``: the whole ``snapshot create`` (capture + integrity_check + decoding + check +
  sha256 + fsync), for reference;
* ``upload``: memsync's upload of the snapshot to an S3 protocol server on 127.0.0.1 (moto)
  against a plain ``boto3`` ``upload_file`` of the same files to the same server.
"""

from __future__ import annotations

import argparse
import os
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


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def median_of(repeat: int, make) -> float:
    return statistics.median(make() for _ in range(repeat))


def bare_vacuum(sources: list[Path], dest: Path) -> None:
    for index, source in enumerate(sources):
        connection = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        connection.execute("VACUUM INTO ?", (str(dest / f"{index}.sqlite"),))
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
