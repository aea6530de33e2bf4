import dataclasses
import os
import re
import shutil
import weakref
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from iclab.config import ConfigError
from iclab.metrics import evaluate, model_predictor
from iclab.models import GPTConfig, GPTTransformer, LinearSelfAttention
from iclab.prompts import PairedFormat, Prompt
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.theory import lsa_optimum
from iclab.train import (
    BLOWUP_STEPS,
    STATE,
    WEIGHTS,
    FixedTrainingSet,
    FreshPrompts,
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    _SeedGroup,
    checkpoint_folder,
    data_source,
    held_out,
    train,
)

TASK = LinearRegression(GaussianInputs(3), n_context=10)


def _make(g):
    return LinearSelfAttention(4, init_scale=0.2, generator=g)


def test_short_training_gets_within_ten_percent_of_optimum():
    cfg = TrainConfig(steps=600, batch_size=512, lr=0.01, schedule="cosine", warmup=20, log_every=50)
    result = train(_make, data_source(TASK, PairedFormat(), cfg.train_size), cfg, seeds=[0, 1], progress=False)
    optimum = lsa_optimum(TASK).loss
    losses = evaluate({s: model_predictor(m) for s, m in enumerate(result.models)}, TASK, 20000, seed=9)
    for mean, _ in losses.values():
        assert mean < 1.10 * optimum
    assert {r["metric"] for r in result.history} == {"train_loss"}
    assert max(r["step"] for r in result.history) == 600


def test_a_finished_trainer_frees_its_optimizer_state(monkeypatch):
    # A run trains many models one after another: each one's gradients and optimizer state must go when its
    # training ends, not whenever Python's cyclic collector next happens to run.
    optimizers = []
    make_optimizer = _SeedGroup._make_optimizer

    def recorded(self):
        optimizer = make_optimizer(self)
        optimizers.append(weakref.ref(optimizer))
        return optimizer

    monkeypatch.setattr(_SeedGroup, "_make_optimizer", recorded)
    train(_make, data_source(TASK, PairedFormat()), TrainConfig(steps=2, batch_size=8), seeds=[0, 1], progress=False)
    assert len(optimizers) == 1 and optimizers[0]() is None


def _params(models):
    return [torch.cat([p.flatten() for p in m.parameters()]) for m in models]


def test_vectorised_seeds_equal_seeds_trained_alone():
    cfg = TrainConfig(steps=30, batch_size=64, lr=0.01, clip=0.5)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    together = train(_make, data, cfg, seeds=[3, 4], progress=False)
    alone = train(_make, data, cfg, seeds=[4], progress=False)
    torch.testing.assert_close(_params(together.models)[1], _params(alone.models)[0], rtol=1e-4, atol=1e-6)


def test_resume_after_interruption_continues_from_checkpoint(tmp_path):
    cfg = TrainConfig(
        steps=100,
        batch_size=64,
        lr=0.01,
        optimizer="adamw",
        weight_decay=0.01,
        log_every=10,
        checkpoint_every=50,
        schedule="cosine",
    )
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    full = train(_make, data, cfg, seeds=[0, 1], progress=False)

    def interrupt(step, models):
        if step == 70:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(_make, data, cfg, seeds=[0, 1], checkpoint_dir=tmp_path, name="lsa", progress=False, callback=interrupt)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.safetensors")) == [
        f"lsa/seed{s}/{f}.safetensors" for s in (0, 1) for f in ("model", "state")
    ]

    seen = []
    resumed = train(
        _make,
        data,
        cfg,
        seeds=[0, 1],
        checkpoint_dir=tmp_path,
        name="lsa",
        progress=False,
        callback=lambda step, models: seen.append(step),
    )
    assert seen[0] == 60  # training restarted after the step-50 checkpoint
    for a, b in zip(_params(full.models), _params(resumed.models)):
        torch.testing.assert_close(a, b)
    assert [r["step"] for r in resumed.history if r["seed"] == 0] == list(range(10, 101, 10))


