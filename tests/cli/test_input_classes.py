"""Every class of bad input gets a clear error (exit 2, stderr only) naming the file (line,
field) or option, quoting at most the offending value, never the file's other content and
never a raw control character: files that are not regular or too large, integers beyond
Python's digit limit, NaN and infinities, timestamps mixing zones, non-ASCII digits, a server
that is not what ``--url`` should name."""

from __future__ import annotations

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from omniplane.errors import InputError
from tests.cli.slips import invoke

HUGE = "9" * 5000  # beyond Python's int-str digit limit (4,300)


def refused(args: list[str], root: Path, *names: str) -> str:
    """Exit 2, nothing on stdout, every ``names`` in the message, no raw control character."""
    out = invoke(args, root)
    assert out.code == 2, (out.code, out.stderr)
    assert out.stdout == ""
    assert not any(ord(c) < 32 and c != "\n" for c in out.stderr), out.stderr
    for name in names:
        assert name in out.stderr, (name, out.stderr)
    return out.stderr


READERS = {  # a command reading one kind of input file: args with FILE for the path
    "spec": ["validate", "FILE"],
    "trace": ["workload", "show", "FILE", "--format", "csv"],
    "sweep": ["calibrate", "--from", "FILE"],
    "calibration": ["perf", "validate", "--calibration", "FILE", "--no-table3", "--no-transfer"],
}


def _with(args: list[str], path: str) -> list[str]:
    return [path if a == "FILE" else a for a in args]


@pytest.mark.parametrize("reader", sorted(READERS))
def test_files_that_are_not_regular_are_refused_before_reading(root: Path, reader: str) -> None:
    os.mkfifo(root / "fifo.yaml")
    for path, kind in (("fifo.yaml", "FIFO"), ("/dev/zero", "device")):
        refused(_with(READERS[reader], path), root, path, kind)


