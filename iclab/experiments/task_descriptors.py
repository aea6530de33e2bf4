"""``task-descriptors``: task descriptors help transformers learn linear models in context.

Huang & Ge (ICLR 2025); docs/papers.md §4. Inputs x ~ N(μ, I) with a mean μ ~ N(0, s²I) drawn per
prompt (or from a fixed set of K means); each token optionally carries the descriptor μ (or
the mean's one-hot index). LSA models of 1–3 layers are trained with and without descriptors
and compared with the exact finite-N one-layer optimum (:mod:`iclab.theory.descriptors`),
whose gradient flow from the balanced initialisation is also traced.

Measuring losses. Every model is evaluated on the same prompts. A trained one-layer model is
compared with an LSA set to the optimum on those prompts (a paired estimate of its excess
loss, far less noisy than two separate Monte Carlo means), and a model with descriptors with the
one without on the same prompts (the paired difference of their squared errors and its standard
error). The claims compare mean squared errors, as the paper's loss curves do. Deeper LSAs compute
polynomials of high degree in the tokens, so their squared error explodes on the rare prompts with
a far-out mean (‖μ‖² ≳ 20, about 1 in 1000 prompts): their mean over 10⁵ prompts is then set by
one or two of them. The typical loss, the mean squared error without the 0.1% of prompts with the
largest errors (``typical_drop``), is logged beside it (docs/experiments/task-descriptors.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import claims as C
from ..config import ConfigError
from ..metrics import lsa_alignment, prompt_errors, trimmed_mean
from ..models import LinearSelfAttention, merged_lsa
from ..prompts import PairedFormat
from ..report.figures import heatmap, new_figure, save
from ..rng import generator
from ..tasks import linear_regression_from_config
from ..theory import descriptor_optimum, gradient_flow, no_descriptor_limit_loss
from .base import Experiment, RunContext, check_training

PAPER = "Huang & Ge (ICLR 2025)"

DEFAULTS = {
    "seed": 0,
    "seeds": 2,
    "task": {"d": 5, "inputs": "gaussian", "mean_scale": 1.0, "noise": 0.0},
    "n_contexts": [5, 10, 20, 40],  # one-layer models and the theory at each N
    "deep_layers": [2, 3],  # deeper models, trained at deep_n_context
    "deep_n_context": 20,
    "d_sweep": [5, 10],  # one-layer models at d_sweep_n_context
    "d_sweep_n_context": 20,
    "d_sweep_deep": [2, 3],  # and these deeper ones (those at task.d are the depth comparison's)
    "one_hot": {"n_means": 4, "n_context": 20},
    # The balanced init of the theory (W_PV = σe_De_Dᵀ, W_KQ = σ[[ΘΘᵀ, 0], [0, 0]]): from a small
    # random init some seeds settle where the value row reads x or the descriptor instead of y,
    # a stationary point far above the optimum (e.g. one-hot, seed 2: loss 4.4 vs optimum 1.8).
    "model": {"init": "balanced", "init_scale": 0.02},
    # The one-layer loss is ill-conditioned (x and μ are strongly correlated features; the
    # Hessian's condition number is ~1.6e3 at d = 5, N = 20), so reaching the optimum takes
    # thousands of steps at a large step; more steps help more than larger batches. Gradient
    # norms are typically 2–10: the clip cuts the batches a far-out μ dominates (clipping every
    # step, at 1, left some 3-layer seeds at 2–3× the loss of others).
    "train": {
        "steps": 2500,
        "batch_size": 512,
        "lr": 0.03,
        "optimizer": "adam",
        "clip": 10.0,
        "schedule": "cosine",
        "warmup": 100,
        "log_every": 50,
        "checkpoint_every": 1000,
    },
    # Overrides for 2–3 layers, which train worse at the one-layer step: at lr 0.01 some pairs of seeds
    # ended with descriptors worse at 3 layers (docs/experiments/task-descriptors.md).
    "deep_train": {"lr": 0.005},
    # limit_ns: the exact one-layer optimum alone at these N besides n_contexts, where its loss with descriptors
    # approaches 0 and without them its positive N → ∞ limit (§3, Theorem 3.1)
    "theory": {"mean_draws": 40000, "flow_steps": 20000, "flow_init_scale": 0.1, "limit_ns": [80, 320, 1280]},
    "eval_prompts": 102400,
    "eval_batch": 4096,  # prompts per evaluation chunk (the paper's batch)
    "typical_drop": 0.001,  # the typical loss leaves out this fraction of prompts, the largest errors
    # min_gap: descriptors "help" when they lower the loss by more than 2 standard errors of the paired difference
    # and by at least this share of the loss without them (ours: a smaller gap would not show on the paper's plots).
    # limit_rate: between the two largest N of the theory, N·loss with descriptors may grow by at most this factor
    # (a loss falling to 0 like 1/N keeps it flat; one falling to a positive limit makes it grow like N)
    # descriptor_share: the query-side descriptor share ‖M[:, d:]‖/‖M‖ above which it counts as non-zero (ours)
    "tolerance": {
        "loss_rel": 0.03,
        "cosine": 0.98,
        "balance_rel": 0.01,
        "flow_distance": 0.001,
        "min_gap": 0.01,
        "limit_rate": 1.2,
        "descriptor_share": 0.01,
    },
}

SCALES = {
    # Smoke: the whole pipeline in seconds (training, evaluation, theory, claims, report); its verdicts
    # mean nothing.
    "smoke": {
        "seeds": 1,
        "task": {"d": 3},
        "n_contexts": [5, 10],
        "deep_n_context": 10,
        "deep_layers": [2],
        "d_sweep": [3, 4],
        "d_sweep_n_context": 10,
        "d_sweep_deep": [2],
        "one_hot": {"n_context": 10},
        "train": {"steps": 5, "warmup": 0, "log_every": 1},
        "eval_prompts": 4096,
        "eval_batch": 1024,
        "theory": {"mean_draws": 2000, "flow_steps": 200},
    },
    "quick": {},
    "paper": {
        "seeds": 3,
        "d_sweep": [5, 10, 20],
        "train": {"steps": 5000, "batch_size": 4096, "warmup": 200},
        "theory": {"mean_draws": 200000, "flow_steps": 60000},
        "eval_prompts": 409600,
    },
}

DESCRIPTORS = {"mu": "with μ", None: "without"}


@dataclass
class Trained:
    """One LSA, all seeds, evaluated on the run's prompts: per seed (in seed order) the squared error of
    every prompt, its mean, the typical error (a trimmed mean, see the module docstring) and, against a
    reference model, the paired excess."""

    model: str
    trained: dict[int, LinearSelfAttention]
    errors: list[torch.Tensor]
    mse: list[float]
    typical: list[float]
    excess: list[float] | None = None


@dataclass
class Gap:
    """Without − with descriptors on the same prompts: the mean over seeds of the paired difference of the
    squared errors, its standard error (over prompts, pooled over seeds) and the relative gap, the
    difference over the mean loss without descriptors."""

    difference: float
    stderr: float
    relative: float

    @property
    def z(self) -> float:
        """The difference in standard errors."""
        return self.difference / self.stderr

    def helps(self, tol: dict) -> bool:
        """Whether the descriptor helps: a gap beyond 2 standard errors and of at least ``min_gap`` of the loss."""
        return self.z > 2 and self.relative >= tol["min_gap"]


def _gap(without: Trained, with_descriptor: Trained) -> Gap:
    """The paired gap of two models evaluated on the same prompts, seed by seed."""
    differences = [a - b for a, b in zip(without.errors, with_descriptor.errors)]  # (prompts,) per seed
    mean = _mean([d.mean().item() for d in differences])
    return Gap(mean, _seed_mean_stderr(differences), mean / _mean(without.mse))


def _seed_mean_stderr(values: list[torch.Tensor]) -> float:
    """The standard error of the mean over seeds of each seed's mean of ``values`` (independent prompts per seed)."""
    return sum(v.var().item() / v.numel() for v in values) ** 0.5 / len(values)


