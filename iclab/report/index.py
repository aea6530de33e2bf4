"""The scoreboard (``index.html``) and the markdown claim × seed table of a folder of runs.

Both come from one :func:`aggregate`: a row per (experiment, scale, claim) over the runs under a
root, with each counted seed's verdict and measured value, and the verdict over seeds by
:data:`iclab.claims.SEED_RULE`. A run judges each of its seeds (:func:`iclab.claims.seed_entries`), so a
seed counts alike whether it ran alone or beside others. Which count (:data:`COUNTED_RUNS`): per
(experiment, scale, seed) the newest finished run holding that seed (by the time it finished); a run none of
whose seeds counts is listed as superseded, an unfinished run as not finished; nor is a run of seeds
outside the evaluation seeds counted, or a variant (a run whose ``run.json`` lists ``recipe_changes``:
keys set apart from its scale's recipe), each listed apart with its own verdicts. A claim a seed measured
but judged at another scale (``holds`` None, ``judged_at``) is counted apart: neither a pass nor a failure.
"""

from __future__ import annotations

import datetime as dt
import functools
import html
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..claims import (
    EVALUATION_SEEDS,
    SEED_RULE,
    SMOKE_NOTE,
    SMOKE_SCALE,
    THEORY_NOTE,
    Tally,
    holds_over_seeds,
    is_theory,
    kind_of,
    measured_text,
    seed_entries,
    seed_test,
    summary,
    verdict_word,
)
from ..config import ConfigError
from ..formatting import spans
from ..runs import Recipe, RunFolder, run_folders, write_atomic
from .html import (
    cell,
    claim_anchor,
    duration,
    figure_anchor,
    figure_title,
    link,
    page,
    paper_value,
    seeds,
    table,
    value,
    verdict_class,
)

_COUNTED, _SUPERSEDED, _UNFINISHED = "counted", "superseded", "not finished"
_OTHER_SEEDS, _VARIANT, _SMOKE, _OLDER = "not evaluation seeds", "variant", "smoke run", "older recipe or claims"
_APART = (_OTHER_SEEDS, _VARIANT, _SMOKE, _OLDER)  # listed apart from the evaluation runs, never counted
_EVALUATION = f"{EVALUATION_SEEDS[0]}–{EVALUATION_SEEDS[-1]}"
COUNTED_RUNS = (
    f"only runs on the evaluation seeds {_EVALUATION} count, which no recipe was tuned on; per experiment, "
    "scale and seed the newest finished run of the scale's current recipe and claims counts; older runs of that "
    "seed, unfinished runs, runs of other seeds (tuning and exploration), variants (runs whose config differs "
    "from the recipe), runs of an older recipe or older claims (their fingerprint is not the current one) and "
    "smoke runs are listed but not counted"
)
VERDICT_MARKS = {True: "✓", False: "✗", None: "○"}
"""A verdict as the seed table marks it: holds, fails, measured but judged at another scale or over seeds."""


def on_evaluation_seeds(config: dict) -> bool:
    """Whether every seed a run trained is an evaluation seed (:data:`iclab.claims.EVALUATION_SEEDS`)."""
    first = config.get("seed", 0)
    return all(first + k in EVALUATION_SEEDS for k in range(config.get("seeds", 1)))


