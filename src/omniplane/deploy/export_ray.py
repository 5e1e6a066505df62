"""``omniplane export --target ray-serve | kuberay``: the vLLM-Omni export as a Ray Serve
application config (``serve deploy``) and as a KubeRay ``RayService`` (``kubectl apply``).

The Serve config (Ray's ``ServeDeploySchema``) has one application per vLLM-Omni deployment,
``<dep>``: :mod:`omniplane.deploy.omni_server`'s ``OmniServer`` (one replica holding the
deployment's GPUs, ``ray_actor_options.num_gpus``), which writes the deployment's deploy YAML
(inline in its ``args``), starts ``vllm serve MODEL --omni --deploy-config ...`` on those GPUs
(Ray sets ``CUDA_VISIBLE_DEVICES``; the file's devices index into it), waits for its
``/health`` and reports its URL; plus the application ``router`` (``omniplane.deploy.gateway_serve:app``
at ``/``, args ``routing``: the routing document, deployments given as ``serve_app``).

Each process is pinned to the host the placement gave it (:mod:`omniplane.deploy.placement`):
its replica asks for a custom resource ``omniplane-<host>``, which that host's Ray node offers
(``ray start --resources '{"omniplane-host0": 1}'``; the RayService's worker group per host sets
it). A deployment across hosts becomes vLLM-Omni's distributed mode, as the launch scripts of
``--target vllm-omni`` run it: ``OmniServer`` is the head, and one ``OmniStage`` deployment
(``stages<S>+<S'>-<host>``) per set of GPUs on a host, running the headless processes of the
stages sharing them (each replica holds its GPUs once; stages sharing them with the head run
beside it in ``OmniServer``).

GPU kinds (the RayService): each worker group is one host of the placement, and its pods select
nodes of the host's GPU kind with ``nodeSelector: {nvidia.com/gpu.product: LABEL}`` (the catalog's
``gpu_product_label``: the label NVIDIA's GPU feature discovery publishes). Its Ray node offers
``gpu_<KIND>: G`` beside ``omniplane-<host>``, and every Serve deployment in ``serveConfigV2``
asks for ``gpu_<KIND>`` as many as its GPUs, so Ray places it only on that kind. A plan on
several kinds (``plan --inventory``) gets one group per host of each kind. Groups are per host, not
per kind: ``rayStartParams`` are per group, and a deployment across hosts needs each host's own
resource to pin its head and stages.

Keys (``export --upstream-key-env NAME``): each application's args and the router's routing
document carry only the name ``NAME``. On ``serve deploy`` the operator sets ``NAME`` in the
environment ``ray start`` runs in on every node (Ray's workers inherit it; a ``runtime_env``
would write the key into the config); ``OmniServer`` passes it to its API server as
``VLLM_API_KEY``. The RayService sets ``NAME`` in every pod from a Kubernetes Secret
(``valueFrom.secretKeyRef``): ``omniplane-upstream-key``, key ``api-key``, or the one
``export --upstream-key-secret NAME[/KEY]`` names (:func:`key_secret`).

The head's dashboard listens on every interface of its pod (``dashboard-host: 0.0.0.0``,
KubeRay's own default): the RayService controller submits ``serveConfigV2`` to it and polls
Serve's status through the head's Service, from the operator's pod. Ray's dashboard has no
authentication: restrict port 8265 to the operator with a NetworkPolicy.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from omniplane.deploy.export_omni import API_PORT, MASTER_PORT, OmniExport, loader_document, processes
from omniplane.deploy.export_text import Process
from omniplane.spec import ResolvedPlan, load_gpus

OMNI_SERVER = "omniplane.deploy.omni_server:app"
GATEWAY = "omniplane.deploy.gateway_serve:app"
RAY_VERSION = "2.60.0"  # the Ray the project pins (pyproject's deploy extra)
IMAGE = "omniplane-vllm-omni:0.30.0"  # assumption: an image with ray[serve], vllm-omni 0.30.0 and omniplane
HOST_RESOURCE = "omniplane-{host}"
KIND_RESOURCE = "gpu_{kind}"  # a KubeRay node's GPUs of one catalog kind, as a Ray custom resource
PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU feature discovery's node label (catalog gpu_product_label)
CPUS_PER_GPU = 4  # assumption: CPU cores per GPU for a replica (tokenisation, stage processes)
MEMORY_PER_GPU_GI = 64  # assumption: host memory per GPU (checkpoint loading, shared-memory connectors)
KEY_SECRET = ("omniplane-upstream-key", "api-key")  # the default Kubernetes Secret (name, key) of the key
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SECRET_NAME = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")  # Kubernetes: a DNS subdomain (RFC 1123)
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # Kubernetes: a ConfigMap / Secret data key


def key_secret(text: str) -> tuple[str, str]:
    """``NAME[/KEY]`` (``export --upstream-key-secret``) as the Secret's (name, key), the key
    ``api-key`` when not given; ValueError saying what Kubernetes accepts (its rules for a
    Secret's name, a DNS subdomain, and for a data key)."""
    name, slash, key = text.partition("/")
    key = key if slash else KEY_SECRET[1]
    if len(name) > 253 or not SECRET_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a Kubernetes Secret name (expected lowercase letters, digits, "
                         "'-' and '.', starting and ending with a letter or digit, at most 253 characters)")
    if len(key) > 253 or not SECRET_KEY.fullmatch(key) or key == "." or key.startswith(".."):
        raise ValueError(f"key {key!r} is not a Secret data key (expected letters, digits, '-', '_' and "
                         "'.', at most 253 characters, not '.' and not starting with '..')")
    return name, key


def host_resource(host: str) -> str:
    return HOST_RESOURCE.format(host=host)


def kind_of(plan: ResolvedPlan, ex: OmniExport, host: str) -> str:
    """The catalog GPU kind of ``host``."""
    return ex.placement.kind_of(host) or plan.gpu.name


def kind_resource(kind: str) -> str:
    return KIND_RESOURCE.format(kind=kind)


def serve_config(plan: ResolvedPlan, ex: OmniExport, *, kinds: bool = False,
                 cpus_per_gpu: float = CPUS_PER_GPU) -> dict[str, Any]:
    """The ``serve deploy`` document (module docstring); ``kinds``: each deployment also asks for
    its GPU kind's resource (the RayService's nodes offer it); ``cpus_per_gpu``: CPU cores a
    replica reserves per GPU."""
    apps: list[dict[str, Any]] = []
    for i, d in enumerate(ex.deployments):
        doc = ex.configs[d.name]
        args: dict[str, Any] = {"model": doc["omniplane"]["model"], "deploy_config": loader_document(doc),
                                "port": API_PORT + i, "name": d.name}
        if ex.key_env is not None:
            args["api_key_env"] = ex.key_env
        deps = []
        groups: dict[tuple[str, tuple[int, ...]], list[Process]] = {}  # processes sharing GPUs
        for p in processes(d, i, ex.placement, ex.lb_policy):
            groups.setdefault((p.host, p.gpus), []).append(p)
        for procs in groups.values():
            p = procs[0]
            head = next((q for q in procs if q.head), None)
            mine = [{"stage_id": q.stage_id, "replicas": q.replicas} for q in procs if not q.head]
            ids = "+".join(str(q.stage_id) for q in procs)
            name = "OmniServer" if head else f"stages{ids}-{p.host}"
            if head is not None and head.stage_id is not None:
                args["distributed"] = {"stage_id": head.stage_id, "replicas": head.replicas,
                                       "master_port": MASTER_PORT + i, "lb_policy": ex.lb_policy,
                                       "master_resource": host_resource(p.host), "colocated": mine}
            elif head is None:
                args.setdefault("stages", []).append({"name": name, "processes": mine})
            deps.append({
                "name": name,
                "num_replicas": 1,
                "max_ongoing_requests": 1000,
                "health_check_period_s": 10,
                "health_check_timeout_s": 30,
                "graceful_shutdown_timeout_s": 30,
                "ray_actor_options": {"num_gpus": len(p.gpus), "num_cpus": cpus_per_gpu * len(p.gpus),
                                      "resources": {host_resource(p.host): 0.001, **(
                                          {kind_resource(kind_of(plan, ex, p.host)): len(p.gpus)}
                                          if kinds else {})}},
            })
        apps.append({"name": d.name, "route_prefix": None, "import_path": OMNI_SERVER, "args": args,
                     "deployments": deps})
    apps.append({"name": "router", "route_prefix": "/", "import_path": GATEWAY,
                 "args": {"routing": ex.routing.model_dump(mode="json", exclude_none=True)}})
    return {"proxy_location": "HeadOnly", "http_options": {"host": "0.0.0.0", "port": 8000},
            "applications": apps}


def _k8s_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50] or "plan"


