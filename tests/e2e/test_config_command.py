"""``memsync config validate|show`` in process: exit statuses, JSON, and no secret ever printed."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "ops" / "memsync.example.toml"


def test_validate_accepts_the_example(cli):
    result = cli("config", "validate", "--json", config=EXAMPLE)
    assert result.code == 0 and result.json() == {
        "command": "config validate",
        "ok": True,
        "source": str(EXAMPLE),
    }
    assert cli("config", "validate", config=EXAMPLE).out.strip() == f"{EXAMPLE}: valid"


def test_validate_lists_every_problem_and_exits_10(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'state_dir = 3\ntypo = 1\n[snapshot]\nkeep_daily = -1\n[s3]\nbucket = "ok-bucket"\nsse = "aws:kms"\n'
        '[daemon]\ncheck_every = "soon"\ncheck_at = "25:00"\nstop_timeout_s = true\n'
    )
    result = cli("config", "validate", "--json", config=bad)
    assert result.code == 10 and result.out == ""
    error = json.loads(result.err)
    assert error["type"] == "exit_error" and error["code"] == 10
    for problem in (
        "state_dir: must be a non-empty path string (got 3)",
        "typo: unknown key",
        "snapshot.keep_daily: must be >= 0 (got -1)",
        "daemon.check_every:",
        "daemon.check_at:",
        "daemon.stop_timeout_s:",
        "s3.sse_kms_key_id: required",
        "daemon.check_at: give check_at",
    ):
        assert problem in error["message"], problem


def test_validate_of_a_missing_file_exits_10(cli, tmp_path):
    result = cli("config", "validate", config=tmp_path / "absent.toml")
    assert result.code == 10 and "file not found" in result.err and result.out == ""


def test_show_fills_defaults_and_never_prints_a_secret(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSYNC_TEST_KEY", "env-secret-value")
    key_file = tmp_path / "key"
    key_file.write_text("file-secret-value\n")
    path = tmp_path / "memsync.toml"
    path.write_text(
        f'state_dir = "state"\n[mem0.embedder]\nprovider = "openai"\n[mem0.embedder.config]\n'
        f'api_key = {{env = "MEMSYNC_TEST_KEY"}}\n[mem0.llm.config]\napi_key = "inline-secret-value"\n'
        f'token = {{file = "{key_file}"}}\n[snapshot]\nkeep_daily = 7\n'
        f'[daemon]\ncheck_every = "90m"\nping_url = "https://hc.example/ping-secret-uuid"\n'
    )
    result = cli("config", "show", "--json", config=path)
    assert result.code == 0
    shown = result.json()["config"]
    assert shown["state_dir"] == str(tmp_path / "state") and shown["work_dir"] == str(
        tmp_path / "state" / "tmp"
    )
    assert shown["snapshot"] == {
        "directory": None,
        "keep_last": 0,
        "keep_daily": 7,
        "keep_weekly": 0,
        "keep_monthly": 0,
        "encrypt_key_file": None,
        "signing_key_file": None,
    }
    assert (
        shown["s3"] is None
        and shown["daemon"]["check_every"] == "90m"
        and shown["daemon"]["stop_timeout_s"] == 120.0
    )
    assert shown["mem0"]["vector_store"] == {
        "provider": "qdrant",
        "config": {
            "path": "/tmp/qdrant",
            "collection_name": "mem0",
            "embedding_model_dims": 1536,
            "on_disk": False,
        },
    }
    assert shown["mem0"]["embedder"]["config"]["api_key"] == {"env": "MEMSYNC_TEST_KEY"}
    assert shown["mem0"]["llm"]["config"] == {
        "api_key": "<redacted>",
        "token": {"file": str(key_file)},
    }
    assert shown["daemon"]["ping_url"] == "<redacted>"
    text = cli("config", "show", config=path)
    assert (
        text.code == 0
        and "snapshot.keep_daily = 7" in text.out
        and 'daemon.check_every = "90m"' in text.out
    )
    for secret in (
        "env-secret-value",
        "file-secret-value",
        "inline-secret-value",
        "ping-secret-uuid",
    ):
        assert secret not in result.out + result.err + text.out + text.err, secret


def test_show_of_an_invalid_file_exits_10(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[snapshot]\nkeep_last = -1\n")
    result = cli("config", "show", "--json", config=bad)
    assert result.code == 10 and result.out == "" and "snapshot.keep_last" in result.err
