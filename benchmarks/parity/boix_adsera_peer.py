"""Boix-Adserà et al.'s own model on their own data, trained by the loop their paper states (run in the peer's
environment by ``boix_adsera.py``; never imported by iclab).

Their repository (``eboix/relational-reasoning``) holds the model (``experiments/models.py``) and the data generator
(``experiments/dataset_utils.py``) unmodified; its experiment notebook, which holds their training loop, does not come
with a fetched copy. So the loop here is the one the paper states (docs/papers.md §6): one fixed set of n samples over
an n-symbol training alphabet, Adam at lr 1e-3, minibatches of 1024 (full batch for n ≤ 1024), shuffled as their
``make_dataloaders`` does, the mean squared error on the ±1 labels (cross-entropy on copying's symbolic labels),
for ``--epochs`` epochs. Every ``--eval-every`` epochs (and at the last) it records the validation and test loss
(their unseen alphabets), and writes one JSON: the curves, the test loss at the recorded epoch of lowest validation
loss (iclab's reading), at the last epoch and the lowest over training.

The one shim: their ``models.py`` imports ``torchvision``, which it never uses and whose PyPI wheel does not load
beside the CPU build of torch here; an empty module stands in for it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TEMPLATES = {
    # iclab's task name -> (templates over the wildcards, labels, label type)
    "aba-abb": (["aba", "abb"], [1.0, -1.0], "regression"),
    "same-different": (["aa", "ab"], [1.0, -1.0], "regression"),
    "aabb-abab": (["aabb", "abab"], [1.0, -1.0], "regression"),
    "copy": (["a"], ["a"], "multiclass"),
}


def _their_modules(peer: Path):
    """Their ``models`` and ``dataset_utils`` modules, imported from the peer's ``experiments/`` folder."""
    sys.modules.setdefault("torchvision", types.ModuleType("torchvision"))  # imported, never used (module docstring)
    sys.path.insert(0, str(peer / "experiments"))
    import dataset_utils
    import models

    return models, dataset_utils


def _seed(seed: int) -> None:
    """Every generator their code draws from: Python's (``random.sample``), numpy's (the template counts) and
    torch's (the initialisation and the loader's shuffle), as their ``utils.set_seed`` does."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="a checkout of eboix/relational-reasoning")
    parser.add_argument("--task", choices=sorted(TEMPLATES), default="aba-abb")
    parser.add_argument("--n", type=int, required=True, help="training samples = training-alphabet size")
    parser.add_argument("--model", choices=["transformer", "transformer+kq", "transformer+vo", "transformer+kq+vo"])
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--mlp-dim", type=int, default=512)
    parser.add_argument("--multiplier", type=float, default=1.0, help="their wkwq_id_mult and wvwo_id_mult")
    parser.add_argument("--readout", choices=["cls", "final"], default="cls", help="copying: CLS or the last token")
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--alphabet", type=int, default=100, help="validation and test alphabets' size")
    parser.add_argument("--eval-samples", type=int, default=500, help="validation and test samples")
    parser.add_argument("--eval-every", type=int, default=10, help="epochs between held-out losses (and the last)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    models, dataset_utils = _their_modules(args.peer)
    _seed(args.seed)
    templates, labels, label_type = TEMPLATES[args.task]
    data = dataset_utils.GeneratingDatasetFromTemplateList(
        template_list=templates,
        template_probs=[1 / len(templates)] * len(templates),
        template_labels=labels,
        wildcard_alphabet=list("ab"),
        label_type=label_type,
        train_substitution_alphabet_size=args.n,
        val_substitution_alphabet_size=args.alphabet,
        test_substitution_alphabet_size=args.alphabet,
        num_train_samples=args.n,
        num_val_samples=args.eval_samples,
        num_test_samples=args.eval_samples,
    )
    train_set, val_set, test_set = data.generate_setup()
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    terms = dict(
        trainable_wkwq_identity="+kq" in (args.model or ""),
        wkwq_id_mult=args.multiplier,
        trainable_wvwo_identity="+vo" in (args.model or ""),
        wvwo_id_mult=args.multiplier,
    )
    shape = dict(dim=args.width, depth=args.depth, heads=args.heads, dim_head=args.head_dim, mlp_dim=args.mlp_dim)
    length = len(templates[0])
    if label_type == "multiclass":
        model = models.TemplateMatchingTransformer_TiedEmbeddingUnembedding(
            context_length=length + (args.readout == "cls"),
            num_token_types=data.vocab_size,
            num_classes=data.vocab_size,
            pool=args.readout,
            **shape,
            **terms,
        )
        loss_of = lambda out, y: F.cross_entropy(out, y.long())
        metric_of = lambda out, y: (out.argmax(-1) != y).float().mean()
    else:
        model = models.TemplateMatchingTransformer(
            context_length=length, num_token_types=data.vocab_size, num_classes=1, **shape, **terms
        )
        loss_of = metric_of = lambda out, y: F.mse_loss(out[:, 0], y.float())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    def held_out(dataset) -> float:
        x, y = (torch.as_tensor(v) for v in (dataset.contexts, dataset.labels))
        with torch.no_grad():
            return metric_of(model(x.long()), y).item()

    curves = {"epoch": [], "validation": [], "test": [], "train": []}
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_of(model(x.long()), y)
            loss.backward()
            optimizer.step()
        if epoch % args.eval_every and epoch != args.epochs:
            continue
        model.eval()
        curves["epoch"].append(epoch)
        curves["train"].append(loss.item())
        curves["validation"].append(held_out(val_set))
        curves["test"].append(held_out(test_set))
    seconds = time.perf_counter() - start
    validation = np.asarray(curves["validation"])
    best = int(np.flatnonzero(validation == validation.min())[-1])  # the latest epoch of lowest validation loss
    result = {
        "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "test_at_best_validation": curves["test"][best],
        "best_epoch": curves["epoch"][best],
        "test_last": curves["test"][-1],
        "test_min": min(curves["test"]),
        "train_last": curves["train"][-1],
        "seconds": seconds,
        "curves": curves,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
