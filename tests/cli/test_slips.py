"""Malformed inputs and slips, across every command: each exits 2 with ``error:`` lines that
name the option or file (and field) and what was expected, shows no traceback, and leaves every
file as it was (nothing created, nothing changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.slips import CATALOG_PLAN, invoke, snapshot, write_fixtures

P = str(CATALOG_PLAN)  # a valid plan (Qwen3-Omni, 16 x A100)
SOLO = ["perf", "solo", "qwen3-omni", "--gpu", "H100"]
PREDICT = ["perf", "predict", "--model", "qwen3-omni", "--component", "thinker", "--gpu", "H100"]
SIM = ["sim", "run", P, "--workload", "qwen3-omni-servegen"]
PLAN = ["plan", "--model", "qwen3-vl", "--gpus", "8"]
HZ = ["experiment", "horizon"]
SAMPLE = ["workload", "sample", "qwen3-omni-servegen"]
PROFILE = ["profile", "--url", "http://127.0.0.1:9", "--model", "M", "--component", "thinker",
           "--gpu", "H100"]
CFG = ["vllm-omni", "config", "--model", "qwen2.5-omni", "--slo-table", "slo.yaml"]

# (id, command line, fragments): the first (the option or file) is on every error line, all of
# them (what was wrong, the field, what was expected) on the first
CASES: list[tuple[str, list[str], list[str]]] = [
    # ---- plan: option ranges, names, the mix rule, outputs
    ("plan-gpus-0", ["plan", "--model", "qwen3-vl", "--gpus", "0"], ["--gpus", "1 <= N <= 64"]),
    ("plan-gpus-negative", ["plan", "--model", "qwen3-vl", "--gpus", "-3"], ["--gpus"]),
    ("plan-gpus-100000", ["plan", "--model", "qwen3-vl", "--gpus", "100000"],
     ["--gpus", "64", "the planner's limit"]),
    ("plan-gpus-text", ["plan", "--model", "qwen3-vl", "--gpus", "eight"], ["--gpus"]),
    ("plan-policy-unknown", [*PLAN, "--policy", "fastest"], ["--policy", "fastest", "total"]),
    ("plan-model-typo", ["plan", "--model", "qwen3-vll", "--gpus", "8"], ["--model", "qwen3-vl"]),
    ("plan-model-missing-file", ["plan", "--model", "nope/m.yaml", "--gpus", "8"],
     ["--model", "nope/m.yaml"]),
    ("plan-gpu-unknown", [*PLAN, "--gpu", "a10"], ["--gpu", "a10"]),
    ("plan-mix-over-1", [*PLAN, "--mix", "t2t=2"], ["--mix", "sum to 2", "--normalize"]),
    ("plan-mix-under-1", [*PLAN, "--mix", "t2t=0.3,ti2t=0.3"], ["--mix", "0.6"]),
    ("plan-mix-type", [*PLAN, "--mix", "t2x=1"], ["--mix", "t2x"]),
    ("plan-mix-negative", [*PLAN, "--mix", "t2t=-1,ti2t=2"], ["--mix", "t2t"]),
    ("plan-mix-no-equals", [*PLAN, "--mix", "t2t"], ["--mix", "TYPE=FRACTION"]),
    ("plan-mix-nan", [*PLAN, "--mix", "t2t=nan,ti2t=1"], ["--mix", "t2t"]),
    ("plan-mix-twice", [*PLAN, "--mix", "t2t=0.5,t2t=0.5"], ["--mix", "twice"]),
    ("plan-normalize-alone", [*PLAN, "--normalize"], ["--normalize", "--mix"]),
    ("plan-alpha-0", [*PLAN, "--alpha", "0"], ["--alpha"]),
    ("plan-alpha-inf", [*PLAN, "--alpha", "inf"], ["--alpha", "finite"]),
    ("plan-routing-step", [*PLAN, "--routing-step", "0.3"], ["--routing-step", "divides 1"]),
    ("plan-routing-lp", [*PLAN, "--routing", "lp"], ["--routing", "not implemented"]),
    ("plan-k-c-0", [*PLAN, "--k-c", "0"], ["--k-c"]),
    ("plan-seed-negative", [*PLAN, "--seed", "-1"], ["--seed"]),
    ("plan-sim-requests", [*PLAN, "--sim-requests", "5"], ["--sim-requests"]),
    ("plan-replan-0", [*PLAN, "--replan-gpus", "0"], ["--replan-gpus"]),
    ("plan-slo-percentile", [*PLAN, "--slo-percentile", "100"], ["--slo-percentile"]),
    ("plan-slo-multiplier", [*PLAN, "--slo-multiplier", "-1"], ["--slo-multiplier"]),
    ("plan-slo-policy", [*PLAN, "--slo-policy", "fastest"], ["--slo-policy"]),
    ("plan-out-under-file", [*PLAN, "--out", "afile/o.yaml"], ["--out", "afile"]),
    ("plan-out-is-dir", [*PLAN, "--out", "adir"], ["--out", "adir", "folder"]),
    ("plan-figures-is-file", [*PLAN, "--out", "o.yaml", "--figures", "afile"], ["--figures", "afile"]),
    ("plan-existing-out-kept", [*PLAN, "--out", "existing.yaml", "--k-s", "0"], ["--k-s"]),
    ("plan-workload-typo", [*PLAN, "--workload", "qwen3-vl-servegn"], ["--workload", "qwen3-vl-servegen"]),
    ("plan-workload-other-model", [*PLAN, "--workload", "qwen3-omni-servegen"], ["--workload", "qwen3-omni"]),
    ("plan-workload-bad-file", [*PLAN, "--workload", "w-rate-inf.yaml"], ["w-rate-inf.yaml", "arrival.rate"]),
    ("plan-model-bad-file", ["plan", "--model", "m-params-inf.yaml", "--gpus", "8"],
     ["m-params-inf.yaml", "components[1].size.params", "finite"]),
    ("plan-show-missing", ["plan", "show", "nope.yaml"], ["nope.yaml"]),
    ("plan-show-a-model", ["plan", "show", "tiny.yaml"], ["tiny.yaml", "kind", "plan"]),
    ("plan-no-options", ["plan", "--gpus", "8"], ["--model"]),
    # ---- perf
    ("perf-solo-tp-3", [*SOLO, "--tp", "3"], ["--tp", "power of two"]),
    ("perf-solo-tp-0", [*SOLO, "--tp", "0"], ["--tp"]),
    ("perf-solo-gpu", ["perf", "solo", "qwen3-omni", "--gpu", "H1000"], ["--gpu", "H1000"]),
    ("perf-solo-gpu-missing", ["perf", "solo", "qwen3-omni"], ["--gpu"]),
    ("perf-solo-model", ["perf", "solo", "qwen3-omnii", "--gpu", "H100"], ["MODEL", "qwen3-omni"]),
    ("perf-solo-n-0", [*SOLO, "--n", "0"], ["--n"]),
    ("perf-solo-profile-missing", [*SOLO, "--profiles", "nope.csv"], ["--profiles", "nope.csv"]),
    ("perf-solo-profile-bad", [*SOLO, "--profiles", "profile-bad.csv"], ["profile-bad.csv"]),
    ("perf-validate-calibration", ["perf", "validate", "--calibration", "bad.json"],
     ["--calibration", "bad.json"]),
    ("perf-capacity-model", ["perf", "capacity", "--model", "qwen3-omnii"], ["--model", "qwen3-omni"]),
    ("perf-capacity-gpu", ["perf", "capacity", "--model", "qwen3-omni", "--gpu", "A10"], ["--gpu", "A10"]),
    ("perf-capacity-workload", ["perf", "capacity", "--model", "qwen3-omni", "--workload", "nope.yaml"],
     ["--workload", "nope.yaml"]),
    ("perf-capacity-runtime", ["perf", "capacity", "--model", "qwen3-omni", "--runtime", "sglang"],
     ["--runtime", "sglang", "cornserve"]),
    ("perf-predict-batch-0", [*PREDICT, "--batch", "0"], ["--batch", "1 <= N"]),
    ("perf-predict-batch-huge", [*PREDICT, "--batch", "100000000000"], ["--batch", "1,000,000"]),
    ("perf-predict-tokens-1e300", [*PREDICT, "--prompt-tokens", "1e300"], ["--prompt-tokens"]),
    ("perf-predict-context-negative", [*PREDICT, "--context-tokens", "-1"], ["--context-tokens"]),
    ("perf-predict-op", [*PREDICT, "--op", "generate"], ["--op", "generate", "prefill"]),
    ("perf-predict-tp-3", [*PREDICT, "--tp", "3"], ["--tp", "power of two"]),
    ("perf-predict-component", ["perf", "predict", "--model", "qwen3-omni", "--component", "thinkr",
                                "--gpu", "H100"], ["--component", "thinker"]),
    ("perf-colocation-missing", ["perf", "colocation-fit", "nope.json"], ["nope.json"]),
    ("perf-colocation-bad", ["perf", "colocation-fit", "bad.json"], ["bad.json"]),
    ("perf-fit-out-dir", ["perf", "fit", "--out", "adir"], ["--out", "adir"]),
    # ---- sim
    ("sim-n-negative", [*SIM, "--n", "-5"], ["--n"]),
    ("sim-n-0", [*SIM, "--n", "0"], ["--n"]),
    ("sim-n-huge", [*SIM, "--n", "100000000"], ["--n", "1,000,000"]),
    ("sim-rate-negative", [*SIM, "--rate", "-1"], ["--rate"]),
    ("sim-rate-0", [*SIM, "--rate", "0"], ["--rate", "0 < x"]),
    ("sim-rate-inf", [*SIM, "--rate", "inf"], ["--rate", "finite"]),
    ("sim-duration-nan", [*SIM, "--duration", "nan"], ["--duration"]),
    ("sim-duration-huge", [*SIM, "--duration", "10000000"], ["qwen3-omni-servegen", "1,000,000"]),
    ("sim-trace-under-file", [*SIM, "--n", "10", "--trace", "afile/t.json"], ["--trace", "afile"]),
    ("sim-plan-missing", ["sim", "run", "nope.yaml", "--workload", "qwen3-omni-servegen"],
     ["PLAN", "nope.yaml"]),
    ("sim-plan-dir", ["sim", "run", "adir", "--workload", "qwen3-omni-servegen"], ["adir", "folder"]),
    ("sim-workload-typo", ["sim", "run", P, "--workload", "qwen3-omni-servegn"], ["--workload"]),
    ("sim-workload-other", ["sim", "run", P, "--workload", "qwen3-vl-servegen"], ["--workload", "qwen3-vl"]),
    ("sim-plan-bad-number", ["sim", "run", "p-count-bool.yaml", "--workload", "w.yaml"],
     ["p-count-bool.yaml", "gpus"]),
    ("sim-plan-nan", ["sim", "run", "p-transfer-nan.yaml", "--workload", "w.yaml"],
     ["p-transfer-nan.yaml", "transfer_ms"]),
    ("sim-slo-bad", [*SIM, "--n", "10", "--slo", "ti2t=fast"], ["--slo", "ti2t"]),
    ("sim-queue-kind", ["sim", "queue", "--kind", "mm2"], ["--kind", "mm2"]),
    ("sim-queue-rho", ["sim", "queue", "--rho", "1"], ["--rho"]),
    ("sim-queue-customers", ["sim", "queue", "--customers", "10"], ["--customers"]),
    # ---- workload
    ("workload-show-typo", ["workload", "show", "qwen3-omni-servegn"], ["qwen3-omni-servegen"]),
    ("workload-show-trace-1e300", ["workload", "show", "trace-1e300.csv"], ["trace-1e300.csv"]),
    ("workload-show-trace-inf", ["workload", "show", "trace-inf.csv"], ["trace-inf.csv"]),
    ("workload-show-trace-order", ["workload", "show", "trace-back.jsonl"], ["trace-back.jsonl"]),
    ("workload-show-trace-bool", ["workload", "show", "trace-bool.jsonl"], ["trace-bool.jsonl"]),
    ("workload-show-trace-deep", ["workload", "show", "trace-deep.jsonl"], ["trace-deep.jsonl"]),
    ("workload-show-format", ["workload", "show", "azure-conv", "--format", "parquet"],
     ["--format", "parquet"]),
    ("workload-show-n-0", ["workload", "show", "azure-conv", "--n", "0"], ["--n"]),
    ("workload-show-spec-1e300", ["workload", "show", "w-trace-1e300.yaml"],
     ["trace-1e300.csv", "arrival_s", "1e+08"]),
    ("workload-show-types", ["workload", "show", "w-trace-types.yaml"], ["trace-types.csv", "t2x"]),
    ("workload-show-model-spec", ["workload", "show", "tiny.yaml"], ["tiny.yaml", "kind", "workload"]),
    ("workload-sample-trace", ["workload", "sample", "azure-conv", "--out", "r.jsonl"], ["azure-conv"]),
    ("workload-sample-out-dir", [*SAMPLE, "--out", "adir"], ["--out", "adir"]),
    ("workload-sample-under-file", [*SAMPLE, "--out", "afile/r.jsonl"], ["--out", "afile"]),
    ("workload-sample-kept", [*SAMPLE, "--out", "existing.jsonl", "--n", "-1"], ["--n"]),
    ("workload-sample-no-out", SAMPLE, ["--out"]),
    ("workload-sample-rate", [*SAMPLE, "--out", "r.jsonl", "--rate", "1e300"], ["--rate"]),
    ("workload-plot-jpg", ["workload", "plot", "azure-conv", "--out", "x.jpg"], ["--out", "x.jpg", ".png"]),
    ("workload-plot-one-request", ["workload", "plot", "w.yaml", "--n", "1", "--out", "x.png"],
     ["w.yaml", "at least 2"]),
    ("workload-sample-not-jsonl", [*SAMPLE, "--n", "5", "--out", "r.csv"], ["--out", "r.csv", ".jsonl"]),
    ("workload-plot-bins", ["workload", "plot", "azure-conv", "--out", "x.png", "--bins", "1"], ["--bins"]),
    ("workload-plot-under-file", ["workload", "plot", "azure-conv", "--out", "afile/x.png"], ["--out"]),
    # ---- catalog commands
    ("show-typo", ["show", "qwen3-omi"], ["qwen3-omni"]),
    ("show-bad-model", ["show", "m-heads-huge.yaml"], ["m-heads-huge.yaml", "heads"]),
    ("validate-missing", ["validate", "nope.yaml"], ["nope.yaml"]),
    ("validate-empty", ["validate", "empty.yaml"], ["empty.yaml", "empty"]),
    ("validate-binary", ["validate", "binary.yaml"], ["binary.yaml"]),
    ("validate-folder", ["validate", "adir"], ["adir", "folder"]),
    # ---- experiment horizon
    ("horizon-gpu", [*HZ, "--gpu", "A100"], ["--gpu", "A100-80GB"]),
    ("horizon-model", [*HZ, "--model", "qwen3-omni"], ["--model", "qwen3-omni"]),
    ("horizon-sweep", [*HZ, "--sweep", "latency"], ["--sweep"]),
    ("horizon-xs-text", [*HZ, "--xs", "0.1,abc"], ["--xs", "abc"]),
    ("horizon-xs-negative", [*HZ, "--xs", "-1"], ["--xs"]),
    ("horizon-xs-fraction", [*HZ, "--sweep", "long-fraction", "--xs", "1.5"], ["--xs"]),
    ("horizon-policies", [*HZ, "--policies", "fastest"], ["--policies", "fastest"]),
    ("horizon-requests", [*HZ, "--requests", "5"], ["--requests"]),
    ("horizon-jobs", [*HZ, "--jobs", "0"], ["--jobs"]),
    ("horizon-duration", [*HZ, "--duration", "0"], ["--duration"]),
    ("horizon-figures-file", [*HZ, "--figures", "afile"], ["--figures", "afile"]),
    ("horizon-sm-sweep", [*HZ, "--sm-sweep", "nope.json"], ["--sm-sweep", "nope.json"]),
    # ---- deploy, loadgen, rehearse (all refused before Ray starts)
    ("deploy-host-no-key", ["deploy", P, "--host", "0.0.0.0"], ["--host", "--api-key"]),
    ("deploy-routable-no-key", ["deploy", P, "--host", "192.168.1.5", "--dry-run"], ["--host", "--api-key"]),
    ("deploy-empty-key", ["deploy", P, "--host", "0.0.0.0", "--api-key", " "], ["--api-key"]),
    ("deploy-host-bad", ["deploy", P, "--host", "bad host"], ["--host"]),
    ("deploy-port", ["deploy", P, "--port", "70000"], ["--port"]),
    ("deploy-engine", ["deploy", P, "--engine", "tensorrt"], ["--engine", "tensorrt"]),
    ("deploy-plan-missing", ["deploy", "nope.yaml"], ["nope.yaml"]),
    ("deploy-body", ["deploy", P, "--max-body-mb", "0"], ["--max-body-mb"]),
    ("deploy-prompt", ["deploy", P, "--max-prompt-tokens", "0"], ["--max-prompt-tokens"]),
    ("deploy-config-dir-file", ["deploy", P, "--engine", "vllm-omni", "--dry-run", "--config-dir", "afile"],
     ["--config-dir", "afile"]),
    ("loadgen-url", ["loadgen", "--url", "localhost:8000", "--workload", "qwen3-omni-servegen",
                     "--duration", "1"], ["--url"]),
    ("loadgen-workload", ["loadgen", "--url", "http://127.0.0.1:9", "--workload", "nope",
                          "--duration", "1"], ["--workload", "nope"]),
    ("loadgen-duration", ["loadgen", "--url", "http://127.0.0.1:9", "--workload", "qwen3-omni-servegen",
                          "--duration", "-1"], ["--duration"]),
    ("rehearse-kill", ["rehearse", P, "--workload", "qwen3-omni-servegen", "--duration", "1",
                       "--kill-replica", "nosuch"], ["--kill-replica", "nosuch"]),
    ("rehearse-kill-at", ["rehearse", P, "--workload", "qwen3-omni-servegen", "--duration", "1",
                          "--kill-at", "2"], ["--kill-at"]),
    ("rehearse-out-dir", ["rehearse", P, "--workload", "qwen3-omni-servegen", "--duration", "1",
                          "--out", "adir"], ["--out", "adir"]),
    # ---- vllm-omni, calibrate, profile
    ("config-model", ["vllm-omni", "config", "--model", "qwen9", "--slo-table", "slo.yaml"], ["--model"]),
    ("config-slo-missing", ["vllm-omni", "config", "--model", "qwen2.5-omni", "--slo-table", "nope.yaml"],
     ["--slo-table", "nope.yaml"]),
    ("config-slo-inf", ["vllm-omni", "config", "--model", "qwen2.5-omni", "--slo-table", "slo-inf.yaml"],
     ["slo-inf.yaml", "slo_s"]),
    ("config-gpu", [*CFG, "--gpu", "T4"], ["--gpu", "T4"]),
    ("config-memory", [*CFG, "--memory-budget", "2"], ["--memory-budget"]),
    ("config-out-dir", [*CFG, "--out", "adir"], ["--out", "adir"]),
    ("calibrate-missing", ["calibrate", "--from", "nope.json"], ["--from", "nope.json"]),
    ("calibrate-bad", ["calibrate", "--from", "bad.json"], ["bad.json"]),
    ("profile-url", ["profile", "--url", "nope", "--model", "M", "--component", "thinker", "--gpu", "H100"],
     ["--url"]),
    ("profile-tp", ["profile", "--url", "http://127.0.0.1:9", "--model", "M", "--component", "thinker",
                    "--gpu", "H100", "--tp", "3"], ["--tp"]),
    ("profile-concurrency", ["profile", "--url", "http://127.0.0.1:9", "--model", "M", "--component",
                             "thinker", "--gpu", "H100", "--concurrency", "1,x"], ["--concurrency"]),
    ("profile-request", ["profile", "--url", "http://127.0.0.1:9", "--model", "M", "--component",
                         "thinker", "--gpu", "H100", "--request", "short:abc:1"], ["--request"]),
    # ---- options main added after issue 20 (planner search, real engine, fidelity): same rules
    ("plan-time-budget-0", [*PLAN, "--time-budget", "0"], ["--time-budget"]),
    ("plan-max-simulated-0", [*PLAN, "--max-simulated", "0"], ["--max-simulated"]),
    ("plan-mc-tolerance-1", [*PLAN, "--mc-tolerance", "1"], ["--mc-tolerance"]),
    ("plan-replan-mix-sum", [*PLAN, "--replan-mix", "t2t=2"], ["--replan-mix", "sum to 2", "--normalize"]),
    ("plan-replan-mix-type", [*PLAN, "--replan-mix", "t2x=1"], ["--replan-mix", "t2x"]),
    ("profile-api", [*PROFILE, "--api", "grpc"], ["--api", "grpc"]),
    ("profile-vocab", [*PROFILE, "--api", "completions"], ["--vocab", "vocabulary"]),
    ("profile-request-at", [*PROFILE, "--request", "d:64:64@0"], ["--request", "@"]),
    ("deploy-vllm-time-scale", ["deploy", P, "--engine", "vllm", "--time-scale", "2"],
     ["--time-scale", "real time"]),
    ("rehearse-engine", ["rehearse", P, "--workload", "qwen3-omni-servegen", "--duration", "1",
                         "--engine", "vllm-omni"], ["--engine", "vllm-omni"]),
    ("rehearse-vllm-time-scale", ["rehearse", P, "--workload", "qwen3-omni-servegen", "--duration", "1",
                                  "--engine", "vllm", "--time-scale", "10"], ["--time-scale", "real time"]),
    ("fidelity-url", ["fidelity", "--url", "nope"], ["--url"]),
    ("fidelity-repeats", ["fidelity", "--url", "http://127.0.0.1:9", "--repeats", "0"], ["--repeats"]),
    ("fidelity-report-missing", ["fidelity", "--report", "nope.json"], ["--report", "nope.json"]),
    ("fidelity-out-dir", ["fidelity", "--url", "http://127.0.0.1:9", "--out", "adir"], ["--out", "adir"]),
    # ---- the command line itself
    ("root-option", ["--frobnicate"], ["--frobnicate"]),
    ("unknown-command", ["planx"], ["planx"]),
    ("unknown-option", [*PLAN, "--gpuz", "8"], ["--gpuz"]),
    ("missing-value", ["plan", "--model"], ["--model"]),
]

# every malformed spec of tests/cli/slips.py through `validate`: (spec, field fragment)
SPEC_CASES: list[tuple[str, str]] = [
    ("m-params-inf", "params"), ("m-params-nan", "params"), ("m-params-bool", "params"),
    ("m-params-1e300", "params"), ("m-params-string", "params"), ("m-layers-float", "layers"),
    ("m-heads-huge", "heads"), ("m-top-list", "mapping"), ("m-top-scalar", "mapping"),
    ("m-kind-unknown", "kind"), ("m-laughs-top", "billion laughs"), ("m-laughs-x", "billion laughs"),
    ("m-laughs-field", "billion laughs"), ("m-recursive", "recursive"), ("m-deep", "nested"),
    ("m-dup-key", "duplicate key"), ("m-yaml-syntax", "invalid YAML"),
    ("w-rate-inf", "arrival.rate"), ("w-rate-1e300", "arrival.rate"), ("w-rate-bool", "arrival.rate"),
    ("w-rate-zero", "arrival.rate"), ("w-duration-inf", "duration_s"), ("w-duration-neg", "duration_s"),
    ("w-seed-neg", "seed"), ("w-mix-bool", "mix"), ("w-mix-sum", "mix"), ("w-mix-unknown", "mix"),
    ("w-cv-huge", "arrival.cv"), ("w-weibull-cv", "arrival.cv"), ("w-silent", "arrival"),
    ("w-model-missing", "model"), ("w-trace-missing", "arrival"), ("w-slo-inf", "slo.targets_ms"),
    ("w-slo-pct", "slo.percentile"), ("w-trace-types", "'t2x' is not a request type"),
    ("p-count-bool", "gpus"), ("p-transfer-nan", "transfer_ms"),
]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_fixtures(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("OMNIPLANE_PROGRESS", "0")
    monkeypatch.delenv("OMNIPLANE_API_KEY", raising=False)
    return tmp_path


def check_refused(root: Path, args: list[str], fragments: list[str]) -> list[str]:
    before = snapshot(root)
    out = invoke(args, root)
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    text = out.stdout + out.stderr
    assert out.code == 2, f"exit {out.code}:\n{text}"
    assert "Traceback" not in text and "internal error" not in text, text
    assert lines, "no error message"
    assert all(x.startswith("error: ") for x in lines), text
    assert all(fragments[0] in x for x in lines), f"{fragments[0]!r} not on every line:\n{text}"
    for frag in fragments[1:]:
        assert frag in lines[0], f"{frag!r} not on the first line:\n{text}"
    assert out.stdout.strip() == "", f"stdout is for results:\n{out.stdout}"
    assert snapshot(root) == before, "a file was created or changed"
    return lines


@pytest.mark.parametrize(("case", "args", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_slip_is_refused_clearly(root: Path, case: str, args: list[str], fragments: list[str]) -> None:
    check_refused(root, args, fragments)


@pytest.mark.parametrize(("spec", "field"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_malformed_spec_is_refused_by_validate(root: Path, spec: str, field: str) -> None:
    lines = check_refused(root, ["validate", f"{spec}.yaml"], [f"{spec}.yaml"])
    assert any(field in x for x in lines), "\n".join(lines)


def test_at_least_sixty_slips() -> None:
    assert len(CASES) + len(SPEC_CASES) >= 60
