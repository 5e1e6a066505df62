"""The profiler against a loopback server with known streaming delays."""

from __future__ import annotations

import base64
import socket
import struct
from pathlib import Path

import pytest

from omniplane.perf import CostModel, ExecutorConfig, ProfileSet
from omniplane.perf.profiler import (
    ProfilerError,
    ProfileRun,
    RequestRecord,
    RequestSpec,
    SweepResult,
    run_profile,
    steady_window,
)
from omniplane.perf.profiler.client import audio_seconds
from omniplane.perf.profiler.metrics import point_metrics
from omniplane.spec import GPUCatalog
from tests.perf.sse_server import AUDIO_SECONDS, Delays, serve_in_subprocess

FIRST, INTER, QUEUE, TOKENS = 0.6, 0.1, 0.03, 5


@pytest.fixture(scope="module")
def profiled() -> SweepResult:
    with serve_in_subprocess(Delays(FIRST, INTER, TOKENS, QUEUE)) as url:
        run = ProfileRun(url, "fake", "thinker", "H100-SXM", 1, (RequestSpec("short", 64, TOKENS),),
                         (1, 2), 3)
        ticks: list[int] = []
        result = run_profile(run, lambda done, total, label: ticks.append(done))
        assert ticks[-1] == 3 * (1 + 2)
        return result


def test_the_sweep_times_each_request_from_its_send(profiled: SweepResult) -> None:
    """No wall-clock tolerance (timed tests flake under load): the server sends the first token
    only after ``QUEUE + FIRST`` and the last on an absolute schedule, so these lower bounds hold
    however loaded the machine is; the rows must be exactly the medians they are made from.
    The accuracy at a quiet machine is the metrics' arithmetic, tested on exact records below."""
    result = profiled
    assert result.error is None and result.queue_reported
    [c1, c2] = result.points
    for p in (c1, c2):
        assert p.n_window >= 1 and p.n_errors == 0 and p.chunk_per_token
        assert p.queue_time_s == pytest.approx(QUEUE, rel=1e-6)  # the server's own report
        ttft, e2el = p.median("ttft"), p.median("e2el")
        assert ttft is not None and ttft >= QUEUE + FIRST
        assert e2el is not None and e2el >= QUEUE + FIRST + (TOKENS - 1) * INTER
    rows = {(r.op, r.batch): r for r in result.rows}
    ttft1, tpot2 = c1.median("ttft"), c2.median("tpot")
    assert ttft1 is not None and tpot2 is not None
    assert rows[("prefill", 1)].latency_ms == pytest.approx((ttft1 - QUEUE) * 1e3, rel=1e-9)
    assert rows[("prefill", 1)].size == 64  # the server's usage count
    assert rows[("decode", 2)].latency_ms == pytest.approx(tpot2 * 1e3, rel=1e-9)
    assert rows[("decode", 2)].size == 64 + TOKENS / 2


def test_point_metrics_recover_exact_delays() -> None:
    """The arithmetic behind the loopback sweep, on exact client records: TTFT from the send,
    TPOT and ITL from the chunk arrivals, the steady window, the queueing subtracted."""
    recs = []
    for w in range(2):
        t = 0.0
        for _ in range(3):
            first = t + QUEUE + FIRST
            chunks = tuple(first + i * INTER for i in range(TOKENS))
            recs.append(RequestRecord(w, t, chunks[-1], first, None, chunks, TOKENS, 64))
            t = chunks[-1]
    m = point_metrics("short", 2, recs, {"queue": QUEUE})
    assert m.n_window == 2 * 3 - 2  # each worker's first request is ramp-up
    assert m.median("ttft") == pytest.approx(QUEUE + FIRST, rel=1e-9)
    assert m.median("tpot") == pytest.approx(INTER, rel=1e-9)
    assert m.median("itl") == pytest.approx(INTER, rel=1e-9)
    assert m.queue_time_s is not None and m.median("ttft") - m.queue_time_s == pytest.approx(FIRST)
    assert m.median("ttfp") is None and m.median("rtf") is None  # no audio, no audio metrics
    burst = point_metrics("short", 2, recs, burst=True)
    assert burst.n_window == 2 * 3  # a burst's first round is not ramp-up: every request counts
    assert burst.median("tpot") == pytest.approx(INTER, rel=1e-9)
    assert burst.window_s == pytest.approx(recs[-1].end, rel=1e-9)  # first send to last end


