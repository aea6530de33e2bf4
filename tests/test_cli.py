import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file

import iclab
from iclab import api, experiments
from iclab.claims import SMOKE_NOTE
from iclab.cli import main
from iclab.config import ConfigError
from iclab.formatting import duration
from iclab.runs import Recipe, RunFolder
from iclab.train import _SeedGroup

FAST = ["--set", "train.steps=40", "--set", "train.warmup=0", "--set", "eval_prompts=2000", "--seeds", "2"]
FAST += ["--set", "flow.steps=200"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "no-such-experiment"], "unknown experiment"),
        (["run", "lsa-linear", "--set", "train.stepz=3"], "unknown config key"),
        (["run", "lsa-linear", "--set", "train.steps=abc"], "expects int"),
        (["run", "lsa-linear", "--set", "covariances.anisotropic=[1.0, 2.0]"], "length d=5"),
        (["run", "lsa-linear", "--scale", "enormous"], "unknown scale"),
        (["run", "lsa-linear", "--seeds", "0"], "--seeds"),
        (["run", "lsa-linear", "--set", "train.lr=-0.1"], "train.lr must be a finite number >= 0"),
        (["run", "lsa-linear", "--set", "train.warmup=-1"], "train.warmup and weight_decay must be >= 0"),
        (["run", "lsa-linear", "--set", "train.clip=0"], "train.clip must be > 0"),
        (["run", "lsa-linear", "--seed", "-1"], "seed must be an integer in [0, 2^63)"),  # was 49 lines from numpy
        (["run", "lsa-linear", "--seed", "100", "--set", "seed=3"], "give the seed once"),  # 100 won, silently
        (["run", "lsa-linear", "--set", "train.lr=nan"], "train.lr must be a finite number"),  # "expects float"
        (["run", "lsa-linear", "--set", "train.lr=-inf"], "train.lr must be a finite number"),
        (["run", "abstract-symbols", "--set", "sweep.n=[]"], "sweep.n and copying.n need at least one"),  # min()
        (["report", "/nonexistent/run"], "not a run folder"),
        (["archive", "/nonexistent/runs", "/nonexistent/records"], "not a folder of runs"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "r")] if argv[0] == "run" else argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1


