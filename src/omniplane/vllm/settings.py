"""Settings of the omniplane scheduler inside vLLM: policy, request classes and SLO table,
control record, GPU backends. Plain data, validated on construction; no vLLM import.

Where they come from, later sources overriding earlier ones:

1. a settings file: ``$OMNIPLANE_SETTINGS``, or ``settings_file`` in the inline block;
2. the inline block ``additional_config: {omniplane: {...}}`` of the engine (vLLM
   ``--additional-config``, or ``engine_args.additional_config`` of a vLLM-Omni stage);
3. an SLO table file (``$OMNIPLANE_SLO_TABLE`` or ``slo_table: PATH``; ``slo_table`` may also be
   the table itself), which replaces the request classes;
4. environment overrides: ``OMNIPLANE_POLICY``, ``OMNIPLANE_CONTROL`` (record name) and
   ``OMNIPLANE_SLO_<CLASS>`` (seconds, e.g. ``OMNIPLANE_SLO_TEXT=0.8``), so thresholds can be
   recalibrated to measured solo latencies on the target GPU without editing configs
   (HorizonServe section 5 reads its per-type SLOs from environment variables).

SLO table file (YAML or JSON)::

    kind: omniplane-slo-table
    source: "measured: 5 x solo p95 on H200, 2026-01-10"
    classes:
      text:  {priority: 0,  path: short, slo_s: 0.8}
      audio: {priority: 10, path: long,  slo_s: 4.0}
      image: {priority: 20, path: long,  slo_s: 30.0}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from omniplane.policy import PathClass
from omniplane.sched.ladder import LadderSpec, PartitionRule, partition_rule
from omniplane.spec.base import Name, PositiveFloat, PositiveInt, Source, SpecModel
from omniplane.spec.errors import SpecError, SpecIssue
from omniplane.spec.load import parse
from omniplane.spec.yamlio import load_yaml

ENV_SETTINGS = "OMNIPLANE_SETTINGS"
ENV_SLO_TABLE = "OMNIPLANE_SLO_TABLE"
ENV_POLICY = "OMNIPLANE_POLICY"
ENV_CONTROL = "OMNIPLANE_CONTROL"
ENV_SLO_PREFIX = "OMNIPLANE_SLO_"
CONFIG_KEY = "omniplane"


class RequestClass(SpecModel):
    """One request class: the vLLM ``priority`` that carries it through the API, whether its
    path ends at the shared stage (``short``) or continues downstream (``long``), and its
    first-response SLO in seconds (None: no deadline)."""

    priority: int
    path: PathClass
    slo_s: PositiveFloat | None = None


# HorizonServe section 5: "priority field set at the API layer (0 = text output, 10 = audio
# output, 20 = image output)"; text ends at the shared stage, audio and image continue.
DEFAULT_CLASSES: dict[str, RequestClass] = {
    "text": RequestClass(priority=0, path=PathClass.SHORT),
    "audio": RequestClass(priority=10, path=PathClass.LONG),
    "image": RequestClass(priority=20, path=PathClass.LONG),
}
DEFAULT_CLASSES_SOURCE = (
    "arXiv:2608.01785 (HorizonServe) section 5 priorities (0 text, 10 audio, 20 image); "
    "no SLO table given, so no deadlines"
)


class SloTable(SpecModel):
    kind: Literal["omniplane-slo-table"]
    source: Source
    classes: Annotated[dict[Name, RequestClass], Field(min_length=1)]


class LadderSettings(SpecModel):
    levels: list[PositiveInt] | None = None
    s_min: PositiveInt | None = None
    s_max: PositiveInt | None = None
    step: PositiveInt | None = None
    # where the levels come from (e.g. "uncalibrated: from the co-location model"); a label only
    source: str | None = None

    @property
    def configured(self) -> bool:
        """Whether the ladder's top (S_cap) was set; the default tops out near the whole GPU."""
        return self.levels is not None or self.s_max is not None

    def spec(self) -> LadderSpec:
        return LadderSpec(
            None if self.levels is None else tuple(self.levels), self.s_min, self.s_max, self.step
        )


