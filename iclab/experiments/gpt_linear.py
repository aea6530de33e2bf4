"""``gpt-linear``: a GPT-style transformer learns linear regression in context, tracking OLS.

Garg, Tsipras, Liang & Valiant (NeurIPS 2022) and Akyürek et al. (ICLR 2023); docs/papers.md §7
(Garg et al.) and §3 (Akyürek et al.). A pre-LN causal transformer reads interleaved prompts x_1, y_1, …, x_N, y_N
(:class:`iclab.prompts.InterleavedFormat`) of noiseless linear functions with x, w ~ N(0, I)
and predicts every y_{k+1} from the first k examples. Its error at every prefix length k is
compared, on the same prompts, with OLS (minimum-norm for k < d), ridge, 3-NN, averaging and
one-step GD, in Garg et al.'s convention ``mse_over_d`` with a bootstrap 5–95% band.
"""

from __future__ import annotations

import torch

from .. import claims as C
from ..config import ConfigError
from ..curriculum import training_data
from ..learners import Averaging, GradientDescent, LeastSquares, NearestNeighbours, Ridge
from ..metrics import loss_by_prefix, prefix_predictions
from ..metrics import spd as squared_prediction_distance
from ..models.transformer import GPTConfig, GPTTransformer
from ..prompts import InterleavedFormat
from ..report.figures import band_line, new_figure, save, training_curve
from ..tasks import linear_regression_from_config
from ..theory import gd_step_optimum
from .base import Experiment, RunContext
from .function_classes import PAPER_BAND

PAPER_AT_2D = 0.0006
"""The paper's mse/d of its transformer at k = 2d (Garg et al. Fig 2, d = 20), where OLS's is 0."""

PAPER = "Garg et al. (NeurIPS 2022); Akyürek et al. (ICLR 2023)"

DEFAULTS = {
    "seed": 0,
    "seeds": 1,  # one seed per quick run (its time: docs/experiments/gpt-linear.md); pass --seeds for more
    "task": {"d": 5, "n_context": 10, "inputs": "gaussian"},
    # attention "math": seeds train together under vmap, which has no batching rule for SDPA on CPU.
    # mlp_ratio 2: a step costs about 4/5 of GPT-2's ratio of 4, which buys the steps the claims need.
    # init "garg", activation "gelu-tanh": Garg et al.'s model (GPT-2 between a read-in and a read-out at
    # nn.Linear's default; GPT-2's tanh GELU), the model of their code (why it matters: docs/experiments/gpt-linear.md).
    "model": {
        "n_layers": 4,
        "n_heads": 4,
        "width": 64,
        "mlp_ratio": 2.0,
        "attention": "math",
        "init": "garg",
        "activation": "gelu-tanh",
    },
    # The quick recipe, and the GPU and CPU sweeps that chose it: docs/experiments/gpt-linear.md.
    # compile: torch.compile the loss, about 1.2x the steps/s of this model on 2 CPU cores.
    "train": {
        "steps": 11000,
        "batch_size": 128,
        "lr": 0.001,
        "optimizer": "adam",
        "schedule": "cosine",
        "warmup": 1000,
        "clip": None,
        "log_every": 50,
        "checkpoint_every": 500,
        "compile": True,
        "precision": "fp32",  # or tf32 / bf16 on a GPU (see iclab.train)
    },
    "curriculum": None,
    "ridge_lam": 0.1,
    "eval_prompts": 4000,
    "bootstrap": 1000,
    # min_norm_spd: Akyürek et al.'s bound on SPD/d to OLS ("with squared error less than 0.01").
    "tolerance": {"ols_gap": 0.05, "min_norm_spd": 0.01},
}

SCALES = {
    # Smoke: the whole pipeline in seconds (training, evaluation, claims, report); its verdicts mean nothing.
    "smoke": {
        "train": {"steps": 10, "warmup": 0, "compile": False, "log_every": 2},  # a training curve of 5 points
        "model": {"n_layers": 1, "width": 16, "n_heads": 2},
        "eval_prompts": 200,
        "bootstrap": 50,
    },
    "quick": {},
    "paper": {
        "seeds": 1,
        "task": {"d": 20, "n_context": 41},
        "model": {"n_layers": 12, "n_heads": 8, "width": 256, "mlp_ratio": 4.0},
        "train": {
            "steps": 500000,
            "batch_size": 64,
            "lr": 0.0001,
            "schedule": "constant",
            "warmup": 0,
            "log_every": 500,
            "checkpoint_every": 10000,
            "compile": False,
            "capture": True,  # on a GPU each step replays as a CUDA graph (docs/performance.md); nothing on a CPU
        },
        "curriculum": {"d_start": 5, "d_end": 20, "d_step": 1, "n_start": 11, "n_end": 41, "n_step": 2, "every": 2000},
        "eval_prompts": 12800,
    },
}


