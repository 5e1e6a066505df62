"""The launch commands ``omniplane export --target vllm-omni`` writes parse and validate with
vLLM-Omni 0.30's own ``vllm serve`` parser (``OmniServeCommand``): one process per deployment on
one host; across hosts the head (``--stage-id`` + ``--omni-master-*`` + ``--omni-lb-policy``) and
``--headless`` stage processes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")
pytestmark = pytest.mark.omni

from omniplane.deploy.export_omni import export_vllm_omni, processes  # noqa: E402
from omniplane.deploy.placement import Hosts  # noqa: E402
from omniplane.spec import load_plan  # noqa: E402
from tests.vllm.omni_loader import hf_dir  # noqa: E402

PLAN = Path(__file__).parents[1] / "deploy" / "qwen3-omni-2dep.yaml"


def _parser(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    import sys
    from unittest import mock

    # the CPU venv lacks torchaudio, which the serve module imports for audio I/O only (not parsing)
    for name in ("torchaudio", "torchaudio.functional", "torchaudio.transforms"):
        try:
            __import__(name)
        except ImportError:
            monkeypatch.setitem(sys.modules, name, mock.MagicMock(name=name))
    from vllm_omni.entrypoints.cli import serve
    from vllm_omni.utils.tracking_parser import TrackingArgumentParser

    serve._ensure_vllm_platform()
    parser = TrackingArgumentParser(description="vLLM OMNI CLI")
    sub = parser.add_subparsers(required=False, dest="subparser")
    [cmd] = serve.cmd_init()
    cmd.subparser_init(sub)
    return parser, cmd


@pytest.mark.parametrize("hosts", ["2x8", "3x4"])
def test_launch_commands_parse_with_vllm_omnis_serve_parser(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hosts: str) -> None:
    plan = load_plan(PLAN)
    ex = export_vllm_omni(plan, Hosts.parse(hosts))
    model = str(hf_dir("qwen3-omni", tmp_path))
    for name, text in ex.files.items():
        (tmp_path / name).write_text(text)
    parser, cmd = _parser(monkeypatch)
    seen = []
    for i, dep in enumerate(ex.deployments):
        for p in processes(dep, i, ex.placement, "least-queue-length"):
            argv = [a.replace("@MODEL", model).replace("@CONFIG_DIR", str(tmp_path))
                    .replace('"$BIND_HOST"', "127.0.0.1").replace('"$HOST0_ADDR"', "10.0.0.1")
                    .replace('"$HOST1_ADDR"', "10.0.0.2") for a in p.argv]
            args = parser.parse_args(argv)
            cmd.validate(args)  # vLLM-Omni's own checks of the flag combination
            assert args.omni and Path(args.deploy_config).is_file()
            seen.append((dep.name, args.headless, args.stage_id, args.omni_dp_size_local))
            if args.stage_id is not None:
                assert args.omni_master_address and args.omni_master_port
            if p.head and p.stage_id is not None:
                assert args.omni_lb_policy == "least-queue-length"
    if hosts == "2x8":
        assert seen == [("d0", False, None, 1), ("d1", False, None, 1)]
    else:  # d0 cut between thinker (2 replicas, head) and talker + code2wav (headless)
        d0 = [s for s in seen if s[0] == "d0"]
        assert d0 == [("d0", False, 0, 2), ("d0", True, 1, 1), ("d0", True, 2, 1)]
