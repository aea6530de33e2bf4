"""``function-classes``: Garg et al.'s function classes and out-of-distribution prompts, in iclab.

Garg, Tsipras, Liang & Valiant (NeurIPS 2022); docs/papers.md §7 (Garg et al.). One
GPT-style transformer per function class (:mod:`iclab.tasks.functions`: linear, sparse linear,
linear classification, noisy linear, quadratic, 2-layer ReLU networks, depth-4 decision trees)
reads interleaved prompts x_1, y_1, …, x_N, y_N (:class:`iclab.prompts.InterleavedFormat`), is
trained with their d/N curriculum (:mod:`iclab.curriculum`) and predicts every y_{k+1} from the
first k examples. Its error at every prefix length is compared, on the same prompts, with their
baselines (least squares, 3-NN, averaging; the Lasso for sparse functions; greedy trees and
XGBoost for trees; a 2-layer network fitted by Adam for ReLU networks) in their normalisation:
squared error divided by the zero predictor's (d, the sparsity k, or 1; see the class table),
and, for sign labels, the error rate of sign(ŷ). The linear model is then evaluated on their
out-of-distribution prompts (:mod:`iclab.shifts`), against the same linear baselines.

Library-backed baselines (XGBoost, and the 2-layer network, which trains one network per prompt
and prefix) see the first ``slow_prompts`` evaluation prompts; a claim against them compares the
transformer on those same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import claims as C
from ..config import ConfigError
from ..curriculum import training_data
from ..learners import (
    Averaging,
    BoostedTrees,
    GreedyTree,
    Lasso,
    LeastSquares,
    NearestNeighbours,
    OnFeatures,
    Ridge,
    TwoLayerNetGD,
)
from ..metrics import error_metric, normalised_errors, prefix_query_predictions
from ..models.transformer import GPTConfig, GPTTransformer
from ..prompts import InterleavedFormat
from ..report.figures import band_line, new_figure, save, training_curve
from ..rng import generator
from ..shifts import shift as make_shift
from ..tasks.functions import CLASSES, function_class
from .base import Experiment, RunContext, check_training

PAPER = "Garg et al. (NeurIPS 2022)"

ROBUST_SHIFTS = (
    "subspace",
    "noisy",
    "random-orthants",
    "orthogonal",
    "overlapping",
    "scale-x=0.5",
    "scale-x=2",
    "scale-y=0.333",
    "scale-y=0.5",
    "scale-y=2",
    "scale-y=3",
)
"""Shifts under which the paper found the linear model's errors close to least squares'."""
FAILING_SHIFTS = ("scale-x=0.333", "scale-x=3")
"""Shifts under which the paper found it failing."""
HALF_OF_KNN_SHIFTS = ("skewed",)
"""Shifts under which the paper found the model "not perfectly robust" but below half of 3-NN's error."""
PAPER_D = 20
"""The input dimension of the paper's shift figures: the k it names there (10, 20, 40) are d/2, d and 2d, which
:func:`_run_k` maps to the run's d."""
PAPER_SHIFT_ERRORS = {
    "subspace": {10: 0.036, 20: 0.0014, 40: 0.00057},
    "random-orthants": {20: 0.062, 40: 0.004},
    "overlapping": {10: 0.001, 20: 0.001, 40: 0.0005},
    "scale-x=0.5": {40: 0.013},
    "scale-x=2": {40: 0.043},
    "scale-y=0.333": {40: 0.0012},
    "scale-y=0.5": {40: 0.0008},
    "scale-y=2": {40: 0.0016},
    "scale-y=3": {40: 0.0278},
    "scale-x=0.333": {40: 0.30},
    "scale-x=3": {40: 0.58},
}
"""The paper's mean normalised error of its linear transformer under each shift, by its k (d = 20; its Figs 8 and
9). Scaled prompts' errors are over d·scale², the zero predictor's error there (the shift's ``error_scale``)."""
PAPER_BAND = 0.03
"""The widest half-width of the 90% bootstrap bands the paper draws around its transformer's error under the robust
shifts (5th–95th percentile of 1000 bootstrap means over 1280 prompts in their code; about ±0.01–0.03 on the plots)."""
ORTHOGONAL_BAND = 0.05
"""The half-width of the paper's band around its transformer's error of about 1 under orthogonal queries (read off
its plot)."""
RIVALS = {
    "linear": ("§3.1, Fig 2", ("3-nn", "averaging")),
    "sparse-linear": ("§5, Fig 5a", ("3-nn", "averaging")),
    "decision-tree": ("§5, Fig 5b", ("3-nn",)),
    "relu-net": ("§5, Fig 5c", ("3-nn",)),
}
"""Per class the paper compares with 3-NN or averaging: its figure and the baselines drawn there. On the
other classes (not in the paper) the comparison with both is iclab's own check."""
TRACKED = {
    "noisy-linear": "the Bayes-optimal ridge (λ = σ²)",
    "linear-classification": "least squares on the ±1 labels (the sign of its prediction)",
    "quadratic": "least squares on x⊙x (exact from k = d on)",
}
"""The classes the paper trains no model on, and the learner their transformer should track
(:func:`_tracked_learner`): iclab's extension of the paper's linear finding ("comparable to least squares
at every k")."""

