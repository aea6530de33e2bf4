"""Sweeps: grid parsing and naming, and whole sweeps of a tiny experiment on a local Ray."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from matplotlib.image import imread

import iclab
from iclab.api import sweep_changes
from iclab.claims import Claim, judged_at, not_measured, over_seeds_test, paper
from iclab.cli import main
from iclab.config import ConfigError
from iclab.report import write_sweep_report
from iclab.report.sweep import _key_figure, point_values
from iclab.runs import RunFolder, SweepFolder
from iclab.sweeps import _write_tables, expand, parse_grid, point_name

TINY = [
    "--set",
    "train.steps=30",
    "--set",
    "train.warmup=0",
    "--set",
    "flow.steps=200",
    "--set",
    "eval_prompts=1000",
    "--set",
    "seeds=1",
    "--set",
    "covariances={isotropic: null}",
]


def test_grid_parsing_keeps_bracketed_commas_and_reads_exponents():
    grid = parse_grid(["train.lr=1e-3,0.01", "covariances.anisotropic=[1,2],[3,4]", "task.inputs=gaussian"])
    assert grid == {"train.lr": [0.001, 0.01], "covariances.anisotropic": [[1, 2], [3, 4]], "task.inputs": ["gaussian"]}
    for bad in (["train.lr"], ["train.lr="], ["a=1", "a=2"]):
        with pytest.raises(ConfigError):
            parse_grid(bad)


def test_expand_and_point_names():
    points = expand({"task.d": [2, 3], "seed": [0, 1]})
    assert points == [
        {"task.d": 2, "seed": 0},
        {"task.d": 2, "seed": 1},
        {"task.d": 3, "seed": 0},
        {"task.d": 3, "seed": 1},
    ]
    assert point_name(points[1]) == "task.d=2__seed=1"
    assert point_name({"inputs": "gaussian", "scales": [0.5, 1]}) == "inputs=gaussian__scales=[0.5,1]"
    with pytest.raises(ConfigError):
        expand({"task.d": []})


@pytest.mark.parametrize(
    "grid, message",
    [
        (["--grid", "task.dd=2,3"], "unknown config key 'task.dd'"),
        (["--grid", "train.steps=2,abc"], "expects int"),
        ([], "at least one --grid"),
        (["--grid", "task.d=2,3", "--cpus-per-trial", "1000"], "asks for 1000 CPUs"),
        (["--grid", "task.d=2,3", "--gpus-per-trial", "-1"], "must be >= 0"),
        (
            ["--grid", "task.d=2,3", "--metric", "mes"],
            "--metric 'mes': lsa-linear logs no such metric; did you mean mse",
        ),
    ],
)
def test_bad_grid_exits_2_before_any_run(tmp_path, capsys, grid, message):
    out = tmp_path / "sweep"
    assert main(["sweep", "lsa-linear", *grid, "--out", str(out), *TINY]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "experiment, grid, message",
    [
        ("gd-mechanism", "depths=[1],[0]", "depths must be"),
        ("lsa-linear", "task.d=5,0", "task.d must be a positive integer"),
    ],
)
def test_a_point_the_experiment_cannot_run_exits_2_before_ray_starts(
    experiment, grid, message, tmp_path, capsys, monkeypatch
):
    import ray

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray, "init", no_ray)
    out = tmp_path / "sweep"
    assert main(["sweep", experiment, "--grid", grid, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_a_2x2_sweep_on_local_ray_writes_runs_tables_and_report(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "lsa-linear", "--grid", "task.d=2,3", "--grid", "train.lr=0.02,0.05", "--out", str(out), *TINY]
    assert main(argv) == 0
    names = {"task.d=2__train.lr=0.02", "task.d=2__train.lr=0.05", "task.d=3__train.lr=0.02", "task.d=3__train.lr=0.05"}
    assert {p.name for p in out.iterdir() if p.is_dir() and p.name not in ("figures", ".locks")} == names
    assert all((out / name / "claims.json").exists() for name in names)
    table = pd.read_parquet(out / "sweep.parquet")
    assert {"task.d", "train.lr", "point", "metric", "value"} <= set(table.columns)
    assert set(table.groupby(["task.d", "train.lr"]).point.first()) == names
    claims = pd.read_parquet(out / "claims.parquet")
    assert set(claims.point) == names and claims.holds.dtype == "boolean" and claims.holds.notna().all()
    assert {p.name for p in (out / "figures").iterdir()} == {"task_d.png", "train_lr.png"}
    assert "Claims across points" in (out / "report.html").read_text()
    assert "4 of 4 points finished" in capsys.readouterr().out
    points = pd.read_parquet(out / "points.parquet")
    assert points.node.nunique() == 1 and points.node.str.fullmatch("[0-9a-f]{56}").all()  # a local Ray: one node
    assert points.node_ip.notna().all()
    again = iclab.resume_sweep(out, progress=False)  # nothing left to run: the tables keep each point's node
    assert again.points[["point", "node", "node_ip"]].equals(points[["point", "node", "node_ip"]])
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0 and (out / "report.html").exists()


def test_a_failing_point_fails_alone_with_its_error(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "lsa-linear", "--grid", "train.lr=1e6,0.02", "--out", str(out), *TINY]) == 1  # one failure
    points = pd.read_parquet(out / "points.parquet").set_index("point")
    assert points.loc["train.lr=0.02", "status"] == "finished"
    error = points.loc["train.lr=1000000.0", "error"]
    assert (
        points.loc["train.lr=1000000.0", "status"] == "failed"
        and "diverged (loss" in error
        and "times its start" in error
    )
    assert (out / "train.lr=0.02" / "claims.json").exists() and not (out / "train.lr=1000000.0").exists()
    assert "[failed] train.lr=1000000.0" in capsys.readouterr().out


def test_a_killed_sweep_resumes_without_rerunning_finished_points(tmp_path):
    out = tmp_path / "sweep"
    # One point at a time (each reserves every CPU), so the kill lands between or inside points.
    argv = [
        sys.executable,
        "-m",
        "iclab",
        "sweep",
        "lsa-linear",
        "--grid",
        "task.d=2,3",
        "--seeds",
        "2",
        "--cpus-per-trial",
        str(os.cpu_count()),
        "--out",
        str(out),
        *TINY,
    ]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list(out.glob("*/claims.json")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/claims.json")}
    assert 1 <= len(finished) < 4, "the kill should land after the first point and before the last"
    result = iclab.resume_sweep(out, progress=False)  # the Python API of `iclab sweep --resume DIR`
    assert result.failed == 0 and result.table.point.nunique() == 4
    # The killed pass wrote no table, so the node of a point it finished is not known (never a made-up one).
    assert result.points.set_index("point").node[list(finished)].isna().all()
    assert len(list(out.glob("*/claims.json"))) == 4
    assert {name: (out / name / "claims.json").stat().st_mtime_ns for name in finished} == finished


def test_claims_judged_elsewhere_are_neither_passes_nor_failures_in_a_sweep(tmp_path):
    grid = {"task.d": [2, 3]}
    sweep = SweepFolder.create(
        {
            "experiment": "lsa-linear",
            "scale": "quick",
            "grid": grid,
            "overrides": {},
            "metric": "train_loss",
            "cpus_per_trial": 1,
            "gpus_per_trial": 0,
        },
        out=tmp_path / "sweep",
    )
    points = expand(grid)
    for point in points:  # finished point folders written by hand: the tables read only their files
        d = point["task.d"]
        run = RunFolder.create(
            "lsa-linear", {"experiment": "lsa-linear", "task": {"d": d}}, out=sweep.run(point_name(point)).path
        )
        run.write_metrics([{"model": "lsa", "step": 10, "metric": "train_loss", "value": 1.0 / d}])
        far = Claim("far", "P", "needs the paper's steps", 0.5, "< 0.1", False, "paper", "trained", "Fig 1")
        run.write_claims(
            [
                Claim("near", "P", "holds at d = 2", d, "< 3", d < 3, "paper", "trained", "Fig 1"),
                judged_at(far, "paper", "too few steps", needed=1e5, reached=20),
                over_seeds_test("gain", "P", "a lower loss", {}, (1.0, 0.9), 2.0, about=paper("§5")),
                not_measured(Claim("empty", "P", "k < d", {}, "< 1", False, "paper", "trained", "F"), "d = 1"),
            ]
        )
    _write_tables(sweep, points, {point_name(p): ("finished", None) for p in points})
    claims = pd.read_parquet(sweep.claims_file)
    assert claims.holds.tolist() == [True, pd.NA, pd.NA, pd.NA, False, pd.NA, pd.NA, pd.NA]
    assert claims.judged_at.fillna("").tolist() == ["", "paper", "", "", "", "paper", "", ""]
    assert claims.over_seeds.tolist() == [False, False, True, False] * 2
    page = write_sweep_report(sweep).read_text()
    across = page.split("Claims across points")[1].split("Claims by point")[0]
    assert "<td>near</td><td class='fail'>1 / 2</td><td>task.d=3</td>" in across
    assert "<td>far</td><td class='elsewhere'>measured, judged at paper scale (2)</td><td>–</td>" in across
    # A point runs one seed: a claim judged over seeds is measured there, never judged (it once failed the page).
    assert "<td>gain</td><td class='elsewhere'>measured, judged over seeds (2)</td><td>–</td>" in across
    assert "<td>empty</td><td class='elsewhere'>not measured (2)</td><td>–</td>" in across
    by_point = page.split("Claims by point")[1]
    assert "1 / 1 <span class='elsewhere'>(+1 judged at paper scale; +1 judged over seeds; +1 not measured)" in by_point


def test_a_points_value_keeps_its_models_apart():
    """Each model's last logged value, averaged over its run's seeds only (never over models)."""
    metrics = pd.DataFrame(
        {
            "point": ["p"] * 6,
            "model": ["a", "a", "a", "b", "b", None],
            "seed": [0, 0, 1, 0, 0, None],
            "step": [5, 10, 10, 5, 10, None],
            "metric": ["loss"] * 6,
            "value": [3.0, 1.0, 2.0, 30.0, 10.0, 7.0],
        }
    )
    assert point_values(metrics, "loss").to_dict("records") == [
        {"point": "p", "model": "a", "value": 1.5},
        {"point": "p", "model": "b", "value": 10.0},
    ]
    untrained = metrics.assign(step=None)  # a metric of no training step: every row, a theory's as model –
    assert point_values(untrained, "loss").set_index("model").value.to_dict() == {"a": 2.0, "b": 20.0, "–": 7.0}


def test_the_sweep_figure_has_a_panel_per_model(tmp_path):
    values = pd.DataFrame({"lr": [0.1, 0.2] * 2, "model": ["a", "a", "b", "b"], "value": [1.0, 2.0, 10.0, 20.0]})
    figure = _key_figure(tmp_path / "lr.png", values, "lr", [], "loss", "one run per point")
    assert imread(figure).shape[1] == 2 * 5.0 * 110  # two panels of 5 inches at 110 dpi


def test_a_sweep_over_seeds_trains_one_seed_a_point(tmp_path, monkeypatch):
    """gd-mechanism's quick scale trains two seeds a run: a sweep over seeds 100-102 would train 101 twice."""
    from iclab import sweeps

    monkeypatch.setattr(sweeps, "_run", lambda folder, address, progress: folder.read_spec())
    spec = sweeps.sweep("gd-mechanism", ["train.steps=100,200"], seeds=3, overrides=["seed=100"], out=tmp_path / "s")
    assert spec["grid"]["seed"] == [100, 101, 102] and spec["overrides"]["seeds"] == 1
    kept = sweeps.sweep("gd-mechanism", ["train.steps=100"], seeds=2, overrides=["seeds=2"], out=tmp_path / "t")
    assert kept["overrides"]["seeds"] == 2  # asked for: kept


