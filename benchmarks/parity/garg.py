"""Parity of ``gpt-linear`` with Garg et al.'s own code (``dtsip/in-context-learning``).

    python benchmarks/parity/garg.py --peer PATH --python PEER_PYTHON [--only QUANTITY ...]

Their ``src/train.py`` runs unmodified (``garg_peer.py``, in the peer's Python, with the shims it lists) at a recipe
their config can state: their GPT-2 with d, N, depth, width and heads, Adam at a constant learning rate, the
curriculum fixed (start = end). iclab's side is ``iclab run gpt-linear`` at quick with the same values
(``model.mlp_ratio=4``, GPT-2's MLP; ``train.schedule=constant``, ``train.warmup=0``). Both sides' trained models are
then loaded by ``iclab.load_model`` (theirs through its Garg et al. converter) and measured by the same iclab code on
the same prompts: the quantities ``tracks-ols`` and ``min-norm-below-d`` read (the largest gap of mse/d to OLS over
k ≥ 1; the largest SPD/d to min-norm OLS over 1 ≤ k < d), and two that hold in iclab (controls: the smallest margin
below averaging and 3-NN, ``beats-averaging-and-3nn``; mse/d at the last prefix).
"""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path

import torch
from harness import Comparison, arguments, measure, run_iclab, run_peer

from iclab import load_model
from iclab.experiments.function_classes import PAPER_SHIFT_ERRORS
from iclab.learners import Averaging, Lasso, LeastSquares, NearestNeighbours
from iclab.metrics import loss_by_prefix, normalised_errors, prefix_predictions, prefix_query_predictions, spd
from iclab.prompts import InterleavedFormat
from iclab.rng import generator
from iclab.shifts import shift as make_shift
from iclab.tasks import linear_regression_from_config
from iclab.tasks.functions import function_class

HERE = Path(__file__).resolve().parent
EVAL_PROMPTS = 4000  # gpt-linear's quick eval_prompts
GARG = {"d": 5, "points": 10, "layers": 4, "width": 64, "heads": 4, "batch_size": 128, "lr": 1e-3, "steps": 11000}
"""The recipe both sides run: gpt-linear's quick shapes and steps, at a constant learning rate (their loop has no
schedule) and GPT-2's MLP of 4 × width."""


def linear_quantities(model: torch.nn.Module, d: int, n: int, seed: int) -> dict[str, float]:
    """The numbers gpt-linear's claims read, for one trained model, on ``EVAL_PROMPTS`` prompts of the
    ``(seed, "parity-eval")`` stream: the same prompts for both sides' model of a seed."""
    task = linear_regression_from_config({"d": d, "n_context": n})
    episode = task.sample(EVAL_PROMPTS, generator(seed, "parity-eval")).to(dtype=torch.float64)
    ours = prefix_predictions(model, episode)
    curves = {
        name: loss_by_prefix(prefix_predictions(learner, episode), episode.ys, "mse_over_d", d, 10)["mean"]
        for name, learner in {"ols": LeastSquares(), "3-nn": NearestNeighbours(3), "averaging": Averaging()}.items()
    }
    mine = loss_by_prefix(ours, episode.ys, "mse_over_d", d, 10)["mean"]
    to_ols = spd(ours, prefix_predictions(LeastSquares(), episode), d, 10)["mean"]
    return {
        "ols_gap": (mine[1:] - curves["ols"][1:]).max().item(),
        "spd_below_d": to_ols[1:d].max().item(),
        "margin": (torch.minimum(curves["averaging"], curves["3-nn"])[1:] - mine[1:]).min().item(),
        "last": mine[-1].item(),
    }


def _authors(args, recipe: dict, measure, cache: dict, quantity: str, seed: int) -> float:
    """Their code trained on ``seed`` at ``recipe`` and measured by ``measure(model, seed)``, once per seed and
    recipe (every quantity of a recipe reads the same model)."""
    key = ("authors", seed, json.dumps(recipe, sort_keys=True))
    if key not in cache:
        run = Path(tempfile.mkdtemp(prefix="parity-garg-")) / f"seed{seed}"
        options = [f"--{k.replace('_', '-')}={v}" for k, v in recipe.items()]
        run_peer(args, HERE / "garg_peer.py", [*options, "--seed", str(seed), "--run", str(run)])
        cache[key] = measure(load_model(run).model, seed)
    return cache[key][quantity]


