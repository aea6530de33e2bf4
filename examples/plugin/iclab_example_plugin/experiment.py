"""A one-layer linear self-attention, trained briefly on linear regression, beats the zero predictor.

An example of an experiment defined outside iclab from iclab's pieces: a task, a prompt format, a
model, the training loop, an evaluation on shared prompts and one claim. ``pyproject.toml`` registers
it under the entry-point group ``iclab.experiments`` as ``lsa-tiny``.
"""

from __future__ import annotations

from iclab import claims
from iclab.experiments.base import Experiment, RunContext
from iclab.learners import ZeroPredictor
from iclab.models import LinearSelfAttention
from iclab.prompts import PairedFormat
from iclab.tasks import linear_regression_from_config
from iclab.theory import lsa_optimum

PAPER = "iclab example plugin"

DEFAULTS = {
    "seed": 0,
    "seeds": 1,
    "task": {"d": 3, "n_context": 10},
    "train": {"steps": 300, "batch_size": 256, "lr": 0.01, "log_every": 50, "checkpoint_every": 300},
    "eval_prompts": 4000,
    "tolerance": {"of_zero": 0.5},  # the trained loss must be at most this share of the zero predictor's
}

SCALES = {"quick": {}, "paper": {"train": {"steps": 2000, "checkpoint_every": 1000}}}


def run(config: dict, ctx: RunContext) -> list[claims.Claim]:
    """Train one LSA per seed, evaluate it and the zero predictor on the same prompts, return the claim."""
    task = linear_regression_from_config(config["task"])
    # Fresh prompts of the task at every step, trained with the run's train block (iclab fills its defaults).
    make = lambda g: LinearSelfAttention(task.d + 1, generator=g)
    result = ctx.trained("lsa", make, task=task, format=PairedFormat(), train=config["train"])
    # Learners by name, trained models by (name, seed); ctx.evaluate logs every loss with its standard error.
    losses = ctx.evaluate(
        {"zero": ZeroPredictor(), **{("lsa", seed): m for seed, m in result.by_seed.items()}},
        task,
        config["eval_prompts"],
    )
    ctx.log(model="theory", metric="optimal_mse", value=lsa_optimum(task).loss)
    worst = max(v for key, v in losses.items() if key != "zero")
    share = config["tolerance"]["of_zero"]
    return [
        claims.at_most(
            "beats-zero",
            PAPER,
            f"the trained LSA's query mse is at most {share:g} × the zero predictor's ({losses['zero']:.3g}; worst "
            "seed)",
            worst,
            share * losses["zero"],
            about=claims.diagnostic("trained"),  # a sanity bound of ours; a paper claim names its source
        )
    ]


EXPERIMENT = Experiment(name="lsa-tiny", paper=PAPER, defaults=DEFAULTS, scales=SCALES, run=run)
