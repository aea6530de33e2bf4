"""What a scale's recipe (by default the paper's) costs to train one seed on this machine, measured, not run.

Run from the repository root, on a quiet machine (the times are the measurement):

    python benchmarks/recipe_cost.py [EXPERIMENT ...] [--scale paper] [--steps 20] [--threads T] [--set KEY=VALUE]

For each experiment (default: every built-in one whose scale resolves here) a timed run of one seed
(:func:`iclab.api.time_recipe`) trains each of its models a few steps with the experiment's smaller evaluation and
records each model's seconds per step; the estimate is the recipe's planned steps × those seconds, summed over its
models (the evaluation's own cost is not in it). Each estimate goes into ``iclab/experiments/times.json`` under the
scale (``"estimated": true``, with the steps timed, each model's numbers, the threads, device, commit and date;
other experiments and scales kept), which ``iclab list`` and ``iclab show`` print, and under the key
``"recipe_cost"`` of ``benchmarks/results.json``. An experiment whose scale needs data this machine does not have
(symbols-lm's paper scale reads Wikitext-2) is reported and skipped, unless ``--set`` points it at a stand-in of the
same shapes (``--set data.path=FOLDER`` of ``generated_wikitext.py``); the estimate records the keys so changed
(``"overrides"``), and the non-reproductions page names them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import torch
from train_throughput import store_result

from iclab import api, experiments
from iclab.config import ConfigError, parse_assignment
from iclab.experiments import TIMES


def _commit() -> str | None:
    """The checkout's commit (7 digits), or None outside a git checkout."""
    try:
        found = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None


def record_estimates(estimates: dict[str, dict], scale: str, path: Path, overrides: dict | None = None) -> dict:
    """Store each experiment's estimate (:func:`iclab.api.time_recipe`'s result) under ``scale`` in ``path``, with
    the ``overrides`` its timed run took (none: the scale's own recipe)."""
    times = json.loads(path.read_text()) if path.exists() else {}
    commit, date = _commit(), dt.date.today().isoformat()
    for experiment, found in estimates.items():
        times.setdefault("experiments", {}).setdefault(experiment, {})[scale] = {
            **({"overrides": overrides} if overrides else {}),
            "seconds": round(found["seconds"], 1),
            "estimated": True,
            "timed_steps": found["timed_steps"],
            "models": {
                name: {"planned_steps": m["planned_steps"], "step_seconds": round(m["step_seconds"], 5)}
                for name, m in found["models"].items()
            },
            "runs": 1,
            "seeds_per_run": 1,
            "threads": found["threads"],
            "jobs": 1,
            "device": found["device"],
            "commit": commit,
            "date": date,
            "cpus": os.cpu_count(),
        }
    path.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", help="the experiments (default: every built-in one)")
    parser.add_argument("--scale", default="paper", help="the scale whose recipe is timed (default: paper)")
    parser.add_argument("--steps", type=int, default=20, help="steps each model trains in the timed run")
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="a config value changed"
    )
    args = parser.parse_args(argv)
    overrides = dict(parse_assignment(text) for text in args.overrides)
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.experiments or experiments.names()
    result = {"scale": args.scale, "estimates": {}, "skipped": {}}
    for name in names:
        try:
            found = api.time_recipe(name, args.scale, args.steps, overrides=overrides)
        except ConfigError as err:
            result["skipped"][name] = str(err)
            print(f"{name} ({args.scale}): not timed: {err}", flush=True)
        else:
            result["estimates"][name] = found
            record_estimates({name: found}, args.scale, TIMES, overrides)
            print(
                f"{name} ({args.scale}): {found['seconds'] / 3600:.2f} h a seed of training on {found['threads']} "
                f"thread(s) of {found['device']} (timed run: {found['wall_seconds']:.0f} s)",
                flush=True,
            )
        # Stored as each finishes: a timed run of a paper recipe can take most of an hour, and stopping a
        # session's later ones must not lose the earlier ones.
        store_result("recipe_cost", result)
    return result


if __name__ == "__main__":
    main()
