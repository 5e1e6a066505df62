"""SM ladders of CUDA green contexts: one stream per level, built once at start-up.

Switching the SM cap is choosing a stream (a green context is current to one thread only, so
the forward pass is issued on the level's stream instead of making the context current). Every
backend reads back the SM count each level was actually granted, where the API allows it.

- :class:`CudaStreams` (cuda-bindings, driver API): for each level ``s`` it splits the device's
  SM resource into one group of ``s`` SMs and the remainder. The shared stage takes the group,
  the downstream stage the remainder; the split is deterministic, so the two processes get
  disjoint, complementary SM sets that sum to the GPU's total. Granted counts are the split's
  ``sm.smCount``; the partition rule comes from the device's ``minSmPartitionSize`` and
  ``smCoscheduledAlignment`` when the driver reports them (CUDA 13), else from the
  compute-capability guideline in :mod:`omniplane.sched.ladder`.
- :class:`TorchStreams` (``torch.cuda.green_contexts``, torch 2.9+): creates one green context
  per level with the requested count. torch 2.13 neither exposes the remainder of a split
  nor the granted count, so the downstream stage's contexts may overlap the shared stage's SMs
  and ``granted`` is the request snapped to the documented rule, flagged ``read_back=False``.
- :class:`NullStreams`: no GPU. Levels and complements are arithmetic, ``stream()`` is None,
  nothing is applied; it exists so the control path runs (and is tested) on CPU.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, Protocol

from omniplane.gpu.errors import GpuUnavailable
from omniplane.sched.ladder import Ladder, LadderSpec, PartitionRule, build_ladder, partition_rule

Role = Literal["shared", "downstream"]
ROLES: tuple[str, ...] = ("shared", "downstream")


class StreamLadder(Protocol):
    backend: str
    role: str
    ladder: Ladder
    granted: tuple[int, ...]  # SMs each level gives this role
    read_back: bool  # granted counts come from the driver (not arithmetic)

    def stream(self, level: int | None) -> Any:
        """The stream to issue work on at ``level`` (None: the default stream, whole GPU)."""

    def check_level(self, level: int) -> None:
        """Raise (omniplane.gpu.checks.CheckFailed) unless work issued on level ``level``'s stream
        from the calling thread runs in that level's green context."""

    def describe(self) -> dict[str, Any]: ...


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")


class NullStreams:
    """No GPU: the ladder is arithmetic and nothing is applied (``stream()`` is None)."""

    backend = "null"
    read_back = False

    def __init__(
        self,
        total_sms: int,
        rule: PartitionRule,
        spec: LadderSpec | None = None,
        *,
        role: str = "shared",
        reason: str = "no GPU backend requested",
    ) -> None:
        _check_role(role)
        self.role, self.reason = role, reason
        self.ladder = build_ladder(total_sms, rule, spec)
        self.granted = tuple(s if role == "shared" else total_sms - s for s in self.ladder.levels)

    def stream(self, level: int | None) -> None:
        return None

    def check_level(self, level: int) -> None:
        from omniplane.gpu.checks import CheckFailed

        raise CheckFailed("GPU backend", self.reason)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "role": self.role,
            "reason": self.reason,
            "applied": False,
            "ladder": self.ladder.to_json(),
            "granted": list(self.granted),
            "read_back": False,
        }


def _ok(drv: Any, result: Any, what: str) -> Any:
    """cuda-bindings returns (CUresult, *values): raise on an error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        name = drv.cuGetErrorName(err)[1] if hasattr(drv, "cuGetErrorName") else err
        raise RuntimeError(f"{what} failed: {name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _handle(x: Any) -> Any:
    """A driver handle's address (cuda-bindings objects have ``getPtr``), for comparison."""
    get = getattr(x, "getPtr", None)
    return get() if callable(get) else x


def _wrap_stream(raw: Any, device: int) -> Any:
    """A torch stream for the raw CUstream when torch is importable, else the raw handle."""
    try:
        import torch
    except ImportError:
        return raw
    return torch.cuda.get_stream_from_external(int(raw), device)


class _GreenStreams:
    """What both green-context backends share: one stream per level and the description."""

    backend: str
    role: str
    device: int
    ladder: Ladder
    granted: tuple[int, ...]
    read_back: bool
    _streams: list[Any]
    caveat: str | None = None

    def stream(self, level: int | None) -> Any:
        return None if level is None else self._streams[level]

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "role": self.role,
            "device": self.device,
            "applied": True,
            "ladder": self.ladder.to_json(),
            "granted": list(self.granted),
            "read_back": self.read_back,
        }
        if self.caveat is not None:
            out["caveat"] = self.caveat
        return out


