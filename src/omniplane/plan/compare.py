"""The planner against the baselines on one problem, and the CLI's JSON document.

Every baseline space runs through the same pipeline (profile, flow, Monte Carlo, simulation)
with the planner's profile, latency targets and simulated request sample. With ``sweep`` the
selected plan of each is simulated again over offered rates around its ``alpha x R_d`` and the
best goodput is reported (the paper's metric: the goodput at the highest rate a plan
supports, section 6.1).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from omniplane.plan.baselines import baseline_spaces
from omniplane.plan.pipeline import Planner, PlanResult
from omniplane.plan.refine import SimOutcome, max_goodput
from omniplane.plan.space import FULL, Space
from omniplane.spec import PlanSpec

SWEEP = (0.6, 0.75, 0.9, 1.0, 1.1)  # offered rate / (alpha x R_d) (assumption: brackets the knee)


@dataclass
class Entry:
    name: str
    result: PlanResult
    outcome: SimOutcome | None  # the reported run: swept best, or the pipeline's own
    runs: list[SimOutcome] = field(default_factory=list)

    @property
    def spec(self) -> PlanSpec | None:
        return self.result.best.spec if self.result.best else None

    @property
    def total(self) -> float:
        return float(self.outcome.goodput.sum()) if self.outcome is not None else 0.0


@dataclass
class Comparison:
    planner: Entry
    baselines: list[Entry]
    seconds: float
    swept: bool

    @property
    def entries(self) -> list[Entry]:
        return [self.planner, *self.baselines]


def compare(planner: Planner, *, baselines: Sequence[Space] | None = None, sweep: bool = False,
            cloud: bool = False, space: Space = FULL) -> Comparison:
    """The planner's best in ``space`` (default: the full space) against ``baselines`` (default:
    every baseline of the model); the planner's answer is seeded only from baselines inside ``space``."""
    t0 = time.perf_counter()
    main = planner.run(space, cloud=cloud)
    spaces = baseline_spaces(planner.problem.model) if baselines is None else list(baselines)
    others = [planner.run(s) for s in spaces]
    entries = [_entry("planner", main, planner, sweep)] + [_entry(s.name, r, planner, sweep)
                                                           for s, r in zip(spaces, others, strict=True)]
    inside = [e for s, e in zip(spaces, entries[1:], strict=True) if s.split is None and within(s, space)]
    return Comparison(seeded(entries[0], inside), entries[1:], time.perf_counter() - t0, sweep)


def within(base: Space, space: Space) -> bool:
    """Every logical plan of ``base`` is one of ``space``'s (the full space holds every one)."""
    if space.logical is None:
        return True
    if base.logical is None:
        return False
    keys = {tuple(sp.key for sp in lp.subplans) for lp in space.logical}
    return all(tuple(sp.key for sp in lp.subplans) in keys for lp in base.logical)


def seeded(planner: Entry, baselines: Sequence[Entry]) -> Entry:
    """The planner's entry, or the best baseline's plan when one scores higher: every baseline
    space without a derived model is a restriction of the planner's space (its logical plan is
    one of Algorithm 1's simple subplans; its TP degrees and counts are a subset), so its plan
    is a candidate the planner's own search may have dropped on its estimate. The planner's
    answer is then never below such a baseline by construction of the comparison, and says so
    (``extra["seeded_from"]``; in ``--json`` ``plan.meta.seeded_from`` and ``plan.meta.search``'s
    ``seeded_from`` and ``search_best_total``)."""
    best = max(baselines, key=lambda e: e.total, default=None)
    if best is None or best.result.best is None or best.total <= planner.total:
        return planner
    res = planner.result
    spec = best.result.best.plan
    meta = dict(spec.meta or {})
    meta["seeded_from"] = best.name
    pick = replace(best.result.best, spec=spec.model_copy(update={"meta": meta}))
    extra = {**res.extra, "seeded_from": best.name, "search_best_total": planner.total}
    return Entry(planner.name, replace(res, best=pick, extra=extra), best.outcome, list(best.runs))


