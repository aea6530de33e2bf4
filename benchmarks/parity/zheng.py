"""Parity of ``mesa-ar`` with Zheng et al.'s own code (``ML-GSAI/MesaOpt-AR-Transformer``).

    python benchmarks/parity/zheng.py --peer PATH --python PEER_PYTHON [--only QUANTITY ...]

Their ``main_train_ar.py`` runs unmodified (``zheng_peer.py``): the full one-layer complex linear attention from the
diagonal initialisation (a₀, b₀) = (0.1, 0.1) (their script's example), full-batch plain gradient descent at a
constant step on m fixed sequences. iclab's side is ``iclab run mesa-ar`` at quick with that start, init and m: at
(0.1, 0.1) its warm-up is one step, so both run the same constant step, iclab's own
(:func:`iclab.theory.diagonal_learning_rate`), which their command line takes as ``--lr``. Both sides' trained
weights are then measured by the same iclab code on the same test sequences: the full model's ab (mean_j Re a_j b_j
of the diagonal blocks, what ``full-ab-star-*`` reads) and its diagonal part's prediction/truth at the last step
(``not-recovered-*``), and, beside them, their own evaluation's numbers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import torch
from harness import Comparison, arguments, measure, run_iclab, run_peer

from iclab.experiments.mesa_ar import _ratio_over_time
from iclab.models import CausalLinearAttention
from iclab.prompts import AutoregressiveFormat
from iclab.rng import generator
from iclab.tasks import AutoregressiveSequences, StartDistribution
from iclab.theory import diagonal_learning_rate, product_optimum

HERE = Path(__file__).resolve().parent
RECIPE = {"d": 5, "length": 100, "train_size": 1000, "steps": 150, "a0": 0.1, "b0": 0.1, "lr_scale": 0.7}
"""mesa-ar's quick recipe (m = 1000 sequences, 150 full-batch steps, lr_scale 0.7) from their script's init."""
TEST_SEQUENCES = 2000  # mesa-ar's quick test_size
ISOTROPIC = {"gaussian": 1, "sparse": 2}  # their --isotropic codes for the starts


def _task(kind: str, scale: float) -> AutoregressiveSequences:
    return AutoregressiveSequences(RECIPE["d"], RECIPE["length"], StartDistribution(kind, scale))


def _lr(kind: str, scale: float) -> float:
    lr, warmup = diagonal_learning_rate(product_optimum(_task(kind, scale)), RECIPE["a0"], RECIPE["b0"], 0.7)
    assert warmup == 1, "from (0.1, 0.1) iclab's step is constant: what their script runs"
    return lr


def quantities(model: CausalLinearAttention, kind: str, scale: float, seed: int) -> dict[str, float]:
    """ab and the diagonal part's last-step prediction/truth on the ``(seed, "parity-test")`` test sequences, and
    the full model's test loss relative to predicting 0."""
    sequences = _task(kind, scale).sample(TEST_SEQUENCES, generator(seed, "parity-test"))
    test = AutoregressiveFormat().encode(sequences)
    with torch.no_grad():
        full = model(test.tokens, test.n_context)
        part = model.diagonal_part()(test.tokens, test.n_context)
    targets = test.targets
    return {
        "ab": model.diagonal_product().mean().real.item(),
        "diagonal_ratio": _ratio_over_time(part, targets)[-1].item(),
        "relative_loss": (
            (full - targets).abs().pow(2).sum((1, 2)).mean() / targets.abs().pow(2).sum((1, 2)).mean()
        ).real.item(),
    }


