"""The ``vllm`` stage engine: a replica hosting one real vLLM engine (``AsyncLLM``) for a plan
node whose only component is an LLM (e.g. the tiny fixture, on vLLM's CPU build).

A session runs the request's LLM work on the engine: a token-id prompt of the request's
``prompt_tokens`` (distinct per request, as the load generator's) and ``output_tokens`` forced
tokens (``ignore_eos``); the replica streams ``first`` at the first token and ``done`` at the
last, on the deployment's model clock (time scale 1: real time). Predecessors on other nodes
(an encoder node) hold the session until they release it. Each session is its own vLLM request
(id ``<rid>-<attempt>-<n>``), so a session re-opened on another replica after a crash runs the
request from its start there; a cancelled session aborts its vLLM request.

Everything that depends on the vLLM version is in :func:`build_engine` and :func:`sampling`
(checked against vLLM 0.30.0, the release ``make vllm-extra`` pins; written first against 0.32.0).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from omniplane.deploy.clock import VirtualClock
from omniplane.deploy.messages import DONE, END, FAILED, FIRST, OPENED, OpenOrder, Released, StageEvent
from omniplane.perf.profiler.run import token_prompt
from omniplane.sim.request import TypePath
from omniplane.spec import ResolvedPlan

log = logging.getLogger(__name__)

# What each replica process (and vLLM's engine-core and worker processes under it) runs with.
REPLICA_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; assumption: plenty for the fixture, small for the machine
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # replicas share the host's cores; no two bound to core 0
    "OMNIPLANE_EXIT_WITH_PARENT": "1",  # vLLM's processes exit when the replica dies (vllm/lifetime.py)
}


def engine_model_path(plan: ResolvedPlan, given: str) -> str:
    """The weights the replicas load: ``given`` (a folder or a hub id), else the tiny fixture
    for the fixture's model spec."""
    if given:
        return given
    from omniplane.fixture import FIXTURE, ensure_model_dir

    if plan.model.name == FIXTURE.name:
        return str(ensure_model_dir())
    raise ValueError(f"the vllm engine needs the weights of {plan.model.name}: "
                     "give --engine-model PATH_OR_ID")


def check_node(plan: ResolvedPlan, node: str) -> str:
    """The node's one LLM component; ``ValueError`` for nodes the vllm engine cannot host."""
    comps = plan.spec.node(node).components
    if len(comps) != 1 or not plan.model.component(comps[0]).is_llm:
        raise ValueError(f"node {node} hosts {comps}: the vllm engine hosts exactly one LLM per node "
                         "(use --engine emulated or vllm-omni for merged nodes)")
    return comps[0]


def build_engine(model: str, max_num_seqs: int) -> Any:
    """``AsyncLLM`` serving ``model`` without a tokenizer (token-id prompts), eager mode,
    float32 (vLLM's CPU build would pick bfloat16, ~7x slower without AVX512-BF16)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    args = AsyncEngineArgs(model=model, skip_tokenizer_init=True, enforce_eager=True, dtype="float32",
                           max_num_seqs=max_num_seqs, disable_log_stats=True)
    return AsyncLLM.from_engine_args(args)


def sampling(output_tokens: int) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=max(1, output_tokens), ignore_eos=True, detokenize=False)


@dataclass(eq=False)
class _Session:
    order: OpenOrder
    waiting: int
    released: set[tuple[str, str]] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class VllmStage:
    """One replica of a single-LLM plan node running a real vLLM engine."""

    def __init__(self, plan: ResolvedPlan, node: str, group: int, clock: VirtualClock, *,
                 replica: str = "", model: str = "") -> None:
        if clock.scale != 1.0:
            raise ValueError(f"the vllm engine runs in real time (time scale 1, got {clock.scale})")
        self.comp = check_node(plan, node)
        self.plan, self.node, self.clock = plan, node, clock
        self.replica = replica or node
        self.vocab = int(plan.model.component(self.comp).size.vocab or 0)
        if self.vocab <= 3:
            raise ValueError(f"{plan.model.name}: component {self.comp} needs size.vocab "
                             "for token-id prompts")
        self.paths = {t: TypePath.of(plan.model, t) for t in plan.model.type_names}
        path = model or engine_model_path(plan, "")
        self.engine = build_engine(path, plan.spec.node(node).executors[group].max_batch)
        self.sessions: dict[int, _Session] = {}
        self.ids = itertools.count()
        self.opened = self.finished = self.failed = 0

    # ---- calls from the ingress -------------------------------------------------------------
    async def open(self, order: OpenOrder) -> AsyncIterator[StageEvent]:
        yield StageEvent(OPENED, t=self.clock.now(), info={"replica": self.replica, "pid": str(os.getpid())})
        if self.comp not in order.comps:
            yield StageEvent(END, t=self.clock.now(), info={"replica": self.replica})
            return
        preds = self.paths[order.type].preds[self.comp]
        s = _Session(order, len(preds))
        self.sessions[order.rid] = s
        self.opened += 1
        for rel in order.released:
            self._release(s, rel)
        if s.waiting <= 0:
            s.ready.set()
        try:
            await s.ready.wait()
            async for ev in self._generate(order):
                yield ev
        finally:
            if self.sessions.get(order.rid) is s:
                del self.sessions[order.rid]

    def release(self, rid: int, rel: Released) -> bool:
        s = self.sessions.get(rid)
        if s is None:
            return False
        self._release(s, rel)
        return True

    def upstream_done(self, rid: int, comp: str) -> bool:
        return rid in self.sessions  # an LLM has no streaming-vocoder tail to finish

    def stats(self) -> dict[str, Any]:
        return {"replica": self.replica, "node": self.node, "engine": "vllm", "pid": os.getpid(),
                "sessions_open": len(self.sessions), "sessions_total": self.opened,
                "finished": self.finished, "failed": self.failed}

    # ---- the work --------------------------------------------------------------------------------
    def _release(self, s: _Session, rel: Released) -> None:
        if rel.comp != self.comp or (rel.comp, rel.pred) in s.released:
            return
        s.released.add((rel.comp, rel.pred))
        s.waiting -= 1
        if s.waiting <= 0:
            delay = rel.ready_at - self.clock.now()
            loop = asyncio.get_running_loop()
            loop.call_later(max(0.0, delay), s.ready.set)

    async def _generate(self, order: OpenOrder) -> AsyncIterator[StageEvent]:
        work = order.work[self.comp]
        prompt = token_prompt(f"{order.rid}", int(work["prompt_tokens"]), self.vocab)
        request_id = f"{order.rid}-{order.attempt}-{next(self.ids)}"
        first = True
        try:
            async for out in self.engine.generate({"prompt_token_ids": prompt},
                                                  sampling(int(work["output_tokens"])), request_id):
                now = self.clock.now()
                if first and out.outputs and out.outputs[0].token_ids:
                    first = False
                    yield StageEvent(FIRST, self.comp, now)
                if out.finished:
                    self.finished += 1
                    yield StageEvent(DONE, self.comp, now)
                    yield StageEvent(END, t=now, info={"replica": self.replica})
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the engine refused or died: the ingress reports it
            self.failed += 1
            log.warning("request %s failed on %s: %s", order.rid, self.replica, exc)
            yield StageEvent(FAILED, self.comp, self.clock.now(), {"reason": f"{type(exc).__name__}: {exc}"})
            return
        self.failed += 1
        yield StageEvent(FAILED, self.comp, self.clock.now(),
                         {"reason": "the engine's stream ended unfinished"})
