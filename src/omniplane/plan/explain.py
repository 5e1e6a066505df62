"""What each phase of a search dropped, and by which rule (``omniplane plan --explain``).

Every rule has a kind:

``exact``      the dropped plans provably cannot be selected: their goodput bound is below a
               plan already simulated, they do not fit the budget, or they are redundant
               (Cornfigurator section 4.3: capacity a node cannot use)
``estimate``   Algorithm 2's pruning on the flow + Monte Carlo estimate (Pareto dominance with
               the tolerance ``mc_tolerance``): the paper's rule, not a proof
``heuristic``  a restriction of the space beyond the paper's rules (routing splits tied
               across types when the per-type grid is too large)
``budget``     a work budget stopped a phase early: ``--mc-budget`` (on by default), the user's
               ``--time-budget`` or ``--max-simulated``

``cuts`` are the ``heuristic`` and ``budget`` entries that dropped something: the output says
so, and it is empty when only exact rules and the paper's estimate rule acted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("exact", "estimate", "heuristic", "budget")
PHASES = ("enumerate", "flow", "monte_carlo", "simulate")


@dataclass
class Drop:
    phase: str
    rule: str
    kind: str
    unit: str  # what is counted: "logical plans", "rows" (config x routing vectors), "physical plans"
    count: float = 0.0
    example: str = ""  # the best item the rule dropped, and why
    best: float = float("-inf")  # the value that picks the example (e.g. its bound)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "rule": self.rule, "kind": self.kind, "unit": self.unit,
                               "count": self.count}
        if self.example:
            out["example"] = self.example
        return out


@dataclass
class Ledger:
    drops: dict[tuple[str, str], Drop] = field(default_factory=dict)

    def drop(self, phase: str, rule: str, kind: str, unit: str, count: float, *, value: float | None = None,
             example: str | None = None) -> None:
        """Count ``count`` items dropped by ``rule``; ``example`` replaces the kept one when
        ``value`` is higher (the most promising item the rule dropped)."""
        if kind not in KINDS or phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r} or kind {kind!r}")
        d = self.drops.setdefault((phase, rule), Drop(phase, rule, kind, unit))
        d.count += count
        if example is not None and value is not None and value > d.best:
            d.best, d.example = value, example

    def cuts(self) -> list[dict[str, Any]]:
        return [d.to_json() for d in self.drops.values() if d.kind in ("heuristic", "budget") and d.count > 0]

    def to_json(self) -> list[dict[str, Any]]:
        return [d.to_json() for d in self._ordered() if d.count > 0]

    def _ordered(self) -> list[Drop]:
        return sorted(self.drops.values(), key=lambda d: (PHASES.index(d.phase), KINDS.index(d.kind), d.rule))

    def render(self) -> str:
        lines = []
        for phase in PHASES:
            rows = [d for d in self._ordered() if d.phase == phase and d.count > 0]
            if not rows:
                continue
            lines.append(f"{phase}:")
            for d in rows:
                n = f"{d.count:.3g}" if d.count >= 1e6 else f"{int(d.count):,}"
                lines.append(f"  [{d.kind}] {d.rule}: {n} {d.unit}")
                if d.example:
                    lines.append(f"      most promising dropped: {d.example}")
        return "\n".join(lines) if lines else "nothing was dropped"
