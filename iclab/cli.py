"""The ``iclab`` command line: list, show, run, resume, rejudge, reproduce, sweep, report, archive,
compare, eval, identify, export.

Bad input (unknown experiment or key, wrong type, impossible shape) prints one line
``iclab: error: ...`` and exits with status 2; Ctrl-C prints one line (where a run stopped and how to
go on) and exits with 130. The API (torch, pandas, matplotlib) is imported only
by the verbs that run something, so ``iclab --help`` and ``iclab list`` answer at once.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

from . import experiments
from .claims import SMOKE_NOTE, SMOKE_SCALE, measured_text, summary, verdict_text
from .config import ConfigError, dump
from .formatting import duration
from .resources import describe_memory, out_of_memory
from .version import __version__


def _overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """The repeatable ``--set KEY=VALUE`` option (into ``args.overrides``) that every verb touching a config takes."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


SCALES_HELP = "smoke, quick, long or paper (default: quick)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iclab", description="A laboratory for in-context learning research.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress messages")
    parser.add_argument("--version", action="version", version=f"iclab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    for add in (_run_verbs, _reproduce_verb, _sweep_verb, _folder_verbs, _model_verbs):
        add(sub)
    return parser


def _run_verbs(sub) -> None:
    """``run``, ``show`` and ``resume``: one experiment's config, run or resumed."""
    run = sub.add_parser("run", help="run one experiment into a new run folder")
    run.add_argument("experiment")
    run.add_argument(
        "--scale",
        default="quick",
        help="smoke (the pipeline in seconds; its verdicts mean nothing), quick (minutes on a CPU), long (within "
        "an hour on a CPU, where defined) or paper (default: quick); `iclab list` shows each experiment's scales",
    )
    run.add_argument("--seeds", type=int, help="number of seeds")
    run.add_argument("--seed", type=int, help="the base seed (same as --set seed=S)")
    _overrides(run, "override a config key, e.g. --set train.steps=500 (repeatable)")
    run.add_argument("--out", help="the run folder to create (default runs/<experiment>-<timestamp>)")
    run.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available)")

    show = sub.add_parser("show", help="print an experiment's resolved config (nothing runs)")
    show.add_argument("experiment")
    show.add_argument("--scale", default="quick", help=SCALES_HELP)
    show.add_argument(
        "--against",
        metavar="SCALE",
        help="print only the keys where the scale's recipe differs from SCALE's (e.g. paper: the distance of a "
        "verdict from the paper's recipe)",
    )
    _overrides(show, "as for iclab run")

    resume = sub.add_parser(
        "resume",
        help="finish an interrupted run from its checkpoints (or afresh from its config.yaml); continue a finished "
        "one with --set train.steps=N as a new run",
    )
    resume.add_argument("run_dir")
    resume.add_argument("--device")
    _overrides(resume, "change a config key for the rest of the run, e.g. --set train.lr=1e-4 after a divergence")

    rejudge = sub.add_parser(
        "rejudge",
        help="judge a finished run's trained models by the current claims, as a new run folder beside it "
        "(<name>-claims<V>) that starts from a copy of its checkpoints; nothing trains again. A sweep folder: "
        "every point, as a new sweep <name>-claims<V> (its unfinished points train on from their checkpoints)",
    )
    rejudge.add_argument("run_dir", help="a run folder or a sweep folder")
    rejudge.add_argument("--device")


def _reproduce_verb(sub) -> None:
    """``reproduce``: every experiment, and the scoreboard."""
    reproduce = sub.add_parser("reproduce", help="run every experiment and write the scoreboard index.html")
    reproduce.add_argument("--scale", default="quick", help=SCALES_HELP)
    reproduce.add_argument("--out", default="runs", help="folder for the runs and index.html (default runs)")
    reproduce.add_argument("--device")
    reproduce.add_argument(
        "--seed", type=int, help="one run per experiment from this base seed, with each experiment's own seed count"
    )
    reproduce.add_argument(
        "--seeds",
        metavar="S",
        help="run every experiment once on these seeds, trained together and each judged: a count of evaluation "
        "seeds (3: seeds 100-102) or a range (0-4: tuning seeds are named by a range), into "
        "OUT/<experiment>-seeds<first>-<last>-<timestamp>; a rerun keeps finished runs and resumes the others "
        "(default: the evaluation seeds 100-104, which the scoreboard counts)",
    )
    reproduce.add_argument("--only", metavar="EXP,...", help="only these experiments (comma-separated)")
    reproduce.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run N experiments at once, each in its own process with 1/N of the CPU threads (default 1)",
    )
    _overrides(reproduce, "override a config key of every experiment run (repeatable)")


