"""Start (or join) a Ray cluster, deploy a plan on Ray Serve, kill a replica, tear down.

A local cluster binds to the loopback address only (node IP 127.0.0.1, no dashboard, HTTP proxy
on 127.0.0.1), so rehearsals and tests never listen on or send to other addresses. Ray replaces
a node address of 127.0.0.1 by the machine's routable address unless its single-machine switch
is set before Ray is imported (:func:`prefer_loopback`); this module imports Ray only inside
its functions so that callers can set it first.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from omniplane.deploy.orchestrator import deployment_name
from omniplane.deploy.reap import Proc, become_subreaper, deadline_on_signal, descendants, end_leftovers
from omniplane.errors import InputError
from omniplane.spec import ResolvedPlan

if TYPE_CHECKING:
    from omniplane.deploy.serve_app import DeployOptions

LOOPBACK = "127.0.0.1"
# Ray's switch for single-machine clusters (ray._private.ray_constants.ENABLE_RAY_CLUSTER, read
# when Ray is imported): off, services.resolve_ip_for_localhost keeps 127.0.0.1 as the node
# address instead of swapping in the routable one, and Ray's servers listen on loopback only.
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
log = logging.getLogger(__name__)


def prefer_loopback() -> None:
    """Make a local cluster started by this process (and its Ray processes, which inherit the
    environment) use 127.0.0.1. Call before Ray is imported; not for joining other machines."""
    os.environ.setdefault(SINGLE_MACHINE_ENV, "0")


ADDRESS_TIMEOUT_S = 5.0  # assumption: a Ray head that does not accept a TCP connection in 5 s is not there


def check_reachable(address: str, timeout_s: float = ADDRESS_TIMEOUT_S) -> None:
    """Fail fast, naming ``--address``, when no process accepts connections at a ``HOST:PORT``
    cluster address. ``ray.init`` would otherwise retry the address (and the machine's routable
    one) for minutes. ``auto`` and ``ray://`` addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, sep, port_s = address.rpartition(":")
    if not sep or not host or not port_s.isascii() or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise InputError(f"--address {address!r}: expected HOST:PORT of a Ray cluster's head (its GCS "
                         "address, e.g. 127.0.0.1:6379), 'auto', or a ray:// URL")
    try:
        socket.create_connection((host.strip("[]"), int(port_s)), timeout=timeout_s).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise InputError(f"--address {address}: no Ray cluster answers there ({reason} within "
                         f"{timeout_s:g} s); start one with 'ray start --head' or leave --address out "
                         "for a local cluster") from None


APP = "omniplane"
READY_TIMEOUT_S = 600  # assumption: generous for 17 replica processes starting on 2 busy cores
OMNI_READY_S = 2400.0  # vLLM-Omni deployments: omni_process.STARTUP_TIMEOUT_S (30 min) + 10 min of placement
# Ray Serve's controller marks its HTTP proxy unhealthy, kills it and starts another when the proxy
# is not ready within RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S (default 5 s) of starting, or misses
# RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S (default 10 s) health checks (ray.serve._private.constants,
# read in the controller). On 2 busy cores a proxy can take longer than 5 s to import and start, and
# serve.start then fails on the killed proxy (ActorDiedError). Assumption: 60 s for both, passed to
# the controller when this process creates it (Serve ignores them for a controller already running).
SERVE_CONTROLLER_ENV = {
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
    "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60",
}
# The bound is 10 s from SIGINT/SIGTERM to no process left; the rest of it is for SIGKILL
# to take effect and the process to exit on 2 busy cores (assumption).
STOP_WITHIN_S = 6.0
LEFTOVER_GRACE_S = 3.0  # assumption: a local node's processes end within 3 s of ray.shutdown
SERVE_START_ATTEMPTS = 3  # assumption: a proxy replaced during start-up is retried, not fatal


