"""Why a paper claim does not reproduce here: the distance of its recipe from the paper's, the paper recipe's cost,
the runs that move toward it, and a diagnosis made from them (``docs/non-reproductions.md``).

For each paper claim that does not reproduce at a scale (a :class:`~iclab.report.index.ClaimRow` whose verdict over
seeds fails), :func:`diagnose` gathers:

- the distance: the config values where the scale's recipe differs from the paper's (``distance(experiment,
  scale)``, :func:`iclab.api.recipe_distance`);
- the cost of the paper's recipe on this machine, where measured or estimated (``cost(experiment)``, the
  ``paper`` entry of ``times.json``), and the claim's own cost in the runs behind its verdict (the parts it needs,
  ``run.json`` ``time``);
- the quantity the claim reads measured by the authors' own code and by iclab at a matched recipe, where a parity
  record under ``ROOT/parity`` has it (:mod:`iclab.parity`; the strongest evidence: it tells an implementation's
  difference from a scale's);
- the same claim judged at the paper's recipe, or at a scale that runs the part of it the claim needs on a CPU
  (``paper`` or ``paper-cpu``, counted runs under the root);
- the ladders that follow the claim from the scale's recipe toward the paper's: the sweep folders under the root
  over one key (besides seeds) whose runs judged it, read at the path the sweep follows it by when made with
  ``--claim`` for it, else by its measured number, or by its verdicts where it gives none
  (:func:`iclab.report.sweep.ladder`), so one sweep diagnoses every claim its runs judge; a sweep whose points ran
  an older recipe or were judged by older claims (``changes(folder)``, :func:`iclab.api.sweep_changes`) is listed
  apart with what changed and diagnoses nothing, unless a current sweep was made from it by ``iclab rejudge SWEEP``
  (its ``rejudged_from``), which replaces it,

and says, in that order of evidence: *reproduces at the paper's recipe* (the smaller recipe is the cause), *does
not reproduce at the paper's recipe* (a finding against the paper), each ladder judged against the paper's value of
its key (:func:`iclab.ladders.ladder_reach`: *moving toward the paper's number*, *not moving* only where no trend its
seeds allow reaches it by the paper's value, else *too few runs to tell*, with where it would cross) with the paper
recipe's cost, or *not diagnosed yet*. Nothing here runs
anything: the page is written from the runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..claims import measured_text
from ..config import ConfigError
from ..formatting import duration
from ..parity import ParityRecord, agreement, by_claim, read_records
from ..runs import SweepFolder, write_atomic
from .index import ClaimRow, Scoreboard, aggregate
from .parity import summary_line
from .sweep import Ladder, followed_claim, ladder, ladder_figure, rung_means

FIGURES = "non-reproductions"
"""The folder beside the non-reproductions page that holds its ladders' figures."""

PAPER_SCALES = ("paper", "paper-cpu")
"""The scales at which a claim is judged at the paper's recipe: the paper's own, and a scale that runs on a CPU the
part of it a claim needs (one sweep point, one task)."""