def _sweep_verb(sub) -> None:
    """``sweep``: a grid of runs on Ray."""
    sweep = sub.add_parser(
        "sweep",
        help="run an experiment over a grid of config values on Ray",
        description="Run EXPERIMENT at every grid point (x seeds), each point a run folder "
        "inside the sweep folder. Exit status: the number of failed points.",
    )
    sweep.add_argument("experiment", nargs="?", help="the experiment (omit with --resume)")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a swept config key and its values, e.g. --grid train.lr=0.01,0.1 (repeatable)",
    )
    sweep.add_argument("--seeds", type=int, metavar="K", help="run every point for K seeds (seed, seed+1, ...)")
    sweep.add_argument("--scale", default="quick", help=SCALES_HELP)
    _overrides(sweep, "a config change shared by every point (repeatable)")
    sweep.add_argument("--out", help="the sweep folder (default runs/sweep-<experiment>-<timestamp>)")
    sweep.add_argument(
        "--metric",
        default="train_loss",
        help="the metric the report draws per swept key; another than train_loss is checked against what the "
        "experiment logs (a smoke run of seconds) before the first point",
    )
    sweep.add_argument(
        "--claim",
        metavar="ID[:PATH]",
        help="follow a claim as a ladder: its number at every point (the measured value, at the dotted PATH into it; "
        "a claim judged over seeds: each seed's effect), against the one swept key with a band over seeds, the "
        "paper's number as a line, and whether it moves toward it (the report's Ladder section, ladder.json)",
    )
    sweep.add_argument(
        "--claim-target",
        type=float,
        metavar="X",
        help="the number the ladder should move toward (default: the paper's)",
    )
    sweep.add_argument(
        "--address", help="join a Ray cluster (its head's HOST:PORT, auto or ray://host:port); default: a local Ray"
    )
    sweep.add_argument("--cpus-per-trial", type=float, metavar="C", help="CPUs each point reserves (default 1)")
    sweep.add_argument(
        "--gpus-per-trial", type=float, metavar="G", help="GPUs each point reserves (default 0: runs on CPU)"
    )
    sweep.add_argument("--resume", metavar="DIR", help="finish an interrupted sweep folder")


def _folder_verbs(sub) -> None:
    """``report``, ``archive`` and ``compare``: they read folders (and write pages or records) and train nothing."""
    report = sub.add_parser(
        "report", help="rewrite a run or sweep folder's report.html, or a folder of runs' reports and index.html"
    )
    report.add_argument("run_dir")
    report.add_argument(
        "--seed-table", metavar="PATH", help="a folder of runs: also write its markdown claim x seed table to PATH"
    )
    report.add_argument(
        "--non-reproductions",
        metavar="PATH",
        help="a folder of runs: also write to PATH why each paper claim that does not reproduce does not (its "
        "distance to the paper's recipe, that recipe's cost, runs at it and ladders toward it, the diagnosis)",
    )
    report.add_argument(
        "--parity",
        metavar="PATH",
        help="a folder of runs: also write to PATH its parity page (each quantity measured by iclab and by the "
        "authors' own code at the same recipe, from the records under ROOT/parity)",
    )

    archive = sub.add_parser(
        "archive",
        help="copy the record of each finished run and each sweep (its finished points) of a folder of runs "
        "(config, run.json, metrics, claims; no checkpoints or figures) into DEST, a folder of runs small enough "
        "to commit that `iclab report` reads",
    )
    archive.add_argument("run_dir", metavar="ROOT", help="a folder of runs (e.g. runs/eval)")
    archive.add_argument(
        "dest", metavar="DEST", help="the folder of records (e.g. results); an older record of a run is replaced whole"
    )

    compare = sub.add_parser("compare", help="two finished runs side by side: config, claims, final metrics")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--html", metavar="PATH", help="also write the comparison as an HTML page")


