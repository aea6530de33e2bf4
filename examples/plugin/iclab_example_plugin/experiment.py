"""A one-layer linear self-attention, trained briefly on linear regression, beats the zero predictor.

An example of an experiment defined outside iclab from iclab's pieces: a task, a prompt format, a
model, the training loop, an evaluation on shared prompts and one claim. ``pyproject.toml`` registers
it under the entry-point group ``iclab.experiments`` as ``lsa-tiny``.
"""

from __future__ import annotations

from iclab import claims
from iclab.experiments.base import Experiment, RunContext
from iclab.learners import ZeroPredictor
from iclab.metrics import evaluate, model_predictor
from iclab.models import LinearSelfAttention
from iclab.prompts import PairedFormat
from iclab.tasks import linear_regression_from_config
from iclab.theory import lsa_optimum
from iclab.train import TrainConfig, data_source

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
    train_config = TrainConfig.from_config(config["train"])
    seeds = [config["seed"] + k for k in range(config["seeds"])]
    result = ctx.train("lsa", lambda g: LinearSelfAttention(task.d + 1, generator=g),
                       data_source(task, PairedFormat(), train_config), train_config, seeds)
    predictors = {"zero": ZeroPredictor().predict_episode}
    predictors.update({f"lsa/seed{s}": model_predictor(m) for s, m in zip(seeds, result.models)})
    losses = {name: mean for name, (mean, _) in evaluate(predictors, task, config["eval_prompts"], config["seed"]).items()}
    for name, value in losses.items():
        model, _, seed = name.partition("/seed")
        ctx.log(model=model, seed=int(seed) if seed else None, metric="mse", value=value)
    ctx.log(model="theory", metric="optimal_mse", value=lsa_optimum(task).loss)
    worst = max(v for name, v in losses.items() if name != "zero")
    share = config["tolerance"]["of_zero"]
    return [claims.at_most(
        "beats-zero", PAPER,
        f"the trained LSA's query mse is at most {share:g} × the zero predictor's ({losses['zero']:.3g}; worst seed)",
        worst, share * losses["zero"],
    )]


EXPERIMENT = Experiment(name="lsa-tiny", paper=PAPER, defaults=DEFAULTS, scales=SCALES, run=run)
