"""The shipped alert rules and dashboard, checked by Prometheus' own promtool on real textfiles.

``ops/monitoring/memsync.rules.yml`` passes ``promtool check rules``; every query of
``ops/monitoring/memsync-dashboard.json`` parses as PromQL; and the alerts fire, or stay quiet,
on the textfile a real ``memsync job check`` writes for a damaged and for a healthy deployment
(``promtool test rules``, the textfile's samples as its input series).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memsync.demo import deployment as build
from tests.process.test_daemon import with_daemon

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "monitoring" / "memsync.rules.yml"
DASHBOARD = ROOT / "ops" / "monitoring" / "memsync-dashboard.json"
DAEMON_DOC = ROOT / "docs" / "reference" / "commands" / "daemon.md"
SAMPLE = re.compile(r"^(?P<series>[a-z_]+(?:\{[^}]*\})?) (?P<value>\S+)$")


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, (
        "promtool is missing: `make test` installs Debian's prometheus package (make tools)"
    )
    return subprocess.run(
        [tool, *args], input=stdin or "", capture_output=True, text=True, timeout=60
    )


def documented_series() -> set[str]:
    return set(re.findall(r"^\| `(memsync_[a-z_]+)", DAEMON_DOC.read_text(), re.MULTILINE))


def test_the_rules_and_every_dashboard_query_pass_promtool_and_cover_every_series(tmp_path):
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    as_rules = tmp_path / "dashboard-queries.yml"  # a recording rule per query: promtool parses it
    as_rules.write_text(
        "groups:\n  - name: dashboard\n    rules:\n"
        + "".join(
            f"      - record: dashboard:query_{n}\n        expr: {json.dumps(q.replace('$instance', '.*'))}\n"
            for n, q in enumerate(queries)
        )
    )
    parsed = promtool("check", "rules", str(as_rules))
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    documented = documented_series()
    assert len(documented) >= 15
    label = {"memsync_job"}  # the job's label, not a series
    named = set(re.findall(r"memsync_[a-z_]+", " ".join(queries))) - label
    assert named == documented, f"dashboard lacks {documented - named}, names {named - documented}"
    alerted = set(re.findall(r"memsync_[a-z_]+", RULES.read_text())) - label
    assert alerted <= documented, alerted - documented


def textfile_of_a_check(deployment, cli, tmp_path: Path, damage: bool) -> str:
    textfile = tmp_path / "memsync.prom"
    with_daemon(
        deployment, f'check_at = "02:00"\nsnapshot_at = "03:30"\ntextfile_path = "{textfile}"\n'
    )
    if damage:  # a point lost, its history intact: check's missing-point, an error
        build.delete_with_failing_history(
            deployment.memory, deployment.paths, deployment.seeded.live[0]
        )
    deployment.close()
    result = cli("job", "check", "--json", config=deployment.config)
    assert result.code == (3 if damage else 0), result.err
    text = textfile.read_text()
    linted = promtool("check", "metrics", stdin=text)  # Prometheus' lint of the exposition
    assert linted.returncode == 0, linted.stdout + linted.stderr
    return text


def unit_test(text: str, alerts: list[dict]) -> str:
    """A ``promtool test rules`` file: the textfile's samples, steady for 37 h, as instance vps."""
    series = []
    for line in text.splitlines():
        found = SAMPLE.match(line)
        if found is None:
            continue
        name, _, labels = found["series"].partition("{")
        labels = labels.rstrip("}")
        joined = f'{name}{{{labels + "," if labels else ""}instance="vps"}}'
        series.append({"series": joined, "values": f"{found['value']}x2220"})
    return json.dumps({
        "rule_files": [str(RULES)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}],
    })  # fmt: skip


