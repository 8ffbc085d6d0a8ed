"""Configuration: every problem reported at once with its dotted path; defaults as mem0's."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync import config
from memsync.errors import ConfigError, ExitCode

ROOT = Path(__file__).resolve().parents[2]
ENV = {"HOME": "/home/op", "MEM0_DIR": "/srv/mem0dir"}


def parse(raw):
    return config.parse(raw, source="test.toml", base_dir=Path("/etc/memsync"), environ=ENV)


def test_example_config_loads_with_every_section():
    loaded = config.load(ROOT / "ops" / "memsync.example.toml", {"HOME": "/root"})
    assert loaded.qdrant_path == Path("/srv/agent/qdrant")
    assert loaded.history_db_path == Path("/srv/agent/mem0/history.db")
    assert loaded.expected_dims == (
        ("mem0.vector_store.config.embedding_model_dims", 384),
        ("mem0.embedder.config.embedding_dims", 384),
    )
    assert loaded.snapshot.keep_daily == 7
    assert loaded.s3 is not None and loaded.s3.prefix == "memsync/host1"
    assert loaded.daemon.jobs["check"].every is not None
    assert isinstance(loaded.mem0["embedder"]["config"]["api_key"], config.Secret)


def test_mem0_defaults_when_config_is_empty():
    loaded = parse({})
    assert loaded.qdrant_path == Path("/tmp/qdrant")
    assert loaded.collection == "mem0"
    assert loaded.expected_dims == (("mem0.vector_store.config.embedding_model_dims", 1536),)
    assert loaded.history_db_path == Path("/srv/mem0dir/history.db")
    assert loaded.state_dir == Path("/home/op/.local/state/memsync")
    assert loaded.work_dir == loaded.state_dir / "tmp"


def test_state_directory_from_systemd_when_not_configured():
    loaded = config.parse(
        {}, source="x", base_dir=Path("/"), environ={**ENV, "STATE_DIRECTORY": "/var/lib/memsync"}
    )
    assert loaded.state_dir == Path("/var/lib/memsync")


def test_every_problem_is_listed_with_its_dotted_path():
    raw = {
        "plugins": "not-a-list",
        "bogus": 1,
        "mem0": {
            "vector_store": {
                "provider": "chroma",
                "config": {"path": "relative/qdrant", "embedding_model_dims": -3},
            },
            "history_db_path": "rel.db",
        },
        "snapshot": {"keep_daily": -1},
        "s3": {"bucket": "Bad_Bucket"},
        "daemon": {"check_every": "soon", "prune_at": "25:00", "timezone": "Mars/Olympus"},
    }
    with pytest.raises(ConfigError) as raised:
        parse(raw)
    problems = "\n".join(raised.value.problems)
    for path in (
        "plugins:",
        "bogus:",
        "mem0.vector_store.provider:",
        "mem0.vector_store.config.path:",
        "mem0.vector_store.config.embedding_model_dims:",
        "mem0.history_db_path:",
        "snapshot.keep_daily:",
        "s3.bucket:",
        "daemon.check_every:",
        "daemon.prune_at:",
        "daemon.timezone:",
    ):
        assert path in problems, path
    assert raised.value.exit_code == ExitCode.CONFIG
    assert "(got -1)" in problems


def test_secret_reference_is_validated_but_not_resolved_at_load():
    loaded = parse(
        {"mem0": {"embedder": {"provider": "openai", "config": {"api_key": {"env": "NOPE"}}}}}
    )
    secret = loaded.mem0["embedder"]["config"]["api_key"]
    assert secret == config.Secret(env="NOPE")
    with pytest.raises(ConfigError, match="NOPE"):
        config.resolve_secrets(loaded.mem0, {})
    assert (
        config.resolve_secrets(loaded.mem0, {"NOPE": "k"})["embedder"]["config"]["api_key"] == "k"
    )


def test_secret_from_file_is_read_when_resolved(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    assert config.resolve_secrets({"a": config.Secret(file=str(key))}, {}) == {"a": "s3cret"}


def test_malformed_secret_reference_is_an_error():
    with pytest.raises(ConfigError, match="mem0.embedder.config.api_key"):
        parse({"mem0": {"embedder": {"config": {"api_key": {"env": "A", "file": "B"}}}}})


def test_server_mode_is_refused_until_supported():
    with pytest.raises(ConfigError, match="server mode"):
        parse({"mem0": {"vector_store": {"config": {"url": "http://q:6333", "api_key": "x"}}}})


def test_mem0_config_file_json_is_read(tmp_path):
    mem0_file = tmp_path / "mem0.json"
    mem0_file.write_text(
        '{"vector_store": {"provider": "qdrant", "config": {"path": "/data/q", "collection_name": "c"}}}'
    )
    loaded = config.parse(
        {"mem0_config_file": str(mem0_file)}, source="x", base_dir=tmp_path, environ=ENV
    )
    assert loaded.qdrant_path == Path("/data/q") and loaded.collection == "c"


def test_mem0_config_file_and_table_together_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not both"):
        parse({"mem0_config_file": "/x.json", "mem0": {}})


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        config.load(tmp_path / "absent.toml", ENV)


def test_invalid_toml_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[mem0\npath = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(bad, ENV)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2s", 2), ("15m", 900), ("6h", 21600), ("1d", 86400)],
    ids=["seconds", "minutes", "hours", "days"],
)
def test_durations_parse_with_their_unit(text, seconds):
    assert config.parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize(
    "text", ["0s", "5", "1w", "-1m", ""], ids=["zero", "bare", "weeks", "negative", "empty"]
)
def test_bad_durations_are_refused(text):
    with pytest.raises(ValueError):
        config.parse_duration(text)


def test_cross_field_rules_are_reported_with_the_per_field_problems():
    with pytest.raises(ConfigError) as raised:
        parse(
            {
                "snapshot": {"keep_last": "3", "nope": 1},
                "s3": {"bucket": "my-bucket", "sse": "aws:kms"},
                "daemon": {"check_at": "01:00", "check_every": "1h"},
            }
        )
    from memsync.config.schema import SnapshotConfig

    known = ", ".join(sorted(SnapshotConfig.model_fields))
    assert "keep_daily, keep_" in known and "signing_key_file" in known
    assert raised.value.problems == [
        "snapshot.keep_last: must be an integer (got '3')",
        f"snapshot.nope: unknown key (known: {known})",
        "s3.sse_kms_key_id: required when s3.sse is 'aws:kms'",
        "daemon.check_at: give check_at or check_every, not both",
    ]


def test_a_mistyped_key_of_mem0s_store_config_is_named_and_a_new_one_passes():
    with pytest.raises(ConfigError) as raised:
        parse({"mem0": {"vector_store": {"config": {"colection_name": "mine", "path": "/q"}}}})
    assert raised.value.problems == [
        "mem0.vector_store.config.colection_name: not a key of mem0's qdrant config (did you "
        "mean collection_name?); mem0 refuses it when the app starts"
    ]
    pg = {"provider": "pgvector", "config": {"dbname": "m", "hnws": False, "user": "u",
                                             "password": "p", "host": "h", "port": 5432}}  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        parse({"mem0": {"vector_store": pg}})
    assert [p.split(":")[0] for p in raised.value.problems] == ["mem0.vector_store.config.hnws"]
    newer = parse({"mem0": {"vector_store": {"config": {"path": "/q", "replication_factor": 2}}}})
    assert newer.qdrant_path == Path("/q")  # near no key of mem0's: a newer mem0's, passed on


def test_a_misspelt_provider_with_a_pgvector_connection_is_refused_not_read_as_tmp_qdrant():
    store = {"provder": "pgvector", "config": {"connection_string": "postgresql://h/db"}}
    with pytest.raises(ConfigError) as raised:
        parse({"mem0": {"vector_store": store}})
    assert raised.value.problems == [
        "mem0.vector_store.config.connection_string: a key of mem0's pgvector config, but the "
        "provider is qdrant (mem0.vector_store.provider is not set): set provider = "
        '"pgvector" in [mem0.vector_store]',
        "mem0.vector_store.provder: not a key of mem0's vector store (did you mean provider?); "
        "without it mem0 and memsync use embedded Qdrant at /tmp/qdrant",
    ]
    embedded_keys = {"provider": "pgvector", "config": {"connection_string": "x", "path": "/q"}}
    with pytest.raises(ConfigError) as raised:
        parse({"mem0": {"vector_store": embedded_keys}})
    assert [p.split(":")[0] for p in raised.value.problems] == ["mem0.vector_store.config.path"]


def test_paths_resolve_against_the_file_and_home():
    loaded = parse(
        {"state_dir": "state", "work_dir": "~/work", "snapshot": {"directory": "/abs/snaps"}}
    )
    assert loaded.state_dir == Path("/etc/memsync/state") and loaded.work_dir == Path(
        "/home/op/work"
    )
    assert loaded.snapshot.directory == Path("/abs/snaps")


def test_accepted_document_is_self_contained_and_parses_alike(tmp_path):
    import json

    from memsync.config import accepted

    (tmp_path / "mem0.yaml").write_text("vector_store:\n  config:\n    path: /data/q\n")
    path = tmp_path / "memsync.toml"
    path.write_text(
        'mem0_config_file = "mem0.yaml"\nstate_dir = "state"\n[daemon]\nprune_at = "03:10"\n'
    )
    document, loaded = accepted.load_self_contained(path, ENV)
    assert "mem0_config_file" not in document and document["mem0"] == {
        "vector_store": {"config": {"path": "/data/q"}}
    }
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps(accepted.jsonable(document)))
    (tmp_path / "mem0.yaml").write_text("[broken")
    again = config.load(path, ENV, text_from=kept)
    assert (
        again == loaded
        and again.qdrant_path == Path("/data/q")
        and again.state_dir == tmp_path / "state"
    )
    with pytest.raises(ConfigError, match="mem0_config_file"):
        config.load(path, ENV)


def test_app_defaults_configure_no_window_and_a_day_for_erasures():
    app = parse({}).app
    assert app.window is False and app.agent_socket is None
    assert app.max_pending.total_seconds() == 86400 and app.max_downtime_s == 60.0


@pytest.mark.parametrize(
    ("app", "problem"),
    [
        ({"stop_command": ["systemctl", "stop", "a"]}, "app.start_command: required with"),
        ({"start_command": ["systemctl", "start", "a"]}, "app.stop_command: required with"),
        ({"stop_command": [], "start_command": ["b"]}, "app.stop_command: must name a program"),
        ({"stop_command": ["a", ""], "start_command": ["b"]}, "app.stop_command: every item"),
        ({"stop_command": "systemctl stop a", "start_command": ["b"]}, "must be a list"),
        ({"max_downtime_s": 0}, "app.max_downtime_s: must be > 0"),
        ({"max_pending": "1y"}, "app.max_pending: expected a positive duration"),
        ({"restart_command": ["b"]}, "app.restart_command: unknown key"),
    ],
    ids=[
        "stop-alone",
        "start-alone",
        "empty-argv",
        "empty-item",
        "shell-string",
        "zero",
        "bad-duration",
        "unknown",
    ],
)
def test_app_section_is_validated_strictly(app, problem):
    with pytest.raises(ConfigError) as raised:
        parse({"app": app})
    assert any(p.startswith(problem) or problem in p for p in raised.value.problems), (
        raised.value.problems
    )


def test_app_window_and_relative_socket_resolve():
    app = parse(
        {
            "app": {
                "stop_command": ["systemctl", "stop", "a"],
                "start_command": ["systemctl", "start", "a"],
                "agent_socket": "run/agent.sock",
                "max_pending": "2h",
            }
        }
    ).app
    assert app.window and app.agent_socket == Path("/etc/memsync/run/agent.sock")
    assert app.max_pending.total_seconds() == 7200


def test_config_show_gives_the_older_app_python_as_app_python_s_value():
    from memsync.config.effective import effective_document

    document = effective_document(parse({"app_python": "/srv/app/bin/python"}))
    assert document["app"]["python"] == "/srv/app/bin/python"
    assert document["app_python"] == "/srv/app/bin/python"


@pytest.mark.parametrize(
    ("protect", "problem"),
    [
        ({}, 'protect: name the replica: directory = "PATH", or s3 = true with an [s3] table'),
        ({"directory": "/r", "s3": True}, "protect.directory: give directory or s3 = true, not both"),
        ({"s3": True}, "protect.s3: needs an [s3] table (the bucket the replicas go to)"),
        ({"directory": "/r", "sync_interval": "0s"}, "protect.sync_interval: expected a positive duration like '30s', '15m', '6h', '1d' (got '0s')"),
    ],
    ids=["no-replica", "both", "s3-without-bucket", "zero-interval"],
)  # fmt: skip
def test_protect_needs_exactly_one_replica_and_says_which_key_in_one_line(protect, problem):
    with pytest.raises(ConfigError) as raised:
        parse({"protect": protect})
    assert raised.value.problems == [problem]


def test_protect_defaults_and_an_s3_replica():
    loaded = parse({"protect": {"s3": True}, "s3": {"bucket": "my-bucket"}})
    assert loaded.protect is not None
    assert (loaded.protect.litestream, loaded.protect.prefix) == ("litestream", "litestream")
    assert loaded.protect.sync_interval.total_seconds() == 1
    assert loaded.protect.retention.total_seconds() == 86400
    assert loaded.protect.max_lag_s == 60
    assert parse({}).protect is None


def test_config_show_leaves_out_the_older_app_python_when_the_file_does_not_use_it():
    from memsync.config.effective import effective_document

    document = effective_document(parse({"app": {"python": "/srv/app/bin/python"}}))
    assert document["app"]["python"] == "/srv/app/bin/python"
    assert "app_python" not in document  # not "app_python = null" beside [app] python
