"""Parity with the authors' own code: one quantity a claim reads, measured by iclab and by the paper's implementation
at the same recipe, and the rule that says whether the two agree.

A parity record (``results/parity/<experiment>/<quantity>.json``, written by the drivers of ``benchmarks/parity/``)
holds the recipe both sides ran, each side's value per seed, the claim(s) the quantity feeds and the claim's test
applied to a value (``test``: an operator and a threshold), so the page can say whether the claim holds in the
authors' code too. This module holds the pure pieces: the record (:class:`ParityRecord`) and the agreement rule
(:func:`agreement`), fixed before the first recorded comparison ran; :mod:`iclab.report.parity` writes the page.
"""

from __future__ import annotations

import json
import math
import operator
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError

AGREEMENT_Z = 2.0
"""The two sides agree when their means differ by at most this many pooled standard errors…"""
AGREEMENT_RELATIVE = 0.10
"""…or by at most this share of the authors' mean (the band a tight pair of spreads cannot reach)."""

TESTS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
"""The operators a record's claim test takes: ``value OP threshold``."""


@dataclass(frozen=True)
class Side:
    """One implementation's measurements: ``values`` per seed (in the record's seed order), the seconds it trained
    and evaluated, and a note on how it was run (their code unmodified, a shim, the loop the paper states)."""

    values: list[float]
    seconds: float | None = None
    note: str = ""

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def stderr(self) -> float:
        """The standard error of the mean over seeds (0 for one seed)."""
        n = len(self.values)
        return statistics.stdev(self.values) / math.sqrt(n) if n > 1 else 0.0


@dataclass(frozen=True)
class ParityRecord:
    """One quantity at one recipe, measured by iclab and by the authors' code on the same seeds.

    Attributes:
        experiment: the iclab experiment.
        quantity: an id, unique within the experiment (the record's file name).
        description: the quantity in words (what is measured, where, in which units).
        claims: the claims whose test reads this quantity.
        control: a claim that holds in iclab at its scale (a positive control), not a non-reproduction.
        recipe: the recipe both sides ran, key by key (iclab's config keys where it has them).
        seeds: the seeds, each side's own generator seeded with each (below 100: never the evaluation seeds).
        iclab, authors: each side's measurements.
        peer: the authors' repository, its commit and the files run.
        test: the claim's test on one value, ``{"op": "<", "threshold": 0.2}``, or None where it reads more.
        paper: the paper's number for the quantity, in words.
        commit: iclab's commit the record was measured at.
        date: when it was measured.
    """

    experiment: str
    quantity: str
    description: str
    claims: list[str]
    recipe: dict[str, Any]
    seeds: list[int]
    iclab: Side
    authors: Side
    peer: dict[str, str]
    control: bool = False
    test: dict[str, Any] | None = None
    paper: str = ""
    commit: str = ""
    date: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        for side in (self.iclab, self.authors):
            if len(side.values) != len(self.seeds):
                raise ConfigError(f"parity {self.quantity}: {len(side.values)} values for {len(self.seeds)} seeds")
        if any(seed >= 100 for seed in self.seeds):
            raise ConfigError(f"parity {self.quantity}: seeds {self.seeds}; parity runs on seeds below 100")
        if self.test is not None and self.test.get("op") not in TESTS:
            raise ConfigError(f"parity {self.quantity}: test op must be one of {', '.join(TESTS)}")

    def holds(self, side: Side) -> bool | None:
        """Whether the claim's test holds on a side's mean (None without a test)."""
        if self.test is None:
            return None
        return bool(TESTS[self.test["op"]](side.mean, self.test["threshold"]))

    def write(self, root: str | Path) -> Path:
        """Write the record to ``root/<experiment>/<quantity>.json``; returns the path."""
        path = Path(root) / self.experiment / f"{self.quantity}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def read(cls, path: str | Path) -> ParityRecord:
        """A record from its JSON file (a damaged or foreign file is a :class:`ConfigError` naming it)."""
        try:
            raw = json.loads(Path(path).read_text())
            sides = {key: Side(**raw.pop(key)) for key in ("iclab", "authors")}
            return cls(**raw, **sides)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ConfigError(f"{path} is not a parity record: {err}") from err


@dataclass(frozen=True)
class Agreement:
    """What the rule says of a record: the difference of means (iclab − authors), its pooled standard error, and
    whether the two agree."""

    difference: float
    stderr: float
    agree: bool

    @property
    def z(self) -> float:
        return abs(self.difference) / self.stderr if self.stderr else math.inf


def agreement(iclab: Side, authors: Side) -> Agreement:
    """The rule: iclab and the authors agree on a quantity when their means over the seeds differ by at most
    :data:`AGREEMENT_Z` pooled standard errors (√(se_iclab² + se_authors²)), or by at most :data:`AGREEMENT_RELATIVE`
    of the authors' mean."""
    difference = iclab.mean - authors.mean
    stderr = math.hypot(iclab.stderr, authors.stderr)
    agree = abs(difference) <= max(AGREEMENT_Z * stderr, AGREEMENT_RELATIVE * abs(authors.mean))
    return Agreement(difference, stderr, agree)


def read_records(root: str | Path) -> list[ParityRecord]:
    """Every parity record under ``root`` (``<experiment>/<quantity>.json``), sorted by experiment and quantity."""
    return sorted(
        (ParityRecord.read(path) for path in Path(root).glob("*/*.json")), key=lambda r: (r.experiment, r.quantity)
    )


def by_claim(records: Sequence[ParityRecord]) -> Mapping[tuple[str, str], list[ParityRecord]]:
    """The records that read each ``(experiment, claim)``."""
    found: dict[tuple[str, str], list[ParityRecord]] = {}
    for record in records:
        for claim in record.claims:
            found.setdefault((record.experiment, claim), []).append(record)
    return found