class Run:
    """What the scoreboard shows of one run folder; ``status`` is set by :func:`aggregate`."""

    def __init__(self, run: RunFolder, root: Path):
        """Read from ``run``'s files: a damaged or missing one is a :class:`ConfigError` naming it."""
        self.folder, self.config, self.info = run, run.read_config(), run.read_info()
        self.claims = run.read_claims()
        self.figures = {f.stem for f in run.figures()}
        self.report = os.path.relpath(run.report_file, root)
        self.experiment = str(self.config.get("experiment", run.path.name))
        self.scale = str(self.config.get("scale"))
        self.seed = self.config.get("seed", 0)
        self.seed_list = [self.seed + k for k in range(self.config.get("seeds", 1))]
        self.seeds = seeds(self.config)
        self.label = f"seed{'s' * (self.config.get('seeds', 1) > 1)} {self.seeds}"  # seed 0, seeds 0–2
        self.wall = self.info.get("wall_seconds")
        self.rejudged_from = self.info.get("rejudged_from")  # judged again by newer claims: its wall is evaluation
        self.changes = self.info.get("recipe_changes") or {}  # what makes it a variant
        self.older: list[str] = []  # what separates it from the current recipe and claims
        self.status, self.newer = _UNFINISHED, None

    def status_text(self) -> str:
        """Its status as the runs tables show it: a variant names the keys that differ from the recipe."""
        if self.status == _SUPERSEDED:
            return f"superseded by {self.newer.folder.path.name}"
        if self.status == _SMOKE:
            return SMOKE_NOTE
        if self.status == _VARIANT:
            return f"variant: {', '.join(f'{k}={v}' for k, v in self.changes.items())}"
        if self.status == _OLDER:
            return f"older: {'; '.join(self.older)}"
        return self.status

    @property
    def started(self) -> float:
        """When the session that finished it started (the config's time for an unfinished run)."""
        if "started" in self.info:
            return dt.datetime.fromisoformat(self.info["started"]).timestamp()
        return self.folder.config_file.stat().st_mtime

    @property
    def ended(self) -> float:
        """When it finished: its last session's start plus that session's wall time (its wall time less what
        earlier sessions spent training), else when claims.json was written."""
        if "started" in self.info and self.wall is not None:
            return self.started + self.wall - self.info.get("earlier_seconds", 0.0)
        return self.folder.claims_file.stat().st_mtime

    def wall_text(self) -> str:
        """Its wall time, or for a run judged again (``iclab rejudge``) that this was its evaluation alone."""
        if self.rejudged_from:
            return f"{duration(self.wall)} (evaluation only: the models of {self.rejudged_from}, judged again)"
        return duration(self.wall)

    def name(self) -> str:
        """The folder's name, linked to its report when there is one."""
        return (
            link(self.report, self.folder.path.name)
            if self.folder.report_file.exists()
            else html.escape(self.folder.path.name)
        )

    def evidence(self, claim: dict) -> str:
        """A link to what shows ``claim``: its figure in the run's report, else its row there."""
        figure = claim.get("figure")
        if figure in self.figures:
            return link(self.report, f"figure: {figure_title(figure)}", figure_anchor(figure))
        return link(self.report, "claim in report", claim_anchor(claim["id"]))