DEFAULTS = {
    "seed": 0,
    "seeds": 1,
    "classes": list(CLASSES),
    "d": 5,
    # Per class: the prompt length N, the curriculum's first N and its increment, its own `train`
    # and `model` keys (over the shared blocks), `init_from` (a warm start from the model of an
    # earlier class with the same N, whose architecture it takes; it then trains on its full task,
    # without the curriculum) and the class's parameters (see iclab.tasks.functions). The quick
    # recipe and the sweeps that chose it: docs/experiments/function-classes.md.
    "functions": {
        "linear": {
            "n_context": 11,
            "n_start": 5,
            "n_step": 2,
            "init_from": None,
            "model": {"n_layers": 4},
            "train": {"steps": 8000, "warmup": 2000},
        },
        "sparse-linear": {
            "n_context": 11,
            "n_start": 5,
            "n_step": 2,
            "sparsity": 2,
            "init_from": "linear",
            "train": {"steps": 1000, "warmup": 100, "lr": 0.0005},
        },
        "linear-classification": {
            "n_context": 11,
            "n_start": 5,
            "n_step": 2,
            "init_from": "linear",
            "train": {"steps": 1000, "warmup": 100, "lr": 0.0005},
        },
        "noisy-linear": {
            "n_context": 11,
            "n_start": 5,
            "n_step": 2,
            "noise": 1.0,
            "init_from": "linear",
            "train": {"steps": 1000, "warmup": 100, "lr": 0.0005},
        },
        "quadratic": {"n_context": 11, "n_start": 5, "n_step": 2, "init_from": None, "model": {}, "train": {}},
        "relu-net": {
            "n_context": 21,
            "n_start": 11,
            "n_step": 5,
            "hidden": 100,
            "init_from": None,
            "model": {},
            "train": {},
        },
        "decision-tree": {
            "n_context": 21,
            "n_start": 11,
            "n_step": 5,
            "depth": 4,
            "init_from": None,
            "model": {},
            "train": {},
        },
    },
    # d grows from d_start by d_step, and each class's N by its n_step, every `every` steps.
    "curriculum": {"d_start": 3, "d_step": 1, "every": 200},
    # Quick scale: d = 5 (theirs 20), N = 11 for the linear classes and 21 for ReLU nets and trees
    # (theirs 41 and 101), a 3-layer, 64-wide, 2-head transformer (4 layers for the linear model and
    # the classes warm-started from it; theirs 12 × 256 × 8), 2000 steps of 64 prompts per class unless
    # its own block says otherwise (theirs 500k, each class from scratch).
    # init "garg", activation "gelu-tanh": Garg et al.'s model, as gpt-linear's (why it matters:
    # docs/experiments/function-classes.md, parity).
    "model": {
        "n_layers": 3,
        "n_heads": 2,
        "width": 64,
        "mlp_ratio": 4.0,
        "attention": "math",
        "init": "garg",
        "activation": "gelu-tanh",
    },
    "train": {
        "steps": 2000,
        "batch_size": 64,
        "lr": 0.001,
        "optimizer": "adam",
        "schedule": "cosine",
        "warmup": 400,
        "clip": None,
        "log_every": 50,
        "checkpoint_every": 500,
        "compile": False,
        "precision": "fp32",
    },
    "shifts": [
        "standard",
        "skewed",
        "subspace",
        "noisy",
        "scale-x=0.333",
        "scale-x=0.5",
        "scale-x=2",
        "scale-x=3",
        "scale-y=0.333",
        "scale-y=0.5",
        "scale-y=2",
        "scale-y=3",
        "random-orthants",
        "orthogonal",
        "overlapping",
        "duplicated",
    ],
    "eval_prompts": 1000,
    "slow_prompts": 64,
    "bootstrap": 1000,
    "baselines": {
        "lasso_alphas": [1.0, 0.1, 0.01, 0.001, 0.0001],
        "net_hidden": 100,
        "net_steps": 100,
        "net_lr": 0.005,
        "boosting_rounds": 100,
    },
    # In units of the zero predictor's error: "close to" read as within a tenth of it (iclab's extensions to classes
    # the paper trains no model on; the paper's own claims take the paper's numbers and bands).
    "tolerance": {"tracking_gap": 0.1},
    # Claims this scale may leave to the long scale: a run defers one only when its own numbers show its sparse
    # model short of the accuracy the claim needs where least squares is exact (k ≥ d), which the claim does not
    # test (it asks k < d); docs/experiments/function-classes.md.
    "judged_at_long": ["sparse-beats-ols"],
}

_FROM_SCRATCH = {"init_from": None, "train": {"steps": 500000, "warmup": 0, "lr": 0.0001}}

SCALES = {
    # Smoke: the whole pipeline in seconds (training, evaluation, baselines, claims, report); its verdicts
    # mean nothing.
    "smoke": {
        "judged_at_long": [],
        "d": 3,
        "train": {"steps": 4, "warmup": 0, "checkpoint_every": 2, "log_every": 1},
        "curriculum": {"every": 2},
        "model": {"n_layers": 1, "width": 16},
        "eval_prompts": 16,
        "slow_prompts": 2,
        "bootstrap": 10,
        "baselines": {"net_steps": 2, "boosting_rounds": 2},
        "functions": {
            "linear": {"model": {"n_layers": 2}, "train": {"steps": 4, "warmup": 0}},
            "sparse-linear": {"sparsity": 1, "train": {"steps": 2, "warmup": 0}},
            "linear-classification": {"train": {"steps": 2, "warmup": 0}},
            "noisy-linear": {"train": {"steps": 2, "warmup": 0}},
        },
    },
    "quick": {},
    # Long (well within an hour on a quiet 2-core CPU): quick with four times the steps for every class, which
    # judges every claim (docs/experiments/function-classes.md, "The long scale").
    "long": {
        "judged_at_long": [],
        "functions": {
            "linear": {"train": {"steps": 32000, "warmup": 2000}},
            "sparse-linear": {"train": {"steps": 4000, "warmup": 200}},
            "linear-classification": {"train": {"steps": 4000, "warmup": 200}},
            "noisy-linear": {"train": {"steps": 4000, "warmup": 200}},
        },
        "train": {"steps": 8000},
    },
    # Their sizes (one GPU's work: docs/experiments/function-classes.md has our cost estimate).
    "paper": {
        "judged_at_long": [],
        "d": 20,
        # Every class from scratch with the shared recipe, as the paper trained them.
        "functions": {
            "linear": {
                "n_context": 41,
                "n_start": 11,
                "n_step": 2,
                "model": {"n_layers": 12},  # the shared block's, over quick's own 4
                "train": {"steps": 500000},
            },
            "sparse-linear": {"n_context": 41, "n_start": 11, "n_step": 2, "sparsity": 3, **_FROM_SCRATCH},
            "linear-classification": {"n_context": 41, "n_start": 11, "n_step": 2, **_FROM_SCRATCH},
            "noisy-linear": {"n_context": 41, "n_start": 11, "n_step": 2, **_FROM_SCRATCH},
            "quadratic": {"n_context": 41, "n_start": 11, "n_step": 2},
            "relu-net": {"n_context": 101, "n_start": 26, "n_step": 5},
            "decision-tree": {"n_context": 101, "n_start": 26, "n_step": 5},
        },
        "curriculum": {"d_start": 5, "d_step": 1, "every": 2000},
        "model": {"n_layers": 12, "n_heads": 8, "width": 256, "attention": "sdpa"},
        "train": {
            "steps": 500000,
            "batch_size": 64,
            "lr": 0.0001,
            "schedule": "constant",
            "warmup": 0,
            "log_every": 500,
            "checkpoint_every": 10000,
        },
        "eval_prompts": 1280,
        "slow_prompts": 1280,
    },
}


