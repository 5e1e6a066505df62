"""Prefill/decode disaggregation as a model transform (the EPD baseline, Singh et al. 2025;
Cornfigurator section 6.3).

An LLM ``x`` becomes two phases: ``x`` prefills the prompt and samples the first token (its
work: the prompt, one output token), then hands its KV cache over a ``kv`` edge to
``x.decode``, which decodes the remaining tokens without prefilling (its work: the prompt plus
the first token as context, the other output tokens). A text type's first response is the
prefill phase's first token; the handover costs the plan's transfer time plus the prompt's KV
bytes over the GPU link (``omniplane.sim``). Each sampled request is split the same way
(:func:`split_work`), so both phases see one request's prompt and output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omniplane.spec import ComponentKind, ModelSpec, parse
from omniplane.spec.work import ResolvedWork

DECODE = ".decode"  # suffix of a decode phase's component name


@dataclass(frozen=True)
class Split:
    """A model with one LLM split into prefill and decode phases, and the work transform."""

    model: ModelSpec
    llm: str
    decode: str

    def work(self) -> Callable[[ResolvedWork], ResolvedWork]:
        return lambda w: split_work(w, self.llm, self.decode)


def split_llm(model: ModelSpec, llm: str) -> Split:
    """``model`` with LLM ``llm`` split into ``llm`` (prefill) and ``llm.decode``."""
    comp = model.component(llm)
    if comp.kind is not ComponentKind.LLM:
        raise ValueError(f"{llm!r} is {comp.kind}, not an LLM: only an LLM has prefill and decode phases")
    decode = llm + DECODE
    data: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    comps = data["components"]
    for c in comps:
        if c["name"] == llm:
            phase = {**c, "name": decode, "edges": c.get("edges", []),
                     "description": f"decode phase of {llm} (prefill/decode disaggregation)"}
            c["edges"] = [{"to": decode, "kv": True}]
            c["description"] = f"prefill phase of {llm}: " + c.get("description", "")
            comps.insert(comps.index(c) + 1, phase)
            break
    for rt in data["request_types"]:
        if llm in rt["path"]:
            rt["path"] = [*rt["path"], decode]
            # the sampled work is split per request (split_work); the spec's distributions
            # for the decode phase are the LLM's (never sampled on their own)
            rt["work"][decode] = rt["work"][llm]
    for et in list(data.get("executor_types", [])):
        if et["hosts"] == [llm]:
            data["executor_types"].append({**et, "name": et["name"] + DECODE, "hosts": [decode]})
    data["name"] = f"{model.name}-pd"
    return Split(parse(ModelSpec, data), llm, decode)


def split_work(work: ResolvedWork, llm: str, decode: str) -> ResolvedWork:
    """One request's work with ``llm`` split: the prefill phase keeps the prompt and emits one
    token; the decode phase holds the prompt and that token and emits the rest (at least one,
    so a one-token answer gets one decode step more than it asked for)."""
    if llm not in work:
        return work
    prompt = work[llm]["prompt_tokens"]
    out = work[llm]["output_tokens"]
    rest = {k: v for k, v in work.items() if k != llm}
    return {**rest, llm: {"prompt_tokens": prompt, "output_tokens": 1.0},
            decode: {"prompt_tokens": prompt + 1.0, "output_tokens": max(out - 1.0, 1.0)}}
