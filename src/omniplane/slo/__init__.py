"""Latency targets: one type, :class:`omniplane.spec.LatencyTargets` (per-type first-response
targets, as a plan file stores them), and one resolver, :mod:`omniplane.slo.resolve` (a policy,
a plan's stored targets or a user's ``--slo`` table into targets). The planner, ``sim run``,
``rehearse``, ``deploy`` and the live scheduler comparison take their targets from here; the
resolver loads the planner's modules only for a policy that needs its cost table."""