@dataclass
class ClaimRow:
    """One claim of one experiment at one scale over the counted seeds: ``results`` holds, per seed, the
    run that counts for it, the seed and the seed's entry (:func:`iclab.claims.seed_entries`)."""

    experiment: str
    scale: str
    id: str
    results: list[tuple[Run, int, dict]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        """``(experiment, scale, claim id)``: what names the row across pages (e.g. its diagnosis)."""
        return self.experiment, self.scale, self.id

    def runs(self) -> list[Run]:
        """The runs behind the counted seeds, once each."""
        return list({id(run): run for run, _, _ in self.results}.values())

    def seeds(self) -> list[int]:
        return [seed for _, seed, _ in self.results]

    @property
    def latest(self) -> dict:
        """The claim as the newest run states it (statement, paper, expected)."""
        return max(self.results, key=lambda result: result[0].ended)[2]

    @property
    def held(self) -> int:
        return sum(c["holds"] is True for _, _, c in self.results)

    @property
    def judged(self) -> int:
        """How many seeds judged it at their scale."""
        return sum(c["holds"] is not None for _, _, c in self.results)

    @property
    def elsewhere(self) -> list[dict]:
        """The seeds' entries measured here but judged at another scale."""
        return [c for _, _, c in self.results if c["holds"] is None]

    @property
    def seed_test(self) -> tuple[bool | None, dict] | None:
        """For a claim judged over seeds together (:func:`iclab.claims.over_seeds_test`): its verdict over the
        counted seeds' statistics and what that measured (:func:`iclab.claims.seed_test`); None otherwise."""
        z = self.latest.get("seed_test_z")
        if z is None:
            return None
        return seed_test([c["statistic"] for _, _, c in self.results if "statistic" in c], z)

    @property
    def holds(self) -> bool | None:
        """The verdict over seeds; None when every run judged it at another scale (or, for a claim judged over
        seeds together, when fewer than two seeds measured it)."""
        if self.seed_test is not None:
            return self.seed_test[0]
        return holds_over_seeds(self.held, self.judged)

    def seed_test_text(self) -> str:
        """``mean 0.0070 at 1.27 standard errors over 5 seeds (needs > 2)`` for a claim judged over seeds."""
        _, found = self.seed_test
        if found["seeds"] < 2:
            return f"judged over seeds: {found['seeds']} seed measured it, the test needs 2"
        z = self.latest["seed_test_z"]
        return (
            f"mean {found['mean']:.4g} at {found['t']:.3g} standard errors over {found['seeds']} seeds (needs > {z:g})"
        )

    def tally(self) -> str:
        """``holds on 3 of 5 seeds``, or for a claim judged over seeds together its test's text."""
        return self.seed_test_text() if self.seed_test is not None else f"holds on {self.held} of {self.judged} seeds"

    def judged_at(self) -> str:
        """The scales its judged-elsewhere entries name, e.g. ``long``."""
        return ", ".join(dict.fromkeys(str(c.get("judged_at")) for c in self.elsewhere))

    @property
    def kind(self) -> str:
        """``paper`` or ``diagnostic`` (:data:`iclab.claims.KINDS`), as the newest run states it."""
        return kind_of(self.latest)


@dataclass
class Scoreboard:
    """Every run under ``root`` (with its status) and the claim rows over the counted ones."""

    root: Path
    runs: list[Run]
    rows: list[ClaimRow]
    skipped: list[str] = field(default_factory=list)
    """Why each run folder that could not be read was left out (one line each, naming the file)."""

    def counted(self) -> list[Run]:
        return [r for r in self.runs if r.status == _COUNTED]

    def of_kind(self, kind: str) -> list[ClaimRow]:
        """The claim rows of one kind, ``paper`` or ``diagnostic``."""
        return [row for row in self.rows if row.kind == kind]

    def groups(self) -> dict[tuple[str, str], list[ClaimRow]]:
        """The rows by (experiment, scale), in the order the experiments first ran."""
        out: dict[tuple[str, str], list[ClaimRow]] = {}
        for row in self.rows:
            out.setdefault((row.experiment, row.scale), []).append(row)
        return out

    @staticmethod
    def runs_of(rows: list[ClaimRow]) -> list[Run]:
        """The counted runs behind ``rows``, by base seed."""
        return sorted({id(r): r for row in rows for r in row.runs()}.values(), key=lambda r: r.seed)

    @staticmethod
    def seeds_of(rows: list[ClaimRow]) -> list[int]:
        """The counted seeds behind ``rows``, in order."""
        return sorted({seed for row in rows for seed in row.seeds()})


def aggregate(root: str | Path | Scoreboard, recipes: Callable[[str, str], Recipe | None] | None = None) -> Scoreboard:
    """The runs directly under ``root`` and one :class:`ClaimRow` per (experiment, scale, claim) over
    the counted runs (see the module docstring for which count). ``recipes(experiment, scale)`` gives the
    current :class:`~iclab.runs.Recipe` (``iclab.api.recipe``): a finished run whose fingerprint is not its
    recipe's is listed apart as older; without ``recipes`` no run is. A :class:`Scoreboard` given as ``root`` is
    returned as it is, so the pages written from one folder (the index, the seed table, the diagnoses) read its runs
    once."""
    if isinstance(root, Scoreboard):
        return root
    root = Path(root)
    runs, skipped = [], []
    for folder in run_folders(root):  # a damaged folder is left out, with the line that says why
        try:
            runs.append(Run(folder, root))
        except ConfigError as err:
            skipped.append(str(err))
    newest: dict[tuple, Run] = {}
    current = functools.cache(recipes) if recipes else None
    for run in runs:  # finished or not, a run of other seeds is listed apart; so is a variant
        if current and run.folder.finished:
            recipe = current(run.experiment, run.scale)
            run.older = (
                recipe.changes(run.config, run.info.get("fingerprint")) if recipe else ["its recipe no longer exists"]
            )
        if run.scale == SMOKE_SCALE:
            run.status = _SMOKE
        elif not on_evaluation_seeds(run.config):
            run.status = _OTHER_SEEDS
        elif run.changes:
            run.status = _VARIANT
        elif run.older:
            run.status = _OLDER
    evaluation = [r for r in runs if r.folder.finished and r.status not in _APART]
    for run in sorted(evaluation, key=lambda r: r.ended):  # the newest run holding a seed counts for it
        for seed in run.seed_list:
            newest[run.experiment, run.scale, seed] = run
    counting = {id(run) for run in newest.values()}
    for run in evaluation:
        run.status = _COUNTED if id(run) in counting else _SUPERSEDED
        if run.status == _SUPERSEDED:
            run.newer = newest[run.experiment, run.scale, run.seed_list[0]]
    # Experiments appear in the order their first counted run started (a reproduction's registry order).
    first: dict[tuple, float] = {}
    for run in newest.values():
        first[run.experiment, run.scale] = min(first.get((run.experiment, run.scale), run.started), run.started)
    rows: dict[tuple, ClaimRow] = {}
    for (experiment, scale, seed), run in sorted(newest.items(), key=lambda i: (first[i[0][:2]], i[0][2])):
        for claim in run.claims:
            entry = seed_entries(claim, run.seed).get(seed)
            if entry is not None:
                key = (experiment, scale, claim["id"])
                rows.setdefault(key, ClaimRow(*key)).results.append((run, seed, entry))
    return Scoreboard(root, runs, list(rows.values()), skipped)


def _seed_list(found: list[int]) -> str:
    """Seeds as ranges (``0–4``, ``0, 2–3``)."""
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans(found)) or "none"


