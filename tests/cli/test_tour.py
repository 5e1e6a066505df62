"""Every command of the README's tour runs as written.

The commands are read from README.md and run as subprocesses, in scratch folders that link the
repository's `.venv`, `examples` and `src` (so `.venv/bin/omniplane ...` and the relative paths
work as from the repository root, and the outputs land in the scratch folder).

Each command is its own test, so pytest-xdist spreads the tour over its workers. A command that
reads a file an earlier line writes (`--out vl.yaml`) gets a copy of that file, made once per
run by the earlier line itself in a shared folder (`written_by`); that line's own test checks
the same run's result. `deploy` serves until Ctrl-C: it is started in the background, the
commands that talk to it run while it serves (with a free port instead of 8000, the one
change), then it is stopped with SIGINT; the three are one test. Like tests/deploy/test_serve.py,
deploy and rehearse start Ray clusters (marker `ray`: one at a time under xdist); on a shared
machine run them under the heavy-work lock (`flock /tmp/omniplane-heavy.lock .venv/bin/pytest ...`).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 900  # per command, on a busy two-core machine
PREFIX = ".venv/bin/omniplane "
RAY_COMMANDS = ("deploy", "rehearse")  # the tour's commands that start a local Ray cluster


def tour() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## A short tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def command(line: str) -> str:
    return line.removeprefix(PREFIX).split()[0]


def out_files(line: str) -> set[str]:
    return {b for a, b in itertools.pairwise(shlex.split(line)) if a == "--out"}


def written_by(line: str, lines: list[str]) -> dict[str, str]:
    """The files `line` names that an earlier tour line writes, each with the last such line."""
    earlier = lines[: lines.index(line)]
    return {a: w for a in shlex.split(line) for w in earlier if a in out_files(w)}


def lines_file(path: Path) -> int:
    return len(path.read_text().splitlines())


# What the tour promises: each path, the check it must pass, and the tour line that writes it
# (found by a piece of the line: tests/cli/test_tour.py::test_tour_commands_are_real checks
# that exactly one line has it). Every test also checks any promised path found in its folder.
PROMISES: dict[str, tuple[str, Callable[[Path], bool]]] = {
    "vl.yaml": ("--out vl.yaml", Path.is_file),
    "deploy.yaml": ("--out deploy.yaml", Path.is_file),
    "reqs.jsonl": ("--out reqs.jsonl", lambda p: lines_file(p) == 1000),
    "out": ("--figures out/", lambda p: sorted(q.suffix for q in p.iterdir()) == [".png"] * 4),
    "profile.csv": (" profile ", Path.is_file),
}


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
    assert len(lines) >= 15 and all(x.startswith(PREFIX) for x in lines)
    # no placeholders: every file named exists in the repository or is written by an earlier line
    placeholder = re.compile(r"(?<![\w/])(PLAN|my-model|slo|gpu_check)\.(yaml|json)\b|--model M\b")
    assert not [x for x in lines if placeholder.search(x)]
    written: set[str] = set()
    for line in lines:
        args = shlex.split(line)
        written |= out_files(line)
        for a in args:
            if re.search(r"\.(yaml|json|jsonl)$", a) and a not in written:
                assert (REPO / a).is_file(), f"{a} ({line}): not in the repository nor written before"
    for path, (piece, _) in PROMISES.items():
        assert len([x for x in lines if piece in f" {x} "]) == 1, f"{path}: no single tour line has {piece!r}"
    assert len([x for x in lines if command(x) == "deploy"]) == 1


# --- running the tour, one test per command (the deploy's clients run inside its test) -------

def _tests() -> list[object]:
    lines = tour()
    clients = {x for x in lines if "127.0.0.1:8000" in x}
    params: list[object] = []
    for i, line in enumerate(lines):
        if line in clients:
            continue
        words = list(itertools.takewhile(lambda w: re.fullmatch(r"[a-z][\w-]*", w),
                                         line.removeprefix(PREFIX).split()))[:2]
        marks = [pytest.mark.ray] if command(line) in RAY_COMMANDS else []
        params.append(pytest.param(line, id=f"{i:02d}-{'-'.join(words)}", marks=marks))
    return params


def env_for(folder: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache"), "COLUMNS": "100"}
    env.pop("OMNIPLANE_API_KEY", None)
    return env


def scratch(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in (".venv", "examples", "src"):
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(REPO / name)
    return folder


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder per run, shared by pytest-xdist's workers (the parent of their base temps)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "tour-shared"


@pytest.fixture(scope="session")
def earlier_line(shared_dir: Path) -> Callable[[str], tuple[Path, subprocess.CompletedProcess[str]]]:
    """Runs a tour line at most once per run (whichever worker asks first, under a file lock) in
    its own shared scratch folder, and gives that folder and the line's result: what the line
    wrote is then read (copied) by the lines after it, never written to."""
    shared_dir.mkdir(parents=True, exist_ok=True)
    lines = tour()

    def get(line: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
        folder = shared_dir / f"line-{lines.index(line):02d}"
        record = folder / "result.json"
        with (shared_dir / f"line-{lines.index(line):02d}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not record.exists():
                scratch(folder)
                for name, producer in written_by(line, lines).items():
                    shutil.copy(get(producer)[0] / name, folder / name)
                try:
                    res = run(line, folder, env_for(folder))
                    data = {"returncode": 0, "stdout": res.stdout, "stderr": res.stderr, "error": ""}
                except (AssertionError, subprocess.TimeoutExpired) as e:
                    data = {"returncode": -1, "stdout": "", "stderr": "", "error": str(e)}
                record.write_text(json.dumps(data))
        data = json.loads(record.read_text())
        assert not data["error"], f"(run once for this session) {data['error']}"
        return folder, subprocess.CompletedProcess(shlex.split(line), 0, data["stdout"], data["stderr"])

    return get


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "omniplane").exists(), reason="needs make's .venv")
@pytest.mark.parametrize("line", _tests())
def test_tour_command_runs_as_written(
    line: str, tmp_path: Path, earlier_line: Callable[[str], tuple[Path, subprocess.CompletedProcess[str]]]
) -> None:
    lines = tour()
    if command(line) in RAY_COMMANDS:
        pytest.importorskip("ray")
    inputs = written_by(line, lines)
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    if any(out_files(x) & set(shlex.split(line)) for x in lines[lines.index(line) + 1:]):
        folder, outputs[line] = earlier_line(line)  # a later line reads what this one writes
    else:
        folder = scratch(tmp_path)
        for name, producer in inputs.items():
            shutil.copy(earlier_line(producer)[0] / name, folder / name)
        env = env_for(folder)
        if command(line) == "deploy":
            port = str(free_port())
            clients = [x for x in lines if "127.0.0.1:8000" in x]
            serve(line.replace("--port 8000", f"--port {port}"), port, clients, folder, env, outputs)
        else:
            outputs[line] = run(line, folder, env)
    # what the tour promises, checked where it is written, and wherever else it turns up
    for path, (piece, check) in PROMISES.items():
        if any(piece in f" {x} " for x in [line, *outputs]):
            assert (folder / path).exists(), f"{path}: not written by {line}"
        if (folder / path).exists() and path not in inputs:
            assert check(folder / path), f"{path} after {line}: not what the tour promises"
    for x, res in outputs.items():
        if "--json" in x.split():
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
