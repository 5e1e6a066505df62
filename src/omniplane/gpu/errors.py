"""The one error every GPU backend raises when it cannot run here."""

from __future__ import annotations


class GpuUnavailable(RuntimeError):
    """This backend cannot run on this machine (no GPU, no driver, or its library is not
    installed); the message says which, and what to install or run instead."""