def _data(config: dict, task, prompt_format) -> dict:
    """:meth:`RunContext.trained`'s data arguments: the full task's prompts, or the d/N curriculum towards it
    when one is configured."""
    make_task = lambda d, n: linear_regression_from_config({**config["task"], "d": d, "n_context": n})
    return training_data(task, prompt_format, config["curriculum"], make_task)


def _gpt_config(config: dict, d: int, n: int) -> GPTConfig:
    """The transformer's shape: the ``model`` block, reading prompts of 2n tokens of d + 1 coordinates."""
    arch = config["model"]
    return GPTConfig(
        d + 1,
        arch["n_layers"],
        arch["n_heads"],
        arch["width"],
        arch["mlp_ratio"],
        max_tokens=2 * n,
        attention=arch["attention"],
        init=arch["init"],
        activation=arch["activation"],
    )


def _checks(config: dict):
    """The task, the model and the curriculum must build before anything trains (the framework checks ``train``),
    and the prompts must hold the prefixes the claims compare at: k = 1 and some k ≥ 2 (``n_context`` ≥ 3)."""
    task = linear_regression_from_config(config["task"])
    if task.n_context < 3:
        raise ConfigError(
            f"task.n_context must be >= 3, got {task.n_context}: the claims compare the transformer with the learners "
            "after k = 1 and k >= 2 examples"
        )
    _gpt_config(config, task.d, task.n_context)
    _data(config, task, InterleavedFormat())


def run(config: dict, ctx: RunContext):
    """Train the transformer, evaluate it and the learners at every prefix length, check claims."""
    task = linear_regression_from_config(config["task"])
    d, n = task.d, task.n_context
    fmt = InterleavedFormat()
    with ctx.part("training", claims=["*"]):
        result = ctx.trained(
            "gpt",
            lambda g: GPTTransformer(_gpt_config(config, d, n), g),
            train=config["train"],
            setting="linear",
            **_data(config, task, fmt),
        )
    with ctx.part("evaluation", claims=["*"]):
        claims = _evaluate(config, ctx, task, result, fmt)
    return claims


def _evaluate(config: dict, ctx: RunContext, task, result, fmt) -> list:
    """The trained models and the learners at every prefix length, their distances to OLS and 3-NN, the claims
    and figures."""
    d, n = task.d, task.n_context

    episode = ctx.eval_episode(task, config["eval_prompts"])
    gd_lr = gd_step_optimum(task).lr
    learners = [
        LeastSquares(),
        Ridge(config["ridge_lam"]),
        NearestNeighbours(3),
        Averaging(),
        GradientDescent(1, gd_lr),
    ]
    predictions = {l.name: prefix_predictions(l, episode) for l in learners}
    predictions |= {("gpt", seed): prefix_predictions(model, episode) for seed, model in result.by_seed.items()}

    curves = {}  # a learner's name or ("gpt", seed) -> mse/d by prefix with its band
    for key, pred in predictions.items():
        curves[key] = loss_by_prefix(pred, episode.ys, "mse_over_d", d, config["bootstrap"], seed=config["seed"])
        model, seed = key if isinstance(key, tuple) else (key, None)
        ctx.log_band("linear", model, "mse_over_d", curves[key], seed=seed)

    # Squared prediction distance to OLS and to 3-NN (Akyürek et al.'s SPD, divided by d; 3-NN's is logged only).
    spd = {}
    for seed in result.seeds:
        for ref in ("ols", "3-nn"):
            spd[seed, ref] = squared_prediction_distance(
                predictions["gpt", seed], predictions[ref], d, config["bootstrap"], config["seed"]
            )["mean"]
            for k in range(n):
                ctx.log(
                    setting="linear", model="gpt", seed=seed, n=k, metric=f"spd_{ref}", value=spd[seed, ref][k].item()
                )

    claims = _claims(config, result.seeds, curves, spd, d, n)
    _figures(ctx, curves, result.seeds, d, gd_lr)
    return claims


