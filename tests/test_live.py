"""Training you can watch: the metrics file and TensorBoard events grow at every logging step, and a
Weights & Biases run (offline here: no network) receives the training rows, the final metrics and the verdicts."""

import json
import struct

import pandas as pd
import pytest

from iclab import api
from iclab.report import live

SMOKE = ["train.steps=20", "train.log_every=5", "covariances={isotropic: null}"]
MODEL = "model == 'lsa-isotropic'"  # the Adam-trained one (the flow model trains beside it)


def test_metrics_and_events_are_readable_while_the_model_trains(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setattr(live, "REWRITE_SECONDS", 0.0)  # every logging step rewrites the metrics file
    seen = []
    update = live.LiveLog.update

    def watch(self, new, so_far):  # what a person watching the folder sees after each logging step
        update(self, new, so_far)
        metrics = pd.read_parquet(self.folder.metrics_file)
        events = EventAccumulator(str(self.folder.path / "tb" / "seed0")).Reload()
        steps = [e.step for e in events.Scalars("isotropic/lsa-isotropic/train_loss")]
        if new[0]["model"] == "lsa-isotropic":
            seen.append((new[0]["step"], metrics.query(f"metric == 'train_loss' and {MODEL}").step.tolist(), steps))

    monkeypatch.setattr(live.LiveLog, "update", watch)
    out = tmp_path / "run"
    api.run("lsa-linear", "smoke", overrides=[*SMOKE, "log.tensorboard=true"], out=out, progress=False)
    assert seen == [(step, list(range(5, step + 1, 5)), list(range(5, step + 1, 5))) for step in (5, 10, 15, 20)]
    final = EventAccumulator(str(out / "tb" / "seed0")).Reload().Scalars("isotropic/lsa-isotropic/train_loss")
    assert [e.step for e in final] == [5, 10, 15, 20]  # the finished run's events hold the history once


def _wandb_records(path):
    """The history and summary items of an offline W&B run file (a LevelDB-style log of protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, position, pending, found = path.read_bytes(), 32768, 7, b"", {"history": [], "summary": {}}
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header is padding
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last fragment of one
            record = pb.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                found["history"].append({i.key or "/".join(i.nested_key): i.value_json for i in record.history.item})
            elif record.WhichOneof("record_type") == "summary":
                found["summary"].update({i.key or "/".join(i.nested_key): i.value_json for i in record.summary.update})
    return found


def test_a_wandb_run_offline_gets_the_training_rows_final_metrics_and_verdicts(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    result = api.run("lsa-linear", "smoke", overrides=[*SMOKE, "log.wandb=true"], out=out, progress=False)
    (offline,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    records = _wandb_records(offline)
    key = "isotropic/lsa-isotropic/seed0/train_loss"
    losses = [(json.loads(r["train_step"]), json.loads(r[key])) for r in records["history"] if key in r]
    history = result.metrics.query(f"metric == 'train_loss' and {MODEL}")
    assert [step for step, _ in losses] == history.step.tolist() == [5, 10, 15, 20]
    assert [loss for _, loss in losses] == pytest.approx(history.value.tolist(), rel=1e-6)
    for claim in result.claims:
        assert json.loads(records["summary"][f"claim/{claim['id']}"]) == claim["holds"]
    ols = result.metrics.query("model == 'ols' and metric == 'mse'").value.item()
    assert json.loads(records["summary"]["isotropic/ols/mse"]) == pytest.approx(ols)


def test_a_logger_whose_package_is_missing_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(live.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(api.ConfigError, match=r"log.wandb=true needs the wandb package: pip install 'iclab\[wandb\]'"):
        api.run("lsa-linear", "smoke", overrides=["log.wandb=true"], out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_wandb_without_a_login_falls_back_offline_in_one_line(tmp_path, monkeypatch, caplog):
    """Issue 55, item 11: `log.wandb=true` with no W&B login and no terminal ended in a wandb traceback and a folder
    with only config.yaml. W&B refuses an online run (as with no API key); the run logs offline, says so once and
    finishes."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    init = wandb.init

    def no_login(*args, **kwargs):
        if kwargs.get("mode") != "offline":
            raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")
        return init(*args, **kwargs)

    monkeypatch.setattr(wandb, "init", no_login)
    out = tmp_path / "run"
    with caplog.at_level("WARNING"):
        result = api.run("lsa-linear", "smoke", overrides=[*SMOKE, "log.wandb=true"], out=out, progress=False)
    (line,) = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert "could not start online (No API key configured." in line and f"logging offline to {out / 'wandb'}" in line
    assert result.folder.finished and list((out / "wandb").glob("offline-run-*/run-*.wandb"))


def test_a_logger_that_fails_while_the_run_goes_is_turned_off_in_one_line(tmp_path, monkeypatch, caplog):
    """TensorBoard and W&B failures never end a run (a full disk under tb/, say)."""

    def full(self, rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(live.TensorBoardWriters, "add", full)
    with caplog.at_level("WARNING"):
        result = api.run(
            "lsa-linear", "smoke", overrides=[*SMOKE, "log.tensorboard=true"], out=tmp_path / "run", progress=False
        )
    (line,) = [r.getMessage() for r in caplog.records if "logging failed" in r.getMessage()]
    assert line.startswith("iclab: tensorboard logging failed (No space left on device)") and result.folder.finished
