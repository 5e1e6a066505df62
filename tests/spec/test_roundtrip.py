"""load -> dump -> load gives an equal spec, for the catalog and for generated specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniplane.spec import (
    GPUCatalog,
    ModelSpec,
    PlanSpec,
    WorkloadSpec,
    dump,
    load_document,
    parse,
)
from omniplane.spec.catalog import all_catalog_files
from omniplane.spec.yamlio import parse_yaml

SRC = "https://example.org/card"


@pytest.mark.parametrize("path", all_catalog_files(), ids=lambda p: p.name)
def test_catalog_round_trips(path: Path) -> None:
    doc = load_document(path)
    text = dump(doc)
    data, _ = parse_yaml(text, None)
    again = parse(type(doc), data)
    assert again == doc
    assert dump(again) == text


positive = st.floats(min_value=0.5, max_value=1e4, allow_nan=False, allow_infinity=False)


@st.composite
def distributions(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["plain", "constant", "uniform", "lognormal", "normal", "choice",
                                 "exponential"]))
    a = draw(positive)
    if kind == "plain":
        return a
    if kind == "constant":
        return {"dist": "constant", "value": a}
    if kind == "uniform":
        return {"dist": "uniform", "low": a, "high": a + draw(positive)}
    if kind == "lognormal":
        return {"dist": "lognormal", "median": a, "sigma": draw(st.floats(0, 2)), "max": a * 10}
    if kind == "normal":
        return {"dist": "normal", "mean": a, "std": draw(st.floats(0, 100)), "min": 0.5}
    if kind == "exponential":
        return {"dist": "exponential", "mean": a}
    values = draw(st.lists(positive, min_size=1, max_size=4))
    return {"dist": "choice", "values": values,
            "weights": [draw(st.floats(0.1, 5)) for _ in values]}


@st.composite
def model_docs(draw: st.DrawFn) -> dict[str, Any]:
    """Random valid models: encoders -> chain of LLMs -> optional vocoder or DiT+VAE."""
    n_enc = draw(st.integers(0, 3))
    n_llm = draw(st.integers(1, 3))
    tail = draw(st.sampled_from(["none", "vocoder", "image"]))
    modalities = ["image", "audio", "video"]
    comps: list[dict[str, Any]] = []

    def size(**extra: Any) -> dict[str, Any]:
        return {"params": draw(st.floats(1e6, 1e11)), "source": SRC, **extra}

    for i in range(n_enc):
        comps.append({"name": f"enc{i}", "kind": "encoder", "modalities": [modalities[i]],
                      "size": size(), "edges": [{"to": "llm0", "colocatable": draw(st.booleans())}]})
    for i in range(n_llm):
        heads = draw(st.sampled_from([4, 8, 16]))
        c: dict[str, Any] = {"name": f"llm{i}", "kind": "llm",
                             "size": size(layers=draw(st.integers(1, 80)), hidden=heads * 64,
                                          heads=heads, kv_heads=draw(st.sampled_from([1, 2, 4])))}
        if i + 1 < n_llm:
            c["edges"] = [{"to": f"llm{i + 1}", "colocatable": draw(st.booleans()),
                           "streaming": draw(st.booleans())}]
        comps.append(c)
    if tail == "vocoder":
        comps[-1]["edges"] = [{"to": "voc", "colocatable": draw(st.booleans())}]
        comps.append({"name": "voc", "kind": "generator", "generator": "vocoder",
                      "size": size(frame_rate_hz=12.5)})
    elif tail == "image":
        comps[-1]["edges"] = [{"to": "dit", "colocatable": True}]
        comps.append({"name": "dit", "kind": "generator", "generator": "dit",
                      "size": size(pixels_per_token=256), "edges": [{"to": "vae"}]})
        comps.append({"name": "vae", "kind": "generator", "generator": "vae", "size": size()})

    llms = [f"llm{i}" for i in range(n_llm)]
    text_work = {"llm0": {"prompt_tokens": draw(distributions()),
                          "output_tokens": draw(distributions())}}
    types: list[dict[str, Any]] = [{"name": "t2t", "inputs": ["text"], "output": "text",
                                    "path": ["llm0"], "work": text_work}]
    for i in range(n_enc):
        types.append({"name": f"{modalities[i][0]}2t", "inputs": ["text", modalities[i]],
                      "output": "text", "path": [f"enc{i}", "llm0"],
                      "work": {f"enc{i}": {"items": draw(distributions()),
                                           "tokens_per_item": draw(distributions())},
                               **text_work}})
    if tail != "none":
        work: dict[str, Any] = {name: {"output_tokens": draw(distributions())} for name in llms}
        work["llm0"]["prompt_tokens"] = draw(distributions())
        out = "audio" if tail == "vocoder" else "image"
        gens = ["voc"] if tail == "vocoder" else ["dit", "vae"]
        if tail == "image":
            work["dit"] = {"steps": 20, "height": 512, "width": 512}
            work["vae"] = {"height": 512, "width": 512}
        types.append({"name": f"t2{out[0]}", "inputs": ["text"], "output": out,
                      "path": [*llms, *gens], "work": work,
                      "priority": draw(st.integers(0, 20))})
    execs = [{"name": c["name"], "hosts": [c["name"]],
              "tp": draw(st.sampled_from([[1], [1, 2], [1, 2, 4]])),
              "max_batch": draw(st.lists(st.integers(1, 512), min_size=1, max_size=4, unique=True))}
             for c in comps]
    return {"kind": "model", "name": "gen", "components": comps, "request_types": types,
            "executor_types": execs}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_docs())
def test_generated_models_round_trip(doc: dict[str, Any]) -> None:
    spec = parse(ModelSpec, doc)
    data, _ = parse_yaml(dump(spec), None)
    assert parse(ModelSpec, data) == spec


@settings(max_examples=40, deadline=None)
@given(
    fractions=st.lists(st.floats(0.01, 1), min_size=1, max_size=6),
    cv=st.floats(0.1, 5),
    rate=st.floats(0.01, 100),
)
def test_generated_workloads_round_trip(fractions: list[float], cv: float, rate: float) -> None:
    total = sum(fractions)
    mix = {f"type{i}": f / total for i, f in enumerate(fractions)}
    mix["type0"] += 1 - sum(mix.values())
    doc = {"kind": "workload", "name": "w", "model": "m.yaml", "mix": mix,
           "arrival": {"process": "gamma", "rate": rate, "cv": cv},
           "slo": {"policy": "solo_multiplier", "multiplier": 5}}
    spec = parse(WorkloadSpec, doc)
    data, _ = parse_yaml(dump(spec), None)
    assert parse(WorkloadSpec, data) == spec


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.integers(1, 8), min_size=1, max_size=4))
def test_generated_plans_round_trip(counts: list[int]) -> None:
    nodes = [{"name": f"n{i}", "components": [f"c{i}"],
              "executors": [{"count": c, "tp": 1, "max_batch": 8}]} for i, c in enumerate(counts)]
    doc = {"kind": "plan", "model": "m.yaml", "gpu": "H100-SXM", "nodes": nodes,
           "routes": {"t": [{"nodes": [n["name"] for n in nodes], "p": 1.0}]}}
    spec = parse(PlanSpec, doc)
    data, _ = parse_yaml(dump(spec), None)
    assert parse(PlanSpec, data) == spec


def test_gpu_catalog_round_trips_with_overridden_sources() -> None:
    from omniplane.spec import load_gpus

    gpus = load_gpus()
    data, _ = parse_yaml(dump(gpus), None)
    assert parse(GPUCatalog, data) == gpus
