"""``omniplane route`` as a client or attacker meets it over raw sockets, with a stand-in
deployment on 127.0.0.1 that records what reaches it: keys before anything else, an abandoned
stream closed upstream and its slot freed, and SIGTERM/SIGINT ending open streams with an error
event and requests still waiting on a deployment with 503 (not cut after the grace period with
a 500 and a traceback)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.test_route import CLI, ENV, ROUTES, free_port
from tests.raw_http import endless_headers

pytest.importorskip("uvicorn")


class Upstream:
    """A deployment that streams an event every 0.1 s (model "stream"), 64 KiB events as fast
    as they are taken (model "big"), or never answers (model "hang");
    records each request's model and when its connection closed."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[str] = []
        self.closed: list[str] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        assert ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        async def main() -> None:
            await asyncio.start_server(self._serve, "127.0.0.1", self.port)
            ready.set()
            await asyncio.sleep(120)  # bounded: the tests below end well before

        self.loop.run_until_complete(main())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        model = "?"
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            size = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length"))
            model = json.loads(await reader.readexactly(size))["model"]
            self.requests.append(model)
            if model == "hang":
                await reader.read()  # until the router closes
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for i in range(600):
                data = f"data: {i} {'x' * (65536 if model == 'big' else 0)}\n\n".encode()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
                await asyncio.sleep(0.001 if model == "big" else 0.1)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.append(model)
            writer.close()


def _post(port: int, model: str, key: str | None = "k", query: str = "") -> socket.socket:
    body = json.dumps({"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    auth = f"authorization: Bearer {key}\r\n" if key else ""
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(f"POST /v1/chat/completions{query} HTTP/1.1\r\nhost: x\r\nx-omniplane-type: ti2t\r\n"
              f"connection: close\r\ncontent-type: application/json\r\n"
              f"content-length: {len(body)}\r\n{auth}\r\n{body}".encode())
    return s


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out


def _first_event(s: socket.socket) -> None:
    seen = b""
    while b"data: " not in seen:
        chunk = s.recv(4096)
        assert chunk, seen
        seen += chunk


def _closed(s: socket.socket) -> bool:
    """True once the router closed ``s`` (end of stream, or a reset for bytes it never read)."""
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    s.close()
    return True


def _get(port: int, path: str) -> bytes:
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
    return _read_all(s)


def _until(check: object, what: str, within: float = 10.0) -> None:
    end = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, what
        time.sleep(0.05)


def _start_router(tmp_path: Path, up: Upstream, port: int, *args: str,
                  stderr: int) -> subprocess.Popen[bytes]:
    """``omniplane route`` (key ``k``) in front of ``up`` as deployment ``a``, once it listens."""
    routes = tmp_path / "routing.yaml"
    routes.write_text(json.dumps({**ROUTES, "deployments": {"a": {"url": f"http://127.0.0.1:{up.port}"}}}))
    proc = subprocess.Popen([sys.executable, "-c", CLI, "route", str(routes), "--port", str(port),
                             "--api-key", "k", *args],
                            cwd=tmp_path, env=ENV, stderr=stderr, start_new_session=True)

    def listens() -> bool:
        assert proc.poll() is None
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    try:
        _until(listens, "the router did not listen", 60)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_keys_abandoned_streams_and_signals_over_raw_sockets(tmp_path: Path, sig: signal.Signals) -> None:
    up = Upstream()
    port = free_port()
    proc = _start_router(tmp_path, up, port, "--max-in-flight", "2", "--max-body-mb", "1", "--idle-s", "1",
                         stderr=subprocess.PIPE)
    try:
        if sig == signal.SIGTERM:  # keys: refused before the body reaches anyone; /health open
            for key, query in ((None, ""), ("wrong", ""), (None, "?api_key=k")):
                assert _read_all(_post(port, "stream", key, query)).startswith(b"HTTP/1.1 401")
            assert _get(port, "/metrics").startswith(b"HTTP/1.1 401")
            assert _get(port, "/health").startswith(b"HTTP/1.1 200")
            assert up.requests == []
            # a client that leaves mid-stream: the deployment's connection closes, the slot frees
            s = _post(port, "stream")
            _first_event(s)
            s.close()
            _until(lambda: up.closed == ["stream"], "the abandoned stream stayed open upstream")
            # slowloris: half-sent headers, and a chunked body going on past its 413: closed
            half = socket.create_connection(("127.0.0.1", port), timeout=15)
            half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
            big = socket.create_connection(("127.0.0.1", port), timeout=15)
            big.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\n"
                        b"transfer-encoding: chunked\r\n\r\n")
            answer = b""
            big.settimeout(0.05)
            for _ in range(200):  # at most 12.5 MiB; the limit is 1 MiB
                try:
                    big.sendall(b"10000\r\n" + b"a" * 65536 + b"\r\n")
                    answer += big.recv(4096)
                except TimeoutError:
                    pass
                except OSError:
                    break
                if answer:
                    break
            assert answer.startswith(b"HTTP/1.1 413"), answer
            big.settimeout(15)
            assert _closed(half) and _closed(big)  # by the router, within --idle-s (a timeout here)
            # header lines without end: 431 once they pass 64 KiB (uvicorn alone reads them all)
            assert endless_headers(port, "/v1/chat/completions") == b"HTTP/1.1 431"
        streaming, waiting = _post(port, "stream"), _post(port, "hang")  # both slots taken
        _first_event(streaming)
        _until(lambda: up.requests[-1:] == ["hang"], "the second request did not reach the deployment")
        proc.send_signal(sig)
        streamed, answered = _read_all(streaming), _read_all(waiting)
        # the open stream ends with an error event (then [DONE]), the waiting one gets a 503
        assert b"the router is stopping" in streamed and streamed.rstrip().endswith(b"0")
        assert answered.startswith(b"HTTP/1.1 503") and b"the router is stopping" in answered
        assert proc.wait(timeout=10) == 128 + sig
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in stderr, stderr
        _until(lambda: up.closed.count("hang") == 1, "the router left the waiting request open upstream")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_client_that_stops_reading_its_stream_gives_its_slot_back_at_the_deadline(tmp_path: Path) -> None:
    up = Upstream()
    port = free_port()
    proc = _start_router(tmp_path, up, port, "--max-in-flight", "1", "--deadline-s", "1",
                         stderr=subprocess.DEVNULL)
    try:
        stuck = _post(port, "big")  # read its first event, then never again: the router's send blocks
        _first_event(stuck)
        codes: list[bytes] = []

        def admitted() -> bool:  # the only slot: free again once the 1 s deadline cut the stream
            s = _post(port, "stream")
            codes.append(s.recv(12))
            s.close()
            return codes[-1] == b"HTTP/1.1 200"

        _until(admitted, "the slot stayed taken past the deadline", 10)
        stuck.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
