# Two commands: `make run` (main job on built-in defaults) and `make test` (ruff, mypy, pytest).
# Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: run test lint typecheck pytest bench clean help deploy-deps

help:
	@echo "make run    - set up .venv and run the main job (catalog + a model graph)"
	@echo "make test   - set up .venv with test extras; run ruff, mypy and pytest"
	@echo "make bench  - run the benchmarks in bench/ (slow, prints figures)"
	@echo "make deploy-deps - install Ray Serve into .venv (make test does it too)"

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: pyproject.toml | $(PY)
	$(PIP) -e .
	@touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.core
	$(PIP) -e '.[test,bench]'
	@touch $@

# Ray Serve is heavy and only the deploy package needs it: its own step, which make test runs
# so that CI exercises a real Ray Serve cluster (tests/deploy/test_serve.py).
$(VENV)/.deploy: pyproject.toml $(VENV)/.test
	$(PIP) -e '.[test,bench,deploy]'
	@touch $@

deploy-deps: $(VENV)/.deploy

run: $(VENV)/.core
	$(VENV)/bin/omniplane models
	$(VENV)/bin/omniplane show qwen3-omni

lint: $(VENV)/.deploy
	$(VENV)/bin/ruff check src tests bench

typecheck: $(VENV)/.deploy
	$(VENV)/bin/mypy

# pytest's exit code is kept in $(VENV)/pytest.rc; 5 means "no tests collected" (see .ci/run).
pytest: $(VENV)/.deploy
	@$(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/pytest.rc; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)" >&2; fi; exit $$rc

test: lint typecheck pytest

bench: $(VENV)/.deploy
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build src/*.egg-info