def test_point_metrics_recover_exact_audio_delays() -> None:
    """TTFP from the first audio chunk (here later than the first text), RTF from the summed
    audio: the arithmetic behind the loopback audio test, on exact records."""
    audio_first, clip = 0.4, 0.08
    recs = []
    t = 0.0
    for _ in range(3):
        first = t + FIRST
        chunks = tuple(first + i * INTER for i in range(TOKENS))
        recs.append(RequestRecord(0, t, chunks[-1], first, first + audio_first, chunks, TOKENS, 16,
                                  TOKENS * clip))
        t = chunks[-1]
    m = point_metrics("speech", 1, recs)
    e2el = FIRST + (TOKENS - 1) * INTER
    assert m.n_window == 2
    assert m.median("ttfp") == pytest.approx(FIRST + audio_first, rel=1e-9)
    assert m.median("ttft") == pytest.approx(FIRST, rel=1e-9)
    assert m.median("rtf") == pytest.approx(e2el / (TOKENS * clip), rel=1e-9)


def test_the_written_table_replaces_the_roofline(profiled: SweepResult, tmp_path: Path,
                                                 costs: dict[str, CostModel], gpus: GPUCatalog) -> None:
    result = profiled
    path = tmp_path / "thinker.csv"
    ProfileSet(result.rows).save(path)
    cost = CostModel(costs["qwen2.5-omni"].model, profiles=ProfileSet.load(path))
    cfg = ExecutorConfig(gpus.get("H100-SXM"), 1)
    assert cost.source_of("thinker", cfg, "decode") == "profile"
    [row] = [r for r in result.rows if (r.op, r.batch) == ("decode", 1)]
    t = cost.decode_step_time("thinker", cfg, 1, row.size)
    assert t == pytest.approx(row.latency_ms / 1e3, rel=1e-6)  # the measured row, not a model
    assert abs(costs["qwen2.5-omni"].decode_step_time("thinker", cfg, 1, row.size) - t) > 0.02 * t


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_endpoint_is_a_clear_error() -> None:
    run = ProfileRun(f"http://127.0.0.1:{_free_port()}", "m", "thinker", "H100-SXM", 1,
                     (RequestSpec("r", 8, 4),), (1,), 2, timeout_s=5)
    with pytest.raises(ProfilerError, match=r"cannot reach http://127\.0\.0\.1"):
        run_profile(run)


def test_an_erroring_endpoint_stops_and_keeps_what_was_measured() -> None:
    with serve_in_subprocess(Delays(0.02, 0.01, 4, 0.0, fail_after=4)) as url:
        run = ProfileRun(url, "m", "thinker", "H100-SXM", 1, (RequestSpec("r", 8, 4),), (1, 2, 4), 2)
        result = run_profile(run)
    assert result.error is not None and "HTTP 500" in result.error and "c=2" in result.error
    assert [p.concurrency for p in result.points] == [1, 2]
    assert result.points[0].n_errors == 0 and result.points[1].n_errors >= 1
    assert {r.op for r in result.rows} == {"prefill", "decode"}  # from the clean first point


def test_audio_streams_give_ttfp_and_rtf() -> None:
    with serve_in_subprocess(Delays(FIRST, INTER, 5, 0.0)) as url:
        spec = RequestSpec("speech", 16, 5, ("text", "audio"))
        [point] = run_profile(ProfileRun(url, "m", "talker", "H100-SXM", 1, (spec,), (1,), 3)).points
    # no wall-clock tolerance: the server sends the first audio chunk only after FIRST, in the
    # same chunk as the first text; the exact arithmetic is tested on records above
    ttfp, ttft, e2el = point.median("ttfp"), point.median("ttft"), point.median("e2el")
    assert ttfp is not None and ttft is not None and e2el is not None
    assert FIRST <= ttfp == ttft <= e2el
    # every request carries 5 chunks of AUDIO_SECONDS: RTF is E2EL over that, exactly
    assert point.median("rtf") == pytest.approx(e2el / (5 * AUDIO_SECONDS), rel=1e-9)


def test_audio_chunk_durations() -> None:
    pcm = base64.b64encode(bytes(48000)).decode()  # 1 s of 16-bit mono at 24 kHz
    assert audio_seconds(pcm, 24000) == pytest.approx(1.0)
    header = b"RIFF" + struct.pack("<I", 36 + 32000) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" + struct.pack("<I", 32000)
    assert audio_seconds(base64.b64encode(header + bytes(32000)).decode(), 24000) == pytest.approx(1.0)


def test_steady_window_excludes_ramp_up_and_drain() -> None:
    recs = [RequestRecord(0, 0.0, 1.0), RequestRecord(0, 1.0, 2.0), RequestRecord(0, 2.0, 3.0),
            RequestRecord(1, 0.0, 1.5), RequestRecord(1, 1.5, 2.2), RequestRecord(1, 2.2, 2.6)]
    assert steady_window(recs) == (1.5, 2.6)  # all workers done once; first worker finished