def _count_of(count: int) -> str:
    """``3 seeds``."""
    return f"{count} seed{'s' * (count != 1)}"


# --- the scoreboard page ---------------------------------------------------------------------------------------

_CLAIM_HEADERS = [
    "claim",
    "the paper says",
    "measured",
    "the paper's number",
    "expected",
    "verdict",
    "seeds",
    "evidence",
]
_DIAGNOSTIC_HEADERS = ["check", "what it checks", "measured", "expected", "verdict", "seeds", "evidence"]


def _verdict_cell(row: ClaimRow, diagnosis: str | None = None) -> str:
    """The verdict over seeds with its count (and, for a claim that does not reproduce, its ``diagnosis`` where
    one was made), or, when no run judged it here, where it is judged."""
    why = f"<br><small class='diagnosis'>diagnosis: {html.escape(diagnosis)}</small>" if diagnosis else ""
    if row.seed_test is not None:
        word = "measured" if row.holds is None else verdict_word(row.holds, row.kind)
        return (
            f"<span class='{verdict_class(row.holds, row.kind)}'>{word}</span>"
            f"<br><small>{html.escape(row.seed_test_text())}</small>{why}"
        )
    if row.holds is None:
        reason = row.elsewhere[-1].get("reason")
        unjudged = "not measured" if row.judged_at() == "None" else f"measured, judged at {row.judged_at()} scale"
        return f"<span class='elsewhere'>{html.escape(unjudged)}</span>" + (
            f"<br><small>{html.escape(reason)}</small>" if reason else ""
        )
    more = f"; {len(row.elsewhere)} more judged at {html.escape(row.judged_at())} scale" if row.elsewhere else ""
    return (
        f"<span class='{verdict_class(row.holds, row.kind)}'>{verdict_word(row.holds, row.kind)}</span>"
        f"<br><small>on {row.held} of {_count_of(row.judged)}{more}</small>{why}"
    )


