"""What every parity driver shares: the seeds, running the authors' code in its own environment, running iclab at
the same recipe, and writing the record (:class:`iclab.parity.ParityRecord`) under ``results/parity/``.

A driver (one per peer code base: ``garg.py``, ``boix_adsera.py``, …) takes the path of the authors' repository,
fetched into a folder outside this project (never committed, never vendored), and the Python of the environment
their code runs in (``--python``: a venv of their own for JAX peers). It lists its comparisons as
:class:`Comparison`s, each one recipe and the quantity a claim reads, and measures each on both sides, one seed
after another, nothing else running. ``--only`` picks comparisons by quantity id; a comparison whose record exists
is kept unless ``--again`` (both sides again) or ``--iclab-again`` (iclab's side again after a fix, the authors'
side kept from the record).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from iclab import api  # noqa: E402
from iclab.parity import ParityRecord, Side  # noqa: E402
from iclab.runs import RunFolder  # noqa: E402

SEEDS = (0, 1, 2)
"""Three seeds below 100 on each side (the evaluation seeds 100–104 are never used for parity)."""
RECORDS = ROOT / "results" / "parity"


@dataclass
class Comparison:
    """One quantity at one recipe: ``authors(seed)`` and ``iclab(seeds)`` measure it (the authors' code one seed per
    call; iclab all seeds in one run, trained together), each returning values in seed order.

    ``claims``, ``control``, ``test``, ``paper`` and ``description`` go to the record as they are
    (:class:`iclab.parity.ParityRecord`)."""

    quantity: str
    description: str
    claims: list[str]
    recipe: dict[str, Any]
    authors: Callable[[int], float]
    iclab: Callable[[Sequence[int]], list[float]]
    control: bool = False
    test: dict[str, Any] | None = None
    paper: str = ""
    authors_note: str = ""
    iclab_note: str = ""
    notes: list[str] = field(default_factory=list)


def arguments(description: str) -> argparse.Namespace:
    """The command line every driver takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--peer", type=Path, required=True, help="the authors' repository (a folder outside iclab)")
    parser.add_argument("--peer-commit", default="", help="the commit the peer folder was taken from")
    parser.add_argument("--python", default=sys.executable, help="the Python of the peer's environment")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--only", nargs="+", help="quantity ids to measure (default: every comparison)")
    parser.add_argument("--again", action="store_true", help="measure comparisons whose record exists again")
    parser.add_argument(
        "--iclab-again",
        action="store_true",
        help="measure iclab's side of recorded comparisons again, the authors' kept (same recipe, seeds and peer)",
    )
    parser.add_argument("--records", type=Path, default=RECORDS, help="where the records go")
    parser.add_argument("--list", action="store_true", help="list the comparisons and exit")
    args = parser.parse_args()
    if not args.peer.is_dir():
        parser.error(f"--peer {args.peer}: no such folder")
    return args


def run_peer(args: argparse.Namespace, script: Path, options: Sequence[str]) -> dict:
    """Run ``script`` (a runner of this folder that imports the peer's code) in the peer's Python and return the JSON
    it writes to ``--out``; a failure stops the driver with the runner's last lines."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [args.python, str(script), "--peer", str(args.peer), "--threads", str(args.threads)]
        done = subprocess.run([*command, *options, "--out", str(out)], capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise SystemExit(f"the authors' side failed ({' '.join(command[1:])} {' '.join(options)}):\n{tail}")
        return json.loads(out.read_text())


def run_iclab(experiment: str, overrides: Sequence[str], seeds: Sequence[int], threads: int) -> RunFolder:
    """iclab's experiment at the recipe (``overrides`` of its quick scale) on ``seeds`` (consecutive), in a
    temporary folder; returns the finished run folder (read it before the process ends)."""
    import torch

    torch.set_num_threads(threads)
    if list(seeds) != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"iclab trains consecutive seeds together; got {list(seeds)}")
    out = Path(tempfile.mkdtemp(prefix=f"parity-{experiment}-"))
    result = api.run(experiment, "quick", len(seeds), [f"seed={seeds[0]}", *overrides], out=out / "run", progress=False)
    return result.folder


def _kept_authors(path: Path, c: Comparison, args: argparse.Namespace, peer: dict) -> tuple[Side | None, str | None]:
    """The authors' side of the record at ``path`` and its date, for ``--iclab-again``: their code has not changed,
    so it is kept where the record has the comparison's recipe and seeds and the same peer commit."""
    if not path.exists():
        raise SystemExit(f"--iclab-again: no record of {c.quantity} to keep the authors' side of ({path})")
    old = ParityRecord.read(path)
    if old.recipe != c.recipe or old.seeds != list(args.seeds) or old.peer.get("commit") != peer.get("commit"):
        raise SystemExit(f"--iclab-again: {path} has another recipe, seeds or peer commit; measure both with --again")
    return old.authors, old.date


def iclab_commit() -> str:
    """iclab's commit, marked ``-dirty`` when tracked files other than records differ from it (a run's own records,
    written as it goes, do not make the code it measures another)."""
    git = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()
    changed = git("status", "--porcelain", "-uno", "--", ".", ":(exclude)results")
    return git("rev-parse", "--short", "HEAD") + ("-dirty" if changed else "")


def measure(args: argparse.Namespace, experiment: str, peer: dict[str, str], comparisons: list[Comparison]) -> None:
    """Measure each comparison on both sides and write its record; print a line each."""
    if args.list:
        for c in comparisons:
            print(f"{c.quantity}: {c.description} ({', '.join(c.claims)})")
        return
    chosen = [c for c in comparisons if not args.only or c.quantity in args.only]
    for c in chosen:
        path = args.records / experiment / f"{c.quantity}.json"
        kept, kept_date = _kept_authors(path, c, args, peer) if args.iclab_again else (None, None)
        if path.exists() and not args.again and kept is None:
            print(f"{c.quantity}: kept ({path})")
            continue
        start = time.perf_counter()
        theirs = kept.values if kept else [c.authors(seed) for seed in args.seeds]
        their_seconds = kept.seconds if kept else time.perf_counter() - start
        start = time.perf_counter()
        ours = c.iclab(args.seeds)
        our_seconds = time.perf_counter() - start
        record = ParityRecord(
            experiment=experiment,
            quantity=c.quantity,
            description=c.description,
            claims=c.claims,
            recipe=c.recipe,
            seeds=list(args.seeds),
            iclab=Side([float(v) for v in ours], round(our_seconds, 1), c.iclab_note),
            authors=Side([float(v) for v in theirs], round(their_seconds, 1), kept.note if kept else c.authors_note),
            peer=peer,
            control=c.control,
            test=c.test,
            paper=c.paper,
            commit=iclab_commit(),
            date=dt.date.today().isoformat(),
            notes=c.notes + ([f"the authors' side as measured on {kept_date}"] if kept else []),
        )
        record.write(args.records)
        print(f"{c.quantity}: iclab {record.iclab.values}, authors {record.authors.values} ({path})", flush=True)
