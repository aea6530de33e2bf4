"""``lsa-linear``: one-layer linear self-attention learns one preconditioned GD step.

Zhang, Frei & Bartlett, "Trained transformers learn linear models in-context" (JMLR 2024);
docs/papers.md §1 (Zhang et al.). A one-layer merged LSA (1/N-normalised) is trained on noiseless linear
regression with Gaussian inputs N(0, Λ), for Λ = I and an anisotropic diagonal Λ, and
compared with the exact optimum ŷ = x_qᵀΓ⁻¹(1/N)Σy_i x_i and with reference learners.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import claims as C
from ..learners import Averaging, GradientDescent, LeastSquares, NearestNeighbours, ZeroPredictor
from ..metrics import cosine, lsa_alignment
from ..models import LinearSelfAttention
from ..prompts import PairedFormat
from ..report.figures import heatmap, new_figure, save, training_curve
from ..rng import generator
from ..tasks import linear_regression_from_config
from ..theory import GradientFlow, descriptor_optimum, gd_step_optimum, gradient_flow, lsa_optimum, lsa_weights
from .base import Experiment, RunContext

PAPER = "Zhang, Frei, Bartlett (JMLR 2024)"
SOURCES = {
    "optimum": "§4.1, Theorems 4.1 and 4.2 (M = N)",
    "preconditioner": "§4.1, Theorem 4.1",
    "flow": "§4.1, Theorem 4.1 (gradient flow from the balanced initialisation converges to the global minimum)",
}
"""Where the paper states each claim (docs/papers.md §1)."""
OPTIMUM = "lsa-optimum"
"""The global optimum's predictor ŷ = x_qᵀΓ⁻¹(1/N)Σy_i x_i among the evaluated learners."""

DEFAULTS = {
    "seed": 0,
    "seeds": 3,
    "task": {"d": 5, "n_context": 20, "inputs": "gaussian"},
    # Eigenvalues of Λ per setting (null = identity); the anisotropic one is 1…4 scaled to trace d.
    "covariances": {"isotropic": None, "anisotropic": [0.4, 0.7, 1.0, 1.3, 1.6]},
    "model": {"init": "small", "init_scale": 0.1},
    "train": {
        "steps": 2000,
        "batch_size": 1024,
        "lr": 0.003,
        "optimizer": "adam",
        "schedule": "cosine",
        "warmup": 100,
        "log_every": 50,
        "checkpoint_every": 1000,
    },
    # The theorem's dynamics: gradient flow on the exact population loss (float64, iclab.theory.gradient_flow:
    # gradient descent with a step of half its stability limit) from each seed's balanced initialisation of scale
    # init_scale, for `steps` steps.
    "flow": {"init_scale": 0.1, "steps": 20000},
    "eval_prompts": 50000,
    # flow_distance: where the flow ends, ‖W_PV[y,y]·W_KQ[x,x] − Γ⁻¹‖_F / ‖Γ⁻¹‖_F (the theorem: 0 in the limit; ours,
    # the float64 flow's after `steps` steps, as task-descriptors' flow)
    "tolerance": {"loss_rel": 0.03, "cosine": 0.99, "flow_distance": 0.001},
}

SCALES = {
    # Smoke: the whole pipeline in seconds (training, evaluation, claims, report); its verdicts mean nothing.
    "smoke": {
        "seeds": 1,
        "train": {"steps": 20, "warmup": 0, "log_every": 2},
        "flow": {"steps": 200},
        "eval_prompts": 500,
    },
    "quick": {},
    "paper": {"seeds": 5, "train": {"steps": 20000, "batch_size": 4096}, "eval_prompts": 200000},
}


@dataclass
class Setting:
    """One covariance's outcome: the theory's losses, every predictor's loss (learners by name, the
    trained LSA by ``(model, seed)``), the trained LSA by seed with the alignment of its weights' product with the
    optimum's (:func:`~iclab.metrics.lsa_alignment`), and the optimum's weights."""

    name: str
    model: str
    optimal_loss: float
    gd_loss: float
    losses: dict
    trained: dict[int, LinearSelfAttention]
    alignments: list[float]
    target: tuple[torch.Tensor, torch.Tensor]
    flows: dict[int, GradientFlow] | None = None


