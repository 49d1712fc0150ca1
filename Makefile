# Two entry points (see README): `make quickstart` and `make test` (lint, the test suite and the
# documentation in quick mode: what CI runs). Both create .venv with the Python that
# .python-version selects (>= 3.12) on first use. `make docs` builds the site with the examples'
# full budgets; `make docs-quick` with their small budgets and warnings as errors.
PYTHON ?= python
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Tests read the papers' data sets from a local copy instead of downloading them.
export PYMC_SFP_DATA ?= $(abspath ../shared/data)

.PHONY: quickstart test lint docs docs-quick

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), f"Python >= 3.12 needed, found {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test,docs]'
	rm -f $(VENV)/.installed-* && touch $@

quickstart: $(STAMP)
	$(VENV)/bin/python examples/quickstart.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) lint
	$(VENV)/bin/python -m pytest
	$(MAKE) docs-quick

# Sphinx writes the site to docs/_build/html. Each build starts clean, so that the gallery never
# mixes scripts run with quick and with full budgets.
SPHINX := $(VENV)/bin/python -m sphinx -E -b html docs docs/_build/html
DOCS_CLEAN := rm -rf docs/_build docs/generated docs/auto_examples docs/sg_execution_times.rst

docs: $(STAMP)
	$(DOCS_CLEAN)
	$(SPHINX)

docs-quick: $(STAMP)
	$(DOCS_CLEAN)
	PYMC_SFP_DOCS_QUICK=1 $(SPHINX) -W --keep-going