@dataclass
class ByN:
    """The one-layer comparison at every N: the exact optimum's loss and the trained models, by N and
    descriptor, the optimum with descriptors by N, the N → ∞ loss without, and the claims."""

    theory: dict[int, dict]
    trained: dict[int, dict[str | None, Trained]]
    optima: dict[int, object]
    limit: float
    claims: list = field(default_factory=list)


def _checks(config: dict):
    """Settings that would only fail after training."""
    if not 0 <= config["typical_drop"] < 1:
        raise ConfigError(f"typical_drop must be in [0, 1), got {config['typical_drop']}")
    check_training({**config["train"], **config["deep_train"]}, "deep_train")


def _mean(values):
    return sum(values) / len(values)


def _task(config: dict, **changes):
    return linear_regression_from_config({**config["task"], "means_seed": config["seed"], **changes})


def _name(config: dict, layers: int, descriptor: str | None, n: int, d: int | None = None) -> str:
    """The LSA's name: layers, descriptor and N, and d where it is not ``task.d``."""
    return f"lsa{layers}-{descriptor or 'none'}-n{n}" + ("" if d in (None, config["task"]["d"]) else f"-d{d}")


def _lsa(
    name: str, task, descriptor, layers: int, config: dict, ctx: RunContext, setting: str, reference=None
) -> Trained:
    """Train an LSA (all seeds at once, once per run) and evaluate it, paired against the ``reference``
    model when one is given; the losses are logged under ``setting``."""
    fmt = PairedFormat(descriptor)
    dim = fmt.token_dim(task.sample(1, torch.Generator().manual_seed(0)))
    init = config["model"]
    result = ctx.trained(
        name,
        lambda g: LinearSelfAttention(
            dim, n_layers=layers, init=init["init"], init_scale=init["init_scale"], generator=g
        ),
        train={**config["train"], **(config["deep_train"] if layers > 1 else {})},
        task=task,
        format=fmt,
        setting=setting,
        together=False,  # the task's means are drawn from the seed
    )
    models = {**result.by_seed, **({} if reference is None else {"reference": reference})}
    errors = prompt_errors(  # (eval_prompts,) each
        models, task, config["eval_prompts"], config["seed"], chunk=config["eval_batch"], prompt_format=fmt
    )
    out = Trained(name, result.by_seed, [], [], [], None if reference is None else [])
    for seed in result.seeds:
        e = errors[seed]
        out.errors.append(e)
        values = {
            "mse": e.mean().item(),
            "mse_stderr": (e.std() / e.numel() ** 0.5).item(),
            "typical_mse": trimmed_mean(e, config["typical_drop"]),
        }
        if reference is not None:
            values["excess_mse"] = (e - errors["reference"]).mean().item()
            out.excess.append(values["excess_mse"])
        ctx.log_metrics(values, setting=setting, model=name, seed=seed, n=task.n_context)
        out.mse.append(values["mse"])
        out.typical.append(values["typical_mse"])
    return out


