# The two commands a new user needs: `make demo` and `make test`.
# Each creates .venv on first use and installs the project into it.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
# The hook's tests run on the CPU; this pin takes the CPU build on this project's machines.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: demo test test-pg lint bench docs clean help

help:
	@echo "make demo     run an example investigation end to end on a temporary ledger"
	@echo "make test     run the test suite (SQLite; PostgreSQL too when LEDGER_TEST_PG_URL is set)"
	@echo "make test-pg  run the database tests against LEDGER_TEST_PG_URL"
	@echo "make lint     ruff and mypy"
	@echo "make bench    run the benchmarks in benchmarks/"
	@echo "make docs     regenerate docs/commands.md from the CLI's help"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Stamps make a second `make test` start at once; they are redone when pyproject.toml changes.
$(VENV)/.base: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.base
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[dev,postgres,torch]'
	@touch $@

demo: $(VENV)/.base
	$(BIN)/python -m ledger demo

test: $(VENV)/.dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-pg: $(VENV)/.dev
	@# LEDGER_TEST_BACKEND=postgres makes the db_url fixture hand out PostgreSQL schemas
	@test -n "$$LEDGER_TEST_PG_URL" || { echo "Error: set LEDGER_TEST_PG_URL (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)" >&2; exit 2; }
	LEDGER_TEST_BACKEND=postgres $(BIN)/python -m pytest -m "not sqlite_only" $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(BIN)/python -m ruff check ledger migrations tests benchmarks
	$(BIN)/python -m ruff format --check ledger migrations tests benchmarks
	$(BIN)/python -m mypy

bench: $(VENV)/.dev
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

docs: $(VENV)/.base
	$(BIN)/python -m ledger.cli.reference > docs/commands.md

clean:
	rm -rf $(VENV) build dist .pytest_cache
