"""A tiny OpenAI-compatible streaming server on 127.0.0.1 with controlled delays (tests only).

Run it in its own process (``serve_in_subprocess``) so that the client's timing does not share
a GIL with it: ``python -m tests.perf.sse_server --first 0.1 --inter 0.03`` prints
``PORT <n>`` and serves until killed.

``POST /v1/chat/completions`` waits ``queue_s`` (reported as queueing on ``/metrics`` like
vLLM's ``vllm:request_queue_time_seconds``), then ``first_s`` before the first token, then
``inter_s`` before each further token (with ``"modalities": [..., "audio"]`` each chunk also
carries 80 ms of 24 kHz 16-bit PCM in ``delta.audio.data``); ``GET /v1/models`` answers; after
``fail_after`` completions every request gets HTTP 500. ``POST /v1/completions`` (token-id
prompts) streams the same way, one chunk per token with empty text like vLLM without a
tokenizer, ``max_tokens`` tokens. With ``frontend_s`` the server also reports a prefill time
(``vllm:request_prefill_time_seconds``) of ``first_s - frontend_s``, as if that much of the first
token's delay were spent outside the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

AUDIO_SECONDS = 0.08
AUDIO_CHUNK = base64.b64encode(bytes(int(24000 * AUDIO_SECONDS) * 2)).decode()


@dataclass
class Delays:
    first_s: float = 0.1
    inter_s: float = 0.03
    tokens: int = 8
    queue_s: float = 0.0
    report_queue: bool = True
    fail_after: int | None = None
    frontend_s: float | None = None


class FakeServer:
    def __init__(self, delays: Delays) -> None:
        self.delays = delays
        self.completed = 0
        self.queue_sum = 0.0
        self.queue_count = 0
        self.prompts: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(timeout=5)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """HTTP/1.1 with keep-alive, as a real server: one request after another per connection."""
        sock = writer.get_extra_info("socket")
        if sock is not None:  # no Nagle delay on the small SSE writes
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "GET" and path == "/v1/models":
                    await self._send(writer, 200, "application/json", json.dumps({"data": [{"id": "fake"}]}))
                elif method == "GET" and path == "/metrics":
                    if not self.delays.report_queue:
                        await self._send(writer, 404, "text/plain", "no metrics")
                    else:
                        name = "vllm:request_queue_time_seconds"
                        text = (f"{name}_sum{{model_name=\"fake\"}} {self.queue_sum}\n"
                                f"{name}_count{{model_name=\"fake\"}} {self.queue_count}\n")
                        if self.delays.frontend_s is not None:
                            pf = "vllm:request_prefill_time_seconds"
                            per = self.delays.first_s - self.delays.frontend_s
                            text += (f"{pf}_sum{{model_name=\"fake\"}} {per * self.queue_count}\n"
                                     f"{pf}_count{{model_name=\"fake\"}} {self.queue_count}\n")
                        await self._send(writer, 200, "text/plain", text)
                elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
                    await self._complete(writer, json.loads(body or b"{}"))
                elif method == "GET" and path == "/seen":
                    await self._send(writer, 200, "application/json", json.dumps(self.prompts))
                else:
                    await self._send(writer, 404, "text/plain", "not found")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, status: int, ctype: str, text: str) -> None:
        data = text.encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
                     f"\r\n".encode() + data)
        await writer.drain()

    async def _chunk(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    async def _complete(self, writer: asyncio.StreamWriter, req: dict[str, object]) -> None:
        d = self.delays
        if d.fail_after is not None and self.completed >= d.fail_after:
            await self._send(writer, 500, "application/json", json.dumps({"error": "overloaded"}))
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(d.queue_s)
        self.queue_sum += d.queue_s
        self.queue_count += 1
        completions = "prompt" in req
        if completions:
            ids = list(req["prompt"])  # type: ignore[call-overload]
            prompt, tokens = len(ids), int(req.get("max_tokens", d.tokens))  # type: ignore[call-overload]
            self.prompts.append(",".join(map(str, ids)))
        else:
            content = str(req.get("messages", [{}])[0].get("content", ""))  # type: ignore[index, union-attr]
            prompt, tokens = len(content.split()), d.tokens
            self.prompts.append(content)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(tokens):
            # emit on an absolute schedule so per-chunk processing time does not accumulate
            await asyncio.sleep(max(0.0, start + d.first_s + i * d.inter_s - loop.time()))
            if completions:
                choice: dict[str, object] = {"index": 0, "text": "",
                                             "finish_reason": "length" if i == tokens - 1 else None}
            else:
                delta: dict[str, object] = {"content": f"t{i}"}
                if "audio" in req.get("modalities", []):  # type: ignore[operator]
                    delta["audio"] = {"data": AUDIO_CHUNK}
                choice = {"index": 0, "delta": delta}
            chunk = {"choices": [choice]}
            await self._chunk(writer, f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": tokens}}
        await self._chunk(writer, f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        await self._chunk(writer, b"")
        self.completed += 1


@contextlib.contextmanager
def serve_in_subprocess(delays: Delays) -> Iterator[str]:
    """Start the server in a child process; yields its base URL."""
    args = [sys.executable, "-m", "tests.perf.sse_server", "--first", str(delays.first_s),
            "--inter", str(delays.inter_s), "--tokens", str(delays.tokens), "--queue", str(delays.queue_s)]
    if delays.frontend_s is not None:
        args += ["--frontend", str(delays.frontend_s)]
    if not delays.report_queue:
        args.append("--no-metrics")
    if delays.fail_after is not None:
        args += ["--fail-after", str(delays.fail_after)]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(args, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--first", type=float, default=0.1)
    ap.add_argument("--inter", type=float, default=0.03)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--queue", type=float, default=0.0)
    ap.add_argument("--no-metrics", action="store_true")
    ap.add_argument("--fail-after", type=int, default=None)
    ap.add_argument("--frontend", type=float, default=None)
    a = ap.parse_args()
    server = FakeServer(
        Delays(a.first, a.inter, a.tokens, a.queue, not a.no_metrics, a.fail_after, a.frontend))

    async def run() -> None:
        await server._start()
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
