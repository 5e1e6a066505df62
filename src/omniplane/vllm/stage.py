"""The cross-process side of one stage's scheduler.

The shared stage reads how many requests the downstream stages have active and the GPU's
memory pressure, and publishes the SM cap its policy chose (snapped to the ladder) in slot 0 of
the control record, where its worker (and the downstream stage's worker, which takes the
complement) read it before each forward pass. A downstream stage publishes its own activity
in its slot. Without a ``control`` record name nothing crosses processes: downstream activity
is 0 and the cap stays in this process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from omniplane.control import ControlRecord, SlotState
from omniplane.gpu.backends import make_sampler
from omniplane.gpu.nvml import PressureSampler
from omniplane.sched.ladder import Ladder, build_ladder
from omniplane.vllm.settings import SchedulerSettings

STALE_AFTER_NS = 30_000_000_000  # assumption: a downstream slot not updated for 30 s is a dead stage


class StageControl:
    def __init__(
        self,
        settings: SchedulerSettings,
        *,
        record: ControlRecord | None = None,
        sampler: PressureSampler | None = None,
    ) -> None:
        self.settings = settings
        self.ladder: Ladder | None = (
            build_ladder(settings.total_sms, settings.rule(), settings.ladder.spec())
            if settings.total_sms
            else None
        )
        if record is None and settings.control:
            record = ControlRecord.open(
                settings.control,
                slots=settings.control_slots,
                total_sms=settings.total_sms,
                directory=Path(settings.control_dir) if settings.control_dir else None,
            )
        self.record = record
        if sampler is None:
            sampler = (
                make_sampler(
                    settings.sampler,
                    device=settings.device,
                    min_interval_s=settings.sample_interval_s,
                    now=time.monotonic(),
                )
                if settings.role == "shared"
                else make_sampler("null", device=0, min_interval_s=0)
            )
        self.sampler = sampler
        self.pid = os.getpid()

    def downstream_active(self) -> int:
        rec = self.record
        if rec is None or self.settings.role != "shared":
            return 0
        now = time.monotonic_ns()
        total = 0
        for slot in range(1, rec.slots):
            s = rec.read(slot)
            if s is not None and now - s.updated_ns < STALE_AFTER_NS:
                total += s.active
        return total

    def bw_util(self, now: float) -> float:
        v = self.sampler.sample(now)
        return 0.0 if v is None else v

    def snap(self, sm_cap: int | None) -> tuple[int | None, int | None]:
        """(ladder level, SMs) for a policy's cap; (None, None) without a cap or a ladder."""
        if self.ladder is None:
            return None, None
        level = self.ladder.level_for(sm_cap)
        return level, None if level is None else self.ladder.levels[level]

    def publish(self, *, step: int, active: int, level: int | None, sms: int | None, bw: float) -> None:
        if self.record is None:
            return
        self.record.write(
            self.settings.slot,
            SlotState(self.pid, active, step, time.monotonic_ns(), level, sms or 0, bw, bw),
        )

    def close(self) -> None:
        self.sampler.close()
        if self.record is not None:
            self.record.close()
