"""``omniplane export --target kuberay``: the RayService's ``rayClusterConfig`` read by KubeRay's
own reader of a RayCluster, the one Ray ships for its autoscaler
(``ray/autoscaler/_private/kuberay/autoscaling_config.py``). The node types it derives carry the
placement's hosts (GPUs, ``omniplane-<host>``, ``gpu_<KIND>``, one replica each) and a head without
GPUs; what Ray advertises (``rayStartParams`` first) is what Kubernetes gives the pod (its
container limits); every Serve deployment fits on the node its host resource picks. Then
``--upstream-key-secret``."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from tests.deploy.plans import mixed_plan_file, run_plan_file

reader = pytest.importorskip("ray.autoscaler._private.kuberay.autoscaling_config")
pytest.importorskip("jsonschema")  # the reader checks what it derives against Ray's ray-schema.json
QWEN3 = Path(__file__).parent / "qwen3-omni-2dep.yaml"
runner = CliRunner()
# make run's plan, the export tests' plan (on two host shapes), and the plan on two GPU kinds
PLANS: dict[str, tuple[Callable[[Path], Path], str | None]] = {
    "make-run": (run_plan_file, "2x8"),
    "2dep-2x8": (lambda _: QWEN3, "2x8"),
    "2dep-3x4": (lambda _: QWEN3, "3x4"),
    "mixed-kinds": (mixed_plan_file, None),
}
RAY_STANDARD = ("CPU", "GPU", "memory")


def _export(tmp_path: Path, plan: str, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the RayService, placement.yaml) of ``export --target kuberay`` for ``PLANS[plan]``."""
    make, hosts = PLANS[plan]
    out = tmp_path / "out"
    res = runner.invoke(app, ["export", str(make(tmp_path)), "--target", "kuberay", "--out", str(out),
                              *(["--hosts", hosts] if hosts else []), *extra])
    assert res.exit_code == 0, res.output
    return (yaml.safe_load((out / "rayservice.yaml").read_text()),
            yaml.safe_load((out / "placement.yaml").read_text()))


def node_types(cluster: dict[str, Any], *, from_limits: bool = False) -> dict[str, Any]:
    """KubeRay's reader on ``cluster`` as the RayCluster the RayService creates: node type name ->
    {min_workers, max_workers, resources, labels}. ``from_limits``: without ``rayStartParams``'
    num-cpus, num-gpus and memory, so the reader takes them from the Ray container's limits (as the
    KubeRay operator does when it writes ``ray start``)."""
    spec = copy.deepcopy(cluster)
    if from_limits:
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            for param in ("num-cpus", "num-gpus", "memory"):
                group["rayStartParams"].pop(param, None)
    cr = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
          "metadata": {"name": "omniplane", "namespace": "default"}, "spec": spec}
    return dict(reader._derive_autoscaling_config_from_ray_cr(cr)["available_node_types"])


def _offered(types: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {n: {r: v for r, v in t["resources"].items() if v} for n, t in types.items()}


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_kuberays_reader_derives_the_placements_hosts(tmp_path: Path, plan: str) -> None:
    svc, placement = _export(tmp_path, plan)
    cluster = svc["spec"]["rayClusterConfig"]
    types = node_types(cluster)
    used = [h for h, v in placement["hosts"].items() if v["executors"]]
    assert sorted(types) == sorted(["headgroup", *used])
    head = types.pop("headgroup")
    assert head["resources"].get("GPU", 0) == 0 and (head["min_workers"], head["max_workers"]) == (0, 0)
    assert [r for r in head["resources"] if r not in RAY_STANDARD] == []
    kinds = set()
    for h, t in types.items():
        host = placement["hosts"][h]
        kind = host.get("gpu", placement["gpu"])
        kinds.add(kind)
        assert t["resources"]["GPU"] == host["gpus"], (h, t)
        custom = {r: v for r, v in t["resources"].items() if r not in RAY_STANDARD}
        assert custom == {f"omniplane-{h}": 1, f"gpu_{kind}": host["gpus"]}, (h, t)
        assert t["min_workers"] == t["max_workers"] == 1
    assert len(kinds) == (2 if plan == "mixed-kinds" else 1)
    for g in cluster["workerGroupSpecs"]:
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]  # the operator's own rule
    # Ray advertises what Kubernetes gives the pod: a group losing its GPU (or CPU, memory)
    # limit would advertise GPUs its pod does not have
    assert _offered(node_types(cluster, from_limits=True)) == _offered(node_types(cluster, from_limits=False))


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_serve_deployment_fits_the_node_its_host_resource_picks(tmp_path: Path, plan: str) -> None:
    svc, _ = _export(tmp_path, plan)
    free = _offered(node_types(svc["spec"]["rayClusterConfig"]))
    serve = yaml.safe_load(svc["spec"]["serveConfigV2"])
    placed = 0
    for a in serve["applications"]:
        for d in a.get("deployments") or [{"name": a["name"]}]:  # the router: Serve's defaults
            opts = d.get("ray_actor_options", {})
            ask = {"CPU": opts.get("num_cpus", 1), "GPU": opts.get("num_gpus", 0),
                   **opts.get("resources", {})}
            ask = {r: v for r, v in ask.items() if v}
            pins = [r for r in ask if r.startswith("omniplane-")]
            nodes = [n for n, r in free.items() if all(r.get(p, 0) > 0 for p in pins)]
            assert len(nodes) == (1 if pins else len(free)), (a["name"], d["name"], pins, sorted(free))
            for _ in range(d.get("num_replicas", 1)):
                fits = [n for n in nodes if all(free[n].get(r, 0) >= v for r, v in ask.items())]
                assert fits, (a["name"], d["name"], ask, {n: free[n] for n in nodes})
                free[fits[0]] = {r: v - ask.get(r, 0) for r, v in free[fits[0]].items()}
                placed += 1
    assert placed > len(serve["applications"]) - 1  # every application placed something


