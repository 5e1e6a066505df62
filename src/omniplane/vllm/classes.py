"""Which request class a vLLM request belongs to.

Two sources (``SchedulerSettings.class_source``):

- ``priority``: the vLLM request ``priority`` set at the API layer, mapped through the class
  table (HorizonServe section 5: 0 text, 10 audio, 20 image by default). In vLLM a lower
  value runs first when the engine's ``scheduling_policy`` is ``priority``; with the default
  ``fcfs`` vLLM ignores it, so it only carries the class (docs/reference/vllm.md).
- ``metadata``: vLLM-Omni's request metadata, mapped to a class through ``output_classes``.
  vLLM-Omni 0.30 does not forward the ``priority`` either, but it stamps the id of the stage
  that finishes the request (chosen from the requested output modalities) into stage 0's
  request (``additional_information.omni_final_stage_id``); ``stage_outputs`` (written into
  the stage config by omniplane) gives that stage's output type. Stock vLLM-Omni 0.16 had
  neither; there the orchestrator patch in :mod:`omniplane.vllm.omni_patch` stamps the final
  stage's output type (``text``/``audio``/``image``) under ``metadata_key``, which wins when
  present.

``auto`` uses the metadata when a request carries it and the priority otherwise. A request
whose priority or output type has no class falls back to ``default_class`` and is counted in
``ClassResolver.unknown`` (never an exception inside the engine).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from omniplane.vllm.settings import SchedulerSettings

FINAL_STAGE_KEY = "omni_final_stage_id"  # vLLM-Omni 0.30: engine/async_engine_utils.py


def metadata_value(info: Any, key: str) -> str | None:
    """``key`` from a request's ``additional_information``: a plain mapping, or vLLM-Omni's
    ``AdditionalInformationPayload`` (``entries[key]``, list or scalar form). Of a list value the
    first element is used."""
    if info is None:
        return None
    entries = getattr(info, "entries", None)
    if entries is not None:
        entry = entries.get(key)
        value = None if entry is None else _entry_value(entry)
    elif isinstance(info, Mapping):
        value = info.get(key)
    else:
        return None
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return None if value is None else str(value)


def _entry_value(entry: Any) -> Any:
    """An ``AdditionalInformationEntry``'s value: its list form, else its scalar form (vLLM-Omni
    serialises ``omni_final_stage_id`` as a scalar)."""
    value = getattr(entry, "list_data", None)
    return getattr(entry, "scalar_data", None) if value is None else value


class ClassResolver:
    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.by_priority = {c.priority: name for name, c in settings.classes.items()}
        self.unknown: Counter[str] = Counter()

    def resolve(self, priority: int, additional_information: Any = None) -> str:
        s = self.settings
        if s.class_source != "priority":
            out = metadata_value(additional_information, s.metadata_key)
            if out is None and s.stage_outputs:
                final = metadata_value(additional_information, FINAL_STAGE_KEY)
                if final is not None and final.lstrip("-").isdigit():
                    out = s.stage_outputs.get(int(final))
            if out is not None:
                cls = s.output_classes.get(out)
                if cls is not None:
                    return cls
                self.unknown[f"{s.metadata_key}={out}"] += 1
                return s.default_class
            if s.class_source == "metadata":
                self.unknown[f"no {s.metadata_key}"] += 1
                return s.default_class
        cls = self.by_priority.get(priority)
        if cls is None:
            self.unknown[f"priority={priority}"] += 1
            return s.default_class
        return cls