@dataclass
class Diagnosis:
    """One non-reproducing claim at one scale and what explains it (see the module docstring)."""

    row: ClaimRow
    distance: dict
    cost: dict | None
    at_paper: list[ClaimRow] = field(default_factory=list)
    ladders: list[tuple[Path, Ladder]] = field(default_factory=list)
    set_apart: list[tuple[Path, list[str]]] = field(default_factory=list)
    parity: list[ParityRecord] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """The diagnosis in words, from the strongest evidence there is: the authors' code at a matched recipe
        first (:mod:`iclab.parity`), then the paper's recipe, then the ladders."""
        rest = self._recipe_verdict
        return f"{self.parity_text}; {rest}" if self.parity else rest

    @property
    def parity_text(self) -> str:
        """What the authors' own code says at the matched recipes, in words."""
        holds = [r.holds(r.authors) for r in self.parity]
        agree = sum(agreement(r.iclab, r.authors).agree for r in self.parity)
        if all(h is False for h in holds):
            said = "fails there too"
        elif any(h for h in holds):
            said = "holds there" if all(holds) else "holds there on some of them"
        else:
            said = "reads more than one value there"
        return (
            f"the authors' own code at {len(self.parity)} matched recipe(s): the claim's test on the quantities "
            f"compared {said}, and iclab agrees with it on {agree} of {len(self.parity)} (docs/parity.md)"
        )

    @property
    def _recipe_verdict(self) -> str:
        for row in self.at_paper:
            if row.holds is not None:
                if row.holds:
                    return (
                        f"reproduces at the paper's recipe ({row.scale}, {row.tally()}): the "
                        f"{self.row.scale} recipe is the cause"
                    )
                return f"does not reproduce at the paper's recipe ({row.scale}, {row.tally()})"
        if self.ladders:
            trends = "; ".join(f"{self.judged(steps)} ({folder.name})" for folder, steps in self.ladders)
            return f"{trends}; {self.cost_text}"
        apart = f" of the current recipe and claims ({len(self.set_apart)} set apart)" if self.set_apart else ""
        return f"not diagnosed yet: no run at the paper's recipe and no ladder{apart}; {self.cost_text}"

    def judged(self, steps: Ladder) -> str:
        """A ladder of this claim judged against the paper's value of its key (:meth:`Ladder.reach`)."""
        return steps.reach(self.distance.get(steps.key, (None, None))[1])

    @property
    def cost_text(self) -> str:
        """What the paper's recipe costs a seed here, as measured or estimated."""
        if not self.cost:
            return "the paper recipe's cost on this machine is not measured"
        how = "estimated from a timed run" if self.cost.get("estimated") else "measured"
        if self.cost.get("overrides"):  # a stand-in of the same shapes, e.g. a generated corpus for Wikitext-2
            how += f" with {', '.join(self.cost['overrides'])} changed"
        seeds = self.cost.get("seeds_per_run", 1)
        return (
            f"the paper's recipe takes about {duration(self.cost['seconds'] / seeds)} a seed on "
            f"{self.cost.get('threads', '?')} thread(s) of {self.cost.get('device', 'cpu')} ({how}, "
            f"{self.cost.get('date', '?')})"
        )


def _one_key_sweeps(root: Path, changes: Callable[[SweepFolder], list[str]]) -> list[tuple[SweepFolder, dict, list]]:
    """Every sweep folder directly under ``root`` over one key besides its seeds, with its spec and what separates
    its points from their current recipes and claims (``changes``; empty for a current sweep)."""
    found = []
    for path in sorted(p for p in root.iterdir() if (p / "sweep.yaml").is_file()) if root.is_dir() else []:
        folder = SweepFolder(path)
        spec = folder.read_spec()
        if len([key for key in spec["grid"] if key != "seed"]) == 1:
            found.append((folder, spec, changes(folder)))
    # A current sweep judged again replaces its source (one moved to its source's name has already replaced it).
    replaced = {
        spec.get("rejudged_from")
        for folder, spec, changed in found
        if not changed and spec.get("rejudged_from") != folder.path.name
    }
    return [entry for entry in found if entry[0].path.name not in replaced]


def _ladders_of(
    row: ClaimRow, sweeps: list[tuple[SweepFolder, dict, list]]
) -> tuple[list[tuple[Path, Ladder]], list[tuple[Path, list[str]]]]:
    """The ladders of ``row``'s claim among the one-key sweeps of its experiment (each sweep's runs judged it, read
    at the path the sweep follows it by when it was made with ``--claim`` for it; a sweep made for another claim
    that measured this one identically at every rung does not reach it), and apart, those of older recipes or claims
    with what changed."""
    found, apart = [], []
    for folder, spec, changed in sweeps:
        if spec["experiment"] != row.experiment:
            continue
        follows = followed_claim(spec) == row.id
        steps = ladder(folder, spec["claim"] if follows else row.id)
        if steps is None or all(v is None for values in steps.numbers.values() for v in values):
            continue
        if steps.untouched and not follows:  # the swept key does not reach this claim (another model's steps)
            continue
        if changed:
            apart.append((folder.path, changed))
        else:
            found.append((folder.path, steps))
    return found, apart