def test_an_output_path_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["run", "lsa-linear", "--out", str(tmp_path / "file" / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iclab: error: cannot create the run folder") and err.count("\n") == 1


def test_show_prints_the_resolved_config_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["show", "algorithm-selection", "--scale", "long", "--set", "train.lr=0.002"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["experiment"] == "algorithm-selection" and shown["scale"] == "long"
    assert shown["train"]["steps"] == 20000 and shown["train"]["lr"] == 0.002 and shown["model"]["width"] == 64
    assert not any(tmp_path.iterdir())
    assert main(["show", "lsa-linear", "--set", "train.lr=-1"]) == 2


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"iclab {iclab.__version__}"


def test_reproduce_names_the_experiment_a_key_is_unknown_to(tmp_path, capsys):
    assert main(["reproduce", "--set", "eval_prompts=100", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert re.match(r"iclab: error: [a-z-]+: unknown config key", err) and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # checked before anything ran


def test_module_entry_point_exit_status():
    done = subprocess.run([sys.executable, "-m", "iclab", "run", "nope"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.parametrize("experiment", experiments.names())
def test_every_experiment_runs_its_whole_pipeline_at_the_smoke_scale_in_seconds(experiment, tmp_path, capsys):
    out = tmp_path / experiment
    assert main(["run", experiment, "--scale", "smoke", "--out", str(out)]) == 0
    assert f"({SMOKE_NOTE})" in capsys.readouterr().out.splitlines()[-1]
    folder = RunFolder(out)
    assert folder.finished and folder.report_file.exists() and folder.figures() and folder.read_claims()
    assert folder.read_info()["wall_seconds"] < 60  # about 5 s on 2 cores: a smoke test, not a workload


def test_list_names_each_experiments_scales_and_measured_time(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "lsa-linear" in out and out.count("scales: smoke, quick") == len(experiments.names())
    measured = experiments.measured_time("lsa-linear", "quick")
    assert f"quick ({duration(measured['seconds'])} a seed)" in out


def test_show_estimates_the_time_from_the_measured_recipe(capsys):
    assert main(["show", "lsa-linear", "--set", "seeds=2"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    per_seed = experiments.measured_time("lsa-linear", "quick")["seconds"]
    assert first.startswith(f"# estimated time: about {duration(2 * per_seed)} for 2 seeds (of the recipe")
    assert main(["show", "lsa-linear", "--scale", "smoke"]) == 0
    assert capsys.readouterr().out.startswith("# estimated time: not measured for lsa-linear at smoke\n")


def test_run_writes_the_run_folder_and_never_overwrites(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "lsa-linear", "--out", str(out), *FAST]) == 0
    for name in ("config.yaml", "metrics.parquet", "claims.json", "report.html"):
        assert (out / name).exists(), name
    assert sorted(
        str(p.relative_to(out / "checkpoints")) for p in (out / "checkpoints").rglob("*.safetensors")
    ) == sorted(
        f"lsa-{s}/seed{k}/{f}.safetensors"
        for s in ("anisotropic", "isotropic")
        for k in (0, 1)
        for f in ("model", "state")
    )
    figures = {"training_curves.png", "learners.png", "weights.png", "flow.png"}
    # the first seed's figures in figures/, each later seed's apart
    assert {p.name for p in (out / "figures").iterdir()} == figures | {"seed1"}
    assert {p.name for p in (out / "figures" / "seed1").iterdir()} == figures
    claims = json.loads((out / "claims.json").read_text())
    assert {"id", "paper", "statement", "measured", "expected", "holds"} <= set(claims[0])
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert list(metrics.columns[:7]) == ["setting", "model", "seed", "step", "n", "metric", "value"]
    assert {"train_loss", "mse", "optimal_loss", "preconditioner_cosine"} <= set(metrics.metric)
    assert "report" in capsys.readouterr().out
    before = (out / "config.yaml").read_text()
    assert main(["run", "lsa-linear", "--out", str(out), *FAST]) == 2
    assert (out / "config.yaml").read_text() == before
    assert main(["report", str(out)]) == 0
    assert main(["resume", str(out)]) == 2  # already finished


def test_a_report_of_a_run_without_run_json_says_what_it_lacks(tmp_path, caplog):
    out = tmp_path / "run"
    assert main(["run", "lsa-linear", "--scale", "smoke", "--out", str(out)]) == 0
    (out / "run.json").unlink()
    assert main(["report", str(out)]) == 0
    assert "run.json is missing" in caplog.text and "the scoreboard cannot count the run" in caplog.text
    (out / "claims.json").unlink()
    caplog.clear()
    assert main(["report", str(out)]) == 0
    assert f"the run has not finished, its report shows what it has: `iclab resume {out}`" in caplog.text


def test_resume_finishes_an_interrupted_run(tmp_path):
    out = tmp_path / "run"
    first = api.run(
        "lsa-linear",
        overrides=["train.steps=40", "train.warmup=0", "eval_prompts=2000"],
        seeds=1,
        out=out,
        progress=False,
    )
    # Simulate an interruption: drop the outputs written after training and resume.
    (out / "claims.json").unlink()
    resumed = api.resume(out, progress=False)
    assert [c["measured"] for c in resumed.claims] == [c["measured"] for c in first.claims]
    info = resumed.folder.read_info()
    assert info["resumed"] is True
    # its models were trained by the first session: their checkpoints' seconds are in its time, not 0 (one seed's
    # state file a model: the seeds of a model train together, each file has the group's seconds)
    states = resumed.folder.checkpoints.glob("*/seed0/state.safetensors")
    earlier = sum(load_file(path)["train_seconds"].item() for path in states)
    booked = [s for part in info["time"]["parts"].values() for s in part["training"].values()]
    booked += info["time"]["outside_parts_training"].values()
    assert earlier > 0 and info["earlier_seconds"] == pytest.approx(earlier, abs=0.01)
    assert sum(booked) >= earlier and info["wall_seconds"] >= earlier


def test_default_run_folders_are_unique(tmp_path):
    overrides = ["train.steps=5", "train.warmup=0", "flow.steps=200", "eval_prompts=1000"]
    a, b = (api.run("lsa-linear", overrides=overrides, seeds=1, root=tmp_path, progress=False) for _ in range(2))
    assert a.path != b.path and a.path.parent == b.path.parent == tmp_path
    assert a.path.name.startswith("lsa-linear-")


def test_task_descriptors_smoke(tmp_path):
    out = tmp_path / "td"
    tiny = [
        "train.steps=5",
        "train.warmup=0",
        "eval_prompts=500",
        "theory.mean_draws=500",
        "theory.flow_steps=50",
        "n_contexts=[5, 10]",
        "deep_layers=[2]",
        "d_sweep=[5]",
    ]
    result = api.run("task-descriptors", overrides=tiny, seeds=1, out=out, progress=False)
    assert {c["id"] for c in result.claims} >= {"one-layer-reaches-optimum", "gradient-flow-balance"}
    assert {p.name for p in (out / "figures").iterdir()} == {"loss_vs_n.png", "optimum_blocks.png", "gradient_flow.png"}
    assert {c["figure"] for c in result.claims} == {None, "loss_vs_n", "optimum_blocks", "gradient_flow"}


def test_mesa_ar_smoke(tmp_path):
    result = api.run(
        "mesa-ar",
        seeds=1,
        out=tmp_path / "mesa",
        progress=False,
        overrides=[
            "train.steps=3",
            "train.train_size=16",
            "test_size=16",
            "scatter_draws=64",
            "task.length=12",
            "inits=[[0.5, 1.5]]",
            "starts={gaussian: [1.0, 2.0], sparse: [1.0], ones: [1.0]}",
            "size_sweep={sizes: [16, 32], init: [0.5, 1.5]}",
            "gradient={draws: 64, batches: 4}",
        ],
    )
    ids = {c["id"] for c in result.claims}
    assert {
        "ab-star-gaussian-1",
        "ab-star-gaussian-2",
        "ab-fits-training-set-gaussian-2",
        "stays-diagonal-sparse-1",
        "recovered-sparse-1",
        "not-recovered-gaussian-1",
        "offdiag-gradient-vanishes-gaussian-1",
        "offdiag-gradient-vanishes-sparse-1",
        "offdiag-shrinks-with-m-gaussian-1",
        "full-ab-star-gaussian-1",
        "full-ab-star-sparse-1",
        "ones-not-one-step-gd-ones-1",
    } <= ids
    assert "not-recovered-gaussian-2" not in ids and "full-ab-star-gaussian-2" not in ids  # σ = 2: diagonal only
    kinds = {c["id"]: (c["kind"], c["subject"]) for c in result.claims}
    assert kinds["full-ab-star-sparse-1"] == kinds["ones-not-one-step-gd-ones-1"] == ("paper", "trained")
    assert {p.name for p in (result.path / "figures").iterdir()} == {
        "ab_training.png",
        "prediction_truth_ratio.png",
        "weights.png",
        "offdiag_vs_m.png",
    }
    assert {c["figure"] for c in result.claims} - {None} <= {p.stem for p in (result.path / "figures").iterdir()}
    assert {"expected_gradient_z", "ab_best"} <= set(result.metrics.metric)
    assert {"ab", "ab_final", "prediction_truth_ratio", "test_relative_loss"} <= set(result.metrics.metric)


def test_listing_and_help_import_no_heavy_module():
    code = (
        "import sys, iclab.cli\n"
        "from iclab.cli import main\n"
        "assert main(['list']) == 0\n"
        "heavy = [m for m in ('torch', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "lsa-linear" in done.stdout


def test_ctrl_c_ends_in_one_line_that_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    from iclab.experiments.base import RunContext

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    tiny = ["--set", "train.steps=4", "--set", "train.warmup=0", "--set", "eval_prompts=50", "--seed", "3"]
    monkeypatch.setattr(RunContext, "evaluate", interrupt)  # after the model trained: its checkpoint is kept
    out = tmp_path / "stopped"
    assert main(["run", "lsa-linear", *tiny, "--out", str(out)]) == 130
    said = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("iclab:")
    ]  # after training's lines
    assert len(said) == 1 and "at step 4" in said[0] and f"`iclab resume {out}` continues" in said[0]
    monkeypatch.setattr(RunContext, "trained", interrupt)  # before any checkpoint: nothing to resume
    assert main(["run", "lsa-linear", *tiny, "--out", str(tmp_path / "early")]) == 130
    assert "nothing to resume" in capsys.readouterr().err and not (tmp_path / "early").exists()


def test_a_finished_run_continues_for_more_steps_as_a_new_run(tmp_path, capsys):
    constant = ["--set", "train.schedule=constant", "--set", "train.warmup=0"]
    constant += ["--set", "flow.steps=200", "--set", "eval_prompts=200"]
    tiny = [*constant, "--seeds", "1", "--seed", "3"]
    parent, alone = tmp_path / "runs" / "parent", tmp_path / "alone"
    assert main(["run", "lsa-linear", "--set", "train.steps=10", *tiny, "--out", str(parent)]) == 0
    finished = (parent / "claims.json").read_text()
    assert main(["resume", str(parent)]) == 2 and "train.steps=N" in capsys.readouterr().err
    assert main(["resume", str(parent), "--set", "train.steps=15"]) == 0
    (child,) = [p for p in parent.parent.iterdir() if p != parent]
    config = yaml.safe_load((child / "config.yaml").read_text())
    assert config["continued_from"] == "parent" and config["train"]["steps"] == 15
    assert (parent / "claims.json").read_text() == finished  # the parent is left as it was
    logged = pd.read_parquet(child / "metrics.parquet").query("metric == 'train_loss'")
    assert {10, 15} <= set(logged.step)  # its history goes on from the parent's last step
    # Ten steps, then five more, train what fifteen steps from scratch train (a constant rate: the same steps).
    assert main(["run", "lsa-linear", "--set", "train.steps=15", *tiny, "--out", str(alone)]) == 0
    for weights in alone.glob("checkpoints/*/seed3/model.safetensors"):
        continued, fresh = load_file(child / weights.relative_to(alone)), load_file(weights)
        assert all(torch.equal(continued[k], fresh[k]) for k in fresh)
    assert json.loads((child / "claims.json").read_text()) == json.loads((alone / "claims.json").read_text())
    assert "continued_from" in json.loads((child / "run.json").read_text())["recipe_changes"]  # a variant


def test_an_experiment_with_models_built_from_others_does_not_continue(tmp_path, capsys):
    config = api.resolved_config("algorithm-selection", "quick", {"seed": 100})  # probes, fine-tuned models
    run = RunFolder.create("algorithm-selection", config, out=tmp_path / "finished")
    run.claims_file.write_text("[]")
    assert main(["resume", str(run.path), "--set", "train.steps=5000"]) == 2
    assert "cannot continue a finished run" in capsys.readouterr().err and list(tmp_path.iterdir()) == [run.path]


def test_show_against_lists_the_keys_two_recipes_differ_in(capsys):
    """``iclab show EXP --against paper``: the distance of a scale's recipe from the paper's, key by key, without the
    seeds, logging and bookkeeping keys."""
    from iclab import api

    assert main(["show", "gpt-linear", "--against", "paper"]) == 0
    out = capsys.readouterr().out
    assert "task.d: 5 → 20" in out and "train.steps: 11000 → 500000" in out
    assert "log_every" not in out and "seeds" not in out and "scale:" not in out
    distance = api.recipe_distance("gpt-linear", "quick", "paper")
    assert out.startswith(f"# gpt-linear: {len(distance)} keys where quick differs from paper")
    assert api.recipe_distance("gpt-linear", "quick", "quick") == {}
    assert "model.attention" not in api.recipe_distance("function-classes", "quick", "paper")  # math and sdpa agree
    assert main(["show", "gpt-linear", "--against", "paper", "--set", "train.lr=0.1"]) == 2


# --- issue 55: off the happy path, one line and exit 2, nothing of the user's lost or half-written -----------------


def _one_line(err: str) -> str:
    assert err.startswith("iclab: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_claim_with_nothing_measured_is_not_measured_never_a_pass(tmp_path, capsys):
    """Item 1: gpt-linear at d = 1 has no prefix 1 ≤ k < d for min-norm-below-d."""
    out = tmp_path / "run"
    assert main(["run", "gpt-linear", "--scale", "smoke", "--set", "task.d=1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "[not measured] min-norm-below-d: measured none" in printed and "no prefix 1 ≤ k < d" in printed
    (claim,) = [c for c in json.loads((out / "claims.json").read_text()) if c["id"] == "min-norm-below-d"]
    assert claim["holds"] is None and claim["measured"] == {} and "d = 1" in claim["reason"]
    assert "1 not measured" in printed


def test_a_config_that_leaves_the_claims_no_prefix_is_refused_before_a_folder(tmp_path, capsys):
    """Item 2: gpt-linear with task.n_context=1 trained, then crashed, leaving a folder resume crashed on."""
    out = tmp_path / "run"
    assert main(["run", "gpt-linear", "--scale", "smoke", "--set", "task.n_context=1", "--out", str(out)]) == 2
    assert "task.n_context must be >= 3, got 1" in _one_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("block, example", [("model", "model.n_layers=4"), ("train", "train.steps=11000")])
def test_a_block_set_to_null_is_refused_before_a_folder(block, example, tmp_path, capsys):
    """Item 3: --set model=null or train=null for gpt-linear gave a TypeError traceback."""
    out = tmp_path / "run"
    assert main(["run", "gpt-linear", "--scale", "smoke", "--set", f"{block}=null", "--out", str(out)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"{block}=null: gpt-linear needs its {block} block" in err and f"--set {example}" in err
    assert not out.exists()
    assert main(["show", "function-classes", "--set", "curriculum=null"]) == 0  # a block that may be off


def test_a_file_size_limit_hit_while_saving_a_figure_is_one_line_and_resumes(tmp_path):
    """Item 12: `ulimit -f 60` stopped a run with an OSError traceback while it saved a figure."""
    import resource

    out = tmp_path / "run"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (60 * 1024, resource.RLIM_INFINITY))
    argv = [sys.executable, "-m", "iclab", "run", "gpt-linear", "--scale", "smoke", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=limit)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("iclab:")]
    assert "Traceback" not in done.stderr and "(File too large)" in line and "ulimit -f" in line
    assert f"`iclab resume {out}`" in line  # its checkpoints are kept
    assert not list(out.rglob("*.iclab-tmp")) and not list(out.glob("figures/*.png"))  # no torn figure
    assert main(["resume", str(out)]) == 0 and (out / "claims.json").exists()


def test_every_smoke_scale_logs_its_training_often_enough_to_draw_a_curve():
    """A training curve of one logged step draws nothing: each smoke training block logs at least twice."""
    from iclab.train import TrainConfig

    for name in experiments.names():
        spec = experiments.get(name)
        for path in spec.train_blocks:
            block = spec.resolve("smoke")
            for part in path.split("."):
                block = block[part]
            train = TrainConfig.from_config(block)
            assert train.steps // train.log_every >= 2, (name, path, train.steps, train.log_every)


def test_rejudge_takes_the_scales_current_deferrals(tmp_path, monkeypatch):
    """A scale that no longer leaves a claim to another (its ``judged_at_long``, a claims setting like a tolerance):
    its runs are rejudged, not refused as runs of another recipe, and the claim is judged."""
    import dataclasses

    from iclab.experiments import function_classes

    parent = tmp_path / "fc"
    old = function_classes.EXPERIMENT
    deferring = {**old.scales, "smoke": {**old.scales["smoke"], "judged_at_long": ["sparse-beats-ols"]}}
    monkeypatch.setattr(function_classes, "EXPERIMENT", dataclasses.replace(old, scales=deferring))
    assert main(["run", "function-classes", "--scale", "smoke", "--out", str(parent)]) == 0
    judged = lambda run: {c["id"]: c for c in json.loads((run / "claims.json").read_text())}["sparse-beats-ols"]
    assert judged(parent)["judged_at"] == "long"  # smoke's tiny sparse model is short of least squares
    monkeypatch.setattr(function_classes, "EXPERIMENT", old)
    monkeypatch.setattr(_SeedGroup, "_eager_step", lambda self: pytest.fail("a rejudged model trained again"))
    assert main(["rejudge", str(parent)]) == 0
    child = parent.with_name(f"fc-claims{old.claims_version}")
    assert judged(child).get("judged_at") is None and judged(child)["holds"] is not None
    assert (
        json.loads((child / "run.json").read_text())["fingerprint"]
        == api.recipe("function-classes", "smoke").fingerprint
    )


def test_rejudge_judges_a_finished_runs_models_by_the_current_claims_without_training_again(tmp_path, monkeypatch):
    """A finished run of its recipe, judged again after its experiment's claims changed (a new claims_version): a
    new folder beside it, its weights the run's, its training history kept, its fingerprint the current recipe's."""
    import dataclasses

    from iclab.experiments import lsa_linear

    parent = tmp_path / "runs" / "lsa"
    assert main(["run", "lsa-linear", "--scale", "smoke", "--seed", "3", "--out", str(parent)]) == 0
    with pytest.raises(ConfigError, match="already judged by the current claims"):
        api.rejudge(parent, progress=False)
    old = lsa_linear.EXPERIMENT
    stricter = {**old.defaults, "tolerance": {**old.defaults["tolerance"], "cosine": 0.999}}  # a claim's own setting
    newer = dataclasses.replace(old, claims_version=old.claims_version + 1, defaults=stricter)
    monkeypatch.setattr(lsa_linear, "EXPERIMENT", newer)
    monkeypatch.setattr(_SeedGroup, "_eager_step", lambda self: pytest.fail("a rejudged model trained again"))
    assert main(["rejudge", str(parent)]) == 0
    child = parent.with_name(f"lsa-claims{newer.claims_version}")
    info = json.loads((child / "run.json").read_text())
    assert info["rejudged_from"] == "lsa" and info["fingerprint"] == api.recipe("lsa-linear", "smoke").fingerprint
    assert info["earlier_seconds"] == 0.0  # the training its copied checkpoints record is the parent's
    assert yaml.safe_load((child / "config.yaml").read_text())["tolerance"]["cosine"] == 0.999
    for weights in parent.glob("checkpoints/*/seed3/model.safetensors"):
        before, after = load_file(weights), load_file(child / weights.relative_to(parent))
        assert all(torch.equal(before[k], after[k]) for k in before)
    trained = lambda run: pd.read_parquet(run / "metrics.parquet").query("metric == 'train_loss'")
    assert trained(child)[["model", "step", "value"]].equals(trained(parent)[["model", "step", "value"]])
    judged = lambda run: {c["id"]: c["expected"] for c in json.loads((run / "claims.json").read_text())}
    assert (
        judged(child)["preconditioner-isotropic"] == "≥ 0.999"
        and judged(parent)["preconditioner-isotropic"] == "≥ 0.99"
    )
    monkeypatch.undo()  # the runs below train
    variant = tmp_path / "runs" / "variant"
    assert main(["run", "lsa-linear", "--scale", "smoke", "--set", "train.lr=0.02", "--out", str(variant)]) == 0
    with pytest.raises(ConfigError, match="not a run of its scale's current recipe"):
        api.rejudge(variant, progress=False)
    unfinished = RunFolder.create("lsa-linear", api.resolved_config("lsa-linear", "smoke"), out=tmp_path / "cut")
    with pytest.raises(ConfigError, match="has not finished"):
        api.rejudge(unfinished.path, progress=False)


def test_a_hand_edited_config_of_the_wrong_type_is_named_on_resume(tmp_path, capsys):
    run = api.run("lsa-linear", "smoke", overrides=["flow.steps=20"], out=tmp_path / "run", progress=False)
    (run.folder.path / "claims.json").unlink()  # as if it stopped before its claims
    config = run.folder.path / "config.yaml"
    config.write_text(config.read_text().replace("\n  steps: 20\n", "\n  steps: banana\n", 1))
    assert "banana" in config.read_text()
    assert main(["resume", str(run.folder.path)]) == 2
    err = capsys.readouterr().err
    assert "config.yaml: train.steps expects int, got 'banana'" in err and err.count("\n") == 1


def test_a_task_change_of_the_wrong_type_is_one_line():
    from iclab.tasks import linear_regression_from_config

    with pytest.raises(ConfigError, match="task.noise must be a finite number, got 'abc'"):
        linear_regression_from_config({"d": 2, "n_context": 3, "noise": "abc"})


def test_a_key_added_later_at_the_value_every_earlier_run_had_leaves_the_recipe_as_it_was():
    # gd-mechanism's model.init (later_defaults): a run recorded before it existed is of quick's recipe still,
    # resumes with the key filled in, and the other value is a recipe of its own
    stored = {"experiment": "gd-mechanism", **api.resolved_config("gd-mechanism", "quick")}
    del stored["model"]["init"]
    config = experiments.get("gd-mechanism").reconfigure(stored)
    assert config.values["model"]["init"] == "small"
    quick = api.recipe("gd-mechanism", "quick")
    assert Recipe(api._normal(stored), quick.claims_version).fingerprint == quick.fingerprint
    assert api.recipe("gd-mechanism", "quick", {"model.init": "variance_scaling"}).fingerprint != quick.fingerprint
    assert api.recipe_distance("gd-mechanism")["model.init"] == ("small", "variance_scaling")  # every value shown


def test_a_config_written_before_a_training_key_existed_still_resumes():
    # complete() fills the key from TrainConfig's default (a tuple), which the stored-type check takes as a list
    stored = {"experiment": "lsa-linear", **api.resolved_config("lsa-linear", "smoke")}
    for key in ("betas", "eps"):
        del stored["train"][key]
    config = experiments.get("lsa-linear").reconfigure(stored)
    assert tuple(config.values["train"]["betas"]) == (0.9, 0.999)
