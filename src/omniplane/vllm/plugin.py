"""omniplane's vLLM / vLLM-Omni plugin (entry points ``vllm.general_plugins`` and
``vllm_omni.general_plugins``: both load it in their processes, ``vllm serve`` before it parses
its arguments).

In a vLLM-Omni process it registers omniplane's pipeline variants
(:mod:`omniplane.vllm.omni_pipelines`, which the deploy files omniplane writes name), and with
``OMNIPLANE_FORWARD_CLASS=1`` it installs the class-forwarding wrapper
(:mod:`omniplane.vllm.omni_patch`). In a plain vLLM process (vLLM-Omni not imported) it does
nothing, so vLLM alone never pays for importing vLLM-Omni's pipeline registry.
"""

from __future__ import annotations

import logging
import sys

from omniplane.vllm import omni_patch

log = logging.getLogger(__name__)


def register() -> None:
    if "vllm_omni" not in sys.modules:
        return
    from omniplane.vllm.omni_pipelines import register as register_pipelines

    added = register_pipelines()
    if added:
        log.info("omniplane: registered vLLM-Omni pipelines %s", added)
    omni_patch.register()
