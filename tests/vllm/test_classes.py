"""Request classes from vLLM priority or from vLLM-Omni's request metadata."""

from __future__ import annotations

from types import SimpleNamespace

from omniplane.vllm.classes import ClassResolver, metadata_value
from omniplane.vllm.settings import load_settings


def payload(**entries: list[str]) -> SimpleNamespace:
    """Shaped like vLLM-Omni's AdditionalInformationPayload."""
    return SimpleNamespace(entries={k: SimpleNamespace(list_data=v) for k, v in entries.items()})


def test_priority_classes_and_unknown_priorities() -> None:
    r = ClassResolver(load_settings())
    assert [r.resolve(p) for p in (0, 10, 20)] == ["text", "audio", "image"]
    assert r.resolve(5) == "text" and r.unknown["priority=5"] == 1


def test_metadata_wins_in_auto_and_is_required_in_metadata_mode() -> None:
    r = ClassResolver(load_settings())
    assert r.resolve(0, payload(omniplane_output=["audio"])) == "audio"
    assert r.resolve(20, {"omniplane_output": ["text"]}) == "text"
    assert r.resolve(20, payload(global_request_id=["x"])) == "image"  # no key: priority
    strict = ClassResolver(load_settings({"omniplane": {"class_source": "metadata"}}))
    assert strict.resolve(10) == "text" and strict.unknown["no omniplane_output"] == 1
    only_priority = ClassResolver(load_settings({"omniplane": {"class_source": "priority"}}))
    assert only_priority.resolve(10, payload(omniplane_output=["text"])) == "audio"


def test_metadata_value_shapes() -> None:
    assert metadata_value(None, "k") is None
    assert metadata_value({"k": []}, "k") is None
    assert metadata_value({"k": "image"}, "k") == "image"
    assert metadata_value(42, "k") is None
