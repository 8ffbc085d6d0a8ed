"""Litestream on a real mem0 deployment: the app's write latency, WAL growth, bytes shipped, RPO.

Usage::

    .venv/bin/python bench/bench_protect.py [--size 100000] [--seconds 180]

Two runs of the same app (``app_process.py``: mem0ai's ``Memory.add`` every 50 ms on a generated
deployment in WAL mode): without Litestream, then with Litestream (``make tools``) replicating
history.db and the collection's storage.sqlite to moto's S3 server on 127.0.0.1 (sync-interval
1 s), with a ``memsync check`` half-way. Then a lost disk at an unannounced moment (Litestream
killed, the store directories deleted), ``litestream restore`` of both files, and the count of
acknowledged memories that did not come back. Bytes shipped are the bucket's objects; the WAL
bytes the app wrote are the shipped WAL segments decompressed (``lz4 -dc``). Exits 1 when a target
is missed: memories lost beyond 10 s of writes, shipped WAL over 2x the WAL written, a failed
app write, or the app's median write latency over 1.2x the unprotected run's.
"""

import json
import shutil
import signal
import sqlite3
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


def dbs(root):
    return [root / "history.db", app_deployment.storage_path(root)]


def wal_frames(db: Path) -> int:
    """Frames appended since the last WAL reset: (size - 32) / (page + 24)."""
    wal = Path(str(db) + "-wal")
    if not wal.exists():
        return 0
    size = wal.stat().st_size
    page = 4096
    return max(0, (size - 32) // (page + 24))


def bucket_bytes(s3, bucket):
    total = 0
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            total += obj["Size"]
            count += 1
    return total, count


def run(label, protect, size, seconds, s3=None, endpoint=None):
    ls_bin = litestream.ensure()
    tpl = app_deployment.template(OUT, size, 0)
    root = app_deployment.fresh_copy(tpl, OUT / f"run-{label}")
    for db in dbs(root):
        c = sqlite3.connect(db)
        assert c.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        c.close()
    full = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    ls = None
    if protect:
        cfg = root / "litestream.yml"
        cfg.write_text(
            json.dumps(
                {
                    "access-key-id": "x",
                    "secret-access-key": "x",
                    "dbs": [
                        {
                            "path": str(db),
                            "replicas": [
                                {
                                    "type": "s3",
                                    "bucket": "lsrep",
                                    "path": f"{label}/{i}",
                                    "endpoint": endpoint,
                                    "region": "us-east-1",
                                    "force-path-style": True,
                                    "sync-interval": "1s",
                                }
                            ],
                        }
                        for i, db in enumerate(dbs(root))
                    ],
                }
            )
        )
        ls = subprocess.Popen(
            [str(ls_bin), "replicate", "-config", str(cfg)],
            stdout=open(root / "ls.log", "w"),
            stderr=subprocess.STDOUT,
        )
        time.sleep(2)
    subprocess.run(
        [PY, str(REPO / "bench/appctl.py"), "start", str(root), "--interval", "0.05"], check=True
    )
    started = time.time()
    samples = []
    while time.time() - started < seconds:
        time.sleep(5)
        sample = {
            "t": round(time.time() - started, 1),
            "wal_bytes": [
                Path(str(d) + "-wal").stat().st_size if Path(str(d) + "-wal").exists() else 0
                for d in dbs(root)
            ],
        }
        if protect:
            sample["bucket"] = bucket_bytes(s3, "lsrep")
        samples.append(sample)
        if abs(sample["t"] - seconds / 2) < 3 and protect:
            t0 = time.time()
            r = subprocess.run(
                [PY, "-m", "memsync", "--config", str(root / "memsync.toml"), "check", "--json"],
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            sample["check_s"] = round(time.time() - t0, 2)
            sample["check_rc"] = r.returncode
    result = {"label": label, "size": size, "full_bytes": full, "samples": samples}
    if protect:
        # a lost disk at an unannounced moment: Litestream can no longer read (killed), the app's
        # later writes land nowhere we count; then the store directories are deleted
        tpl_adds = (
            sqlite3.connect(tpl / "history.db")
            .execute("SELECT count(*) FROM history WHERE event='ADD'")
            .fetchone()[0]
        )
        lost_at = time.time()
        ls.send_signal(signal.SIGKILL)
        ls.wait()
        subprocess.run([PY, str(REPO / "bench/appctl.py"), "stop", str(root)], check=True)
        result["bucket_final"] = bucket_bytes(s3, "lsrep")
        wal_c = wal_u = snap_c = 0
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket="lsrep", Prefix=label + "/"
        ):
            for obj in page.get("Contents", []):
                if "/wal/" in obj["Key"]:
                    body = s3.get_object(Bucket="lsrep", Key=obj["Key"])["Body"].read()
                    wal_c += len(body)
                    wal_u += len(
                        subprocess.run(
                            ["lz4", "-dc"], input=body, capture_output=True, check=True
                        ).stdout
                    )
                else:
                    snap_c += obj["Size"]
        result["shipped_wal_lz4_bytes"] = wal_c
        result["shipped_wal_raw_bytes"] = wal_u
        result["shipped_snapshot_bytes"] = snap_c
        for p in [
            root / "qdrant",
            root / "history.db",
            root / "history.db-wal",
            root / "history.db-shm",
        ]:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        restored = OUT / f"restored-{label}"
        shutil.rmtree(restored, ignore_errors=True)
        restored.mkdir()
        t0 = time.time()
        for i, db in enumerate(dbs(root)):
            subprocess.run(
                [
                    str(ls_bin),
                    "restore",
                    "-config",
                    str(root / "litestream.yml"),
                    "-o",
                    str(restored / f"{i}.db"),
                    str(db),
                ],
                check=True,
                capture_output=True,
            )
        result["restore_s"] = round(time.time() - t0, 2)
        h = sqlite3.connect(restored / "0.db")
        back = h.execute("SELECT count(*) FROM history WHERE event='ADD'").fetchone()[0]
        newest = h.execute("SELECT max(created_at) FROM history").fetchone()[0]
        pts = (
            sqlite3.connect(restored / "1.db").execute("SELECT count(*) FROM points").fetchone()[0]
        )
        result["restored_app_adds"] = back - tpl_adds
        result["restored_points"] = pts
        result["restored_newest"] = newest
        result["lost_at"] = lost_at
    else:
        subprocess.run([PY, str(REPO / "bench/appctl.py"), "stop", str(root)], check=True)
    recs = list((root / "records").glob("records-*.json"))
    if recs:
        data = json.loads(recs[0].read_text())
        lat = sorted(w[1] for w in data["writes"])
        result["writes"] = len(lat)
        result["failed"] = sum(1 for w in data["writes"] if not w[2])
        if protect:
            acked = [w for w in data["writes"] if w[2] and w[0] + w[1] / 1000 < result["lost_at"]]
            result["acked_before_loss"] = len(acked)
            result["lost_memories"] = len(acked) - result["restored_app_adds"]
            result["newest_acked_s_before_loss"] = round(
                result["lost_at"] - max(w[0] + w[1] / 1000 for w in acked), 3
            )
        result["p50_ms"] = lat[len(lat) // 2]
        result["p99_ms"] = lat[int(len(lat) * 0.99)]
    return result


def main() -> int:
    import argparse

    import boto3
    from moto.server import ThreadedMotoServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=180)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    s3.create_bucket(Bucket="lsrep")
    plain = run("plain", False, args.size, args.seconds)
    guarded = run("protected", True, args.size, args.seconds, s3, endpoint)
    server.stop()
    rate = guarded["writes"] / args.seconds
    figures = {
        "memories lost": guarded["lost_memories"],
        "seconds of writes lost": round(guarded["lost_memories"] / rate, 2),
        "shipped WAL / WAL written": round(
            guarded["shipped_wal_lz4_bytes"] / guarded["shipped_wal_raw_bytes"], 2
        ),
        "shipped MB per hour": round(
            guarded["shipped_wal_lz4_bytes"] / args.seconds * 3600 / 1e6, 1
        ),
        "full snapshot MB (lz4)": round(guarded["shipped_snapshot_bytes"] / 1e6, 1),
        "app p50 ms without / with": (plain["p50_ms"], guarded["p50_ms"]),
        "app p99 ms without / with": (plain["p99_ms"], guarded["p99_ms"]),
        "failed writes": plain["failed"] + guarded["failed"],
        "restore s (both files)": guarded["restore_s"],
    }
    print(json.dumps(figures, indent=1))
    missed = [
        name
        for name, bad in [
            ("RPO <= 10 s", figures["seconds of writes lost"] > 10),
            ("shipped <= 2x WAL written", figures["shipped WAL / WAL written"] > 2),
            ("0 failed app writes", figures["failed writes"] > 0),
            ("app p50 <= 1.2x unprotected", guarded["p50_ms"] > 1.2 * plain["p50_ms"]),
        ]
        if bad
    ]
    for name in missed:
        print(f"target missed: {name}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
