"""The claim × seed pass table of the quick reproduction (issue: claims that hold for every seed).

    .venv/bin/python scripts/seed_table.py                      # run every experiment for seeds 0-4, write the table
    .venv/bin/python scripts/seed_table.py --existing           # only rebuild the table from finished run folders
    .venv/bin/python scripts/seed_table.py --experiments gpt-linear --seeds 0 1

Runs go to ``<runs>/<experiment>-seed<S>/`` (an existing finished folder is reused, so an
interrupted table resumes); the table is written to ``docs/seed-table.md``: one row per claim,
one column per seed, and how many seeds it holds on. A claim holding on fewer than
``--required`` seeds is flagged.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from iclab import api, experiments


def _run(experiment: str, seed: int, folder: Path, scale: str) -> tuple[list[dict], float | None]:
    """The claims of one (experiment, seed) run, running it unless its folder has finished."""
    if not (folder / "claims.json").exists():
        start = time.perf_counter()
        api.run(experiment, scale=scale, overrides={"seed": seed}, out=folder, progress=False)
        (folder / "wall_seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
    wall, info = folder / "wall_seconds", folder / "run.json"
    if wall.exists():
        seconds = float(wall.read_text())
    else:  # a run folder made elsewhere (e.g. by iclab reproduce) records its own time
        seconds = json.loads(info.read_text()).get("wall_seconds") if info.exists() else None
    return json.loads((folder / "claims.json").read_text()), seconds


def _table(experiment: str, results: dict[int, list[dict]], required: int) -> list[str]:
    seeds = sorted(results)
    ids = list(dict.fromkeys(c["id"] for s in seeds for c in results[s]))
    verdict = {(s, c["id"]): c["holds"] for s in seeds for c in results[s]}
    lines = [f"| {experiment} claim | " + " | ".join(f"seed {s}" for s in seeds) + " | holds |",
             "|---|" + "---|" * (len(seeds) + 1)]
    for claim in ids:
        marks = [{True: "✓", False: "✗", None: "–"}[verdict.get((s, claim))] for s in seeds]
        held = sum(m == "✓" for m in marks)
        flag = "" if held >= min(required, len(seeds)) else " ⚠"
        lines.append(f"| `{claim}` | " + " | ".join(marks) + f" | {held}/{len(seeds)}{flag} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", nargs="*", default=experiments.names())
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--runs", default="runs/seeds", help="where the run folders go (default runs/seeds)")
    parser.add_argument("--scale", default="quick")
    parser.add_argument("--required", type=int, default=4, help="seeds a claim must hold on (default 4)")
    parser.add_argument("--out", default="docs/seed-table.md")
    parser.add_argument("--existing", action="store_true", help="table the finished run folders only; run nothing")
    args = parser.parse_args()

    results: dict[str, dict[int, list[dict]]] = {}
    walls = []
    for experiment in args.experiments:  # the table is rewritten after every run, so a partial one survives
        for seed in args.seeds:
            folder = Path(args.runs) / f"{experiment}-seed{seed}"
            if args.existing and not (folder / "claims.json").exists():
                continue
            claims, wall = _run(experiment, seed, folder, args.scale)
            results.setdefault(experiment, {})[seed] = claims
            walls.append(f"{experiment} seed {seed}: " + (f"{wall:.0f} s" if wall is not None else "?"))
            _write(Path(args.out), results, walls, args)


def _write(out: Path, results: dict, walls: list[str], args) -> None:
    sections = ["\n".join(_table(experiment, by_seed, args.required)) for experiment, by_seed in results.items()]
    out.write_text(
        "# Claims × seeds at quick scale\n\n"
        f"Regenerate with `.venv/bin/python scripts/seed_table.py` (runs every experiment at `--scale {args.scale}` "
        f"for seeds {args.seeds}"
        + ("; this table holds only the seeds whose runs have finished, `--existing`" if args.existing else "")
        + f"). ✓ holds, ✗ fails; ⚠ marks a claim holding on fewer than {args.required} seeds.\n\n"
        + "\n\n".join(sections) + "\n\nWall times (on whatever machine and load ran the table; not budgets): " + "; ".join(walls) + ".\n"
    )


if __name__ == "__main__":
    main()