@contextmanager
def ray_cluster(
    address: str | None = None,
    *,
    port: int = 8000,
    host: str = LOOPBACK,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    resources: dict[str, float] | None = None,
    apps: tuple[str, ...] = (APP,),
    quiet: bool = True,
    dashboard_host: str | None = None,
    guard_start: Callable[[], AbstractContextManager[Any]] = nullcontext,
    stop_within_s: float | None = None,
    stop_status: Callable[[int], int] | None = None,
) -> Iterator[None]:
    """A Ray runtime with Serve's HTTP proxy on ``host:port``: a fresh local cluster on the
    loopback address (``address=None``), an existing one (``address``), or the one this process
    is already connected to. A local cluster runs Ray's dashboard only when ``dashboard_host``
    is given (Ray's dashboard has no authentication). ``guard_start`` wraps ``ray.init``: e.g.
    to hold signals until Ray can be shut down, and take back the handlers it replaced
    (omniplane.cli.errors.deferred_signals). On exit it shuts down what it started (a local
    cluster left on an exception, such as an interruption, goes down without Serve's graceful
    shutdown, which can take longer than a user waits), and otherwise only deletes the
    omniplane application. ``stop_within_s`` (a local cluster it starts): SIGINT or SIGTERM
    ends the process within that many seconds, its Ray processes killed, even while the main
    thread is blocked inside Ray and the signal's handler cannot run (deploy/reap.py
    ``deadline_on_signal``), with status ``stop_status(signal)`` (default 128 + the signal).
    ``num_gpus`` / ``resources``: what a local node offers (Ray's ``--num-gpus`` / ``--resources``;
    GPUs default to those Ray detects); ``apps``: the Serve applications deleted on leaving a
    cluster this process joined."""
    import ray

    started = not ray.is_initialized()
    before = descendants() if started and address is None else set()  # not Ray's: never ended here
    if started and address is None:
        become_subreaper()
    local = started and address is None
    deadline = (deadline_on_signal(before, stop_within_s, status=stop_status)
                if local and stop_within_s else None)
    with deadline or nullcontext():
        yield from _run(started, address, before, port=port, host=host, quiet=quiet,
                        dashboard_host=dashboard_host, guard_start=guard_start, apps=apps,
                        offer={"num_cpus": num_cpus, "num_gpus": num_gpus, "resources": resources})


def _run(started: bool, address: str | None, before: set[Proc], *, port: int, host: str,
         quiet: bool, dashboard_host: str | None, guard_start: Callable[[], AbstractContextManager[Any]],
         apps: tuple[str, ...], offer: dict[str, Any]) -> Iterator[None]:
    import ray
    from ray import serve

    failed = True
    try:
        if started:
            with guard_start():
                _init_local_or_join(address, quiet, dashboard_host, offer)
        _start_serve(host, port)
        yield
        failed = False
    finally:
        # A failure while tearing down is logged, never raised over the error that ended the body.
        try:
            if not ray.is_initialized():
                pass
            elif started and address is None:
                if not failed:
                    serve.shutdown()  # type: ignore[no-untyped-call]
            else:
                for name in apps:
                    serve.delete(name)
        except Exception:
            log.warning("Ray Serve did not shut down cleanly", exc_info=True)
        finally:
            if started:
                mine = descendants() - before if address is None else set()
                ray.shutdown()
                if address is None:  # as a subreaper, orphans stay descendants; new ones too
                    killed = end_leftovers(mine | (descendants() - before), LEFTOVER_GRACE_S)
                    for _ in range(3):  # what a dying process started meanwhile (Ray's agents)
                        time.sleep(0.3)
                        if not (late := descendants() - before):
                            break
                        killed += end_leftovers(late, 0.5)
                    if killed:
                        log.warning("ended %d Ray processes that outlived ray.shutdown", len(killed))


def _init_local_or_join(address: str | None, quiet: bool, dashboard_host: str | None,
                        offer: dict[str, Any]) -> None:
    import ray

    if address is None and ray.util.get_node_ip_address() != LOOPBACK:  # type: ignore[no-untyped-call]
        log.warning(
            "Ray was imported before %s=0 was set (omniplane.deploy.cluster.prefer_loopback): "
            "the local node will use the machine's routable address, not %s",
            SINGLE_MACHINE_ENV,
            LOOPBACK,
        )
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {
        "include_dashboard": dashboard_host is not None and address is None,
        "log_to_driver": not quiet,
        "logging_level": logging.WARNING if quiet else logging.INFO,
    }
    if address is None:
        kwargs.update(_node_ip_address=LOOPBACK, num_cpus=offer.get("num_cpus") or os.cpu_count() or 2)
        kwargs.update({k: offer[k] for k in ("num_gpus", "resources") if offer.get(k) is not None})
        if dashboard_host is not None:
            kwargs["dashboard_host"] = dashboard_host
    else:
        kwargs["address"] = address
    _init_ray(kwargs, retry=address is None)


def _init_ray(kwargs: dict[str, Any], *, retry: bool) -> None:
    """``ray.init``, leaving this process's SIGTERM handler as it is (:func:`_keep_sigterm`); a
    local node that missed Ray's fixed 30 s start-up wait for its raylet to register
    (``ray._private.node``: "timed out during startup", seen on 2 overloaded cores) is started
    once more before the error stands."""
    import ray

    with _keep_sigterm():
        try:
            ray.init(**kwargs)
        except Exception as exc:
            if not retry or "timed out during startup" not in str(exc):
                raise
            log.warning("the local Ray node timed out during start-up; starting it once more")
            ray.shutdown()
            ray.init(**kwargs)


@contextmanager
def _keep_sigterm() -> Iterator[None]:
    """While ``ray.init`` runs, Ray's ``set_sigterm_handler`` does nothing. Ray 2.60 installs
    two SIGTERM handlers in the driver (ray/_private/node.py ``_register_shutdown_hooks``,
    ray/_private/worker.py ``connect``) that end the process from inside ``ray.init``; the
    caller's handler (omniplane.cli.errors: raise, unwind, shut the cluster down) stays."""
    import ray._private.utils as ray_utils

    saved = ray_utils.set_sigterm_handler
    ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = saved