def test_a_resumed_training_knows_the_seconds_its_earlier_session_spent(tmp_path):
    """The state file records the seconds spent training until its step; a resume reports them as
    ``earlier_seconds`` (the caller's clock sees only its own session), and its next checkpoint adds its own."""
    cfg = TrainConfig(steps=40, batch_size=32, lr=0.01, log_every=10, checkpoint_every=20)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    fresh = train(_make, data, cfg, seeds=[0], progress=False)
    assert fresh.earlier_seconds == 0.0
    with pytest.raises(KeyboardInterrupt):
        train(
            _make,
            data,
            cfg,
            seeds=[0],
            checkpoint_dir=tmp_path,
            name="lsa",
            progress=False,
            callback=_interrupted_at(30),
        )
    state = tmp_path / "lsa" / "seed0" / "state.safetensors"
    spent = load_file(state)["train_seconds"].item()  # at the step-20 checkpoint
    assert spent > 0
    resumed = train(_make, data, cfg, seeds=[0], checkpoint_dir=tmp_path, name="lsa", progress=False)
    assert resumed.earlier_seconds == spent and resumed.select([0]).earlier_seconds == spent
    assert load_file(state)["train_seconds"].item() > spent  # the step-40 checkpoint: both sessions


def _interrupted_at(step_to_stop):
    def interrupt(step, models):
        if step == step_to_stop:
            raise KeyboardInterrupt

    return interrupt


def _weights_at(folder, seeds, step):
    return [load_file(folder / f"seed{s}" / f"step{step}.safetensors") for s in seeds]