def _checks(config: dict) -> None:
    """The classes to train, and every setting of theirs, must be valid before anything trains."""
    names = _classes(config)
    _check_shift_prefixes(config, names)


def _check_shift_prefixes(config: dict, names: list[str]) -> None:
    """The shifts' claims judge the linear model at the paper's k (:func:`_run_k`), up to 2d: its prompts must
    reach 2d examples."""
    d, n_context = config["d"], config["functions"]["linear"]["n_context"]
    judged = ROBUST_SHIFTS + FAILING_SHIFTS
    if "linear" in names and set(judged) & set(config["shifts"]) and n_context <= 2 * d:
        raise ConfigError(
            f"functions.linear.n_context must exceed 2d = {2 * d}, got {n_context}: the shifts' claims judge the "
            f"linear model at the paper's k = 40 of d = {PAPER_D}, 2d here (or leave {', '.join(judged)} out of "
            "shifts)"
        )


def _classes(config: dict) -> list[str]:
    """The selected classes, validated (with their parameters) before any training."""
    names = config["classes"]
    if not isinstance(names, list) or not names:
        raise ConfigError("classes must be a non-empty list of function classes")
    for name in names:
        if name not in config["functions"]:
            raise ConfigError(f"unknown function class {name!r}; choose from {', '.join(config['functions'])}")
        task = _task(config, name)
        check_training(_train_block(config, name), f"functions.{name}.train")
        if task.n_context < 2:
            raise ConfigError(
                f"functions.{name}.n_context must be >= 2, got {task.n_context}: the claims compare the transformer "
                "with the learners after k >= 1 examples"
            )
        if name == "sparse-linear" and task.sparsity + 1 >= min(task.d, task.n_context):
            raise ConfigError(
                f"functions.sparse-linear.sparsity must be below d − 1 = {task.d - 1} (and n_context − 1): the sparse "
                "claims compare the model with least squares at k + 1 ≤ prefix < d"
            )
        source = config["functions"][name]["init_from"]
        if source is not None and (
            source not in names[: names.index(name)]
            or config["functions"][source]["n_context"] != config["functions"][name]["n_context"]
        ):
            raise ConfigError(
                f"functions.{name}.init_from must name a class trained before it with the same "
                f"n_context, got {source!r} (set it to null to train {name} from scratch)"
            )
        _model_config(config, name)  # after init_from is known to name an earlier class
    for name in config["shifts"]:
        make_shift(name)
    return names


_TRAINING_KEYS = ("n_context", "n_start", "n_step", "train", "model", "init_from")
"""Keys of a class's ``functions`` entry that say how to train on it (the rest are the class's parameters)."""


def _task(config: dict, name: str, d: int | None = None, n: int | None = None):
    """Class ``name`` at dimension d and prompt length n (default: the full task)."""
    spec = config["functions"][name]
    parameters = {k: v for k, v in spec.items() if k not in _TRAINING_KEYS}
    return function_class(name, d or config["d"], n or spec["n_context"], **parameters)


def _train_block(config: dict, name: str) -> dict:
    """Class ``name``'s training block: the shared ``train`` block with the class's own ``train`` keys on
    top, and the logistic loss for sign labels."""
    block = {**config["train"], **config["functions"][name]["train"]}
    return {**block, "loss": "logistic"} if _task(config, name).metric == "error_rate" else block


def _model_config(config: dict, name: str) -> dict:
    """Class ``name``'s architecture: the shared ``model`` block with the class's own ``model`` keys on
    top; a warm-started class takes the architecture of the class it starts from."""
    spec = config["functions"][name]
    source = spec["init_from"]
    if source:
        if "model" in spec:
            raise ConfigError(
                f"functions.{name}.model: a warm-started class takes the architecture of {source!r}; "
                "drop its model keys or set init_from to null"
            )
        return _model_config(config, source)
    own = spec.get("model", {})
    unknown = set(own) - set(config["model"])
    if unknown:
        raise ConfigError(
            f"functions.{name}.model: unknown keys {sorted(unknown)}; choose from {list(config['model'])}"
        )
    return {**config["model"], **own}


def _data(config: dict, name: str, task, fmt) -> dict:
    """:meth:`RunContext.trained`'s data arguments: the full class's prompts, or the d/N curriculum when one is
    configured (a warm-started model, which already reads the full task, skips it)."""
    spec, block = config["functions"][name], config["curriculum"]
    if block is not None and not spec["init_from"]:
        block = {**block, "n_start": spec["n_start"], "n_step": spec["n_step"]}
    else:
        block = None
    return training_data(task, fmt, block, lambda d, n: _task(config, name, d, n))