def _one_layer_by_n(config: dict, ctx: RunContext) -> ByN:
    """One layer at each N: the exact optimum with and without descriptors, and trained models paired
    against an LSA set to the optimum."""
    ns = config["n_contexts"]
    one_layer, theory, optima = {}, {}, {}
    for n in ns:
        one_layer[n], by_descriptor = _one_layer_at(n, config, ctx)
        theory[n], optima[n] = {d: opt.loss for d, opt in by_descriptor.items()}, by_descriptor["mu"]
    by_n = ByN(theory, one_layer, optima, no_descriptor_limit_loss(_task(config, n_context=ns[0])))
    ctx.log(setting="N=inf", model="theory-without", metric="optimal_loss", value=by_n.limit)
    _theory_at_large_n(by_n, config, ctx)
    by_n.claims = _limit_claims(by_n, config) + _optimum_claims(by_n, config)
    return by_n


def _one_layer_at(n: int, config: dict, ctx: RunContext) -> tuple[dict[str | None, Trained], dict[str | None, object]]:
    """At one N, with and without descriptors: the exact optimum (its loss logged, and with descriptors its
    query-side descriptor share) and a trained one-layer LSA paired against an LSA set to it. Returns the
    trained models and the optima by descriptor."""
    task = _task(config, n_context=n)
    trained, optima = {}, {}
    for descriptor, label in DESCRIPTORS.items():
        opt = optima[descriptor] = descriptor_optimum(task, descriptor, config["theory"]["mean_draws"], config["seed"])
        ctx.log(setting=f"N={n}", model=f"theory-{label}", n=n, metric="optimal_loss", value=opt.loss)
        trained[descriptor] = _lsa(
            _name(config, 1, descriptor, n),
            task,
            descriptor,
            1,
            config,
            ctx,
            f"N={n}",
            reference=merged_lsa(*opt.weights()),
        )
    optimum_share = _query_descriptor_share(optima["mu"].matrix, task.d)
    ctx.log(setting=f"N={n}", model="theory-with μ", n=n, metric="query_descriptor_rel_norm", value=optimum_share)
    for seed, trained_share in _trained_shares(trained["mu"], task.d).items():
        ctx.log(
            setting=f"N={n}",
            model=trained["mu"].model,
            seed=seed,
            n=n,
            metric="query_descriptor_rel_norm",
            value=trained_share,
        )
    return trained, optima


def _query_descriptor_share(matrix: torch.Tensor, d: int) -> float:
    """The query-side descriptor columns' share of a one-layer LSA's key–query block M (rows key [x; μ], columns
    query [x_q; μ], the descriptor from column ``d`` on): ‖M[:, d:]‖/‖M‖."""
    return (matrix[:, d:].norm() / matrix.norm()).item()


def _trained_shares(model: Trained, d: int) -> dict[int, float]:
    """Per seed, :func:`_query_descriptor_share` of a trained one-layer LSA's merged W_KQ without the label's row
    and column (the block an optimum's M fills)."""
    return {
        seed: _query_descriptor_share(lsa.layers[0].merged()[0].detach().cpu().double()[:-1, :-1], d)
        for seed, lsa in model.trained.items()
    }


def _theory_at_large_n(by_n: ByN, config: dict, ctx: RunContext):
    """The exact optimum alone at the larger N of ``theory.limit_ns``: its loss with and without descriptors,
    added to ``by_n.theory`` and logged."""
    theory_cfg = config["theory"]
    for n in theory_cfg["limit_ns"]:
        by_n.theory[n] = {
            d: descriptor_optimum(_task(config, n_context=n), d, theory_cfg["mean_draws"], config["seed"]).loss
            for d in DESCRIPTORS
        }
        for descriptor, label in DESCRIPTORS.items():
            ctx.log(
                setting=f"N={n}", model=f"theory-{label}", n=n, metric="optimal_loss", value=by_n.theory[n][descriptor]
            )


def _weight_cosines(by_n: ByN) -> list[float]:
    """lsa_alignment of every trained one-layer LSA with descriptors with the optimum at its N, by N and seed."""
    cosines = []
    for n, opt in by_n.optima.items():
        target = opt.weights()
        for model in by_n.trained[n]["mu"].trained.values():
            w_kq, w_pv = (w.detach().cpu() for w in model.layers[0].merged())
            cosines.append(lsa_alignment(w_kq, w_pv, *target))
    return cosines


