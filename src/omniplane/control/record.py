"""A shared-memory control record with torn-read protection.

File layout (little endian, one file ``omniplane-<name>`` in ``/dev/shm`` by default)::

    header (64 bytes): magic "OMNIPLN1", version u32, slots u32, slot_size u32, total_sms u32
    slot i (64 bytes): seq u64 | crc32 u32 | pid u32, active u32, step u64, updated_ns u64,
                       sm_level i32, sm_count u32, pressure f64, bw_util f64

Slot 0 belongs to the shared stage (its scheduler writes the chosen SM level and the memory
pressure), slots 1.. to the downstream stages (each writes how many requests it has active).
Each slot has exactly one writing process; any process may read any slot.

Torn reads are prevented by a seqlock: the writer makes ``seq`` odd, writes the payload, then
makes ``seq`` even again; a reader retries while ``seq`` is odd or changed during its copy.
On top of it every payload carries a CRC-32, so a reader also rejects a payload whose bytes
do not belong together (a store order the seqlock alone would not catch on a weakly ordered
CPU, or a writer that died half-way). ``updated_ns`` is ``time.monotonic_ns()``: on Linux the
monotonic clock is system-wide, so readers in other processes can age a slot.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import re
import struct
import tempfile
import time
import zlib
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

MAGIC = b"OMNIPLN1"
VERSION = 1
HEADER = struct.Struct("<8sIIII40x")
SEQ = struct.Struct("<Q")
CRC = struct.Struct("<I")
PAYLOAD = struct.Struct("<IIQQiIdd")
SLOT_SIZE = 64
_BODY = CRC.size + PAYLOAD.size  # bytes after seq covered by one copy
_PACK, _UNPACK = PAYLOAD.pack, PAYLOAD.unpack
_CRC_PACK, _CRC_UNPACK = CRC.pack, CRC.unpack_from
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,100}$")
assert HEADER.size == 64 and SEQ.size + _BODY <= SLOT_SIZE


def _default_dir() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


DEFAULT_DIR = _default_dir()


class RecordFormatError(ValueError):
    """The file exists but is not a control record of this layout."""


class RecordBusy(RuntimeError):
    """A consistent copy could not be taken within the retry budget (a writer died mid-write,
    or writes never pause)."""


class SlotState(NamedTuple):
    """What one stage publishes. ``sm_level`` is an index into the SM ladder (None: no cap).
    A named tuple: immutable and cheap to build on every scheduling step."""

    pid: int = 0
    active: int = 0
    step: int = 0
    updated_ns: int = 0
    sm_level: int | None = None
    sm_count: int = 0
    pressure: float = 0.0
    bw_util: float = 0.0

    def pack(self) -> bytes:
        level = -1 if self.sm_level is None else self.sm_level
        payload = _PACK(
            self.pid,
            self.active,
            self.step,
            self.updated_ns,
            level,
            self.sm_count,
            self.pressure,
            self.bw_util,
        )
        return _CRC_PACK(zlib.crc32(payload)) + payload

    @classmethod
    def unpack(cls, body: bytes) -> SlotState | None:
        """None when the CRC does not match the payload."""
        payload = body[4:]
        if zlib.crc32(payload) != _CRC_UNPACK(body)[0]:
            return None
        f = _UNPACK(payload)
        return cls(f[0], f[1], f[2], f[3], None if f[4] < 0 else f[4], f[5], f[6], f[7])


class ControlRecord:
    """One mapped control record. Open it with :meth:`open`; close it (or use ``with``)."""

    def __init__(self, path: Path, fd: int, mm: mmap.mmap, slots: int, total_sms: int) -> None:
        self.path, self._fd, self._mm = path, fd, mm
        self.slots, self.total_sms = slots, total_sms

    # ---- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        name: str,
        *,
        slots: int = 4,
        total_sms: int = 0,
        directory: Path | None = None,
        create: bool = True,
    ) -> ControlRecord:
        """Map ``<directory>/omniplane-<name>``, creating and initialising it when ``create`` and
        absent. An existing file must have the same number of slots (and, when both are given,
        the same SM total); otherwise :class:`RecordFormatError` names what differs."""
        if not _NAME_RE.match(name):
            raise ValueError(f"control record name {name!r}: expected letters, digits, '_', '.', '-'")
        if not 1 <= slots <= 64:
            raise ValueError(f"control record {name!r}: slots must be in [1, 64], got {slots}")
        path = (directory or DEFAULT_DIR) / f"omniplane-{name}"
        size = HEADER.size + slots * SLOT_SIZE
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no control record (the shared stage creates it)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                have = os.fstat(fd).st_size
                if have == 0:
                    os.ftruncate(fd, size)
                    os.pwrite(fd, HEADER.pack(MAGIC, VERSION, slots, SLOT_SIZE, total_sms), 0)
                else:
                    total_sms = cls._check_header(path, os.pread(fd, HEADER.size, 0), have, slots, total_sms)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, mm, slots, total_sms)

    @staticmethod
    def _check_header(path: Path, raw: bytes, have: int, slots: int, total_sms: int) -> int:
        if len(raw) < HEADER.size:
            raise RecordFormatError(f"{path}: {have} bytes, shorter than the {HEADER.size}-byte header")
        magic, version, n, slot_size, total = HEADER.unpack(raw)
        if magic != MAGIC or version != VERSION or slot_size != SLOT_SIZE:
            raise RecordFormatError(
                f"{path}: header magic/version/slot_size {magic!r}/{version}/{slot_size}, "
                f"expected {MAGIC!r}/{VERSION}/{SLOT_SIZE}"
            )
        if n != slots:
            raise RecordFormatError(f"{path}: slots: the record has {n}, this process expects {slots}")
        if total_sms and total and total != total_sms:
            raise RecordFormatError(
                f"{path}: total_sms: the record has {total}, this process expects {total_sms}"
            )
        if have < HEADER.size + n * SLOT_SIZE:
            raise RecordFormatError(f"{path}: {have} bytes, expected {HEADER.size + n * SLOT_SIZE}")
        return int(total or total_sms)

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()
            os.close(self._fd)

    def unlink(self) -> None:
        """Remove the file (mappings stay valid until closed)."""
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> ControlRecord:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- writing and reading ---------------------------------------------------------------
    def _offset(self, slot: int) -> int:
        if not 0 <= slot < self.slots:
            raise IndexError(f"{self.path}: slot {slot} out of range [0, {self.slots})")
        return HEADER.size + slot * SLOT_SIZE

    def write(self, slot: int, state: SlotState) -> None:
        """Publish ``state`` in ``slot``. Only one process may write a given slot."""
        off = self._offset(slot)
        mm = self._mm
        body = state.pack()
        (seq,) = SEQ.unpack_from(mm, off)
        seq += seq & 1  # a previous writer died mid-write: start from the next even value
        SEQ.pack_into(mm, off, seq + 1)
        mm[off + SEQ.size : off + SEQ.size + _BODY] = body
        SEQ.pack_into(mm, off, seq + 2)

    def read(self, slot: int, *, tries: int = 100_000) -> SlotState | None:
        """A consistent copy of ``slot`` (None if it was never written). Raises
        :class:`RecordBusy` after ``tries`` attempts without one."""
        off = self._offset(slot)
        mm = self._mm
        lo, hi = off + SEQ.size, off + SEQ.size + _BODY
        for attempt in range(tries):
            (s1,) = SEQ.unpack_from(mm, off)
            if s1 & 1 == 0:
                body = mm[lo:hi]
                (s2,) = SEQ.unpack_from(mm, off)
                if s1 == s2:
                    if s1 == 0:
                        return None
                    state = SlotState.unpack(body)
                    if state is not None:
                        return state
            if attempt & 0xFF == 0xFF:
                time.sleep(0)  # let a descheduled writer finish
        raise RecordBusy(f"{self.path}: slot {slot}: no consistent copy after {tries} attempts")

    def read_all(self) -> list[SlotState | None]:
        return [self.read(i) for i in range(self.slots)]
