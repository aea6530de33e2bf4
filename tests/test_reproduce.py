"""``iclab reproduce --seeds``: one run per experiment and span of seeds, resumable after a kill."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iclab import api
from iclab.claims import measured_text
from iclab.cli import main
from iclab.config import ConfigError
from iclab.runs import RunFolder

TINY = [
    "--set",
    "train.steps=60",
    "--set",
    "train.warmup=0",
    "--set",
    "flow.steps=200",
    "--set",
    "train.checkpoint_every=10",
    "--set",
    "train.log_every=10",
    "--set",
    "eval_prompts=500",
    "--set",
    "covariances={isotropic: null}",
]

# `iclab ...` in a process that SIGKILLs itself as the run of seeds 100-101 writes its third checkpoint
# file of seed 101 (two are on disk by then): a kill in the middle of training, at the same place every time.
KILLED_AT_SEED_1 = """
import os, signal, sys
from iclab import train
from iclab.cli import main

write, saves = train._write_pending, []
def write_then_die(tensors, path, *args, **kwargs):
    written = write(tensors, path, *args, **kwargs)
    if "-seeds100-101-" in str(path) and "seed101" in str(path):
        saves.append(path)
        if len(saves) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    return written
train._write_pending = write_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_seeds_are_a_count_or_a_range():
    assert api.parse_seeds("3") == api.parse_seeds(3) == [100, 101, 102]  # a count: evaluation seeds
    assert api.parse_seeds("0-2") == [0, 1, 2]  # tuning seeds: a range
    assert api.parse_seeds("0-4") == [0, 1, 2, 3, 4] and api.parse_seeds(" 2 - 3 ") == [2, 3]
    assert api.parse_seeds([5, 7]) == [5, 7]
    for bad in ("0", "3-1", "-1", "a", "1,2", "", 0):
        with pytest.raises(ConfigError):
            api.parse_seeds(bad)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0"], "at least one seed"),
        (["--seeds", "4-2"], "at least one seed"),
        (["--seeds", "x"], "a count (e.g. 3) or a range"),
        (["--seeds", "2", "--seed", "1"], "not both"),
        (["--only", "lsa-linear,nope", "--seeds", "2"], "unknown experiment 'nope'"),
        (["--only", ","], "at least one experiment"),
        (["--only", "lsa-linear", "--set", "train.stepz=3"], "unknown config key"),
        (["--only", "lsa-linear", "--jobs", "0"], "--jobs must be >= 1"),
    ],
)
def test_bad_reproduce_input_exits_2_writing_nothing(argv, message, tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path / "runs"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_a_killed_reproduction_resumes_and_keeps_its_finished_run(tmp_path, capsys):
    root = tmp_path / "runs"
    argv = ["reproduce", "--seeds", "100-101", "--only", "lsa-linear", "--out", str(root), *TINY]
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_SEED_1, *argv], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    (run,) = root.glob("lsa-linear-seeds100-101-*")
    assert not RunFolder(run).finished and RunFolder(run).has_checkpoint

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert [p.name for p in root.glob("lsa-linear-*")] == [run.name]  # no new folder
    assert json.loads((run / "run.json").read_text())["resumed"] is True
    assert f"{run}: " in out and "experiment   seeds" in out
    index = (root / "index.html").read_text()
    assert "also 1 variant (not counted)" in index and "not finished" not in index  # TINY is not the recipe
    finished_at = (run / "claims.json").stat().st_mtime_ns
    assert main(argv) == 0
    assert (run / "claims.json").stat().st_mtime_ns == finished_at  # kept, not rerun

    # The resumed run measures what an uninterrupted one measures, each seed what it measures alone.
    fresh = tmp_path / "fresh"
    assert main(["reproduce", "--seeds", "100-101", "--only", "lsa-linear", "--out", str(fresh), *TINY]) == 0
    assert main(["reproduce", "--seeds", "101-101", "--only", "lsa-linear", "--out", str(fresh), *TINY]) == 0
    (whole,), (alone,) = fresh.glob("lsa-linear-seeds100-101-*"), fresh.glob("lsa-linear-seed101-*")
    claims = {path: json.loads((path / "claims.json").read_text()) for path in (run, whole, alone)}
    assert [c["measured"] for c in claims[run]] == [c["measured"] for c in claims[whole]]
    for beside, by_itself in zip(claims[whole], claims[alone]):
        assert beside["by_seed"]["101"]["holds"] == by_itself["holds"]
        assert measured_text(beside["by_seed"]["101"]["measured"]) == measured_text(by_itself["measured"])


