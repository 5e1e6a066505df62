"""``omniplane route``: the router in front of running deployments (omniplane.deploy.gateway)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.output import notice
from omniplane.cli.serving_options import (
    ApiKeyOpt,
    DeadlineOpt,
    MaxBodyOpt,
    MaxInFlightOpt,
    MaxPromptOpt,
    installed,
    port_free,
)
from omniplane.deploy.auth import API_KEY_ENV, MAX_BODY_BYTES, MAX_PROMPT_TOKENS, Guard, is_loopback
from omniplane.deploy.conn_watch import IDLE_S, bounded_head, close_idle
from omniplane.deploy.gateway_health import EJECT_AFTER, EJECT_BASE_S, EJECT_MAX_S, PROBE_INTERVAL_S
from omniplane.deploy.ingress import REQUEST_DEADLINE_S

GRACE_S = 5  # assumption: streams still open get 5 s after SIGINT/SIGTERM before they are cut
DAY_S = 86_400


def _seconds(name: str, help: str) -> Any:
    return opt.float_opt(name, help=help, lo=0, hi=DAY_S, lo_open=True, metavar="S")


def route(
    routing_file: Annotated[Path, opt.argument("Routing file (the routing.yaml of omniplane export, "
                                               "with url endpoints): per request type, the deployments' "
                                               "URLs and probabilities.", opt.InputPath(),
                                               "ROUTING_FILE")],
    host: Annotated[str, opt.host_opt("--host", help="Address to listen on; beyond loopback it needs "
                                      "--api-key.")] = "127.0.0.1",
    port: Annotated[int, opt.int_opt("--port", help="HTTP port to listen on.", lo=1, hi=65535)] = 8000,
    max_in_flight: MaxInFlightOpt = 1024,
    api_key: ApiKeyOpt = None,
    max_body_mb: MaxBodyOpt = MAX_BODY_BYTES / 2**20,
    max_prompt_tokens: MaxPromptOpt = MAX_PROMPT_TOKENS,
    deadline_s: DeadlineOpt = REQUEST_DEADLINE_S,
    eject_after: Annotated[int, opt.int_opt(
        "--eject-after", help="Failures in a row that take a deployment out of rotation.", lo=1,
        hi=1000)] = EJECT_AFTER,
    eject_base_s: Annotated[float, _seconds(
        "--eject-base-s", "Seconds out of rotation after a first ejection; doubles with each ejection in "
        "a row.")] = EJECT_BASE_S,
    eject_max_s: Annotated[float, _seconds("--eject-max-s", "Most seconds out of rotation (at least "
                                           "--eject-base-s).")] = EJECT_MAX_S,
    probe_interval_s: Annotated[float, _seconds(
        "--probe-interval-s", "Seconds between /health probes of an ejected deployment.")] = PROBE_INTERVAL_S,
    idle_s: Annotated[float, _seconds(
        "--idle-s", "Seconds a connection may go without a request in progress (half-sent headers, "
        "or after its answer) before it is closed.")] = IDLE_S,
) -> None:
    """Route OpenAI requests to the deployments a plan names, by request type and probability.

    Each request (POST /v1/chat/completions or /v1/completions) is classified into a request
    type, sent unchanged to a deployment drawn with the routing file's probabilities, and the
    engine's answer comes back unchanged (streamed as it arrives). A deployment that fails
    before answering is retried once on another; one that fails --eject-after times in a row leaves
    rotation (--eject-base-s, doubling, at most --eject-max-s), then its /health is probed every
    --probe-interval-s until it answers 200. A deployment's api_key_env names the variable holding
    its key (the client's --api-key is checked here, not forwarded). GET /metrics: per-type
    Prometheus metrics. Stops on Ctrl-C or SIGTERM: open streams end with an error event, requests
    not yet answered get 503.
    """
    if api_key is not None and not api_key.strip():
        fail("--api-key: the key is empty")
    if eject_max_s < eject_base_s:
        fail(f"--eject-max-s {eject_max_s:g}: below --eject-base-s {eject_base_s:g}; expected at least it")
    if not is_loopback(host) and not api_key:
        fail(f"--host {host}: binding beyond loopback lets anyone who can reach the port send work; "
             f"give --api-key KEY (or set {API_KEY_ENV}), or bind 127.0.0.1")
    if not (installed("starlette") and installed("uvicorn")):
        fail("the router needs starlette and uvicorn: pip install 'omniplane[deploy]'")
    from omniplane.deploy.routing import load_routing

    routing = load_routing(routing_file)
    port_free(host, port)
    import uvicorn

    from omniplane.deploy.gateway import Gateway, GatewayOptions
    from omniplane.deploy.gateway_health import HealthOptions

    guard = Guard.with_keys([api_key] if api_key else [], max_body_bytes=int(max_body_mb * 2**20),
                            max_prompt_tokens=max_prompt_tokens)
    os.environ.pop(API_KEY_ENV, None)
    health = HealthOptions(eject_after=eject_after, base_s=eject_base_s, max_s=eject_max_s,
                           probe_interval_s=probe_interval_s)
    gateway = Gateway(routing, GatewayOptions(max_in_flight=max_in_flight, guard=guard,
                                              deadline_s=deadline_s, health=health))
    for t, routes in routing.routes.items():
        shares = ", ".join(f"{r.deployment} {r.p:g}" for r in routes)
        notice(f"{t}: {shares}")
    notice(f"routing {len(routing.routes)} request types to {len(routing.deployments)} deployments at "
           f"http://{host}:{port} (Ctrl-C to stop)")
    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            gateway.stop_soon()  # open streams end now with an error event, not cut at GRACE_S

        async def startup(self, sockets: Any = None) -> None:
            self.config.http_protocol_class = bounded_head(self.config.http_protocol_class)
            await super().startup(sockets=sockets)

    server = Server(uvicorn.Config(gateway, host=host.strip("[]"), port=port, log_level="warning",
                                   access_log=False, lifespan="on", timeout_graceful_shutdown=GRACE_S))
    gateway.watch(lambda: close_idle(lambda: server.server_state.connections, idle_s))
    server.run()  # uvicorn stops on SIGINT and SIGTERM
    if not server.started:
        raise typer.Exit(1)
