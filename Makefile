# Two commands do all set-up on a fresh clone (Python 3.11+ needed):
#   make demo   creates .venv, installs adk-sqlstore, runs the demo on the embedded SQLite file
#   make test   creates .venv, installs the test tools, runs the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench bench-smoke check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[postgres]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/adk-sqlstore demo

test: $(VENV)/.installed-dev
	$(BIN)/pytest

bench: $(VENV)/.installed-dev  # the full run behind benchmarks/RESULTS.md (about 20 min)
	$(BIN)/python -m benchmarks run --size full --markdown benchmarks/RESULTS.md

bench-smoke: $(VENV)/.installed-dev  # every benchmark at a tiny size (CI)
	$(BIN)/python -m benchmarks run --size small

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests migrations benchmarks
	$(BIN)/ruff format --check src tests migrations benchmarks
	$(BIN)/mypy

check: lint test

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
