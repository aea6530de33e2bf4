"""Five seeds in one run against one seed alone: each experiment's wall time, and where it goes.

Run from the repository root, on a quiet machine (the times are the measurement):

    python benchmarks/seeds_scaling.py [--only EXP,...] [--scale quick] [--seeds 5] [--threads 2]

For each experiment, in this process with one thread count: a run of seed 100 alone, then a run of seeds
100 to 100 + seeds − 1 (trained together, each judged: ``Experiment.run_seeds``), each into a temporary
folder. Stored per experiment under ``"seeds_scaling"`` of ``benchmarks/results.json`` (other
experiments kept): both wall times, their ratio (the target: at most 2.5 for five seeds) and, for each
run, the seconds spent in training (every :func:`iclab.train.train` call) and in the rest (evaluation,
reference learners, probes, figures, the report).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from train_throughput import RESULTS, store_result

from iclab import api, experiments
from iclab.experiments import base

TARGET = 2.5


def timed_run(experiment: str, scale: str, seeds: int, folder: Path) -> dict:
    """Wall seconds of one run of ``seeds`` seeds from seed 100, and the seconds of it spent training."""
    training, train = [0.0], base.train_models

    def timed_train(*args, **kwargs):
        start = time.perf_counter()
        try:
            return train(*args, **kwargs)
        finally:
            training[0] += time.perf_counter() - start

    base.train_models = timed_train
    try:
        start = time.perf_counter()
        api.run(experiment, scale, seeds=seeds, overrides={"seed": 100}, out=folder, progress=False)
        wall = time.perf_counter() - start
    finally:
        base.train_models = train
    return {
        "wall_seconds": round(wall, 1),
        "training_seconds": round(training[0], 1),
        "rest_seconds": round(wall - training[0], 1),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="these experiments (comma-separated; default: every one)")
    parser.add_argument("--scale", default="quick")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = args.only.split(",") if args.only else experiments.names()
    stored = json.loads(RESULTS.read_text()).get("seeds_scaling", {}) if RESULTS.exists() else {}
    found = stored.get("experiments", {})
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            one = timed_run(name, args.scale, 1, Path(scratch) / f"{name}-1")
            many = timed_run(name, args.scale, args.seeds, Path(scratch) / f"{name}-{args.seeds}")
            found[name] = {
                "scale": args.scale,
                "one_seed": one,
                f"{args.seeds}_seeds": many,
                "ratio": round(many["wall_seconds"] / one["wall_seconds"], 2),
                "meets_target": many["wall_seconds"] <= TARGET * one["wall_seconds"],
            }
            print(
                f"{name}: 1 seed {one['wall_seconds']} s, {args.seeds} seeds {many['wall_seconds']} s, "
                f"ratio {found[name]['ratio']} (training {one['training_seconds']} → {many['training_seconds']} s, "
                f"the rest {one['rest_seconds']} → {many['rest_seconds']} s)",
                flush=True,
            )
    result = {"threads": args.threads, "seeds": args.seeds, "target_ratio": TARGET, "experiments": found}
    store_result("seeds_scaling", result)
    return result


if __name__ == "__main__":
    main()
