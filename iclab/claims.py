"""Claims: a paper's statement, the value this run measured, what was expected, and the verdict."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from statistics import NormalDist
from typing import Any

# The rule over seeds (docs/getting-started.md): a claim holds when it holds on at least 4 of 5 seeds, i.e. on at least
# this share of the seeds that judged it; with one seed, it holds iff it holds on that seed.
SEED_SHARE = Fraction(4, 5)
SEED_RULE = (
    "a claim holds when it holds on at least 4 of 5 seeds (80% of the seeds that judged it; with one "
    "seed, when it holds on that seed)"
)


KINDS = ("paper", "diagnostic")
"""A claim is a statement its paper makes (``paper``) or iclab's own check (``diagnostic``: an optimiser
converged, the theory is consistent, a sanity bound)."""
SUBJECTS = ("trained", "theory")
"""What a claim judges: a trained model's behaviour, or a closed form or simulation of the theory."""

SMOKE_SCALE = "smoke"
"""The scale every experiment has for checking the pipeline in seconds (training, evaluation, claims,
report): its models are too small and short to learn, so its verdicts mean nothing and no scoreboard counts
it."""
SMOKE_NOTE = "smoke scale: the pipeline ran, the verdicts mean nothing"

EVALUATION_SEEDS = (100, 101, 102, 103, 104)
"""The seeds verdicts over seeds are taken on: the same for every experiment, outside every tuning set
(recipes are chosen on seeds below 100). ``iclab reproduce`` runs them unless told otherwise; the
scoreboard and the seed table count only them."""


@dataclass(frozen=True)
class About:
    """What a claim is: its ``kind`` and ``subject`` (see :data:`KINDS`, :data:`SUBJECTS`); for a paper
    claim its ``source`` in the paper (section, figure or table) and, where the paper gives one, the
    paper's own number (``paper_value``), shown beside the measured value."""

    kind: str
    subject: str
    source: str | None = None
    paper_value: Any = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"a claim's kind is one of {KINDS}, got {self.kind!r}")
        if self.subject not in SUBJECTS:
            raise ValueError(f"a claim's subject is one of {SUBJECTS}, got {self.subject!r}")
        if self.kind == "paper" and not self.source:
            raise ValueError("a paper claim names its source in the paper (section, figure or table)")


def paper(source: str, value: Any = None, subject: str = "trained") -> About:
    """A statement the paper makes, at ``source`` (e.g. ``"§4, Fig. 2"``), with the paper's number
    ``value`` where it gives one; about a trained model unless ``subject="theory"``."""
    return About("paper", subject, source, value)


def diagnostic(subject: str = "theory") -> About:
    """iclab's own check (an optimiser converged, the theory is consistent, a sanity bound)."""
    return About("diagnostic", subject)


@dataclass(frozen=True)
class Claim:
    """One checked statement; ``holds`` is computed from ``measured``, never typed in.

    ``kind``, ``subject``, ``source`` and ``paper_value`` say what it is (:class:`About`).
    ``figure`` optionally names the run's figure that shows the evidence (``figures/<figure>.png``);
    the reports link the claim to it. A claim whose required accuracy this run's models do not reach
    keeps its measured value but is judged at another scale: ``holds`` is None, ``judged_at`` names
    that scale, ``needed`` and ``reached`` are the run's two numbers and ``reason`` says what they
    measure (see :func:`judged_at`). A claim its config leaves nothing to measure (no prefix below d when
    d = 1) is not judged either: ``holds`` None, no ``judged_at``, and ``reason`` says why (:func:`not_measured`).
    """

    id: str
    paper: str
    statement: str
    measured: Any
    expected: str
    holds: bool | None
    kind: str
    subject: str
    source: str | None = None
    paper_value: Any = None
    figure: str | None = None
    judged_at: str | None = None
    reason: str | None = None
    needed: float | None = None
    reached: float | None = None
    clauses: dict[str, bool] | None = None
    statistic: float | None = None
    seed_test_z: float | None = None

    def __post_init__(self):
        About(self.kind, self.subject, self.source, self.paper_value)  # validates

    def to_dict(self) -> dict:
        """The ``claims.json`` entry: ``judged_at``, ``needed`` and ``reached`` appear only on a claim judged
        elsewhere, ``reason`` on it and on a claim not measured, ``clauses`` only on a claim of several
        (:func:`all_of`), ``statistic`` and ``seed_test_z`` only on a claim judged over seeds
        (:func:`over_seeds_test`)."""
        entry = asdict(self)
        if self.judged_at is None:
            for key in ("judged_at", "needed", "reached"):
                del entry[key]
        if self.reason is None:
            del entry["reason"]
        for key in ("clauses", "statistic", "seed_test_z"):
            if entry[key] is None:
                del entry[key]
        return entry


