# Two commands: `make run` (main job on built-in defaults) and `make test` (ruff, mypy, pytest).
# Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: run test lint typecheck pytest bench clean help

help:
	@echo "make run    - set up .venv and run the main job (catalog + a model graph)"
	@echo "make test   - set up .venv with test extras; run ruff, mypy and pytest"
	@echo "make bench  - run the benchmarks in bench/ (slow, prints figures)"

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: pyproject.toml | $(PY)
	$(PIP) -e .
	@touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.core
	$(PIP) -e '.[test,bench]'
	@touch $@

run: $(VENV)/.core
	$(VENV)/bin/omniplane models
	$(VENV)/bin/omniplane show qwen3-omni

lint: $(VENV)/.test
	$(VENV)/bin/ruff check src tests bench

typecheck: $(VENV)/.test
	$(VENV)/bin/mypy

# pytest's exit code is kept in $(VENV)/pytest.rc; 5 means "no tests collected" (see .ci/run).
pytest: $(VENV)/.test
	@$(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/pytest.rc; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)" >&2; fi; exit $$rc

test: lint typecheck pytest

bench: $(VENV)/.test
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build src/*.egg-info
