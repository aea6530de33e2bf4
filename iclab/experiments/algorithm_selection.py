"""``algorithm-selection``: which learning algorithm a trained transformer implements.

Akyürek, Schuurmans, Andreas, Ma & Zhou, "What learning algorithm is in-context learning?
Investigations with linear models" (ICLR 2023); docs/papers.md §3. GPT-style transformers read
interleaved prompts x_1, y_1, …, x_N, y_N (:class:`iclab.prompts.InterleavedFormat`) of linear
functions y = wᵀx + ε, x ~ N(0, I), w ~ N(0, τ²I), ε ~ N(0, σ²), and predict every y_{k+1} from
the first k examples. Their predictions are compared, on shared prompts, with reference
learners: OLS (minimum-norm below d), ridge, one-step batch GD from w₀ = 0, w = 2αXᵀY
(``GradientDescent(1, 2α, average=False)``), one-pass SGD with step α, 3-NN uniform and
weighted by 1/distance². Five parts, each its own ``setting`` in ``metrics.parquet``:

(a) ``noiseless``: SPD(transformer, learner)/d and ILWD (implicit linear weight difference,
    with the R² of the transformer's linear fit) at every prefix length k (their Fig 1); claims:
    both are < 0.01 against OLS for almost every k, the SPD is largest against the k-NN learners,
    and the SPD to every gradient-descent learner falls with every example from k = d on (over
    Fig 1's prefixes, k ≤ 7d/4);
(b) ``noise``: one model per (σ, τ); MSPD (SPD averaged over 1 ≤ k < d) against OLS and the
    ridges λ = σ²/τ² of every noise level, as a heat map (their Fig 2); claim: in every column
    the closest of them is the Bayes predictor (ridge with λ = σ²/τ², OLS for σ = 0);
(c) ``depth``: noiseless models of several depths; which learner is closest (MSPD, SPD averaged
    over the under-determined prefixes 1 ≤ k < d, as their Fig 3) at each depth, among every learner
    of their Fig 3's legend and the zero predictor (a control: a model closest to predicting 0 has
    learnt nothing); claims: one layer is closest to one-step GD, 2–4 layers to ridge, ≥ 8 layers
    to OLS;
(d) ``probes``: per hidden state of a deep noiseless model, a linear and an MLP probe
    (attention-pooled, :mod:`iclab.probes`) decode Xᵀy and w_OLS after n examples; held-out
    R²; claims: the MLP probe beats the linear one at the last layer, Xᵀy becomes decodable
    before w_OLS, each target is decodable after the last block and not at the input layer, and a
    control model trained on one fixed w probes worse;
(e) ``constructions``: the paper's §3 constructions, transformers built by hand
    (:mod:`iclab.models.raw`) that run one-pass SGD and ridge (Sherman–Morrison), against the learners
    they should equal, at every prefix length; claims: each matches its learner (SPD/d ≤ 1e-10).

The claims a scale may leave to the ``long`` scale are listed in its ``judged_at_long``; a run defers
one only when it measures that its models miss the resolution the claim needs (both numbers in the
claim's reason) and its numbers do not tell a failure beyond that resolution, and judges it otherwise. The
claims of Fig 1 about the learner set (k-NN least similar; gradient descent closer as k grows, iclab's diagnostic
of a reading of the figure) are listed in ``judged_at_paper``: a run leaves one to the paper scale only when its
learners alone, with OLS in the model's place, clearly would not hold it (OLS's margin below 0 by more than two
standard errors over the prompts). How the recipes were chosen and what
they measured: docs/experiments/algorithm-selection.md.

A model serves every part whose task and depth it has (the σ = 0, τ = 1 model of the default
depth is (a)'s model, (b)'s first column and one of (c)'s depths; (d) probes (c)'s deepest
model when their d agree), so each distinct (d, depth, σ, τ) trains once. Our transformer is
iclab's pre-LN GPT (final LayerNorm, heads of width W/M); theirs adds the residual to the
normalised stream, has no final LayerNorm and uses heads of width W/M²: details of theirs,
not of the finding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from .. import claims as C
from ..config import ConfigError
from ..curriculum import Curriculum, training_data
from ..learners import GradientDescent, LeastSquares, NearestNeighbours, OnePassSGD, Ridge, ZeroPredictor
from ..metrics import ilwd, mspd, prefix_predictions, prefix_weights, resampled_means, spd
from ..models.raw import construction_prefix_predictions, ridge_transformer, sgd_transformer
from ..models.transformer import GPTConfig, GPTTransformer
from ..probes import TARGETS, PoolingProbes, ProbeSplits
from ..prompts import InterleavedFormat
from ..report.figures import band_line, new_figure, save
from ..rng import generator
from ..tasks import linear_regression_from_config
from .base import Experiment, RunContext, check_training

PAPER = "Akyürek et al. (ICLR 2023)"
# The paper's MSPD of the trained model to the Bayes learner of each noise column (its Fig 2's diagonal).
PAPER_BAYES_MSPD = {"0": 1.25e-5, "1/16": 3.29e-5, "1/9": 3.86e-5, "1/4": 3.30e-5, "4/9": 6.10e-5}

DEFAULTS = {
    "seed": 0,
    "seeds": 1,  # every part's models train once per run, its seeds together
    # Quick sizes: d = 4, N = 8 (the paper's probe d; its SPD, noise and depth figures use d = 8, N = 40),
    # width 32, 2 heads; the recipe and its measurements: docs/experiments/algorithm-selection.md.
    "task": {"d": 4, "n_context": 8},
    "model": {"n_layers": 4, "n_heads": 2, "width": 32, "mlp_ratio": 4.0, "attention": "math"},
    "train": {
        "steps": 3000,
        "batch_size": 128,
        "lr": 0.001,
        "optimizer": "adam",
        "schedule": "cosine",
        "warmup": 300,
        "clip": None,
        "log_every": 50,
        "checkpoint_every": 500,
        "precision": "fp32",
    },
    # d (and N, from n_start if given) grow every `every` steps up to the model's own d and N.
    "curriculum": {"d_start": 1, "d_step": 1, "every": 400},
    "noise_finetune": {"steps": 500, "warmup": 50, "lr": 0.0005},  # train keys; null: from scratch
    "noise": [[0.0, 1.0], [0.25, 1.0], [0.5, 1.5], [0.5, 1.0], [0.5, 0.75]],  # (σ, τ): σ²/τ² = 0, 1/16, 1/9, 1/4, 4/9
    "depths": [1, 2, 4, 8],
    # The paper's α are for N = 40 examples; at N = 8 they are 5x larger, so that 2αN, the size of
    # GD's step relative to XᵀX ≈ N·I (and SGD's total over its N steps), is the paper's.
    "learners": {"ridge": [0.1, 0.5], "gd_alpha": [0.05, 0.1], "sgd_alpha": [0.05, 0.15], "knn": 3},
    "eval_prompts": 4000,
    "ilwd": {"contexts": 256, "probes": 32},  # P probe inputs per context (≥ d + 1; the paper does not say)
    "probe": {
        "d": 4,
        "n_layers": 8,
        "hidden_units": 32,  # the paper: 16 layers, MLP head of 512
        "train_prompts": 4096,
        "test_prompts": 1024,
        # lr 0.01 (the paper: 0.001) brings these small probes to their plateau in 800 steps.
        "train": {
            "steps": 800,
            "batch_size": 128,
            "lr": 0.01,
            "optimizer": "adam",
            "schedule": "constant",
            "log_every": 50,
            "checkpoint_every": 800,
        },
    },
    "construction_prompts": 1000,  # (e): the constructions run on this many of the evaluation prompts
    "bootstrap": 1000,
    # (e): a construction matches its learner when SPD/d ≤ construction_match at every prefix: 10⁴ times the
    # largest value measured at d = 8 (9e-15, float64); a step size or λ off by 1e-4 of itself exceeds it at d = 4.
    # (d): the MLP probe's last-layer R² must beat the linear one's (margin ≥ 0); a target counts as
    # decodable at R² ≥ probe_decodable; each target must be decodable after the last block, not at the input
    # layer (the read-in), and its R² must rise by ≥ probe_rise between them (a held-out R² on 1024 prompts moves
    # by ~0.01 between probes), and after the last block the learner's must exceed the fixed-w control's by
    # ≥ control_gap for both targets (the same margin).
    # (a): SPD/d and ILWD to OLS below the paper's 0.01 at ≥ 80% of prefix lengths ("almost any").
    # Claims this scale may leave to the long scale: a run defers one only when its own numbers show its
    # models short of the resolution the claim needs (the distance between the Bayes learner and its nearest
    # other learner; docs/experiments/algorithm-selection.md) and do not tell a failure beyond it.
    "judged_at_long": ["b-bayes-ridge-closest"],
    # Claims about the learner set of the paper's Fig 1 that this scale's learners may leave to the paper scale: a
    # run defers one only when a predictor equal to OLS would clearly not hold it with these learners (their step
    # sizes are scaled for this N; by more than two standard errors), which the learners alone decide, never the
    # model.
    "judged_at_paper": ["a-knn-least-similar", "a-gd-closer-as-k-grows"],
    "tolerance": {
        "ols_match": 0.01,
        "ols_match_share": 0.8,
        "probe_margin": 0.0,
        "probe_decodable": 0.8,
        "probe_rise": 0.1,
        "control_gap": 0.1,
        "construction_match": 1e-10,
    },
}

# Paper scale: the paper's sizes, each model from scratch (its cost: docs/experiments/algorithm-selection.md).
SCALES = {
    # Smoke: the whole pipeline in seconds (training, evaluation, probes, claims, report); its verdicts
    # mean nothing. Depths 1, 2 and 8 and two noise settings, so that every claim is produced.
    "smoke": {
        "judged_at_long": [],
        "judged_at_paper": [],
        "task": {"n_context": 5, "d": 3},
        "model": {"width": 16},
        "train": {"steps": 3, "warmup": 0, "checkpoint_every": 3, "log_every": 1},
        "noise_finetune": {"steps": 3, "warmup": 0},
        "depths": [1, 2, 8],
        "noise": [[0.0, 1.0], [0.5, 1.0]],
        "eval_prompts": 64,
        "construction_prompts": 32,
        "ilwd": {"contexts": 8, "probes": 6},
        "bootstrap": 20,
        "probe": {
            "d": 3,
            "n_layers": 2,
            "train_prompts": 64,
            "test_prompts": 32,
            "train": {"steps": 3, "warmup": 0, "log_every": 1},
            "hidden_units": 8,
        },
    },
    "quick": {},
    # Long (within an hour on a quiet 2-core CPU): the quick task (d = 4, N = 8) with models twice as wide
    # (64, 4 heads) trained 20 000 steps, 8 layers for (a), (b)'s fine-tuned models and (d)'s probes; it
    # judges every claim but the Fig 1 claims its learners leave to the paper scale (docs/experiments/
    # algorithm-selection.md, "The long scale" and its time).
    "long": {
        "judged_at_long": [],
        "model": {"n_layers": 8, "n_heads": 4, "width": 64},
        "train": {"steps": 20000, "warmup": 1000},
        "probe": {"n_layers": 8},
    },
    "paper": {
        "judged_at_long": [],
        "judged_at_paper": [],
        "task": {"d": 8, "n_context": 40},
        "model": {"n_layers": 16, "n_heads": 4, "width": 512},
        "train": {
            "steps": 500000,
            "batch_size": 64,
            "lr": 0.0001,
            "warmup": 100000,
            "log_every": 500,
            "checkpoint_every": 10000,
        },
        "curriculum": None,
        "noise_finetune": None,
        "depths": [1, 2, 4, 8, 12, 16],
        "learners": {"gd_alpha": [0.01, 0.02], "sgd_alpha": [0.01, 0.03]},
        "eval_prompts": 10000,
        "probe": {
            "d": 4,
            "n_layers": 16,
            "hidden_units": 512,
            "train_prompts": 16384,
            "test_prompts": 4096,
            "train": {"steps": 20000, "batch_size": 256, "lr": 0.001, "checkpoint_every": 5000},
        },
    },
}


def _fraction(x: float) -> str:
    """σ²/τ² as a short fraction for labels ('0', '1/16', '4/9')."""
    return str(Fraction(x).limit_denominator(1000))


def _bayes_label(ratio: float) -> str:
    """The Bayes predictor's label for σ²/τ² (OLS when noiseless)."""
    return "ols" if ratio == 0 else f"ridge({_fraction(ratio)})"


