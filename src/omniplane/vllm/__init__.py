"""omniplane inside vLLM / vLLM-Omni (docs/vllm.md).

Importing this package imports neither vLLM nor torch. The classes vLLM loads by name import
them in their own modules:

- ``omniplane.vllm.scheduler.OmniplaneScheduler`` (vLLM ``--scheduler-cls``),
- ``omniplane.vllm.omni_scheduler.OmniplaneOmniARScheduler`` (vLLM-Omni stage ``scheduler_cls``),
- ``omniplane.vllm.worker.OmniplaneWorker`` / ``omniplane.vllm.omni_worker.OmniplaneARWorker``
  (``worker_cls``: apply the SM cap before each forward pass).

Everything else (settings, the policy bridge, queue surgery, control publishing, stage configs)
is plain Python and runs without vLLM.
"""
