"""Suite-wide settings.

Hypothesis' per-example deadline is a timing check, and timing belongs in ``bench/``: on a loaded
2-core machine a 200 ms deadline fails examples that are correct. Property tests here assert
behaviour only, so the deadline is off for every test (a test may still set its own settings).

``make pytest`` runs the suite on several pytest-xdist workers (``--dist loadgroup``). A test
that starts a local Ray cluster (its own, or through a subprocess such as ``omniplane deploy``)
is marked ``ray``: every such test joins one xdist group, so they run one after another on one
worker and never two Ray clusters at once (the serial run, ``.venv/bin/pytest``, is unchanged).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

# A pytest-xdist worker starts with COLUMNS=80 in its environment, and rich's module-level
# consoles (cli/output.py) freeze a COLUMNS seen at import as their width for good: tests that
# pass COLUMNS to CliRunner per call would then get 80-column tables under xdist only.
os.environ.pop("COLUMNS", None)

# The local Ray clusters of the tests on 127.0.0.1: set before any test module imports Ray (a
# module collected before tests/deploy, e.g. one validating a Serve config, may import it).
from omniplane.deploy.cluster import prefer_loopback

prefer_loopback()

settings.register_profile("omniplane", deadline=None)
settings.load_profile("omniplane")

RAY_GROUP = "ray"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups in its own hook
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group(RAY_GROUP))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when pytest-xdist's grouping is not in effect (it marks a grouped test by a
    ``@group`` suffix on its node id, which pytest 9.2 ignores: pytest-dev/pytest-xdist#1386)."""
    if not session.config.getoption("loadgroup", default=False):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (and {len(lost) - 1} more): "
                                "the tests marked `ray` would start Ray clusters at once; see pyproject.toml")


@pytest.fixture(scope="session")
def live_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The vLLM engines the tests marked ``vllm`` share (tests/fidelity/live_engines.py), stopped
    at the end of the session if no module stopped them before."""
    from tests.fidelity.live_engines import LiveEngines

    engines = LiveEngines(tmp_path_factory.mktemp("vllm-logs"))
    try:
        yield engines
    finally:
        engines.stop()
