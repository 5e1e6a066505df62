"""SLO-aware single-GPU scheduling after HorizonServe (arXiv:2608.01785, section 4).

A policy is a plain object behind the contract of :mod:`omniplane.policy`, so the simulator and
vLLM's scheduler drive the same object. Pieces, one per module: the request profiler
(:mod:`.profiler`), the temporal scheduler (:mod:`.temporal`), the spatial controller
(:mod:`.spatial`), the SM ladder (:mod:`.ladder`), offline calibration (:mod:`.calibration`), the
policy composing them (:mod:`.horizon`), the baselines (:mod:`.baselines`) and the one factory
mapping every policy name to its class (:mod:`.factory`). The paper's experiments are in
:mod:`omniplane.repro.horizon.experiment` (``omniplane experiment horizon``). Never imports
torch, CUDA, vLLM or Ray.

This file imports nothing: a vLLM engine process that loads the factory or the ladder loads
those modules only, not the calibration's cost model. See docs/guides/schedule.md.
"""
