"""Per-request work for many requests of one type at once: :func:`omniplane.spec.work.resolve`
applied to whole arrays (the same arithmetic in the same order, so the results are equal),
with trace values replacing sampled ones where a trace gives them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from omniplane.spec.component import ComponentKind, GeneratorKind
from omniplane.spec.dist import Distribution
from omniplane.spec.model import ModelSpec
from omniplane.spec.work import ResolvedWork, sample_raw

Arrays = dict[str, dict[str, np.ndarray]]


def sample_sizes(
    model: ModelSpec,
    type_name: str,
    rng: np.random.Generator,
    n: int,
    overrides: Mapping[str, Mapping[str, Distribution]] | None = None,
    given: Mapping[str, Mapping[str, np.ndarray]] | None = None,
) -> Arrays:
    """Resolved work of ``n`` requests of one type, as arrays: component -> quantity -> (n,).

    ``given`` holds raw values from a trace (NaN where a row gives none); each finite value
    replaces the sampled one. A given quantity the type has no distribution for must be
    finite in every row, since there is nothing to fall back on.
    """
    raw = sample_raw(model, type_name, rng, n, overrides)
    path = set(model.path_of(type_name))
    for comp, qs in (given or {}).items():
        if comp not in path:
            continue
        for q, values in qs.items():
            has = np.isfinite(values)
            if q in raw[comp]:
                raw[comp][q] = np.where(has, values, raw[comp][q])
            elif has.all():
                raw[comp][q] = np.asarray(values, dtype=float)
            else:
                raise ValueError(f"request type {type_name!r} has no size distribution for "
                                 f"{comp}.{q} to use where the trace gives none")
    return resolve_arrays(model, type_name, raw, n)


def resolve_arrays(
    model: ModelSpec, type_name: str, raw: Mapping[str, Mapping[str, np.ndarray]], n: int
) -> Arrays:
    """:func:`omniplane.spec.work.resolve` for ``n`` requests whose raw values are arrays."""
    rt = model.request_type(type_name)
    path = model.ordered(rt.path)
    preds = {c: [p for p in path if any(e.to == c for e in model.component(p).edges)] for c in path}
    ones, zeros = np.ones(n), np.zeros(n)
    work: Arrays = {}
    for name in path:
        comp = model.component(name)
        given = raw.get(name, {})
        if comp.kind is ComponentKind.ENCODER:
            items = np.asarray(given.get("items", ones), dtype=float)
            if "tokens_per_item" in given:
                tokens = items * given["tokens_per_item"]
            else:
                tps = comp.size.tokens_per_second or 0.0
                tokens = items * given["seconds"] * tps
            work[name] = {"items": items, "tokens": np.maximum(1.0, np.ceil(tokens))}
            if "seconds" in given:
                work[name]["seconds"] = items * given["seconds"]
        elif comp.kind is ComponentKind.LLM:
            enc = [work[p]["tokens"] for p in preds[name]
                   if model.component(p).kind is ComponentKind.ENCODER]
            enc_tokens = _sum(enc, n)
            if "prompt_tokens" in given:
                prompt = np.asarray(given["prompt_tokens"], dtype=float) + enc_tokens
            else:
                feeders = [p for p in preds[name] if model.component(p).is_llm]
                prompt = enc_tokens + _sum(
                    [work[p]["prompt_tokens"] + work[p]["output_tokens"] for p in feeders], n)
            work[name] = {"prompt_tokens": prompt,
                          "output_tokens": np.asarray(given.get("output_tokens", zeros), dtype=float)}
        elif comp.generator is GeneratorKind.VOCODER:
            if "audio_seconds" in given:
                seconds = np.asarray(given["audio_seconds"], dtype=float)
            else:
                llm = _feeding_llm(model, path, name)
                seconds = work[llm]["output_tokens"] / float(comp.size.frame_rate_hz or 1.0)
            work[name] = {"audio_seconds": seconds}
        elif comp.generator is GeneratorKind.DIT:
            pixels = given["height"] * given["width"]
            per_token = comp.size.pixels_per_token or 256.0
            work[name] = {"steps": np.asarray(given["steps"], dtype=float), "pixels": pixels,
                          "tokens": np.ceil(pixels / per_token)}
        else:  # VAE
            work[name] = {"pixels": given["height"] * given["width"]}
    return work


def _sum(arrays: list[np.ndarray], n: int) -> np.ndarray:
    """Left-to-right sum starting from 0, as Python's ``sum`` does in ``resolve``."""
    total = np.zeros(n)
    for a in arrays:
        total = total + a
    return total


def _feeding_llm(model: ModelSpec, path: list[str], name: str) -> str:
    for p in reversed(path[: path.index(name)]):
        if model.component(p).is_llm:
            return p
    raise ValueError(f"no llm feeds {name!r} on {path}")


def rows(arrays: Arrays, n: int) -> list[ResolvedWork]:
    """Per-request dicts (component -> quantity -> float) from resolved arrays."""
    columns = [(c, q, v.tolist()) for c, qs in arrays.items() for q, v in qs.items()]
    out: list[ResolvedWork] = []
    for i in range(n):
        work: ResolvedWork = {c: {} for c in arrays}
        for c, q, values in columns:
            work[c][q] = values[i]
        out.append(work)
    return out
