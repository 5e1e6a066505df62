"""Control state shared between stage processes on one GPU (HorizonServe section 5).

The shared stage's scheduler, the downstream stages' schedulers and the workers that run the
forward passes are separate processes. They exchange a compact record through shared memory
(a file under ``/dev/shm``): downstream activity, memory pressure and the chosen SM level.
:mod:`omniplane.control.record` has the format and the seqlock that keeps reads whole.

No GPU, torch or vLLM here: the record is plain bytes, so the core stays importable anywhere.
"""

from omniplane.control.record import (
    DEFAULT_DIR,
    ControlRecord,
    RecordBusy,
    RecordFormatError,
    SlotState,
)

__all__ = ["DEFAULT_DIR", "ControlRecord", "RecordBusy", "RecordFormatError", "SlotState"]
