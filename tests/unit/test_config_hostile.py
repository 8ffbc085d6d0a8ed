"""Hostile configuration input: always a ConfigError (exit 10) naming the key, never a crash."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from memsync import config
from memsync.config.effective import effective_document
from memsync.errors import ConfigError

ENV = {"HOME": "/home/op", "MEM0_DIR": "/srv/mem0dir"}


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        config.load(path, ENV)
    return raised.value.problems


def write(tmp_path: Path, text: str, name: str = "memsync.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("key", ["state_dir", "work_dir", "mem0_config_file", "snapshot.directory"])
def test_a_path_under_an_unknown_user_is_a_dotted_path_error(tmp_path, key):
    table, _, name = key.rpartition(".")
    header = f"[{table}]\n" if table else ""
    problems = problems_of(write(tmp_path, f'{header}{name} = "~nosuchuser-memsync/s"\n'))
    assert [p for p in problems if p.startswith(f"{key}: ") and "nosuchuser" in p], problems


def test_a_lone_tilde_is_the_configured_home(tmp_path):
    loaded = config.load(write(tmp_path, 'state_dir = "~"\n'), ENV)
    assert loaded.state_dir == Path("/home/op")


def test_a_mem0_file_that_is_not_utf8_is_a_config_error(tmp_path):
    (tmp_path / "m.json").write_bytes(b"\xff{}")
    problems = problems_of(write(tmp_path, 'mem0_config_file = "m.json"\n'))
    assert len(problems) == 1 and problems[0].startswith("mem0_config_file: ")
    assert "UTF-8" in problems[0]


def test_a_mem0_file_too_large_is_refused_without_reading_it_all(tmp_path):
    (tmp_path / "m.json").write_text('{"a": "' + "x" * (2 * 1024 * 1024) + '"}')
    problems = problems_of(write(tmp_path, 'mem0_config_file = "m.json"\n'))
    assert problems[0].startswith("mem0_config_file: ") and "too large" in problems[0]


@pytest.mark.parametrize(
    "text",
    [
        "[mem0.llm]\nconfig = " + "{a=" * 400 + "1" + "}" * 400 + "\n",
        "[mem0.llm.config]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n",
        "plugins = " + "[" * 100_000 + "]" * 100_000 + "\n",
    ],
    ids=["inline-tables-400", "arrays-100000", "top-level-arrays"],
)
def test_absurd_nesting_is_a_config_error(tmp_path, text):
    problems = problems_of(write(tmp_path, text))
    assert any("nested too deeply" in p for p in problems), problems


def test_mem0_nesting_beyond_any_real_config_names_its_key(tmp_path):
    text = "[mem0.llm]\nconfig = " + "{a=" * 60 + "1" + "}" * 60 + "\n"
    problems = problems_of(write(tmp_path, text))
    assert problems[0].startswith("mem0.llm.config.a.a") and "nested too deeply" in problems[0]


def test_yaml_aliases_are_refused_before_they_expand(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    (tmp_path / "m.yaml").write_text("\n".join(lines) + "\n")
    path = write(tmp_path, 'mem0_config_file = "m.yaml"\n')
    found: list[list[str]] = []
    worker = threading.Thread(target=lambda: found.append(problems_of(path)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert found, "validation hung on a YAML billion-laughs file"
    assert found[0][0].startswith("mem0_config_file: ") and "alias" in found[0][0], found


def test_toml_dates_in_mem0_become_iso_text(tmp_path):
    path = write(
        tmp_path,
        "[mem0.llm.config]\nsince = 2024-01-01\nat = 07:32:00\n"
        "stamp = 1979-05-27T07:32:00Z\nlocal = 1979-05-27T07:32:00\n",
    )
    loaded = config.load(path, ENV)
    expected = {
        "since": "2024-01-01",
        "at": "07:32:00",
        "stamp": "1979-05-27T07:32:00+00:00",
        "local": "1979-05-27T07:32:00",
    }
    assert loaded.mem0["llm"]["config"] == expected
    shown = effective_document(loaded)
    assert shown["mem0"]["llm"]["config"] == expected
    json.dumps(shown, allow_nan=False)


def test_yaml_dates_and_odd_types_in_a_mem0_file(tmp_path):
    (tmp_path / "m.yaml").write_text(
        "llm:\n  config:\n    since: 2024-01-01\n    blob: !!binary aGk=\n"
    )
    problems = problems_of(write(tmp_path, 'mem0_config_file = "m.yaml"\n'))
    assert problems == [
        "mem0.llm.config.blob: must be a string, number, boolean, table or list (got bytes)"
    ]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_in_mem0_are_refused(tmp_path, value):
    problems = problems_of(write(tmp_path, f"[mem0.llm.config]\ntemperature = {value}\n"))
    assert problems == [f"mem0.llm.config.temperature: must be a finite number (got {value})"]


def test_non_finite_numbers_in_a_json_mem0_file_are_refused(tmp_path):
    (tmp_path / "m.json").write_text('{"llm": {"config": {"temperature": NaN}}}')
    problems = problems_of(write(tmp_path, 'mem0_config_file = "m.json"\n'))
    assert problems == ["mem0.llm.config.temperature: must be a finite number (got nan)"]


def test_an_error_about_a_secret_key_never_echoes_its_value(tmp_path):
    path = write(tmp_path, '[daemon]\nping_url = "hc-ping.com/0b7e-SECRET-UUID"\n')
    problems = problems_of(path)
    assert problems == [
        "daemon.ping_url: must start with http:// or https:// (got a value, not shown)"
    ]


def test_an_echoed_url_never_shows_its_credentials(tmp_path):
    path = write(
        tmp_path, '[s3]\nbucket = "ok-bucket"\nendpoint_url = "ftp://user:pw-SECRET@h/x"\n'
    )
    (problem,) = problems_of(path)
    assert problem.startswith("s3.endpoint_url: ") and "pw-SECRET" not in problem
    assert "ftp://<redacted>@h/x" in problem


def test_an_unresolvable_secret_names_its_key_and_the_config_file(tmp_path):
    (tmp_path / "key").write_bytes(b"\xff\xfe-SECRET")
    path = write(
        tmp_path,
        f'[mem0.llm.config]\napi_key = {{file = "{tmp_path / "key"}"}}\n'
        '[mem0.embedder.config]\napi_key = {env = "MEMSYNC_UNSET_VARIABLE"}\n'
        f'[mem0.reranker.config]\napi_key = {{file = "{tmp_path / "absent"}"}}\n',
    )
    loaded = config.load(path, ENV)
    with pytest.raises(ConfigError) as raised:
        config.resolve_secrets(loaded.mem0, ENV)
    assert raised.value.source == str(path)
    assert raised.value.problems == [
        f"mem0.llm.config.api_key: secret file {tmp_path / 'key'} is not UTF-8 text",
        "mem0.embedder.config.api_key: environment variable MEMSYNC_UNSET_VARIABLE is not set",
        f"mem0.reranker.config.api_key: secret file {tmp_path / 'absent'} is unreadable: "
        "No such file or directory",
    ]
    assert "SECRET" not in str(raised.value)


def test_both_mem0_sources_list_the_problems_inside_each(tmp_path):
    (tmp_path / "m.json").write_text('{"vector_store": {"config": {"path": "rel/q"}}}')
    path = write(
        tmp_path,
        'mem0_config_file = "m.json"\n[mem0.vector_store.config]\nembedding_model_dims = -1\n',
    )
    problems = problems_of(path)
    assert len(problems) == 3, problems
    assert "mem0.vector_store.config.embedding_model_dims: must be > 0 (got -1)" in problems
    assert problems[0].startswith("mem0_config_file.vector_store.config.path: must be absolute")
    assert problems[-1].startswith("mem0_config_file: give either")


def test_an_unreadable_key_file_names_its_key_and_the_config_file(tmp_path):
    with pytest.raises(ConfigError) as raised:
        config.read_key_file(tmp_path / "absent", "snapshot.signing_key_file", "memsync.toml")
    assert raised.value.source == "memsync.toml"
    assert raised.value.problems == [
        f"snapshot.signing_key_file: key file {tmp_path / 'absent'} is unreadable: "
        "No such file or directory"
    ]
    (tmp_path / "big").write_bytes(b"k" * 100_000)
    with pytest.raises(ConfigError, match="snapshot.encrypt_key_file: key file .* too large"):
        config.read_key_file(tmp_path / "big", "snapshot.encrypt_key_file", "memsync.toml")
    (tmp_path / "k").write_bytes(b"\xff" * 32)
    assert config.read_key_file(tmp_path / "k", "snapshot.encrypt_key_file", "x") == b"\xff" * 32


def test_an_integer_too_long_for_python_is_invalid_toml(tmp_path):
    problems = problems_of(write(tmp_path, "[mem0.llm.config]\nx = " + "9" * 5000 + "\n"))
    assert len(problems) == 1 and problems[0].startswith("not valid TOML: "), problems


def test_the_daemon_reading_an_unknown_users_mem0_file_gets_a_config_error(tmp_path):
    from memsync.config.accepted import load_self_contained

    path = write(tmp_path, 'mem0_config_file = "~nosuchuser-memsync/m.json"\n')
    with pytest.raises(ConfigError) as raised:
        load_self_contained(path, ENV)
    assert raised.value.problems[0].startswith("mem0_config_file: names an unknown user")


def test_keep_safety_days_beyond_any_retention_is_a_config_error(tmp_path):
    """10**9 days passed validation, then every retention run died of timedelta's OverflowError."""
    problems = problems_of(
        write(tmp_path, "[snapshot]\nkeep_last = 3\nkeep_safety_days = 1000000000\n")
    )
    assert [p for p in problems if p.startswith("snapshot.keep_safety_days: ")], problems
