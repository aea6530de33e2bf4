"""The experiment kit: training blocks filled by the framework, and the RunContext helpers."""

import dataclasses

import pytest
import torch
import yaml

from iclab import api, experiments
from iclab.config import ConfigError
from iclab.experiments.base import Experiment, RunContext
from iclab.learners import LeastSquares, ZeroPredictor
from iclab.metrics import evaluate, loss_by_prefix, model_predictor
from iclab.models import LinearSelfAttention
from iclab.prompts import PairedFormat
from iclab.rng import generator
from iclab.runs import RunFolder
from iclab.tasks import GaussianInputs, LinearRegression, linear_regression_from_config
from iclab.train import TrainConfig, data_source

DEFAULTS = dataclasses.asdict(TrainConfig())


def _experiment(**kwargs):
    defaults = {
        "seed": 0,
        "seeds": 2,
        "train": {"steps": 50, "lr": 0.01},
        "part": {"train": {"batch_size": 32}, "overrides": {"lr": 0.1}},
    }
    return Experiment("kit", "paper", defaults, {"quick": {"train": {"steps": 60}}}, run=lambda c, x: [], **kwargs)


def test_every_train_block_is_a_full_train_config_and_override_blocks_stay_partial():
    experiment = _experiment(train_blocks=("train", "part.train"))
    config = experiment.resolve("quick", ["train.clip=1", "part.train.weight_decay=0.1", "part.train.precision=bf16"])
    assert config["train"] == {**DEFAULTS, "steps": 60, "lr": 0.01, "clip": 1}
    assert list(config["train"])[:2] == ["steps", "lr"]  # the experiment's own keys first
    assert config["part"]["train"] == {**DEFAULTS, "batch_size": 32, "weight_decay": 0.1, "precision": "bf16"}
    assert config["part"]["overrides"] == {"lr": 0.1}
    with pytest.raises(ConfigError, match="unknown config key 'part.overrides.clip'"):
        experiment.resolve("quick", ["part.overrides.clip=1"])
    with pytest.raises(ConfigError, match="train.optimizer must be"):
        experiment.configure("quick", ["train.optimizer=lbfgs"])
    with pytest.raises(ConfigError, match="part.train: train.precision must be"):
        experiment.configure("quick", ["part.train.precision=fp8"])
    with pytest.raises(ValueError, match=r"train_blocks \['nope.train'\]"):
        _experiment(train_blocks=("nope.train",))
    assert _experiment().train_blocks == ("train",)
    theory_only = Experiment("theory", "paper", {"seed": 0, "n": 3}, {"quick": {}}, run=lambda c, x: [])
    assert theory_only.train_blocks == () and theory_only.resolve("quick")["n"] == 3
    # completing is idempotent, and a stored config older than a default gets it
    assert experiment.complete(config) == config
    plain = experiment.resolve("quick")
    old = yaml.safe_load(yaml.safe_dump({**plain, "train": {"steps": 60, "lr": 0.01}}))
    assert experiment.complete(old) == plain


def test_a_config_is_made_and_checked_once_with_typed_training_blocks():
    """``configure`` gives ``config.yaml``'s plain record and the experiment's values, whose training blocks
    are TrainConfigs that read as the block; ``reconfigure`` sets a resume's changes and checks them alike."""
    experiment = _experiment(train_blocks=("train", "part.train"))
    config = experiment.configure("quick", ["train.lr=0.05"], seeds=3)
    assert config.record["experiment"] == "kit" and config.record["seeds"] == 3
    assert config.record["train"]["lr"] == 0.05 and isinstance(config.record["train"], dict)
    typed = config.values["train"]
    assert isinstance(typed, TrainConfig) and typed.lr == 0.05 and dict(typed) == config.record["train"]
    assert isinstance(config.values["part"]["train"], TrainConfig) and config.values["part"]["overrides"] == {"lr": 0.1}
    assert TrainConfig.from_config({**typed, "lr": 0.5}).lr == 0.5 and TrainConfig.from_config(typed) is typed
    assert yaml.safe_load(yaml.safe_dump(config.record)) == config.record  # the record is what config.yaml holds
    again = experiment.reconfigure(config.record, [("train.clip", 2.0)])
    assert again.values["train"].clip == 2.0 and again.record["train"]["clip"] == 2.0
    with pytest.raises(ConfigError, match="seeds must be >= 1"):
        experiment.configure("quick", seeds=0)
    with pytest.raises(ConfigError, match="train.lr must be"):
        experiment.reconfigure(config.record, [("train.lr", -1.0)])


