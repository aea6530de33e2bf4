"""Zheng et al.'s own training script (``ML-GSAI/MesaOpt-AR-Transformer``, ``main_train_ar.py``) run unmodified, for
``zheng.py`` (run in the peer's Python: torch and numpy; never imported by iclab).

Their command line as it is (``--dim --T --m --isotropic --scale --a --b --lr --epochs --seed --save``, their log
folder in a temporary place), only the evaluation frequency set to the last epoch (their script evaluates every
epoch on its 10 000 test sequences by default). The JSON written holds what their run saved: the last ab and
prediction/truth ratio of their own evaluation (``ab.npy``, ``gap.npy``) and the trained W^{KQ}, W^{PV} (``model.pth``)
as real and imaginary parts, which ``zheng.py`` loads into iclab's model to measure both sides alike.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--peer", type=Path, required=True, help="a checkout of ML-GSAI/MesaOpt-AR-Transformer")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--out", type=Path, required=True)
args, theirs = parser.parse_known_args()
torch.set_num_threads(args.threads)
peer = args.peer.resolve()
sys.path.insert(0, str(peer))
with tempfile.TemporaryDirectory() as logs:
    epochs = theirs[theirs.index("--epochs") + 1]
    sys.argv = ["main_train_ar.py", *theirs, "--log_dir", logs, "--eval_freq", epochs, "--save"]
    start = time.perf_counter()
    runpy.run_path(str(peer / "main_train_ar.py"), run_name="__main__")
    seconds = time.perf_counter() - start
    (run,) = Path(logs).glob("*/*")  # dim{d}_T{T}_iso{k}/{their description}
    state = torch.load(run / "model.pth", map_location="cpu", weights_only=True)
    out = {
        "ab": np.load(run / "ab.npy").tolist()[-1],
        "gap": np.load(run / "gap.npy").tolist()[-1],
        "seconds": seconds,
        **{
            f"{name}_{part}": getattr(state[name], part).tolist()
            for name in ("WKQ", "WPV")
            for part in ("real", "imag")
        },
    }
args.out.write_text(json.dumps(out))