def _measured_cell(row: ClaimRow) -> str:
    """Each seed's measured value, verdict and links, in a details element: its summary is the value
    (one seed) or the range and count (several)."""
    values, count = [c["measured"] for _, _, c in row.results], _count_of(len(row.results))
    if len(values) == 1:
        summary = value(values[0])
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        summary = f"{value(min(values))} – {value(max(values))} ({count})"
    else:
        summary = f"per seed ({count})"
    items = "".join(
        f"<li>seed {seed}: {VERDICT_MARKS[claim['holds']]} {value(claim['measured'])} · "
        f"{link(run.report, 'claim', claim_anchor(claim['id']))}"
        + (f" · {run.evidence(claim)}" if claim.get("figure") in run.figures else "")
        + "</li>"
        for run, seed, claim in row.results
    )
    return f"<details><summary>{summary}</summary><ul class='seeds'>{items}</ul></details>"


def _claim_row(row: ClaimRow, diagnosis: str | None = None) -> str:
    newest, _, latest = max(row.results, key=lambda result: result[0].ended)
    name = f"<b>{html.escape(row.id)}</b><br><small>{html.escape(row.experiment)} · {html.escape(row.scale)}</small>"
    if is_theory(latest):
        name += f"<br><small class='theory'>theory: {html.escape(THEORY_NOTE)}</small>"
    paper = row.kind == "paper"
    source = f"<br><small>{html.escape(latest['source'])}</small>" if paper and latest.get("source") else ""
    return (
        f"<tr>{cell('claim', name)}"
        f"{cell('the paper says' if paper else 'what it checks', html.escape(latest['statement']) + source)}"
        f"{cell('measured', _measured_cell(row))}"
        + (cell("the paper's number", paper_value(latest)) if paper else "")
        + f"{cell('expected', html.escape(str(latest['expected'])))}"
        f"{cell('verdict', _verdict_cell(row, diagnosis))}{cell('seeds', _seed_list(row.seeds()))}"
        f"{cell('evidence', newest.evidence(latest))}</tr>"
    )


def _counts(rows: list[ClaimRow]) -> Tally:
    """The verdicts over seeds of ``rows`` (claims of one kind) as a :class:`~iclab.claims.Tally`."""
    judged = [row for row in rows if row.holds is not None]
    kind = rows[0].kind if rows else None
    return Tally(sum(bool(row.holds) for row in judged), len(judged), len(rows) - len(judged), kind)


def _claims_by_paper(board: Scoreboard, diagnoses: Mapping[tuple, str]) -> str:
    """One table of every paper claim row, a body per paper under a heading row (``diagnoses``: see
    :func:`write_index`)."""
    papers: dict[str, list[ClaimRow]] = {}
    for row in board.of_kind("paper"):
        papers.setdefault(row.latest["paper"], []).append(row)
    bodies = []
    for k, (paper, rows) in enumerate(papers.items()):
        names = ", ".join(dict.fromkeys(row.experiment for row in rows))
        heading = (
            f"<tr class='paper'><th colspan='{len(_CLAIM_HEADERS)}'>{html.escape(paper)} "
            f"<small>({html.escape(names)}; {_counts(rows)})</small></th></tr>"
        )
        claims = "".join(_claim_row(row, diagnoses.get(row.key)) for row in rows)
        bodies.append(f"<tbody id='paper-{k + 1}'>{heading}{claims}</tbody>")
    return table(_CLAIM_HEADERS, bodies, bodies=True)


