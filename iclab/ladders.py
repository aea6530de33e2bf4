"""Ladders: a claim's number followed along one config value, from a scale's recipe toward the paper's.

A claim that does not reproduce at a small recipe raises the question whether the recipe is the cause. A ladder
moves one config value at a time toward the paper's (epochs 150 → 300 → 600 → 1000, steps, width), runs each rung
on several seeds (``iclab sweep EXP --grid KEY=... --seeds 3 --claim ID``) and reads the claim's number at every
rung. This module holds the two pure pieces: the number a claim's verdict rests on (:func:`claim_number`) and the
rule that says whether it moves toward the paper's number as the value grows (:func:`ladder_trend`), fixed before
any ladder runs, and the rule a diagnosis judges a ladder by (:func:`ladder_reach`): "not moving" only where no
trend its seeds allow would reach the paper's number by the paper's own value of the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TREND_Z = 2.0
"""A ladder moves when the mean over seeds of each seed's slope lies more than this many standard errors from 0."""


def _walk(value: Any, path: str | None) -> Any:
    """``value``'s part at the dotted ``path`` (mapping keys as written, list items by index); None if absent."""
    for part in path.split(".") if path else []:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, Sequence) and not isinstance(value, str) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def claim_number(entry: Mapping[str, Any], path: str | None = None) -> float | None:
    """The number a ``claims.json`` entry (one seed's) rests on: its measured value at ``path`` (a dotted path into
    a measured mapping or list, e.g. ``1024`` or ``k = 10.error``); without a path its measured value when that is a
    number, else its ``statistic`` (a claim judged over seeds: the effect its test averages, a − b for a pair
    (a, b)); None when there is no such number."""
    if path:
        return _number(_walk(entry.get("measured"), path))
    found = _number(entry.get("measured"))
    if found is not None:
        return found
    statistic = entry.get("statistic")
    if isinstance(statistic, (list, tuple)) and len(statistic) == 2:
        a, b = (_number(v) for v in statistic)
        return None if a is None or b is None else a - b
    return _number(statistic)


def verdict_number(entry: Mapping[str, Any]) -> float | None:
    """A seed's verdict as a number, for a ladder over a claim with no number to follow: 1 where it holds, 0 where
    it fails, None where it was judged at another scale."""
    holds = entry.get("holds")
    return None if holds is None else float(bool(holds))


def paper_number(entry: Mapping[str, Any], path: str | None = None) -> float | None:
    """The paper's number of a ``claims.json`` entry (its ``paper_value``, at ``path`` when that is a mapping), or
    None where the paper gives none as a number."""
    paper = entry.get("paper_value")
    return _number(_walk(paper, path) if path and isinstance(paper, Mapping) else paper)


@dataclass(frozen=True)
class Trend:
    """What a ladder says of a claim's number: the mean over seeds of each seed's least-squares slope against the
    rung (0, 1, 2, … in the order of the value), its standard error over seeds, ``toward`` (+1 when a rising number
    approaches the target, −1 when a falling one does, 0 without a target) and the verdict in words."""

    slope: float
    stderr: float
    seeds: int
    toward: int
    verdict: str

    @property
    def z(self) -> float:
        """The slope in standard errors (signed toward the target when there is one)."""
        signed = self.slope * (self.toward or 1)
        if self.stderr == 0:
            return math.copysign(math.inf, signed) if signed else 0.0
        return signed / self.stderr


def ladder_trend(
    numbers: Mapping[int, Sequence[float | None]],
    target: float | None,
    key: str,
    z: float = TREND_Z,
    goal: str = "the paper's number",
) -> Trend:
    """The trend of a claim's number along a ladder: ``numbers`` holds, per seed, the number at each rung in the
    order of the value (None where the rung did not measure it), ``target`` the paper's number. Each seed's slope is
    fitted over the rungs it measured; the ladder moves when the mean slope lies more than ``z`` standard errors
    (over seeds) from 0. With a target: *moving toward the paper's number as <key> grows* (or *away*), else *not
    moving*; the direction toward it is read at the first rung (the mean over seeds; a ladder that starts at the
    target, every seed holding, can only move away from it); ``goal`` names the target in the words (``holding``
    for a ladder of verdicts). Without one: *rising* or *falling* as <key> grows, or *not moving*. Fewer than two
    seeds with two rungs each: *too few runs*."""
    slopes = [s for s in (_slope(list(values)) for values in numbers.values()) if s is not None]
    first = [values[0] for values in numbers.values() if values and values[0] is not None]
    mean = sum(slopes) / len(slopes) if slopes else math.nan
    start = sum(first) / len(first) if first else math.nan
    if target is None or not first:
        toward = 0
    elif target != start:
        toward = 1 if target > start else -1
    else:  # already at the target (every seed holding at the first rung): any move is away from it
        toward = -1 if mean > 0 else 1
    if len(slopes) < 2:
        return Trend(math.nan, math.nan, len(slopes), toward, "too few runs to tell (two seeds of two rungs)")
    stderr = _stderr(slopes, mean)
    trend = Trend(mean, stderr, len(slopes), toward, "")
    moving = abs(trend.z) > z
    if not moving:
        verdict = f"not moving as {key} grows"
    elif toward:
        verdict = f"moving {'toward' if trend.z > 0 else 'away from'} {goal} as {key} grows"
    else:
        verdict = f"{'rising' if mean > 0 else 'falling'} as {key} grows"
    return Trend(mean, stderr, len(slopes), toward, verdict)


