"""The routing file ``omniplane export`` writes and the router (:mod:`omniplane.deploy.gateway`)
reads: per request type, which vLLM-Omni deployment serves it with what probability, and where
each deployment's OpenAI endpoint is::

    kind: omniplane-routing
    version: 1
    plan: qwen3-omni-2dep          # the plan it comes from
    model: qwen3-omni              # omniplane catalog model
    served_model: Qwen/Qwen3-Omni-30B-A3B-Instruct   # the "model" the deployments serve
    deployments:
      d0:                          # exactly one of url / serve_app
        url: http://host0:8001     # the deployment's OpenAI API (vllm serve ... --omni --port 8001)
        gpus: 4
        nodes: [thinker, talker+code2wav]          # the plan nodes it runs
      d1: {serve_app: d1, gpus: 4, nodes: [...]}   # on Ray Serve: the Serve application's
                                   # OmniServer deployment; its handle's url() gives the endpoint
    types:                         # per request type: deployments and probabilities (sum 1)
      ti2t: [{deployment: d0, p: 0.5}, {deployment: d1, p: 0.5}]
      ti2a: [{deployment: d0, p: 1.0}]
    slo_ms: {ti2t: 244.5}          # the plan's first-response targets, when it has them

A request type's probabilities are the plan's route probabilities summed per deployment. Load
with :func:`load_routing` (errors name the file and the field). ``export --target vllm-omni``
writes ``routing.yaml`` with ``url`` endpoints (``hostN`` stands for the host's address); the Ray
targets write ``serve_app`` endpoints and also pass the document inline to the router
application as its ``args.routing`` (``import_path: omniplane.deploy.gateway_serve:app``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from omniplane.spec.base import Document, Fraction, Name, SpecModel

KIND = "omniplane-routing"
_TOL = 1e-6


class Endpoint(SpecModel):
    """Where one deployment's OpenAI API is: a URL, or the Serve application running it."""

    url: str | None = Field(default=None, pattern=r"^https?://")
    serve_app: Name | None = None
    gpus: int = Field(ge=1)
    nodes: list[Name] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one(self) -> Endpoint:
        if (self.url is None) == (self.serve_app is None):
            raise ValueError("give exactly one of url (an OpenAI endpoint) or serve_app (a Serve "
                             "application)")
        return self


class Share(SpecModel):
    deployment: Name
    p: Fraction


class RoutingFile(Document):
    """``kind: omniplane-routing`` (module docstring)."""

    kind: Literal["omniplane-routing"]
    version: Literal[1] = 1
    plan: str = ""
    model: Name
    served_model: str = Field(min_length=1)
    deployments: Annotated[dict[Name, Endpoint], Field(min_length=1)]
    types: Annotated[dict[Name, Annotated[list[Share], Field(min_length=1)]], Field(min_length=1)]
    slo_ms: dict[Name, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> RoutingFile:
        for t, shares in self.types.items():
            unknown = [s.deployment for s in shares if s.deployment not in self.deployments]
            if unknown:
                raise ValueError(f"types.{t}: unknown deployment(s) {unknown} "
                                 f"(expected one of: {', '.join(self.deployments)})")
            total = sum(s.p for s in shares)
            if abs(total - 1) > _TOL:
                raise ValueError(f"types.{t}: probabilities sum to {total:.12g}, not 1")
        return self


def load_routing(path: str | Path) -> RoutingFile:
    """The routing file at ``path``; :class:`omniplane.spec.errors.SpecError` naming the file and
    field when it is not one."""
    from omniplane.spec.load import parse
    from omniplane.spec.yamlio import read_yaml

    data, positions = read_yaml(Path(path))
    return parse(RoutingFile, data, str(path), positions)
