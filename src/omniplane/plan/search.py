"""Branch and bound over a plan space: logical plans in decreasing order of an admissible bound,
each expanded into its physical plans above a threshold (flow) and estimated (Monte Carlo);
the survivors are simulated (docs/guides/plan.md, "Search").

Every plan's estimated goodput is at most ``alpha x R_d`` and its simulated goodput at most
``factor x alpha x R_d`` (:attr:`Oracle.factor`: the simulated sample's arrivals per unit of
offered rate), and every logical plan's ``R_d`` at most its bound. Two incumbents prune:

* the best *estimate* so far: plans whose bound is below ``(1 - mc_tolerance)`` of it are
  dropped. This is exact with respect to the estimate (no plan whose estimate is within the
  tolerance of the best is lost) and is Algorithm 2's estimate-based pruning, so the output
  reports it as an ``estimate`` rule;
* the best *simulated* plan: plans whose bound is below it cannot be selected (``exact``).

Logical plans come best bound first and the search stops when the next bound falls below the
threshold. The survivors are each logical plan's Pareto front on the estimate within the
tolerance of the best estimate; they are simulated best estimate first, skipping any whose
bound no longer beats the best simulated plan.

Work budgets: ``mc_budget`` (Monte Carlo estimates per plan space, on by default) gives each
Monte Carlo step's estimates to its plans of highest estimate bound and, once spent, stops the
expansion; ``time_budget_s`` stops it on the clock. Whatever either left out is a ``budget``
cut with its most promising item (docs/guides/plan.md, "Scale: the Monte Carlo budget"). Both
still expand the best logical plan and simulate the best survivor, so the search always answers.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import numpy as np

from omniplane.plan.costs import CostTable
from omniplane.plan.explain import Ledger
from omniplane.plan.flow import Candidates, Expansion, raw_count
from omniplane.plan.groups import GROUP_PLANS, executor_groups
from omniplane.plan.logical import LogicalPlan
from omniplane.plan.montecarlo import evaluate
from omniplane.plan.options import PlannerOptions
from omniplane.plan.order import LogicalOrder
from omniplane.plan.pool import Block, Cloud, Counts, SearchResult, SearchStats, Simulated, concat
from omniplane.plan.problem import Problem
from omniplane.plan.progress import NO_PROGRESS, Progress
from omniplane.plan.refine import SimOutcome
from omniplane.plan.routing import routing_vectors, type_grid_size
from omniplane.plan.screen import EstimateBound
from omniplane.plan.select import Score, pareto_front
from omniplane.plan.space import Space

MC_CHUNK = 2048  # candidates per vectorised Monte Carlo step
ROWS = 512  # rows turned into chain elements per step
CACHE = 64  # expansions kept between tightening a logical plan's bound and expanding it
CLOUD_SAMPLE = 200  # Monte Carlo-pruned plans per block kept for the pruning figure
BAND = 0.01  # the first band of rows reaches 1% below the logical plan's bound, each next one twice as deep
RESERVE = 8  # estimate-dropped plans kept per logical plan for spare simulation budget (assumption)
PARETO_EVERY = 5_000  # pool rows before the exact and Pareto pruning run (the same rules as at the end)


class Oracle(Protocol):
    """The simulator as the search sees it."""

    @property
    def factor(self) -> float:
        """Policy score <= factor x offered rate, for every plan (the sample's arrivals)."""
        ...

    def simulate(self, cands: Candidates, i: int) -> SimOutcome: ...


class Search:
    def __init__(self, problem: Problem, table: CostTable, space: Space, options: PlannerOptions,
                 slo_s: np.ndarray, transfer_s: float, score: Score, oracle: Oracle,
                 progress: Progress = NO_PROGRESS, cloud: bool = False,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.table, self.space, self.opt, self.slo = table, space, options, slo_s
        self.transfer, self.score, self.oracle, self.progress = transfer_s, score, oracle, progress
        self.want_cloud = cloud
        self.pi = problem.pi()
        self.budget = problem.gpus
        self.clock = clock
        self.t0 = clock()
        self.stats = SearchStats()
        self.counts = Counts()
        self.ledger = Ledger()
        self.cloud = Cloud()
        self.pool: list[Block] = []
        self.simulated: list[Simulated] = []
        self.best_estimate = 0.0  # best estimated score so far
        self._sim_keys: set[tuple[object, ...]] = set()
        self._ranks: dict[int, int] = {}  # id(logical plan) -> expansion rank
        self._cache: OrderedDict[tuple[int, int], Expansion] = OrderedDict()
        self._pruned_size = 0  # pool rows after the last pruning
        self.reserve: dict[int, Block] = {}  # id(logical plan) -> best estimate-dropped rows (RESERVE)
        self.ebound = EstimateBound(table, self.pi, slo_s, options.alpha, transfer_s)
        self.mc_left: int | None = options.mc_budget  # Monte Carlo estimates left (None: no budget)

    # ---- bounds and thresholds ----------------------------------------------------------------
    @property
    def incumbent(self) -> float:
        return self.stats.incumbent

    @property
    def factor(self) -> float:
        return max(self.oracle.factor, 1.0) * self.opt.alpha

    def goodput_bound(self, rate: np.ndarray | float) -> np.ndarray:
        """Upper bound on the policy score of plans with flow rate ``rate`` (simulated or
        estimated: the estimate's per-type goodput is at most ``alpha R_d pi_t``)."""
        return np.asarray(self.factor * np.asarray(rate))

    def threshold(self) -> float:
        """Plans with ``R_d`` below this cannot beat the incumbents (see the module docstring)."""
        return max(self.incumbent / self.factor, self.estimate_floor() / self.opt.alpha)

    def estimate_floor(self) -> float:
        return (1.0 - self.opt.mc_tolerance) * self.best_estimate

    def _binding(self) -> tuple[str, str]:
        """(kind, rule) of the threshold that binds now."""
        if self.incumbent / self.factor >= self.estimate_floor() / self.opt.alpha:
            return "exact", "goodput bound below the best simulated plan"
        return "estimate", f"goodput bound below (1 - {self.opt.mc_tolerance:g}) x the best estimate"

    def out_of_time(self) -> bool:
        tb = self.opt.time_budget_s
        return tb is not None and self.clock() - self.t0 > tb

    def mc_spent(self) -> bool:
        """The Monte Carlo budget (``mc_budget``) is spent."""
        return self.mc_left is not None and self.mc_left <= 0

    # ---- main loop ------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        st = self.stats
        t = self.clock()
        order = LogicalOrder(self.table, self.space, self.pi, self.budget, self.opt.k_c, self.opt.k_s,
                             self.opt.grid_steps, self.opt.compose_compound)
        if order.skipped_pairs:
            self.ledger.drop("enumerate", "side-by-side pairs with a compound subplan (--compose-compound "
                             "to include)", "heuristic", "logical plans", order.skipped_pairs)
        st.logical_total, st.subplans = order.total, len(order.subs)
        self.counts.raw_space = order.raw_space()
        st.seconds["enumerate"] += self.clock() - t
        self.progress.start(f"{self.space.name}: branch and bound", 0)
        stream = order.stream(self._tighten)
        yielded = 0
        while True:
            t = self.clock()
            item = next(stream, None)
            st.seconds["flow"] += self.clock() - t
            if item is None:
                break
            ub, i, j, lp = item
            yielded += 1
            # a spent time budget still expands the best logical plan: the search always answers
            late = self.out_of_time() and st.logical_expanded > 0
            if ub < self.threshold() or late or self.mc_spent():
                bound = float(self.goodput_bound(ub))
                rest = order.total - order.infeasible - yielded + 1
                if ub < self.threshold():
                    st.stopped = "bound"
                    st.logical_bounded = rest
                    kind, rule = self._binding()
                    self.ledger.drop("enumerate", rule, kind, "logical plans", rest, value=bound,
                                     example=f"{lp.describe()}: bound {bound:.2f} req/s, threshold "
                                             f"{self.threshold() * self.factor:.2f}")
                elif self.mc_spent():
                    st.stopped = "Monte Carlo budget"
                    self.ledger.drop("enumerate", f"--mc-budget {self.opt.mc_budget}: Monte Carlo budget "
                                     "spent, logical plans not expanded", "budget", "logical plans", rest,
                                     value=bound, example=f"{lp.describe()}: bound {bound:.2f} req/s "
                                                          f"(best estimate {self.best_estimate:.2f})")
                else:
                    st.stopped = "time budget"
                    self.ledger.drop("enumerate", "time budget: logical plans not expanded", "budget",
                                     "logical plans", rest, value=bound,
                                     example=f"{lp.describe()}: bound {bound:.2f} req/s")
                break
            self._expand(i, j, lp, ub)
            shown = float(self.goodput_bound(ub))
            self.progress.advance(1, f"{st.logical_expanded} expanded, best estimate "
                                     f"{self.best_estimate:.2f}/s, bound {shown:.2f}/s")
        st.logical_infeasible = order.infeasible
        if order.infeasible:
            self.ledger.drop("enumerate", "minimum GPUs exceed the budget", "exact", "logical plans",
                             order.infeasible)
        self.progress.end()
        if self.space.full and not self.out_of_time() and not self.mc_spent():
            executor_groups(self)
        elif self.space.full and self.mc_spent():
            self.ledger.drop("flow", f"--mc-budget {self.opt.mc_budget}: Monte Carlo budget spent, two "
                             "executor groups per node not tried", "budget", "logical plans",
                             min(GROUP_PLANS, st.logical_expanded))
        self._finish()
        st.threshold = self.threshold()
        return SearchResult(self.simulated, self.pool, self.counts, st, self.ledger, self.cloud)

    # ---- one logical plan -----------------------------------------------------------------------
    def _expansion(self, i: int, j: int, lp: LogicalPlan) -> Expansion:
        key = (i, j)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        vecs = routing_vectors(lp, self.opt.grid_steps, self.opt.max_routings)
        allowed = [self._allowed(n) for n in lp.nodes]
        exp = Expansion(lp, self.table, vecs, self.pi, self.budget, allowed, self.space.counts)
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
        st = self.stats
        st.logical_expanded += 1
        t0 = self.clock()
        exp = self._expansion(i, j, lp)
        self._ranks[id(exp.lp)] = st.logical_expanded
        self._note_routing(exp)
        flow_before = self.counts.flow
        st.seconds["flow"] += self.clock() - t0
        # rows in bands of decreasing flow rate: the best rows are estimated before the lower
        # bands are even enumerated, which the rising threshold then shortens; every row at
        # or above the final threshold is visited exactly once
        ceiling = np.inf
        gap = BAND
        level = ub_rate * (1 - gap) if np.isfinite(ub_rate) else 0.0
        while True:
            t1 = self.clock()
            floor = max(self.threshold(), level)
            opt, vec, top, cnt = exp.rows(floor)
            band = np.nonzero(top < ceiling)[0]
            self.counts.built += exp.rows_evaluated
            exp.rows_evaluated = 0
            st.seconds["flow"] += self.clock() - t1
            self._band(exp, opt[band], vec[band], top[band], cnt[band])
            if floor <= self.threshold() or self.mc_spent():
                break
            gap *= 2  # bands twice as deep each time: [1 - 2 gap, 1 - gap] of the bound
            ceiling, level = floor, ub_rate * max(0.0, 1 - gap)
        raw = float(raw_count(exp.costs, type_grid_size(exp.lp, self.opt.grid_steps), self.budget))
        unbuilt = max(0.0, raw - (self.counts.flow - flow_before))
        if self.mc_spent():  # the budget stopped this expansion: what was not built is not all exact
            self.ledger.drop("flow", f"--mc-budget {self.opt.mc_budget}: not built (redundant, below the "
                             "threshold, or left when the Monte Carlo budget was spent)", "budget",
                             "physical plans", unbuilt)
        else:
            self.ledger.drop("flow", "not built: redundant capacity (section 4.3) or flow rate below the "
                             "threshold (and plans of rows the row estimate bound dropped, counted above as "
                             "rows)", "exact", "physical plans", unbuilt)

    def _band(self, exp: Expansion, opt: np.ndarray, vec: np.ndarray, top: np.ndarray,
              cnt: np.ndarray) -> None:
        """Chain elements of these rows (best first) above the threshold, to Monte Carlo."""
        st = self.stats
        for start in range(0, len(top), ROWS):
            if self.mc_spent():
                left = int(np.count_nonzero(top[start:] >= self.threshold()))
                if left:
                    self.ledger.drop("flow", f"--mc-budget {self.opt.mc_budget}: Monte Carlo budget spent, "
                                     "plans of rows above the threshold not built", "budget",
                                     "rows (config x routing vectors)", left, value=float(top[start]),
                                     example=f"{exp.lp.describe()}: row rate {float(top[start]):.2f}/s")
                break
            t1 = self.clock()
            thr = self.threshold()
            sl = slice(start, start + ROWS)
            keep = np.nonzero(top[sl] >= thr)[0] + start
            if not len(keep):
                st.seconds["flow"] += self.clock() - t1
                break
            if self.opt.max_simulated is None:  # else the reserve ranks these rows' plans by estimate
                keep = self._row_screen(exp, opt[keep], vec[keep], top[keep], keep)
            if not len(keep):
                st.seconds["flow"] += self.clock() - t1
                continue
            cands = exp.elements(opt[keep], vec[keep], top[keep], cnt[keep], thr)
            self.counts.built += max(0, len(cands) - len(keep))
            self.counts.flow += len(cands)
            st.seconds["flow"] += self.clock() - t1
            self._monte_carlo(cands)

    def _row_screen(self, exp: Expansion, opt: np.ndarray, vec: np.ndarray, top: np.ndarray,
                    idx: np.ndarray) -> np.ndarray:
        """``idx`` less the rows whose every plan's estimate bound (at the row's top rate, no
        load: :meth:`EstimateBound.goodput` with ``loaded=False``) is below the estimate floor."""
        m = len(exp.costs)
        ones = np.ones((len(opt), m), dtype=int)
        none = np.zeros(len(opt), dtype=int)
        rows = Candidates(exp.lp, exp.costs, exp.p, exp.share, opt, ones, vec, top, none)
        ub = self.score(self.ebound.goodput(rows, loaded=False), self.pi)
        ok = ub >= self.estimate_floor()
        if not ok.all():
            self.stats.estimate_bounded_rows += int((~ok).sum())
            self.ledger.drop("flow", "estimate bound of the row (no waits, any occupancy, its top "
                             f"rate) below (1 - {self.opt.mc_tolerance:g}) x the best estimate: not built",
                             "estimate", "rows (config x routing vectors)", int((~ok).sum()))
        return idx[ok]

    def _note_routing(self, exp: Expansion) -> None:
        full = type_grid_size(exp.lp, self.opt.grid_steps)
        if full > exp.n_vectors and full > self.opt.max_routings:
            self.stats.tied_routing += 1
            self.ledger.drop("flow", f"routing splits tied across types (per-type grid > "
                             f"{self.opt.max_routings} vectors)", "heuristic", "routing vectors",
                             full - exp.n_vectors, value=float(full),
                             example=f"{exp.lp.describe()}: {exp.n_vectors} of {full:.3g} vectors")

    def _monte_carlo(self, cands: Candidates) -> None:
        st = self.stats
        for k in range(0, len(cands), MC_CHUNK):
            t = self.clock()
            idx = np.arange(k, min(len(cands), k + MC_CHUNK))
            idx = idx[cands.rate[idx] >= self.threshold()]
            if not len(idx):
                st.seconds["monte_carlo"] += self.clock() - t
                continue
            sub = cands.take(idx)
            # branch and bound on the estimate: an admissible bound on each plan's estimate
            # (omniplane.plan.screen); plans that cannot reach the estimate floor are not estimated
            ub = self.score(self.ebound.goodput(sub), self.pi)
            ok = ub >= self.estimate_floor()
            fit, low = np.nonzero(ok)[0], np.nonzero(~ok)[0]
            if self.mc_left is not None and len(fit) > self.mc_left:
                fit = self._spend(sub, ub, fit)
            spare = self.mc_left is None or self.mc_left >= len(fit) + len(low)
            if len(low) and self.opt.max_simulated is not None and spare:
                # the reserve (spare --max-simulated budget) ranks dropped plans by estimate
                rest = sub.take(low)
                g_r, a_r = evaluate(rest, self.table, self.pi, self.slo, self.opt.alpha, self.transfer)
                self._count_mc(len(rest))
                self._keep(Block(rest, g_r, a_r))
            if len(low):
                self.stats.estimate_bounded += len(low)
                self.ledger.drop("monte_carlo", f"estimate bound (no waits, lightest occupancy) below (1 - "
                                 f"{self.opt.mc_tolerance:g}) x the best estimate: not estimated",
                                 "estimate", "physical plans", len(low))
            if len(fit) < len(sub):
                sub = sub.take(fit)
            if not len(sub):
                st.seconds["monte_carlo"] += self.clock() - t
                continue
            good, att = evaluate(sub, self.table, self.pi, self.slo, self.opt.alpha, self.transfer)
            self._count_mc(len(sub))
            block = Block(sub, good, att)
            self.pool.append(block)
            st.seconds["monte_carlo"] += self.clock() - t
            self.best_estimate = max(self.best_estimate, float(self.score(good, self.pi).max()))
            size = sum(len(b.goodput) for b in self.pool)
            if size > max(PARETO_EVERY, 2 * self._pruned_size):
                self._prune_pool()
                self._pruned_size = sum(len(b.goodput) for b in self.pool)

    def _spend(self, sub: Candidates, ub: np.ndarray, fit: np.ndarray) -> np.ndarray:
        """The last ``mc_left`` Monte Carlo estimates of the budget go to the plans of ``fit``
        with the highest estimate bound ``ub``; the others are a ``budget`` cut (the highest
        bound among them is its example: how much the cut could have lost on the estimate)."""
        left = max(0, self.mc_left or 0)
        order = fit[np.argsort(-ub[fit], kind="stable")]
        keep, out = np.sort(order[:left]), order[left:]
        k = int(out[0])
        self.ledger.drop("monte_carlo", f"--mc-budget {self.opt.mc_budget}: Monte Carlo budget spent, plans "
                         "above the estimate floor not estimated", "budget", "physical plans", len(out),
                         value=float(ub[k]), example=f"{sub.lp.describe()}: estimate bound "
                                                     f"{float(ub[k]):.2f} req/s (best estimate "
                                                     f"{self.best_estimate:.2f})")
        return keep

    def _count_mc(self, n: int) -> None:
        self.counts.monte_carlo += n
        if self.mc_left is not None:
            self.mc_left -= n

    # ---- simulation and the pool ---------------------------------------------------------------
    def _simulate(self, block: Block, i: int) -> Simulated:
        t = self.clock()
        out = self.oracle.simulate(block.cands, i)
        self.stats.seconds["simulate"] += self.clock() - t
        lp = block.cands.lp
        rec = Simulated(block, i, out, lp.describe(), self._ranks.get(id(lp), 0))
        self._sim_keys.add(self._key(block.cands, i))
        self.simulated.append(rec)
        self.counts.simulated += 1
        score = float(self.score(out.goodput[None, :], self.pi)[0])
        self.stats.incumbent = max(self.stats.incumbent, score)
        return rec

    def _ratio(self, lp: LogicalPlan) -> float | None:
        """The highest simulated / estimated score among this logical plan's simulated plans
        (None: none simulated yet): how far its estimates have erred upwards at best."""
        out = None
        for s in self.simulated:
            if s.block.cands.lp is not lp:
                continue
            est = float(self.score(s.estimate[None, :], self.pi)[0])
            sim = float(self.score(s.outcome.goodput[None, :], self.pi)[0])
            r = sim / est if est > 0 else float("inf")
            out = r if out is None else max(out, r)
        return out

    @staticmethod
    def _key(c: Candidates, i: int) -> tuple[object, ...]:
        return (id(c.lp), tuple(c.opt[i].tolist()), tuple(c.cnt[i].tolist()), int(c.vec[i]))

    def _prune_pool(self) -> None:
        """Drop pool rows below the threshold (their bound) or whose estimate is below the
        estimate floor, then keep each logical plan's Pareto front on the estimate."""
        if not self.pool:
            return
        t = self.clock()
        thr, floor = self.threshold(), self.estimate_floor()
        kind, rule = self._binding()
        by_lp: dict[int, list[Block]] = {}
        bounded = low = 0
        for b in self.pool:
            ok = b.cands.rate >= thr
            bounded += int((~ok).sum())
            est = self.score(b.goodput, self.pi)
            good = ok & (est >= floor)
            low += int((ok & ~good).sum())
            if good.any():
                by_lp.setdefault(id(b.cands.lp), []).append(b if good.all() else b.take(np.nonzero(good)[0]))
            if (ok & ~good).any():
                self._keep(b.take(np.nonzero(ok & ~good)[0]))
        self.ledger.drop("monte_carlo", rule, kind, "physical plans", bounded)
        self.ledger.drop("monte_carlo", f"estimate below (1 - {self.opt.mc_tolerance:g}) x the best estimate",
                         "estimate", "physical plans", low)
        out = []
        dominated = 0
        for blocks in by_lp.values():
            merged = blocks[0] if len(blocks) == 1 else concat(blocks)
            front = pareto_front(merged.goodput)
            dominated += len(merged.goodput) - len(front)
            lost = np.setdiff1d(np.arange(len(merged.goodput)), front)
            if len(lost):
                self._keep(merged.take(lost))
            if self.want_cloud:
                self.cloud.add(merged.cands.rate[lost[:CLOUD_SAMPLE]], merged.goodput[lost[:CLOUD_SAMPLE]],
                               "monte_carlo")
            out.append(merged.take(front))
        self.ledger.drop("monte_carlo", "Pareto-dominated on the estimate within its logical plan",
                         "estimate", "physical plans", dominated)
        self.pool = out
        self.stats.seconds["monte_carlo"] += self.clock() - t

    def _keep(self, block: Block) -> None:
        """Add estimate-dropped rows to their logical plan's reserve: its ``RESERVE`` best by
        estimate, which spare ``max_simulated`` budget simulates after the survivors."""
        key = id(block.cands.lp)
        old = self.reserve.get(key)
        merged = block if old is None else concat([old, block])
        if len(merged.goodput) > RESERVE:
            merged = merged.take(np.argsort(-self.score(merged.goodput, self.pi), kind="stable")[:RESERVE])
        self.reserve[key] = merged

    def _finish(self) -> None:
        """Simulate every survivor, best estimate first, unless its bound no longer beats the
        best simulated plan (exact) or the budget is spent (a cut)."""
        self._prune_pool()
        rows = [(b, i) for b in self.pool for i in range(len(b.goodput))]
        if not rows:
            return
        est = np.concatenate([self.score(b.goodput, self.pi) for b in self.pool])
        limit = self.opt.max_simulated
        for k in np.argsort(-est, kind="stable"):
            b, i = rows[int(k)]
            if self._key(b.cands, i) in self._sim_keys:
                continue
            bound = float(self.goodput_bound(b.cands.rate[i]))
            if bound < self.incumbent:
                self.ledger.drop("simulate", "goodput bound below the best simulated plan", "exact",
                                 "physical plans", 1)
                continue
            ratio = self._ratio(b.cands.lp)
            if ratio is not None and float(est[k]) * ratio * (1 + self.opt.mc_tolerance) < self.incumbent:
                self.ledger.drop("simulate", "estimate x its logical plan's best simulated / estimated "
                                 f"ratio x (1 + {self.opt.mc_tolerance:g}) below the best simulated plan",
                                 "estimate", "physical plans", 1, value=float(est[k]),
                                 example=f"{b.cands.lp.describe()}: estimate {float(est[k]):.2f} x "
                                         f"{ratio:.3f}")
                continue
            # the first survivor is simulated whatever the time budget: a search that ran out of
            # time still answers with the best plan it estimated
            spent = self.out_of_time() and self.counts.simulated > 0
            if spent or (limit is not None and self.counts.simulated >= limit):
                rule = "time budget: survivors not simulated" if spent else \
                    f"--max-simulated {limit}: survivors not simulated"
                self.ledger.drop("simulate", rule, "budget", "physical plans", 1, value=float(est[k]),
                                 example=f"{b.cands.lp.describe()}: estimate {float(est[k]):.2f} req/s")
                continue
            self._simulate(b, i)
        self._spare()

    def _spare(self) -> None:
        """With ``max_simulated`` set and not spent, simulate the reserve (plans the estimate
        rules dropped: Pareto-dominated or below the estimate floor), best estimate first, where
        their bound still beats the best simulated plan: where the estimate misranks plans of
        one logical plan (an overloaded LLM it scores too high), the simulator decides."""
        limit = self.opt.max_simulated
        if limit is None or not self.reserve:
            return
        rows = [(b, i) for b in self.reserve.values() for i in range(len(b.goodput))]
        est = np.concatenate([self.score(b.goodput, self.pi) for b in self.reserve.values()])
        for k in np.argsort(-est, kind="stable"):
            if self.counts.simulated >= limit or self.out_of_time():
                return
            b, i = rows[int(k)]
            seen = self._key(b.cands, i) in self._sim_keys
            if seen or float(self.goodput_bound(b.cands.rate[i])) < self.incumbent:
                continue
            self._simulate(b, i)
            self.stats.reserve_simulated += 1