def _fmt(x: float) -> str:
    return f"{x:.4g}"


NOTHING_MEASURED = "nothing was measured: this config leaves the claim no case to check"
"""The reason of a claim whose measured value is empty (:func:`not_measured`), where its experiment gives none."""


def _claim(id, paper, statement, measured, expected, ok, about: About, figure) -> Claim:
    claim = Claim(
        id,
        paper,
        statement,
        measured,
        expected,
        bool(ok),
        about.kind,
        about.subject,
        about.source,
        about.paper_value,
        figure,
    )
    empty = measured is None or (isinstance(measured, (dict, list, tuple, str)) and not measured)
    return not_measured(claim, NOTHING_MEASURED) if empty else claim


def not_measured(claim: Claim, reason: str) -> Claim:
    """``claim`` left unjudged because its config gives it nothing to measure (an empty range, d = 1 for a
    claim about k < d): ``holds`` None, never a pass, with ``reason`` saying why."""
    return replace(claim, holds=None, reason=reason)


def within(
    id: str,
    paper: str,
    statement: str,
    measured: float,
    target: float,
    rel_tol: float,
    *,
    about: About,
    figure: str | None = None,
) -> Claim:
    """Holds when |measured − target| ≤ rel_tol·|target|."""
    ok = abs(measured - target) <= rel_tol * abs(target)
    return _claim(id, paper, statement, measured, f"{_fmt(target)} ± {rel_tol:.0%}", ok, about, figure)


def at_least(
    id: str, paper: str, statement: str, measured: float, bound: float, *, about: About, figure: str | None = None
) -> Claim:
    """Holds when measured ≥ bound."""
    return _claim(id, paper, statement, measured, f"≥ {_fmt(bound)}", measured >= bound, about, figure)


def at_most(
    id: str, paper: str, statement: str, measured: float, bound: float, *, about: About, figure: str | None = None
) -> Claim:
    """Holds when measured ≤ bound."""
    return _claim(id, paper, statement, measured, f"≤ {_fmt(bound)}", measured <= bound, about, figure)


def holds_if(
    id: str,
    paper: str,
    statement: str,
    measured: Any,
    expected: str,
    ok: bool,
    *,
    about: About,
    figure: str | None = None,
) -> Claim:
    """A claim whose verdict is a condition computed by the caller (e.g. an ordering)."""
    return _claim(id, paper, statement, measured, expected, ok, about, figure)


def all_of(
    id: str,
    paper: str,
    statement: str,
    measured: Any,
    expected: str,
    clauses: Mapping[str, bool],
    *,
    about: About,
    figure: str | None = None,
) -> Claim:
    """A claim of several named conditions (``clauses``, in order; the first carries the paper's statement,
    the others what the statement needs to mean anything, e.g. that a model learnt the task): it holds when
    every clause holds. ``claims.json`` records each clause's verdict, so a reader (and the claim contract)
    sees which one failed."""
    if not clauses:
        raise ValueError(f"claim {id!r}: all_of needs at least one clause")
    named = {str(name): bool(ok) for name, ok in clauses.items()}
    return replace(_claim(id, paper, statement, measured, expected, all(named.values()), about, figure), clauses=named)


def failed_clauses(entry: Mapping[str, Any]) -> list[str]:
    """The clauses a ``claims.json`` entry failed, in order (``["statement"]`` for a failed claim of one
    condition; empty when it holds or is not judged)."""
    if entry.get("holds") is not False:
        return []
    clauses = entry.get("clauses")
    return [name for name, ok in clauses.items() if not ok] if clauses else ["statement"]


def over_seeds_test(
    id: str,
    paper: str,
    statement: str,
    measured: Any,
    statistic: float | tuple[float, float],
    z: float,
    *,
    about: About,
    figure: str | None = None,
) -> Claim:
    """A claim judged over seeds together rather than on each (:func:`seed_test`): every seed measures
    ``statistic``, an effect (positive when the statement holds) or a pair (a, b) whose difference a − b is the
    effect, and the claim holds when the mean effect over seeds exceeds ``z`` standard errors, on at least two
    seeds. A seed's own entry is measured, not judged (``holds`` None)."""
    pair = isinstance(statistic, (tuple, list))
    expected = (
        f"mean(a) − mean(b) over seeds > {z:g} standard errors of the difference (at least 2 seeds)"
        if pair
        else f"mean over seeds > {z:g} standard errors of it (at least 2 seeds)"
    )
    value = [float(v) for v in statistic] if pair else float(statistic)
    claim = _claim(id, paper, statement, measured, expected, False, about, figure)
    return replace(claim, holds=None, statistic=value, seed_test_z=float(z))


