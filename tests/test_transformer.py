import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

from iclab.config import ConfigError
from iclab.models.attention import SelfAttention
from iclab.models.transformer import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression


def _model(**kw):
    return GPTTransformer(
        GPTConfig(4, n_layers=2, n_heads=2, width=16, max_tokens=12, init_scale=0.2, **kw), generator(0)
    )


def test_interleaved_layout():
    episode = LinearRegression(GaussianInputs(3), n_context=4).sample(2, generator(1))
    prompt = InterleavedFormat().encode(episode)
    assert prompt.tokens.shape == (2, 8, 4) and prompt.n_context == 4
    torch.testing.assert_close(prompt.tokens[:, 0::2, :3], episode.xs)
    torch.testing.assert_close(prompt.tokens[:, 1::2, 3], episode.ys)
    assert not prompt.tokens[:, 0::2, 3].any() and not prompt.tokens[:, 1::2, :3].any()
    torch.testing.assert_close(prompt.targets, episode.ys)


@pytest.mark.parametrize("attention", ["sdpa", "math"])
def test_changing_a_token_never_changes_earlier_predictions(attention):
    model = _model(attention=attention, logit_identity=True, value_identity=True)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.a.fill_(0.02)
            layer.attn.b.fill_(-0.2)
    g = generator(5)
    tokens = torch.randn(3, 12, 4, generator=g)
    base, found = model(tokens, 6, activations=["blocks.1.hook_resid_post"])
    assert base.shape == (3, 6) and found["blocks.1.hook_resid_post"].shape == (3, 12, 16)
    for t in (3, 6, 9):
        changed = tokens.clone()
        changed[:, t] += torch.randn(3, 4, generator=g)
        after = model(changed, 6)
        # Prediction i is read at token 2i, so tokens t > 2i must not matter.
        earlier = (t + 1) // 2
        torch.testing.assert_close(after[:, :earlier], base[:, :earlier], rtol=0, atol=1e-6)
        assert (after[:, earlier:] - base[:, earlier:]).abs().max() > 1e-4


@pytest.mark.parametrize("attention", ["sdpa", "math"])
@pytest.mark.parametrize("identity", [False, True])
def test_last_block_at_read_positions_only_equals_the_full_forward(attention, identity):
    model = _model(attention=attention, logit_identity=identity, value_identity=identity)
    if identity:
        with torch.no_grad():
            for layer in model.layers:
                layer.attn.a.fill_(0.03)
                layer.attn.b.fill_(0.3)
    tokens = torch.randn(3, 12, 4, generator=generator(8))
    for n_context in (6, 4):
        full, found = model(tokens, n_context, activations=["ln_final.hook_normalized"])
        read = found["ln_final.hook_normalized"][:, : 2 * n_context : 2]
        torch.testing.assert_close(full, model.read_out(read)[..., 0])
        torch.testing.assert_close(model(tokens, n_context), full, rtol=1e-5, atol=1e-6)


def test_a_b_terms_at_zero_leave_outputs_unchanged():
    plain, extended = _model(), _model(logit_identity=True, value_identity=True)
    assert {n for n, _ in extended.named_parameters()} - {n for n, _ in plain.named_parameters()} == {
        f"layers.{l}.attn.{p}" for l in (0, 1) for p in "ab"
    }
    tokens = torch.randn(3, 12, 4, generator=generator(6))
    torch.testing.assert_close(extended(tokens, 6), plain(tokens, 6), rtol=0, atol=1e-6)
    with torch.no_grad():
        extended.layers[0].attn.b.fill_(0.5)
    assert (extended(tokens, 6) - plain(tokens, 6)).abs().max() > 1e-3


def test_sdpa_and_math_attention_agree_and_vmap_over_seeds():
    sdpa, math = _model(), _model(attention="math")
    tokens = torch.randn(2, 3, 12, 4, generator=generator(7))
    torch.testing.assert_close(sdpa(tokens[0], 6), math(tokens[0], 6), rtol=1e-5, atol=1e-6)
    members = [GPTTransformer(GPTConfig(4, 2, 2, 16, max_tokens=12, attention="math"), generator(s)) for s in (0, 1)]
    params, buffers = stack_module_state(members)
    out = vmap(lambda p, b, t: functional_call(members[0], (p, b), (t,), {"n_context": 6}))(params, buffers, tokens)
    torch.testing.assert_close(out, torch.stack([m(t, 6) for m, t in zip(members, tokens)]), rtol=1e-5, atol=1e-6)