@pytest.mark.parametrize("name", experiments.names())
def test_every_train_key_can_be_set_in_every_experiment(name):
    experiment = experiments.get(name)
    config = experiment.configure("quick", ["train.clip=1.0", "train.weight_decay=0.01", "train.precision=tf32"])
    assert config.record["train"]["clip"] == 1.0 and set(DEFAULTS) <= set(config.record["train"])
    assert config.values["train"] == TrainConfig.from_config(config.record["train"])


def test_resume_fills_the_train_block_of_an_older_config_and_takes_new_train_keys(tmp_path):
    """A run folder whose config.yaml predates the filled train block resumes, and ``--set train.clip``
    applies to it (recorded under resume_overrides)."""
    out = tmp_path / "run"
    config = experiments.get("lsa-linear").resolve(
        "quick", ["train.steps=4", "train.warmup=0", "eval_prompts=200", "seeds=1", "train.checkpoint_every=2"]
    )
    config = {"experiment": "lsa-linear", **config}
    config["train"] = {k: v for k, v in config["train"].items() if k not in ("clip", "blowup", "precision")}
    RunFolder.create("lsa-linear", config, out)
    result = api.resume(out, progress=False, overrides=["train.clip=1"])
    written = result.folder.read_config()
    assert written["train"]["clip"] == 1 and written["train"]["precision"] == "fp32"
    assert written["resume_overrides"] == ["train.clip=1"]


def _context(tmp_path, **config):
    return RunContext(
        RunFolder.create("kit", {"experiment": "kit"}, tmp_path / "run"),
        torch.device("cpu"),
        progress=False,
        experiment="kit",
        config={"seed": 3, "seeds": 2, **config},
    )


TASK = linear_regression_from_config({"d": 3, "n_context": 8})


def test_seeds_and_the_evaluation_prompts(tmp_path):
    ctx = _context(tmp_path)
    assert ctx.seeds == [3, 4]
    episode = ctx.eval_episode(TASK, 50)
    expected = TASK.sample(50, generator(3, "eval"))
    assert episode.xs.dtype == torch.float64
    torch.testing.assert_close(episode.xs, expected.xs.double(), rtol=0, atol=0)
    other = ctx.eval_episode(TASK, 50, "shift", dtype=torch.float32)
    torch.testing.assert_close(other.ys, TASK.sample(50, generator(3, "eval", "shift")).ys, rtol=0, atol=0)


def test_evaluate_logs_learners_by_name_and_models_by_name_and_seed(tmp_path):
    ctx = _context(tmp_path)
    models = {seed: LinearSelfAttention(4, generator=generator(seed)) for seed in ctx.seeds}
    predictors = {
        "ols": LeastSquares().predict_episode,
        "zero": ZeroPredictor().predict_episode,
        **{("lsa", seed): model_predictor(m) for seed, m in models.items()},
    }
    losses = ctx.evaluate(predictors, TASK, 300, "half_mse", setting="iso")
    reference = evaluate(predictors, TASK, 300, 3, "half_mse")
    assert losses == {key: mean for key, (mean, _) in reference.items()}
    assert set(losses) == {"ols", "zero", ("lsa", 3), ("lsa", 4)}
    rows = {(r["model"], r["seed"], r["metric"]): r["value"] for r in ctx.rows}
    assert (
        rows["lsa", 4, "half_mse"] == losses["lsa", 4] and rows["ols", None, "half_mse_stderr"] == reference["ols"][1]
    )
    assert all(r["setting"] == "iso" for r in ctx.rows) and len(ctx.rows) == 8
    # models and learners themselves are predictors too
    sources = {"ols": LeastSquares(), **{("lsa", seed): m for seed, m in models.items()}}
    assert ctx.evaluate(sources, TASK, 300, "half_mse") == {k: losses[k] for k in sources}


