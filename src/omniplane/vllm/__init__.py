"""omniplane inside vLLM / vLLM-Omni (docs/reference/vllm.md).

Importing this package imports neither vLLM nor torch. The classes vLLM loads by name import
them in their own modules:

- ``omniplane.vllm.scheduler.OmniplaneScheduler`` (vLLM ``--scheduler-cls``),
- ``omniplane.vllm.omni_scheduler.OmniplaneOmniARScheduler`` / ``...GenerationScheduler``
  (vLLM-Omni stages; named by omniplane's pipeline variants, ``omni_pipelines``, which the
  plugin ``omniplane.vllm.plugin`` registers in vLLM-Omni's processes),
- ``omniplane.vllm.worker.OmniplaneWorker`` / ``omniplane.vllm.omni_worker.OmniplaneARWorker``
  (``worker_cls``: apply the SM cap before each forward pass).

Everything else (settings, the policy bridge, queue surgery, control publishing, stage configs)
is plain Python and runs without vLLM.
"""