def test_bad_sizes_raise_config_error():
    with pytest.raises(ConfigError):
        GPTConfig(4, width=10, n_heads=3)
    with pytest.raises(ConfigError):
        _model()(torch.randn(1, 14, 4), 7)


@pytest.mark.parametrize("attention", ["sdpa", "math"])
def test_logit_identity_adds_exactly_a_xxt_to_the_logits(attention):
    # With W_Q = W_K = 0 the logits are a_h·XXᵀ alone: check them against a hand-written attention.
    width, heads, head_dim = 8, 2, 4
    attn = SelfAttention(width, heads, logit_identity=True, attention=attention)
    with torch.no_grad():
        attn.qkv.weight[: 2 * width].zero_()
        attn.qkv.bias[: 2 * width].zero_()
        attn.a.copy_(torch.tensor([0.3, -0.5]))
    x = torch.randn(3, 5, width, generator=generator(1))
    v = attn.qkv(x)[..., 2 * width :].unflatten(-1, (heads, head_dim)).transpose(1, 2)
    logits = attn.a[:, None, None] * (x @ x.transpose(1, 2))[:, None]
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    weights = logits.masked_fill(future, float("-inf")).softmax(-1)
    expected = attn.out((weights @ v).transpose(1, 2).reshape(3, 5, width))
    torch.testing.assert_close(attn(x), expected)


def _symbol_model(**kw):
    options = dict(
        vocab_size=20,
        n_layers=2,
        n_heads=2,
        width=16,
        max_tokens=5,
        causal=False,
        cls=True,
        bias=False,
        ln_out_affine=False,
        init="pytorch",
        attention="math",
    )
    return GPTTransformer(GPTConfig(None, **{**options, **kw}), generator(0))


@pytest.mark.parametrize("tied", [False, True])
def test_token_model_with_identity_terms_at_zero_equals_the_plain_one(tied):
    plain, extended = (
        _symbol_model(tied_output=tied),
        _symbol_model(tied_output=tied, logit_identity=True, value_identity=True),
    )
    tokens = torch.randint(20, (6, 4), generator=generator(1))
    out = extended(tokens, 4)
    assert out.shape == ((6, 1, 20) if tied else (6, 1))
    torch.testing.assert_close(out, plain(tokens, 4), rtol=1e-6, atol=1e-6)  # logits reach ~10
    for term in "ab":
        changed = _symbol_model(tied_output=tied, logit_identity=True, value_identity=True)
        with torch.no_grad():
            for layer in changed.layers:
                getattr(layer.attn, term).fill_(0.3)
        assert (changed(tokens, 4) - out).abs().max() > 1e-3


def test_cls_read_out_is_the_last_position_of_the_full_forward_and_sees_every_token():
    model = _symbol_model(logit_identity=True, value_identity=True, head_dim=5)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.a.fill_(0.05)
            layer.attn.b.fill_(0.4)
    tokens = torch.randint(20, (3, 4), generator=generator(2))
    out, found = model(tokens, 4, activations=["ln_final.hook_normalized"])
    final = found["ln_final.hook_normalized"]
    assert final.shape == (3, 5, 16)  # the CLS is the fifth token
    torch.testing.assert_close(out, model.read_out(final[:, -1:])[..., 0])
    torch.testing.assert_close(model(tokens, 4), out, rtol=1e-5, atol=1e-6)
    for t in range(4):  # bidirectional: the CLS at the end sees every token
        changed = tokens.clone()
        changed[:, t] = (changed[:, t] + 1) % 20
        assert (model(changed, 4) - out).abs().min() > 1e-6


def test_tied_output_is_the_final_state_against_every_embedding():
    model = _symbol_model(tied_output=True)
    assert model.read_out is None and not any(n.startswith("read_out") for n, _ in model.named_parameters())
    tokens = torch.randint(20, (3, 4), generator=generator(3))
    logits, found = model(tokens, 4, activations=["ln_final.hook_normalized"])
    torch.testing.assert_close(logits, found["ln_final.hook_normalized"][:, -1:] @ model.embedding.weight.T)
    # A causal language model: stride 1 reads a next-token distribution at every position.
    lm = _symbol_model(tied_output=True, cls=False, causal=True, stride=1)
    assert lm(tokens, 4).shape == (3, 4, 20)


