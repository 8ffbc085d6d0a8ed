"""The wheel users install, in a fresh virtual environment with no extras, on a real deployment.

``make test`` builds the wheel and its environment (``build/wheel-venv``) and points
``MEMSYNC_WHEEL_VENV`` at it; ``MEMSYNC_TEST_REQUIRE=wheel`` (set by ``make test``) makes a
missing environment a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

import memsync

REPO = Path(memsync.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_venv() -> Path:
    configured = os.environ.get("MEMSYNC_WHEEL_VENV")
    venv = Path(configured).resolve() if configured else None
    if venv is None or not (venv / "bin" / "memsync").is_file():
        message = (
            "no installed wheel: MEMSYNC_WHEEL_VENV does not name one; run `make test`, or "
            "`make wheel` then MEMSYNC_WHEEL_VENV=build/wheel-venv .venv/bin/pytest ..."
        )
        if "wheel" in os.environ.get("MEMSYNC_TEST_REQUIRE", "").split(","):
            pytest.fail(message)
        pytest.skip(message)
    return venv


def installed(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(venv / "bin" / "memsync"), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_installed_memsync_is_the_wheel_not_the_checkout(wheel_venv, tmp_path):
    probe = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c", "import memsync; print(memsync.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    )
    location = Path(probe.stdout.strip()).resolve()
    assert location.is_relative_to(wheel_venv) and not location.is_relative_to(REPO / "memsync")


def test_version_and_help_work_without_extras(wheel_venv, tmp_path):
    version = installed(wheel_venv, "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert memsync.__version__ in version.stdout
    helped = installed(wheel_venv, "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "check" in helped.stdout and "doctor" in helped.stdout


def test_check_and_doctor_json_on_a_real_deployment(wheel_venv, deployment, cli, tmp_path):
    check = installed(
        wheel_venv, "check", "--json", "--config", str(deployment.config), cwd=tmp_path
    )
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["command"] == "check" and report["ok"] is True
    assert report["counts"] == cli("check", "--json", config=deployment.config).json()["counts"]
    assert report["counts"]["points"] > 0
    doctor = installed(
        wheel_venv, "doctor", "--json", "--config", str(deployment.config), cwd=tmp_path
    )
    assert doctor.returncode == 0, doctor.stderr + doctor.stdout
    assert json.loads(doctor.stdout)["check"]["errors"] == 0


def test_check_finds_damage_through_the_installed_wheel(wheel_venv, deployment, tmp_path):
    victim = sorted(deployment.seeded.live)[0]
    deployment.close()
    with sqlite3.connect(deployment.paths.history_db) as db:
        db.execute("DELETE FROM history WHERE memory_id = ?", (victim,))
    db.close()
    check = installed(
        wheel_venv, "check", "--json", "--config", str(deployment.config), cwd=tmp_path
    )
    assert check.returncode == 3, check.stderr
    findings = json.loads(check.stdout)["findings"]
    assert {(f["code"], f["memory_id"]) for f in findings if f["severity"] == "error"} == {
        ("orphan-point", victim)
    }