def _model_verbs(sub) -> None:
    """``eval``, ``identify`` and ``export``: a trained model, evaluated, identified or written out."""
    evaluate = sub.add_parser(
        "eval",
        help="evaluate a trained model against reference learners, on changed tasks and shifted prompts",
        description="Evaluate one model of RUN (a finished run folder, an export or a Garg et al. run) at every "
        "prefix length against reference learners, with bootstrap bands; writes an evaluation folder.",
    )
    evaluate.add_argument("run_dir")
    evaluate.add_argument("--model", help="which of the run's models (needed when it has several)")
    evaluate.add_argument(
        "--seed",
        help="which of its seeds (needed when it has several), or all: every seed and their mean, with a band over "
        "seeds and prompts",
    )
    evaluate.add_argument("--step", help="a kept checkpoint's step, or all (every kept one); default: the latest")
    evaluate.add_argument(
        "--task",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="change the training task, e.g. --task d=3 noise=0.5 or --task class=quadratic",
    )
    evaluate.add_argument(
        "--shift",
        dest="shifts",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="shifts of iclab.shifts (standard, skewed, subspace, noisy, scale-x=<s>, ...; default: standard)",
    )
    evaluate.add_argument(
        "--learners",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="reference learners (ols, ridge=<λ>, <k>-nn, averaging, gd=<η>, lasso=<α>, tree[=<depth>], "
        "xgboost, net, zero; default: ols 3-nn averaging)",
    )
    evaluate.add_argument(
        "--out",
        help="the evaluation folder (default <run>/eval-<timestamp>; beside an export: <export>-eval-<timestamp>)",
    )
    evaluate.add_argument("--prompts", type=int, help="evaluation prompts (default: the run's eval_prompts, else 1000)")
    evaluate.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamplings (default 1000)")
    evaluate.add_argument("--attention", action="store_true", help="also draw the attention maps of two prompts")
    evaluate.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available)")

    identify = sub.add_parser(
        "identify",
        help="which learner a trained model matches per prefix, in which layer, and from which training step",
        description="Identify the learner one model of RUN (a finished run folder, an export or a Garg et al. run) "
        "implements: per prefix the closest learner of a panel by SPD/d with bootstrap bands, per layer linear probes "
        "with controls, with --ablate the same under a mean-ablated activation, with --timeline at every kept "
        "checkpoint; writes an identification folder.",
    )
    identify.add_argument("run_dir")
    identify.add_argument("--model", help="which of the run's models (needed when it has several)")
    identify.add_argument("--seed", type=int, help="which of its seeds (needed when it has several)")
    identify.add_argument("--step", type=int, help="a kept checkpoint's step (default: the latest)")
    identify.add_argument("--timeline", action="store_true", help="identify every kept checkpoint (train.keep)")
    identify.add_argument(
        "--learners", action="extend", nargs="+", default=[], metavar="NAME", help="learners to add to the panel"
    )
    identify.add_argument(
        "--epsilon", type=float, help="the largest SPD/d that counts as a match (default: max(σ², E[y²]/100)/d)"
    )
    identify.add_argument(
        "--ablate",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="activation names to mean-ablate, one at a time (e.g. blocks.0.attn.hook_z)",
    )
    identify.add_argument("--no-probes", dest="probes", action="store_false", help="leave out the per-layer probes")
    identify.add_argument(
        "--llc", action="store_true", help="also estimate the local learning coefficient (needs iclab[devinterp])"
    )
    identify.add_argument("--llc-lr", type=float, help="SGLD's step size ε (default 1e-4)")
    identify.add_argument("--llc-localization", type=float, help="SGLD's localisation γ (default 100)")
    identify.add_argument("--llc-chains", type=int, help="SGLD chains (default 4)")
    identify.add_argument("--llc-draws", type=int, help="draws per chain (default 200)")
    identify.add_argument("--prompts", type=int, default=1000, help="prompts compared on (default 1000)")
    identify.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamplings (default 1000)")
    identify.add_argument("--out", help="the folder to write (default <run>/identify-<timestamp>)")
    identify.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available)")

    export = sub.add_parser("export", help="write a trained model in the Hugging Face Hub layout (offline)")
    export.add_argument("run_dir")
    export.add_argument("out_dir", help="the folder to write (new, or empty)")
    export.add_argument("--model", help="which of the run's models (needed when it has several)")
    export.add_argument("--seed", type=int, help="which of its seeds (needed when it has several)")
    export.add_argument("--step", type=int, help="a kept checkpoint's step (default: the latest)")


def _number_or_all(text: str | None, refusal: str) -> int | str | None:
    """``--step`` or ``--seed`` of ``iclab eval``: a number, ``all`` or nothing (``refusal`` says what else is not)."""
    if text is None or text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{refusal}, got {text!r}") from None


