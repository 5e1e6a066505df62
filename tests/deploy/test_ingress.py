"""Admission, idempotency and response streams of the ingress (in-process, virtual time)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from omniplane.deploy import api, vtime
from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.ingress import IngressCore, Overloaded
from omniplane.deploy.local import local_deployment
from omniplane.perf import CostModel
from omniplane.spec import ResolvedPlan
from tests.deploy.test_api import TI2A


def _core(plan: ResolvedPlan, cost: CostModel, limit: int, **kw: Any) -> IngressCore:
    clock = VirtualClock.starting_now(1.0, asyncio.get_running_loop().time)
    orch, _ = local_deployment(plan, cost, clock)
    return IngressCore(plan.model, orch, clock, max_in_flight=limit, **kw)


def _events(raw: list[bytes]) -> list[Any]:
    out = []
    for b in raw:
        data = b.decode().removeprefix("data: ").strip()
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_stream_reports_text_then_the_first_audio_then_the_end(
    small_plan: ResolvedPlan, cost: CostModel
) -> None:
    async def main() -> list[Any]:
        core = _core(small_plan, cost, 8)
        run = core.admit(api.parse_typed(small_plan.model, {"type": "ti2a", "work": TI2A, "stream": True}))
        return _events([c async for c in core.stream(run)])

    ev = vtime.run(main())
    assert [e["omniplane"]["event"] for e in ev[:-1]] == ["text", "first_response", "finished"]
    assert [e["omniplane"]["first_response"] for e in ev[:-1]] == [False, True, False]
    assert "content" in ev[0]["choices"][0]["delta"] and "audio" in ev[1]["choices"][0]["delta"]
    assert ev[2]["choices"][0]["finish_reason"] == "stop" and ev[2]["usage"]["completion_tokens"] == 40
    times = [e["omniplane"]["t_ms"] for e in ev[:-1]]
    assert times == sorted(times) and times[0] > 0
    assert ev[-1] == "[DONE]"


def test_overload_sheds_with_a_retry_after(small_plan: ResolvedPlan, cost: CostModel) -> None:
    async def main() -> tuple[int, int, dict[str, int]]:
        core = _core(small_plan, cost, 2)
        runs = [core.admit(api.parse_typed(small_plan.model, {"type": "ti2t", "id": i})) for i in range(2)]
        with pytest.raises(Overloaded) as exc:
            core.admit(api.parse_typed(small_plan.model, {"type": "ti2t", "id": 9}))
        for r in runs:
            await core.complete(r)
        core.admit(api.parse_typed(small_plan.model, {"type": "ti2t", "id": 10}))  # room again
        return exc.value.retry_after_s, core.in_flight, core.counts

    retry_after, in_flight, counts = vtime.run(main())
    assert retry_after >= 1 and in_flight == 1 and counts["shed"] == 1 and counts["accepted"] == 3


def test_the_same_id_is_run_once(small_plan: ResolvedPlan, cost: CostModel) -> None:
    async def main() -> tuple[bool, int, tuple[int, dict[str, Any]], tuple[int, dict[str, Any]]]:
        core = _core(small_plan, cost, 8)
        body = {"type": "tia2t", "id": "same"}
        a = core.admit(api.parse_typed(small_plan.model, body))
        b = core.admit(api.parse_typed(small_plan.model, body))
        ra, rb = await asyncio.gather(core.complete(a), core.complete(b))
        return a is b, core.counts["accepted"], ra, rb

    same, accepted, ra, rb = vtime.run(main())
    assert same and accepted == 1 and ra == rb and ra[0] == 200
    assert ra[1]["omniplane"]["first_response_ms"] > 0


def test_an_engine_refusal_is_a_500_with_the_reason(small_plan: ResolvedPlan, cost: CostModel) -> None:
    async def main() -> tuple[int, dict[str, Any]]:
        core = _core(small_plan, cost, 8)
        work = {
            "image_encoder": {"items": 1, "tokens": 1},
            "thinker": {"prompt_tokens": 1e9, "output_tokens": 1},
        }
        return await core.complete(
            core.admit(api.parse_typed(small_plan.model, {"type": "ti2t", "work": work}))
        )

    status, body = vtime.run(main())
    assert status == 500 and "KV capacity" in body["error"]["message"]


LONG = {"image_encoder": {"items": 1, "tokens": 64},
        "thinker": {"prompt_tokens": 100, "output_tokens": 60_000}}  # ~minutes of decoding


def test_a_client_leaving_cancels_its_request_and_frees_the_slot(
    small_plan: ResolvedPlan, cost: CostModel
) -> None:
    async def main() -> tuple[int, int, dict[str, int], int]:
        core = _core(small_plan, cost, 1)
        for stream in (False, True):  # a waiting client, then a streaming one, leave after 1 s
            body = {"type": "ti2t", "id": f"c{stream}", "work": LONG, "stream": stream}
            run = core.admit(api.parse_typed(small_plan.model, body))

            async def follow(run: Any = run, stream: bool = stream) -> None:
                if stream:
                    async for _ in core.stream(run):
                        pass
                else:
                    await core.complete(run)

            client = asyncio.create_task(follow())
            await asyncio.sleep(1.0)
            busy = core.in_flight
            client.cancel()
            await asyncio.sleep(0.01)
        again = core.admit(api.parse_typed(small_plan.model, {"type": "ti2t", "id": "cFalse"}))
        status, _ = await core.complete(again)  # the id of a cancelled run runs anew
        return busy, core.in_flight, core.counts, status

    busy, in_flight, counts, status = vtime.run(main())
    assert busy == 1 and in_flight == 0 and counts["cancelled"] == 2 and status == 200
    assert counts["accepted"] == 3 and counts["replayed"] == 0


def test_a_request_past_its_deadline_is_cancelled_with_a_504(
    small_plan: ResolvedPlan, cost: CostModel
) -> None:
    async def main() -> tuple[tuple[int, dict[str, Any]], list[bytes], int, dict[str, int]]:
        core = _core(small_plan, cost, 2, deadline_s=5.0)
        body = {"type": "ti2t", "work": LONG}
        done = await core.complete(core.admit(api.parse_typed(small_plan.model, body)))
        chunks = [c async for c in core.stream(core.admit(api.parse_typed(small_plan.model, body)))]
        return done, chunks, core.in_flight, core.counts

    (status, body), chunks, in_flight, counts = vtime.run(main())
    assert status == 504 and body["error"]["type"] == "timeout"
    assert "deadline of 5 s" in body["error"]["message"]
    assert _events(chunks)[-2]["error"]["code"] == 504 and _events(chunks)[-1] == "[DONE]"
    assert in_flight == 0 and counts["timed_out"] == 2
