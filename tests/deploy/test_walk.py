"""The ingress's cross-node rules: what crosses, when, and what a retried session needs."""

from __future__ import annotations

from omniplane.deploy.messages import DONE, FIRST, Released, StageEvent
from omniplane.deploy.walk import Notify, RequestWalk, Send
from omniplane.sim.walk import TypePath
from omniplane.spec import ResolvedPlan

WORK = {
    "image_encoder": {"items": 1.0, "tokens": 10.0},
    "audio_encoder": {"items": 1.0, "tokens": 5.0},
    "thinker": {"prompt_tokens": 30.0, "output_tokens": 5.0},
    "talker": {"prompt_tokens": 35.0, "output_tokens": 20.0},
    "code2wav": {"audio_seconds": 1.6},
}

# the audio encoder alone, the front (image encoder, thinker), the back (talker, vocoder)
THREE_NODES = {
    "audio_encoder": "aud",
    "image_encoder": "front",
    "thinker": "front",
    "talker": "back",
    "code2wav": "back",
}


def _walk(plan: ResolvedPlan, nodes: dict[str, str], transfer: float = 0.01) -> RequestWalk:
    return RequestWalk(plan.model, TypePath.of(plan.model, "tia2a"), nodes, transfer, 7, 0.0, WORK)


def test_cross_node_releases_carry_the_transfer_delay(small_plan: ResolvedPlan) -> None:
    w = _walk(small_plan, THREE_NODES)
    assert w.entry_nodes() == ["front", "aud"] or w.entry_nodes() == ["aud", "front"]
    assert w.on_event("aud", StageEvent(FIRST, "audio_encoder", 1.0)) == []  # non-streaming edge
    assert w.on_event("aud", StageEvent(DONE, "audio_encoder", 1.0)) == [
        Send("front", Released("thinker", "audio_encoder", 1.01))
    ]
    # a local edge is the replica's business: recorded for retries, not forwarded
    assert w.on_event("front", StageEvent(DONE, "image_encoder", 1.5)) == []
    assert w.released["thinker"] == {"audio_encoder": 1.01, "image_encoder": 1.5}
    # thinker -> talker streams: released at the first token, plus transfer
    assert w.on_event("front", StageEvent(FIRST, "thinker", 2.0)) == [
        Send("back", Released("talker", "thinker", 2.01))
    ]
    assert w.on_event("front", StageEvent(FIRST, "thinker", 2.5)) == []  # repeats are ignored
    assert w.on_event("front", StageEvent(DONE, "thinker", 3.0)) == []  # talker is an LLM: no notice


def test_a_remote_streaming_vocoder_hears_when_its_llm_finishes(small_plan: ResolvedPlan) -> None:
    nodes = THREE_NODES | {"talker": "tk", "code2wav": "voc"}
    w = _walk(small_plan, nodes)
    assert w.on_event("tk", StageEvent(FIRST, "talker", 4.0)) == [
        Send("voc", Released("code2wav", "talker", 4.01))
    ]
    assert w.on_event("tk", StageEvent(DONE, "talker", 6.0)) == [Notify("voc", "code2wav")]
    order = w.order_for("voc", "tia2a", attempt=1)
    assert order.upstream_done == ("code2wav",) and order.attempt == 1


def test_a_retried_session_skips_done_components_and_keeps_releases(small_plan: ResolvedPlan) -> None:
    w = _walk(small_plan, THREE_NODES)
    w.on_event("aud", StageEvent(DONE, "audio_encoder", 1.0))
    w.on_event("front", StageEvent(DONE, "image_encoder", 1.5))
    order = w.order_for("front", "tia2a")
    assert order.comps == ("thinker",)
    assert set(order.released) == {
        Released("thinker", "audio_encoder", 1.01),
        Released("thinker", "image_encoder", 1.5),
    }
    assert not w.finished and w.first_response is None


def test_first_response_follows_the_type_metric(small_plan: ResolvedPlan) -> None:
    nodes = dict.fromkeys(("image_encoder", "thinker"), "front")
    w = RequestWalk(small_plan.model, TypePath.of(small_plan.model, "ti2t"), nodes, 0.01, 1, 0.0, WORK)
    w.on_event("front", StageEvent(DONE, "image_encoder", 0.1))
    w.on_event("front", StageEvent(FIRST, "thinker", 0.2))
    assert w.first_response == 0.2 and not w.finished
    w.on_event("front", StageEvent(DONE, "thinker", 0.4))
    assert w.finished