def _eval(args, argv: list[str]) -> None:
    """The ``eval`` verb: evaluate, then print where it went and the errors at the largest prefix."""
    from .evaluation import evaluate
    from .report.evaluation import final_errors

    options = {"learners": args.learners} if args.learners else {}
    result = evaluate(
        args.run_dir,
        args.model,
        _number_or_all(args.seed, "--seed: a seed is an integer or all"),
        _number_or_all(args.step, "--step takes a checkpoint's step or all"),
        args.task,
        args.shifts or ["standard"],
        out=args.out,
        prompts=args.prompts,
        bootstrap=args.bootstrap,
        attention=args.attention,
        device=args.device,
        command=shlex.join(["iclab", *argv]),
        **options,
    )
    print(final_errors(result.metrics).to_string(float_format=lambda v: f"{v:.4g}"))
    print(f"{result.path}: report {result.folder.report_file}")


def _llc_settings(args) -> dict | bool:
    """``iclab identify``'s LLC flags as :class:`iclab.identification.llc.Settings` fields (False: no LLC)."""
    given = {"lr": args.llc_lr, "localization": args.llc_localization, "chains": args.llc_chains}
    given = {key: value for key, value in {**given, "draws": args.llc_draws}.items() if value is not None}
    if given and not args.llc:
        raise ConfigError(f"--llc-{next(iter(given))} sets the LLC's sampler: add --llc")
    return given if args.llc else False


def _identify(args, argv: list[str]) -> None:
    """The ``identify`` verb: identify, then print the answer at each prefix and where it went."""
    from .identification import identify

    result = identify(
        args.run_dir,
        args.model,
        args.seed,
        args.step,
        timeline=args.timeline,
        learners=args.learners,
        epsilon=args.epsilon,
        prompts=args.prompts,
        bootstrap=args.bootstrap,
        probes=args.probes,
        ablate=args.ablate,
        llc=_llc_settings(args),
        out=args.out,
        device=args.device,
        command=shlex.join(["iclab", *argv]),
    )
    summary = result.summary
    print(f"ε = {summary['epsilon']:.3g}; closest over k ≥ 1: {summary['closest_overall']}")
    if summary["llc"]:
        print(f"LLC λ̂ = {summary['llc']['mean']:.4g} ± {summary['llc']['std']:.2g} (chains' std)")
    for answer in summary["by_prefix"]:
        band = answer["spd"]
        print(
            f"k={answer['k']}: {answer['answer'] or 'none within ε'} (closest {answer['closest']}, SPD/d "
            f"{band['mean']:.3g} [{band['low']:.3g}, {band['high']:.3g}]; runner-up {answer['runner_up']})"
        )
    print(f"{result.path}: report {result.folder.report_file}")


def _sweep(args) -> int:
    """The ``sweep`` verb; returns the number of failed points (at most 125) as the exit status."""
    from . import sweeps

    resources = {"cpus_per_trial": args.cpus_per_trial, "gpus_per_trial": args.gpus_per_trial}
    if args.resume:
        if args.experiment or args.grid or args.seeds or args.overrides or args.claim or args.claim_target is not None:
            raise ConfigError(
                "--resume DIR continues a sweep as it was defined: give no experiment, --grid, --seeds, --set, --claim"
            )
        result = sweeps.resume_sweep(args.resume, address=args.address, **resources)
    else:
        if not args.experiment:
            raise ConfigError("sweep needs an experiment (or --resume DIR)")
        result = sweeps.sweep(
            args.experiment,
            args.grid,
            seeds=args.seeds,
            scale=args.scale,
            overrides=args.overrides,
            out=args.out,
            metric=args.metric,
            claim=args.claim,
            claim_target=args.claim_target,
            address=args.address,
            **{k: v for k, v in resources.items() if v is not None},
        )
    return _sweep_outcome(result)


def _rejudge_sweep(args) -> int:
    """``rejudge`` of a sweep folder; returns the number of failed points (at most 125) as the exit status."""
    from . import sweeps

    if args.device:
        raise ConfigError("--device: a sweep's points run on the devices its sweep.yaml gives them (gpus_per_trial)")
    return _sweep_outcome(sweeps.rejudge_sweep(args.run_dir))


