"""Efficiency factors per GPU kind: the few fitted numbers that turn peak FLOP/s and bandwidth
into iteration times, each with the measurements it was fitted to.

The shipped factors live in ``perf/data/calibration.json`` (written by ``omniplane perf fit``);
:func:`load_calibration` reads them. A GPU kind without its own entry uses ``default``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from omniplane.inputs import MAX_JSON_BYTES, json_loads, quote, read_input_text
from omniplane.perf.runtime import ROOFLINE, Runtime
from omniplane.spec import GPUKind

FACTOR_FIELDS = ("compute", "memory", "layer_s", "per_seq_s", "allreduce_s", "link")


@dataclass(frozen=True)
class Efficiency:
    """The roofline's per-kind factors (see docs/reference/perf.md for the equations).

    compute      fraction of peak dense BF16 FLOP/s reached by the iteration's matmuls
    memory       fraction of peak DRAM bandwidth reached streaming weights and KV cache
    layer_s      fixed time per layer per iteration (kernel launch gaps and tails)
    per_seq_s    time per sequence that emits a token in the iteration (sampling, bookkeeping)
    allreduce_s  latency of one all-reduce per doubling of the TP degree (x log2 tp)
    link         fraction of the per-direction link bandwidth an all-reduce achieves
    """

    compute: float
    memory: float
    layer_s: float
    per_seq_s: float
    allreduce_s: float
    link: float

    def __post_init__(self) -> None:
        for name in ("compute", "memory", "link"):
            v = getattr(self, name)
            if not 0.0 < v <= 1.0:
                raise ValueError(f"Efficiency.{name} must be in (0, 1], got {v}")
        for name in ("layer_s", "per_seq_s", "allreduce_s"):
            v = getattr(self, name)
            if not (v >= 0.0 and math.isfinite(v)):
                raise ValueError(f"Efficiency.{name} must be a finite number >= 0, got {v}")

    @classmethod
    def from_vector(cls, x: list[float] | tuple[float, ...]) -> Efficiency:
        return cls(**dict(zip(FACTOR_FIELDS, (float(v) for v in x), strict=True)))

    def vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in FACTOR_FIELDS)


@dataclass(frozen=True)
class KindFactors:
    """Factors of one GPU kind and where they come from.

    ``source`` is ``fitted: ...`` (then ``fitted_to`` lists the measurement ids and
    ``fit_median_abs_err`` the in-sample error) or ``assumption: ...``; ``factor_sources``
    overrides it for single factors (e.g. one held fixed by assumption during a fit).
    """

    gpu: str
    efficiency: Efficiency
    source: str
    fitted_to: tuple[str, ...] = ()
    fit_median_abs_err: float | None = None
    factor_sources: Mapping[str, str] = field(default_factory=dict)

    def source_of(self, factor: str) -> str:
        return self.factor_sources.get(factor, self.source)


@dataclass(frozen=True)
class Calibration:
    """Per-kind factors plus the default for kinds without their own entry, and the serving
    runtimes (:mod:`omniplane.perf.runtime`) with the one a cost model uses by default."""

    kinds: Mapping[str, KindFactors]
    default: KindFactors
    created: str = ""
    command: str = ""
    notes: tuple[str, ...] = ()
    runtimes: Mapping[str, Runtime] = field(default_factory=dict)
    default_runtime: str = "roofline"
    _lower: Mapping[str, KindFactors] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", MappingProxyType(dict(self.kinds)))
        object.__setattr__(self, "_lower", MappingProxyType({k.lower(): v for k, v in self.kinds.items()}))
        runtimes = {"roofline": ROOFLINE, **dict(self.runtimes)}
        object.__setattr__(self, "runtimes", MappingProxyType(runtimes))
        if self.default_runtime not in runtimes:
            raise ValueError(f"Calibration.default_runtime {self.default_runtime!r} is not one of "
                             f"{sorted(runtimes)}")

    def runtime(self, name: str | None = None) -> Runtime:
        """A runtime by name (``None``: the default one)."""
        key = name or self.default_runtime
        try:
            return self.runtimes[key]
        except KeyError:
            raise KeyError(f"unknown runtime {key!r}; known: {', '.join(sorted(self.runtimes))}") from None

    def with_runtime(self, runtime: Runtime) -> Calibration:
        """A copy with ``runtime`` added or replaced."""
        return Calibration(self.kinds, self.default, self.created, self.command, self.notes,
                           {**self.runtimes, runtime.name: runtime}, self.default_runtime)

    def entry(self, gpu: GPUKind | str) -> KindFactors:
        names = [gpu] if isinstance(gpu, str) else [gpu.name, *gpu.aliases]
        for n in names:
            hit = self._lower.get(n.lower())
            if hit is not None:
                return hit
        return self.default

    def for_gpu(self, gpu: GPUKind | str) -> Efficiency:
        return self.entry(gpu).efficiency

    # ---- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        def one(k: KindFactors) -> dict[str, Any]:
            d: dict[str, Any] = {"factors": asdict(k.efficiency), "source": k.source}
            if k.factor_sources:
                d["factor_sources"] = dict(k.factor_sources)
            if k.fitted_to:
                d["fitted_to"] = list(k.fitted_to)
            if k.fit_median_abs_err is not None:
                d["fit_median_abs_err"] = round(k.fit_median_abs_err, 4)
            return d

        return {
            "kind": "omniplane-perf-calibration",
            "version": 1,
            "created": self.created,
            "command": self.command,
            "notes": list(self.notes),
            "factor_units": {
                "compute": "fraction of peak dense BF16 FLOP/s",
                "memory": "fraction of peak DRAM bandwidth",
                "layer_s": "seconds per layer per iteration",
                "per_seq_s": "seconds per sequence emitting a token",
                "allreduce_s": "seconds per all-reduce per log2(tp)",
                "link": "fraction of per-direction link bandwidth",
            },
            "kinds": {name: one(k) for name, k in self.kinds.items()},
            "default": one(self.default),
            "default_runtime": self.default_runtime,
            "runtimes": {n: r.to_json() for n, r in self.runtimes.items() if n != "roofline"},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], file: str = "<calibration>") -> Calibration:
        def one(name: str, d: Any, where: str) -> KindFactors:
            if not isinstance(d, Mapping) or "factors" not in d or "source" not in d:
                raise ValueError(f"{file}: {where}: expected an object with 'factors' and 'source'")
            f = d["factors"]
            if not isinstance(f, Mapping):
                raise ValueError(f"{file}: {where}.factors: expected an object")
            missing = [k for k in FACTOR_FIELDS if k not in f]
            if missing:
                raise ValueError(f"{file}: {where}.factors: missing {missing}")
            values: dict[str, float] = {}
            for k in FACTOR_FIELDS:
                v = f[k]
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                    raise ValueError(f"{file}: {where}.factors.{k}: expected a finite number, got "
                                     f"{quote(v)}")
                values[k] = float(v)
            try:
                eff = Efficiency(**values)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{file}: {where}.factors: {exc}") from None
            err = d.get("fit_median_abs_err")
            return KindFactors(name, eff, str(d["source"]), tuple(d.get("fitted_to", ())),
                               float(err) if err is not None else None,
                               {str(a): str(b) for a, b in dict(d.get("factor_sources", {})).items()})

        if not isinstance(data, Mapping) or data.get("kind") != "omniplane-perf-calibration":
            raise ValueError(f"{file}: kind: expected 'omniplane-perf-calibration'")
        kinds = {n: one(n, d, f"kinds.{n}") for n, d in dict(data.get("kinds", {})).items()}
        runtimes = {str(n): Runtime.from_json(str(n), d, file)
                    for n, d in dict(data.get("runtimes", {})).items()}
        default_runtime = str(data.get("default_runtime", "roofline"))
        if default_runtime != "roofline" and default_runtime not in runtimes:
            raise ValueError(f"{file}: default_runtime: {default_runtime!r} is not one of "
                             f"{sorted(['roofline', *runtimes])}")
        return cls(kinds=kinds, default=one("default", data.get("default"), "default"),
                   created=str(data.get("created", "")), command=str(data.get("command", "")),
                   notes=tuple(data.get("notes", ())), runtimes=runtimes,
                   default_runtime=default_runtime)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")


def default_calibration_path() -> Path:
    return Path(str(files("omniplane.perf") / "data" / "calibration.json"))


def load_calibration(path: Path | None = None) -> Calibration:
    """The shipped calibration, or one written by ``omniplane perf fit --out``."""
    p = path or default_calibration_path()
    text = read_input_text(p, "calibration file", MAX_JSON_BYTES)
    try:
        data = json_loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # NaN, Infinity, an over-long integer
        raise ValueError(f"{p}: invalid JSON here: {exc}") from None
    return Calibration.from_json(data, str(p))
