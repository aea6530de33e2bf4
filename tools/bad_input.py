"""Bad input, tried as a new user would: every case through the command line in a process of its own, its exit
status and what it said, into docs/bad-input.md.

    python tools/bad_input.py [--out docs/bad-input.md] [--only WORD]

Each case is a shell-free command in a scratch folder (a run folder made first where the case damages one); a case
passes when it exits with the status it should and prints no traceback. The page is the record;
tests/test_bad_input.py runs the same cases (all but the signals and the file size limit, tested elsewhere).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICLAB = [sys.executable, "-m", "iclab"]
SMOKE = ["--scale", "smoke"]


@dataclass
class Case:
    """One kind of bad input: ``what`` it is, its command (``{run}`` is a copy of a smoke run folder made for it,
    ``{tmp}`` the scratch folder), what ``prepare`` does to the scratch first, the exit status it should end with, and
    for a signal, when to send it. tests/test_bad_input.py runs every case but the signals and the file size limit
    (tests of their own: tests/test_cli.py, tests/test_reproduce.py) through ``iclab.cli.main``."""

    what: str
    argv: list[str]
    status: int = 2
    prepare: Callable[[Path], None] | None = None
    signal_when: tuple[Callable[[Path], bool], int] | None = None  # (a ready test on the scratch, the signal)
    needs_run: bool = False
    env: dict = field(default_factory=dict)

    def set_up(self, tmp: Path, smoke_run: Path) -> list[str]:
        """The scratch folder ``tmp`` made ready (a copy of ``smoke_run`` where the case needs one, then
        :attr:`prepare`) and the case's command line there, without the program (a run gets ``--out`` in ``tmp``)."""
        if self.needs_run:
            shutil.copytree(smoke_run, _run_folder(tmp))
        if self.prepare:
            self.prepare(tmp)
        argv = [part.replace("{tmp}", str(tmp)).replace("{run}", str(_run_folder(tmp))) for part in self.argv]
        return argv + ["--out", str(tmp / "out")] if argv[0] == "run" and "--out" not in argv else argv


def _run_folder(tmp: Path) -> Path:
    return tmp / "run"


def _write(name: str, text: bytes) -> Callable[[Path], None]:
    return lambda tmp: (_run_folder(tmp) / name).write_bytes(text)


def _remove(name: str) -> Callable[[Path], None]:
    return lambda tmp: (_run_folder(tmp) / name).unlink()


def _edit_config(old: str, new: str) -> Callable[[Path], None]:
    def edit(tmp: Path) -> None:
        path = _run_folder(tmp) / "config.yaml"
        path.write_text(path.read_text().replace(old, new, 1))
        (_run_folder(tmp) / "claims.json").unlink()  # unfinished, so that resume reads it

    return edit


def _trained(tmp: Path) -> bool:
    """The run in ``tmp/live`` has written its final checkpoint: its evaluation is under way."""
    return (tmp / "live" / "checkpoints" / "manifest.json").exists()  # written with each checkpoint


def _training(tmp: Path) -> bool:
    return (tmp / "live" / "config.yaml").exists()


def _file_under(tmp: Path) -> None:
    (tmp / "a-file").write_text("")


def _busy(tmp: Path) -> None:
    """A second process resuming the run while it is held: its lock file taken by a sleeping holder."""
    run = _run_folder(tmp)
    (run / "claims.json").unlink()
    holder = [
        sys.executable,
        "-c",
        f"from iclab.runs import RunFolder; import time\nwith RunFolder({str(run)!r}).writer(): time.sleep(60)",
    ]
    subprocess.Popen(holder, start_new_session=True)
    time.sleep(5)


LIVE = ["run", "gpt-linear", *SMOKE, "--out", "{tmp}/live"]
EVALUATING = [*LIVE, "--set", "eval_prompts=50000", "--set", "model.n_layers=16", "--set", "model.width=128"]
"""A smoke run whose evaluation takes a minute or two (about 6 GB), so that a signal reaches it there."""