def _reference_learners(config: dict) -> dict[str, tuple[str, object]]:
    """The learners of parts (a) and (c) (Akyürek et al.'s Fig 1 legend): label → (family, learner),
    the family being ``ols``, ``ridge``, ``gd`` (one-step batch GD), ``sgd`` (one-pass SGD) or ``knn``."""
    cfg = config["learners"]
    k = cfg["knn"]
    return (
        {"ols": ("ols", LeastSquares())}
        | {f"ridge({lam:g})": ("ridge", Ridge(lam)) for lam in cfg["ridge"]}
        | {f"gd(α={a:g})": ("gd", GradientDescent(1, 2 * a, average=False)) for a in cfg["gd_alpha"]}
        | {f"sgd(α={a:g})": ("sgd", OnePassSGD(2 * a)) for a in cfg["sgd_alpha"]}
        | {f"{k}-nn": ("knn", NearestNeighbours(k)), f"{k}-nn(1/d²)": ("knn", NearestNeighbours(k, "distance2"))}
    )


def _checks(config: dict):
    d, n = config["task"]["d"], config["task"]["n_context"]
    if not 2 <= d < n - 1:
        raise ConfigError(
            f"algorithm-selection needs 2 <= d < n_context - 1 (the Fig 1 claims follow the learners past k = d), "
            f"got d={d}, n_context={n}"
        )
    if config["ilwd"]["probes"] <= d:
        raise ConfigError(f"ilwd.probes must exceed d = {d} (a least-squares fit with intercept)")
    for pair in config["noise"]:
        if len(pair) != 2 or pair[0] < 0 or pair[1] <= 0:
            raise ConfigError(f"noise entries are [σ, τ] with σ >= 0 and τ > 0, got {pair}")
    if not any(sigma > 0 for sigma, _ in config["noise"]):
        raise ConfigError("noise needs a pair with σ > 0: (b) compares the Bayes learners of its columns")
    if not config["depths"] or min(config["depths"]) < 1:
        raise ConfigError("depths must be a non-empty list of positive layer counts")
    if config["construction_prompts"] < 1:
        raise ConfigError(f"construction_prompts must be >= 1, got {config['construction_prompts']}")
    if config["probe"]["n_layers"] < 2:
        raise ConfigError("probe.n_layers must be >= 2 (the claims follow the probes through the blocks)")
    if config["noise_finetune"] is not None:
        check_training({**config["train"], **config["noise_finetune"]}, "noise_finetune")
    if config["curriculum"] is not None:
        for d_model in (d, config["probe"]["d"]):
            Curriculum.towards(config["curriculum"], d_model, n)
    _reference_learners(config)


