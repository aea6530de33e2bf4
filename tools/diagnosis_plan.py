"""The runs that diagnose the paper claims that do not reproduce (docs/non-reproductions.md): for each, the part of
the paper's recipe it needs on a CPU (a `paper-cpu` scale), or a ladder that moves one config value from the quick
recipe toward the paper's.

    python tools/diagnosis_plan.py                       # the plan: each step, what it diagnoses, its command
    python tools/diagnosis_plan.py --estimate STEP ...   # what the step's costliest run costs a seed here
    python tools/diagnosis_plan.py --run STEP [--root runs/eval]

Each step was chosen from the paper's recipe and our distance from it (its ``why``), never from the verdicts on
the evaluation seeds. Run steps one at a time with nothing else running: ``--run`` records the step's wall time
in ROOT/diagnosis-times.json; ``iclab archive ROOT results`` keeps the records of the runs and ladders it leaves
under ROOT, and ``make pages`` writes docs/non-reproductions.md from them. A step that is stopped resumes where it
stopped when run again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from iclab import api
from iclab.config import parse_assignment
from iclab.formatting import duration


@dataclass(frozen=True)
class Step:
    """One run of the plan: the claims it diagnoses, why it is this run, and what it trains. Without a ``key`` it
    is a run of ``scale`` (the part of the paper's recipe a CPU affords); with one, a ladder (``iclab sweep``) from
    ``scale`` over ``key``'s ``rungs``, drawing ``follow`` (``ID[:PATH]``) toward ``target`` (default the paper's
    number); ``overrides`` (``KEY=VALUE``) keep only the part of the experiment its claims need."""

    name: str
    experiment: str
    claims: tuple[str, ...]
    why: str
    scale: str = "quick"
    key: str | None = None
    rungs: tuple = ()
    follow: str | None = None
    target: float | None = None
    overrides: tuple[str, ...] = ()
    seeds: tuple[int, int] = (100, 102)

    def command(self, root: Path) -> list[str]:
        """The ``iclab`` command line of this step, its runs under ``root``; a ladder already begun there resumes."""
        first, last = self.seeds
        sets = [arg for assignment in self.overrides for arg in ("--set", assignment)]
        if self.key is None:
            seeds = f"{first}-{last}"
            return ["reproduce", "--scale", self.scale, "--seeds", seeds, "--only", self.experiment, "--out", str(root)]
        folder = root / f"ladder-{self.name}"
        if (folder / "sweep.yaml").is_file():  # an interrupted ladder: finish it (its folder refuses a new sweep)
            return ["sweep", "--resume", str(folder)]
        grid = f"{self.key}={','.join(map(str, self.rungs))}"
        target = [] if self.target is None else ["--claim-target", str(self.target)]
        return [
            *("sweep", self.experiment, "--scale", self.scale, "--grid", grid, "--set", f"seed={first}"),
            *("--seeds", str(last - first + 1), "--claim", self.follow, *target, *sets),
            *("--out", str(folder)),
        ]

    def costliest(self) -> dict:
        """The overrides of this step's costliest run: its last rung (a run of a scale: none)."""
        changes = dict(parse_assignment(assignment) for assignment in self.overrides)
        if self.key is not None:
            changes[self.key] = self.rungs[-1]
        return changes


GAUSSIAN_ONE = (  # mesa-ar's Gaussian start of σ = 1 alone, the setting full-ab-star-gaussian-1 reads
    "starts.gaussian=[1.0]",
    "starts.sparse=[]",
    "starts.ones=[]",
    "full_model.sparse=[]",
    "full_model.ones=[]",
    "size_sweep.sizes=[]",
)

SYMBOLS_GRID_OFF = (  # abstract-symbols without quick's grid and further points: a step adds the part it needs
    "sweep.tasks=[]",
    "sweep.plain_n=[]",
    "sweep.points.majority-2={transformer: [], transformer+kq+vo: []}",
    "sweep.points.aba-abb={mlp: [], mlp+equality: [], transformer+kq+vo: []}",
    "sweep.points.same-different={mlp: [], transformer+kq+vo: []}",
)

ABA_ABB_LONG = (  # the long scale's ABA vs ABB points its LSTM, linearisation and plain claims read, nothing else
    "sweep.points.majority-2={transformer: [], transformer+kq+vo: []}",
    "sweep.points.majority-4={transformer: [], transformer+kq+vo: []}",
    "sweep.points.aabb-abab={transformer: []}",
    "sweep.points.aba-abb={transformer: [256, 1024], transformer-ntk: [1024], rnn: [], lstm: [2048, 4096, 8192], "
    "mlp: [], mlp+equality: [], transformer+kq+vo: []}",
    "sweep.points.same-different={mlp: [], transformer+kq+vo: []}",
)