def test_kept_steps_survive_an_interruption_and_equal_an_uninterrupted_run(tmp_path):
    cfg = TrainConfig(steps=100, batch_size=32, lr=0.01, log_every=10, checkpoint_every=50, keep=[5, 30, 60, 90])
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    train(_make, data, cfg, seeds=[0, 1], checkpoint_dir=tmp_path / "full", name="lsa", progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(
            _make,
            data,
            cfg,
            seeds=[0, 1],
            checkpoint_dir=tmp_path / "cut",
            name="lsa",
            progress=False,
            callback=_interrupted_at(70),
        )
    kept = lambda root: sorted(p.name for p in (root / "lsa" / "seed1").glob("step*"))
    assert kept(tmp_path / "cut") == ["step30.safetensors", "step5.safetensors", "step60.safetensors"]
    train(_make, data, cfg, seeds=[0, 1], checkpoint_dir=tmp_path / "cut", name="lsa", progress=False)
    assert kept(tmp_path / "cut") == kept(tmp_path / "full") == [f"step{k}.safetensors" for k in (30, 5, 60, 90)]
    for step in cfg.kept_steps():
        for a, b in zip(
            _weights_at(tmp_path / "full" / "lsa", [0, 1], step), _weights_at(tmp_path / "cut" / "lsa", [0, 1], step)
        ):
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_keep_spacing_and_validation():
    assert TrainConfig(steps=100, keep=4).kept_steps() == [1, 5, 22, 100]  # 100^(i/3), rounded
    assert TrainConfig(steps=3, keep=10).kept_steps() == [1, 2, 3]  # fewer where steps round together
    assert TrainConfig(steps=50, keep=1).kept_steps() == [50] and TrainConfig(keep=[7, 3, 7]).kept_steps() == [3, 7]
    for bad in ([0], [2000], 0, "all", [True], 1.5):
        with pytest.raises(ConfigError, match="train.keep"):
            TrainConfig(steps=1000, keep=bad)


def _to_legacy(root, name, seeds):
    """Rewrite the current checkpoints as the one-file layout iclab wrote before (model.*, optim.*,
    history.* tensors; metadata step) and remove the current ones."""
    for seed in seeds:
        folder = root / name / f"seed{seed}"
        with safe_open(folder / "state.safetensors", "pt") as f:
            step = f.metadata()["step"]
        tensors = {f"model.{k}": v for k, v in load_file(folder / "model.safetensors").items()}
        tensors.update(load_file(folder / "state.safetensors"))
        save_file(tensors, root / f"{name}-seed{seed}.safetensors", metadata={"step": step})
        shutil.rmtree(folder)


def test_a_run_written_in_the_old_one_file_layout_resumes_exactly(tmp_path):
    cfg = TrainConfig(steps=100, batch_size=32, lr=0.01, optimizer="adamw", log_every=10, checkpoint_every=50)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    full = train(_make, data, cfg, seeds=[0, 1], progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(
            _make,
            data,
            cfg,
            seeds=[0, 1],
            checkpoint_dir=tmp_path,
            name="lsa",
            progress=False,
            callback=_interrupted_at(70),
        )
    _to_legacy(tmp_path, "lsa", [0, 1])
    seen = []
    resumed = train(
        _make,
        data,
        cfg,
        seeds=[0, 1],
        checkpoint_dir=tmp_path,
        name="lsa",
        progress=False,
        callback=lambda step, models: seen.append(step),
    )
    assert seen[0] == 60
    for a, b in zip(_params(full.models), _params(resumed.models)):
        assert torch.equal(a, b)
    assert [r["step"] for r in resumed.history if r["seed"] == 1] == list(range(10, 101, 10))
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.safetensors")) == [
        f"lsa/seed{s}/{f}.safetensors" for s in (0, 1) for f in ("model", "state")
    ]  # migrated


def test_a_save_stopped_between_its_two_renames_is_finished_on_resume(tmp_path, monkeypatch):
    import iclab.train

    cfg = TrainConfig(steps=20, batch_size=32, lr=0.01, log_every=10, checkpoint_every=10)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    full = train(_make, data, cfg, seeds=[0], progress=False)
    replace = os.replace

    def stop_before_the_last_weights(src, dst):
        if str(dst).endswith("model.safetensors") and (Path(dst).parent / "state.safetensors").exists():
            with safe_open(Path(dst).parent / "state.safetensors", "pt") as f:
                if f.metadata()["step"] == "20":
                    raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(iclab.train.os, "replace", stop_before_the_last_weights)
    with pytest.raises(KeyboardInterrupt):
        train(_make, data, cfg, seeds=[0], checkpoint_dir=tmp_path, name="lsa", progress=False)
    monkeypatch.undo()
    with safe_open(tmp_path / "lsa" / "seed0" / "model.safetensors", "pt") as f:
        assert f.metadata()["step"] == "10"  # the state is at step 20, the weights are not yet
    seen = []
    resumed = train(
        _make,
        data,
        cfg,
        seeds=[0],
        checkpoint_dir=tmp_path,
        name="lsa",
        progress=False,
        callback=lambda step, models: seen.append(step),
    )
    assert seen == [] and not (tmp_path / "lsa" / "seed0" / "model.tmp").exists()  # nothing left to train
    assert torch.equal(_params(full.models)[0], _params(resumed.models)[0])


def test_fixed_training_set_is_reused():
    cfg = TrainConfig(steps=5, batch_size=8, train_size=16)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    assert isinstance(data, FixedTrainingSet)
    a, b = data.batch(0, 1, "cpu", cfg.batch_size), data.batch(0, 2, "cpu", cfg.batch_size)
    full = data.training_set(0, "cpu").tokens
    for batch in (a, b):
        assert batch.tokens.shape[0] == 8
        assert all((row == full).all(-1).all(-1).any() for row in batch.tokens)
    assert not torch.equal(a.tokens, b.tokens)


def test_without_a_terminal_training_logs_a_line_per_log_step(capsys):
    cfg = TrainConfig(steps=20, batch_size=16, lr=0.01, log_every=5)
    train(_make, data_source(TASK, PairedFormat(), cfg.train_size), cfg, seeds=[0, 1], name="lsa", progress=True)
    lines = capsys.readouterr().err.strip().splitlines()  # pytest's stderr is no terminal
    assert [line.split(",")[0] for line in lines] == [f"lsa: step {s}/20" for s in (5, 10, 15, 20)]
    assert all(re.search(r"loss [\d.e+-]+, [\d.e+-]+, [\d.e+-]+ steps/s, \d+ s left$", line) for line in lines)
    train(_make, data_source(TASK, PairedFormat(), cfg.train_size), cfg, seeds=[0], progress=False)
    assert capsys.readouterr().err == ""  # progress off: silent


def test_schedule_and_config_validation():
    cfg = TrainConfig(steps=100, lr=1.0, schedule="cosine", warmup=10)
    assert cfg.lr_at(0) == pytest.approx(0.1) and cfg.lr_at(9) == pytest.approx(1.0)
    assert cfg.lr_at(10) == pytest.approx(1.0) and cfg.lr_at(100) == pytest.approx(0.0)
    with pytest.raises(ConfigError):
        TrainConfig.from_config({"steps": 10, "learning_rate": 0.1})
    with pytest.raises(ConfigError):
        TrainConfig(optimizer="lbfgs")


def test_epochs_derive_the_steps_from_the_training_set_and_batch():
    cfg = TrainConfig(epochs=3, batch_size=8, train_size=20)
    assert cfg.steps == 3 * 3  # ⌈20 / 8⌉ = 3 steps a pass
    assert TrainConfig(steps=7, epochs=2, batch_size=64, train_size=20).steps == 2  # full batch: a step a pass
    assert dataclasses.replace(cfg, train_size=40).steps == 3 * 5  # a recipe completed per training-set size
    recipe = TrainConfig.from_config({"epochs": 4, "batch_size": 8})  # no train_size yet: steps as given
    assert recipe.steps == 1000 and dataclasses.replace(recipe, train_size=8).steps == 4
    with pytest.raises(ConfigError, match="epochs"):
        TrainConfig(epochs=0, train_size=8)
    with pytest.raises(ConfigError, match="needs train.train_size"):
        train(
            lambda g: LinearSelfAttention(TASK.d + 1, generator=g),
            data_source(TASK, PairedFormat(), recipe.train_size),
            recipe,
            [0],
            progress=False,
        )
    result = train(
        lambda g: LinearSelfAttention(TASK.d + 1, generator=g),
        data_source(TASK, PairedFormat(), cfg.train_size),
        cfg,
        [0],
        progress=False,
    )
    assert max(r["step"] for r in result.history) == 9


@pytest.mark.slow
def test_compiled_training_equals_eager():
    # torch.compile fuses ops, so only float rounding may differ; one and two seeds (vmap). SGD, as
    # Adam's normalised step would blow rounding on near-zero gradients up to the size of lr.
    from iclab.models.transformer import GPTConfig, GPTTransformer
    from iclab.prompts import InterleavedFormat

    make = lambda g: GPTTransformer(GPTConfig(4, 1, 2, 16, max_tokens=20, attention="math"), g)
    for seeds in ([0], [0, 1]):
        runs = []
        for compile in (False, True):
            cfg = TrainConfig(steps=5, batch_size=32, lr=0.1, optimizer="sgd", compile=compile)
            runs.append(
                train(make, data_source(TASK, InterleavedFormat(), cfg.train_size), cfg, seeds=seeds, progress=False)
            )
        for eager, compiled in zip(*(_params(r.models) for r in runs)):
            torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)