def test_token_id_prompts_are_distinct_per_request_and_reproducible() -> None:
    spec = RequestSpec("p", 12, 3)
    bodies = [spec.payload("m", i, "completions", vocab=2048, salt=5) for i in range(4)]
    prompts = [tuple(b["prompt"]) for b in bodies]
    assert len(set(prompts)) == 4 and all(len(p) == 12 and min(p) >= 3 and max(p) < 2048 for p in prompts)
    assert spec.payload("m", 2, "completions", vocab=2048, salt=5)["prompt"] == list(prompts[2])
    assert spec.payload("m", 2, "completions", vocab=2048, salt=6)["prompt"] != list(prompts[2])
    chats = {spec.payload("m", i)["messages"][0]["content"] for i in range(4)}
    assert len(chats) == 4  # a prefix cache cannot serve one request's prefill from another's


def test_completions_api_with_engine_prefill_times_and_bursts() -> None:
    import httpx

    with serve_in_subprocess(Delays(0.2, 0.1, 6, 0.01, frontend_s=0.03)) as url:
        specs = (RequestSpec("prefill-40", 40, 1, concurrency=(1,)),
                 RequestSpec("decode", 16, 4, concurrency=(3,), burst=True))
        run = ProfileRun(url, "fake", "llm", "cpu", 1, specs, requests_per_worker=2, api="completions",
                         vocab=1000)
        readings = iter(range(100))  # a meter growing by 1 per call, read before and after each point
        result = run_profile(run, meter=lambda: {"api": float(next(readings))})
        seen = httpx.get(f"{url}/seen").json()
    assert result.error is None
    prefill, burst = result.points
    assert prefill.cpu_s == burst.cpu_s == {"api": 1.0} and prefill.wall_s > 0
    assert (prefill.output_total, burst.output_total) == (2 * 1, 6 * 4)  # every streamed token of the point
    assert prefill.prompt_total == 2 * 40 and burst.prompt_total == 6 * 16
    assert prefill.server_s["prefill"] == pytest.approx(0.17)
    ttft = prefill.median("ttft")
    assert ttft is not None and prefill.frontend_s == pytest.approx(ttft - 0.01 - 0.17)
    assert prefill.frontend_s >= 0.03 - 0.005  # what the server spent outside its "engine"
    assert burst.n_window == 6 and burst.concurrency == 3  # every request of every burst counts
    # no wall-clock tolerance on TPOT (the burst's arithmetic is tested on exact records): the
    # server's absolute schedule bounds E2EL below, and the row is exactly the median TPOT
    e2el, tpot = burst.median("e2el"), burst.median("tpot")
    assert e2el is not None and e2el >= 0.01 + 0.2 + (4 - 1) * 0.1
    assert tpot is not None and tpot > 0
    rows = {(r.op, r.batch): r for r in result.rows}
    assert rows[("decode", 3)].latency_ms == pytest.approx(tpot * 1e3, rel=1e-9)
    assert rows[("prefill", 1)].latency_ms == pytest.approx(170.0, rel=1e-6)  # the engine's, not TTFT
    assert ("decode", 3) in rows and ("prefill", 3) not in rows  # a burst writes no prefill row
    assert len(seen) == len(set(seen)) == 2 + 6


def test_a_timed_point_lasts_its_window_after_every_worker_finished_one() -> None:
    with serve_in_subprocess(Delays(0.05, 0.01, 3, 0.0)) as url:
        spec = RequestSpec("cap", 8, 3, concurrency=(2,), sizes=((8, 3), (16, 2)), duration_s=0.6)
        [point] = run_profile(ProfileRun(url, "m", "llm", "cpu", 1, (spec,), api="completions",
                                         vocab=100)).points
    # by the mechanism, under any load: the window opens at the last worker's first end, and
    # each worker sends until a request of its own ends duration_s after that
    assert point.window_s >= 0.6 - 1e-9 and point.request_throughput > 0
    assert point.n_total >= 2 * 2  # each worker: its first request, and at least one in the window


def test_request_specs_on_the_command_line() -> None:
    import typer

    from omniplane.cli.profile import _request

    assert _request("short:128:64") == RequestSpec("short", 128, 64)
    spec = _request("d:64:32@1,8,32:burst")
    assert (spec.concurrency, spec.burst, spec.modalities) == ((1, 8, 32), True, ("text",))
    assert _request("s:16:5:text+audio@2").modalities == ("text", "audio")
    for bad in ("x:1", "x:a:3", "x:1:2@0", "x:1:2@a,b"):
        with pytest.raises(typer.BadParameter):
            _request(bad)