def diagnose(
    board: Scoreboard,
    distance: Callable[[str, str], dict],
    cost: Callable[[str], dict | None],
    changes: Callable[[SweepFolder], list[str]],
) -> list[Diagnosis]:
    """A :class:`Diagnosis` for each paper claim of ``board`` that does not reproduce at a scale other than the
    paper's, in the board's order: ``distance(experiment, scale)`` the keys its recipe changes from the paper's,
    ``cost(experiment)`` the paper recipe's measured or estimated cost, ``changes(sweep)`` what separates a sweep's
    points from their current recipes and claims (a ladder with any is set apart)."""
    sweeps = _one_key_sweeps(board.root, changes)
    parity = by_claim(read_records(board.root / "parity")) if (board.root / "parity").is_dir() else {}
    out = []
    for row in board.of_kind("paper"):
        if row.holds is not False or row.scale in PAPER_SCALES:
            continue
        try:
            keys = distance(row.experiment, row.scale)
        except ConfigError:  # a scale that no longer resolves: no distance to show
            keys = {}
        at_paper = [
            other
            for other in board.rows
            if other.experiment == row.experiment and other.id == row.id and other.scale in PAPER_SCALES
        ]
        found = parity.get((row.experiment, row.id), [])
        out.append(Diagnosis(row, keys, cost(row.experiment), at_paper, *_ladders_of(row, sweeps), found))
    return out


def diagnoses(
    root: str | Path,
    recipes: Callable,
    distance: Callable[[str, str], dict],
    cost: Callable[[str], dict | None],
    changes: Callable[[SweepFolder], list[str]],
) -> dict[tuple[str, str, str], str]:
    """Each non-reproducing paper claim's diagnosis in words among the runs and sweeps under ``root`` (``recipes``
    counts only runs of the current recipes, :func:`iclab.report.index.aggregate`; ``distance``, ``cost`` and
    ``changes`` as :func:`diagnose`), by its row's key (:func:`verdicts`)."""
    return verdicts(diagnose(aggregate(root, recipes), distance, cost, changes))


def verdicts(diagnosed: list[Diagnosis]) -> dict[tuple[str, str, str], str]:
    """Each diagnosis in words (:attr:`Diagnosis.verdict`) by its row's :attr:`~iclab.report.index.ClaimRow.key`:
    what the seed table and the scoreboard print beside the claim's verdict."""
    return {d.row.key: d.verdict for d in diagnosed}


def non_reproductions(diagnosed: list[Diagnosis], figures: Path | None = None) -> str:
    """``docs/non-reproductions.md`` of the claims ``diagnosed`` (:func:`diagnose`): one section per paper claim that
    does not reproduce, with its measured values, its distance from the paper's recipe, the paper recipe's cost, the
    runs at that recipe and the ladders toward it, and the diagnosis. ``figures``: a folder beside the page where
    each ladder's figure is drawn and linked from its section (by ``figures``' name and file name)."""
    sections = [_section(d, figures) for d in diagnosed]
    return (
        "# Why a claim does not reproduce here\n\n"
        "Written by `iclab report ROOT --non-reproductions PATH` from the runs and sweeps under ROOT. For each paper "
        "claim that does not reproduce at a scale (the rule over seeds fails on the evaluation seeds 100–104): the "
        "config values where that scale's recipe differs from the paper's (`iclab show EXP --against paper`), what "
        "the paper's recipe costs a seed here (`benchmarks/recipe_cost.py`), the claim judged at the paper's recipe "
        "where a CPU affords it (scale `paper-cpu`), the ladders that move one value toward the paper's "
        "(`iclab sweep EXP --grid KEY=... --seeds 3 --claim ID`; one sweep over one key diagnoses every claim its runs "
        "judge, by its number or, where it gives none, by its verdicts), the same quantity measured by the authors' "
        "own code at a matched recipe (docs/parity.md), and the diagnosis they support, in that "
        "order of evidence; `python tools/diagnosis_plan.py` lists the runs planned for each claim and runs them. No "
        "number here is typed: each is read from a run, a sweep or a recipe.\n\n"
        + ("\n\n".join(sections) if sections else "Every paper claim reproduces at its scale.")
        + "\n"
    )


