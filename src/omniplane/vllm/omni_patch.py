"""Carry each request's class to vLLM-Omni's stage engines (needed for vLLM-Omni 0.16).

vLLM-Omni 0.30 stamps the id of the request's final stage into stage 0's request itself
(``additional_information.omni_final_stage_id``), which the scheduler maps to a class through
the stage config's ``stage_outputs`` (:mod:`omniplane.vllm.classes`): no patch needed there.
Stock vLLM-Omni 0.16 gives stage 0 only the prompt and the sampling parameters:
``AsyncOmni.generate`` says "priority [is] not supported yet" and the requested output
modalities stay in the orchestrator. So a stage scheduler cannot tell a text-only request from
one that continues to the talker. The fix is small: before the orchestrator submits the request
to stage 0, write the final stage's output type (the one the request asked for) into the
prompt's ``additional_information``, which vLLM-Omni already forwards to every stage engine
(it puts ``global_request_id`` there the same way). The scheduler reads it back
(:mod:`omniplane.vllm.classes`, key ``omniplane_output``).

Two ways to get it (docs/reference/vllm.md):

- the change itself, a few lines in ``AsyncOmni.generate`` (the diff is in docs/reference/vllm.md);
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


def _final_type(omni: Any, requested: Sequence[str] | None) -> str | None:
    """The requested final output type, as the orchestrator will pick it: vLLM-Omni 0.30's own
    ``_compute_final_stage_id`` over its stage metadata when it has one, else
    :func:`final_output_type` over 0.16's ``stage_list``."""
    meta = getattr(omni, "_stage_meta_list", None)
    if meta is not None and hasattr(omni, "_compute_final_stage_id"):
        sid = omni._compute_final_stage_id(list(requested) if requested is not None else None)
        out = getattr(meta[sid], "final_output_type", None) if 0 <= sid < len(meta) else None
        return None if out is None else str(out)
    stages = [
        (bool(getattr(s, "final_output", False)), getattr(s, "final_output_type", None))
        for s in getattr(omni, "stage_list", [])
    ]
    return final_output_type(requested, stages)


def install(cls: Any = None) -> bool:
    """Wrap ``cls.generate`` (default: vLLM-Omni's ``AsyncOmni``); False if already wrapped.
    The wrapper takes the prompt first and passes every other argument through unchanged
    (0.16's ``generate(prompt, request_id, sampling_params_list, ...)`` and 0.30's
    ``generate(prompt, sampling_params, request_id, ...)`` alike); ``output_modalities`` is a
    keyword in both."""
    if cls is None:
        cls = importlib.import_module("vllm_omni.entrypoints.async_omni").AsyncOmni
    original = cls.generate
    if getattr(original, "__omniplane__", False):
        return False

    @functools.wraps(original)
    async def generate(self: Any, prompt: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        out = _final_type(self, kwargs.get("output_modalities"))
        if out is not None and not hasattr(prompt, "__aiter__"):  # streaming input: left alone
            prompt = stamp(prompt, out)
        async for item in original(self, prompt, *args, **kwargs):
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