CASES = [
    # sizes: huge, negative, zero, of every kind of size key
    Case("huge d (the fuzz test's draw)", ["run", "gpt-linear", "--set", "task.d=62020"]),
    Case("negative d", ["run", "gpt-linear", "--set", "task.d=-3"]),
    Case("zero d", ["run", "lsa-linear", "--set", "task.d=0"]),
    Case("huge width", ["run", "gpt-linear", "--set", "model.width=100000"]),
    Case("negative depth", ["run", "gpt-linear", "--set", "model.n_layers=-1"]),
    Case("heads that do not divide the width", ["run", "gpt-linear", "--set", "model.n_heads=3"]),
    Case("zero batch", ["run", "gpt-linear", "--set", "train.batch_size=0"]),
    Case("huge batch", ["run", "lsa-linear", "--set", "train.batch_size=1000000000"]),
    Case("one evaluation prompt", ["run", "lsa-linear", "--set", "eval_prompts=1"]),
    Case("huge evaluation", ["run", "gpt-linear", "--set", "eval_prompts=10000000000"]),
    Case("negative context length", ["run", "gpt-linear", "--set", "task.n_context=-5"]),
    Case("huge context length", ["run", "gpt-linear", "--set", "task.n_context=1000000"]),
    Case("negative steps", ["run", "lsa-linear", "--set", "train.steps=-10"]),
    Case("an empty alphabet list", ["run", "abstract-symbols", "--set", "sweep.n=[]"]),
    Case("huge alphabet", ["run", "abstract-symbols", "--set", "sweep.n=[16, 100000000]"]),
    Case("huge sequence length", ["run", "mesa-ar", "--set", "task.length=10000000"]),
    Case("huge d of function classes", ["run", "function-classes", "--set", "d=1000000"]),
    Case("a negative depth in a list", ["run", "algorithm-selection", "--set", "depths=[-1]"]),
    Case("huge vocabulary", ["run", "symbols-lm", "--set", "tokenizer.vocab_size=1000000000"]),
    # learning rates and other numbers
    Case("NaN learning rate", ["run", "lsa-linear", "--set", "train.lr=nan"]),
    Case("infinite learning rate", ["run", "lsa-linear", "--set", "train.lr=inf"]),
    Case("negative learning rate", ["run", "lsa-linear", "--set", "train.lr=-0.1"]),
    Case("a word for a number", ["run", "lsa-linear", "--set", "train.lr=abc"]),
    Case("a learning rate that diverges", ["run", "lsa-linear", *SMOKE, "--set", "train.lr=1e6", "--out", "{tmp}/r"]),
    Case("a memory limit that is a word", ["run", "lsa-linear", "--set", "limits.memory_gb=abc"]),
    # seeds
    Case("negative seed", ["run", "lsa-linear", "--seed", "-1"]),
    Case("a seed given twice", ["run", "lsa-linear", "--seed", "100", "--set", "seed=3"]),
    Case("zero seeds", ["run", "lsa-linear", "--seeds", "0"]),
    Case("reproduce seeds that are a word", ["reproduce", "--seeds", "many", "--out", "{tmp}/r"]),
    # names and syntax
    Case("unknown experiment", ["run", "no-such-experiment"]),
    Case("unknown key", ["run", "lsa-linear", "--set", "train.stepz=3"]),
    Case("unknown scale", ["run", "lsa-linear", "--scale", "enormous"]),
    Case("--set without =", ["run", "lsa-linear", "--set", "train.steps"]),
    Case("a needed block set to null", ["run", "lsa-linear", "--set", "train=null"]),
    Case("a grid whose keys go together", ["sweep", "lsa-linear", "--grid", "task.d=2,5", "--out", "{tmp}/s"]),
    Case(
        "an evaluation task value of the wrong type",
        ["eval", "{run}", "--model", "lsa-isotropic", "--task", "noise=abc"],
        needs_run=True,
    ),
    # run folders damaged or missing
    Case(
        "metrics.parquet damaged",
        ["report", "{run}"],
        prepare=_write("metrics.parquet", b"not parquet"),
        needs_run=True,
    ),
    Case("metrics.parquet missing", ["report", "{run}"], prepare=_remove("metrics.parquet"), needs_run=True),
    Case("claims.json damaged", ["report", "{run}"], prepare=_write("claims.json", b"{not json"), needs_run=True),
    Case("run.json missing (a report says so)", ["report", "{run}"], 0, _remove("run.json"), needs_run=True),
    Case(
        "config.yaml damaged, then resume", ["resume", "{run}"], prepare=_write("config.yaml", b"[: no"), needs_run=True
    ),
    Case(
        "steps: banana in config.yaml, then resume",
        ["resume", "{run}"],
        prepare=_edit_config("steps: ", "steps: banana #"),
        needs_run=True,
    ),
    Case("a finished run resumed", ["resume", "{run}"], needs_run=True),
    Case("two resumes of one run", ["resume", "{run}"], prepare=_busy, needs_run=True),
    Case("a report of no folder", ["report", "/nonexistent/run"]),
    Case("an archive of no folder", ["archive", "/nonexistent/runs", "{tmp}/records"]),
    Case("an output path under a file", ["run", "lsa-linear", "--out", "{tmp}/a-file/run"], prepare=_file_under),
    Case(
        "a full disk (file size limit 60 KB)",
        ["run", "lsa-linear", *SMOKE, "--out", "{tmp}/r"],
        env={"ICLAB_FSIZE": "61440"},
    ),
    # signals
    Case("SIGINT in training", LIVE + ["--set", "train.steps=100000"], 130, signal_when=(_training, signal.SIGINT)),
    Case("SIGINT in evaluation", EVALUATING, 130, signal_when=(_trained, signal.SIGINT)),
    Case("SIGKILL in training", LIVE + ["--set", "train.steps=100000"], -9, signal_when=(_training, signal.SIGKILL)),
    Case("SIGKILL in evaluation", EVALUATING, -9, signal_when=(_trained, signal.SIGKILL)),
]


