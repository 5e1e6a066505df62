"""``omniplane export --target ray-serve | kuberay``: the Serve config and the RayService's
serveConfigV2 validate against Ray's own ``serve deploy`` schema; GPUs and hosts come from the
placement; ``OmniServer``'s process is started, checked and stopped (a stand-in ``vllm``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.deploy.omni_process import VLLM_ENV, OmniProcess, OmniProcessError, child_env
from tests.deploy.plans import mixed_plan_file

serve_schema = pytest.importorskip("ray.serve.schema")
QWEN3 = Path(__file__).parent / "qwen3-omni-2dep.yaml"
runner = CliRunner()


def _export(tmp_path: Path, target: str, hosts: str = "2x8", *extra: str) -> Path:
    out = tmp_path / target
    res = runner.invoke(app, ["export", str(QWEN3), "--target", target, "--hosts", hosts, "--out", str(out),
                              *extra])
    assert res.exit_code == 0, res.output
    return out


def _check_serve(cfg: dict) -> None:  # type: ignore[type-arg]
    serve_schema.ServeDeploySchema.model_validate(cfg)  # Ray's own schema for `serve deploy`
    apps = {a["name"]: a for a in cfg["applications"]}
    assert sorted(apps) == ["d0", "d1", "router"]
    assert apps["router"]["import_path"] == "omniplane.deploy.gateway_serve:app"
    assert apps["router"]["args"]["routing"]["deployments"]["d0"] == {
        "serve_app": "d0", "gpus": 5, "nodes": ["thinker-a", "speech-a"]}
    for d, host in (("d0", "host0"), ("d1", "host1")):
        [dep] = apps[d]["deployments"]
        assert apps[d]["import_path"] == "omniplane.deploy.omni_server:app"
        assert dep["ray_actor_options"]["num_gpus"] == 5
        assert f"omniplane-{host}" in dep["ray_actor_options"]["resources"]
        assert apps[d]["args"]["deploy_config"]["stages"][0]["devices"] == "0,1,2,3"


def test_serve_config_validates_against_rays_schema(tmp_path: Path) -> None:
    out = _export(tmp_path, "ray-serve")
    cfg = yaml.safe_load((out / "serve-config.yaml").read_text())
    _check_serve(cfg)
    assert (out / "routing.yaml").is_file() and (out / "d0.yaml").is_file()


def test_rayservice_has_serve_config_and_gpu_groups(tmp_path: Path) -> None:
    out = _export(tmp_path, "kuberay")
    svc = yaml.safe_load((out / "rayservice.yaml").read_text())
    assert (svc["apiVersion"], svc["kind"]) == ("ray.io/v1", "RayService")
    _check_serve(yaml.safe_load(svc["spec"]["serveConfigV2"]))
    cluster = svc["spec"]["rayClusterConfig"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    assert sorted(groups) == ["host0", "host1"]
    for h, g in groups.items():
        limits = g["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "8" and g["replicas"] == 1
        assert _start_resources(g) == {f"omniplane-{h}": 1, "gpu_A100-80GB": 8}
        assert g["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert "nodeSelector" not in cluster["headGroupSpec"]["template"]["spec"]
    for a in yaml.safe_load(svc["spec"]["serveConfigV2"])["applications"][:-1]:
        [d] = a["deployments"]
        assert d["ray_actor_options"]["resources"]["gpu_A100-80GB"] == d["ray_actor_options"]["num_gpus"]


def _start_resources(group: dict) -> dict:  # type: ignore[type-arg]
    """A worker group's ``rayStartParams.resources`` (KubeRay's quoted JSON) as a dict."""
    import json

    text = group["rayStartParams"]["resources"]
    assert text.startswith('"') and text.endswith('"')
    return dict(json.loads(text[1:-1].replace('\\"', '"')))


def test_a_plan_on_two_gpu_kinds_puts_each_deployment_on_its_kind(tmp_path: Path) -> None:
    out = tmp_path / "kuberay"
    res = runner.invoke(app, ["export", str(mixed_plan_file(tmp_path)), "--target", "kuberay", "--out",
                              str(out)])
    assert res.exit_code == 0, res.output
    svc = yaml.safe_load((out / "rayservice.yaml").read_text())
    serve = yaml.safe_load(svc["spec"]["serveConfigV2"])
    serve_schema.ServeDeploySchema.model_validate(serve)
    kind_of = {h: v["gpu"] for h, v in yaml.safe_load((out / "placement.yaml").read_text())["hosts"].items()}
    assert sorted(set(kind_of.values())) == ["H100-SXM", "L40S"]
    label = {"H100-SXM": "NVIDIA-H100-80GB-HBM3", "L40S": "NVIDIA-L40S"}
    groups = svc["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert sorted(g["groupName"] for g in groups) == sorted(kind_of)
    for g in groups:
        kind = kind_of[g["groupName"]]
        assert g["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": label[kind]}
        assert _start_resources(g) == {f"omniplane-{g['groupName']}": 1, f"gpu_{kind}": 8}
    asked = []
    for a in serve["applications"]:
        for d in a.get("deployments", []) if a["name"] != "router" else []:
            opts = d["ray_actor_options"]
            [host] = [r.removeprefix("omniplane-") for r in opts["resources"] if r.startswith("omniplane-")]
            kinds = {r: v for r, v in opts["resources"].items() if r.startswith("gpu_")}
            assert kinds == {f"gpu_{kind_of[host]}": opts["num_gpus"]}, (d["name"], opts)
            asked.append(kind_of[host])
    assert sorted(set(asked)) == ["H100-SXM", "L40S"]  # the head on H100, the talker stages on L40S
    serve_out = tmp_path / "serve"  # the ray-serve target pins by host only (the operator starts the nodes)
    res = runner.invoke(app, ["export", str(mixed_plan_file(tmp_path)), "--target", "ray-serve", "--out",
                              str(serve_out)])
    assert res.exit_code == 0, res.output
    pinned = yaml.safe_load((serve_out / "serve-config.yaml").read_text())
    assert not [r for a in pinned["applications"] for d in a.get("deployments", [])
                for r in d["ray_actor_options"]["resources"] if r.startswith("gpu_")]


def test_a_deployment_across_hosts_is_a_head_and_headless_stages(tmp_path: Path) -> None:
    out = _export(tmp_path, "ray-serve", "3x4")
    cfg = yaml.safe_load((out / "serve-config.yaml").read_text())
    serve_schema.ServeDeploySchema.model_validate(cfg)
    d0 = next(a for a in cfg["applications"] if a["name"] == "d0")
    deps = {d["name"]: d["ray_actor_options"] for d in d0["deployments"]}
    assert deps["OmniServer"]["num_gpus"] == 4
    assert deps["OmniServer"]["resources"] == {"omniplane-host0": 0.001}
    assert sorted(deps) == ["OmniServer", "stages1+2-host1"]  # talker and code2wav: one replica, one GPU
    assert deps["stages1+2-host1"]["num_gpus"] == 1
    assert d0["args"]["distributed"] == {"stage_id": 0, "replicas": 2, "master_port": 25001,
                                         "lb_policy": "random", "master_resource": "omniplane-host0",
                                         "colocated": []}
    assert d0["args"]["stages"] == [{"name": "stages1+2-host1", "processes": [
        {"stage_id": 1, "replicas": 1}, {"stage_id": 2, "replicas": 1}]}]


STAND_IN = """\
import http.server, json, os, sys
args = sys.argv[1:]
cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
open(os.environ["STAND_IN_ARGS"], "w").write(json.dumps({"argv": args, "cvd": cvd, "key": os.environ.get(
    "VLLM_API_KEY"), "names": "OMNI_TEST_KEY" in os.environ}))