def test_a_sweep_judged_by_older_claims_is_rejudged_point_by_point_without_training_again(tmp_path, capsys):
    """A sweep whose points were judged by an older claims version (their run.json says so) is judged again as a new
    sweep beside it: each finished point's weights and training history carried over, an interrupted point finished
    from its checkpoints; a point whose recipe changed since it ran is refused, and so is a sweep judged already."""
    import json
    import shutil

    import torch
    from safetensors.torch import load_file

    from iclab import experiments

    old = tmp_path / "ladder"
    assert main(["sweep", "lsa-linear", "--grid", "train.lr=0.02,0.05,0.08", "--out", str(old), *TINY]) == 0
    version = experiments.get("lsa-linear").claims_version
    for point in ("train.lr=0.02", "train.lr=0.05"):  # judged by the claims before the current ones
        run = RunFolder(old / point)
        run.write_info({**run.read_info(), "fingerprint": {**run.read_info()["fingerprint"], "claims": version - 1}})
    (old / "train.lr=0.05" / "claims.json").unlink()  # interrupted after its training: it finishes in the new sweep
    shutil.rmtree(old / "train.lr=0.08")  # never started: it runs afresh
    assert main(["rejudge", str(old)]) == 0
    assert "3 of 3 points finished" in capsys.readouterr().out
    new = old.with_name(f"ladder-claims{version}")
    assert SweepFolder.open(new).read_spec()["rejudged_from"] == "ladder"
    assert not (old / "train.lr=0.05" / "claims.json").exists()  # the old sweep is left as it was
    assert not json.loads((new / "train.lr=0.08" / "run.json").read_text())["resumed"]
    for point in ("train.lr=0.02", "train.lr=0.05"):
        info = json.loads((new / point / "run.json").read_text())
        assert info["fingerprint"]["claims"] == version and info["recipe_changes"]["train.lr"] == float(point[9:])
        assert info["resumed"]  # from the copied checkpoints, at their last step
        for weights in (old / point).glob("checkpoints/*/seed*/model.safetensors"):
            before, after = load_file(weights), load_file(new / point / weights.relative_to(old / point))
            assert all(torch.equal(before[k], after[k]) for k in before)
        trained = lambda run: pd.read_parquet(run / "metrics.parquet").query("metric == 'train_loss'")
        assert trained(new / point)[["model", "step", "value"]].equals(trained(old / point)[["model", "step", "value"]])
    assert set(pd.read_parquet(new / "claims.parquet").point) == {"train.lr=0.02", "train.lr=0.05", "train.lr=0.08"}
    assert sweep_changes(SweepFolder(old)) == [f"claims version {version - 1} (now {version})"]
    assert sweep_changes(SweepFolder(new)) == []
    with pytest.raises(ConfigError, match="already judged by the current claims"):
        iclab.rejudge_sweep(new, progress=False)
    config = RunFolder(old / "train.lr=0.02").read_config()
    RunFolder(old / "train.lr=0.02").write_config({**config, "eval_prompts": 999})  # not the point's recipe
    assert sweep_changes(SweepFolder(old))[0].startswith("recipe changed since: eval_prompts 999 → 1000")
    with pytest.raises(ConfigError, match="not a run of its scale's current recipe"):
        iclab.rejudge_sweep(old, progress=False)
    shutil.rmtree(old / "train.lr=0.02" / "checkpoints")
    with pytest.raises(ConfigError, match="finished without keeping its checkpoints"):
        iclab.rejudge_sweep(old, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ladder", f"ladder-claims{version}"]  # nothing half-made
