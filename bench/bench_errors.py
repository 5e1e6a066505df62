"""How fast bad input is refused: YAML bombs, oversized and deep documents, absurd options.

    .venv/bin/python bench/bench_errors.py

* the three 'billion laughs' documents of tests/spec/test_yaml_safety.py (9 levels of 9
  aliases: 3.9e8 values if expanded) and a 10,000-deep flow sequence, through
  ``load_document`` (read, compose, the expansion check, refusal);
* for scale, a valid spec: the catalog's Qwen3-Omni model, loaded and validated;
* the CLI refusing ``plan --gpus 100000`` and ``plan --mix t2t=2``, in process (``CliRunner``),
  so the figure is the parse-and-refuse time without interpreter start-up.

Each figure is the best of ``REPEATS`` runs in wall time (the refusals do no I/O but reading the
file); the machine's load is printed beside them. Prints figures; never part of make test.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec import SpecError, find_catalog_model, load_document

REPEATS = 5


def laughs(indent: str = "") -> str:
    lines = [f"{indent}a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


DOCS = {
    "billion laughs, top level": "kind: model\nname: lol\n" + laughs(),
    "billion laughs, inside an x- key": "kind: model\nname: lol\nx-bomb:\n" + laughs("  "),
    "billion laughs, aliased into a field": "kind: model\n" + laughs() + "name: *a9\n",
    "10,000-deep flow sequence": "kind: model\nname: " + "[" * 10_000 + "]" * 10_000 + "\n",
}


def best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def refuse(path: Path) -> None:
    try:
        load_document(path)
    except SpecError:
        return
    raise AssertionError(f"{path} was accepted")


def main() -> None:
    print(f"python {platform.python_version()}, load average {os.getloadavg()[0]:.2f} (1 min)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in DOCS.items():
            path = Path(tmp) / "bomb.yaml"
            path.write_text(text)
            print(f"{name:40s} refused in {best(lambda p=path: refuse(p)) * 1e3:8.2f} ms")
    model = find_catalog_model("qwen3-omni")
    assert model is not None
    label = "valid qwen3-omni.yaml (for scale)"
    print(f"{label:40s} loaded in  {best(lambda: load_document(model)) * 1e3:8.2f} ms")
    runner = CliRunner()
    for args in (["plan", "--model", "qwen3-vl", "--gpus", "100000"],
                 ["plan", "--model", "qwen3-vl", "--gpus", "8", "--mix", "t2t=2"]):
        def cli(a: list[str] = args) -> None:
            res = runner.invoke(app, a)
            assert res.exit_code == 2, res.output

        print(f"{'omniplane ' + ' '.join(args):40s} refused in {best(cli) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