def _optimum_claims(by_n: ByN, config: dict) -> list:
    """The trained one-layer models with descriptors against the exact optimum at each trained N (their loss,
    weights and query-side descriptor share), and the optimum itself: lower with descriptors, with descriptor
    columns on the query side."""
    tol, ns, d = config["tolerance"], config["n_contexts"], config["task"]["d"]
    theory, first = by_n.theory, by_n.optima[ns[0]]
    loss_gaps = [abs(v) / by_n.optima[n].loss for n in ns for v in by_n.trained[n]["mu"].excess]
    optimum_shares = {n: _query_descriptor_share(by_n.optima[n].matrix, d) for n in ns}
    trained_shares: dict[int, dict[int, float]] = {}
    for n in ns:
        for seed, share in _trained_shares(by_n.trained[n]["mu"], d).items():
            trained_shares.setdefault(seed, {})[n] = share
    return [
        C.at_most(
            "one-layer-reaches-optimum",
            PAPER,
            f"the trained one-layer LSA with descriptors is within {tol['loss_rel']:.0%} of the exact finite-N optimum "
            f"({first.method}); worst over N={ns} and seeds of |excess loss| / optimal loss, "
            f"the excess paired against an LSA set to the optimum on the same {config['eval_prompts']} prompts",
            max(loss_gaps),
            tol["loss_rel"],
            about=C.paper("§5 (the abstract: the weights converge to the predicted global minimum)"),
            figure="loss_vs_n",
        ),
        C.at_least(
            "one-layer-matches-optimum-weights",
            PAPER,
            "trained W_PV[label row] ⊗ W_KQ matches the optimum's "
            "(lsa_alignment: cosine of the rescaling-invariant product), worst over N and seeds",
            min(_weight_cosines(by_n)),
            tol["cosine"],
            about=C.paper("§5 and Theorem 4.1 (the trained weights against the global minimum)"),
        ),
        C.holds_if(
            "theory-descriptors-help",
            PAPER,
            "the exact one-layer optimum with descriptors has lower loss than without, at every N "
            "(a consistency check of the theory: the LSA with descriptors contains the one without as a special case, "
            "so with ≤ without always; only the strictness can fail)",
            {n: [round(theory[n]["mu"], 4), round(theory[n][None], 4)] for n in ns},
            "with < without",
            all(theory[n]["mu"] < theory[n][None] for n in ns),
            about=C.diagnostic("theory"),
            figure="loss_vs_n",
        ),
        _query_share_claim(optimum_shares, tol),
        _trained_query_share_claim(trained_shares, optimum_shares, tol),
    ]


def _shrinks(shares: dict[int, float], floor: float) -> bool:
    """Shares by N, over at least two N: every one above ``floor`` (non-zero) and strictly decreasing in N."""
    values = [shares[n] for n in sorted(shares)]
    return len(values) > 1 and min(values) > floor and all(a > b for a, b in zip(values, values[1:]))


def _query_share_claim(shares: dict[int, float], tol: dict):
    """The exact optimum uses the descriptor in the queries, the less the more examples: its query-side share
    ``shares`` (by N) non-zero and decreasing in N."""
    floor = tol["descriptor_share"]
    return C.holds_if(
        "query-descriptor-blocks-shrink",
        PAPER,
        "in the finite-N optimum the query-side descriptor columns M*[:, d:] "
        "are non-zero and their share ‖M*[:, d:]‖/‖M*‖ shrinks as N grows",
        {n: round(v, 4) for n, v in sorted(shares.items())},
        f"> {floor:g} and decreasing in N",
        _shrinks(shares, floor),
        about=C.paper(
            "§4, Theorem 4.1 (fewer examples: the descriptor matters more, in queries too)", subject="theory"
        ),
        figure="optimum_blocks",
    )


def _trained_query_share_claim(shares: dict[int, dict[int, float]], optimum: dict[int, float], tol: dict):
    """The trained one-layer LSAs with descriptors do what the optimum does (:func:`_query_share_claim`): per seed,
    their query-side share ‖M[:, d:]‖/‖M‖ (``shares``: seed → N → share) shrinks with N as the optimum's does (at
    every step of the grid it falls by at least half the optimum's fall there, ``optimum``: N → share; half is ours,
    so that the fall is the optimum's trend, not the seeds' noise), and stays non-zero."""
    floor, ns = tol["descriptor_share"], sorted(optimum)
    steps = list(zip(ns, ns[1:]))

    def follows(by_n: dict[int, float]) -> bool:
        return bool(steps) and all(by_n[a] - by_n[b] >= (optimum[a] - optimum[b]) / 2 for a, b in steps)

    return C.all_of(
        "trained-query-descriptor-blocks-shrink",
        PAPER,
        "the trained one-layer LSA with descriptors uses the descriptor in the queries too, the more so the fewer the "
        "examples: the query-side share ‖M[:, d:]‖/‖M‖ of its merged W_KQ (without the label's row and column) "
        "shrinks as N grows as the optimum's does, falling at every step of the N grid by at least half the "
        "optimum's fall there, and stays non-zero (every seed)",
        {
            "optimum": {n: round(optimum[n], 4) for n in ns},
            **{f"seed {seed}": {n: round(v, 4) for n, v in sorted(by_n.items())} for seed, by_n in shares.items()},
        },
        f"each step's fall ≥ half the optimum's; > {floor:g} at every N; every seed",
        {
            "shrinks with N as the optimum's share does": bool(shares) and all(map(follows, shares.values())),
            f"non-zero (> {floor:g}) at every N": bool(shares)
            and all(min(v.values()) > floor for v in shares.values()),
        },
        about=C.paper(
            "§4, Theorem 4.1 and the authors' reply (with fewer examples the descriptor is used more, "
            "in the queries too)"
        ),
        figure="optimum_blocks",
    )


