"""Claims: a paper's statement, the value this run measured, what was expected, and the verdict."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

# The rule over seeds (README): a claim holds when it holds on at least 4 of 5 seeds, i.e. on at least
# this share of the runs that judged it; with one seed, it holds iff it holds on that seed.
SEED_SHARE = Fraction(4, 5)
SEED_RULE = (
    "a claim holds when it holds on at least 4 of 5 seeds (80% of the runs that judged it; with one "
    "seed, when it holds on that seed)"
)


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


def within(
    id: str, paper: str, statement: str, measured: float, target: float, rel_tol: float, figure: str | None = None
) -> Claim:
    """Holds when |measured − target| ≤ rel_tol·|target|."""
    ok = abs(measured - target) <= rel_tol * abs(target)
    return Claim(id, paper, statement, measured, f"{_fmt(target)} ± {rel_tol:.0%}", bool(ok), figure)


def at_least(id: str, paper: str, statement: str, measured: float, bound: float, figure: str | None = None) -> Claim:
    """Holds when measured ≥ bound."""
    return Claim(id, paper, statement, measured, f"≥ {_fmt(bound)}", bool(measured >= bound), figure)


def at_most(id: str, paper: str, statement: str, measured: float, bound: float, figure: str | None = None) -> Claim:
    """Holds when measured ≤ bound."""
    return Claim(id, paper, statement, measured, f"≤ {_fmt(bound)}", bool(measured <= bound), figure)


def holds_if(
    id: str, paper: str, statement: str, measured: Any, expected: str, ok: bool, figure: str | None = None
) -> Claim:
    """A claim whose verdict is a condition computed by the caller (e.g. an ordering)."""
    return Claim(id, paper, statement, measured, expected, bool(ok), figure)


def judged_at(claim: Claim, scale: str, reason: str) -> Claim:
    """``claim`` measured here but judged at ``scale`` only: its verdict becomes None (neither a
    pass nor a failure), its measured value and expectation stay, and ``reason`` says why this
    scale cannot judge it (the measurement behind that belongs in the experiment's docs)."""
    return replace(claim, holds=None, judged_at=scale, reason=reason)


def judged_at_paper_if(claim: Claim, listed: Iterable[str], reason: str) -> Claim:
    """``claim``, judged at the paper's scale (:func:`judged_at`) when its id is ``listed``: an
    experiment's ``judged_at_paper`` config key names the claims whose required accuracy its scale
    cannot reach, and ``reason`` says by how much, in the run's own numbers."""
    return judged_at(claim, "paper", reason) if claim.id in listed else claim


def holds_over_seeds(held: int, judged: int) -> bool | None:
    """The verdict of a claim over seeds by :data:`SEED_RULE`: it held on ``held`` of the ``judged``
    runs that judged it at their scale; None when none did (every run judged it at another scale)."""
    if judged == 0:
        return None
    return held >= SEED_SHARE * judged


@dataclass(frozen=True)
class Tally:
    """How many of a run's claims hold, of those judged at its scale, and how many are judged elsewhere."""

    held: int
    judged: int
    elsewhere: int

    @property
    def all_hold(self) -> bool:
        return self.held == self.judged

    def __str__(self) -> str:
        more = f" ({self.elsewhere} more measured, judged at another scale)" if self.elsewhere else ""
        return f"{self.held} of {self.judged} claims hold{more}"


def tally(claims: Iterable[dict]) -> Tally:
    """The :class:`Tally` of ``claims.json`` entries (a claim with ``holds`` None counts apart)."""
    verdicts = [c["holds"] for c in claims]
    judged = [v for v in verdicts if v is not None]
    return Tally(sum(map(bool, judged)), len(judged), len(verdicts) - len(judged))


def verdict_text(claim: dict) -> str:
    """``holds``, ``FAILS`` or, for a claim judged elsewhere, ``measured, judged at <scale> scale``."""
    if claim["holds"] is None:
        return f"measured, judged at {claim.get('judged_at') or 'another'} scale"
    return "holds" if claim["holds"] else "FAILS"


def measured_text(value: Any) -> str:
    """A claim's measured value as labelled numbers, never JSON: floats to 4 significant digits,
    ``label: value`` for a mapping (entries split by ``;``) and for a list of (label, value) pairs,
    lists by ``,``, nested groups in parentheses. ``{"5": [4.6246, 5.1874], "20": [2.6488, 4.5585]}``
    reads ``5: 4.625, 5.187; 20: 2.649, 4.559``."""
    return _text(value, nested=False)


def _text(value: Any, nested: bool) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if value is None or (isinstance(value, (list, tuple, dict)) and not value):
        return "none"
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str) for v in value
    ):
        value = dict(value)  # [(label, value), ...] reads as a mapping
    if isinstance(value, dict):
        text = "; ".join(f"{k}: {_text(v, not isinstance(v, (list, tuple)))}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        text = ", ".join(_text(v, True) for v in value)
    else:
        return str(value)
    return f"({text})" if nested else text