def test_pytorch_init_follows_nn_linear_and_nn_embedding():
    model = _symbol_model(width=64, n_heads=4, max_tokens=64, vocab_size=500)
    assert model.embedding.weight.std().item() == pytest.approx(1.0, abs=0.05)
    assert model.positions.std().item() == pytest.approx(1.0, abs=0.05)
    qkv = model.layers[0].attn.qkv
    assert qkv.bias is None and qkv.weight.abs().max() <= 1 / 8
    assert qkv.weight.std().item() == pytest.approx(1 / (8 * 3**0.5), rel=0.05)  # uniform on ±1/√64
    assert not model.ln_out.elementwise_affine
    again = _symbol_model(width=64, n_heads=4, max_tokens=64, vocab_size=500)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))


def test_garg_init_is_gpt2_between_a_read_in_and_a_read_out_at_nn_linear_default():
    """Garg et al.'s model: Hugging Face's GPT-2 initialisation between two plain ``nn.Linear``."""
    config = GPTConfig(token_dim=6, n_layers=2, n_heads=4, width=256, max_tokens=64, init="garg")
    model = GPTTransformer(config, generator(0))
    for layer, fan_in in ((model.read_in, 6), (model.read_out, 256)):
        bound = fan_in**-0.5
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
        assert layer.weight.std().item() == pytest.approx(bound / 3**0.5, rel=0.15)  # uniform on ±1/√fan_in
    assert model.layers[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)  # the backbone's gpt2
    assert model.layers[0].attn.qkv.bias.abs().max() == 0
    assert model.positions.std().item() == pytest.approx(0.02, rel=0.05)
    residual = 0.02 / (2 * 2) ** 0.5
    assert model.layers[1].mlp[2].weight.std().item() == pytest.approx(residual, rel=0.05)


def test_bad_token_model_options_raise_config_error():
    for kw in (dict(token_dim=4, vocab_size=10), dict(token_dim=4, tied_output=True), dict(init="xavier")):
        with pytest.raises(ConfigError):
            GPTConfig(**{"token_dim": None, "vocab_size": 10, **kw})
    with pytest.raises(ConfigError):
        _symbol_model()(torch.zeros(2, 5, dtype=torch.long), 5)  # 5 tokens + CLS > 5 positions


@pytest.mark.parametrize("causal", [True, False])
def test_logit_identity_enters_bidirectional_and_causal_logits_exactly(causal):
    width, heads, head_dim = 8, 2, 3
    attn = SelfAttention(
        width,
        heads,
        head_dim=head_dim,
        causal=causal,
        bias=False,
        logit_identity=True,
        value_identity=True,
        attention="math",
    )
    with torch.no_grad():
        attn.a.copy_(torch.tensor([0.3, -0.5]))
        attn.b.copy_(torch.tensor([0.7, 0.2]))
    x = torch.randn(3, 5, width, generator=generator(4))
    q, k, v = (z.unflatten(-1, (heads, head_dim)).transpose(1, 2) for z in attn.qkv(x).split(heads * head_dim, -1))
    logits = q @ k.transpose(-1, -2) / head_dim**0.5 + attn.a[:, None, None] * (x @ x.transpose(1, 2))[:, None]
    if causal:
        logits = logits.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    weights = logits.softmax(-1)  # (B, H, T, T)
    expected = attn.out((weights @ v).transpose(1, 2).reshape(3, 5, heads * head_dim))
    expected = expected + torch.einsum("h,bhts,bsw->btw", attn.b, weights, x)
    torch.testing.assert_close(attn(x), expected)
    torch.testing.assert_close(attn(x, slice(4, 5)), expected[:, 4:5])


def test_identity_scale_multiplies_both_terms():
    scaled, plain = (
        SelfAttention(8, 2, causal=False, logit_identity=True, value_identity=True, attention="math", identity_scale=s)
        for s in (3.0, 1.0)
    )
    plain.load_state_dict(scaled.state_dict())
    with torch.no_grad():
        scaled.a.copy_(torch.tensor([0.1, -0.2]))
        scaled.b.copy_(torch.tensor([0.3, 0.5]))
        plain.a.copy_(3 * scaled.a)
        plain.b.copy_(3 * scaled.b)
    x = torch.randn(2, 4, 8, generator=generator(5))
    torch.testing.assert_close(scaled(x), plain(x))