def _baselines(config: dict, name: str, task) -> tuple[list, list]:
    """(fast, slow) learners for class ``name``: Garg et al.'s baselines for it (slow ones see
    only ``slow_prompts`` prompts)."""
    baselines = config["baselines"]
    fast = [LeastSquares(), NearestNeighbours(3), Averaging()]
    slow = []
    if name == "sparse-linear":
        fast += [Lasso(alpha) for alpha in baselines["lasso_alphas"]]
    if name in ("noisy-linear", "quadratic"):
        fast.append(_tracked_learner(name, task))
    if name == "decision-tree":
        fast += [GreedyTree(4), GreedyTree(None)]
        slow.append(BoostedTrees(baselines["boosting_rounds"]))
    if name == "relu-net":
        slow.append(
            TwoLayerNetGD(baselines["net_hidden"], baselines["net_steps"], baselines["net_lr"], seed=config["seed"])
        )
    return fast, slow


def _tracked_learner(name: str, task):
    """The learner of :data:`TRACKED` for class ``name``."""
    if name == "noisy-linear":
        return Ridge(task.noise**2) if task.noise > 0 else LeastSquares()  # the Bayes-optimal ridge
    if name == "quadratic":
        return OnFeatures(LeastSquares(), lambda x: x * x, "ols on x⊙x")  # ours: the consistent estimator
    return LeastSquares()


def _errors(task, prediction: torch.Tensor, target: torch.Tensor, config: dict, error_scale: float = 1.0):
    """:func:`normalised_errors` with the run's bootstrap size and seed."""
    return normalised_errors(task, prediction, target, config["bootstrap"], config["seed"], error_scale)


_OWN_CLAIMS = {
    "sparse-linear": ("sparse-*",),
    "relu-net": ("relu-matches-net-gd",),
    "decision-tree": ("tree-beats-greedy-and-boosted",),
}
"""The claims of a class besides ``tracks-<class>`` and ``beats-knn-and-averaging-<class>`` (patterns, for
:meth:`RunContext.part`)."""


def run(config: dict, ctx: RunContext):
    """Train one transformer per class, evaluate it with the baselines, then the linear model under shifts."""
    names = config["classes"]
    fmt = InterleavedFormat()
    seeds = ctx.seeds
    curves, slow_curves, models = {}, {}, {}
    for name in names:
        with ctx.part(name, claims=[f"tracks-{name}", f"beats-knn-and-averaging-{name}", *_OWN_CLAIMS.get(name, ())]):
            task = _task(config, name)
            result = _train_class(config, ctx, name, task, fmt, models)
            models[name] = result.models
            curves[name], slow = _evaluate_class(config, ctx, name, task, result, fmt)
            slow_curves.update(slow)
            _log(ctx, name, curves[name], error_metric(task))
    ood = {}
    if "linear" in names:
        with ctx.part("shifts", claims=["ood-*"]):
            ctx.ledger.uses("linear")
            ood = _shift_curves(config, ctx, models["linear"], fmt)
    claims = _claims(config, names, seeds, curves, slow_curves, ood)
    _figures(ctx, config, names, seeds, curves, ood)
    return claims


def _train_class(config: dict, ctx: RunContext, name: str, task, fmt, models: dict):
    """Class ``name``'s transformers (one per seed), warm-started from ``models`` of its ``init_from`` class
    when it names one."""
    arch = _model_config(config, name)
    source = config["functions"][name]["init_from"]
    if source:
        ctx.ledger.uses(source)
    return ctx.trained(
        name,
        lambda g: GPTTransformer(
            GPTConfig(
                config["d"] + 1,
                arch["n_layers"],
                arch["n_heads"],
                arch["width"],
                arch["mlp_ratio"],
                max_tokens=2 * task.n_context,
                attention=arch["attention"],
                init=arch["init"],
                activation=arch["activation"],
            ),
            g,
        ),
        train=_train_block(config, name),
        setting=name,
        init=models[source] if source else None,
        **_data(config, name, task, fmt),
    )


def _evaluate_class(config: dict, ctx: RunContext, name: str, task, result, fmt) -> tuple[dict, dict]:
    """Class ``name``'s error curves, keyed by a learner's name or (the class's model, seed), and its slow
    curves, keyed (class, learner) or (class, (class, seed)): the slow learners' and each seed's transformer's on
    the first ``slow_prompts`` prompts."""
    episode = ctx.eval_episode(task, config["eval_prompts"], name)
    episode = make_shift("standard")(episode, task, None)  # every example is the query of the prefix before it
    fast, slow = _baselines(config, name, task)
    predictions = {(name, s): prefix_query_predictions(model, episode, fmt) for s, model in result.by_seed.items()}
    predictions.update({l.name: l.predict_prefixes_episode(episode) for l in fast})
    few = episode[: config["slow_prompts"]]
    curves = {model: _errors(task, pred, episode.ys, config) for model, pred in predictions.items()}
    slow_curves = {}
    for learner in slow:
        pred = learner.predict_prefixes_episode(few)
        curves[learner.name] = slow_curves[name, learner.name] = _errors(task, pred, few.ys, config)
    for s in ctx.seeds:
        slow_curves[name, (name, s)] = _errors(task, predictions[name, s][: few.batch_size], few.ys, config)
    return curves, slow_curves


def _shift_curves(config: dict, ctx: RunContext, linear_models, fmt) -> dict:
    """Per shift of ``shifts``: the error curves of the linear class's transformers (keyed ("linear", seed)) and
    of its linear baselines on shifted prompts, logged."""
    task = _task(config, "linear")
    episode = ctx.eval_episode(task, config["eval_prompts"], "shifts")
    learners = [LeastSquares(), NearestNeighbours(3), Averaging()]
    ood = {}
    for shift_name in config["shifts"]:
        shift = make_shift(shift_name)
        shifted = shift(episode, task, generator(config["seed"], "shift", shift_name))
        predictions = {
            ("linear", s): prefix_query_predictions(model, shifted, fmt) for s, model in zip(ctx.seeds, linear_models)
        }
        predictions.update({l.name: prefix_query_predictions(l, shifted) for l in learners})
        ood[shift_name] = {
            model: _errors(task, pred, shifted.y_query, config, shift.error_scale)
            for model, pred in predictions.items()
        }
        _log(ctx, f"shift/{shift_name}", ood[shift_name], "normalised_mse")
    return ood


