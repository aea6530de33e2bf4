"""Why iclab's gpt-linear and Garg et al.'s code part at the same recipe (docs/parity.md, gpt-linear): one thing
changed at a time, each variant trained by iclab's own loop on gpt-linear's prompts at the parity recipe and measured
as ``garg.py`` measures (``garg.linear_quantities``).

    python benchmarks/parity/garg_diagnosis.py --variants iclab garg-init garg-io --seeds 0 1 2

Variants (each the model iclab trains, started from other weights):

- ``iclab``: iclab's initialisation before the parity (``gpt2``: every weight N(0, 0.02²), the read-in and read-out
  too) and the exact GELU;
- ``garg-init``: the weights Garg et al.'s ``TransformerModel`` starts from (Hugging Face's GPT-2 initialisation of
  the backbone, PyTorch's default ``nn.Linear`` for their read-in and read-out), converted by
  ``iclab.models.convert.from_garg`` (the same function: their y coordinate becomes iclab's last);
- ``garg-io``: iclab's initialisation with the read-in and read-out alone as PyTorch's default ``nn.Linear``;
- ``gelu-tanh``: iclab's initialisation and GPT-2's tanh GELU (theirs) instead of the exact one.

Writes one JSON line per (variant, seed) to standard output and, with ``--out``, to a file.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import torch
from garg import GARG, linear_quantities
from torch import nn

from iclab.models import GPTTransformer
from iclab.models.convert import from_garg, garg_config
from iclab.prompts import InterleavedFormat
from iclab.tasks import linear_regression_from_config
from iclab.train import TrainConfig, data_source, train


def _garg_initial_state(seed: int) -> dict[str, torch.Tensor]:
    """The state dict Garg et al.'s model starts from: their three parts, named as theirs, built in their order."""
    from transformers import GPT2Config, GPT2Model

    d, n, width = GARG["d"], GARG["points"], GARG["width"]
    torch.manual_seed(seed)
    parts = nn.Module()
    parts._read_in = nn.Linear(d, width)
    config = GPT2Config(
        n_positions=2 * n, n_embd=width, n_layer=GARG["layers"], n_head=GARG["heads"],
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
    )  # fmt: skip
    parts._backbone = GPT2Model(config)
    parts._read_out = nn.Linear(width, 1)
    return parts.state_dict()


def _linear_default_(layer: nn.Linear, generator: torch.Generator) -> None:
    """PyTorch's default ``nn.Linear`` initialisation: weight and bias uniform on ±1/√fan_in."""
    bound = 1 / math.sqrt(layer.in_features)
    with torch.no_grad():
        for p in (layer.weight, layer.bias):
            p.uniform_(-bound, bound, generator=generator)


def start(variant: str, seed: int) -> GPTTransformer:
    """The model a variant starts from."""
    config = garg_config(GARG["d"], GARG["points"], GARG["width"], GARG["layers"], GARG["heads"])
    # iclab's gpt-linear before the parity: the gpt2 initialisation throughout and the exact GELU
    config = replace(config, init="gpt2", activation="gelu-tanh" if variant == "gelu-tanh" else "gelu")
    if variant == "garg-init":
        model = GPTTransformer(garg_config(GARG["d"], GARG["points"], GARG["width"], GARG["layers"], GARG["heads"]))
        model.load_state_dict(from_garg(_garg_initial_state(seed), model.config))
        return model
    g = torch.Generator().manual_seed(seed)
    model = GPTTransformer(config, g)
    if variant == "garg-io":
        _linear_default_(model.read_in, g)
        _linear_default_(model.read_out, g)
    elif variant not in ("iclab", "gelu-tanh"):
        raise SystemExit(f"unknown variant {variant!r}")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["iclab", "garg-init", "garg-io", "gelu-tanh"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=GARG["steps"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = linear_regression_from_config({"d": GARG["d"], "n_context": GARG["points"]})
    block = TrainConfig(steps=args.steps, batch_size=GARG["batch_size"], lr=GARG["lr"], log_every=500)
    for variant in args.variants:
        for seed in args.seeds:
            began = time.perf_counter()
            first = start(variant, seed)
            trained = train(
                lambda g: start(variant, seed), data_source(task, InterleavedFormat()), block, [seed],
                init=[first], progress=False,
            )  # fmt: skip
            row = {
                "variant": variant,
                "seed": seed,
                "steps": args.steps,
                **linear_quantities(trained.models[0], GARG["d"], GARG["points"], seed),
                "seconds": round(time.perf_counter() - began, 1),
            }
            print(json.dumps(row), flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
