"""Faults off the happy path (issue 55, build items 2-4): checkpoints checked against the run's manifest, with a
fall-back from a damaged latest one; one writer per run; a full disk at every write site of a run, and SIGKILL at
random instants: each ends in one line, and `resume` then gives the numbers of a run that never stopped."""

import dataclasses
import errno
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import THREADS

import iclab.train
from iclab import api
from iclab.cli import main
from iclab.models import LinearSelfAttention
from iclab.prompts import PairedFormat
from iclab.runs import MANIFEST, Manifest, RunFolder, sha256_of
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.train import PREVIOUS, STATE, WEIGHTS, TrainConfig, data_source, train

# lsa-linear at its smoke scale, smaller still: 10 steps, a checkpoint every 5, TensorBoard events (a write site).
TINY = ["train.steps=10", "train.checkpoint_every=5", "eval_prompts=200", "flow.steps=200"]
TINY += ["log.tensorboard=true"]
RUN = ["run", "lsa-linear", "--scale", "smoke", *(f"--set={o}" for o in TINY)]
PROGRESS = re.compile(r"\S+: step \d+/\d+, ")  # a training progress line (stderr without a terminal)


def _lines(err: str) -> list[str]:
    """stderr without the training progress lines."""
    return [line for line in err.splitlines() if not PROGRESS.match(line)]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The tiny run, uninterrupted: the numbers every stopped and resumed run must end with."""
    torch.set_num_threads(THREADS)
    return api.run("lsa-linear", "smoke", overrides=TINY, out=tmp_path_factory.mktemp("whole") / "run", progress=False)


def _assert_same_numbers(path: Path, whole) -> None:
    folder = RunFolder.open(path)
    assert folder.read_claims() == whole.claims
    columns = ["setting", "model", "seed", "step", "n", "metric"]
    ours, theirs = (f.read_metrics().sort_values(columns, ignore_index=True) for f in (folder, whole.folder))
    pd.testing.assert_frame_equal(ours, theirs)
    assert folder.report_file.exists() and (folder.path / "tb").is_dir() and folder.figures()


def _copy(whole, to: Path, finished: bool = True) -> Path:
    shutil.copytree(whole.path, to)
    if not finished:
        for name in ("claims.json", "report.html", "run.json"):
            (to / name).unlink()
    return to


# Checkpoints recorded in the manifest, checked, and a damaged latest one falling back to the previous.

TASK = LinearRegression(GaussianInputs(3), n_context=10)
CONFIG = TrainConfig(steps=20, batch_size=32, lr=0.01, optimizer="adamw", log_every=5, checkpoint_every=5, keep=[3])


def _train(root: Path, callback=None, config: TrainConfig = CONFIG):
    checkpoints = root / "checkpoints"
    return train(
        lambda g: LinearSelfAttention(4, init_scale=0.2, generator=g),
        data_source(TASK, PairedFormat(), None),
        config,
        seeds=[0, 1],
        checkpoint_dir=checkpoints,
        manifest=Manifest(checkpoints),
        name="lsa",
        progress=False,
        callback=callback,
    )


def _stopped_at(step_to_stop: int):
    def stop(step, models):
        if step == step_to_stop:
            raise KeyboardInterrupt

    return stop


def _params(result) -> list[torch.Tensor]:
    return [torch.cat([p.flatten() for p in m.parameters()]) for m in result.models]


def _assert_same_models(a, b) -> None:
    assert all(torch.equal(x, y) for x, y in zip(_params(a), _params(b)))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("uninterrupted"))


def test_every_checkpoint_file_is_recorded_with_its_sha256_and_the_previous_one_is_kept(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, _stopped_at(15))  # stopped before its save at step 15: the latest is 10, the previous 5
    checkpoints = tmp_path / "checkpoints"
    files = json.loads((checkpoints / MANIFEST).read_text())["files"]
    expected = {
        f"lsa/seed{s}/{where}{name}": step
        for s in (0, 1)
        for where, step in (("", 10), (f"{PREVIOUS}/", 5))
        for name in (WEIGHTS, STATE)
    }
    expected.update({f"lsa/seed{s}/step3.safetensors": 3 for s in (0, 1)})
    assert {key: entry["step"] for key, entry in files.items()} == expected
    for key, entry in files.items():
        assert sha256_of(checkpoints / key) == entry["sha256"] and (checkpoints / key).stat().st_size == entry["bytes"]
    assert not list(checkpoints.rglob("*.tmp"))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_previous_one_in_one_line(
    damage, tmp_path, uninterrupted, caplog
):
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, _stopped_at(15))
    latest = tmp_path / "checkpoints" / "lsa" / "seed1" / (WEIGHTS if damage == "truncate" else STATE)
    data = bytearray(latest.read_bytes())
    if damage == "truncate":
        del data[len(data) // 2 :]
    else:
        data[-3] ^= 0xFF  # one byte of a tensor: the file still reads
    latest.write_bytes(bytes(data))
    seen = []
    with caplog.at_level(logging.WARNING, logger="iclab.train"):
        resumed = _train(tmp_path, lambda step, models: seen.append(step))
    assert [r.getMessage() for r in caplog.records] == [
        f"lsa: {latest} is damaged (not the file the manifest recorded); it resumes from its previous checkpoint, "
        "at step 5"
    ]
    assert seen[0] == 10  # both seeds went back to step 5
    _assert_same_models(resumed, uninterrupted)
    manifest = Manifest(tmp_path / "checkpoints")
    for key in manifest.files():  # the damaged file was replaced by the next save, and every file is as recorded
        assert Manifest.matches(tmp_path / "checkpoints" / key, manifest.entry(tmp_path / "checkpoints" / key)), key


def test_with_no_usable_checkpoint_left_a_model_trains_again_from_the_start(tmp_path, uninterrupted, caplog):
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, _stopped_at(15))
    seed0 = tmp_path / "checkpoints" / "lsa" / "seed0"
    for path in (seed0 / WEIGHTS, seed0 / PREVIOUS / WEIGHTS):
        path.write_bytes(path.read_bytes()[:100])
    seen = []
    with caplog.at_level(logging.WARNING, logger="iclab.train"):
        resumed = _train(tmp_path, lambda step, models: seen.append(step))
    assert len(caplog.records) == 1 and "no usable checkpoint is left: it trains again from the start" in caplog.text
    assert seen[0] == 5
    _assert_same_models(resumed, uninterrupted)


def test_a_save_stopped_at_any_of_its_renames_resumes_exactly(tmp_path, monkeypatch):
    """Every rename of a run's checkpoints (and of its manifest) in turn is where it stops: the files the save had
    written take their places on resume (it had committed) or are left (it had not), never a mix."""
    short = dataclasses.replace(CONFIG, steps=6, batch_size=8, log_every=3, checkpoint_every=3, keep=[2])
    uninterrupted = _train(tmp_path / "whole", config=short)
    replace, calls = os.replace, []

    def counted(src, dst):
        calls.append(dst)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", counted)
    _train(tmp_path / "count", config=short)
    total = len(calls)
    # The kept step (2 files, the manifest); 2 saves (4 files, the previous 4 moved aside, the manifest).
    assert total == 17
    for stop in range(total):
        calls.clear()

        def stopping(src, dst, stop=stop):
            if len(calls) == stop:
                raise KeyboardInterrupt
            calls.append(dst)
            replace(src, dst)

        monkeypatch.setattr(os, "replace", stopping)
        with pytest.raises(KeyboardInterrupt):
            _train(tmp_path / str(stop), config=short)
        monkeypatch.setattr(os, "replace", replace)
        resumed = _train(tmp_path / str(stop), config=short)
        assert all(torch.equal(x, y) for x, y in zip(_params(resumed), _params(uninterrupted))), f"stopped at {stop}"
        manifest = Manifest(tmp_path / str(stop) / "checkpoints")  # every file the resumed run left is as recorded
        assert manifest.files() and all(Manifest.matches(p, e) for p, e in manifest.entries().items()), stop


def test_eval_and_export_refuse_a_damaged_checkpoint_in_one_line(tmp_path, whole, capsys):
    run = _copy(whole, tmp_path / "run")
    weights = run / "checkpoints" / "lsa-isotropic" / "seed0" / WEIGHTS
    weights.write_bytes(weights.read_bytes()[:-8])
    for argv in (["eval", str(run), "--model", "lsa-isotropic"], ["export", str(run), str(tmp_path / "export")]):
        if argv[0] == "export":
            argv += ["--model", "lsa-isotropic"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"iclab: error: {weights} is damaged"), err
    assert not (tmp_path / "export").exists() and not list(run.glob("eval-*"))
    assert main(["eval", str(run), "--model", "lsa-anisotropic"]) == 0  # the other models still read


def test_a_run_written_before_manifests_still_resumes_and_loads(tmp_path, whole):
    run = _copy(whole, tmp_path / "run", finished=False)
    (run / "checkpoints" / MANIFEST).unlink()
    for previous in run.glob(f"checkpoints/*/seed*/{PREVIOUS}"):
        shutil.rmtree(previous)
    assert main(["resume", str(run)]) == 0
    _assert_same_numbers(run, whole)
    assert main(["eval", str(run), "--model", "lsa-isotropic"]) == 0


# One writer per run.

HOLD = """
import sys, time
from iclab.runs import RunFolder
with RunFolder(sys.argv[1]).writer():
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_is_taken_over(
    tmp_path, whole, capsys, caplog
):
    run = _copy(whole, tmp_path / "run", finished=False)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        for argv in (["resume", str(run)], [*RUN, "--out", str(run)]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"being trained by process {holder.pid} on " in err, err
        assert not RunFolder(run).finished
    finally:
        holder.kill()
        holder.wait()
    with caplog.at_level(logging.WARNING, logger="iclab.runs"):
        assert main(["resume", str(run)]) == 0
    assert f"took over the lock {run / '.lock'} from process {holder.pid} on " in caplog.text
    _assert_same_numbers(run, whole)
    assert (run / ".lock").read_text() == ""  # released: the next writer reports no holder


# A full disk at every write site of a run.


def _no_space(path=None):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), None if path is None else str(path))


