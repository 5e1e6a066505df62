"""The load generator's reading of responses: completed, failed, shed, lost and unfinished."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from omniplane.loadgen.client import LoadOptions, replay
from omniplane.loadgen.metrics import COMPLETED, FAILED, LOST, SHED, UNFINISHED, Record, summarize
from omniplane.workload import Request

WORK = {
    "image_encoder": {"items": 1.0, "tokens": 10.0},
    "thinker": {"prompt_tokens": 20.0, "output_tokens": 5.0},
}


def _sse(*chunks: object) -> bytes:
    return b"".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n".encode() for c in chunks)


def _chunk(event: str, first: bool, delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {
        "choices": [{"delta": delta, "finish_reason": finish}],
        "omniplane": {"event": event, "t_ms": 12.5, "first_response": first},
    }
    if finish:
        out["usage"] = {"completion_tokens": 5}
    return out


def handler(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    kind = body["id"].split("-")[-1]
    assert body["work"] == WORK and body["stream"] is True and request.url.path == "/v1/omniplane/requests"
    if kind == "0":
        return httpx.Response(
            200,
            content=_sse(
                _chunk("text", True, {"content": "x"}), _chunk("finished", False, {}, "stop"), "[DONE]"
            ),
        )
    if kind == "1":
        return httpx.Response(503, headers={"Retry-After": "3"}, json={"error": {"message": "busy"}})
    if kind == "2":
        return httpx.Response(400, json={"error": {"param": "type"}})
    if kind == "3":
        return httpx.Response(200, content=_sse({"error": {"message": "engine refused"}}, "[DONE]"))
    if kind == "4":
        return httpx.Response(200, content=_sse(_chunk("text", True, {"content": "x"})))  # cut short
    raise httpx.ConnectError("connection refused", request=request)


def test_statuses_follow_what_the_client_saw() -> None:
    reqs = [Request(i, 0.0, "ti2t", WORK) for i in range(6)]
    recs = asyncio.run(
        replay(reqs, LoadOptions("http://127.0.0.1:1", run_id="t-"), httpx.MockTransport(handler))
    )
    assert [r.status for r in recs] == [COMPLETED, SHED, FAILED, FAILED, LOST, LOST]
    done = recs[0]
    assert done.output_tokens == 5 and done.server_first_response == 0.0125
    assert done.first_response is not None and done.end is not None and done.first_response <= done.end
    assert recs[1].retry_after_s == 3.0 and recs[2].http_status == 400
    assert "engine refused" in recs[3].error and "final chunk" in recs[4].error


def test_a_request_still_running_at_the_deadline_is_unfinished_not_lost() -> None:
    """The run ends (``drain_s`` after the last arrival) while the server still works on one
    request: that request is unfinished, the server having dropped nothing; the one it answered
    is completed and nothing is lost."""
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["id"].endswith("-1"):
            await release.wait()  # never set: still running when the run ends
        return handler(request)

    reqs = [Request(0, 0.0, "ti2t", WORK), Request(1, 0.0, "ti2t", WORK)]
    recs = asyncio.run(
        replay(reqs, LoadOptions("http://127.0.0.1:1", run_id="t-", drain_s=0.2), httpx.MockTransport(slow))
    )
    assert [r.status for r in recs] == [COMPLETED, UNFINISHED]
    assert "no answer before the deadline" in recs[1].error
    s = summarize(recs, None)
    assert (s["completed"], s["lost"], s["unfinished"]) == (1, 0, 1)


def test_chat_api_sends_parts_and_modalities() -> None:
    seen: list[dict[str, object]] = []

    def chat(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200,
            content=_sse(
                _chunk("text", False, {"content": "x"}),
                _chunk("first_response", True, {"audio": {"data": "AA=="}}),
                _chunk("finished", False, {}, "stop"),
            ),
        )

    opts = LoadOptions(
        "http://127.0.0.1:1", api="chat", inputs={"ti2a": ["text", "image"]}, outputs={"ti2a": "audio"}
    )
    [rec] = asyncio.run(replay([Request(0, 0.0, "ti2a", WORK)], opts, httpx.MockTransport(chat)))
    assert rec.status == COMPLETED and rec.audio_first is not None and rec.first_response == rec.audio_first
    body = seen[0]
    assert body["modalities"] == ["text", "audio"]
    parts = body["messages"][0]["content"]  # type: ignore[index]
    assert [p["type"] for p in parts] == ["text", "image_url"]


def test_completions_api_sends_token_prompts_and_reads_vllm_streams() -> None:
    bodies: list[dict[str, object]] = []

    def vllm(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        assert request.url.path == "/v1/completions" and body["stream"] is True and body["ignore_eos"] is True
        n = int(body["max_tokens"])  # type: ignore[call-overload]
        chunks: list[object] = [{"choices": [{"index": 0, "text": "", "finish_reason": None}]}] * (n - 1)
        chunks.append({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
        chunks += [{"choices": [], "usage": {"completion_tokens": n}}, "[DONE]"]  # usage comes after
        return httpx.Response(200, content=_sse(*chunks))

    work = {"llm": {"prompt_tokens": 7.0, "output_tokens": 4.0}}
    reqs = [Request(0, 0.0, "text", work), Request(1, 0.0, "long", work)]
    opts = LoadOptions("http://127.0.0.1:1", api="completions", model="tiny", component="llm", vocab=50,
                       priorities={"long": 10}, run_id="c-")
    recs = asyncio.run(replay(reqs, opts, httpx.MockTransport(vllm)))
    assert [r.status for r in recs] == [COMPLETED, COMPLETED]
    assert all(r.output_tokens == 4 and r.text_first is not None and r.first_response == r.text_first
               for r in recs)
    prompts = {tuple(b["prompt"]) for b in bodies}  # type: ignore[arg-type]
    assert len(bodies) == 2 and len(prompts) == 2  # two different prompts
    assert all(len(b["prompt"]) == 7 and b["max_tokens"] == 4 for b in bodies)  # type: ignore[arg-type]
    assert sorted(str(b.get("priority")) for b in bodies) == ["10", "None"]


def test_sends_in_arrival_order_and_reports_lateness() -> None:
    from omniplane.loadgen.metrics import send_lateness

    order: list[int] = []

    def ok(request: httpx.Request) -> httpx.Response:
        order.append(int(json.loads(request.content)["id"].split("-")[-1]))
        return httpx.Response(200, content=_sse(_chunk("finished", True, {"content": "x"}, "stop"), "[DONE]"))

    reqs = [Request(i, a, "ti2t", WORK) for i, a in enumerate((0.06, 0.0, 0.03))]
    recs = asyncio.run(replay(reqs, LoadOptions("http://127.0.0.1:1", run_id="t-"), httpx.MockTransport(ok)))
    assert order == [1, 2, 0] and [r.status for r in recs] == [COMPLETED] * 3
    assert all(r.start >= r.arrival for r in recs)  # never early; how late is the host's load
    late = send_lateness(recs, late_s=10.0)
    assert late["sent"] == 3 and 0 <= late["p50"] <= late["max"]
    assert late["max"] == 1e3 * max(r.start - r.arrival for r in recs)


def test_send_lateness_on_exact_records() -> None:
    """The lateness arithmetic on known send times (no wall clock): ms, and the count over
    ``late_s``; a request that was never sent (lost or unfinished) does not count."""
    from omniplane.loadgen.metrics import send_lateness

    recs = [Record(i, "ti2t", 1.0, 1.0 + d, COMPLETED) for i, d in enumerate((0.0, 0.005, 0.02))]
    recs.append(Record(3, "ti2t", 2.0, 2.0, LOST))
    recs.append(Record(4, "ti2t", 3.0, 3.0, UNFINISHED))
    late = send_lateness(recs, late_s=0.01)
    assert late["sent"] == 3 and late["over"] == 1 and late["over_ms"] == pytest.approx(10.0)
    assert late["p50"] == pytest.approx(5.0) and late["max"] == pytest.approx(20.0)
    assert send_lateness([Record(0, "ti2t", 2.0, 2.0, LOST)]) == {}