PLAN = [
    Step(
        "abstract-symbols-paper-cpu",
        "abstract-symbols",
        (
            "aba-abb-plain-needs-1024",
            "same-different-plain-needs-1024",
            "aabb-abab-plain-needs-1024",
            "aba-abb-kq-vo-learns-between-32-and-64",
            "same-different-kq-vo-learns-between-32-and-64",
        ),
        "the paper's model (width 128, 16 heads of 64) and 1000 epochs where quick trains 150, for the models and n "
        "these claims read: small enough for a CPU",
        scale="paper-cpu",
    ),
    Step(
        "gd-mechanism-steps",
        "gd-mechanism",
        ("c-depth-2-near-gd-plus-plus", "c-depth-4-near-gd-plus-plus"),
        "the paper trains 20 000 steps where quick trains 1 500 (its first distance); deep stacks train slowest",
        key="train.steps",
        rungs=(1500, 5000, 20000),
        follow="c-depth-4-near-gd-plus-plus",
    ),
    Step(
        "mesa-ar-train-size",
        "mesa-ar",
        ("full-ab-star-gaussian-1",),
        "the unrestricted model's off-diagonal weights fit its training set's noise, which shrinks with the set's "
        "size m: the paper's m = 10 000 where quick's is 1 000",
        key="train.train_size",
        rungs=(1000, 3000, 10000),
        follow="full-ab-star-gaussian-1:relative distance",
        target=0.0,
        overrides=GAUSSIAN_ONE,
    ),
    Step(
        "task-descriptors-batch",
        "task-descriptors",
        (
            "deeper-beats-one-layer",
            "descriptors-help-every-depth",
            "gap-narrows-with-depth",
            "gap-grows-with-d",
            "gap-grows-with-d-2-layers",
            "gap-grows-with-d-3-layers",
        ),
        "the paper's batch is 4 096 prompts where quick's is 512, the largest factor between the recipes; the "
        "one-layer models at N = 20 alone, the N its depth and d comparisons read",
        key="train.batch_size",
        rungs=(512, 1024, 2048, 4096),
        follow="deeper-beats-one-layer",
        overrides=("n_contexts=[20]",),
    ),
    Step(
        "gpt-linear-steps",
        "gpt-linear",
        ("tracks-ols", "min-norm-below-d"),
        "the paper trains 500 000 steps where quick trains 11 000; three rungs up to three times quick's fit an hour",
        key="train.steps",
        rungs=(11000, 22000, 33000),
        follow="tracks-ols",
    ),
    Step(
        "abstract-symbols-aba-abb-epochs",
        "abstract-symbols",
        ("aba-abb-lstm-learns-slowly", "aba-abb-ntk-needs-more-data"),
        "the paper trains every model 1000 epochs where long trains 150, the largest factor between the recipes "
        "(the transformer's width, 128 where long's is 256, and heads, 16 where long's are 8, are the others; the "
        "paper gives no sizes of the LSTM); the LSTM followed at n = 8192, where the paper's is 0.29",
        scale="long",
        key="train.epochs",
        rungs=(150, 400, 1000),
        follow="aba-abb-lstm-learns-slowly:8192",
        target=0.29,
        overrides=ABA_ABB_LONG,
    ),
    Step(
        "abstract-symbols-copy-epochs",
        "abstract-symbols",
        ("copy-plain-inverse-scaling",),
        "the paper trains its copying models 1000 epochs where quick trains 150 (the widths and n it adds only widen "
        "the curves); the plain model followed at width 64, where the paper's copies from n = 64",
        key="copying.epochs",
        rungs=(150, 400, 1000),
        follow="copy-plain-inverse-scaling:64",
        overrides=(*SYMBOLS_GRID_OFF, "kernel.tasks=[]"),
    ),
    Step(
        "abstract-symbols-kernel-draws",
        "abstract-symbols",
        ("aba-abb-kernel-identity-conditions",),
        "the paper averages 2000 random draws of the network where quick averages 200, the largest factor of the "
        "kernel's recipe (its width, 128 where quick's is 64, is the other)",
        key="kernel.draws",
        rungs=(200, 600, 2000),
        follow="aba-abb-kernel-identity-conditions",
        overrides=(*SYMBOLS_GRID_OFF, "copying.widths=[]", "kernel.tasks=[aba-abb]"),
    ),
    Step(
        "symbols-lm-steps",
        "symbols-lm",
        ("kq-gain", "kq-nodiag-gain"),
        "the paper scale trains 6000 steps where quick trains 600 (iclab's reading: the paper trains GPT-2 from "
        "scratch and gives no step count), the largest factor a CPU can move far: its model (width 768, 12 layers) "
        "and Wikitext-2 with GPT-2's vocabulary of 50 257 are out of reach here",
        key="train.steps",
        rungs=(600, 2000, 6000),
        follow="kq-gain",
    ),
    Step(
        "algorithm-selection-steps",
        "algorithm-selection",
        (
            "a-matches-ols",
            "a-knn-least-similar",
            "c-one-layer-gd",
            "c-two-to-four-layers-ridge",
            "d-xty-decodable-before-w-ols",
            "d-w-ols-decodability-rises",
            "d-xty-decodability-rises",
        ),
        "the paper trains 500 000 steps where quick trains 3000, the largest factor between the recipes; the "
        "mean SPD/d to OLS followed toward the paper's bound of 0.01",
        key="train.steps",
        rungs=(3000, 6000, 12000),
        follow="a-matches-ols:spd_ols",
        target=0.01,
    ),
    Step(
        "function-classes-linear-steps",
        "function-classes",
        (
            "ood-robust-subspace",
            "ood-robust-noisy",
            "ood-robust-random-orthants",
            "ood-robust-scale-x=2",
            "ood-robust-scale-y=2",
            "ood-robust-scale-y=3",
            "ood-fails-scale-x=0.333",
            "ood-fails-scale-x=3",
        ),
        "the paper trains its linear model 500 000 steps where quick trains 8000, the largest factor between the "
        "recipes (the long scale's 32 000 is the last rung); the shifts read the linear model alone; each claim "
        "followed by its verdicts (it is judged at several k)",
        key="functions.linear.train.steps",
        rungs=(8000, 16000, 32000),
        follow="ood-robust-subspace",
        overrides=("classes=[linear]",),
    ),
    Step(
        "function-classes-sparse-steps",
        "function-classes",
        ("sparse-beats-ols", "sparse-approaches-lasso"),
        "the paper trains its sparse model 500 000 steps where quick trains 1000 from the linear model, the largest "
        "factor between the recipes; judged at every rung (quick's deferral to long is a route to the long recipe, "
        "which the ladder walks toward)",
        key="functions.sparse-linear.train.steps",
        rungs=(1000, 4000, 16000),
        follow="sparse-beats-ols",
        overrides=("classes=[linear, sparse-linear]", "judged_at_long=[]"),
    ),
    Step(
        "function-classes-relu-steps",
        "function-classes",
        ("relu-matches-net-gd",),
        "the paper trains its ReLU-network model 500 000 steps where quick trains 2000, the largest factor between "
        "the recipes (the class alone, so the shared steps are its own); followed by its verdicts (the paper's 0.17 "
        "is at k = 100 and d = 20, where the claim compares with a network fitted at quick's k and d)",
        key="train.steps",
        rungs=(2000, 6000, 18000),
        follow="relu-matches-net-gd",
        overrides=("classes=[relu-net]",),
    ),
]
"""The plan, cheapest informative step first."""