def _authors(args, kind: str, scale: float, cache: dict, quantity: str, seed: int) -> float:
    key = ("authors", kind, scale, seed)
    if key not in cache:
        options = [
            *("--dim", str(RECIPE["d"]), "--T", str(RECIPE["length"]), "--m", str(RECIPE["train_size"])),
            *("--isotropic", str(ISOTROPIC[kind]), "--scale", str(scale), "--a", str(RECIPE["a0"])),
            *("--b", str(RECIPE["b0"]), "--lr", repr(_lr(kind, scale)), "--epochs", str(RECIPE["steps"])),
            *("--seed", str(seed)),
        ]
        found = run_peer(args, HERE / "zheng_peer.py", options)
        model = CausalLinearAttention(RECIPE["d"], a0=RECIPE["a0"], b0=RECIPE["b0"])
        with torch.no_grad():
            for name, theirs in (("w_kq", "WKQ"), ("w_pv", "WPV")):
                weight = torch.complex(*(torch.tensor(found[f"{theirs}_{p}"]) for p in ("real", "imag")))
                getattr(model, name).copy_(weight.to(getattr(model, name).dtype))
        cache[key] = {**quantities(model, kind, scale, seed), "their_ab": found["ab"], "their_ratio": found["gap"]}
    return cache[key][quantity]


def _iclab(args, kind: str, scale: float, cache: dict, quantity: str, seeds) -> list[float]:
    key = ("iclab", kind, scale, tuple(seeds))
    if key not in cache:
        only = "{" + ", ".join(f"{k}: {[scale] if k == kind else []}" for k in ("gaussian", "sparse", "ones")) + "}"
        overrides = [
            f"starts={only}",  # a mapping override merges into the default's: every start named
            f"full_model={only}",
            f"inits=[[{RECIPE['a0']}, {RECIPE['b0']}]]",
            f"size_sweep.init=[{RECIPE['a0']}, {RECIPE['b0']}]",
            "size_sweep.sizes=[]",
            f"train.train_size={RECIPE['train_size']}",
            f"train.steps={RECIPE['steps']}",
            "gradient.draws=400",  # its expected-gradient estimate is not read here
            "gradient.batches=4",
        ]
        folder = run_iclab("mesa-ar", overrides, seeds, args.threads)
        from iclab import load_model

        model = f"{kind}-{scale:g}-full-a{RECIPE['a0']:g}-b{RECIPE['b0']:g}"
        cache[key] = {s: quantities(load_model(folder.path, model, s).model, kind, scale, s) for s in seeds}
    return [cache[key][seed][quantity] for seed in seeds]


def comparisons(args) -> list[Comparison]:
    cache: dict = {}
    optimum = product_optimum(_task("gaussian", 1.0)).product

    def c(quantity, description, claims, kind, what, **record):
        return Comparison(
            quantity,
            description,
            claims,
            {**RECIPE, "start": kind, "scale": 1.0, "lr": _lr(kind, 1.0), "optimizer": "sgd", "test": TEST_SEQUENCES},
            authors=partial(_authors, args, kind, 1.0, cache, what),
            iclab=partial(_iclab, args, kind, 1.0, cache, what),
            authors_note="their main_train_ar.py unmodified (zheng_peer.py); measured by iclab's code",
            iclab_note="iclab run mesa-ar at quick with the recipe's start, init and m; the same measurement",
            **record,
        )

    return [
        c(
            "ab-gaussian-1",
            "Gaussian σ = 1: the full model's ab (mean_j Re a_j b_j)",
            ["full-ab-star-gaussian-1"],
            "gaussian",
            "ab",
            paper=f"ab* = {optimum:.4g} (the population optimum, T = 100)",
        ),
        c(
            "diagonal-ratio-gaussian-1",
            "Gaussian σ = 1: the diagonal part's prediction/truth at the last step",
            ["not-recovered-gaussian-1"],
            "gaussian",
            "diagonal_ratio",
            paper="→ 1/5 as T → ∞",
        ),
        c(
            "ab-sparse-1",
            "sparse c = 1: the full model's ab (a positive control)",
            ["full-ab-star-sparse-1"],
            "sparse",
            "ab",
            control=True,
            paper="ab* = 1/c² = 1",
        ),
        c(
            "relative-loss-sparse-1",
            "sparse c = 1: the full model's test loss over predicting 0 (a positive control)",
            ["recovered-sparse-1"],
            "sparse",
            "relative_loss",
            control=True,
            test={"op": "<=", "threshold": 1e-3},
            paper="→ 0 (recovered)",
        ),
    ]


if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0])
    peer = {"repository": "ML-GSAI/MesaOpt-AR-Transformer", "commit": args.peer_commit, "code": "main_train_ar.py"}
    measure(args, "mesa-ar", peer, comparisons(args))
