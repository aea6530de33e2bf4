"""Run folders: atomic creation, no trace of a failed start, and divergence that stays resumable."""

import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml
from safetensors import safe_open

from iclab import api
from iclab.cli import main
from iclab.runs import RunFolder
from iclab.train import STATE, FreshPrompts, checkpoint_folder

FAST = ["--set", "train.steps=6", "--set", "train.warmup=0", "--set", "eval_prompts=500", "--seeds", "2"]
FAST += ["--set", "flow.steps=200"]


@pytest.mark.parametrize(
    "overrides, device, message",
    [
        (["task.d=0"], None, "task.d must be a positive integer"),
        (["train.steps=-5"], None, "must be >= 1"),
        (["train.warmup=6"], None, "train.warmup (6) must be shorter than the run (train.steps 6)"),
        (["eval_prompts=1"], None, "eval_prompts must be >= 2 (a claim's statistic needs two samples), got 1"),
        (["covariances.anisotropic=[1.0, 1.0, 1.0, 1.0, -1.0]"], None, "eigenvalues must be positive"),
        ([], "tpu", "unknown device"),
    ],
)
@pytest.mark.parametrize("where", ["root", "new-out", "empty-out"])
def test_config_errors_leave_no_trace(overrides, device, message, where, tmp_path, capsys):
    out = tmp_path / "run"
    if where == "empty-out":
        out.mkdir()
    target = ["--out", str(out)] if where != "root" else []
    argv = ["run", "lsa-linear", *FAST, *(f"--set={o}" for o in overrides), *target]
    if device:
        argv += ["--device", device]
    if where == "root":  # the default folder goes under ./runs: run from tmp_path
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(tmp_path)
            assert main(argv) == 2
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    else:
        assert main(argv) == 2
        assert (where == "empty-out") == out.exists()
        assert not out.exists() or not any(out.iterdir())  # an empty --out given by the user stays, empty
    err = capsys.readouterr().err
    assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "experiment, override, message",
    [
        ("gd-mechanism", "depths=[2, 0]", "depths must be"),
        ("symbols-lm", "variants=[plain]", "variants must hold plain"),
        ("lsa-linear", "seeds=0", "seeds must be >= 1"),
    ],
)
def test_values_an_experiment_cannot_run_fail_before_any_folder(
    experiment, override, message, tmp_path, monkeypatch, capsys
):
    def no_run(*args):
        raise AssertionError("the experiment started")

    monkeypatch.setattr(api, "_execute", no_run)
    out = tmp_path / "run"
    assert main(["run", experiment, "--set", override, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_run_files_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from pathlib import Path

    import pandas as pd

    from iclab import claims
    from iclab.report import write_report

    folder = RunFolder.create("exp", {"experiment": "exp"}, out=tmp_path / "run")
    folder.write_metrics([{"model": "m", "metric": "mse", "value": 1.0}])
    write_text, to_parquet = Path.write_text, pd.DataFrame.to_parquet

    def torn_text(self, text, *args, **kwargs):  # killed halfway through writing the file
        write_text(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    def torn_parquet(self, path, *args, **kwargs):
        to_parquet(self, path, *args, **kwargs)
        Path(path).write_bytes(Path(path).read_bytes()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn_text)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", torn_parquet)
    writes = [
        lambda: folder.write_claims([claims.holds_if("c", "p", "s", 1, 1, True, about=claims.diagnostic())]),
        lambda: folder.write_config({"experiment": "exp", "changed": True}),
        lambda: folder.write_info({"a": 1}),
        lambda: folder.write_metrics([{"model": "other", "metric": "mse", "value": 2.0}]),
        lambda: RunFolder.create("exp", {"experiment": "exp"}, out=tmp_path / "other"),
    ]
    for write in writes:
        with pytest.raises(KeyboardInterrupt):
            write()
    monkeypatch.undo()
    assert not folder.finished and folder.read_config() == {"experiment": "exp"}
    assert folder.read_metrics().model.tolist() == ["m"]
    assert sorted(p.name for p in folder.path.iterdir()) == ["config.yaml", "metrics.parquet"]  # nor scratch files
    assert not (tmp_path / "other" / "config.yaml").exists()
    monkeypatch.setattr(Path, "write_text", torn_text)
    with pytest.raises(KeyboardInterrupt):
        write_report(folder)
    assert not folder.report_file.exists()


def test_concurrent_creates_get_distinct_folders(tmp_path):
    barrier, made = threading.Barrier(8), []

    def create():
        barrier.wait()
        made.append(RunFolder.create("exp", {"experiment": "exp"}, root=tmp_path).path)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8 and all((p / "config.yaml").exists() for p in made)


def test_an_out_folder_is_claimed_once(tmp_path):
    RunFolder.create("exp", {}, out=tmp_path / "run")
    with pytest.raises(Exception, match="not empty"):
        RunFolder.create("exp", {}, out=tmp_path / "run")


def test_a_run_killed_before_its_first_checkpoint_resumes_afresh_to_the_same_claims(tmp_path):
    overrides = [
        "train.steps=300",
        "train.warmup=0",
        "train.checkpoint_every=1000",
        "flow.steps=200",
        "eval_prompts=2000",
    ]  # one checkpoint per model, at its end
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "iclab", "run", "lsa-linear", "--seeds", "1", "--out", str(out)]
    proc = subprocess.Popen(
        [*argv, *(f"--set={o}" for o in overrides)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 60
    while not (out / "config.yaml").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)  # into the experiment: tasks built, the first model training
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    folder = RunFolder.open(out)
    assert not folder.has_checkpoint and not folder.finished, "the kill should land before the first checkpoint"
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "stale.png").write_bytes(b"partial")  # whatever a killed run had written is dropped
    assert main(["resume", str(out)]) == 0
    whole = api.run("lsa-linear", seeds=1, overrides=overrides, out=tmp_path / "whole", progress=False)
    resumed = folder.read_claims()
    assert [c["measured"] for c in resumed] == [c["measured"] for c in whole.claims] and len(resumed) == 8
    assert not (out / "figures" / "stale.png").exists() and folder.read_info()["resumed"] is True


def _plant_nan(monkeypatch, seed: int, from_step: int):
    """Make the training prompts of ``seed`` non-finite from step ``from_step`` (0-based) on."""
    original = FreshPrompts.batch

    def batch(self, s, step, device, batch_size):
        prompt = original(self, s, step, device, batch_size)
        if s == seed and step >= from_step:
            prompt.tokens[0, 0, 0] = float("nan")
        return prompt

    monkeypatch.setattr(FreshPrompts, "batch", batch)


def test_divergence_stops_with_one_line_and_stays_resumable(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    _plant_nan(monkeypatch, seed=1, from_step=3)
    assert main(["run", "lsa-linear", *FAST, "--set", "train.checkpoint_every=2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("iclab: error: lsa-linear: training of 'lsa-isotropic'")
    assert "seed 1 at step 4" in err and "iclab resume" in err
    for name in ("model", "state"):
        with safe_open(out / "checkpoints" / "lsa-isotropic" / "seed1" / f"{name}.safetensors", "pt") as f:
            assert f.metadata()["step"] == "2"  # the last good one
            assert all(f.get_tensor(k).isfinite().all() for k in f.keys())
    monkeypatch.undo()
    assert main(["resume", str(out), "--set", "train.lr=0.001"]) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["train"]["lr"] == 0.001 and config["resume_overrides"] == ["train.lr=0.001"]
    assert (out / "claims.json").exists()


def test_a_finite_blow_up_stops_like_a_non_finite_loss_and_stays_resumable(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    original = FreshPrompts.batch

    def batch(self, s, step, device, batch_size):  # seed 1's targets 1000 times larger from step 4 (1-based) on
        prompt = original(self, s, step, device, batch_size)
        if s == 1 and step >= 3:
            prompt.targets.mul_(1000.0)
        return prompt

    monkeypatch.setattr(FreshPrompts, "batch", batch)
    argv = [
        "run",
        "lsa-linear",
        *FAST,
        "--set",
        "train.steps=20",
        "--set",
        "train.checkpoint_every=2",
        "--out",
        str(out),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "iclab: error: lsa-linear: training of 'lsa-isotropic' diverged (loss "
    )
    assert "times its start, over 10000 times for 10 steps) for seed 1 at step 13" in err and "iclab resume" in err
    with safe_open(checkpoint_folder(out / "checkpoints", "lsa-isotropic", 1) / STATE, "pt") as f:
        assert f.metadata()["step"] == "2"  # the last one before the blow-up: those due after it were skipped
    monkeypatch.undo()
    assert main(["resume", str(out)]) == 0 and (out / "claims.json").exists()


def test_divergence_before_the_first_checkpoint_removes_the_folder(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    _plant_nan(monkeypatch, seed=0, from_step=0)
    assert main(["run", "lsa-linear", *FAST, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "seed 0 at step 1" in err and "run folder was removed" in err
    assert not out.exists()


def test_resume_rejects_unknown_or_impossible_overrides_and_keeps_the_config(tmp_path):
    out = tmp_path / "run"
    api.run(
        "lsa-linear",
        overrides=["train.steps=4", "train.warmup=0", "eval_prompts=500"],
        seeds=1,
        out=out,
        progress=False,
    )
    (out / "claims.json").unlink()
    config = (out / "config.yaml").read_text()
    with pytest.raises(Exception, match="unknown config key"):
        api.resume(out, overrides=["train.lrr=0.1"], progress=False)
    with pytest.raises(Exception, match="seeds must be >= 1"):
        api.resume(out, overrides=["seeds=0"], progress=False)
    assert (out / "config.yaml").read_text() == config and not (out / "claims.json").exists()


def test_latest_run_is_the_newest_finished_one_of_its_experiment(tmp_path):
    import os

    from iclab.config import ConfigError
    from iclab.runs import latest_run

    for name, finished_at in (
        ("lsa-linear-a", 100),
        ("lsa-linear-b", 300),
        ("lsa-linear-c", None),
        ("gpt-linear-d", 400),
    ):
        (tmp_path / name).mkdir()
        if finished_at is not None:
            (tmp_path / name / "claims.json").write_text("[]")
            os.utime(tmp_path / name / "claims.json", (finished_at, finished_at))
    assert latest_run("lsa-linear", tmp_path) == tmp_path / "lsa-linear-b"
    with pytest.raises(ConfigError, match="no finished mesa-ar run under"):
        latest_run("mesa-ar", tmp_path)


def test_runs_on_one_machine_share_its_cores(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    import torch

    from iclab import cores

    monkeypatch.setattr(cores, "cores", lambda: 4)
    monkeypatch.setenv("ICLAB_SHARE_CORES", "1")
    start = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        registry = tmp_path / "runs"
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            with cores.CoreShare(registry) as share:
                assert share.rebalance() == 4 and torch.get_num_threads() == 4  # alone: every core
                (registry / str(other.pid)).touch()  # another run starts
                (registry / "999999999").touch()  # a run that ended without unregistering
                assert share.rebalance() == 2 and torch.get_num_threads() == 2
                assert not (registry / "999999999").exists()
                other.kill()
                other.wait()
                assert share.rebalance() == 4  # the other ended: its cores come back
            assert torch.get_num_threads() == 4 and not any(registry.iterdir())
        finally:
            other.kill()
        monkeypatch.setenv("ICLAB_SHARE_CORES", "0")
        with cores.CoreShare(registry) as share:
            (registry / str(os.getppid())).touch()
            assert share.rebalance() == 4  # off: every core, whatever runs beside
    finally:
        torch.set_num_threads(start)


def test_run_json_names_the_commit_the_run_started_from(tmp_path, monkeypatch):
    """A checkout moved while a run trains does not rename the code that ran: the commit is read once, at the start."""
    from iclab.experiments.base import RunContext

    checkout = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setattr(api, "_git_commit", lambda: dict(checkout))
    trained = RunContext.trained

    def train_and_move(self, *args, **kwargs):
        checkout.update(commit="b" * 40, dirty=True)  # the checkout moves while the run trains
        return trained(self, *args, **kwargs)

    monkeypatch.setattr(RunContext, "trained", train_and_move)
    run = api.run("lsa-linear", "smoke", seeds=1, out=tmp_path / "run", progress=False)
    info = run.folder.read_info()
    assert (info["commit"], info["dirty"]) == ("a" * 40, False)