def test_bf16_training_tracks_fp32():
    # Autocast runs the forward in bfloat16 (8-bit mantissa, ≈ 0.4% per rounding) and the loss in
    # fp32: a short run's losses stay within a few percent of fp32's, yet differ (autocast engaged),
    # while the weights stay fp32. One and two seeds (the vmapped path).
    from iclab.models.transformer import GPTConfig, GPTTransformer
    from iclab.prompts import InterleavedFormat

    make = lambda g: GPTTransformer(GPTConfig(4, 2, 2, 32, max_tokens=20, attention="math"), g)
    for seeds in ([0], [0, 1]):
        losses = {}
        for precision in ("fp32", "tf32", "bf16"):
            cfg = TrainConfig(steps=20, batch_size=32, lr=3e-3, log_every=5, precision=precision)
            result = train(
                make, data_source(TASK, InterleavedFormat(), cfg.train_size), cfg, seeds=seeds, progress=False
            )
            assert all(p.dtype == torch.float32 for m in result.models for p in m.parameters())
            losses[precision] = torch.tensor([r["value"] for r in result.history])
        assert torch.equal(losses["tf32"], losses["fp32"])  # tf32 touches CUDA matmuls only
        assert not torch.equal(losses["bf16"], losses["fp32"])
        torch.testing.assert_close(losses["bf16"], losses["fp32"], rtol=0.05, atol=0)


