"""Forwarding the request class to vLLM-Omni's stage engines, on a stand-in orchestrator shaped
like ``AsyncOmni`` (stage_list with final_output / final_output_type, async generate)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType, SimpleNamespace
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


def _fake_vllm_omni(monkeypatch: pytest.MonkeyPatch) -> type:
    """A stand-in ``vllm_omni.entrypoints.async_omni.AsyncOmni`` importable by name."""

    class AsyncOmni:  # not FakeOmni: another test wraps FakeOmni.generate for good
        async def generate(self, prompt: Any, request_id: str, sampling_params_list: Any = None, *,
                           output_modalities: list[str] | None = None) -> Any:
            yield prompt

    for name in ("vllm_omni", "vllm_omni.entrypoints", "vllm_omni.entrypoints.async_omni"):
        mod = ModuleType(name)
        mod.__spec__ = ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, mod)
    sys.modules["vllm_omni.entrypoints.async_omni"].AsyncOmni = AsyncOmni  # type: ignore[attr-defined]
    return AsyncOmni


def test_plugin_hook_installs_only_when_asked_and_vllm_omni_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    omni = _fake_vllm_omni(monkeypatch)
    plain = omni.generate
    monkeypatch.delenv("OMNIPLANE_FORWARD_CLASS", raising=False)
    register()  # not asked: vLLM-Omni's generate stays as it is
    assert omni.generate is plain
    monkeypatch.setenv("OMNIPLANE_FORWARD_CLASS", "0")
    register()
    assert omni.generate is plain
    monkeypatch.setenv("OMNIPLANE_FORWARD_CLASS", "1")
    register()  # asked, and vLLM-Omni is importable: generate now stamps the class
    assert omni.generate is not plain and getattr(omni.generate, "__omniplane__", False)
    register()  # a second vLLM process start in the same interpreter does not wrap twice
    assert omni.generate.__wrapped__ is plain  # type: ignore[attr-defined]


def test_plugin_hook_without_vllm_omni_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "vllm_omni" else real(name, *a))
    for name in [m for m in sys.modules if m.split(".")[0] == "vllm_omni"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv("OMNIPLANE_FORWARD_CLASS", "1")
    register()  # asked, but vLLM-Omni is absent: no error, nothing imported
    assert not [m for m in sys.modules if m.split(".")[0] == "vllm_omni"]
