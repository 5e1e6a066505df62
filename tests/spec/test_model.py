"""Behaviour of the model graph helpers."""

from __future__ import annotations

import pytest

from omniplane.spec import ModelSpec, SpecFieldError, load_model, parse
from tests.spec.builders import tiny_model


def test_topological_order_and_paths() -> None:
    model = parse(ModelSpec, tiny_model())
    assert model.topo_order == ["enc", "thinker", "talker", "voc"]
    assert model.path_of("i2a") == ["enc", "thinker", "talker", "voc"]
    assert model.shared_stage() == "thinker"
    assert model.long_types() == ["i2a"]


def test_merged_executor_types_are_derived_from_colocatable_edges() -> None:
    model = load_model("qwen3-omni")
    merged = model.executor_type_for(["thinker", "image_encoder", "video_encoder"])
    assert merged is not None
    assert merged.hosts == ["image_encoder", "video_encoder", "thinker"]
    assert merged.tp == model.single_executor_type("thinker").tp  # type: ignore[union-attr]
    assert model.executor_type_for(["image_encoder", "talker"]) is None  # not adjacent


def test_construction_in_code_validates_too() -> None:
    doc = tiny_model()
    doc["components"][1]["edges"] = [{"to": "ghost"}]
    with pytest.raises(SpecFieldError) as info:
        ModelSpec.model_validate(doc)
    assert info.value.issues[0].field == "components[1].edges[0].to"


def test_specs_are_frozen() -> None:
    model = parse(ModelSpec, tiny_model())
    with pytest.raises(Exception, match="frozen"):
        model.name = "other"  # type: ignore[misc]


def test_kv_bytes_per_token_follows_the_shape() -> None:
    thinker = load_model("qwen2.5-omni").component("thinker")
    # 2 (K,V) x 28 layers x 4 KV heads x 128 dims x 2 bytes
    assert thinker.size.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2
