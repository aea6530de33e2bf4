"""``gd-mechanism``: transformers learn in context by gradient descent.

von Oswald et al., "Transformers learn in-context by gradient descent" (ICML 2023); docs/papers.md §2
(von Oswald et al.). Linear self-attention (separate W_Q, W_K, W_V, P; no 1/N; prediction −y_q) is
trained on noiseless linear regression with x ~ U(−0.5, 0.5)^d and compared with GD and GD++
learners and with the LSA weights that implement them (:func:`iclab.models.gd_construction`):

(a) one layer vs the best single GD step; (b) two recurrent layers vs 2-step GD and GD++;
(c) per-layer models of several depths vs per-step GD++; (d) sine regression with an MLP
feature map before one LSA layer (merged W_KQ, W_PV), trained end to end vs the attention
fixed to one GD step. Losses are half-MSE, as in the paper.

Training choices. LSAs start from ``init_scale / n_layers``, as in the paper's code. (c)'s models
from ``activation_clip.from_depth`` layers on clip every layer's tokens to ±``activation_clip.value``,
as the paper's code does for models deeper than 3 layers: a deep unclipped stack is a high-degree
polynomial of the labels whose mean loss a few extreme prompts decide. The clip also cuts the fitted
GD++'s intermediate predictions, so the clipped stack is compared with GD++ by loss only. (d)'s
attention starts at a small scale and trains on large batches, which keeps every seed out of a
rank-1 solution that uses the labels as keys. What each choice avoids, as measured:
docs/experiments/gd-mechanism.md.

GD and GD++ step sizes (and γ) are fitted by L-BFGS on a fixed sample of ``fit_prompts``
prompts (:meth:`GDPlusPlus.fit`); the best one-step η is exact
(:func:`iclab.theory.gd_step_optimum`).
"""

from __future__ import annotations

import dataclasses

import torch

from .. import claims as C
from ..config import ConfigError
from ..learners import GDPlusPlus, ZeroPredictor
from ..metrics import compare, evaluate, model_predictor
from ..models import MLP, FeatureLSA, LinearSelfAttention, gd_construction, interpolate_lsa, match_scale
from ..prompts import PairedFormat
from ..report.figures import heatmap, new_figure, save, training_curve
from ..rng import generator
from ..tasks import SineRegression, linear_regression_from_config
from ..theory import gd_step_optimum
from ..train import TrainConfig, data_source
from .base import Experiment, RunContext

PAPER = "von Oswald et al. (ICML 2023)"

DEFAULTS = {
    "seed": 0,
    "seeds": 2,
    "task": {"d": 10, "n_context": 10, "inputs": "uniform", "low": -0.5, "high": 0.5},
    "model": {"init_scale": 0.1},  # divided by the number of layers, as in the paper's code (0.002 / L)
    "train": {
        "steps": 1500, "batch_size": 512, "lr": 0.003, "optimizer": "adam", "schedule": "cosine",
        "warmup": 50, "clip": 1.0, "loss": "half_mse", "log_every": 50, "checkpoint_every": 1000,
        "blowup": TrainConfig.blowup,  # null: never stop a finite loss (see TrainConfig)
    },
    "depths": [2, 4],  # per-layer models of part (c)
    "depth_lr": 0.006,  # (c)'s peak learning rate (train.lr is too small for deep stacks: docs/experiments/gd-mechanism.md)
    "activation_clip": {"value": 10.0, "from_depth": 4},  # (c): the paper's code clips models deeper than 3
    "fit_prompts": 4096,  # fixed sample the GD / GD++ step sizes are fitted on
    "eval_prompts": 20000,
    "compare_prompts": 1000,  # prompts for prediction / sensitivity comparisons
    "sine": {
        "n_context": 10, "width": 64, "features": 16,
        "init_scale": 0.001,  # of the LSA; with batch 1024, keeps seeds out of a rank-1 solution (module docstring)
        "train": {"steps": 1500, "batch_size": 1024, "lr": 0.003, "optimizer": "adam", "schedule": "cosine",
                  "warmup": 50, "clip": 1.0, "loss": "half_mse", "log_every": 50, "checkpoint_every": 1000,
                  "blowup": TrainConfig.blowup},
    },
    "tolerance": {"loss_rel": 0.03, "cosine": 0.99, "pred_diff_rel": 0.05, "interp_rel": 0.02,
                  "gd_plus_plus_rel": 0.05, "depth_rel": 0.10, "sine_rel": 0.10, "sine_below_zero": 0.25},
}

