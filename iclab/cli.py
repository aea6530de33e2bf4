"""The ``iclab`` command line: list, run, resume, reproduce, report.

Bad input (unknown experiment or key, wrong type, impossible shape) prints one line
``iclab: error: ...`` and exits with status 2. The API (torch, pandas, matplotlib) is imported only
by the verbs that run something, so ``iclab --help`` and ``iclab list`` answer at once.
"""

from __future__ import annotations

import argparse
import logging
import sys

from . import experiments
from .config import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iclab", description="A laboratory for in-context learning research.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress messages")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the experiments")

    run = sub.add_parser("run", help="run one experiment into a new run folder")
    run.add_argument("experiment")
    run.add_argument("--scale", default="quick", help="quick (minutes on a CPU) or paper (default: quick)")
    run.add_argument("--seeds", type=int, help="number of seeds")
    run.add_argument("--seed", type=int, help="the base seed (same as --set seed=S)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set train.steps=500 (repeatable)")
    run.add_argument("--out", help="the run folder to create (default runs/<experiment>-<timestamp>)")
    run.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available)")

    resume = sub.add_parser("resume", help="finish an interrupted run from its checkpoints")
    resume.add_argument("run_dir")
    resume.add_argument("--device")
    resume.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="change a config key for the rest of the run, e.g. --set train.lr=1e-4 after a divergence")

    reproduce = sub.add_parser("reproduce", help="run every experiment and write an index page")
    reproduce.add_argument("--scale", default="quick")
    reproduce.add_argument("--out", default="runs", help="folder for the runs and index.html (default runs)")
    reproduce.add_argument("--device")
    reproduce.add_argument("--seed", type=int, help="the base seed of every experiment (default: each one's own)")

    report = sub.add_parser("report", help="rewrite a run folder's report.html")
    report.add_argument("run_dir")
    return parser


def _print_result(result) -> None:
    for claim in result.claims:
        verdict = "holds" if claim["holds"] else "FAILS"
        print(f"  [{verdict}] {claim['id']}: measured {claim['measured']}, expected {claim['expected']}")
    print(f"{result.path}: {sum(c['holds'] for c in result.claims)}/{len(result.claims)} claims hold; "
          f"report {result.folder.report_file}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iclab`` script; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        if args.command == "list":
            for name in experiments.names():
                print(f"{name:20s} {experiments.summary(name)}")
            return 0
        from . import api

        if args.command == "run":
            overrides = args.overrides + ([] if args.seed is None else [f"seed={args.seed}"])
            _print_result(api.run(args.experiment, args.scale, args.seeds, overrides, args.out, args.device))
        elif args.command == "resume":
            _print_result(api.resume(args.run_dir, args.device, overrides=args.overrides))
        elif args.command == "reproduce":
            results, index = api.reproduce(args.scale, args.out, args.device, seed=args.seed)
            for result in results:
                _print_result(result)
            print(f"index: {index}")
        elif args.command == "report":
            print(api.report(args.run_dir))
    except ConfigError as err:
        print(f"iclab: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
