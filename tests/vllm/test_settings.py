"""Scheduler settings: defaults, the precedence of file / inline / SLO table / environment, and
errors that name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omniplane.spec.errors import SpecError
from omniplane.vllm.settings import DEFAULT_CLASSES, env_key, load_settings, load_slo_table

TABLE = {
    "kind": "omniplane-slo-table",
    "source": "measured: test fixture",
    "classes": {
        "chat": {"priority": 0, "path": "short", "slo_s": 0.5},
        "speech": {"priority": 10, "path": "long", "slo_s": 3.0},
    },
}


def test_defaults_are_the_papers_priorities_without_deadlines() -> None:
    s = load_settings()
    assert s.policy == "fcfs" and s.role == "shared" and s.slot == 0
    assert {n: c.priority for n, c in s.classes.items()} == {"text": 0, "audio": 10, "image": 20}
    assert all(c.slo_s is None for c in s.classes.values()) and s.classes == DEFAULT_CLASSES
    assert "2608.01785" in s.slo_source


def test_precedence_file_inline_table_env(tmp_path: Path) -> None:
    settings = tmp_path / "s.yaml"
    settings.write_text("policy: fcfs\ntotal_sms: 100\ncontrol: from-file\n")
    table = tmp_path / "slo.json"
    table.write_text(json.dumps({**TABLE, "classes": {**TABLE["classes"]}}))
    env = {
        "OMNIPLANE_SETTINGS": str(settings),
        "OMNIPLANE_SLO_TABLE": str(table),
        "OMNIPLANE_SLO_SPEECH": "4.5",
        "OMNIPLANE_CONTROL": "from-env",
    }
    s = load_settings(
        {
            "omniplane": {
                "total_sms": 132,
                "default_class": "chat",
                "output_classes": {"text": "chat", "audio": "speech"},
            }
        },
        env,
    )
    assert s.total_sms == 132  # inline over file
    assert s.control == "from-env"  # environment over both
    assert s.classes["chat"].slo_s == 0.5 and s.classes["speech"].slo_s == 4.5
    assert "measured: test fixture" in s.slo_source and "OMNIPLANE_SLO_SPEECH" in s.slo_source
    assert env_key("a2t-v2") == "OMNIPLANE_SLO_A2T_V2"


def test_inline_slo_table_and_errors_name_the_field(tmp_path: Path) -> None:
    s = load_settings({"omniplane": {"slo_table": TABLE, "default_class": "chat", "output_classes": {}}})
    assert set(s.classes) == {"chat", "speech"}
    with pytest.raises(SpecError, match="default_class 'text' is not a class"):
        load_settings({"omniplane": {"slo_table": TABLE}})
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: omniplane-slo-table\nsource: 'measured: x'\nclasses:\n  t: {priority: 0, path: sideways}\n"
    )
    with pytest.raises(SpecError, match=r"bad.yaml.*classes.t.path"):
        load_slo_table(bad)
    with pytest.raises(SpecError, match=r"OMNIPLANE_SLO_TEXT.*expected seconds"):
        load_settings({}, {"OMNIPLANE_SLO_TEXT": "fast"})
    with pytest.raises(SpecError, match=r"missing\.yaml.*no such file"):
        load_settings({}, {"OMNIPLANE_SLO_TABLE": str(tmp_path / "missing.yaml")})


def test_consistency_checks() -> None:
    dup = {"a": {"priority": 0, "path": "short"}, "b": {"priority": 0, "path": "long"}}
    with pytest.raises(SpecError, match="share priority 0"):
        load_settings({"omniplane": {"classes": dup, "default_class": "a"}})
    with pytest.raises(SpecError, match="slot 0 is the shared stage"):
        load_settings({"omniplane": {"role": "downstream"}})
    with pytest.raises(SpecError, match="output_classes maps to unknown"):
        load_settings({"omniplane": {"output_classes": {"video": "movie"}}})
    assert load_settings({"omniplane": {"role": "downstream", "slot": 2}}).slot == 2
