"""``omniplane plan ...`` (plan a deployment) and ``omniplane plan show PLAN``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from omniplane.cli import options as opt
from omniplane.cli.capacity import RATE_PERCENTILE, RateFromOpt, RatePercentileOpt, from_plan, gpu_kinds
from omniplane.cli.errors import fail, new_app
from omniplane.cli.files import Outputs
from omniplane.cli.output import console, notice, print_json, print_table
from omniplane.cli.progress import StderrProgress
from omniplane.cli.slo import SloOpt, legacy_plan_policy, slo_choice
from omniplane.errors import unknown_name
from omniplane.plan.options import MC_BUDGET
from omniplane.plan.select import POLICIES
from omniplane.spec import (
    SpecError,
    catalog_workload_paths,
    dump,
    find_catalog_model,
    find_catalog_workload,
    load_gpus,
    load_model,
    load_plan,
    load_workload,
    workload_ref,
)

MIX_TOLERANCE = 1e-6  # as a workload spec's mix (omniplane.spec.workload)
MAX_TIME_BUDGET_S = 86_400.0  # --time-budget: a day, an assumption far beyond any planning run

app = new_app("Plan a deployment (Cornfigurator); `plan show PLAN` draws a plan file.",
              invoke_without_command=True, no_args_is_help=False)


def _workload(model_name: str, ref: str | None) -> Path:
    if ref:
        return find_catalog_workload(ref) or Path(ref)  # checked by opt.workload_ref
    # the model's base workload first: variants extend its name (qwen3-omni-servegen-2of3audio)
    for p in sorted(catalog_workload_paths(), key=lambda p: (len(p.stem), p.stem)):
        try:
            wl = load_workload(p)
        except SpecError:
            continue
        if wl.model.name == model_name and wl.spec.mix is not None:
            return p
    fail(f"--workload: no catalog workload for model {model_name!r} has a type mix; give --workload FILE")


def parse_mix(text: str, types: list[str], normalize: bool = False,
              option: str = "--mix") -> dict[str, float]:
    """``--mix t2t=0.5,ti2t=0.5`` (or ``option``, e.g. ``--replan-mix``): the same rule as a spec
    file's ``mix`` (fractions >= 0 that sum to 1; types not named get 0), or, with ``normalize``,
    any non-negative weights scaled to sum to 1 (said on stderr)."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = (p.strip() for p in item.partition("="))
        if not sep:
            fail(f"{option}: item {item!r} must be TYPE=FRACTION (types: {', '.join(types)})")
        if name not in types:
            fail(f"{option}: {unknown_name('request type', name, types)}")
        if name in out:
            fail(f"{option}: type {name!r} given twice")
        try:
            out[name] = opt.Number(0, opt.MAX_MIX_WEIGHT)(value)
        except typer.BadParameter as exc:
            fail(f"{option}: {name}: {exc.message}")
    total = sum(out.values())
    if not out or total <= 0:
        fail(f"{option}: give at least one type with a positive fraction, e.g. "
             f"{types[0]}=1")
    if normalize:
        scaled = {t: v / total for t, v in out.items()}
        if abs(total - 1.0) > MIX_TOLERANCE:
            notice(f"{option} normalised (the fractions summed to {total:g}): "
                   + ", ".join(f"{t}={v:.4g}" for t, v in scaled.items()))
        out = scaled
    elif abs(total - 1.0) > MIX_TOLERANCE:
        fail(f"{option}: the fractions sum to {total:g}, not 1 (as a workload's mix must); fix them or "
             "add --normalize to scale them to 1")
    missing = [t for t in types if t not in out]
    if missing:
        notice(f"{option}: no traffic of type(s) {', '.join(missing)} (not in {option})")
    return {t: out.get(t, 0.0) for t in types}