def test_the_heads_dashboard_is_reachable_by_the_operator(tmp_path: Path) -> None:
    """The RayService controller submits serveConfigV2 to the dashboard through the head's Service
    (its port named ``dashboard``): bound to loopback, it never deploys anything."""
    svc, _ = _export(tmp_path, "2dep-2x8")
    head = svc["spec"]["rayClusterConfig"]["headGroupSpec"]
    assert head["rayStartParams"].get("dashboard-host", "0.0.0.0") == "0.0.0.0"
    [c] = head["template"]["spec"]["containers"]
    assert {"containerPort": 8265, "name": "dashboard"} in c["ports"]


def _pods_secret(svc: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = svc["spec"]["rayClusterConfig"]
    return [e["valueFrom"]["secretKeyRef"] for g in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
            for c in g["template"]["spec"]["containers"] for e in c["env"]]


@pytest.mark.parametrize(("given", "secret"), [
    (None, {"name": "omniplane-upstream-key", "key": "api-key"}),
    ("team-keys", {"name": "team-keys", "key": "api-key"}),
    ("team.keys/upstream_Token-1.txt", {"name": "team.keys", "key": "upstream_Token-1.txt"}),
])
def test_upstream_key_secret_names_the_secret_every_pod_reads(
        tmp_path: Path, given: str | None, secret: dict[str, str]) -> None:
    extra = ["--upstream-key-env", "OMNI_TEST_KEY", *(["--upstream-key-secret", given] if given else [])]
    svc, _ = _export(tmp_path, "mixed-kinds", *extra)
    pods = _pods_secret(svc)
    assert len(pods) == 1 + len(svc["spec"]["rayClusterConfig"]["workerGroupSpecs"])
    assert all(p == secret for p in pods), pods
    text = (tmp_path / "out" / "rayservice.yaml").read_text()
    assert f"kubectl create secret generic {secret['name']} --from-file={secret['key']}=" in text
    res = runner.invoke(app, ["export", str(QWEN3), "--target", "kuberay", "--out", str(tmp_path / "j"),
                              "--json", *extra])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["upstream_key_secret"] == f"{secret['name']}/{secret['key']}"


@pytest.mark.parametrize(("args", "why"), [
    (["--target", "ray-serve", "--upstream-key-env", "K", "--upstream-key-secret", "s"],
     "only for --target kuberay, not ray-serve"),
    (["--upstream-key-env", "K", "--upstream-key-secret", "s"], "kuberay, not vllm-omni"),  # the default
    (["--target", "kuberay", "--upstream-key-secret", "s"], "needs --upstream-key-env"),
    (["--target", "kuberay", "--upstream-key-secret", "Team_Keys"], "is not a Kubernetes Secret name"),
    (["--target", "kuberay", "--upstream-key-secret", "-keys"], "is not a Kubernetes Secret name"),
    (["--target", "kuberay", "--upstream-key-secret", "k" * 254], "at most 253 characters"),
    (["--target", "kuberay", "--upstream-key-secret", "/api-key"], "'' is not a Kubernetes Secret name"),
    (["--target", "kuberay", "--upstream-key-secret", "keys/"], "key '' is not a Secret data key"),
    (["--target", "kuberay", "--upstream-key-secret", "keys/a b"], "key 'a b' is not a Secret data key"),
    (["--target", "kuberay", "--upstream-key-secret", "keys/..k"], "not starting with '..'"),
    (["--target", "kuberay", "--upstream-key-secret", "keys/a/b"], "key 'a/b' is not a Secret data key"),
])
def test_upstream_key_secret_is_refused_naming_the_option(tmp_path: Path, args: list[str], why: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, ["export", str(QWEN3), "--out", str(out), *args])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "--upstream-key-secret" in text and why in text, res.output
    assert not out.exists()
