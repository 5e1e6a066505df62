"""The request walk: its rules, and that the simulator, the node replicas and the ingress walk
alike because they are the same state machine."""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import omniplane
from omniplane.deploy.messages import DONE, FIRST, StageEvent
from omniplane.deploy.walk import Notify, RequestWalk, Send
from omniplane.sim.request import SimRequest
from omniplane.sim.walk import TypePath, Walk
from omniplane.spec import ModelSpec, parse
from tests.spec.builders import tiny_model
from tests.spec.test_roundtrip import model_docs

TRANSFER = 0.01


def _streaming_tiny() -> ModelSpec:
    doc = tiny_model()
    doc["components"][1]["edges"][0]["streaming"] = True  # thinker -> talker
    doc["components"][2]["edges"][0]["streaming"] = True  # talker -> voc
    return parse(ModelSpec, doc)


def test_a_component_is_ready_when_every_predecessor_released_it() -> None:
    model = parse(ModelSpec, tiny_model())
    w = Walk(TypePath.of(model, "i2a"))
    assert w.path.entry == ("enc",)
    assert w.first_output("enc", 1.0) == ()  # a non-streaming edge waits for completion
    assert w.complete("enc", 1.0) == (("thinker",), ())
    assert w.release("thinker")  # its only predecessor: ready
    assert w.first_response is None and not w.finished


def test_streaming_edges_release_at_the_first_output_and_vocoders_hear_the_feed_end() -> None:
    w = Walk(TypePath.of(_streaming_tiny(), "i2a"))
    w.complete("enc", 0.1)
    assert w.first_output("thinker", 0.2) == ("talker",)
    assert w.first_output("thinker", 0.3) == ()  # once
    assert w.complete("thinker", 0.5) == ((), ())  # the talker is an LLM: no feed-end notice
    assert w.first_output("talker", 0.6) == ("voc",)
    assert w.feed_open("voc")
    assert w.complete("talker", 0.9) == ((), ("voc",))
    assert not w.feed_open("voc")
    w.first_output("voc", 0.7)
    assert w.first_response == 0.7  # TTFO: the vocoder's first chunk
    w.complete("voc", 1.2)
    assert w.finished


def test_a_completion_without_a_first_output_counts_as_both() -> None:
    w = Walk(TypePath.of(_streaming_tiny(), "i2a"))
    w.complete("enc", 0.1)
    assert w.complete("thinker", 0.4) == (("talker",), ())
    assert w.first_out["thinker"] == 0.4


def test_a_failed_request_releases_nothing_more() -> None:
    w = Walk(TypePath.of(parse(ModelSpec, tiny_model()), "t2t"))
    w.fail("thinker: too long")
    assert w.first_output("thinker", 1.0) == () and w.complete("thinker", 2.0) == ((), ())
    assert w.first_response is None


def test_the_three_walkers_are_one_state_machine() -> None:
    """The simulator's requests, the node replicas' sessions and the ingress's walks are the same
    state machine; no host reads the path's edges to decide a release itself."""
    assert issubclass(SimRequest, Walk) and issubclass(RequestWalk, Walk)
    src = Path(omniplane.__file__).parent  # the package's sources (whether or not compiled)
    for mod in ("sim/simulator.py", "deploy/stage.py", "deploy/walk.py"):
        text = (src / mod).read_text()
        assert ".succs[" not in text and ".preds[" not in text, mod


@st.composite
def _models(draw: st.DrawFn) -> ModelSpec:
    doc: dict[str, Any] = draw(model_docs())
    for c in doc["components"]:
        for e in c.get("edges", []):
            if e["to"].startswith(("llm", "voc")):
                e["streaming"] = draw(st.booleans())
    return parse(ModelSpec, doc)


def _simulated(path: TypePath, nodes: dict[str, str], d1: dict[str, float], d2: dict[str, float]
               ) -> tuple[dict[str, float], list[tuple[float, str, str]], set[str]]:
    """The simulator's rules (its walk plus transfer time on edges between nodes): when each
    component is ready, its milestones at fixed durations, and which feeds it ends."""
    w = Walk(path)
    ready: dict[str, float] = {}
    events: list[tuple[float, int, str, str]] = []
    seq = 0

    def at_ready(c: str, t: float) -> None:
        nonlocal seq
        ready[c] = t
        heapq.heappush(events, (t + d1[c], seq, FIRST, c))
        heapq.heappush(events, (t + d1[c] + d2[c], seq + 1, DONE, c))
        seq += 2

    pending: list[tuple[float, int, str]] = []
    for c in path.entry:
        at_ready(c, 0.0)
    log: list[tuple[float, str, str]] = []
    ended: set[str] = set()
    while events or pending:
        if pending and (not events or pending[0][0] <= events[0][0]):
            t, _, c = heapq.heappop(pending)
            if w.release(c):
                at_ready(c, t)
            continue
        t, _, kind, c = heapq.heappop(events)
        log.append((t, kind, c))
        if kind == FIRST:
            released: tuple[str, ...] = w.first_output(c, t)
        else:
            released, feeds = w.complete(c, t)
            ended.update(feeds)
        for s in released:
            lag = TRANSFER if nodes[s] != nodes[c] else 0.0
            seq += 1
            heapq.heappush(pending, (t + lag, seq, s))
    return ready, log, ended


def _deployed(model: ModelSpec, path: TypePath, nodes: dict[str, str], log: list[tuple[float, str, str]]
              ) -> tuple[dict[str, float], set[str]]:
    """The same milestones through the deployment's split: each node's replica walks its own
    components (local releases at once, as ``StageHost`` does), the ingress forwards releases
    between nodes with the transfer time and tells remote vocoders that their feed ended."""
    ingress = RequestWalk(model, path, nodes, TRANSFER, 0, 0.0, {})
    replicas = {n: Walk(path) for n in set(nodes.values())}
    arrivals: dict[str, list[float]] = {c: [] for c in path.components}
    ended: set[str] = set()
    for t, kind, c in log:
        node = nodes[c]
        rep = replicas[node]
        if kind == FIRST:
            local: tuple[str, ...] = rep.first_output(c, t)
        else:
            local, feeds = rep.complete(c, t)
            ended.update(s for s in feeds if nodes[s] == node)
        arrivals_here = [s for s in local if nodes[s] == node]
        for s in arrivals_here:
            arrivals[s].append(t)
        for action in ingress.on_event(node, StageEvent(kind, c, t)):
            if isinstance(action, Send):
                arrivals[action.rel.comp].append(action.rel.ready_at)
            else:
                assert isinstance(action, Notify)
                ended.add(action.comp)
    ready = {c: max(ts) if ts else 0.0 for c, ts in arrivals.items()}
    return {c: t for c, t in ready.items() if len(arrivals[c]) == path.n_preds[c]}, ended


@settings(max_examples=60, deadline=None)
@given(model=_models(), data=st.data())
def test_the_deployment_walks_like_the_simulator(model: ModelSpec, data: st.DataObject) -> None:
    for t in model.type_names:
        path = TypePath.of(model, t)
        nodes = {c: data.draw(st.sampled_from(["a", "b", "c"])) for c in path.components}
        dur = st.floats(0.0, 1.0)
        d1 = {c: data.draw(dur) for c in path.components}
        d2 = {c: data.draw(dur) for c in path.components}
        ready, log, ended = _simulated(path, nodes, d1, d2)
        assert set(ready) == set(path.components)  # every component ran
        got, got_ended = _deployed(model, path, nodes, log)
        assert got == ready
        assert got_ended == ended
