"""Request bodies: the type and the work they name, and 400s that name the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.deploy import api
from omniplane.spec import ResolvedPlan

TI2A = {
    "image_encoder": {"items": 2, "tokens": 512},
    "thinker": {"prompt_tokens": 600, "output_tokens": 40},
    "talker": {"prompt_tokens": 640, "output_tokens": 150},
    "code2wav": {"audio_seconds": 12.0},
}


def test_typed_request_keeps_its_exact_work(small_plan: ResolvedPlan) -> None:
    p = api.parse_typed(small_plan.model, {"type": "ti2a", "id": "r1", "work": TI2A, "stream": True})
    assert (p.type, p.client_id, p.stream) == ("ti2a", "r1", True)
    assert p.work["talker"]["output_tokens"] == 150.0


def test_typed_request_without_work_samples_it_deterministically(small_plan: ResolvedPlan) -> None:
    a = api.parse_typed(small_plan.model, {"type": "tiva2a", "id": 5})
    b = api.parse_typed(small_plan.model, {"type": "tiva2a", "id": 5})
    assert a.work == b.work and set(a.work) == set(small_plan.model.path_of("tiva2a"))


def test_chat_request_infers_the_type_from_parts_and_modalities(small_plan: ResolvedPlan) -> None:
    body = {
        "model": "qwen3-omni",
        "modalities": ["text", "audio"],
        "max_tokens": 7,
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x" * 400},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                    {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
                ],
            },
        ],
    }
    p = api.parse_chat(small_plan.model, body)
    assert p.type == "tia2a" and not p.stream
    assert p.work["image_encoder"]["items"] == 2.0
    assert p.work["thinker"]["output_tokens"] <= 7
    # prompt = text tokens (408 characters / 4) + the encoders' tokens
    enc = p.work["image_encoder"]["tokens"] + p.work["audio_encoder"]["tokens"]
    assert p.work["thinker"]["prompt_tokens"] == pytest.approx(102 + enc)


@pytest.mark.parametrize(
    "body,param",
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "hi"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "image"}]}]}, "messages[0].content[0].type"),
        ({"messages": [{"role": "user", "content": "hi"}], "modalities": ["smell"]}, "modalities"),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "messages"),  # text only: no such type
        ({"messages": [{"role": "user", "content": "hi"}], "omniplane": {"type": "t2x"}}, "omniplane.type"),
        ([1, 2], "body"),
    ],
)
def test_malformed_chat_requests_name_the_field(small_plan: ResolvedPlan, body: Any, param: str) -> None:
    with pytest.raises(api.BadRequest) as exc:
        api.parse_chat(small_plan.model, body)
    assert exc.value.param == param
    assert exc.value.body()["error"]["param"] == param


@pytest.mark.parametrize(
    "body,param",
    [
        ({}, "type"),
        ({"type": "ti2a", "work": {**TI2A, "talker": {"prompt_tokens": 1}}}, "work.talker.output_tokens"),
        ({"type": "ti2a", "work": {k: v for k, v in TI2A.items() if k != "code2wav"}}, "work.code2wav"),
        (
            {"type": "ti2a", "work": {**TI2A, "video_encoder": {"items": 1, "tokens": 1}}},
            "work.video_encoder",
        ),
        (
            {"type": "ti2a", "work": {**TI2A, "thinker": {"prompt_tokens": -1, "output_tokens": 1}}},
            "work.thinker.prompt_tokens",
        ),
        ({"type": "ti2a", "id": ""}, "id"),
    ],
)
def test_malformed_typed_requests_name_the_field(small_plan: ResolvedPlan, body: Any, param: str) -> None:
    with pytest.raises(api.BadRequest) as exc:
        api.parse_typed(small_plan.model, body)
    assert exc.value.param == param


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=12,
    )
)
def test_any_json_is_parsed_or_refused_with_a_field(small_plan: ResolvedPlan, body: Any) -> None:
    for parse in (api.parse_chat, api.parse_typed):
        try:
            parse(small_plan.model, body)
        except api.BadRequest as exc:
            assert exc.param


def test_sse_and_usage(small_plan: ResolvedPlan) -> None:
    assert api.sse("[DONE]") == b"data: [DONE]\n\n"
    usage = api.usage_of(
        small_plan.model, "ti2a", {k: {q: float(v) for q, v in w.items()} for k, w in TI2A.items()}
    )
    assert usage == {"prompt_tokens": 600, "completion_tokens": 40, "total_tokens": 640}