class CudaStreams(_GreenStreams):
    """Green-context ladder through the CUDA driver API (cuda-bindings)."""

    backend = "cuda-bindings"
    read_back = True

    def __init__(
        self,
        spec: LadderSpec | None = None,
        *,
        role: str = "shared",
        device: int = 0,
        driver: Any = None,
        wrap: Any = _wrap_stream,
    ) -> None:
        _check_role(role)
        self.role, self.device = role, device
        drv = driver if driver is not None else self._import_driver()
        self._drv = drv
        try:
            _ok(drv, drv.cuInit(0), "cuInit")
            count = _ok(drv, drv.cuDeviceGetCount(), "cuDeviceGetCount")
        except RuntimeError as exc:
            raise GpuUnavailable(f"cuda-bindings: no usable CUDA driver or GPU ({exc})") from None
        if int(count) <= device:
            raise GpuUnavailable(
                f"cuda-bindings: device {device} requested, {int(count)} CUDA device(s) present"
            )
        dev = _ok(drv, drv.cuDeviceGet(device), "cuDeviceGet")
        sm_type = drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM
        full = _ok(drv, drv.cuDeviceGetDevResource(dev, sm_type), "cuDeviceGetDevResource")
        total = int(full.sm.smCount)
        self.ladder = build_ladder(total, self._rule(drv, dev, full), spec)
        granted, self._streams, self._contexts, self._raw = [], [], [], []
        for s in self.ladder.levels:
            groups, n, remaining = _ok(
                drv, drv.cuDevSmResourceSplitByCount(1, full, 0, s), f"cuDevSmResourceSplitByCount({s} SMs)"
            )
            if int(n) < 1:
                raise RuntimeError(f"green contexts: the driver made no group of {s} SMs out of {total}")
            part = groups[0] if role == "shared" else remaining
            desc = _ok(drv, drv.cuDevResourceGenerateDesc([part], 1), "cuDevResourceGenerateDesc")
            ctx = _ok(
                drv,
                drv.cuGreenCtxCreate(desc, dev, drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM),
                "cuGreenCtxCreate",
            )
            raw = _ok(
                drv,
                drv.cuGreenCtxStreamCreate(ctx, drv.CUstream_flags.CU_STREAM_NON_BLOCKING, 0),
                "cuGreenCtxStreamCreate",
            )
            granted.append(int(part.sm.smCount))
            self._contexts.append(ctx)
            self._raw.append(raw)
            self._streams.append(wrap(raw, device))
        self.granted = tuple(granted)

    @staticmethod
    def _import_driver() -> Any:
        try:
            return importlib.import_module("cuda.bindings.driver")
        except ImportError:
            raise GpuUnavailable("cuda-bindings is not installed (pip install 'omniplane[gpu]')") from None

    @staticmethod
    def _rule(drv: Any, dev: Any, full: Any) -> PartitionRule:
        lo = int(getattr(full.sm, "minSmPartitionSize", 0) or 0)
        al = int(getattr(full.sm, "smCoscheduledAlignment", 0) or 0)
        if lo and al:
            return PartitionRule(
                lo, al, "measured: the device's SM resource (minSmPartitionSize, smCoscheduledAlignment)"
            )
        attr = drv.CUdevice_attribute
        major = _ok(
            drv, drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cc"
        )
        minor = _ok(
            drv, drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cc"
        )
        return partition_rule(int(major), int(minor))

    def check_level(self, level: int) -> None:
        """The level's stream belongs to the level's green context (``cuStreamGetCtx`` against
        ``cuCtxFromGreenCtx``, asked from the calling thread)."""
        from omniplane.gpu.checks import CheckFailed

        drv = self._drv
        got = _ok(drv, drv.cuStreamGetCtx(self._raw[level]), "cuStreamGetCtx")
        want = _ok(drv, drv.cuCtxFromGreenCtx(self._contexts[level]), "cuCtxFromGreenCtx")
        if _handle(got) != _handle(want):
            raise CheckFailed(f"SM level {level} context",
                              f"its stream runs in context {got}, not the level's green context {want}")


class TorchStreams(_GreenStreams):
    """Green-context ladder through ``torch.cuda.green_contexts`` (see the module docstring for
    what it cannot guarantee)."""

    backend = "torch"
    caveat = "downstream partitions may overlap the shared stage's SMs (no remainder in torch)"

    def __init__(
        self,
        spec: LadderSpec | None = None,
        *,
        role: str = "shared",
        device: int = 0,
        torch_module: Any = None,
    ) -> None:
        _check_role(role)
        self.role, self.device = role, device
        torch = torch_module if torch_module is not None else self._import_torch()
        if not torch.cuda.is_available():
            raise GpuUnavailable("torch.cuda: no CUDA device is available (CPU build or no GPU)")
        gc = getattr(torch.cuda, "green_contexts", None)
        if gc is None or not getattr(gc, "SUPPORTED", False):
            raise GpuUnavailable("torch.cuda.green_contexts: this torch build has no green-context support")
        props = torch.cuda.get_device_properties(device)
        total = int(props.multi_processor_count)
        rule = partition_rule(int(props.major), int(props.minor))
        self.ladder = build_ladder(total, rule, spec)
        granted, read_back, self._streams, self._contexts = [], True, [], []
        for s in self.ladder.levels:
            want = s if role == "shared" else (total - s) - (total - s) % rule.align
            ctx = gc.GreenContext.create(num_sms=want, device_id=device)
            got = getattr(ctx, "sm_count", None)
            read_back = read_back and got is not None
            granted.append(int(got) if got is not None else rule.snap_up(want))
            self._contexts.append(ctx)
            self._streams.append(ctx.Stream())
        self.granted, self.read_back = tuple(granted), read_back

    @staticmethod
    def _import_torch() -> Any:
        try:
            return importlib.import_module("torch")
        except ImportError:
            raise GpuUnavailable("torch is not installed") from None

    def check_level(self, level: int) -> None:
        """torch exposes no stream-to-context query: the matmul probe on the level's stream (made
        current on the calling thread) is the check."""
        return None
