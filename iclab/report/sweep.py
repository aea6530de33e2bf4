"""A sweep's report: the grid, which points failed, claim × point, and one figure per swept key."""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..claims import seed_entries
from ..config import dump
from ..ladders import Trend, claim_number, ladder_reach, ladder_trend, paper_number, verdict_number
from ..runs import SweepFolder, write_atomic
from .html import page


@dataclass(frozen=True)
class Ladder:
    """A sweep that follows a claim along one swept key: ``rungs`` (the key's values in order), ``numbers`` (per
    seed, the claim's number at each rung, None where it was not made), the ``target`` (the paper's number, or the
    sweep's own, ``--claim-target``: then ``own_target``) and the :class:`~iclab.ladders.Trend`; ``verdicts`` when the
    numbers are the seeds' verdicts (1 holds, 0 fails; target 1), for a claim with no number to follow; ``effect``
    when they are the effect of a claim judged over seeds with no number to move toward (it holds for a mean effect
    above 0 by its standard errors, so a rising effect moves toward holding)."""

    claim: str
    key: str
    rungs: list
    numbers: dict[int, list[float | None]]
    target: float | None
    trend: Trend
    verdicts: bool = False
    own_target: bool = False
    effect: bool = False
    untouched: bool = False
    """Every seed measured the claim identically at every rung: the swept key does not reach what the claim reads."""
    measured: dict[int, list[float | None]] | None = None
    """For a ladder of verdicts whose claim measures a number with no paper number to move toward: that number per
    seed and rung, shown beside the verdicts (a lead, never the diagnosis, which the rule fixed before reads from
    the verdicts)."""
    measured_trend: Trend | None = None
    """The direction of ``measured`` by the same rule, without a target: rising, falling or not moving."""

    def reach(self, paper) -> str:
        """The ladder judged by :func:`iclab.ladders.ladder_reach` against ``paper``, the paper's value of its key:
        toward its target; an effect toward 0 from below (its test needs it above 0 by its standard errors, so
        reaching 0 is needed, not enough)."""
        if self.effect:
            return ladder_reach(self.numbers, self.rungs, 0.0, paper, self.key, goal="an effect above 0", toward=1)
        goal = "holding" if self.verdicts else "its target" if self.own_target else "the paper's number"
        return ladder_reach(self.numbers, self.rungs, self.target, paper, self.key, goal=goal)


def followed_claim(spec: dict) -> str | None:
    """The id of the claim a sweep was made to follow (``--claim ID[:PATH]``), or None."""
    return (spec.get("claim") or "").partition(":")[0] or None


def ladder(sweep: SweepFolder, follow: str | None = None) -> Ladder | None:
    """The ladder of a sweep over one key (besides its seeds), read from its point folders: each finished point's
    run, each of its seeds' entries of the claim ``follow`` (``ID[:PATH]``; default the claim the sweep was made
    to follow with ``--claim``), its number at the path (:func:`iclab.ladders.claim_number`), toward the sweep's
    target or the paper's number. A claim judged over seeds with no number to move toward is followed by its effect,
    toward holding (a point runs one seed: it measures such a claim and judges it nowhere); any other claim with no
    number there, or no number to move toward, by its verdicts (:func:`iclab.ladders.verdict_number`, toward
    holding): "toward the paper" needs a target; such a ladder keeps the claim's own number, where it measures one,
    beside the verdicts (``measured``, with its direction). None for a sweep that follows no claim or sweeps several
    keys."""
    spec = sweep.read_spec()
    claim, _, path = (follow or spec.get("claim") or "").partition(":")
    keys = [key for key in spec["grid"] if key != "seed"]
    if not claim or len(keys) != 1 or not sweep.points_file.exists():
        return None
    key = keys[0]
    rungs = sorted(dict.fromkeys(spec["grid"][key]), key=lambda v: (isinstance(v, str), v))
    points = sweep.read_table(sweep.points_file)
    numbers: dict[int, list[float | None]] = {}
    verdicts: dict[int, list[float | None]] = {}
    paper, over_seeds = [], False
    measured_at: dict[int, set] = {}  # per seed, the claim's measurements at its rungs, written out
    for point in points[points["status"] == "finished"].to_dict("records"):
        run = sweep.run(point["point"])
        rung, first = rungs.index(point[key]), run.read_config().get("seed", 0)
        for entry in (c for c in run.read_claims() if c["id"] == claim):
            paper.append(paper_number(entry, path))
            over_seeds |= not path and "seed_test_z" in entry  # a claim judged over seeds
            for seed, own in seed_entries(entry, first).items():
                numbers.setdefault(seed, [None] * len(rungs))[rung] = claim_number(own, path)
                verdicts.setdefault(seed, [None] * len(rungs))[rung] = verdict_number(own)
                measured_at.setdefault(seed, set()).add(json.dumps(own.get("measured"), sort_keys=True, default=str))
    untouched = len(rungs) > 1 and bool(measured_at) and all(len(seen) == 1 for seen in measured_at.values())
    given = spec.get("claim_target") if claim == followed_claim(spec) else None
    target = given if given is not None else next((p for p in paper if p is not None), None)
    measured = any(v is not None for values in numbers.values() for v in values)
    if target is None and over_seeds and measured:  # its test holds for a large effect: rising moves toward it
        trend = ladder_trend(numbers, math.inf, key, goal="holding")
        return Ladder(claim, key, rungs, numbers, None, trend, effect=True, untouched=untouched)
    if target is None or not measured:
        trend = ladder_trend(verdicts, 1.0, key, goal="holding")
        beside = {"measured": numbers, "measured_trend": ladder_trend(numbers, None, key)} if measured else {}
        return Ladder(claim, key, rungs, verdicts, 1.0, trend, True, untouched=untouched, **beside)
    trend = ladder_trend(numbers, target, key)
    return Ladder(claim, key, rungs, numbers, target, trend, own_target=given is not None, untouched=untouched)


