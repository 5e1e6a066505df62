"""``omniplane export --target vllm-omni``: realisable plans become vLLM-Omni deployments with
files, placement keeps streaming edges in a host, and ideal-space plans are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.deploy.export_omni import export_vllm_omni, processes
from omniplane.deploy.placement import Hosts, PlacementError, place
from omniplane.deploy.routing_file import read_routing_file
from omniplane.deploy.topology import NotRealisable, deployments
from omniplane.perf.stage_memory import StageMemoryError
from omniplane.spec import load_plan

HERE = Path(__file__).parent
QWEN3 = HERE / "qwen3-omni-2dep.yaml"
QWEN25 = HERE / "qwen2.5-omni-1dep.yaml"
OLD = HERE / "qwen3-omni-3node.yaml"
runner = CliRunner()


def _plan_text(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_deployments_are_route_connected_whole_pipelines() -> None:
    deps = deployments(load_plan(QWEN3))
    assert [(d.name, d.nodes, d.gpus) for d in deps] == [
        ("d0", ("thinker-a", "speech-a"), 5), ("d1", ("thinker-b", "speech-b"), 5)]
    speech = deps[0].group_of(1)
    assert speech.stage_ids == (1, 2) and speech.shares_gpu and deps[0].group_of(2) is speech


def test_export_writes_configs_scripts_placement_and_routing(tmp_path: Path) -> None:
    res = runner.invoke(app, ["export", str(QWEN3), "--hosts", "2x8", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["README.md", "d0.yaml", "d1.yaml", "launch-host0.sh", "launch-host1.sh",
                     "placement.yaml", "routing.yaml"]
    d0 = yaml.safe_load((tmp_path / "d0.yaml").read_text())
    st = {s["stage_id"]: s for s in d0["stages"]}
    s0 = st[0]
    got = (s0["num_replicas"], s0["tensor_parallel_size"], s0["devices"], s0["max_num_seqs"])
    assert got == (2, 2, "0,1,2,3", 32)
    assert st[1]["devices"] == st[2]["devices"] == "4"  # talker and code2wav share a GPU
    assert st[1]["gpu_memory_utilization"] + st[2]["gpu_memory_utilization"] <= 0.95
    assert st[1]["input_connectors"] == {"from_stage_0": "connector_of_shared_memory"}  # in one host
    route = read_routing_file(tmp_path / "routing.yaml")
    shares = {t: {s.deployment: s.p for s in v} for t, v in route.types.items()}
    assert shares["ti2a"] == shares["ti2t"] == {"d0": 0.5, "d1": 0.5}
    assert route.deployments["d0"].url == "http://host0:8001" and route.served_model.startswith("Qwen/")
    script = (tmp_path / "launch-host0.sh").read_text()
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4 vllm serve \"$MODEL\" --omni --deploy-config" in script
    assert "--headless" not in script  # one host: one process runs every stage


def test_qwen25_plan_exports(tmp_path: Path) -> None:
    ex = export_vllm_omni(load_plan(QWEN25), Hosts.parse("1x2"))
    [doc] = ex.configs.values()
    st = {s["stage_id"]: s for s in doc["stages"]}
    assert (st[0]["devices"], st[1]["devices"], st[2]["devices"]) == ("0", "1", "1")
    assert set(ex.routing.types) == set(load_plan(QWEN25).spec.routes)


def test_old_plan_is_refused_naming_node_and_stage(tmp_path: Path) -> None:
    with pytest.raises(NotRealisable) as err:
        deployments(load_plan(OLD))
    msg = str(err.value)
    assert "plan node 'aud' runs ['audio_encoder'] of vLLM-Omni stage 0 'thinker'" in msg
    assert "--runtime ideal" in msg
    res = runner.invoke(app, ["export", str(OLD), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "plan node 'front'" in res.output
    assert not (tmp_path / "x").exists()


def test_a_deployment_missing_a_stage_is_refused(tmp_path: Path) -> None:
    text = QWEN3.read_text().replace("[{nodes: [thinker-a], p: 0.5}, {nodes: [thinker-b], p: 0.5}]",
                                     "[{nodes: [thinker-c], p: 1.0}]")
    text = text.replace("routes:", """  - name: thinker-c
    components: [audio_encoder, image_encoder, video_encoder, thinker]
    executors: [{count: 1, tp: 2, max_batch: 32}]