SCALES = {
    "quick": {},
    "paper": {
        "seeds": 5, "train": {"steps": 20000, "batch_size": 2048, "lr": 0.001}, "depths": [2, 3, 4, 5], "depth_lr": 0.002,
        "eval_prompts": 100000, "fit_prompts": 32768,
        "sine": {"train": {"steps": 20000, "batch_size": 2048}},
    },
}


def _lsa_factory(dim: int, n_layers: int, shared: bool, scale: float, clip: float | None = None):
    """make_model for the paper's LSA: separate Q, K, V, P, no 1/N, prediction −y_q; with
    ``clip``, every layer's output tokens are clipped to [−clip, clip]."""
    return lambda g: LinearSelfAttention(dim, n_layers, "separate", normalize=False, shared=shared,
                                         readout_sign=-1.0, clip=clip, init_scale=scale, generator=g)


class _Setting:
    """Shared pieces of the linear settings (a)–(c): task, seeds, fit and comparison prompts."""

    def __init__(self, config: dict, ctx: RunContext):
        self.config, self.ctx = config, ctx
        self.task = linear_regression_from_config(config["task"])
        self.dim, self.n = self.task.d + 1, self.task.n_context
        self.seeds = [config["seed"] + k for k in range(config["seeds"])]
        self.train_cfg = TrainConfig.from_config(config["train"])
        self.fit_sample = self.task.sample(config["fit_prompts"], generator(config["seed"], "fit"), torch.float64)
        self.compare_sample = self.task.sample(config["compare_prompts"], generator(config["seed"], "compare"))
        self.gd1 = gd_step_optimum(self.task)

    def train(self, name: str, n_layers: int, shared: bool, reference=None, lr: float | None = None,
              clip: float | None = None):
        """Train one LSA per seed, initialised at model.init_scale / n_layers (peak ``lr`` and token
        ``clip`` if given); with ``reference``, log the sensitivity cosine to it over training."""
        def cosine_to_reference(step, models):
            return {"sens_cosine": [compare(m, reference, self.compare_sample)["sens_cosine"] for m in models]}

        cfg = self.train_cfg if lr is None else dataclasses.replace(self.train_cfg, lr=lr)
        make = _lsa_factory(self.dim, n_layers, shared, self.config["model"]["init_scale"] / n_layers, clip)
        return self.ctx.train(name, make, data_source(self.task, PairedFormat(), cfg), cfg,
                              self.seeds, setting=name, callback=cosine_to_reference if reference else None)

    def evaluate(self, setting: str, models, learners) -> dict[str, float]:
        """Half-MSE of learners and per-seed models on the shared eval prompts (logged)."""
        predictors = {l.name: l.predict_episode for l in learners}
        predictors.update({f"lsa/seed{s}": model_predictor(m) for s, m in zip(self.seeds, models)})
        losses = evaluate(predictors, self.task, self.config["eval_prompts"], self.config["seed"], "half_mse")
        for key, (mean, stderr) in losses.items():
            model, _, seed = key.partition("/seed")
            seed = int(seed) if seed else None
            self.ctx.log(setting=setting, model=model, seed=seed, metric="half_mse", value=mean)
            self.ctx.log(setting=setting, model=model, seed=seed, metric="half_mse_stderr", value=stderr)
        return {k: v[0] for k, v in losses.items()}

    def log_fit(self, setting: str, learner: GDPlusPlus):
        """Log a fitted learner's per-step η and γ (``n`` = step)."""
        for step, (lr, gamma) in enumerate(zip(learner.lrs.tolist(), learner.gammas.tolist())):
            self.ctx.log(setting=setting, model=learner.name, n=step + 1, metric="fitted_lr", value=lr)
            self.ctx.log(setting=setting, model=learner.name, n=step + 1, metric="fitted_gamma", value=gamma)

    def construction(self, learner: GDPlusPlus, shared: bool) -> LinearSelfAttention:
        """The LSA whose weights implement ``learner`` (recurrent when ``shared``)."""
        model = _lsa_factory(self.dim, learner.steps, shared, 0.0)(None)
        return gd_construction(model, self.n, learner.lrs, learner.gammas)


