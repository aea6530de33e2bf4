"""Two runs at once against one after the other: with the cores shared between runs, or each on every core.

Run from the repository root, on a quiet machine (the times are the measurement):

    python benchmarks/shared_machine.py [--steps 300]

Each case starts ``iclab run gpt-linear`` (the quick model, ``--steps`` eager steps, a small evaluation)
as separate processes on every CPU thread, and times each process and the whole case:

  - ``alone``: one run;
  - ``two_at_once``: two runs started together, which share the cores.

in three settings: ``shared`` (iclab's default: each run takes its share of the cores, :mod:`iclab.cores`),
``every_core`` (``ICLAB_SHARE_CORES=0``: each run on every core, torch's threads spinning while they
wait) and ``every_core_passive`` (the same with ``OMP_WAIT_POLICY=PASSIVE``: a waiting thread sleeps at
once). Two runs at once cost no more than one after the other when ``two_at_once``'s wall time is at most
twice ``alone``'s. Stored under ``"shared_machine"`` of ``benchmarks/results.json`` (other keys kept).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from train_throughput import store_result

SETTINGS = {
    "shared": {},
    "every_core": {"ICLAB_SHARE_CORES": "0"},
    "every_core_passive": {"ICLAB_SHARE_CORES": "0", "OMP_WAIT_POLICY": "PASSIVE"},
}


def run_at_once(count: int, steps: int, env: dict, scratch: Path) -> dict:
    """Wall seconds of ``count`` gpt-linear runs started together: each one's, and the whole case's."""
    overrides = [f"train.steps={steps}", "train.warmup=0", "train.compile=false", "eval_prompts=500", "bootstrap=50"]
    command = [sys.executable, "-m", "iclab", "run", "gpt-linear", "--seed", "0"]
    command += [arg for key in overrides for arg in ("--set", key)]
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [*command, "--out", str(scratch / f"{time.monotonic_ns()}-{k}")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for k in range(count)
    ]
    each = []
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a run failed: {err.decode()[-2000:]}")
        each.append(round(time.perf_counter() - start, 1))
    return {"each_seconds": each, "wall_seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    result = {"steps": args.steps, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as scratch:
        for policy, settings in SETTINGS.items():
            env = {**os.environ, "PYTHONUNBUFFERED": "1", **settings}
            if "OMP_WAIT_POLICY" not in settings:
                env.pop("OMP_WAIT_POLICY", None)
            alone = run_at_once(1, args.steps, env, Path(scratch))
            both = run_at_once(2, args.steps, env, Path(scratch))
            result[policy] = {
                "alone": alone,
                "two_at_once": both,
                "two_vs_one_after_the_other": round(both["wall_seconds"] / (2 * alone["wall_seconds"]), 2),
            }
            print(
                f"{policy}: alone {alone['wall_seconds']} s; two at once {both['wall_seconds']} s "
                f"({result[policy]['two_vs_one_after_the_other']}× one after the other)",
                flush=True,
            )
    store_result("shared_machine", result)
    return result


if __name__ == "__main__":
    main()
