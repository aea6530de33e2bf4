"""von Oswald et al.'s own notebook (``google-research/self-organising-systems``,
``transformers_learn_icl_by_gd/constructed_token_setup.ipynb`` with its ``src/``) run on a CPU, for ``von_oswald.py``
(run in a JAX environment of its own: jax, dm-haiku, optax, ml_collections, matplotlib, scipy, pillow, ipython;
never imported by iclab).

The notebook's code cells up to and including "Training" run as they are, in order, with its form fields
(``recurrent_Transformer``, ``num_layers``, ``num_heads``, ``num_seeds``) set to the recipe's values. Shims, each
where a machine without Colab needs one: its shell and magic lines are dropped (``!pip``: the packages are
installed; ``!git clone`` and ``%cd``: the fetched copy is put on the path and made the working folder;
``%download_file``), ``display`` (a notebook built-in) prints nothing, matplotlib draws off screen, and
``jnp.DeviceArray``, a name their ``src/train.py`` uses in type annotations and which current JAX no longer has, is
an alias of ``jnp.ndarray``. ``--steps`` and ``--steps-gd`` set ``config.training_steps`` and
``config.training_steps_gd`` after the config cell (the notebook's own 50 000 and 30 000 for per-layer models, 5 000
and 1 000 for recurrent ones, unless given). The JSON written holds, per seed, the trained Transformer's test loss
and the GD and GD++ references' at the last logged step, from the notebook's own lists.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import re
import sys
import time
from pathlib import Path

NOTEBOOK = "constructed_token_setup.ipynb"
CELLS = 7
"""The notebook's code cells run: imports, its own sources, config, utilities, lists, interpolation, training."""


def _cells(notebook: Path) -> list[str]:
    cells = ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"][
        :CELLS
    ]
    if not cells[6].startswith("#@title Training"):
        raise SystemExit(f"{notebook}: its seventh code cell is not 'Training'; the notebook has changed")
    return cells


def _form(cell: str, fields: dict[str, object]) -> str:
    """The config cell with its ``#@param`` form fields set."""
    for name, value in fields.items():
        cell, found = re.subn(rf"^{name} = .*#@param.*$", f"{name} = {value!r}", cell, flags=re.M)
        if not found:
            raise SystemExit(f"the notebook's config cell has no form field {name}")
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="the fetched transformers_learn_icl_by_gd folder")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--recurrent", action="store_true")
    parser.add_argument("--seeds", type=int, default=3, help="the notebook's num_seeds: seeds 0 … seeds − 1")
    parser.add_argument("--steps", type=int, help="config.training_steps (default: the notebook's)")
    parser.add_argument("--steps-gd", type=int, help="config.training_steps_gd (default: the notebook's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={args.threads}"
    peer = args.peer.resolve()
    magic = lambda line: line.lstrip().startswith(("!", "%"))  # Colab's shell lines and IPython's magics
    cells = ["\n".join(line for line in c.splitlines() if not magic(line)) for c in _cells(peer / NOTEBOOK)]
    sys.path.insert(0, str(peer))
    os.chdir(peer)
    fields = {"recurrent_Transformer": args.recurrent, "num_layers": args.layers, "num_heads": 1}
    cells[2] = _form(cells[2], {**fields, "num_seeds": args.seeds})
    builtins.display = lambda *a, **k: None
    import jax.numpy as jnp

    jnp.DeviceArray = jnp.ndarray  # a type annotation of their src/train.py; the name left JAX in 0.4.
    scope: dict = {"__name__": "__notebook__"}
    start = time.perf_counter()
    for index, cell in enumerate(cells):
        exec(compile(cell, f"{peer.name} cell {index}", "exec"), scope)
        if index == 2:  # after the config cell: the recipe's step counts
            for key, value in (("training_steps", args.steps), ("training_steps_gd", args.steps_gd)):
                if value is not None:
                    setattr(scope["config"], key, value)
    last = lambda name: [float(seed_values[-1]) for seed_values in scope[name]]
    result = {
        "transformer": last("loss_trans_list"),
        "gd": last("losses_gd_list"),
        "gd_plus_plus": last("losses_gd_list_trained"),
        "steps": scope["config"].training_steps,
        "steps_gd": scope["config"].training_steps_gd,
        "seconds": time.perf_counter() - start,
    }
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
