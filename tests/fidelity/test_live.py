"""Against a real vLLM (the CPU build in .venv-vllm, marker ``vllm``) serving the tiny fixture on
127.0.0.1: the fixture, the engine's own config, a short fidelity loop, and HorizonServe inside
the engine. Two engines, started together and shared with tests/deploy/test_gateway_vllm.py
(tests/fidelity/live_engines.py): vLLM's own scheduler (fidelity) and omniplane's scheduler
class running ``horizon`` (the live scheduling test). Behaviour only
(schema, exactly-once completion, errors computed, nothing lost); the timings themselves are
benchmarks (docs/results/fidelity.md)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

from omniplane.control import ControlRecord  # noqa: E402
from omniplane.fidelity.calibrate import ProbePlan  # noqa: E402
from omniplane.fidelity.compare import METRICS, errors  # noqa: E402
from omniplane.fidelity.engine import read_engine_config  # noqa: E402
from omniplane.fidelity.loop import FidelityOptions, run_fidelity  # noqa: E402
from omniplane.fidelity.schedlive import class_table, measure_stream  # noqa: E402
from omniplane.fidelity.server import VllmServer  # noqa: E402
from omniplane.fixture import FIXTURE, build, ensure_model_dir  # noqa: E402
from omniplane.loadgen.affinity import bound_pids, engine_cpus, host_cpus, separate, threads  # noqa: E402
from omniplane.spec import load_workload  # noqa: E402
from omniplane.vllm import shmwait  # noqa: E402
from omniplane.workload import generate  # noqa: E402
from tests.fidelity.live_engines import MIXED, LiveEngines  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"
FIDELITY = load_workload(DATA / "tiny-qwen2-fidelity.yaml")


@pytest.fixture(scope="module")
def logs(live_engines: LiveEngines) -> Path:
    return live_engines.logs


@pytest.fixture(scope="module")
def servers(live_engines: LiveEngines) -> dict[str, VllmServer]:
    """The session's two engines (tests/fidelity/live_engines.py), started together."""
    return live_engines.get()


