"""The scoreboard: ``index.html`` across a folder of runs.

One table of claims grouped by paper (what the paper says, what this run measured, what was
expected, the verdict, the seeds, the run's time and device, links to the claim and its figure
in the run's report), a table of the runs with their times, and a summary line on top.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from pathlib import Path

from ..runs import RunFolder
from .html import claim_anchor, cell, duration, figure_anchor, link, page, seeds, table, value, verdict


def run_folders(root: str | Path) -> list[RunFolder]:
    """The run folders directly inside ``root`` (those holding a ``config.yaml``), by name."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [RunFolder(p) for p in sorted(root.iterdir()) if (p / "config.yaml").is_file()]


class _Run:
    """What the scoreboard shows of one run folder."""

    def __init__(self, run: RunFolder, root: Path):
        self.folder, self.config, self.info = run, run.read_config(), run.read_info()
        self.claims = run.read_claims()
        self.figures = {f.stem for f in run.figures()}
        self.report = os.path.relpath(run.report_file, root)
        self.experiment = self.config.get("experiment", run.path.name)
        self.wall = self.info.get("wall_seconds")

    def where(self) -> str:
        """The run, its wall time and device, in a few words."""
        words = [duration(self.wall), self.info.get("device")] if self.info else ["not finished"]
        return f"{link(self.report, self.folder.path.name)} · {html.escape(' · '.join(w for w in words if w))}"


def _runs_table(runs: list[_Run]) -> str:
    rows = []
    for r in runs:
        held = sum(c["holds"] for c in r.claims)
        tally = (f"<span class='{'ok' if held == len(r.claims) else 'fail'}'>{held} / {len(r.claims)}</span>"
                 if r.folder.finished else "not finished")
        rows.append(
            f"<tr>{cell('experiment', html.escape(r.experiment))}{cell('run', link(r.report, r.folder.path.name))}"
            f"{cell('claims holding', tally)}{cell('scale', html.escape(str(r.config.get('scale'))))}"
            f"{cell('seeds', seeds(r.config))}{cell('wall time', duration(r.wall))}"
            f"{cell('CPU time', duration(r.info.get('cpu_seconds')))}"
            f"{cell('device', html.escape(str(r.info.get('device', '?'))))}</tr>"
        )
    return table(["experiment", "run", "claims holding", "scale", "seeds", "wall time", "CPU time", "device"], rows)


def _claim_row(run: _Run, claim: dict) -> str:
    figure = claim.get("figure")
    evidence = link(run.report, f"figure: {figure}", figure_anchor(figure)) if figure in run.figures else "—"
    return (
        f"<tr>{cell('verdict', verdict(claim['holds']))}"
        f"{cell('claim', link(run.report, claim['id'], claim_anchor(claim['id'])))}"
        f"{cell('statement', html.escape(claim['statement']))}{cell('measured', value(claim['measured']))}"
        f"{cell('expected', html.escape(str(claim['expected'])))}{cell('seeds', seeds(run.config))}"
        f"{cell('run', run.where())}{cell('evidence', evidence)}</tr>"
    )


def _claims_by_paper(runs: list[_Run]) -> str:
    """A table per paper; a claim's rows from several runs (e.g. seeds) stand together."""
    papers: dict[str, dict[str, list[str]]] = {}
    experiments: dict[str, dict[str, None]] = {}
    for run in runs:
        for claim in run.claims:
            papers.setdefault(claim["paper"], {}).setdefault(claim["id"], []).append(_claim_row(run, claim))
            experiments.setdefault(claim["paper"], {})[run.experiment] = None
    headers = ["verdict", "claim", "statement", "measured", "expected", "seeds", "run", "evidence"]
    return "".join(
        f"<section id='paper-{k + 1}'><h3>{html.escape(paper)} <small>({html.escape(', '.join(experiments[paper]))})"
        f"</small></h3>{table(headers, [row for rows in claims.values() for row in rows])}</section>"
        for k, (paper, claims) in enumerate(papers.items())
    )


def write_index(root: str | Path, runs: list[RunFolder]) -> Path:
    """Write ``<root>/index.html``, the scoreboard of ``runs`` (in that order)."""
    root = Path(root)
    shown = [_Run(run, root) for run in runs]
    claims = [c for r in shown for c in r.claims]
    held = sum(c["holds"] for c in claims)
    wall = sum(r.wall or 0 for r in shown)
    unfinished = sum(not r.folder.finished for r in shown)
    summary = (
        f"<p class='summary'><span class='{'ok' if held == len(claims) else 'fail'}'>{held} of {len(claims)} "
        f"claims hold</span> in {len(shown)} runs; wall time {duration(wall)} (sum over runs)"
        + (f"; {unfinished} not finished" if unfinished else "") + ".</p>"
    )
    stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    body = (
        f"<h1>iclab scoreboard</h1>{summary}<p>Written {stamp} from <code>{html.escape(str(root))}</code>.</p>"
        f"<h2 id='claims'>Claims by paper</h2>{_claims_by_paper(shown)}"
        f"<h2 id='runs'>Runs</h2>{_runs_table(shown)}"
    )
    index = root / "index.html"
    index.write_text(page("iclab scoreboard", body))
    return index
