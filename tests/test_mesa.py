import math

import pytest
import torch

from iclab.config import ConfigError
from iclab.losses import batch_loss, prompt_losses
from iclab.models import CausalLinearAttention
from iclab.models.causal_attention import causal_gram_apply
from iclab.prompts import AutoregressiveFormat
from iclab.rng import generator
from iclab.tasks import AutoregressiveSequences, StartDistribution
from iclab.theory import (
    best_diagonal,
    best_product,
    diagonal_gradients,
    diagonal_learning_rate,
    expected_gradient,
    one_step_predictions,
    product_optimum,
    product_scatter,
)
from iclab.train import FixedTrainingSet, TrainConfig, train


def test_sequences_follow_their_rotation():
    for rotation, d in (("complex", 5), ("real", 4)):
        task = AutoregressiveSequences(d, 12, StartDistribution("gaussian", 2.0), rotation)
        e = task.sample(6, generator(0), torch.float64)
        w = task.transition(e.truth["theta"])
        torch.testing.assert_close(e.xs[:, 1:], torch.einsum("bjk,btk->btj", w.to(e.xs.dtype), e.xs[:, :-1]))
        torch.testing.assert_close(w @ w.mT.conj(), torch.eye(d, dtype=w.dtype).expand(6, d, d))  # unitary
    assert AutoregressiveSequences().sample(2, generator(0)).xs.dtype == torch.complex64


def test_starts():
    g = generator(1)
    sparse = StartDistribution("sparse", 0.5).sample(100, 5, g)
    assert ((sparse != 0).sum(1) == 1).all() and set(sparse[sparse != 0].abs().tolist()) == {0.5}
    assert (StartDistribution("ones", 1.0).sample(3, 5, g) == 1).all()
    with pytest.raises(ConfigError):
        StartDistribution("uniform")
    with pytest.raises(ConfigError):
        AutoregressiveSequences(5, 10, rotation="real")  # odd d


def test_autoregressive_format():
    xs = torch.arange(1.0, 13.0).reshape(1, 6, 2)
    from iclab.tasks import Episode

    prompt = AutoregressiveFormat().encode(Episode(xs, xs[:, :, 0], xs[:, :0], xs[:, :0, 0]))
    assert prompt.tokens.shape == (1, 5, 4) and prompt.targets.shape == (1, 4, 2)
    torch.testing.assert_close(prompt.tokens[0, 0], torch.tensor([1.0, 2.0, 0.0, 0.0]))  # e_1 = [x_1; 0]
    torch.testing.assert_close(prompt.tokens[0, 3], torch.tensor([7.0, 8.0, 5.0, 6.0]))  # [x_4; x_3]
    torch.testing.assert_close(prompt.targets[0, 0], xs[0, 2])  # token 2 predicts x_3
    torch.testing.assert_close(AutoregressiveFormat().sequences(prompt), xs)  # and back


def _naive(model, tokens):
    """The prefix loop the model avoids: recompute S_t = Σ_{i≤t} e_i e_iᴴ for every t."""
    w_kq, w_pv = model.weights()
    out = []
    for t in range(2, tokens.shape[1] + 1):
        e = tokens[:, :t]
        gram = e.mT @ e.conj()
        out.append((w_pv @ gram @ w_kq @ tokens[:, t - 1, :, None])[..., 0] / (t - 1))
    return torch.stack(out, 1)


def test_model_equals_prefix_loop():
    task = AutoregressiveSequences(3, 23)
    prompt = AutoregressiveFormat().encode(task.sample(4, generator(2), torch.float64))
    model = CausalLinearAttention(3, init="random", dtype=torch.float64, generator=generator(3))
    torch.testing.assert_close(model(prompt.tokens), _naive(model, prompt.tokens), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError):
        causal_gram_apply(prompt.tokens.requires_grad_(), prompt.tokens)