def _task(config: dict, d: int, sigma: float, tau: float):
    return linear_regression_from_config({**config["task"], "d": d, "noise": sigma, "w_scale": tau})


def _model(config: dict, ctx: RunContext, d: int, n_layers: int, sigma: float = 0.0, tau: float = 1.0):
    """The transformer of one (d, depth, σ, τ), trained once per run (:meth:`RunContext.trained`) and read
    by every part that needs it.

    A noiseless model trains from scratch (through the d/N curriculum when one is configured); a noisy
    one, with ``noise_finetune`` set, starts from the noiseless model of its depth and trains on its own
    (σ, τ) for ``noise_finetune``'s steps (a warm start, for budget; null trains it from scratch like the
    rest, as the paper does).
    """
    make = _architecture(config, d, n_layers)
    name = _name(d, n_layers, sigma, tau)
    if sigma > 0 and config["noise_finetune"] is not None:
        base = _model(config, ctx, d, n_layers)
        train = {**config["train"], **config["noise_finetune"]}
        task = _task(config, d, sigma, tau)
        return ctx.trained(
            name, make, train=train, task=task, format=InterleavedFormat(), setting="training", init=[base]
        ).models[0]
    return ctx.trained(name, make, train=config["train"], setting="training", **_data(config, d, sigma, tau)).models[0]


def _control_model(config: dict, ctx: RunContext, d: int, n_layers: int):
    """The paper's control for (d)'s probes: the transformer of :func:`_model`, with its recipe, trained on
    prompts that all share one w (drawn from the seed), so that the prompts teach it nothing about w. It
    trains on the full task from the start (the d/N curriculum eases learning w in context, which this task
    does not ask for)."""
    w = torch.randn(d, generator=generator(config["seed"], "control-w"), dtype=torch.float64)
    task = linear_regression_from_config({**config["task"], "d": d, "w": w.tolist()})
    make = _architecture(config, d, n_layers)
    return ctx.trained(
        f"{_name(d, n_layers)}-control",
        make,
        train=config["train"],
        task=task,
        format=InterleavedFormat(),
        setting="training",
        together=False,
    ).models[0]


def _architecture(config: dict, d: int, n_layers: int):
    """The factory of the run's transformer at (d, depth): ``generator → GPTTransformer``."""
    arch, n = config["model"], config["task"]["n_context"]
    gpt = GPTConfig(
        d + 1,
        n_layers,
        arch["n_heads"],
        arch["width"],
        arch["mlp_ratio"],
        max_tokens=2 * n,
        attention=arch["attention"],
    )
    return lambda g: GPTTransformer(gpt, g)


def _name(d: int, n_layers: int, sigma: float = 0.0, tau: float = 1.0) -> str:
    """The model of one (d, depth, σ, τ): its name in the run's rows and checkpoints."""
    return f"gpt-d{d}-L{n_layers}-sigma{sigma:g}-tau{tau:g}"


def _data(config: dict, d: int, sigma: float, tau: float) -> dict:
    """:meth:`RunContext.trained`'s data arguments: the task's prompts, or the curriculum towards it when one
    is configured."""
    make_task = lambda d_now, n_now: linear_regression_from_config(
        {**config["task"], "d": d_now, "n_context": n_now, "noise": sigma, "w_scale": tau}
    )
    return training_data(_task(config, d, sigma, tau), InterleavedFormat(), config["curriculum"], make_task)


def run(config: dict, ctx: RunContext):
    """Train the models of parts (a)–(d) (each once), compare them with the learners, probe, run the
    constructions of (e), check claims."""
    parts = (
        ("a-noiseless", _noiseless, ["a-*"]),
        ("b-noise", _noise, ["b-*"]),
        ("c-depth", _depth, ["c-*"]),
        ("d-probes", _probes, ["d-*"]),
        ("e-constructions", _constructions, ["e-*"]),
    )
    claims = []
    for name, part, served in parts:
        with ctx.part(name, claims=served):
            claims += part(config, ctx)
    return claims


# (a) noiseless: SPD and ILWD against every learner at every prefix length.


def _noiseless(config, ctx):
    d, n_layers = config["task"]["d"], config["model"]["n_layers"]
    model = _model(config, ctx, d, n_layers)
    name, task = _name(d, n_layers), _task(config, d, 0.0, 1.0)
    episode = ctx.eval_episode(task, config["eval_prompts"])
    references = _reference_learners(config)
    learners = {label: learner for label, (_, learner) in references.items()}
    boot = dict(n_boot=config["bootstrap"], seed=config["seed"])
    gpt = prefix_predictions(model, episode)
    predicted = {label: prefix_predictions(learner, episode) for label, learner in learners.items()}
    spds = {label: spd(gpt, prediction, d, **boot) for label, prediction in predicted.items()}

    contexts = episode[: config["ilwd"]["contexts"]]
    probes = torch.randn(
        len(contexts.xs),
        config["ilwd"]["probes"],
        d,
        generator=generator(config["seed"], "ilwd-probes"),
        dtype=torch.float64,
    )
    w_gpt, r2_gpt = prefix_weights(model, contexts, probes)
    weights = {label: prefix_weights(l, contexts, probes) for label, l in learners.items()}
    ilwds = {label: ilwd(w_gpt, w, **boot) for label, (w, _) in weights.items()}

    for label in learners:
        ctx.log_band("noiseless", name, f"spd_{label}", spds[label], seed=config["seed"])
        ctx.log_band("noiseless", name, f"ilwd_{label}", ilwds[label], seed=config["seed"])
    r2 = {name: r2_gpt} | {label: r for label, (_, r) in weights.items() if references[label][0] == "knn"}
    for label, values in r2.items():
        for k in range(len(values[0])):
            ctx.log(setting="noiseless", model=label, n=k, metric="linear_fit_r2", value=values[:, k].mean().item())
    _figure_noiseless(ctx, spds, ilwds, r2, d)
    families = {label: family for label, (family, _) in references.items()}
    # The same distances with OLS in the model's place (their means: no band is read): what the learner set alone
    # says of the Fig 1 claims.
    ols_spds = {label: spd(predicted["ols"], prediction, d, n_boot=1) for label, prediction in predicted.items()}
    return [
        _ols_match_claim(config, spds, ilwds, r2_gpt, d),
        *(
            _figure_one_claim(
                config,
                test,
                spds,
                ols_spds,
                _margin_stderr(test.margin, predicted["ols"], predicted, families, d, config),
                families,
                d,
            )
            for test in _FIGURE_ONE
        ),
    ]


