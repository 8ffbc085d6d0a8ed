"""The demo's migrate act (``memsync.demo.migrate_act``) on a small MiniLM deployment.

Real parts: a deployment built through mem0 with the demo's MiniLM embedder, the real CLI as a
subprocess (the demo's own runner), the tests' PostgreSQL for the pgvector target
(``MEMSYNC_TEST_PG_URL``: the act then starts no server of its own).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from memsync.demo import migrate_act
from memsync.demo.__main__ import DemoFailed, memsync
from tests.helpers.migrate import qdrant_points


@pytest.fixture
def minilm(tmp_path: Path, pg_server: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A 30-memory deployment as the demo builds it (MiniLM, 384 dims); its Memory closed."""
    monkeypatch.setenv("MEMSYNC_TEST_PG_URL", pg_server)
    paths = build.Paths(tmp_path / "demo")
    config = build.write_memsync_config(paths)
    memory = build.open_memory(paths)
    try:
        seeded = build.seed(memory, 30, batch=5)
        yield paths, config, memory, seeded
    finally:
        with contextlib.suppress(Exception):  # a test may have closed it (as an app stopping)
            build.close_memory(memory)


def test_the_act_migrates_to_hash256_and_to_pgvector_each_verified(minilm, pg_server):
    import psycopg

    paths, config, memory, seeded = minilm
    source = qdrant_points_of(memory)
    build.close_memory(memory)
    said: list[str] = []
    migrate_act.migrate_act(paths, config, memsync, said.append, DemoFailed)

    hash256 = qdrant_points(paths.root / "migrate" / "qdrant-hash256")
    assert set(hash256) == set(source) == set(seeded.live)
    assert {len(vector) for _, vector in hash256.values()} == {256}
    assert all(hash256[i][0] == source[i][0] for i in source)  # payloads kept
    aside = json.loads((paths.state / "migrate-pgvector.json").read_text())
    assert aside["phase"] == "verified" and aside["to"].endswith("pgvector.toml")
    journal = json.loads((paths.state / "migrate.json").read_text())
    assert journal["phase"] == "switched" and journal["to"].endswith("hash256.toml")
    # the switch: the demo's config is the hash256 one now, the old one kept beside it
    assert config.read_text() == (paths.root / "migrate" / "hash256.toml").read_text()
    assert "memsync_minilm" in config.with_name(config.name + ".bak").read_text()
    assert (paths.state / "migrate-source.json").is_file()
    url = (paths.root / "migrate" / "pgvector" / "pg-url").read_text().strip()
    with psycopg.connect(url) as connection:
        rows = dict(connection.execute("SELECT id::text, vector::text FROM mem0").fetchall())
    assert set(rows) == set(source)
    first = sorted(source)[0]
    assert json.loads(rows[first]) == pytest.approx(source[first][1], rel=1e-6, abs=1e-7)
    text = "\n".join(said)
    assert text.count("-> exit 0: 0 errors") == 3  # both targets, then the switched deployment
    assert "migrate --cleanup: refused (exit 10)" in text
    assert "the first backup of the switched deployment" in text  # restore latest has one
    assert f"re-embed {len(source)} points" in text and "copy the vectors as they are" in text
    assert f"{len(source)} re-embedded" in text and "(0 re-embedded)" in text


def test_the_act_fails_the_demo_when_check_on_the_new_config_finds_an_error(minilm):
    paths, config, memory, _ = minilm
    orphan = build.add_with_failing_history(memory, paths, "speaks Basque at home", "alice")
    build.close_memory(memory)
    with pytest.raises(DemoFailed, match=r"check --config pgvector\.toml exited 3"):
        migrate_act.migrate_act(paths, config, memsync, lambda line: None, DemoFailed)
    import psycopg

    url = (paths.root / "migrate" / "pgvector" / "pg-url").read_text().strip()
    with psycopg.connect(url) as connection:
        ids = {row[0] for row in connection.execute("SELECT id::text FROM mem0").fetchall()}
    assert orphan in ids  # migrate copied it; check on the new config named it
    assert not (paths.root / "migrate" / "qdrant-hash256").exists()  # the act stopped there


def test_a_config_without_the_demo_tables_is_refused_before_anything_runs(minilm, tmp_path):
    paths, config, memory, _ = minilm
    build.close_memory(memory)
    config.write_text(config.read_text().replace("memsync_minilm", "memsync_hash"))
    with pytest.raises(DemoFailed, match="does not hold the demo's vector store and embedder"):
        migrate_act.migrate_act(paths, config, memsync, lambda line: None, DemoFailed)
    assert not (paths.state / "migrate.json").exists()


def qdrant_points_of(memory: Any) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """The source's points through the open Memory's own client: id -> (payload, vector)."""
    from tests.helpers.migrate import scroll_points

    return scroll_points(memory.vector_store.client)
