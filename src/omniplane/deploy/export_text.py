"""The text files of ``omniplane export``: launch scripts per host, the placement and the README
(:mod:`omniplane.deploy.export_omni` builds what they say)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from omniplane.deploy.placement import Placement
from omniplane.deploy.topology import Deployment
from omniplane.spec import ResolvedPlan
from omniplane.spec.layout import VllmOmniLayout


def cvd(gpus: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(g) for g in gpus)


KEY_COPY = "_upstream_key"  # the launch script's own copy of the key: a shell variable, never exported
VLLM_KEY = "VLLM_API_KEY"  # vllm serve's key when no --api-key is given (module docstring of export_omni)
_SCRIPT_VARS = ("MODEL", "BIND_HOST", "CONFIG_DIR", "CUDA_VISIBLE_DEVICES", "PATH", "pids", KEY_COPY)


def check_key_env(name: str) -> str:
    """``name`` if it can name the upstream key's environment variable; ValueError otherwise."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
        raise ValueError(f"{name!r} is not an environment variable name (expected letters, digits and _, "
                         "not starting with a digit)")
    if name in _SCRIPT_VARS or re.fullmatch(r"HOST\d+_ADDR", name):
        raise ValueError(f"{name!r} is a variable the launch scripts set themselves; name another, "
                         "e.g. OMNI_UPSTREAM_KEY")
    return name


@dataclass(frozen=True)
class Process:
    """One ``vllm serve`` process of a deployment on one host."""

    deployment: str
    host: str
    stage_id: int | None  # None: every stage, one process (the deployment is on one host)
    head: bool
    replicas: int
    gpus: tuple[int, ...]  # host-local GPUs (CUDA_VISIBLE_DEVICES)
    argv: tuple[str, ...]  # after ``vllm``

    def command(self, model: str = '"$MODEL"', cfg_dir: str = '"$CONFIG_DIR"', key: bool = False) -> str:
        """The shell command; ``key``: an API server gets the script's key copy as VLLM_API_KEY in
        its environment (the value is on no command line)."""
        args = " ".join(a if a.startswith(("$", '"')) else shlex.quote(a) for a in self.argv)
        args = args.replace("@MODEL", model).replace("@CONFIG_DIR", cfg_dir)
        env = f'{VLLM_KEY}="${KEY_COPY}" ' if key and self.head else ""
        return f"CUDA_VISIBLE_DEVICES={cvd(self.gpus)} {env}vllm {args}"


def host_var(host: str) -> str:
    return f"{host.upper()}_ADDR"


def _what(p: Process) -> str:
    if p.stage_id is None:
        return f"deployment {p.deployment}: every stage, one process (API server)"
    role = "head: API server + orchestrator +" if p.head else "headless:"
    return f"deployment {p.deployment}: {role} stage {p.stage_id} x{p.replicas}"


def launch_script(host: str, mine: list[Process], model: str, every: list[Process],
                  key_env: str | None = None) -> str:
    """The shell script that starts every ``vllm serve`` process of ``host``. ``key_env``: the
    variable holding the deployments' API key; the script fails when it is unset or empty, keeps
    a copy in an unexported shell variable, unsets it, and gives it to each API server (not the
    headless stages) as ``VLLM_API_KEY`` in that process's environment only."""
    needs = sorted({host_var(q.host) for q in every if q.head and q.stage_id is not None
                    and any(x.deployment == q.deployment for x in mine)})
    lines = [
        "#!/usr/bin/env bash",
        f"# Start the vLLM-Omni processes of {host} (written by omniplane export; README.md explains).",
        "# BIND_HOST: the address the API servers listen on (default loopback; set this host's address",
        "# so the router on another host reaches them). MODEL: the checkpoint (default: the HF id).",
        "set -euo pipefail",
        'CONFIG_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        f'MODEL="${{MODEL:-{model}}}"',
        'BIND_HOST="${BIND_HOST:-127.0.0.1}"',
    ]
    lines += [f': "${{{v}:?set {v} to the address of {v[:-5].lower()} (a deployment head)}}"'
              for v in needs]
    if key_env is not None:
        lines += [f"# {key_env}: the deployments' API key (the router sends it; vllm serve reads it as "
                  f"{VLLM_KEY})",
                  f': "${{{key_env}:?set {key_env} to the API key the vLLM-Omni servers require}}"',
                  f'{KEY_COPY}="${key_env}"', f"unset {' '.join(dict.fromkeys((key_env, VLLM_KEY)))}"]
    lines.append("pids=()")
    lines.append("trap 'kill \"${pids[@]}\" 2>/dev/null || true' EXIT INT TERM")
    for p in mine:
        lines += [f"# {_what(p)}", f"{p.command(key=key_env is not None)} &", "pids+=($!)"]
    lines.append("wait -n  # one process ending stops the host's others (trap)")
    return "\n".join(lines) + "\n"


