"""doctor on a deployment that is new or oddly placed: one verdict per fact, the right fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def test_one_container_layer_gets_one_verdict_for_every_store_on_it(deployment: Any, tmp_path):
    """The Qdrant directory and history.db both in an overlay (a container's root): both errors."""
    assert shutil.which("unshare"), "util-linux unshare is needed"
    deployment.close()
    root = deployment.paths.root
    layers = {name: tmp_path / name for name in ("lower", "upper", "work", "merged")}
    for directory in layers.values():
        directory.mkdir()
    shutil.copytree(root, layers["lower"] / "dep")
    config = layers["lower"] / "dep" / deployment.config.name
    config.write_text(config.read_text().replace(str(root), str(layers["merged"] / "dep")))
    options = f"lowerdir={layers['lower']},upperdir={layers['upper']},workdir={layers['work']}"
    script = (
        f"mount -t overlay overlay -o {options} {layers['merged']} && exec {sys.executable} "
        f"-m memsync doctor --json --config {layers['merged'] / 'dep' / config.name}"
    )
    completed = subprocess.run(  # noqa: S603 - fixed command line
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],  # noqa: S607
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    report = json.loads(completed.stdout)
    merged = layers["merged"] / "dep"
    verdicts = {
        r["path"]: r["status"]
        for r in report["results"]
        if r["code"] in ("path-volatile", "path-mount")
        and r["path"] in (str(deployment.paths.qdrant).replace(str(root), str(merged)),
                          str(deployment.paths.history_db).replace(str(root), str(merged)))
    }  # fmt: skip
    assert sorted(verdicts.values()) == ["error", "error"], report["results"]
    assert completed.returncode == 3


def test_a_store_that_is_not_there_has_no_write_route_and_its_mount_line_says_so(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    moved = deployment.paths.qdrant.with_name("qdrant-moved")
    deployment.paths.qdrant.rename(moved)  # a wrong path, or a lost disk
    try:
        report = cli("doctor", "--json", config=deployment.config).json()
    finally:
        moved.rename(deployment.paths.qdrant)
    (route,) = [r for r in report["results"] if r["code"] == "write-route"]
    assert route["status"] != "ok" and "is not there" in route["message"], route
    (mount,) = [
        r
        for r in report["results"]
        if r["code"] == "path-mount" and r["path"] == str(deployment.paths.qdrant)
    ]
    assert "Qdrant directory (not there) would be on" in mount["message"], mount


def test_the_lock_and_route_lines_agree_while_the_app_writes_through_its_agent(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    from tests.helpers.app import AppProcess

    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, quiet_writes=True) as app:
        report = cli("doctor", "--json", config=deployment.config).json()
        app.stop()
    lines = {r["code"]: r["message"] for r in report["results"]}
    assert "writes go through the app's memsync agent" in lines["write-route"], lines
    held = [r["message"] for r in report["results"] if r["code"] == "store-lock"]
    assert any("is held by" in line for line in held), held
    assert not any("stopped" in line for line in held), held  # it said "need it stopped"