def _mean_over_prefixes(bands: dict) -> dict[str, float]:
    """Each learner's band by prefix (``{"mean": (N,), ...}``, by label) averaged over the prefixes 1 ≤ k < N."""
    return {label: band["mean"][1:].mean().item() for label, band in bands.items()}


def _ols_match_claim(config, spds: dict, ilwds: dict, r2_gpt: torch.Tensor, d: int) -> C.Claim:
    """(a)'s claim from each learner's SPD/d and ILWD bands by prefix and the transformer's linear-fit R²."""
    mean_spd, mean_ilwd = _mean_over_prefixes(spds), _mean_over_prefixes(ilwds)
    bound, share = config["tolerance"]["ols_match"], config["tolerance"]["ols_match_share"]
    worse = torch.maximum(spds["ols"]["mean"][1:], ilwds["ols"]["mean"][1:])  # (N − 1,) k = 1…N − 1
    share_below = (worse < bound).double().mean().item()
    return C.holds_if(
        "a-matches-ols",
        PAPER,
        f"(a) noiseless, d = {d}, {config['model']['n_layers']} layers (the paper: d = 8, 16 layers of width 512): "
        f"against OLS both SPD/d and ILWD are < {bound:g} for almost any number of examples; "
        f"tolerance: both below {bound:g} at ≥ {share:.0%} of the prefix lengths 1 ≤ k < N "
        "(measured: that share, the mean SPD/d and ILWD to OLS over k, "
        "the closest learner by each, the mean R² of the transformer's linear fit)",
        {
            "share_below": share_below,
            "spd_ols": mean_spd["ols"],
            "ilwd_ols": mean_ilwd["ols"],
            "closest_spd": min(mean_spd, key=mean_spd.get),
            "closest_ilwd": min(mean_ilwd, key=mean_ilwd.get),
            "mean_r2_gpt": r2_gpt[:, 1:].mean().item(),
        },
        f"share_below ≥ {share:g}",
        share_below >= share,
        about=C.paper("§4.3, Fig 1", f"SPD/d and ILWD < {bound:g} for almost any k (d = 8, 16 layers of width 512)"),
        figure="noiseless_spd_ilwd",
    )


