"""Latency targets: one type, :class:`omniplane.spec.LatencyTargets` (per-type first-response
targets, as a plan file stores them), and one resolver, :mod:`omniplane.slo.resolve` (a policy,
a plan's stored targets or a user's ``--slo`` table into targets). The planner, the simulator,
deploy, the scheduler and vLLM take their targets from here without importing the planner."""
