"""The HorizonServe testbed's serving runtime, ``vllm-omni-paper-testbed`` (issue 15).

An ENVIRONMENT parameter, not a policy parameter: the per-iteration host time (``step_s``) of
the vLLM-Omni runtime the paper's testbed ran, per GPU kind, fitted to the paper's Table 3
Vanilla (the baseline's) shared-stage TPOT p50 (39.5 ms on RTX 6000 Ada, 36.0 ms on RTX PRO 6000).
Table 3 does not say at which load it was measured, so the one published p50 is the target at
both ends of Figure 8's rate sweep (0.2 and 0.5 req/s at long-path fraction 0.3) on the 4-slot
testbed the stressed points run on: two points per GPU, never one, never a HorizonServe number.
Every other factor is the ``vllm`` runtime's (issue 13's fit to the Qwen3-Omni report), so the
Cornfigurator / planner side (``vllm`` and ``cornserve`` runtimes) does not move.

The fitted values and the residual at each point live in ``repro/data/paper_testbed_runtime.json``
(written by ``python -m omniplane.repro.horizon.testbed_fit --fit``); this module derives the runtime from
them and the shipped ``vllm`` runtime, so a re-run of ``omniplane perf fit`` keeps it.

Measured and NOT the testbed's default (docs/decisions/0101-paper-testbed-host-time.md): it
fits Table 3 but lowers the co-running memory signal to 0.67 / 0.42 against Figure 4's 0.93, since
host time is time the DRAM is idle; so the paper's long TPOT is not host time, and HorizonServe
over the best baseline stays 0.98-1.03x. Opt in with ``SingleGPU(..., runtime=TESTBED_RUNTIME)``
or ``scripts/horizon_tables.py --runtime vllm-omni-paper-testbed``.

A second opt-in variant, ``vllm-omni-paper-bandwidth``, tests the GPU-side
hypothesis instead: the ``vllm`` runtime unchanged, and the testbed's ACHIEVED DRAM bandwidth per
GPU kind, a factor ``memory_scale`` in (0, 1] on that kind's memory efficiency (applied to every
stage on that GPU through the cost model's efficiency, which the co-location model and the
simulator's shared GPU take; the DRAM capacity itself is not changed, so nothing exceeds physics),
fitted to the same two Vanilla Table 3 points per GPU. Data: ``repro/data/paper_testbed_bandwidth.json``
(``python -m omniplane.repro.horizon.testbed_fit --fit --variant bandwidth``). ``vllm-omni-paper-dram`` is the
same scale read as the GPU's, not the kernels': the DRAM's capacity (what it serves all stages
together, :meth:`ColocationModel.capacity`) is scaled by it too (:class:`ScaledDRAM`), so two
co-running stages cannot recover what one stage alone does not reach. A stage alone runs
identically in both (its draw is below the capacity in both, scaled alike), and Vanilla time-slices
(one stage at a time), so the one fit serves both variants.

Measured and NOT the default either (docs/decisions/0102-paper-testbed-achieved-bandwidth.md): the fit
leaves +-10% residuals and a PRO 6000 at 35% of its peak bandwidth. The alone memory signal
reaches Figure 4's 0.76, and Figure 10 reaches 0.94 / 0.93 on the DRAM reading, but the co-running
signal stays near 0.8, Table 3 ends at 0.88x, and HorizonServe over the best baseline stays
1.02-1.07x.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from omniplane.perf import ColocationModel
from omniplane.perf.colocation import ColocationParams
from omniplane.perf.factors import Calibration, KindFactors, load_calibration
from omniplane.perf.runtime import Runtime
from omniplane.spec import GPUKind

TESTBED_RUNTIME = "vllm-omni-paper-testbed"
BANDWIDTH_TESTBED = "vllm-omni-paper-bandwidth"  # each stage's achieved bandwidth, not host time
DRAM_TESTBED = "vllm-omni-paper-dram"  # the same, and the DRAM serves the stages together no more
TESTBEDS = (TESTBED_RUNTIME, BANDWIDTH_TESTBED, DRAM_TESTBED)
BASE_RUNTIME = "vllm"
FIT_RATES = (0.2, 0.5)  # Figure 8's lowest and highest rate (Table 3's load is not stated)
FIT_LONG_FRACTION = 0.3  # the rate sweep's mix
FIT_MAX_SEQS = 4  # the stressed points' testbed (Figure 6 draws a shared-stage batch of 4)
FIT_REQUESTS = 200  # per point, seed 0 (common random numbers), as Table 3's check
STEP_BOUNDS_S = (0.0, 0.04)  # bounds of the fit: 0 to 40 ms of host time per iteration
SCALE_BOUNDS = (0.2, 1.0)  # memory_scale: at most the kind's own efficiency (never above it), at least 1/5


def data_path() -> Path:
    return Path(str(files("omniplane.repro") / "data" / "paper_testbed_runtime.json"))


def bandwidth_data_path() -> Path:
    return Path(str(files("omniplane.repro") / "data" / "paper_testbed_bandwidth.json"))


def _fraction(value: object, where: str, what: str = "") -> float:
    """``value`` as a float in (0, 1], else an error naming ``where``."""
    if not (isinstance(value, int | float) and not isinstance(value, bool) and 0.0 < value <= 1.0):
        raise ValueError(f"{where}: expected a number in (0, 1]{what}, got {value!r}")
    return float(value)


def scaled_calibration(memory_scale_by_gpu: dict[str, float], calibration: Calibration | None = None,
                       source: str = "memory_scale_by_gpu") -> Calibration:
    """``calibration`` (the shipped one) with the memory efficiency of each named GPU kind multiplied
    by its factor in (0, 1]: the testbed achieves less DRAM bandwidth than the kind's factor, never
    more. Every other factor, kind and runtime is unchanged."""
    base = calibration or load_calibration()
    kinds = dict(base.kinds)
    for gpu, scale in memory_scale_by_gpu.items():
        scale = _fraction(scale, f"{source}.{gpu}", " (a fraction of the GPU kind's memory efficiency)")
        entry = base.entry(gpu)
        eff = entry.efficiency
        scaled = type(eff)(**{**{f: getattr(eff, f) for f in eff.__dataclass_fields__},
                              "memory": eff.memory * float(scale)})
        sources = {**dict(entry.factor_sources),
                   "memory": f"{entry.source_of('memory')} x {float(scale):.4f} ({source}.{gpu})"}
        kinds[gpu] = KindFactors(gpu, scaled, entry.source, entry.fitted_to, entry.fit_median_abs_err,
                                 sources)
    return Calibration(kinds, base.default, base.created, base.command, base.notes, dict(base.runtimes),
                       base.default_runtime)


def bandwidth_calibration(calibration: Calibration | None = None, path: Path | None = None) -> Calibration:
    """``vllm-omni-paper-bandwidth``: the shipped calibration with the fitted per-GPU memory scale."""
    file = path or bandwidth_data_path()
    return scaled_calibration(memory_scales(file), calibration, source=f"{file}: memory_scale_by_gpu")


class ScaledDRAM(ColocationModel):
    """The co-location model with each named GPU kind's DRAM capacity (bytes/s served to all stages
    together) multiplied by its factor in (0, 1] (``vllm-omni-paper-dram``); everything else the
    shipped model's."""

    def __init__(self, capacity_scale_by_gpu: dict[str, float], params: ColocationParams | None = None,
                 calibration: Calibration | None = None) -> None:
        super().__init__(params, calibration)
        self.scale_by_gpu = {k: _fraction(v, f"ScaledDRAM.{k}") for k, v in capacity_scale_by_gpu.items()}

    def capacity(self, gpu: GPUKind) -> float:
        return super().capacity(gpu) * self.scale_by_gpu.get(gpu.name, 1.0)


