#!/usr/bin/env bash
# The CUDA path of every experiment, end to end, on a lent GPU machine: each experiment's smoke scale
# on one seed, one after the other (a failure is reported and the next one runs). Run from the
# repository root there, with the xgboost wheel carried in .whl/ (see on_gpu.sh).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH="$PWD:/tmp/site"
for name in $(python3 -c "import iclab.experiments as e; print(' '.join(e.names()))"); do
    start=$SECONDS
    if timeout 60 python3 -m iclab run "$name" --scale smoke --seed 100 --device cuda --out "/tmp/smoke/$name" >/tmp/log 2>&1; then
        echo "$name: ok in $((SECONDS - start)) s"
    else
        echo "$name: FAILED in $((SECONDS - start)) s"; grep -v "^ " /tmp/log | tail -4; grep "^  File \"$PWD" /tmp/log | tail -2
    fi
done
