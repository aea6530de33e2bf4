import pytest
import torch

from iclab.config import ConfigError
from iclab.models import LinearSelfAttention
from iclab.prompts import PairedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression


def _prompt(n=6, d=3, q=2, batch=4):
    task = LinearRegression(GaussianInputs(d), n_context=n, n_query=q)
    return PairedFormat().encode(task.sample(batch, generator(0), torch.float64))


def test_forward_matches_the_papers_formula():
    p = _prompt()
    model = LinearSelfAttention(4, generator=generator(1), init_scale=0.3).double()
    w_kq, w_pv = model.layers[0].w_kq, model.layers[0].w_pv
    pred = model(p.tokens, p.n_context)
    assert pred.shape == (4, 2)
    for b in range(4):
        e = p.tokens[b].T  # columns, as in the paper: E + W_PV E_c E_cᵀ W_KQ E / N
        out = e + w_pv @ e[:, :6] @ e[:, :6].T @ w_kq @ e / 6
        torch.testing.assert_close(pred[b], out[-1, 6:])


def test_separate_parametrization_equals_merged_products():
    p = _prompt()
    sep = LinearSelfAttention(
        4, n_layers=2, parametrization="separate", init_scale=0.5, generator=generator(2)
    ).double()
    merged = LinearSelfAttention(4, n_layers=2, init="zero").double()
    with torch.no_grad():
        for a, b in zip(sep.layers, merged.layers):
            b.w_kq.copy_(a.w_k.T @ a.w_q)
            b.w_pv.copy_(a.w_p @ a.w_v)
    torch.testing.assert_close(sep(p.tokens, p.n_context), merged(p.tokens, p.n_context))
    assert set(sep.state_dict()) == {f"layers.{l}.{n}" for l in (0, 1) for n in ("w_q", "w_k", "w_v", "w_p")}


def test_state_dict_names_and_weight_sharing():
    model = LinearSelfAttention(4, n_layers=3, shared=True)
    assert set(model.state_dict()) == {"layers.0.w_kq", "layers.0.w_pv"}
    p = _prompt()
    model = model.double()
    # Sharing = applying layer 0 three times.
    h = p.tokens
    for _ in range(3):
        h = model.layers[0](h, p.n_context)
    torch.testing.assert_close(model(p.tokens, p.n_context), h[:, p.n_context :, -1])
    assert set(LinearSelfAttention(4, n_layers=2).state_dict()) == {
        "layers.0.w_kq",
        "layers.0.w_pv",
        "layers.1.w_kq",
        "layers.1.w_pv",
    }


def test_queries_do_not_see_each_other_and_context_only_keys():
    p = _prompt(q=3)
    model = LinearSelfAttention(4, n_layers=2, init_scale=0.3, generator=generator(3)).double()
    base = model(p.tokens, p.n_context)
    changed = p.tokens.clone()
    changed[:, -1] += 5.0  # alter the last query
    after = model(changed, p.n_context)
    torch.testing.assert_close(after[:, :2], base[:, :2])
    assert not torch.allclose(after[:, 2], base[:, 2])


def test_causal_mode_never_looks_ahead():
    p = _prompt(n=6, q=1)
    model = LinearSelfAttention(4, causal=True, init_scale=0.3, generator=generator(4)).double()
    assert model.activation_names() == ["blocks.0.hook_resid_pre", "blocks.0.hook_attn_out", "blocks.0.hook_resid_post"]
    _, hidden = model(p.tokens, p.n_context, activations=["blocks.0.hook_resid_post"])
    changed = p.tokens.clone()
    changed[:, 3] += 1.0
    _, hidden2 = model(changed, p.n_context, activations=["blocks.0.hook_resid_post"])
    after, before = hidden2["blocks.0.hook_resid_post"], hidden["blocks.0.hook_resid_post"]  # (B, T, D)
    torch.testing.assert_close(after[:, :3], before[:, :3])
    assert not torch.allclose(after[:, 4:], before[:, 4:])


def test_readout_sign_and_normalisation():
    p = _prompt()
    a = LinearSelfAttention(4, init_scale=0.3, generator=generator(5)).double()
    b = LinearSelfAttention(4, init_scale=0.3, generator=generator(5), readout_sign=-1.0, normalize=False).double()
    torch.testing.assert_close(b(p.tokens, p.n_context), -6 * a(p.tokens, p.n_context))


def test_initialisations():
    model = LinearSelfAttention(5, init="balanced", init_scale=0.5, generator=generator(0))
    w_kq, w_pv = model.layers[0].merged()
    assert w_kq[:4, :4].norm().item() == pytest.approx(0.5)
    assert (w_kq[-1] == 0).all() and (w_kq[:, -1] == 0).all()
    torch.testing.assert_close(w_kq[:4, :4], w_kq[:4, :4].T)
    assert w_pv[-1, -1].item() == 0.5 and w_pv.count_nonzero() == 1
    assert all((p == 0).all() for p in LinearSelfAttention(5, init="zero").parameters())
    with pytest.raises(ConfigError):
        LinearSelfAttention(5, init="balanced", parametrization="separate")
    with pytest.raises(ConfigError):
        LinearSelfAttention(5, init="xavier")


def test_the_variance_scaling_initialisation_is_haikus():
    # Haiku's VarianceScaling(s) (fan_in, truncated normal): variance s / fan_in, nothing beyond 2 of its
    # untruncated standard deviations. Monte Carlo over 4 x 5 x 200² entries against the closed form.
    model = LinearSelfAttention(200, 5, "separate", init="variance_scaling", init_scale=0.004, generator=generator(0))
    weights = torch.cat([p.flatten() for p in model.parameters()])
    std = (0.004 / 200) ** 0.5
    assert weights.std().item() == pytest.approx(std, rel=0.01)  # its standard error: about 0.1%
    assert weights.abs().max().item() <= 2 * std / 0.87962566103423978
    assert weights.mean().abs().item() < 5 * std / weights.numel() ** 0.5
