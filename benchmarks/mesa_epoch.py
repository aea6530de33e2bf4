"""One full-batch training epoch of the mesa-ar model: iclab's model against a prefix loop.

One epoch = forward over 10k sequences (d = 5, T = 100), the ½Σ‖ŷ_t − x_{t+1}‖² loss and the
backward pass. Timed three ways in this process with the same thread count: the fused loss that
training uses (``model(tokens, targets=...)``: forward and backward block by block), autograd
through the model's predictions, and a reference that loops over the prefixes t = 2..T−1 and
recomputes S_t = Σ_{i≤t} e_i e_iᴴ for each, as the public code does. The results are the ratios
(absolute times depend on the machine), the epoch's FLOPs as the fused pass performs them and
their rate as a fraction of the machine's float32 matmul rate (measured in this process). Results
go to ``benchmarks/results.json`` under ``"mesa_epoch"`` (``"mesa_epoch_cuda"`` with ``--device
cuda``; other keys kept).

    python benchmarks/mesa_epoch.py [--sequences 10000] [--repeats 3] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from train_throughput import matmul_flops, store_result, synchronise

from iclab.losses import batch_loss
from iclab.models import CausalLinearAttention
from iclab.models.causal_attention import CHUNK
from iclab.prompts import AutoregressiveFormat
from iclab.rng import generator
from iclab.tasks import AutoregressiveSequences


def reference_predictions(model: CausalLinearAttention, tokens: torch.Tensor) -> torch.Tensor:
    """ŷ_t for every prefix, recomputing S_t = Σ_{i≤t} e_i e_iᴴ each time (the straightforward way)."""
    w_kq, w_pv = model.weights()
    out = []
    for t in range(2, tokens.shape[1] + 1):
        e = tokens[:, :t]
        gram = torch.einsum("bik,bil->bkl", e, e.conj())
        out.append((w_pv @ gram @ (w_kq @ tokens[:, t - 1, :, None]))[..., 0] / (t - 1))
    return torch.stack(out, 1)


def fused_epoch_flops(sequences: int, length: int, d: int, chunk: int = CHUNK) -> float:
    """Real FLOPs of one fused forward + backward pass as performed (tokens padded to whole chunks;
    a complex multiply-add counts 8). Per token, in complex multiply-adds with D = 2d: W^{KQ}e, the
    chunk Gram sums, S_t applied to the queries and to the gradients, and ∂/∂W^{KQ} (D² each); the
    masked chunk products, forward and backward (4·chunk·D); W^{PV}z, W^{PVᴴ}r and ∂/∂W^{PV} (d·D each)."""
    dim = 2 * d
    tokens = sequences * -(-(length - 1) // chunk) * chunk
    return 8 * tokens * (5 * dim**2 + 4 * chunk * dim + 3 * d * dim)


def epoch(model, loss_of, prompt, device: str = "cpu") -> tuple[float, float, list[torch.Tensor]]:
    """(seconds, loss, gradients) of one forward + backward over the whole batch."""
    model.zero_grad(set_to_none=True)
    synchronise(device)
    start = time.perf_counter()
    loss = loss_of(prompt)
    loss.backward()
    synchronise(device)
    seconds = time.perf_counter() - start
    return seconds, loss.item(), [p.grad.clone() for p in model.parameters()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: the result is stored apart")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = args.device
    peak = matmul_flops(device=device)
    task = AutoregressiveSequences(5, 100)
    prompt = AutoregressiveFormat().encode(task.sample(args.sequences, generator(0, "bench")).to(device))
    model = CausalLinearAttention(5, init="random", generator=generator(1)).to(device)

    fused = lambda p: model(p.tokens, targets=p.targets)
    unfused = lambda p: batch_loss(model(p.tokens), p.targets, "half_sse")
    # Alternating, so a shared machine's drifting load hits both alike.
    runs = [epoch(model, loss_of, prompt, device) for _ in range(args.repeats) for loss_of in (fused, unfused)]
    reference = epoch(
        model, lambda p: batch_loss(reference_predictions(model, p.tokens), p.targets, "half_sse"), prompt, device
    )
    # Same loss and gradients (float32 sums in different orders).
    for _, loss, grads in runs[:2]:
        assert abs(loss - reference[1]) <= 1e-4 * abs(reference[1])
        for a, b in zip(grads, reference[2]):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3 * b.abs().max().item())

    best = min(seconds for seconds, _, _ in runs[::2])
    best_unfused = min(seconds for seconds, _, _ in runs[1::2])
    flops = fused_epoch_flops(args.sequences, 100, 5)
    on_gpu = torch.device(device).type == "cuda"
    result = {
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "sequences": args.sequences,
        "d": 5,
        "T": 100,
        "threads": args.threads,
        "iclab_epoch_s": best,
        "autograd_epoch_s": best_unfused,
        "fused_vs_autograd": best_unfused / best,
        "reference_epoch_s": reference[0],
        "speedup": reference[0] / best,
        "epoch_gflop": flops / 1e9,
        "matmul_gflops": peak / 1e9,
        "flops_fraction": flops / best / peak,
        "target_epoch_s": 0.1,
        "meets_target": best <= 0.1,
    }
    store_result("mesa_epoch_cuda" if on_gpu else "mesa_epoch", result)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
