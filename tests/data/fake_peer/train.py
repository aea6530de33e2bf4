"""A stand-in for an authors' training script, for tests/test_parity.py: it takes the command line a parity runner
takes (``--peer``, ``--threads``, ``--seed``, ``--out``) and writes the JSON a runner writes, a value that depends
on the seed alone, so the test knows what the authors' side must read. ``--fail`` exits as a crashing peer does."""

import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--peer")
parser.add_argument("--threads", type=int)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--fail", action="store_true")
args = parser.parse_args()
if args.fail:
    print("Traceback (most recent call last):\nRuntimeError: the peer crashed", file=sys.stderr)
    sys.exit(1)
with open(args.out, "w") as f:
    json.dump({"value": 0.25 + 0.01 * args.seed}, f)