def _entry(name: str, result: PlanResult, planner: Planner, sweep: bool) -> Entry:
    best = result.best
    if best is None:
        return Entry(name, result, None)
    if not sweep:
        return Entry(name, result, best.outcome, [best.outcome])
    top, runs = max_goodput(planner.simulator, best.plan, planner.options.alpha * best.rate, SWEEP)
    return Entry(name, result, top, runs)


def to_json(cmp: Comparison) -> dict[str, Any]:
    """One document: ``plan`` (with details in ``plan.meta``), ``goodput``, ``baselines``,
    ``counts``, ``estimate_error``, ``cuts``, ``baseline_cuts`` (name -> that space's cuts, the
    shape of ``cuts``), ``phases`` and ``seconds`` (docs/guides/plan.md, "Command line")."""
    main = cmp.planner
    types = main.result.types
    out = main.outcome
    plan = main.spec.model_dump(mode="json", exclude_none=True) if main.spec else None
    if plan is not None:
        meta = dict(plan.get("meta", {}))
        meta["comparison"] = {
            "metric": "best goodput over offered rates x (alpha R_d): " + ", ".join(map(str, SWEEP))
            if cmp.swept else "goodput at alpha x R_d",
            "baselines": {e.name: _detail(e) for e in cmp.baselines},
            "planner": _detail(main),
        }
        meta["accuracy"] = main.result.accuracy()
        meta["search"] = _search(main.result)
        plan["meta"] = meta
    return {
        "plan": plan,
        "goodput": {
            "total": main.total,
            "per_type": {t: float(g) for t, g in zip(types, out.goodput, strict=True)} if out else {},
        },
        "baselines": {e.name: e.total for e in cmp.baselines},
        "counts": main.result.counts.to_json(),
        "estimate_error": estimate_error(cmp),
        "cuts": main.result.cuts,
        "baseline_cuts": {e.name: e.result.cuts for e in cmp.baselines},
        "phases": {k: {"count": v.count, "seconds": v.seconds} for k, v in main.result.phases.items()},
        "seconds": main.result.seconds,
    }


def estimate_error(cmp: Comparison) -> dict[str, Any]:
    """Flow + Monte Carlo against the simulator, total goodput at alpha x R_d: every plan the
    planner simulated (signed relative error) and each baseline's selected plan."""
    res = cmp.planner.result
    plans: list[dict[str, Any]] = [
        {"plan": _one_line(s.spec), "logical": s.logical, "estimate": float(s.estimate.sum()),
         "simulated": float(s.outcome.goodput.sum()), "error": s.error} for s in res.simulated]
    errs = [abs(s.error) for s in res.simulated if np.isfinite(s.error)]
    baselines = {e.name: e.result.best.error for e in cmp.baselines if e.result.best is not None}
    return {"mean_abs_total": float(np.mean(errs)) if errs else None, "plans": plans, "baselines": baselines}


def _detail(e: Entry) -> dict[str, Any]:
    types = e.result.types
    best = e.result.best
    return {
        "total": e.total,
        "per_type": {t: float(g) for t, g in zip(types, e.outcome.goodput, strict=True)} if e.outcome else {},
        "offered_rps": e.outcome.rate if e.outcome else None,
        "plan": _one_line(e.spec),
        "estimate_total": float(best.estimate.sum()) if best else None,
        "estimate_error": best.error if best else None,
        "counts": e.result.counts.to_json(),
        "cuts": e.result.cuts,
        "planning_seconds": e.result.seconds,
    }


def _search(r: PlanResult) -> dict[str, Any]:
    st = r.stats
    return {"logical_plans": st.logical_total, "subplans": st.subplans, "expanded": st.logical_expanded,
            "pruned_by_bound": st.logical_bounded, "infeasible": st.logical_infeasible,
            "stopped": st.stopped, "tied_routing": st.tied_routing, "grouped": st.grouped,
            "reserve_simulated": st.reserve_simulated, "incumbent_rps": st.incumbent,
            "flow_threshold_rps": st.threshold, "selected_logical_rank": r.extra.get("selected_logical_rank"),
            "seeded_from": r.extra.get("seeded_from"), "search_best_total": r.extra.get("search_best_total"),
            "seconds": dict(st.seconds), "explain": r.ledger.to_json()}


def _one_line(spec: PlanSpec | None) -> str:
    from omniplane.plan.emit import describe

    return describe(spec) if spec else ""
