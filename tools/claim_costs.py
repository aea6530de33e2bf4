"""Write docs/claim-costs.md: where each counted evaluation run's time went, part by part, and so what each claim costs.

    python tools/claim_costs.py [ROOT]   # ROOT: a reproduction on the evaluation seeds (default runs/eval)

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
from iclab.ledger import models_text
from iclab.report import aggregate

PAGE = Path(__file__).resolve().parent.parent / "docs" / "claim-costs.md"

HEAD = """# What each claim costs

*Written by `python tools/claim_costs.py ROOT` from the counted runs on the evaluation seeds; do not edit by hand.*

Each run books its wall time to the parts of its experiment (`ctx.part`, see [the design](design.md)): a part's time
is its training and its evaluation over all the run's seeds (most models train the seeds together). A claim needs
the parts that serve it and the models they reuse from other parts, so its cost is their time; claims of one part
share it, and the shares of a run do not add up to one. The rest of the wall time (shared set-up, figures drawn
outside a part, claims judged over seeds, writing the metrics) is outside every part. A run finished by a resume
times only its last session. Verdicts over the run's seeds: ✓ holds, ✗ does not reproduce, – not judged at this
scale (see [the seed table](seed-table.md)).
"""


def _verdict(claim: dict | None) -> str:
    if claim is None or claim.get("holds") is None:
        return "–"
    return "✓" if claim["holds"] else "✗"


def section(run) -> list[str]:
    """The markdown table of one run's parts."""
    spent = run.info["time"]
    claims = {c["id"]: c for c in run.claims}
    commit = run.info.get("commit", "")[:7] or "unknown commit"
    lines = [
        f"## {run.experiment} ({run.scale}, {run.label})",
        "",
        f"`{run.folder.path.name}`: {duration(spent['wall_seconds'])} of wall on {run.info.get('threads', '?')} "
        f"thread(s), commit {commit}{', finished by a resume' if run.info.get('resumed') else ''}.",
        "",
        "| part | time | share | models trained, reused | claims it serves |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, part in spent["parts"].items():
        served = ", ".join(f"`{c}`" for c in part["claims"])
        lines.append(f"| {name} | {duration(part['seconds'])} | {part['share']:.0%} | {models_text(part)} | {served} |")
    outside = ", ".join(spent.get("outside_parts_training", {}))
    lines.append(f"| outside parts | {duration(spent['outside_parts_seconds'])} | | {outside} | |")
    lines += ["", "| claim | verdict | cost | share | parts | reused models |", "| --- | --- | --- | --- | --- | --- |"]
    for claim, cost in sorted(spent["claims"].items(), key=lambda item: -item[1]["seconds"]):
        lines.append(
            f"| `{claim}` | {_verdict(claims.get(claim))} | {duration(cost['seconds'])} | {cost['share']:.0%} | "
            f"{', '.join(cost['parts'])} | {', '.join(cost['reused'])} |"
        )
    return [*lines, ""]


def main(root: Path) -> None:
    runs = [r for r in aggregate(root, recipe).counted() if r.info.get("time")]
    body = [line for run in sorted(runs, key=lambda r: (r.experiment, r.scale)) for line in section(run)]
    if not body:
        body = ["No counted run under the evaluation root recorded its time yet.", ""]
    PAGE.write_text(HEAD + "\n" + "\n".join(body), encoding="utf-8")
    print(f"{PAGE}: {len(runs)} runs")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/eval"))