def _iclab(args, recipe: dict, measure, cache: dict, quantity: str, seeds) -> list[float]:
    key = ("iclab", tuple(seeds), json.dumps(recipe, sort_keys=True))
    if key not in cache:
        cache[key] = (_iclab_class if "class" in recipe else _iclab_linear)(args, recipe, measure, seeds)
    return [cache[key][seed][quantity] for seed in seeds]


def _iclab_linear(args, recipe: dict, measure, seeds) -> dict:
    """gpt-linear at quick with the recipe's values, each seed's model measured."""
    overrides = [
        f"task.d={recipe['d']}",
        f"task.n_context={recipe['points']}",
        f"model.n_layers={recipe['layers']}",
        f"model.n_layers={recipe['layers']}",  # the linear class's own block says 4 as well
        f"model.width={recipe['width']}",
        f"model.n_heads={recipe['heads']}",
        "model.mlp_ratio=4",
        f"train.batch_size={recipe['batch_size']}",
        f"train.lr={recipe['lr']}",
        f"train.steps={recipe['steps']}",
        "train.schedule=constant",
        "train.warmup=0",
        "eval_prompts=200",  # its own evaluation is not read; the quantities are measured here
        "bootstrap=10",
    ]
    folder = run_iclab("gpt-linear", overrides, seeds, args.threads)
    return {seed: measure(load_model(folder.path, "gpt", seed).model, seed) for seed in seeds}


def _iclab_class(args, recipe: dict, measure, seeds) -> dict:
    """function-classes at quick with the recipe's class alone, trained from scratch at a constant rate with the
    recipe's curriculum, each seed's model measured."""
    name = recipe["class"]
    block = f"functions.{name}"
    overrides = [
        f"classes=[{name}]",
        f"d={recipe['d']}",
        f"{block}.n_context={recipe['points']}",
        f"{block}.n_start={recipe['points_start']}",
        f"{block}.n_step=2",
        f"{block}.init_from=null",
        f"{block}.train={{steps: {recipe['steps']}, warmup: 0}}",
        *(f"{block}.{k}={v}" for k, v in recipe.get("class_parameters", {}).items()),
        f"curriculum.d_start={recipe['d_start']}",
        f"curriculum.every={recipe['interval']}",
        f"model.n_layers={recipe['layers']}",  # the linear class's own block says 4 as well
        f"model.width={recipe['width']}",
        f"model.n_heads={recipe['heads']}",
        "model.mlp_ratio=4",
        f"train.batch_size={recipe['batch_size']}",
        f"train.lr={recipe['lr']}",
        "train.schedule=constant",
        "shifts=[]",  # measured here on the same prompts for both sides
        "eval_prompts=64",
        "slow_prompts=4",
        "bootstrap=10",
    ]
    folder = run_iclab("function-classes", overrides, seeds, args.threads)
    return {seed: measure(load_model(folder.path, name, seed).model, seed) for seed in seeds}


NOTE = "trained by their train.py (garg_peer.py's shims); measured by iclab's metrics on the same prompts"


