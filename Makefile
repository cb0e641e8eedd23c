# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv and install first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export RAY_AUTH_MODE ?= disabled

.PHONY: setup demo test lint bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/raycrawl demo --out demo-out

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench: setup
	for b in benchmarks/[a-z]*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf demo-out .pytest_cache build *.egg-info
