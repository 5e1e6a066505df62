"""``OmniServer`` and ``OmniStage``: one vLLM-Omni deployment as a Ray Serve application
(``omniplane export --target ray-serve | kuberay``; :mod:`omniplane.deploy.export_ray`). Imports Ray.

``OmniServer`` (the application's ingress, one replica) holds the GPUs its process needs
(``ray_actor_options.num_gpus``), starts ``vllm serve MODEL --omni --deploy-config ...`` on them
(:class:`omniplane.deploy.omni_process.OmniProcess`, bound to the node's address), waits for
``/health``, answers Serve's health checks from the process, reports its OpenAI endpoint
(``url()``; the router calls it through the application's handle) and stops the process when
Serve stops the replica. A deployment on one host is that one process. A deployment across
hosts runs vLLM-Omni's distributed mode: ``OmniServer`` is the head (``--stage-id`` with
``--omni-master-*`` on its node's address) and one ``OmniStage`` per (stage, host) runs
``--headless`` with the head's address, found as the address of the Ray node that offers the
head host's placement resource (so no stage waits for the head replica to be ready).

Application args: ``model``, ``deploy_config`` (the deploy document), ``port``, ``name``;
optional ``host`` (default: the node's IP address), ``startup_timeout_s``, ``api_key_env`` (the
variable holding the deployment's key on the node: the API server gets it as ``VLLM_API_KEY``,
:func:`omniplane.deploy.omni_process.child_env`; the Serve config holds only its name); across hosts
``distributed`` = ``{"stage_id", "replicas", "master_port", "lb_policy", "master_resource",
"colocated"}`` for the head (``colocated``: ``[{"stage_id", "replicas"}]``, headless stages
sharing its GPUs) and ``stages`` = ``[{"name", "processes": [{"stage_id", "replicas"}]}]`` for
the ``OmniStage`` deployments, one per set of GPUs (their GPUs and host resource are in the
Serve config's ``deployments``).
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray import serve
from ray.serve import Application

from omniplane.deploy.omni_process import STARTUP_TIMEOUT_S, OmniProcess, child_env
from omniplane.deploy.replica_bind import replica_grpc_on_node_address

MASTER_LOOKUP_S = 600.0  # assumption: the head host's Ray node joins within 10 minutes


def node_ip() -> str:
    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def node_with(resource: str, timeout: float = MASTER_LOOKUP_S) -> str:
    """The address of the live Ray node offering ``resource`` (waits for it to join)."""
    end = time.monotonic() + timeout
    while True:
        for n in ray.nodes():  # type: ignore[no-untyped-call]
            if n.get("Alive") and resource in (n.get("Resources") or {}):
                return str(n["NodeManagerAddress"])
        if time.monotonic() > end:
            raise RuntimeError(f"no Ray node offers resource {resource!r} (start the head host's node with "
                               f"--resources '{{\"{resource}\": 1}}')")
        time.sleep(2.0)


def _dist_args(stage_id: int, replicas: int, master: str, master_port: int) -> list[str]:
    return ["--stage-id", str(stage_id), "--omni-master-address", master, "--omni-master-port",
            str(master_port), "--omni-dp-size-local", str(replicas)]


def _headless(model: str, deploy_config: dict[str, Any], processes: list[dict[str, Any]], master: str,
              master_port: int, api_key_env: str | None = None) -> list[OmniProcess]:
    """The ``--headless`` processes of stages sharing this replica's GPUs, started and alive."""
    out: list[OmniProcess] = []
    env = child_env(api_key_env, api=False)
    try:
        for p in processes:
            out.append(OmniProcess(model, deploy_config, port=None, env=env, extra_args=_dist_args(
                int(p["stage_id"]), int(p["replicas"]), master, master_port)))
            out[-1].wait_ready(timeout=10.0)  # alive: it registers with the head on its own
    except Exception:
        for proc in out:
            proc.stop()
        raise
    return out


@serve.deployment(name="OmniStage", num_replicas=1)
class OmniStage:
    """The ``--headless`` stage processes sharing one set of GPUs of a deployment across hosts."""

    def __init__(self, model: str, deploy_config: dict[str, Any], processes: list[dict[str, Any]],
                 master_resource: str, master_port: int, api_key_env: str | None = None) -> None:
        replica_grpc_on_node_address()
        self.procs = _headless(model, deploy_config, processes, node_with(master_resource), master_port,
                               api_key_env)

    def check_health(self) -> None:
        for p in self.procs:
            p.check()

    def __del__(self) -> None:
        for p in getattr(self, "procs", []):
            p.stop()


@serve.deployment(name="OmniServer", num_replicas=1)
class OmniServer:
    def __init__(self, model: str, deploy_config: dict[str, Any], port: int, name: str = "",
                 host: str | None = None, startup_timeout_s: float = STARTUP_TIMEOUT_S,
                 distributed: dict[str, Any] | None = None, stages: list[Any] | None = None,
                 api_key_env: str | None = None) -> None:
        replica_grpc_on_node_address()
        env = child_env(api_key_env, api=True)  # before anything starts: an unset key fails here
        host = host or node_ip()
        extra: list[str] = []
        self.colocated: list[OmniProcess] = []
        if distributed is not None:
            mp = int(distributed["master_port"])
            extra = [*_dist_args(int(distributed["stage_id"]), int(distributed["replicas"]), host, mp),
                     "--omni-lb-policy", str(distributed["lb_policy"])]
        self.name, self.stages = name, stages or []  # the stages' handles keep them in the application
        self.proc = OmniProcess(model, deploy_config, host=host, port=port, extra_args=extra, env=env)
        try:
            if distributed is not None:  # stages sharing the head's GPUs, beside it
                self.colocated = _headless(model, deploy_config, list(distributed.get("colocated", [])),
                                           host, int(distributed["master_port"]), api_key_env)
            self.proc.wait_ready(startup_timeout_s)
        except Exception:
            self.__del__()
            raise

    def url(self) -> str:
        return self.proc.url

    def check_health(self) -> None:
        self.proc.check()
        for p in self.colocated:
            p.check()

    def __del__(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.stop()
        for p in getattr(self, "colocated", []):
            p.stop()


def app(args: dict[str, Any]) -> Application:
    """The Serve application of one deployment (``import_path: omniplane.deploy.omni_server:app``)."""
    args = dict(args)
    dist = args.get("distributed")
    stages = []
    for s in args.pop("stages", []):
        if dist is None:
            raise ValueError("stages without distributed: a deployment on one host is one process")
        stages.append(OmniStage.options(name=s["name"]).bind(  # type: ignore[attr-defined]
            model=args["model"], deploy_config=args["deploy_config"], processes=list(s["processes"]),
            master_resource=dist["master_resource"], master_port=int(dist["master_port"]),
            api_key_env=args.get("api_key_env")))
    bound: Application = OmniServer.bind(**args, stages=stages)  # type: ignore[attr-defined]
    return bound