def _one_layer(s: _Setting):
    """(a) one layer vs the best single GD step."""
    tol, name = s.config["tolerance"], "one-layer"
    gd = GDPlusPlus([s.gd1.lr])
    s.ctx.log(setting=name, model="theory", metric="gd_step_lr", value=s.gd1.lr)
    s.ctx.log(setting=name, model="theory", metric="gd_step_half_mse", value=s.gd1.loss / 2)
    result = s.train(name, 1, True, reference=gd)
    construction = s.construction(gd, True)
    mixed = [interpolate_lsa(m, construction) for m in result.models]
    predictors = {f"interpolated/seed{seed}": model_predictor(m) for seed, m in zip(s.seeds, mixed)}
    losses = s.evaluate(name, result.models, [gd, ZeroPredictor()])
    interp = evaluate(predictors, s.task, s.config["eval_prompts"], s.config["seed"], "half_mse")
    label_rms = s.compare_sample.y_query.pow(2).mean().sqrt().item()
    rows = []
    for seed, model in zip(s.seeds, result.models):
        found = compare(model, gd, s.compare_sample)
        found["interpolated_half_mse"] = interp[f"interpolated/seed{seed}"][0]
        for metric, value in found.items():
            s.ctx.log(setting=name, model="lsa", seed=seed, metric=metric, value=value)
        rows.append(found)
    trained = [losses[f"lsa/seed{k}"] for k in s.seeds]
    worst = max(trained, key=lambda v: abs(v - losses[gd.name]))
    interp_gap = max(max(abs(r["interpolated_half_mse"] - t), abs(r["interpolated_half_mse"] - losses[gd.name])) / t
                     for r, t in zip(rows, trained))
    claims = [
        C.within("a-loss-equals-gd", PAPER,
                 f"(a) a trained 1-layer LSA's half-MSE is within {tol['loss_rel']:.0%} of the best single GD step "
                 f"(η* = {s.gd1.lr:.3g}, exact half-MSE {s.gd1.loss / 2:.4f}; worst seed, shared eval prompts)",
                 worst, losses[gd.name], tol["loss_rel"], figure="training_curves"),
        C.at_least("a-sensitivity-cosine", PAPER,
                   "(a) cosine of ∂ŷ/∂x_q between trained LSA and GD, mean over queries (worst seed)",
                   min(r["sens_cosine"] for r in rows), tol["cosine"], figure="sensitivity_cosine"),
        C.at_most("a-prediction-difference", PAPER,
                  f"(a) mean |ŷ_LSA − ŷ_GD| relative to the labels' rms {label_rms:.3f} (worst seed)",
                  max(r["pred_diff"] for r in rows) / label_rms, tol["pred_diff_rel"]),
        C.at_most("a-interpolation", PAPER,
                  "(a) averaging the rescaled trained weights with the GD construction keeps the loss: "
                  "largest relative gap to the trained and GD losses (worst seed)",
                  interp_gap, tol["interp_rel"]),
    ]
    weights = (result.models[0], construction)
    return claims, {"losses": losses, "gd": losses[gd.name], "trained_mean": sum(trained) / len(trained)}, weights


def _recurrent(s: _Setting):
    """(b) two recurrent layers vs 2-step GD and 2-step GD++ (fitted shared step sizes)."""
    tol, name = s.config["tolerance"], "recurrent-2"
    gd2 = GDPlusPlus.fit(s.fit_sample, 2, shared=True, curvature=False, start=(s.gd1.lr, 0.0))
    gdpp = GDPlusPlus.fit(s.fit_sample, 2, shared=True, curvature=True, start=(s.gd1.lr, 0.0))
    for learner in (gd2, gdpp):
        s.log_fit(name, learner)
    result = s.train(name, 2, True, reference=gdpp)
    losses = s.evaluate(name, result.models, [gd2, gdpp])
    for seed, model in zip(s.seeds, result.models):
        for metric, value in compare(model, gdpp, s.compare_sample).items():
            s.ctx.log(setting=name, model="lsa", seed=seed, metric=metric, value=value)
    trained = [losses[f"lsa/seed{k}"] for k in s.seeds]
    worst = max(trained, key=lambda v: abs(v - losses[gdpp.name]))
    claims = [
        C.at_most("b-beats-2-step-gd", PAPER,
                  f"(b) a trained 2-layer recurrent LSA beats 2-step GD ({gd2.name}, half-MSE "
                  f"{losses[gd2.name]:.4f}; worst seed)", max(trained), losses[gd2.name], figure="training_curves"),
        C.within("b-matches-gd-plus-plus", PAPER,
                 f"(b) …and is within {tol['gd_plus_plus_rel']:.0%} of 2-step GD++ ({gdpp.name}; worst seed)",
                 worst, losses[gdpp.name], tol["gd_plus_plus_rel"], figure="training_curves"),
    ]
    construction = s.construction(gdpp, True)
    return claims, {"losses": losses, "gd": losses[gd2.name], "gd++": losses[gdpp.name]}, (result.models[0], construction)