def comparisons(args) -> list[Comparison]:
    """gpt-linear's: the quantities of its two non-reproductions and two controls, from one model per seed."""
    cache: dict = {}
    measure = lambda model, seed: linear_quantities(model, GARG["d"], GARG["points"], seed)

    def c(quantity, description, claims, what, **record):
        return Comparison(
            quantity,
            description,
            claims,
            {**GARG, "mlp_ratio": 4, "schedule": "constant", "optimizer": "adam", "eval_prompts": EVAL_PROMPTS},
            authors=partial(_authors, args, GARG, measure, cache, what),
            iclab=partial(_iclab, args, GARG, measure, cache, what),
            authors_note=NOTE,
            iclab_note="iclab run gpt-linear at quick with the recipe's values; the same measurement",
            **record,
        )

    return [
        c(
            "ols-gap",
            "the largest gap of mse/d to OLS over k ≥ 1",
            ["tracks-ols"],
            "ols_gap",
            test={"op": "<=", "threshold": 0.05},
            paper="0.02 at k = d, 0.0006 at k = 2d (d = 20)",
        ),
        c(
            "spd-below-d",
            "the largest SPD/d to min-norm OLS over 1 ≤ k < d",
            ["min-norm-below-d"],
            "spd_below_d",
            test={"op": "<", "threshold": 0.01},
            paper="SPD/d < 0.01 (Akyürek et al., d = 8)",
        ),
        c(
            "margin-averaging-3nn",
            "the smallest margin of mse/d below averaging's and 3-NN's over k ≥ 1 (a positive control)",
            ["beats-averaging-and-3nn"],
            "margin",
            control=True,
            test={"op": ">", "threshold": 0.0},
            paper="below both from the first example (Fig 2)",
        ),
        c(
            "mse-last-prefix",
            "mse/d at the last prefix, k = N − 1 (a positive control)",
            ["tracks-ols"],
            "last",
            control=True,
            paper="OLS's is 0 once k ≥ d",
        ),
    ]


FUNCTIONS = {
    "d": 5,
    "points": 11,
    "d_start": 3,
    "points_start": 5,
    "interval": 200,
    "layers": 4,
    "width": 64,
    "heads": 2,
    "batch_size": 64,
    "lr": 1e-3,
    "steps": 8000,
}
"""function-classes' quick linear model as both codes can state it: d 3 → 5 and N 5 → 11 by their curriculum every
200 steps, 4 layers of 64 with 2 heads, batch 64, 8000 steps at a constant 1e-3 (quick has a cosine schedule)."""
SHIFTS = {
    "subspace": "robust",
    "random-orthants": "robust",
    "overlapping": "robust",
    "scale-x=2": "robust",
    "scale-y=0.333": "robust",
    "scale-y=0.5": "robust",
    "scale-y=2": "robust",
    "scale-y=3": "robust",
    "scale-x=0.333": "fails",
    "scale-x=3": "fails",
    "noisy": "control",
    "scale-x=0.5": "control",
}
"""The shifts whose claims do not reproduce at quick (robust ones and failing ones), and two that hold there
(controls)."""


def shift_quantities(model: torch.nn.Module, seed: int) -> dict[str, float]:
    """The linear model's normalised error at k = 2d (the paper's k = 40 at d = 20) under each shift of
    :data:`SHIFTS`, on 1000 prompts of the ``(seed, "parity-eval")`` stream shifted from the ``(seed, "parity-shift",
    name)`` stream, as function-classes measures it (``iclab.shifts``, ``iclab.metrics.normalised_errors``)."""
    d = FUNCTIONS["d"]
    task = function_class("linear", d, FUNCTIONS["points"])
    episode = task.sample(1000, generator(seed, "parity-eval")).to(dtype=torch.float64)
    found = {}
    for name in SHIFTS:
        shift = make_shift(name)
        shifted = shift(episode, task, generator(seed, "parity-shift", name))
        prediction = prefix_query_predictions(model, shifted, InterleavedFormat())
        errors = normalised_errors(task, prediction, shifted.y_query, 10, seed, shift.error_scale)
        found[name] = errors["mean"][2 * d].item()
    return found


SPARSITY = 2  # function-classes' quick sparse-linear (k = 2 of d = 5)
LASSO_ALPHAS = (1.0, 0.1, 0.01, 0.001, 0.0001)  # its baselines' grid (their code's)