def test_the_fixture_is_seeded_and_built_locally(tmp_path: Path) -> None:
    cached = ensure_model_dir()
    build(FIXTURE, tmp_path)
    digest = [hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest() for d in (cached, tmp_path)]
    assert digest[0] == digest[1]
    cfg = json.loads((cached / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 4 and cfg["vocab_size"] == FIXTURE.vocab_size
    assert not (cached / "tokenizer.json").exists()  # token-id prompts, no tokenizer


def test_the_engine_config_is_read_from_the_engine(servers: dict[str, VllmServer]) -> None:
    cfg = read_engine_config(servers["bare"].url)
    assert cfg.sources["max_num_seqs"] == "GET /server_info"
    assert cfg.max_num_seqs >= 1 and cfg.max_num_batched_tokens >= 1 and cfg.kv_tokens > 0
    assert cfg.chunked_prefill and cfg.scheduler_cls is None and cfg.model == FIXTURE.name
    horizon = read_engine_config(servers["horizon"].url)
    assert horizon.scheduler_cls == "omniplane.vllm.scheduler.OmniplaneScheduler"


def test_the_engine_core_sleeps_between_polls_of_its_worker(servers: dict[str, VllmServer],
                                                             logs: Path) -> None:
    notes = [line for line in (logs / "vllm-bare.log").read_text().splitlines() if shmwait.NOTE in line]
    pids = {int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in notes}
    # the API server (the group's leader) and at least the engine core applied the patch
    assert servers["bare"].pgid in pids and len(pids) >= 2, notes
    assert all("0.0005 s between polls" in line for line in notes)
    horizon = (logs / "vllm-horizon.log")
    assert not horizon.exists() or shmwait.NOTE not in horizon.read_text()  # off unless asked


def test_the_client_is_kept_off_the_cores_vllms_worker_bound(servers: dict[str, VllmServer]) -> None:
    host = host_cpus()
    pgid = servers["bare"].pgid
    bound = engine_cpus(pgid)
    assert bound and bound <= host  # vLLM's CPU worker binds its OpenMP threads (auto)
    with separate(pgid, restore_group=True) as pin:
        if not host - bound:
            assert not pin.pinned and "every core" in pin.note
            return
        assert pin.pinned and set(pin.client_cpus) == host - bound and pin.moved_threads > 0
        assert os.sched_getaffinity(0) == host - bound
        assert all(os.sched_getaffinity(t) == host - bound for t in threads(pgid))  # the API server
    assert os.sched_getaffinity(0) == host and os.sched_getaffinity(pgid) == host  # undone for the A/B


def test_a_short_fidelity_loop_measures_and_predicts_every_load(servers: dict[str, VllmServer],
                                                                 tmp_path: Path) -> None:
    pgid = servers["bare"].pgid
    opts = FidelityOptions(servers["bare"].url, FIDELITY, (0.3, 0.6, 0.9), duration_s=4.0,
                           plan=ProbePlan.quick(), table=tmp_path / "profile.csv", repeats=1,
                           engine_pgid=pgid, worker_pids=bound_pids(pgid))
    doc = run_fidelity(opts)
    assert set(doc) == {"engine", "loads"}
    assert len(doc["loads"]) == 3
    for load, detail in zip(doc["loads"], doc["engine"]["loads"], strict=True):
        assert set(load) == {"offered_rps", "measured", "simulated"}
        assert set(load["measured"]) == set(load["simulated"]) == set(METRICS)
        assert all(v is not None and v > 0 for v in (*load["measured"].values(), *load["simulated"].values()))
        assert all(e is not None for e in errors(load["measured"], load["simulated"]).values())
        assert detail["completed"] == detail["requests"] and detail["lost"] == detail["failed"] == 0
    rates = [load["offered_rps"] for load in doc["loads"]]
    assert rates == sorted(rates) and rates[0] == pytest.approx(0.3 * doc["engine"]["capacity_measured_rps"])
    step = doc["engine"]["step_model"]
    assert step["rows"] and step["limits"]["token_budget"] == doc["engine"]["max_num_batched_tokens"]
    # each load is calibrated on the probes just before and after its replay, never on the replay
    assert [d["calibration"]["probes"] for d in doc["engine"]["loads"]] == [[1, 2], [2, 3], [3, 4]]
    assert all(d["calibration"]["holdout"]["rows"] for d in doc["engine"]["loads"])
    # every probe point carries the API server's and the client's CPU, and the front-end queue is
    # fitted to those readings (the probes), with costs that are never negative
    probes = doc["engine"]["profile"]["probes"]
    assert all(pt["cpu_s"]["api"] > 0 and pt["cpu_s"]["client"] > 0 for p in probes for pt in p["points"])
    for d in doc["engine"]["loads"]:
        fq = d["calibration"]["frontend_queue"]
        terms = ("per_request_ms", "per_prompt_token_us", "per_token_ms", "per_iteration_ms")
        assert fq["samples"] and all(fq[k] >= 0 for k in terms)
    assert (tmp_path / "profile.csv").read_text().startswith("component,gpu,tp,op")
    json.dumps(doc)


def test_horizon_runs_inside_the_engine_and_every_request_completes_once(
        servers: dict[str, VllmServer], logs: Path) -> None:
    url = servers["horizon"].url
    slo_s, _ = class_table(MIXED, ("long",))
    requests = generate(MIXED, duration_s=6.0, rate=2.0, seed=3)
    out = measure_stream(url, MIXED.model, requests, slo_s)
    once = out["exactly_once"]
    assert once["ok"], once
    assert once["engine_finished"] == once["sent"] == len(requests)
    classes = out["per_class"]
    assert set(classes) == {r.type for r in requests}
    for c in classes.values():
        assert c["completed"] == c["sent"] and c["lost"] == 0 and 0.0 <= c["attainment"] <= 1.0
        assert c["p95_ttft_ms"] >= c["p50_ttft_ms"] > 0
    # throughput three ways; the engine's own means say where the first-token time went
    tp = out["throughput"]
    assert tp["span_rps"] > 0 and tp["steady_tokens_per_s"] > 0
    assert 0 < tp["window_rps"] <= tp["offered_rps"] * (1 + 1e-9) + 1 / tp["window_s"]
    assert {"queue", "prefill", "ttft"} <= set(out["server_ms"])
    assert out["server_ms"]["ttft"] >= out["server_ms"]["prefill"] > 0
    # the scheduler class ran every step inside the engine core, with the HorizonServe policy
    with ControlRecord.open("live-horizon", directory=logs, create=False) as rec:
        after = rec.read(0)
    assert after is not None and after.pid not in (0, servers["horizon"].proc and servers["horizon"].proc.pid)
    assert after.step > len(requests)  # at least a prefill step per request (and the warm-up's)
    info = read_engine_config(url)
    assert info.scheduler_cls == "omniplane.vllm.scheduler.OmniplaneScheduler"
    assert "Using custom scheduler class omniplane.vllm.scheduler.OmniplaneScheduler" in (
        servers["horizon"].log_path.read_text())
