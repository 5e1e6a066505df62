"""Engines: how one executor runs one component, step by step.

An engine prepares a request's job when the request reaches its component (``prepare``: what
the job must do, when it is ready), keeps its waiting jobs, forms the next step's batch
(``start``), and applies the step's effects when it ends (``finish``), reporting each job's
first output and completion to its host (the simulation, or a deployed node replica). Batch
engines live here; the continuous-batching LLM engine in ``llm.py``.
"""

from __future__ import annotations

from typing import Any, Protocol

from omniplane.sim.costs import CostSource
from omniplane.sim.job import Job, JobQueue, push
from omniplane.sim.request import SimRequest

PRICES = 4096  # step sizes whose cost an engine remembers


class Reporter(Protocol):
    """Receives job milestones (the simulation)."""

    def first_output(self, job: Job, now: float) -> None: ...

    def done(self, job: Job, now: float) -> None: ...

    def failed(self, job: Job, now: float, reason: str) -> None: ...


class Step:
    """One step an engine runs (a plain class: one is made per step)."""

    __slots__ = ("batch", "bounds", "duration", "iterations", "kind", "sm_cap", "work")

    def __init__(self, duration: float, batch: int, kind: str, work: Any = None,
                 sm_cap: int | None = None) -> None:
        self.duration = duration  # seconds, running alone on the executor's GPUs
        self.batch = batch
        self.kind = kind  # for traces: prefill/decode/mixed, encode, denoise, vocode, vae
        self.work = work  # roofline work for co-location (perf.Work), when known
        self.sm_cap = sm_cap
        self.iterations = 1  # > 1: a span of identical-shape decode iterations run as one step
        self.bounds: Any = None  # a span's iteration end times (perf.span.DecodeSpan), from its start


class _Unbound:
    def first_output(self, job: Job, now: float) -> None:
        raise RuntimeError("engine is not attached to a simulation")

    def done(self, job: Job, now: float) -> None:
        raise RuntimeError("engine is not attached to a simulation")

    def failed(self, job: Job, now: float, reason: str) -> None:
        raise RuntimeError("engine is not attached to a simulation")


_UNBOUND = _Unbound()


class Engine:
    """Base class: a component's queue and the executor-independent step protocol."""

    kind = "engine"

    def __init__(self, comp: str, queue: JobQueue, cost: CostSource, cfg: Any, max_batch: int) -> None:
        self.comp = comp
        self.queue = queue
        self.cost = cost
        self.cfg = cfg
        self.max_batch = max_batch
        self.report: Reporter = _UNBOUND  # the simulation binds itself here
        self.current: list[Job] = []
        self.executor: Any = None  # set by the executor that owns this engine
        self.want_work = False  # co-located engines also report each step's roofline work
        self._private, self._shared = queue.private, queue.shared  # has_work reads them directly
        # step prices by size; a run given a PriceBook (RunSetup.prices) shares them across runs
        self.prices: dict[tuple[Any, ...], float] = {}

    def priced(self, op: Any, *size: Any) -> float:
        """``op(component, cfg, *size)``, remembered per size (an engine prices one op): the cost
        model is a pure function of its arguments, so this is exact. Bounded: forgotten after
        ``PRICES`` sizes."""
        prices = self.prices
        t = prices.get(size)
        if t is None:
            if len(prices) >= PRICES:
                prices.clear()
            t = prices[size] = op(self.comp, self.cfg, *size)
        return t

    def prepare(self, req: SimRequest, now: float) -> Job:
        """The request's job at this component, which just became ready for it at ``now``;
        ``job.ready`` is when it may join the queue (later than ``now`` if it must wait)."""
        return Job(req, self.comp, now, self)

    def feed_ended(self, job: Job, now: float) -> bool:
        """The job's streaming feed ended; True if that queued work here (kick the executor)."""
        return False

    def add(self, job: Job, shared: bool) -> None:
        """A job is ready here (to the shared group queue, or pinned to this executor)."""
        if shared and self.queue.shared is not None:
            push(self.queue.shared, job)
        else:
            push(self.queue.private, job)

    def has_work(self) -> bool:
        return bool(self._private or self._shared)

    def active(self) -> int:
        """Requests this engine holds (waiting or in progress)."""
        q = self.queue
        return len(q.private) + (len(q.shared) if q.shared is not None else 0) + len(self.current)

    def start(self, now: float) -> Step | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self, now: float) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def batch_size(self) -> int:
        """How many waiting jobs the next step takes: up to ``max_batch``."""
        return self.max_batch

    def take_batch(self) -> list[Job]:
        """The first ``batch_size()`` waiting jobs become the step in progress (whole-batch engines)."""
        n = self.batch_size()
        jobs = self.current = self.queue.popleft_n(n) if n else []
        for j in jobs:
            j.engine = self
        return jobs

    def extend(self, step: Step) -> None:
        """Let a step cover several iterations when nothing can change in between (LLM only)."""
        return None

    def cut(self, iterations: int) -> None:
        """The multi-iteration step in flight ends after ``iterations`` (LLM only)."""
        raise NotImplementedError(f"{type(self).__name__} does not run multi-iteration steps")


