"""One full-batch training epoch of the mesa-ar model: iclab's model against a prefix loop.

One epoch = forward over 10k sequences (d = 5, T = 100), the ½Σ‖ŷ_t − x_{t+1}‖² loss and the
backward pass. The reference loops over the prefixes t = 2..T−1 and recomputes
S_t = Σ_{i≤t} e_i e_iᴴ for each, as the public code does. Both run in this process with the
same thread count; the ratio of their times is the result (absolute times depend on the
machine). Results go to ``benchmarks/results.json`` under ``"mesa_epoch"`` (other keys kept).

    python benchmarks/mesa_epoch.py [--sequences 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from iclab.losses import batch_loss
from iclab.models import CausalLinearAttention
from iclab.prompts import AutoregressiveFormat
from iclab.rng import generator
from iclab.tasks import AutoregressiveSequences

RESULTS = Path(__file__).with_name("results.json")


def reference_predictions(model: CausalLinearAttention, tokens: torch.Tensor) -> torch.Tensor:
    """ŷ_t for every prefix, recomputing S_t = Σ_{i≤t} e_i e_iᴴ each time (the straightforward way)."""
    w_kq, w_pv = model.weights()
    out = []
    for t in range(2, tokens.shape[1] + 1):
        e = tokens[:, :t]
        gram = torch.einsum("bik,bil->bkl", e, e.conj())
        out.append((w_pv @ gram @ (w_kq @ tokens[:, t - 1, :, None]))[..., 0] / (t - 1))
    return torch.stack(out, 1)


def epoch(model, predict, prompt) -> tuple[float, float, list[torch.Tensor]]:
    """(seconds, loss, gradients) of one forward + backward over the whole batch."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss = batch_loss(predict(prompt.tokens), prompt.targets, "half_sse")
    loss.backward()
    seconds = time.perf_counter() - start
    return seconds, loss.item(), [p.grad.clone() for p in model.parameters()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = AutoregressiveSequences(5, 100)
    prompt = AutoregressiveFormat().encode(task.sample(args.sequences, generator(0, "bench")))
    model = CausalLinearAttention(5, init="random", generator=generator(1))

    ours = [epoch(model, model, prompt) for _ in range(args.repeats)]
    reference = epoch(model, lambda tokens: reference_predictions(model, tokens), prompt)
    # Same loss and gradients (float32 sums in different orders).
    assert abs(ours[0][1] - reference[1]) <= 1e-4 * abs(reference[1])
    for a, b in zip(ours[0][2], reference[2]):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3 * b.abs().max().item())

    best = min(seconds for seconds, _, _ in ours)
    result = {
        "sequences": args.sequences, "d": 5, "T": 100, "threads": args.threads,
        "iclab_epoch_s": best, "reference_epoch_s": reference[0], "speedup": reference[0] / best,
        "target_speedup": 20.0, "meets_target": reference[0] / best >= 20.0,
    }
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    existing["mesa_epoch"] = result
    RESULTS.write_text(json.dumps(existing, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