def ladder_reach(
    numbers: Mapping[int, Sequence[float | None]],
    rungs: Sequence[Any],
    target: float,
    paper: Any,
    key: str,
    z: float = TREND_Z,
    goal: str = "the paper's number",
    toward: int | None = None,
) -> str:
    """The verdict a diagnosis gives a ladder, a rule with power written down before any ladder was judged by it.
    ``numbers`` and ``target`` as :func:`ladder_trend`, ``rungs`` the key's values and ``paper`` the paper's value of
    the key. The rungs sit on a line, in log(value) where every value and the paper's are positive (ladders double
    steps and epochs), else in value; each seed's slope is fitted on it. The target lies above (``toward`` +1) or
    below (−1) the numbers, by default on the side of the first rung's mean. From the last rung's mean over seeds:

    - a mean slope toward ``target`` beyond ``z`` standard errors: *moving toward* it, with the value where that
      slope reaches it; away beyond ``z``: *moving away*;
    - otherwise the band's steepest trend toward it (mean + ``z`` standard errors): *not moving* only where even that
      stays short of ``target`` at the paper's value, else *too few runs to tell*, with the value where it would
      cross; a ladder whose last rung's mean already reaches ``target`` says so.

    A ladder that ran the paper's value of the key reads its number there instead: *reaches* the target, *does not
    reach* it (beyond ``z`` standard errors over seeds), or *too few runs to tell*. Fewer than two seeds with two
    rungs each, or a paper value that is not a number at or beyond the rungs: *too few runs to tell*, and why."""
    line = _line(rungs, paper)
    if line is None:
        return f"too few runs to tell: the paper's {key} ({paper!r}) is not a number at or beyond the ladder's rungs"
    xs, at_paper, value_at = line
    slopes = [s for s in (_slope(list(values), xs) for values in numbers.values()) if s is not None]
    means = [_mean([v[i] for v in numbers.values()]) for i in range(len(rungs))]
    last = max((i for i, m in enumerate(means) if m is not None), default=None)
    if len(slopes) < 2 or last is None:
        return "too few runs to tell (two seeds of two rungs)"
    if toward is None:  # read at the first rung, as ladder_trend does
        first = next(m for m in means if m is not None)
        toward = 1 if target > first else -1
    if at_paper <= xs[last]:  # the ladder ran the paper's value: its number there decides
        return _at_the_paper(numbers, next(i for i, x in enumerate(xs) if x >= at_paper), target, toward, z, goal,
                             f"the paper's {key} = {paper}")  # fmt: skip
    gap = (target - means[last]) * toward
    if gap <= 0:
        return f"reaches {goal} at its last rung ({key} = {rungs[last]})"
    mean = sum(slopes) / len(slopes)
    stderr = _stderr(slopes, mean)
    rate = mean * toward  # per unit of the line, toward the target
    if abs(rate) > z * stderr:
        if rate < 0:
            return f"moving away from {goal} as {key} grows"
        return (
            f"moving toward {goal} as {key} grows; at its mean slope it reaches it at {key} ≈ "
            f"{value_at(xs[last] + gap / rate):.3g} (the paper's: {paper})"
        )
    steepest = rate + z * stderr
    crossing = xs[last] + gap / steepest if steepest > 0 else math.inf
    if crossing <= at_paper:
        return (
            f"too few runs to tell: a trend within its band (mean slope + {z:g} standard errors) reaches {goal} at "
            f"{key} ≈ {value_at(crossing):.3g}, before the paper's {paper}"
        )
    beyond = f"; the steepest would at ≈ {value_at(crossing):.3g}" if math.isfinite(crossing) else ""
    return (
        f"not moving: no trend within its band (mean slope + {z:g} standard errors) reaches {goal} by the paper's "
        f"{key} = {paper}{beyond}"
    )


def _at_the_paper(
    numbers: Mapping[int, Sequence[float | None]], rung: int, target: float, toward: int, z: float, goal: str, at: str
) -> str:
    """The verdict of a ladder that ran the paper's value of its key, at ``rung``, from its seeds' numbers there."""
    kept = [v[rung] for v in numbers.values() if v[rung] is not None and math.isfinite(v[rung])]
    if len(kept) < 2:
        return f"too few runs to tell: fewer than two seeds measured it at {at}"
    mean = sum(kept) / len(kept)
    stderr = _stderr(kept, mean)
    if (target - mean) * toward <= 0:
        return f"reaches {goal} at {at} (mean {mean:.3g} over {len(kept)} seeds)"
    if (target - mean) * toward > z * stderr:
        return f"does not reach {goal} at {at} (mean {mean:.3g}, {z:g} standard errors {z * stderr:.2g})"
    return f"too few runs to tell: at {at} the mean {mean:.3g} lies within {z:g} standard errors of {goal}"


def _line(rungs: Sequence[Any], paper: Any) -> tuple[list[float], float, Any] | None:
    """The rungs' and the paper's places on the ladder's line and the value at a place; None where the paper's value
    is not a number at or beyond the first rung."""
    values = [_number(r) for r in rungs]
    far = _number(paper)
    if far is None or any(v is None for v in values) or not far >= min(values):
        return None
    if min(values) > 0:
        return [math.log(v) for v in values], math.log(far), lambda x: math.exp(min(x, 700.0))
    return values, far, lambda x: x


def _stderr(values: Sequence[float], mean: float) -> float:
    """The standard error of the mean ``mean`` of two or more ``values``."""
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def _slope(values: list[float | None], xs: Sequence[float] | None = None) -> float | None:
    """The least-squares slope of ``values`` against their rung index (or ``xs``, the rungs' places), over the rungs
    measured; None below two."""
    xs = range(len(values)) if xs is None else xs
    points = [(x, value) for x, value in zip(xs, values) if value is not None and math.isfinite(value)]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
