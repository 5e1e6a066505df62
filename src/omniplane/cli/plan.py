"""``omniplane plan ...`` (plan a deployment) and ``omniplane plan show PLAN``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from omniplane.cli.output import console, err_console, fail, print_json
from omniplane.cli.slo import SloOpt, legacy_plan_policy, slo_choice
from omniplane.spec import (
    SpecError,
    catalog_workload_paths,
    dump,
    find_catalog_workload,
    load_gpus,
    load_model,
    load_plan,
    load_workload,
    workload_ref,
)

app = typer.Typer(help="Plan a deployment (Cornfigurator); `plan show PLAN` draws a plan file.",
                  invoke_without_command=True)


class RichProgress:
    """The pipeline's progress hook drawn with rich on stderr."""

    def __init__(self) -> None:
        self.bar = self._new()
        self.task: Any = None

    @staticmethod
    def _new() -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.completed}/{task.total}"), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), console=err_console, transient=False)

    def start(self, phase: str, total: int) -> None:
        self.bar = self._new()  # one bar per phase (a reused Progress redraws the finished ones)
        self.bar.start()
        self.task = self.bar.add_task(phase, total=total, info="")

    def advance(self, n: int, info: str = "") -> None:
        self.bar.update(self.task, advance=n, info=info)

    def end(self) -> None:
        self.bar.stop()


def _workload(model_name: str, ref: str | None) -> Path:
    if ref:
        found = find_catalog_workload(ref)
        path = found if found is not None else Path(ref)
        if not path.is_file():
            fail(f"--workload: no catalog workload or file named {ref!r}")
        return path
    # the model's base workload first: variants extend its name (qwen3-omni-servegen-2of3audio)
    for p in sorted(catalog_workload_paths(), key=lambda p: (len(p.stem), p.stem)):
        try:
            wl = load_workload(p)
        except SpecError:
            continue
        if wl.model.name == model_name and wl.spec.mix is not None:
            return p
    fail(f"no catalog workload for model {model_name!r} has a type mix; give --workload FILE")


