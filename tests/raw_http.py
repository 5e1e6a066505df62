"""Raw-socket requests the front-end trials share (``route`` and Serve's proxy)."""

from __future__ import annotations

import contextlib
import select
import socket


def endless_headers(port: int, path: str) -> bytes:
    """Send a request's header lines without end (4 MiB at most) until the server answers;
    the answer's first 12 bytes (``HTTP/1.1 431`` from a server that caps them)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as endless:
        endless.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\n".encode())
        with contextlib.suppress(OSError):
            for _ in range(64):
                if select.select([endless], [], [], 0)[0]:
                    break
                endless.sendall((b"x-a: " + b"a" * 1000 + b"\r\n") * 64)
        return endless.recv(12)
