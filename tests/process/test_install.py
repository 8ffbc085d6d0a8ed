"""ops/install.sh: dry run changes nothing; a real run into scratch directories is idempotent."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "UNITS_DIR": str(tmp_path / "units"),
        "ETC_DIR": str(tmp_path / "etc"),
    }
    (tmp_path / "units").mkdir(exist_ok=True)
    return subprocess.run(
        [
            "bash",
            str(ROOT / "ops/install.sh"),
            "--user",
            "root",
            "--deployment",
            str(tmp_path / "srv"),
            "--snapshots",
            str(tmp_path / "backups"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_dry_run_changes_nothing(tmp_path):
    result = run(tmp_path, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would install" in result.stdout and not list((tmp_path / "units").iterdir())
    assert not (tmp_path / "etc").exists()


def test_install_is_idempotent_and_keeps_an_edited_config(tmp_path):
    assert run(tmp_path).returncode == 0
    config = tmp_path / "etc" / "memsync.toml"
    config.write_text(config.read_text() + "\n# edited by the operator\n")
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "# edited by the operator" in config.read_text()
    assert f"1. {config} was there and is kept as it is" in second.stdout
    service = (tmp_path / "units" / "memsync.service").read_text()
    assert (
        f"ReadWritePaths={tmp_path / 'srv'} {tmp_path / 'backups'}" in service
        and "User=root" in service
    )
    assert oct((tmp_path / "backups").stat().st_mode & 0o777) == "0o700"


def test_a_config_with_stores_in_different_places_puts_every_written_path_in_the_units(tmp_path):
    import sys

    qdrant, history, textfile = (
        tmp_path / "vectors" / "qdrant",
        tmp_path / "hist" / "history.db",
        tmp_path / "prom" / "m.prom",
    )
    for directory in (qdrant, history.parent):
        directory.mkdir(parents=True)
    config = tmp_path / "memsync.toml"
    config.write_text(
        f'mem0_dir = "{tmp_path / "mem0"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[mem0]\nhistory_db_path = "{history}"\n[mem0.vector_store]\nprovider = "qdrant"\n'
        f'[mem0.vector_store.config]\npath = "{qdrant}"\nembedding_model_dims = 384\n'
        f'[daemon]\ncheck_every = "15m"\ntextfile_path = "{textfile}"\n'
        f'[protect]\ndirectory = "{tmp_path / "replica"}"\n'  # Litestream writes it
    )
    memsync = Path(sys.executable).with_name("memsync")
    result = run(tmp_path, "--config", str(config), "--memsync", str(memsync))
    assert result.returncode == 0, result.stderr
    service = (tmp_path / "units" / "memsync.service").read_text()
    line = next(x for x in service.splitlines() if x.startswith("ReadWritePaths="))
    paths = line.removeprefix("ReadWritePaths=").split()
    # existing directories as they are; ones that do not exist yet with "-" (systemd skips them)
    assert {
        str(tmp_path / "vectors"),
        str(tmp_path / "hist"),
        f"-{tmp_path / 'prom'}",
        f"-{tmp_path / 'mem0'}",
        f"-{tmp_path / 'state'}",
        f"-{tmp_path / 'replica'}",
        str(tmp_path / "backups"),
        str(tmp_path / "srv"),
    } == set(paths)
    assert not (
        tmp_path / "etc" / "memsync.toml"
    ).exists()  # the operator's config is used, not the example
    assert f"1. your config {config} is used as it is" in result.stdout  # not "edit" another
    assert str(tmp_path / "etc" / "memsync.toml") not in result.stdout


def test_an_invalid_config_stops_the_install_before_it_changes_anything(tmp_path):
    import sys

    config = tmp_path / "memsync.toml"
    config.write_text("[snapshot]\nkeep_daily = -1\n")
    result = run(
        tmp_path,
        "--config",
        str(config),
        "--memsync",
        str(Path(sys.executable).with_name("memsync")),
    )
    assert result.returncode == 2 and "memsync config validate" in result.stderr
    assert not list((tmp_path / "units").iterdir()) and not (tmp_path / "etc").exists()


def test_paths_with_spaces_quotes_ampersands_hashes_and_percents_survive_into_the_units(tmp_path):
    import shlex
    import shutil
    import sys

    odd = tmp_path / "a&b #1 50% it's"
    qdrant, history = odd / "my qdrant", tmp_path / "h&h" / "history.db"
    qdrant.mkdir(parents=True)
    history.parent.mkdir()
    config = tmp_path / "conf dir" / "memsync.toml"
    config.parent.mkdir()
    config.write_text(  # TOML literal strings: the path holds a single quote
        f"mem0_dir = '''{odd / 'mem0'}'''\nstate_dir = '''{odd / 'state'}'''\n"
        f"[mem0]\nhistory_db_path = '''{history}'''\n[mem0.vector_store]\nprovider = 'qdrant'\n"
        f"[mem0.vector_store.config]\npath = '''{qdrant}'''\nembedding_model_dims = 384\n"
    )
    memsync = Path(sys.executable).with_name("memsync")
    result = run(tmp_path, "--config", str(config), "--memsync", str(memsync))
    assert result.returncode == 0, result.stderr
    service = tmp_path / "units" / "memsync.service"
    text = service.read_text()
    line = next(x for x in text.splitlines() if x.startswith("ReadWritePaths="))
    words = [w.replace("%%", "%") for w in shlex.split(line.removeprefix("ReadWritePaths="))]
    assert set(words) == {
        str(odd),
        str(tmp_path / "h&h"),
        str(tmp_path / "backups"),
        str(tmp_path / "srv"),
    }
    exec_start = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    assert shlex.split(exec_start.removeprefix("ExecStart="))[-2:] == ["--config", str(config)]
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (Debian package systemd)"
    checked = subprocess.run(
        [analyze, "verify", str(service)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    dry = run(tmp_path, "--config", str(config), "--memsync", str(memsync), "--dry-run")
    assert (
        dry.returncode == 0 and line in dry.stdout
    )  # a dry run shows exactly what a real run writes


def test_with_a_config_no_default_snapshot_directory_is_created_or_made_writable(tmp_path):
    import sys

    qdrant, history = tmp_path / "qdrant", tmp_path / "mem0" / "history.db"
    config = tmp_path / "memsync.toml"
    config.write_text(
        f'mem0_dir = "{tmp_path / "mem0"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[mem0]\nhistory_db_path = "{history}"\n[mem0.vector_store]\nprovider = "qdrant"\n'
        f'[mem0.vector_store.config]\npath = "{qdrant}"\nembedding_model_dims = 384\n'
        f'[snapshot]\ndirectory = "{tmp_path / "snaps"}"\n'
    )
    (tmp_path / "units").mkdir()
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "UNITS_DIR": str(tmp_path / "units"),
        "ETC_DIR": str(tmp_path / "etc"),
    }
    memsync = Path(sys.executable).with_name("memsync")
    argv = ["bash", str(ROOT / "ops/install.sh"), "--user", "root", "--dry-run"]
    argv += ["--config", str(config), "--memsync", str(memsync)]
    dry = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "/var/backups/memsync" not in dry.stdout  # the config's own directory is the one
    # every path the config writes is under tmp_path: the units' one writable path
    assert f"units/memsync.service (User=root, ReadWritePaths={tmp_path})" in dry.stdout