def _limit_claims(by_n: ByN, config: dict) -> list:
    """As N grows, the loss with descriptors goes to 0 and without them stays at a positive limit, in the exact
    one-layer optimum (to N in the thousands); the trained one-layer models' loss falls at the trained N."""
    theory = {n: by_n.theory[n] for n in sorted(by_n.theory)}
    return [_loss_to_zero_claim(theory, by_n.limit, config["tolerance"]), _trained_falls_claim(by_n, config)]


def _loss_to_zero_claim(theory: dict[int, dict], limit: float, tol: dict):
    """The exact one-layer optimum's loss by N (``theory``: N → {"mu": with, None: without}) falls to 0 with
    descriptors (decreasing, N·loss growing by at most ``limit_rate`` between the two largest N, as a loss falling
    like 1/N does) and stays at or above 99% of its positive N → ∞ ``limit`` without them."""
    ns = sorted(theory)
    with_mu = {n: theory[n]["mu"] for n in ns}
    without = {n: theory[n][None] for n in ns}
    last, before = ns[-1], ns[-2] if len(ns) > 1 else ns[-1]
    rate = (last * with_mu[last]) / (before * with_mu[before])
    return C.holds_if(
        "theory-loss-to-zero-with-descriptors",
        PAPER,
        "as N grows, the exact one-layer optimum's loss with descriptors falls to 0 "
        f"(decreasing in N, and N·loss growing by at most {tol['limit_rate']}× between the two largest N, "
        "as a loss falling like 1/N does; one falling to a positive limit grows like N), "
        f"while without descriptors it stays at or above 99% of its positive N → ∞ limit {limit:.4g} at every N "
        "(measured: the optimum's loss by N, with and without)",
        {n: [round(with_mu[n], 4), round(without[n], 4)] for n in ns},
        f"with μ: decreasing, N·loss ratio ≤ {tol['limit_rate']}; without: ≥ 0.99 × {limit:.4g}",
        len(ns) > 1
        and all(with_mu[a] > with_mu[b] for a, b in zip(ns, ns[1:]))
        and rate <= tol["limit_rate"]
        and all(v >= 0.99 * limit for v in without.values()),
        about=C.paper(
            "§3, Theorem 3.1 (with infinitely many examples one layer with descriptors reaches zero loss; "
            "without them the loss is not zero)",
            subject="theory",
        ),
        figure="loss_vs_n",
    )


def _trained_falls_claim(by_n: ByN, config: dict):
    """The trained one-layer loss with descriptors falls at every step of the N grid by more than 2 standard errors
    of the difference (the two N's prompts are different draws, taken as independent), and like the exact
    optimum's, towards 0: N·loss grows between the two largest N by at most the optimum's own ratio there
    × (1 + loss_rel)/(1 − loss_rel), the 3% within which a trained model reaches the optimum allowed on each of the
    two losses.
    (The rule of ``theory-loss-to-zero-with-descriptors``, N·loss growing by at most ``limit_rate``, holds for the
    optimum only at larger N than the trained grid's: docs/papers.md §4.)"""
    tol, ns = config["tolerance"], sorted(config["n_contexts"])
    models = {n: by_n.trained[n]["mu"] for n in ns}
    loss = {n: _mean(m.mse) for n, m in models.items()}
    stderr = {n: _seed_mean_stderr(m.errors) for n, m in models.items()}
    falls = [(loss[a] - loss[b]) / (stderr[a] ** 2 + stderr[b] ** 2) ** 0.5 for a, b in zip(ns, ns[1:])]
    before, last = ns[-2:] if len(ns) > 1 else (ns[-1], ns[-1])
    rate = (last * loss[last]) / (before * loss[before])
    slack = (1 + tol["loss_rel"]) / (1 - tol["loss_rel"])  # each of the two losses within loss_rel of the optimum's
    bound = (last * by_n.theory[last]["mu"]) / (before * by_n.theory[before]["mu"]) * slack
    return C.all_of(
        "trained-loss-falls-with-n",
        PAPER,
        "the trained one-layer LSA's loss with descriptors falls towards 0 as N grows "
        f"(mean squared error, seed mean, N={ns}): at every step of the grid by more than 2 standard errors of the "
        "difference, and N·loss grows between the two largest N by at most the exact optimum's own ratio there "
        f"× {slack:.4g} (a loss falling like the optimum's, towards 0; one falling to a positive "
        "limit grows like N)",
        {
            "with μ": {n: round(v, 4) for n, v in loss.items()},
            "standard error": {n: round(v, 5) for n, v in stderr.items()},
            "falls (standard errors)": [round(z, 1) for z in falls],
            "N·loss ratio": round(rate, 4),
            "bound": round(bound, 4),
        },
        f"every fall > 2 standard errors; N·loss ratio between N = {before} and {last} ≤ the optimum's × {slack:.4g}",
        {
            "falls at every step of the grid by > 2 standard errors": bool(falls) and all(z > 2 for z in falls),
            "N·loss grows no faster than the optimum's between the two largest N": len(ns) > 1 and rate <= bound,
        },
        about=C.paper("§3, Theorem 3.1, and §5 (the trained one-layer models against the theory)"),
        figure="loss_vs_n",
    )


