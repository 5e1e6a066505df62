"""API keys on Ray Serve's own routes (``/-/routes``), and the request limits ahead of the
applications: Serve's HTTP proxy answers its routes before any application code runs, so the
applications' :class:`omniplane.deploy.auth.Guard` cannot see them, and it reads a body ahead of
the application (:mod:`omniplane.deploy.proxy_limits`).

Ray Serve calls a function named by ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` in each proxy
process and wraps its whole ASGI app in the Starlette middlewares it returns
(``configure_http_middlewares`` in ray/serve/_private/http_util.py, Ray 2.x). :func:`install`
sets that variable, :data:`LIMITS_ENV` (the body limit, body timeout and idle timeout) and, with
keys, :data:`DIGESTS_ENV` (the keys' SHA-256 digests, never a key in clear) in this process's
environment before Ray starts, so the processes of a local cluster inherit them;
:func:`middlewares` is the callback: :class:`omniplane.deploy.proxy_limits.ProxyLimits` on every
request, and with digests, a request to a ``/-/`` path other than ``/-/healthz`` (liveness,
public as the applications' ``/health``) needs ``Authorization: Bearer <key>`` (401 otherwise).
Every other path passes to the applications, which check their own keys. A cluster omniplane
did not start (``deploy --address``) must be started with these variables set to guard its
proxy. No Ray here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from omniplane.deploy.auth import Guard, Refused
from omniplane.deploy.conn_watch import IDLE_S
from omniplane.deploy.proxy_limits import ProxyLimits, answer, watch_connections

CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "omniplane.deploy.proxy_auth:middlewares"
DIGESTS_ENV = "OMNIPLANE_PROXY_KEY_DIGESTS"  # comma-separated SHA-256 digests of the keys
LIMITS_ENV = "OMNIPLANE_PROXY_LIMITS"  # JSON: max_body_bytes, body_timeout_s, idle_s
PROXY_PREFIX = "/-/"
PROXY_PUBLIC = ("/-/healthz",)  # liveness only


def install(guard: Guard, environ: MutableMapping[str, str] | None = None, idle_s: float = IDLE_S) -> None:
    """Guard the Ray Serve proxy with ``guard``'s limits and keys; call it before Ray starts."""
    env = os.environ if environ is None else environ
    env[CALLBACK_ENV] = CALLBACK
    env[LIMITS_ENV] = json.dumps({"max_body_bytes": guard.max_body_bytes,
                                  "body_timeout_s": guard.body_timeout_s, "idle_s": idle_s})
    if guard.keyed:
        env[DIGESTS_ENV] = ",".join(guard.key_digests)
    else:
        env.pop(DIGESTS_ENV, None)


@contextmanager
def installed(guard: Guard, environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """:func:`install` for the duration of a block; the variables are as before afterwards."""
    env = os.environ if environ is None else environ
    saved = {k: env.get(k) for k in (CALLBACK_ENV, DIGESTS_ENV, LIMITS_ENV)}
    install(guard, env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v


class ProxyKeys:
    """ASGI middleware: the key check on Ray Serve's own ``/-/`` routes (module docstring)."""

    def __init__(self, app: Any, digests: tuple[str, ...] = ()) -> None:
        self.app = app
        self.guard = Guard(digests)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        if (scope["type"] == "http" and path.startswith(PROXY_PREFIX)
                and path.rstrip("/") not in PROXY_PUBLIC):
            auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            try:
                self.guard.authorize(str(scope.get("method", "GET")), path, auth or None)
            except Refused as exc:
                await answer(send, exc)
                return
        await self.app(scope, receive, send)


def middlewares() -> list[Any]:
    """The proxy callback: :class:`ProxyKeys` with the digests in :data:`DIGESTS_ENV` (none when
    it is unset or empty), then :class:`ProxyLimits` with the limits in :data:`LIMITS_ENV` (the
    defaults when unset); and the idle-connection watch."""
    from starlette.middleware import Middleware

    digests = tuple(d for d in os.environ.get(DIGESTS_ENV, "").split(",") if d.strip())
    limits = json.loads(os.environ.get(LIMITS_ENV) or "{}")
    guard = Guard()
    watch_connections(float(limits.get("idle_s", IDLE_S)))
    out = [Middleware(ProxyKeys, digests=digests)] if digests else []
    out.append(Middleware(ProxyLimits, max_body_bytes=int(limits.get("max_body_bytes", guard.max_body_bytes)),
                          body_timeout_s=float(limits.get("body_timeout_s", guard.body_timeout_s))))
    return out