def test_log_metrics_writes_one_row_per_metric_with_the_same_keys(tmp_path):
    ctx = _context(tmp_path)
    ctx.log_metrics({"a": 1.0, "b": 2.0}, setting="iso", model="lsa", seed=3)
    assert ctx.rows == [
        {"setting": "iso", "model": "lsa", "seed": 3, "metric": "a", "value": 1.0},
        {"setting": "iso", "model": "lsa", "seed": 3, "metric": "b", "value": 2.0},
    ]


def test_log_band_writes_the_curve_and_its_band_per_prefix(tmp_path):
    ctx = _context(tmp_path)
    band = loss_by_prefix(torch.zeros(100, 4), torch.randn(100, 4, generator=generator(0)), n_boot=50)
    ctx.log_band("iso", "ols", "mse", band, seed=3)
    assert len(ctx.rows) == 12
    by = {(r["n"], r["metric"]): r for r in ctx.rows}
    assert by[2, "mse"]["value"] == band["mean"][2].item() and by[2, "mse_p05"]["value"] == band["low"][2].item()
    assert by[3, "mse_p95"]["value"] == band["high"][3].item()
    assert all(r["setting"] == "iso" and r["model"] == "ols" and r["seed"] == 3 for r in ctx.rows)


def test_model_trains_once_per_name_and_refuses_another_recipe(tmp_path):
    ctx = _context(tmp_path)
    cfg = {"steps": 6, "batch_size": 16, "log_every": 2}
    make = lambda g: LinearSelfAttention(4, generator=g)
    prompts = {"task": TASK, "format": PairedFormat()}
    result = ctx.trained("lsa", make, train=cfg, setting="iso", **prompts)
    assert len(result.models) == 2 and len(ctx.rows) == 2 * 3 and list(result.by_seed) == [3, 4]
    # the same recipe (a data source of the same task, an equal block) gives the same result, logged once
    again = ctx.trained("lsa", make, data_source(TASK, PairedFormat()), train=dict(cfg), setting="iso")
    assert again.models == result.models and again.history == result.history and len(ctx.rows) == 6
    history = ctx.history()
    assert list(history.columns) == ["setting", "model", "seed", "step", "metric", "value"]
    assert len(history) == 6 and set(history.seed) == {3, 4} and ctx.history(setting="other").empty
    with pytest.raises(ValueError, match=r"'lsa' was already trained .*\(train differ\)"):
        ctx.trained("lsa", make, train={**cfg, "lr": 0.1}, setting="iso", **prompts)
    with pytest.raises(ValueError, match=r"\(model differ\)"):
        ctx.trained("lsa", lambda g: LinearSelfAttention(4, n_layers=2, generator=g), train=cfg, **prompts)
    with pytest.raises(ValueError, match=r"\(task differ\)"):
        other = LinearRegression(GaussianInputs(3), n_context=8)  # no config block: compared by what it draws
        ctx.trained("lsa", make, task=other, format=PairedFormat(), train=cfg, setting="iso")
    with pytest.raises(ValueError, match="its data, or its task and format"):
        ctx.trained("lsa2", make, data_source(TASK, PairedFormat()), task=TASK, format=PairedFormat(), train=cfg)
    with pytest.raises(ValueError, match="its data, or its task and format"):
        ctx.trained("lsa2", make, task=TASK, train=cfg)
    apart = ctx.trained("lsa", make, train=cfg, seeds=[0], setting="iso", **prompts)  # other seeds: own checkpoints
    assert apart.seeds == [0] and len(ctx.rows) == 9
    assert ctx.trained("lsa", make, train=cfg, setting="another part", **prompts).models == result.models


