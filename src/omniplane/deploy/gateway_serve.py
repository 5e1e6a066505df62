"""The router (:class:`omniplane.deploy.gateway.Gateway`) as a Ray Serve application: the
``router`` application of ``omniplane export --target ray-serve | kuberay``
(``import_path: omniplane.deploy.gateway_serve:app``). Imports Ray.

Its args: ``routing``, the export's routing document (``kind: omniplane-routing``,
:mod:`omniplane.deploy.routing_file`), and optional ``limits`` (:func:`gateway_options`: the
clients' API-key digests, never a key, and the request limits; ``omniplane deploy --engine
vllm-omni`` passes its own). At start, the ``Router`` replica resolves each
``serve_app`` deployment to its OpenAI endpoint by calling ``url()`` on that Serve application's
ingress (``OmniServer``, :mod:`omniplane.deploy.omni_server`; the call waits for its vLLM-Omni
server to be up), builds the router's routing from the document and those URLs
(:func:`omniplane.deploy.routing.routing_from`) and serves the Gateway as its ASGI app. A
deployment's ``api_key_env`` is read in the Router replica's environment: set it on the cluster's
nodes (a ``runtime_env`` would put the key in clear in the Serve config).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from ray import serve
from ray.serve import Application
from ray.serve.exceptions import RayServeException

from omniplane.deploy.auth import Guard
from omniplane.deploy.gateway import Gateway, GatewayOptions
from omniplane.deploy.replica_bind import replica_grpc_on_node_address
from omniplane.deploy.routing import Routing, routing_from
from omniplane.deploy.routing_file import RoutingFile
from omniplane.spec.load import parse

APP_LOOKUP_S = 120.0  # assumption: the config's other applications are registered within 2 minutes
URL_TIMEOUT_S = 3600.0  # assumption: a vLLM-Omni deployment loads its checkpoints within an hour


async def resolve_urls(doc: RoutingFile, lookup_s: float = APP_LOOKUP_S,
                       timeout_s: float = URL_TIMEOUT_S) -> dict[str, str]:
    """Each ``serve_app`` deployment's OpenAI base URL, from its application's ``url()``."""
    urls: dict[str, str] = {}
    for name, ep in doc.deployments.items():
        if ep.serve_app is None:
            continue
        end = time.monotonic() + lookup_s
        while True:
            try:
                handle = serve.get_app_handle(ep.serve_app)
                break
            except RayServeException:
                if time.monotonic() > end:
                    raise RuntimeError(f"routing.deployments.{name}.serve_app: no Serve application "
                                       f"{ep.serve_app!r} after {lookup_s:g} s") from None
                await asyncio.sleep(1.0)
        urls[name] = str(await asyncio.wait_for(handle.url.remote(), timeout_s))
    return urls


@serve.deployment(name="Router", num_replicas=1, max_ongoing_requests=1024)
@serve.ingress()
class Router:
    """Resolves the deployments' URLs, then serves the Gateway (module docstring)."""

    async def __init__(self, routing: dict[str, Any],  # type: ignore[misc]  # Serve awaits it
                       limits: dict[str, Any] | None = None) -> None:
        replica_grpc_on_node_address()
        doc = parse(RoutingFile, routing, "router args: routing")
        options = gateway_options(limits)
        urls = await resolve_urls(doc)
        self.routing: Routing = routing_from(doc, urls=urls, path="router args: routing")
        self.gateway = Gateway(self.routing, options)

    def __serve_build_asgi_app__(self) -> Gateway:
        return self.gateway


LIMITS = {"key_digests": list, "max_body_bytes": int, "max_prompt_tokens": int, "body_timeout_s": float,
          "max_in_flight": int, "deadline_s": float}  # router args: limits (all optional)


def gateway_options(limits: dict[str, Any] | None) -> GatewayOptions:
    """The router's admission and limits from its ``limits`` arg (absent: the defaults, open to
    every client); ValueError naming the field for anything else."""
    given = dict(limits or {})
    for name, value in given.items():
        kind = LIMITS.get(name)
        if kind is None:
            raise ValueError(f"router args: limits.{name}: unknown (expected: {', '.join(LIMITS)})")
        if kind is list:
            ok = isinstance(value, list) and all(isinstance(d, str) and re.fullmatch("[0-9a-f]{64}", d)
                                                 for d in value)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        if not ok:
            raise ValueError(f"router args: limits.{name}: {value!r} is not "
                             + ("a list of SHA-256 hex digests" if kind is list else "a positive number"))
    guard_limits = {k: LIMITS[k](given[k]) for k in ("max_body_bytes", "max_prompt_tokens", "body_timeout_s")
                    if k in given}
    guard = Guard(tuple(given.get("key_digests", ())), **guard_limits)
    default = GatewayOptions()
    return GatewayOptions(guard=guard, max_in_flight=int(given.get("max_in_flight", default.max_in_flight)),
                          deadline_s=float(given.get("deadline_s", default.deadline_s)))


def app(args: dict[str, Any]) -> Application:
    """The router application (``import_path: omniplane.deploy.gateway_serve:app``); checks the
    routing document and the limits before binding."""
    doc = parse(RoutingFile, args.get("routing"), "router args: routing")
    gateway_options(args.get("limits"))
    bound: Application = Router.bind(  # type: ignore[attr-defined]
        doc.model_dump(mode="json", exclude_none=True), args.get("limits"))
    return bound
