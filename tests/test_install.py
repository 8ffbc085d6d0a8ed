"""ops/install.sh: dry run changes nothing; a real run into scratch directories is idempotent."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "UNITS_DIR": str(tmp_path / "units"),
           "ETC_DIR": str(tmp_path / "etc")}
    (tmp_path / "units").mkdir(exist_ok=True)
    return subprocess.run(["bash", str(ROOT / "ops/install.sh"), "--user", "root", "--deployment",
                           str(tmp_path / "srv"), "--snapshots", str(tmp_path / "backups"), *extra],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


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
    service = (tmp_path / "units" / "memsync.service").read_text()
    assert f"ReadWritePaths={tmp_path / 'srv'} {tmp_path / 'backups'}" in service and "User=root" in service
    assert oct((tmp_path / "backups").stat().st_mode & 0o777) == "0o700"