def memory_scales(path: Path | None = None) -> dict[str, float]:
    """The bandwidth data file's ``memory_scale_by_gpu``, each checked to be a fraction in (0, 1]."""
    file = path or bandwidth_data_path()
    by_gpu = json.loads(file.read_text()).get("memory_scale_by_gpu")
    if not isinstance(by_gpu, dict) or not by_gpu:
        raise ValueError(f"{file}: memory_scale_by_gpu: expected an object of GPU kind -> fraction in (0, 1]")
    return {str(k): _fraction(v, f"{file}: memory_scale_by_gpu.{k}") for k, v in by_gpu.items()}


def resolve(runtime: str | Runtime) -> tuple[str | Runtime, Calibration | None]:
    """A testbed runtime name -> (the cost model's runtime, its calibration or None for the shipped)."""
    if runtime == TESTBED_RUNTIME:
        return testbed_runtime(), None
    if runtime in (BANDWIDTH_TESTBED, DRAM_TESTBED):
        return BASE_RUNTIME, bandwidth_calibration()
    return runtime, None


def colocation_for(runtime: str | Runtime) -> ColocationModel | None:
    """The co-location model a testbed runtime name prices co-running with (None: the shipped one)."""
    return ScaledDRAM(memory_scales()) if runtime == DRAM_TESTBED else None


def testbed_runtime(calibration: Calibration | None = None, path: Path | None = None) -> Runtime:
    """``vllm-omni-paper-testbed``: the ``vllm`` runtime with the fitted per-GPU ``step_s``."""
    file = path or data_path()
    data = json.loads(file.read_text())
    where = f"{file}: step_s_by_gpu"
    by_gpu = data.get("step_s_by_gpu")
    if not isinstance(by_gpu, dict) or not by_gpu:
        raise ValueError(f"{where}: expected an object of GPU kind -> seconds")
    base = (calibration or load_calibration()).runtime(BASE_RUNTIME)
    sources = dict(base.factor_sources)
    sources["step_s_by_gpu"] = (f"fitted per GPU kind to HorizonServe Table 3 Vanilla TPOT p50 at rates "
                                f"{', '.join(f'{r:g}' for r in FIT_RATES)} req/s ({file.name})")
    try:
        return base.with_factors(name=TESTBED_RUNTIME, source=str(data.get("source", TESTBED_RUNTIME)),
                                 step_s_by_gpu={str(k): v for k, v in by_gpu.items()},
                                 factor_sources=sources, fitted_to=tuple(data.get("fitted_to", ())))
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
