"""Per-request work: sample a request type's size distributions and resolve them into the
canonical quantities every layer uses (cost model, simulator, planner, scheduler).

Canonical quantities per component kind (all floats; counts are whole numbers >= 1):

==========  ==================================================================================
encoder     ``items``; ``tokens`` = LLM tokens it produces (items x tokens_per_item, or
            items x seconds x size.tokens_per_second); ``seconds`` when given
llm         ``prompt_tokens`` = own prompt + tokens of the encoders feeding it (an llm fed by an
            llm without its own prompt takes that llm's prompt + output as context);
            ``output_tokens`` (0 = prefill only)
vocoder     ``audio_seconds`` (given, or the feeding llm's output_tokens / size.frame_rate_hz)
dit         ``steps``, ``pixels`` (height x width), ``tokens`` (pixels / size.pixels_per_token)
vae         ``pixels``
==========  ==================================================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from omniplane.spec.component import ComponentKind, GeneratorKind
from omniplane.spec.dist import Distribution
from omniplane.spec.model import ModelSpec

ResolvedWork = dict[str, dict[str, float]]
_COUNTS = {"items", "tokens_per_item", "prompt_tokens", "output_tokens", "steps"}


def sample_raw(
    model: ModelSpec,
    type_name: str,
    rng: np.random.Generator,
    n: int,
    overrides: Mapping[str, Mapping[str, Distribution]] | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """``n`` samples of every work quantity of a type: component -> quantity -> array."""
    rt = model.request_type(type_name)
    out: dict[str, dict[str, np.ndarray]] = {}
    for comp in model.ordered(rt.path):
        dists: dict[str, Distribution] = dict(rt.work.get(comp, {}))
        if overrides:
            dists.update(overrides.get(comp, {}))
        out[comp] = {}
        for q, dist in dists.items():
            x = dist.sample(rng, n)
            out[comp][q] = np.maximum(np.ceil(x), 1.0) if q in _COUNTS else x
    return out


def resolve(model: ModelSpec, type_name: str, raw: Mapping[str, Mapping[str, float]]) -> ResolvedWork:
    """Canonical quantities for one request from its raw sampled values (see module docstring)."""
    rt = model.request_type(type_name)
    path = model.ordered(rt.path)
    preds = {c: [p for p in path if any(e.to == c for e in model.component(p).edges)] for c in path}
    work: ResolvedWork = {}
    for name in path:
        comp = model.component(name)
        given = raw.get(name, {})
        if comp.kind is ComponentKind.ENCODER:
            items = float(given.get("items", 1.0))
            if "tokens_per_item" in given:
                tokens = items * float(given["tokens_per_item"])
            else:
                tps = comp.size.tokens_per_second or 0.0
                tokens = items * float(given["seconds"]) * tps
            work[name] = {"items": items, "tokens": float(max(1, math.ceil(tokens)))}
            if "seconds" in given:
                work[name]["seconds"] = items * float(given["seconds"])
        elif comp.kind is ComponentKind.LLM:
            enc_tokens = sum(work[p]["tokens"] for p in preds[name]
                             if model.component(p).kind is ComponentKind.ENCODER)
            if "prompt_tokens" in given:
                prompt = float(given["prompt_tokens"]) + enc_tokens
            else:
                feeders = [p for p in preds[name] if model.component(p).is_llm]
                prompt = enc_tokens + sum(
                    work[p]["prompt_tokens"] + work[p]["output_tokens"] for p in feeders
                )
            work[name] = {"prompt_tokens": prompt,
                          "output_tokens": float(given.get("output_tokens", 0.0))}
        elif comp.generator is GeneratorKind.VOCODER:
            if "audio_seconds" in given:
                seconds = float(given["audio_seconds"])
            else:
                llm = _feeding_llm(model, path, name)
                seconds = work[llm]["output_tokens"] / float(comp.size.frame_rate_hz or 1.0)
            work[name] = {"audio_seconds": seconds}
        elif comp.generator is GeneratorKind.DIT:
            pixels = float(given["height"]) * float(given["width"])
            per_token = comp.size.pixels_per_token or 256.0
            work[name] = {"steps": float(given["steps"]), "pixels": pixels,
                          "tokens": float(math.ceil(pixels / per_token))}
        else:  # VAE
            work[name] = {"pixels": float(given["height"]) * float(given["width"])}
    return work


def _feeding_llm(model: ModelSpec, path: list[str], name: str) -> str:
    """The nearest llm before ``name`` on the path."""
    before = path[: path.index(name)]
    for p in reversed(before):
        if model.component(p).is_llm:
            return p
    raise ValueError(f"no llm feeds {name!r} on {path}")


def sample_work(
    model: ModelSpec,
    type_name: str,
    rng: np.random.Generator,
    n: int,
    overrides: Mapping[str, Mapping[str, Distribution]] | None = None,
) -> list[ResolvedWork]:
    """``n`` independent requests' resolved work for one type."""
    raw = sample_raw(model, type_name, rng, n, overrides)
    return [
        resolve(model, type_name, {c: {q: float(v[i]) for q, v in qs.items()} for c, qs in raw.items()})
        for i in range(n)
    ]


def mean_work(model: ModelSpec, type_name: str, n: int = 2000, seed: int = 0) -> ResolvedWork:
    """Average resolved work of a type (Monte Carlo, deterministic for a seed)."""
    samples = sample_work(model, type_name, np.random.default_rng(seed), n)
    return {
        c: {q: float(np.mean([s[c][q] for s in samples])) for q in samples[0][c]}
        for c in samples[0]
    }