def test_a_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
    root = tmp_path / "runs"
    overrides = [arg for arg in TINY if arg != "--set"]
    config = api.resolved_config("lsa-linear", "quick", [*overrides, "seed=0", "seeds=1"])
    stale = RunFolder.create("lsa-linear", config, out=root / "lsa-linear-seed0-20260101-000000")
    other = RunFolder.create(
        "lsa-linear", {**config, "eval_prompts": 400}, out=root / "lsa-linear-seed0-20260101-000001"
    )
    results, index = api.reproduce(root=root, seeds="0-0", only=["lsa-linear"], overrides=overrides, progress=False)
    assert not stale.path.exists()  # nothing to resume: removed and run again in a new folder
    assert other.path.exists() and not other.finished  # another config: not this reproduction's run
    assert results[0].folder.finished and results[0].path.name.startswith("lsa-linear-seed0-")
    assert results[0].path not in (stale.path, other.path) and index == root / "index.html"


def test_reproduce_runs_the_evaluation_seeds_in_one_run_per_experiment_by_default(tmp_path, capsys):
    root = tmp_path / "runs"
    overrides = [arg for arg in TINY if arg != "--set"]
    (result,), index = api.reproduce(root=root, only=["lsa-linear"], overrides=overrides, progress=False)
    config = result.folder.read_config()
    assert (config["seed"], config["seeds"]) == (100, 5) and result.path.name.startswith("lsa-linear-seeds100-104-")
    assert all(set(c["by_seed"]) == {"100", "101", "102", "103", "104"} for c in result.claims)
    assert "also 1 variant (not counted)" in index.read_text()  # TINY is not the recipe
    with pytest.raises(ConfigError, match="sets each run's seeds"):
        api.reproduce(root=root, only=["lsa-linear"], overrides={"seeds": 3}, progress=False)


def test_a_base_seed_is_every_runs_seed(tmp_path):
    root = tmp_path / "runs"
    (result,), _ = api.reproduce("smoke", root=root, seed=7, only=["gd-mechanism"], progress=False)
    assert result.folder.read_config()["seed"] == 7 and result.path.name.startswith("gd-mechanism-2")
    with pytest.raises(ConfigError, match="as --seed"):
        api.reproduce("smoke", root=root, seed=7, only=["gd-mechanism"], overrides={"seed": 3}, progress=False)


def test_runs_in_parallel_processes_measure_what_one_process_measures(tmp_path, capsys):
    overrides = [arg for arg in TINY if arg != "--set"]
    runs = {
        jobs: api.reproduce(
            root=tmp_path / str(jobs),
            seeds=[100, 102],
            only=["lsa-linear"],
            overrides=overrides,
            jobs=jobs,
            progress=False,
        )[0]
        for jobs in (1, 2)
    }
    for one, two in zip(runs[1], runs[2]):  # seeds 100 and 102: two spans, two runs
        assert two.folder.finished and one.path.name[:-16] == two.path.name[:-16]  # the same seeds
        # The same numbers up to float32 rounding: one process runs 2 threads, each of two runs 1, and on some CPUs
        # the threads' split of a reduction changes its last bits (measured: 2.6e-8 relative).
        measured = [dict(_leaves([c["measured"] for c in run.claims])) for run in (one, two)]
        assert measured[0] and measured[0].keys() == measured[1].keys()
        for path, value in measured[0].items():
            expected = pytest.approx(value, rel=1e-6, abs=1e-12) if isinstance(value, float) else value
            assert measured[1][path] == expected, path