def _depth(config: dict, ctx: RunContext) -> list:
    """1, 2, 3 layers at one N, with and without descriptors, on the same prompts (a one-layer model trained
    above is evaluated again, not retrained)."""
    n_deep, tol = config["deep_n_context"], config["tolerance"]
    by_layers, gaps = _models_by_depth(config, ctx)
    relative = {k: round(g.relative, 4) for k, g in gaps.items()}
    deeper = [k for k in gaps if k > 1]
    gains = {k: {label: _gap(by_layers[1][d], by_layers[k][d]) for d, label in DESCRIPTORS.items()} for k in deeper}
    return [
        C.holds_if(
            "deeper-beats-one-layer",
            PAPER,
            "deeper LSAs reach a lower loss than one layer "
            f"(N={n_deep}, mean squared error on the same {config['eval_prompts']} prompts, seed mean): "
            f"at each of {deeper} layers, with descriptors and without, the paired difference one layer − deeper "
            f"is positive by more than 2 standard errors and at least {tol['min_gap']:.0%} of the one-layer loss "
            "(measured: that difference over the one-layer loss, and in standard errors)",
            {
                str(k): {label: {"relative gain": round(g.relative, 4), "z": round(g.z, 2)} for label, g in by.items()}
                for k, by in gains.items()
            },
            f"one layer − deeper > 2 standard errors and ≥ {tol['min_gap']:.0%} of the loss, every deeper model",
            bool(deeper) and all(g.helps(tol) for by in gains.values() for g in by.values()),
            about=C.paper("§5, Fig 2 (one layer reaches its optimum, yet deeper models perform better)"),
        ),
        C.holds_if(
            "descriptors-help-every-depth",
            PAPER,
            "the trained LSA with descriptors has a lower loss "
            f"(mean squared error on the same {config['eval_prompts']} prompts, seed mean) "
            f"than without for {list(gaps)} layers (N={n_deep}): the paired difference without − with is positive "
            f"by more than 2 standard errors and at least {tol['min_gap']:.0%} of the loss at every depth "
            "(measured: the relative gap (without − with)/without and the difference in standard errors)",
            {str(k): {"relative gap": relative[k], "z": round(g.z, 2)} for k, g in gaps.items()},
            f"without − with > 2 standard errors and ≥ {tol['min_gap']:.0%} of the loss at every depth",
            all(g.helps(tol) for g in gaps.values()),
            about=C.paper("§5, Fig 2"),
        ),
        C.holds_if(
            "gap-narrows-with-depth",
            PAPER,
            "the gap between the loss curves without and with descriptors narrows with depth: "
            "the relative gap (without − with)/without "
            f"(mean squared errors, N={n_deep}, seed mean) is smaller in size at each of {deeper} layers than at "
            f"1 layer, where descriptors help (by more than 2 standard errors and {tol['min_gap']:.0%} of the loss)",
            {str(k): v for k, v in relative.items()},
            "|relative gap(L)| < relative gap(1) for every deeper L; descriptors help at 1 layer",
            _gap_narrows(gaps, tol),
            about=C.paper("§5, Fig 2"),
        ),
    ]


def _gap_narrows(gaps: dict[int, Gap], tol: dict) -> bool:
    """Whether the gap between the curves without and with descriptors narrows with depth (``gaps`` by number of
    layers): descriptors help at one layer, and every deeper model's relative gap is smaller in size. Curves that
    cross, descriptors hurting by more than they helped at one layer, have not come closer."""
    deeper = [k for k in gaps if k > 1]
    return bool(deeper) and gaps[1].helps(tol) and all(abs(gaps[k].relative) < gaps[1].relative for k in deeper)


def _models_by_depth(config: dict, ctx: RunContext) -> tuple[dict[int, dict[str | None, Trained]], dict[int, Gap]]:
    """Train LSAs of 1 and each of ``deep_layers`` layers at ``deep_n_context``, with and without descriptors (a
    model trained before under the same name is reused), and log the gap between them at each depth. Returns the
    models by depth and descriptor, and the gaps by depth."""
    n_deep = config["deep_n_context"]
    task = _task(config, n_context=n_deep)
    gaps, by_layers = {}, {}
    for layers in [1, *config["deep_layers"]]:
        models = by_layers[layers] = {
            descriptor: _lsa(_name(config, layers, descriptor, n_deep), task, descriptor, layers, config, ctx, "depth")
            for descriptor in DESCRIPTORS
        }
        gaps[layers] = _gap(models[None], models["mu"])
        typical = {descriptor: _mean(m.typical) for descriptor, m in models.items()}
        ctx.log_metrics(
            {
                "gap": gaps[layers].difference,
                "gap_stderr": gaps[layers].stderr,
                "relative_gap": gaps[layers].relative,
                "typical_relative_gap": (typical[None] - typical["mu"]) / typical[None],
            },
            setting="depth",
            model=f"lsa{layers}",
        )
    return by_layers, gaps


