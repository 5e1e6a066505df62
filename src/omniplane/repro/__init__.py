"""Reproduction of the papers behind omniplane, apart from the product: HorizonServe's experiments,
testbeds, Table 3 and figures (:mod:`omniplane.repro.horizon`), the performance model against
published measurements (:mod:`omniplane.repro.validation`), Cornfigurator's Table 2
(:mod:`omniplane.repro.capacity`), the planner's paper figures (:mod:`omniplane.repro.plan_figures`)
and the exhaustive-search check of the planner (:mod:`omniplane.repro.exhaust`).

Nothing in the product (plan, sim, sched, perf, deploy, ...) imports this package; the CLI does,
for ``omniplane experiment``, ``omniplane perf validate|fit|capacity`` and ``omniplane plan --figures``
(tests/test_layering.py states the order of the packages).
"""