def test_gpt_config_names_the_model_and_keeps_the_parameter_names():
    config = GPTConfig(4, n_layers=1, n_heads=2, width=8, max_tokens=6)
    model = GPTTransformer(config, generator(0))
    assert model.config is config
    with pytest.raises(AttributeError):
        config.width = 16  # frozen: the config a model was built from cannot drift from it
    block = [
        "ln_attn.weight",
        "ln_attn.bias",
        "attn.qkv.weight",
        "attn.qkv.bias",
        "attn.out.weight",
        "attn.out.bias",
        "ln_mlp.weight",
        "ln_mlp.bias",
        "mlp.0.weight",
        "mlp.0.bias",
        "mlp.2.weight",
        "mlp.2.bias",
    ]
    assert list(model.state_dict()) == [
        "positions",
        "read_in.weight",
        "read_in.bias",
        *[f"layers.0.{k}" for k in block],
        "ln_out.weight",
        "ln_out.bias",
        "read_out.weight",
        "read_out.bias",
    ]


def test_read_last_reads_the_last_input_token_of_the_full_forward():
    model = _symbol_model(cls=False, read_last=True, tied_output=True)
    tokens = torch.randint(20, (3, 4), generator=generator(2))
    out, found = model(tokens, 4, activations=["ln_final.hook_normalized"])
    final = found["ln_final.hook_normalized"]
    assert final.shape == (3, 4, 16) and out.shape == (3, 1, 20)  # no CLS token: four positions
    torch.testing.assert_close(out, final[:, -1:] @ model.embedding.weight.T)
    torch.testing.assert_close(model(tokens, 4), out, rtol=1e-5, atol=1e-6)


def test_dropout_acts_in_training_only_and_training_with_it_resumes_exactly(tmp_path):
    from iclab.train import TrainConfig, data_source, train

    config = GPTConfig(token_dim=4, n_layers=2, n_heads=2, width=16, max_tokens=12, attention="math", dropout=0.3)
    model = GPTTransformer(config, generator(0))
    prompt = InterleavedFormat().encode(LinearRegression(GaussianInputs(3), n_context=6).sample(8, generator(1)))
    with torch.no_grad():
        model.eval()
        torch.testing.assert_close(model(prompt.tokens, 6), model(prompt.tokens, 6))
        model.train()
        assert not torch.equal(model(prompt.tokens, 6), model(prompt.tokens, 6))
    task = LinearRegression(GaussianInputs(3), n_context=6)
    make = lambda g: GPTTransformer(config, g)
    full = TrainConfig(steps=6, batch_size=16, lr=0.01, checkpoint_every=3)
    data = data_source(task, InterleavedFormat())
    whole = train(make, data, full, seeds=[0, 1], checkpoint_dir=tmp_path / "whole", progress=False).models
    train(
        make,
        data,
        TrainConfig(steps=3, batch_size=16, lr=0.01, checkpoint_every=3),
        seeds=[0, 1],
        checkpoint_dir=tmp_path / "cut",
        progress=False,
    )
    resumed = train(make, data, full, seeds=[0, 1], checkpoint_dir=tmp_path / "cut", progress=False).models
    for a, b in zip(whole, resumed):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            assert torch.equal(p, q), name


def test_gelu_tanh_activation_and_attention_patterns():
    exact, tanh = _model(), _model(activation="gelu-tanh")
    assert list(exact.state_dict()) == list(tanh.state_dict())  # no parameter of its own
    tokens = torch.randn(3, 12, 4, generator=generator(2))
    difference = (exact(tokens, 6) - tanh(tokens, 6)).abs().max().item()
    assert 0 < difference < 1e-2  # the tanh form is close to the exact GELU, not equal
    with pytest.raises(ConfigError, match="activation"):
        GPTConfig(4, activation="relu")
    _, found = exact(tokens, 6, activations=["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"])
    weights = torch.stack([found["blocks.0.attn.hook_pattern"], found["blocks.1.attn.hook_pattern"]])  # (L, B, H, T, T)
    assert weights.shape == (2, 3, 2, 12, 12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 2, 12))
    assert not weights.triu(1).any()  # causal


