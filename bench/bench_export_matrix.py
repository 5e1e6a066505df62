"""Every plan runs (issue 38, "Must show"): each row is planned, exported and loaded, one by one.

Per row: ``omniplane plan --runtime vllm-omni --compare-ideal --json --out plan.yaml`` (the CLI,
as a user runs it), ``omniplane export plan.yaml --target vllm-omni --hosts HxG``, then every
deploy YAML of the export goes through vLLM-Omni 0.30's own loader (``resolve_omni_config``:
``load_deploy_config`` + ``merge_pipeline_deploy``) in the vLLM venv's Python (a subprocess of
this script, ``--loader-check``), which checks:

- the loader accepts the file, with the plan's stages;
- routes: every request type of the routing file has deployments whose loaded pipeline holds
  every stage of the type's path with at least one replica, its last stage a final stage of the
  type's output (``final_output_type``), and the shares sum to 1 over such deployments;
- memory: per GPU (the stages of one plan node share its GPUs) the stages' loaded
  ``gpu_memory_utilization`` pass vLLM-Omni's own admission (``stage_admission.evaluate``), and
  every KV stage holds its planned max batch at the workload's mean context (the export's
  sizing, ``omniplane.perf.stage_memory``).

Without the vLLM venv (``--vllm-python``, default ``.venv-vllm/bin/python``) the loader columns
read "skipped" and the script says why. ``--rows`` selects rows by substring; ``--write FILE``
replaces the table between this script's markers in FILE (creating the file when missing).
Budget: ``--mc-budget`` and ``--sim-requests`` are passed to ``plan`` (defaults here 4,000 and
400 against the planner's 40,000 and 1,200, so the whole matrix runs in minutes on 2 cores);
``--seed`` (0) makes every row reproducible.

    PYTHONPATH=src:. .venv/bin/python bench/bench_export_matrix.py [--rows qwen3-omni/8x] \
        [--mc-budget 4000 --sim-requests 400] [--write docs/results/plan-runtime.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- bench_export_matrix: begin -->"
END = "<!-- bench_export_matrix: end -->"
EVEN = "even-mix"  # a workload of the model's types in equal shares (even_workload)
AUDIO = {"qwen3-omni-servegen": "1/3 audio", "qwen3-omni-servegen-2of3audio": "2/3 audio"}


@dataclass(frozen=True)
class Row:
    model: str
    gpus: int
    gpu: str
    workload: str | None  # None: the model's default
    hosts: str

    @property
    def key(self) -> str:
        return f"{self.model}/{self.gpus}x{self.gpu}/{self.workload or 'default'}"


def rows() -> list[Row]:
    out = [Row("qwen3-omni", g, k, w, "1x8" if g == 8 else "2x8")
           for g, k in ((8, "A100-80GB"), (16, "A100-80GB"), (16, "H100-SXM")) for w in AUDIO]
    out += [Row(m, g, k, w, f"1x{g}")
            for m, w in (("qwen2.5-omni", "qwen2.5-omni-horizon"), ("qwen3-omni", "qwen3-omni-servegen"))
            for k in ("RTXPRO6000", "H100-SXM") for g in (1, 2)]
    from omniplane.spec.layout import layout_models

    have = set(layout_models())
    out += [Row(m, 2, "H100-SXM", None if _has_workload(m) else EVEN, "1x2")
            for m in sorted(have - {"qwen2.5-omni", "qwen3-omni"})]
    out += [Row(m, 2, "H100-SXM", None if _has_workload(m) else EVEN, "1x2")
            for m in catalog_models() if m not in have]
    return out


def _has_workload(model: str) -> bool:
    for p in (ROOT / "src/omniplane/catalog/workloads").glob("*.yaml"):
        doc = yaml.safe_load(p.read_text())
        if doc.get("model") == model and doc.get("mix"):
            return True
    return False


def even_workload(model: str, path: Path) -> Path:
    """A workload of ``model``'s request types in equal shares (for a model whose catalog has no
    workload with a mix): Poisson arrivals, Cornfigurator's isolated-p25 targets."""
    from omniplane.spec.load import load_model

    types = [t.name for t in load_model(model).request_types]
    doc = {"kind": "workload", "name": f"{model}-even-mix", "model": model,
           "mix": {t: round(1 / len(types), 12) for t in types},
           "arrival": {"process": "poisson", "rate": 1.0},
           "slo": {"policy": "isolated_percentile", "percentile": 25}, "duration_s": 600, "seed": 0}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def catalog_models() -> list[str]:
    return sorted(p.stem for p in (ROOT / "src/omniplane/catalog/models").glob("*.yaml"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-c", "from omniplane.cli.app import main; main()", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


@dataclass
class Result:
    row: Row
    status: str = "ok"  # ok, or why the row stopped
    pick: str = ""
    goodput: float | None = None
    stock: float | None = None
    over_stock: float | None = None
    over_ideal: float | None = None
    deployments: int | None = None
    per_host: str = ""
    loader: str = ""
    routes: str = ""
    memory: str = ""
    kv: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def _pick(plan: dict[str, Any]) -> str:
    """The plan's nodes as vLLM-Omni stages (``thinker+talker``: those stages sharing each GPU)."""
    from omniplane.spec.load import load_layout

    layout = load_layout(plan["model"])
    parts = []
    for n in plan["nodes"]:
        name = n["name"]
        if layout is not None:
            seen = [st.model_stage for st in layout.stages if set(st.components) & set(n["components"])]
            name = "+".join(seen)
        for e in n["executors"]:
            parts.append(f"{e['count']}x {name} (tp{e['tp']}, b{e['max_batch']})")
    return " + ".join(parts)


def run_row(row: Row, args: argparse.Namespace, vllm_python: Path | None, tmp: Path) -> Result:
    res = Result(row)
    t0 = time.perf_counter()
    d = tmp / row.key.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    plan_args = ["plan", "--model", row.model, "--gpus", str(row.gpus), "--gpu", row.gpu, "--runtime",
                 "vllm-omni", "--compare-ideal", "--json", "--out", str(d / "plan.yaml"), "--seed",
                 str(args.seed), "--mc-budget", str(args.mc_budget), "--sim-requests", str(args.sim_requests)]
    if row.workload == EVEN:
        plan_args += ["--workload", str(even_workload(row.model, d / "workload.yaml"))]
    elif row.workload:
        plan_args += ["--workload", row.workload]
    p = cli(*plan_args)
    if p.returncode != 0:
        from omniplane.spec.layout import layout_models

        why = "no vLLM-Omni layout" if row.model not in layout_models() else "no plan"
        res.status = f"{why}: {_last_line(p.stderr)}"
        res.seconds = time.perf_counter() - t0
        return res
    out = json.loads(p.stdout)
    rt = out["runtime"]
    res.pick = _pick(out["plan"])
    res.goodput = rt.get("pick_rps", out["goodput"]["total"])
    res.stock = rt.get("stock_replicated_rps")
    res.over_stock = rt.get("pick_over_stock")
    res.over_ideal = rt.get("runtime_over_ideal")
    e = cli("export", str(d / "plan.yaml"), "--target", "vllm-omni", "--hosts", row.hosts, "--out",
            str(d / "export"), "--json")
    if e.returncode != 0:
        res.status = f"export refused: {_last_line(e.stderr)}"
        res.seconds = time.perf_counter() - t0
        return res
    ex = json.loads(e.stdout)
    res.deployments = len(ex["deployments"])
    placed = yaml.safe_load((d / "export" / "placement.yaml").read_text())
    _sizing(d / "plan.yaml", row.hosts, d / "export")
    res.per_host = "+".join(str(sum(len(x["gpus"]) for x in h.get("executors", [])))
                            for h in placed["hosts"].values())
    if vllm_python is None:
        res.loader = res.routes = "skipped"
    else:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        c = subprocess.run([str(vllm_python), str(Path(__file__).resolve()), "--loader-check",
                            str(d / "export"), "--model", row.model, "--gpu", row.gpu],
                           capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        if c.returncode != 0:
            res.loader = "error"
            res.problems.append(_last_line(c.stderr))
        else:
            chk = json.loads(c.stdout.strip().splitlines()[-1])
            res.loader, res.routes = chk["loader"], chk["routes"]
            res.problems += chk["problems"]
    mem = _memory(d / "export")
    res.memory, res.kv = mem["memory"], mem["kv"]
    res.problems += mem["problems"]
    fine = ("ok", "skipped", "n/a")
    if res.problems or res.loader not in fine or res.routes not in fine:
        res.status = "FAIL"
    res.seconds = time.perf_counter() - t0
    return res


def _sizing(plan_file: Path, hosts: str, export: Path) -> None:
    """The export's own sizing (``export_vllm_omni``, as the CLI calls it; the deploy YAMLs carry it
    only as comments) into ``sizing.json``: per deployment, per GPU group, the stages' memory. The
    written deploy files must be what it writes."""
    from omniplane.deploy.export_omni import export_vllm_omni
    from omniplane.deploy.placement import Hosts
    from omniplane.spec import load_plan

    ex = export_vllm_omni(load_plan(plan_file), Hosts.parse(hosts))
    for name in ex.configs:
        if (export / f"{name}.yaml").read_text() != ex.files[f"{name}.yaml"]:
            raise RuntimeError(f"{export / name}.yaml differs from export_vllm_omni's: not deterministic")
    sizing = {n: c["omniplane"]["memory"] for n, c in ex.configs.items()}
    (export / "sizing.json").write_text(json.dumps(sizing))


def _memory(export: Path) -> dict[str, Any]:
    """The fullest GPU and the tightest KV stage (sequences at the mean context against the max
    batch) of the export's sizing."""
    worst_util, worst_gib, kv, problems = 0.0, 0.0, None, []
    sizing = json.loads((export / "sizing.json").read_text())
    for name, devs in sorted(sizing.items()):
        f = Path(f"{name}.yaml")
        for key, dev in devs.items():
            util = dev["utilization_sum"]
            if util > dev["utilization_limit"] + 1e-9:
                problems.append(f"{f.name} {key}: utilization {util} over the limit "
                                f"{dev['utilization_limit']}")
            if util >= worst_util:
                worst_util, worst_gib = util, util * dev["capacity_gib"]
            for s in dev["stages"]:
                if "seqs_fit" not in s:
                    continue
                fit, want = s["seqs_fit"]["mean"], s["max_batch"]
                if fit < want:
                    problems.append(f"{f.name} {key} stage {s['stage_id']}: KV holds {fit} sequences of "
                                    f"the mean context, max batch {want}")
                if kv is None or fit / want < kv[0] / kv[1]:
                    kv = (fit, want)
    return {"memory": f"{worst_gib:.1f} GiB ({worst_util:.3f})", "kv": f"{kv[0]} / {kv[1]}" if kv else "-",
            "problems": problems}


def loader_check(export: Path, model: str, gpu: str) -> dict[str, Any]:
    """Run in the vLLM venv: every deploy YAML through vLLM-Omni's loader, routes and admission."""
    from tests.vllm.omni_loader import HF_CONFIGS, resolve
    from vllm_omni.engine.stage_admission import StageAdmissionError, StageDemand, evaluate

    from omniplane.deploy.routing_file import read_routing_file
    from omniplane.perf.stage_memory import GRAPH_RESERVE_BYTES
    from omniplane.spec import load_gpus
    from omniplane.spec.load import load_layout, load_model

    problems: list[str] = []
    if model not in HF_CONFIGS:
        return {"loader": "n/a", "routes": "n/a",
                "problems": [], "note": f"{model}: no pipeline for vLLM-Omni's loader (diffusion layout)"}
    layout = load_layout(model)
    assert layout is not None
    spec = load_model(model)
    cap = load_gpus().get(gpu).memory_bytes
    loaded: dict[str, dict[int, Any]] = {}
    sizing = json.loads((export / "sizing.json").read_text())
    with tempfile.TemporaryDirectory() as t:
        for f in sorted(export.glob("d*.yaml")):
            try:
                r, _ = resolve(model, f, Path(t), f.stem)
            except Exception as exc:  # the loader's verdict is the result
                problems.append(f"{f.name}: loader: {type(exc).__name__}: {exc}")
                continue
            loaded[f.stem] = {c.stage_id: c for c in r.stage_configs}
            for key, dev in sizing[f.stem].items():
                cfgs = [loaded[f.stem][s["stage_id"]] for s in dev["stages"]]
                demands = [StageDemand(stage_id=i, replica_id=0, device_ids=[0],
                                       utilization=float(c.cache_config.gpu_memory_utilization),
                                       graph_reserve_bytes=0 if c.model_config.enforce_eager
                                       else GRAPH_RESERVE_BYTES)
                           for i, c in enumerate(cfgs)]
                try:  # vLLM-Omni's admission of one of the group's GPUs
                    evaluate(demands, {0: int(cap)})
                except StageAdmissionError as exc:
                    problems.append(f"{f.name} {key}: admission: {exc}")
    loader_ok = not problems
    bad: list[str] = []
    route = read_routing_file(export / "routing.yaml")
    types = {t.name: t for t in spec.request_types}
    for t, shares in route.types.items():
        rt = types[t]
        stages = [layout.stage_of(c) for c in rt.path]
        last = stages[-1]
        if last.final_output_type != rt.output:
            bad.append(f"{t}: its last stage {last.model_stage} is not a final {rt.output} stage")
        for s in shares:
            cfg = loaded.get(s.deployment)
            if cfg is None:
                bad.append(f"{t}: deployment {s.deployment} did not load")
                continue
            missing = [st.model_stage for st in stages
                       if st.stage_id not in cfg or cfg[st.stage_id].runtime_config.num_replicas < 1]
            if missing:
                bad.append(f"{t}: deployment {s.deployment} lacks {missing}")
    return {"loader": "ok" if loader_ok else "FAIL", "routes": "FAIL" if bad else "ok",
            "problems": problems + bad}


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def table(results: list[Result]) -> str:
    head = ("| row (model, G x GPU, workload) | pick | pick r/s | stock replicated r/s | pick / stock "
            "| pick / ideal | deployments | GPUs per host | loader | routes | fullest GPU (share) "
            "| KV seqs at mean / max batch | wall s |\n|" + "---|" * 13)
    lines = [head]
    for r in results:
        w = AUDIO.get(r.row.workload or "", r.row.workload or "catalog workload")
        w = "types in equal shares" if w == EVEN else w
        name = f"{r.row.model}, {r.row.gpus} x {r.row.gpu}, {w}"
        if r.status.startswith(("no plan", "no vLLM-Omni", "export refused")):
            lines.append(f"| {name} | {r.status} |" + " |" * 11 + f" {r.seconds:.0f} |")
            continue
        stock = _f(r.stock, ".2f") if r.stock else "- (needs more GPUs)"
        lines.append(f"| {name} | {r.pick} | {_f(r.goodput, '.2f')} | {stock} | "
                     f"{_x(r.over_stock)} | {_x(r.over_ideal)} | {r.deployments} | {r.per_host} | "
                     f"{r.loader} | {r.routes} | {r.memory} | {r.kv} | {r.seconds:.0f} |")
    return "\n".join(lines)


def write(path: Path, body: str) -> None:
    text = path.read_text() if path.exists() else "# Results: plans on vLLM-Omni\n\n"
    block = f"{BEGIN}\n{body}\n{END}"
    if BEGIN in text and END in text:
        a, rest = text.split(BEGIN, 1)
        text = a + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="append", default=[], help="substring of a row key (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the row keys")
    ap.add_argument("--mc-budget", type=int, default=4000)
    ap.add_argument("--sim-requests", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vllm-python", type=Path, default=ROOT / ".venv-vllm/bin/python")
    ap.add_argument("--write", type=Path, help="replace the table section of this markdown file")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--loader-check", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--gpu", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.loader_check is not None:
        print(json.dumps(loader_check(args.loader_check, args.model, args.gpu)))
        return 0
    sel = [r for r in rows() if not args.rows or any(s in r.key for s in args.rows)]
    if args.list:
        print("\n".join(r.key for r in sel))
        return 0
    vp: Path | None = args.vllm_python
    if vp is None or not vp.exists():
        print(f"vLLM venv not found at {vp}: the loader and routes columns are skipped "
              "(make the venv, or pass --vllm-python)", file=sys.stderr)
        vp = None
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in sel:
            r = run_row(row, args, vp, Path(tmp))
            print(f"{row.key}: {r.status} ({r.seconds:.0f} s)" + "".join(f"\n  {p}" for p in r.problems),
                  file=sys.stderr)
            results.append(r)
    if args.json:
        print(json.dumps([{**r.__dict__, "row": r.row.key} for r in results], indent=1))
    else:
        print(table(results))
    if args.write is not None:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT, check=False).stdout.strip()
        opts = [f"--rows {s}" for s in args.rows] + [
            f"--mc-budget {args.mc_budget}", f"--sim-requests {args.sim_requests}", f"--seed {args.seed}",
            f"--write {args.write}"]
        cmd = "PYTHONPATH=src:. .venv/bin/python bench/bench_export_matrix.py " + " ".join(opts)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "bench"], capture_output=True,
                               text=True, cwd=ROOT, check=False).stdout.strip()
        commit += " (with uncommitted changes to src/ or bench/)" if dirty else ""
        body = (f"Recorded at commit {commit} with\n\n```\n{cmd}\n```\n\n{table(results)}\n")
        write(args.write, body)
    return 1 if any(r.status == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
