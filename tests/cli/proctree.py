"""A process tree and its listening TCP sockets, read from /proc (Linux; no psutil, no ss)."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path


def _ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            out[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def tree(root: int) -> set[int]:
    """``root`` and every process descended from it, now."""
    parents = _ppids()
    out = {root}
    grew = True
    while grew:
        new = {p for p, pp in parents.items() if pp in out and p not in out}
        out |= new
        grew = bool(new)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _listeners() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every TCP socket in LISTEN state on this host."""
    out: dict[int, tuple[str, int]] = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A":  # TCP_LISTEN
                continue
            hex_addr, hex_port = f[1].split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc stores the address as 32-bit words in host (little-endian) order
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out[int(f[9])] = (socket.inet_ntop(family, packed), int(hex_port, 16))
    return out


def listening(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, command, address, port) of every TCP socket the processes listen on."""
    by_inode = _listeners()
    out = []
    for pid in sorted(pids):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in by_inode:
                    out.append((pid, comm, *by_inode[inode]))
    return sorted(set(out))


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None  # ::ffff:127.0.0.1
    return (mapped or ip).is_loopback


def off_loopback(sockets: list[tuple[int, str, str, int]]) -> list[tuple[int, str, str, int]]:
    return [s for s in sockets if not is_loopback(s[2])]


def session(sid: int) -> set[int]:
    """Every live process of session ``sid`` (a command started in a session of its own, and
    whatever it started, reparented or not, unless it left the session)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.add(int(d.name))
    return out