def _fail_checkpoints(after: int):
    """Every checkpoint file written after the first ``after`` fails (with 3, the second save of the first model)."""

    def fail(monkeypatch):
        write, written = iclab.train._write_pending, []

        def write_pending(tensors, path, metadata):
            if len(written) >= after:
                raise _no_space(path)
            written.append(path)
            return write(tensors, path, metadata)

        monkeypatch.setattr(iclab.train, "_write_pending", write_pending)

    return fail


def _fail_files_named(name: str):
    """Every write of a file called ``name`` (through :func:`iclab.runs.write_atomic`'s scratch file) fails."""

    def fail(monkeypatch):
        write_text, to_parquet = Path.write_text, pd.DataFrame.to_parquet

        def text(self, *args, **kwargs):
            if self.name.startswith(f".{name}."):
                raise _no_space()
            return write_text(self, *args, **kwargs)

        def parquet(self, path, *args, **kwargs):
            if Path(path).name.startswith(f".{name}."):
                raise _no_space()
            return to_parquet(self, path, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", text)
        monkeypatch.setattr(pd.DataFrame, "to_parquet", parquet)

    return fail


def _fail_figures(monkeypatch):
    import matplotlib.figure

    def savefig(self, *args, **kwargs):
        raise _no_space()

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)


def _fail_events(monkeypatch):
    from torch.utils.tensorboard import SummaryWriter

    def add_scalar(self, *args, **kwargs):
        raise _no_space()

    monkeypatch.setattr(SummaryWriter, "add_scalar", add_scalar)


