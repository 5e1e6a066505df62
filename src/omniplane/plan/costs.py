"""The planner's profile: per-executor costs, computed once from the cost model and reused.

For every node (a set of components one executor hosts) the table lists the executor configs
the model's executor type allows (TP x max batch) that fit in GPU memory; configs that do not
fit are kept with the reason (:class:`omniplane.perf.InfeasibleConfig`). For each feasible
config and request type it holds:

* ``s_full[o, t]``: executor-seconds one type-``t`` request costs at full occupancy (the
  config's max throughput is ``1 / s_full``), summed over the hosted components on the
  type's path (a merged executor runs its components back to back);
* ``part[c][o, t, k]``: the :class:`~omniplane.plan.parts.Part` of each hosted component at
  occupancy level ``k`` (``FILLS[k]`` of the max batch, which an LLM's KV cache may lower).

Parts are keyed by (component, TP, type, batch) and shared by every node and config that
reaches the same key, so a table for a new GPU budget or type mix costs nothing more
(section 4.4: re-planning reuses the profile). Requests sizes come from ``Problem.samples``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from omniplane.perf import CostModel, ExecutorConfig, InfeasibleConfig
from omniplane.plan.enumerate import compound_subplans, simple_subplans
from omniplane.plan.logical import Subplan
from omniplane.plan.parts import Part, Pool, WorkArrays, compute_part, llm_ctx, llm_peak
from omniplane.plan.problem import Problem
from omniplane.spec import GeneratorKind

# Occupancy levels as fractions of an executor's max batch (the Monte Carlo phase picks one per
# component from Little's law); level 0 is one request alone. assumption: geometric below half,
# then quarters.
FILLS = np.array([0.0, 1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 1.0])
# Batch sizes parts are computed at: occupancies round down to one of these, so nodes whose KV
# caches differ a little share parts (assumption: 1.5x steps lose little; see docs/guides/plan.md).
BATCHES = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024])


def batch_level(b: float) -> int:
    """The largest of ``BATCHES`` not above ``b`` (at least 1)."""
    i = int(np.searchsorted(BATCHES, max(b, 1.0), side="right")) - 1
    return int(BATCHES[max(i, 0)])

NodeKey = frozenset[str]
Fit = Callable[[Sequence[str], ExecutorConfig], int]
"""A runtime's fit check: KV tokens per LLM of the executor, or :class:`InfeasibleConfig`."""


@dataclass(frozen=True)
class Infeasible:
    tp: int
    max_batch: int
    reason: str


@dataclass
class NodeCosts:
    """Costs of one node's feasible executor configs (see the module docstring)."""

    comps: tuple[str, ...]  # topological order
    options: tuple[tuple[int, int], ...]  # (tp, max_batch)
    infeasible: tuple[Infeasible, ...]
    tp: np.ndarray  # [O]
    s_full: np.ndarray  # [O, T]
    part: dict[str, np.ndarray] = field(default_factory=dict)  # comp -> [O, T, L] part ids (-1: n/a)
    bmax: dict[str, np.ndarray] = field(default_factory=dict)  # comp -> [O, T] max batch
    # LLM comp -> [O, T]: requests of type t alone the KV cache holds at their mean context
    # (prompt + half the output, ``parts.llm_ctx``); Monte Carlo mixes it over the held types
    kv_ctx: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "+".join(self.comps)

    @cached_property
    def batch(self) -> np.ndarray:
        """``[O]``: each option's configured max batch."""
        return np.array([b for _, b in self.options], dtype=int)


