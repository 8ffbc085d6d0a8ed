"""The schema is the one source: the reference page and the example file follow it."""

from __future__ import annotations

from pathlib import Path

from memsync import config
from memsync.config import reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "config.md"
EXAMPLE = ROOT / "ops" / "memsync.example.toml"


def test_reference_page_holds_exactly_the_generated_tables():
    page = PAGE.read_text()
    assert reference.replace_block(page, reference.render_reference()) == page, (
        "docs/reference/config.md is out of date: run python -m memsync.config.reference"
    )


def test_every_schema_key_has_a_row_with_type_default_and_description():
    block = reference.render_reference()
    for key in reference.keys():
        assert f"| `{key.name}` | {key.type}" in block.replace("\\|", "|"), key.dotted
        assert key.description, key.dotted
    assert {
        "snapshot.keep_daily",
        "daemon.check_every",
        "s3.checksums",
        "mem0.vector_store.config.path",
    } <= {key.dotted for key in reference.keys()}


def test_example_mentions_every_schema_key_and_nothing_unknown():
    mentioned = reference.mentioned_keys(EXAMPLE.read_text())
    assert {key.dotted for key in reference.keys()} - mentioned == set()
    assert reference.unknown_keys(mentioned) == set()


def test_the_checks_would_catch_a_stale_page_and_a_stray_key(tmp_path):
    stale = tmp_path / "config.md"
    stale.write_text(PAGE.read_text().replace("| `keep_daily` |", "| `keep_dayly` |"))
    assert reference.main(["--check", str(stale)]) == 1
    assert reference.main([str(stale)]) == 0 and stale.read_text() == PAGE.read_text()
    assert reference.unknown_keys({"snapshot.keep_dayly", "mem0.llm.provider"}) == {
        "snapshot.keep_dayly"
    }
    assert "daemon.check_at" not in reference.mentioned_keys('[daemon]\ncheck_every = "1m"\n')


def test_example_loads_and_its_defaults_come_from_the_schema():
    loaded = config.load(EXAMPLE, {"HOME": "/root"})
    assert (
        loaded.daemon.stop_timeout_s == config.DaemonConfig.model_fields["stop_timeout_s"].default
    )
    assert loaded.snapshot.keep_daily == 7 and loaded.collection == "mem0"
