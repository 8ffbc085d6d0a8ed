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
    from memsync.config.schema import SnapshotConfig

    defaults = SnapshotConfig().model_dump()
    defaults["verify_cycle"] = "30d"  # shown as it is written in TOML
    assert defaults["keep_daily"] == 0 and defaults["directory"] is None
    assert shown["snapshot"] == {**defaults, "keep_daily": 7}  # every key shown, filled
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


def test_show_redacts_by_name_whatever_the_type_and_url_credentials(cli, tmp_path):
    path = tmp_path / "memsync.toml"
    path.write_text(
        '[mem0.llm.config]\nX-Api-Key = "secret-1"\nprivate_key = "secret-2"\n'
        'access_key_id = "secret-3"\npw = "secret-4"\nopenai_base_url = "https://u:secret-5@h/v1"\n'
        'numeric_token = 123456789\nkeys = ["secret-6"]\napiKey = "secret-7"\n'
        'aws_secret_access_key = "secret-8"\nmax_tokens = 2000\nmodel = "gpt-4o-mini"\n'
        "[mem0.llm.config.headers]\nAuthorization = 'Bearer secret-9'\n"
        '[mem0.graph_store.config]\nurl = "bolt://neo:secret-10@db:7687"\n'
    )
    result = cli("config", "show", "--json", config=path)
    text = cli("config", "show", config=path)
    assert result.code == 0 and text.code == 0
    llm = result.json()["config"]["mem0"]["llm"]["config"]
    for name in ("X-Api-Key", "private_key", "access_key_id", "pw", "numeric_token", "keys"):
        assert llm[name] == "<redacted>", name
    assert llm["openai_base_url"] == "https://<redacted>@h/v1"
    assert llm["max_tokens"] == 2000 and llm["model"] == "gpt-4o-mini"
    assert "mem0.llm.config.max_tokens = 2000" in text.out
    for number in range(1, 11):
        assert f"secret-{number}" not in result.out + text.out, number
    assert "123456789" not in result.out + text.out


def test_show_renders_toml_dates_in_mem0_as_iso_text(cli, tmp_path):
    path = tmp_path / "memsync.toml"
    path.write_text("[mem0.llm.config]\nsince = 2024-01-01\nstamp = 1979-05-27T07:32:00Z\n")
    assert cli("config", "validate", config=path).code == 0
    result = cli("config", "show", "--json", config=path)
    assert result.code == 0
    assert result.json()["config"]["mem0"]["llm"]["config"] == {
        "since": "2024-01-01",
        "stamp": "1979-05-27T07:32:00+00:00",
    }
    text = cli("config", "show", config=path)
    assert text.code == 0 and 'mem0.llm.config.since = "2024-01-01"' in text.out


def test_hostile_files_exit_10_never_1(cli, tmp_path):
    (tmp_path / "m.json").write_bytes(b"\xff")
    cases = {
        "tilde.toml": 'state_dir = "~nosuchuser/s"\n',
        "nonutf.toml": 'mem0_config_file = "m.json"\n',
        "deep.toml": "[mem0.llm]\nconfig = " + "{a=" * 400 + "1" + "}" * 400 + "\n",
        "nan.toml": "[mem0.llm.config]\ntemperature = nan\n",
        "ping.toml": '[daemon]\nping_url = "hc-ping.com/0b7e-SECRET-UUID"\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        for action in ("validate", "show"):
            result = cli("config", action, "--json", config=tmp_path / name)
            assert result.code == 10 and result.out == "", (name, action, result.err)
            assert "SECRET" not in result.err


def test_forget_with_an_undecodable_secret_file_exits_10_naming_the_key(
    make_deployment, cli, tmp_path
):
    key = tmp_path / "key"
    key.write_bytes(b"\xff\xfe-SECRET-KEY")
    deployment = make_deployment(
        count=3, extra_config=f'[mem0.llm.config]\napi_key = {{file = "{key}"}}\n'
    )
    deployment.close()
    assert deployment.seeded is not None
    victim = deployment.seeded.live[0]
    result = cli("forget", victim, "--yes", "--no-snapshot", "--json", config=deployment.config)
    assert result.code == 10, result.err
    message = json.loads(result.err)["message"]
    assert message == (
        f"configuration {deployment.config}: mem0.llm.config.api_key: secret file {key} "
        "is not UTF-8 text"
    )