class CostTable:
    """Parts and node costs of one problem's model, GPU kind and request samples."""

    def __init__(self, problem: Problem, cost: CostModel, pad: bool = True, fit: Fit | None = None,
                 parts_of: CostTable | None = None) -> None:
        """``fit``: the runtime's memory check (default: the cost model's, ``perf.memory``);
        ``parts_of``: a table of the same problem and cost model whose parts this one shares."""
        self.problem = problem
        self.model = problem.model
        self.cost = cost
        self.types = problem.types
        self.work = {t: WorkArrays(problem.samples[t]) for t in self.types}
        self.paths = {t: self.model.path_of(t) for t in self.types}
        self._part_ids: dict[tuple[str, int, str, int], int] = {}
        self._parts: list[Part] = []
        if parts_of is not None:
            self._part_ids, self._parts = parts_of._part_ids, parts_of._parts
        self.fit = fit
        self.nodes: dict[NodeKey, NodeCosts] = {}
        self._frozen_n = -1
        self.calls = 0
        self.pad = pad  # False: batch-mates are of the request's own type (a type served alone)
        self._subplans: dict[int, list[Subplan]] = {}

    # ---- building ---------------------------------------------------------------------------
    def subplans(self, k_c: int) -> list[Subplan]:
        """Algorithm 1's simple and compound subplans of the model (cached: they depend on the
        model only, so re-planning reuses them)."""
        hit = self._subplans.get(k_c)
        if hit is None:
            simple = simple_subplans(self.model)
            hit = self._subplans[k_c] = simple + compound_subplans(self.model, simple, k_c)
        return hit

    def node(self, comps: Iterable[str]) -> NodeCosts:
        key = frozenset(comps)
        hit = self.nodes.get(key)
        if hit is None:
            hit = self.nodes[key] = self._tabulate(key)
        return hit

    def _tabulate(self, key: NodeKey) -> NodeCosts:
        model = self.model
        comps = self._comps = tuple(model.ordered(key))
        et = model.executor_type_for(key)
        if et is None:
            raise ValueError(f"no executor type can host {sorted(key)}")
        feasible: list[tuple[int, int]] = []
        bad: list[Infeasible] = []
        kv: list[int] = []
        for tp in et.tp:
            short = 0  # a runtime fit: the most sequences of the mean context a too-large batch's KV held
            for b in et.max_batch:
                cfg = ExecutorConfig(self.problem.gpu, tp, b)
                try:
                    tokens = (self.fit(comps, cfg) if self.fit is not None
                              else self.cost.check_fits(list(comps), cfg).kv_capacity_tokens)
                except InfeasibleConfig as exc:
                    bad.append(Infeasible(tp, b, str(exc)))
                    short = max(short, getattr(exc, "fits", 0))
                    continue
                feasible.append((tp, b))
                kv.append(tokens)
            if short and self.fit is not None and not any(t == tp and b <= short for t, b in feasible):
                self._largest_fit(tp, short, feasible, kv)
        n_o, n_t, n_l = len(feasible), len(self.types), len(FILLS)
        out = NodeCosts(comps, tuple(feasible), tuple(bad), np.array([tp for tp, _ in feasible], dtype=int),
                        np.zeros((n_o, n_t)))
        for c in comps:
            out.part[c] = np.full((n_o, n_t, n_l), -1, dtype=np.int64)
            out.bmax[c] = np.zeros((n_o, n_t), dtype=int)
        for o, (tp, b) in enumerate(feasible):
            cfg = ExecutorConfig(self.problem.gpu, tp, b)
            for ti, t in enumerate(self.types):
                path = self.paths[t]
                for c in comps:
                    if c not in path:
                        continue
                    bm = b
                    if model.component(c).is_llm:
                        bm = int(min(b, max(1, kv[o] // max(llm_peak(self.work[t], c), 1.0))))
                        fits = out.kv_ctx.setdefault(c, np.full((n_o, n_t), np.inf))
                        fits[o, ti] = kv[o] / max(llm_ctx(self.work[t], c), 1.0)
                    out.bmax[c][o, ti] = bm
                    for k, f in enumerate(FILLS):
                        out.part[c][o, ti, k] = self._part_id(c, cfg, t, batch_level(f * bm))
                    out.s_full[o, ti] += self._parts[out.part[c][o, ti, -1]].cost
        return out

    def _largest_fit(self, tp: int, start: int, feasible: list[tuple[int, int]], kv: list[int]) -> None:
        """The runtime fit's largest max batch below the executor type's grid whose KV holds it at
        the mean context (from ``start`` down), added to ``feasible`` (none when even 1 fails)."""
        assert self.fit is not None
        for b in range(start, 0, -1):
            try:
                tokens = self.fit(self._comps, ExecutorConfig(self.problem.gpu, tp, b))
            except InfeasibleConfig:
                continue
            feasible.append((tp, b))
            kv.append(tokens)
            return

    def _part_id(self, comp: str, cfg: ExecutorConfig, t: str, batch: int) -> int:
        key = (comp, cfg.tp, t, batch)
        pid = self._part_ids.get(key)
        if pid is None:
            part = compute_part(self.model, self.cost, comp, cfg, self.work[t], batch, self.paths[t],
                                self.batch_mates(comp))
            self.calls += 1
            pid = self._part_ids[key] = len(self._parts)
            self._parts.append(part)
        return pid

    def batch_mates(self, comp: str) -> Pool | None:
        """Sizes a DiT or VAE batch-mate may have: every serving type's samples, each drawn with
        probability ``mix[t] / (sum of the serving types' mix) / samples of t``, the type mix the
        table was built for, exactly (uniform over types if none is positive)."""
        c = self.model.component(comp)
        if not self.pad or c.generator not in (GeneratorKind.DIT, GeneratorKind.VAE):
            return None
        key = "tokens" if c.generator is GeneratorKind.DIT else "pixels"
        users = [t for t in self.types if comp in self.paths[t]]
        mix = self.problem.mix
        weights = np.array([mix.get(t, 0.0) for t in users])
        if weights.sum() <= 0:
            weights = np.ones(len(users))
        sizes = [self.work[t].get(comp, key) for t in users]
        probs = np.concatenate([np.full(len(x), w / len(x)) for x, w in zip(sizes, weights, strict=True)])
        return Pool(np.concatenate(sizes), probs / probs.sum())

    # ---- dense arrays for the vectorised phases ----------------------------------------------
    def arrays(self) -> PartArrays:
        """Every part so far as stacked arrays (rebuilt when parts were added)."""
        if self._frozen_n != len(self._parts):
            self._arrays = PartArrays.stack(self._parts)
            self._frozen_n = len(self._parts)
        return self._arrays

    def part(self, pid: int) -> Part:
        return self._parts[pid]


def _cv2(x: np.ndarray) -> float:
    """Squared coefficient of variation of a part's per-sample times (0 for constant ones)."""
    m = float(np.mean(x))
    return float(np.var(x)) / m**2 if m > 0 else 0.0


@dataclass
class PartArrays:
    first: np.ndarray  # [P, K]
    done: np.ndarray  # [P, K]
    cpu: np.ndarray  # [P, K]
    step: np.ndarray  # [P]
    step_sq: np.ndarray  # [P] mean square of one step (the wait for the step in progress, P-K)
    residence: np.ndarray  # [P]
    residence2: np.ndarray  # [P] mean square of the time until done (the queue's service variability)
    cost: np.ndarray  # [P]
    steps_first: np.ndarray  # [P, K]
    steps_done: np.ndarray  # [P, K]
    steps_mean: np.ndarray  # [P] mean of steps_done
    packed: np.ndarray  # [P, 5, K] float32: cpu, first, done, steps_first - 1, steps_done - 1
    _screens: dict[int, np.ndarray] = field(default_factory=dict)

    def screen(self, k: int) -> np.ndarray:
        """``packed`` over the first ``k`` samples, contiguous (cached)."""
        hit = self._screens.get(k)
        if hit is None:
            hit = self._screens[k] = np.ascontiguousarray(self.packed[:, :, :k])
        return hit

    @staticmethod
    def stack(parts: list[Part]) -> PartArrays:
        if not parts:
            z = np.zeros((0, 1))
            e = np.zeros(0)
            return PartArrays(z, z, z, e, e, e, e, e, z, z, e,
                              np.zeros((0, 5, 1), dtype=np.float32))
        k = max(len(p.first) for p in parts)

        def pad(x: np.ndarray) -> np.ndarray:
            return x if len(x) == k else np.resize(x, k)

        first = np.stack([pad(p.first) for p in parts])
        done = np.stack([pad(p.done) for p in parts])
        cpu = np.stack([pad(p.cpu) for p in parts])
        sf = np.stack([pad(p.steps_first) for p in parts])
        sd = np.stack([pad(p.steps_done) for p in parts])
        packed = np.stack([cpu, first, done, sf - 1, sd - 1], axis=1).astype(np.float32)
        return PartArrays(first, done, cpu, np.array([p.step for p in parts]),
                          np.array([p.step_sq for p in parts]),
                          np.array([p.residence for p in parts]),
                          np.array([p.residence ** 2 * (1.0 + _cv2(p.done)) for p in parts]),
                          np.array([p.cost for p in parts]), sf, sd,
                          np.array([float(p.steps_done.mean()) for p in parts]), packed)
