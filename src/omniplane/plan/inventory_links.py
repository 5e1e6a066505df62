"""The links of a mixed-fleet candidate (omniplane.plan.inventory): each node's executor spends
link time on the bytes its edges carry (omniplane.perf.links), which caps the rate its replicas
carry as its GPU time does.

A node's link seconds per request per executor are ``max(bytes in, bytes out) / (tp x bw)``
(full duplex; each GPU of the executor has its own link), each edge's bytes at its link's
per-GPU bandwidth: within a host the kind's interconnect, across hosts the slower host network
of the two ends. Two kinds are two hosts. Which nodes of one kind share a host is decided by
the host placement the simulator and the export use (omniplane.perf.hosts) on the candidate's
replicas; the replicas depend on the links, so :func:`sized` sizes first with the links of a
rule that needs no replicas (two nodes of one kind share a host when the inventory's GPUs of
that kind fit one host), then places the sized replicas, re-prices the links and re-sizes, until
the replicas stand (at most :data:`ROUNDS` times). The bytes per request are the mean over the
planner's sampled requests of each type, weighted by the mix."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from omniplane.perf.hosts import Layout, Pipeline, PlacementError, Stage, pipeline_order, place_kinds
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


ROUNDS = 3  # assumption: the replicas stand after a few re-sizings (the placement moves little)
Sized = tuple[tuple[int, ...], float] | None  # inventory.size's answer


def with_links(model: ModelSpec, nodes: Sequence[frozenset[str]], opts: Sequence[Any],
               kinds: Mapping[str, GPUKind], counts: Mapping[str, int], host_gpus: int,
               means: Mapping[tuple[str, str], float], replicas: Sequence[int] | None = None) -> list[Any]:
    """``opts`` (``inventory.Option``) with each node's link seconds per request (``link``); with
    ``replicas`` two nodes of one kind share a host as omniplane.perf.hosts places them, without
    when the inventory's GPUs of that kind fit one host (module docstring)."""
    hosts = _place(model, nodes, opts, replicas, host_gpus) if replicas is not None else None
    where = {c: i for i, n in enumerate(nodes) for c in n}
    s_in = [0.0] * len(nodes)
    s_out = [0.0] * len(nodes)
    for (frm, to), nbytes in means.items():
        i, j = where.get(frm), where.get(to)
        if i is None or j is None or i == j or nbytes <= 0:
            continue
        ka, kb = kinds[opts[i].kind], kinds[opts[j].kind]
        one_host = ka.name == kb.name and (counts.get(opts[i].kind, 0) <= host_gpus if hosts is None
                                           else hosts.in_host("c", str(i), str(j)))
        bw = link(ka, kb, one_host).bandwidth
        s_out[i] += nbytes / bw
        s_in[j] += nbytes / bw
    return [replace(o, link=max(a, b) / o.tp) for o, a, b in zip(opts, s_in, s_out, strict=True)]


def _place(model: ModelSpec, nodes: Sequence[frozenset[str]], opts: Sequence[Any], replicas: Sequence[int],
           host_gpus: int) -> Layout | None:
    """The candidate's executors on hosts of ``host_gpus`` (omniplane.perf.hosts; None: a TP
    group larger than a host, which the search drops)."""
    topo = model.ordered(c.name for c in model.components)
    stages = tuple(Stage(str(i), replicas[i], opts[i].tp, opts[i].kind) for i in pipeline_order(topo, nodes))
    try:
        return place_kinds([Pipeline("c", stages)], host_gpus)
    except PlacementError:
        return None


def sized(model: ModelSpec, nodes: Sequence[frozenset[str]], opts: Sequence[Any],
          kinds: Mapping[str, GPUKind], counts: Mapping[str, int], host_gpus: int,
          means: Mapping[tuple[str, str], float], rate: float | None,
          size: Callable[[Sequence[Any], Mapping[str, int], float | None], Sized]) -> tuple[list[Any], Sized]:
    """``(options with links, inventory.size's replicas and rate)`` (module docstring)."""
    cur = with_links(model, nodes, opts, kinds, counts, host_gpus, means)
    got = size(cur, counts, rate)
    for _ in range(ROUNDS):
        if got is None:
            break
        nxt = with_links(model, nodes, opts, kinds, counts, host_gpus, means, got[0])
        if nxt == cur:
            break
        cur, got = nxt, size(nxt, counts, rate)
    return cur, got