SITES = {
    "first checkpoint": (_fail_checkpoints(0), "checkpoints/lsa-isotropic/seed0/"),
    "later checkpoint": (_fail_checkpoints(3), "checkpoints/lsa-isotropic/seed0/"),
    "manifest": (_fail_files_named("manifest.json"), "checkpoints/manifest.json"),
    "metrics": (_fail_files_named("metrics.parquet"), "metrics.parquet"),
    "figures": (_fail_figures, "figures/"),
    "run.json": (_fail_files_named("run.json"), "run.json"),
    "claims": (_fail_files_named("claims.json"), "claims.json"),
    "report": (_fail_files_named("report.html"), "report.html"),
    "events": (_fail_events, None),
}


@pytest.mark.parametrize("site", SITES)
def test_a_full_disk_at_any_write_site_ends_in_one_line_and_resume_finishes_the_run(
    site, tmp_path, whole, monkeypatch, capsys, caplog
):
    fail, where = SITES[site]
    out = tmp_path / "run"
    fail(monkeypatch)
    with caplog.at_level(logging.WARNING):
        code = main([*RUN, "--out", str(out)])
    monkeypatch.undo()
    lines = _lines(capsys.readouterr().err)
    if site == "events":  # TensorBoard is for watching: its failure turns it off, the run goes on (item 5)
        warned = [r.getMessage() for r in caplog.records]
        assert code == 0 and len(warned) == 1 and "tensorboard logging failed" in warned[0], warned
        assert "No space left on device" in warned[0] and not lines
        assert RunFolder(out).read_claims() == whole.claims
        return
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"iclab: error: lsa-linear: cannot write {out}/{where}") and (
        f"(No space left on device): free some space on its disk, then `iclab resume {out}` finishes the run"
        in lines[0]
    ), lines[0]
    assert not RunFolder(out).report_file.exists() and not list(out.rglob("*.iclab-tmp"))  # (claims.json precedes it)
    assert main(["resume", str(out)]) == 0
    _assert_same_numbers(out, whole)


