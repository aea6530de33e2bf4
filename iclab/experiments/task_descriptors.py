"""``task-descriptors``: task descriptors help transformers learn linear models in context.

Huang & Ge (ICLR 2025); PAPERS.md §4. Inputs x ~ N(μ, I) with a mean μ ~ N(0, s²I) drawn per
prompt (or from a fixed set of K means); each token optionally carries the descriptor μ (or
the mean's one-hot index). LSA models of 1–3 layers are trained with and without descriptors
and compared with the exact finite-N one-layer optimum (:mod:`iclab.theory.descriptors`),
whose gradient flow from the balanced initialisation is also traced.
"""

from __future__ import annotations

import torch

from .. import claims as C
from ..metrics import evaluate, lsa_alignment, model_predictor
from ..models import LinearSelfAttention
from ..prompts import PairedFormat
from ..report.figures import heatmap, new_figure, save
from ..tasks import linear_regression_from_config
from ..theory import descriptor_optimum, gradient_flow, no_descriptor_limit_loss
from ..train import TrainConfig, data_source
from .base import Experiment, RunContext

PAPER = "Huang & Ge (ICLR 2025)"

DEFAULTS = {
    "seed": 0,
    "seeds": 2,
    "task": {"d": 5, "inputs": "gaussian", "mean_scale": 1.0, "noise": 0.0},
    "n_contexts": [5, 20],  # one-layer models and the theory at each N
    "deep_layers": [2, 3],  # deeper models, trained at deep_n_context
    "deep_n_context": 20,
    "d_sweep": [5, 10],  # one-layer models at d_sweep_n_context
    "d_sweep_n_context": 20,
    "one_hot": {"n_means": 4, "n_context": 20},
    "model": {"init": "small", "init_scale": 0.02},
    "train": {
        "steps": 400, "batch_size": 512, "lr": 0.01, "optimizer": "adam", "clip": 1.0,
        "schedule": "cosine", "warmup": 40, "log_every": 20, "checkpoint_every": 1000,
    },
    "theory": {"mean_draws": 40000, "flow_steps": 20000, "flow_init_scale": 0.1},
    "eval_prompts": 20000,
    "tolerance": {"loss_rel": 0.03, "cosine": 0.98, "balance_rel": 0.01, "flow_distance": 0.001},
}

SCALES = {
    "quick": {},
    "paper": {
        "seeds": 3, "n_contexts": [5, 10, 20, 40], "d_sweep": [5, 10, 20],
        "train": {"steps": 5000, "batch_size": 4096, "lr": 0.003, "warmup": 200, "log_every": 50},
        "theory": {"mean_draws": 200000, "flow_steps": 60000}, "eval_prompts": 100000,
    },
}

DESCRIPTORS = {"mu": "with μ", None: "without"}


def _task(config: dict, **changes):
    return linear_regression_from_config({**config["task"], "means_seed": config["seed"], **changes})


def _train_and_evaluate(name: str, task, descriptor, layers: int, config: dict, ctx: RunContext, setting: str):
    """Train an LSA (all seeds at once) and return (per-seed losses, models)."""
    train_cfg = TrainConfig.from_config(config["train"])
    seeds = [config["seed"] + k for k in range(config["seeds"])]
    fmt = PairedFormat(descriptor)
    dim = fmt.token_dim(task.sample(1, torch.Generator().manual_seed(0)))
    model_cfg = config["model"]
    result = ctx.train(
        name,
        lambda g: LinearSelfAttention(dim, n_layers=layers, init=model_cfg["init"],
                                      init_scale=model_cfg["init_scale"], generator=g),
        data_source(task, fmt, train_cfg), train_cfg, seeds, setting=setting,
    )
    predictors = {f"s{s}": model_predictor(m, fmt) for s, m in zip(seeds, result.models)}
    losses = evaluate(predictors, task, config["eval_prompts"], config["seed"])
    values = []
    for seed in seeds:
        mean, stderr = losses[f"s{seed}"]
        ctx.log(setting=setting, model=name, seed=seed, n=task.n_context, metric="mse", value=mean)
        ctx.log(setting=setting, model=name, seed=seed, n=task.n_context, metric="mse_stderr", value=stderr)
        values.append(mean)
    return values, result.models


def _mean(values):
    return sum(values) / len(values)


