"""GPU throughput of the paper-scale gpt-linear model, eager and captured, against a Garg et al.-style loop
(issues #19 and #56).

Run from the repository root on a machine with a GPU:
``python benchmarks/gpu_throughput.py [--device cuda] [--steps 50]``.
Prints a table and writes the key ``"gpu_throughput"`` of ``benchmarks/results.json`` (other keys kept).

Configuration: gpt-linear at paper scale (12 layers, width 256, 8 heads, d = 20, 41 examples,
batch 64, Adam), trained through :func:`iclab.train.train`.

Rows (steps/s, and the fraction of the device's measured matmul rate in the row's precision that the
model's matmul FLOPs reach, ``train_throughput.transformer_flops``):
  - one seed, SDPA attention, eager, in each ``train.precision`` (fp32, tf32, bf16);
  - the same with ``train.capture`` (each step replayed as a CUDA graph), and its ratio to the eager row
    (target ≥ 5);
  - the reference: a ``GPT2Model`` loop on the same configuration and device, fp32 (needs Hugging Face
    ``transformers``; see ``train_throughput.garg_steps_per_second``); each row's ratio to it is ``vs_garg``;
  - 1, 2, 4 and 8 seeds stacked under ``torch.func.vmap`` (``math`` attention, which vmap batches), eager
    and captured, fp32 and tf32: steps/s of the group, and the captured 8 seeds' throughput (seeds ×
    steps/s) over one seed's (target ≥ 4).

Every rate is the best of two windows after a warm-up window (which makes the graphs): ``--steps`` steps
eager, four times as many captured. A row that fails (a precision this device lacks) records its error.
``--device cpu --small`` runs the eager rows on a tiny configuration, as a smoke test without a GPU.
"""

from __future__ import annotations

import argparse

import torch
from train_throughput import (
    garg_steps_per_second,
    matmul_flops,
    ratio_text,
    steps_per_second,
    store_result,
    transformer_flops,
    transformers_installed,
    with_reference,
)

from iclab.models.transformer import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.train import _matmul_precision

PAPER = {"d": 20, "points": 41, "layers": 12, "width": 256, "heads": 8, "batch": 64}
SMALL = {"d": 3, "points": 6, "layers": 1, "width": 16, "heads": 2, "batch": 8}
PRECISIONS = ("fp32", "tf32", "bf16")
STACKED = (1, 2, 4, 8)


def matmul_peaks(device: str) -> dict[str, float]:
    """The device's measured matmul FLOP/s in each precision (bf16: a bf16 product; tf32: fp32 inputs in TF32)."""
    peaks = {"fp32": matmul_flops(device=device)}
    if torch.device(device).type != "cuda":
        return {p: peaks["fp32"] for p in PRECISIONS}
    with _matmul_precision("tf32"):
        peaks["tf32"] = matmul_flops(device=device)
    with torch.autocast("cuda", torch.bfloat16):
        peaks["bf16"] = matmul_flops(device=device)
    return peaks


def main(device: str = "cuda", steps: int = 50, small: bool = False) -> dict:
    """Measure every row, print the table and update ``results.json``."""
    c = SMALL if small else PAPER
    task = LinearRegression(GaussianInputs(c["d"]), n_context=c["points"])
    on_gpu = torch.device(device).type == "cuda"
    flops = transformer_flops(c["batch"], 2 * c["points"], c["d"] + 1, c["width"], c["layers"])
    peaks = matmul_peaks(device)

    def row(attention: str, precision: str, seeds: int = 1, capture: bool = False) -> dict:
        config = GPTConfig(
            c["d"] + 1, c["layers"], c["heads"], c["width"], max_tokens=2 * c["points"], attention=attention
        )
        try:
            rate = steps_per_second(
                lambda g: GPTTransformer(config, g),
                task,
                InterleavedFormat(),
                c["batch"],
                steps * (4 if capture else 1),
                device=device,
                precision=precision,
                seeds=seeds,
                capture=capture,
            )
        except Exception as err:  # a precision or a capture this device cannot run is a row of its own
            return {"error": f"{type(err).__name__}: {err}"}
        return {"steps_per_s": rate, "flops_fraction": rate * seeds * flops / peaks[precision]}

    rows = {f"iclab_{p}": row("sdpa", p) for p in PRECISIONS}
    if on_gpu:
        for p in PRECISIONS:
            rows[f"iclab_{p}_captured"] = captured = row("sdpa", p, capture=True)
            if "steps_per_s" in captured and "steps_per_s" in rows[f"iclab_{p}"]:
                captured["vs_eager"] = captured["steps_per_s"] / rows[f"iclab_{p}"]["steps_per_s"]
    garg = None  # no ratio without the reference timed here
    if transformers_installed():
        garg = garg_steps_per_second(
            c["d"], c["points"], c["width"], c["layers"], c["heads"], c["batch"], steps, device
        )
    with_reference({name: r for name, r in rows.items() if "steps_per_s" in r}, garg)
    modes = {"eager": False, "captured": True} if on_gpu else {"eager": False}
    stacked = {
        f"{mode}_{p}": {seeds: row("math", p, seeds, capture) for seeds in STACKED}
        for mode, capture in modes.items()
        for p in ("fp32", "tf32")
    }
    gains = {
        name: by_seeds[8]["steps_per_s"] * 8 / by_seeds[1]["steps_per_s"]
        for name, by_seeds in stacked.items()
        if all("steps_per_s" in by_seeds[s] for s in (1, 8))
    }
    result = {
        "device": torch.cuda.get_device_name() if on_gpu else device,
        "torch": torch.__version__,
        "config": c,
        "steps": steps,
        "step_flops": flops,
        "matmul_peak_flops": peaks,
        **rows,
        **({"garg_reference_steps_per_s": garg} if garg else {}),
        "garg_reference_note": "a GPT2Model loop on the same configuration and device, fp32"
        if garg
        else "not measured: transformers is not installed",
        "stacked_steps_per_s": stacked,
        "eight_seeds_throughput_gain": gains,
        "targets": {"captured_vs_eager": ">= 5", "eight_seeds_throughput_gain": ">= 4 (captured)"},
    }
    print(f"{result['device']}: {c}, {flops:.3g} matmul FLOP a step")
    for name, r in rows.items():
        if "error" in r:
            print(f"{name:<20} failed: {r['error']}")
            continue
        extra = f"  x eager: {r['vs_eager']:.2f}" if "vs_eager" in r else ""
        print(
            f"{name:<20}{r['steps_per_s']:>10.1f} steps/s  {100 * r['flops_fraction']:5.1f}% of peak  "
            f"x Garg: {ratio_text(r)}{extra}"
        )
    print(
        f"{'garg (fp32)':<20}"
        + (f"{garg:>10.1f} steps/s" if garg else " reference not measured (transformers is not installed)")
    )
    for name, by_seeds in stacked.items():
        cells = "  ".join(
            f"{s}: {r['steps_per_s']:.1f}" if "steps_per_s" in r else f"{s}: failed" for s, r in by_seeds.items()
        )
        print(
            f"stacked {name:<14} {cells} steps/s"
            + (f"  8 seeds' throughput x{gains[name]:.2f}" if name in gains else "")
        )
    store_result("gpu_throughput", result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--small", action="store_true", help="a tiny configuration (a smoke test, e.g. on a CPU)")
    args = parser.parse_args()
    main(args.device, args.steps, args.small)
