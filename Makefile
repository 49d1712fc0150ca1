# Two entry points (see README): `make quickstart` and `make test`.
# Both create .venv with the Python that .python-version selects (>= 3.12) on first use.
PYTHON ?= python
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Tests read the papers' data sets from a local copy instead of downloading them.
export PYMC_SFP_DATA ?= $(abspath ../shared/data)

.PHONY: quickstart test lint

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), f"Python >= 3.12 needed, found {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

quickstart: $(STAMP)
	$(VENV)/bin/python examples/quickstart.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) lint
	$(VENV)/bin/python -m pytest
