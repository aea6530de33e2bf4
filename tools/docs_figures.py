"""Put the figures of the evaluation runs on the experiments' documentation pages.

    python tools/docs_figures.py [ROOT]   # ROOT: a reproduction on the evaluation seeds (default runs/eval)

For every experiment, the counted quick run of the first evaluation seed under ROOT (the one the
scoreboard counts) gives its figures: they are copied to ``docs/experiments/figures/<experiment>/`` and
shown in a section of ``docs/experiments/<experiment>.md`` (rewritten between its two markers, placed
before the page's first section when it has none), which names the run, its seed, its commit and its
verdicts. The images are committed, so a reader sees the curves before training anything.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from iclab.claims import EVALUATION_SEEDS, summary
from iclab.report import aggregate

DOCS = Path(__file__).resolve().parent.parent / "docs" / "experiments"
BEGIN, END = "<!-- figures: written by tools/docs_figures.py -->", "<!-- /figures -->"


def section(run, figures: list[Path]) -> str:
    """The page's figures section for a counted run and its copied figures."""
    commit = run.info.get("commit", "")[:7] or "unknown commit"
    lines = [
        BEGIN,
        f"## Figures of the evaluation run (quick scale, seed {run.seed})",
        "",
        f"From `{run.folder.path.name}` (commit {commit}, {run.info.get('started', '')[:10]}): {summary(run.claims)}. "
        "The other evaluation seeds' verdicts are in [the seed table](../seed-table.md).",
        "",
    ]
    lines += [f"![{f.stem}](figures/{run.experiment}/{f.name})" + "\n" for f in figures]
    return "\n".join([*lines, END])


def place(page: Path, text: str) -> None:
    """Write ``text`` between the page's markers, or before its first section."""
    old = page.read_text(encoding="utf-8")
    if BEGIN in old:
        head, rest = old.split(BEGIN, 1)
        new = head + text + rest.split(END, 1)[1]
    else:
        head, sep, rest = old.partition("\n## ")
        new = head.rstrip("\n") + "\n\n" + text + "\n" + (sep.lstrip("\n") and "\n## " + rest)
    page.write_text(new, encoding="utf-8")


def main(root: Path) -> None:
    board = aggregate(root)
    for run in board.counted():
        page = DOCS / f"{run.experiment}.md"
        if run.scale != "quick" or run.seed != EVALUATION_SEEDS[0] or not page.exists():
            continue
        if not run.folder.figures():  # a record (results/, `iclab archive`) keeps none: the committed ones stay
            print(f"{run.experiment}: no figures in {run.folder.path} (a record?); left as they are")
            continue
        target = DOCS / "figures" / run.experiment
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        figures = [Path(shutil.copy(f, target / f.name)) for f in run.folder.figures()]
        place(page, section(run, figures))
        print(f"{run.experiment}: {len(figures)} figures from {run.folder.path.name}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/eval"))
