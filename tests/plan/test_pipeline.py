"""The planner's pipeline end to end on a small instance: what it writes into the plan file."""

from __future__ import annotations

from typing import Any

import pytest

from omniplane.perf import CostModel
from omniplane.plan.costs import CostTable
from omniplane.plan.options import PlannerOptions
from omniplane.plan.pipeline import Planner
from omniplane.plan.problem import make_problem
from omniplane.spec import ModelSpec, PlanSpec, ResolvedWorkload, WorkloadSpec, load_gpus, parse
from tests.plan.conftest import problem
from tests.spec.builders import tiny_model, tiny_workload

SIXTHS = {"t2t": 1 / 6, "i2t": 1 / 6, "i2a": 2 / 3}  # rounded to 6 decimals these sum to 1.000001


def _three_type_model() -> dict[str, Any]:
    model = tiny_model()
    model["request_types"].append({
        "name": "i2t", "inputs": ["text", "image"], "output": "text", "path": ["enc", "thinker"],
        "work": {"enc": {"items": 1, "tokens_per_item": 256},
                 "thinker": {"prompt_tokens": 60, "output_tokens": 20}},
    })
    return model


def test_a_mix_of_sixths_reaches_the_plan_file_exactly() -> None:
    """The plan file's ``prediction.mix`` is the problem's mix as given: a mix whose 6-decimal
    roundings do not sum to 1 within the spec's tolerance (1/6, 1/6, 2/3) still validates."""
    wl_doc = tiny_workload() | {"mix": SIXTHS, "slo": {"policy": "isolated_percentile"}}
    wl = ResolvedWorkload(parse(WorkloadSpec, wl_doc), parse(ModelSpec, _three_type_model()), None)
    pb = make_problem(wl, load_gpus().get("A100-80GB"), 2, samples=16)
    res = Planner(pb, options=PlannerOptions(mc_samples=16, sim_requests=60, max_simulated=1)).run()
    assert res.best is not None and res.best.spec.prediction is not None
    assert res.best.spec.prediction.mix == SIXTHS
    again = parse(PlanSpec, res.best.spec.model_dump(mode="json", exclude_none=True))
    assert again.prediction is not None and again.prediction.mix == SIXTHS


def test_dit_batch_mates_are_drawn_by_the_exact_mix() -> None:
    """A DiT's batch-mates are drawn with each type's mix fraction, not the fraction rounded to
    a percent (1/6 was drawn as 17%)."""
    pb = problem("qwen-image-diffusiondb", 4).with_mix({"t2i-512": 1 / 6, "t2i-1024": 5 / 6})
    pool = CostTable(pb, CostModel(pb.model)).batch_mates("dit")
    assert pool is not None
    k = len(pb.samples["t2i-512"])
    assert len(pool.sizes) == k + len(pb.samples["t2i-1024"])
    assert pool.p[:k].sum() == pytest.approx(1 / 6, rel=1e-12)
    assert pool.p.sum() == pytest.approx(1.0, rel=1e-12)
