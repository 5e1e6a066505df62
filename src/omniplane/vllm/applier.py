"""Applying the SM cap in the worker process, before each forward pass.

The scheduler (another process) publishes the shared stage's cap in slot 0 of the control
record. Before each ``execute_model`` the worker reads it, picks the level of its own ladder
(the largest level not above the cap; none: the whole GPU) and issues the forward pass on that
level's green-context stream. The downstream stage's worker builds its ladder with role
``downstream``: level ``i`` gives it the complement ``total - levels[i]``, so the two stages'
SMs always sum to the GPU's (HorizonServe section 5).

Fail closed (:mod:`omniplane.gpu.checks`): on each thread that runs a step (vLLM uses more than
one), before its first capped launch, every level's context and a BF16 product on every level
are checked; a failure, or a null backend, turns the cap off for good (``throttle``: one warning
line, the reason, a counter) and the forward pass runs on the whole GPU.

Stream switching keeps the order of work: the level stream first waits for the current
stream (inputs the model runner staged there), and the current stream waits for the level
stream afterwards. ``sample_tokens`` (vLLM's second half of a step) runs on the level its
``execute_model`` chose. CUDA graphs are not captured per level: with a real ladder, run the
stage with ``enforce_eager`` (vLLM-Omni's stock stage configs do); :meth:`SmApplier.check_eager`
warns otherwise.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from omniplane.control import ControlRecord
from omniplane.gpu.backends import make_streams
from omniplane.gpu.checks import CheckFailed, Probe, ThrottleState, torch_matmul_probe, verify_levels
from omniplane.gpu.errors import GpuUnavailable
from omniplane.gpu.green import StreamLadder
from omniplane.vllm.settings import SchedulerSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


WHO = "omniplane worker"


class SmApplier:
    def __init__(self, streams: StreamLadder | None, record: ControlRecord | None, *,
                 probe: Probe = torch_matmul_probe, device: int = 0, quiet_null: bool = False) -> None:
        self.streams, self.record = streams, record
        self.probe, self.device = probe, device
        # fail closed (omniplane.gpu.checks): caps apply on a thread only after its checks passed
        self.throttle = ThrottleState()
        self._verified: set[int] = set()
        if streams is not None and streams.backend == "null":
            reason = getattr(streams, "reason", "null backend")
            self.throttle.disable(WHO, "GPU backend", reason, quiet=quiet_null)
        self.level: int | None = None
        # SMs this worker's level gives it (None: whole GPU); applied only while throttle.enabled
        self.sms: int | None = None
        self.history: deque[int | None] = deque(maxlen=1024)  # levels chosen, newest last
        self.switches = 0

    @classmethod
    def from_settings(cls, settings: SchedulerSettings) -> SmApplier:
        record = None
        if settings.control:
            record = ControlRecord.open(
                settings.control,
                slots=settings.control_slots,
                total_sms=settings.total_sms,
                directory=Path(settings.control_dir) if settings.control_dir else None,
            )
        streams, no_gpu = None, ""
        if settings.total_sms or settings.streams != "null":
            try:
                streams = make_streams(
                    settings.streams,
                    settings.ladder.spec(),
                    role=settings.role,
                    device=settings.device,
                    total_sms=settings.total_sms,
                    rule=settings.rule(),
                )
            except GpuUnavailable as exc:
                if settings.streams != "auto":
                    raise
                no_gpu = str(exc)
        applier = cls(streams, record, device=settings.device, quiet_null=settings.streams == "null")
        if streams is None and settings.total_sms:
            applier.throttle.disable(WHO, "GPU backend", f"no GPU: {no_gpu}")
        elif streams is None:
            applier.throttle.disable(WHO, "SM ladder", "no GPU kind (total_sms 0)", quiet=True)
        log.info(
            "omniplane worker: SM ladder %s, control record %s",
            streams.describe() if streams else "none (no total_sms, null backend)",
            record.path if record else "none",
        )
        return applier

    def describe(self) -> dict[str, Any]:
        return {
            "streams": self.streams.describe() if self.streams else None,
            "record": str(self.record.path) if self.record else None,
            "level": self.level,
            "sms": self.sms,
            "switches": self.switches,
            "throttle": self.throttle.to_json(),
        }

    def check_eager(self, enforce_eager: bool) -> None:
        if self.streams is not None and self.streams.backend != "null" and not enforce_eager:
            log.warning(
                "omniplane worker: CUDA graphs are captured on the default stream, not per SM level; "
                "run this stage with enforce_eager for the SM cap to hold in graph replays"
            )

    def choose(self) -> int | None:
        """Read the shared stage's cap and pick this worker's level (None: whole GPU)."""
        shared = self.record.read(0) if self.record is not None else None
        level = None
        if self.streams is not None and shared is not None and shared.sm_count:
            level = self.streams.ladder.level_for(shared.sm_count)
        if level != self.level:
            self.switches += 1
        self.level = level
        self.sms = None if level is None or self.streams is None else self.streams.granted[level]
        self.history.append(level)
        return level

    def verify_thread(self) -> bool:
        """The checks of every SM level on the calling thread, once per thread (module
        omniplane.gpu.checks); False (and throttling off) when one fails."""
        if not self.throttle.enabled or self.streams is None:
            return False
        ident = threading.get_ident()
        if ident in self._verified:
            return True
        thread = threading.current_thread().name
        try:
            passed = verify_levels(self.streams, self.probe, self.device)
        except CheckFailed as exc:
            self.throttle.disable(WHO, exc.check, f"{exc.reason} (thread {thread})")
            return False
        self._verified.add(ident)
        self.throttle.passed.append(f"thread {thread}: " + ", ".join(passed))
        return True

    def run(self, fn: Callable[..., T], *args: Any, choose: bool = True, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on this step's level (chosen now unless ``choose`` is False);
        on the whole GPU unless this thread's checks passed."""
        level = self.choose() if choose else self.level
        stream = self.streams.stream(level) if self.streams is not None else None
        if stream is not None and not self.verify_thread():
            stream = None
        if stream is None:
            return fn(*args, **kwargs)
        import torch

        current = torch.cuda.current_stream()
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            out = fn(*args, **kwargs)
        current.wait_stream(stream)
        return out

    def close(self) -> None:
        if self.record is not None:
            self.record.close()
