"""Parity of ``abstract-symbols`` with Boix-Adserà et al.'s own code (``eboix/relational-reasoning``).

    python benchmarks/parity/boix_adsera.py --peer PATH --python PEER_PYTHON [--only QUANTITY ...]

Their model and data generator run unmodified (``boix_adsera_peer.py``, in the peer's Python: torch and einops);
their training loop is in the experiment notebook, which a fetched copy lacks, so their side trains by the loop the
paper states (Adam, lr 1e-3, batch 1024, full batch for n ≤ 1024, the given epochs) and reads the test loss as iclab
does, at the logged epoch of lowest validation loss, every 10 epochs. iclab's side is the experiment itself, its
quick scale with the comparison's changes (``iclab run abstract-symbols --set ...``), read from its metrics.

The recipes: iclab's quick recipe (2 layers, width 256, 8 heads of 64, MLP 4 × width, 150 epochs, the identity
terms' multiplier 10, which their code takes as ``wkwq_id_mult`` and ``wvwo_id_mult``), the authors' multiplier 1
for the terms, and the paper's 1000 epochs at width 128. Each comparison is one model, task and n.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from harness import Comparison, arguments, measure, run_iclab, run_peer

HERE = Path(__file__).resolve().parent
QUICK = {"width": 256, "heads": 8, "head_dim": 64, "mlp_ratio": 4, "epochs": 150, "multiplier": 10.0}
"""iclab's quick recipe for the sweep's transformers (iclab/experiments/abstract_symbols.py DEFAULTS)."""
COPY_QUICK = {"width": 256, "heads": 4, "head_dim": 64, "mlp_ratio": 4, "epochs": 150, "multiplier": 300.0}
"""iclab's quick recipe for copying (its ``copying`` block), read at a CLS token."""


def _authors(args, task: str, model: str, n: int, shape: dict, seed: int, readout: str = "cls") -> float:
    options = [
        *("--task", task, "--model", model, "--n", str(n), "--seed", str(seed), "--readout", readout),
        *("--width", str(shape["width"]), "--heads", str(shape["heads"]), "--head-dim", str(shape["head_dim"])),
        *("--mlp-dim", str(shape["mlp_ratio"] * shape["width"]), "--epochs", str(shape["epochs"])),
        *("--multiplier", str(shape["multiplier"])),
    ]
    return run_peer(args, HERE / "boix_adsera_peer.py", options)["test_at_best_validation"]


def _iclab(args, task: str, model: str, n: int, shape: dict, seeds) -> list[float]:
    """The experiment with one model of its sweep (or of copying) at one n."""
    none = ["sweep.points={}", "kernel.tasks=[]"]
    if task == "copy":
        overrides = [
            *none,
            "sweep.tasks=[]",
            f"copying.widths=[{shape['width']}]",
            f"copying.n=[{n}]",
            f"copying.models=[{model}]",
            f"copying.n_heads={shape['heads']}",
            f"copying.head_dim={shape['head_dim']}",
            f"copying.epochs={shape['epochs']}",
            f"copying.identity_scale={shape['multiplier']}",
        ]
        setting, metric = f"copy-w{shape['width']}", "test_error"
    else:
        overrides = [
            *none,
            f"sweep.tasks=[{task}]",
            f"sweep.models=[{model}]",
            f"sweep.n=[{n}]",
            "sweep.plain_n=[]",
            "copying.widths=[]",
            f"transformer.width={shape['width']}",
            f"transformer.n_heads={shape['heads']}",
            f"transformer.head_dim={shape['head_dim']}",
            f"transformer.mlp_ratio={shape['mlp_ratio']}",
            f"transformer.identity_scale={shape['multiplier']}",
            f"train.epochs={shape['epochs']}",
        ]
        setting, metric = task, "test_mse"
    folder = run_iclab("abstract-symbols", overrides, seeds, args.threads)
    rows = folder.read_metrics()
    rows = rows[(rows.setting == setting) & (rows.model == model) & (rows.n == n) & (rows.metric == metric)]
    return [float(rows[rows.seed == seed].value.iloc[0]) for seed in seeds]


def _comparison(args, quantity, description, claims, task, model, n, shape, **record) -> Comparison:
    return Comparison(
        quantity,
        description,
        claims,
        {"task": task, "model": model, "n": n, **shape, "batch_size": 1024, "lr": 1e-3, "optimizer": "adam"},
        authors=partial(_authors, args, task, model, n, shape),
        iclab=partial(_iclab, args, task, model, n, shape),
        authors_note="their models.py and dataset_utils.py unmodified; the loop the paper states (boix_adsera_peer.py)",
        iclab_note="iclab run abstract-symbols at quick with the recipe's changes",
        **record,
    )


