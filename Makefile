# difftape developer commands. `make demo` and `make test` work from a fresh clone with Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLES_STAMP := $(VENV)/.examples-installed
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

.PHONY: setup demo test test-quick bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

# The demo installs only what the examples need (not the test extra), to start quickly.
$(EXAMPLES_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[examples]"
	touch $(EXAMPLES_STAMP)

# Throw a mass-spring chain onto a target: loss printed as it drops, plots under out/chain_throw/.
demo: $(EXAMPLES_STAMP)
	$(BIN)/python -m examples.chain_throw

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -x --quick

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

# Benchmarks vs warp-lang and Taichi (not part of `make test`); `make bench BENCH_ARGS=--quick`.
bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