def test_a_seed_trained_beside_others_trains_as_it_does_alone(tmp_path):
    cfg = {"steps": 30, "batch_size": 64, "log_every": 10, "lr": 0.01}
    make = lambda g: LinearSelfAttention(4, generator=g)
    prompts = {"task": TASK, "format": PairedFormat(), "train": cfg}
    run = _context(tmp_path / "beside", seeds=3)  # seeds 3, 4, 5
    passes = {seed: run.for_seed(seed) for seed in run.seeds}
    beside = {seed: ctx.trained("lsa", make, **prompts) for seed, ctx in passes.items()}
    assert len(run._trained["lsa"]) == 1  # trained once, on the first pass, for every seed
    assert all(result.seeds == [seed] for seed, result in beside.items())
    alone = _context(tmp_path / "alone", seed=4, seeds=1).trained("lsa", make, **prompts)
    losses = [[r["value"] for r in result.history] for result in (beside[4], alone)]
    torch.testing.assert_close(torch.tensor(losses[0]), torch.tensor(losses[1]), rtol=1e-5, atol=1e-6)
    # the passes share the run's rows; a learner's row gets the seed of the pass that measured it
    passes[5].log(model="ols", metric="mse", value=1.0)
    assert run.rows[-1]["seed"] == 5 and passes[5].folder.figure("f").parent.name == "seed5"
    assert passes[3].folder.figure("f").parent.name == "figures"  # the first seed's figures are the run's


def test_a_model_trained_for_its_history_alone_is_not_held_by_the_run(tmp_path):
    import gc
    import weakref

    made = []

    def make(g):
        made.append(LinearSelfAttention(4, generator=g))
        return made[-1]

    prompts = {"task": TASK, "format": PairedFormat(), "train": {"steps": 4, "batch_size": 16, "log_every": 2}}
    run = _context(tmp_path, seeds=2)  # seeds 3, 4
    passes = [run.for_seed(seed) for seed in run.seeds]
    first = passes[0].trained("lsa", make, keep_models=False, **prompts)
    assert first.models == [] and first.seeds == [3] and first.curve(3, "train_loss")
    trained = [weakref.ref(model) for model in made]
    made.clear()
    gc.collect()
    assert [ref() for ref in trained] == [None] * len(trained)  # nothing holds the trained models
    second = passes[1].trained("lsa", make, keep_models=False, **prompts)  # the other seed's pass: its history
    assert second.seeds == [4] and second.curve(4, "train_loss") and len(run._trained["lsa"]) == 1  # trained once
    with pytest.raises(ValueError, match="without keeping its models"):
        passes[1].trained("lsa", make, **prompts)


def test_claims_over_seeds_keep_each_seeds_verdict_and_apply_the_rule():
    from iclab.claims import Claim, over_seeds, seed_entries

    def claim(seed, ok):
        return Claim("c", "P", "s", float(seed), "< 2", ok, "paper", "trained", "Fig 1")

    verdicts = {100: True, 101: True, 102: False, 103: True, 104: True}
    (entry,) = over_seeds({seed: [claim(seed, ok)] for seed, ok in verdicts.items()})
    assert entry["holds"] is True and entry["measured"] == {str(s): float(s) for s in verdicts}  # 4 of 5
    assert {s: e["holds"] for s, e in seed_entries(entry, 100).items()} == verdicts
    (three,) = over_seeds({seed: [claim(seed, seed < 102)] for seed in (100, 101, 102)})
    assert three["holds"] is False  # 2 of 3 < 80%
    (one,) = over_seeds({7: [claim(7, True)]})
    assert "by_seed" not in one and seed_entries(one, 7) == {7: one}
