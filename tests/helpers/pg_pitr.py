"""A PostgreSQL cluster that archives its WAL, and its recovery to a time (Postgres' own PITR).

What docs/how-to/pgvector.md ("Point-in-time recovery") tells users to do, done with the
``pgserver`` wheel's binaries: ``archive_mode`` with an ``archive_command`` that copies each
finished WAL segment, a ``pg_basebackup``, and a new data directory from that base backup with
``restore_command``, ``recovery_target_time`` and ``recovery_target_action = 'promote'``.
Under root, pgserver runs the server as the ``pgserver`` user: the archive and the recovered
data directory are given to it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


def _server(data: Path) -> Any:
    with warnings.catch_warnings():  # platformdirs: root's session has no XDG_RUNTIME_DIR
        warnings.simplefilter("ignore", UserWarning)
        import pgserver

        return pgserver.get_server(data, cleanup_mode=None)


def _commands() -> tuple[Any, Path]:
    from pgserver._commands import POSTGRES_BIN_PATH, pg_ctl

    return pg_ctl, Path(POSTGRES_BIN_PATH)


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() != 0:
        return
    user = pwd.getpwnam("pgserver")
    for each in [path, *path.rglob("*")]:
        os.chown(each, user.pw_uid, user.pw_gid, follow_symlinks=False)


def _user() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None


@dataclass
class ArchivingCluster:
    """A cluster in ``root`` (short: its socket lives there) archiving to ``root/archive``."""

    root: Path
    url: str = ""
    started: list[Path] = field(default_factory=list)

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    def start(self) -> None:
        import psycopg

        self.archive.mkdir(parents=True)
        _give_to_server_user(self.archive)
        data = self.root / "data"
        server = _server(data)
        self.started.append(data)
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("ALTER SYSTEM SET archive_mode = on")
            connection.execute(
                "ALTER SYSTEM SET archive_command = "
                f"'test ! -f {self.archive}/%f && cp %p {self.archive}/%f'"
            )
        pg_ctl, _ = _commands()
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=data, user=_user(), timeout=60)
        self.url = str(_server(data).get_uri())

    def base_backup(self) -> Path:
        """``pg_basebackup`` of the cluster as it is now (its WAL comes from the archive)."""
        _, binaries = _commands()
        base = self.root / "base"
        command = [str(binaries / "pg_basebackup"), "-d", self.url, "-D", str(base)]
        subprocess.run([*command, "-X", "none", "-c", "fast"], check=True, capture_output=True)
        return base

    def archive_current(self, timeout_s: float = 60.0) -> None:
        """Switch to a new WAL segment and wait until the archiver has copied the finished one."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            (segment,) = connection.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        deadline = time.monotonic() + timeout_s
        while not (self.archive / segment).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"WAL segment {segment} was not archived in {timeout_s} s")
            time.sleep(0.05)

    def recover_to(self, base: Path, target: datetime, name: str = "recovered") -> str:
        """A new cluster from ``base``, recovered to ``target`` and promoted; its conninfo."""
        data = self.root / name
        shutil.copytree(base, data)
        for leftover in [data / "postmaster.pid", data / "log", *data.glob(".s.PGSQL.*")]:
            leftover.unlink(missing_ok=True)
        (data / "recovery.signal").touch()
        with (data / "postgresql.auto.conf").open("a") as conf:
            conf.write(
                f"restore_command = 'cp {self.archive}/%f %p'\n"
                f"recovery_target_time = '{target.isoformat()}'\n"
                "recovery_target_action = 'promote'\n"
                "archive_mode = off\n"
            )
        _give_to_server_user(data)
        data.chmod(0o700)
        server = _server(data)
        self.started.append(data)
        return str(server.get_uri())

    def stop(self) -> None:
        pg_ctl, _ = _commands()
        for data in reversed(self.started):
            try:
                pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=data, user=_user(), timeout=60)
            except subprocess.CalledProcessError:
                pass  # not running
        self.started.clear()


@contextmanager
def archiving_cluster(root: Path) -> Iterator[ArchivingCluster]:
    """Start an archiving cluster in ``root``; stop it and every recovered one afterwards."""
    cluster = ArchivingCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
