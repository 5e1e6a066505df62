"""The worker extension, as a mixin placed before a vLLM worker class: it applies the SM cap
(:class:`~omniplane.vllm.applier.SmApplier`) around every ``execute_model`` and the
``sample_tokens`` that completes it. No vLLM import here; the base class brings it."""

from __future__ import annotations

import os
from typing import Any

from omniplane.vllm.applier import SmApplier
from omniplane.vllm.settings import load_settings


class SmCapWorkerMixin:
    omniplane_sm: SmApplier | None = None

    def _omniplane_applier(self) -> SmApplier:
        if self.omniplane_sm is None:
            config = getattr(self, "vllm_config", None)
            applier = SmApplier.from_settings(
                load_settings(getattr(config, "additional_config", None), os.environ)
            )
            model_config = getattr(config, "model_config", None)
            applier.check_eager(bool(getattr(model_config, "enforce_eager", True)))
            self.omniplane_sm = applier
        return self.omniplane_sm

    def init_device(self, *args: Any, **kwargs: Any) -> Any:
        """Build the ladder at start-up, once the worker has its device."""
        base: Any = super()
        out = base.init_device(*args, **kwargs)
        self._omniplane_applier().verify_thread()  # fail closed before the first capped step
        return out

    def execute_model(self, *args: Any, **kwargs: Any) -> Any:
        base: Any = super()
        return self._omniplane_applier().run(base.execute_model, *args, **kwargs)

    def sample_tokens(self, *args: Any, **kwargs: Any) -> Any:
        base: Any = super()
        return self._omniplane_applier().run(base.sample_tokens, *args, choose=False, **kwargs)