class OneShotEngine(Engine):
    """A job's whole work is one step: its first output and its completion come at the end
    (one report: a completion without a first output counts as both, see ``sim.walk``)."""

    def finish(self, now: float) -> None:
        jobs, self.current = self.current, []
        done = self.report.done
        for j in jobs:
            done(j, now)


class EncoderEngine(OneShotEngine):
    """Batches of up to ``max_batch`` requests; GPU time by items and tokens. CPU preprocessing
    (``cpu_seconds`` per input item) happens before a job is ready, so it overlaps with a busy
    GPU and adds to the latency of a request that finds the executor idle (Cornfigurator 5.2);
    one request's inputs on one executor are preprocessed one after another.

    ``token_budget`` (an encoder inside an LLM's engine process): a step encodes at most that
    many output tokens, as vLLM v1's encoder compute budget does (``max_num_encoder_input_tokens``,
    which equals ``max_num_batched_tokens``; ``vllm/v1/core/sched/scheduler.py``); a request whose
    tokens alone exceed it still runs (vLLM raises the budget to the largest item). Whole
    requests are taken (vLLM may split a request's items across steps). None: no bound (a
    stand-alone encoder process batches up to ``max_batch``)."""

    kind = "encode"

    def __init__(self, comp: str, queue: JobQueue, cost: CostSource, cfg: Any, max_batch: int, *,
                 cpu_seconds: float = 0.0, token_budget: int | None = None) -> None:
        super().__init__(comp, queue, cost, cfg, max_batch)
        self.cpu_seconds = cpu_seconds
        self.token_budget = token_budget

    def batch_size(self) -> int:
        budget = self.token_budget
        if budget is None:
            return super().batch_size()
        comp, n, used = self.comp, 0, 0
        for j in self.queue.in_order():
            if n >= self.max_batch:
                break
            t = int(j.req.work[comp]["tokens"])
            if n and used + t > budget:
                break
            n += 1
            used += t
        return n

    def prepare(self, req: SimRequest, now: float) -> Job:
        job = Job(req, self.comp, now, self)
        cpu = self.cpu_seconds * req.work[self.comp]["items"]
        if cpu > 0:
            free = req.cpu_free
            if free is None:
                free = req.cpu_free = {}
            key = self.executor
            job.ready = free[key] = max(now, free.get(key, now)) + cpu
        return job

    def start(self, now: float) -> Step | None:
        jobs = self.take_batch()
        if not jobs:
            return None
        comp = self.comp
        if len(jobs) == 1:
            w = jobs[0].req.work[comp]
            items, tokens = int(w["items"]), int(w["tokens"])
        else:
            items = sum(int(j.req.work[comp]["items"]) for j in jobs)
            tokens = sum(int(j.req.work[comp]["tokens"]) for j in jobs)
        step = Step(self.priced(self.cost.encoder_time, items, tokens), len(jobs), "encode")
        if self.want_work:
            step.work = self.cost.encoder_work(self.comp, self.cfg, items, tokens)  # type: ignore[attr-defined]
        return step