def _naive_gram_apply(tokens, vectors):
    """S_t u_t with S_t = Σ_{i≤t} e_i e_iᴴ built prefix by prefix."""
    return torch.stack(
        [tokens[:, : t + 1].mT @ (tokens[:, : t + 1].conj() @ vectors[:, t, :, None]) for t in range(tokens.shape[1])],
        1,
    )[..., 0]


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
@pytest.mark.parametrize("length, chunk", [(1, 4), (7, 3), (9, 3), (23, 10), (30, 10)])
def test_causal_gram_apply_equals_prefix_sums(dtype, length, chunk):
    g = torch.Generator().manual_seed(length * chunk)
    tokens, vectors = torch.randn(2, 3, length, 4, dtype=dtype, generator=g)
    torch.testing.assert_close(causal_gram_apply(tokens, vectors, chunk), _naive_gram_apply(tokens, vectors))


def test_causal_gram_apply_backward_is_the_same_map():
    g = torch.Generator().manual_seed(0)
    tokens, vectors, cotangent = torch.randn(3, 2, 13, 4, dtype=torch.complex128, generator=g)
    vectors.requires_grad_()
    (grad,) = torch.autograd.grad(causal_gram_apply(tokens, vectors, 5), vectors, cotangent)
    torch.testing.assert_close(grad, _naive_gram_apply(tokens, cotangent))  # S_t is Hermitian
    small = vectors[:1, :7].detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda u: causal_gram_apply(tokens[:1, :7], u, 5), small, fast_mode=True)


def test_causal_gram_apply_under_vmap():
    g = torch.Generator().manual_seed(1)
    tokens, vectors, cotangent = torch.randn(3, 2, 3, 11, 4, dtype=torch.complex128, generator=g)

    def vjp(e, u, v):
        out, pullback = torch.func.vjp(lambda u: causal_gram_apply(e, u, 4), u)
        return out, pullback(v)[0]

    out, grad = torch.func.vmap(vjp)(tokens, vectors, cotangent)
    for s in range(2):
        torch.testing.assert_close(out[s], _naive_gram_apply(tokens[s], vectors[s]))
        torch.testing.assert_close(grad[s], _naive_gram_apply(tokens[s], cotangent[s]))


def test_model_blocks_do_not_change_predictions(monkeypatch):
    task = AutoregressiveSequences(3, 16)
    prompt = AutoregressiveFormat().encode(task.sample(7, generator(2), torch.float64))
    model = CausalLinearAttention(3, init="random", dtype=torch.float64, generator=generator(3))
    whole = model(prompt.tokens)
    monkeypatch.setattr("iclab.models.causal_attention.BLOCK", 3)  # blocks of 3, 3 and 1 sequences
    torch.testing.assert_close(model(prompt.tokens), whole, rtol=1e-12, atol=1e-12)
    real = CausalLinearAttention(2, init="random", complex=False, dtype=torch.float64, generator=generator(4))
    episode = AutoregressiveSequences(2, 16, rotation="real").sample(7, generator(5), torch.float64)
    tokens = AutoregressiveFormat().encode(episode).tokens
    torch.testing.assert_close(real(tokens), _naive(real, tokens), rtol=1e-10, atol=1e-10)


def test_diagonal_model_is_one_gd_step_on_in_context_ols():
    task = AutoregressiveSequences(4, 15, StartDistribution("gaussian", 1.0))
    xs = task.sample(3, generator(4), torch.float64).xs
    model = CausalLinearAttention(4, a0=0.7, b0=1.3, dtype=torch.float64)
    prediction = model(AutoregressiveFormat().encode(task.sample(3, generator(4), torch.float64)).tokens)
    lr = 0.7 * 1.3
    torch.testing.assert_close(prediction, one_step_predictions(xs, lr), rtol=1e-8, atol=1e-8)
    # Independently: autograd's gradient of ½Σ_{i<t}‖x_{i+1} − W x_i‖² at W = 0, step lr/(t − 1).
    for t in (2, 7, 14):
        w = torch.zeros(4, 4, dtype=xs.dtype, requires_grad=True)
        loss = 0.5 * (xs[:, 1:t] - xs[:, : t - 1] @ w.mT).abs().pow(2).sum()
        (grad,) = torch.autograd.grad(loss, w)  # torch's complex gradient: ∂L/∂Re W + i ∂L/∂Im W
        # Each sequence has its own OLS problem: redo it per sequence to compare.
        for b in range(3):
            wb = torch.zeros(4, 4, dtype=xs.dtype, requires_grad=True)
            lb = 0.5 * (xs[b, 1:t] - xs[b, : t - 1] @ wb.mT).abs().pow(2).sum()
            (gb,) = torch.autograd.grad(lb, wb)
            step = -lr / (t - 1) * gb
            torch.testing.assert_close(prediction[b, t - 2], step @ xs[b, t - 1], rtol=1e-8, atol=1e-8)
        assert grad.shape == (4, 4)


