"""Ladders: a claim's number followed along one config value, from a scale's recipe toward the paper's.

A claim that does not reproduce at a small recipe raises the question whether the recipe is the cause. A ladder
moves one config value at a time toward the paper's (epochs 150 → 300 → 600 → 1000, steps, width), runs each rung
on several seeds (``iclab sweep EXP --grid KEY=... --seeds 3 --claim ID``) and reads the claim's number at every
rung. This module holds the two pure pieces: the number a claim's verdict rests on (:func:`claim_number`) and the
rule that says whether it moves toward the paper's number as the value grows (:func:`ladder_trend`), fixed before
any ladder runs.
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
    stderr = math.sqrt(sum((s - mean) ** 2 for s in slopes) / (len(slopes) - 1) / len(slopes))
    trend = Trend(mean, stderr, len(slopes), toward, "")
    moving = abs(trend.z) > z
    if not moving:
        verdict = f"not moving as {key} grows"
    elif toward:
        verdict = f"moving {'toward' if trend.z > 0 else 'away from'} {goal} as {key} grows"
    else:
        verdict = f"{'rising' if mean > 0 else 'falling'} as {key} grows"
    return Trend(mean, stderr, len(slopes), toward, verdict)


def _slope(values: list[float | None]) -> float | None:
    """The least-squares slope of ``values`` against their rung index, over the rungs measured; None below two."""
    points = [(rung, value) for rung, value in enumerate(values) if value is not None and math.isfinite(value)]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