def test_tf32_sets_the_switch_this_torch_has_and_restores_it(monkeypatch):
    import types

    # torch < 2.9 has allow_tf32 and no fp32_precision; a run must work there too.
    old_torch = types.SimpleNamespace(allow_tf32=False)
    monkeypatch.setattr(torch.backends.cuda, "matmul", old_torch)
    seen = []
    for precision in ("fp32", "tf32"):
        cfg = TrainConfig(steps=4, batch_size=16, log_every=2, precision=precision)
        result = train(
            _make,
            data_source(TASK, PairedFormat(), cfg.train_size),
            cfg,
            seeds=[0],
            progress=False,
            callback=lambda step, models: seen.append(old_torch.allow_tf32),
        )
        assert result.history[-1]["step"] == 4
    assert seen == [False, False, True, True] and old_torch.allow_tf32 is False
    monkeypatch.undo()
    before = torch.backends.cuda.matmul.fp32_precision
    cfg = TrainConfig(steps=2, batch_size=16, log_every=1, precision="tf32")
    train(
        _make,
        data_source(TASK, PairedFormat(), cfg.train_size),
        cfg,
        seeds=[0],
        progress=False,
        callback=lambda step, models: seen.append(torch.backends.cuda.matmul.fp32_precision),
    )
    assert seen[-2:] == ["tf32", "tf32"] and torch.backends.cuda.matmul.fp32_precision == before


def test_unknown_precision_is_a_config_error():
    with pytest.raises(ConfigError, match="precision"):
        TrainConfig(precision="fp16")


def test_warm_start_begins_from_the_given_models():
    cfg = TrainConfig(steps=20, batch_size=64, lr=0.01)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    trained = train(_make, data, cfg, seeds=[0, 1], progress=False).models
    # At lr 0 nothing moves: each seed ends with exactly its own warm start's weights, not make_model's.
    frozen = TrainConfig(steps=3, batch_size=64, lr=0.0)
    warm = train(_make, data, frozen, seeds=[0, 1], progress=False, init=trained).models
    cold = train(_make, data, frozen, seeds=[0, 1], progress=False).models
    for start, model, fresh in zip(_params(trained), _params(warm), _params(cold)):
        torch.testing.assert_close(model, start, rtol=0, atol=0)
        assert not torch.equal(model, fresh)
    with pytest.raises(ValueError):
        train(_make, data, frozen, seeds=[0, 1], progress=False, init=trained[:1])


class _SpikyPrompts(FreshPrompts):
    """Fresh prompts whose targets are 1000 times larger at the given 0-based steps (a finite loss
    about 10⁶ times the start there)."""

    def __init__(self, steps):
        super().__init__(TASK, PairedFormat())
        self.steps = set(steps)

    def batch(self, seed, step, device, batch_size):
        prompt = super().batch(seed, step, device, batch_size)
        if step in self.steps:
            prompt.targets.mul_(1000.0)
        return prompt


def test_a_loss_that_stays_blown_up_stops_training_and_isolated_spikes_do_not(monkeypatch):
    cfg = TrainConfig(steps=30, batch_size=64, lr=0.01, checkpoint_every=4)
    blown_up_from_step_6 = _SpikyPrompts(range(5, 30))
    stop = 5 + BLOWUP_STEPS
    with pytest.raises(
        TrainingDiverged,
        match=rf"diverged \(loss .* times its start, over 10000 times for "
        rf"{BLOWUP_STEPS} steps\) for seed 0, 1 at step {stop}",
    ):
        train(_make, blown_up_from_step_6, cfg, seeds=[0, 1], progress=False)
    without_rule = dataclasses.replace(cfg, blowup=None)
    assert train(_make, blown_up_from_step_6, without_rule, seeds=[0], progress=False).history[-1]["step"] == 30

    saved = []
    monkeypatch.setattr(_SeedGroup, "_save", lambda self: saved.append(self.step))
    spikes = _SpikyPrompts({3, 7, 11, *range(15, 15 + BLOWUP_STEPS - 1), 27})  # on every due checkpoint
    train(_make, spikes, cfg, seeds=[0, 1], checkpoint_dir="unused", progress=False)
    assert saved == [30]  # no stop; the due checkpoints at spikes are skipped, the last one is not
    saved.clear()
    train(_make, spikes, without_rule, seeds=[0], checkpoint_dir="unused", progress=False)
    assert saved == [4, 8, 12, 16, 20, 24, 28, 30]


