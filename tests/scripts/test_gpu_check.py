"""scripts/gpu_check.py without a GPU: it refuses clearly, and its document (built here from
synthetic measurements) is a sweep that ``omniplane calibrate`` fits."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from omniplane.gpu.calibrate import calibrate
from omniplane.perf.colocation_fit import parse_sweep

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu_check.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_recognises_catalog_gpus_by_name_and_sm_count() -> None:
    gc = load()
    assert gc.catalog_kind("NVIDIA H200", 132) == "H200"
    assert gc.catalog_kind("NVIDIA H200", 100) is None  # a MIG slice or a different part: ask for --gpu


def test_document_is_a_sweep_calibrate_fits(tmp_path: Path) -> None:
    gc = load()
    example = json.loads(
        (Path(__file__).parents[2] / "src/omniplane/gpu/data/gpu_check_synthetic.json").read_text()
    )
    doc = gc.build_document(
        gpu="H200",
        device="synthetic",
        backend="synthetic",
        copy_bytes=2.0 * (1 << 28),
        matmul_n=8192,
        points=example["points"],
        ladder={},
        pressure={"source": "null"},
        started="2026-01-01T00:00:00+00:00",
        seconds=1.0,
    )
    assert doc["works"] == example["works"]  # the script's work accounting matches the example's
    path = tmp_path / "check.json"
    path.write_text(json.dumps(doc))
    assert parse_sweep(doc, str(path)).gpu.name == "H200"
    assert calibrate(path)["ladder"]["s_cap"] > 0


def test_without_a_gpu_it_refuses_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("torch") is None:
        sys.modules.setdefault("torch", ModuleType("torch"))  # a torch without CUDA
        sys.modules["torch"].cuda = ModuleType("torch.cuda")  # type: ignore[attr-defined]
        sys.modules["torch"].cuda.is_available = lambda: False  # type: ignore[attr-defined]
        try:
            rc = load().main(["--out", str(tmp_path / "x.json")])
        finally:
            del sys.modules["torch"]
    else:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: run the script for real")
        rc = load().main(["--out", str(tmp_path / "x.json")])
    assert rc == 2 and not (tmp_path / "x.json").exists()
    assert "cannot run here" in capsys.readouterr().err
