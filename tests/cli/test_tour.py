"""Every command of the README's tour runs as written.

The commands are read from README.md and run in order as subprocesses, in a scratch folder that
links the repository's `.venv`, `examples` and `src` (so `.venv/bin/omniplane ...` and the
relative paths work as from the repository root, and the outputs land in the scratch folder).
`deploy` serves until Ctrl-C: it is started in the background, the commands that talk to it run
while it serves (with a free port instead of 8000, the one change), then it is stopped with
SIGINT. Like tests/deploy/test_serve.py it starts Ray clusters (deploy, rehearse): on a shared
machine run it under the heavy-work lock (`flock /tmp/omniplane-heavy.lock .venv/bin/pytest ...`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 900  # per command, on a busy two-core machine


def tour() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## A short tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(shlex.split(line), cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert res.returncode == 0, f"{line}\nexit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def test_tour_commands_are_real() -> None:
    lines = tour()
    assert len(lines) >= 15 and all(x.startswith(".venv/bin/omniplane ") for x in lines)
    # no placeholders: every file named exists in the repository or is written by an earlier line
    placeholder = re.compile(r"(?<![\w/])(PLAN|my-model|slo|gpu_check)\.(yaml|json)\b|--model M\b")
    assert not [x for x in lines if placeholder.search(x)]
    written: set[str] = set()
    for line in lines:
        args = shlex.split(line)
        written |= {b for a, b in itertools.pairwise(args) if a == "--out"}
        for a in args:
            if re.search(r"\.(yaml|json|jsonl)$", a) and a not in written:
                assert (REPO / a).is_file(), f"{a} ({line}): not in the repository nor written before"


@pytest.mark.ray  # deploy and rehearse start Ray clusters: one at a time (tests/conftest.py)
@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "omniplane").exists(), reason="needs make's .venv")
def test_every_tour_command_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    for name in (".venv", "examples", "src"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "100"}
    env.pop("OMNIPLANE_API_KEY", None)
    lines = tour()
    server = next(x for x in lines if " deploy " in f" {x} ")
    port = str(free_port())
    clients = [x for x in lines if "127.0.0.1:8000" in x]
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in lines:
        if line in clients:
            continue  # run while the server runs, below
        if line == server:
            serve(line.replace("--port 8000", f"--port {port}"), port, clients, tmp_path, env, outputs)
            continue
        outputs[line] = run(line, tmp_path, env)
    # what the tour promises, checked
    assert (tmp_path / "vl.yaml").is_file() and (tmp_path / "deploy.yaml").is_file()
    assert len((tmp_path / "reqs.jsonl").read_text().splitlines()) == 1000
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".png"] * 4
    assert (tmp_path / "profile.csv").is_file()
    for line, res in outputs.items():
        if "--json" in line.split():
            json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def serve(line: str, port: str, clients: list[str], cwd: Path, env: dict[str, str],
          outputs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = subprocess.Popen(shlex.split(line), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert proc.poll() is None, f"deploy exited {proc.returncode}: {proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "deploy did not come up"
            try:
                if httpx.get(f"{url}/v1/omniplane/info", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        for client in clients:
            outputs[client] = run(client.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), cwd, env)
    finally:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()[-3000:] if proc.stderr else ""