def _per_layer(s: _Setting, one_layer_loss: float):
    """(c) per-layer models of several depths vs per-step GD++ of the same depth."""
    tol, clip = s.config["tolerance"], s.config["activation_clip"]
    claims, table = [], {}
    for depth in s.config["depths"]:
        clipped = depth >= clip["from_depth"]
        note = f" (tokens clipped to ±{clip['value']:g})" if clipped else ""
        name = f"per-layer-{depth}"
        shared = GDPlusPlus.fit(s.fit_sample, depth, shared=True, start=(s.gd1.lr, 0.0))
        gdpp = GDPlusPlus.fit(s.fit_sample, depth, shared=False, start=(shared.lrs, shared.gammas))
        s.log_fit(name, gdpp)
        result = s.train(name, depth, False, lr=s.config["depth_lr"], clip=clip["value"] if clipped else None)
        losses = s.evaluate(name, result.models, [gdpp])
        trained = [losses[f"lsa/seed{k}"] for k in s.seeds]
        table[depth] = (sum(trained) / len(trained), losses[gdpp.name], max(trained))
        claims.append(C.at_most(
            f"c-depth-{depth}-near-gd-plus-plus", PAPER,
            f"(c) a trained {depth}-layer per-layer LSA{note} is at most {tol['depth_rel']:.0%} above per-step GD++ "
            f"of the same depth ({gdpp.name}, half-MSE {losses[gdpp.name]:.4f}; worst seed)",
            max(trained), losses[gdpp.name] * (1 + tol["depth_rel"]), figure="training_curves"))
    means = [one_layer_loss] + [table[d][0] for d in s.config["depths"]]
    claims.insert(0, C.holds_if(
        "c-loss-falls-with-depth", PAPER, "(c) the trained loss (mean over seeds) falls with every added layer",
        " > ".join(f"{m:.4f}" for m in means), "strictly decreasing from 1 layer on",
        all(a > b for a, b in zip(means, means[1:])), figure="training_curves"))
    return claims, table


def _sine(config: dict, ctx: RunContext):
    """(d) sine regression: MLP features + one trained LSA layer vs the same MLP + the GD construction."""
    cfg, tol, name = config["sine"], config["tolerance"], "sine"
    task = SineRegression(n_context=cfg["n_context"])
    seeds = [config["seed"] + k for k in range(config["seeds"])]
    train_cfg = TrainConfig.from_config(cfg["train"])
    width, k = cfg["width"], cfg["features"]

    def make(train_attention):
        def build(g):
            # Merged W_KQ, W_PV: the separate factors start at a saddle (small × small) that
            # holds the trained attention back for most of a short run.
            lsa = LinearSelfAttention(k + 1, 1, "merged", normalize=False, readout_sign=-1.0,
                                      init_scale=cfg["init_scale"], generator=g)
            if not train_attention:  # η = 1 loses nothing: the features' scale is learned
                gd_construction(lsa, task.n_context, 1.0)
            return FeatureLSA(MLP(1, width, k, generator=g), lsa, train_attention)
        return build

    results, losses = {}, {}
    for model_name, trainable in (("mlp+lsa", True), ("mlp+gd", False)):
        results[model_name] = ctx.train(f"sine-{model_name}", make(trainable), data_source(task, PairedFormat(), train_cfg),
                                        train_cfg, seeds, setting=name)
    predictors = {"zero": ZeroPredictor().predict_episode}
    for model_name, result in results.items():
        predictors.update({f"{model_name}/seed{s}": model_predictor(m) for s, m in zip(seeds, result.models)})
    found = evaluate(predictors, task, config["eval_prompts"], config["seed"], "half_mse")
    for key, (mean, _) in found.items():
        model, _, seed = key.partition("/seed")
        ctx.log(setting=name, model=model, seed=int(seed) if seed else None, metric="half_mse", value=mean)
    for model_name in results:
        losses[model_name] = sum(found[f"{model_name}/seed{s}"][0] for s in seeds) / len(seeds)
    zero = found["zero"][0]
    claims = [
        C.within("d-trained-matches-gd-features", PAPER,
                 f"(d) sine waves: MLP + trained LSA reaches the loss of MLP + GD-construction attention within "
                 f"{tol['sine_rel']:.0%} (means over seeds; measured: trained, expected: GD construction)",
                 losses["mlp+lsa"], losses["mlp+gd"], tol["sine_rel"], figure="sine"),
        C.at_most("d-far-below-zero", PAPER,
                  f"(d) both are far below the zero predictor (half-MSE {zero:.3f}): worse one / zero",
                  max(losses.values()) / zero, tol["sine_below_zero"], figure="sine"),
    ]
    return claims, results, losses, zero


