"""The ``iclab`` command line: list, run, resume, reproduce, sweep, report, compare.

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

    resume = sub.add_parser("resume", help="finish an interrupted run from its checkpoints (or afresh from its config.yaml)")
    resume.add_argument("run_dir")
    resume.add_argument("--device")
    resume.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="change a config key for the rest of the run, e.g. --set train.lr=1e-4 after a divergence")

    reproduce = sub.add_parser("reproduce", help="run every experiment and write an index page")
    reproduce.add_argument("--scale", default="quick")
    reproduce.add_argument("--out", default="runs", help="folder for the runs and index.html (default runs)")
    reproduce.add_argument("--device")
    reproduce.add_argument("--seed", type=int, help="the base seed of every experiment (default: each one's own)")

    sweep = sub.add_parser("sweep", help="run an experiment over a grid of config values on Ray",
                           description="Run EXPERIMENT at every grid point (x seeds), each point a run folder "
                                       "inside the sweep folder. Exit status: the number of failed points.")
    sweep.add_argument("experiment", nargs="?", help="the experiment (omit with --resume)")
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                       help="a swept config key and its values, e.g. --grid train.lr=0.01,0.1 (repeatable)")
    sweep.add_argument("--seeds", type=int, metavar="K", help="run every point for K seeds (seed, seed+1, ...)")
    sweep.add_argument("--scale", default="quick", help="quick or paper (default: quick)")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="a config change shared by every point (repeatable)")
    sweep.add_argument("--out", help="the sweep folder (default runs/sweep-<experiment>-<timestamp>)")
    sweep.add_argument("--metric", default="train_loss", help="the metric the report draws per swept key")
    sweep.add_argument("--address", help="join a Ray cluster (auto or ray://host:port); default: a local Ray")
    sweep.add_argument("--cpus-per-trial", type=float, metavar="C", help="CPUs each point reserves (default 1)")
    sweep.add_argument("--gpus-per-trial", type=float, metavar="G", help="GPUs each point reserves (default 0: runs on CPU)")
    sweep.add_argument("--resume", metavar="DIR", help="finish an interrupted sweep folder")

    report = sub.add_parser("report", help="rewrite a run or sweep folder's report.html, or a folder of runs' reports and index.html")
    report.add_argument("run_dir")

    compare = sub.add_parser("compare", help="two finished runs side by side: config, claims, final metrics")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--html", metavar="PATH", help="also write the comparison as an HTML page")
    return parser


def _sweep(args) -> int:
    """The ``sweep`` verb; returns the number of failed points (at most 125) as the exit status."""
    from . import sweeps

    resources = {"cpus_per_trial": args.cpus_per_trial, "gpus_per_trial": args.gpus_per_trial}
    if args.resume:
        if args.experiment or args.grid or args.seeds or args.overrides:
            raise ConfigError("--resume DIR continues a sweep as it was defined: give no experiment, --grid, --seeds or --set")
        result = sweeps.resume_sweep(args.resume, address=args.address, **resources)
    else:
        if not args.experiment:
            raise ConfigError("sweep needs an experiment (or --resume DIR)")
        result = sweeps.sweep(args.experiment, args.grid, seeds=args.seeds, scale=args.scale, overrides=args.overrides,
                              out=args.out, metric=args.metric, address=args.address,
                              **{k: v for k, v in resources.items() if v is not None})
    points = result.points
    print(f"{result.path}: {len(points) - result.failed} of {len(points)} points finished; report {result.folder.report_file}")
    for row in points[points["status"] != "finished"].itertuples():
        print(f"  [failed] {row.point}: {row.error}")
    return min(result.failed, 125)


def _print_result(result) -> None:
    for claim in result.claims:
        verdict = "holds" if claim["holds"] else "FAILS"
        print(f"  [{verdict}] {claim['id']}: measured {claim['measured']}, expected {claim['expected']}")
    print(f"{result.path}: {sum(c['holds'] for c in result.claims)}/{len(result.claims)} claims hold; "
          f"report {result.folder.report_file}")


def _print_times(results) -> None:
    """Each experiment's wall and CPU time (from its run.json), and the total."""
    from .report.html import duration

    infos = [(r.folder.read_config()["experiment"], r.folder.read_info()) for r in results]
    width = max(len(name) for name, _ in infos)
    print(f"{'experiment':{width}s}  {'wall time':>12s}  {'CPU time':>12s}")
    for name, info in infos:
        print(f"{name:{width}s}  {duration(info['wall_seconds']):>12s}  {duration(info['cpu_seconds']):>12s}")
    print(f"{'total':{width}s}  {duration(sum(i['wall_seconds'] for _, i in infos)):>12s}  "
          f"{duration(sum(i['cpu_seconds'] for _, i in infos)):>12s}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iclab`` script; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        if args.command == "list":
            for name in experiments.names():
                print(f"{name:20s} {experiments.summary(name)}")
            return 0
        if args.command == "compare":  # reads folders only: no torch
            from .report import compare_runs

            comparison = compare_runs(args.run_a, args.run_b)
            print(comparison.text(), end="")
            if args.html:
                print(f"html: {comparison.write_html(args.html)}")
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
            _print_times(results)
            print(f"index: {index}")
        elif args.command == "sweep":
            return _sweep(args)
        elif args.command == "report":
            print(api.report(args.run_dir))
    except ConfigError as err:
        print(f"iclab: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
