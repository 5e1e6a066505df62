"""The shared-memory control record: layout checks, seqlock behaviour, and a two-process stress
test in which every payload field is a function of one counter, so a torn read shows up as
fields that disagree."""

from __future__ import annotations

import multiprocessing as mp
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.control import ControlRecord, RecordBusy, RecordFormatError, SlotState
from omniplane.control.record import HEADER, SLOT_SIZE

WANT_DISTINCT = 2_000  # distinct writes the reader must see while the writer runs
DEADLINE_S = 60  # bounds both loops; the writer writes until the reader is done or this passes


def state_for(k: int) -> SlotState:
    return SlotState(
        pid=k & 0xFFFF_FFFF,
        active=(7 * k) & 0xFFFF_FFFF,
        step=k,
        updated_ns=1_000_003 * k,
        sm_level=k % 97,
        sm_count=k % 133,
        pressure=k / 3,
        bw_util=k / 7,
    )


def consistent(s: SlotState) -> bool:
    return s == state_for(s.step)


def _writer(directory: str, ready: Any, stop: Any, out: Any) -> None:
    with ControlRecord.open("stress", slots=2, directory=Path(directory), create=False) as rec:
        ready.wait(DEADLINE_S)
        # Bounded by time, not by a write count: a count let a starved reader (a loaded machine)
        # find the writer finished and the value frozen before it had seen WANT_DISTINCT writes.
        deadline = time.monotonic() + DEADLINE_S + 10
        k = 0
        while not stop.is_set() and time.monotonic() < deadline:
            k += 1
            rec.write(1, state_for(k))
    out.put(("writer", k))


def _reader(directory: str, ready: Any, stop: Any, out: Any) -> None:
    bad, reads, distinct, last = 0, 0, set(), -1
    with ControlRecord.open("stress", slots=2, directory=Path(directory), create=False) as rec:
        ready.set()
        deadline = time.monotonic() + DEADLINE_S
        while len(distinct) < WANT_DISTINCT and time.monotonic() < deadline:
            s = rec.read(1)
            if s is None:
                continue
            reads += 1
            if not consistent(s) or s.step < last:
                bad += 1
            last = s.step
            distinct.add(s.step)
    stop.set()
    out.put(("reader", (bad, reads, len(distinct))))


def test_concurrent_writer_and_reader_never_tear(tmp_path: Path) -> None:
    """The reader starts reading, then the writer writes until the reader has seen
    WANT_DISTINCT different writes (both bounded by DEADLINE_S)."""
    rec = ControlRecord.open("stress", slots=2, directory=tmp_path)
    ctx = mp.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=f, args=(str(tmp_path), ready, stop, out)) for f in (_reader, _writer)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=DEADLINE_S + 60) for _ in procs)
    for p in procs:
        p.join(30)
    rec.close()
    bad, reads, distinct = got["reader"]
    assert all(p.exitcode == 0 for p in procs)
    assert bad == 0, f"{bad} torn or out-of-order reads out of {reads}"
    assert distinct >= WANT_DISTINCT, f"the reader saw only {distinct} distinct writes in {DEADLINE_S} s"
    assert got["writer"] >= distinct


def test_checker_detects_a_mixed_payload() -> None:
    a, b = state_for(5), state_for(6)
    mixed = SlotState(a.pid, a.active, a.step, a.updated_ns, a.sm_level, a.sm_count, b.pressure, a.bw_util)
    assert consistent(a) and not consistent(mixed)


@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**63),
    st.one_of(st.none(), st.integers(0, 2**31 - 1)),
    st.floats(allow_nan=False),
    st.floats(allow_nan=False),
)
def test_roundtrip(pid: int, active: int, step: int, level: int | None, pressure: float, bw: float) -> None:
    s = SlotState(
        pid=pid,
        active=active,
        step=step,
        updated_ns=step,
        sm_level=level,
        sm_count=active % 200,
        pressure=pressure,
        bw_util=bw,
    )
    assert SlotState.unpack(s.pack()) == s


def test_unwritten_slot_reads_none_and_written_slot_reads_back(tmp_path: Path) -> None:
    with ControlRecord.open("rt", slots=3, total_sms=132, directory=tmp_path) as rec:
        assert rec.read_all() == [None, None, None]
        rec.write(2, state_for(9))
        rec.write(2, state_for(10))
        assert rec.read(2) == state_for(10)
        assert rec.read(0) is None
        with ControlRecord.open("rt", slots=3, directory=tmp_path, create=False) as other:
            assert other.read(2) == state_for(10)
            assert other.total_sms == 132


def test_writer_died_mid_write_reader_gives_up_then_next_writer_recovers(tmp_path: Path) -> None:
    with ControlRecord.open("dead", slots=1, directory=tmp_path) as rec:
        rec.write(0, state_for(1))
        off = HEADER.size
        struct.pack_into("<Q", rec._mm, off, 3)  # odd: a write in progress forever
        with pytest.raises(RecordBusy, match="slot 0"):
            rec.read(0, tries=1000)
        rec.write(0, state_for(2))
        assert rec.read(0) == state_for(2)


def test_corrupt_payload_with_even_seq_is_rejected_by_the_crc(tmp_path: Path) -> None:
    with ControlRecord.open("crc", slots=1, directory=tmp_path) as rec:
        rec.write(0, state_for(1))
        off = HEADER.size + 8 + 4 + 4  # first byte of `active`
        rec._mm[off] = rec._mm[off] ^ 0xFF
        with pytest.raises(RecordBusy):
            rec.read(0, tries=500)


def test_mismatched_existing_record_is_refused_with_the_field(tmp_path: Path) -> None:
    ControlRecord.open("m", slots=2, total_sms=132, directory=tmp_path).close()
    with pytest.raises(RecordFormatError, match="slots: the record has 2"):
        ControlRecord.open("m", slots=3, directory=tmp_path)
    with pytest.raises(RecordFormatError, match="total_sms: the record has 132"):
        ControlRecord.open("m", slots=2, total_sms=142, directory=tmp_path)
    (tmp_path / "omniplane-junk").write_bytes(b"x" * (HEADER.size + SLOT_SIZE))
    with pytest.raises(RecordFormatError, match="magic"):
        ControlRecord.open("junk", slots=1, directory=tmp_path)


def test_bad_names_and_missing_records(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="name"):
        ControlRecord.open("../etc", directory=tmp_path)
    with pytest.raises(FileNotFoundError, match="no control record"):
        ControlRecord.open("absent", directory=tmp_path, create=False)
    with (
        ControlRecord.open("ix", slots=1, directory=tmp_path) as rec,
        pytest.raises(IndexError, match="slot 1"),
    ):
        rec.write(1, SlotState())
