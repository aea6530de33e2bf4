"""Trained models as objects: load_model, iclab eval / iclab.evaluate, iclab export."""

import json
import os
import re
import shutil

import pandas as pd
import pytest
import torch
import yaml

import iclab
from iclab import api, experiments
from iclab.cli import main
from iclab.config import ConfigError
from iclab.loading import load_model
from iclab.metrics import loss_by_prefix, prefix_predictions
from iclab.rng import generator

GPT = [
    "train.steps=12",
    "train.compile=false",
    "train.warmup=2",
    "train.log_every=2",
    "train.checkpoint_every=6",
    "train.keep=[3, 6]",
    "model.n_layers=1",
    "model.width=16",
    "model.n_heads=2",
    "eval_prompts=200",
    "bootstrap=50",
]


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    """A tiny finished gpt-linear run, two seeds, with checkpoints kept at steps 3 and 6."""
    root = tmp_path_factory.mktemp("gpt")
    return iclab.run("gpt-linear", seeds=2, overrides=GPT, out=root / "run", progress=False).path


@pytest.fixture(scope="module")
def lsa_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lsa")
    return iclab.run(
        "lsa-linear",
        seeds=1,
        overrides=["train.steps=20", "train.warmup=0", "flow.steps=200", "eval_prompts=500"],
        out=root / "run",
        progress=False,
    ).path


def _eval_folders(path):
    return sorted(path.glob("eval-*"))


def test_a_loaded_model_predicts_what_its_run_measured(gpt_run):
    config = yaml.safe_load((gpt_run / "config.yaml").read_text())
    metrics = pd.read_parquet(gpt_run / "metrics.parquet")
    for seed in (0, 1):
        loaded = load_model(gpt_run, seed=seed)
        assert not loaded.model.training and loaded.step == 12 and (loaded.name, loaded.seed) == ("gpt", seed)
        assert (loaded.task.d, loaded.task.n_context) == (5, 10) and type(
            loaded.prompt_format
        ).__name__ == "InterleavedFormat"
        # each seed measured on its own prompts, as a run of that seed alone
        episode = loaded.task.sample(config["eval_prompts"], generator(seed, "eval")).to(dtype=torch.float64)
        curve = loss_by_prefix(
            prefix_predictions(loaded.model, episode, loaded.prompt_format),
            episode.ys,
            "mse_over_d",
            5,
            config["bootstrap"],
            seed=seed,
        )
        logged = metrics.query("model == 'gpt' and seed == @seed and metric == 'mse_over_d'").sort_values("n").value
        assert torch.equal(torch.tensor(logged.to_numpy()), curve["mean"])  # the very same numbers


def test_kept_checkpoints_load_at_their_steps(gpt_run):
    kept = sorted(p.name for p in (gpt_run / "checkpoints" / "gpt" / "seed1").iterdir())
    assert kept == ["model.safetensors", "previous", "state.safetensors", "step3.safetensors", "step6.safetensors"]
    early, late = load_model(gpt_run, seed=1, step=3), load_model(gpt_run, seed=1)
    assert early.step == 3 and not torch.equal(early.model.read_out.weight, late.model.read_out.weight)