def ray_service(plan: ResolvedPlan, ex: OmniExport, serve: dict[str, Any],
                secret: tuple[str, str] = KEY_SECRET) -> dict[str, Any]:
    """The KubeRay ``RayService`` (apiVersion ray.io/v1): ``serveConfigV2`` is ``serve``; a head
    group without GPUs (the router and Serve's controller) and one worker group per host of the
    placement, each a pod with the host's GPUs on a node of its kind, its ``omniplane-<host>`` and
    ``gpu_<KIND>`` resources; ``secret``: the Secret (name, key) holding the key (module
    docstring). ValueError for a kind without a product label."""
    G = ex.placement.host_gpus
    used = [h for h in ex.placement.hosts if any(e.host == h for e in ex.placement.executors)]
    gpus = load_gpus()
    labels = {}
    for kind in dict.fromkeys(kind_of(plan, ex, h) for h in used):
        label = gpus.get(kind).gpu_product_label
        if label is None:
            raise ValueError(f"GPU kind {kind}: the catalog states no gpu_product_label (the node label "
                             f"{PRODUCT_LABEL} its KubeRay pods select on); export --target ray-serve")
        labels[kind] = label

    def start_params(h: str) -> dict[str, str]:
        res = json.dumps({host_resource(h): 1, kind_resource(kind_of(plan, ex, h)): G})
        return {"num-gpus": str(G), "resources": '"' + res.replace('"', '\\"') + '"'}

    def pod(name: str, gpus: int, kind: str | None = None) -> dict[str, Any]:
        limits = {"cpu": str(max(4, CPUS_PER_GPU * gpus + 4)),
                  "memory": f"{max(16, MEMORY_PER_GPU_GI * gpus)}Gi"}
        if gpus:
            limits["nvidia.com/gpu"] = str(gpus)
        env = [{"name": ex.key_env, "valueFrom": {"secretKeyRef": {"name": secret[0], "key": secret[1]}}}]
        select = {"nodeSelector": {PRODUCT_LABEL: labels[kind]}} if kind is not None else {}
        return {"spec": {**select, "containers": [{
            "name": name, "image": IMAGE, "resources": {"limits": limits, "requests": dict(limits)},
            **({"env": env} if ex.key_env is not None else {}),
            **({"ports": [{"containerPort": 6379, "name": "gcs"},
                          {"containerPort": 8265, "name": "dashboard"},
                          {"containerPort": 8000, "name": "serve"}]} if name == "ray-head" else {}),
        }]}}

    workers = [{
        "groupName": h, "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
        "rayStartParams": start_params(h),
        "template": pod("ray-worker", G, kind_of(plan, ex, h)),
    } for h in used]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": f"omniplane-{_k8s_name(plan.spec.name or plan.spec.model)}"},
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve, sort_keys=False, width=110),
            "rayClusterConfig": {
                "rayVersion": RAY_VERSION,
                "headGroupSpec": {"rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0"},
                                  "template": pod("ray-head", 0)},
                "workerGroupSpecs": workers,
            },
        },
    }