def sparse_quantities(model: torch.nn.Module, seed: int) -> dict[str, float]:
    """What the sparse claims read, on 1000 prompts of the ``(seed, "parity-eval")`` stream, each example the query
    of the prefix before it: the smallest margin of least squares' normalised error over the model's at
    sparsity < k < d (``sparse-beats-ols``), and the largest excess of the model's over the best Lasso's at k ≥ 1
    (``sparse-approaches-lasso``)."""
    d, n = FUNCTIONS["d"], FUNCTIONS["points"]
    task = function_class("sparse-linear", d, n, sparsity=SPARSITY)
    episode = make_shift("standard")(
        task.sample(1000, generator(seed, "parity-eval")).to(dtype=torch.float64), task, None
    )
    error = lambda source: normalised_errors(
        task,
        prefix_query_predictions(source, episode, *([InterleavedFormat()] if source is model else [])),
        episode.y_query,
        10,
        seed,
    )["mean"]
    mine, ols = error(model), error(LeastSquares())
    lasso = torch.stack([error(Lasso(alpha)) for alpha in LASSO_ALPHAS]).amin(0)
    return {
        "margin": min((ols[k] - mine[k]).item() for k in range(SPARSITY + 1, d)),
        "lasso_excess": (mine[1:] - lasso[1:]).max().item(),
    }


def class_comparisons(args) -> list[Comparison]:
    """function-classes': the linear model's error under each shift of :data:`SHIFTS`, from one model per seed."""
    cache: dict = {}
    recipe = {**FUNCTIONS, "class": "linear"}
    out = []
    for name, kind in SHIFTS.items():
        claim = f"ood-fails-{name}" if kind == "fails" else f"ood-robust-{name}"
        out.append(
            Comparison(
                f"linear-{name}",
                f"the linear model under {name} prompts: normalised error at k = 2d"
                + (" (a positive control)" if kind == "control" else ""),
                [claim],
                {**recipe, "mlp_ratio": 4, "schedule": "constant", "optimizer": "adam", "prompts": 1000},
                authors=partial(_authors, args, FUNCTIONS, shift_quantities, cache, name),
                iclab=partial(_iclab, args, recipe, shift_quantities, cache, name),
                control=kind == "control",
                paper=f"{PAPER_SHIFT_ERRORS[name][40]:g} at k = 2d (d = 20)" if name in PAPER_SHIFT_ERRORS else "",
                authors_note=NOTE,
                iclab_note="iclab run function-classes at quick, the linear class alone, from scratch, constant rate",
            )
        )
    sparse = {**FUNCTIONS, "class": "sparse-linear", "class_parameters": {"sparsity": SPARSITY}}
    theirs = {**FUNCTIONS, "task": "sparse_linear_regression", "task_kwargs": json.dumps({"sparsity": SPARSITY})}
    for quantity, what, claim, test, paper in (
        ("sparse-margin-ols", "margin", "sparse-beats-ols", {"op": ">", "threshold": 0.0}, "below OLS for k < d"),
        ("sparse-excess-lasso", "lasso_excess", "sparse-approaches-lasso", None, "within 0.01 of the Lasso"),
    ):
        out.append(
            Comparison(
                quantity,
                "the sparse-linear model (k = 2 of d = 5, from scratch): "
                + (
                    "the smallest margin of OLS's error over its own at 2 < k < d"
                    if what == "margin"
                    else "the largest excess of its error over the best Lasso's at k ≥ 1"
                ),
                [claim],
                {**sparse, "mlp_ratio": 4, "schedule": "constant", "optimizer": "adam", "prompts": 1000},
                authors=partial(_authors, args, theirs, sparse_quantities, cache, what),
                iclab=partial(_iclab, args, sparse, sparse_quantities, cache, what),
                test=test,
                paper=paper,
                authors_note=NOTE,
                iclab_note="iclab run function-classes at quick, sparse-linear alone, from scratch, constant rate",
                notes=[
                    "quick warm-starts the sparse model from the linear one; their code trains each class from "
                    "scratch, so both sides do here"
                ],
            )
        )
    return out


if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0])
    peer = {
        "repository": "dtsip/in-context-learning",
        "commit": args.peer_commit,
        "code": "src/ (train.py and its modules)",
    }
    measure(args, "gpt-linear", peer, comparisons(args))
    measure(args, "function-classes", peer, class_comparisons(args))
