"""``OmniServer``: one vLLM-Omni deployment as a Ray Serve deployment (``omniplane export
--target ray-serve | kuberay``; :mod:`omniplane.deploy.export_ray`). Imports Ray.

Its replica holds the deployment's GPUs (``ray_actor_options.num_gpus``), starts ``vllm serve
MODEL --omni --deploy-config ...`` on them (:class:`omniplane.deploy.omni_process.OmniProcess`,
bound to the node's address), waits for ``/health``, answers Serve's health checks from the
process, reports its OpenAI endpoint (``url()``; the router calls it through the application's
handle) and stops the process when Serve stops the replica.

Application args (the Serve config's ``args``): ``model``, ``deploy_config`` (the deploy
document), ``port``, ``name``; optional ``host`` (default: the node's IP address) and
``startup_timeout_s``.
"""

from __future__ import annotations

from typing import Any

from ray import serve
from ray.serve import Application

from omniplane.deploy.omni_process import STARTUP_TIMEOUT_S, OmniProcess


@serve.deployment(name="OmniServer", num_replicas=1)
class OmniServer:
    def __init__(self, model: str, deploy_config: dict[str, Any], port: int, name: str = "",
                 host: str | None = None, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        if host is None:
            import ray

            host = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
        self.name = name
        self.proc = OmniProcess(model, deploy_config, host=host, port=port)
        self.proc.wait_ready(startup_timeout_s)

    def url(self) -> str:
        return self.proc.url

    def check_health(self) -> None:
        self.proc.check()

    def __del__(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.stop()


def app(args: dict[str, Any]) -> Application:
    """The Serve application of one deployment (``import_path: omniplane.deploy.omni_server:app``)."""
    bound: Application = OmniServer.bind(**args)  # type: ignore[attr-defined]
    return bound