# SIGKILL at random instants.


def _kill_and_resume(tmp_path: Path, whole, instants: int, seed: int) -> None:
    """A subprocess `iclab run` killed ``instants`` times, each after a random delay (drawn from ``seed``) from the
    moment its folder exists, over the whole run: training, checkpoints, evaluation, figures, report, the last
    files; `resume` then finishes each to the uninterrupted run's numbers."""
    argv = [sys.executable, "-m", "iclab", *RUN]
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}  # the threads of the uninterrupted run

    def start(out: Path) -> tuple[subprocess.Popen, float]:
        proc = subprocess.Popen(
            [*argv, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        while not (out / "config.yaml").exists() and proc.poll() is None:
            time.sleep(0.01)
        return proc, time.perf_counter()

    proc, began = start(tmp_path / "timed")
    assert proc.wait() == 0
    span = time.perf_counter() - began
    draw = random.Random(seed)
    for k in range(instants):
        out = tmp_path / f"killed{k}"
        proc, began = start(out)
        time.sleep(max(0.0, draw.uniform(0, span) - (time.perf_counter() - began)))
        proc.kill()
        proc.wait()
        if not RunFolder(out).finished or not RunFolder(out).report_file.exists():
            assert main(["resume", str(out)]) == 0, f"kill {k}"
        _assert_same_numbers(out, whole)


def test_a_run_killed_at_4_random_instants_resumes_to_the_same_numbers(tmp_path, whole):
    _kill_and_resume(tmp_path, whole, instants=4, seed=56)


@pytest.mark.slow
def test_a_run_killed_at_20_random_instants_resumes_to_the_same_numbers(tmp_path, whole):
    _kill_and_resume(tmp_path, whole, instants=20, seed=55)
