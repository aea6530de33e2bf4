# The two commands of the README: `make reproduce` (set up + quick reproduction) and
# `make test` (set up + lint + the documentation site built strictly + test suite). Both create or update
# .venv first. `make pages` writes the pages of the evaluation runs from their records in results/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup reproduce lint docs test test-slow test-fuzz pages clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,sweep,docs]'
	touch $(STAMP)

setup: $(STAMP)

# Two experiments at a time, one CPU thread each: on a small CPU machine that beats one at a time on
# every thread (see README).
reproduce: $(STAMP)
	$(BIN)/iclab reproduce --scale quick --jobs 2

# The code is clean under ruff (format and lint, configured in pyproject.toml) before the tests run.
lint: $(STAMP)
	$(BIN)/ruff format --check -q .
	$(BIN)/ruff check -q .

# The documentation site (mkdocs.yml) into site/; --strict: a broken link, anchor or docstring fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q -d site

# The suite in TEST_WORKERS processes (pytest-xdist), each on cores ÷ workers torch threads (tests/conftest.py);
# what that saves: docs/performance.md, "The test suite".
TEST_WORKERS ?= 2
test: lint docs
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The property tests with fresh draws, many of them (`make test` draws the same ones every run: tests/conftest.py).
test-fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -q tests/test_config_fuzz.py tests/test_shifts.py

# The pages written from the evaluation runs, from their records in results/ (`iclab archive runs/eval results`
# keeps them; docs/run-folder.md): the claim x seed table, the non-reproductions, the parity with the authors' code
# (its records in results/parity/, written by benchmarks/parity/) and what each claim costs.
pages: $(STAMP)
	$(BIN)/python tools/claim_costs.py results
	$(BIN)/iclab report results --seed-table docs/seed-table.md --non-reproductions docs/non-reproductions.md --parity docs/parity.md

clean:
	rm -rf $(VENV) runs site .pytest_cache
