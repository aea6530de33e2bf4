#!/usr/bin/env bash
# Issue 56 on a lent GPU machine, in one call: the captured step's tests, the throughput benchmark
# (gpu_throughput.py), then gpt-linear's paper recipe on seed 100 for as many steps as the call's time
# left allows, judged by its claims (a rung of its ladder toward the paper's 500 000 steps).
# Run from the repository root there: benchmarks/gpu_paper_rung.sh SECONDS (the call's whole budget).
# Back under $OUT: tests.txt, bench.txt, results.json, run.txt, run.tgz (the run folder without
# weights) and the final weights split in parts under 16 MiB (cat weights.part-* > model.safetensors).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
budget=${1:-540}
nvidia-smi -L
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_capture.py >"$OUT/tests.txt" 2>&1
tail -5 "$OUT/tests.txt"
(cd benchmarks && timeout 240 python3 gpu_throughput.py --device cuda --steps 30) >"$OUT/bench.txt" 2>&1
tail -25 "$OUT/bench.txt"
cp benchmarks/results.json "$OUT/results.json"
# The run's steps: its measured rate (one seed, the run's math attention, fp32) times the time left, less a
# margin for start-up and the evaluation (its curriculum starts on shorter prompts, so the rate is a floor).
rate() {
    python3 -c "import json,sys; r=json.load(open('benchmarks/results.json'))['gpu_throughput']['stacked_steps_per_s']
print(int(r['$1']['1'].get('steps_per_s', $2)))" 2>/dev/null || echo "$2"
}
train() {  # train(capture, rate): the run, or nothing when under 2 minutes are left
    local left=$((budget - SECONDS - 100))
    [ "$left" -lt 120 ] && return 1
    local steps=$(($2 * left * 8 / 10))
    echo "training $steps steps (capture $1, ${2} steps/s measured, ${left} s left)"
    rm -rf /tmp/run
    timeout $((budget - SECONDS - 5)) python3 -m iclab run gpt-linear --scale paper --seed 100 --device cuda \
        --set train.steps="$steps" --set train.capture="$1" --out /tmp/run >"$OUT/run.txt" 2>&1
}
train true "$(rate captured_fp32 100)" || train false "$(rate eager_fp32 40)"
echo "run exit $?, ${SECONDS} s in all"
grep -v "^gpt: step" "$OUT/run.txt" | tail -30
tar czf "$OUT/run.tgz" --exclude='*.safetensors' -C /tmp run
weights=$(find /tmp/run -name model.safetensors | head -1)
[ -n "$weights" ] && split -b 15M "$weights" "$OUT/weights.part-"
ls -la "$OUT"
