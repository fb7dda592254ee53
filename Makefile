# difftape developer commands. `make demo` and `make test` work from a fresh clone with Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-quick bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.fit_parameter

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -x --quick

clean:
	rm -rf $(VENV) .pytest_cache