def _d_sweep(config: dict, ctx: RunContext) -> list:
    """One layer at one N for every input dimension d, beside the exact optimum's gap (each deeper LSA's sweep is
    :func:`_deep_gap_grows`)."""
    theory_cfg, tol = config["theory"], config["tolerance"]
    n_d = config["d_sweep_n_context"]
    gaps, theory_gaps = _gaps_by_d(1, config, ctx), {}
    for d in config["d_sweep"]:
        # The exact one-layer optimum at each d tells an under-trained model from a real trend.
        task = _task(config, d=d, n_context=n_d)
        optimal = {
            descriptor: descriptor_optimum(task, descriptor, theory_cfg["mean_draws"], config["seed"]).loss
            for descriptor in DESCRIPTORS
        }
        theory_gaps[d] = (optimal[None] - optimal["mu"]) / optimal[None]
        ctx.log_metrics(
            {"gap": optimal[None] - optimal["mu"], "relative_gap": theory_gaps[d]}, setting=f"d={d}", model="theory"
        )
    return [
        C.holds_if(
            "gap-grows-with-d",
            PAPER,
            f"the one-layer relative gap (without − with)/without (mean squared errors, N={n_d}, seed mean) "
            f"grows with d, and descriptors help (by more than 2 standard errors and {tol['min_gap']:.0%} of the loss) "
            "at every d (measured: the relative gaps; "
            f"the absolute gaps { ({d: round(g.difference, 3) for d, g in gaps.items()}) } "
            f"and the exact optimum's relative gaps { ({d: round(v, 3) for d, v in theory_gaps.items()}) } "
            "are reported beside them)",
            {d: round(g.relative, 4) for d, g in gaps.items()},
            "increasing in d, descriptors help at every d",
            _grows_and_helps(gaps, tol),
            about=C.paper("App. B.2, Table 1 (the gap widens as d grows)"),
        ),
    ]


def _gaps_by_d(layers: int, config: dict, ctx: RunContext) -> dict[int, Gap]:
    """Train an LSA of ``layers`` with and without descriptors at every d of the sweep (a model trained before
    under the same name, as the depth comparison's at ``task.d``, is reused) and log the gap between them."""
    n_d, gaps = config["d_sweep_n_context"], {}
    for d in config["d_sweep"]:
        task = _task(config, d=d, n_context=n_d)
        models = {
            descriptor: _lsa(_name(config, layers, descriptor, n_d, d), task, descriptor, layers, config, ctx, f"d={d}")
            for descriptor in DESCRIPTORS
        }
        gaps[d] = _gap(models[None], models["mu"])
        ctx.log_metrics(
            {"gap": gaps[d].difference, "relative_gap": gaps[d].relative}, setting=f"d={d}", model=f"lsa{layers}"
        )
    return gaps


def _grows_and_helps(gaps: dict[int, Gap], tol: dict) -> bool:
    """Descriptors help at every d, and the relative gap increases with d (over at least two d)."""
    dims = list(gaps)
    return (
        len(dims) > 1
        and all(g.helps(tol) for g in gaps.values())
        and all(gaps[a].relative < gaps[b].relative for a, b in zip(dims, dims[1:]))
    )


def _deep_gap_grows(layers: int, config: dict, ctx: RunContext):
    """The d sweep for a deeper LSA: the gap between without and with descriptors by d."""
    n_d, tol = config["d_sweep_n_context"], config["tolerance"]
    gaps = _gaps_by_d(layers, config, ctx)
    return C.holds_if(
        f"gap-grows-with-d-{layers}-layers",
        PAPER,
        f"for {layers}-layer LSAs too, the relative gap "
        f"(without − with)/without (mean squared errors, N={n_d}, seed mean) grows with d, "
        f"and descriptors help (by more than 2 standard errors and {tol['min_gap']:.0%} of the loss) "
        "at every d (measured: the relative gaps, and the differences in standard errors)",
        {d: {"relative gap": round(g.relative, 4), "z": round(g.z, 2)} for d, g in gaps.items()},
        "increasing in d, descriptors help at every d",
        _grows_and_helps(gaps, tol),
        about=C.paper("the authors' reply and App. B.2 (the gap narrows with depth but widens again as d grows)"),
    )


def _one_hot(config: dict, ctx: RunContext) -> list:
    """One-hot descriptors of a fixed set of K means."""
    hot = config["one_hot"]
    task = _task(config, n_context=hot["n_context"], n_means=hot["n_means"])
    models = {}
    for descriptor in ("mean_index_onehot", None):
        models[descriptor] = _lsa(f"lsa1-{descriptor or 'none'}-onehot", task, descriptor, 1, config, ctx, "one-hot")
        ctx.log(
            setting="one-hot",
            model=f"theory-{descriptor or 'none'}",
            metric="optimal_loss",
            value=descriptor_optimum(task, descriptor).loss,
        )
    gap = _gap(models[None], models["mean_index_onehot"])
    return [
        C.holds_if(
            "one-hot-descriptors-help",
            PAPER,
            f"with K={hot['n_means']} fixed means, one-hot descriptors lower the trained one-layer loss "
            "(mean squared error on the same prompts, seed mean) by more than 2 standard errors "
            f"of the paired difference and at least {config['tolerance']['min_gap']:.0%} of the loss",
            {
                "one-hot": round(_mean(models["mean_index_onehot"].mse), 4),
                "none": round(_mean(models[None].mse), 4),
                "z": round(gap.z, 2),
            },
            "none − one-hot > 2 standard errors and ≥ the minimum gap",
            gap.helps(config["tolerance"]),
            about=C.paper("App. B.5"),
        )
    ]