def test_complex_gradients_match_finite_differences():
    task = AutoregressiveSequences(2, 8)
    prompt = AutoregressiveFormat().encode(task.sample(3, generator(5), torch.float64))
    model = CausalLinearAttention(2, init="random", dtype=torch.float64, generator=generator(6))
    loss = batch_loss(model(prompt.tokens), prompt.targets, "half_sse")
    loss.backward()
    eps = 1e-6
    for p in (model.w_kq, model.w_pv):
        for index in [(0, 1), (1, 3), (1, 0)]:
            for direction, part in ((1.0, "real"), (1j, "imag")):
                with torch.no_grad():
                    p[index] += eps * direction
                    up = batch_loss(model(prompt.tokens), prompt.targets, "half_sse")
                    p[index] -= 2 * eps * direction
                    down = batch_loss(model(prompt.tokens), prompt.targets, "half_sse")
                    p[index] += eps * direction
                numeric = (up - down) / (2 * eps)
                assert getattr(p.grad[index], part).item() == pytest.approx(numeric.item(), rel=1e-5, abs=1e-7)


def _fused_and_autograd(model, prompt):
    """(loss, gradients) through the fused loss and through autograd on the predictions."""
    out = []
    for fused in (True, False):
        model.zero_grad(set_to_none=True)
        loss = (
            model(prompt.tokens, targets=prompt.targets)
            if fused
            else batch_loss(model(prompt.tokens), prompt.targets, "half_sse")
        )
        loss.backward()
        out.append((loss.detach(), [p.grad.clone() for p in (model.w_kq, model.w_pv)]))
    return out


@pytest.mark.parametrize("complex_weights, diagonal_only", [(True, False), (True, True), (False, False)])
def test_fused_loss_equals_autograd_through_the_predictions(monkeypatch, complex_weights, diagonal_only):
    # Blocks of 3, 3 and 1 sequences; T = 17 pads the 16 tokens to two chunks of 10.
    monkeypatch.setattr("iclab.models.causal_attention.FUSED_BLOCK", 3)
    d, rotation = (3, "complex") if complex_weights else (2, "real")
    episode = AutoregressiveSequences(d, 17, rotation=rotation).sample(7, generator(2), torch.float64)
    prompt = AutoregressiveFormat().encode(episode)
    model = CausalLinearAttention(
        d,
        init="random",
        complex=complex_weights,
        diagonal_only=diagonal_only,
        dtype=torch.float64,
        generator=generator(3),
    )
    (fused_loss, fused_grads), (loss, grads) = _fused_and_autograd(model, prompt)
    torch.testing.assert_close(fused_loss, loss, rtol=1e-12, atol=0)
    for fused_grad, grad in zip(fused_grads, grads):
        torch.testing.assert_close(fused_grad, grad, rtol=1e-10, atol=1e-12)


