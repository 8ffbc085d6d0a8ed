"""The tiers hold: a test that does more than its directory allows fails, naming where it belongs.

A small test tree with the real ``tests/tiers.py`` runs in a pytest subprocess (the audit hook is
process-wide: in this process it would see the inner tests' files as this test's own).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TIERS = Path(__file__).resolve().parents[1] / "tiers.py"


@pytest.fixture
def tree(pytester: pytest.Pytester) -> Path:
    """``tests/`` with the tiers plugin, a ``pg_url`` fixture and an empty directory per tier."""
    tests = pytester.path / "tests"
    tests.mkdir()
    shutil.copy(TIERS, tests / "tiers.py")
    (tests / "__init__.py").touch()
    (tests / "conftest.py").write_text(
        'import pytest\npytest_plugins = ["tests.tiers"]\n\n'
        "@pytest.fixture\ndef pg_url():\n    return 'postgresql://'\n"
    )
    for tier in ("unit", "store", "pg", "process", "breaker"):
        (tests / tier).mkdir()
        (tests / tier / "__init__.py").touch()
    return tests


TOUCHES = """
import socket, sqlite3, subprocess, sys

def test_values():
    assert sorted([2, 1]) == [1, 2]

def test_memory_database():
    sqlite3.connect(":memory:").close()

def test_sqlite_file(tmp_path):
    sqlite3.connect(tmp_path / "history.db").close()

def test_socket():
    listener = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(listener.getsockname()).close()
    listener.close()

def test_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_pg(pg_url):
    assert pg_url
"""


def test_each_tier_fails_what_it_does_not_allow_and_names_the_directory(
    pytester: pytest.Pytester, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tier in ("unit", "store", "process", "pg"):
        (tree / tier / f"test_{tier}_touches.py").write_text(TOUCHES)
    monkeypatch.setenv("COLUMNS", "400")  # whole lines in the summary
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rf", "tests")
    failed = [
        ("unit", "test_sqlite_file", "store", "tests/store/"),
        ("unit", "test_socket", "store", "tests/store/"),
        ("unit", "test_process", "process", "tests/process/"),
        ("unit", "test_pg", "pg", "tests/pg/"),  # by the fixture it asks for
        ("store", "test_process", "process", "tests/process/"),
        ("store", "test_pg", "pg", "tests/pg/"),
        ("process", "test_pg", "pg", "tests/pg/"),
    ]
    result.assert_outcomes(passed=4 * 6 - len(failed), failed=len(failed))
    text = "\n".join(result.outlines)
    for tier, test, touched, home in failed:
        line = (
            f"FAILED tests/{tier}/test_{tier}_touches.py::{test} - Failed: this {tier}-tier "
            f"test touches {touched}: move it to {home} (tests/README.md, tiers)"
        )
        assert line in text, text[-3000:]


def test_a_test_file_outside_the_tiers_is_refused(pytester: pytest.Pytester, tree: Path) -> None:
    (tree / "test_loose.py").write_text("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "tests")
    assert result.ret != 0
    assert "must live in one tier's directory" in "\n".join(result.errlines + result.outlines)


def test_slow_needs_a_reason_and_the_budget_names_what_is_over_it(
    pytester: pytest.Pytester, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "unit" / "test_slow.py").write_text(
        "import time, pytest\n\n"
        '@pytest.mark.slow(reason="waits for the clock")\n'
        "def test_marked():\n    time.sleep(0.3)\n\n"
        "def test_unmarked():\n    time.sleep(0.3)\n"
    )
    monkeypatch.setenv("MEMSYNC_TEST_BUDGET_S", "0.2")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "tests")
    result.assert_outcomes(passed=2)
    text = "\n".join(result.outlines)
    assert "over the 0 s budget, without slow(reason=...)" in text
    assert "tests/unit/test_slow.py::test_unmarked" in text
    assert "test_marked" not in text.split("without slow(reason=...)")[1]

    (tree / "unit" / "test_slow.py").write_text(
        "import pytest\n\n@pytest.mark.slow\ndef test_no_reason():\n    pass\n"
    )
    refused = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "tests")
    assert refused.ret != 0
    assert "@pytest.mark.slow needs a reason" in "\n".join(refused.errlines + refused.outlines)
