"""A public measurement beside the question the cost model answers for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources import files
from pathlib import Path

from omniplane.perf.costmodel import CostModel
from omniplane.perf.factors import Calibration
from omniplane.spec import GPUCatalog, GPUKind, ModelSpec, catalog_gpus_path, load_gpus, load_model
from omniplane.spec.catalog import find_catalog_model


class Role(StrEnum):
    FIT = "fit"  # used to fit efficiency factors
    HELD_OUT = "held-out"  # never used to fit anything
    COLOCATION = "colocation-calibration"  # fitted by the co-location model (HorizonServe)
    RUNTIME = "runtime-fit"  # fits the host-side factors of the runtime it ran on (perf/runtime.py)


class Flag(StrEnum):
    ANOMALOUS = "anomalous"  # inconsistent with its neighbours in the same dataset
    GPU_ASSUMED = "gpu-assumed"  # the source does not name the GPU
    CONFIG_DIFFERS = "config-differs"  # the measured setup does something the model omits


EXCLUDING_FLAGS = frozenset({Flag.ANOMALOUS})  # flags that keep a point out of fits and medians


def data_dir() -> Path:
    return Path(str(files("omniplane") / "data"))


def validation_model_path(name: str) -> Path:
    return Path(str(files("omniplane.repro.validation") / "models" / f"{name}.yaml"))


class Context:
    """Specs the points need, loaded once, and cost models for one calibration."""

    def __init__(self) -> None:
        self.gpus: GPUCatalog = load_gpus(catalog_gpus_path())
        self._specs: dict[str, ModelSpec] = {}

    def gpu(self, name: str) -> GPUKind:
        return self.gpus.get(name)

    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            path = find_catalog_model(name)
            self._specs[name] = load_model(path if path is not None else validation_model_path(name))
        return self._specs[name]

    def models(self, calibration: Calibration) -> Models:
        return Models(self, calibration)


class Models:
    """Cost models of every validation model under one calibration (built on first use).

    A point names the runtime its measurement ran on; without one it is priced by the roofline
    alone (``runtime="roofline"``: the GPU kind's efficiency factors, what they are fitted with).
    """

    def __init__(self, ctx: Context, calibration: Calibration) -> None:
        self.ctx = ctx
        self.calibration = calibration
        self._cost: dict[tuple[str, str], CostModel] = {}

    def cost(self, name: str, runtime: str = "roofline") -> CostModel:
        key = (name, runtime)
        if key not in self._cost:
            self._cost[key] = CostModel(self.ctx.spec(name), calibration=self.calibration,
                                        runtime=runtime)
        return self._cost[key]


Predictor = Callable[[Models], float]


@dataclass(frozen=True)
class Point:
    """One published number. ``measured`` and predictions are in ``unit``."""

    id: str
    dataset: str
    description: str
    gpu: str
    measured: float
    unit: str
    role: Role
    predict: Predictor = field(repr=False, compare=False)
    source: str = ""
    flags: tuple[Flag, ...] = ()
    note: str = ""
    runtime: str = "roofline"  # the serving runtime the measurement ran on

    @property
    def excluded(self) -> bool:
        return bool(EXCLUDING_FLAGS & set(self.flags))


@dataclass(frozen=True)
class NotExpressible:
    """A public measurement the catalog cannot express, and why (listed, never dropped silently)."""

    dataset: str
    what: str
    count: int
    reason: str