def _log(ctx: RunContext, setting: str, curves: dict, metric: str):
    """Every curve's rows: a learner's under its name, a transformer's under its model and seed."""
    for key, curve in curves.items():
        model, seed = key if isinstance(key, tuple) else (key, None)
        ctx.log_band(setting, model, metric, curve, seed=seed)


def _claims(config, names, seeds, curves, slow_curves, ood):
    """Every claim of the run, in order: the sparse, tree and ReLU-net claims, the comparisons with 3-NN and
    averaging, the tracking claims, then the shift claims."""
    out = []
    if "sparse-linear" in names:
        out += _sparse_claims(config, seeds, curves["sparse-linear"])
    if "decision-tree" in names:
        out.append(_tree_claim(config, seeds, curves["decision-tree"], slow_curves))
    if "relu-net" in names:
        out.append(_relu_net_claim(config, seeds, slow_curves))
    out += _beats_knn_claims(names, seeds, curves)
    out += _tracking_claims(config, names, seeds, curves)
    if ood:
        out += _shift_claims(config, seeds, ood)
    return out


def _transformer_mean(table, name, s) -> torch.Tensor:
    """The mean error by prefix of class ``name``'s transformer of seed ``s`` in ``table``."""
    return table[name, s]["mean"]


def _sparse_claims(config, seeds, c) -> list[C.Claim]:
    """On sparse linear functions the transformer beats least squares below d and nearly matches the best
    Lasso; each is left to the long scale when this run's model is short of what it needs
    (:func:`_sparse_shortfall`)."""
    task = _task(config, "sparse-linear")
    ks = range(task.sparsity + 1, min(task.d, task.n_context))
    margin = min(
        ((c["ols"]["mean"][k] - _transformer_mean(c, "sparse-linear", s)[k]).item() for s in seeds for k in ks),
        default=float("nan"),
    )
    lasso = torch.stack([v["mean"] for n, v in c.items() if isinstance(n, str) and n.startswith("lasso")]).amin(0)
    means = torch.stack([_transformer_mean(c, "sparse-linear", s)[1:] for s in seeds])  # (seed, k − 1)
    allowed = PAPER_BAND + torch.stack([c["sparse-linear", s]["high"][1:] for s in seeds]) - means
    slack = allowed - (means - lasso[1:])
    seed, k = divmod(int(slack.argmin()), slack.shape[1])
    worst = {
        "gap": (means[seed, k] - lasso[k + 1]).item(),
        "allowed": allowed[seed, k].item(),
        "k": k + 1,
        "seed": seeds[seed],
    }
    sparse = C.paper("§5, Fig 5a", "0.58, 0.09 at k = 5, 10 against the Lasso's 0.62, 0.08 (s = 3, d = 20)")
    claims = [
        C.holds_if(
            "sparse-beats-ols",
            PAPER,
            f"on sparse linear functions (k = {task.sparsity} of d = {task.d}) the transformer's error "
            f"is below least squares' for every {ks.start} ≤ k < {ks.stop} examples (every seed)",
            f"smallest margin (OLS − transformer) {margin:.4g}",
            "> 0",
            margin > 0,
            about=sparse,
            figure="classes",
        ),
        C.holds_if(
            "sparse-approaches-lasso",
            PAPER,
            "the sparse transformer nearly matches the Lasso (the paper's is within 0.01 of it at k = 5 and 10): "
            f"its normalised error exceeds the best Lasso's (α grid {config['baselines']['lasso_alphas']}) by at "
            f"most {PAPER_BAND} (the widest half-width of the paper's 90% bands) + this run's 90% half-band at k, at "
            "every k ≥ 1, every seed (measured: where the gap comes nearest what is allowed)",
            worst,
            f"gap ≤ {PAPER_BAND} + the 90% half-band at every k ≥ 1, every seed",
            bool((slack >= 0).all()),
            about=sparse,
            figure="classes",
        ),
    ]
    advantage, excess, reason = _sparse_shortfall(seeds, c, task, ks, lasso)
    return [
        C.judged_at_if_unresolved(claim, config["judged_at_long"], "long", reason, needed=advantage, reached=excess)
        for claim in claims
    ]


def _sparse_shortfall(seeds, c, task, ks, lasso) -> tuple[float, float, str]:
    """What the sparse claims need, the margin by which sparsity can beat least squares at all (the Lasso's, at
    the same k), against how far this run's model is from least squares where that one is exact (k ≥ d), and
    the reason a claim left to the long scale gives."""
    advantage = min((c["ols"]["mean"][k] - lasso[k]).item() for k in ks) if len(ks) else float("nan")
    excess = max(
        (_transformer_mean(c, "sparse-linear", s)[task.d :] - c["ols"]["mean"][task.d :]).mean().item() for s in seeds
    )
    reason = (
        f"the sparse model must come within the effect sparsity can have, the Lasso's margin over least squares "
        f"at {ks.start} ≤ k < {ks.stop} (its smallest), of least squares where that one is exact (k ≥ d); the "
        f"model's excess there (mean over k, worst seed)"
    )
    return advantage, excess, reason