def _section(d: Diagnosis, figures: Path | None) -> str:
    row = d.row
    paper = row.latest.get("paper_value")
    values = "; ".join(f"seed {seed}: {measured_text(claim['measured'])}" for _, seed, claim in row.results)
    lines = [
        f"## `{row.id}` ({row.experiment}, {row.scale})",
        "",
        f"Does not reproduce: {row.tally()}. Measured: {values}"
        + (f" (the paper: {measured_text(paper)})." if paper is not None else "."),
        "",
        f"**Diagnosis:** {d.verdict}.",
        "",
        *_cost_lines(row),
        f"**Distance to the paper's recipe** ({len(d.distance)} values):",
        "",
        *(f"- `{key}`: {mine!r} → {theirs!r}" for key, (mine, theirs) in d.distance.items()),
    ]
    if d.parity:
        lines += ["", "**Parity with the authors' code** ([docs/parity.md](parity.md)):", ""]
        lines += [f"- {summary_line(r)}" for r in d.parity]
    if d.at_paper:
        lines += ["", "**At the paper's recipe:**", ""]
        lines += [f"- {r.scale}: {r.tally()}" for r in d.at_paper]
    if d.ladders:
        lines += ["", "**Ladders:**", ""]
        for path, steps in d.ladders:
            mean = (
                "share of seeds holding"
                if steps.verdicts
                else "mean effect over seeds; its test needs it above 0 by its standard errors"
                if steps.effect
                else f"mean toward {steps.target:g}"
            )
            lines.append(
                f"- `{path.name}`: {steps.key} = {_points(steps.rungs, steps.numbers)} ({mean} over "
                f"{len(steps.numbers)} seeds): {d.judged(steps)}"
            )
            if steps.measured:
                lines.append(
                    f"  - its measured number, with no paper number to move toward, beside the verdicts: "
                    f"{steps.key} = {_points(steps.rungs, steps.measured)} (mean over seeds): "
                    f"{steps.measured_trend.verdict} (a lead, not the diagnosis)"
                )
            if figures is not None:
                drawn = ladder_figure(figures / f"{path.name}_{steps.claim}.png", steps)
                lines.append(f"\n  ![{steps.claim} along {steps.key}]({figures.name}/{drawn.name})")
    if d.set_apart:
        why = (
            "points of an older recipe or judged by older claims: `iclab rejudge SWEEP` judges again a sweep whose "
            "claims alone changed; one whose recipe changed must run again"
        )
        lines += ["", f"**Ladders set apart** ({why}):", ""]
        lines += [f"- `{path.name}`: {'; '.join(changes)}" for path, changes in d.set_apart]
    return "\n".join(lines)


def _cost_lines(row: ClaimRow) -> list[str]:
    """What the claim cost in the runs behind its verdict (``run.json`` ``time``, :mod:`iclab.ledger`): the time of
    the parts it needs, of the run's wall time; nothing for runs that recorded none."""
    costs = [
        f"{duration(cost['seconds'])} of `{run.folder.path.name}`'s {duration(spent['wall_seconds'])} "
        f"({cost['share']:.0%}; parts {', '.join(cost['parts'])})"
        for run in row.runs()
        if (spent := run.info.get("time")) and (cost := spent["claims"].get(row.id))
    ]
    return [f"**Its cost at this scale:** {'; '.join(costs)}.", ""] if costs else []


def _points(rungs: list, numbers: dict[int, list[float | None]]) -> str:
    """Each rung with the mean over seeds of its numbers, where any was measured."""
    return ", ".join(f"{rung}: {m:.4g}" for rung, m in zip(rungs, rung_means(numbers)) if m is not None)


def write_non_reproductions(diagnosed: list[Diagnosis], path: str | Path) -> Path:
    """Write :func:`non_reproductions` of the claims ``diagnosed`` to ``path`` (its folder is created), each
    ladder's figure in the folder ``non-reproductions`` beside it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figures = path.parent / FIGURES
        figures.mkdir(exist_ok=True)
        for old in figures.glob("*.png"):  # a ladder no longer under the root leaves no figure behind
            old.unlink()
        write_atomic(path, non_reproductions(diagnosed, figures))
    except OSError as err:
        raise ConfigError(f"cannot write {path}: {err.strerror}") from None
    return path
