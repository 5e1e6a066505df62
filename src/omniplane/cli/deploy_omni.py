"""``omniplane deploy --engine vllm-omni``: the plan as the Ray Serve applications ``omniplane
export --target ray-serve`` writes, submitted to the cluster the way ``serve run CONFIG`` would
(:func:`omniplane.deploy.cluster.deploy_config`). One ``OmniServer`` application per vLLM-Omni
deployment runs the runtime's own ``vllm serve MODEL --omni`` on its GPUs (vLLM-Omni orchestrates
its stages); the router application at ``/`` forwards each request to the deployment its type is
routed to, with this command's API keys (their digests) and limits. omniplane's emulated pipeline
(ingress, orchestrator, stage sessions) does not run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omniplane.cli.errors import fail
from omniplane.deploy.auth import Guard
from omniplane.deploy.omni_process import VLLM_ENV
from omniplane.spec import ResolvedPlan

# heuristic: on a local cluster the vLLM-Omni replicas reserve at most half of the machine's
# cores (the export's CPUS_PER_GPU = 4 per GPU otherwise), the rest for the router, Serve and Ray
LOCAL_CPU_SHARE = 0.5


@dataclass(frozen=True)
class OmniDeploy:
    """The ``serve deploy`` document to submit, its applications and, per placement resource
    (``omniplane-<host>``), the GPUs the processes pinned there take."""

    doc: dict[str, Any]
    gpus: dict[str, int]
    files: tuple[Path, ...] = ()  # what was written

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(a["name"] for a in self.doc["applications"])

    @property
    def local_resources(self) -> dict[str, float]:
        """What a local node offers so the placement's pins resolve to it."""
        return {r: 1.0 for r in self.gpus}


def need_vllm_executable() -> None:
    """A local cluster's replicas start ``vllm serve --omni`` from this machine: refuse before
    Ray starts when there is none."""
    if not (os.environ.get(VLLM_ENV) or shutil.which("vllm")):
        fail(f"--engine vllm-omni: no `vllm` executable on PATH (or in ${VLLM_ENV}) to run `vllm serve "
             "MODEL --omni` (pip install vllm-omni); --dry-run writes the files without it, --engine "
             "emulated rehearses the plan")


def omni_deploy(plan: ResolvedPlan, guard: Guard, *, max_in_flight: int, deadline_s: float,
                local: bool, num_gpus: int | None, config_dir: Path) -> OmniDeploy:
    """The export for the cluster, its files written into ``config_dir``; the router application
    gets the keys and limits. ``local``: a local cluster will run it, one host (of ``num_gpus``
    GPUs when given)."""
    from omniplane.cli.export import export_files, write_files
    from omniplane.deploy.export_ray import CPUS_PER_GPU, host_resource, serve_config

    ex, files = export_files(plan, "ray-serve", f"1x{num_gpus}" if local and num_gpus else None)
    used = sorted({e.host for e in ex.placement.executors})
    if local and len(used) > 1:
        fail(f"--engine vllm-omni: the plan's placement needs {len(used)} hosts; start Ray on them "
             "(omniplane export --target ray-serve shows how) and give --address")
    write_files(config_dir, files)
    total = sum(len(e.gpus) for e in ex.placement.executors)
    cpus: float = CPUS_PER_GPU
    if local:
        cpus = min(CPUS_PER_GPU, LOCAL_CPU_SHARE * (os.cpu_count() or 2) / max(1, total))
    doc = serve_config(plan, ex, cpus_per_gpu=cpus)
    gpus: dict[str, int] = {}
    pins = {host_resource(h) for h in ex.placement.hosts}
    for app in doc["applications"]:
        if app["name"] == "router":
            app["args"]["limits"] = {
                "key_digests": list(guard.key_digests), "max_body_bytes": guard.max_body_bytes,
                "max_prompt_tokens": guard.max_prompt_tokens, "body_timeout_s": guard.body_timeout_s,
                "max_in_flight": max_in_flight, "deadline_s": deadline_s}
        for dep in app.get("deployments", []):
            opts = dep["ray_actor_options"]
            for res in opts.get("resources", {}):
                if res in pins:
                    gpus[res] = gpus.get(res, 0) + int(opts.get("num_gpus", 0))
    return OmniDeploy(doc, gpus, tuple(config_dir / name for name in sorted(files)))


def check_offer(need: OmniDeploy, nodes: list[dict[str, Any]]) -> None:
    """Fail, naming the resource, unless the live Ray nodes offering each placement resource have
    the GPUs pinned there (else the replicas would wait for them forever)."""
    for res, want in sorted(need.gpus.items()):
        offering = [n for n in nodes if n.get("Alive") and res in (n.get("Resources") or {})]
        have = sum(float((n.get("Resources") or {}).get("GPU", 0)) for n in offering)
        if not offering:
            fail(f"--engine vllm-omni: no Ray node offers resource {res!r} (start the node of that host "
                 f"with --resources '{{\"{res}\": 1}}')")
        if have < want:
            fail(f"--engine vllm-omni: the nodes offering {res!r} have {have:g} GPUs; the placement "
                 f"puts {want} there (a local cluster: --num-gpus)")
