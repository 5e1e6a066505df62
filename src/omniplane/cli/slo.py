"""The ``--slo`` option every command shares: one syntax (:func:`omniplane.spec.parse_slo`),
repeatable, items joined by commas. The older spellings (``plan --slo-policy NAME
--slo-percentile Q --slo-multiplier M``; ``loadgen`` / ``rehearse --slo-multiplier M
--slo-percentile Q``) are still accepted, hidden from the help, and read as the equivalent
policy item with a note on stderr."""

from __future__ import annotations

from typing import Annotated

import typer

from omniplane.cli.output import err_console, fail
from omniplane.spec import IsolatedPercentileSLO, SLOChoice, SLOPolicy, SoloMultiplierSLO, parse_slo
from omniplane.spec.slo import describe

SLO_HELP = ("Latency targets: a policy ('isolated p25': Cornfigurator's isolated-best p25; "
            "'5x solo p95': HorizonServe's), 'plan' (the plan file's targets), 'workload' (the "
            "workload's policy) and/or TYPE=DURATION items (ti2t=800ms,ti2a=3s); repeatable.")
SloOpt = Annotated[list[str] | None, typer.Option("--slo", metavar="SLO", help=SLO_HELP)]


def slo_choice(values: list[str] | None, types: list[str], legacy: SLOPolicy | None = None,
               legacy_flags: str = "") -> SLOChoice | None:
    """The parsed ``--slo`` values (None: none given), with a legacy option's policy as the base;
    a bad value exits with a message naming the option, the item and what was expected."""
    try:
        choice = parse_slo(values or [], types)
    except ValueError as exc:
        fail(str(exc))
    if legacy is not None:
        if choice.base is not None:
            fail(f"--slo names a policy and {legacy_flags} gives another; give one")
        err_console.print(f"note: {legacy_flags} is deprecated; use --slo '{describe(legacy)}'",
                          highlight=False)
        choice = SLOChoice(base=legacy, targets_ms=choice.targets_ms)
    if choice.base is None and not choice.targets_ms:
        return None
    return choice


def legacy_plan_policy(base: SLOPolicy, name: str | None, percentile: float | None,
                       multiplier: float | None) -> SLOPolicy | None:
    """``plan --slo-policy NAME --slo-percentile Q --slo-multiplier M`` as a policy."""
    if name is None and percentile is None and multiplier is None:
        return None
    name = name or base.policy
    kinds: dict[str, type[IsolatedPercentileSLO] | type[SoloMultiplierSLO]] = {
        "isolated_percentile": IsolatedPercentileSLO, "solo_multiplier": SoloMultiplierSLO}
    if name in kinds:
        d = kinds[name]()
        try:
            return kinds[name](percentile=percentile or d.percentile, multiplier=multiplier or d.multiplier)
        except ValueError as exc:
            fail(f"--slo-percentile / --slo-multiplier: {exc}")
    if name == "explicit":
        if base.policy != "explicit":
            fail("--slo-policy explicit needs the workload's explicit targets_ms, "
                 "or give --slo TYPE=DURATION")
        return base
    fail(f"--slo-policy must be isolated_percentile, solo_multiplier or explicit (got {name!r})")


def legacy_solo_policy(multiplier: float | None, percentile: float | None) -> SLOPolicy | None:
    """``--slo-multiplier M --slo-percentile Q`` (loadgen, rehearse) as a policy."""
    if multiplier is None and percentile is None:
        return None
    try:
        return SoloMultiplierSLO(multiplier=multiplier if multiplier is not None else 1.0,
                                 percentile=percentile if percentile is not None else 95.0)
    except ValueError as exc:
        fail(f"--slo-multiplier / --slo-percentile: {exc}")
