"""Garg et al.'s own training code (``dtsip/in-context-learning``, ``src/train.py``) run unmodified on a CPU, for
``garg.py`` (run in the peer's environment: torch, transformers, quinine, wandb, scikit-learn, xgboost; never
imported by iclab).

It writes a quinine config of the recipe (their schema: ``model``, ``training`` with a curriculum whose start and end
may be equal, ``wandb``, ``out_dir``), then runs their ``train.py`` as its own ``__main__`` on it. Shims, each only
where a CPU or an offline machine needs one: ``Tensor.cuda`` and ``Module.cuda`` return their object (their loop moves
every batch to CUDA), Weights & Biases runs disabled (``WANDB_MODE=disabled``: their ``wandb.log`` calls do nothing),
their post-training ``get_run_metrics`` (a precomputation for their plotting notebook, replaced by iclab's metrics on
the same prompts) is skipped, and torch's global generator is seeded with ``--seed`` before their code runs (their
loop draws every prompt and the initialisation from it and seeds nothing itself). The run folder
(``config.yaml``, ``state.pt``) is what ``iclab.load_model`` reads.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from pathlib import Path

import torch
import yaml


def config(args: argparse.Namespace) -> dict:
    """Their config of the recipe (``src/schema.py``), the curriculum fixed at d and N unless asked for."""
    curriculum = {
        "dims": {"start": args.d_start or args.d, "end": args.d, "inc": 1, "interval": args.interval},
        "points": {"start": args.points_start or args.points, "end": args.points, "inc": 2, "interval": args.interval},
    }
    return {
        "out_dir": str(args.run.parent),
        "test_run": False,
        "model": {
            "family": "gpt2",
            "n_dims": args.d,
            "n_positions": args.points,
            "n_embd": args.width,
            "n_layer": args.layers,
            "n_head": args.heads,
        },
        "training": {
            "task": args.task,
            "task_kwargs": json.loads(args.task_kwargs),
            "data": "gaussian",
            "batch_size": args.batch_size,
            "learning_rate": args.lr,
            "train_steps": args.steps,
            "save_every_steps": args.steps - 1,  # their loop saves at steps i % save_every == 0: the last, steps − 1
            "keep_every_steps": -1,
            "resume_id": args.run.name,
            "curriculum": curriculum,
        },
        "wandb": {"project": "parity", "entity": "none", "notes": "", "name": args.run.name, "log_every_steps": 100},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="a checkout of dtsip/in-context-learning")
    parser.add_argument("--task", default="linear_regression")
    parser.add_argument("--task-kwargs", default="{}", help="their task_kwargs, as JSON")
    parser.add_argument("--d", type=int, required=True)
    parser.add_argument("--points", type=int, required=True, help="examples per prompt (their n_points)")
    parser.add_argument("--d-start", type=int, help="the curriculum's first d (default: no curriculum)")
    parser.add_argument("--points-start", type=int, help="the curriculum's first N")
    parser.add_argument("--interval", type=int, default=2000, help="the curriculum's steps between increments")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, required=True, help="their train_steps (steps 0 … steps − 1)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--run", type=Path, required=True, help="the run folder to write (config.yaml, state.pt)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.run.parent.mkdir(parents=True, exist_ok=True)
    recipe = args.run.parent / f"{args.run.name}.yaml"
    recipe.write_text(yaml.safe_dump(config(args)))

    # The shims (module docstring).
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    os.environ["WANDB_MODE"] = "disabled"
    src = (args.peer / "src").resolve()
    sys.path.insert(0, str(src))
    import eval as their_eval

    their_eval.get_run_metrics = lambda *a, **k: None
    torch.manual_seed(args.seed)

    sys.argv = ["train.py", "--config", str(recipe)]
    start = time.perf_counter()
    cwd = Path.cwd()
    os.chdir(src)
    try:
        runpy.run_path(str(src / "train.py"), run_name="__main__")
    finally:
        os.chdir(cwd)
    args.out.write_text(json.dumps({"run": str(args.run), "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
