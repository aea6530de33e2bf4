"""Write docs/claim-costs.md: where each counted evaluation run's time went, part by part, and so what each claim costs.

    python tools/claim_costs.py [ROOT]   # ROOT: the evaluation runs or their records (default results; `make pages`)

Every run the scoreboard counts under ROOT that recorded its time (``run.json`` ``time``, :mod:`iclab.ledger`) gets
a table: each part of the experiment, its wall time and share of the run, the models it trained (and reused from
another part) and the claims that need it, with each claim's verdict over the run's seeds. Nothing is typed: the
page is the runs' own records.
"""

from __future__ import annotations

import sys
from pathlib import Path

from iclab.api import recipe
from iclab.formatting import duration
from iclab.report import aggregate
from iclab.report.html import time_rows
from iclab.report.index import VERDICT_MARKS
from iclab.runs import RunFolder

PAGE = Path(__file__).resolve().parent.parent / "docs" / "claim-costs.md"

HEAD = """# What each claim costs

*Written by `python tools/claim_costs.py ROOT` from the counted runs on the evaluation seeds; do not edit by hand.*

Each run books its wall time to the parts of its experiment (`ctx.part`, see [the design](design.md)): a part's time
is its training and its evaluation over all the run's seeds (most models train the seeds together). A claim needs
the parts that serve it and the models they reuse from other parts, so its cost is their time; claims of one part
share it, and the shares of a run do not add up to one. The rest of the wall time (shared set-up, figures drawn
outside a part, claims judged over seeds, writing the metrics) is outside every part. A run finished by a resume
adds the training its earlier sessions did (its checkpoints record it; runs written before 2026-11-28 time only
their last session). Verdicts over the run's seeds, marked as in [the seed table](seed-table.md): ✓ holds,
✗ does not reproduce, ○ judged at another scale.
"""


def _timed(run) -> tuple[dict, str] | None:
    """The ``run.json`` whose time books a counted run's claims and a note, or None where none recorded its time: a
    run judged again by ``iclab rejudge`` evaluated the models another run trained, so that run's time is what its
    claims cost."""
    parent, info, name = None, run.info, run.folder.path.name
    # Judged again, maybe more than once: the run that trained the models. One moved to its source's name has no
    # other record to go back to.
    while info.get("rejudged_from") not in (None, name):
        parent = name = info["rejudged_from"]
        info = RunFolder.open(run.folder.path.parent / parent).read_info()
    if parent:
        note = f"; its models were trained by `{parent}`, whose time this is (judged again)"
    else:
        note = ", finished by a resume" if info.get("resumed") else ""
    return (info, note) if info.get("time") else None


def section(run, info: dict, note: str) -> list[str]:
    """One run's markdown tables (``info, note``: :func:`_timed`'s): its parts, then its claims, the costliest
    first."""
    spent = info["time"]
    holds = {c["id"]: c["holds"] for c in run.claims}
    parts, claims = time_rows(spent)
    commit = info.get("commit", "")[:7] or "unknown commit"
    lines = [
        f"## {run.experiment} ({run.scale}, {run.label})",
        "",
        f"`{run.folder.path.name}`: {duration(spent['wall_seconds'])} of wall on {info.get('threads', '?')} "
        f"thread(s), commit {commit}{note}.",
        "",
        "| part | time | share | models trained, reused | claims it serves |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, time, share, models, served in parts:
        lines.append(f"| {name} | {time} | {share} | {', '.join(models)} | {', '.join(f'`{c}`' for c in served)} |")
    lines += ["", "| claim | verdict | cost | share | parts | reused models |", "| --- | --- | --- | --- | --- | --- |"]
    costliest = sorted(claims, key=lambda row: -spent["claims"][row[0]]["seconds"])
    for claim, cost, share, needed, reused in costliest:
        mark = VERDICT_MARKS[holds[claim]] if claim in holds else "–"  # a claim the current claims no longer have
        lines.append(f"| `{claim}` | {mark} | {cost} | {share} | {', '.join(needed)} | {', '.join(reused)} |")
    return [*lines, ""]


def page(root: Path) -> str:
    """The page's markdown from the runs under ``root``."""
    timed = [(r, found) for r in aggregate(root, recipe).counted() if (found := _timed(r))]
    timed.sort(key=lambda pair: (pair[0].experiment, pair[0].scale))
    body = [line for run, (info, note) in timed for line in section(run, info, note)]
    if not body:
        body = ["No counted run under the evaluation root recorded its time yet.", ""]
    return HEAD + "\n" + "\n".join(body)


def main(root: Path) -> None:
    PAGE.write_text(page(root), encoding="utf-8")
    print(PAGE)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results"))
