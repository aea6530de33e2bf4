"""``lsa-linear``: one-layer linear self-attention learns one preconditioned GD step.

Zhang, Frei & Bartlett, "Trained transformers learn linear models in-context" (JMLR 2024);
docs/papers.md §1 (Zhang et al.). A one-layer merged LSA (1/N-normalised) is trained on noiseless linear
regression with Gaussian inputs N(0, Λ), for Λ = I and an anisotropic diagonal Λ, and
compared with the exact optimum ŷ = x_qᵀΓ⁻¹(1/N)Σy_i x_i and with reference learners.
"""

from __future__ import annotations

import torch

from .. import claims as C
from ..learners import Averaging, GradientDescent, LeastSquares, NearestNeighbours, ZeroPredictor
from ..metrics import cosine, evaluate, lsa_alignment, model_predictor
from ..models import LinearSelfAttention
from ..prompts import PairedFormat
from ..report.figures import heatmap, new_figure, save, training_curve
from ..tasks import linear_regression_from_config
from ..theory import gd_step_optimum, lsa_optimum, lsa_weights
from ..train import TrainConfig, data_source
from .base import Experiment, RunContext

PAPER = "Zhang, Frei, Bartlett (JMLR 2024)"

DEFAULTS = {
    "seed": 0,
    "seeds": 3,
    "task": {"d": 5, "n_context": 20, "inputs": "gaussian"},
    # Eigenvalues of Λ per setting (null = identity); the anisotropic one is 1…4 scaled to trace d.
    "covariances": {"isotropic": None, "anisotropic": [0.4, 0.7, 1.0, 1.3, 1.6]},
    "model": {"init": "small", "init_scale": 0.1},
    "train": {
        "steps": 2000, "batch_size": 1024, "lr": 0.003, "optimizer": "adam",
        "schedule": "cosine", "warmup": 100, "log_every": 50, "checkpoint_every": 1000,
        "blowup": TrainConfig.blowup,  # null: never stop a finite loss (see TrainConfig)
    },
    "eval_prompts": 50000,
    "tolerance": {"loss_rel": 0.03, "cosine": 0.99},
}

SCALES = {
    "quick": {},
    "paper": {"seeds": 5, "train": {"steps": 20000, "batch_size": 4096}, "eval_prompts": 200000},
}


def _setting(name: str, task, config: dict, ctx: RunContext):
    """Train, evaluate and check one covariance; returns claims and what the figures need."""
    d, dim = task.d, task.d + 1
    optimum, gd = lsa_optimum(task), gd_step_optimum(task)
    ctx.log(setting=name, model="theory", metric="optimal_loss", value=optimum.loss)
    ctx.log(setting=name, model="theory", metric="gd_step_lr", value=gd.lr)
    ctx.log(setting=name, model="theory", metric="gd_step_loss", value=gd.loss)

    train_cfg = TrainConfig.from_config(config["train"])
    seeds = [config["seed"] + k for k in range(config["seeds"])]
    model_cfg = config["model"]
    result = ctx.train(
        f"lsa-{name}",
        lambda g: LinearSelfAttention(dim, init=model_cfg["init"], init_scale=model_cfg["init_scale"], generator=g),
        data_source(task, PairedFormat(), train_cfg),
        train_cfg,
        seeds,
        setting=name,
    )

    learners = [
        LeastSquares(), Averaging(), GradientDescent(1, gd.lr), NearestNeighbours(3), ZeroPredictor(),
    ]
    predictors = {l.name: l.predict_episode for l in learners}
    predictors["lsa-optimum"] = GradientDescent(1, 1.0, optimum.preconditioner).predict_episode
    predictors.update({f"lsa/seed{s}": model_predictor(m) for s, m in zip(seeds, result.models)})
    losses = evaluate(predictors, task, config["eval_prompts"], config["seed"])
    for key, (mean, stderr) in losses.items():
        model, _, seed = key.partition("/seed")
        ctx.log(setting=name, model=model, seed=int(seed) if seed else None, metric="mse", value=mean)
        ctx.log(setting=name, model=model, seed=int(seed) if seed else None, metric="mse_stderr", value=stderr)

    target_kq, target_pv = lsa_weights(optimum.preconditioner, dim)
    cosines = []
    for seed, model in zip(seeds, result.models):
        w_kq, w_pv = (w.detach().cpu() for w in model.layers[0].merged())
        cosines.append(cosine(w_pv[-1, -1] * w_kq[:d, :d], optimum.preconditioner))
        ctx.log(setting=name, model="lsa", seed=seed, metric="preconditioner_cosine", value=cosines[-1])
        ctx.log(setting=name, model="lsa", seed=seed, metric="product_alignment",
                value=lsa_alignment(w_kq, w_pv, target_kq, target_pv))

    tol = config["tolerance"]
    model_losses = [losses[f"lsa/seed{s}"][0] for s in seeds]
    worst = max(model_losses, key=lambda v: abs(v - optimum.loss))
    ordered = all(losses["ols"][0] < v < losses["averaging"][0] for v in model_losses)
    claims = [
        C.within(
            f"loss-at-optimum-{name}", PAPER,
            f"{name} Λ: the trained LSA's loss is within {tol['loss_rel']:.0%} of tr Λ − tr(ΛΓ⁻¹Λ) "
            f"(worst of {len(seeds)} seeds, {config['eval_prompts']} fresh prompts)",
            worst, optimum.loss, tol["loss_rel"], figure="learners",
        ),
        C.at_least(
            f"preconditioner-{name}", PAPER,
            f"{name} Λ: W_PV[y,y]·W_KQ[x,x] matches Γ⁻¹ in direction (cosine, worst seed)",
            min(cosines), tol["cosine"], figure="weights",
        ),
        C.holds_if(
            f"between-ols-and-averaging-{name}", PAPER,
            f"{name} Λ: the LSA beats averaging and loses to OLS (every seed)",
            f"ols {losses['ols'][0]:.4g} < lsa {min(model_losses):.4g}…{max(model_losses):.4g} "
            f"< averaging {losses['averaging'][0]:.4g}",
            "ols < lsa < averaging", ordered, figure="learners",
        ),
    ]
    weights = (result.models[0].layers[0].merged(), (target_kq, target_pv))
    return claims, optimum.loss, gd.loss, losses, weights


