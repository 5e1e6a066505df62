"""The simulator's compiled modules (omniplane.sim.native) give the plain-Python results, bit for
bit, and a build that does not match the sources is never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omniplane.sim import native

RUNS = r'''
import json, math, sys
from omniplane.perf import CostModel
from omniplane.sim import RunSetup, SharedGPU, native, simulate
from omniplane.policy import FCFS, StepDecision
from omniplane.sim.queueing import simulate_waits
from omniplane.spec import PlanSpec, load_gpus, load_model, load_plan, load_workload, parse, resolve_plan
from omniplane.spec.catalog import catalog_dir
from omniplane.workload import generate

def rows(res):
    rec = res.requests
    clean = lambda a: [None if math.isnan(x) else float(x) for x in a]
    d = res.to_json()
    for k in ("wall_s", "events_per_s"):
        d.pop(k)
    d["first_response"] = clean(rec.first_response)
    d["done"] = {c: clean(a) for c, a in rec.done.items()}
    return d

class Capped(FCFS):
    def decide(self, ctx):
        return StepDecision(sm_cap=40 if ctx.downstream_active else ctx.total_sms)

out = {"native": native.active()}
plan = load_plan(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
wl = load_workload(catalog_dir() / "workloads" / "qwen3-omni-servegen.yaml")
out["catalog"] = rows(simulate(plan, generate(wl, n=400, rate=14, seed=2), CostModel(plan.model),
                               slo_s={t: 0.5 for t in plan.model.type_names}))
out["mm1"] = simulate_waits("mm1", 0.8, 3000, 1)[:2]
model = load_model("qwen2.5-omni")
doc = {"kind": "plan", "model": "qwen2.5-omni", "gpu": "RTX6000Ada", "transfer_ms": 0,
       "nodes": [{"name": "stage0", "components": ["vision_encoder", "audio_encoder", "thinker"],
                  "executors": [{"count": 1, "tp": 1, "max_batch": 32}]},
                 {"name": "stage1", "components": ["talker", "token2wav"],
                  "executors": [{"count": 1, "tp": 1, "max_batch": 16}]}],
       "routes": {t: [{"nodes": ["stage0"] + (["stage1"] if t.endswith("a") else []), "p": 1.0}]
                  for t in model.type_names}}
rplan = resolve_plan(parse(PlanSpec, doc), model, load_gpus())
horizon = load_workload(catalog_dir() / "workloads" / "qwen2.5-omni-horizon.yaml")
reqs = generate(horizon, n=30, rate=0.4, seed=2)
policy = Capped()
setup = RunSetup(policy_for=lambda ex, c: policy if c == "thinker" else None,
                 shared_gpu=SharedGPU("stage0/0.0", ("stage1/0.0",), "split"))
out["split"] = rows(simulate(rplan, reqs, CostModel(model), setup=setup))
print(json.dumps(out))
'''


def _run(pure: bool) -> dict[str, object]:
    env = dict(os.environ)
    env.pop(native.PURE_ENV, None)
    if pure:
        env[native.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", RUNS], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_compiled_and_plain_python_give_identical_results() -> None:
    if not native.active():
        if os.environ.get(native.PURE_ENV, "") not in ("", "0"):
            pytest.skip(f"{native.PURE_ENV} is set: plain Python only")
        failed = native.failure()
        if failed is not None and failed[0] == native.COMPILE:  # a toolchain exists: a defect
            pytest.fail(f"the simulator no longer compiles: {failed[1]}")
        why = failed[1] if failed else "no build for these sources (make test / make run build one)"
        pytest.skip(f"the compiled modules are not available: {why}")
    compiled, plain = _run(pure=False), _run(pure=True)
    assert compiled.pop("native") is True and plain.pop("native") is False
    assert compiled == plain


def _fake_build(where: Path, files: list[Path]) -> None:
    (where / "omniplane" / "sim").mkdir(parents=True)
    (where / "SOURCES").write_text("".join(f"{f.relative_to(native.TOP).as_posix()}\n" for f in files))
    (where / "STAMP").write_text(where.name + "\n")


def test_a_build_is_used_only_for_the_sources_it_was_made_from(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    files = native.sources()
    _fake_build(tmp_path / "omniplane-native" / "0123456789abcdef0123", files)  # other sources
    path: list[str] = []
    assert not native.activate(path) and path == []
    here = native.location()  # one for these sources is used
    _fake_build(here, files)
    assert native.current() == here
    assert native.activate(path) and path == [str(here / "omniplane" / "sim")]
    monkeypatch.setenv(native.PURE_ENV, "1")  # unless plain Python is asked for
    assert not native.activate([])
    monkeypatch.delenv(native.PURE_ENV)
    (here / "SOURCES").write_text("omniplane/sim/walk.py\n")  # one file listed: its hash differs
    assert native.current() is None and not native.activate([])


def test_a_build_depends_on_what_the_compiled_modules_import() -> None:
    names = {f.relative_to(native.TOP).as_posix() for f in native.sources()}
    assert {f"omniplane/sim/{m}.py" for m in native.MODULES} <= names
    # imported by the compiled modules, directly (llm -> perf.span, policy) or not
    assert {"omniplane/perf/span.py", "omniplane/policy.py", "omniplane/spec/work.py",
            "omniplane/sim/__init__.py", "omniplane/__init__.py"} <= names
    assert "omniplane/cli/app.py" not in names and "omniplane/plan/search.py" not in names


def test_a_failed_build_is_loud_and_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    monkeypatch.setattr(native, "missing_toolchain", lambda: "no C compiler ('cc' is not on PATH)")
    assert native.main([]) == 0  # make run / make test go on, as plain Python
    err = capsys.readouterr().err
    assert "NOT available: no C compiler" in err and "plain Python" in err
    assert native.failure() == (native.TOOLCHAIN, "no C compiler ('cc' is not on PATH)")
    assert native.main([]) == 0 and "NOT available" in capsys.readouterr().err  # said every time
    assert native.main(["--strict"]) == 1 and "NOT available" in capsys.readouterr().err  # make sim-compiled
    _fake_build(native.location(), native.sources())
    assert native.main([]) == 0 and capsys.readouterr() == ("", "")  # up to date: silent
