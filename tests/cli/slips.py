"""Fixture files and helpers for the malformed-input tests of the CLI (tests/cli/test_slips.py)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.cli.files import STAGING_PREFIX
from omniplane.spec import catalog_gpus_path
from omniplane.spec.catalog import catalog_dir
from tests.spec.builders import tiny_model, tiny_plan, tiny_workload

CATALOG_PLAN = catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml"
EXISTING = "keep me\n"  # the content of every output file that exists before a failing command


def laughs(depth: int = 9, width: int = 9, indent: str = "") -> str:
    """A 'billion laughs' document body: anchors a0..a{depth}, each a list of `width` aliases
    of the one before, so a{depth} expands to width**depth values."""
    lines = [f"{indent}a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, depth + 1):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def write_fixtures(root: Path) -> None:
    """Valid specs (a tiny model, workload, plan), files and folders to collide with."""
    dump = lambda d: yaml.safe_dump(d, sort_keys=False)  # noqa: E731
    (root / "tiny.yaml").write_text(dump(tiny_model()))
    (root / "w.yaml").write_text(dump(tiny_workload()))
    (root / "p.yaml").write_text(dump(tiny_plan()))
    (root / "existing.yaml").write_text(EXISTING)
    (root / "existing.jsonl").write_text(EXISTING)
    (root / "afile").write_text("a file where a folder is expected\n")
    (root / "adir").mkdir()
    (root / "bad.json").write_text("{not json")
    (root / "empty.yaml").write_text("")
    (root / "binary.yaml").write_bytes(b"\x00\xff\xfe binary \x00")
    (root / "slo-inf.yaml").write_text("kind: omniplane-slo-table\nsource: 'measured: test'\n"
                                       "classes:\n  text: {priority: 0, path: short, slo_s: .inf}\n")
    (root / "slo.yaml").write_text("kind: omniplane-slo-table\nsource: 'measured: test'\n"
                                   "classes:\n  text: {priority: 0, path: short, slo_s: 0.8}\n")
    (root / "profile-bad.csv").write_text("component,gpu\nthinker\n")
    (root / "trace-1e300.csv").write_text("arrival_s,prompt_tokens\n0.0,10\n1e300,20\n")
    (root / "trace-inf.csv").write_text("arrival_s,prompt_tokens\n0.0,inf\n")
    (root / "trace-back.jsonl").write_text('{"arrival_s": 2}\n{"arrival_s": 1}\n')
    (root / "trace-bool.jsonl").write_text('{"arrival_s": 0, "prompt_tokens": true}\n')
    (root / "trace-types.csv").write_text("arrival_s,type,prompt_tokens\n0,t2t,10\n1,t2x,20\n2,i2a,5\n")
    (root / "trace-deep.jsonl").write_text('{"arrival_s": 0, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    for name, doc in SPECS.items():
        (root / f"{name}.yaml").write_text(doc)


def _model_with(**size: Any) -> str:
    d = tiny_model()
    d["components"][1]["size"].update(size)
    return yaml.safe_dump(d, sort_keys=False)


def _workload_with(**fields: Any) -> str:
    d = tiny_workload()
    d.update(fields)
    return yaml.safe_dump(d, sort_keys=False)


def _raw_model(line: str) -> str:
    """The tiny model with one line of YAML replaced by hand (values PyYAML would not dump)."""
    text = yaml.safe_dump(tiny_model(), sort_keys=False)
    return text.replace("params: 1000000000.0", line, 1)


SPECS: dict[str, str] = {
    "m-params-inf": _raw_model("params: .inf"),
    "m-params-nan": _raw_model("params: .nan"),
    "m-params-bool": _raw_model("params: true"),
    "m-params-1e300": _raw_model("params: 1e300"),
    "m-params-string": _raw_model("params: 'seven billion'"),
    "m-layers-float": _model_with(layers=8.5),
    "m-heads-huge": _model_with(heads=10**12),
    "m-top-list": "- kind: model\n- name: x\n",
    "m-top-scalar": "just a string\n",
    "m-kind-unknown": "kind: modle\nname: x\n",
    "m-laughs-top": "kind: model\nname: lol\n" + laughs(),
    "m-laughs-x": "kind: model\nname: lol\nx-bomb:\n" + laughs(indent="  "),
    "m-laughs-field": "kind: model\n" + laughs() + "name: *a9\n",
    "m-recursive": "kind: model\nname: &a [*a]\n",
    "m-deep": "kind: model\nname: " + "[" * 5000 + "]" * 5000 + "\n",
    "m-dup-key": "kind: model\nname: a\nname: b\n",
    "m-yaml-syntax": "kind: model\nname: [unclosed\n",
    "w-rate-inf": _workload_with(arrival={"process": "poisson", "rate": float("inf")}),
    "w-rate-1e300": _workload_with(arrival={"process": "poisson", "rate": 1e300}),
    "w-rate-bool": _workload_with(arrival={"process": "poisson", "rate": True}),
    "w-rate-zero": _workload_with(arrival={"process": "poisson", "rate": 0}),
    "w-duration-inf": _workload_with(duration_s=float("inf")),
    "w-duration-neg": _workload_with(duration_s=-5),
    "w-seed-neg": _workload_with(seed=-1),
    "w-mix-bool": _workload_with(mix={"t2t": True, "i2a": False}),
    "w-mix-sum": _workload_with(mix={"t2t": 0.3, "i2a": 0.3}),
    "w-mix-unknown": _workload_with(mix={"t2t": 0.5, "nope": 0.5}),
    "w-cv-huge": _workload_with(arrival={"process": "gamma", "rate": 1.0, "cv": 1e6}),
    "w-weibull-cv": _workload_with(arrival={"process": "weibull", "rate": 1.0, "cv": 0.0001}),
    "w-silent": _workload_with(arrival={"process": "piecewise", "windows": [{"start": 0, "rate": 0}]}),
    "w-model-missing": _workload_with(model="no-such-model.yaml"),
    "w-trace-missing": _workload_with(mix=None, arrival={"process": "trace", "trace": "nope.csv",
                                                         "format": "csv"}),
    "w-trace-1e300": _workload_with(arrival={"process": "trace", "trace": "trace-1e300.csv",
                                             "format": "csv"}),
    "w-trace-types": _workload_with(mix=None, arrival={"process": "trace", "trace": "trace-types.csv",
                                                       "format": "csv", "mapping": {"type_column": "type"}}),
    "w-slo-inf": _workload_with(slo={"policy": "explicit", "targets_ms": {"t2t": float("inf")}}),
    "w-slo-pct": _workload_with(slo={"policy": "solo_multiplier", "percentile": 100}),
    "p-count-bool": yaml.safe_dump({**tiny_plan(), "gpus": True}, sort_keys=False),
    "p-transfer-nan": yaml.safe_dump({**tiny_plan(), "transfer_ms": float("nan")}, sort_keys=False),
}


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def invoke(args: list[str], cwd: Path, stdin: str | None = None) -> Outcome:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(app, args, input=stdin)
    finally:
        os.chdir(old)
    return Outcome(res.exit_code, res.stdout, res.stderr)


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> content hash); folders as 'dir'."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def staging(root: Path) -> list[Path]:
    """Staging files or folders left anywhere under ``root`` (none once a command has ended)."""
    return list(root.rglob(f"{STAGING_PREFIX}*"))


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (not JSON)."""
    def bad(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=bad)


__all__ = ["CATALOG_PLAN", "EXISTING", "Outcome", "catalog_gpus_path", "invoke", "laughs", "snapshot",
           "staging", "strict_json", "write_fixtures"]