def _setting(name: str, task, config: dict, ctx: RunContext) -> Setting:
    """Train one LSA per seed on one covariance and compare it with the theory and the learners."""
    optimum, gd = lsa_optimum(task), gd_step_optimum(task)
    ctx.log_metrics(
        {"optimal_loss": optimum.loss, "gd_step_lr": gd.lr, "gd_step_loss": gd.loss}, setting=name, model="theory"
    )

    init = config["model"]
    model = f"lsa-{name}"
    result = ctx.trained(
        model,
        lambda g: LinearSelfAttention(task.d + 1, init=init["init"], init_scale=init["init_scale"], generator=g),
        train=config["train"],
        task=task,
        format=PairedFormat(),
        setting=name,
    )
    trained = result.by_seed

    learners = [LeastSquares(), Averaging(), GradientDescent(1, gd.lr), NearestNeighbours(3), ZeroPredictor()]
    predictors = {learner.name: learner for learner in learners}
    predictors[OPTIMUM] = GradientDescent(1, 1.0, optimum.preconditioner)  # x_qᵀΓ⁻¹(1/N)Σy_i x_i
    losses = ctx.evaluate(
        {**predictors, **{(model, seed): m for seed, m in trained.items()}}, task, config["eval_prompts"], setting=name
    )

    target, alignments = lsa_weights(optimum.preconditioner, task.d + 1), []
    for seed, m in trained.items():
        w_kq, w_pv = (w.detach().cpu() for w in m.layers[0].merged())
        alignments.append(lsa_alignment(w_kq, w_pv, *target))
        block = cosine(w_pv[-1, -1] * w_kq[: task.d, : task.d], optimum.preconditioner)
        ctx.log_metrics(
            {"preconditioner_cosine": block, "product_alignment": alignments[-1]},
            setting=name,
            model=model,
            seed=seed,
        )
    flows = _flows(name, task, config, ctx)
    return Setting(name, model, optimum.loss, gd.loss, losses, trained, alignments, target, flows)


