"""``omniplane perf capacity`` and ``omniplane perf predict``: the JSON the issue specifies."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app

runner = CliRunner()
PREDICT = ["perf", "predict", "--model"]


def test_capacity_json_has_table2_columns() -> None:
    res = runner.invoke(app, ["perf", "capacity", "--model", "qwen3-omni", "--gpu", "A100-80GB",
                              "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"model", "gpu", "workload", "columns"} and doc["workload"] == "table2"
    assert set(doc["columns"]) == {"image_input", "video_input", "audio_input", "llm", "audio_output"}
    for col in doc["columns"].values():
        assert set(col) == {"requests_per_s", "components", "tp", "max_batch", "source"}
        assert col["requests_per_s"] > 0 and col["source"]
    cols = doc["columns"]
    assert 12 <= cols["llm"]["requests_per_s"] / cols["audio_output"]["requests_per_s"] <= 30


def test_capacity_with_a_workload_and_a_table() -> None:
    res = runner.invoke(app, ["perf", "capacity", "--model", "qwen-image", "--gpu", "h100",
                              "--workload", "qwen-image-diffusiondb"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "image_output" in res.output and "qwen-image-diffusiondb" in res.output
    bad = runner.invoke(app, ["perf", "capacity", "--model", "qwen3-vl", "--workload",
                              "qwen-image-diffusiondb"])
    assert bad.exit_code == 2 and "is for model" in bad.output


def test_predict_json_and_the_talkers_mtp() -> None:
    res = runner.invoke(app, [*PREDICT, "qwen3-omni", "--component", "talker", "--gpu", "H200",
                              "--batch", "4", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"model", "component", "gpu", "tp", "batch", "op", "ms", "source"}
    assert doc["op"] == "decode_step" and doc["tp"] == 1 and doc["ms"] > 0 and "roofline" in doc["source"]
    pre = json.loads(runner.invoke(app, [*PREDICT, "qwen3-omni", "--component", "thinker",
                                         "--gpu", "H200", "--op", "prefill", "--prompt-tokens", "2048",
                                         "--json"]).stdout)
    assert pre["op"] == "prefill" and pre["ms"] > 0
    image = [*PREDICT, "qwen-image", "--component", "dit", "--gpu", "H200", "--width", "1024",
             "--height", "1024", "--json"]
    dit = json.loads(runner.invoke(app, image).stdout)
    two = json.loads(runner.invoke(app, [*image, "--steps", "2"]).stdout)
    assert two["ms"] == pytest.approx(2 * dit["ms"], rel=1e-3)


def test_predict_errors_name_the_option() -> None:
    res = runner.invoke(app, [*PREDICT, "qwen3-omni", "--component", "talker", "--gpu", "H200",
                              "--op", "denoise_step"])
    assert res.exit_code == 2 and "--op denoise_step" in res.output and "decode_step" in res.output
    res = runner.invoke(app, [*PREDICT, "qwen3-omni", "--component", "nope", "--gpu", "H200"])
    assert res.exit_code == 2 and "--component" in res.output
    res = runner.invoke(app, [*PREDICT, "qwen3-vl", "--component", "llm", "--gpu", "L40S", "--tp", "1"])
    assert res.exit_code == 2 and "does not fit" in res.output


def test_bench_replays_a_closed_loop_benchmark_and_names_bad_options() -> None:
    base = ["perf", "bench", "--model", "qwen3-omni", "--component", "thinker", "--gpu", "H100",
            "--input-len", "1000", "--output-len", "50", "--json"]
    one = json.loads(runner.invoke(app, base).stdout)
    eight = json.loads(runner.invoke(app, [*base, "--concurrency", "8"]).stdout)
    assert one["runtime"] == "vllm-v1" and one["num_prompts"] == 4 and eight["num_prompts"] == 32
    assert 0 < one["mean_ttft_ms"] < one["mean_e2el_ms"]
    assert one["mean_e2el_ms"] == pytest.approx(one["mean_ttft_ms"] + 49 * one["mean_tpot_ms"], rel=1e-3)
    assert eight["mean_e2el_ms"] > one["mean_e2el_ms"]
    res = runner.invoke(app, [*base[:4], "--component", "code2wav", *base[6:]])
    assert res.exit_code == 2 and "--component" in res.output and "thinker" in res.output
    res = runner.invoke(app, [*base, "--concurrency", "0"])
    assert res.exit_code == 2 and "--concurrency" in res.output