def _sweep_outcome(result) -> int:
    """Print a sweep's finished points and failures; returns the number failed (at most 125)."""
    points = result.points
    print(
        f"{result.path}: {len(points) - result.failed} of {len(points)} points finished; report "
        f"{result.folder.report_file}"
    )
    for row in points[points["status"] != "finished"].itertuples():
        print(f"  [failed] {row.point}: {row.error}")
    return min(result.failed, 125)


def _scale_and_time(experiment: str):
    """A scale's name with the measured wall time of one run of its recipe, where one was measured."""

    def text(scale: str) -> str:
        measured = experiments.measured_time(experiment, scale)
        if measured is None:
            return scale
        if measured.get("estimated"):
            return f"{scale} (about {duration(measured['seconds'])} of training a seed, estimated)"
        run = "a seed" if measured["seeds_per_run"] == 1 else f"a run of {measured['seeds_per_run']} seeds"
        return f"{scale} ({duration(measured['seconds'])} {run})"

    return text


def _estimate(experiment: str, scale: str, config: dict, changed: bool) -> str:
    """What ``iclab show`` says of a run's time: the recipe's measured time, scaled by its seeds."""
    measured = experiments.measured_time(experiment, scale)
    if measured is None:
        return f"estimated time: not measured for {experiment} at {scale}"
    per_seed = measured["seconds"] / measured["seeds_per_run"]
    if measured.get("estimated"):  # a timed run's estimate of the training alone (benchmarks/recipe_cost.py)
        seeds = config.get("seeds", 1)
        return (
            f"estimated time: about {duration(per_seed * seeds)} of training for {seeds} seed{'s' * (seeds > 1)}, "
            f"from a timed run of {measured['timed_steps']} steps per model on {measured['threads']} thread(s) of "
            f"{measured.get('device', 'cpu')} (the evaluation not included), commit {measured['commit']}, "
            f"{measured['date']}"
        )
    seeds = config.get("seeds", 1)
    return (
        f"estimated time: about {duration(per_seed * seeds)} for {seeds} seed{'s' * (seeds > 1)}"
        f"{' (of the recipe: the overrides may change it)' if changed else ''}; measured "
        f"{duration(measured['seconds'])} a run of {measured['seeds_per_run']} seed(s), median of {measured['runs']}, "
        f"{measured['threads']} thread(s) on {measured['cpus']} CPUs, {measured['jobs'] or '?'} runs at a time, "
        f"commit {measured['commit']}, {measured['date']}"
    )


def _print_result(result) -> None:
    for claim in result.claims:
        reason = f" ({claim['reason']})" if claim.get("reason") else ""
        print(
            f"  [{verdict_text(claim)}] {claim['id']}: measured {measured_text(claim['measured'])}, "
            f"expected {claim['expected']}{reason}"
        )
    smoke = f" ({SMOKE_NOTE})" if result.folder.read_config().get("scale") == SMOKE_SCALE else ""
    print(f"{result.path}: {summary(result.claims)}{smoke}; report {result.folder.report_file}")