@pytest.mark.parametrize(
    "choice, message",
    [
        ({}, "holds several seeds of model 'gpt'; pick one with --seed: 0, 1"),
        ({"model": "lsa", "seed": 0}, "has no model 'lsa'; choose from gpt"),
        ({"seed": 7}, "has no seed 7 of model 'gpt'; choose from 0, 1"),
        ({"seed": 0, "step": 5}, "has no checkpoint at step 5; choose from 3, 6, 12"),
    ],
)
def test_bad_choices_list_the_possible_ones(gpt_run, choice, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_model(gpt_run, **choice)


def test_unfinished_and_old_runs_fail_with_one_clear_line(gpt_run, tmp_path):
    unfinished = tmp_path / "unfinished"
    shutil.copytree(gpt_run, unfinished, ignore=shutil.ignore_patterns("eval-*"))
    (unfinished / "claims.json").unlink()
    with pytest.raises(ConfigError, match="has not finished .*iclab resume"):
        load_model(unfinished, seed=0)
    old = tmp_path / "old"
    shutil.copytree(gpt_run, old, ignore=shutil.ignore_patterns("eval-*"))
    shutil.rmtree(old / "checkpoints")
    (old / "checkpoints").mkdir()
    (old / "checkpoints" / "gpt-seed0.safetensors").write_bytes(b"")  # the one-file layout of earlier runs
    with pytest.raises(ConfigError, match="written before checkpoints recorded their models"):
        load_model(old)
    assert main(["eval", str(old)]) == 2 and not _eval_folders(old)


def test_eval_writes_an_evaluation_folder_the_report_rereads(gpt_run, capsys):
    assert (
        main(
            [
                "eval",
                str(gpt_run),
                "--seed",
                "0",
                "--shift",
                "standard",
                "skewed",
                "--shift",
                "scale-y=2",
                "--learners",
                "ols",
                "ridge=0.1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    (folder,) = _eval_folders(gpt_run)
    assert str(folder) in out and "skewed" in out and "ridge(0.1)" in out
    assert re.search(r"setting\s+k\s+model\s+seed\s+step", out)  # each printed error names its prefix length
    assert {p.name for p in folder.iterdir()} == {"evaluation.yaml", "metrics.parquet", "figures", "report.html"}
    assert {p.name for p in (folder / "figures").iterdir()} == {"by_prefix.png"}
    spec = yaml.safe_load((folder / "evaluation.yaml").read_text())
    assert (
        spec["command"]
        == f"iclab eval {gpt_run} --seed 0 --shift standard skewed --shift scale-y=2 --learners ols ridge=0.1"
    )
    assert spec["steps"] == [12] and spec["shifts"] == ["standard", "skewed", "scale-y=2"]
    metrics = pd.read_parquet(folder / "metrics.parquet")
    assert list(metrics.columns) == ["setting", "model", "seed", "step", "n", "metric", "value"]
    assert set(metrics.model) == {"gpt", "ols", "ridge(0.1)"} and set(metrics.setting) == {
        "standard",
        "skewed",
        "scale-y=2",
    }
    assert metrics.query("model == 'ols'").step.isna().all() and set(metrics.query("model == 'gpt'").step) == {12}
    # The training task's standard prompts are the run's own: the same errors (mse/d = mse over E[y²] = d).
    run = pd.read_parquet(gpt_run / "metrics.parquet").query("model == 'gpt' and seed == 0 and metric == 'mse_over_d'")
    ours = metrics.query("model == 'gpt' and setting == 'standard' and metric == 'normalised_mse'")
    torch.testing.assert_close(
        torch.tensor(ours.sort_values("n").value.to_numpy()),
        torch.tensor(run.sort_values("n").value.to_numpy()),
        rtol=1e-12,
        atol=0,
    )
    (folder / "report.html").unlink()
    assert main(["report", str(folder)]) == 0 and "skewed" in (folder / "report.html").read_text()
    assert f"<a href='{folder.name}/report.html'>" in (gpt_run / "report.html").read_text()  # the run links it
    shutil.rmtree(folder)


def test_every_seed_at_once_adds_their_mean_with_a_band_over_seeds_and_prompts(gpt_run, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["eval", str(gpt_run), "--seed", "all", "--learners", "ols", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"gpt\s+0\s+12 .*\n\s+1\s+12 .*\n\s+all\s+12 ", printed)  # each seed, then their mean
    spec = yaml.safe_load((out / "evaluation.yaml").read_text())
    assert spec["seed"] == "all" and spec["seeds"] == [0, 1] and spec["steps"] == [12]
    rows = pd.read_parquet(out / "metrics.parquet").query("model == 'gpt'")
    curve = lambda metric, seed: rows[
        (rows.metric == metric) & (rows.seed.isna() if seed is None else rows.seed == seed)
    ]
    per_seed = [curve("normalised_mse", s).sort_values("n").value.to_numpy() for s in (0, 1)]
    mean, low, high = (
        curve(m, None).sort_values("n").value.to_numpy()
        for m in ("normalised_mse", "normalised_mse_p05", "normalised_mse_p95")
    )
    torch.testing.assert_close(torch.tensor(mean), torch.tensor((per_seed[0] + per_seed[1]) / 2), rtol=1e-12, atol=0)
    assert (low <= mean).all() and (mean <= high).all()
    single = iclab.evaluate(gpt_run, seed=0, learners=["ols"], out=tmp_path / "one").metrics.query("model == 'gpt'")
    torch.testing.assert_close(  # a seed's own curve is what evaluating that seed alone gives
        torch.tensor(curve("normalised_mse_p95", 0).sort_values("n").value.to_numpy()),
        torch.tensor(single.query("metric == 'normalised_mse_p95'").sort_values("n").value.to_numpy()),
    )
    assert "seeds 0, 1" in (out / "report.html").read_text()
    assert main(["eval", str(gpt_run), "--seed", "all", "--step", "all"]) == 2
    assert "not --step all" in capsys.readouterr().err


def test_every_kept_step_and_a_changed_task(gpt_run, tmp_path):
    result = iclab.evaluate(
        gpt_run,
        seed=1,
        step="all",
        task=["class=quadratic"],
        shifts=["standard", "noisy"],
        prompts=64,
        bootstrap=20,
        attention=True,
        out=tmp_path / "eval",
    )
    assert {p.name for p in (result.path / "figures").iterdir()} == {"by_prefix.png", "by_step.png", "attention.png"}
    spec = yaml.safe_load((result.path / "evaluation.yaml").read_text())
    assert spec["steps"] == [3, 6, 12] and spec["task"] == {
        "kind": "function-class",
        "class": "quadratic",
        "d": 5,
        "n_context": 10,
    }
    assert spec["command"].startswith("iclab.evaluate(") and "step='all'" in spec["command"]
    model_rows = result.metrics.query("model == 'gpt'")
    assert set(model_rows.step) == {3, 6, 12} and set(model_rows.seed) == {1}


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--seed", "0", "--task", "d=3"], "cannot read prompts of the task"),
        (["--seed", "0", "--task", "n_context=40"], "cannot read prompts of the task"),
        (["--seed", "0", "--task", "nois=0.5"], "unknown linear-regression task keys: nois"),
        (["--seed", "0", "--shift", "sideways"], "unknown shift 'sideways'"),
        (["--seed", "0", "--learners", "oracle"], "unknown learner 'oracle'"),
        (["--seed", "0", "--step", "soon"], "--step takes a checkpoint's step or all"),
        (["--seed", "0", "--step", "4"], "no checkpoint at step 4"),
        (["--seed", "some"], "a seed is an integer or all, got 'some'"),
        (["--model", "lsa"], "has no model 'lsa'"),
    ],
)
def test_bad_eval_input_is_one_line_and_writes_nothing(gpt_run, capsys, arguments, message):
    assert main(["eval", str(gpt_run), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("iclab: error: ") and message in err
    assert not _eval_folders(gpt_run)


def test_paired_format_models_evaluate_and_token_models_are_refused(lsa_run, tmp_path):
    result = iclab.evaluate(
        lsa_run,
        model="lsa-isotropic",
        shifts=["standard", "scale-x=2"],
        prompts=100,
        bootstrap=10,
        out=tmp_path / "lsa",
    )
    rows = result.metrics.query("model == 'lsa-isotropic' and setting == 'standard' and metric == 'normalised_mse'")
    assert len(rows) == 20 and rows.value.iloc[-1] < 1  # k = 0 … 19: after a few examples it beats predicting 0
    with pytest.raises(ConfigError, match="draws a transformer's attention"):
        iclab.evaluate(lsa_run, model="lsa-isotropic", attention=True, out=tmp_path / "no")
    assert not (tmp_path / "no").exists()


def test_a_run_records_how_it_differs_from_its_recipe(lsa_run):
    info = json.loads((lsa_run / "run.json").read_text())
    overrides = {"train.steps": 20, "train.warmup": 0, "flow.steps": 200, "eval_prompts": 500}  # the fixture's
    assert info["recipe_changes"] == overrides
    recipe = {"experiment": "lsa-linear", **experiments.get("lsa-linear").resolve("quick")}
    assert api.recipe_changes({**recipe, "seed": 100, "seeds": 3}) == {}  # which seeds is not the recipe


def test_export_is_a_hub_folder_that_loads_to_the_same_model(gpt_run, tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", str(gpt_run), str(out), "--seed", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "iclab" and config["architectures"] == ["GPTTransformer"]
    assert config["iclab"]["train"]["steps"] == 12 and config["iclab"]["task"]["kind"] == "linear-regression"
    card = (out / "README.md").read_text()
    assert "library_name: iclab" in card and "tracks-ols" in card and "## Training recipe" in card
    assert f"`{gpt_run.name}`" in card and str(gpt_run.parent) not in card  # the run's name, no local path
    assert str(gpt_run.parent) not in (out / "config.json").read_text()
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o644}
    exported, original = load_model(out), load_model(gpt_run, seed=1)
    assert (exported.name, exported.seed, exported.step) == ("gpt", 1, 12)
    tokens = torch.randn(3, 20, 6, generator=generator(0))
    assert torch.equal(exported.model(tokens, 10), original.model(tokens, 10))
    assert type(exported.task) is type(original.task) and exported.task.config == original.task.config
    result = iclab.evaluate(out, prompts=50, bootstrap=10, out=tmp_path / "eval")  # an export evaluates like a run
    assert set(result.metrics.model) == {"gpt", "ols", "3-nn", "averaging"}
    assert main(["export", str(gpt_run), str(out), "--seed", "1"]) == 2  # never overwritten
    assert "never overwritten" in capsys.readouterr().err


# --- issue 55: a damaged checkpoint or an unwritable output is one line, and nothing half-written ----------------


def _one_line(err: str) -> str:
    assert err.startswith("iclab: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_truncated_checkpoint_is_one_line_for_eval_and_export(gpt_run, tmp_path, capsys):
    """Item 5: a truncated model.safetensors gave eval and export a raw SafetensorError (a resume falls back to the
    previous good checkpoint: tests/test_faults.py)."""
    run = shutil.copytree(gpt_run, tmp_path / "run")
    weights = run / "checkpoints" / "gpt" / "seed0" / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(5000)
    before = sorted(tmp_path.iterdir()), sorted(run.iterdir())
    for argv in (
        ["eval", str(run), "--seed", "0"],
        ["export", str(run), str(tmp_path / "export"), "--seed", "0"],
    ):
        assert main(argv) == 2, argv
        assert str(weights) in _one_line(capsys.readouterr().err)
    assert (sorted(tmp_path.iterdir()), sorted(run.iterdir())) == before  # no export, no evaluation


def test_an_output_path_that_cannot_be_written_is_one_line(gpt_run, tmp_path, capsys):
    """Item 9: `iclab eval RUN --out /proc/x` and `iclab export RUN /proc/x` gave FileNotFoundError tracebacks."""
    (tmp_path / "file").write_text("")
    unwritable = "/proc/x" if os.path.isdir("/proc") else str(tmp_path / "file" / "x")
    evaluations = _eval_folders(gpt_run)
    assert main(["eval", str(gpt_run), "--seed", "0", "--out", unwritable, "--prompts", "20"]) == 2
    assert f"cannot create the folder {unwritable} (" in _one_line(capsys.readouterr().err)
    assert main(["export", str(gpt_run), unwritable, "--seed", "0"]) == 2
    assert f"cannot write the export {unwritable} (" in _one_line(capsys.readouterr().err)
    assert _eval_folders(gpt_run) == evaluations and not os.path.exists(unwritable)
    assert not list(tmp_path.glob(".*iclab-tmp"))


def test_an_export_is_evaluated_beside_it_and_left_as_written(gpt_run, tmp_path):
    out = tmp_path / "export"
    iclab.export(gpt_run, out, seed=0)
    written = sorted(p.name for p in out.iterdir())
    result = iclab.evaluate(out, prompts=20, bootstrap=5)
    assert result.path.parent == tmp_path and result.path.name.startswith("export-eval-")
    assert sorted(p.name for p in out.iterdir()) == written