def _tracks_ols_claim(config, seeds, curves, d, n) -> C.Claim:
    """The transformer within ``tolerance.ols_gap`` of OLS at every k ≥ 1 (the paper's 0.02 at k = d plus 0.03, the
    widest half-width of the paper's 90% bands that function-classes reads off its shift figures); where the prompts
    reach k = 2d, also at most the paper's 0.0006 there + that 0.03 + the run's own 90% half-band (p95 − mean), every
    seed: a lenient reading of 0.0006 (iclab holds no reading of the paper's band there), stated as such."""
    mean = {key: c["mean"] for key, c in curves.items()}
    gap = max((mean["gpt", s][1:] - mean["ols"][1:]).max().item() for s in seeds)  # every k ≥ 1 ("any number")
    tol = config["tolerance"]["ols_gap"]
    statement = (
        f"for any number k ≥ 1 of examples the transformer's mse/d is within {tol} of OLS's "
        f"(min-norm below d; largest gap over k and {len(seeds)} seeds, {config['eval_prompts']} prompts)"
    )
    about = C.paper("Garg et al. §3.1, Fig 2", f"0.02 at k = d, {PAPER_AT_2D} at k = 2d (d = 20)")
    if n <= 2 * d:  # the prompts end before k = 2d, the paper's second number
        return C.at_most("tracks-ols", PAPER, statement, gap, tol, about=about, figure="loss_by_prefix")
    at_2d = {s: mean["gpt", s][2 * d].item() for s in seeds}
    allowed = {s: PAPER_AT_2D + PAPER_BAND + curves["gpt", s]["high"][2 * d].item() - at_2d[s] for s in seeds}
    return C.all_of(
        "tracks-ols",
        PAPER,
        f"{statement}; at k = 2d its mse/d is at most the paper's {PAPER_AT_2D} + {PAPER_BAND} (the widest "
        "half-width of the paper's 90% bands) + this run's 90% half-band there, every seed",
        {
            "largest gap": round(gap, 6),
            "k = 2d": {s: {"error": round(at_2d[s], 6), "allowed": round(allowed[s], 6)} for s in seeds},
        },
        f"gap ≤ {tol} at every k ≥ 1; at k = 2d mse/d ≤ {PAPER_AT_2D} + {PAPER_BAND} + the half-band, every seed",
        {"every k": gap <= tol, "k = 2d": all(at_2d[s] <= allowed[s] for s in seeds)},
        about=about,
        figure="loss_by_prefix",
    )


def _claims(config, seeds, curves, spd, d, n):
    mean = {key: c["mean"] for key, c in curves.items()}
    gpt = [mean["gpt", s] for s in seeds]
    ks = range(1, n)  # Fig 2 draws the transformer below both from the first example
    beaten = [(k, s) for s, g in zip(seeds, gpt) for k in ks if not g[k] < min(mean["averaging"][k], mean["3-nn"][k])]
    worst_margin = min((min(mean["averaging"][k], mean["3-nn"][k]) - g[k]).item() for g in gpt for k in ks)
    early = range(1, min(d, n))
    bound = config["tolerance"]["min_norm_spd"]
    to_ols = {k: max(spd[s, "ols"][k].item() for s in seeds) for k in early}  # worst seed at each k < d
    below_d = C.holds_if(
        "min-norm-below-d",
        PAPER,
        "with fewer examples than d the transformer's predictions are consistent with min-norm OLS: "
        f"SPD/d to it is below {bound:g} at every 1 ≤ k < d "
        "(Akyürek et al.'s threshold; worst seed; measured: SPD/d by k)",
        {f"k={k}": v for k, v in to_ols.items()},
        f"< {bound:g} at every k < d",
        all(v < bound for v in to_ols.values()),
        about=C.paper("Akyürek et al. §4.3, Fig 1; Garg et al. §3.2, Fig 3", f"SPD/d < {bound:g} (d = 8)"),
        figure="loss_by_prefix",
    )
    if not to_ols:
        below_d = C.not_measured(below_d, f"d = {d}: no prefix 1 ≤ k < d to compare with min-norm OLS")
    return [
        _tracks_ols_claim(config, seeds, curves, d, n),
        C.holds_if(
            "beats-averaging-and-3nn",
            PAPER,
            "the transformer's mse/d is below both averaging's and 3-NN's at every k ≥ 1 (every seed)",
            f"smallest margin {worst_margin:.4g}; failures (k, seed): {beaten or 'none'}",
            "margin > 0 at every k ≥ 1",
            not beaten,
            about=C.paper("Garg et al. §3.1, Fig 2"),
            figure="loss_by_prefix",
        ),
        below_d,
    ]


def _figures(ctx: RunContext, curves, seeds, d, gd_lr):
    fig, axes = new_figure(1, width=6.0, height=4.0)
    ax = axes[0]
    labels = {LeastSquares().name: "OLS (min-norm)", GradientDescent(1, gd_lr).name: f"1-step GD (η={gd_lr:.2f})"}
    for key, c in curves.items():
        model = isinstance(key, tuple)
        if model and key != ("gpt", seeds[0]):
            continue
        k = torch.arange(len(c["mean"]))
        label = f"transformer (seed {seeds[0]})" if model else labels.get(key, key)
        band_line(ax, k, c["mean"], c["low"], c["high"], marker="o", ms=3, lw=2.5 if model else 1.2, label=label)
    ax.axvline(d, color="k", ls=":", lw=0.8, label=f"k = d = {d}")
    ax.set_xlabel("in-context examples k")
    ax.set_ylabel("mse / d (5–95% bootstrap band)")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=0)  # OLS is exactly 0 once k ≥ d (noiseless)
    ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("loss_by_prefix"))

    fig, axes = new_figure(1)
    training_curve(axes[0], ctx.history(), "transformer (mean, min–max over seeds)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("training mse (all positions)")
    axes[0].legend(fontsize=8)
    save(fig, ctx.folder.figure("training_curve"))


EXPERIMENT = Experiment(
    continuable=True,
    name="gpt-linear",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    claims_version=3,
    timing={"eval_prompts": 64, "bootstrap": 10},  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
