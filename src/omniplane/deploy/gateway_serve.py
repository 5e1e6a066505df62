"""The router (:class:`omniplane.deploy.gateway.Gateway`) as a Ray Serve application: the
``router`` application of ``omniplane export --target ray-serve | kuberay``
(``import_path: omniplane.deploy.gateway_serve:app``). Imports Ray.

Its args: ``routing``, the export's routing document (``kind: omniplane-routing``,
:mod:`omniplane.deploy.routing_file`). At start, the ``Router`` replica resolves each
``serve_app`` deployment to its OpenAI endpoint by calling ``url()`` on that Serve application's
ingress (``OmniServer``, :mod:`omniplane.deploy.omni_server`; the call waits for its vLLM-Omni
server to be up), builds the router's routing from the document and those URLs
(:func:`omniplane.deploy.routing.routing_from`) and serves the Gateway as its ASGI app. A
deployment's ``api_key_env`` is read in the Router replica's environment: set it on the cluster's
nodes (a ``runtime_env`` would put the key in clear in the Serve config).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ray import serve
from ray.serve import Application
from ray.serve.exceptions import RayServeException

from omniplane.deploy.gateway import Gateway
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

    async def __init__(self, routing: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits it
        doc = parse(RoutingFile, routing, "router args: routing")
        urls = await resolve_urls(doc)
        self.routing: Routing = routing_from(doc, urls=urls, path="router args: routing")
        self.gateway = Gateway(self.routing)

    def __serve_build_asgi_app__(self) -> Gateway:
        return self.gateway


def app(args: dict[str, Any]) -> Application:
    """The router application (``import_path: omniplane.deploy.gateway_serve:app``); checks the
    routing document before binding."""
    doc = parse(RoutingFile, args.get("routing"), "router args: routing")
    bound: Application = Router.bind(doc.model_dump(mode="json", exclude_none=True))  # type: ignore[attr-defined]
    return bound