def run_unit_test(tmp_path: Path, content: str) -> None:
    path = tmp_path / "memsync.test.yml"
    path.write_text(content)  # JSON is YAML
    tested = promtool("test", "rules", str(path))
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.slow(reason="a real check job on a seeded deployment, then promtool")
def test_a_damaged_deployment_fires_the_failing_job_the_findings_and_the_snapshot_age(
    deployment, cli, tmp_path
):
    text = textfile_of_a_check(deployment, cli, tmp_path, damage=True)
    assert 'memsync_findings{code="missing-point",severity="error"} 1' in text
    vps = {"instance": "vps"}
    alerts = [
        {"eval_time": "20m", "alertname": "MemsyncJobFailing", "exp_alerts": [{
            "exp_labels": {**vps, "memsync_job": "check", "severity": "warning"},
            "exp_annotations": {
                "summary": "memsync job check is failing on vps",
                "description": "Its last run did not do its work or found problems. "
                "`memsync status` gives the reason and the next step.",
            },
        }]},
        {"eval_time": "20m", "alertname": "MemsyncErrorFindings", "exp_alerts": [{
            "exp_labels": {**vps, "code": "missing-point", "severity": "critical"},
            "exp_annotations": {
                "summary": "memsync check found 1 missing-point on vps",
                "description": "The vector store and history.db disagree. `memsync check` lists "
                "them; `memsync reconcile --dry-run` shows the repair "
                "(docs/reference/findings.md#missing-point).",
            },
        }]},
        # The snapshot job never succeeded (timestamp 0): old once 36 h have passed.
        {"eval_time": "20m", "alertname": "MemsyncSnapshotOld", "exp_alerts": []},
        {"eval_time": "37h", "alertname": "MemsyncSnapshotOld", "exp_alerts": [{
            "exp_labels": {**vps, "memsync_job": "snapshot", "severity": "critical"},
            "exp_annotations": {
                "summary": "memsync's last good snapshot on vps is older than 36 h",
                "description": "Age 1d 13h 0m 0s (infinite when no snapshot ever succeeded). "
                "`memsync status`, then `memsync snapshot create`.",
            },
        }]},
        # Not started yet: its jobs are "not run yet", never overdue.
        {"eval_time": "20m", "alertname": "MemsyncJobOverdue", "exp_alerts": []},
    ]  # fmt: skip
    run_unit_test(tmp_path, unit_test(text, alerts))


@pytest.mark.slow(reason="a real check job on a seeded deployment, then promtool")
def test_a_healthy_deployment_fires_no_failing_job_no_finding_and_no_queue_alert(
    deployment, cli, tmp_path
):
    text = textfile_of_a_check(deployment, cli, tmp_path, damage=False)
    quiet = ["MemsyncJobFailing", "MemsyncJobOverdue", "MemsyncErrorFindings", "MemsyncQueueStuck",
             "MemsyncWindowLeftOpen", "MemsyncUploadsPending", "MemsyncTripwire"]  # fmt: skip
    alerts = [{"eval_time": "2h", "alertname": name, "exp_alerts": []} for name in quiet]
    run_unit_test(tmp_path, unit_test(text, alerts))


@pytest.mark.slow(reason="a real check job, then a real Prometheus scraping its textfile")
def test_a_real_prometheus_scraping_the_textfile_raises_the_alerts_with_their_labels(
    deployment, cli, tmp_path
):
    """Through a scrape, as node_exporter serves it: Prometheus' own ``job`` label stays."""
    import http.server
    import socket
    import threading
    import time
    import urllib.request

    text = textfile_of_a_check(deployment, cli, tmp_path, damage=True)

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    exporter = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {
                        "job_name": "node",
                        "static_configs": [
                            {"targets": [f"127.0.0.1:{exporter.server_address[1]}"]}
                        ],
                    }
                ],
            }
        )  # fmt: skip
    )
    server = subprocess.Popen(
        [shutil.which("prometheus") or "prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wanted = {"MemsyncJobFailing", "MemsyncErrorFindings", "MemsyncSnapshotOld"}
        alerts: dict[str, dict] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not wanted <= set(alerts):
            time.sleep(0.5)
            try:
                url = f"http://127.0.0.1:{port}/api/v1/alerts"
                with urllib.request.urlopen(url, timeout=5) as answer:
                    found = json.load(answer)["data"]["alerts"]
            except OSError:
                continue  # not listening yet
            alerts = {a["labels"]["alertname"]: a["labels"] for a in found}
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
        exporter.shutdown()
    assert wanted <= set(alerts), f"{alerts}\n{err.decode()[-2000:]}"
    assert alerts["MemsyncJobFailing"]["memsync_job"] == "check"
    assert alerts["MemsyncJobFailing"]["job"] == "node"  # the scrape's own, never ours
    assert alerts["MemsyncSnapshotOld"]["memsync_job"] == "snapshot"
    assert alerts["MemsyncErrorFindings"]["code"] == "missing-point"


def test_a_file_without_replica_or_lagging_fires_protection_lagging_and_a_fresh_one_does_not(
    tmp_path,
):
    from memsync.jobs import protection_gauges

    text = protection_gauges([("history.db", 0.4), ("collection mem0", None)])
    linted = promtool("check", "metrics", stdin=text)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    vps = {"instance": "vps"}
    alerts = [
        {"eval_time": "3m", "alertname": "MemsyncProtectionLagging", "exp_alerts": []},
        {"eval_time": "10m", "alertname": "MemsyncProtectionLagging", "exp_alerts": [{
            "exp_labels": {**vps, "file": "collection mem0", "severity": "critical"},
            "exp_annotations": {
                "summary": "collection mem0 on vps is not replicated by Litestream, or its "
                "replica is behind its writes",
                "description": "A lost disk now would lose the writes since the replica's last "
                "shipment. `memsync protect --status` names the file and why; `memsync doctor` "
                "shows protection; journalctl -u memsync says why Litestream stopped.",
            },
        }]},
    ]  # fmt: skip
    run_unit_test(tmp_path, unit_test(text, alerts))
