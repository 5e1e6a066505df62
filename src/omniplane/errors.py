"""The errors a user's own input causes, as opposed to bugs.

Anything omniplane rejects because of what it was given (an option value, a file, a name, a
number out of range) raises a :class:`UserError`: its ``str()`` is the whole explanation, one
line per problem, each naming the file or option and field and what was expected. The CLI prints
it and exits 2 (``omniplane.cli.errors``); any other exception is a bug and asks for a report.

This module imports nothing, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches


class UserError(Exception):
    """A mistake in what the user gave omniplane; ``str()`` says what and what was expected."""


class InputError(UserError, ValueError):
    """A :class:`UserError` that is also a ``ValueError``, so that code catching ``ValueError``
    for bad values keeps working."""


def unknown_name(what: str, given: str, known: Iterable[str], hint: str = "") -> InputError:
    """``unknown model 'qwen3-omi' (did you mean qwen3-omni?); known: ...`` as an error."""
    names = list(known)
    close = get_close_matches(given.lower(), [n.lower() for n in names], n=1, cutoff=0.75)
    lower = {n.lower(): n for n in names}
    guess = f" (did you mean {lower[close[0]]}?)" if close else ""
    listed = ", ".join(names)
    return InputError(f"unknown {what} {given!r}{guess}; known: {listed}{hint}")