def _print_times(results, elapsed: float, jobs: int) -> None:
    """Each run's experiment, seeds, wall and CPU time (from its run.json), their totals, and the
    command's elapsed time (below the total wall when ``jobs`` runs went at once)."""
    from .report.html import seeds

    configs = [r.folder.read_config() for r in results]
    rows = [(c["experiment"], seeds(c), r.folder.read_info()) for c, r in zip(configs, results)]
    width = max(len("experiment"), *(len(name) for name, _, _ in rows))
    print(f"{'experiment':{width}s}  {'seeds':>6s}  {'wall time':>12s}  {'CPU time':>12s}")
    for name, seed, info in rows:
        print(
            f"{name:{width}s}  {seed:>6s}  {duration(info['wall_seconds']):>12s}  {duration(info['cpu_seconds']):>12s}"
        )
    print(
        f"{'total':{width}s}  {'':>6s}  {duration(sum(i['wall_seconds'] for _, _, i in rows)):>12s}  "
        f"{duration(sum(i['cpu_seconds'] for _, _, i in rows)):>12s}"
    )
    print(f"elapsed {duration(elapsed)}" + (f" ({jobs} runs at a time)" if jobs > 1 else ""))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iclab`` script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return _dispatch(args, argv)
    except ConfigError as err:  # one line (a line per item where it names several, e.g. skipped run folders)
        print("\n".join(f"iclab: error: {line}" for line in str(err).splitlines()), file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as err:  # an allocation that did not fit, outside a run (identify, report, …)
        if not out_of_memory(err):
            raise
        print(f"iclab: error: out of memory in `iclab {args.command}` ({type(err).__name__}: {err})", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # a run says where it stopped (api.RunInterrupted); others stop cleanly
        again = "; the same command again keeps the finished runs and resumes the others"
        print(f"iclab: {str(err) or 'interrupted'}" + (again if args.command == "reproduce" else ""), file=sys.stderr)
        return 130


def _dispatch(args, argv: list[str]) -> int:
    """Carry out the verb; returns the exit status."""
    if args.command == "list":
        _list()
        return 0
    if args.command == "archive":  # reads and copies folders only: no torch
        from .runs import archive

        written = archive(args.run_dir, args.dest)
        print(f"{args.dest}: {len(written)} record{'s' * (len(written) != 1)} of the runs and sweeps of {args.run_dir}")
        return 0
    if args.command == "compare":  # reads folders only: no torch
        from .report import compare_runs

        comparison = compare_runs(args.run_a, args.run_b)
        print(comparison.text(), end="")
        if args.html:
            print(f"html: {comparison.write_html(args.html)}")
        return 0
    from . import api

    if args.command == "show" and args.against:
        if args.overrides:
            raise ConfigError("--against compares two recipes: give no --set")
        distance = api.recipe_distance(args.experiment, args.scale, args.against)
        print(f"# {args.experiment}: {len(distance)} keys where {args.scale} differs from {args.against}")
        for key, (mine, theirs) in distance.items():
            print(f"{key}: {mine!r} → {theirs!r}")
    elif args.command == "show":
        config = api.resolved_config(args.experiment, args.scale, args.overrides)
        estimates = (_estimate(args.experiment, args.scale, config, bool(args.overrides)), describe_memory(config))
        print("".join(f"# {line}\n" for line in estimates) + dump(config), end="")
    elif args.command == "run":
        if args.seed is not None and any(o.partition("=")[0].strip() == "seed" for o in args.overrides):
            raise ConfigError("give the seed once: --seed S or --set seed=S, not both")
        overrides = args.overrides + ([] if args.seed is None else [f"seed={args.seed}"])
        _print_result(api.run(args.experiment, args.scale, args.seeds, overrides, args.out, args.device))
    elif args.command == "resume":
        _print_result(api.resume(args.run_dir, args.device, overrides=args.overrides))
    elif args.command == "rejudge" and (Path(args.run_dir) / "sweep.yaml").exists():
        return _rejudge_sweep(args)
    elif args.command == "rejudge":
        _print_result(api.rejudge(args.run_dir, args.device))
    elif args.command == "reproduce":
        _reproduce(args, api)
    elif args.command == "sweep":
        return _sweep(args)
    elif args.command == "report":
        print(api.report(args.run_dir, args.seed_table, args.non_reproductions, args.parity))
        if args.parity:
            print(f"parity: {args.parity}")
        if args.seed_table:
            print(f"seed table: {args.seed_table}")
        if args.non_reproductions:
            print(f"non-reproductions: {args.non_reproductions}")
    elif args.command == "eval":
        _eval(args, argv)
    elif args.command == "identify":
        _identify(args, argv)
    elif args.command == "export":
        from .hub import export

        print(export(args.run_dir, args.out_dir, args.model, args.seed, args.step))
    return 0


def _reproduce(args, api) -> None:
    """``iclab reproduce``: every run, each one's claims, the times and where the scoreboard went."""
    only = None if args.only is None else [name.strip() for name in args.only.split(",") if name.strip()]
    start = time.perf_counter()
    results, index = api.reproduce(
        args.scale,
        args.out,
        args.device,
        seed=args.seed,
        seeds=args.seeds,
        only=only,
        overrides=args.overrides,
        jobs=args.jobs,
    )
    for result in results:
        _print_result(result)
    _print_times(results, time.perf_counter() - start, args.jobs)
    print(f"index: {index}")


def _list() -> None:
    """``iclab list``: every experiment, its summary, scales and measured time a seed (no torch)."""
    for name in experiments.names():
        source = experiments.origin(name)
        print(f"{name:20s} {experiments.summary(name)}" + (f" [{source}]" if source else ""))
        print(f"{'':20s} scales: {', '.join(map(_scale_and_time(name), experiments.scales(name))) or '?'}")


if __name__ == "__main__":
    sys.exit(main())