@pytest.mark.parametrize("attention", ["sdpa", "math"])
def test_named_activations_come_from_the_same_pass_as_the_prediction(attention):
    model = _model(attention=attention, logit_identity=True, value_identity=True)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.a.fill_(0.03)
            layer.attn.b.fill_(0.3)
    tokens = torch.randn(3, 12, 4, generator=generator(9))
    names = model.activation_names()
    assert names[:2] == ["hook_embed", "hook_pos_embed"] and names[-1] == "ln_final.hook_normalized"
    assert len(names) == 2 + 13 * 2 + 1
    prediction, found = model(tokens, 6, activations=names)
    torch.testing.assert_close(prediction, model(tokens, 6), rtol=1e-5, atol=1e-6)
    assert set(found) == set(names)
    assert found["blocks.1.attn.hook_pattern"].shape == found["blocks.1.attn.hook_attn_scores"].shape == (3, 2, 12, 12)
    per_head = ("hook_q", "hook_k", "hook_v", "hook_z")
    assert all(found[f"blocks.1.attn.{n}"].shape == (3, 12, 2, 8) for n in per_head)  # (B, T, H, d_h)
    assert all(found[n].shape == (3, 12, 16) for n in names if ".attn." not in n)
    torch.testing.assert_close(found["blocks.0.hook_resid_pre"], found["hook_embed"] + found["hook_pos_embed"])
    for layer, block in enumerate(model.layers):
        at = lambda name: found[f"blocks.{layer}.{name}"]
        torch.testing.assert_close(at("ln1.hook_normalized"), block.ln_attn(at("hook_resid_pre")))
        # The pattern is the softmax the attention used: A_h X W_V per head, then the output map and b·AX.
        x, pattern = at("ln1.hook_normalized"), at("attn.hook_pattern")
        v = block.attn.qkv(x)[..., 32:].unflatten(-1, (2, 8)).transpose(1, 2)  # (B, H, T, d_h)
        heads = (pattern @ v).transpose(1, 2).reshape(3, 12, 16)
        expected = block.attn.out(heads) + torch.einsum("h,bhts,bsw->btw", block.attn.b, pattern, x)
        torch.testing.assert_close(at("hook_attn_out"), expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(at("hook_resid_mid"), at("hook_resid_pre") + at("hook_attn_out"))
        torch.testing.assert_close(at("hook_mlp_out"), block.mlp(block.ln_mlp(at("hook_resid_mid"))))
        torch.testing.assert_close(at("hook_resid_post"), at("hook_resid_mid") + at("hook_mlp_out"))
    torch.testing.assert_close(found["ln_final.hook_normalized"], model.ln_out(found["blocks.1.hook_resid_post"]))
    read = found["ln_final.hook_normalized"][:, 0:12:2]
    torch.testing.assert_close(prediction, model.read_out(read)[..., 0])


def test_activations_ask_for_known_names_and_return_only_those():
    model = _model()
    tokens = torch.randn(2, 12, 4, generator=generator(3))
    prediction, found = model(tokens, 6, activations=["blocks.1.hook_resid_post"])
    assert list(found) == ["blocks.1.hook_resid_post"]
    assert model(tokens, 6, activations=[])[1] == {}
    with pytest.raises(ConfigError, match="unknown activation.*blocks.2.hook_resid_post.*this model has: hook_embed"):
        model(tokens, 6, activations=["blocks.2.hook_resid_post"])


def test_cls_model_activations_count_the_cls_token():
    model = _symbol_model(logit_identity=True, value_identity=True, head_dim=5)
    tokens = torch.randint(20, (3, 4), generator=generator(2))
    out, found = model(tokens, 4, activations=["hook_embed", "blocks.1.attn.hook_pattern", "ln_final.hook_normalized"])
    assert found["hook_embed"].shape == (3, 5, 16) and found["blocks.1.attn.hook_pattern"].shape == (3, 2, 5, 5)
    torch.testing.assert_close(found["hook_embed"][:, -1], model.cls_token.expand(3, -1))
    torch.testing.assert_close(out, model.read_out(found["ln_final.hook_normalized"][:, -1:])[..., 0])


def test_identity_terms_are_read_and_set_through_the_model_and_features_are_what_the_read_out_reads():
    config = GPTConfig(
        None, 2, 2, 8, 2.0, max_tokens=5, vocab_size=7, causal=False, cls=True, logit_identity=True, tied_output=True
    )
    model = GPTTransformer(config, generator(0))
    assert set(model.identity_terms()) == {"a"} and not model.identity_terms()["a"].any()  # (L, H) zeros
    model.set_identity_terms(a=0.5)
    torch.testing.assert_close(model.identity_terms()["a"], torch.full((2, 2), 0.5))
    tokens = torch.randint(7, (3, 4), generator=generator(1))
    features = model.features(tokens, 4)  # (B, 1, W): the CLS token's normalised state
    torch.testing.assert_close(features @ model.embedding.weight.T, model(tokens, 4))
