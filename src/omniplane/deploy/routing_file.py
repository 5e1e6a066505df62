"""The routing file: ``omniplane export`` writes it and the router (``omniplane route``,
:mod:`omniplane.deploy.gateway`) reads it. Per request type, which deployment serves it with what
probability, and where each deployment's OpenAI endpoint is::

    kind: omniplane-routing
    version: 1
    plan: qwen3-omni-2dep          # the plan it comes from (optional)
    model: qwen3-omni              # catalog model, or a model file relative to this file
    served_model: Qwen/Qwen3-Omni-30B-A3B-Instruct   # the "model" the deployments serve
    seed: 0                        # the router's draws (one stream per type; optional)
    deployments:
      d0:                          # exactly one of url / serve_app
        url: http://host0:8001     # the deployment's OpenAI API (vllm serve ... --omni --port 8001)
        api_key_env: D0_KEY        # optional: the environment variable holding its key
        gpus: 4                    # optional, for people
        nodes: [thinker, talker+code2wav]          # the plan nodes it runs (optional)
      d1: {serve_app: d1, gpus: 4, nodes: [...]}   # on Ray Serve: the Serve application's
                                   # OmniServer deployment; its handle's url() gives the endpoint
    types:                         # per request type: deployments and probabilities (sum 1)
      ti2t: [{deployment: d0, p: 0.5}, {deployment: d1, p: 0.5}]
      ti2a: [{deployment: d0, p: 1.0}]
    slo_ms: {ti2t: 244.5}          # the plan's first-response targets, when it has them

A request type's probabilities are the plan's route probabilities summed per deployment. A
deployment's key is never in the file: ``api_key_env`` names the variable the router reads it
from, and the router sends it as ``Authorization: Bearer`` to that deployment only. Read with
:func:`read_routing_file` (errors name the file and the field); the router's
:func:`omniplane.deploy.routing.load_routing` also loads the model. ``export --target
vllm-omni`` writes ``routing.yaml`` with ``url`` endpoints (``hostN`` stands for the host's
address); the Ray targets write ``serve_app`` endpoints and pass the document inline to the
router application as its ``args.routing`` (``import_path: omniplane.deploy.gateway_serve:app``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from omniplane.spec.base import Document, Fraction, Name, Seed, SpecModel

KIND = "omniplane-routing"
_TOL = 1e-6


class Endpoint(SpecModel):
    """Where one deployment's OpenAI API is: a URL, or the Serve application running it."""

    url: str | None = Field(default=None, description="base URL of the deployment's OpenAI server, "
                                                      "e.g. http://10.0.0.5:8001")
    serve_app: Name | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
                                    description="environment variable holding the deployment's API key")
    gpus: int | None = Field(default=None, ge=1)
    nodes: tuple[Name, ...] = ()

    @field_validator("url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.startswith(("http://", "https://")) or len(v) > 2048 or any(c.isspace() for c in v):
            raise ValueError(f"expected an http:// or https:// base URL, got {v!r}")
        return v.rstrip("/").removesuffix("/v1")

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
    model: str = Field(min_length=1, max_length=4096,
                       description="catalog model name, or a model file relative to the routing file")
    served_model: str = Field(min_length=1)
    seed: Seed = 0
    deployments: Annotated[dict[Name, Endpoint], Field(min_length=1)]
    types: Annotated[dict[Name, tuple[Share, ...]], Field(min_length=1)]
    slo_ms: dict[Name, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> RoutingFile:
        for t, shares in self.types.items():
            if not shares:
                raise ValueError(f"types.{t}: expected at least one {{deployment, p}}, got none")
            unknown = [s.deployment for s in shares if s.deployment not in self.deployments]
            if unknown:
                raise ValueError(f"types.{t}: unknown deployment(s) {unknown} "
                                 f"(expected one of: {', '.join(self.deployments)})")
            names = [s.deployment for s in shares]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"types.{t}: deployment {dup[0]!r} is listed twice")
            total = sum(s.p for s in shares)
            if abs(total - 1) > _TOL:
                raise ValueError(f"types.{t}: probabilities sum to {total:.12g}; expected 1")
        extra = [t for t in self.slo_ms if t not in self.types]
        if extra:
            raise ValueError(f"slo_ms.{extra[0]}: not a routed type "
                             f"(expected one of: {', '.join(self.types)})")
        return self


def read_routing_file(path: str | Path) -> RoutingFile:
    """The routing file at ``path``; :class:`omniplane.spec.errors.SpecError` naming the file and
    field when it is not one."""
    from omniplane.spec.load import parse
    from omniplane.spec.yamlio import read_yaml

    data, positions = read_yaml(Path(path))
    return parse(RoutingFile, data, str(path), positions)
