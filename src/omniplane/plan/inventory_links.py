"""The links of a mixed-fleet candidate (omniplane.plan.inventory): each node's executor spends
link time on the bytes its edges carry (omniplane.perf.links), which caps the rate its replicas
carry as its GPU time does.

A node's link seconds per request per executor are ``max(bytes in, bytes out) / (tp x bw)``
(full duplex; each GPU of the executor has its own link), each edge's bytes at its link's
per-GPU bandwidth: within a host the kind's interconnect, across hosts the slower host network
of the two ends. Two kinds are two hosts; two nodes on one kind share a host when the
inventory's GPUs of that kind fit one host (``host_gpus``), else they are priced across hosts
(an assumption: the count sizing picks the replicas later). The bytes per request are the
mean over the planner's sampled requests of each type, weighted by the mix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from omniplane.perf.links import edge_bytes, link
from omniplane.spec import GPUKind, ModelSpec


def mean_edge_bytes(model: ModelSpec, samples: Mapping[str, Sequence[Any]], pi: np.ndarray
                    ) -> dict[tuple[str, str], float]:
    """Per model edge: mean bytes per request over the mix (``samples``: type -> resolved work)."""
    out: dict[tuple[str, str], float] = {}
    for c in model.components:
        for e in c.edges:
            if e.kv:
                continue
            eb = edge_bytes(model, c.name, e.to)
            total = 0.0
            for t, p in zip(model.type_names, pi, strict=True):
                works = samples.get(t) or ()
                if p <= 0 or not works:
                    continue
                total += float(p) * float(np.mean([eb.of(w[c.name]) if c.name in w and e.to in w else 0.0
                                                   for w in works]))
            out[c.name, e.to] = total
    return out


def with_links(model: ModelSpec, nodes: Sequence[frozenset[str]], opts: Sequence[Any],
               kinds: Mapping[str, GPUKind], counts: Mapping[str, int], host_gpus: int,
               means: Mapping[tuple[str, str], float]) -> list[Any]:
    """``opts`` (``inventory.Option``) with each node's link seconds per request (``link``)."""
    where = {c: i for i, n in enumerate(nodes) for c in n}
    s_in = [0.0] * len(nodes)
    s_out = [0.0] * len(nodes)
    for (frm, to), nbytes in means.items():
        i, j = where.get(frm), where.get(to)
        if i is None or j is None or i == j or nbytes <= 0:
            continue
        ka, kb = kinds[opts[i].kind], kinds[opts[j].kind]
        one_host = ka.name == kb.name and counts.get(opts[i].kind, 0) <= host_gpus
        bw = link(ka, kb, one_host).bandwidth
        s_out[i] += nbytes / bw
        s_in[j] += nbytes / bw
    return [replace(o, link=max(a, b) / o.tp) for o, a, b in zip(opts, s_in, s_out, strict=True)]
