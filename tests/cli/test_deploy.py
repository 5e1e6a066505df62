"""``omniplane deploy --dry-run``, ``loadgen`` and ``rehearse`` argument handling (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from omniplane.cli.app import app
from omniplane.spec.catalog import catalog_dir

PLAN = str(catalog_dir() / "plans" / "qwen3-omni-16xa100-cornfigurator.yaml")
EXPORTABLE = str(Path(__file__).parents[1] / "deploy" / "qwen3-omni-2dep.yaml")
runner = CliRunner()


def test_dry_run_lists_deployments_and_writes_vllm_omni_configs(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["deploy", EXPORTABLE, "--engine", "vllm-omni", "--dry-run", "--config-dir", str(tmp_path),
              "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [(d["deployment"], d["replicas"], d["gpus_per_replica"]) for d in out["deployments"]] == [
        ("thinker-a-g0", 2, 2), ("speech-a-g0", 1, 1), ("thinker-b-g0", 2, 2), ("speech-b-g0", 1, 1)]
    assert sorted(Path(p).name for p in out["stage_configs"]) == ["d0.yaml", "d1.yaml"]
    # the same files as `omniplane export --target ray-serve`: what the cluster is given to run
    again = runner.invoke(app, ["export", EXPORTABLE, "--target", "ray-serve", "--out",
                                str(tmp_path / "export")])
    assert again.exit_code == 0, again.output
    exported = sorted(p.name for p in (tmp_path / "export").iterdir())
    assert sorted(Path(p).name for p in out["export"]) == exported
    for p in out["export"]:
        assert Path(p).read_text() == (tmp_path / "export" / Path(p).name).read_text()


def test_dry_run_refuses_a_plan_vllm_omni_cannot_run(tmp_path: Path) -> None:
    res = runner.invoke(app, ["deploy", PLAN, "--engine", "vllm-omni", "--dry-run", "--config-dir",
                              str(tmp_path / "c")])
    assert res.exit_code == 2 and "cannot run on vLLM-Omni" in res.output and "--runtime ideal" in res.output
    assert not (tmp_path / "c").exists()


def test_vllm_omni_without_a_vllm_executable_is_refused_before_ray_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import omniplane.cli.deploy as cli_deploy

    monkeypatch.setenv("PATH", str(tmp_path))  # no `vllm` here
    monkeypatch.delenv("OMNIPLANE_VLLM", raising=False)
    started: list[object] = []
    monkeypatch.setattr(cli_deploy, "_serve_forever", lambda *a: started.append(a))
    configs = tmp_path / "configs"
    res = runner.invoke(app, ["deploy", EXPORTABLE, "--engine", "vllm-omni", "--config-dir", str(configs)])
    assert res.exit_code == 2, res.output
    assert "--engine vllm-omni: no `vllm` executable" in res.output, res.output
    assert not started and not configs.exists()


def test_a_local_vllm_omni_deploy_needs_its_placement_on_one_host(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import omniplane.cli.deploy as cli_deploy

    monkeypatch.setenv("OMNIPLANE_VLLM", "/bin/true")
    started: list[object] = []
    monkeypatch.setattr(cli_deploy, "_serve_forever", lambda *a: started.append(a))
    res = runner.invoke(app, ["deploy", EXPORTABLE, "--engine", "vllm-omni", "--config-dir",
                              str(tmp_path / "c")])
    assert res.exit_code == 2 and "placement needs 2 hosts" in res.output and "--address" in res.output
    res = runner.invoke(app, ["deploy", EXPORTABLE, "--engine", "vllm-omni", "--num-gpus", "16",
                              "--config-dir", str(tmp_path / "c")])
    assert res.exit_code == 0 and len(started) == 1, res.output
    res = runner.invoke(app, ["deploy", EXPORTABLE, "--num-gpus", "2", "--address", "127.0.0.1:1"])
    assert res.exit_code == 2 and "--num-gpus" in res.output


def test_unknown_engine_and_node_are_refused() -> None:
    res = runner.invoke(app, ["deploy", PLAN, "--engine", "tensorrt", "--dry-run"])
    assert res.exit_code == 2 and "emulated, vllm-omni" in res.output
    res = runner.invoke(
        app,
        [
            "rehearse",
            PLAN,
            "--workload",
            "qwen3-omni-servegen",
            "--duration",
            "5",
            "--kill-replica",
            "middle",
        ],
    )
    assert res.exit_code == 2 and "aud, front, back" in res.output


def test_loadgen_against_nothing_is_refused_up_front() -> None:
    """Nothing answers at the URL when the run starts: a clear error naming --url, not a run of
    lost requests (requests still count as lost when the server stops answering mid-run:
    tests/loadgen/test_client.py)."""
    res = runner.invoke(
        app,
        ["loadgen", "--url", "http://127.0.0.1:9", "--workload", "qwen3-omni-servegen", "--duration", "2",
         "--rate", "3", "--gpu", "A100-80GB", "--json"],
    )
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --url http://127.0.0.1:9: nothing answers there")
    assert res.stdout == ""


def test_replay_against_nothing_counts_every_request_lost() -> None:
    import asyncio

    from omniplane.loadgen.client import LoadOptions, replay
    from omniplane.loadgen.metrics import LOST
    from omniplane.spec import find_catalog_workload, load_workload
    from omniplane.workload import generate

    path = find_catalog_workload("qwen3-omni-servegen")
    assert path is not None
    reqs = generate(load_workload(path), duration_s=2, rate=3, seed=0)
    records = asyncio.run(replay(reqs, LoadOptions("http://127.0.0.1:9", drain_s=1.0)))
    assert records and all(r.status == LOST for r in records)


def test_loadgen_needs_a_gpu_for_solo_slos(monkeypatch: pytest.MonkeyPatch) -> None:
    import omniplane.loadgen.client as client

    monkeypatch.setattr(client, "fetch_info", lambda *a, **k: {})  # a server that does not say its GPU
    res = runner.invoke(
        app,
        ["loadgen", "--url", "http://127.0.0.1:9", "--workload", "qwen3-omni-servegen", "--duration", "1"],
    )
    assert res.exit_code == 2 and "--gpu" in res.output


def test_an_unreachable_address_is_refused_naming_it_before_ray_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import omniplane.cli.deploy as cli_deploy

    started: list[object] = []
    monkeypatch.setattr(cli_deploy, "_serve_forever", lambda *a: started.append(a))
    t0 = time.monotonic()
    res = runner.invoke(app, ["deploy", PLAN, "--address", "127.0.0.1:1"])
    assert res.exit_code == 2, res.output
    assert "--address 127.0.0.1:1" in res.output and "no Ray cluster answers" in res.output, res.output
    assert not started and time.monotonic() - t0 < 10
    res = runner.invoke(app, ["deploy", PLAN, "--address", "nohostport"])
    assert res.exit_code == 2 and "expected HOST:PORT" in res.output, res.output


def test_a_listening_address_passes_the_reachability_check() -> None:
    import socket

    from omniplane.deploy.cluster import check_reachable

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_reachable(f"127.0.0.1:{s.getsockname()[1]}")
    check_reachable("auto")  # left to Ray


def test_ray_is_imported_only_after_the_local_cluster_is_pinned_to_loopback() -> None:
    """Ray reads its single-machine switch when it is imported: set later, the local cluster's
    servers listen on the machine's routable address (the deploy command imported Ray first)."""
    import subprocess
    import sys

    pytest.importorskip("ray")
    code = f"""
import os, sys
from omniplane.deploy.cluster import SINGLE_MACHINE_ENV
seen = []
def spy(event, args):  # the 'import' audit event: an import statement, not a find_spec probe
    if event == "import" and args[0] == "ray" and not seen:
        seen.append(os.environ.get(SINGLE_MACHINE_ENV))
sys.addaudithook(spy)
os.environ.pop(SINGLE_MACHINE_ENV, None)
import omniplane.cli.deploy as d
d._serve_forever = lambda *a: None
from typer.testing import CliRunner
from omniplane.cli.app import app
res = CliRunner().invoke(app, ["deploy", {PLAN!r}])
assert res.exit_code == 0, res.output
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['0']", out.stdout


def test_the_api_key_in_clear_leaves_the_environment_before_ray_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import omniplane.cli.deploy as cli_deploy
    from omniplane.deploy.auth import API_KEY_ENV
    from omniplane.deploy.proxy_auth import CALLBACK, CALLBACK_ENV, DIGESTS_ENV, LIMITS_ENV

    seen: list[tuple[Any, ...]] = []
    env = os.environ.get
    monkeypatch.setattr(cli_deploy, "_serve_forever", lambda plan, options, *a: seen.append(
        (env(API_KEY_ENV), options.guard, env(CALLBACK_ENV), env(DIGESTS_ENV), env(LIMITS_ENV))))
    monkeypatch.setenv(API_KEY_ENV, "s3cret-key")
    monkeypatch.delenv(CALLBACK_ENV, raising=False)
    res = runner.invoke(app, ["deploy", PLAN, "--host", "0.0.0.0", "--max-body-mb", "2"])
    assert res.exit_code == 0, res.output
    (env_key, guard, callback, digests, limits), = seen
    assert env_key is None and guard.keyed and "s3cret-key" not in repr(guard)
    # while it serves, Ray Serve's proxy would load the key check with the digest (not the key)
    assert callback == CALLBACK and digests == ",".join(guard.key_digests)
    assert json.loads(limits)["max_body_bytes"] == 2 * 2**20  # and the body limit, ahead of the app
    assert not {CALLBACK_ENV, DIGESTS_ENV, LIMITS_ENV} & set(os.environ)  # restored after