class VAEEngine(OneShotEngine):
    kind = "vae"

    def start(self, now: float) -> Step | None:
        jobs = self.take_batch()
        if not jobs:
            return None
        pixels = max(j.req.work[self.comp]["pixels"] for j in jobs)
        step = Step(self.priced(self.cost.vae_time, len(jobs), pixels), len(jobs), "vae")
        if self.want_work:
            step.work = self.cost.vae_work(self.comp, self.cfg, len(jobs), pixels)  # type: ignore[attr-defined]
        return step



class DiTEngine(Engine):
    """Step-batched diffusion: images join and leave at denoising-step boundaries; a step runs
    every image in the batch once (padded to the largest latent)."""

    kind = "denoise"

    def has_work(self) -> bool:
        return bool(self.current or self._private or self._shared)

    def start(self, now: float) -> Step | None:
        room = self.max_batch - len(self.current)
        if room > 0 and self.queue:
            for j in self.queue.popleft_n(room):
                j.engine = self
                j.remaining = j.req.work[self.comp]["steps"]  # denoising steps left
                self.current.append(j)
        if not self.current:
            return None
        tokens = int(max(j.req.work[self.comp]["tokens"] for j in self.current))
        t = self.priced(self.cost.dit_step_time, len(self.current), tokens)
        step = Step(t, len(self.current), "denoise")
        if self.want_work:
            step.work = self.cost.dit_work(self.comp, self.cfg, len(self.current), tokens)  # type: ignore[attr-defined]
        return step

    def finish(self, now: float) -> None:
        keep = []
        for j in self.current:
            j.remaining -= 1
            if j.remaining <= 0:
                self.report.done(j, now)
            else:
                keep.append(j)
        self.current = keep


class VocoderEngine(Engine):
    """Turns codec frames into audio. A job fed by a streaming edge comes in two parts: its
    first chunk (one frame, ready as soon as the first frame exists; its end is the first
    audio out, TTFO) and the rest (ready once the upstream LLM has finished). A job fed by a
    non-streaming edge is voiced whole; its first audio is the whole utterance."""

    kind = "vocode"

    def __init__(self, comp: str, queue: JobQueue, cost: CostSource, cfg: Any, max_batch: int, *,
                 frame_seconds: float) -> None:
        super().__init__(comp, queue, cost, cfg, max_batch)
        self.frame_seconds = frame_seconds

    def prepare(self, req: SimRequest, now: float) -> Job:
        job = Job(req, self.comp, now, self)
        total = req.work[self.comp]["audio_seconds"]
        if self.comp in req.path.feed_of and total > self.frame_seconds:
            job.phase, job.size, job.upstream_done = 1, self.frame_seconds, not req.feed_open(self.comp)
            job.remaining = total - self.frame_seconds
        else:
            job.phase, job.size, job.remaining, job.upstream_done = 0, total, 0.0, True
        return job

    def start(self, now: float) -> Step | None:
        jobs = self.take_batch()
        if not jobs:
            return None
        seconds = jobs[0].size if len(jobs) == 1 else max(j.size for j in jobs)
        if seconds == self.frame_seconds:  # first chunks: one size, priced once per batch size
            t = self.priced(self.cost.vocoder_time, len(jobs), seconds)
        else:
            t = self.cost.vocoder_time(self.comp, self.cfg, len(jobs), seconds)
        step = Step(t, len(jobs), "vocode")
        if self.want_work:
            step.work = self.cost.vocoder_work(self.comp, self.cfg, len(jobs), seconds)  # type: ignore[attr-defined]
        return step

    def finish(self, now: float) -> None:
        jobs, self.current = self.current, []
        for j in jobs:
            if j.phase == 1:  # first chunk voiced
                self.report.first_output(j, now)
                j.phase, j.size = 2, j.remaining
                if j.upstream_done:
                    j.ready = now
                    push(self.queue.private, j)
            else:  # the rest, or the whole utterance
                self.report.done(j, now)

    def feed_ended(self, job: Job, now: float) -> bool:
        """The feeding LLM is done: the rest of the audio may be voiced. True if queued now (on
        the executor that voiced the first chunk)."""
        job.upstream_done = True
        if job.phase == 2:  # its first chunk is out and waited for the rest
            job.ready = now
            push(job.engine.queue.private, job)
            return True
        return False