def _tree_claim(config, seeds, c, slow_curves) -> C.Claim:
    """On depth-4 decision trees the transformer's error is below the greedy trees' and XGBoost's (on the slow
    prompts) at the longest prefix, where the paper gives its numbers (first clause), and on average over k ≥ 1,
    every seed."""
    task = _task(config, "decision-tree")
    every, last = slice(1, None), task.n_context - 1
    rivals = {
        "tree(depth 4)": c["tree(depth 4)"]["mean"],
        "tree": c["tree"]["mean"],
        "xgboost": slow_curves["decision-tree", "xgboost"]["mean"],
    }
    at_last, on_average = {}, {}
    for s in seeds:
        own = {"xgboost": slow_curves["decision-tree", ("decision-tree", s)]["mean"]}
        for rival, err in rivals.items():
            mine = own.get(rival, _transformer_mean(c, "decision-tree", s))
            at_last[rival, s] = (err[last] - mine[last]).item()
            on_average[rival, s] = (err[every] - mine[every]).mean().item()
    margins = lambda table: ", ".join(f"{r} − transformer (seed {s}) {v:.3g}" for (r, s), v in table.items())
    return C.all_of(
        "tree-beats-greedy-and-boosted",
        PAPER,
        "on depth-4 decision trees the transformer's error is below the greedy tree's (depth 4 and unlimited) and "
        f"XGBoost's (on the same {config['slow_prompts']} prompts for XGBoost) at the longest prefix k = {last}, "
        "where the paper gives its numbers (its k = 100), and on average over every prefix "
        f"1 ≤ k < {task.n_context}, every seed",
        {f"at k = {last}": margins(at_last), "mean over k ≥ 1": margins(on_average)},
        "> 0 each",
        {
            f"below each rival at k = {last}": min(at_last.values()) > 0,
            "below each rival on average over k ≥ 1": min(on_average.values()) > 0,
        },
        about=C.paper("§5, Fig 5b", "0.12 against greedy 0.80 and XGBoost 0.62 at k = 100"),
        figure="classes",
    )


def _relu_net_claim(config, seeds, slow_curves) -> C.Claim:
    """On 2-layer ReLU networks the transformer's error at the longest prefix, where the paper gives its numbers,
    is within the paper's band + the run's 90% half-band of a 2-layer network's fitted by GD on the same prompts,
    either side ("comparably"), every seed; measured: the seed nearest its limit. The half-band is the transformer's,
    on the side that faces the network (mean − p5 when it lies above, p95 − mean when below)."""
    task = _task(config, "relu-net")
    last = task.n_context - 1
    network = next(v for (c, key), v in slow_curves.items() if c == "relu-net" and not isinstance(key, tuple))
    reference = network["mean"][last].item()
    rows = []
    for s in seeds:
        own = {key: curve[last].item() for key, curve in slow_curves["relu-net", ("relu-net", s)].items()}
        half = own["mean"] - own["low"] if own["mean"] > reference else own["high"] - own["mean"]
        rows.append({"seed": s, "error": own["mean"], "network": reference, "allowed": PAPER_BAND + half})
    worst = max(rows, key=lambda r: abs(r["error"] - r["network"]) - r["allowed"])
    return C.holds_if(
        "relu-matches-net-gd",
        PAPER,
        "on 2-layer ReLU networks the transformer performs comparably to a 2-layer network fitted by GD: at the "
        f"longest prefix k = {last}, where the paper gives both errors (its k = 100), its normalised error lies "
        f"within {PAPER_BAND} (the widest half-width of the paper's 90% bands) + this run's 90% half-band of the "
        "transformer at k (on the side facing the network) of the network's, either side (same "
        f"{config['slow_prompts']} prompts), every seed (measured: the seed nearest its limit)",
        worst,
        f"|error − network| ≤ {PAPER_BAND} + the 90% half-band, every seed",
        all(abs(r["error"] - r["network"]) <= r["allowed"] for r in rows),
        about=C.paper("§5, Fig 5c", "both 0.17 at k = 100"),
        figure="classes",
    )


def _beats_knn_claims(names, seeds, curves) -> list[C.Claim]:
    """Per class: the transformer's error is below that of each baseline the paper draws beside it
    (:data:`RIVALS`: 3-NN and averaging, or 3-NN alone) at every prefix 1 ≤ k < N, every seed (at k = 0 every
    predictor predicts 0); on the classes the paper does not compare, below both, as iclab's own check.
    ``curves[class][key]["mean"]`` is the error by prefix; a class's transformer is keyed ``(class, seed)``."""
    out = []
    for name in names:
        c = curves[name]
        source, baselines = RIVALS.get(name, (None, ("3-nn", "averaging")))
        rival = torch.stack([c[b]["mean"] for b in baselines]).amin(0)
        margins = torch.stack([rival - c[name, s]["mean"] for s in seeds])  # (seed, k)
        margins[:, 0] = torch.inf  # at k = 0 every predictor predicts 0: no comparison
        seed_index, k = divmod(margins.argmin().item(), margins.shape[1])
        smallest, n = margins[seed_index, k].item(), len(rival)
        drawn = " and ".join({"3-nn": "3-NN", "averaging": "averaging"}[b] for b in baselines)
        scope = (
            "the baselines of the paper's figure" if source else "iclab's extension: the paper has no such comparison"
        )
        out.append(
            C.holds_if(
                f"beats-knn-and-averaging-{name}",
                PAPER,
                f"on {name} functions the transformer's error is below {drawn}'s at every prefix 1 ≤ k < {n} "
                f"(at k = 0 every predictor predicts 0), every seed ({scope})",
                {
                    "smallest margin": smallest,
                    "at k": k,
                    "seed": seeds[seed_index],
                    f"error of the better of {drawn} there": rival[k].item(),
                },
                f"margin (better of {drawn} − transformer) > 0 at every 1 ≤ k < {n}, every seed",
                smallest > 0,
                about=C.paper(source) if source else C.diagnostic("trained"),
                figure="classes",
            )
        )
    return out


def _tracking_claims(config, names, seeds, curves) -> list[C.Claim]:
    """Per class of :data:`TRACKED`: the transformer's error exceeds its learner's by at most the tolerance
    (in units of the zero predictor's error) at every k ≥ 1, worst seed."""
    out = []
    tolerance = config["tolerance"]["tracking_gap"]
    for name in (n for n in names if n in TRACKED):
        c, learner = curves[name], _tracked_learner(name, _task(config, name)).name
        gap = max((c[name, s]["mean"][1:] - c[learner]["mean"][1:]).max().item() for s in seeds)
        out.append(
            C.at_most(
                f"tracks-{name}",
                PAPER,
                f"on {name} functions the transformer's error "
                f"exceeds that of {TRACKED[name]} by at most {tolerance} at every k ≥ 1, worst seed "
                "(iclab's extension of the paper's linear finding: the paper trains no model on this class)",
                gap,
                tolerance,
                about=C.diagnostic("trained"),
                figure="classes",
            )
        )
    return out