def _diagnostics(board: Scoreboard) -> str:
    rows = board.of_kind("diagnostic")
    if not rows:
        return ""
    return (
        f"<h2 id='diagnostics'>Diagnostics</h2><p>iclab's own checks ({_counts(rows)}): an optimiser "
        "converged, the theory is consistent, a sanity bound. They are not statements of the papers and are not "
        "counted among their claims; a failing diagnostic is a defect of the run or of iclab.</p>"
        + table(_DIAGNOSTIC_HEADERS, [_claim_row(row) for row in rows])
    )


_RUN_HEADERS = ["experiment", "run", "status", "claims", "scale", "seeds", "wall time", "CPU time", "device"]


def _runs_table(runs: list[Run]) -> str:
    rows = []
    for r in runs:
        status = html.escape(r.status_text())
        claims = (
            f"<span class='{'ok' if all(c['holds'] is not False for c in r.claims) else 'finding'}'>"
            f"{html.escape(summary(r.claims))}</span>"
            if r.folder.finished
            else "not finished"
        )
        rows.append(
            f"<tr>{cell('experiment', html.escape(r.experiment))}{cell('run', r.name())}{cell('status', status)}"
            f"{cell('claims', claims)}{cell('scale', html.escape(r.scale))}"
            f"{cell('seeds', html.escape(r.seeds))}{cell('wall time', html.escape(r.wall_text()))}"
            f"{cell('CPU time', duration(r.info.get('cpu_seconds')))}"
            f"{cell('device', html.escape(str(r.info.get('device', '?'))))}</tr>"
        )
    return table(_RUN_HEADERS, rows)


def _runs(board: Scoreboard) -> str:
    """The runs on the evaluation seeds (counted, superseded, unfinished), then every other run apart."""
    evaluation = [r for r in board.runs if r.status not in _APART]
    others = [r for r in board.runs if r.status in _APART]
    out = f"<h2 id='runs'>Runs on the evaluation seeds {_EVALUATION}</h2>" + (
        _runs_table(evaluation) if evaluation else "<p>None yet: <code>iclab reproduce</code> runs them.</p>"
    )
    if others:
        out += (
            f"<h2 id='other-runs'>Other runs (not counted)</h2><p>Runs of seeds outside {_EVALUATION} (tuning "
            "and exploration), variants (a config that differs from the scale's recipe, the keys that differ "
            "in their status) and runs of an older recipe or older claims (what changed since, in their status), "
            "listed with their own verdicts and never counted above.</p>" + _runs_table(others)
        )
    return out


def _skipped(board: Scoreboard) -> str:
    """The run folders left out because a file of theirs could not be read, with why."""
    if not board.skipped:
        return ""
    items = "".join(f"<li>{html.escape(reason)}</li>" for reason in board.skipped)
    return f"<h2 id='skipped'>Unreadable run folders (left out)</h2><ul>{items}</ul>"


def _summary(board: Scoreboard) -> str:
    papers, diagnostics = board.of_kind("paper"), board.of_kind("diagnostic")
    judged = [row for row in papers if row.holds is not None]
    held = sum(bool(row.holds) for row in judged)
    counted = board.counted()
    statuses = {
        s: sum(r.status == s for r in board.runs)
        for s in (_SUPERSEDED, _UNFINISHED, _OTHER_SEEDS, _VARIANT, _OLDER, _SMOKE)
    }
    others = [_status_count(s, n) for s, n in statuses.items() if n]
    experiments = f"{len(board.groups())} experiment{'s' * (len(board.groups()) != 1)}"
    return (
        f"<p class='summary'><span class='{'ok' if held == len(judged) else 'finding'}'>Paper claims: "
        f"{_counts(papers)}</span> over seeds"
        + (f"; diagnostics: {_counts(diagnostics)}" if diagnostics else "")
        + f"; seeds {_seed_list([s for r in counted for s in r.seed_list])} of {experiments} in "
        f"{len(counted)} run{'s' * (len(counted) != 1)}; wall time {duration(sum(r.wall or 0 for r in counted))} "
        "(sum over those runs)" + (f"; also {', '.join(others)} (not counted)" if others else "") + ".</p>"
        f"<p>The rule: {html.escape(SEED_RULE)}; {html.escape(COUNTED_RUNS)}. A paper claim that fails by the rule "
        "does not reproduce here: a finding, reported with its measured values beside the paper's number. A "
        "claim measured here but judged at another scale is neither a pass nor a failure. Open a measured value "
        "for each seed's value, verdict and links.</p>"
    )


