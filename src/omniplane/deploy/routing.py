"""The router's input: which deployments serve each request type, with what probability.

A routing file (``kind: routing``, YAML or JSON) says, per request type of a model, the
deployments that serve it, each reached through its own OpenAI endpoint, and the probability
with which the plan sends a request of that type there::

    kind: routing
    name: qwen3-omni-8xa100          # optional, for metrics and logs
    model: qwen3-omni                # catalog name, or a model file relative to this file
    seed: 0                          # the router's draws (one stream per type)
    types:
      ti2t:
        slo_ms: 2000                 # optional: the plan's first-response target
        routes:
          - {deployment: thinker-a, url: "http://10.0.0.5:8000", p: 0.7}
          - {deployment: thinker-b, url: "http://10.0.0.6:8000", p: 0.3}

Each type's ``p`` add up to 1; a deployment name means one URL wherever it appears; every type
is one of the model's request types. :func:`load_routing` also reads the ``routing.yaml`` that
``omniplane export --target vllm-omni`` writes (``kind: omniplane-routing``,
:mod:`omniplane.deploy.routing_file`), converted by :func:`from_export`. The router classifies
a request into a type (the ``X-Omniplane-Type`` header, else the body's ``omniplane.type``,
else its input parts and requested ``modalities`` against the model's request types) and
draws a deployment (:class:`Picker`). No web framework here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from omniplane.deploy.api import OUTPUTS, PART_MODALITY, BadRequest
from omniplane.deploy.routing_file import KIND as EXPORT_KIND
from omniplane.deploy.routing_file import RoutingFile
from omniplane.spec import Modality, ModelSpec
from omniplane.spec.base import Document, Fraction, Name, PositiveFloat, Seed, SpecModel
from omniplane.spec.errors import SpecError, SpecIssue
from omniplane.spec.load import load_model, parse
from omniplane.spec.yamlio import read_yaml

TYPE_HEADER = "x-omniplane-type"
P_TOLERANCE = 1e-6  # each type's probabilities must add up to 1 within this


class Route(SpecModel):
    """One deployment serving a type: its name, its OpenAI endpoint's base URL, its share."""

    deployment: Name
    url: str = Field(description="base URL of the deployment's OpenAI server, e.g. http://127.0.0.1:8001")
    p: Fraction

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")) or len(v) > 2048 or any(c.isspace() for c in v):
            raise ValueError(f"expected an http:// or https:// base URL, got {v!r}")
        return v.rstrip("/").removesuffix("/v1")


class TypeRoutes(SpecModel):
    """The deployments serving one request type, and the plan's target for it."""

    routes: tuple[Route, ...] = Field(min_length=1)
    slo_ms: PositiveFloat | None = None

    @model_validator(mode="after")
    def _shares(self) -> TypeRoutes:
        names = [r.deployment for r in self.routes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"deployment {dup[0]!r} is listed twice")
        total = sum(r.p for r in self.routes)
        if abs(total - 1.0) > P_TOLERANCE:
            raise ValueError(f"the routes' p add up to {total:g}; expected 1")
        return self


class RoutingSpec(Document):
    """``kind: routing``: per request type, the deployments and their probabilities."""

    kind: Literal["routing"] = "routing"
    name: str = ""
    model: str = Field(min_length=1)
    seed: Seed = 0
    types: dict[Name, TypeRoutes] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_url_per_deployment(self) -> RoutingSpec:
        seen: dict[str, str] = {}
        for t, tr in self.types.items():
            for r in tr.routes:
                if seen.setdefault(r.deployment, r.url) != r.url:
                    raise ValueError(f"types.{t}: deployment {r.deployment!r} has url {r.url}, but "
                                     f"{seen[r.deployment]} elsewhere; one deployment, one URL")
        return self

    @property
    def deployments(self) -> dict[str, str]:
        return {r.deployment: r.url for tr in self.types.values() for r in tr.routes}