def comparisons(args) -> list[Comparison]:
    authors_terms = {**QUICK, "multiplier": 1.0}
    paper = {**QUICK, "width": 128, "epochs": 1000, "multiplier": 1.0}
    mse = "test MSE on unseen symbols at the lowest validation loss"
    below = lambda level: {"op": "<", "threshold": level}
    at_most = lambda level: {"op": "<=", "threshold": level}
    at_least = lambda level: {"op": ">=", "threshold": level}
    c = partial(_comparison, args)
    return [
        c(
            "aba-abb-plain-n1024",
            f"ABA vs ABB, plain transformer, n = 1024: {mse}",
            ["aba-abb-plain-needs-1024"],
            "aba-abb",
            "transformer",
            1024,
            QUICK,
            test=below(0.2),
            paper="0.13 at n = 1024 (§5 figure)",
        ),
        c(
            "aba-abb-plain-n1024-paper",
            f"ABA vs ABB, plain transformer, n = 1024, width 128, 1000 epochs: {mse}",
            ["aba-abb-plain-needs-1024"],
            "aba-abb",
            "transformer",
            1024,
            paper,
            test=below(0.2),
            paper="0.20 at width 128 and lr 1e-3 (their width figure), 0.13 on the main curve",
        ),
        c(
            "same-different-plain-n1024",
            f"same/different, plain transformer, n = 1024: {mse}",
            ["same-different-plain-needs-1024"],
            "same-different",
            "transformer",
            1024,
            QUICK,
            test=below(0.2),
            paper="0.18 at n = 1024",
        ),
        c(
            "same-different-kq-vo-n32",
            f"same/different, transformer+kq+vo, n = 32: {mse}",
            ["same-different-kq-vo-learns-between-32-and-64"],
            "same-different",
            "transformer+kq+vo",
            32,
            QUICK,
            test={"op": ">", "threshold": 0.1},
            paper="0.19 at n = 32",
        ),
        c(
            "same-different-kq-vo-n64",
            f"same/different, transformer+kq+vo, n = 64: {mse}",
            ["same-different-kq-vo-learns-between-32-and-64"],
            "same-different",
            "transformer+kq+vo",
            64,
            QUICK,
            test=at_most(0.1),
            paper="0.025 at n = 64",
        ),
        c(
            "aba-abb-kq-n64",
            f"ABA vs ABB, transformer+kq, n = 64 (a positive control): {mse}",
            ["aba-abb-kq-by-64"],
            "aba-abb",
            "transformer+kq",
            64,
            QUICK,
            control=True,
            test=at_most(0.1),
            paper="0.04 at n = 64",
        ),
        c(
            "aba-abb-plain-n64",
            f"ABA vs ABB, plain transformer, n = 64 (a positive control): {mse}",
            ["aba-abb-kq-by-64"],
            "aba-abb",
            "transformer",
            64,
            QUICK,
            control=True,
            test=at_least(0.8),
            paper="1.00 at n = 64",
        ),
        c(
            "aba-abb-kq-n64-multiplier-1",
            f"ABA vs ABB, transformer+kq, n = 64, the terms' multiplier 1: {mse}",
            ["aba-abb-kq-by-64"],
            "aba-abb",
            "transformer+kq",
            64,
            authors_terms,
            test=at_most(0.1),
            paper="0.04 at n = 64",
            notes=["the authors' default multiplier (1.0); iclab's quick recipe has 10"],
        ),
        c(
            "same-different-kq-vo-n32-multiplier-1",
            f"same/different, transformer+kq+vo, n = 32, the terms' multiplier 1: {mse}",
            ["same-different-kq-vo-learns-between-32-and-64"],
            "same-different",
            "transformer+kq+vo",
            32,
            authors_terms,
            test={"op": ">", "threshold": 0.1},
            paper="0.19 at n = 32",
            notes=["the authors' default multiplier (1.0); iclab's quick recipe has 10"],
        ),
        c(
            "same-different-kq-vo-n64-multiplier-1",
            f"same/different, transformer+kq+vo, n = 64, the terms' multiplier 1: {mse}",
            ["same-different-kq-vo-learns-between-32-and-64"],
            "same-different",
            "transformer+kq+vo",
            64,
            authors_terms,
            test=at_most(0.1),
            paper="0.025 at n = 64",
            notes=["the authors' default multiplier (1.0); iclab's quick recipe has 10"],
        ),
        c(
            "copy-plain-w256-n16",
            "copying, plain transformer, width 256, n = 16: test 0-1 error on unseen symbols",
            ["copy-plain-inverse-scaling"],
            "copy",
            "transformer",
            16,
            COPY_QUICK,
            test={"op": ">", "threshold": 0.05},
            paper="the first n with error ≤ 0.05 at width 256 is 128",
        ),
        c(
            "copy-plain-w64-n16",
            "copying, plain transformer, width 64, n = 16: test 0-1 error on unseen symbols",
            ["copy-plain-inverse-scaling"],
            "copy",
            "transformer",
            16,
            {**COPY_QUICK, "width": 64},
            test={"op": ">", "threshold": 0.05},
            paper="the first n with error ≤ 0.05 at width 64 is 64",
        ),
        c(
            "copy-plain-w64-n256",
            "copying, plain transformer, width 64, n = 256: test 0-1 error on unseen symbols",
            ["copy-plain-inverse-scaling"],
            "copy",
            "transformer",
            256,
            {**COPY_QUICK, "width": 64},
            test={"op": "<=", "threshold": 0.05},
            paper="copies (error ≤ 0.05) from n = 64 at width 64",
        ),
    ]


if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0])
    peer = {
        "repository": "eboix/relational-reasoning",
        "commit": args.peer_commit,
        "code": "experiments/models.py, experiments/dataset_utils.py",
    }
    measure(args, "abstract-symbols", peer, comparisons(args))