def _status_count(status: str, n: int) -> str:
    """``2 variants``, ``1 superseded``, ``3 runs of an older recipe or claims``."""
    if status == _OLDER:
        return f"{n} run{'s' * (n != 1)} of an {status}"
    return f"{n} {status}{'s' * (status in (_VARIANT, _SMOKE) and n != 1)}"


def write_index(
    root: str | Path,
    recipes: Callable[[str, str], Recipe | None] | None = None,
    diagnoses: Mapping[tuple, str] | None = None,
) -> Path:
    """Write ``<root>/index.html``, the scoreboard of every run folder directly under ``root`` (``recipes``: see
    :func:`aggregate`; ``diagnoses``: why a claim does not reproduce, by :attr:`ClaimRow.key`, printed under its
    verdict, :func:`iclab.report.diagnosis.diagnoses`)."""
    board = aggregate(root, recipes)
    stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    body = (
        f"<h1>iclab scoreboard</h1>{_summary(board)}"
        f"<p>Written {stamp} from <code>{html.escape(str(board.root))}</code>.</p>"
        f"<h2 id='claims'>The papers' claims</h2>{_claims_by_paper(board, diagnoses or {})}"
        f"{_diagnostics(board)}{_runs(board)}{_skipped(board)}"
    )
    index = board.root / "index.html"
    write_atomic(index, page("iclab scoreboard", body))
    return index


# --- the markdown seed table -----------------------------------------------------------------------------------


def seed_table(
    root: str | Path,
    recipes: Callable[[str, str], Recipe | None] | None = None,
    diagnoses: Mapping[tuple, str] | None = None,
) -> str:
    """The claim × seed table of the runs under ``root`` as markdown: a section per (experiment, scale),
    a column per counted seed, the count and verdict over seeds; the paper's claims first (with the
    paper's number, and the measured values of a claim that does not reproduce with its diagnosis where
    ``diagnoses`` has one), then the diagnostics (``recipes``: see :func:`aggregate`; ``diagnoses``: see
    :func:`write_index`)."""
    board = aggregate(root, recipes)
    sections, walls = [], []
    for (experiment, scale), rows in board.groups().items():
        walls += [f"{experiment} {r.label}: {r.wall_text()}" for r in board.runs_of(rows)]
        seeds = board.seeds_of(rows)
        marks = " | ".join(f"seed {s}" for s in seeds)
        rule = "|---|" + "---|" * (len(seeds) + 1)
        lines = [f"| {experiment} ({scale}) paper claim | {marks} | holds | the paper's number |", rule + "---|"]
        lines += [_seed_row(row, seeds, paper=True) for row in rows if row.kind == "paper"]
        diagnostics = [_seed_row(row, seeds, paper=False) for row in rows if row.kind == "diagnostic"]
        if diagnostics:
            lines += ["", f"| {experiment} ({scale}) diagnostic | {marks} | holds |", rule, *diagnostics]
        found = [
            _finding(row, (diagnoses or {}).get(row.key)) for row in rows if row.kind == "paper" and row.holds is False
        ]
        if found:
            lines += ["", "Does not reproduce here (measured, per seed):", "", *found]
        sections.append("\n".join(lines))
    return (
        "# Claims × seeds\n\n"
        f"Written by `iclab report ROOT --seed-table PATH` from the runs under ROOT ({COUNTED_RUNS}). The rule: "
        f"{SEED_RULE}; a claim judged over seeds together holds when the mean of its seeds' statistic exceeds the "
        "stated number of standard errors. ✓ holds, ✗ fails, ○ measured but judged at another scale or over seeds "
        "together (neither), – not in that run. A "
        "paper claim that fails by the rule does not reproduce here (✗ does not reproduce): a finding, with its "
        "measured values listed under its section; a diagnostic (iclab's own check) that fails by the rule is "
        f"marked ⚠. A paper claim marked (theory) is {THEORY_NOTE}.\n\n"
        + "\n\n".join(sections)
        + _variants(board)
        + f"\n\nWall times (on whatever machine and load ran them; not budgets): {'; '.join(walls) or 'none'}.\n"
    )