def _shift_claims(config, seeds, ood):
    """The paper's findings under each shift that ran: those of :data:`ROBUST_SHIFTS` at the paper's k
    (:func:`_robust_claim`), those of :data:`HALF_OF_KNN_SHIFTS` against 3-NN, and those of
    :data:`FAILING_SHIFTS` by the rise of the error from the standard prompts' (when those ran)."""
    out = [_robust_claim(name, ood[name], seeds, config["d"]) for name in ROBUST_SHIFTS if name in ood]
    if "standard" in ood:
        out += [
            _failing_claim(name, ood[name], ood["standard"], seeds, config["d"])
            for name in FAILING_SHIFTS
            if name in ood
        ]
    out += [_half_of_knn_claim(name, ood[name], seeds) for name in HALF_OF_KNN_SHIFTS if name in ood]
    return out


def _shift_source(name: str) -> str:
    """The paper's figure of shift ``name``: Fig 9 adds the scaled prompts to Fig 8's."""
    return "§4, Figs 8 and 9" if name.startswith("scale") else "§4, Fig 8"


def _run_k(paper_k: int, d: int) -> int:
    """The paper's k at d = 20 (10, 20, 40: d/2, d, 2d) at the run's d: ⌊d/2⌋, d, 2d."""
    return paper_k * d // PAPER_D


def _paper_errors_text(name: str) -> str:
    """The paper's errors under shift ``name``, e.g. ``0.013 at k = 40 (d = 20)``."""
    errors = PAPER_SHIFT_ERRORS[name]
    return f"{', '.join(f'{v:g}' for v in errors.values())} at k = {', '.join(map(str, errors))} (d = {PAPER_D})"


def _failing_claim(name, table, standard, seeds, d) -> C.Claim:
    """Under failing shift ``name`` (:data:`FAILING_SHIFTS`) the linear transformer's error at k = 2d (the paper's
    k = 40) rises from its error on the standard prompts by at least the paper's error there (its standard error
    is about 0) less the paper's band and the run's 90% half-band under the shift (mean − p5: the side a lower error
    lies on), and by more than 0 whatever the band, every seed, from a model whose error on the standard prompts
    there is the paper's "about 0" (at most the paper's band above the run's own 90% band); measured: the seed
    nearest its limit."""
    k, paper_error = _run_k(40, d), PAPER_SHIFT_ERRORS[name][40]
    rows = []
    for s in seeds:
        shifted, own = table["linear", s], standard["linear", s]
        rise = (shifted["mean"][k] - own["mean"][k]).item()
        least = max(paper_error - PAPER_BAND - (shifted["mean"][k] - shifted["low"][k]).item(), 0.0)
        # The failure is of a model that learned the class: an untrained one's error also moves under a shift.
        learned = own["low"][k].item() <= PAPER_BAND
        rows.append(
            {
                "seed": s,
                "error": shifted["mean"][k].item(),
                "rise": rise,
                "at least": least,
                "standard error": own["mean"][k].item(),
                "learned": learned,
            }
        )
    worst = min(rows, key=lambda r: (r["learned"], r["rise"] - r["at least"]))
    return C.holds_if(
        f"ood-fails-{name}",
        PAPER,
        f"a failure the paper found: under the {name} prompts the linear transformer's error at k = 2d = {k} (the "
        f"paper's k = 40 at d = {PAPER_D}) rises from its error on standard prompts by at least the paper's "
        f"{paper_error:g} (its error there, where on standard prompts it is about 0) − {PAPER_BAND} (the widest "
        "half-width of the paper's 90% bands) − this run's 90% half-band under the shift (mean − p5), and by more "
        f"than 0, every seed, its error on standard prompts there about 0 (its 90% band reaching {PAPER_BAND} or "
        "below; measured: the seed nearest its limit)",
        worst,
        f"rise ≥ {paper_error:g} − {PAPER_BAND} − the 90% half-band, and > 0, from a standard error whose band "
        f"reaches ≤ {PAPER_BAND}, every seed",
        all(r["learned"] and r["rise"] >= r["at least"] and r["rise"] > 0 for r in rows),
        about=C.paper(_shift_source(name), _paper_errors_text(name)),
        figure="shifts",
    )


@dataclass(frozen=True)
class _BandTest:
    """How a robust shift is judged: at prefixes ``ks`` the transformer's mean error lies at most ``band`` plus the
    run's 90% half-band above ``reference`` (one value per k), or within that of it either side when
    ``two_sided``. ``statement`` says it in the paper's terms and ``paper_value`` is the paper's number."""

    ks: list[int]
    reference: torch.Tensor
    band: float
    two_sided: bool
    statement: str
    paper_value: str