def seed_test(statistics: Iterable[float | list[float]], z: float) -> tuple[bool | None, dict[str, float]]:
    """The verdict over seeds of a claim judged over seeds (:func:`over_seeds_test`) from each seed's statistic,
    and what it measured (``mean``, the mean effect; ``stderr``; ``t`` = mean / stderr; ``seeds``); None with
    fewer than two seeds. Scalars: the effect is the statistic, its standard error the seeds' sample standard
    deviation over √n. Pairs (a, b): the effect is mean(a) − mean(b), its standard error √(s_a²/n + s_b²/n),
    the two samples' spreads taken as independent. A spread of 0 holds only when the mean is positive; a statistic
    that is not finite (a diverged seed) fails the test."""
    values = [v for v in statistics]
    n = len(values)
    if n < 2:
        return None, {"seeds": n}
    if not all(math.isfinite(float(x)) for v in values for x in (v if isinstance(v, (list, tuple)) else [v])):
        return False, {"seeds": n, "not finite": True}

    def mean_and_variance(xs: list[float]) -> tuple[float, float]:
        mean = sum(xs) / n
        return mean, sum((x - mean) ** 2 for x in xs) / (n - 1)

    if isinstance(values[0], (list, tuple)):
        (mean_a, var_a), (mean_b, var_b) = (mean_and_variance([float(v[i]) for v in values]) for i in (0, 1))
        mean, stderr = mean_a - mean_b, math.sqrt((var_a + var_b) / n)
    else:
        mean, var = mean_and_variance([float(v) for v in values])
        stderr = math.sqrt(var / n)
    t = mean / stderr if stderr > 0 else math.copysign(math.inf, mean) if mean else 0.0
    return t > z, {"mean": mean, "stderr": stderr, "t": t, "seeds": n}


def judged_at(claim: Claim, scale: str, reason: str, *, needed: float, reached: float) -> Claim:
    """``claim`` measured here but judged at ``scale`` only: its verdict becomes None (neither a pass nor a
    failure), its measured value and expectation stay. A deferral is measured: ``needed`` is what the
    claim needs of the run (an accuracy, a sample size, a resolution) and ``reached`` what this run
    gives, both finite numbers computed by the run; ``reason`` says what they measure. A deferral
    without them is refused (``ValueError``)."""
    numbers = (needed, reached)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
        raise ValueError(
            f"claim {claim.id!r}: a deferral to the {scale} scale needs the run's numbers (what the claim "
            f"needs and what this run reaches), got needed={needed!r}, reached={reached!r}"
        )
    text = f"{reason}: the claim needs {_fmt(needed)}, this run reaches {_fmt(reached)}"
    return replace(claim, holds=None, judged_at=scale, reason=text, needed=float(needed), reached=float(reached))


def judged_at_if_unresolved(
    claim: Claim,
    listed: Iterable[str],
    scale: str,
    reason: str,
    *,
    needed: float,
    reached: float,
    higher_is_better: bool = False,
) -> Claim:
    """``claim`` judged at ``scale`` (:func:`judged_at`) when its id is ``listed`` (an experiment's config
    names, per scale, the claims it may defer) and this run does not resolve it: ``reached`` misses
    ``needed`` (above it, or below it when ``higher_is_better``). A run that does reach the accuracy
    judges the claim itself."""
    resolved = reached >= needed if higher_is_better else reached <= needed
    if claim.id not in listed or resolved:
        return claim
    return judged_at(claim, scale, reason, needed=needed, reached=reached)


def holds_over_seeds(held: int, judged: int) -> bool | None:
    """The verdict of a claim over seeds by :data:`SEED_RULE`: it held on ``held`` of the ``judged``
    seeds that judged it at their scale; None when none did (every seed judged it at another scale)."""
    if judged == 0:
        return None
    return held >= SEED_SHARE * judged


_DEFERRAL = ("judged_at", "reason", "needed", "reached")


