"""``omniplane export``: a plan as files a cluster operator applies (vLLM-Omni deploy configs and
launch scripts per host; a Ray Serve config; a KubeRay RayService) plus the router's routing
file. Ray is imported only for the Ray targets' schema check, never by ``--help``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.cli.files import Outputs
from omniplane.cli.output import print_json
from omniplane.spec import ResolvedPlan, load_plan

if TYPE_CHECKING:
    from omniplane.deploy.export_omni import OmniExport

TARGETS = ("vllm-omni", "ray-serve", "kuberay")


def _hosts(value: Any) -> str:
    from omniplane.deploy.placement import Hosts

    text = str(value)
    try:
        Hosts.parse(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix(f"--hosts {text!r}: ")) from None
    return text


def _key_env(value: Any) -> str:
    from omniplane.deploy.export_text import check_key_env

    try:
        return check_key_env(str(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _key_secret(value: Any) -> str:
    from omniplane.deploy.export_ray import key_secret

    try:
        key_secret(str(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return str(value)


def export_files(plan: ResolvedPlan, target: str, hosts: str | None, key_env: str | None = None,
                 key_secret: str | None = None) -> tuple[OmniExport, dict[str, str]]:
    """(the vLLM-Omni export, file name -> text) of ``plan`` for ``target``; a clear user error
    when the plan cannot run there. ``deploy --engine vllm-omni`` writes the same files.
    ``key_secret``: kuberay's ``NAME[/KEY]`` (default ``omniplane-upstream-key/api-key``)."""
    from omniplane.deploy.export_omni import export_vllm_omni
    from omniplane.deploy.placement import Hosts

    try:
        ex = export_vllm_omni(plan, Hosts.parse(hosts), serve=target != "vllm-omni", key_env=key_env)
        files = dict(ex.files)
        if target != "vllm-omni":
            from omniplane.deploy.export_ray import ray_files

            files.update(ray_files(plan, ex, target, _secret(key_secret)))
    except ValueError as exc:
        fail(str(exc))
    return ex, files


def write_files(out: Path, files: dict[str, str]) -> None:
    with Outputs() as outs:
        folder = outs.folder(out)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        outs.commit()


def write_export(plan_file: Path, target: str, hosts: str | None, out: Path,
                 key_env: str | None = None, key_secret: str | None = None) -> dict[str, Any]:
    """Write the export of ``plan_file`` for ``target`` into ``out``; the summary shown. A user
    error naming ``--upstream-key-secret`` when given for another target or without a key."""
    if key_secret is not None and target != "kuberay":
        fail(f"--upstream-key-secret: only for --target kuberay, not {target} (the RayService's pods read "
             "the key from that Secret)")
    if key_secret is not None and key_env is None:
        fail("--upstream-key-secret needs --upstream-key-env NAME: the pods get the Secret's key as NAME")
    plan = load_plan(plan_file)
    ex, files = export_files(plan, target, hosts, key_env, key_secret)
    write_files(out, files)
    return {
        "plan": plan.spec.name,
        "target": target,
        "out": str(out),
        "files": sorted(files),
        "deployments": {d.name: {"nodes": list(d.nodes), "gpus": d.gpus,
                                 "hosts": ex.placement.hosts_of(d.name)} for d in ex.deployments},
        "routing": {t: {s.deployment: s.p for s in shares} for t, shares in ex.routing.types.items()},
        "upstream_key_env": key_env,
        **({"upstream_key_secret": "/".join(_secret(key_secret))} if target == "kuberay" and key_env else {}),
    }


def _secret(text: str | None) -> tuple[str, str]:
    from omniplane.deploy.export_ray import KEY_SECRET, key_secret

    return KEY_SECRET if text is None else key_secret(text)


def export(
    plan_file: Annotated[Path, opt.argument("Plan file (kind: plan) made for the vLLM-Omni runtime.",
                                            opt.InputPath(), "PLAN")],
    target: Annotated[str, opt.choice_opt("--target", help="What to write: vLLM-Omni deploy configs and "
                                          "launch scripts, a Ray Serve config, or a KubeRay RayService.",
                                          choices=TARGETS, what="target")] = "vllm-omni",
    hosts: Annotated[str | None, opt.option(
        "--hosts", help="Hosts as HOSTSxGPUS, e.g. 2x8 (default: hosts of 8 GPUs, as many as needed).",
        parser=_hosts, metavar="HxG")] = None,
    out: Annotated[Path, opt.out_dir_opt("--out", help="Folder to write the files into.")] = Path("export"),
    key_env: Annotated[str | None, opt.option(
        "--upstream-key-env", help="Environment variable holding the deployments' API key: the routing "
        "file names it (api_key_env) and each vLLM server gets it as VLLM_API_KEY; never written.",
        parser=_key_env, metavar="NAME")] = None,
    key_secret: Annotated[str | None, opt.option(
        "--upstream-key-secret", help="kuberay: the Kubernetes Secret, and its key, the pods read "
        "--upstream-key-env's key from (default omniplane-upstream-key/api-key).",
        parser=_key_secret, metavar="NAME[/KEY]")] = None,
    json_out: Annotated[bool, opt.json_opt()] = False,
) -> None:
    """Write a plan's deployment: per vLLM-Omni deployment a deploy YAML and the launch commands
    per host, the host placement, and the routing file the router reads (docs/guides/deploy.md).

    The plan must be a set of whole vLLM-Omni pipelines (made with --runtime vllm-omni); any other
    is refused naming the node and what it lacks.
    """
    summary = write_export(plan_file, target, hosts, out, key_env, key_secret)
    if json_out:
        print_json(summary)
        return
    typer.echo(f"{target} export of plan {summary['plan']} in {out}/: {', '.join(summary['files'])}")
    for name, d in summary["deployments"].items():
        typer.echo(f"  {name}: nodes {', '.join(d['nodes'])}, {d['gpus']} GPUs on {', '.join(d['hosts'])}")
    typer.echo(f"  start: {out}/README.md")
