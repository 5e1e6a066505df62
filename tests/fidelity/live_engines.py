"""The two vLLM engines (the CPU build in .venv-vllm) serving the tiny fixture that the tests
marked ``vllm`` share for the session (``live_engines`` in tests/conftest.py): starting one takes
a minute or more on two cores. ``bare`` is vLLM's own scheduler, its engine core polling its
worker with short sleeps (as ``omniplane fidelity --fixture`` starts it); ``horizon`` runs
omniplane's scheduler class with the ``horizon`` policy. tests/fidelity/test_live.py reads both;
tests/deploy/test_gateway_vllm.py puts the router in front of them and kills ``horizon``, then
stops both. ``get()`` starts whichever is not running, so any order of those modules works."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from omniplane.fidelity.schedlive import LiveSchedOptions, class_table, server_spec
from omniplane.fidelity.server import ServerSpec, VllmServer
from omniplane.fixture import FIXTURE, ensure_model_dir
from omniplane.spec import ResolvedWorkload, load_workload
from omniplane.vllm import shmwait

DATA = Path(__file__).resolve().parents[2] / "src" / "omniplane" / "fidelity" / "data"
MIXED: ResolvedWorkload = load_workload(DATA / "tiny-qwen2-mixed.yaml")


def specs(logs: Path) -> dict[str, ServerSpec]:
    model_dir = str(ensure_model_dir())
    opts = LiveSchedOptions(model_dir, MIXED, rate=1.0, log_dir=logs)
    _, table = class_table(MIXED, opts.long_types)
    return {"bare": ServerSpec(model_dir, served_name=FIXTURE.name, log=logs / "vllm-bare.log",
                               env={shmwait.ENV: "0.0005"}),
            "horizon": server_spec("horizon", opts, table)}


class LiveEngines:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self._servers = {k: VllmServer(s) for k, s in specs(logs).items()}

    def get(self) -> dict[str, VllmServer]:
        """Both engines, answering: the ones not running (never started, stopped or killed)
        are started, together."""
        down = [s for s in self._servers.values() if not s.alive()]
        if down:
            for s in down:
                s.stop()  # what is left of a killed one (its process group), if anything
            with ThreadPoolExecutor(len(down)) as pool:  # the start-ups at once
                for f in [pool.submit(s.start) for s in down]:
                    f.result()
        return dict(self._servers)

    def stop(self) -> None:
        for s in self._servers.values():
            s.stop()