def over_seeds(by_seed: Mapping[int, list[Claim]]) -> list[dict]:
    """A run's ``claims.json`` entries from each seed's claims (``{seed: claims}``, seeds in order).

    One seed: each claim's own entry (:meth:`Claim.to_dict`). Several: one entry per claim id, in the
    order the seeds first state them, holding the first seed's statement, ``measured`` as ``{seed:
    value}``, ``holds`` (and each of its ``clauses``) the verdict over the seeds that judged it
    (:func:`holds_over_seeds`; None, with the
    first seed's ``judged_at`` and ``reason``, when none did) and ``by_seed``, each seed's own entry,
    which is what a scoreboard counts (:func:`seed_entries`). A claim judged over seeds
    (:func:`over_seeds_test`) takes its verdict from :func:`seed_test` of the seeds' statistics, recorded as
    ``seed_test``. JSON keys are strings: seeds are written as such."""
    if len(by_seed) == 1:
        return [claim.to_dict() for claim in next(iter(by_seed.values()))]
    grouped: dict[str, dict[str, dict]] = {}
    for seed, claims in by_seed.items():
        for claim in claims:
            grouped.setdefault(claim.id, {})[str(seed)] = claim.to_dict()
    entries = []
    for seeds in grouped.values():
        first = next(iter(seeds.values()))
        judged = [entry["holds"] for entry in seeds.values() if entry["holds"] is not None]
        holds = holds_over_seeds(sum(judged), len(judged))
        kept = _DEFERRAL[:2] if holds is None else ()
        entry = {key: value for key, value in first.items() if key not in _DEFERRAL or key in kept}
        entry.update(measured={seed: e["measured"] for seed, e in seeds.items()}, holds=holds, by_seed=seeds)
        if "clauses" in first:  # each clause's verdict over the seeds, by the same rule
            names = first["clauses"]
            verdicts = {name: [e["clauses"][name] for e in seeds.values() if e["holds"] is not None] for name in names}
            entry["clauses"] = {name: holds_over_seeds(sum(v), len(v)) for name, v in verdicts.items()}
        if "seed_test_z" in first:
            entry["holds"], entry["seed_test"] = seed_test(
                (e["statistic"] for e in seeds.values()), first["seed_test_z"]
            )
            del entry["statistic"]
        entries.append(entry)
    return entries


def seed_entries(entry: dict, seed: int) -> dict[int, dict]:
    """``{seed: entry}`` of one ``claims.json`` entry: each seed's own entry of a run of several seeds
    (:func:`over_seeds`), or the entry itself as that of ``seed``, the run's one seed."""
    by_seed = entry.get("by_seed")
    return {int(s): e for s, e in by_seed.items()} if by_seed else {seed: entry}


def detectable_effect(stderr: float, z: float, power: float = 0.8) -> float:
    """The smallest effect a one-sided test "estimate ≤ z standard errors" rejects with probability
    ``power`` when the estimate's standard error is ``stderr``: (z + z_power)·stderr (z_0.8 ≈ 0.84). A claim
    that holds by failing to reject states it, so that a reader knows what the test could have seen."""
    return (z + NormalDist().inv_cdf(power)) * stderr


def binomial_tail(count: int, samples: int, rate: float) -> float:
    """P(X ≥ ``count``) for X ~ Binomial(``samples``, ``rate``), summed in log space (exact for any size)."""
    if count <= 0:
        return 1.0
    if rate <= 0.0 or count > samples:
        return 0.0
    if rate >= 1.0:
        return 1.0
    log_p, log_q = math.log(rate), math.log1p(-rate)
    terms = (
        math.lgamma(samples + 1) - math.lgamma(k + 1) - math.lgamma(samples - k + 1) + k * log_p + (samples - k) * log_q
        for k in range(count, samples + 1)
    )
    return min(1.0, math.fsum(math.exp(t) for t in terms))


def binomial_critical_count(rate: float, samples: int, level: float = 0.05) -> int:
    """The smallest count k with P(X ≥ k) ≤ ``level`` for X ~ Binomial(``samples``, ``rate``): the one-sided test of
    "the true rate is at most ``rate``" rejects at ``level`` when ``samples`` trials show k events or more."""
    return next(k for k in range(samples + 2) if binomial_tail(k, samples, rate) <= level)


def binomial_detectable_rate(critical: int, samples: int, power: float = 0.8) -> float:
    """The true rate at which ``critical`` or more events of ``samples`` occur with probability ``power``: what the
    test of :func:`binomial_critical_count` rejects with that power (found by bisection; 1.0 when nothing can)."""
    if critical > samples:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if binomial_tail(critical, samples, mid) < power else (low, mid)
    return high


def kind_of(claim: dict) -> str:
    """A ``claims.json`` entry's kind (entries written before claims had one count as paper claims)."""
    return claim.get("kind", "paper")