class SchedulerSettings(SpecModel):
    policy: Annotated[str, Field(min_length=1)] = "fcfs"
    policy_options: dict[str, Any] = Field(default_factory=dict)
    on_policy_error: Literal["fcfs", "raise"] = "fcfs"
    classes: Annotated[dict[Name, RequestClass], Field(min_length=1)] = Field(
        default_factory=lambda: dict(DEFAULT_CLASSES)
    )
    slo_source: str = DEFAULT_CLASSES_SOURCE
    default_class: Name = "text"
    class_source: Literal["auto", "priority", "metadata"] = "auto"
    metadata_key: str = "omniplane_output"
    output_classes: dict[str, Name] = Field(default_factory=dict)
    # vLLM-Omni >= 0.2x stamps the request's final stage id into stage 0's request
    # (additional_information.omni_final_stage_id); this maps a final stage id to its output
    # type (the stage config's final_output_type), so stage 0 learns the class without a patch
    stage_outputs: dict[int, Literal["text", "audio", "image"]] = Field(default_factory=dict)
    role: Literal["shared", "downstream"] = "shared"
    control: Name | None = None
    control_dir: str | None = None
    control_slots: Annotated[int, Field(ge=2, le=64)] = 4
    slot: Annotated[int, Field(ge=0)] = 0
    total_sms: Annotated[int, Field(ge=0)] = 0
    compute_capability: Annotated[str, Field(pattern=r"^\d+\.\d+$")] = "9.0"
    device: Annotated[int, Field(ge=0)] = 0
    ladder: LadderSettings = Field(default_factory=LadderSettings)
    streams: Literal["auto", "cuda", "torch", "null"] = "auto"
    sampler: Literal["auto", "nvml", "null"] = "auto"
    sample_interval_s: Annotated[float, Field(ge=0)] = 0.1

    @model_validator(mode="before")
    @classmethod
    def _default_outputs(cls, data: Any) -> Any:
        """Without ``output_classes``, each output type that is also a class name maps to it."""
        if isinstance(data, dict) and "output_classes" not in data:
            names = data.get("classes") or DEFAULT_CLASSES
            data = {**data, "output_classes": {m: m for m in ("text", "audio", "image") if m in names}}
        return data

    @model_validator(mode="after")
    def _check(self) -> SchedulerSettings:
        if self.default_class not in self.classes:
            raise ValueError(f"default_class {self.default_class!r} is not a class ({sorted(self.classes)})")
        seen: dict[int, str] = {}
        for name, c in self.classes.items():
            if c.priority in seen:
                raise ValueError(f"classes {seen[c.priority]!r} and {name!r} share priority {c.priority}")
            seen[c.priority] = name
        bad = {k: v for k, v in self.output_classes.items() if v not in self.classes}
        if bad:
            raise ValueError(
                f"output_classes maps to unknown classes {bad}; classes are {sorted(self.classes)}"
            )
        if (self.role == "shared") != (self.slot == 0):
            raise ValueError(
                f"role {self.role!r} with slot {self.slot}: slot 0 is the shared stage's, "
                "downstream stages use slots 1.."
            )
        if self.slot >= self.control_slots:
            raise ValueError(f"slot {self.slot} >= control_slots {self.control_slots}")
        return self

    def rule(self) -> PartitionRule:
        major, minor = (int(x) for x in self.compute_capability.split("."))
        return partition_rule(major, minor)

    def slo_s(self, cls: str) -> float | None:
        return self.classes[cls].slo_s


def _read(path: Path, what: str) -> dict[str, Any]:
    data = load_yaml(path, what)  # SpecError naming the file: missing, too large, invalid
    if not isinstance(data, dict):
        raise SpecError(str(path), [SpecIssue((), f"expected a mapping at the top of the {what}")])
    return data


def load_slo_table(source: str | Path | Mapping[str, Any]) -> SloTable:
    """An SLO table from a file path or an already-read mapping."""
    if isinstance(source, Mapping):
        return parse(SloTable, dict(source), "<slo_table>")
    path = Path(source)
    return parse(SloTable, _read(path, "SLO table"), str(path))


def env_key(cls: str) -> str:
    """``OMNIPLANE_SLO_<CLASS>`` for a class name (upper case, other characters as ``_``)."""
    return ENV_SLO_PREFIX + re.sub(r"[^A-Z0-9]", "_", cls.upper())


def load_settings(
    additional_config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> SchedulerSettings:
    """Settings from the engine's ``additional_config`` and the environment (module docstring)."""
    env = dict(environ or {})
    inline = dict((additional_config or {}).get(CONFIG_KEY) or {})
    data: dict[str, Any] = {}
    where = "additional_config.omniplane"
    file = env.get(ENV_SETTINGS) or inline.pop("settings_file", None)
    if file:
        data.update(_read(Path(file), "settings file"))
        where = f"{file} + {where}"
    data.update(inline)
    table_ref = env.get(ENV_SLO_TABLE) or data.pop("slo_table", None)
    if table_ref:
        table = load_slo_table(table_ref)
        data["classes"] = {k: v.model_dump() for k, v in table.classes.items()}
        data["slo_source"] = table.source
    if ENV_POLICY in env:
        data["policy"] = env[ENV_POLICY]
    if ENV_CONTROL in env:
        data["control"] = env[ENV_CONTROL]
    classes = {
        k: dict(v) if isinstance(v, Mapping) else v.model_dump()
        for k, v in (data.get("classes") or {n: c.model_dump() for n, c in DEFAULT_CLASSES.items()}).items()
    }
    for name in classes:
        key = env_key(name)
        if key in env:
            try:
                classes[name]["slo_s"] = float(env[key])
            except ValueError:
                raise SpecError(
                    key, [SpecIssue((), f"expected seconds (a number), found {env[key]!r}")]
                ) from None
            data["slo_source"] = (
                f"{data.get('slo_source', DEFAULT_CLASSES_SOURCE)}; {key} from the environment"
            )
    data["classes"] = classes
    return parse(SchedulerSettings, data, where)
