"""The CLI tests' common fixture: a folder holding the fixture files, with its own cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.slips import write_fixtures


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path`` with the fixture files written (tests.cli.slips) and XDG_CACHE_HOME inside it."""
    write_fixtures(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path