def test_files_over_the_limit_are_refused_before_reading(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omniplane.workload import formats

    (root / "big.yaml").write_text("# " + "x" * (2 * 2**20) + "\n")
    refused(["validate", "big.yaml"], root, "big.yaml", "at most 2,097,152")
    monkeypatch.setattr(formats, "MAX_TRACE_BYTES", 100)
    (root / "big.csv").write_text("arrival_s\n" + "1\n" * 100)
    refused(["workload", "show", "big.csv"], root, "big.csv", "at most 100")


def test_integers_beyond_the_digit_limit(root: Path) -> None:
    (root / "huge.yaml").write_text(f"kind: workload\nname: {HUGE}\nrate: {HUGE}\n")
    err = refused(["validate", "huge.yaml"], root, "huge.yaml:3:7: rate:", "5,000 digits")
    assert HUGE[:50] not in err
    (root / "huge.json").write_text(f'{{"kind": "workload", "rate": {HUGE}}}')
    refused(["validate", "huge.json"], root, "huge.json", "5,000 digits")
    (root / "huge.jsonl").write_text(f'{{"arrival_s": 0}}\n{{"arrival_s": {HUGE}}}\n')
    refused(["workload", "show", "huge.jsonl"], root, "huge.jsonl:2:", "5,000 digits")
    (root / "sweep.json").write_text(f'{{"kind": "omniplane-sm-sweep", "gpu": {HUGE}}}')
    refused(["calibrate", "--from", "sweep.json"], root, "sweep.json", "5,000 digits")


def test_nan_and_infinities(root: Path) -> None:
    sweep = {"kind": "omniplane-sm-sweep", "gpu": "a100", "works": {"k": {"flops": 1e9}},
             "points": [{"kernel": "k", "sms": 54, "time_ms": "NaN"}]}
    text = json.dumps(sweep).replace('"NaN"', "NaN")
    (root / "sweep.json").write_text(text)
    refused(["calibrate", "--from", "sweep.json"], root, "--from", "sweep.json", "NaN")
    (root / "sweep.json").write_text(json.dumps({**sweep, "points": [{"kernel": "k", "sms": 54,
                                                                      "time_ms": True}]}))
    refused(["calibrate", "--from", "sweep.json"], root, "points[0].time_ms")
    from omniplane.perf.factors import default_calibration_path

    cal = json.loads(default_calibration_path().read_text())
    cal["default"]["factors"][next(iter(cal["default"]["factors"]))] = 1e400  # inf in JSON: 1e400
    (root / "cal.json").write_text(json.dumps(cal).replace("Infinity", "1e400"))
    refused(["perf", "validate", "--calibration", "cal.json", "--no-table3"], root,
            "--calibration", "default.factors.")


def test_timestamps_mixing_zones(root: Path) -> None:
    (root / "azure.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:50+00:00,396,109\n")
    refused(["workload", "show", "azure.csv"], root, "azure.csv:3: TIMESTAMP:", "timezone")


def test_control_characters_are_escaped_and_other_content_never_echoed(root: Path) -> None:
    (root / "passwd.csv").write_text("root:x:0:0:SECRET-ONE:/root:/bin/bash\nbin:x:1:1:SECRET-TWO\n")
    err = refused(["workload", "show", "passwd.csv", "--format", "csv"], root, "passwd.csv:1")
    assert "SECRET" not in err
    (root / "esc.csv").write_text("arrival_s,prompt_tokens\n0,10\n1,\x1b]0;pwned\x07\x1b[31m\n")
    refused(["workload", "show", "esc.csv"], root, "esc.csv:3: prompt_tokens:", "\\x1b]0;pwned\\x07")
    (root / "esc.yaml").write_text("kind: workload\nname: \"\\e[2J\\a\"\nmodel: nope\x07\n")
    refused(["validate", "esc.yaml"], root, "esc.yaml")


@pytest.mark.parametrize(("args", "option"), [
    (["plan", "--model", "qwen3-vl", "--gpus", "\u0663"], "--gpus"),  # ARABIC-INDIC DIGIT THREE
    (["workload", "sample", "w.yaml", "--n", "\uff11\uff10", "--out", "r.jsonl"], "--n"),  # fullwidth 10
    (["sim", "queue", "--rho", "0.\u0665"], "--rho"),
    (["plan", "--model", "qwen3-vl", "--gpus", "9" * 40], "--gpus"),
])
def test_options_take_ascii_digits_only(root: Path, args: list[str], option: str) -> None:
    refused(args, root, option, "ASCII digits")
    assert not (root / "r.jsonl").exists()


class _Html(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>\x1b[31m not an ingress</html>")

    def log_message(self, *args: object) -> None:
        pass


def test_a_url_that_is_not_an_ingress() -> None:
    from omniplane.loadgen.client import fetch_info

    server = HTTPServer(("127.0.0.1", 0), _Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(InputError, match="not JSON") as info:
            fetch_info(f"http://127.0.0.1:{server.server_port}")
        assert "not an ingress" not in str(info.value)  # the body is not echoed
    finally:
        server.shutdown()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # takes connections, never answers
    try:
        with pytest.raises(InputError, match="no answer"):
            fetch_info(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3)
    finally:
        silent.close()


def test_a_port_in_use_is_a_port_error(root: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        from omniplane.cli import options as opt

        with pytest.raises(Exception, match=r"--port .* already in use"):
            opt.check_port_free("127.0.0.1", busy.getsockname()[1])
    finally:
        busy.close()


def test_a_hand_edited_plan_gets_every_problem_at_once(root: Path) -> None:
    from tests.cli.slips import CATALOG_PLAN

    text = CATALOG_PLAN.read_text()
    for old, new in (("ti2t: [{nodes: [front], p: 1.0}]", "ti2t: [{nodes: [front], p: 0.5}]"),
                     ("max_batch: 64}", "max_batch: 9999}"),
                     ("tp: 1, max_batch: 16", "tp: 2, max_batch: 16")):
        assert old in text
        text = text.replace(old, new)
    (root / "edited.yaml").write_text(text)
    # the plan's own checks (route sums, budget) and its checks against the model (tp, batch)
    refused(["validate", "edited.yaml"], root, "routes.ti2t: route probabilities sum to 0.5",
            "nodes[2].executors[0].max_batch: max_batch 9999", "nodes[0].executors[0].tp: tp 2",
            "plan uses 17 GPUs")