def test_fused_loss_trains_seeds_under_vmap_as_autograd_does(monkeypatch):
    # Two seeds stacked (vmap through the fused Function), then the same run through the predictions.
    task = AutoregressiveSequences(2, 12)
    data = FixedTrainingSet(task, AutoregressiveFormat(), 16)
    make = lambda g: CausalLinearAttention(2, init="random", dtype=torch.float64, generator=g)
    cfg = TrainConfig(steps=5, batch_size=16, lr=0.05, optimizer="sgd", loss="half_sse")
    import iclab.models.causal_attention as module

    calls = []
    fused_pass = module._half_sse_and_gradients
    monkeypatch.setattr(module, "_half_sse_and_gradients", lambda *a: calls.append(1) or fused_pass(*a))
    fused = train(make, data, cfg, seeds=[0, 1], progress=False).models
    assert calls  # the training loop took the fused path
    monkeypatch.setattr(CausalLinearAttention, "fused_losses", frozenset())
    plain = train(make, data, cfg, seeds=[0, 1], progress=False).models
    for a, b in zip(fused, plain):
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_half_sse_convention_and_real_losses_unchanged():
    pred = torch.tensor([[1 + 1j, 0j], [2j, 1 + 0j]])
    target = torch.zeros(2, 2, dtype=torch.complex64)
    torch.testing.assert_close(prompt_losses(pred, target, "half_sse"), torch.tensor([1.0, 2.5]))
    torch.testing.assert_close(prompt_losses(pred, target, "mse"), torch.tensor([1.0, 2.5]))
    real = torch.tensor([[1.0, 3.0]])
    torch.testing.assert_close(prompt_losses(real, torch.zeros(1, 2), "mse"), torch.tensor([5.0]))
    torch.testing.assert_close(prompt_losses(real, torch.zeros(1, 2), "half_mse"), torch.tensor([2.5]))


def test_product_optimum_closed_form():
    d, n = 5, 98
    gaussian = product_optimum(AutoregressiveSequences(d, 100, StartDistribution("gaussian", 1.0)))
    assert gaussian.product == pytest.approx(0.1919, abs=1e-4)  # docs/papers.md §5: 0.192/σ²
    for c in (0.5, 2.0):
        assert product_optimum(AutoregressiveSequences(start=StartDistribution("sparse", c))).product == pytest.approx(
            1 / c**2
        )
    harmonic = sum(1 / k for k in range(1, n + 1))
    ones = product_optimum(AutoregressiveSequences(start=StartDistribution("ones", 1.0))).product
    assert ones == pytest.approx(n * d / (n * d + harmonic * d * (d - 1)))


@pytest.mark.parametrize("kind, scale", [("ones", 1.0), ("sparse", 2.0), ("gaussian", 1.0)])
def test_product_optimum_against_monte_carlo(kind, scale):
    task = AutoregressiveSequences(5, 40, StartDistribution(kind, scale))
    m = 8000
    estimate = best_product(task.sample(m, generator(7), torch.float64).xs).real
    scatter = product_scatter(task, m, generator(8), 8000)
    exact = product_optimum(task).product
    # 4 standard deviations of the training-set optimum at this m (+1e-9 for exact cases).
    assert abs(estimate - exact) <= 4 * scatter * exact + 1e-9


def test_scatter_matches_repeated_draws():
    task = AutoregressiveSequences(5, 30, StartDistribution("gaussian", 1.0))
    draws = torch.tensor([best_product(task.sample(300, generator(20, k), torch.float64).xs).real for k in range(30)])
    measured = (draws.std() / product_optimum(task).product).item()
    predicted = product_scatter(task, 300, generator(9), 20000)
    assert 0.6 * predicted < measured < 1.6 * predicted  # 30 draws: the sd itself scatters by ~13%


def test_diagonal_only_keeps_the_support():
    model = CausalLinearAttention(3, init="random", diagonal_only=True, generator=generator(1))
    assert model.off_diagonal_ratio() == 0.0
    assert (model.w_kq != 0).sum() == 3 and (model.w_pv != 0).sum() == 3


