"""The router's routing: the routing file (:mod:`omniplane.deploy.routing_file`, the one
``omniplane export`` writes) with its model loaded, each deployment's URL and upstream key
resolved, and the router's logic on it.

:func:`load_routing` reads a routing file for ``omniplane route`` (its deployments must have a
``url``; ``serve_app`` ones are resolved by the Ray Serve router application,
:mod:`omniplane.deploy.gateway_serve`, which calls :func:`routing_from`). Each ``api_key_env``
is read from the environment here, once; a variable that is unset or empty is an error naming
the file, the field and the variable. The router classifies a request into a type (the
``X-Omniplane-Type`` header, else the body's ``omniplane.type``, else its input parts and
requested ``modalities`` against the model's request types) and draws a deployment
(:class:`Picker`). No web framework here.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omniplane.deploy.api import OUTPUTS, PART_MODALITY, BadRequest
from omniplane.deploy.routing_file import RoutingFile
from omniplane.spec import Modality, ModelSpec
from omniplane.spec.errors import SpecError, SpecIssue
from omniplane.spec.load import load_model, parse
from omniplane.spec.yamlio import read_yaml

TYPE_HEADER = "x-omniplane-type"
SERVE_APP_ONLY = ("resolved by the Ray Serve router application; give url for `omniplane route` "
                  "(the deployment's OpenAI base URL, e.g. http://10.0.0.5:8001)")


@dataclass(frozen=True)
class Route:
    """One deployment serving a type: its name, its OpenAI endpoint's base URL, its share."""

    deployment: str
    url: str
    p: float


@dataclass(frozen=True)
class Routing:
    """A routing file ready for the router: its document, its model, per type the routes (with
    each deployment's URL), and each deployment's upstream key (from ``api_key_env``)."""

    doc: RoutingFile
    model: ModelSpec
    deployments: Mapping[str, str]  # deployment -> base URL
    path: str = ""
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # deployment -> its API key
    routes: Mapping[str, tuple[Route, ...]] = field(init=False)

    def __post_init__(self) -> None:
        routes = {t: tuple(Route(s.deployment, self.deployments[s.deployment], s.p) for s in shares)
                  for t, shares in self.doc.types.items()}
        object.__setattr__(self, "routes", routes)

    @property
    def name(self) -> str:
        return self.doc.plan

    @property
    def seed(self) -> int:
        return self.doc.seed

    @property
    def slo_ms(self) -> Mapping[str, float]:
        return self.doc.slo_ms


def _issue(path: str | None, at: tuple[str | int, ...], message: str, positions: Any = None) -> SpecError:
    return SpecError(path, [SpecIssue(at, message, *(positions or {}).get(at, (None, None)))])


def routing_from(doc: RoutingFile | Mapping[str, Any], model: ModelSpec | None = None,
                 urls: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
                 path: str | None = None, positions: Any = None, base_dir: Path | None = None) -> Routing:
    """The routing of a routing document: ``serve_app`` deployments take their URL from
    ``urls``, every ``api_key_env`` is read from ``environ`` (default: the process's), the
    model is loaded unless given. :class:`SpecError` names ``path``, the field and what was
    expected."""
    if not isinstance(doc, RoutingFile):
        doc = parse(RoutingFile, dict(doc), path)
    env = os.environ if environ is None else environ
    given = urls or {}
    resolved: dict[str, str] = {}
    keys: dict[str, str] = {}
    for name, ep in doc.deployments.items():
        url = ep.url if ep.url is not None else given.get(name)
        if url is None:
            raise _issue(path, ("deployments", name, "serve_app"), SERVE_APP_ONLY, positions)
        resolved[name] = url
        if ep.api_key_env is not None:
            key = env.get(ep.api_key_env, "").strip()
            if not key:
                raise _issue(path, ("deployments", name, "api_key_env"),
                             f"the environment variable {ep.api_key_env} is unset or empty; expected "
                             f"deployment {name}'s API key in it", positions)
            keys[name] = key
    if model is None:
        try:
            model = load_model(doc.model, base_dir=base_dir)
        except (KeyError, OSError) as exc:
            raise _issue(path, ("model",), str(exc).strip('"'), positions) from None
    unknown = [t for t in doc.types if t not in model.type_names]
    if unknown:
        raise _issue(path, ("types", unknown[0]), f"{model.name} has no request type {unknown[0]!r} "
                                                  f"(its types: {', '.join(model.type_names)})", positions)
    return Routing(doc, model, resolved, path or "", keys)


def load_routing(path: str | Path, environ: Mapping[str, str] | None = None) -> Routing:
    """Read and check a routing file for ``omniplane route`` (every deployment with a ``url``);
    :class:`SpecError` names file, field and what was expected."""
    path = Path(path)
    data, positions = read_yaml(path)
    doc = parse(RoutingFile, data, str(path), positions)
    return routing_from(doc, environ=environ, path=str(path), positions=positions, base_dir=path.parent)


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
    routed = list(routing.routes)
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
        if rt.name in routing.routes and set(rt.inputs) == inputs and rt.output is output:
            return rt.name
    have = "; ".join(f"{rt.name}: {'+'.join(m.value for m in rt.inputs)} -> {rt.output.value}"
                     for rt in routing.model.request_types if rt.name in routing.routes)
    raise BadRequest("messages" if path.endswith("/chat/completions") else "prompt",
                     f"no routed request type of {routing.model.name} takes "
                     f"{'+'.join(sorted(m.value for m in inputs))} and returns {output.value} ({have})")


# ---- picking ----------------------------------------------------------------------------------
class Picker:
    """Draws each request's deployment with the plan's per-type probabilities, from one seeded
    stream per type (so one type's traffic never shifts another's draws), and names the
    deployment to retry on: another one serving the type, drawn by the others' probabilities
    (ones with p = 0 only if no other is left)."""

    def __init__(self, routing: Routing) -> None:
        self.routes = routing.routes
        self._rng = {t: random.Random(f"{routing.seed}:{t}") for t in routing.routes}

    def first(self, type_name: str) -> Route:
        return _draw(self._rng[type_name], self.routes[type_name])

    def retry(self, type_name: str, tried: set[str]) -> Route | None:
        return self.pick(type_name, tried)

    def pick(self, type_name: str, exclude: set[str]) -> Route | None:
        """A deployment serving the type other than those in ``exclude`` (tried, or out of
        rotation), drawn by the remaining ones' probabilities renormalised; None if none is left."""
        rest = [r for r in self.routes[type_name] if r.deployment not in exclude]
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
