"""GPU throughput of the paper-scale gpt-linear model against a Garg et al.-style loop (issue #19, item 2).

Run from the repository root on a machine with a GPU:
``python benchmarks/gpu_throughput.py [--device cuda] [--steps 50] [--max-seeds 64]``.
Prints a table and writes the key ``"gpu_throughput"`` of ``benchmarks/results.json`` (other keys kept).

Configuration: gpt-linear at paper scale (12 layers, width 256, 8 heads, d = 20, 41 examples,
batch 64, Adam), trained through :func:`iclab.train.train`.

Rows:
  - one seed, SDPA attention, in each ``train.precision`` (fp32, tf32, bf16);
  - the reference: a ``GPT2Model`` loop on the same configuration and device, fp32 (needs
    Hugging Face ``transformers``; see ``train_throughput.garg_steps_per_second``); the ratio
    of each row to it is ``vs_garg`` (target ≥ 3), written only when the reference was timed;
  - seeds trained at once under ``torch.func.vmap`` (``math`` attention, which vmap can batch),
    1, 2, 4, … seeds in the fastest precision: steps/s of the group, and the first seed count at
    which it falls to half of one seed's (``seeds_at_half_rate``), i.e. how many seeds train at
    once for at most twice the time of one.

Every rate is the best of two windows of ``--steps`` steps after a warm-up window. ``--device cpu
--small`` runs the same code on a tiny configuration, as a smoke test without a GPU.
"""

from __future__ import annotations

import argparse

import torch
from train_throughput import (
    garg_steps_per_second,
    ratio_text,
    steps_per_second,
    store_result,
    transformers_installed,
    with_reference,
)

from iclab.models.transformer import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat
from iclab.tasks import GaussianInputs, LinearRegression

PAPER = {"d": 20, "points": 41, "layers": 12, "width": 256, "heads": 8, "batch": 64}
SMALL = {"d": 3, "points": 6, "layers": 1, "width": 16, "heads": 2, "batch": 8}


def main(device: str = "cuda", steps: int = 50, max_seeds: int = 64, small: bool = False) -> dict:
    """Measure every row, print the table and update ``results.json``."""
    c = SMALL if small else PAPER
    task = LinearRegression(GaussianInputs(c["d"]), n_context=c["points"])

    def rate(attention: str, precision: str = "fp32", seeds: int = 1) -> float:
        config = GPTConfig(
            c["d"] + 1, c["layers"], c["heads"], c["width"], max_tokens=2 * c["points"], attention=attention
        )

        def make(g):
            return GPTTransformer(config, g)

        return steps_per_second(
            make, task, InterleavedFormat(), c["batch"], steps, device=device, precision=precision, seeds=seeds
        )

    rows = {f"iclab_{precision}": {"steps_per_s": rate("sdpa", precision)} for precision in ("fp32", "tf32", "bf16")}
    garg = None  # no ratio without the reference timed here
    if transformers_installed():
        garg = garg_steps_per_second(
            c["d"], c["points"], c["width"], c["layers"], c["heads"], c["batch"], steps, device
        )
    with_reference(rows, garg)
    best = max(rows, key=lambda name: rows[name]["steps_per_s"]).removeprefix("iclab_")
    stacked, seeds, half = {}, 1, None
    while seeds <= max_seeds and half is None:
        stacked[seeds] = rate("math", best, seeds)
        if stacked[seeds] <= stacked[1] / 2:
            half = seeds
        seeds *= 2
    result = {
        "device": torch.cuda.get_device_name() if torch.device(device).type == "cuda" else device,
        "config": c,
        "steps": steps,
        **rows,
        **({"garg_reference_steps_per_s": garg} if garg else {}),
        "garg_reference_note": "a GPT2Model loop on the same configuration and device, fp32"
        if garg
        else "not measured: transformers is not installed",
        "vmap_precision": best,
        "vmap_steps_per_s": stacked,
        "seeds_at_half_rate": half,
        "targets": {"vs_garg": ">= 3"},
    }
    print(f"{result['device']}: {c}")
    for name, row in rows.items():
        print(f"{name:<14}{row['steps_per_s']:>10.1f} steps/s  x Garg: {ratio_text(row)}")
    print(
        f"{'garg (fp32)':<14}"
        + (f"{garg:>10.1f} steps/s" if garg else " reference not measured (transformers is not installed)")
    )
    for seeds, value in stacked.items():
        print(f"{seeds:>3} seeds ({best}, vmap){value:>10.1f} steps/s")
    print(f"steps/s halves at {half} seeds" if half else f"steps/s above half up to {max(stacked)} seeds")
    store_result("gpu_throughput", result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--max-seeds", type=int, default=64)
    parser.add_argument("--small", action="store_true", help="a tiny configuration (a smoke test, e.g. on a CPU)")
    args = parser.parse_args()
    main(args.device, args.steps, args.max_seeds, args.small)