routes:""").replace("gpus: 10", "gpus: 12")
    want = r"deployment d2 \(nodes thinker-c\) does not run stage\(s\) 1 'talker'"
    with pytest.raises(NotRealisable, match=want):
        deployments(load_plan(_plan_text(tmp_path, text)))


def test_placement_keeps_edges_in_host_and_splits_at_few_edges() -> None:
    deps = deployments(load_plan(QWEN3))
    two = place(deps, Hosts.parse("2x8"))
    for d in deps:
        assert len(two.hosts_of(d.name)) == 1
        assert two.edge_in_host(d.name, d.groups[0].node, d.groups[1].node)
    # hosts of 4 GPUs: a 5-GPU deployment is cut once, between thinker and speech
    small = place(deps, Hosts.parse("3x4"))
    d0 = deps[0]
    assert small.hosts_of("d0", "thinker-a") != small.hosts_of("d0", "speech-a")
    assert len(small.hosts_of("d0", "thinker-a")) == 1
    with pytest.raises(PlacementError, match="--hosts"):
        place(deps, Hosts.parse("1x8"))
    with pytest.raises(PlacementError, match="TP 2"):
        place(deps, Hosts.parse("x1"))
    assert d0.gpus == 5


def test_across_hosts_mooncake_and_headless_processes() -> None:
    plan = load_plan(QWEN3)
    ex = export_vllm_omni(plan, Hosts.parse("3x4"))
    d0 = ex.configs["d0"]
    st = {s["stage_id"]: s for s in d0["stages"]}
    assert st[1]["input_connectors"] == {"from_stage_0": "mooncake_connector"}
    assert st[0]["output_connectors"] == {"to_stage_1": "mooncake_connector"}
    assert st[2]["input_connectors"] == {"from_stage_1": "connector_of_shared_memory"}  # same GPU
    assert d0["connectors"]["mooncake_connector"]["name"] == "MooncakeTransferEngineConnector"
    assert st[0]["devices"] == "0,1"  # per-replica template; CUDA_VISIBLE_DEVICES per process
    procs = processes(ex.deployments[0], 0, ex.placement, "random")
    head = [p for p in procs if p.head]
    assert len(head) == 1 and head[0].stage_id == 0 and head[0].replicas == 2
    assert "--port" in head[0].argv and "--omni-lb-policy" in head[0].argv
    rest = sorted((p.stage_id, p.host, "--headless" in p.argv) for p in procs if not p.head)
    assert [(s, h) for s, h, _ in rest] == [(1, rest[0][1]), (2, rest[0][1])] and all(x for *_, x in rest)


def test_memory_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    text = QWEN3.read_text().replace("{count: 2, tp: 2, max_batch: 32}]\n  - name: speech-a",
                                     "{count: 2, tp: 1, max_batch: 32}]\n  - name: speech-a")
    text = text.replace("gpus: 10", "gpus: 8").replace("gpu: A100-80GB", "gpu: L40S")  # 48 GB
    with pytest.raises(StageMemoryError, match=r"deployment d0, plan node 'thinker-a'.*does not fit on L40S"):
        export_vllm_omni(load_plan(_plan_text(tmp_path, text)), Hosts.parse(None))


def test_launch_script_runs_the_commands_with_their_gpus(tmp_path: Path) -> None:
    """The host script as bash runs it, with a stand-in ``vllm`` that records its arguments."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    assert runner.invoke(app, ["export", str(QWEN3), "--hosts", "3x4", "--out", str(out)]).exit_code == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rec = tmp_path / "calls.jsonl"
    (bin_dir / "vllm").write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\n"
        f"open({str(rec)!r}, 'a').write(json.dumps([os.environ['CUDA_VISIBLE_DEVICES'], sys.argv[1:]])"
        " + '\\n')\n"
        "time.sleep(1)\n")
    (bin_dir / "vllm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOST0_ADDR": "10.0.0.1",
           "HOST1_ADDR": "10.0.0.2", "HOST2_ADDR": "10.0.0.3"}
    hosts = sorted(p.name for p in out.glob("launch-*.sh"))
    for h in hosts:
        subprocess.run(["bash", str(out / h)], env=env, check=True, timeout=30)
    calls = [json.loads(line) for line in rec.read_text().splitlines()]
    head = [(cvd, a) for cvd, a in calls if "--port" in a and "--stage-id" in a and "8001" in a]
    assert len(head) == 1 and head[0][0] == "0,1,2,3" and "10.0.0.1" in head[0][1]  # d0's head on host0
    assert head[0][1][:4] == ["serve", "Qwen/Qwen3-Omni-30B-A3B-Instruct", "--omni", "--deploy-config"]
    assert head[0][1][4] == str(out.resolve() / "d0.yaml")
    d0 = [(cvd, a[a.index("--stage-id") + 1]) for cvd, a in calls
          if "--headless" in a and a[4].endswith("d0.yaml")]
    assert sorted(s for _, s in d0) == ["1", "2"] and d0[0][0] == d0[1][0]  # talker, code2wav: one GPU
    bad = subprocess.run(["bash", str(out / "launch-host0.sh")], env={**env, "HOST0_ADDR": ""},
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "HOST0_ADDR" in bad.stderr


@pytest.mark.parametrize("bad", ["2by8", "0x8", "2x0", "x"])
def test_bad_hosts_is_a_clear_option_error(tmp_path: Path, bad: str) -> None:
    res = runner.invoke(app, ["export", str(QWEN3), "--hosts", bad, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--hosts" in res.output and "2x8" in res.output, res.output
    assert not (tmp_path / "x").exists()


def test_the_upstream_key_reaches_each_api_server_by_environment_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--upstream-key-env``: the routing file names the variable, no file holds the key, and each
    launch script gives it to its API servers as VLLM_API_KEY (not in argv; headless stages get
    none, no process gets the variable itself); unset, the script stops naming it."""
    import json
    import os
    import subprocess
    import sys

    secret = "sk-upstream-test-7f3a"
    monkeypatch.setenv("OMNI_TEST_KEY", secret)  # set while exporting: still never written
    out = tmp_path / "out"
    res = runner.invoke(app, ["export", str(QWEN3), "--hosts", "3x4", "--out", str(out),
                              "--upstream-key-env", "OMNI_TEST_KEY"])
    assert res.exit_code == 0, res.output
    assert all(secret not in f.read_text() for f in out.iterdir())
    route = read_routing_file(out / "routing.yaml")
    assert {d: ep.api_key_env for d, ep in route.deployments.items()} == {"d0": "OMNI_TEST_KEY",
                                                                          "d1": "OMNI_TEST_KEY"}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rec = tmp_path / "calls.jsonl"
    (bin_dir / "vllm").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(rec)!r}, 'a').write(json.dumps([sys.argv[1:], os.environ.get('VLLM_API_KEY'), "
        "'OMNI_TEST_KEY' in os.environ]) + '\\n')\n"
        "import time; time.sleep(1)\n")
    (bin_dir / "vllm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOST0_ADDR": "10.0.0.1",
           "HOST1_ADDR": "10.0.0.2", "HOST2_ADDR": "10.0.0.3", "VLLM_API_KEY": "stale"}
    for script in sorted(out.glob("launch-*.sh")):
        subprocess.run(["bash", str(script)], env=env, check=True, timeout=30)
    calls = [json.loads(line) for line in rec.read_text().splitlines()]
    api = [(key, has) for argv, key, has in calls if "--port" in argv]
    headless = [(key, has) for argv, key, has in calls if "--headless" in argv]
    assert len(api) == 2 and headless and len(calls) == len(api) + len(headless)
    assert api == [(secret, False)] * 2 and headless == [(None, False)] * len(headless)
    assert all(secret not in " ".join(argv) for argv, _, _ in calls)
    rec.unlink()
    unset = {k: v for k, v in env.items() if k != "OMNI_TEST_KEY"}
    bad = subprocess.run(["bash", str(out / "launch-host0.sh")], env=unset, capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode != 0 and "OMNI_TEST_KEY" in bad.stderr and not rec.exists()
    for name, why in (("1KEY", "not an environment variable name"), ("MODEL", "launch scripts set")):
        res = runner.invoke(app, ["export", str(QWEN3), "--out", str(tmp_path / "x"),
                                  "--upstream-key-env", name])
        assert res.exit_code == 2 and "--upstream-key-env" in res.output and why in res.output, res.output
    assert not (tmp_path / "x").exists()
