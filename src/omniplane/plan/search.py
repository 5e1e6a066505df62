"""Branch and bound over a plan space: logical plans in decreasing order of an admissible bound,
each expanded into its physical plans above a threshold (flow) and estimated (Monte Carlo);
the survivors are simulated (docs/guides/plan.md, "Search").

Every plan's estimated goodput is at most ``alpha x R_d`` and its simulated goodput at most
``factor x alpha x R_d`` (:attr:`Oracle.factor`: the simulated sample's arrivals per unit of
offered rate), and every logical plan's ``R_d`` at most its bound. Two incumbents prune
(:class:`~omniplane.plan.incumbents.Incumbents`):

* the best *estimate* so far: plans whose bound is below ``(1 - mc_tolerance)`` of it are
  dropped. This is exact with respect to the estimate (no plan whose estimate is within the
  tolerance of the best is lost) and is Algorithm 2's estimate-based pruning, so the output
  reports it as an ``estimate`` rule;
* the best *simulated* plan: plans whose bound is below it cannot be selected (``exact``).

Logical plans come best bound first and the search stops when the next bound falls below the
threshold. The survivors are each logical plan's Pareto front on the estimate within the
tolerance of the best estimate (:class:`~omniplane.plan.pool.Pool`); they are simulated best
estimate first, skipping any whose bound no longer beats the best simulated plan.

Work budgets (:class:`~omniplane.plan.budget.WorkBudget`): ``mc_budget`` (Monte Carlo estimates
per plan space, on by default) gives each Monte Carlo step's estimates to its plans of highest
estimate bound and, once spent, stops the expansion; ``time_budget_s`` stops it on the clock.
Whatever either left out is a ``budget`` cut with its most promising item (docs/guides/plan.md,
"Scale: the Monte Carlo budget"). Both still expand the best logical plan and simulate the best
survivor, so the search always answers. What each rule dropped is in the ledger (:mod:`omniplane.plan.drops`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import numpy as np

from omniplane.plan.budget import WorkBudget
from omniplane.plan.costs import CostTable
from omniplane.plan.drops import SearchDrops
from omniplane.plan.explain import Ledger
from omniplane.plan.flow import Candidates, Expansion, raw_count
from omniplane.plan.groups import GROUP_PLANS, best_plans, group_trials, mixed_configs
from omniplane.plan.incumbents import Incumbents
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.montecarlo import evaluate
from omniplane.plan.options import PlannerOptions
from omniplane.plan.order import LogicalOrder
from omniplane.plan.pool import Block, Cloud, Counts, Pool, SearchResult, SearchStats, Simulated
from omniplane.plan.problem import Problem
from omniplane.plan.progress import NO_PROGRESS, Progress
from omniplane.plan.refine import SimOutcome
from omniplane.plan.routing import routing_vectors, type_grid_size
from omniplane.plan.screen import EstimateBound
from omniplane.plan.select import Score
from omniplane.plan.space import Space

MC_CHUNK = 2048  # candidates per vectorised Monte Carlo step
ROWS = 512  # rows turned into chain elements per step
CACHE = 64  # expansions kept between tightening a logical plan's bound and expanding it
BAND = 0.01  # the first band of rows reaches 1% below the logical plan's bound, each next one twice as deep


class Oracle(Protocol):
    """The simulator as the search sees it."""

    @property
    def factor(self) -> float:
        """Policy score <= factor x offered rate, for every plan (the sample's arrivals; read
        once per search)."""
        ...

    def simulate(self, cands: Candidates, i: int) -> SimOutcome: ...


class Search:
    """One branch and bound over ``space`` (:meth:`run`). Its state is the objects it is made of:
    the incumbents and the threshold they set (``bound``), the work budgets (``budget``), the
    pool of survivors and its reserve (``pool``), the ledger of what each rule dropped
    (``drops``), and the counts and statistics it reports."""

    def __init__(self, problem: Problem, table: CostTable, space: Space, options: PlannerOptions,
                 slo_s: np.ndarray, transfer_s: float, score: Score, oracle: Oracle,
                 progress: Progress = NO_PROGRESS, cloud: bool = False,
                 clock: Callable[[], float] = time.perf_counter, rate: float | None = None) -> None:
        self.table, self.space, self.opt, self.slo = table, space, options, slo_s
        # a fixed offered rate (capacity planning, omniplane.plan.capacity): plans whose flow
        # bound is below it are not built (their throughput cannot reach it) and every other plan
        # is estimated and simulated at it (its R_d clipped to ``rate``; admissible: a plan's
        # score at rate ``rate`` is at most factor x rate)
        self.rate = rate
        self.floor = rate or 0.0
        self.transfer, self.score, self.oracle, self.progress = transfer_s, score, oracle, progress
        self.pi = problem.pi()
        self.gpus = problem.gpus
        self.clock = clock
        self.budget = WorkBudget(options.mc_budget, options.time_budget_s, clock)
        self.bound = Incumbents(max(oracle.factor, 1.0) * options.alpha, options.alpha, options.mc_tolerance)
        self.stats = SearchStats()
        self.counts = Counts()
        self.ledger = Ledger()
        self.drops = SearchDrops(self.ledger, options)
        self.cloud = Cloud()
        self.pool = Pool(score, self.pi, self.cloud if cloud else None)
        self.simulated: list[Simulated] = []
        self._sim_keys: set[tuple[object, ...]] = set()
        self._ranks: dict[int, int] = {}  # id(logical plan) -> expansion rank
        self._cache: OrderedDict[tuple[int, int], Expansion] = OrderedDict()
        self.ebound = EstimateBound(table, self.pi, slo_s, options.alpha, transfer_s)

    def _scores(self, goodput: np.ndarray) -> np.ndarray:
        return self.score(goodput, self.pi)

    def _seconds(self, phase: str, since: float) -> None:
        self.stats.seconds[phase] += self.clock() - since

    # ---- the search -----------------------------------------------------------------------------
    def run(self) -> SearchResult:
        order = self._enumerate()
        self._branch_and_bound(order)
        if self.space.full and not self.budget.out_of_time() and not self.budget.mc_spent():
            self._executor_groups()
        elif self.space.full and self.budget.mc_spent():
            self.drops.groups_not_tried_mc(min(GROUP_PLANS, self.stats.logical_expanded))
        self._prune_pool()
        if self.pool.blocks:  # a search with no survivor simulates no reserve either
            self._simulate_survivors()
            self._simulate_reserve()
            self._simulate_unpriced()
        self.stats.threshold, self.stats.incumbent = self.bound.threshold(), self.bound.simulated
        return SearchResult(self.simulated, self.pool.blocks, self.counts, self.stats, self.ledger,
                            self.cloud)

    def _enumerate(self) -> LogicalOrder:
        t = self.clock()
        order = LogicalOrder(self.table, self.space, self.pi, self.gpus, self.opt.k_c, self.opt.k_s,
                             self.opt.grid_steps, self.opt.compose_compound)
        if order.skipped_pairs:
            self.drops.compound_pairs(order.skipped_pairs)
        self.stats.logical_total, self.stats.subplans = order.total, len(order.subs)
        self.counts.raw_space = order.raw_space()
        self._seconds("enumerate", t)
        return order

    def _branch_and_bound(self, order: LogicalOrder) -> None:
        """Expand logical plans best bound first until the bound or a budget stops."""
        st = self.stats
        self.progress.start(f"{self.space.name}: branch and bound", 0)
        stream = order.stream(self._tighten)
        yielded = 0
        while True:
            t = self.clock()
            item = next(stream, None)
            self._seconds("flow", t)
            if item is None:
                break
            ub, i, j, lp = item
            yielded += 1
            stop = self._stop(ub)
            if stop:
                st.stopped = stop
                self._not_expanded(stop, ub, lp, order.total - order.infeasible - yielded + 1)
                break
            self._expand(i, j, lp, ub)
            shown = float(self.bound.goodput_bound(ub))
            self.progress.advance(1, f"{st.logical_expanded} expanded, best estimate "
                                     f"{self.bound.estimate:.2f}/s, bound {shown:.2f}/s")
        st.logical_infeasible = order.infeasible
        if order.infeasible:
            self.drops.infeasible(order.infeasible)
        self.progress.end()

    def _stop(self, ub: float) -> str | None:
        """Why the logical plan of bound ``ub`` (and all after it) is not expanded (None: it is).
        A spent time budget still expands the best logical plan: the search always answers."""
        late = self.budget.out_of_time() and self.stats.logical_expanded > 0
        if ub < self.bound.threshold() or ub < self.floor:
            return "bound"
        if self.budget.mc_spent():
            return "Monte Carlo budget"
        return "time budget" if late else None

    def _not_expanded(self, stop: str, ub: float, lp: LogicalPlan, rest: int) -> None:
        bound = float(self.bound.goodput_bound(ub))
        if stop == "bound":
            self.stats.logical_bounded = rest
            self.drops.below_threshold(self.bound.exact_binds(), rest, lp, bound,
                                       self.bound.threshold() * self.bound.factor)
        elif stop == "Monte Carlo budget":
            self.drops.not_expanded_mc(rest, lp, bound, self.bound.estimate)
        else:
            self.drops.not_expanded_time(rest, lp, bound)

    # ---- one logical plan -----------------------------------------------------------------------
    def _expansion(self, i: int, j: int, lp: LogicalPlan) -> Expansion:
        key = (i, j)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        vecs = routing_vectors(lp, self.opt.grid_steps, self.opt.max_routings)
        allowed = [self._allowed(n) for n in lp.nodes]
        exp = Expansion(lp, self.table, vecs, self.pi, self.gpus, allowed, self.space.counts)
        self._cache[key] = exp
        if len(self._cache) > CACHE:
            self._cache.popitem(last=False)
        return exp

    def _allowed(self, node: frozenset[str]) -> np.ndarray:
        nc = self.table.node(node)
        tps = self.space.tp.get(node)
        return np.array([k for k, (tp, _) in enumerate(nc.options) if tps is None or tp in tps], dtype=int)

    def _tighten(self, i: int, j: int, lp: LogicalPlan) -> float:
        return self._expansion(i, j, lp).bound()

    def _expand(self, i: int, j: int, lp: LogicalPlan, ub_rate: float) -> None:
        """Rows in bands of decreasing flow rate: the best rows are estimated before the lower
        bands are even enumerated, which the rising threshold then shortens; every row at or
        above the final threshold is visited exactly once."""
        st = self.stats
        st.logical_expanded += 1
        t0 = self.clock()
        exp = self._expansion(i, j, lp)
        self._ranks[id(exp.lp)] = st.logical_expanded
        full = type_grid_size(exp.lp, self.opt.grid_steps)
        if full > exp.n_vectors and full > self.opt.max_routings:
            self.stats.tied_routing += 1
            self.drops.tied_routing(exp.lp, full, exp.n_vectors)
        flow_before = self.counts.flow
        self._seconds("flow", t0)
        ceiling = np.inf
        gap = BAND
        level = ub_rate * (1 - gap) if np.isfinite(ub_rate) else 0.0
        while True:
            t1 = self.clock()
            floor = max(self.bound.threshold(), self.floor, level)
            opt, vec, top, cnt = exp.rows(floor)
            band = np.nonzero(top < ceiling)[0]
            self.counts.built += exp.rows_evaluated
            exp.rows_evaluated = 0
            self._seconds("flow", t1)
            self._band(exp, opt[band], vec[band], top[band], cnt[band])
            if floor <= max(self.bound.threshold(), self.floor) or self.budget.mc_spent():
                break
            gap *= 2  # bands twice as deep each time: [1 - 2 gap, 1 - gap] of the bound
            ceiling, level = floor, ub_rate * max(0.0, 1 - gap)
        raw = float(raw_count(exp.costs, type_grid_size(exp.lp, self.opt.grid_steps), self.gpus))
        self.drops.not_built(max(0.0, raw - (self.counts.flow - flow_before)), self.budget.mc_spent())

    def _band(self, exp: Expansion, opt: np.ndarray, vec: np.ndarray, top: np.ndarray,
              cnt: np.ndarray) -> None:
        """Chain elements of these rows (best first) above the threshold, to Monte Carlo."""
        for start in range(0, len(top), ROWS):
            if self.budget.mc_spent():
                left = int(np.count_nonzero(top[start:] >= self.bound.threshold()))
                if left:
                    self.drops.rows_not_built_mc(left, exp.lp, float(top[start]))
                break
            t1 = self.clock()
            thr = max(self.bound.threshold(), self.floor)
            sl = slice(start, start + ROWS)
            keep = np.nonzero(top[sl] >= thr)[0] + start
            if not len(keep):
                self._seconds("flow", t1)
                break
            if self.opt.max_simulated is None:  # else the reserve ranks these rows' plans by estimate
                keep = self._row_screen(exp, opt[keep], vec[keep], top[keep], keep)
            if not len(keep):
                self._seconds("flow", t1)
                continue
            cands = exp.elements(opt[keep], vec[keep], top[keep], cnt[keep], thr)
            if self.rate is not None:
                cands.rate = np.minimum(cands.rate, self.rate)
            self.counts.built += max(0, len(cands) - len(keep))
            self.counts.flow += len(cands)
            self._seconds("flow", t1)
            self._monte_carlo(cands)

    def _row_screen(self, exp: Expansion, opt: np.ndarray, vec: np.ndarray, top: np.ndarray,
                    idx: np.ndarray) -> np.ndarray:
        """``idx`` less the rows whose every plan's estimate bound (at the row's top rate, no
        load: :meth:`EstimateBound.goodput` with ``loaded=False``) is below the estimate floor."""
        m = len(exp.costs)
        ones = np.ones((len(opt), m), dtype=int)
        none = np.zeros(len(opt), dtype=int)
        rows = Candidates(exp.lp, exp.costs, exp.p, exp.share, opt, ones, vec, top, none)
        ok = self._scores(self.ebound.goodput(rows, loaded=False)) >= self.bound.estimate_floor()
        if not ok.all():
            self.stats.estimate_bounded_rows += int((~ok).sum())
            self.drops.rows_estimate_bounded(int((~ok).sum()))
        return idx[ok]

    def _monte_carlo(self, cands: Candidates) -> None:
        for k in range(0, len(cands), MC_CHUNK):
            t = self.clock()
            idx = np.arange(k, min(len(cands), k + MC_CHUNK))
            idx = idx[cands.rate[idx] >= self.bound.threshold()]
            if not len(idx):
                self._seconds("monte_carlo", t)
                continue
            sub = cands.take(idx)
            # branch and bound on the estimate: an admissible bound on each plan's estimate
            # (omniplane.plan.screen); plans that cannot reach the estimate floor are not estimated
            ub = self._scores(self.ebound.goodput(sub))
            ok = ub >= self.bound.estimate_floor()
            fit, low = np.nonzero(ok)[0], np.nonzero(~ok)[0]
            if not self.budget.affords(len(fit)):
                fit, out = self.budget.best_first(ub, fit)
                self.drops.not_estimated_mc(len(out), sub.lp, float(ub[int(out[0])]), self.bound.estimate)
            if len(low) and self.opt.max_simulated is not None and self.budget.affords(len(fit) + len(low)):
                # the reserve (spare --max-simulated budget) ranks dropped plans by estimate
                rest = sub.take(low)
                self.pool.keep(self._estimate(rest))
            if len(low):
                self.stats.estimate_bounded += len(low)
                self.drops.estimate_bounded(len(low))
            if len(fit) < len(sub):
                sub = sub.take(fit)
            if not len(sub):
                self._seconds("monte_carlo", t)
                continue
            block = self._estimate(sub)
            due = self.pool.add(block)
            self._seconds("monte_carlo", t)
            self.bound.estimate = max(self.bound.estimate, float(self._scores(block.goodput).max()))
            if due:
                self._prune_pool()
                self.pool.settle()

    def _estimate(self, cands: Candidates) -> Block:
        """Flow + Monte Carlo estimates of ``cands``, counted against the budget."""
        good, att = evaluate(cands, self.table, self.pi, self.slo, self.opt.alpha, self.transfer)
        self.counts.monte_carlo += len(cands)
        self.budget.spend(len(cands))
        return Block(cands, good, att)

    def _prune_pool(self) -> None:
        """Drop pool rows below the threshold or the estimate floor, then keep each logical
        plan's Pareto front on the estimate (:meth:`Pool.prune`)."""
        if not self.pool.blocks:
            return
        t = self.clock()
        pruned = self.pool.prune(self.bound.threshold(), self.bound.estimate_floor())
        self.drops.pruned(self.bound.exact_binds(), pruned.bounded, pruned.low, pruned.dominated)
        self._seconds("monte_carlo", t)

    def _executor_groups(self) -> None:
        """Executor-level routing with mixed configs (:mod:`omniplane.plan.groups`) around the
        best plans: the rows of each trial that mix configs go to Monte Carlo like any other."""
        self._prune_pool()
        best, plans = best_plans(self.pool.blocks, self._scores)
        same = 0
        for trial in group_trials(best, self.table, self.pi, self.gpus, self.space.counts,
                                  self.opt.grid_steps, self._allowed):
            exp = trial.expansion
            # the raw space grows by this grouped logical plan's own (any config and count per
            # node and group, these group vectors; by formula): its plans are not in Algorithm
            # 1's space, and the flow count includes the ones built from it
            self.counts.raw_space += float(raw_count(exp.costs, trial.n_vectors, self.gpus))
            opt, vec, top, cnt = exp.rows(self.bound.threshold())
            self.counts.built += exp.rows_evaluated
            keep, n_same = mixed_configs(trial, opt)
            same += n_same
            self._band(exp, opt[keep], vec[keep], top[keep], cnt[keep])
            self.stats.grouped += 1
        self.drops.groups_only_around_best(max(0, plans - GROUP_PLANS), GROUP_PLANS)
        if same:
            self.drops.groups_same_config(same)

    # ---- simulation -----------------------------------------------------------------------------
    def _simulate(self, block: Block, i: int) -> Simulated:
        t = self.clock()
        out = self.oracle.simulate(block.cands, i)
        self._seconds("simulate", t)
        lp = block.cands.lp
        rec = Simulated(block, i, out, lp.describe(), self._ranks.get(id(lp), 0))
        self._sim_keys.add(self._key(block.cands, i))
        self.simulated.append(rec)
        self.counts.simulated += 1
        self.bound.simulated = max(self.bound.simulated, float(self._scores(out.goodput[None, :])[0]))
        return rec

    def _ratio(self, lp: LogicalPlan) -> float | None:
        """The highest simulated / estimated score among this logical plan's simulated plans
        (None: none simulated yet): how far its estimates have erred upwards at best."""
        out = None
        for s in self.simulated:
            if s.block.cands.lp is not lp:
                continue
            est = float(self._scores(s.estimate[None, :])[0])
            sim = float(self._scores(s.outcome.goodput[None, :])[0])
            r = sim / est if est > 0 else float("inf")
            out = r if out is None else max(out, r)
        return out

    @staticmethod
    def _key(c: Candidates, i: int) -> tuple[object, ...]:
        return (id(c.lp), tuple(c.opt[i].tolist()), tuple(c.cnt[i].tolist()), int(c.vec[i]))

    def _simulate_survivors(self) -> None:
        """Simulate every survivor, best estimate first, unless its bound no longer beats the
        best simulated plan (exact), its logical plan's estimates err too far up (estimate) or
        the budget is spent (a cut)."""
        rows = [(b, i) for b in self.pool.blocks for i in range(len(b.goodput))]
        est = np.concatenate([self._scores(b.goodput) for b in self.pool.blocks])
        limit = self.opt.max_simulated
        for k in np.argsort(-est, kind="stable"):
            b, i = rows[int(k)]
            if self._key(b.cands, i) in self._sim_keys:
                continue
            if float(self.bound.goodput_bound(b.cands.rate[i])) < self.bound.simulated:
                self.drops.not_simulated_bound()
                continue
            ratio = self._ratio(b.cands.lp)
            tol = 1 + self.opt.mc_tolerance
            if ratio is not None and float(est[k]) * ratio * tol < self.bound.simulated:
                self.drops.not_simulated_ratio(b.cands.lp, float(est[k]), ratio)
                continue
            # the first survivor is simulated whatever the time budget: a search that ran out of
            # time still answers with the best plan it estimated
            spent = self.budget.out_of_time() and self.counts.simulated > 0
            if spent or (limit is not None and self.counts.simulated >= limit):
                self.drops.not_simulated_budget(b.cands.lp, float(est[k]), spent, limit)
                continue
            self._simulate(b, i)

    def _simulate_unpriced(self) -> None:
        """In a space whose estimates are approximations (``Space.approximation``: vLLM-Omni's
        stages sharing a GPU, estimated as taking turns but simulated as separate processes), a
        logical plan whose every estimated plan scored zero was not priced by the estimate at
        all: its plan of highest flow rate is simulated when its bound beats the best simulated
        plan (a heuristic: one plan per such logical plan; the simulator decides)."""
        if not self.space.approximation:
            return
        for b in self.pool.reserve.values():
            if len(b.goodput) == 0 or float(self._scores(b.goodput).max()) > 0.0:
                continue
            i = int(np.argmax(b.cands.rate))
            if self._key(b.cands, i) in self._sim_keys:
                continue
            if float(self.bound.goodput_bound(b.cands.rate[i])) < self.bound.simulated:
                continue
            self._simulate(b, i)
            self.stats.reserve_simulated += 1

    def _simulate_reserve(self) -> None:
        """With ``max_simulated`` set and not spent, simulate the reserve (plans the estimate
        rules dropped: Pareto-dominated or below the estimate floor), best estimate first, where
        their bound still beats the best simulated plan: where the estimate misranks plans of
        one logical plan (an overloaded LLM it scores too high), the simulator decides."""
        limit = self.opt.max_simulated
        reserve = self.pool.reserve
        if limit is None or not reserve:
            return
        rows = [(b, i) for b in reserve.values() for i in range(len(b.goodput))]
        est = np.concatenate([self._scores(b.goodput) for b in reserve.values()])
        for k in np.argsort(-est, kind="stable"):
            if self.counts.simulated >= limit or self.budget.out_of_time():
                return
            b, i = rows[int(k)]
            seen = self._key(b.cands, i) in self._sim_keys
            if seen or float(self.bound.goodput_bound(b.cands.rate[i])) < self.bound.simulated:
                continue
            self._simulate(b, i)
            self.stats.reserve_simulated += 1