def _flows(name: str, task, config: dict, ctx: RunContext) -> dict[int, GradientFlow]:
    """The theorem's gradient flow on the exact population loss, from each seed's balanced initialisation
    (``LinearSelfAttention(init="balanced")``, its Θ drawn from the seed), its loss and distance to the optimum
    logged as ``lsa-flow-<name>``. A computation on the closed form: nothing is sampled, nothing trains."""
    flow, loss = config["flow"], descriptor_optimum(task, None)  # no descriptor: the loss in W_KQ[x,x]ᵀ, exactly
    flows = {}
    for seed in ctx.seeds:
        start = LinearSelfAttention(
            task.d + 1, init="balanced", init_scale=flow["init_scale"], generator=generator(seed, "flow-init", name)
        ).layers[0]
        flows[seed] = gradient_flow(loss, start.merged(), flow["steps"], record_every=max(1, flow["steps"] // 200))
        for step, value, distance in zip(flows[seed].steps, flows[seed].loss, flows[seed].distance):
            for metric, v in (("flow_loss", value), ("flow_distance", distance)):
                ctx.log(setting=name, model=f"lsa-flow-{name}", seed=seed, step=step, metric=metric, value=v)
    return flows


def _loss_at_optimum_claim(s: Setting, config: dict):
    """The trained LSA's loss against the global optimum's, paired: the optimal predictor x_qᵀΓ⁻¹(1/N)Σy_i x_i on
    the same evaluation prompts, so that which prompts were drawn (easy or hard) cancels from the comparison."""
    tol, name = config["tolerance"], s.name
    optimum = s.losses[OPTIMUM]
    excess = {seed: (s.losses[s.model, seed] - optimum) / optimum for seed in s.trained}
    return C.holds_if(
        f"loss-at-optimum-{name}",
        PAPER,
        f"{name} Λ: the trained LSA reaches the global optimum, loss tr Λ − tr(ΛΓ⁻¹Λ) = {s.optimal_loss:.4g}: "
        f"its loss minus the optimal predictor's x_qᵀΓ⁻¹(1/N)Σy_i x_i on the same {config['eval_prompts']} fresh "
        f"prompts, relative to the optimum's, within {tol['loss_rel']:.0%} (worst of {len(excess)} seeds; measured: "
        "both losses and the relative excess)",
        {
            str(seed): {
                "trained": round(s.losses[s.model, seed], 5),
                "optimum, same prompts": round(optimum, 5),
                "relative excess": round(value, 5),
            }
            for seed, value in excess.items()
        },
        f"|relative excess| ≤ {tol['loss_rel']:.0%}, every seed",
        all(abs(value) <= tol["loss_rel"] for value in excess.values()),
        about=C.paper(SOURCES["optimum"]),  # the paper gives the formula, not a number
        figure="learners",
    )


def _claims(s: Setting, config: dict) -> list:
    tol, name = config["tolerance"], s.name
    model_losses = [s.losses[s.model, seed] for seed in s.trained]
    ols, averaging = s.losses["ols"], s.losses["averaging"]
    return [
        _loss_at_optimum_claim(s, config),
        C.at_least(
            f"preconditioner-{name}",
            PAPER,
            f"{name} Λ: the trained weights are Theorem 4.1's global minimum up to the rescaling W_PV → cW_PV, "
            "W_KQ → W_KQ/c: the product W_PV[y,:] ⊗ W_KQ (every weight the prediction reads) matches the optimum's "
            "(W_KQ[x,x] = Γ⁻¹, W_PV[y,y] = 1, every other entry 0) in direction (cosine, worst seed)",
            min(s.alignments),
            tol["cosine"],
            about=C.paper(SOURCES["preconditioner"]),
            figure="weights",
        ),
        C.holds_if(
            f"between-ols-and-averaging-{name}",
            PAPER,
            f"{name} Λ: the LSA beats averaging and loses to OLS (every seed); "
            "a sanity bound of iclab's, implied by the loss at the optimum",
            f"ols {ols:.4g} < lsa {min(model_losses):.4g}…{max(model_losses):.4g} < averaging {averaging:.4g}",
            "ols < lsa < averaging",
            all(ols < v < averaging for v in model_losses),
            about=C.diagnostic("trained"),
            figure="learners",
        ),
        _flow_claim(s.flows, name, config),
    ]


FLOW_ROUNDING = 1e-12
"""The relative rise of a float64 flow's loss between recorded steps that is rounding, not a rise."""


def _flow_claim(flows: dict[int, GradientFlow], name: str, config: dict):
    """The theorem's gradient flow from the balanced initialisation converges to the global optimum W*
    (W_PV[y,y]·W_KQ[x,x] = Γ⁻¹, the one minimiser it names), its loss falling all the way (a flow's loss never
    rises)."""
    tol, steps = config["tolerance"]["flow_distance"], config["flow"]["steps"]
    measured = {
        str(seed): {
            "end distance": round(f.distance[-1], 7),
            "end loss": round(f.loss[-1], 6),
            "largest rise": max((b - a) / abs(a) for a, b in zip(f.loss, f.loss[1:])),
        }
        for seed, f in flows.items()
    }
    return C.all_of(
        f"flow-converges-{name}",
        PAPER,
        f"{name} Λ: gradient flow on the exact population loss (float64, {steps} steps of "
        f"{next(iter(flows.values())).lr:.3g}) from the balanced initialisation converges to the global optimum: "
        f"W_PV[y,y]·W_KQ[x,x] ends within {tol:g} of Γ⁻¹ (‖·−Γ⁻¹‖_F/‖Γ⁻¹‖_F), and its loss never rises on the way "
        f"(above rounding, {FLOW_ROUNDING:g} relative) (every seed's initialisation)",
        measured,
        f"end distance ≤ {tol:g}, no rise, every seed",
        {
            "converges to Γ⁻¹": all(m["end distance"] <= tol for m in measured.values()),
            "loss never rises": all(m["largest rise"] <= FLOW_ROUNDING for m in measured.values()),
        },
        about=C.paper(SOURCES["flow"], subject="theory"),
        figure="flow",
    )


def _checks(config: dict) -> None:
    """Every task must build before anything trains."""
    _tasks(config)


def _tasks(config: dict) -> dict:
    """The task of every covariance setting."""
    return {
        name: linear_regression_from_config({**config["task"], "cov": eigenvalues})
        for name, eigenvalues in config["covariances"].items()
    }


def run(config: dict, ctx: RunContext):
    """Run both covariance settings, check the claims and draw the figures."""
    settings = []
    for name, task in _tasks(config).items():
        with ctx.part(name, claims=[f"*-{name}"]):
            settings.append(_setting(name, task, config, ctx))
    _figures(ctx, settings)
    return [claim for s in settings for claim in _claims(s, config)]


def _figures(ctx: RunContext, settings: list[Setting]):
    fig, axes = new_figure(len(settings))
    for ax, s in zip(axes, settings):
        training_curve(ax, ctx.history(setting=s.name), "trained LSA (mean, min–max over seeds)")
        ax.axhline(s.optimal_loss, color="k", ls="--", label=f"theory optimum {s.optimal_loss:.3f}")
        ax.axhline(s.gd_loss, color="C3", ls=":", label=f"best 1-step GD {s.gd_loss:.3f}")
        ax.set_yscale("log")
        ax.set_ylabel("training mse")
        ax.set_title(f"{s.name} Λ")
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("training_curves"))

    fig, axes = new_figure(len(settings), width=5.5)
    for ax, s in zip(axes, settings):
        learners = {k: v for k, v in s.losses.items() if isinstance(k, str)}
        trained = [s.losses[s.model, seed] for seed in s.trained]
        names, values = [*learners, "trained lsa"], [*learners.values(), sum(trained) / len(trained)]
        ax.barh(names, values, color=["C1" if n == "trained lsa" else "C0" for n in names])
        ax.axvline(s.optimal_loss, color="k", ls="--", label="theory optimum")
        ax.set_xlabel("query mse (fresh prompts)")
        ax.set_title(f"{s.name} Λ")
        ax.legend(fontsize=8)
    save(fig, ctx.folder.figure("learners"))

    fig, axes = new_figure(4, width=3.2, height=3.0, rows=len(settings))
    for row, s in enumerate(settings):
        w_kq, w_pv = (w.detach().cpu() for w in next(iter(s.trained.values())).layers[0].merged())
        # Rescale so that W_PV[y, y] = 1: the product W_PV·W_KQ, which fixes ŷ, is unchanged.
        scale = w_pv[-1, -1].item()
        panels = [
            (w_kq * scale, "trained W_KQ·W_PV[y,y]"),
            (w_pv / scale, "trained W_PV/W_PV[y,y]"),
            (s.target[0], "theory W_KQ (Γ⁻¹ block)"),
            (s.target[1], "theory W_PV"),
        ]
        for ax, (matrix, title) in zip(axes[4 * row : 4 * row + 4], panels):
            heatmap(ax, matrix.detach().cpu(), f"{s.name}: {title}")
    save(fig, ctx.folder.figure("weights"))

    fig, axes = new_figure(len(settings))
    for ax, s in zip(axes, settings):
        for seed, f in s.flows.items():
            ax.plot(f.steps, [value - s.optimal_loss for value in f.loss], label=f"loss − optimum, seed {seed}")
            ax.plot(f.steps, f.distance, ls=":", label=f"distance to Γ⁻¹, seed {seed}")
        ax.set_yscale("log")
        ax.set(xlabel="step", title=f"{s.name} Λ: gradient flow from the balanced init")
        ax.legend(fontsize=7)
    save(fig, ctx.folder.figure("flow"))


EXPERIMENT = Experiment(
    continuable=True,
    name="lsa-linear",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    claims_version=4,
    timing={"eval_prompts": 1000},  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