def test_the_diagonal_part_is_the_per_coordinate_one_step_gd_form_whose_ratio_cancels_x1j():
    """The diagonal part of a full model keeps (a_j, b_j) and leaves the model as it was; its prediction/truth at
    coordinate j is b_j Σ_k a_k |x_{1k}|² (1/(t − 1)) Σ_{i=2}^{t} (λ_k/λ_j)^{t−i+1}: x_{1j} cancels, so the ratio
    has a finite mean (the not-recovered claim reads it)."""
    from iclab.models.causal_attention import diagonal_support

    model = CausalLinearAttention(3, init="random", dtype=torch.float64, generator=generator(2))
    before = [w.detach().clone() for w in (model.w_kq, model.w_pv)]
    part = model.diagonal_part()
    assert part.off_diagonal_ratio() == 0.0 and (part.w_kq != 0).sum() == (part.w_pv != 0).sum() == 3
    assert all(torch.equal(w, b) for w, b in zip((model.w_kq, model.w_pv), before))
    kq, pv = diagonal_support(3)
    a, b = model.w_kq.detach()[kq], model.w_pv.detach()[pv]  # (a_j), (b_j)
    episode = AutoregressiveSequences(3, 12, StartDistribution("gaussian", 1.0)).sample(40, generator(3), torch.float64)
    with torch.no_grad():
        ratio = part(AutoregressiveFormat().encode(episode).tokens)[:, -1] / episode.xs[:, -1]  # t = T − 1
    xs, t = episode.xs, episode.xs.shape[1] - 1
    rotation = xs[:, 1] / xs[:, 0]  # λ_j, (B, d)
    phases = torch.stack([(rotation[:, None, :] / rotation[:, :, None]) ** m for m in range(1, t)]).mean(0)  # [j, k]
    expected = b[None, :] * ((a * xs[:, 0].abs() ** 2)[:, None, :] * phases).sum(-1)
    torch.testing.assert_close(ratio, expected, rtol=1e-8, atol=1e-10)


def test_gd_training_converges_to_the_training_set_optimum():
    task = AutoregressiveSequences(3, 20, StartDistribution("sparse", 1.0))
    data = FixedTrainingSet(task, AutoregressiveFormat(), 64)
    optimum = product_optimum(task)
    lr = 0.5 / (optimum.denominator * 4.0)  # (|a0| + |b0|)² = 4
    cfg = TrainConfig(steps=60, batch_size=64, train_size=64, lr=lr, optimizer="sgd", loss="half_sse", log_every=50)
    result = train(lambda g: CausalLinearAttention(3, a0=0.5, b0=1.5), data, cfg, [0, 1], progress=False)
    alone = train(lambda g: CausalLinearAttention(3, a0=0.5, b0=1.5), data, cfg, [1], progress=False, vectorize=False)
    torch.testing.assert_close(result.models[1].w_kq, alone.models[0].w_kq, rtol=1e-4, atol=1e-6)  # vmap = alone
    for model in result.models:
        assert model.diagonal_product().mean().real.item() == pytest.approx(1.0, rel=1e-3)  # 1/c²
        assert model.off_diagonal_ratio() < 0.01  # the paper's criterion (finite-sample noise only)
    assert math.isfinite(result.history[-1]["value"])


def test_learning_rate_warms_up_from_the_step_safe_at_the_start():
    optimum = product_optimum(AutoregressiveSequences(5, 100, StartDistribution("gaussian", 1.0)))
    lr, warmup = diagonal_learning_rate(optimum, 2.0, 2.0, 0.7)
    first = TrainConfig(steps=100, batch_size=1, lr=lr, warmup=warmup).lr_at(0)
    assert first <= 0.7 / (optimum.denominator * 16) < lr  # (|a₀| + |b₀|)² = 16 at the start
    assert diagonal_learning_rate(optimum, 0.1, 0.1, 0.7)[1] == 1  # a small start needs no warm-up


@pytest.mark.parametrize("kind", ["gaussian", "sparse", "ones"])
def test_diagonal_gradients_equal_the_models_autograd(kind):
    episode = AutoregressiveSequences(3, 20, StartDistribution(kind, 1.5)).sample(50, generator(6), torch.float64)
    prompt = AutoregressiveFormat().encode(episode)
    model = CausalLinearAttention(3, a0=0.5, b0=1.5, dtype=torch.float64)
    expected = torch.autograd.grad(
        batch_loss(model(prompt.tokens), prompt.targets, "half_sse"), [model.w_kq, model.w_pv]
    )
    for got, want in zip(diagonal_gradients(episode.xs, 0.5, 1.5), expected):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_expected_gradient_is_zero_off_the_diagonal_only_where_the_theorem_applies():
    z = {
        kind: expected_gradient(AutoregressiveSequences(3, 20, StartDistribution(kind, 1.0)), 0.5, 1.5, 4000, 10, 0)
        for kind in ("gaussian", "sparse", "ones")
    }
    # z ≈ 1 when the expectation is zero (each sample's gradient is not: entries such as W^KQ[j, j] move).
    assert z["gaussian"].z < 3 and z["sparse"].z < 3
    assert z["ones"].z > 5  # all-ones starts have a population gradient off the diagonal: the estimate sees it
    for estimate in z.values():  # off and on split the mean gradient's norm
        norm = torch.cat([estimate.w_kq.flatten(), estimate.w_pv.flatten()]).norm().item()
        assert estimate.off**2 + estimate.on**2 == pytest.approx(norm**2)
    with pytest.raises(ConfigError):
        expected_gradient(AutoregressiveSequences(3, 20), 0.5, 1.5, 10, 1, 0)