def _leaves(value, path=()):
    """(path, leaf) of every number or string in nested lists and dicts (``pytest.approx`` compares flat ones)."""
    if isinstance(value, dict | list):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


SLOW_RUN = """
import os, time
from pathlib import Path

def one(progress, plan):
    Path(plan).write_text(str(os.getpid()))
    if not plan.endswith("quick"):
        time.sleep(300)
"""

TWO_SLOW_RUNS = """
import sys
import slow_run
from iclab.api import _finished_runs
list(_finished_runs(slow_run.one, [sys.argv[1] + "/a", sys.argv[1] + "/b"], 2, False))
"""


ORDERED_RUN = """
import time
from pathlib import Path

def one(progress, plan):
    Path(plan).write_text(f"{time.time()} {progress}")
"""


def test_a_parallel_reproduction_starts_its_longest_plans_first_and_its_workers_write_lines(tmp_path, monkeypatch):
    (tmp_path / "ordered_run.py").write_text(ORDERED_RUN)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers get the parent's path
    import ordered_run

    expected = {"short": 1.0, "long": 30.0, "middle": 10.0}
    plans = [str(tmp_path / name) for name in expected]
    done = dict(api._finished_runs(ordered_run.one, plans, 2, True, lambda plan: expected[Path(plan).name]))
    assert sorted(done) == [0, 1, 2]
    started = {name: (tmp_path / name).read_text().split() for name in expected}
    assert max(started, key=lambda name: float(started[name][0])) == "short"  # queued behind both others
    # stderr is no terminal here (a log file): each worker's training writes a line per logging step
    assert {flag for _, flag in started.values()} == {"True"}


STOPPED_BY_CTRL_C = """
import sys
import slow_run
from iclab.api import _finished_runs
try:
    list(_finished_runs(slow_run.one, [sys.argv[1] + "/quick", sys.argv[1] + "/a", sys.argv[1] + "/b"], 3, False))
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")
def test_ctrl_c_of_a_parallel_reproduction_prints_no_worker_traceback(tmp_path):
    # Ctrl-C reaches the whole process group: two busy workers and an idle one, whose quick plan is done.
    (tmp_path / "slow_run.py").write_text(SLOW_RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen(
        [sys.executable, "-c", STOPPED_BY_CTRL_C, str(tmp_path)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = [tmp_path / "quick", tmp_path / "a", tmp_path / "b"]
    deadline = time.monotonic() + 120
    while not all(p.exists() and p.read_text() for p in started):
        assert parent.poll() is None and time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.2)
    time.sleep(1)  # the quick plan's worker waits for work
    os.killpg(parent.pid, signal.SIGINT)
    try:
        _, err = parent.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == 130
    assert "Traceback" not in err and "leaked" not in err, err


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_end_when_a_parallel_reproduction_is_terminated(tmp_path):
    # SIGTERM reaches the parent alone (Ctrl-C reaches the whole process group): its workers must not
    # go on running their experiments as orphans.
    (tmp_path / "slow_run.py").write_text(SLOW_RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", TWO_SLOW_RUNS, str(tmp_path)], env=env)
    started = [tmp_path / "a", tmp_path / "b"]
    deadline = time.monotonic() + 120
    while not all(p.exists() and p.read_text() for p in started):
        assert parent.poll() is None and time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.2)
    workers = [int(p.read_text()) for p in started]
    parent.terminate()
    parent.wait(30)
    deadline = time.monotonic() + 30
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in workers if _running(pid)]
    for pid in left:  # a failing test must not leave them sleeping on the machine
        os.kill(pid, signal.SIGKILL)
    assert not left
