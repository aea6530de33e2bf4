#!/usr/bin/env bash
# The benchmarks on a lent GPU machine, in one call (issue 41, item 6): run from the repository root
# there, with the xgboost wheel carried in .whl/ (function-classes' boosted trees; the machine's
# image has every other package) and $OUT the folder that comes back. About 6 minutes on an H200.
# Each part has its own time limit, so one that hangs leaves the others their time.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi -L
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
(
    cd benchmarks
    timeout 150 python3 train_throughput.py --device cuda --rounds 3 --steps 200
    timeout 45 python3 mesa_epoch.py --device cuda
    timeout 240 python3 gpu_throughput.py --device cuda --steps 30
)
cp benchmarks/results.json "$OUT/results.json"
# The CUDA path of every experiment, end to end: the smoke scale, one seed each.
time timeout 100 python3 -m iclab reproduce --scale smoke --seed 100 --device cuda --out /tmp/smoke
