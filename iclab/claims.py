"""Claims: a paper's statement, the value this run measured, what was expected, and the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One checked statement; ``holds`` is computed from ``measured``, never typed in."""

    id: str
    paper: str
    statement: str
    measured: Any
    expected: str
    holds: bool

    def to_dict(self) -> dict:
        return asdict(self)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def within(id: str, paper: str, statement: str, measured: float, target: float, rel_tol: float) -> Claim:
    """Holds when |measured − target| ≤ rel_tol·|target|."""
    ok = abs(measured - target) <= rel_tol * abs(target)
    return Claim(id, paper, statement, measured, f"{_fmt(target)} ± {rel_tol:.0%}", bool(ok))


def at_least(id: str, paper: str, statement: str, measured: float, bound: float) -> Claim:
    """Holds when measured ≥ bound."""
    return Claim(id, paper, statement, measured, f"≥ {_fmt(bound)}", bool(measured >= bound))


def at_most(id: str, paper: str, statement: str, measured: float, bound: float) -> Claim:
    """Holds when measured ≤ bound."""
    return Claim(id, paper, statement, measured, f"≤ {_fmt(bound)}", bool(measured <= bound))


def holds_if(id: str, paper: str, statement: str, measured: Any, expected: str, ok: bool) -> Claim:
    """A claim whose verdict is a condition computed by the caller (e.g. an ordering)."""
    return Claim(id, paper, statement, measured, expected, bool(ok))