def _gradient_flow(first, config: dict, ctx: RunContext):
    """Gradient flow from the balanced init on the exact loss of the first N; returns it and its claims."""
    tol, theory_cfg, n = config["tolerance"], config["theory"], config["n_contexts"][0]
    start = (
        LinearSelfAttention(
            first.matrix.shape[0] + 1,
            init="balanced",
            init_scale=theory_cfg["flow_init_scale"],
            generator=generator(config["seed"], "init"),
        )
        .layers[0]
        .merged()
    )
    flow = gradient_flow(first, start, theory_cfg["flow_steps"], record_every=max(1, theory_cfg["flow_steps"] // 200))
    for step, loss, dist, bal in zip(flow.steps, flow.loss, flow.distance, flow.balance):
        ctx.log_metrics(
            {"flow_loss": loss, "flow_distance": dist, "flow_balance": bal},
            setting=f"N={n}",
            model="gradient-flow",
            step=step,
        )
    return flow, _flow_claims(flow, n, tol)


def _flow_claims(flow, n: int, tol: dict) -> list:
    """The gradient flow's claims: it ends at the exact optimum (within ``flow_distance``), and the balance
    ‖W_PV‖²_F − ‖W_KQ‖²_F, 0 at a balanced start, stays near 0: at every recorded step its size is at most
    ``balance_rel`` × the final ‖W_KQ‖²_F."""
    balance = max(abs(b) for b in flow.balance) / flow.w_kq.pow(2).sum().item()
    return [
        C.at_most(
            "gradient-flow-converges",
            PAPER,
            f"gradient flow (float64, step {flow.lr:.3g}) from the balanced init reaches the exact optimum (N={n}): "
            "final ‖vM − M*‖/‖M*‖",
            flow.distance[-1],
            tol["flow_distance"],
            about=C.paper(
                "Theorem 4.1 (gradient flow from the balanced init converges to the global minimum)", subject="theory"
            ),
            figure="gradient_flow",
        ),
        C.at_most(
            "gradient-flow-balance",
            PAPER,
            "a balanced initialisation stays balanced: ‖W_PV‖²_F − ‖W_KQ‖²_F, 0 at the balanced init, stays near 0 "
            "along the flow: its largest size relative to the final ‖W_KQ‖²_F (discrete steps drift by O(step))",
            balance,
            tol["balance_rel"],
            about=C.paper("Lemma 3.3 (a balanced initialisation stays balanced)", subject="theory"),
            figure="gradient_flow",
        ),
    ]


def run(config: dict, ctx: RunContext):
    """Theory and one-layer models vs N, deeper models, the d sweep, the one-hot variant, the gradient flow."""
    # the gradient flow starts from the first N's optimum, computed with the one-layer models: that part serves it
    by_n_claims = ["theory-*", "trained-*", "one-layer-*", "query-descriptor-blocks-*", "gradient-flow-*"]
    with ctx.part("one-layer-by-n", claims=by_n_claims):
        by_n = _one_layer_by_n(config, ctx)
    with ctx.part("depth", claims=["deeper-*", "descriptors-help-every-depth", "gap-narrows-with-depth"]):
        claims = by_n.claims + _depth(config, ctx)
    with ctx.part("d-sweep", claims=["gap-grows-with-d"]):
        claims += _d_sweep(config, ctx)
    for layers in config["d_sweep_deep"]:
        with ctx.part(f"d-sweep-{layers}-layers", claims=[f"gap-grows-with-d-{layers}-layers"]):
            claims.append(_deep_gap_grows(layers, config, ctx))
    with ctx.part("one-hot", claims=["one-hot-*"]):
        claims += _one_hot(config, ctx)
    with ctx.part("gradient-flow", claims=["gradient-flow-*"]):
        flow, flow_claims = _gradient_flow(by_n.optima[config["n_contexts"][0]], config, ctx)
    _figures(ctx, config, by_n, flow)
    return claims + flow_claims


def _figures(ctx: RunContext, config: dict, by_n: ByN, flow):
    ns, theory_ns = config["n_contexts"], sorted(by_n.theory)
    fig, (ax,) = new_figure(1, width=5.5)
    for (descriptor, label), color in zip(DESCRIPTORS.items(), ("C0", "C1")):
        ax.plot(
            theory_ns,
            [by_n.theory[n][descriptor] for n in theory_ns],
            "--",
            marker=".",
            color=color,
            label=f"theory optimum {label}",
        )
        ax.plot(
            ns,
            [_mean(by_n.trained[n][descriptor].mse) for n in ns],
            "o",
            color=color,
            label=f"trained 1-layer LSA {label}",
        )
    ax.axhline(by_n.limit, color="gray", ls=":", label="N → ∞ without descriptors")
    ax.set(xscale="log", xlabel="N (context examples)", ylabel="query mse")
    ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("loss_vs_n"))

    d = config["task"]["d"]
    fig, axes = new_figure(len(by_n.optima), width=3.6, height=3.3)
    for ax, (n, opt) in zip(axes, by_n.optima.items()):
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
    axes[0].axhline(by_n.optima[ns[0]].loss, color="k", ls="--", label="optimum")
    axes[0].legend(fontsize=8)
    axes[1].set_yscale("log")
    save(fig, ctx.folder.figure("gradient_flow"))


EXPERIMENT = Experiment(
    name="task-descriptors",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    claims_version=3,
    timing={
        "eval_prompts": 4096,
        "eval_batch": 1024,
        "theory.mean_draws": 2000,
        "theory.flow_steps": 200,
    },  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