def _robust_test(name: str, table: dict, d: int) -> _BandTest:
    """The test of robust shift ``name`` at the run's d: orthogonal queries and noisy labels against least squares
    on the same prompts (on orthogonal queries it predicts 0, the optimum), every other shift against the paper's
    number at its k."""
    half_band = "this run's 90% half-band at k (p95 − mean of its bootstrap band)"
    if name == "orthogonal":
        ks = list(range(1, d))
        return _BandTest(
            ks,
            table["ols"]["mean"][ks],
            ORTHOGONAL_BAND,
            True,
            "with every query orthogonal to the examples before it the linear transformer's error is close to 1, "
            f"the optimum (the examples say nothing of the query): at every 1 ≤ k < d = {d} its mean normalised "
            f"error is within {ORTHOGONAL_BAND} (the half-width of the paper's band) + {half_band} of least squares' "
            "on the same prompts (which predicts 0 there, the optimum: an error of 1 in expectation, whatever the "
            "prompts drawn), every seed",
            f"close to 1, the optimum (band ±{ORTHOGONAL_BAND})",
        )
    if name == "noisy":
        ks = [d // 2, 2 * d]
        return _BandTest(
            ks,
            table["ols"]["mean"][ks],
            PAPER_BAND,
            False,
            "under noisy labels the linear transformer tracks least squares except near k = d, where least squares' "
            f"error peaks: at k = ⌊d/2⌋ = {ks[0]} and 2d = {ks[1]} (the paper's 10 and 40 at d = {PAPER_D}) its mean "
            f"normalised error is at most least squares' on the same prompts + {PAPER_BAND} (the widest half-width "
            f"of the paper's 90% bands) + {half_band}, every seed",
            "tracks least squares except near k = d (no number)",
        )
    paper = PAPER_SHIFT_ERRORS[name]
    ks = [_run_k(k, d) for k in paper]
    scale = make_shift(name).error_scale
    over = f"squared error over d·{scale:g}" if scale != 1 else "squared error over d"
    return _BandTest(
        ks,
        torch.tensor(list(paper.values()), dtype=torch.float64),
        PAPER_BAND,
        False,
        f"under the {name} prompts the linear transformer stays close to least squares, with errors "
        f"{_paper_errors_text(name)} in the paper: at k = {', '.join(map(str, ks))} here (the paper's k mapped "
        f"to d = {d} by 10, 20, 40 → ⌊d/2⌋, d, 2d) its mean normalised error ({over}) is at "
        f"most the paper's number + {PAPER_BAND} (the widest half-width of the paper's 90% bands) + {half_band}, "
        "every seed",
        _paper_errors_text(name),
    )


def _robust_claim(name, table, seeds, d) -> C.Claim:
    """Under robust shift ``name`` the linear transformer's error passes :func:`_robust_test` at each of its k,
    every seed; measured at each k: the worst seed's error, the reference and the distance allowed there."""
    test = _robust_test(name, table, d)
    means = torch.stack([table["linear", s]["mean"][test.ks] for s in seeds])  # (seed, k)
    allowed = test.band + torch.stack([table["linear", s]["high"][test.ks] for s in seeds]) - means
    off = means - test.reference
    slack = allowed - (off.abs() if test.two_sided else off)
    worst = slack.argmin(0)  # the worst seed at each k
    measured = {
        f"k = {k}": {
            "error": means[worst[i], i].item(),
            "reference": test.reference[i].item(),
            "allowed": allowed[worst[i], i].item(),
            "seed": seeds[worst[i]],
        }
        for i, k in enumerate(test.ks)
    }
    side = "|error − reference|" if test.two_sided else "error − reference"
    return C.holds_if(
        f"ood-robust-{name}",
        PAPER,
        "robust in the paper: " + test.statement,
        measured,
        f"{side} ≤ {test.band} + the 90% half-band at k = {', '.join(map(str, test.ks))}, every seed",
        bool((slack >= 0).all()),
        about=C.paper(_shift_source(name), test.paper_value),
        figure="shifts",
    )


def _half_of_knn_claim(name, table, seeds) -> C.Claim:
    """Under shift ``name`` the linear transformer's error at the longest prefix stays below half of 3-NN's,
    worst seed."""
    knn = table["3-nn"]["mean"][-1].item()
    mine = max(table["linear", s]["mean"][-1].item() for s in seeds)
    return C.holds_if(
        f"ood-robust-{name}",
        PAPER,
        f"under the {name} prompts the linear transformer "
        "is not perfectly robust but stays below half of 3-NN's error at the longest prefix (worst seed)",
        {"transformer": mine, "3-NN": knn},
        "transformer < 3-NN / 2",
        mine < knn / 2,
        about=C.paper("§4, Fig 4a", "less than half the error of the nearest-neighbour baseline"),
        figure="shifts",
    )


LABELS = {"ols": "least squares", "3-nn": "3-NN", "averaging": "averaging"}


def _plot_curves(ax, table, seeds, title, ylabel, legend):
    for key, c in table.items():
        model = isinstance(key, tuple)
        if model and key[1] != seeds[0]:
            continue
        k = torch.arange(len(c["mean"]))
        label = f"transformer (seed {seeds[0]})" if model else LABELS.get(key, key)
        band_line(ax, k, c["mean"], c["low"], c["high"], marker="o", ms=2.5, lw=2.5 if model else 1.2, label=label)
    ax.axhline(1.0, color="gray", ls="--", lw=0.8)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("in-context examples k")
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(-0.05, 1.5)
    if legend:
        ax.legend(fontsize=6)


def _grid(n: int, columns: int = 4):
    """A figure with at least n panels in rows of ``columns``; unused panels are hidden."""
    rows = -(-n // columns)
    fig, axes = new_figure(min(n, columns), width=3.6, height=3.0, rows=rows)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _figures(ctx: RunContext, config, names, seeds, curves, ood):
    """``classes.png`` (a panel per class), ``shifts.png`` (a panel per shift of the linear model),
    ``training_curves.png``; every panel draws its bootstrap bands and the zero predictor's level (1)."""
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names):
        task = _task(config, name)
        ylabel = "error rate of sign(ŷ)" if task.metric == "error_rate" else f"squared error / {task.zero_error:g}"
        _plot_curves(ax, curves[name], seeds, f"{name} (d = {task.d})", ylabel, legend=True)
    save(fig, ctx.folder.figure("classes"))
    if ood:
        fig, axes = _grid(len(ood))
        for index, (ax, (shift_name, table)) in enumerate(zip(axes, ood.items())):
            scale = make_shift(shift_name).error_scale
            _plot_curves(
                ax,
                table,
                seeds,
                f"linear, {shift_name}",
                f"squared error / ({config['d']}·{scale:g})",
                legend=index == 0,
            )
        save(fig, ctx.folder.figure("shifts"))
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names):
        training_curve(ax, ctx.history(setting=name), name)
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("training loss", fontsize=8)
    save(fig, ctx.folder.figure("training_curves"))


EXPERIMENT = Experiment(
    name="function-classes",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    claims_version=7,
    nullable=("curriculum",),  # null: every class trains on its full task from the start
    timing={
        "eval_prompts": 16,
        "slow_prompts": 2,
        "bootstrap": 10,
        "baselines.net_steps": 2,
        "baselines.boosting_rounds": 2,
    },  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