def _tasks(config: dict) -> dict:
    """The task of every covariance setting."""
    return {name: linear_regression_from_config({**config["task"], "cov": eigenvalues})
            for name, eigenvalues in config["covariances"].items()}


def _validate(config: dict):
    """Every task and the training settings must build before anything trains."""
    _tasks(config)
    TrainConfig.from_config(config["train"])


def run(config: dict, ctx: RunContext):
    """Run both covariance settings and draw the figures."""
    claims, curves, bars, maps = [], {}, {}, {}
    for name, task in _tasks(config).items():
        found, optimal, gd_loss, losses, weights = _setting(name, task, config, ctx)
        claims += found
        curves[name], bars[name], maps[name] = (optimal, gd_loss), (losses, optimal), weights
    _figures(ctx, curves, bars, maps)
    return claims


def _figures(ctx: RunContext, curves, bars, maps):
    import pandas as pd

    history = pd.DataFrame([r for r in ctx.rows if r.get("metric") == "train_loss"])
    fig, axes = new_figure(len(curves))
    for ax, (name, (optimal, gd_loss)) in zip(axes, curves.items()):
        training_curve(ax, history[history.setting == name], "trained LSA (mean, min–max over seeds)")
        ax.axhline(optimal, color="k", ls="--", label=f"theory optimum {optimal:.3f}")
        ax.axhline(gd_loss, color="C3", ls=":", label=f"best 1-step GD {gd_loss:.3f}")
        ax.set_yscale("log")
        ax.set_ylabel("training mse")
        ax.set_title(f"{name} Λ")
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("training_curves"))

    fig, axes = new_figure(len(bars), width=5.5)
    for ax, (name, (losses, optimal)) in zip(axes, bars.items()):
        names = [k for k in losses if "/seed" not in k]
        values = [losses[k][0] for k in names]
        trained = [v for k, (v, _) in losses.items() if "/seed" in k]
        names.append("trained lsa")
        values.append(sum(trained) / len(trained))
        ax.barh(names, values, color=["C1" if n == "trained lsa" else "C0" for n in names])
        ax.axvline(optimal, color="k", ls="--", label="theory optimum")
        ax.set_xlabel("query mse (fresh prompts)")
        ax.set_title(f"{name} Λ")
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("learners"))

    fig, axes = new_figure(4, width=3.2, height=3.0, rows=len(maps))
    for row, (name, ((w_kq, w_pv), (t_kq, t_pv))) in enumerate(maps.items()):
        # Rescale so that W_PV[y, y] = 1: the product W_PV·W_KQ, which fixes ŷ, is unchanged.
        scale = w_pv[-1, -1].item()
        panels = [(w_kq * scale, "trained W_KQ·W_PV[y,y]"), (w_pv / scale, "trained W_PV/W_PV[y,y]"),
                  (t_kq, "theory W_KQ (Γ⁻¹ block)"), (t_pv, "theory W_PV")]
        for ax, (matrix, title) in zip(axes[4 * row: 4 * row + 4], panels):
            heatmap(ax, matrix.detach().cpu(), f"{name}: {title}")
    save(fig, ctx.folder.figure("weights"))


EXPERIMENT = Experiment(
    name="lsa-linear",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_validate,
)
