"""Forwarding the request class to vLLM-Omni's stage engines, on a stand-in orchestrator shaped
like ``AsyncOmni`` (stage_list with final_output / final_output_type, async generate)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from omniplane.vllm.classes import ClassResolver
from omniplane.vllm.omni_patch import KEY, final_output_type, install, register, stamp
from omniplane.vllm.settings import load_settings

QWEN = [(True, "text"), (False, None), (True, "audio")]  # thinker, talker, code2wav


class FakeOmni:
    def __init__(self) -> None:
        self.stage_list = [SimpleNamespace(final_output=f, final_output_type=t) for f, t in QWEN]
        self.submitted: list[Any] = []

    async def generate(
        self,
        prompt: Any,
        request_id: str,
        sampling_params_list: Any = None,
        *,
        output_modalities: list[str] | None = None,
    ) -> Any:
        self.submitted.append(prompt)
        yield f"{request_id}: done"


def test_final_output_type_follows_vllm_omni() -> None:
    assert final_output_type(["text"], QWEN) == "text"
    assert final_output_type(["audio"], QWEN) == "audio"
    assert final_output_type(None, QWEN) == "audio"  # everything: the last final stage
    assert final_output_type(["text", "audio"], QWEN) == "audio"
    assert final_output_type(["video"], QWEN) == "audio"  # nothing valid requested: the last stage


def test_stamp_keeps_existing_information() -> None:
    p = stamp({"prompt_token_ids": [1], "additional_information": {"global_request_id": ["g"]}}, "audio")
    assert p["additional_information"] == {"global_request_id": ["g"], KEY: ["audio"]}
    assert stamp("hi", "text") == {"prompt": "hi", "additional_information": {KEY: ["text"]}}
    assert stamp([{"prompt": "a"}], "text")[0]["additional_information"][KEY] == ["text"]


def test_installed_generate_stamps_and_the_scheduler_reads_it() -> None:
    assert install(FakeOmni) and not install(FakeOmni)
    omni = FakeOmni()

    async def go() -> list[Any]:
        return [x async for x in omni.generate({"prompt": "hello"}, "r1", output_modalities=["text"])] + [
            x async for x in omni.generate({"prompt": "speak"}, "r2", output_modalities=["audio"])
        ]

    assert asyncio.run(go()) == ["r1: done", "r2: done"]
    resolver = ClassResolver(load_settings())
    classes = [resolver.resolve(0, p["additional_information"]) for p in omni.submitted]
    assert classes == ["text", "audio"]


def test_plugin_hook_is_inert_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNIPLANE_FORWARD_CLASS", raising=False)
    register()  # must not import vLLM-Omni or fail
    monkeypatch.setenv("OMNIPLANE_FORWARD_CLASS", "1")
    register()  # vLLM-Omni absent here: still nothing