def _check(config: dict):
    """Reject impossible settings before any training starts."""
    depths = config["depths"]
    if not depths or not all(isinstance(d, int) and d >= 1 for d in depths):
        raise ConfigError(f"depths must be a non-empty list of layer counts >= 1, got {depths!r}")
    if not config["activation_clip"]["value"] > 0:
        raise ConfigError(f"activation_clip.value must be > 0, got {config['activation_clip']['value']}")
    for key in ("fit_prompts", "eval_prompts", "compare_prompts"):
        if config[key] < 1:
            raise ConfigError(f"{key} must be >= 1, got {config[key]}")


def run(config: dict, ctx: RunContext):
    """Run (a)–(d) and draw the figures."""
    s = _Setting(config, ctx)
    claims_a, a, weights_a = _one_layer(s)
    claims_b, b, weights_b = _recurrent(s)
    claims_c, depth_table = _per_layer(s, a["trained_mean"])
    claims_d, _, sine_losses, zero = _sine(config, ctx)
    _figures(ctx, a, b, depth_table, (weights_a, weights_b), sine_losses, zero)
    return claims_a + claims_b + claims_c + claims_d


def _figures(ctx: RunContext, a, b, depth_table, weights, sine_losses, zero):
    import pandas as pd

    rows = pd.DataFrame(ctx.rows)
    history = rows[rows.step.notna()] if "step" in rows else rows.iloc[:0]
    fig, axes = new_figure(3)
    for ax, (setting, lines) in zip(axes, [("one-layer", {"best 1-step GD": a["gd"]}),
                                           ("recurrent-2", {"2-step GD": b["gd"], "2-step GD++": b["gd++"]})]):
        training_curve(ax, history[history.setting == setting], "trained LSA (mean, min–max)")
        for (label, value), color in zip(lines.items(), ("C3", "C2")):
            ax.axhline(value, color=color, ls="--", label=f"{label} {value:.3f}")
        ax.set_yscale("log")
        ax.set_ylabel("training half-MSE")
        ax.set_title(setting)
        ax.legend(fontsize=8)
    ax = axes[2]
    depths = [1] + list(depth_table)
    ax.plot(depths, [a["trained_mean"]] + [depth_table[d][0] for d in depth_table], "o-",
            label="trained LSA (mean over seeds)")
    ax.plot(depths, [a["gd"]] + [depth_table[d][1] for d in depth_table], "s--", label="per-step GD++ (fitted)")
    ax.set_xlabel("layers")
    ax.set_ylabel("half-MSE (eval prompts)")
    ax.set_yscale("log")
    ax.set_title("per-layer models by depth")
    ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("training_curves"))

    fig, axes = new_figure(4, width=3.2, height=3.0, rows=2)
    for row, (title, (trained, construction)) in enumerate(zip(("(a) vs GD", "(b) vs GD++"), weights)):
        (kq, pv), (t_kq, t_pv) = (tuple(w.detach().cpu() for w in m.layers[0].merged()) for m in (trained, construction))
        kq, pv = match_scale(kq, pv, t_kq)  # the rescaling the interpolation uses
        panels = [(kq, "trained W_KQ (rescaled)"), (pv, "trained W_PV (rescaled)"),
                  (t_kq, "construction W_KQ"), (t_pv, "construction W_PV")]
        for ax, (matrix, name) in zip(axes[4 * row: 4 * row + 4], panels):
            heatmap(ax, matrix, f"{title}: {name}")
    save(fig, ctx.folder.figure("weights"))

    fig, axes = new_figure(2)
    for ax, (setting, ref) in zip(axes, (("one-layer", "best 1-step GD"), ("recurrent-2", "2-step GD++"))):
        training_curve(ax, history[history.setting == setting], "trained LSA (mean, min–max)", metric="sens_cosine")
        ax.set_ylabel(f"cosine of ∂ŷ/∂x_q with {ref}")
        ax.set_title(setting)
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("sensitivity_cosine"))

    fig, axes = new_figure(1)
    for model, color in (("sine-mlp+lsa", "C0"), ("sine-mlp+gd", "C3")):
        training_curve(axes[0], history[history.model == model], model[5:], color=color)
    axes[0].axhline(zero, color="k", ls=":", label=f"zero predictor {zero:.2f}")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("training half-MSE")
    axes[0].set_title("sine regression: trained LSA vs GD attention")
    axes[0].legend(fontsize=8)
    save(fig, ctx.folder.figure("sine"))


EXPERIMENT = Experiment(
    name="gd-mechanism",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_check,
)
