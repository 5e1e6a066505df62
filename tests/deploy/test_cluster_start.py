"""Starting Serve survives what Ray does on two overloaded cores (no cluster is started here):
a proxy the controller replaced while ``serve.start`` waited on it, a node that missed Ray's
fixed start-up wait, and a teardown error that must not hide the error that ended the run."""

from __future__ import annotations

from typing import Any

import pytest

ray = pytest.importorskip("ray")
from ray import serve  # noqa: E402

from omniplane.deploy import cluster  # noqa: E402


class _Status:
    def __init__(self, proxies: dict[str, str]) -> None:
        self.proxies = proxies


def _actor_died() -> Exception:
    exc: Exception = ray.exceptions.ActorDiedError()
    return exc


def test_a_replaced_proxy_is_retried_and_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def start(**kw: Any) -> None:
        calls.append(kw)
        if len(calls) == 1:
            raise _actor_died()

    states = iter([{}, {"n": "STARTING"}, {"n": "HEALTHY"}])
    monkeypatch.setattr(serve, "start", start)
    monkeypatch.setattr(serve, "status", lambda: _Status(next(states)))
    monkeypatch.setattr("omniplane.deploy.cluster.time.sleep", lambda _s: None)
    cluster._start_serve("127.0.0.1", 8123)
    assert len(calls) == 2
    assert calls[0]["http_options"] == {"host": "127.0.0.1", "port": 8123}
    env = calls[0]["controller_options"]["runtime_env"]["env_vars"]
    assert float(env["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"]) > 5  # above Serve's default
    with pytest.raises(StopIteration):  # the wait read statuses until healthy, no further
        next(states)


def test_a_proxy_that_keeps_dying_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def start(**_kw: Any) -> None:
        raise _actor_died()

    monkeypatch.setattr(serve, "start", start)
    with pytest.raises(ray.exceptions.RayActorError):
        cluster._start_serve("127.0.0.1", 8123)


def test_a_node_start_timeout_is_retried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    inits: list[dict[str, Any]] = []

    def init(**kw: Any) -> None:
        inits.append(kw)
        if len(inits) == 1:
            raise Exception("The current node timed out during startup. This could happen ...")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    cluster._init_ray({"num_cpus": 2}, retry=True)
    assert inits == [{"num_cpus": 2}, {"num_cpus": 2}]

    inits.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        cluster._init_ray({"address": "10.0.0.1:6379"}, retry=False)  # a cluster we only join
    assert len(inits) == 1


def _fake_cluster(monkeypatch: pytest.MonkeyPatch, shut: list[str], fail: str = "") -> None:
    up = {"ray": False}
    monkeypatch.setattr(ray, "is_initialized", lambda: up["ray"])
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: cluster.LOOPBACK)
    monkeypatch.setattr(cluster, "_init_ray", lambda kw, retry: up.update(ray=True))
    monkeypatch.setattr(cluster, "_start_serve", lambda host, port: None)
    monkeypatch.setattr(cluster, "descendants", lambda: set())  # nothing of this test process is ended

    def step(name: str) -> None:
        shut.append(name)
        if name == fail:
            raise _actor_died()

    monkeypatch.setattr(serve, "shutdown", lambda: step("serve"))
    monkeypatch.setattr(serve, "delete", lambda app: step("delete"))
    def ray_shutdown() -> None:
        up["ray"] = False
        step("ray")

    monkeypatch.setattr(ray, "shutdown", ray_shutdown)


def test_a_teardown_error_does_not_hide_the_run_error(monkeypatch: pytest.MonkeyPatch) -> None:
    shut: list[str] = []
    _fake_cluster(monkeypatch, shut, fail="delete")
    with pytest.raises(ValueError, match="the run's own error"), cluster.ray_cluster("10.0.0.1:6379"):
        raise ValueError("the run's own error")
    assert shut == ["delete", "ray"]  # a cluster joined: the application deleted, the driver gone


def test_a_local_cluster_left_on_an_error_skips_serves_graceful_shutdown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shut: list[str] = []
    _fake_cluster(monkeypatch, shut, fail="serve")
    with cluster.ray_cluster():
        pass
    assert shut == ["serve", "ray"]  # a normal exit: Serve's shutdown (its error logged), then Ray's
    shut.clear()
    with pytest.raises(KeyboardInterrupt), cluster.ray_cluster():
        raise KeyboardInterrupt  # SIGINT / SIGTERM (omniplane.cli.errors.Interrupted)
    assert shut == ["ray"]