def run(config: dict, ctx: RunContext):
    """Theory, one-layer models vs N, deeper models, the d sweep and the one-hot variant."""
    tol, theory_cfg = config["tolerance"], config["theory"]
    claims, trained, theory, optima = [], {}, {}, {}

    # One layer at each N: theory (exact optimum) and trained models.
    loss_gaps, cosines, descriptor_norms = [], [], []
    for n in config["n_contexts"]:
        task = _task(config, n_context=n)
        for descriptor, label in DESCRIPTORS.items():
            opt = descriptor_optimum(task, descriptor, theory_cfg["mean_draws"], config["seed"])
            theory[(n, descriptor)] = opt.loss
            ctx.log(setting=f"N={n}", model=f"theory-{label}", n=n, metric="optimal_loss", value=opt.loss)
            values, models = _train_and_evaluate(
                f"lsa1-{descriptor or 'none'}-n{n}", task, descriptor, 1, config, ctx, f"N={n}")
            trained[(1, n, descriptor)] = values
            if descriptor == "mu":
                optima[n] = opt
                loss_gaps += [abs(v - opt.loss) / opt.loss for v in values]
                target = opt.weights()
                for model in models:
                    w_kq, w_pv = (w.detach().cpu() for w in model.layers[0].merged())
                    cosines.append(lsa_alignment(w_kq, w_pv, *target))
                norm = opt.query_descriptor_norm() / opt.matrix.norm().item()
                descriptor_norms.append(norm)
                ctx.log(setting=f"N={n}", model="theory-with μ", n=n, metric="query_descriptor_rel_norm", value=norm)
    ns = config["n_contexts"]
    first = optima[ns[0]]
    limit = no_descriptor_limit_loss(_task(config, n_context=ns[0]))
    ctx.log(setting="N=inf", model="theory-without", metric="optimal_loss", value=limit)
    claims += [
        C.at_most(
            "one-layer-reaches-optimum", PAPER,
            f"the trained one-layer LSA with descriptors is within {tol['loss_rel']:.0%} of the exact "
            f"finite-N optimum ({first.method}); worst relative gap over N={ns} and seeds",
            max(loss_gaps), tol["loss_rel"],
        ),
        C.at_least(
            "one-layer-matches-optimum-weights", PAPER,
            "trained W_PV[label row] ⊗ W_KQ matches the optimum's (lsa_alignment: cosine of the "
            "rescaling-invariant product), worst over N and seeds",
            min(cosines), tol["cosine"],
        ),
        C.holds_if(
            "theory-descriptors-help", PAPER,
            "the exact one-layer optimum with descriptors has lower loss than without, at every N",
            {n: [round(theory[(n, "mu")], 4), round(theory[(n, None)], 4)] for n in ns},
            "with < without", all(theory[(n, "mu")] < theory[(n, None)] for n in ns),
        ),
        C.holds_if(
            "query-descriptor-blocks-shrink", PAPER,
            "in the finite-N optimum the query-side descriptor columns M*[:, d:] are non-zero and their "
            "share ‖M*[:, d:]‖/‖M*‖ shrinks as N grows",
            dict(zip(ns, [round(v, 4) for v in descriptor_norms])), "> 0.01 and decreasing in N",
            min(descriptor_norms) > 0.01 and all(a > b for a, b in zip(descriptor_norms, descriptor_norms[1:])),
        ),
    ]

    # Depth: 1, 2, 3 layers at one N.
    n_deep = config["deep_n_context"]
    task = _task(config, n_context=n_deep)
    gaps = {}
    for layers in [1, *config["deep_layers"]]:
        for descriptor in DESCRIPTORS:
            if (layers, n_deep, descriptor) not in trained:
                trained[(layers, n_deep, descriptor)] = _train_and_evaluate(
                    f"lsa{layers}-{descriptor or 'none'}-n{n_deep}", task, descriptor, layers, config, ctx,
                    f"N={n_deep}")[0]
        with_mu, without = _mean(trained[(layers, n_deep, "mu")]), _mean(trained[(layers, n_deep, None)])
        gaps[layers] = (without - with_mu) / without
    claims += [
        C.holds_if(
            "descriptors-help-every-depth", PAPER,
            f"trained LSA with descriptors has lower loss than without for {list(gaps)} layers (N={n_deep}, seed mean)",
            {k: round(v, 4) for k, v in gaps.items()}, "relative gap (without − with)/without > 0 for every depth",
            all(v > 0 for v in gaps.values()),
        ),
        C.holds_if(
            "gap-narrows-with-depth", PAPER,
            "the relative gap shrinks from 1 to 2 layers",
            {k: round(v, 4) for k, v in gaps.items()}, "gap(2) < gap(1)",
            2 in gaps and gaps[2] < gaps[1],
        ),
    ]

    # Input dimension sweep at one N, one layer.
    n_d = config["d_sweep_n_context"]
    d_gaps = {}
    for d in config["d_sweep"]:
        task = _task(config, d=d, n_context=n_d)
        values = {}
        for descriptor in DESCRIPTORS:
            key = (1, n_d, descriptor) if d == config["task"]["d"] else (1, n_d, descriptor, d)
            if key not in trained:
                trained[key] = _train_and_evaluate(
                    f"lsa1-{descriptor or 'none'}-n{n_d}-d{d}", task, descriptor, 1, config, ctx, f"d={d}")[0]
            values[descriptor] = _mean(trained[key])
        d_gaps[d] = (values[None] - values["mu"]) / values[None]
        ctx.log(setting=f"d={d}", model="lsa1", metric="relative_gap", value=d_gaps[d])
    dims = list(d_gaps)
    claims.append(C.holds_if(
        "gap-grows-with-d", PAPER,
        f"one-layer relative gap (without − with)/without grows with d (N={n_d}, seed mean)",
        {d: round(v, 4) for d, v in d_gaps.items()}, "increasing in d",
        len(dims) > 1 and all(d_gaps[a] < d_gaps[b] for a, b in zip(dims, dims[1:])),
    ))

    # One-hot descriptors of a fixed set of K means.
    hot = config["one_hot"]
    task = _task(config, n_context=hot["n_context"], n_means=hot["n_means"])
    one_hot = {}
    for descriptor in ("mean_index_onehot", None):
        one_hot[descriptor] = _mean(_train_and_evaluate(
            f"lsa1-{descriptor or 'none'}-onehot", task, descriptor, 1, config, ctx, "one-hot")[0])
        opt = descriptor_optimum(task, descriptor)
        ctx.log(setting="one-hot", model=f"theory-{descriptor or 'none'}", metric="optimal_loss", value=opt.loss)
    claims.append(C.holds_if(
        "one-hot-descriptors-help", PAPER,
        f"with K={hot['n_means']} fixed means, one-hot descriptors lower the trained one-layer loss",
        {k or "none": round(v, 4) for k, v in one_hot.items()}, "one-hot < none",
        one_hot["mean_index_onehot"] < one_hot[None],
    ))

    # Gradient flow from the balanced init on the exact loss of the first N.
    flow = gradient_flow(first, theory_cfg["flow_steps"], init_scale=theory_cfg["flow_init_scale"],
                         record_every=max(1, theory_cfg["flow_steps"] // 200), seed=config["seed"])
    for step, loss, dist, bal in zip(flow.steps, flow.loss, flow.distance, flow.balance):
        for metric, value in (("flow_loss", loss), ("flow_distance", dist), ("flow_balance", bal)):
            ctx.log(setting=f"N={ns[0]}", model="gradient-flow", step=step, metric=metric, value=value)
    drift = max(abs(b - flow.balance[0]) for b in flow.balance) / flow.w_kq.pow(2).sum().item()
    claims += [
        C.at_most(
            "gradient-flow-converges", PAPER,
            f"gradient flow (float64, step {flow.lr:.3g}) from the balanced init reaches the exact optimum "
            f"(N={ns[0]}): final ‖vM − M*‖/‖M*‖",
            flow.distance[-1], tol["flow_distance"],
        ),
        C.at_most(
            "gradient-flow-balance", PAPER,
            "gradient flow conserves ‖W_PV‖²_F − ‖W_KQ‖²_F (0 at the balanced init): largest drift "
            "relative to the final ‖W_KQ‖²_F (discrete steps drift by O(step))",
            drift, tol["balance_rel"],
        ),
    ]
    _figures(ctx, config, theory, trained, limit, optima, flow)
    return claims


def _figures(ctx: RunContext, config, theory, trained, limit, optima, flow):
    ns = config["n_contexts"]
    fig, axes = new_figure(1, width=5.5)
    ax = axes[0]
    for (descriptor, label), color in zip(DESCRIPTORS.items(), ("C0", "C1")):
        ax.plot(ns, [theory[(n, descriptor)] for n in ns], "--", color=color, label=f"theory optimum {label}")
        means = [_mean(trained[(1, n, descriptor)]) for n in ns]
        ax.plot(ns, means, "o", color=color, label=f"trained 1-layer LSA {label}")
    ax.axhline(limit, color="gray", ls=":", label="N → ∞ without descriptors")
    ax.set_xscale("log")
    ax.set_xlabel("N (context examples)")
    ax.set_ylabel("query mse")
    ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("loss_vs_n"))

    d = config["task"]["d"]
    fig, axes = new_figure(len(optima), width=3.6, height=3.3)
    for ax, (n, opt) in zip(axes, optima.items()):
        heatmap(ax, opt.matrix, f"optimal W_KQ[:2d,:2d], N={n}\nrows key [x; μ], cols query [x_q; μ]")
        ax.axhline(d - 0.5, color="k", lw=0.8)
        ax.axvline(d - 0.5, color="k", lw=0.8)
    save(fig, ctx.folder.figure("optimum_blocks"))

    fig, axes = new_figure(3, width=4.0)
    series = [(flow.loss, "loss"), (flow.distance, "‖vM − M*‖/‖M*‖"), (flow.balance, "‖W_PV‖² − ‖W_KQ‖²")]
    for ax, (values, title) in zip(axes, series):
        ax.plot(flow.steps, values)
        ax.set_xlabel("gradient step")
        ax.set_title(title, fontsize=9)
    axes[0].axhline(optima[ns[0]].loss, color="k", ls="--", label="optimum")
    axes[0].legend(fontsize=8)
    axes[1].set_yscale("log")
    save(fig, ctx.folder.figure("gradient_flow"))


EXPERIMENT = Experiment(
    name="task-descriptors",
    paper=PAPER,
    summary="Task descriptors (the inputs' mean) lower the loss of LSA trained in context; exact one-layer optimum.",
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
)