def test_the_blowup_reference_is_the_initial_loss_also_after_a_resume(tmp_path):
    cfg = TrainConfig(steps=8, batch_size=64, lr=0.01, log_every=1, checkpoint_every=4)
    data = data_source(TASK, PairedFormat(), cfg.train_size)
    first = train(_make, data, cfg, seeds=[0, 1], checkpoint_dir=tmp_path, progress=False)
    resumed = _SeedGroup(
        _make, data, dataclasses.replace(cfg, steps=12), [0, 1], torch.device("cpu"), tmp_path, "model"
    )
    assert resumed.step == 8
    step_one = torch.tensor(
        [r["value"] for r in first.history if r["step"] == 1]
    )  # seeds 0, 1: initial weights, step 0's batch
    torch.testing.assert_close(resumed.start_losses, step_one)
    torch.testing.assert_close(resumed.loss_limits, 1e4 * step_one)
    with pytest.raises(ConfigError, match="blowup"):
        TrainConfig(blowup=0.5)


class _TokenIds:
    """Token-id prompts of T = 6 over the first 4 of 10 tokens, with real labels read at every second token."""

    def batch(self, seed, step, device, batch_size):
        g = torch.Generator().manual_seed(seed * 1000 + step)
        return Prompt(torch.randint(4, (batch_size, 6), generator=g), torch.randn(batch_size, 3, generator=g), 3)


def _small_gpt(g):
    return GPTTransformer(
        GPTConfig(
            None, n_layers=2, n_heads=2, width=8, max_tokens=10, vocab_size=10, logit_identity=True, attention="math"
        ),
        g,
    )


def test_weight_decay_spares_biases_layernorms_positions_and_the_identity_scalars():
    cfg = TrainConfig(steps=1, batch_size=8, lr=0.1, optimizer="adamw", weight_decay=0.5)
    group = _SeedGroup(_small_gpt, _TokenIds(), cfg, [0, 1], torch.device("cpu"), None, "gpt")
    names = {id(p): n for n, p in group.params.items()}
    decay, no_decay = ({names[id(p)] for p in g["params"]} for g in group.optimizer.param_groups)
    layers = [f"layers.{l}." for l in (0, 1)]
    assert decay == {
        "embedding.weight",
        "read_out.weight",
        *(l + w for l in layers for w in ("attn.qkv.weight", "attn.out.weight", "mlp.0.weight", "mlp.2.weight")),
    }
    per_layer = (
        "ln_attn.weight",
        "ln_attn.bias",
        "ln_mlp.weight",
        "ln_mlp.bias",
        "attn.qkv.bias",
        "attn.out.bias",
        "mlp.0.bias",
        "mlp.2.bias",
        "attn.a",
    )
    assert no_decay == {
        "positions",
        "ln_out.weight",
        "ln_out.bias",
        "read_out.bias",
        *(l + w for l in layers for w in per_layer),
    }
    assert [g["weight_decay"] for g in group.optimizer.param_groups] == [0.5, 0.0]

    # One AdamW step: a tensor's rows with no gradient (tokens 4-9 never appear, positions 6-9 are never
    # read) move only by the decay, so decayed embedding rows shrink by 1 - lr·wd and positions stay.
    start = _small_gpt(generator(0, "init"))
    trained = train(_small_gpt, _TokenIds(), cfg, seeds=[0, 1], progress=False).models[0]
    torch.testing.assert_close(trained.embedding.weight[4:], (1 - 0.1 * 0.5) * start.embedding.weight[4:])
    torch.testing.assert_close(trained.positions[6:], start.positions[6:], rtol=0, atol=0)
    assert not torch.allclose(trained.positions[:6], start.positions[:6])  # the rows in use did train


