"""Training throughput of iclab's loop, as a fraction of this machine's matmul FLOP/s.

Run from the repository root: ``python benchmarks/train_throughput.py [--threads 2] [--device cuda]``.
Prints a table and writes the key ``"train_throughput"`` (``"train_throughput_cuda"`` with
``--device cuda``) of ``benchmarks/results.json`` (read-modify-write: other benchmarks keep their
own keys). On a GPU the peak is an 8192² float32 product, and every timer waits for the device.

Configurations (the issue's):
  (a) GPT transformer, 2 layers, width 64, 2 heads, d = 5, 11 examples (22 tokens), batch 64,
      Adam, one seed through :func:`iclab.train.train`: with SDPA, with the ``math`` attention
      path, and ``math`` under ``TrainConfig(compile=True)`` (compiled in the untimed warm-up).
  (b) one-layer merged LSA, d = 5, N = 20, batch 1024, Adam, one seed.
  (c) OLS, ridge and 3-NN ``predict_prefixes`` on 1280 prompts of 40 examples at d = 20.

The reference and the three runs of (a) are measured in turn, once per round (3 rounds), so a
shared machine's drifting load hits them alike; each run times the best of two windows of
``--steps`` steps after a warm-up window, and the table gives each configuration's median.
Achieved FLOP/s counts the model's matrix products (forward ×3 for forward + backward) over
the measured seconds per step; the peak is the best of a few 1024×1024 float32 matmuls in
the same process with the same thread count. The Garg et al. reference for (a) is measured in
the same process when Hugging Face ``transformers`` is installed (``pip install transformers``):
a loop written the way their training script works (a ``GPT2Model`` backbone with linear
read-in/out, x and y interleaved into one sequence, fresh Gaussian data, Adam, the squared
error at the x positions), or their own code with ``--garg-src``. Without either, no reference
is timed and no ratio to it is written (``vs_garg`` is absent; the table says the reference was
not measured): a ratio against a number from another run is not a measurement.

What the profile of config (a) shows, and what was tried: docs/performance.md, "The transformer step".
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial
from pathlib import Path

import torch

from iclab.learners import LeastSquares, NearestNeighbours, Ridge
from iclab.models import LinearSelfAttention
from iclab.models.transformer import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat, PairedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.train import TrainConfig, data_source, train

RESULTS = Path(__file__).with_name("results.json")


def with_reference(rows: dict[str, dict], reference: float | None) -> dict[str, dict]:
    """Give every row its ``vs_garg`` ratio (its steps/s over the reference's), only when the reference
    was timed in this run (``reference`` not None); rows are changed in place and returned."""
    if reference is not None:
        for row in rows.values():
            row["vs_garg"] = row["steps_per_s"] / reference
    return rows


def ratio_text(row: dict) -> str:
    """A row's ratio to the reference for the printed table, or that the reference was not measured."""
    return f"{row['vs_garg']:.2f}" if "vs_garg" in row else "reference not measured"


def store_result(key: str, result: dict) -> None:
    """Write ``result`` under ``key`` of ``results.json``, keeping the other benchmarks' keys."""
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    stored[key] = result
    RESULTS.write_text(json.dumps(stored, indent=2) + "\n")


def synchronise(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so a wall-clock timer reads its end."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def matmul_flops(size: int | None = None, repeats: int = 10, device: str = "cpu") -> float:
    """Best measured float32 matmul FLOP/s (2·n³ per product): n = 1024 on a CPU, 8192 on a GPU
    (a product large enough to reach its rate)."""
    size = size or (1024 if torch.device(device).type == "cpu" else 8192)
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        synchronise(device)
        start = time.perf_counter()
        a @ b
        synchronise(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def transformer_flops(
    batch: int, tokens: int, token_dim: int, width: int, layers: int, mlp_ratio: float = 4.0
) -> float:
    """Matmul FLOPs of one training step (forward ×3) of :class:`GPTTransformer`, as performed:
    the last block works at the read (x-token) positions only, keys and values excepted."""
    block = 3 * width * width + width * width + 2 * mlp_ratio * width * width  # qkv, out, MLP per token
    keys_values = 2 * width * width
    attention = 2 * tokens * width  # QKᵀ and AV per query token (all heads, causal half not skipped)
    reads = tokens // 2
    per_prompt = tokens * (token_dim * width + (layers - 1) * (block + attention))
    per_prompt += tokens * keys_values + reads * (block - keys_values + attention + width)
    return 3 * 2 * batch * per_prompt


def lsa_flops(batch: int, tokens: int, dim: int, n_context: int) -> float:
    """Matmul FLOPs of one training step of a one-layer merged LSA (forward ×3)."""
    forward = 2 * batch * (n_context * dim * dim + tokens * dim * dim + 2 * dim**3)
    return 3 * forward


def steps_per_second(
    make_model,
    task,
    fmt,
    batch: int,
    steps: int,
    compiled: bool = False,
    windows: int = 2,
    device: str = "cpu",
    precision: str = "fp32",
    seeds: int = 1,
    capture: bool = False,
) -> float:
    """Steps/s of :func:`iclab.train.train` (Adam, fresh prompts, ``seeds`` seeds vmapped together, each step
    replayed as a CUDA graph with ``capture``):
    the best of ``windows`` stretches of ``steps`` steps, timed after a first stretch that warms up
    (and compiles). Each stretch ends at a logging step, which reads the losses back (a device sync)."""
    stamps = []
    cfg = TrainConfig(
        steps=steps * (windows + 1),
        batch_size=batch,
        lr=1e-4,
        log_every=steps,
        checkpoint_every=10**9,
        compile=compiled,
        precision=precision,
        capture=capture,
    )
    train(
        make_model,
        data_source(task, fmt),
        cfg,
        seeds=list(range(seeds)),
        device=device,
        progress=False,
        callback=lambda step, models: stamps.append(time.perf_counter()),
    )
    return steps / min(b - a for a, b in zip(stamps, stamps[1:]))


def transformers_installed() -> bool:
    """Whether Hugging Face ``transformers`` imports (the Garg et al. reference needs it)."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def garg_steps_per_second(
    d: int, points: int, width: int, layers: int, heads: int, batch: int, steps: int, device: str = "cpu"
) -> float:
    """Steps/s of a Garg et al.-style training loop on the same configuration (needs
    ``transformers``): a Hugging Face ``GPT2Model`` (no dropout) between linear read-in/out, the
    sequence x_1, [y_1, 0…], x_2, … built each step from fresh N(0, I) inputs and weights, Adam,
    and the mean squared error of the predictions read at the x positions. GPT-2's attention is
    the written-out ("eager") one that their pinned transformers 4.17 runs (today's SDPA default
    measured the same here)."""
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        n_positions=2 * points,
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
        attn_implementation="eager",
    )
    read_in, backbone, read_out = (
        m.to(device) for m in (torch.nn.Linear(d, width), GPT2Model(config), torch.nn.Linear(width, 1))
    )
    params = [*read_in.parameters(), *backbone.parameters(), *read_out.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-4)

    def step():
        xs, w = torch.randn(batch, points, d, device=device), torch.randn(batch, d, 1, device=device)
        ys = (xs @ w)[..., 0]
        y_rows = torch.cat([ys[..., None], torch.zeros(batch, points, d - 1, device=device)], dim=-1)
        sequence = torch.stack([xs, y_rows], dim=2).view(batch, 2 * points, d)
        hidden = backbone(inputs_embeds=read_in(sequence)).last_hidden_state
        loss = (read_out(hidden)[:, ::2, 0] - ys).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def run(n):
        start = time.perf_counter()
        for _ in range(n):
            step()
        synchronise(device)
        return time.perf_counter() - start

    run(5)
    return steps / min(run(steps) for _ in range(2))


def garg_source_steps_per_second(
    src: Path, d: int, points: int, width: int, layers: int, heads: int, batch: int, steps: int, device: str = "cpu"
) -> float:
    """Steps/s of Garg et al.'s own code, from a checkout of their ``src/`` folder: their
    ``TransformerModel`` (models.py, which imports transformers, scikit-learn and xgboost), their
    Gaussian sampler and linear-regression task (samplers.py, tasks.py) and their ``train_step``,
    read unmodified out of train.py (which cannot be imported here: it needs wandb and quinine) and
    called the way their ``train`` calls it, with Adam and fresh prompts every step."""
    import ast
    import sys

    if not (src / "train.py").is_file() or not (src / "models.py").is_file():
        raise SystemExit(f"--garg-src {src}: not their src/ folder (no train.py and models.py)")
    sys.path.insert(0, str(src))
    try:
        import models
        import samplers
        import tasks
    except ImportError as err:
        raise SystemExit(f"--garg-src {src}: their modules need {err.name} (pip install it)") from err
    source = (src / "train.py").read_text()
    definition = next(
        node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name == "train_step"
    )
    namespace: dict = {}
    exec(compile(ast.Module([definition], type_ignores=[]), str(src / "train.py"), "exec"), namespace)
    train_step = namespace["train_step"]
    model = models.TransformerModel(n_dims=d, n_positions=points, n_embd=width, n_layer=layers, n_head=heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    data_sampler = samplers.get_data_sampler("gaussian", n_dims=d)
    task_sampler = tasks.get_task_sampler("linear_regression", d, batch)

    def run(n):
        start = time.perf_counter()
        for _ in range(n):
            xs = data_sampler.sample_xs(points, batch)
            task = task_sampler()
            train_step(model, xs, task.evaluate(xs), optimizer, task.get_training_metric())
        return time.perf_counter() - start

    run(5)
    return steps / min(run(steps) for _ in range(2))


def learner_seconds(repeats: int = 3, device: str = "cpu") -> dict[str, float]:
    """Best seconds of ``predict_prefixes`` per learner on 1280 prompts × 40 examples, d = 20."""
    episode = LinearRegression(GaussianInputs(20), n_context=40).sample(1280, generator(0), dtype=torch.float64)
    episode = episode.to(device)
    out = {}
    for learner in (LeastSquares(), Ridge(0.1), NearestNeighbours(3)):
        learner.predict_prefixes(episode.xs, episode.ys)
        times = []
        for _ in range(repeats):
            synchronise(device)
            start = time.perf_counter()
            learner.predict_prefixes(episode.xs, episode.ys)
            synchronise(device)
            times.append(time.perf_counter() - start)
        out[learner.name] = min(times)
    return out


def main(
    threads: int = 2, steps: int = 200, rounds: int = 3, garg_src: Path | None = None, device: str = "cpu"
) -> dict:
    """Measure everything, print the table and update ``results.json`` (key ``train_throughput``, or
    ``train_throughput_cuda`` on a GPU); ``garg_src`` (a checkout of Garg et al.'s ``src/``) times
    their own code as the reference instead of the GPT2Model loop."""
    torch.set_num_threads(threads)
    peak = matmul_flops(device=device)
    task_a = LinearRegression(GaussianInputs(5), n_context=11)
    if garg_src is not None:
        reference, note = (
            partial(garg_source_steps_per_second, garg_src),
            "measured here: their own train_step and TransformerModel (a checkout of their src/, --garg-src)",
        )
    elif transformers_installed():
        reference, note = garg_steps_per_second, "measured here: a GPT2Model loop on the same configuration and threads"
    else:
        reference, note = None, "not measured: transformers is not installed and no --garg-src was given"
    if garg_src is not None and torch.device(device).type != "cpu":
        raise SystemExit("--garg-src times their code on the CPU only")
    measures = {"garg": lambda: reference(5, 11, 64, 2, 2, 64, steps, device=device)} if reference else {}

    def transformer_a(attention: str, compiled: bool) -> float:
        make = lambda g: GPTTransformer(GPTConfig(6, 2, 2, 64, max_tokens=22, attention=attention), g)
        return steps_per_second(make, task_a, InterleavedFormat(), 64, steps, compiled, device=device)

    for attention, compiled in (("sdpa", False), ("math", False), ("math", True)):
        measures[f"a_transformer_{attention}" + ("_compiled" if compiled else "")] = partial(
            transformer_a, attention, compiled
        )
    # Every configuration once per round, so a shared machine's drifting load hits them alike.
    rates = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            rates[name].append(measure())
    garg_rounds = rates.pop("garg", None)
    task_b = LinearRegression(GaussianInputs(5), n_context=20)
    rate_b = steps_per_second(
        lambda g: LinearSelfAttention(6, generator=g), task_b, PairedFormat(), 1024, steps, device=device
    )
    name = torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else "cpu"
    result = summarise(threads, peak, rates, garg_rounds, note, rate_b, learner_seconds(device=device), name)
    print_table(result)
    store_result("train_throughput" if result["device"] == "cpu" else "train_throughput_cuda", result)
    return result


def summarise(
    threads: int,
    peak: float,
    rates: dict[str, list[float]],
    garg_rounds: list[float] | None,
    garg_note: str,
    rate_b: float,
    learners: dict[str, float],
    device: str = "cpu",
) -> dict:
    """The stored result from the measured numbers on ``device`` (its name): per configuration (a) the
    median of its rounds, its FLOP/s fraction and, only when ``garg_rounds`` were timed in this run, its
    ratio to them."""
    flops_a = transformer_flops(64, 22, 6, 64, 2)
    garg = statistics.median(garg_rounds) if garg_rounds else None
    rows = {
        name: {
            "steps_per_s": statistics.median(values),
            "flops_fraction": statistics.median(values) * flops_a / peak,
            "steps_per_s_rounds": values,
        }
        for name, values in rates.items()
    }
    with_reference(rows, garg)
    eager = max((rows[k] for k in ("a_transformer_sdpa", "a_transformer_math")), key=lambda r: r["steps_per_s"])
    compiled = rows["a_transformer_math_compiled"]
    rows["b_lsa"] = {"steps_per_s": rate_b, "flops_fraction": rate_b * lsa_flops(1024, 21, 6, 20) / peak}
    total = sum(learners.values())
    measured = {"garg_reference_steps_per_s": garg, "garg_reference_rounds": garg_rounds} if garg else {}
    ratios_met = (
        {"a_eager_vs_garg": eager["vs_garg"] >= 2.5, "a_compiled_vs_garg": compiled["vs_garg"] >= 3} if garg else {}
    )
    return {
        "device": device,
        "threads": threads,
        "matmul_gflops": peak / 1e9,
        "rounds": len(rates["a_transformer_sdpa"]),  # one each per round
        **measured,
        "garg_reference_note": garg_note,
        **rows,
        "c_learners_seconds": learners,
        "c_learners_total_seconds": total,
        "targets": {
            "a_eager_vs_garg": ">= 2.5",
            "a_compiled_vs_garg": ">= 3",
            "a_flops_fraction": ">= 0.45",
            "c_total_seconds": "< 1",
        },
        "targets_met": {
            **ratios_met,
            "a_flops_fraction": max(eager["flops_fraction"], compiled["flops_fraction"]) >= 0.45,
            "c_total_seconds": total < 1,
        },
    }


def print_table(result: dict) -> None:
    """The result as the terminal table: steps/s, FLOP/s fraction and the ratio to the reference."""
    print(f"{result['device']}, threads {result['threads']}, matmul {result['matmul_gflops']:.1f} GFLOP/s")
    garg = result.get("garg_reference_steps_per_s")
    print(
        f"Garg et al.-style loop: {garg:.1f} steps/s ({result['garg_reference_note']})"
        if garg
        else f"Garg et al.-style loop: {result['garg_reference_note']}; no ratios"
    )
    print(f"{'config':<28}{'steps/s':>10}{'FLOP/s frac':>13}  x Garg")
    for name, row in result.items():
        if name.startswith(("a_", "b_")):  # the reference is configuration (a)'s: (b) has no ratio
            ratio = ratio_text(row) if name.startswith("a_") else "-"
            print(f"{name:<28}{row['steps_per_s']:>10.1f}{row['flops_fraction']:>13.1%}  {ratio}")
    for name, seconds in result["c_learners_seconds"].items():
        print(f"c {name:<26}{seconds:>10.3f} s")
    print(f"c total{'':<21}{result['c_learners_total_seconds']:>10.3f} s   targets met: {result['targets_met']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--garg-src",
        type=Path,
        metavar="PATH",
        help="a checkout of Garg et al.'s src/ folder: time their own train_step as the reference",
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: rates on a GPU are stored apart")
    args = parser.parse_args()
    main(args.threads, args.steps, args.rounds, args.garg_src, args.device)
