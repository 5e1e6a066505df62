"""The validation report as Markdown tables (``omniplane perf validate --markdown``), the form
docs/results/perf.md quotes."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any


def _summary(report: dict[str, Any]) -> list[str]:
    out = ["| role | set | n | median abs. error | p90 abs. error |", "|---|---|---|---|---|"]
    for role, s in report["summary"].items():
        for name, st in [("all", s["all"]), ("excluding anomalous", s["excluding_anomalous"]),
                         *s["by_dataset"].items()]:
            if st.get("n"):
                out.append(f"| {role} | {name} | {st['n']} | {st['median_abs_err']:.1%} | "
                           f"{st['p90_abs_err']:.1%} |")
    return out


def _splitwise(report: dict[str, Any]) -> list[str]:
    out = ["Splitwise, grouped (signed errors; every point is in the JSON output):", "",
           "| role | model | GPU | TP | metric | points | median error | worst error |",
           "|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for p in report["points"]:
        if p["dataset"] == "splitwise" and "anomalous" not in p["flags"]:
            parts = p["id"].split("/")
            groups[(p["role"], parts[1], p["gpu"], parts[3][2:], parts[5])].append(p["rel_error"])
    for (role, model, gpu, tp, metric), errs in sorted(groups.items()):
        worst = max(errs, key=abs)
        out.append(f"| {role} | {model} | {gpu} | {tp} | {metric} | {len(errs)} | "
                   f"{statistics.median(errs):+.1%} | {worst:+.1%} |")
    out += ["", "Flagged anomalous (shown, excluded from the fit and from the medians):", "",
            "| id | measured | predicted | error |", "|---|---|---|---|"]
    out += [f"| {p['id']} | {p['measured']:.4g} {p['unit']} | {p['predicted']:.4g} | {p['rel_error']:+.1%} |"
            for p in report["points"] if "anomalous" in p["flags"]]
    return out


def _vidur(report: dict[str, Any]) -> list[str]:
    rows: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for p in report["points"]:
        if p["dataset"] == "vidur":
            parts = p["id"].split("/")
            rows[(p["gpu"], parts[3][2:])][int(parts[4][1:])] = p
    tokens = sorted({t for r in rows.values() for t in r})
    out = ["Vidur, Llama-2-7B (one layer's four linear operators: measured / signed error):", "",
           "| GPU | TP | " + " | ".join(f"{t} tokens" for t in tokens) + " |",
           "|---|---|" + "---|" * len(tokens)]
    for (gpu, tp), r in sorted(rows.items()):
        out.append(f"| {gpu} | {tp} | " + " | ".join(
            f"{r[t]['measured']:.3f} ms / {r[t]['rel_error']:+.0%}" if t in r else "" for t in tokens) + " |")
    return out


def table2_tables(report: dict[str, Any]) -> list[str]:
    t2 = report["table2"]
    cols = ("image_input", "video_input", "audio_input", "llm", "audio_output", "image_output")
    grid: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for c in t2["cells"]:
        grid[c["model"]][c["column"]] = c
    out = ["Cornfigurator Table 2 (requests/s per executor, A100-80GB; published / predicted / error; "
           f"{t2['conditions']}):", "", "| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for model, row in grid.items():
        out.append(f"| {model} | " + " | ".join(
            f"{row[c]['published']:g} / {row[c]['predicted']:.3g} / {row[c]['rel_error']:+.0%}"
            if c in row else ""
            for c in cols) + " |")
    out += ["", f"{t2['n']} cells: median absolute error {t2['median_abs_err']:.1%}, largest "
                f"{t2['max_abs_err']:.1%}, {t2['within_30pct']} within 30%; Qwen3-Omni llm : audio_output "
                f"{t2['qwen3_omni_llm_over_audio_output']}x (published {t2['published_ratio']}x)."]
    return out


def report_tables(report: dict[str, Any]) -> list[str]:
    r = report["qwen3_omni_report"]
    out = [f"Qwen3-Omni report, per component (ms; published / predicted / error; GPU not named, "
           f"compared on {r['gpu']}; runtime {r['runtime']}):", "",
           "| concurrency | thinker step | talker step | MTP per frame | codec per code | RTF (check) | "
           "thinker : talker | MTP : talker |", "|---|---|---|---|---|---|---|---|"]
    for x in r["rows"]:
        cells = [f"{a:.3g} / {b:.3g} / {e:+.0%}" for a, b, e in
                 (x["thinker_step_ms"], x["talker_step_ms"], x["mtp_per_frame_ms"], x["codec_per_code_ms"],
                  x["rtf"])]
        out.append(f"| {x['concurrency']} | " + " | ".join(cells) + f" | {x['thinker_over_talker'][0]:.2f} / "
                   f"{x['thinker_over_talker'][1]:.2f} | {x['mtp_over_talker'][0]:.2f} / "
                   f"{x['mtp_over_talker'][1]:.2f} |")
    return out


def table3_tables(report: dict[str, Any]) -> list[str]:
    t3 = report.get("table3")
    if not t3:
        return []
    rates = ", ".join(f"{r:g}" for r in t3["rates"])
    out = [f"HorizonServe Table 3 (shared-stage TPOT p50 / p95, ms; {t3['model']}, rates {rates} req/s (the "
           f"paper does not state Table 3's load), long fraction {t3['long_fraction']}, {t3['requests']} "
           f"requests per policy and rate, seed {t3['seed']}):", "",
           "| GPU | rate | policy | published | simulated | p50 vs Vanilla (published) | "
           "p50 vs Vanilla (simulated) |",
           "|---|---|---|---|---|---|---|"]
    out += [f"| {r['gpu']} | {r['rate']:g} | {r['policy']} | {r['published'][0]:g} / {r['published'][1]:g} | "
            f"{r['predicted'][0]:g} / {r['predicted'][1]:g} | {r['published_p50_vs_vanilla']:+.1%} | "
            f"{r['p50_vs_vanilla']:+.1%} |" for r in t3["rows"]]
    out += [""]
    for s in t3["shape_by_gpu"]:
        within = "yes" if s["p50_within_5pct_of_vanilla"] else "no"
        lowers = "yes" if s["mps_lowers_p95"] else "no"
        out.append(f"Shape, {s['gpu']} at rate {s['rate']:g}: p50 within 5% of Vanilla under every policy: "
                   f"{within} (largest change {s['largest_p50_change']:+.1%}); MPS lowers p95: {lowers}.")
    return out


def _single(report: dict[str, Any]) -> list[str]:
    out = ["Single published measurements:", "", "| id | what | GPU | measured | predicted | error | flags |",
           "|---|---|---|---|---|---|---|"]
    for p in report["points"]:
        if p["dataset"] not in ("splitwise", "vidur", "cornfigurator-table2", "qwen3-omni-report"):
            out.append(f"| {p['id']} | {p['description']} | {p['gpu']} | {p['measured']:.4g} {p['unit']} | "
                       f"{p['predicted']:.4g} | {p['rel_error']:+.1%} | {','.join(p['flags'])} |")
    return out


def _rest(report: dict[str, Any]) -> list[str]:
    out = []
    if report.get("transfer"):
        out += ["Transfer check (one kind's factors applied to the other kind's Splitwise points):", "",
                "| factors of | applied to | n | median abs. error | p90 |", "|---|---|---|---|---|"]
        out += [f"| {t['factors_of']} | {t['applied_to']} | {t['n']} | {t['median_abs_err']:.1%} | "
                f"{t['p90_abs_err']:.1%} |" for t in report["transfer"]]
        out.append("")
    out += ["Not expressible (counted, not dropped):", ""]
    out += [f"- {m['dataset']}: {m['what']} ({m['count']} values): {m['reason']}"
            for m in report["not_expressible"]]
    return out


def colocation_tables(report: dict[str, Any]) -> list[str]:
    co = report["colocation"]
    out = ["| kernel | SMs | co-run | metric | measured | predicted | error | role |",
           "|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['kernel']} | {r['sms']:g} | {'yes' if r['corun'] else 'no'} | {r['metric']} | "
            f"{r['measured']:g} | {r['predicted']:.4g} | {r['rel_error']:+.1%} | {r['role']} |"
            for r in co["points"]]
    out += ["", "| GPU | SMs | best from (SMs) | S_cap | solo, all SMs (ms) | solo, best (ms) | "
                "co-run at S_cap (ms) | co-run, all SMs (ms) | solo peak draw / peak BW | "
                "co-run util, all SMs |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['gpu']} | {r['sms']} | {r['knee_sms']:g} | {r['s_cap']} | {r['solo_full_ms']:.2f} | "
            f"{r['solo_best_ms']:.2f} | {r['corun_cap_ms']:.2f} | {r['corun_full_ms']:.2f} | "
            f"{r['solo_peak_bw_frac']:.3f} | {r['corun_full_util']:.3f} |"
            for r in co["per_gpu"]]
    return out


def vllm_omni_ci_tables(report: dict[str, Any]) -> list[str]:
    """vLLM-Omni's CI files beside the closed-loop replay: each ceiling or measured value, the
    prediction, whether it is under it, and the error against the fit target."""
    ci = report.get("vllm_omni_ci")
    if not ci:
        return []
    out = [f"vLLM-Omni CI ({ci['gpu']}, runtime {ci['runtime']}; a ceiling's target is ceiling / "
           f"{ci['ceiling_margin']:g}):", "",
           "| split | benchmark | metric | load | kind | published ms | predicted ms | under it | "
           "error to target |", "|---|---|---|---|---|---|---|---|---|"]
    for r in ci["rows"]:
        err = r["rel_error_to_target"]
        metric = r["metric"].removeprefix("mean_").removesuffix("_ms")
        out.append(f"| {r['split']} | {r['benchmark']} | {metric} | {r['load']} | {r['kind']} | "
                   f"{r['published_ms']:g} | {r['predicted_ms']:.1f} | "
                   f"{'yes' if r['within_bound'] else 'NO'} | "
                   f"{'bound only' if err is None else format(err, '+.1%')} |")
    fit, chk, b = ci["fit"], ci["check_points"], ci["bounds"]
    out += ["", f"Fit: n={fit['n']}, median {fit['median_abs_err']:.1%}, max {fit['max_abs_err']:.1%}. "
                f"Check (the fit benchmark's other E2EL ceilings at the margin): n={chk['n']}, median "
                f"{chk['median_abs_err']:.1%}, max {chk['max_abs_err']:.1%}. Bounds respected: "
                f"{b['respected']} of {b['n']}."]
    au = report.get("vllm_omni_ci_audio")
    if au:
        out += ["", "vLLM-Omni CI, audio out (stock layout, one request at a time, runtime "
                    f"{au['runtime']}):", "",
                "| split | benchmark | mode | load | audio s | published E2EL ms | predicted ms | error |",
                "|---|---|---|---|---|---|---|---|"]
        for r in au["rows"]:
            err = (("under it" if r["within_bound"] else "NOT under it") if r["rel_error"] is None
                   else format(r["rel_error"], "+.1%"))
            out.append(f"| {r['split']} | {r['benchmark']} | {r['mode']} | {r['load']} | {r['audio_s']:g} | "
                       f"{r['published_ms']:g} | {r['predicted_ms']:.1f} | {err} |")
        c, b = au["check_points"], au["bounds"]
        out += ["", f"Fit: n={au['fit']['n']}. Check: n={c['n']}, median {c.get('median_abs_err', 0):.1%}, "
                    f"max {c.get('max_abs_err', 0):.1%}. Bounds respected: {b['respected']} of {b['n']}."]
        late = au.get("late", {})
        if late.get("n"):
            out += ["", "Late checks (after the fit, outside its split; two-GPU closed loop): "
                        f"n={late['n']}, median {late['median_abs_err']:.1%}, max {late['max_abs_err']:.1%}."]
    return out


def external_tables(report: dict[str, Any]) -> list[str]:
    """The vLLM blog and SGLang-Omni checks: ratios under stated assumptions, or not comparable."""
    ex = report.get("external_sources")
    if not ex:
        return []
    out = ["Other sources (check only; ratios under the stated assumptions):", "",
           "| source | check | measured | predicted | error | assumption |", "|---|---|---|---|---|---|"]
    for r in ex["rows"]:
        meas = "" if r["measured"] is None else f"{r['measured']:.3g}"
        pred = "" if r["predicted"] is None else f"{r['predicted']:.3g}"
        err = "not comparable" if r["rel_error"] is None else format(r["rel_error"], "+.1%")
        out.append(f"| {r['source']} | {r['check']} | {meas} | {pred} | {err} | {r['assumption']} |")
    out += ["", f"Compared: {ex['compared']} (median |error| {ex['median_abs_err']:.1%}, max "
                f"{ex['max_abs_err']:.1%}); not comparable: {ex['not_comparable']}. Sources: "
                + "; ".join(f"{k}: {v['cited']}" for k, v in ex["sources"].items()) + "."]
    return out


def to_markdown(report: dict[str, Any]) -> str:
    coloc = ["Co-location (HorizonServe Figure 4 and every catalog GPU):", "", *colocation_tables(report)]
    parts = [_summary(report), table2_tables(report), report_tables(report), vllm_omni_ci_tables(report),
             external_tables(report), _splitwise(report),
             _vidur(report), _single(report), _rest(report), coloc]
    if report.get("table3"):
        parts.append(table3_tables(report))
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
