"""State dicts in other layouts: the Hub export both ways, and Garg et al.'s TransformerModel into iclab's."""

import pytest
import torch
import yaml
from torch import nn

import iclab
from iclab.config import ConfigError
from iclab.models import GPTConfig, GPTTransformer, describe
from iclab.models.convert import from_garg, from_hub, garg_config, to_hub
from iclab.prompts import InterleavedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression

SIZES = dict(n_dims=4, n_positions=8, n_embd=32, n_layer=2, n_head=4)


def _perturb(model: nn.Module, seed: int) -> nn.Module:
    """Move every parameter (LayerNorms and biases too, which start at 1 and 0) off its initial value,
    so that a misplaced one changes the predictions."""
    g = generator(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


class GargTransformer(nn.Module):
    """Garg et al.'s TransformerModel as their paper and code describe it: a linear read-in of the
    interleaved prompt (y tokens [y, 0, …, 0]), a Hugging Face GPT2Model on the embeddings (positions
    for 2·n_positions tokens, no dropout) and a linear read-out at every x token."""

    def __init__(self, n_dims, n_positions, n_embd, n_layer, n_head):
        super().__init__()
        from transformers import GPT2Config, GPT2Model

        backbone = GPT2Config(
            n_positions=2 * n_positions,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            use_cache=False,
        )
        self._read_in = nn.Linear(n_dims, n_embd)
        self._backbone = GPT2Model(backbone)
        self._read_out = nn.Linear(n_embd, 1)

    def forward(self, xs, ys):
        b, n, d = xs.shape
        y_tokens = torch.cat([ys[..., None], xs.new_zeros(b, n, d - 1)], dim=-1)
        zs = torch.stack([xs, y_tokens], dim=2).reshape(b, 2 * n, d)
        hidden = self._backbone(inputs_embeds=self._read_in(zs)).last_hidden_state
        return self._read_out(hidden)[:, ::2, 0]


def test_garg_transformer_converted_predicts_what_theirs_predicts():
    pytest.importorskip("transformers")
    torch.manual_seed(0)  # GPT2Model draws its initial weights from the global stream
    theirs = _perturb(GargTransformer(**SIZES), seed=1)
    config = garg_config(**SIZES)
    ours = GPTTransformer(config)
    ours.load_state_dict(from_garg(theirs.state_dict(), config))
    episode = LinearRegression(GaussianInputs(4), n_context=8).sample(32, generator(2))
    with torch.no_grad():
        expected = theirs(episode.xs, episode.ys)  # (B, N)
        got = ours.eval()(InterleavedFormat().encode(episode).tokens, 8)
    assert expected.abs().mean() > 0.1  # predictions far from 0: every part of the network matters
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def _as_garg(model: GPTTransformer) -> dict:
    """The state dict Garg et al.'s TransformerModel would hold for ``model`` (whose read-in y column
    equals its first column), with the unused token embedding and the attention-mask buffers older
    ``transformers`` versions saved: the inverse of :func:`from_garg`, written out independently."""
    sd, c = model.state_dict(), model.config
    out = {
        "_read_in.weight": sd["read_in.weight"][:, :-1],
        "_read_in.bias": sd["read_in.bias"],
        "_backbone.wte.weight": torch.zeros(3, c.width),
        "_backbone.wpe.weight": sd["positions"],
        "_backbone.ln_f.weight": sd["ln_out.weight"],
        "_backbone.ln_f.bias": sd["ln_out.bias"],
        "_read_out.weight": sd["read_out.weight"],
        "_read_out.bias": sd["read_out.bias"],
    }
    for l in range(c.n_layers):
        h, ours = f"_backbone.h.{l}.", f"layers.{l}."
        out.update(
            {
                h + "ln_1.weight": sd[ours + "ln_attn.weight"],
                h + "ln_1.bias": sd[ours + "ln_attn.bias"],
                h + "ln_2.weight": sd[ours + "ln_mlp.weight"],
                h + "ln_2.bias": sd[ours + "ln_mlp.bias"],
                h + "attn.bias": torch.ones(1, 1, c.max_tokens, c.max_tokens).tril(),
                h + "attn.masked_bias": torch.tensor(-1e4),
            }
        )
        for theirs, mine in (
            ("attn.c_attn", "attn.qkv"),
            ("attn.c_proj", "attn.out"),
            ("mlp.c_fc", "mlp.0"),
            ("mlp.c_proj", "mlp.2"),
        ):
            out[h + theirs + ".weight"] = sd[ours + mine + ".weight"].T.contiguous()  # Conv1D: (in, out)
            out[h + theirs + ".bias"] = sd[ours + mine + ".bias"]
    return out


def _garg_model(seed: int) -> GPTTransformer:
    model = _perturb(GPTTransformer(garg_config(**SIZES), generator(seed)), seed)
    with torch.no_grad():
        model.read_in.weight[:, -1] = model.read_in.weight[:, 0]  # what a converted model's read-in looks like
    return model


def _garg_run(folder, task="sparse_linear_regression", task_kwargs=None):
    """One of Garg et al.'s run folders: config.yaml, state.pt at step 100 and model_50.pt."""
    folder.mkdir()
    curriculum = {
        "dims": {"start": 4, "end": 4, "inc": 1, "interval": 100},
        "points": {"start": 8, "end": 8, "inc": 1, "interval": 100},
    }
    config = {
        "model": {"family": "gpt2", **SIZES},
        "training": {
            "task": task,
            "task_kwargs": {"sparsity": 2} if task_kwargs is None else task_kwargs,
            "data": "gaussian",
            "curriculum": curriculum,
            "train_steps": 100,
        },
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    latest, early = _garg_model(0), _garg_model(1)
    torch.save(
        {
            "model_state_dict": _as_garg(latest),
            "optimizer_state_dict": {"state": {}, "param_groups": []},
            "train_step": 100,
        },
        folder / "state.pt",
    )
    torch.save(_as_garg(early), folder / "model_50.pt")
    return latest, early


def test_a_garg_run_loads_with_its_task_and_evaluates(tmp_path):
    latest, early = _garg_run(tmp_path / "garg")
    tokens = InterleavedFormat().encode(LinearRegression(GaussianInputs(4), n_context=8).sample(8, generator(3))).tokens
    for step, model in ((None, latest), (50, early)):
        loaded = iclab.load_model(tmp_path / "garg", step=step)
        assert loaded.step == (100 if step is None else 50) and type(loaded.prompt_format) is InterleavedFormat
        assert (loaded.task.name, loaded.task.d, loaded.task.n_context, loaded.task.sparsity) == (
            "sparse-linear",
            4,
            8,
            2,
        )
        assert loaded.model.config.activation == "gelu-tanh"
        with torch.no_grad():
            assert torch.equal(loaded.model(tokens, 8), model(tokens, 8))
    result = iclab.evaluate(
        tmp_path / "garg",
        step="all",
        shifts=["standard", "orthogonal"],
        learners=["ols", "lasso=0.1"],
        prompts=32,
        bootstrap=10,
    )
    assert set(result.metrics.query("model == 'transformer'").step) == {50, 100}
    assert result.path.parent == tmp_path / "garg"


@pytest.mark.parametrize(
    "task, kwargs, expected",
    [
        ("linear_regression", {}, {"kind": "function-class", "class": "linear"}),
        ("decision_tree", {"depth": 3}, {"kind": "function-class", "class": "decision-tree", "depth": 3}),
        (
            "noisy_linear_regression",
            {"noise_std": 0.5, "renormalize_ys": True},
            {"kind": "function-class", "class": "noisy-linear", "noise": 0.5},
        ),
        ("noisy_linear_regression", {"noise_std": 0.5}, {"kind": "linear-regression", "noise": 0.5}),
        (
            "relu_2nn_regression",
            {"hidden_layer_size": 100},
            {"kind": "function-class", "class": "relu-net", "hidden": 100},
        ),
    ],
)
def test_garg_tasks_become_iclab_tasks(tmp_path, task, kwargs, expected):
    _garg_run(tmp_path / "garg", task, kwargs)
    assert iclab.load_model(tmp_path / "garg").metadata["task"] == {**expected, "d": 4, "n_context": 8}


def test_a_garg_state_dict_of_another_shape_is_refused():
    sd = _as_garg(_garg_model(0))
    for wrong in (
        garg_config(**{**SIZES, "n_layer": 1}),
        garg_config(**{**SIZES, "n_dims": 5}),
        garg_config(**{**SIZES, "n_positions": 9}),
    ):
        with pytest.raises(ConfigError, match="not a state dict of Garg et al.'s TransformerModel"):
            from_garg(sd, wrong)


def test_hub_layout_round_trips_weights_and_metadata():
    model = GPTTransformer(GPTConfig(3, 1, 2, 8, max_tokens=6), generator(0))
    metadata = {
        **describe(model),
        "task": {"kind": "function-class", "class": "linear", "d": 2, "n_context": 3},
        "prompt_format": {"class": "InterleavedFormat"},
        "name": "gpt",
        "seed": 4,
        "step": 9,
    }
    tensors, config = to_hub(model.state_dict(), metadata)
    assert config["model_type"] == "iclab" and config["architectures"] == ["GPTTransformer"]
    state, back = from_hub(tensors, config)
    assert back == metadata and state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ConfigError, match="not an iclab export"):
        from_hub(tensors, {"model_type": "gpt2"})
    with pytest.raises(ConfigError, match="names no model class"):
        to_hub(model.state_dict(), {"task": None})
