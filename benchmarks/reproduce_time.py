"""Wall time of the whole quick reproduction (every experiment on the five evaluation seeds), beside
this machine's matmul rate.

Run from the repository root, on a quiet machine (the time is the measurement):

    python benchmarks/reproduce_time.py [--out DIR] [--jobs N]  # runs `iclab reproduce --scale quick
                                                        # --jobs N` (default 2, as `make reproduce`)
                                                        # into DIR (default: a temporary folder)
    python benchmarks/reproduce_time.py --existing DIR  # reads a finished reproduction's run folders instead

Writes the key ``"reproduce_time"`` of ``benchmarks/results.json`` (other keys kept), and each
experiment's measured time per run at each scale into ``iclab/experiments/times.json`` (what ``iclab list``
and ``iclab show`` print; other experiments and scales kept): the total wall
time, the runs at a time (``jobs``), each counted run's experiment, seeds, wall and CPU time (from
its ``run.json``), torch's thread count and the float32 matmul rate measured in this process with that thread count
(``train_throughput.matmul_flops``). ``wall_x_matmul_gflop`` (wall seconds × GFLOP/s: the GFLOP
this machine's matmuls could do in that time) puts two machines on one scale: its ratio between
them says how much of their difference in wall time their matmul rates do not explain.

A fresh reproduction's total is the wall time of the whole command (every run, figure, report and
the index); ``--existing`` adds up its counted runs' own wall times (see ``iclab.report.aggregate``)
and measures the matmul rate now, so the folder must come from this machine. No path is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from train_throughput import matmul_flops, store_result

from iclab import api
from iclab.experiments import TIMES
from iclab.report import aggregate


def summarise(board, total_wall: float, source: str, threads: int, gflops: float, jobs: int | None) -> dict:
    """The stored result of the counted runs of ``board`` (an :func:`iclab.report.aggregate`)."""
    runs = [
        {
            "experiment": r.experiment,
            "scale": r.scale,
            "seeds": r.seeds,
            "wall_seconds": r.wall,
            "cpu_seconds": r.info.get("cpu_seconds"),
            "threads": r.info.get("threads"),
        }
        for r in board.counted()
    ]
    return {
        "source": source,
        "scales": sorted({r["scale"] for r in runs}),
        "threads": threads,
        "jobs": jobs,
        "matmul_gflops": gflops,
        "total_wall_seconds": total_wall,
        "total_cpu_seconds": sum(r["cpu_seconds"] or 0 for r in runs),
        "wall_x_matmul_gflop": total_wall * gflops,
        "runs": runs,
    }


def record_times(board, jobs: int | None, path: Path) -> dict:
    """Store, per experiment and scale of the counted runs of ``board`` that trained their models (not judged again),
    the median wall time of a run and how its runs ran (seeds per run, threads, runs at a time, commit, date, CPUs)
    in ``path``."""
    times = json.loads(path.read_text()) if path.exists() else {}
    groups: dict[tuple, list] = {}
    for run in board.counted():
        if not run.rejudged_from:  # a run judged again timed only its evaluation of another run's models
            groups.setdefault((run.experiment, run.scale), []).append(run)
    for (experiment, scale), runs in groups.items():
        times.setdefault("experiments", {}).setdefault(experiment, {})[scale] = {
            "seconds": round(statistics.median(r.wall for r in runs), 1),
            "runs": len(runs),
            "seeds_per_run": statistics.mode(r.config.get("seeds", 1) for r in runs),
            "threads": statistics.mode(r.info.get("threads") for r in runs),
            "jobs": jobs,
            "commit": statistics.mode(r.info.get("commit", "")[:7] for r in runs) or None,
            "date": max(r.info.get("started", "") for r in runs)[:10],
            "cpus": os.cpu_count(),
        }
    path.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="run the reproduction into this folder (default: a temporary one)")
    where.add_argument(
        "--existing", type=Path, metavar="DIR", help="read this finished reproduction instead of running"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        help="experiments at a time: of the reproduction this runs (default 2, as make reproduce), or, with "
        "--existing, of the one that ran (recorded; unknown if not given)",
    )
    args = parser.parse_args(argv)
    if args.existing is not None:
        board = aggregate(args.existing)
        if not board.counted():
            raise SystemExit(f"{args.existing}: no finished run folders")
        threads = {r.info.get("threads") for r in board.counted()} - {None}
        if len(threads) == 1:  # the matmul rate at the runs' own thread count
            torch.set_num_threads(threads.pop())
        total, source = sum(r.wall or 0 for r in board.counted()), "the counted runs' own wall times (--existing)"
        jobs = args.jobs  # not known from the folders: as the caller says
    else:
        args.jobs = args.jobs or 2
        with tempfile.TemporaryDirectory() as scratch:
            root = args.out or Path(scratch)
            start = time.perf_counter()
            api.reproduce(scale="quick", root=root, progress=False, jobs=args.jobs)
            total, source = time.perf_counter() - start, f"iclab reproduce --scale quick --jobs {args.jobs}, run here"
            jobs = args.jobs
            board = aggregate(root)
    result = summarise(board, total, source, torch.get_num_threads(), matmul_flops() / 1e9, jobs)
    print(
        f"{len(result['runs'])} runs, {result['total_wall_seconds']:.0f} s wall ({source}); matmul "
        f"{result['matmul_gflops']:.1f} GFLOP/s on {result['threads']} threads; wall x matmul "
        f"{result['wall_x_matmul_gflop']:.0f} GFLOP"
    )
    store_result("reproduce_time", result)
    record_times(board, jobs, TIMES)
    return result


if __name__ == "__main__":
    main()
