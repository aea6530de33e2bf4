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

from ..runs import RunFolder, write_atomic
from .html import claim_anchor, cell, duration, figure_anchor, figure_title, link, page, seeds, table, value, verdict


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


_CLAIM_HEADERS = ["claim", "the paper says", "measured", "expected", "verdict", "seeds", "run", "evidence"]


def _claim_row(run: _Run, claim: dict) -> str:
    figure = claim.get("figure")
    evidence = link(run.report, f"figure: {figure_title(figure)}", figure_anchor(figure)) if figure in run.figures else "—"
    return (
        f"<tr>{cell('claim', link(run.report, claim['id'], claim_anchor(claim['id'])))}"
        f"{cell('the paper says', html.escape(claim['statement']))}{cell('measured', value(claim['measured']))}"
        f"{cell('expected', html.escape(str(claim['expected'])))}{cell('verdict', verdict(claim['holds']))}"
        f"{cell('seeds', seeds(run.config))}{cell('run', run.where())}{cell('evidence', evidence)}</tr>"
    )


def _claims_by_paper(runs: list[_Run]) -> str:
    """One table of every claim, a body per paper under a heading row; a claim's rows from several
    runs (e.g. seeds) stand together."""
    papers: dict[str, dict[str, list[tuple[_Run, dict]]]] = {}
    for run in runs:
        for claim in run.claims:
            papers.setdefault(claim["paper"], {}).setdefault(claim["id"], []).append((run, claim))
    bodies = []
    for k, (paper, by_id) in enumerate(papers.items()):
        rows = [row for same_id in by_id.values() for row in same_id]
        names = ", ".join(dict.fromkeys(run.experiment for run, _ in rows))
        held = sum(claim["holds"] for _, claim in rows)
        heading = (f"<tr class='paper'><th colspan='{len(_CLAIM_HEADERS)}'>{html.escape(paper)} "
                   f"<small>({html.escape(names)}; {held} of {len(rows)} hold)</small></th></tr>")
        bodies.append(f"<tbody id='paper-{k + 1}'>{heading}{''.join(_claim_row(*row) for row in rows)}</tbody>")
    return table(_CLAIM_HEADERS, bodies, bodies=True)


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
    write_atomic(index, page("iclab scoreboard", body))
    return index
