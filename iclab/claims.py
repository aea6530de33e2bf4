"""Claims: a paper's statement, the value this run measured, what was expected, and the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One checked statement; ``holds`` is computed from ``measured``, never typed in.

    ``figure`` optionally names the run's figure that shows the evidence (``figures/<figure>.png``);
    the reports link the claim to it.
    """

    id: str
    paper: str
    statement: str
    measured: Any
    expected: str
    holds: bool
    figure: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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
