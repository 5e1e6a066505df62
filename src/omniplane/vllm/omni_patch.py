"""Carry each request's class to vLLM-Omni's stage engines.

Stock vLLM-Omni 0.16 gives stage 0 only the prompt and the sampling parameters:
``AsyncOmni.generate`` says "priority [is] not supported yet" and the requested output
modalities stay in the orchestrator. So a stage scheduler cannot tell a text-only request from
one that continues to the talker. The fix is small: before the orchestrator submits the request
to stage 0, write the final stage's output type (the one the request asked for) into the
prompt's ``additional_information``, which vLLM-Omni already forwards to every stage engine
(it puts ``global_request_id`` there the same way). The scheduler reads it back
(:mod:`omniplane.vllm.classes`, key ``omniplane_output``).

Two ways to get it (docs/vllm.md):

- the change itself, a few lines in ``AsyncOmni.generate`` (the diff is in docs/vllm.md);
- :func:`install`, which wraps ``AsyncOmni.generate`` at run time to do the same. It runs when
  called, or from omniplane's vLLM plugin (``vllm.general_plugins`` entry point
  ``omniplane``) when ``OMNIPLANE_FORWARD_CLASS=1`` is set in the orchestrator's environment.

No vLLM-Omni import at module level.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

KEY = "omniplane_output"
ENV_FORWARD = "OMNIPLANE_FORWARD_CLASS"


def final_output_type(
    requested: Sequence[str] | None, stages: Sequence[tuple[bool, str | None]]
) -> str | None:
    """The output type of the stage that finishes a request, as vLLM-Omni picks it
    (``get_final_stage_id_for_e2e``): the last stage with ``final_output`` whose
    ``final_output_type`` was requested; every final output type when nothing was requested."""
    offered = [t for final, t in stages if final and t]
    wanted = [m for m in requested if m in offered] if requested is not None else offered
    for final, out in reversed(stages):
        if final and out in wanted:
            return out
    return stages[-1][1] if stages else None


def stamp(prompt: Any, output: str) -> Any:
    """The prompt with ``additional_information[KEY] = [output]`` (a string prompt becomes a
    text-prompt dict; list prompts are stamped item by item)."""
    if isinstance(prompt, str):
        prompt = {"prompt": prompt}
    if isinstance(prompt, list):
        return [stamp(p, output) for p in prompt]
    if isinstance(prompt, dict):
        info = prompt.get("additional_information")
        if not isinstance(info, dict):
            info = {}
        prompt = {**prompt, "additional_information": {**info, KEY: [output]}}
    return prompt


def _stages(omni: Any) -> list[tuple[bool, str | None]]:
    return [
        (bool(getattr(s, "final_output", False)), getattr(s, "final_output_type", None))
        for s in getattr(omni, "stage_list", [])
    ]


def install(cls: Any = None) -> bool:
    """Wrap ``cls.generate`` (default: vLLM-Omni's ``AsyncOmni``); False if already wrapped."""
    if cls is None:
        cls = importlib.import_module("vllm_omni.entrypoints.async_omni").AsyncOmni
    original = cls.generate
    if getattr(original, "__omniplane__", False):
        return False

    @functools.wraps(original)
    async def generate(
        self: Any,
        prompt: Any,
        request_id: str,
        sampling_params_list: Any = None,
        *,
        output_modalities: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        out = final_output_type(output_modalities, _stages(self))
        if out is not None:
            prompt = stamp(prompt, out)
        async for item in original(
            self, prompt, request_id, sampling_params_list, output_modalities=output_modalities, **kwargs
        ):
            yield item

    generate.__omniplane__ = True  # type: ignore[attr-defined]
    cls.generate = generate
    return True


def register() -> None:
    """vLLM general-plugin hook: install the forwarding only when asked (``OMNIPLANE_FORWARD_CLASS=1``)
    and vLLM-Omni is present; otherwise do nothing."""
    if os.environ.get(ENV_FORWARD, "").lower() not in ("1", "true", "yes"):
        return
    if importlib.util.find_spec("vllm_omni") is None:
        return
    install()
