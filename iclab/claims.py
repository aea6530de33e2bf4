"""Claims: a paper's statement, the value this run measured, what was expected, and the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One checked statement; ``holds`` is computed from ``measured``, never typed in.

    ``figure`` optionally names the run's figure that shows the evidence (``figures/<figure>.png``);
    the reports link the claim to it. A claim whose required accuracy is out of this scale's reach
    keeps its measured value but is judged at another scale: ``holds`` is None, ``judged_at`` names
    that scale (e.g. ``"paper"``) and ``reason`` says why (see :func:`judged_at`).
    """

    id: str
    paper: str
    statement: str
    measured: Any
    expected: str
    holds: bool | None
    figure: str | None = None
    judged_at: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict:
        """The ``claims.json`` entry: ``judged_at`` and ``reason`` appear only on a claim judged elsewhere."""
        entry = asdict(self)
        if self.judged_at is None:
            del entry["judged_at"], entry["reason"]
        return entry


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def within(id: str, paper: str, statement: str, measured: float, target: float, rel_tol: float,
           figure: str | None = None) -> Claim:
    """Holds when |measured − target| ≤ rel_tol·|target|."""
    ok = abs(measured - target) <= rel_tol * abs(target)
    return Claim(id, paper, statement, measured, f"{_fmt(target)} ± {rel_tol:.0%}", bool(ok), figure)


def at_least(id: str, paper: str, statement: str, measured: float, bound: float, figure: str | None = None) -> Claim:
    """Holds when measured ≥ bound."""
    return Claim(id, paper, statement, measured, f"≥ {_fmt(bound)}", bool(measured >= bound), figure)


def at_most(id: str, paper: str, statement: str, measured: float, bound: float, figure: str | None = None) -> Claim:
    """Holds when measured ≤ bound."""
    return Claim(id, paper, statement, measured, f"≤ {_fmt(bound)}", bool(measured <= bound), figure)


def holds_if(id: str, paper: str, statement: str, measured: Any, expected: str, ok: bool,
             figure: str | None = None) -> Claim:
    """A claim whose verdict is a condition computed by the caller (e.g. an ordering)."""
    return Claim(id, paper, statement, measured, expected, bool(ok), figure)


def judged_at(claim: Claim, scale: str, reason: str) -> Claim:
    """``claim`` measured here but judged at ``scale`` only: its verdict becomes None (neither a
    pass nor a failure), its measured value and expectation stay, and ``reason`` says why this
    scale cannot judge it (the measurement behind that belongs in the experiment's docs)."""
    return replace(claim, holds=None, judged_at=scale, reason=reason)