def _figure_one_prefixes(spds: dict, d: int) -> range:
    """The prefixes the paper's Fig 1 draws, scaled to d: 1 to 14 examples at d = 8, i.e. 1 ≤ k ≤ 7d/4, within the
    prompts of ``spds`` (bands by prefix, k = 0…N − 1)."""
    n = len(next(iter(spds.values()))["mean"])
    return range(1, min(n - 1, 7 * d // 4) + 1)


def _knn_margin(spds: dict, families: dict[str, str], d: int) -> tuple[float, dict]:
    """How much farther, by SPD/d averaged over Fig 1's prefixes, the nearer k-NN learner is from the predictor
    than the farthest learner of any other family (positive when the k-NN learners are the least similar), and the
    two means."""
    ks = _figure_one_prefixes(spds, d)
    means = {label: band["mean"][ks.start : ks.stop].mean().item() for label, band in spds.items()}
    knn = [label for label, family in families.items() if family == "knn"]
    nearest = min(knn, key=means.get)
    farthest = max((label for label in means if label not in knn), key=means.get)
    found = {f"nearer k-NN, {nearest}": means[nearest], f"farthest other, {farthest}": means[farthest]}
    return means[nearest] - means[farthest], found


def _falling_margin(spds: dict, families: dict[str, str], d: int) -> tuple[float, dict]:
    """The smallest fall, over every gradient-descent learner (one-step GD, one-pass SGD) and every added example
    from k = d to the end of Fig 1's prefixes, of the mean SPD/d between the predictor and the learner (positive when
    every curve falls at every step), and each learner's curve there."""
    ks = _figure_one_prefixes(spds, d)
    falls, curves = [], {}
    for label in (label for label, family in families.items() if family in ("gd", "sgd")):
        curve = spds[label]["mean"]
        falls += [(curve[k - 1] - curve[k]).item() for k in range(d + 1, ks.stop)]
        curves[label] = [round(v, 4) for v in curve[d : ks.stop].tolist()]
    return min(falls, default=float("nan")), curves


@dataclass(frozen=True)
class _FigureOneTest:
    """A claim of Fig 1 about the learner set: its id, its ``margin`` (of SPD/d bands by learner, their families and
    d: positive when the statement holds, with what it measured), statement, expectation, and what it is about (the
    paper's source and number, or iclab's diagnostic)."""

    id: str
    margin: Callable[[dict, dict[str, str], int], tuple[float, dict]]
    statement: str
    expected: str
    about: C.About


_FIGURE_ONE = (
    _FigureOneTest(
        "a-knn-least-similar",
        _knn_margin,
        "ICL agrees closely with OLS for almost any number of examples while the other predictors, especially "
        "nearest neighbours, agree much less well: averaged over Fig 1's prefixes (1 ≤ k ≤ 7d/4, its 1 to 14 examples "
        "at d = 8), the SPD/d from the transformer to the nearer k-NN learner exceeds that to every other reference "
        "learner (SPD only: for a predictor equal to OLS, the ILWD to one-pass SGD exceeds that to weighted 3-NN at "
        "the paper's own sizes, so the statement cannot be about ILWD); no tolerance",
        "nearer k-NN − farthest other > 0",
        C.paper("§4.3, Fig 1", "nearest neighbours agree much less well than the other predictors"),
    ),
    _FigureOneTest(
        "a-gd-closer-as-k-grows",
        _falling_margin,
        "as the examples grow, gradient-descent regression comes closer and closer to ICL: for every "
        "gradient-descent learner (one-step GD and one-pass SGD at each step size), the SPD/d from the transformer "
        "(its mean over the evaluation prompts) falls with every added example from k = d to the end of Fig 1's "
        "prefixes (k ≤ 7d/4; our reading: from k = d on, where the examples determine w; below d the model follows "
        "min-norm OLS, whose distance to these learners grows with k); no tolerance",
        "every fall > 0",
        # A reading of Fig 1 in a post on the paper; the paper's text does not state it, so it is iclab's check.
        C.diagnostic("trained"),
    ),
)
"""The claims of Fig 1 about the learner set (:class:`_FigureOneTest`)."""


def _figure_one_claim(
    config, test: _FigureOneTest, spds: dict, ols_spds: dict, ols_stderr: float, families: dict[str, str], d: int
) -> C.Claim:
    """One claim of :data:`_FIGURE_ONE` from the transformer's SPD/d bands to every learner (by label). The
    statement is about a model that matches OLS (the paper's Fig 1 model), so it tests the model wherever OLS in
    its place (``ols_spds``; its margin's standard error over the prompts ``ols_stderr``) could hold it with this
    scale's learners; only where OLS's own margin lies below 0 by more than two standard errors does the learner set
    decide the order, not the model, and a scale listing the claim in ``judged_at_paper`` judges it at the paper
    scale (its learners). A margin within its noise of 0 is judged: noise does not pick the seeds."""
    margin, found = test.margin(spds, families, d)
    learners_alone, _ = test.margin(ols_spds, families, d)
    claim = C.holds_if(
        test.id,
        PAPER,
        f"(a) noiseless: {test.statement} (measured: the margin and what it is made of)",
        {"margin": margin, **found},
        test.expected,
        margin > 0,
        about=test.about,
        figure="noiseless_spd_ilwd",
    )
    return C.judged_at_if_unresolved(
        claim,
        config["judged_at_paper"],
        "paper",
        "the statement tests a model only where a predictor equal to OLS could hold it with this scale's learners "
        "(their step sizes set for this N): OLS's own margin, against minus two of its standard errors over the "
        "prompts",
        needed=-2 * ols_stderr,
        reached=learners_alone,
        higher_is_better=True,
    )


def _margin_stderr(margin, predictor: torch.Tensor, predicted: dict, families: dict[str, str], d: int, config) -> float:
    """The bootstrap standard error over prompts of a :class:`_FigureOneTest` ``margin`` for ``predictor``'s
    ``(B, N)`` prefix predictions against each learner's (``predicted``, by label): the margin of the mean SPD/d
    curves on resampled prompts, ``config["bootstrap"]`` times."""
    errors = torch.stack([(predictor - p).double().pow(2) / d for p in predicted.values()], 1)  # (B, L, N)
    g = generator(config["seed"], "figure-one-margin")
    replicates = resampled_means(errors, config["bootstrap"], g)  # (R, L, N)
    bands = ({label: {"mean": curve} for label, curve in zip(predicted, r)} for r in replicates)
    values = [margin(b, families, d)[0] for b in bands]
    return torch.tensor(values).std().item()


# (b) noise: the MSPD table, learner × noise level.


def _to_nearest_learner(label: str, predictions: dict, average, config: dict, d: int) -> float:
    """The distance from learner ``label`` to the nearest other learner: ``average`` (a function of an
    SPD/d curve over k) of the SPD between their ``predictions``, minimised over the others. It is the
    resolution a judgement "closest to ``label``" needs: a model must come well within it."""
    return min(
        average(spd(predictions[label], other, d, config["bootstrap"], config["seed"])["mean"])
        for key, other in predictions.items()
        if key != label
    )


def _noise(config, ctx):
    d = config["task"]["d"]
    pairs = [(float(s), float(t)) for s, t in config["noise"]]
    ratios = [s**2 / t**2 for s, t in pairs]
    rows = {_bayes_label(r): (LeastSquares() if r == 0 else Ridge(r)) for r in sorted(set(ratios))}
    if "ols" not in rows:
        rows = {"ols": LeastSquares()} | rows
    table, resolution = {}, {}  # (row label, column index) -> MSPD; column -> MSPD between Bayes and its nearest row
    for column, ((sigma, tau), ratio) in enumerate(zip(pairs, ratios)):
        name = _name(d, config["model"]["n_layers"], sigma, tau)
        model = _model(config, ctx, d, config["model"]["n_layers"], sigma, tau)
        episode = ctx.eval_episode(_task(config, d, sigma, tau), config["eval_prompts"])
        gpt = prefix_predictions(model, episode)
        references = {label: prefix_predictions(learner, episode) for label, learner in rows.items()}
        for label, reference in references.items():
            band = spd(gpt, reference, d, config["bootstrap"], config["seed"])
            ctx.log_band("noise", name, f"spd_{label}", band, seed=config["seed"])
            table[label, column] = mspd(band["mean"], d)
            ctx.log(
                setting="noise", model=name, seed=config["seed"], metric=f"mspd_{label}", value=table[label, column]
            )
        # How close a model must come to tell the Bayes learner from its nearest row at all.
        resolution[column] = _to_nearest_learner(
            _bayes_label(ratio), references, lambda curve: mspd(curve, d), config, d
        )
        ctx.log(
            setting="noise",
            model=name,
            seed=config["seed"],
            metric="mspd_bayes_to_nearest_learner",
            value=resolution[column],
        )
    _figure_noise(ctx, table, list(rows), ratios)
    return [_bayes_claim(config, table, list(rows), ratios, resolution)]


def _bayes_claim(config, table: dict, rows: list[str], ratios: list[float], resolution: dict) -> C.Claim:
    """(b)'s claim from the MSPD ``table`` ((row label, column) → MSPD) and, per column, the MSPD between the
    Bayes learner and its nearest other row (``resolution``)."""
    verdicts, excess = {}, {}  # by column: what it measured; the Bayes MSPD less the best other learner's
    for column, ratio in enumerate(ratios):
        values = {label: table[label, column] for label in rows}
        best = min(values, key=values.get)
        bayes = values[_bayes_label(ratio)]
        runner_up = min(v for label, v in values.items() if label != _bayes_label(ratio))
        excess[column] = bayes - runner_up
        verdicts[f"σ²/τ²={_fraction(ratio)}"] = {
            "closest": best,
            "Bayes MSPD / best other": bayes / runner_up,
            "Bayes MSPD": bayes,
            "Bayes to nearest learner": resolution[column],
        }
    ok = all(v["closest"] == _bayes_label(r) for v, r in zip(verdicts.values(), ratios))
    claim = C.holds_if(
        "b-bayes-ridge-closest",
        PAPER,
        f"(b) in every noise column (σ²/τ² = {', '.join(_fraction(r) for r in ratios)}) "
        "the reference learner with the smallest MSPD (SPD/d averaged over 1 ≤ k < d) "
        "to the trained transformer is the Bayes predictor, ridge with λ = σ²/τ² (OLS at σ = 0); no tolerance: "
        "it must be the strict minimum (measured per column: the closest learner, Bayes MSPD / best other MSPD, "
        "the model's MSPD to the Bayes learner, and the MSPD between the Bayes learner and its nearest other learner, "
        "which the model's must be well below for the ordering to mean anything; a run where another learner is "
        "closer to the model than the Bayes one by more than that distance in some column tells a failure and "
        "judges it)",
        verdicts,
        "the Bayes learner in every column (ratio < 1)",
        ok,
        about=C.paper("§4.3, Fig 2", PAPER_BAYES_MSPD),
        figure="noise_mspd",
    )
    # A run tells a failure when, in some column, another learner is closer to the model than the Bayes learner by
    # more than the Bayes learner's own distance to its nearest learner: the deferral is for runs that cannot tell.
    if any(excess[column] > resolution[column] for column in excess):
        return claim
    return C.judged_at_if_unresolved(
        claim,
        config["judged_at_long"],
        "long",
        "telling the Bayes ridge from its nearest learner needs the model's MSPD to it below the MSPD between "
        "the Bayes learner and its nearest other learner (the smallest over columns); the model's largest MSPD "
        "to the Bayes learner",
        needed=min(resolution.values()),
        reached=max(table[_bayes_label(r), c] for c, r in enumerate(ratios)),
    )


# (c) depth: the closest learner at each depth.


def _depth(config, ctx):
    d = config["task"]["d"]
    episode = ctx.eval_episode(_task(config, d, 0.0, 1.0), config["eval_prompts"])
    # Their Fig 3's learners, and the zero predictor as a control: a model closest to it has learnt nothing.
    references = _reference_learners(config) | {"zero": ("zero", ZeroPredictor())}
    predictions = {label: prefix_predictions(learner, episode) for label, (_, learner) in references.items()}
    table, curves = {}, {}
    for depth in config["depths"]:
        name = _name(d, depth)
        gpt = prefix_predictions(_model(config, ctx, d, depth), episode)
        for label, reference in predictions.items():
            band = spd(gpt, reference, d, config["bootstrap"], config["seed"])
            ctx.log_band("depth", name, f"spd_{label}", band, seed=config["seed"])
            curves[depth, label] = band["mean"]
            table[depth, label] = mspd(band["mean"], d)
            ctx.log(setting="depth", model=name, seed=config["seed"], metric=f"mspd_{label}", value=table[depth, label])
    _figure_depth(ctx, table, curves, config["depths"], list(references), d)
    families = {label: family for label, (family, _) in references.items()}
    return _depth_claims(table, config["depths"], families, config["tolerance"]["ols_match"])


def _depth_claims(table: dict, depths: list[int], families: dict[str, str], match: float) -> list[C.Claim]:
    """Part (c)'s claims from ``table[depth, label]`` (MSPD, SPD/d over 1 ≤ k < d) and each label's family
    (``ols``, ``ridge``, ``gd``, ``sgd``, ``knn`` or the ``zero`` control): at each depth the paper names, the
    family of the closest learner of all; the deepest models, which the paper says match OLS, also come within
    ``match`` (the MSPD at which (a) calls a model OLS's) of it."""
    closest = {depth: min(families, key=lambda label: table[depth, label]) for depth in depths}
    claims = []
    for id, text, family, covered in (
        ("c-one-layer-gd", "one-step GD at 1 layer", "gd", [x for x in depths if x == 1]),
        ("c-two-to-four-layers-ridge", "ridge at 2–4 layers", "ridge", [x for x in depths if 2 <= x <= 4]),
        ("c-eight-plus-layers-ols", "OLS at ≥ 8 layers", "ols", [x for x in depths if x >= 8]),
    ):
        if not covered:
            continue
        statement = (
            "(c) the learner closest to the transformer "
            "(MSPD: SPD/d averaged over the under-determined prefixes 1 ≤ k < d, as the paper's Fig 3), "
            "among every learner of the paper's figure "
            f"({', '.join(label for label in families if label != 'zero')}) "
            f"and the zero predictor as a control, is {text}: the closest learner's family must be {family} at "
            "every such depth"
        )
        measured = {f"L={depth}": f"{closest[depth]}: {table[depth, closest[depth]]:.3g}" for depth in covered}
        is_closest = all(families[closest[depth]] == family for depth in covered)
        about, figure = C.paper("§4.3, Fig 3", f"closest: {text}"), "depth_table"
        if family == "ols":
            to_ols = max(table[depth, "ols"] for depth in covered)
            claims.append(
                C.all_of(
                    id,
                    PAPER,
                    f"{statement}, and its MSPD to OLS is below {match:g}, the level at which (a) calls a model's "
                    "predictions OLS's (the paper: the deepest models match OLS) (measured: depth → closest learner "
                    "and its MSPD; the largest MSPD to OLS)",
                    {**measured, "largest MSPD to OLS": to_ols},
                    f"ols at L = {covered}, MSPD to OLS < {match:g}",
                    {"OLS is the closest learner": is_closest, f"MSPD to OLS < {match:g}": to_ols < match},
                    about=about,
                    figure=figure,
                )
            )
        else:
            claims.append(
                C.holds_if(
                    id,
                    PAPER,
                    f"{statement}; no tolerance (the paper: the 1-layer model is best approximated by one GD step, "
                    "though not well in absolute terms) (measured: depth → closest learner and its MSPD)",
                    measured,
                    f"{family} at L = {covered}",
                    is_closest,
                    about=about,
                    figure=figure,
                )
            )
    return claims


# (d) probes: what each layer's hidden states encode.


def _probes(config, ctx):
    probe_cfg = config["probe"]
    d, seed = probe_cfg["d"], config["seed"]
    task = _task(config, d, 0.0, 1.0)
    splits = ProbeSplits.draw(task, probe_cfg["train_prompts"], probe_cfg["test_prompts"], seed)
    heads = {"linear": None, "mlp": probe_cfg["hidden_units"]}
    model = _model(config, ctx, d, probe_cfg["n_layers"])
    scores = _probe_scores(config, ctx, model, splits, heads)
    # The control's states are read by the MLP head alone, the better one (the claims compare MLP probes).
    control = _control_model(config, ctx, d, probe_cfg["n_layers"])
    control_scores = _probe_scores(config, ctx, control, splits, {"mlp": probe_cfg["hidden_units"]}, "control-")
    n_states = scores["mlp"]["r2"].shape[0]
    _figure_probes(ctx, scores, control_scores["mlp"], n_states)
    r2 = {head: s["r2"] for head, s in scores.items()}
    return _probe_claims(r2, control_scores["mlp"]["r2"], probe_cfg["n_layers"], d, config["tolerance"])


# (e) constructions: transformers built to run SGD and ridge, against those learners.


def _constructions(config, ctx):
    d, n = config["task"]["d"], config["task"]["n_context"]
    episode = ctx.eval_episode(_task(config, d, 0.0, 1.0), config["construction_prompts"])
    # The constructions of the learners of (a) and (c) they run: one per SGD step size and ridge λ.
    built = {
        "sgd": lambda learner: lambda k: sgd_transformer(d, k, learner.lr, learner.lam),
        "ridge": lambda learner: lambda k: ridge_transformer(d, k, learner.lam),
    }
    curves = {family: {} for family in built}
    for label, (family, learner) in _reference_learners(config).items():
        if family in built:
            predictions = construction_prefix_predictions(built[family](learner), episode.xs, episode.ys)
            band = spd(predictions, prefix_predictions(learner, episode), d, config["bootstrap"], config["seed"])
            ctx.log_band("constructions", f"construction-{label}", f"spd_{label}", band, seed=config["seed"])
            curves[family][label] = band["mean"]
    bound = config["tolerance"]["construction_match"]
    _figure_constructions(ctx, curves, d, n, bound)
    return [_construction_claim(family, by_label, d, n, bound) for family, by_label in curves.items()]


# The paper's statement of each construction (§3), what ours runs, and ours without examples (its sizes).
_CONSTRUCTIONS = {
    "sgd": (
        "e-sgd-construction-matches-sgd",
        "Theorem 1: one SGD step on an example, with O(d) hidden size and a constant number of layers",
        "one-pass SGD from w = 0 (w ← w − 2α·x(xᵀw − y) per example)",
        lambda d: sgd_transformer(d, 0, 1.0),
    ),
    "ridge": (
        "e-ridge-construction-matches-ridge",
        "Theorem 2: a ridge solution updated to include one example (Sherman–Morrison), with O(d²) hidden "
        "size and a constant number of layers",
        "ridge w = (XᵀX + λI)⁻¹Xᵀy, one Sherman–Morrison update per example from (λI)⁻¹",
        lambda d: ridge_transformer(d, 0, 1.0),
    ),
}


def _construction_claim(family: str, curves: dict, d: int, n: int, bound: float) -> C.Claim:
    """(e)'s claim for one construction ``family`` (``sgd`` or ``ridge``) from the SPD/d by prefix between each of
    its transformers and its learner (``curves``, by the learner's label): the largest over k ≥ 1 and the
    learners must be ≤ ``bound``. A theory claim: it checks iclab's construction of the theorem, which fails it
    only by computing something else than its learner."""
    claim_id, theorem, algorithm, empty = _CONSTRUCTIONS[family]
    size = empty(d)
    worst = max(curve[1:].max().item() for curve in curves.values())
    return C.at_most(
        claim_id,
        PAPER,
        f"(e) a transformer built by hand ({size.width} hidden units at d = {d}, {size.per_example} sublayers per "
        f"example: attention to read an example, GELU feed-forward layers for products and affine maps"
        f"{', a layer normalisation to divide' if family == 'ridge' else ''}; iclab.models.raw) runs {algorithm}: "
        f"its prediction equals the learner's at every prefix 1 ≤ k < {n}, for {', '.join(curves)}; "
        f"tolerance: the largest SPD/d over k and the learners ≤ {bound:g} (float64 construction; a step size or "
        "λ off by 1e-4 of itself exceeds it) (measured: the largest SPD/d)",
        worst,
        bound,
        about=C.paper(f"§3, {theorem}", subject="theory"),
        figure="constructions",
    )


def _probe_scores(config, ctx, model, splits: ProbeSplits, heads: dict, prefix: str = "") -> dict:
    """Per probe head (name → the MLP's hidden units, None for a linear head): probes trained on ``model``'s
    hidden states of the ``train`` split, their held-out scores on the ``test`` split, logged per hidden state
    as ``<prefix>probe-<head>``."""
    probe_cfg = config["probe"]
    hidden = splits.hidden(model)  # (B, L + 1, T, W) per split
    _, n_states, seq_len, width = hidden["train"].shape
    n = config["task"]["n_context"]
    scores = {}
    for head, units in heads.items():
        name = f"{prefix}probe-{head}"
        make = lambda g: PoolingProbes(n_states, len(TARGETS), n, seq_len, width, probe_cfg["d"], units, generator=g)
        data = splits.data(hidden)
        probes = ctx.trained(name, make, data, train=probe_cfg["train"], setting="probes", together=False).models[0]
        scores[head] = splits.score(probes, hidden)
        for layer in range(n_states):
            for k, target in enumerate(TARGETS):
                for metric in ("r2", "mse"):
                    ctx.log(
                        setting="probes",
                        model=name,
                        layer=layer,
                        metric=f"{metric}_{target}",
                        value=scores[head][metric][layer, k].item(),
                    )
    return scores


def _probe_claims(
    r2: dict[str, torch.Tensor], control: torch.Tensor, n_layers: int, d: int, tol: dict
) -> list[C.Claim]:
    """Part (d)'s claims from each probe head's held-out R² ``(n_layers + 1, K)`` (hidden state 0 is the
    read-in, the paper's input layer; state l follows block l; targets in :data:`TARGETS` order), and the
    MLP probe's on the control model trained on one fixed w (``control``, of the same shape)."""
    margin = (r2["mlp"][-1] - r2["linear"][-1]).min().item()
    last = {f"{head}_{t}": round(r2[head][-1, k].item(), 4) for head in r2 for k, t in enumerate(TARGETS)}
    threshold = tol["probe_decodable"]
    # The first hidden state at which the MLP probe decodes each target (None: at none of them).
    first = {
        t: next((layer for layer in range(n_layers + 1) if r2["mlp"][layer, k] >= threshold), None)
        for k, t in enumerate(TARGETS)
    }
    order_ok = first["xty"] is not None and first["w_ols"] is not None and first["xty"] < first["w_ols"]
    curve = {t: [round(v, 3) for v in r2["mlp"][:, k].tolist()] for k, t in enumerate(TARGETS)}
    return [
        C.at_least(
            "d-mlp-beats-linear",
            PAPER,
            f"(d) at the last layer of a {n_layers}-layer model (d = {d}), the MLP probe's held-out R² exceeds "
            f"the linear probe's for both targets (Xᵀy, w_OLS) by at least {tol['probe_margin']} "
            f"(measured: the smaller margin; last-layer R²: {last}). The paper's §5 observes it, "
            "but it holds on an untrained model's hidden states as well (the targets are products of token entries, "
            "which an MLP head reads better than a linear one from any state), so it checks the probes, not the model",
            margin,
            tol["probe_margin"],
            about=C.diagnostic("trained"),
            figure="probes_r2",
        ),
        C.holds_if(
            "d-xty-decodable-before-w-ols",
            PAPER,
            f"(d) Xᵀy becomes decodable before w_OLS (the paper: Xᵀy around layer 7 of 16, w_OLS around layer 12): "
            f"the first hidden state whose MLP-probe R² reaches {threshold:g} comes for Xᵀy strictly before w_OLS's "
            "(both must reach it)",
            {
                f"first state with R² ≥ {threshold:g}": {t: ("never" if v is None else v) for t, v in first.items()},
                "MLP-probe R² by state (0 = read-in)": curve,
            },
            "layer(Xᵀy) < layer(w_OLS)",
            order_ok,
            about=C.paper("§5, Fig 4", "Xᵀy from layer ≈ 7, w_OLS from layer ≈ 12 of 16"),
            figure="probes_r2",
        ),
        *(_rise_claim(r2["mlp"], target, threshold, tol["probe_rise"]) for target in ("w_ols", "xty")),
        _control_claim(r2["mlp"], control, tol["control_gap"]),
    ]


def _rise_claim(r2: torch.Tensor, target: str, decodable: float, rise: float) -> C.Claim:
    """``d-<target>-decodability-rises`` from the MLP probe's held-out R² ``(n_layers + 1, K)``: decoded accurately
    after the last block (R² ≥ ``decodable``), inaccurately at the input layer (the read-in, state 0: below it), and
    better by at least ``rise`` between the two."""
    k, name = TARGETS.index(target), {"xty": "Xᵀy", "w_ols": "w_OLS"}[target]
    read_in, last = r2[0, k].item(), r2[-1, k].item()
    return C.all_of(
        f"d-{target.replace('_', '-')}-decodability-rises",
        PAPER,
        f"(d) {name} is decoded inaccurately in the input layer and accurately deep in the network: "
        f"the MLP probe's held-out R² for {name} after the last block is at least {decodable:g} (the experiment's "
        f"level for decodable), at the input layer (the read-in) below {decodable:g}, and it rises by at least "
        f"{rise:g} between the two (a held-out R² moves by ~0.01 between probes) (measured: the R² at the read-in "
        "and after the last block, the rise)",
        {"R² at the read-in": read_in, "R² after the last block": last, "rise": last - read_in},
        f"last ≥ {decodable:g}, read-in < {decodable:g}, rise ≥ {rise:g}",
        {
            "accurate deep in the network": last >= decodable,
            "inaccurate at the input layer": read_in < decodable,
            "rises from the input layer": last - read_in >= rise,
        },
        about=C.paper("§5, Fig 4", "inaccurate at the input layer, accurate deep in the network (plots only)"),
        figure="probes_r2",
    )


def _control_claim(learner: torch.Tensor, control: torch.Tensor, gap: float) -> C.Claim:
    """``d-control-probes-worse`` from the MLP probe's held-out R² ``(n_layers + 1, K)`` on the learner and on
    the fixed-w control."""
    control_gaps = {t: (learner[-1, k] - control[-1, k]).item() for k, t in enumerate(TARGETS)}
    return C.at_least(
        "d-control-probes-worse",
        PAPER,
        "(d) a control model trained on one fixed w probes worse than the in-context learner: "
        "after the last block, the MLP probe's held-out R² on the learner exceeds its R² on the control "
        f"(the same transformer and recipe) by at least {gap} for both targets "
        f"(measured: the smaller gap; each target's gap: {', '.join(f'{t} {v:.3g}' for t, v in control_gaps.items())})",
        min(control_gaps.values()),
        gap,
        about=C.paper("§5, Fig 4", "the control's probes below the learner's (plots only)"),
        figure="probes_r2",
    )


# Figures.


def _figure_noiseless(ctx, spds, ilwds, r2, d):
    fig, axes = new_figure(3, width=4.6, height=3.8)
    for ax, (values, title) in zip(axes, ((spds, "SPD(transformer, learner) / d"), (ilwds, "ILWD / d"))):
        for label, band in values.items():
            k = range(len(band["mean"]))
            band_line(ax, k, band["mean"], band["low"], band["high"], marker="o", ms=3, label=label)
        ax.axvline(d, color="k", ls=":", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("in-context examples k")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    for label, values in r2.items():
        axes[2].plot(values.mean(0).numpy(), marker="o", ms=3, label=label)
    axes[2].set_xlabel("in-context examples k")
    axes[2].set_title("R² of the linear fit to the probe labels", fontsize=9)
    axes[2].legend(fontsize=7)
    save(fig, ctx.folder.figure("noiseless_spd_ilwd"))


def _figure_noise(ctx, table, rows, ratios):
    import matplotlib.colors as mcolors

    matrix = np.array([[table[label, c] for c in range(len(ratios))] for label in rows])
    fig, axes = new_figure(1, width=6.0, height=4.0)
    ax = axes[0]
    image = ax.imshow(matrix, cmap="viridis_r", norm=mcolors.LogNorm())
    for (i, j), value in zip(((i, j) for i in range(len(rows)) for j in range(len(ratios))), matrix.flatten()):
        bold = rows[i] == _bayes_label(ratios[j])
        ax.text(
            j,
            i,
            f"{value:.2g}",
            ha="center",
            va="center",
            fontsize=7,
            color="w" if bold else "k",
            fontweight="bold" if bold else "normal",
        )
    ax.set_xticks(range(len(ratios)), [_fraction(r) for r in ratios])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("σ²/τ² the transformer was trained on")
    ax.set_title("MSPD (SPD/d over 1 ≤ k < d); bold: Bayes", fontsize=9)
    fig.colorbar(image, ax=ax)
    save(fig, ctx.folder.figure("noise_mspd"))


def _figure_depth(ctx, table, curves, depths, labels, d):
    import matplotlib.colors as mcolors

    fig, axes = new_figure(len(depths), width=3.8, height=3.4)
    for ax, depth in zip(axes, depths):
        for label in labels:
            ax.plot(curves[depth, label].numpy(), marker="o", ms=2, label=label)
        ax.axvline(d, color="k", ls=":", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{depth} layer{'s' if depth > 1 else ''}: SPD / d", fontsize=9)
        ax.set_xlabel("in-context examples k")
    axes[0].legend(fontsize=6)
    save(fig, ctx.folder.figure("depth_spd"))

    matrix = np.array([[table[depth, label] for label in labels] for depth in depths])
    fig, axes = new_figure(1, width=7.0, height=3.2)
    image = axes[0].imshow(matrix, cmap="viridis_r", norm=mcolors.LogNorm(), aspect="auto")
    for i, depth in enumerate(depths):
        j = int(matrix[i].argmin())
        axes[0].text(j, i, "●", ha="center", va="center", color="w")
    axes[0].set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
    axes[0].set_yticks(range(len(depths)), [f"L={depth}" for depth in depths])
    axes[0].set_title("MSPD: SPD / d over 1 ≤ k < d (● closest)", fontsize=9)
    fig.colorbar(image, ax=axes[0])
    save(fig, ctx.folder.figure("depth_table"))


def _figure_probes(ctx, scores, control, n_states):
    """``probes_r2.png``: held-out R² by hidden state, per target: each probe head on the learner, and the
    MLP probe on the control model (dashed)."""
    fig, axes = new_figure(len(TARGETS), width=4.5)
    for ax, (k, target) in zip(axes, enumerate(TARGETS)):
        for head, s in scores.items():
            ax.plot(range(n_states), s["r2"][:, k].numpy(), marker="o", label=f"{head} probe")
        ax.plot(range(n_states), control["r2"][:, k].numpy(), "k--", marker="x", label="mlp probe, fixed-w control")
        ax.set_xlabel("hidden state (0 = after read-in, l = after block l)")
        ax.set_ylabel("held-out R²")
        ax.set_title({"xty": "Xᵀy after n examples", "w_ols": "w_OLS after n examples"}[target], fontsize=9)
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("probes_r2"))


def _figure_constructions(ctx, curves, d, n, bound):
    """``constructions.png``: each construction's SPD/d to its learner by prefix (the claims' bound dashed), and
    the hidden size of both constructions as d grows (O(d) against O(d²))."""
    fig, axes = new_figure(2, width=4.5)
    for label, curve in (item for by_label in curves.values() for item in by_label.items()):
        axes[0].plot(
            range(1, n), curve[1:].clamp(min=1e-30).numpy(), marker="o", ms=3, label=f"construction vs {label}"
        )
    axes[0].axhline(bound, color="k", ls="--", lw=0.8, label=f"the claims' bound {bound:g}")
    axes[0].set_yscale("log")
    axes[0].set_xticks(range(1, n))
    axes[0].set_xlabel("in-context examples k")
    axes[0].set_title(f"SPD / d, construction vs its learner (d = {d})", fontsize=9)
    axes[0].legend(fontsize=7)
    dims = list(range(1, 17))
    for family, (*_, empty) in _CONSTRUCTIONS.items():
        axes[1].plot(dims, [empty(k).width for k in dims], marker="o", ms=3, label=family)
    axes[1].axvline(d, color="k", ls=":", lw=0.8)
    axes[1].set_xlabel("d")
    axes[1].set_ylabel("hidden size")
    axes[1].set_title("hidden size of the constructions", fontsize=9)
    axes[1].legend(fontsize=8)
    save(fig, ctx.folder.figure("constructions"))


EXPERIMENT = Experiment(
    name="algorithm-selection",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    train_blocks=("train", "probe.train"),
    claims_version=4,
    timing={
        "eval_prompts": 64,
        "bootstrap": 20,
        "construction_prompts": 8,
        "ilwd.contexts": 8,
        # the probes' data: the paper's 16384 prompts' hidden states at 17 depths of width 512 need ~45 GB
        # (a timed run was killed for memory on 24 GB); a probe's step cost is its batch's, not its data's
        "probe.train_prompts": 512,
        "probe.test_prompts": 256,
    },  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
