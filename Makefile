# Two commands do all set-up on a fresh clone (Python 3.11+ needed):
#   make demo      creates .venv, installs adk-sqlstore, runs the demo on the embedded SQLite file
#   make test      creates .venv, installs the test tools, runs the test suite in parallel
#                  (3.5-4 min on 2 CPUs, quiet), without the long soak tests and the Citus
#                  cluster's (CI runs both), with a third of the property tests' examples
#                  (all of them with CI=true)
#   make test-all  (CI) every test, soak and Citus included, then the PostgreSQL tests again
#                  on a throwaway password-protected server and through PgBouncer (about 11 min)
#   make test-citus (CI) the contract suite on a throwaway Citus cluster (about 5 min)
PYTHON ?= python3
# Python caches bytecode here even where the environment says not to (some machines set
# PYTHONDONTWRITEBYTECODE=1): without the cache each test process compiles pytest's
# rewritten test modules again (about 4 s each), and each process a test starts
# compiles the store again. The caches are in __pycache__ folders, which git ignores.
unexport PYTHONDONTWRITEBYTECODE
# Test processes: one and a half per CPU (3 on 2 CPUs). Many tests wait on a database
# server, a child process or a timer, and the extra process fills that time: make test
# took 3:57 with 2, 3:30 with 3 and 3:33 with 4 processes on 2 CPUs, quiet.
WORKERS ?= $(shell $(PYTHON) -c "import os; print(max(2, (os.cpu_count() or 2) * 3 // 2))")
NEWEST_PYTHON ?= python3.13
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-all test-citus docs test-lowest test-newest-python test-embeddings lint bench bench-smoke check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[postgres,inspector]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/adk-sqlstore demo

test: $(VENV)/.installed-dev
	$(BIN)/pytest -n $(WORKERS) -m "not soak and not citus"

# Then the PostgreSQL tests twice more: against a throwaway server whose password has
# characters URLs must escape (the suite runs against any server), and behind PgBouncer
# in transaction mode (the store runs behind poolers). The property and race tests run
# at full size once, in the first run; the later runs of CI (these, Citus, the lowest
# versions, the newest Python) run them at make test's size (ADK_SQLSTORE_TEST_THOROUGH=0).
test-all: $(VENV)/.installed-dev
	$(BIN)/pytest -n $(WORKERS)
	ADK_SQLSTORE_TEST_THOROUGH=0 $(BIN)/python -m tests.pg_cluster --password 'p@ss w:rd/é' -- \
		$(BIN)/pytest -n $(WORKERS) -m "postgres and not soak" -p no:cacheprovider
	ADK_SQLSTORE_TEST_PGBOUNCER=1 ADK_SQLSTORE_TEST_THOROUGH=0 \
		$(BIN)/pytest -n $(WORKERS) -m "postgres and not soak" -p no:cacheprovider

# The contract suite (sessions, memory, artifacts, facts; both API layers) on a
# throwaway Citus cluster (a coordinator and two workers of its own, on free ports):
# every throwaway database is made on each node and distributed by the migration
# (CI; needs the citus extension: ../shared/citus/install.sh). The cluster's own
# tests (routing, forget_user on the workers, fan-out, rebalancing) are
# tests/test_citus.py, which test-all runs.
CITUS_SUITE = tests/test_sessions.py tests/test_memory.py tests/test_artifacts.py \
	tests/test_adk_compat_sessions.py tests/test_adk_compat_memory.py tests/test_adk.py \
	tests/test_listing.py tests/test_retention.py tests/test_isolation.py tests/test_facts.py \
	tests/test_facts_hold_up.py tests/test_inspector.py tests/test_inspector_security.py
test-citus: $(VENV)/.installed-dev
	ADK_SQLSTORE_TEST_THOROUGH=0 $(BIN)/python -m tests.citus_cluster -- \
		$(BIN)/pytest -n auto -p no:cacheprovider \
		-m "postgres and not soak and not single_server" $(CITUS_SUITE)

# The supported range, tested at both ends (CI): the lowest versions pyproject.toml allows
# (without the adk extra, whose google-adk needs newer ones), and the newest Python here.
test-lowest:
	$(PYTHON) -m venv .venv-lowest
	.venv-lowest/bin/pip install --quiet -e ".[test]" -c .ci/lowest-constraints.txt
	ADK_SQLSTORE_TEST_THOROUGH=0 .venv-lowest/bin/pytest -n $(WORKERS) \
		-m "not soak and not citus" -p no:cacheprovider

# pgserver (PostgreSQL with pgvector, for the hybrid-search tests) has no wheels for
# Python 3.13: its server programs are taken from the main venv's.
test-newest-python: $(VENV)/.installed-dev
	$(NEWEST_PYTHON) -m venv .venv-newest
	.venv-newest/bin/pip install --quiet -e ".[dev]"
	ADK_SQLSTORE_TEST_PGVECTOR_BIN="$$(ls -d $(CURDIR)/$(VENV)/lib/python3*/site-packages/pgserver/pginstall/bin)" \
		ADK_SQLSTORE_TEST_THOROUGH=0 .venv-newest/bin/pytest -n $(WORKERS) \
		-m "not soak and not citus" -p no:cacheprovider

# The embedders with their real libraries, the local model included, hybrid search end to
# end on LoCoMo (SQLite, and pgserver's PostgreSQL with pgvector) and the demo's hybrid
# part (CI): a venv of its own, torch's CPU build first (an unpinned torch may pull a
# CUDA build of several GB).
test-embeddings:
	$(PYTHON) -m venv .venv-embeddings
	.venv-embeddings/bin/pip install --quiet torch==2.13.0
	.venv-embeddings/bin/pip install --quiet -e ".[test,embeddings,openai,google]"
	ADK_SQLSTORE_REQUIRE_EMBEDDINGS=1 .venv-embeddings/bin/pytest -p no:cacheprovider \
		tests/test_embedders.py tests/test_readme.py \
		tests/test_locomo.py::test_locomo_slice_hybrid_recall_with_the_local_model

bench: $(VENV)/.installed-dev  # the full run behind benchmarks/RESULTS.md (about 25-45 min)
	$(BIN)/python -m benchmarks run --size full --markdown benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks citus --size full  # its table: RESULTS.md, "Citus"

bench-smoke: $(VENV)/.installed-dev  # every benchmark at a tiny size (CI)
	$(BIN)/python -m benchmarks run --size small
	$(BIN)/python -m benchmarks citus --size small
	$(BIN)/python -m benchmarks consolidation --size small  # about 3 s: SQLite, BM25
	$(BIN)/python -m benchmarks inspector --size small --runs 5  # about 15 s: SQLite, PostgreSQL

# The documentation site from docs/ (mkdocs-material; the API reference from the
# docstrings, the command line's from the command itself), warnings as errors (CI),
# then its links checked: each relative link names a file (and anchor) of the site, none
# leaves it (/..., file:); external ones are listed, not fetched (tests/site_links.py).
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/python -m tests.site_links site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests migrations benchmarks
	$(BIN)/ruff format --check src tests migrations benchmarks
	$(BIN)/mypy

check: lint test

clean:
	rm -rf $(VENV) .venv-lowest .venv-newest .venv-embeddings dist .pytest_cache .mypy_cache .ruff_cache