def _routing_step(value: object) -> float:
    x = opt.Number(0, 1, lo_open=True)(value)
    if abs(1 / x - round(1 / x)) > 1e-9:
        raise typer.BadParameter(f"expected a step that divides 1 (0.1, 0.2, 0.25, 0.5, 1), got {value!r}")
    return x


ModelOpt = Annotated[str | None, opt.option(
    "--model", help="Catalog model name or model file. [required]", parser=opt.model_ref(), metavar="MODEL")]
GpusOpt = Annotated[int | None, opt.int_opt(
    "--gpus", help="GPU budget N (the planner's limit). [required]", lo=1, hi=opt.MAX_GPUS,
    why=opt.GPUS_WHY)]


@app.callback()
def plan(
    ctx: typer.Context,
    model: ModelOpt = None,
    gpus: GpusOpt = None,
    gpu: Annotated[str, opt.option("--gpu", help="GPU kind (with --rate/--rates: a comma list, e.g. "
                                    "A100-80GB,H100).", parser=gpu_kinds, metavar="GPU")] = "A100-80GB",
    rate: Annotated[float | None, opt.rate_opt(
        "--rate", help="Capacity planning: the fewest GPUs of each --gpu kind whose best plan meets "
                       "--attainment at this offered rate (docs/guides/plan.md, \"Capacity\").")] = None,
    rates: Annotated[str | None, typer.Option(
        metavar="R1,R2,...", help="Capacity planning at each of these rates (a table; --figures: a "
                                  "figure; with --inventory: the inventory and each kind alone per "
                                  "rate).")] = None,
    rate_from: RateFromOpt = None,
    rate_percentile: RatePercentileOpt = RATE_PERCENTILE,
    attainment: Annotated[float, opt.float_opt(
        "--attainment", help="With --rate: share of each type's requests within its target.", lo=0,
        hi=1, lo_open=True)] = 0.9,
    prices: Annotated[Path | None, opt.file_opt(
        "--prices", help="With --rate: USD per GPU-hour per kind (YAML, kind: prices), over the "
                         "catalog's.")] = None,
    inventory: Annotated[str | None, typer.Option(
        metavar="KIND:N,...", help="Mixed fleet: the best plan within this inventory (e.g. H100:8,L40S:16; "
                                   "with --rate: the cheapest subset that meets it), against each kind alone "
                                   "at the same hourly cost.")] = None,
    host_gpus: Annotated[int, opt.int_opt("--host-gpus", help="With --inventory: GPUs per host.", lo=1,
                                          hi=64)] = 8,
    objective: Annotated[str, opt.choice_opt(
        "--objective", help="With --rate: pick the kind with the fewest GPUs or the lowest cost.",
        choices=("gpus", "cost"), what="objective")] = "gpus",
    workload: Annotated[str | None, opt.option(
        "--workload", help="Catalog workload or file (default: the model's base catalog workload "
                           "with a mix).", parser=opt.workload_ref(), metavar="WORKLOAD")] = None,
    slo: SloOpt = None,
    slo_policy: Annotated[str | None, opt.choice_opt(  # deprecated: --slo POLICY
        "--slo-policy", help="Deprecated: --slo POLICY.", choices=("isolated_percentile", "solo_multiplier",
                                                                   "explicit"), what="SLO policy",
        hidden=True)] = None,
    slo_percentile: Annotated[float | None, opt.percentile_opt(
        "--slo-percentile", help="Deprecated: --slo.", hidden=True)] = None,
    slo_multiplier: Annotated[float | None, opt.multiplier_opt(
        "--slo-multiplier", help="Deprecated: --slo.", hidden=True)] = None,
    mix: Annotated[str | None, typer.Option(
        metavar="TYPE=FRACTION,...", help="Replace the type mix, e.g. ti2t=0.5,ti2a=0.5; the fractions "
                                          "must sum to 1 (types not named get 0).")] = None,
    normalize: Annotated[bool, typer.Option(
        "--normalize", help="Scale the --mix fractions to sum to 1 (and say so).")] = False,
    out: Annotated[Path | None, opt.out_opt("--out", help="Write the selected plan here (YAML).")] = None,
    figures: Annotated[Path | None, opt.out_dir_opt(
        "--figures", help="Write Figures 7, 8, 9 (PNG) into this folder.")] = None,
    baselines: Annotated[bool, typer.Option(help="Also plan every baseline space (--runtime vllm-omni: "
                                                 "its stock layout, always).")] = True,
    sweep: Annotated[bool, typer.Option(help="Report each plan's best goodput over offered rates.")] = False,
    policy: Annotated[str, opt.choice_opt("--policy", help="Selection policy.", choices=tuple(POLICIES),
                                          what="selection policy")] = "total",
    k_c: Annotated[int, opt.int_opt("--k-c", help="Simple subplans per compound subplan.", lo=1, hi=4)] = 2,
    k_s: Annotated[int, opt.int_opt("--k-s", help="Subplans per logical plan.", lo=1, hi=4)] = 2,
    alpha: Annotated[float, opt.float_opt("--alpha", help="Headroom: evaluate at alpha x R_d.",
                                          lo=0, hi=1, lo_open=True)] = 0.8,
    routing_step: Annotated[float, opt.option(
        "--routing-step", help="Routing probability step (divides 1).", parser=_routing_step,
        metavar="X")] = 0.1,
    routing: Annotated[str, opt.choice_opt(
        "--routing", help="Routing search (lp: not implemented; docs/guides/plan.md).",
        choices=("grid", "lp"),
        what="routing mode")] = "grid",
    time_budget: Annotated[float | None, opt.float_opt(
        "--time-budget", help="Seconds the search of each plan space may take (default: none); when it "
                              "binds the output lists what it cut.", lo=0, hi=MAX_TIME_BUDGET_S,
        lo_open=True, metavar="S")] = None,
    max_simulated: Annotated[int | None, opt.int_opt(
        "--max-simulated", help="Plans simulated at most (default: every survivor; a cut when it binds).",
        lo=1, hi=100_000)] = None,
    mc_budget: Annotated[int, opt.int_opt(
        "--mc-budget", help="Plans estimated by Monte Carlo at most per plan space, best estimate bound "
                            "first (0: no limit; a cut when it binds; docs/guides/plan.md, \"Scale\").",
        lo=0, hi=100_000_000)] = MC_BUDGET,
    mc_tolerance: Annotated[float, opt.float_opt(
        "--mc-tolerance", help="Keep plans within this fraction of the best estimate (docs/guides/plan.md, "
                               "\"Search\").", lo=0, hi=1, hi_open=True)] = 0.03,
    compose_compound: Annotated[bool, typer.Option(help="Also compose compound subplans side by side "
                                                        "(the paper's full k_s space; slower).")] = False,
    explain: Annotated[bool, typer.Option(help="Print, per phase, what each rule dropped.")] = False,
    sim_requests: Annotated[int, opt.int_opt("--sim-requests", help="Requests per simulation.",
                                             lo=10, hi=opt.MAX_REQUESTS)] = 1200,
    mc_samples: Annotated[int, opt.int_opt("--mc-samples", help="Requests sampled per type for Monte "
                                                                "Carlo.", lo=1, hi=100_000)] = 128,
    seed: Annotated[int, opt.seed_opt("Seed of samples and simulations.")] = 0,
    replan_gpus: Annotated[int | None, opt.int_opt(
        "--replan-gpus", help="Then re-plan for this budget from the same profile and report the time.",
        lo=1, hi=opt.MAX_GPUS, why=opt.GPUS_WHY)] = None,
    replan_mix: Annotated[str | None, typer.Option(
        metavar="TYPE=FRACTION,...", help="Then re-plan for this type mix (e.g. ti2t=0.5,ti2a=0.5) from "
                                          "the same profile; the rule of --mix (and --normalize).")] = None,
    runtime: Annotated[str | None, opt.choice_opt(
        "--runtime", help="Plan space: what this runtime can run (default: vllm-omni for a model with a "
                          "stock vLLM-Omni layout, else ideal, which no runtime runs).",
        choices=("vllm-omni", "ideal"), what="runtime")] = None,
    compare_ideal: Annotated[bool, typer.Option(
        "--compare-ideal", help="Also plan the ideal space and report what the runtime costs.")] = False,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Plan a deployment: enumerate, flow bound, Monte Carlo, simulate, select."""
    if ctx.invoked_subcommand is not None:
        return
    if inventory is not None:
        from omniplane.cli.inventory import from_plan as from_inventory

        from_inventory(locals(), _workload, parse_mix)
        return
    if rate is not None or rates is not None or rate_from is not None or rate_percentile != RATE_PERCENTILE:
        from_plan(locals(), _workload, parse_mix)
        return
    if "," in gpu:
        fail("--gpu: one GPU kind (a comma list needs --rate or --rates)")
    if model is None or gpus is None:
        fail("give --model and --gpus (or use `omniplane plan show PLAN`); see omniplane plan --help")
    if normalize and mix is None and replan_mix is None:
        fail("--normalize scales --mix (or --replan-mix); give it too")
    from omniplane.perf import CostModel
    from omniplane.plan.compare import compare, to_json
    from omniplane.plan.costs import CostTable
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.pipeline import Planner
    from omniplane.plan.problem import make_problem
    from omniplane.plan.runtime import (
        RuntimeUnavailable,
        default_runtime,
        mark_shared,
        pricing_runtime,
        setup,
    )
    from omniplane.slo.resolve import space_targets

    m = load_model(find_catalog_model(model) or Path(model))
    wl = load_workload(_workload(m.name, workload))
    kind = load_gpus().get(gpu)
    if wl.model.name != m.name:
        fail(f"--workload {workload!r} is for model {wl.model.name!r}, not {m.name!r}")
    mix_given = parse_mix(mix, m.type_names, normalize) if mix else None
    replan_mix_given = (parse_mix(replan_mix, m.type_names, normalize, "--replan-mix") if replan_mix
                        else None)
    try:
        options = PlannerOptions(k_c=k_c, k_s=k_s, routing_step=routing_step, routing=routing,  # type: ignore[arg-type]
                                 alpha=alpha, mc_samples=mc_samples, mc_tolerance=mc_tolerance,
                                 sim_requests=sim_requests, max_simulated=max_simulated,
                                 mc_budget=mc_budget or None, time_budget_s=time_budget,
                                 compose_compound=compose_compound, seed=seed)
    except ValueError as exc:
        fail(f"--routing: {exc}" if routing == "lp" else str(exc))
    legacy = legacy_plan_policy(wl.spec.slo, slo_policy, slo_percentile, slo_multiplier)
    choice = slo_choice(slo, m.type_names, legacy, "--slo-policy/--slo-percentile/--slo-multiplier")
    if choice is not None and choice.base == "plan":
        fail("--slo plan: planning writes a plan's targets; give a policy or TYPE=DURATION items")
    base = choice.base if choice is not None else None
    given = None if base is None or isinstance(base, str) else base  # a policy; else the workload's
    overrides = dict(choice.targets_ms) if choice is not None else None
    with Outputs() as files:
        t0 = time.perf_counter()
        problem = make_problem(wl, kind, gpus, samples=options.mc_samples, seed=seed, mix=mix_given)
        space_name = runtime or default_runtime(m)
        cost = CostModel(problem.model, runtime=pricing_runtime(space_name))
        table = CostTable(problem, cost)
        try:
            rt = setup(space_name, problem, cost, table, options.k_s, seed)
        except RuntimeUnavailable as exc:
            fail(str(exc))
        targets = space_targets(rt, given or wl.spec.slo, overrides, seed=options.seed)
        planner = Planner(problem, options=options, cost=cost, table=rt.table, targets=targets, policy=policy,
                          progress=StderrProgress("plan"))
        profile_s = time.perf_counter() - t0
        spaces = rt.baselines if rt.baselines is not None or baselines else []
        cmp = compare(planner, baselines=spaces, sweep=sweep, cloud=figures is not None, space=rt.space)
        if cmp.planner.spec is None:
            fail(f"no plan fits the budget of {gpus} x {kind.name} (every executor config is infeasible "
                 "or over budget); try a larger --gpus or another --gpu")
        if rt.name == "vllm-omni" and cmp.planner.result.best is not None:  # shared GPUs: their mode
            cmp.planner.result.best.spec = mark_shared(cmp.planner.spec, m)
        doc = to_json(cmp)
        meta = doc["plan"]["meta"]
        meta["profile_seconds"] = profile_s
        doc["runtime"] = meta["runtime"] = _runtime_block(cmp, rt, planner, compare_ideal)
        replans: list[dict[str, Any]] = []
        if replan_gpus is not None:
            replans.append({"gpus": replan_gpus})
        if replan_mix_given is not None:
            replans.append({"mix": replan_mix_given})
        for change in replans:
            t1 = time.perf_counter()
            again = planner.replan(**change, space=rt.space)
            meta.setdefault("replan", []).append({
                **change, "seconds": time.perf_counter() - t1, "goodput_total": again.total,
                "plan": _one_line(again.best.spec) if again.best else None,
                "counts": again.counts.to_json(), "cuts": again.cuts, "profile_reused": True})
        if replans:
            doc["replan"] = meta["replan"]
        plan_spec = cmp.planner.spec.model_copy(update={"meta": meta})
        if out is not None and plan_spec.prediction is not None:  # the workload, relative to the plan file
            ref = workload_ref(wl, out.parent.absolute())
            plan_spec = plan_spec.model_copy(update={"prediction": plan_spec.prediction.model_copy(
                update={"workload": ref})})
        if out is not None:
            files.text(out, dump(plan_spec))
        staged: list[Path] = []
        if figures is not None:
            from omniplane.repro.plan_figures import write_all

            staged = write_all(cmp, files.folder(figures), f"{m.name}-{gpus}x{kind.name}")
        files.commit()
    written = [figures / p.name for p in staged] if figures is not None else []
    doc["memory"] = _memory(plan_spec, m, wl, mix_given, seed)
    if json_out:
        if explain:
            doc["explain"] = cmp.planner.result.ledger.to_json()
        print_json(doc)
        return
    _print(cmp, plan_spec, meta, out, written, doc, explain)


def _runtime_block(cmp: Any, rt: Any, planner: Any, ideal: bool) -> dict[str, Any]:
    """``meta.runtime``: the space's runtime, deployable or not and why, and the comparison: the
    pick, vLLM-Omni's stock layout replicated, and (``ideal``) the ideal space's best."""
    from omniplane.plan.pipeline import Planner
    from omniplane.plan.runtime import label
    from omniplane.plan.space import FULL

    model = planner.problem.model
    out = label(model, rt.name, rt.space)
    out["priced_with"] = planner.cost.runtime.name  # the perf runtime behind every price of the plan
    out["targets_space"] = rt.targets_space()  # where the isolated-percentile targets were resolved
    pick = cmp.planner.total
    stock = next((e for e in cmp.baselines if e.name == "vllm-omni"), None)
    if stock is not None:
        out["stock_replicated_rps"] = stock.total
        out["pick_over_stock"] = pick / stock.total if stock.total > 0 else None
    if ideal:
        if rt.name == "ideal":
            out["ideal_rps"] = pick
        else:
            other = Planner(planner.problem, options=planner.options, cost=planner.cost, table=rt.ideal_table,
                            targets=planner.targets, policy=planner.policy_name, progress=planner.progress)
            res = other.run(FULL)
            out["ideal_rps"] = res.total
            out["ideal_scored_at"] = "this plan's targets (resolved in " + rt.targets_space() + ")"
            out["ideal_plan"] = _one_line(res.best.spec) if res.best and res.best.spec else None
            out["runtime_over_ideal"] = pick / res.total if res.total > 0 else None
    out["pick_rps"] = pick
    return out


def _memory(plan_spec: Any, model: Any, wl: Any, mix: dict[str, float] | None, seed: int) -> dict[str, Any]:
    """The chosen plan's per-GPU memory as vLLM-Omni loads it (omniplane.deploy.memory_table),
    KV at the context lengths of 2,000 requests of the workload."""
    from omniplane.deploy.memory_table import plan_memory
    from omniplane.perf.stage_memory import contexts
    from omniplane.spec import resolve_plan
    from omniplane.workload.generate import generate

    plan = resolve_plan(plan_spec, model, load_gpus())
    ctx = contexts(model, [r.work for r in generate(wl, n=2000, seed=seed, mix=mix)])
    return plan_memory(plan, ctx, wl.spec.name or str(wl.path))


def _print(cmp: Any, plan_spec: Any, meta: dict[str, Any], out: Path | None, written: list[Path],
           doc: dict[str, Any], explain: bool) -> None:
    from omniplane.deploy.memory_table import render as render_memory
    from omniplane.plan.show import render

    console.print(render(plan_spec), highlight=False)
    console.print(render_memory(doc["memory"]), highlight=False)
    res = cmp.planner.result
    how = ", best over offered rates" if cmp.swept else ", at alpha x R_d"
    table = Table(title="goodput (req/s)" + how)  # one column per plan: fits 80 columns
    table.add_column("type")
    for e in cmp.entries:
        table.add_column(e.name, justify="right")
    for k, t in enumerate(res.types):
        table.add_row(t, *[f"{e.outcome.goodput[k]:.2f}" if e.outcome is not None else "-"
                           for e in cmp.entries])
    table.add_row("total", *[f"{e.total:.2f}" for e in cmp.entries], style="bold")
    table.add_row("planner / this", *["" if e is cmp.planner else
                                      (f"{cmp.planner.total / e.total:.2f}x" if e.total > 0 else "no plan")
                                      for e in cmp.entries])
    err = doc["estimate_error"]
    table.add_row("estimate error", *[_pct(e.result.best.error) if e.result.best else "-"
                                      for e in cmp.entries])
    print_table(table)
    _print_runtime(doc["runtime"])
    phases = Table(title="search (counts: docs/guides/plan.md, \"Counts\")")
    phases.add_column("phase")
    phases.add_column("plans", justify="right")
    phases.add_column("what is counted")
    phases.add_column("seconds", justify="right")
    counts, sec = res.counts, res.stats.seconds
    rows = [("raw space", counts.raw_space,
             "Algorithm 1's physical plans read literally (+ executor-group plans opened), by formula",
             None),
            ("built", counts.built, "(config, routing) rows whose flow bound was computed + chain plans",
             None),
            ("flow", counts.flow, "non-redundant plans at or above the threshold", sec["flow"]),
            ("Monte Carlo", counts.monte_carlo, "plans estimated by flow + Monte Carlo", sec["monte_carlo"]),
            ("simulated", counts.simulated, "plans run through the simulator", sec["simulate"])]
    for name, n, what, s in rows:
        phases.add_row(name, f"{n:.3g}" if n >= 1e6 else f"{int(n):,}", what, "" if s is None else f"{s:.2f}")
    print_table(phases)
    st = res.stats
    console.print(f"logical plans: {st.logical_total:,} in the space, {st.logical_expanded:,} expanded, "
                  f"{st.logical_bounded:,} dropped by bound, {st.logical_infeasible:,} do not fit; search "
                  f"stopped by {st.stopped}", highlight=False)
    cuts = res.cuts
    if cuts:
        console.print("[bold yellow]cuts that changed what was explored:[/]")
        for c in cuts:
            console.print("  " + _cut(c), highlight=False)
    else:
        console.print("no heuristic or budget cut changed what was explored", highlight=False)
    for name, bcuts in doc["baseline_cuts"].items():
        if bcuts:
            console.print(f"[yellow]{name} baseline's cuts:[/] " + "; ".join(map(_cut, bcuts)),
                          highlight=False)
    if explain:
        console.print(res.ledger.render(), highlight=False)
    seed = res.extra.get("seeded_from")
    if seed:
        own = res.extra["search_best_total"]
        console.print(f"[bold yellow]the plan is the {seed} baseline's[/] (inside the "
                      f"planner's space; the search's own best simulated {own:.2f} req/s)",
                      highlight=False)
    mean = err["mean_abs_total"]
    console.print(f"planning {res.seconds:.1f} s (profile and targets {meta['profile_seconds']:.1f} s); "
                  f"flow + Monte Carlo vs simulator, total goodput: mean abs. error "
                  f"{'-' if mean is None else f'{mean:.1%}'} over {len(err['plans'])} simulated plans",
                  highlight=False)
    for r in meta.get("replan", []):
        what = f"{r['gpus']} GPUs" if "gpus" in r else \
            "mix " + ", ".join(f"{t}={f:.2f}" for t, f in r["mix"].items())
        console.print(f"re-planned for {what} from the same profile in {r['seconds']:.1f} s: "
                      f"{r['goodput_total']:.2f} req/s", highlight=False)
    if out is not None:
        console.print(f"plan written to {out}", highlight=False)
    for p in written:
        console.print(f"figure {p}", highlight=False)


def _print_runtime(rt: dict[str, Any]) -> None:
    if not rt["deployable"]:
        console.print(f"[bold red]{rt['why']}[/]", highlight=False)
    else:
        console.print(f"runtime: {rt['space']}", highlight=False)
        if rt.get("approximation"):
            console.print(f"[yellow]approximation:[/] {rt['approximation']}", highlight=False)
    parts = [f"pick {rt['pick_rps']:.2f} req/s"]
    if "stock_replicated_rps" in rt:
        ratio = rt["pick_over_stock"]
        parts.append(f"vLLM-Omni stock layout replicated {rt['stock_replicated_rps']:.2f} req/s "
                     f"(pick / stock {'-' if ratio is None else f'{ratio:.2f}x'})")
    if "runtime_over_ideal" in rt:
        ratio = rt["runtime_over_ideal"]
        parts.append(f"ideal space best {rt['ideal_rps']:.2f} req/s (runtime / ideal "
                     f"{'-' if ratio is None else f'{ratio:.2f}x'}; not deployable; at the same targets)")
    console.print("; ".join(parts), highlight=False)
    console.print(f"latency targets resolved in the {rt['targets_space']} space", highlight=False)


def _one_line(spec: Any) -> str:
    from omniplane.plan.emit import describe

    return describe(spec)


def _cut(c: dict[str, Any]) -> str:
    """One cut as a line of console markup (its ``[kind]`` escaped, so it is printed)."""
    from rich.markup import escape

    return escape(f"[{c['kind']}] {c['phase']}: {c['rule']}: {c['count']:.3g} {c['unit']}")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


@app.command("show")
def show(path: Annotated[Path, opt.argument("A plan file (kind: plan).", opt.InputPath(), "PLAN")],
         json_out: Annotated[bool, opt.json_opt("Print the plan as JSON.")] = False) -> None:
    """Draw a plan file as text: nodes, executors, GPUs, routes."""
    from omniplane.plan.show import render

    plan = load_plan(path)
    if json_out:
        print_json(plan.spec.model_dump(mode="json", exclude_none=True))
        return
    console.print(render(plan.spec), highlight=False)