@dataclass(frozen=True)
class Routing:
    """A loaded routing file with its model."""

    spec: RoutingSpec
    model: ModelSpec
    path: str = ""


SERVE_APP_ONLY = ("resolved by the Ray Serve router application; give url for `omniplane route` "
                  "(the deployment's OpenAI base URL, e.g. http://10.0.0.5:8001)")


def from_export(doc: RoutingFile, urls: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``kind: routing`` data of an export's routing document: per type, routes
    ``{deployment, url, p}`` (the endpoint's ``url``, else ``urls[deployment]`` for a
    ``serve_app`` one) and the document's ``slo_ms``. KeyError for a deployment with neither."""
    urls = urls or {}

    def url(name: str) -> str:
        ep = doc.deployments[name]
        return ep.url if ep.url is not None else urls[name]

    types: dict[str, Any] = {}
    for t, shares in doc.types.items():
        types[t] = {"routes": [{"deployment": s.deployment, "url": url(s.deployment), "p": s.p}
                               for s in shares]}
        if t in doc.slo_ms:
            types[t]["slo_ms"] = doc.slo_ms[t]
    return {"kind": "routing", "name": doc.plan, "model": doc.model, "types": types}


def load_routing(path: str | Path) -> Routing:
    """Read and check a routing file (``kind: routing``, or an export's ``kind:
    omniplane-routing`` with ``url`` endpoints); :class:`SpecError` names file, field and what
    was expected."""
    path = Path(path)
    data, positions = read_yaml(path)
    if isinstance(data, dict) and data.get("kind") == EXPORT_KIND:
        doc = parse(RoutingFile, data, str(path), positions)
        for name, ep in doc.deployments.items():
            if ep.serve_app is not None:
                at = ("deployments", name, "serve_app")
                raise SpecError(str(path), [SpecIssue(at, SERVE_APP_ONLY, *positions.get(at, (None, None)))])
        data, positions = from_export(doc), {}
    spec = parse(RoutingSpec, data, str(path), positions)
    try:
        model = load_model(spec.model, base_dir=path.parent)
    except (KeyError, OSError) as exc:
        raise SpecError(str(path), [SpecIssue(("model",), str(exc).strip('"'),
                                              *positions.get(("model",), (None, None)))]) from None
    unknown = [t for t in spec.types if t not in model.type_names]
    if unknown:
        raise SpecError(str(path), [SpecIssue(("types", unknown[0]),
                                              f"{model.name} has no request type {unknown[0]!r} "
                                              f"(its types: {', '.join(model.type_names)})",
                                              *positions.get(("types", unknown[0]), (None, None)))])
    return Routing(spec, model, str(path))


def routing_from(data: Mapping[str, Any], model: ModelSpec) -> Routing:
    """A routing spec from parsed data and a model already loaded (tests, callers in memory)."""
    spec = parse(RoutingSpec, dict(data))
    unknown = [t for t in spec.types if t not in model.type_names]
    if unknown:
        raise SpecError(None, [SpecIssue(("types", unknown[0]), f"{model.name} has no request type "
                                                               f"{unknown[0]!r}")])
    return Routing(spec, model)


# ---- classification ---------------------------------------------------------------------------
def _modalities(body: Mapping[str, Any], path: str) -> tuple[set[Modality], Modality]:
    """The input modalities (content parts) and the output modality a request asks for."""
    inputs: set[Modality] = set()
    if path.endswith("/chat/completions"):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages", "expected a non-empty list of messages")
        for i, m in enumerate(messages):
            content = m.get("content") if isinstance(m, dict) else None
            if content is None or isinstance(content, str):
                inputs.add(Modality.TEXT)
                continue
            if not isinstance(content, list):
                raise BadRequest(f"messages[{i}].content", "expected a string or a list of content parts")
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind not in PART_MODALITY:
                    raise BadRequest(f"messages[{i}].content[{j}].type",
                                     f"expected one of {', '.join(PART_MODALITY)}, got {json.dumps(kind)}")
                inputs.add(PART_MODALITY[kind])
    else:
        inputs.add(Modality.TEXT)  # /v1/completions: a prompt (text or token ids)
    wanted = body.get("modalities", ["text"])
    if (not isinstance(wanted, list) or not wanted
            or any(not isinstance(x, str) or x not in OUTPUTS for x in wanted)):
        raise BadRequest("modalities", f"expected a non-empty list of {', '.join(OUTPUTS)}, "
                                       f"got {json.dumps(wanted)}")
    output = (Modality.AUDIO if "audio" in wanted else Modality.IMAGE if "image" in wanted
              else Modality.TEXT)
    return inputs, output


def classify(routing: Routing, body: Any, path: str, header: str | None = None) -> str:
    """The request type of ``body`` (sent to ``path``): the ``X-Omniplane-Type`` header, else
    the body's ``omniplane.type``, else the first of the routed types whose inputs and output
    match the request's content parts and ``modalities``. :class:`BadRequest` names the field
    when none matches or the named type is not routed."""
    routed = list(routing.spec.types)
    if not isinstance(body, dict):
        raise BadRequest("body", "expected a JSON object")
    ext = body.get("omniplane")
    named, param = (header, "X-Omniplane-Type") if header else (
        (ext.get("type"), "omniplane.type") if isinstance(ext, dict) and "type" in ext else (None, ""))
    if named is not None:
        if not isinstance(named, str) or named not in routed:
            raise BadRequest(param, f"expected one of the routed types {', '.join(routed)}, "
                                    f"got {json.dumps(named)}")
        return named
    inputs, output = _modalities(body, path)
    for rt in routing.model.request_types:
        if rt.name in routing.spec.types and set(rt.inputs) == inputs and rt.output is output:
            return rt.name
    have = "; ".join(f"{rt.name}: {'+'.join(m.value for m in rt.inputs)} -> {rt.output.value}"
                     for rt in routing.model.request_types if rt.name in routing.spec.types)
    raise BadRequest("messages" if path.endswith("/chat/completions") else "prompt",
                     f"no routed request type of {routing.model.name} takes "
                     f"{'+'.join(sorted(m.value for m in inputs))} and returns {output.value} ({have})")


# ---- picking ----------------------------------------------------------------------------------
class Picker:
    """Draws each request's deployment with the plan's per-type probabilities, from one seeded
    stream per type (so one type's traffic never shifts another's draws), and names the
    deployment to retry on: another one serving the type, drawn by the others' probabilities
    (ones with p = 0 only if no other is left)."""

    def __init__(self, spec: RoutingSpec) -> None:
        self.spec = spec
        self._rng = {t: random.Random(f"{spec.seed}:{t}") for t in spec.types}

    def first(self, type_name: str) -> Route:
        routes = self.spec.types[type_name].routes
        return _draw(self._rng[type_name], routes)

    def retry(self, type_name: str, tried: set[str]) -> Route | None:
        return self.pick(type_name, tried)

    def pick(self, type_name: str, exclude: set[str]) -> Route | None:
        """A deployment serving the type other than those in ``exclude`` (tried, or out of
        rotation), drawn by the remaining ones' probabilities renormalised; None if none is left."""
        rest = [r for r in self.spec.types[type_name].routes if r.deployment not in exclude]
        if not rest:
            return None
        if sum(r.p for r in rest) <= 0:
            return rest[0]
        return _draw(self._rng[type_name], rest)


def _draw(rng: random.Random, routes: tuple[Route, ...] | list[Route]) -> Route:
    total = sum(r.p for r in routes)
    x = rng.random() * total
    acc = 0.0
    for r in routes:
        acc += r.p
        if x < acc and r.p > 0:
            return r
    return next(r for r in reversed(routes) if r.p > 0)
