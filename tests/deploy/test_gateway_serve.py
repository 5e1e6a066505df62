"""The router behind ``omniplane export --target ray-serve``: the export's routing document as
the router's routing (``omniplane route`` and the Serve application alike), and the Serve
application itself (built from the exported args; on a local Ray Serve, one request through the
router to a stand-in deployment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omniplane.cli.app import app as cli
from omniplane.deploy.gateway import Gateway
from omniplane.deploy.routing import load_routing
from omniplane.spec.errors import SpecError

QWEN3 = Path(__file__).parent / "qwen3-omni-2dep.yaml"
runner = CliRunner()


def _export(tmp_path: Path, target: str) -> Path:
    out = tmp_path / target
    res = runner.invoke(cli, ["export", str(QWEN3), "--target", target, "--hosts", "2x8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def router_args(tmp_path: Path) -> dict[str, Any]:
    cfg = yaml.safe_load((_export(tmp_path, "ray-serve") / "serve-config.yaml").read_text())
    (router,) = [a for a in cfg["applications"] if a["name"] == "router"]
    assert router["import_path"] == "omniplane.deploy.gateway_serve:app"
    args: dict[str, Any] = router["args"]
    return args


def test_route_loads_the_vllm_omni_exports_routing_file(tmp_path: Path) -> None:
    text = (_export(tmp_path, "vllm-omni") / "routing.yaml").read_text()
    doc = yaml.safe_load(text)
    path = tmp_path / "routing.yaml"
    path.write_text(text.replace("host0", "127.0.0.1").replace("host1", "127.0.0.1"))
    routing = load_routing(path)
    assert routing.model.name == doc["model"]
    assert routing.name == doc["plan"]
    assert routing.deployments == {"d0": "http://127.0.0.1:8001", "d1": "http://127.0.0.1:8002"}
    assert set(routing.routes) == set(doc["types"])
    for t, shares in doc["types"].items():
        got = {r.deployment: r.p for r in routing.routes[t]}
        assert got == {s["deployment"]: s["p"] for s in shares}
        assert routing.slo_ms.get(t) == doc["slo_ms"].get(t)


def test_export_slo_ms_reaches_the_routing(tmp_path: Path) -> None:
    doc = yaml.safe_load((_export(tmp_path, "vllm-omni") / "routing.yaml").read_text())
    doc["deployments"] = {d: {**ep, "url": f"http://127.0.0.1:{9000 + i}"}
                          for i, (d, ep) in enumerate(doc["deployments"].items())}
    doc["slo_ms"] = {"ti2t": 250.0}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    routing = load_routing(path)
    assert routing.slo_ms == {"ti2t": 250.0}
    targets = Gateway(routing).metrics.targets_s
    assert targets["ti2t"] == 0.25 and targets["ti2a"] is None


def test_route_refuses_serve_app_endpoints_naming_the_field(tmp_path: Path) -> None:
    path = _export(tmp_path, "ray-serve") / "routing.yaml"
    with pytest.raises(SpecError) as err:
        load_routing(path)
    msg = str(err.value)
    assert str(path) in msg and "deployments.d0.serve_app" in msg
    assert "resolved by the Ray Serve router application; give url for `omniplane route`" in msg


def test_router_application_builds_from_the_exported_args(tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    from ray.serve import Application

    from omniplane.deploy.gateway_serve import app

    args = router_args(tmp_path)
    assert isinstance(app(args), Application)
    bad = json.loads(json.dumps(args))
    bad["routing"]["types"]["ti2t"][0]["deployment"] = "nowhere"
    with pytest.raises(SpecError, match="unknown deployment"):
        app(bad)


def test_router_limits_become_the_gateways_keys_and_limits(tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    from omniplane.deploy.auth import Guard, Refused
    from omniplane.deploy.gateway_serve import app, gateway_options

    keyed = Guard.with_keys(["k-1"])
    opts = gateway_options({"key_digests": list(keyed.key_digests), "max_body_bytes": 1000,
                            "max_in_flight": 3, "deadline_s": 7.5})
    assert opts.max_in_flight == 3 and opts.deadline_s == 7.5 and opts.guard.max_body_bytes == 1000
    opts.guard.authorize("POST", "/v1/chat/completions", "Bearer k-1")
    with pytest.raises(Refused):
        opts.guard.authorize("POST", "/v1/chat/completions", "Bearer k-2")
    assert not gateway_options(None).guard.keyed  # no limits: the defaults, open
    args = router_args(tmp_path)
    for bad, field in (({"max_in_flight": 0}, "limits.max_in_flight"),
                       ({"key_digests": ["k-1"]}, "limits.key_digests"),
                       ({"max_inflight": 3}, "limits.max_inflight: unknown")):
        with pytest.raises(ValueError, match=field):
            app({**args, "limits": bad})
