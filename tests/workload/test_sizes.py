"""Vectorised work resolution equals spec.work.resolve, request by request."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omniplane.spec import load_model
from omniplane.spec.catalog import catalog_model_paths
from omniplane.spec.work import resolve, sample_raw
from omniplane.workload import resolve_arrays, sample_sizes

MODELS = [load_model(p) for p in catalog_model_paths()]
CASES = [(m, t) for m in MODELS for t in m.type_names]


@pytest.mark.parametrize(("model", "type_name"), CASES, ids=[f"{m.name}:{t}" for m, t in CASES])
def test_resolve_arrays_equals_resolve(model, type_name) -> None:  # type: ignore[no-untyped-def]
    n = 64
    raw = sample_raw(model, type_name, np.random.default_rng(11), n)
    arrays = resolve_arrays(model, type_name, raw, n)
    for i in range(n):
        one = resolve(model, type_name, {c: {q: float(v[i]) for q, v in qs.items()}
                                         for c, qs in raw.items()})
        got = {c: {q: float(v[i]) for q, v in qs.items()} for c, qs in arrays.items()}
        assert got == one


def test_given_values_replace_samples_where_finite() -> None:
    model = load_model("qwen3-vl")
    prompt = np.array([100.0, np.nan, 300.0])
    out = sample_sizes(model, "ti2t", np.random.default_rng(0), 3,
                       given={"llm": {"prompt_tokens": prompt}, "ghost": {"x": prompt}})
    enc = out["vision_encoder"]["tokens"]
    assert out["llm"]["prompt_tokens"][0] == 100.0 + enc[0]
    assert out["llm"]["prompt_tokens"][2] == 300.0 + enc[2]
    assert np.isfinite(out["llm"]["prompt_tokens"][1])


def test_a_given_quantity_without_a_distribution_needs_every_row() -> None:
    model = load_model("qwen3-omni")
    audio = {"code2wav": {"audio_seconds": np.array([3.0, np.nan])}}
    with pytest.raises(ValueError, match=r"no size distribution for code2wav\.audio_seconds"):
        sample_sizes(model, "ti2a", np.random.default_rng(0), 2, given=audio)
    full = {"code2wav": {"audio_seconds": np.array([3.0, 4.0])}}
    out = sample_sizes(model, "ti2a", np.random.default_rng(0), 2, given=full)
    assert out["code2wav"]["audio_seconds"].tolist() == [3.0, 4.0]


@settings(max_examples=30, deadline=None)
@given(items=st.integers(1, 50), per_item=st.floats(1, 5000), text=st.integers(1, 10**5))
def test_prompt_is_text_plus_image_tokens(items: int, per_item: float, text: int) -> None:
    model = load_model("qwen3-vl")
    given_ = {"vision_encoder": {"items": np.array([float(items)]),
                                 "tokens_per_item": np.array([per_item])},
              "llm": {"prompt_tokens": np.array([float(text)])}}
    out = sample_sizes(model, "ti2t", np.random.default_rng(0), 1, given=given_)
    tokens = float(np.ceil(items * per_item))
    assert out["vision_encoder"]["tokens"][0] == max(1.0, tokens)
    assert out["llm"]["prompt_tokens"][0] == text + max(1.0, tokens)
