"""Akyürek et al.'s own code (``google-research/google-research``, folder ``incontext``; JAX and Flax) run on a CPU,
for ``akyurek.py`` (run in a JAX environment of its own: jax 0.4.13, flax 0.6.11, optax, tensorflow-cpu for
``gfile``, scikit-learn, matplotlib; never imported by iclab).

Their ``incontext/main.py`` runs as its own ``__main__`` with their flags (``--x_dim --num_exemplars --n_layers
--hidden_size --n_heads --n_epochs --n_iter_per_epoch --batch_size --learning_rate --seed``; their Adam with β₂ 0.98
and ε 1e-9, their cosine schedule with a fifth of the steps of warm-up, their pre-LN transformer). Shims, each where
this machine needs one: the package layout (their ``incontext.flax.self_attention_patch`` lies in a ``flax/`` folder
beside the package, so that folder joins the package's path), ``flax.linen.attention.zeros`` (a name their patch reads,
which the oldest Flax installable here moved to ``flax.linen.initializers``), their ``eval_model`` (the plots their
loop draws after the last epoch: skipped, as iclab measures the model instead) and their ``save_checkpoint`` (which
fails here): it hands the trained state to this runner instead, which applies their model to the prompts of
``--prompts`` (an ``.npz`` of ``xs`` (B, N, d) and ``ys`` (B, N), laid out as their sampler lays them: x tokens
[0; x], y tokens [y; 0]) and writes its prediction of every y_i from the examples before it, ``(B, N)``, to
``--predictions``.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--peer", type=Path, required=True, help="the fetched incontext folder (with incontext/, flax/)"
    )
    parser.add_argument("--prompts", type=Path, required=True)
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args, theirs = parser.parse_known_args()
    peer = str(args.peer.resolve())
    sys.path.insert(0, peer)
    import flax.linen.attention as attention
    from flax.linen import initializers

    attention.zeros = initializers.zeros  # the shim of the module docstring
    import incontext

    incontext.__path__.append(peer)  # their incontext.flax lies beside the package
    import jax
    import jax.numpy as jnp
    from incontext import model_trainer

    found = {}
    built = model_trainer.get_model

    def get_model(rng, config):
        model, state, step = built(rng, config)
        found["model"] = model
        return model, state, step

    model_trainer.get_model = get_model
    model_trainer.eval_model = lambda *a, **k: None
    model_trainer.save_checkpoint = lambda state, folder: found.setdefault("state", state)
    sys.argv = ["main.py", *theirs]
    start = time.perf_counter()
    try:
        runpy.run_path(str(Path(peer) / "incontext" / "main.py"), run_name="__main__")
    except SystemExit as done:  # absl's app.run ends the process with main's return value
        if done.code not in (None, 0):
            raise
    seconds = time.perf_counter() - start

    prompts = np.load(args.prompts)
    xs, ys = prompts["xs"], prompts["ys"]  # (B, N, d), (B, N)
    b, n, d = xs.shape
    x_tokens = np.concatenate([np.zeros((b, n, 1)), xs], axis=2)
    y_tokens = np.concatenate([ys[..., None], np.zeros((b, n, d))], axis=2)
    sequence = np.stack([x_tokens, y_tokens], axis=2).reshape(b, 2 * n, d + 1).astype(np.float32)
    params = jax.tree_util.tree_map(lambda x: x[0], found["state"].params)  # their state is replicated per device
    predictions = []
    for block in range(0, b, 500):
        _, (_, y_pred, *_) = found["model"].apply(
            {"params": params}, inputs=jnp.asarray(sequence[block : block + 500]), train=False
        )
        predictions.append(np.asarray(y_pred)[..., 0])  # (block, N): y_i from x_1, y_1, …, x_i
    np.save(args.predictions, np.concatenate(predictions))
    args.out.write_text(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