def _file_size_limit(size: str) -> Callable[[], None]:
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (int(size), resource.RLIM_INFINITY))


def run_case(case: Case, tmp: Path, smoke_run: Path) -> dict:
    """Run one case in ``tmp``: its exit status, the last line it wrote on stderr, how many lines it wrote there and
    whether a traceback showed."""
    argv = case.set_up(tmp, smoke_run)
    limit = _file_size_limit(case.env["ICLAB_FSIZE"]) if "ICLAB_FSIZE" in case.env else None
    started = time.perf_counter()
    process = subprocess.Popen(
        [*ICLAB, *argv], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit
    )
    if case.signal_when:
        ready, number = case.signal_when
        deadline = time.monotonic() + 300
        while not ready(tmp) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        process.send_signal(number)
    _, err = process.communicate(timeout=900)
    lines = [line for line in err.splitlines() if line.startswith("iclab")]  # not the training's progress lines
    return {
        "status": process.returncode,
        "said": lines[-1] if lines else "",
        "lines": len(lines),
        "traceback": "Traceback" in err,
        "seconds": time.perf_counter() - started,
        "command": "iclab " + " ".join(case.argv),
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def page(rows: list[tuple[Case, dict]]) -> str:
    """docs/bad-input.md: a row a case."""
    good = sum(r["status"] == c.status and not r["traceback"] for c, r in rows)
    out = [
        "# Bad input",
        "",
        f"Written by `tools/bad_input.py`: {len(rows)} kinds of bad input, each tried through the command line in a "
        "process of its own (tests/test_bad_input.py runs them too) on a scratch copy of a smoke run where it needs "
        f"one. {good} of {len(rows)} end as they should (the exit status in the table, no traceback). Exit 2 is a "
        "refusal or a failure explained in one line; "
        "130 an interruption, which says how to go on; −9 a SIGKILL, which prints nothing (the run folder resumes: "
        "tests/test_reproduce.py); 0 a command that did its work and warned.",
        "",
        "| # | bad input | command | exit | iclab's lines | what it said |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, (case, result) in enumerate(rows, 1):
        flag = "" if result["status"] == case.status and not result["traceback"] else f" **(expected {case.status})**"
        traceback = " (a traceback)" if result["traceback"] else ""
        out.append(
            f"| {k} | {_cell(case.what)} | `{_cell(result['command'])}` | {result['status']}{flag} | "
            f"{result['lines']}{traceback} | {_cell(result['said'][:300])} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bad-input.md")
    parser.add_argument("--only", help="only the cases whose description holds this word")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.only is None or args.only in c.what]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        smoke_run = Path(scratch) / "smoke-run"
        subprocess.run([*ICLAB, "run", "lsa-linear", *SMOKE, "--out", str(smoke_run)], check=True, capture_output=True)
        for k, case in enumerate(cases):
            tmp = Path(scratch) / f"case{k}"
            tmp.mkdir()
            result = run_case(case, tmp, smoke_run)
            rows.append((case, result))
            ok = result["status"] == case.status and not result["traceback"]
            print(f"{'ok ' if ok else 'BAD'} {case.what}: exit {result['status']}: {result['said'][:160]}", flush=True)
    if args.only is None:
        args.out.write_text(page(rows))
        print(f"written: {args.out}")
    return 0 if all(r["status"] == c.status and not r["traceback"] for c, r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
