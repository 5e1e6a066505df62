"""The shipped catalog: seven models, every size number sourced, validate passes on all files."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec import ComponentKind, load_gpus, load_model
from omniplane.spec.base import check_source
from omniplane.spec.catalog import all_catalog_files, catalog_model_paths

REQUIRED_MODELS = {"qwen3-omni", "qwen2.5-omni", "mimo-audio", "bagel", "qwen-image", "qwen3-vl",
                   "internvl3"}


def test_models_json_lists_required_models_with_sources() -> None:
    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    names = {m["name"] for m in data}
    assert names >= REQUIRED_MODELS
    for m in data:
        assert m["path"].endswith(".yaml")
        assert m["request_types"], m["name"]
        for c in m["components"]:
            assert c["size"], (m["name"], c["name"])
            for field, entry in c["size"].items():
                check_source(entry["source"])  # raises when not a real source
                assert entry["value"] > 0, (m["name"], c["name"], field)


def test_validate_accepts_every_catalog_file() -> None:
    files = [str(p) for p in all_catalog_files()]
    result = CliRunner().invoke(app, ["validate", *files])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok") == len(files)


def test_request_types_match_the_papers() -> None:
    expected = {
        "qwen2.5-omni": {"t2t", "a2t", "i2t", "v2t", "t2a", "a2a", "i2a", "v2a"},
        "mimo-audio": {"t2t", "a2t", "t2a", "a2a"},
        "bagel": {"t2t", "i2t", "t2i", "i2i"},
        "qwen-image": {"t2i-512", "t2i-1024"},
        "qwen3-vl": {"t2t", "ti2t"},
        "internvl3": {"t2t", "ti2t"},
    }
    for name, types in expected.items():
        assert set(load_model(name).type_names) == types, name
    omni = load_model("qwen3-omni")
    labels = {r.label for r in omni.request_types}
    assert labels == {f"{i}->{o}" for i in ("T+I", "T+I+V", "T+I+A", "T+I+V+A") for o in "TA"}


def test_every_catalog_model_has_a_shared_stage_and_sourced_types() -> None:
    for path in catalog_model_paths():
        model = load_model(path)
        assert model.shared_stage() is not None, model.name
        for rt in model.request_types:
            assert rt.source, (model.name, rt.name)
        for c in model.components:
            if c.kind is ComponentKind.LLM:
                assert c.size.kv_bytes_per_token() > 0


def test_gpu_catalog_has_the_required_kinds() -> None:
    gpus = load_gpus()
    for name in ("A100-80GB", "H100-SXM", "H200", "L40S", "RTX6000Ada", "RTXPRO6000"):
        gpus.get(name)
    ada, pro = gpus.get("rtx-6000-ada"), gpus.get("rtx-pro-6000")
    assert (ada.sms, ada.mem_bw_gbs, ada.memory_gb) == (142, 960, 48)
    assert (pro.sms, pro.mem_bw_gbs, pro.memory_gb) == (188, 1792, 96)
    for gpu in gpus.gpus:
        assert set(gpu.provenance()) >= {"sms", "memory_gb", "bf16_tflops", "mem_bw_gbs",
                                         "interconnect_gbs"}