def _start_serve(host: str, port: int) -> None:
    """``serve.start`` with the proxy on ``host:port``, then wait until every proxy is healthy. A
    proxy the controller replaced while ``serve.start`` waited on it (ActorDiedError) is not an
    error: the next attempt joins the running controller and the wait covers the new proxy."""
    import ray
    from ray import serve

    for attempt in range(1, SERVE_START_ATTEMPTS + 1):
        try:
            serve.start(
                http_options={"host": host, "port": port},
                logging_config={"log_level": "WARNING"},
                controller_options={"runtime_env": {"env_vars": dict(SERVE_CONTROLLER_ENV)}},
            )
            break
        except ray.exceptions.RayActorError as exc:
            if attempt == SERVE_START_ATTEMPTS:
                raise
            log.warning("Ray Serve replaced its proxy while starting (%s); retrying", type(exc).__name__)
    _wait_proxies(READY_TIMEOUT_S)


def _wait_proxies(timeout_s: float) -> None:
    from ray import serve

    def healthy() -> bool:
        proxies = serve.status().proxies
        return bool(proxies) and all(s == "HEALTHY" for s in proxies.values())

    _wait_until(healthy, timeout_s, "Ray Serve's HTTP proxy was not healthy")


def deploy(plan: ResolvedPlan, options: DeployOptions, *, route_prefix: str = "/") -> DeployOptions:
    """Deploy ``plan`` (blocks until every replica is up); returns the options with the epoch of
    model time fixed (now)."""
    from ray import serve

    from omniplane.deploy.serve_app import build_app

    opts = replace(options, epoch=time.time()) if options.epoch == 0 else options
    serve.run(build_app(plan, opts), name=APP, route_prefix=route_prefix, blocking=False)
    _wait_running(READY_TIMEOUT_S)
    return opts


def deploy_config(config: dict[str, Any], *, host: str, port: int,
                  timeout_s: float = OMNI_READY_S) -> list[str]:
    """Submit a ``serve deploy`` document (omniplane.deploy.export_ray.serve_config) the way Ray's
    own ``serve run CONFIG`` does: checked against Ray's ``ServeDeploySchema``, then handed to the
    Serve controller, which builds and places every application; blocks until all run. Its
    ``http_options`` become this proxy's ``host:port``. Returns the application names."""
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    schema = ServeDeploySchema.model_validate({**config, "http_options": {"host": host, "port": port}})
    client = _get_global_client()
    assert client is not None  # Serve runs (_start_serve)
    client.deploy_apps(schema, _blocking=False)
    names = [a.name for a in schema.applications]
    _wait_running(timeout_s, names)
    return names


def _wait_running(timeout_s: float, names: list[str] | None = None) -> None:
    from ray import serve

    def running() -> bool:
        apps = serve.status().applications
        for name in names or [APP]:
            app = apps.get(name)
            if app is not None and app.status in ("DEPLOY_FAILED", "UNHEALTHY"):
                raise RuntimeError(f"deployment failed: {name}: {app.message}")
            if app is None or app.status != "RUNNING":
                return False
        return True

    _wait_until(running, timeout_s, "the application was not running")


def _wait_until(ready: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``ready`` (every 0.5 s) until it holds; ``TimeoutError(what ...)`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what} after {timeout_s:.0f} s")


def replica_actors(deployment: str) -> list[str]:
    """Names of the live replica actors of one deployment (Serve's ``SERVE_REPLICA::app#dep#id``)."""
    import ray

    prefix = f"SERVE_REPLICA::{APP}#{deployment}#"
    return sorted(
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(prefix)
    )


def kill_replica(plan: ResolvedPlan, node: str, load: dict[str, int] | None = None) -> str:
    """Kill one replica of ``node`` (``auto``: the node of the model's shared stage, else the
    node with the most executors), as a crash would: Ray Serve notices and starts a new one.
    ``load`` (replica id -> open sessions, from the ingress's stats) picks the busiest replica
    (ties: the first by name). Returns the killed actor's name."""
    import ray

    if node == "auto":
        node = auto_kill_node(plan)
    pnode = plan.spec.node(node)  # KeyError names the node
    names = replica_actors(deployment_name(pnode.name, 0))
    if not names:
        raise RuntimeError(f"no live replica of node {node!r}")
    busy = load or {}
    victim = min(names, key=lambda n: (-busy.get(n.rsplit("#", 1)[-1], 0), n))
    ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
    return victim


def auto_kill_node(plan: ResolvedPlan) -> str:
    shared = plan.model.shared_stage()
    for n in plan.spec.nodes:
        if shared is not None and shared in n.components:
            return n.name
    return max(plan.spec.nodes, key=lambda n: n.executor_count).name
