# The two commands of the README: `make reproduce` (set up + quick reproduction) and
# `make test` (set up + test suite). Both create or update .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup reproduce test test-slow clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,sweep]'
	touch $(STAMP)

setup: $(STAMP)

reproduce: $(STAMP)
	$(BIN)/iclab reproduce --scale quick

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf $(VENV) runs .pytest_cache