def point_values(metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One number per point and model (columns ``point``, ``model``, ``value``): the mean of the model's
    ``metric`` rows over its run's seeds, at the model's last logged step when the metric is logged during
    training (e.g. the final ``train_loss``). Rows of no model (a theory's) are the model ``–``."""
    rows = metrics[metrics["metric"] == metric]
    rows = rows.assign(model=rows["model"].fillna("–"))
    logged = rows[rows["step"].notna()]
    if not logged.empty:
        rows = logged[logged["step"] == logged.groupby(["point", "model"])["step"].transform("max")]
    return rows.groupby(["point", "model"], sort=False)["value"].mean().reset_index()


def _holding(claims: pd.DataFrame) -> str:
    """A cell: how many of ``claims``' rows hold, of those judged at the sweep's scale; the rows with no verdict
    (``holds`` <NA>) are counted apart, neither passes nor failures: judged at another scale (their ``judged_at``),
    judged over seeds (``over_seeds``: a point runs one seed, so it measures such a claim and judges it nowhere),
    or not measured."""
    judged = claims.holds.notna()
    elsewhere = ~judged & claims["judged_at"].notna()
    over = ~judged & ~elsewhere & claims.get("over_seeds", pd.Series(False, index=claims.index)).astype(bool)
    scales = ", ".join(dict.fromkeys(claims.loc[elsewhere, "judged_at"].astype(str)))
    notes = [  # (what the rows are, their count, whether they were measured)
        (words, int(rows.sum()), measured)
        for words, rows, measured in (
            (f"judged at {html.escape(scales)} scale", elsewhere, True),
            ("judged over seeds", over, True),
            ("not measured", ~judged & ~elsewhere & ~over, False),
        )
        if rows.any()
    ]
    if not judged.any():
        cell = "; ".join(f"{'measured, ' * measured}{words} ({n})" for words, n, measured in notes)
        return f"<td class='elsewhere'>{cell}</td>"
    more = "; ".join(f"+{n} {words}" for words, n, _ in notes)
    more = f" <span class='elsewhere'>({more})</span>" if more else ""
    held = int(claims.holds[judged].astype(bool).sum())
    return f"<td class='{'ok' if held == judged.sum() else 'fail'}'>{held} / {int(judged.sum())}{more}</td>"


def _key_figure(path: Path, values: pd.DataFrame, key: str, others: list[str], metric: str, band: str) -> Path:
    """``metric`` against ``key``, a panel per model: one line per combination of the other swept keys,
    with ``band`` (what the shaded band spans) in the axis label."""
    from .figures import band_line, panel_grid, save

    models = list(dict.fromkeys(values["model"]))
    fig, axes = panel_grid(len(models), width=5.0, height=3.8)
    numeric = pd.api.types.is_numeric_dtype(values[key])
    categories = list(dict.fromkeys(values[key]))
    for ax, model in zip(axes, models):
        of_model = values[values["model"] == model]
        for label, group in of_model.groupby(others, sort=False) if others else [((), of_model)]:
            stats = group.groupby(key, sort=False)["value"].agg(["mean", "min", "max"])
            stats = stats.sort_index() if numeric else stats.reindex([c for c in categories if c in stats.index])
            x = stats.index.to_numpy() if numeric else [categories.index(c) for c in stats.index]
            name = ", ".join(f"{k}={v}" for k, v in zip(others, label if isinstance(label, tuple) else (label,)))
            band_line(ax, x, stats["mean"], stats["min"], stats["max"], marker="o", label=name or metric)
        if numeric:
            if (values[key] > 0).all() and values[key].max() / values[key].min() >= 100:
                ax.set_xscale("log")
            if values[key].nunique() <= 10:
                ax.set_xticks(sorted(values[key].unique()))
                ax.minorticks_off()
        else:
            ax.set_xticks(range(len(categories)), [str(c) for c in categories], rotation=30, fontsize=8)
        ax.set_title(model, fontsize=9)
        ax.set_xlabel(key)
        ax.set_ylabel(f"{metric} ({band})", fontsize=8)
        if others:
            ax.legend(fontsize=7)
    return save(fig, path)


def ladder_figure(path: Path, steps: Ladder) -> Path:
    """The claim's number against the ladder's key: each seed's points, their mean with the min–max band, and the
    target (the paper's number, or holding for a ladder of verdicts; no effect for a ladder of effects) as a dashed
    line; a ladder of verdicts with a number beside them (``measured``) draws that number in a second panel, titled
    by its own direction. Drawn to ``path``."""
    from .figures import new_figure, save

    fig, axes = new_figure(2 if steps.measured else 1, width=5.0, height=3.8)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in steps.rungs)
    x = list(steps.rungs) if numeric else list(range(len(steps.rungs)))
    ax = axes[0]
    _seeds_and_band(ax, x, steps.numbers)
    if steps.target is not None:
        goal = (
            "holds"
            if steps.verdicts
            else ("the target" if steps.own_target else "the paper's number") + f" {steps.target:g}"
        )
        ax.axhline(steps.target, color="tab:red", ls="--", lw=1, label=goal)
    if steps.effect:
        ax.axhline(0.0, color="tab:red", ls="--", lw=1, label="no effect")
    label = f"{steps.claim}: " + ("verdict (1 holds)" if steps.verdicts else "effect per seed" if steps.effect else "")
    ax.set_ylabel(label.removesuffix(": "), fontsize=8)
    ax.set_title(steps.trend.verdict, fontsize=9)
    if steps.measured:
        _seeds_and_band(axes[1], x, steps.measured)
        axes[1].set_ylabel(f"{steps.claim}: its measured number (no paper number)", fontsize=8)
        axes[1].set_title(f"a lead, not the diagnosis: {steps.measured_trend.verdict}", fontsize=8)
    for ax in axes:
        if not numeric:
            ax.set_xticks(x, [str(v) for v in steps.rungs], rotation=30, fontsize=8)
        elif min(x) > 0 and max(x) / min(x) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(steps.key)
        ax.legend(fontsize=6)
    return save(fig, path)


def _seeds_and_band(ax, x: list, numbers: dict[int, list[float | None]]) -> None:
    """Each seed's numbers at the rungs ``x`` as points, and their mean over seeds with the min–max band."""
    from .figures import band_line

    for seed, values in numbers.items():
        ax.plot(x, [float("nan") if v is None else v for v in values], "o", ms=3, alpha=0.6, label=f"seed {seed}")
    rows = [(xi, sum(v) / len(v), min(v), max(v)) for xi, v in zip(x, _kept(numbers)) if v]
    if rows:
        xs, mean, low, high = (list(c) for c in zip(*rows))
        band_line(ax, xs, mean, low, high, color="k", lw=1.5, label="mean, min–max over seeds")


def _kept(numbers: dict[int, list[float | None]]) -> list[list[float]]:
    """Per rung, the seeds' numbers measured there."""
    return [[v for v in column if v is not None] for column in zip(*numbers.values())]


def rung_means(numbers: dict[int, list[float | None]]) -> list[float | None]:
    """Per rung, the mean of the seeds' numbers measured there (None where none was)."""
    return [sum(v) / len(v) if v else None for v in _kept(numbers)]


def _trend_record(trend: Trend) -> dict:
    return {"verdict": trend.verdict, "slope": trend.slope, "stderr": trend.stderr, "seeds": trend.seeds}


def _ladder_section(sweep: SweepFolder, steps: Ladder) -> str:
    """The ladder's figure and trend, and ``ladder.json`` beside the report (what the non-reproductions page reads)."""
    trend = steps.trend
    record = {
        "claim": steps.claim,
        "key": steps.key,
        "rungs": steps.rungs,
        "numbers": {str(seed): values for seed, values in steps.numbers.items()},
        "target": steps.target,
        "verdicts": steps.verdicts,
        "effect": steps.effect,
        "trend": _trend_record(trend),
    }
    if steps.measured:
        record |= {
            "measured": {str(seed): values for seed, values in steps.measured.items()},
            "measured_trend": _trend_record(steps.measured_trend),
        }
    write_atomic(sweep.path / "ladder.json", json.dumps(record, indent=1, default=str) + "\n")
    figure = ladder_figure(sweep.figure(f"ladder_{steps.claim}"), steps)
    data = base64.b64encode(figure.read_bytes()).decode()
    slope = (
        ""
        if trend.seeds < 2
        else f" (mean slope per rung {trend.slope:.3g} ± {trend.stderr:.2g} over {trend.seeds} seeds)"
    )
    return (
        f"<h2 id='ladder'>Ladder: {html.escape(steps.claim)} against {html.escape(steps.key)}</h2>"
        f"<p><b>{html.escape(trend.verdict)}</b>{html.escape(slope)}. The rule, fixed before any ladder ran: each "
        "seed's least-squares slope of the claim's number over the rungs; the ladder moves when their mean lies more "
        "than 2 standard errors from 0, toward the paper's number or away from it."
        + (
            " The claim gives no number to follow, so its number is each seed's verdict: 1 holds, 0 fails."
            + (
                f" Its measured number, with no paper number to move toward, is drawn beside: "
                f"{steps.measured_trend.verdict} (a lead, not the diagnosis)."
                if steps.measured
                else ""
            )
            if steps.verdicts
            else " The claim is judged over seeds, so its number is each seed's effect, the difference its test "
            "averages; it holds for a mean effect above 0 by its standard errors, so a rising effect moves toward "
            "holding."
            if steps.effect
            else ""
        )
        + "</p>"
        f"<img src='data:image/png;base64,{data}'>"
    )


def write_sweep_report(sweep: SweepFolder) -> Path:
    """Write the sweep's figures and ``report.html`` from its files (``iclab report DIR`` redoes it)."""
    spec = sweep.read_spec()
    points = sweep.read_table(sweep.points_file)
    metrics = sweep.read_table(sweep.metrics_file)
    claims = sweep.read_table(sweep.claims_file)
    keys = list(spec["grid"])
    finished = points[points["status"] == "finished"] if not points.empty else points
    parts = [
        f"<h1>Sweep of {html.escape(spec['experiment'])}</h1>",
        f"<p>Sweep folder <code>{html.escape(str(sweep.path))}</code>, scale <b>{html.escape(spec['scale'])}</b>; "
        f"{len(finished)} of {len(points)} points finished.</p>",
    ]
    failed = points[points["status"] != "finished"] if not points.empty else points
    if not failed.empty:
        rows = "".join(
            f"<tr><td>{html.escape(r.point)}</td><td>{html.escape(str(r.error))}</td></tr>" for r in failed.itertuples()
        )
        parts.append(f"<h2 class='fail'>Failed points</h2><table><tr><th>point</th><th>error</th></tr>{rows}</table>")
    if not claims.empty:
        by_claim = "".join(
            f"<tr><td>{html.escape(claim)}</td>{_holding(group)}"
            f"<td>{html.escape(', '.join(group.point[group.holds.eq(False).fillna(False)])) or '–'}</td></tr>"
            for claim, group in claims.groupby("claim", sort=False)
        )
        parts.append(
            "<h2>Claims across points</h2><table><tr><th>claim</th><th>holds on</th><th>fails at</th></tr>"
            f"{by_claim}</table>"
        )
        by_point = "".join(
            f"<tr><td>{html.escape(point)}</td>{_holding(group)}</tr>"
            for point, group in claims.groupby("point", sort=False)
        )
        parts.append(f"<h2>Claims by point</h2><table><tr><th>point</th><th>claims holding</th></tr>{by_point}</table>")
    steps = ladder(sweep)
    if steps is not None and steps.numbers:
        parts.append(_ladder_section(sweep, steps))
    swept = [k for k in keys if k != "seed"]
    if not metrics.empty and not finished.empty:
        values = finished.set_index("point")[keys].join(
            point_values(metrics, spec["metric"]).set_index("point"), how="inner"
        )
        band = (  # what a point's band spans: the swept seeds, or nothing (one run per point)
            "mean, min–max over the swept seeds" if "seed" in keys else "one run per point: its mean over its seeds"
        )
        if values.empty:
            parts.append(f"<p>No point logged the metric <code>{html.escape(spec['metric'])}</code>.</p>")
        for key in swept if not values.empty else []:
            figure = _key_figure(
                sweep.figure(key.replace(".", "_")),
                values.reset_index(),
                key,
                [k for k in swept if k != key],
                spec["metric"],
                band,
            )
            data = base64.b64encode(figure.read_bytes()).decode()
            parts.append(
                f"<h3>{html.escape(spec['metric'])} against {html.escape(key)}</h3>"
                f"<img src='data:image/png;base64,{data}'>"
            )
    parts.append(f"<h2>Sweep</h2><pre>{html.escape(dump(spec))}</pre>")
    write_atomic(sweep.report_file, page(f"sweep {spec['experiment']}", "".join(parts)))
    return sweep.report_file
