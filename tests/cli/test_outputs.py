"""Outputs: written only when the whole command succeeded (staged, then moved into place), missing
folders created by every command, an existing file replaced with a notice; stdout JSON is always
valid JSON; progress goes to stderr, also under --json; the files the docs name are shipped."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from omniplane.cli.files import Outputs
from omniplane.cli.output import jsonable, to_json_text
from tests.cli.slips import EXISTING, invoke, snapshot, staging, strict_json

REPO = Path(__file__).resolve().parents[2]


def test_outputs_are_staged_then_moved(tmp_path: Path) -> None:
    final = tmp_path / "a" / "b" / "plan.yaml"
    with Outputs() as out:
        out.text(final, "x: 1\n")
        figs = out.folder(tmp_path / "figs")
        (figs / "f.png").write_bytes(b"png")
        assert not final.exists() and not (tmp_path / "figs").exists()  # nothing before commit
        written = out.commit()
    assert final.read_text() == "x: 1\n" and (tmp_path / "figs" / "f.png").read_bytes() == b"png"
    assert written == [final, tmp_path / "figs" / "f.png"]
    assert staging(tmp_path) == []


def test_an_error_before_commit_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "keep.yaml").write_text(EXISTING)
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), Outputs() as out:
        out.text(tmp_path / "keep.yaml", "changed\n")
        out.text(tmp_path / "new" / "x.yaml", "new\n")
        raise RuntimeError("the job failed")
    assert snapshot(tmp_path) == before


def test_replacing_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "o.yaml").write_text(EXISTING)
    with Outputs() as out:
        out.text(tmp_path / "o.yaml", "new\n")
        out.commit()
    assert (tmp_path / "o.yaml").read_text() == "new\n"
    assert f"replaced existing {tmp_path / 'o.yaml'}" in capsys.readouterr().err


def test_sample_writes_into_missing_folders_and_replaces_with_a_notice(root: Path) -> None:
    out = invoke(["workload", "sample", "w.yaml", "--n", "20", "--out", "new/deeper/r.jsonl"], root)
    assert out.code == 0, out.stderr
    assert len((root / "new" / "deeper" / "r.jsonl").read_text().splitlines()) == 20
    out = invoke(["workload", "sample", "w.yaml", "--n", "5", "--out", "existing.jsonl"], root)
    assert out.code == 0 and "replaced existing existing.jsonl" in out.stderr
    assert len((root / "existing.jsonl").read_text().splitlines()) == 5
    assert staging(root) == []


def test_a_failure_during_the_write_leaves_nothing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import omniplane.workload as wl

    def broken(path: Any, requests: Any) -> int:
        Path(path).write_text("half a file")
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(wl, "save_requests", broken)
    before = snapshot(root)
    out = invoke(["workload", "sample", "w.yaml", "--n", "5", "--out", "existing.jsonl"], root)
    assert out.code == 2 and "no space left on device" in out.stderr
    assert snapshot(root) == before and staging(root) == []


def test_sim_trace_into_a_missing_folder(root: Path) -> None:
    out = invoke(["sim", "run", "p.yaml", "--workload", "w.yaml", "--n", "30", "--trace", "traces/t.json",
                  "--json", "--slo", "t2t=1s,i2a=5s"], root)
    assert out.code == 0, out.stderr
    assert json.loads((root / "traces" / "t.json").read_text())
    strict_json(out.stdout)


def test_json_is_always_json() -> None:
    data = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": Path("x")}}
    text = to_json_text(data)
    assert strict_json(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": "x"}}
    import numpy as np

    assert jsonable({"n": np.float64("nan"), "v": np.arange(3), "i": np.int64(4)}) == \
        {"n": None, "v": [0, 1, 2], "i": 4}


@pytest.mark.parametrize("args", [["models", "--json"], ["gpus", "--json"], ["show", "qwen3-omni", "--json"],
                                  ["workload", "show", "azure-conv", "--n", "200", "--json"],
                                  ["plan", "show", str(REPO / "src/omniplane/catalog/plans/"
                                                       "qwen3-omni-16xa100-cornfigurator.yaml"), "--json"]])
def test_json_outputs_parse_strictly(root: Path, args: list[str]) -> None:
    out = invoke(args, root)
    assert out.code == 0, out.stderr
    strict_json(out.stdout)


def test_progress_goes_to_stderr_under_json(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIPLANE_PROGRESS", "1")
    out = invoke(["experiment", "horizon", "--policies", "vanilla", "--xs", "0.2,0.3", "--requests", "20",
                  "--json"], root)
    assert out.code == 0, out.stderr
    strict_json(out.stdout)
    assert "horizon runs: 2 to do" in out.stderr and "horizon runs: done, 2 in" in out.stderr


def test_progress_lines_carry_an_eta(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    from omniplane.cli import progress

    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    bar = progress.StderrProgress("sweep")
    bar.start("runs", 4)
    bar.advance(1)
    bar.end()
    err = capsys.readouterr().err
    assert "sweep runs: 4 to do" in err and "sweep runs: 1/4" in err and "left" in err
    assert "sweep runs: done in" in err  # 1 of 4: a phase that ended early gives no count


def test_shipped_examples_validate_and_are_the_docs(root: Path) -> None:
    model, slo = REPO / "examples" / "my-model.yaml", REPO / "examples" / "slo.yaml"
    out = invoke(["validate", str(model), str(slo), "--json"], root)
    assert out.code == 0, out.stderr
    assert [r["kind"] for r in strict_json(out.stdout)] == ["model", "omniplane-slo-table"]
    # the SLO table exactly as docs/reference/vllm.md shows it: `validate` and `vllm-omni config` both take it
    doc = (REPO / "docs" / "reference" / "vllm.md").read_text()
    block = next(b.split("```", 1)[0] for b in doc.split("```yaml\n")[1:] if "omniplane-slo-table" in b)
    (root / "docs-slo.yaml").write_text(block)
    assert invoke(["validate", "docs-slo.yaml"], root).code == 0
    cfg = invoke(["vllm-omni", "config", "--model", "qwen2.5-omni", "--slo-table", "docs-slo.yaml",
                  "--json"], root)
    assert cfg.code == 0, cfg.stderr
    assert yaml.safe_load(block)["classes"] == yaml.safe_load(slo.read_text())["classes"]