def placement_yaml(plan: ResolvedPlan, deps: list[Deployment], placement: Placement) -> str:
    from omniplane.deploy.placement import HEURISTIC

    hosts: dict[str, Any] = {}
    for e in placement.executors:
        h = hosts.setdefault(e.host, {"gpus": placement.host_gpus, "executors": []})
        if placement.kinds:  # a plan on several kinds: each host's kind
            h.setdefault("gpu", placement.kind_of(e.host) or plan.gpu.name)
        d = next(x for x in deps if x.name == e.deployment)
        g = next(x for x in d.groups if x.node == e.node)
        h["executors"].append({"deployment": e.deployment, "node": e.node, "replica": e.replica,
                               "stages": list(g.stage_ids), "gpus": list(e.gpus)})
    edges = {}
    for d in deps:
        for a, b in zip(d.groups, d.groups[1:], strict=False):
            edges[f"{d.name}: {a.node} -> {b.node}"] = (
                "in-host" if placement.edge_in_host(d.name, a.node, b.node) else "across hosts")
    doc = {"kind": "omniplane-placement", "plan": plan.spec.name, "gpu": plan.gpu.name,
           "host_gpus": placement.host_gpus, "heuristic": HEURISTIC,
           "deployments": {d.name: {"nodes": list(d.nodes), "gpus": d.gpus,
                                    "hosts": placement.hosts_of(d.name)} for d in deps},
           "edges": edges, "hosts": hosts}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110)


def _kinds(plan: ResolvedPlan, placement: Placement) -> str:
    """The GPU kind, or each host's kind of a plan on several kinds."""
    if not placement.kinds:
        return plan.gpu.name
    pairs = zip(placement.hosts, placement.kinds, strict=True)
    return ", ".join(f"{h}: {k or plan.gpu.name}" for h, k in pairs)


def readme(plan: ResolvedPlan, layout: VllmOmniLayout, deps: list[Deployment], placement: Placement,
           procs: list[Process], lb: str, heuristic: str, key_env: str | None = None) -> str:
    out = [
        f"# vLLM-Omni deployment of plan {plan.spec.name or plan.spec.model}",
        "",
        f"Model {plan.model.name} ({layout.hf_id}) on {_kinds(plan, placement)}, hosts of "
        f"{placement.host_gpus} GPUs, "
        f"vLLM-Omni {layout.vllm_omni}. Written by `omniplane export`.",
        "",
        "Files: `<deployment>.yaml` (vLLM-Omni deploy configs, memory table in the header), "
        "`launch-<host>.sh` (run one per host), `placement.yaml` (executors on hosts), "
        "`routing.yaml` (per request type: deployment and probability, for the router).",
        "",
        f"Placement: {heuristic}.",
        "",
        "## Deployments",
        "",
    ]
    for d in deps:
        hosts = placement.hosts_of(d.name)
        groups = "; ".join(f"{g.node}: stages {list(g.stage_ids)} x{g.count} TP{g.tp} max batch {g.max_batch}"
                           for g in d.groups)
        out.append(f"- **{d.name}** ({d.gpus} GPUs on {', '.join(hosts)}): {groups}")
    out += ["", "## Start", "",
            "On each host, with `vllm-omni==" + layout.vllm_omni + "` installed and this folder copied:", ""]
    for h in placement.hosts:
        mine = [p for p in procs if p.host == h]
        if not mine:
            continue
        out += [f"### {h}", "", "```bash", f"BIND_HOST=<{h} address> bash launch-{h}.sh", "```", ""]
        out += [f"- {p.command()}" for p in mine]
        out.append("")
    out += [
        "A deployment on several hosts runs vLLM-Omni's distributed mode: its head (`--stage-id` with "
        "`--omni-master-*`) serves the API and waits for every other stage's `--headless` replicas to "
        f"register; set `HOSTn_ADDR` to the head host's address on every host. `--omni-lb-policy {lb}` "
        "balances stage replicas there; within one process vLLM-Omni balances them itself.",
        "",
        "Then the router: `omniplane` reads `routing.yaml` (the `url` of each deployment names its head host "
        "and port; replace `hostN` with the host's address).",
    ]
    if key_env is not None:
        out += ["", f"Keys: set `{key_env}` to the deployments' API key on every host before its script, "
                "and where the router runs (`routing.yaml` names it as `api_key_env`). Each API server gets "
                f"it as `{VLLM_KEY}` in its environment (headless stages do not); it is in no file and on "
                "no command line."]
    return "\n".join(out) + "\n"