THEORY_NOTE = (
    "judged without a trained model, on iclab's computation of the paper's mathematics (a closed form, a gradient "
    "flow, a construction, or a Monte Carlo estimate at initialisation); where the paper proves the statement, the "
    "claim checks iclab's derivation, and only a defect of iclab's can fail it"
)
"""How a report marks a paper claim whose subject is ``theory``."""


def is_theory(claim: dict) -> bool:
    """Whether a ``claims.json`` entry is a paper claim about the theory, not about a trained model."""
    return kind_of(claim) == "paper" and claim.get("subject") == "theory"


def verdict_word(holds: bool, kind: str) -> str:
    """A judged claim's verdict in words: ``holds``; for a failed paper claim ``does not reproduce here`` (a
    finding, reported with the paper's number beside the measured one), for a failed diagnostic ``FAILS`` (a
    defect of the run or of iclab)."""
    if holds:
        return "holds"
    return "does not reproduce here" if kind == "paper" else "FAILS"


@dataclass(frozen=True)
class Tally:
    """How many claims of one kind hold, of those judged at their scale, and how many are judged elsewhere
    (of a run, or, on the scoreboard, the verdicts over seeds of a group of claims); of a one-seed run,
    ``over_seeds`` counts the claims judged over seeds together (:func:`over_seeds_test`), measured here."""

    held: int
    judged: int
    elsewhere: int
    kind: str | None = None
    over_seeds: int = 0
    unmeasured: int = 0

    @property
    def all_hold(self) -> bool:
        return self.held == self.judged

    def __str__(self) -> str:
        """``5 of 6 hold, 1 does not reproduce here, 2 judged at another scale`` (a diagnostic: ``1 fails``)."""
        parts = [f"{self.held} of {self.judged} hold"]
        missed = self.judged - self.held
        if missed and self.kind == "paper":
            parts.append(f"{missed} {'does' if missed == 1 else 'do'} not reproduce here")
        elif missed:
            parts.append(f"{missed} fail{'s' * (missed == 1)}")
        if self.elsewhere:
            parts.append(f"{self.elsewhere} judged at another scale")
        if self.over_seeds:
            parts.append(f"{self.over_seeds} judged over seeds")
        if self.unmeasured:
            parts.append(f"{self.unmeasured} not measured")
        return ", ".join(parts)


def tally(claims: Iterable[dict], kind: str | None = None) -> Tally:
    """The :class:`Tally` of ``claims.json`` entries (of one ``kind`` when given; a claim with ``holds``
    None counts apart)."""
    claims = [c for c in claims if kind is None or kind_of(c) == kind]
    pooled = sum(c["holds"] is None and "seed_test_z" in c for c in claims)
    unmeasured = sum(verdict_text(c) == "not measured" for c in claims)
    verdicts = [c["holds"] for c in claims]
    judged = [v for v in verdicts if v is not None]
    elsewhere = len(verdicts) - len(judged) - pooled - unmeasured
    return Tally(sum(map(bool, judged)), len(judged), elsewhere, kind, pooled, unmeasured)


def summary(claims: list[dict]) -> str:
    """A run's claims in one line, paper claims first: ``paper claims: 5 of 6 hold, 1 does not reproduce here;
    diagnostics: 3 of 3 hold``."""
    parts = [f"paper claims: {tally(claims, 'paper')}"]
    diagnostics = tally(claims, "diagnostic")
    if diagnostics.judged or diagnostics.elsewhere or diagnostics.over_seeds or diagnostics.unmeasured:
        parts.append(f"diagnostics: {diagnostics}")
    return "; ".join(parts)


def verdict_text(claim: dict) -> str:
    """A ``claims.json`` entry's verdict in words (:func:`verdict_word`), or ``measured, judged at <scale>
    scale`` for a claim judged elsewhere, ``not measured`` for a claim its config left nothing to measure
    (:func:`not_measured`), ``measured, judged over seeds`` for a seed's entry of a claim judged over seeds together
    (:func:`over_seeds_test`)."""
    if claim["holds"] is None and "seed_test_z" in claim:
        return "measured, judged over seeds"
    if claim["holds"] is None and not claim.get("judged_at") and claim.get("reason"):
        return "not measured"
    if claim["holds"] is None:
        return f"measured, judged at {claim.get('judged_at') or 'another'} scale"
    return verdict_word(claim["holds"], kind_of(claim))


def paper_value_text(claim: dict) -> str:
    """A ``claims.json`` entry's ``paper_value`` as text (:func:`measured_text`), ``—`` where the paper gives
    none."""
    number = claim.get("paper_value")
    return "—" if number is None else measured_text(number)


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