def _mix(text: str, types: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in types:
            fail(f"--mix item {item!r} must be TYPE=FRACTION with TYPE one of: {', '.join(types)}")
        try:
            out[name] = float(value)
        except ValueError:
            fail(f"--mix item {item!r}: {value!r} is not a number")
    total = sum(out.values())
    if total <= 0:
        fail("--mix fractions must sum to a positive number")
    return {t: v / total for t, v in out.items()}


@app.callback()
def plan(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Catalog model name or model file.")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPU budget N.")] = None,
    gpu: Annotated[str, typer.Option(help="GPU kind (catalog name or alias).")] = "A100-80GB",
    workload: Annotated[str | None, typer.Option(help="Catalog workload or file (default: the model's "
                                                      "base catalog workload with a mix).")] = None,
    slo: SloOpt = None,
    slo_policy: Annotated[str | None, typer.Option(hidden=True)] = None,  # deprecated: --slo POLICY
    slo_percentile: Annotated[float | None, typer.Option(hidden=True)] = None,
    slo_multiplier: Annotated[float | None, typer.Option(hidden=True)] = None,
    mix: Annotated[str | None, typer.Option(help="Replace the type mix, e.g. ti2t=0.5,ti2a=0.5.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the selected plan here (YAML).")] = None,
    figures: Annotated[Path | None, typer.Option(help="Write Figures 7, 8, 9 (PNG) here.")] = None,
    baselines: Annotated[bool, typer.Option(help="Also plan every baseline space.")] = True,
    sweep: Annotated[bool, typer.Option(help="Report each plan's best goodput over offered rates.")] = False,
    policy: Annotated[str, typer.Option(help="Selection policy: total | balanced.")] = "total",
    k_c: Annotated[int, typer.Option(help="Simple subplans per compound subplan.")] = 2,
    k_s: Annotated[int, typer.Option(help="Subplans per logical plan.")] = 2,
    alpha: Annotated[float, typer.Option(help="Headroom: evaluate at alpha x R_d.")] = 0.8,
    routing_step: Annotated[float, typer.Option(help="Routing probability step.")] = 0.1,
    routing: Annotated[str, typer.Option(help="grid (lp: not implemented; docs/plan.md).")] = "grid",
    time_budget: Annotated[float | None, typer.Option(help="Seconds the search of each plan space may take "
                                                           "(default: none); when it binds the output "
                                                           "lists what it cut.")] = None,
    max_simulated: Annotated[int | None, typer.Option(help="Plans simulated at most (default: every "
                                                           "survivor; a cut when it binds).")] = None,
    mc_tolerance: Annotated[float, typer.Option(help="Keep plans within this fraction of the best "
                                                     "estimate (docs/plan.md, \"Search\").")] = 0.03,
    compose_compound: Annotated[bool, typer.Option(help="Also compose compound subplans side by side "
                                                        "(the paper's full k_s space; slower).")] = False,
    explain: Annotated[bool, typer.Option(help="Print, per phase, what each rule dropped.")] = False,
    sim_requests: Annotated[int, typer.Option(help="Requests per simulation.")] = 1200,
    mc_samples: Annotated[int, typer.Option(help="Requests sampled per type for Monte Carlo.")] = 128,
    seed: Annotated[int, typer.Option(help="Seed of samples and simulations.")] = 0,
    replan_gpus: Annotated[int | None, typer.Option(help="Then re-plan for this budget from the same "
                                                         "profile and report the time.")] = None,
    replan_mix: Annotated[str | None, typer.Option(help="Then re-plan for this type mix (e.g. "
                                                        "ti2t=0.5,ti2a=0.5) from the same profile.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Plan a deployment: enumerate, flow bound, Monte Carlo, simulate, select."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None or gpus is None:
        fail("give --model and --gpus (or use `omniplane plan show PLAN`)")
    from omniplane.plan.compare import compare, to_json
    from omniplane.plan.options import PlannerOptions
    from omniplane.plan.pipeline import Planner
    from omniplane.plan.problem import make_problem

    try:
        m = load_model(model)
        wl = load_workload(_workload(m.name, workload))
        kind = load_gpus().get(gpu)
    except (SpecError, KeyError) as exc:
        fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
    if wl.model.name != m.name:
        fail(f"--workload {workload!r} is for model {wl.model.name!r}, not {m.name!r}")
    try:
        options = PlannerOptions(k_c=k_c, k_s=k_s, routing_step=routing_step, routing=routing,  # type: ignore[arg-type]
                                 alpha=alpha, mc_samples=mc_samples, mc_tolerance=mc_tolerance,
                                 sim_requests=sim_requests, max_simulated=max_simulated,
                                 time_budget_s=time_budget, compose_compound=compose_compound, seed=seed)
    except ValueError as exc:
        fail(str(exc))
    legacy = legacy_plan_policy(wl.spec.slo, slo_policy, slo_percentile, slo_multiplier)
    choice = slo_choice(slo, m.type_names, legacy, "--slo-policy/--slo-percentile/--slo-multiplier")
    if choice is not None and choice.base == "plan":
        fail("--slo plan: planning writes a plan's targets; give a policy or TYPE=DURATION items")
    if choice is not None and choice.base not in (None, "workload"):
        wl = type(wl)(wl.spec.model_copy(update={"slo": choice.base}), wl.model, wl.path)
    overrides = dict(choice.targets_ms) if choice is not None else None
    t0 = time.perf_counter()
    problem = make_problem(wl, kind, gpus, samples=options.mc_samples, seed=seed,
                           mix=_mix(mix, m.type_names) if mix else None)
    planner = Planner(problem, options=options, slo_overrides_ms=overrides, policy=policy,
                      progress=RichProgress() if not json_out else _silent())
    profile_s = time.perf_counter() - t0
    cmp = compare(planner, baselines=None if baselines else [], sweep=sweep, cloud=figures is not None)
    if cmp.planner.spec is None:
        fail("no plan fits the budget (every executor config is infeasible or over budget)")
    doc = to_json(cmp)
    meta = doc["plan"]["meta"]
    meta["profile_seconds"] = profile_s
    replans: list[dict[str, Any]] = []
    if replan_gpus is not None:
        replans.append({"gpus": replan_gpus})
    if replan_mix is not None:
        replans.append({"mix": _mix(replan_mix, m.type_names)})
    for change in replans:
        t1 = time.perf_counter()
        again = planner.replan(**change)
        meta.setdefault("replan", []).append({
            **change, "seconds": time.perf_counter() - t1, "goodput_total": again.total,
            "plan": _one_line(again.best.spec) if again.best else None,
            "counts": again.counts.to_json(), "cuts": again.cuts, "profile_reused": True})
    if replans:
        doc["replan"] = meta["replan"]
    plan_spec = cmp.planner.spec.model_copy(update={"meta": meta})
    if out is not None and plan_spec.prediction is not None:  # the workload, relative to the plan file
        ref = workload_ref(wl, out.parent)
        plan_spec = plan_spec.model_copy(update={"prediction": plan_spec.prediction.model_copy(
            update={"workload": ref})})
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(plan_spec), encoding="utf-8")
    written = []
    if figures is not None:
        from omniplane.plan.figures import write_all

        written = write_all(cmp, figures, f"{m.name}-{gpus}x{kind.name}")
    if json_out:
        if explain:
            doc["explain"] = cmp.planner.result.ledger.to_json()
        print_json(doc)
        return
    _print(cmp, plan_spec, meta, out, written, doc, explain)


def _silent() -> Any:
    from omniplane.plan.progress import NO_PROGRESS

    return NO_PROGRESS


def _print(cmp: Any, plan_spec: Any, meta: dict[str, Any], out: Path | None, written: list[Path],
           doc: dict[str, Any], explain: bool) -> None:
    from omniplane.plan.show import render

    console.print(render(plan_spec), highlight=False)
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
    console.print(table)
    phases = Table(title="search (counts: docs/plan.md, \"Counts\")")
    phases.add_column("phase")
    phases.add_column("plans", justify="right")
    phases.add_column("what is counted")
    phases.add_column("seconds", justify="right")
    counts, sec = res.counts, res.stats.seconds
    rows = [("raw space", counts.raw_space, "the paper's physical plans for this input, by formula", None),
            ("built", counts.built, "(config, routing) rows whose flow bound was computed + chain plans",
             None),
            ("flow", counts.flow, "non-redundant plans at or above the threshold", sec["flow"]),
            ("Monte Carlo", counts.monte_carlo, "plans estimated by flow + Monte Carlo", sec["monte_carlo"]),
            ("simulated", counts.simulated, "plans run through the simulator", sec["simulate"])]
    for name, n, what, s in rows:
        phases.add_row(name, f"{n:.3g}" if n >= 1e6 else f"{int(n):,}", what, "" if s is None else f"{s:.2f}")
    console.print(phases)
    st = res.stats
    console.print(f"logical plans: {st.logical_total:,} in the space, {st.logical_expanded:,} expanded, "
                  f"{st.logical_bounded:,} dropped by bound, {st.logical_infeasible:,} do not fit; search "
                  f"stopped by {st.stopped}", highlight=False)
    cuts = res.cuts
    if cuts:
        console.print("[bold yellow]cuts that changed what was explored:[/]")
        for c in cuts:
            console.print(f"  [{c['kind']}] {c['phase']}: {c['rule']}: {c['count']:.3g} {c['unit']}",
                          highlight=False)
    else:
        console.print("no heuristic or budget cut changed what was explored", highlight=False)
    if explain:
        console.print(res.ledger.render(), highlight=False)
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


def _one_line(spec: Any) -> str:
    from omniplane.plan.emit import describe

    return describe(spec)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


@app.command("show")
def show(path: Annotated[Path, typer.Argument(help="A plan file.")],
         json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False) -> None:
    """Draw a plan file as text: nodes, executors, GPUs, routes."""
    from omniplane.plan.show import render

    try:
        plan = load_plan(path)
    except (SpecError, OSError) as exc:
        fail(str(exc))
    if json_out:
        print_json(plan.spec.model_dump(mode="json", exclude_none=True))
        return
    console.print(render(plan.spec), highlight=False)