port = int(args[args.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_omni_process_starts_waits_checks_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\n{STAND_IN}")
    exe.chmod(0o755)
    monkeypatch.setenv(VLLM_ENV, str(exe))
    monkeypatch.setenv("STAND_IN_ARGS", str(tmp_path / "args.json"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    port = _free_port()
    proc = OmniProcess("Qwen/X", {"stages": [{"stage_id": 0, "devices": "0,1"}]}, port=port)
    try:
        proc.wait_ready(timeout=30, poll=0.1)
        proc.check()
        import json

        rec = json.loads((tmp_path / "args.json").read_text())
        assert rec["argv"][:5] == ["serve", "Qwen/X", "--omni", "--deploy-config", str(proc.config)]
        assert rec["argv"][-4:] == ["--host", "127.0.0.1", "--port", str(port)] and rec["cvd"] == "3,4"
        assert yaml.safe_load(proc.config.read_text())["stages"][0]["devices"] == "0,1"
        pid = proc.proc.pid if proc.proc else 0
    finally:
        proc.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OmniProcessError, match="exited"):
        proc.check()


def test_headless_process_is_healthy_while_alive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    exe.chmod(0o755)
    monkeypatch.setenv(VLLM_ENV, str(exe))
    proc = OmniProcess("Qwen/X", {"stages": []}, port=None, extra_args=["--stage-id", "1"])
    try:
        assert "--headless" in proc.argv and "--port" not in proc.argv
        proc.wait_ready(timeout=5, poll=0.1)
        proc.check()
    finally:
        proc.stop()
    assert not proc.healthy()


def test_omni_process_that_dies_is_reported_with_its_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\nimport sys\nprint('no GPU here')\nsys.exit(3)\n")
    exe.chmod(0o755)
    monkeypatch.setenv(VLLM_ENV, str(exe))
    proc = OmniProcess("Qwen/X", {"stages": []}, port=_free_port())
    with pytest.raises(OmniProcessError, match=r"exited with 3 before serving:\nno GPU here"):
        proc.wait_ready(timeout=30, poll=0.1)


@pytest.mark.parametrize("hosts", ["2x8", "3x4"])
def test_the_serve_config_args_build_the_omni_server_application(tmp_path: Path, hosts: str) -> None:
    from ray.serve import Application

    from omniplane.deploy import omni_server

    out = _export(tmp_path, "ray-serve", hosts)
    cfg = yaml.safe_load((out / "serve-config.yaml").read_text())
    d0 = next(a for a in cfg["applications"] if a["name"] == "d0")
    assert isinstance(omni_server.app(d0["args"]), Application)  # the builder Serve calls with args


def test_the_ray_targets_name_the_key_and_kuberay_takes_it_from_a_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-upstream-ray-91c2"
    monkeypatch.setenv("OMNI_TEST_KEY", secret)
    serve_out = _export(tmp_path, "ray-serve", "3x4", "--upstream-key-env", "OMNI_TEST_KEY")
    kube_out = _export(tmp_path, "kuberay", "2x8", "--upstream-key-env", "OMNI_TEST_KEY")
    assert all(secret not in f.read_text() for out in (serve_out, kube_out) for f in out.iterdir())
    cfg = yaml.safe_load((serve_out / "serve-config.yaml").read_text())
    serve_schema.ServeDeploySchema.model_validate(cfg)
    apps = {a["name"]: a for a in cfg["applications"]}
    assert apps["d0"]["args"]["api_key_env"] == apps["d1"]["args"]["api_key_env"] == "OMNI_TEST_KEY"
    assert {d["api_key_env"] for d in apps["router"]["args"]["routing"]["deployments"].values()} == {
        "OMNI_TEST_KEY"}
    assert "runtime_env" not in str(cfg)
    svc = yaml.safe_load((kube_out / "rayservice.yaml").read_text())
    serve_schema.ServeDeploySchema.model_validate(yaml.safe_load(svc["spec"]["serveConfigV2"]))
    cluster = svc["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for pod in pods:
        [c] = pod["template"]["spec"]["containers"]
        assert c["env"] == [{"name": "OMNI_TEST_KEY", "valueFrom": {"secretKeyRef": {
            "name": "omniplane-upstream-key", "key": "api-key"}}}]
    head = (kube_out / "rayservice.yaml").read_text()
    assert "kubectl create secret generic omniplane-upstream-key" in head


def test_omni_server_gives_its_api_server_the_key_by_environment_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from omniplane.deploy import omni_server

    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\n{STAND_IN}")
    exe.chmod(0o755)
    monkeypatch.setenv(VLLM_ENV, str(exe))
    monkeypatch.setenv("STAND_IN_ARGS", str(tmp_path / "args.json"))
    monkeypatch.delenv("OMNI_TEST_KEY", raising=False)
    server_cls = omni_server.OmniServer.func_or_class  # type: ignore[attr-defined]  # the class Serve wraps
    with pytest.raises(OmniProcessError, match="api_key_env OMNI_TEST_KEY: the environment variable is "):
        server_cls("Qwen/X", {"stages": []}, port=_free_port(), host="127.0.0.1", api_key_env="OMNI_TEST_KEY")
    assert not (tmp_path / "args.json").exists()  # nothing started
    monkeypatch.setenv("OMNI_TEST_KEY", "sk-upstream-serve-5d1e")
    server = server_cls("Qwen/X", {"stages": []}, port=_free_port(), host="127.0.0.1",
                        startup_timeout_s=30, api_key_env="OMNI_TEST_KEY")
    try:
        rec = json.loads((tmp_path / "args.json").read_text())
        assert rec["key"] == "sk-upstream-serve-5d1e" and rec["names"] is False
        assert "sk-upstream-serve-5d1e" not in " ".join(rec["argv"])
        assert "sk-upstream-serve-5d1e" not in server.proc.config.read_text()
    finally:
        server.__del__()
    env = {"OMNI_TEST_KEY": "k", "VLLM_API_KEY": "stale", "PATH": "/bin"}  # headless stages: no key at all
    assert child_env("OMNI_TEST_KEY", api=False, environ=env) == {"PATH": "/bin"}
    assert child_env(None, api=True, environ=env) is None  # no key: the environment as it is


def test_a_kind_without_a_product_label_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omniplane.deploy import export_ray
    from omniplane.spec import load_gpus

    cat = load_gpus()
    gpus = [g.model_copy(update={"gpu_product_label": None}) if g.name == "L40S" else g for g in cat.gpus]
    bare = cat.model_copy(update={"gpus": gpus})
    monkeypatch.setattr(export_ray, "load_gpus", lambda: bare)
    out = tmp_path / "x"
    res = runner.invoke(app, ["export", str(mixed_plan_file(tmp_path)), "--target", "kuberay", "--out",
                              str(out)])
    assert res.exit_code == 2 and "GPU kind L40S" in res.output, res.output
    assert "gpu_product_label" in res.output and not out.exists()


def test_an_omni_process_refuses_a_port_another_server_holds(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\n{STAND_IN}")
    exe.chmod(0o755)
    monkeypatch.setenv(VLLM_ENV, str(exe))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OmniProcessError, match=f"port {port} on 127.0.0.1 is in use"):
            OmniProcess("Qwen/X", {"stages": []}, port=port)