def ray_files(plan: ResolvedPlan, ex: OmniExport, target: str,
              secret: tuple[str, str] = KEY_SECRET) -> dict[str, str]:
    """``serve-config.yaml`` (ray-serve) or ``rayservice.yaml`` (kuberay, the key from ``secret``),
    with a header."""
    serve = serve_config(plan, ex, kinds=target == "kuberay")
    if target == "ray-serve":
        head = ("# Ray Serve config (serve deploy serve-config.yaml) written by omniplane export; start\n"
                "# each host's Ray node with --resources '{\"omniplane-hostN\": 1}' (README.md)\n")
        if ex.key_env is not None:
            head += f"# and with {ex.key_env} (the deployments' API key) set in its environment\n"
        return {"serve-config.yaml": head + yaml.safe_dump(serve, sort_keys=False, width=110)}
    head = ("# KubeRay RayService (kubectl apply -f rayservice.yaml) written by omniplane export; image: "
            "assumption,\n# replace with one that has ray[serve], vllm-omni 0.30.0 and omniplane; worker "
            f"pods select nodes\n# by {PRODUCT_LABEL} (NVIDIA GPU feature discovery: the GPU Operator)\n")
    if ex.key_env is not None:
        head += (f"# {ex.key_env} (the deployments' API key) comes from the Secret {secret[0]}, key "
                 f"{secret[1]}:\n# kubectl create secret generic {secret[0]} "
                 f"--from-file={secret[1]}=<(printf %s \"${ex.key_env}\")\n")
    head += "# The head's dashboard (8265, no authentication): open it to the KubeRay operator only\n"
    text = yaml.safe_dump(ray_service(plan, ex, serve, secret), sort_keys=False, width=110)
    return {"rayservice.yaml": head + text}
