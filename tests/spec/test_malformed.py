"""Malformed specs: each gives an error naming the file and the field, and `validate` exits 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec import SpecError, load_document
from tests.spec.builders import tiny_model, tiny_plan, tiny_workload

Doc = dict[str, Any]


def m(fn: Callable[[Doc], object]) -> Callable[[], str]:
    """A model mutation -> YAML text."""

    def make() -> str:
        d = tiny_model()
        fn(d)
        return yaml.safe_dump(d, sort_keys=False)

    return make


def comp(d: Doc, name: str) -> Doc:
    return next(c for c in d["components"] if c["name"] == name)


def rtype(d: Doc, name: str) -> Doc:
    return next(r for r in d["request_types"] if r["name"] == name)


def wl(fn: Callable[[Doc], object]) -> Callable[[], str]:
    def make() -> str:
        d = tiny_workload()
        fn(d)
        return yaml.safe_dump(d, sort_keys=False)

    return make


def pl(fn: Callable[[Doc], object]) -> Callable[[], str]:
    def make() -> str:
        d = tiny_plan()
        fn(d)
        return yaml.safe_dump(d, sort_keys=False)

    return make


def text(t: str) -> Callable[[], str]:
    return lambda: t


def _cycle(d: Doc) -> None:
    comp(d, "voc")["edges"] = [{"to": "thinker"}]


def _not_connected(d: Doc) -> None:
    rtype(d, "i2a")["path"] = ["enc", "talker", "voc"]
    rtype(d, "i2a")["work"].pop("thinker")
    rtype(d, "i2a")["work"]["talker"]["prompt_tokens"] = 10


# (id, document factory, expected field, expected message fragment)
CASES: list[tuple[str, Callable[[], str], str, str]] = [
    ("yaml-syntax", text("kind: model\nname: [tiny\n"), "<document>", "invalid YAML"),
    ("yaml-duplicate-key", text("kind: model\nname: a\nname: b\n"), "name", "duplicate key"),
    ("kind-missing", text("name: x\n"), "kind", "expected kind"),
    ("kind-unknown", text("kind: modle\nname: x\n"), "kind", "expected kind"),
    ("top-level-unknown-field", m(lambda d: d.update(colour="red")), "colour", "unknown field"),
    ("misspelt-field", m(lambda d: d.update(request_type=d.pop("request_types"))), "request_type",
     "did you mean 'request_types'?"),
    ("no-components", m(lambda d: d.update(components=[])), "components",
     "expected at least 1 item(s), got 0"),
    ("distribution-without-dist", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(
        prompt_tokens={"mean": 5})), "request_types[0].work.thinker.prompt_tokens",
     "needs a 'dist' field saying which kind it is: one of constant, uniform"),
    ("slo-without-policy", wl(lambda d: d.update(slo={"targets_ms": {"t2t": 500}})), "slo",
     "needs a 'policy' field saying which kind it is: one of explicit"),
    ("component-missing-kind", m(lambda d: comp(d, "enc").pop("kind")),
     "components[0].kind", "required"),
    ("component-bad-kind", m(lambda d: comp(d, "enc").update(kind="decoder")),
     "components[0].kind", "encoder"),
    ("encoder-without-modalities", m(lambda d: comp(d, "enc").pop("modalities")),
     "components[0]", "modalities"),
    ("modalities-on-llm", m(lambda d: comp(d, "thinker").update(modalities=["audio"])),
     "components[1]", "only for encoders"),
    ("generator-without-kind", m(lambda d: comp(d, "voc").pop("generator")),
     "components[3]", "generator"),
    ("duplicate-component", m(lambda d: comp(d, "talker").update(name="thinker")),
     "components[2].name", "duplicate component"),
    ("dangling-edge", m(lambda d: comp(d, "thinker")["edges"].append({"to": "ghost"})),
     "components[1].edges[1].to", "unknown component 'ghost'"),
    ("self-edge", m(lambda d: comp(d, "voc").update(edges=[{"to": "voc"}])),
     "components[3].edges[0].to", "cyclic edge"),
    ("cycle", m(_cycle), "components", "cycle"),
    ("duplicate-edge", m(lambda d: comp(d, "enc")["edges"].append({"to": "thinker"})),
     "components[0].edges[1].to", "duplicate edge"),
    ("negative-params", m(lambda d: comp(d, "enc")["size"].update(params=-5)),
     "components[0].size.params", "greater than 0"),
    ("zero-params", m(lambda d: comp(d, "talker")["size"].update(params=0)),
     "components[2].size.params", "greater than 0"),
    ("size-without-source", m(lambda d: comp(d, "enc")["size"].pop("source")),
     "components[0].size.source", "required"),
    ("bad-source", m(lambda d: comp(d, "enc")["size"].update(source="my head")),
     "components[0].size.source", "a source must be"),
    ("sources-unknown-field", m(lambda d: comp(d, "enc")["size"].update(sources={"flops": "measured: x"})),
     "components[0].size", "unknown field"),
    ("active-exceeds-total", m(lambda d: comp(d, "thinker")["size"].update(active_params=2e9)),
     "components[1].size", "active_params"),
    ("llm-without-kv-heads", m(lambda d: comp(d, "thinker")["size"].pop("kv_heads")),
     "components[1]", "kv_heads"),
    ("kv-heads-exceed-heads", m(lambda d: comp(d, "thinker")["size"].update(kv_heads=16)),
     "components[1].size", "kv_heads"),
    ("path-unknown-component", m(lambda d: rtype(d, "t2t").update(path=["brain"])),
     "request_types[0].path[0]", "unknown component 'brain'"),
    ("path-not-connected", m(_not_connected), "request_types[1].path", "not connected"),
    ("path-misses-output", m(lambda d: rtype(d, "t2t").update(output="audio")),
     "request_types[0].path", "does not reach its output"),
    ("encoder-not-an-input", m(lambda d: rtype(d, "i2a").update(inputs=["text", "audio"])),
     "request_types[1].path[0]", "encodes"),
    ("input-without-encoder", m(lambda d: rtype(d, "t2t").update(inputs=["text", "image"])),
     "request_types[0].inputs", "encoders"),
    ("work-off-path", m(lambda d: rtype(d, "t2t")["work"].update(enc={"items": 1})),
     "request_types[0].work.enc", "not on the path"),
    ("work-missing-prompt", m(lambda d: rtype(d, "t2t")["work"]["thinker"].pop("prompt_tokens")),
     "request_types[0].work.thinker", "prompt_tokens"),
    ("work-unknown-quantity", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(pixels=4)),
     "request_types[0].work.thinker", "unknown work quantity"),
    ("negative-size", m(lambda d: rtype(d, "i2a")["work"]["thinker"]["prompt_tokens"].update(median=-1)),
     "request_types[1].work.thinker.prompt_tokens.median", "greater than 0"),
    ("zero-size", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(output_tokens=0)),
     "request_types[0].work.thinker.output_tokens", "greater than 0"),
    ("uniform-reversed", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(
        output_tokens={"dist": "uniform", "low": 10, "high": 2})),
     "request_types[0].work.thinker.output_tokens", "high"),
    ("choice-weights-mismatch", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(
        output_tokens={"dist": "choice", "values": [1, 2], "weights": [1]})),
     "request_types[0].work.thinker.output_tokens", "weights"),
    ("unknown-dist", m(lambda d: rtype(d, "t2t")["work"]["thinker"].update(
        output_tokens={"dist": "zipf", "a": 2})),
     "request_types[0].work.thinker.output_tokens", "dist"),
    ("duplicate-request-type", m(lambda d: rtype(d, "i2a").update(name="t2t")),
     "request_types[1].name", "duplicate request type"),
    ("duplicate-path-entry", m(lambda d: rtype(d, "t2t").update(path=["thinker", "thinker"])),
     "request_types[0]", "more than once"),
    ("executor-unknown-host", m(lambda d: d["executor_types"][0].update(hosts=["ghost"])),
     "executor_types[0].hosts[0]", "unknown component"),
    ("executor-tp-not-power-of-two", m(lambda d: d["executor_types"][1].update(tp=[3])),
     "executor_types[1].tp", "powers of two"),
    ("executor-not-colocatable", m(lambda d: d["executor_types"].append(
        {"name": "odd", "hosts": ["enc", "voc"], "max_batch": [1]})),
     "executor_types[4].hosts", "colocatable"),
    ("executor-zero-batch", m(lambda d: d["executor_types"][2].update(max_batch=[0])),
     "executor_types[2].max_batch[0]", "greater than 0"),
    ("component-never-hosted", m(lambda d: d["executor_types"].pop()),
     "executor_types", "no executor type hosts component 'voc'"),
    ("mix-not-summing", wl(lambda d: d["mix"].update(t2t=0.5)), "mix", "sum to 1"),
    ("mix-unknown-type", wl(lambda d: d.update(mix={"t2t": 0.5, "x2y": 0.5})),
     "mix.x2y", "unknown request type"),
    ("workload-unknown-model", wl(lambda d: d.update(model="no-such-model")),
     "model", "no catalog model"),
    ("workload-negative-cv", wl(lambda d: d.update(arrival={"process": "gamma", "rate": 1, "cv": -2})),
     "arrival.cv", "greater than 0"),
    ("workload-slo-missing-type", wl(lambda d: d.update(
        slo={"policy": "explicit", "targets_ms": {"t2t": 100}})),
     "slo.targets_ms", "no target for request type 'i2a'"),
    ("workload-piecewise-order", wl(lambda d: d.update(arrival={
        "process": "piecewise", "windows": [{"start": 600, "rate": 1}, {"start": 0, "rate": 2}]})),
     "arrival", "must be greater"),
    ("plan-routes-not-summing", pl(lambda d: d["routes"]["t2t"][0].update(p=0.5)),
     "routes.t2t", "sum to 0.5"),
    ("plan-unknown-node", pl(lambda d: d["routes"]["t2t"][0].update(nodes=["nowhere"])),
     "routes.t2t[0].nodes[0]", "unknown node"),
    ("plan-over-budget", pl(lambda d: d.update(gpus=2)), "nodes", "budget"),
    ("plan-tp-not-allowed", pl(lambda d: d["nodes"][1]["executors"][0].update(tp=2)),
     "nodes[1].executors[0].tp", "not allowed"),
    ("plan-route-misses-component", pl(lambda d: d["routes"]["i2a"][0].update(nodes=["front"])),
     "routes.i2a[0].nodes", "does not serve"),
    ("gpus-duplicate", text(
        "kind: gpus\ngpus:\n" + 2 * (
            "  - {name: X, sms: 1, memory_gb: 1, bf16_tflops: 1, mem_bw_gbs: 1, "
            "interconnect_gbs: 1, interconnect: pcie, source: 'https://x.org'}\n")),
     "gpus[1].name", "duplicate GPU"),
    ("gpu-negative-bandwidth", text(
        "kind: gpus\ngpus:\n  - {name: X, sms: 1, memory_gb: 1, bf16_tflops: 1, mem_bw_gbs: -1, "
        "interconnect_gbs: 1, interconnect: pcie, source: 'https://x.org'}\n"),
     "gpus[0].mem_bw_gbs", "greater than 0"),
]


def _write(tmp_path: Path, case_id: str, factory: Callable[[], str]) -> Path:
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny_model(), sort_keys=False))
    path = tmp_path / f"{case_id}.yaml"
    path.write_text(factory())
    return path


def test_there_are_at_least_thirty_distinct_cases() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


@pytest.mark.parametrize(("case_id", "factory", "field", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_error_names_file_and_field(
    tmp_path: Path, case_id: str, factory: Callable[[], str], field: str, fragment: str
) -> None:
    path = _write(tmp_path, case_id, factory)
    with pytest.raises(SpecError) as info:
        load_document(path)
    err = info.value
    message = str(err)
    assert str(path) in message
    matching = [i for i in err.issues if i.field == field]
    assert matching, f"no issue at {field!r}; got {err.fields}:\n{message}"
    assert any(fragment in i.message for i in matching), message
    assert all(i.line is not None for i in err.issues), message


@pytest.mark.parametrize(("case_id", "factory"), [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_validate_exits_nonzero(tmp_path: Path, case_id: str, factory: Callable[[], str]) -> None:
    path = _write(tmp_path, case_id, factory)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output


def test_valid_base_documents_load(tmp_path: Path) -> None:
    for name, doc in (("w", tiny_workload()), ("p", tiny_plan())):
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny_model()))
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        load_document(path)