def _variants(board: Scoreboard) -> str:
    """The variants and the runs of an older recipe or older claims under the root, with what separates each
    from the current recipe (never counted above)."""
    apart = [r for r in board.runs if r.status in (_VARIANT, _OLDER)]
    lines = [f"- {r.folder.path.name} ({r.experiment}, {r.scale}, {r.label}): {r.status_text()}" for r in apart]
    if not lines:
        return ""
    return (
        "\n\nNot counted: variants (a config that differs from the scale's recipe) and runs of an older recipe or "
        "older claims (their fingerprint is not the current one):\n\n" + "\n".join(lines)
    )


def _seed_row(row: ClaimRow, seeds: list[int], paper: bool) -> str:
    """A claim's line: its mark per seed, the count over seeds and, for a paper claim, the paper's number."""
    by_seed = {seed: claim for _, seed, claim in row.results}
    marks = [VERDICT_MARKS[by_seed[s]["holds"]] if s in by_seed else "–" for s in seeds]
    theory = " (theory)" if is_theory(row.latest) else ""
    line = f"| `{row.id}`{theory} | " + " | ".join(marks) + f" | {_count(row)} |"
    if not paper:
        return line
    number = row.latest.get("paper_value")
    return line + (f" {measured_text(number)} |" if number is not None else " – |")


def _finding(row: ClaimRow, diagnosis: str | None) -> str:
    """A paper claim that does not reproduce: each seed's measured value, the paper's number and the diagnosis."""
    paper = row.latest.get("paper_value")
    values = "; ".join(f"seed {seed}: {measured_text(claim['measured'])}" for _, seed, claim in row.results)
    if row.seed_test is not None:
        values += f"; over seeds: {row.seed_test_text()}"
    return (
        f"- `{row.id}`: {values}"
        + (f" (the paper: {measured_text(paper)})" if paper is not None else "")
        + (f". Diagnosis: {diagnosis}" if diagnosis else "")
    )


def _count(row: ClaimRow) -> str:
    """``4/5``, ``3/5 ✗ does not reproduce`` (a paper claim), ``3/5 ⚠`` (a diagnostic), ``2/2 (+1 judged at
    long scale)`` or ``judged at long scale``."""
    if row.seed_test is not None:
        mark = "" if row.holds is not False else " ✗ does not reproduce" if row.kind == "paper" else " ⚠"
        return row.seed_test_text() + mark
    if row.holds is None:
        return f"judged at {row.judged_at()} scale"
    more = f" (+{len(row.elsewhere)} judged at {row.judged_at()} scale)" if row.elsewhere else ""
    mark = "" if row.holds else " ✗ does not reproduce" if row.kind == "paper" else " ⚠"
    return f"{row.held}/{row.judged}{mark}{more}"


def write_seed_table(
    root: str | Path,
    path: str | Path,
    recipes: Callable[[str, str], Recipe | None] | None = None,
    diagnoses: Mapping[tuple, str] | None = None,
) -> Path:
    """Write :func:`seed_table` of ``root`` to ``path`` (its folder is created; ``recipes``: see
    :func:`aggregate`; ``diagnoses``: see :func:`write_index`)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, seed_table(root, recipes, diagnoses))
    except OSError as err:
        raise ConfigError(f"cannot write {path}: {err.strerror}") from None
    return path
