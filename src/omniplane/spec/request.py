"""Request types: input modalities, output modality, the path through the model, per-component
work as distributions, the first-response metric and the path class."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from omniplane.policy import PathClass
from omniplane.spec.base import Name, Priority, SpecModel
from omniplane.spec.component import ComponentKind, GeneratorKind, Modality
from omniplane.spec.dist import Distribution, coerce_distribution


class FirstResponse(StrEnum):
    TTFT = "ttft"  # time to first token (text output)
    TTFO = "ttfo"  # time to first output chunk (speech)
    E2E = "e2e"  # end-to-end latency (images)


DEFAULT_METRIC = {
    Modality.TEXT: FirstResponse.TTFT,
    Modality.AUDIO: FirstResponse.TTFO,
    Modality.IMAGE: FirstResponse.E2E,
    Modality.VIDEO: FirstResponse.E2E,
}

# Work quantities each component kind understands: (required, optional).
ENCODER_WORK = ({"items"}, {"tokens_per_item", "seconds"})
# An LLM without output_tokens only prefills (e.g. a diffusion model's text encoder); one
# without prompt_tokens takes its context from the LLM before it on the path (e.g. a talker).
LLM_WORK = (set[str](), {"prompt_tokens", "output_tokens"})
# A vocoder without audio_seconds voices what the LLM before it generated (tokens / frame rate).
GENERATOR_WORK = {
    GeneratorKind.VOCODER: (set[str](), {"audio_seconds"}),
    GeneratorKind.DIT: ({"steps", "height", "width"}, set[str]()),
    GeneratorKind.VAE: ({"height", "width"}, set[str]()),
}


def work_keys(kind: ComponentKind, generator: GeneratorKind | None) -> tuple[set[str], set[str]]:
    """(required, optional) work quantity names for a component."""
    if kind is ComponentKind.ENCODER:
        return ENCODER_WORK
    if kind is ComponentKind.LLM:
        return LLM_WORK
    assert generator is not None
    return GENERATOR_WORK[generator]


Quantity = Annotated[Distribution, BeforeValidator(coerce_distribution)]
Work = dict[Name, dict[Name, Quantity]]


class RequestType(SpecModel):
    """One request type, e.g. ``t2a`` (text in, audio out).

    ``path`` lists the components the request traverses (a connected subgraph ending at the
    component that produces ``output``); ``work`` gives, per component on the path, the sizes
    the cost model needs (see :data:`ENCODER_WORK`, :data:`LLM_WORK`, :data:`GENERATOR_WORK`).
    """

    name: Name
    description: str = ""
    inputs: Annotated[list[Modality], Field(min_length=1)]
    output: Modality
    path: Annotated[list[Name], Field(min_length=1)]
    work: Work
    first_response: FirstResponse
    path_class: PathClass
    # vLLM priority used to carry the class through an OpenAI-style API (HorizonServe section 5)
    priority: Priority | None = None
    source: str = ""  # where the size distributions come from

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            out = data.get("output")
            try:
                modality = Modality(out)
            except ValueError:
                return data
            data.setdefault("first_response", DEFAULT_METRIC[modality].value)
            data.setdefault(
                "path_class",
                (PathClass.SHORT if modality is Modality.TEXT else PathClass.LONG).value,
            )
        return data

    @model_validator(mode="after")
    def _local_checks(self) -> RequestType:
        if len(set(self.path)) != len(self.path):
            dup = sorted({c for c in self.path if self.path.count(c) > 1})
            raise ValueError(f"path lists component(s) {dup} more than once")
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError("inputs lists a modality more than once")
        if self.path_class is PathClass.LONG and self.first_response is FirstResponse.TTFT:
            raise ValueError("a long-path request cannot have its first response at TTFT")
        return self

    @property
    def label(self) -> str:
        """ServeGen-style label, e.g. ``T+I+A->A``."""
        letters = {"text": "T", "image": "I", "video": "V", "audio": "A"}
        ins = "+".join(letters[m.value] for m in self.inputs)
        return f"{ins}->{letters[self.output.value]}"