TIMES = "diagnosis-times.json"


def _step(name: str) -> Step:
    found = {step.name: step for step in PLAN}
    if name not in found:
        raise SystemExit(f"unknown step {name!r}; the plan has {', '.join(found)}")
    return found[name]


def show(root: Path) -> str:
    """The plan as text: each step, the claims it diagnoses, why, and its command."""
    lines = []
    for step in PLAN:
        lines += [
            f"{step.name} ({step.experiment}): {', '.join(step.claims)}",
            f"  why: {step.why}",
            f"  run: {shlex.join(['iclab', *step.command(root)])}",
            "",
        ]
    return "\n".join(lines)


def estimate(step: Step, threads: int) -> dict:
    """What the step's costliest run costs one seed here (:func:`iclab.api.time_recipe`, measured, not run)."""
    import torch

    torch.set_num_threads(threads)
    return api.time_recipe(step.experiment, step.scale, steps=10, overrides=step.costliest())


def cost_line(cost: dict) -> str:
    """An estimate in words; a run that trains nothing (a kernel's draws) has no step rate to time."""
    if not cost["models"]:
        return "nothing trains in its costliest run: a timed run cannot measure its cost, which is its evaluation"
    return f"about {duration(cost['seconds'])} a seed on {cost['threads']} thread(s) of {cost['device']}"


def run(step: Step, root: Path) -> float:
    """Run the step into ``root`` and record its wall time in ``root``/diagnosis-times.json; returns it."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "iclab", *step.command(root)], check=True)
    wall = time.perf_counter() - started
    record = root / TIMES
    times = json.loads(record.read_text()) if record.exists() else {}
    when = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    times.setdefault(step.name, []).append({"wall_seconds": round(wall, 1), "finished": when})
    record.write_text(json.dumps(times, indent=1) + "\n")
    return wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimate", nargs="+", metavar="STEP", help="time each step's costliest run for one seed")
    parser.add_argument("--run", metavar="STEP", help="run one step (its wall time recorded under ROOT)")
    parser.add_argument("--root", default="runs/eval", type=Path, help="where the runs go (default runs/eval)")
    parser.add_argument("--threads", type=int, default=2, help="threads of a timed run (default 2)")
    args = parser.parse_args(argv)
    if args.estimate:
        for name in args.estimate:
            print(f"{name}: {cost_line(estimate(_step(name), args.threads))}")
    elif args.run:
        print(f"{args.run}: {duration(run(_step(args.run), args.root))} of wall")
    else:
        print(show(args.root))


if __name__ == "__main__":
    main()