def test_mesa_config_checks(tmp_path):
    from iclab import api

    with pytest.raises(ConfigError, match="not in starts"):
        api.run("mesa-ar", overrides=["full_model={gaussian: [3.0]}"], out=tmp_path / "a", progress=False)
    with pytest.raises(ConfigError, match="size_sweep.init"):
        api.run("mesa-ar", overrides=["size_sweep={sizes: [10], init: [9.0, 9.0]}"], out=tmp_path / "b", progress=False)
    assert not any(tmp_path.iterdir())


def test_best_diagonal_is_the_diagonal_models_minimum_on_its_sequences():
    task = AutoregressiveSequences(3, 20, StartDistribution("gaussian", 1.0))
    episode = task.sample(200, generator(4), torch.float64)
    prompt = AutoregressiveFormat().encode(episode)
    model = CausalLinearAttention(3, a0=0.5, b0=0.5, diagonal_only=True, dtype=torch.float64)
    optimizer = torch.optim.LBFGS(
        model.parameters(), max_iter=2000, tolerance_grad=1e-14, tolerance_change=0.0, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        loss = batch_loss(model(prompt.tokens), prompt.targets, "half_sse")
        loss.backward()
        return loss

    optimizer.step(closure)
    best = best_diagonal(episode.xs)
    torch.testing.assert_close(model.diagonal_product().detach(), best, rtol=1e-6, atol=0)
    # A richer family than the scalar ab: per-coordinate products differ on a finite set, and fit it better.
    scalar = CausalLinearAttention(3, a0=best_product(episode.xs).real, b0=1.0, diagonal_only=True, dtype=torch.float64)
    assert best.real.std() > 1e-3
    assert closure().item() < batch_loss(scalar(prompt.tokens), prompt.targets, "half_sse").item()


def test_best_diagonal_of_sparse_starts_is_one_over_c_squared():
    task = AutoregressiveSequences(4, 30, StartDistribution("sparse", 2.0))
    torch.testing.assert_close(
        best_diagonal(task.sample(100, generator(5)).xs),
        torch.full((4,), 0.25, dtype=torch.complex128),
        rtol=1e-6,
        atol=0,
    )


def _ab_setting(kind: str, scatter: float, diagonal_ab: float, full_ab: float):
    """A mesa-ar setting (d = 5, T = 100, scale 1) with the training set's relative ``scatter``, whose diagonal and
    full models ended at these relative distances above ab*, their ratios (full and diagonal part) as far above
    ab*·E|x₁|², the predictor at ab*'s."""
    from iclab.experiments.mesa_ar import Run, Setting

    task = AutoregressiveSequences(5, 100, StartDistribution(kind, 1.0))
    optimum = product_optimum(task)
    p = optimum.product
    ratio = p * task.start.abs_moment(2, task.d)

    def run(variant, distance):
        ab, ratios = complex(p * (1 + distance)), torch.full((98,), ratio * (1 + distance))
        return Run(variant, variant, (0.5, 1.5), 0, ab, p, 0.0, 0.0, 0.5, ratios, ratios.clone(), None)

    runs = [run("diagonal", diagonal_ab)], [run("full", full_ab)]
    return Setting(f"{kind}-1", kind, 1.0, task, optimum, scatter, None, 1.0, ratio, *runs)


@pytest.mark.parametrize("kind, scatter", [("gaussian", 0.05), ("sparse", 0.0)])
def test_ab_star_is_a_two_sided_test_at_the_five_percent_level_on_the_scatter(kind, scatter):
    from iclab.experiments.mesa_ar import DEFAULTS, _full_population_claim, _population_claim

    bound = 0.01 + 1.96 * scatter  # the optimiser's 1% plus 1.96 × the training set's scatter
    for distance, holds in ((0.999 * bound, True), (-0.999 * bound, True), (1.001 * bound, False)):
        s = _ab_setting(kind, scatter, distance, distance)
        for build in (_population_claim, _full_population_claim):
            claim = build(s, DEFAULTS["tolerance"], 1000)
            assert claim.holds is holds and claim.measured["relative distance"] == pytest.approx(abs(distance), 1e-4)
    power = 0.01 + (1.96 + 0.8416) * scatter  # the relative bias the test detects with 80% probability
    assert f"{power:.2%}" in _population_claim(s, DEFAULTS["tolerance"], 1000).expected


def test_not_recovered_reads_the_diagonal_part_paired_with_ab_star_by_the_test_of_ab_star():
    """The claim judges the full model's diagonal part against the predictor at ab* on the same test sequences,
    two-sided; the full model's own ratio (no finite mean) and test loss are only reported."""
    from iclab.experiments.mesa_ar import DEFAULTS, _gaussian_not_recovered_claim

    bound = 0.01 + 1.96 * 0.05
    for distance, holds in ((0.999 * bound, True), (-0.999 * bound, True), (1.001 * bound, False)):
        s = _ab_setting("gaussian", 0.05, 0.0, distance)
        s.reference_ratio *= 1.3  # the test sequences' own draw moves both alike: paired, it cancels
        s.full[0].diagonal_ratio *= 1.3
        s.full[0].ratio.fill_(40.0)  # a heavy-tailed draw of the full model's ratio decides nothing
        claim = _gaussian_not_recovered_claim(s, DEFAULTS["tolerance"])
        assert claim.id == "not-recovered-gaussian-1" and claim.holds is holds
        assert claim.measured["relative distance"] == pytest.approx(abs(distance), 1e-4)
        assert claim.measured["full model's ratio (worst run's)"] == 40.0
    s = _ab_setting("gaussian", 0.05, 0.0, 0.0)
    s.full[0].diagonal_ratio.fill_(1.0)  # a model that recovers the sequence
    assert _gaussian_not_recovered_claim(s, DEFAULTS["tolerance"]).holds is False
    near = _ab_setting("gaussian", 0.05, 0.0, 0.02).full[0]
    s.full = [near, _ab_setting("gaussian", 0.05, 0.0, -0.5 * bound).full[0]]  # judged by its worst run
    assert _gaussian_not_recovered_claim(s, DEFAULTS["tolerance"]).measured["relative distance"] == pytest.approx(
        0.5 * bound, 1e-4
    )


def test_leaving_the_diagonal_needs_the_population_gradient_too():
    """A trained model that leaves the diagonal fails the claim where the population gradient there is zero: its
    off-diagonal weights then come from its finite training set alone."""
    from iclab.experiments.mesa_ar import DEFAULTS, Run, Setting, _leaves_diagonal_claim
    from iclab.theory import ExpectedGradient, product_optimum

    task = AutoregressiveSequences(5, 100, StartDistribution("ones", 1.0))
    optimum = product_optimum(task)
    full = Run("f", "full", (0.5, 1.5), 0, 1.0, 1.0, 0.0, 0.05, 0.5, torch.zeros(98), torch.zeros(98), None)

    def verdict(z: float) -> dict:
        s = Setting("ones-1", "ones", 1.0, task, optimum, 0.01, None, 1.0, 1.0, [], [full])
        s.gradients.append(ExpectedGradient(torch.zeros(10, 10), torch.zeros(5, 10), z * 0.01, 1.0, 0.01, z))
        return _leaves_diagonal_claim(s, DEFAULTS, 1000).clauses

    assert all(verdict(40.0).values())
    assert verdict(1.0) == {"the trained model leaves the diagonal": True, "the population gradient leaves it": False}