def test_resume_with_two_parameter_groups_is_exact_and_each_tensor_keeps_its_own_optimizer_state(tmp_path):
    cfg = TrainConfig(steps=8, batch_size=8, lr=0.01, optimizer="adamw", weight_decay=0.1, checkpoint_every=4)
    full = train(_small_gpt, _TokenIds(), cfg, seeds=[0, 1], progress=False)
    train(
        _small_gpt,
        _TokenIds(),
        dataclasses.replace(cfg, steps=4),
        seeds=[0, 1],
        checkpoint_dir=tmp_path,
        progress=False,
    )
    folder = checkpoint_folder(tmp_path, "model", 0)
    weights, state = load_file(folder / WEIGHTS), load_file(folder / STATE)
    for name, tensor in weights.items():
        assert state[f"optim.{name}.exp_avg"].shape == tensor.shape, name
    resumed = train(_small_gpt, _TokenIds(), cfg, seeds=[0, 1], checkpoint_dir=tmp_path, progress=False)
    for a, b in zip(_params(full.models), _params(resumed.models)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_reported_step_is_the_latest_of_the_lowest_validation_and_held_out_measures_each_seed():
    def result(validation: dict[int, float]) -> TrainResult:
        rows = [{"seed": 7, "step": step, "metric": "validation", "value": v} for step, v in validation.items()]
        return TrainResult([], rows + [{"seed": 8, "step": 10, "metric": "validation", "value": 0.0}], [7, 8])

    # A memorised copying model: the validation error is flat from step 50 while the model still improves.
    assert result({10: 1.0, 20: 0.4, 50: 0.032, 60: 0.032, 150: 0.032}).best_step(7, "validation") == 150
    # A later rise on validation is not taken: the lowest value decides, ties go to the later step.
    assert result({10: 1.0, 20: 0.1, 30: 0.2, 40: 0.1, 50: 0.3}).best_step(7, "validation") == 40
    assert result({10: 0.5, 20: 0.2, 30: 0.25}).curve(7, "validation") == {10: 0.5, 20: 0.2, 30: 0.25}
    callback = held_out(
        {
            "norm": lambda m, seed: m.weight.norm().item() + seed,
            "grad": lambda m, seed: float(m(torch.ones(2)).requires_grad),
        }
    )
    models = {3: torch.nn.Linear(2, 1), 5: torch.nn.Linear(2, 1)}
    found = callback(10, models)
    assert found["norm"] == [models[3].weight.norm().item() + 3, models[5].weight.norm().item() + 5]
    assert found["grad"] == [0.0, 0.0]  # measured without building a graph


def test_adam_takes_the_blocks_betas_and_eps_and_refuses_bad_ones():
    cfg = TrainConfig(steps=1, batch_size=8, betas=[0.9, 0.98], eps=1e-9)
    group = _SeedGroup(_small_gpt, _TokenIds(), cfg, [0], torch.device("cpu"), None, "gpt")
    assert {(g["betas"], g["eps"]) for g in group.optimizer.param_groups} == {((0.9, 0.98), 1e-9)}
    assert TrainConfig().betas == [0.9, 0.999] and TrainConfig().eps == 1e-8  # PyTorch's defaults, as YAML reads back
    for bad in ({"betas": [0.9]}, {"betas": [0.9, 1.0]}, {"betas": "x"}, {"eps": 0.0}, {"eps": float("nan")}):
        with pytest.raises(ConfigError, match="train.betas|train.eps"):
            TrainConfig(**bad)


def test_a_training_key_added_later_leaves_the_recipe_as_it_was_at_its_old_value():
    from iclab.runs import Recipe, without_execution

    old = {"train": {"steps": 10, "lr": 0.1}}
    at_default = {"train": {"steps": 10, "lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8}}
    changed = {"train": {"steps": 10, "lr": 0.1, "betas": [0.9, 0.98], "eps": 1e-8}}
    fingerprint = lambda config: Recipe(without_execution(config), 1).fingerprint
    assert fingerprint(at_default) == fingerprint(old) != fingerprint(changed)
