"""How iclab writes a duration and a set of seeds for people (reports, the command line): a module with no
heavy import, so ``iclab list`` can use it."""

from __future__ import annotations

import math
from collections.abc import Iterable


def duration(seconds: float | None) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``; ``?`` when unknown."""
    if seconds is None or math.isnan(seconds):
        return "?"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def spans(values: Iterable[int]) -> list[tuple[int, int]]:
    """The distinct ``values`` as runs of consecutive integers, ``(first, last)`` each, in order:
    ``[0, 1, 2, 5]`` → ``[(0, 2), (5, 5)]``."""
    found: list[list[int]] = []
    for value in sorted(set(values)):
        if found and value == found[-1][1] + 1:
            found[-1][1] = value
        else:
            found.append([value, value])
    return [(first, last) for first, last in found]
