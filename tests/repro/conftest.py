"""The catalog fixtures of tests/perf (GPUs, model specs, cost models), shared with the moved tests."""

from tests.perf.conftest import costs, gpus, specs

__all__ = ["costs", "gpus", "specs"]
