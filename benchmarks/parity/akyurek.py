"""Parity of ``algorithm-selection`` with Akyürek et al.'s own code (``google-research/google-research``, folder
``incontext``; JAX and Flax).

    python benchmarks/parity/akyurek.py --peer PATH/incontext --python JAX_PYTHON

Their ``main.py`` trains their transformer (``akyurek_peer.py``, in a JAX venv of its own) at algorithm-selection's
quick sizes as their flags state them: d = 4, N = 8, width 32, 2 heads, depth 1, 2, 4 and 8, batch 128, lr 1e-3 with
their cosine schedule (warm-up a fifth of the steps) and their Adam (β₂ 0.98, ε 1e-9), 3000 steps, no curriculum
(their code has none). iclab's side is ``iclab run algorithm-selection`` at quick with the same values
(``curriculum=null``, ``train.warmup=600``, ``train.betas``, ``train.eps``). Each side's models predict the same
4000 prompts, and iclab's code measures both against the same learners (algorithm-selection's quick panel): the
numbers ``a-matches-ols``, ``a-knn-least-similar``, ``c-one-layer-gd`` and ``c-eight-plus-layers-ols`` read, by SPD/d
(ILWD needs the model inside the measuring process: iclab's side alone has it).
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import torch
from harness import Comparison, arguments, measure, run_iclab, run_peer

from iclab import api, load_model
from iclab.experiments.algorithm_selection import _knn_margin, _reference_learners
from iclab.metrics import mspd, prefix_predictions, spd
from iclab.rng import generator
from iclab.tasks import linear_regression_from_config

HERE = Path(__file__).resolve().parent
RECIPE = {"d": 4, "points": 8, "width": 32, "heads": 2, "batch_size": 128, "lr": 1e-3, "steps": 3000}
DEPTHS = (1, 2, 4, 8)
PROMPTS = 4000


def _episode(seed: int):
    task = linear_regression_from_config({"d": RECIPE["d"], "n_context": RECIPE["points"]})
    return task.sample(PROMPTS, generator(seed, "parity-eval")).to(dtype=torch.float64)


def quantities(predictions: torch.Tensor, seed: int) -> dict[str, float]:
    """The numbers the claims read, from a model's predictions ``(B, N)`` of the ``(seed, "parity-eval")`` prompts,
    against algorithm-selection's quick learners: SPD/d to OLS over k ≥ 1 (its mean, and the share of k below
    0.01), the margins by which one-step GD, ridge and OLS are the closest learners by MSPD, and the k-NN margin."""
    d = RECIPE["d"]
    config = api.resolved_config("algorithm-selection", "quick")
    references = _reference_learners(config)
    episode = _episode(seed)
    bands = {label: spd(predictions, prefix_predictions(l, episode), d, 10) for label, (_, l) in references.items()}
    families = {label: family for label, (family, _) in references.items()}
    table = {label: mspd(band["mean"], d) for label, band in bands.items()}
    closest = lambda family: min(v for label, v in table.items() if families[label] == family)
    other = lambda family: min(v for label, v in table.items() if families[label] != family)
    to_ols = bands["ols"]["mean"][1:]
    return {
        "spd_ols": to_ols.mean().item(),
        "share_below": (to_ols < 0.01).double().mean().item(),
        "gd_margin": other("gd") - closest("gd"),
        "ridge_margin": other("ridge") - closest("ridge"),
        "ols_margin": other("ols") - closest("ols"),
        "mspd_ols": table["ols"],
        "knn_margin": _knn_margin(bands, families, d)[0],
    }


def _authors(args, depth: int, cache: dict, quantity: str, seed: int) -> float:
    key = ("authors", depth, seed)
    if key not in cache:
        folder = Path(tempfile.mkdtemp(prefix="parity-akyurek-"))
        episode = _episode(seed)
        np.savez(folder / "prompts.npz", xs=episode.xs.numpy(), ys=episode.ys.numpy())
        r = RECIPE
        flags = [
            *(f"--x_dim={r['d']}", f"--num_exemplars={r['points']}", f"--n_layers={depth}"),
            *(f"--hidden_size={r['width']}", f"--n_heads={r['heads']}", f"--batch_size={r['batch_size']}"),
            *(f"--learning_rate={r['lr']}", f"--n_epochs={r['steps'] // 100}", "--n_iter_per_epoch=100"),
            *(f"--seed={seed}", f"--exp_folder={folder / 'exp'}"),
        ]
        options = ["--prompts", str(folder / "prompts.npz"), "--predictions", str(folder / "predictions.npy")]
        run_peer(args, HERE / "akyurek_peer.py", [*options, *flags])
        cache[key] = quantities(torch.from_numpy(np.load(folder / "predictions.npy")).double(), seed)
    return cache[key][quantity]


def _iclab(args, depth: int, cache: dict, quantity: str, seeds) -> list[float]:
    key = ("iclab", tuple(seeds))
    if key not in cache:
        overrides = [
            "curriculum=null",
            f"train.warmup={RECIPE['steps'] // 5}",
            "train.betas=[0.9, 0.98]",
            "train.eps=1e-9",
            f"depths={list(DEPTHS)}",
            "noise=[[0.0, 1.0], [0.5, 1.0]]",  # its noise part is not read here
            "eval_prompts=500",
            "bootstrap=10",
        ]
        folder = run_iclab("algorithm-selection", overrides, seeds, args.threads)
        found = {}
        for seed in seeds:
            for depth_ in DEPTHS:
                model = load_model(folder.path, f"gpt-d{RECIPE['d']}-L{depth_}-sigma0-tau1", seed).model
                found[depth_, seed] = quantities(prefix_predictions(model, _episode(seed)), seed)
        cache[key] = found
    return [cache[key][depth, seed][quantity] for seed in seeds]


def comparisons(args) -> list[Comparison]:
    cache: dict = {}

    def c(quantity, description, claims, depth, what, **record):
        return Comparison(
            quantity,
            description,
            claims,
            {**RECIPE, "n_layers": depth, "schedule": "cosine, warm-up steps/5", "betas": [0.9, 0.98], "eps": 1e-9},
            authors=partial(_authors, args, depth, cache, what),
            iclab=partial(_iclab, args, depth, cache, what),
            authors_note="their main.py (akyurek_peer.py's shims); its predictions measured by iclab's code",
            iclab_note="iclab run algorithm-selection at quick with the recipe's values, no curriculum",
            **record,
        )

    return [
        c(
            "ols-spd-share-L4",
            "4 layers: the share of prefixes 1 ≤ k < N with SPD/d to OLS below 0.01",
            ["a-matches-ols"],
            4,
            "share_below",
            test={"op": ">=", "threshold": 0.8},
            paper="SPD/d and ILWD < 0.01 for almost any k (d = 8, 16 layers of width 512)",
        ),
        c(
            "ols-spd-mean-L4",
            "4 layers: SPD/d to OLS, mean over 1 ≤ k < N",
            ["a-matches-ols"],
            4,
            "spd_ols",
            paper="< 0.01",
        ),
        c(
            "knn-margin-L4",
            "4 layers: how much farther the nearer k-NN learner is than the farthest other (SPD/d "
            "over Fig 1's prefixes)",
            ["a-knn-least-similar"],
            4,
            "knn_margin",
            test={"op": ">", "threshold": 0.0},
            paper="the k-NN learners are the least similar",
        ),
        c(
            "gd-margin-L1",
            "1 layer: MSPD of the nearest non-GD learner minus the nearest one-step GD's",
            ["c-one-layer-gd"],
            1,
            "gd_margin",
            test={"op": ">", "threshold": 0.0},
            paper="closest: one-step GD",
        ),
        c(
            "ols-margin-L8",
            "8 layers: MSPD of the nearest non-OLS learner minus OLS's",
            ["c-eight-plus-layers-ols"],
            8,
            "ols_margin",
            test={"op": ">", "threshold": 0.0},
            paper="closest: OLS",
        ),
        *(
            c(
                f"ridge-margin-L{depth}",
                f"{depth} layers: MSPD of the nearest non-ridge learner minus the nearest ridge's (a positive control)",
                ["c-two-to-four-layers-ridge"],
                depth,
                "ridge_margin",
                control=True,
                test={"op": ">", "threshold": 0.0},
                paper="closest at 2–4 layers: ridge",
            )
            for depth in (4, 2)
        ),
        c(
            "ols-mspd-L8",
            "8 layers: MSPD to OLS",
            ["c-eight-plus-layers-ols"],
            8,
            "mspd_ols",
            test={"op": "<", "threshold": 0.01},
            paper="matches OLS",
        ),
    ]


if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0])
    peer = {"repository": "google-research/google-research", "commit": args.peer_commit, "code": "incontext/"}
    measure(args, "algorithm-selection", peer, comparisons(args))
