import pytest
import torch

from iclab.config import ConfigError
from iclab.prompts import PairedFormat
from iclab.rng import generator
from iclab.tasks import Episode, GaussianInputs, LinearRegression, UniformInputs, linear_regression_from_config


def test_shapes_dtypes_and_labels():
    task = LinearRegression(GaussianInputs(4), n_context=7, n_query=3)
    e = task.sample(5, generator(0))
    assert e.xs.shape == (5, 7, 4) and e.ys.shape == (5, 7)
    assert e.x_query.shape == (5, 3, 4) and e.y_query.shape == (5, 3)
    assert e.xs.dtype == torch.float32 and e.truth["w"].shape == (5, 4)
    torch.testing.assert_close(e.ys, torch.einsum("bnd,bd->bn", e.xs, e.truth["w"]))
    assert task.sample(5, generator(0), torch.float64).xs.dtype == torch.float64


def test_same_generator_same_episode():
    task = LinearRegression(GaussianInputs(3, mean_scale=1.0), n_context=4, noise=0.1)
    a, b = task.sample(8, generator(3, "x")), task.sample(8, generator(3, "x"))
    torch.testing.assert_close(a.xs, b.xs)
    torch.testing.assert_close(a.truth["mu"], b.truth["mu"])
    assert not torch.equal(a.xs, task.sample(8, generator(4, "x")).xs)


def test_gaussian_moments_and_per_prompt_mean():
    cov = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    inputs = GaussianInputs(2, cov=cov, mean=[1.0, -1.0])
    x, truth = inputs.sample(20000, 10, generator(1), torch.float64)
    centred = (x - torch.tensor([1.0, -1.0], dtype=torch.float64)).reshape(-1, 2)
    torch.testing.assert_close(centred.T @ centred / len(centred), cov.double(), atol=0.03, rtol=0)
    # Per-prompt means: every point of a prompt is centred on that prompt's μ.
    x, truth = GaussianInputs(3, mean_scale=2.0).sample(4000, 50, generator(2), torch.float64)
    assert (x.mean(1) - truth["mu"]).abs().max() < 0.8
    assert truth["mu"].std().item() == pytest.approx(2.0, rel=0.05)


def test_uniform_range_and_sparse_w():
    x, _ = UniformInputs(3, -0.5, 0.5).sample(100, 10, generator(0))
    assert x.min() >= -0.5 and x.max() <= 0.5
    task = LinearRegression(UniformInputs(6), n_context=3, w_sparsity=2, w_scale=3.0)
    w = task.sample(500, generator(0)).truth["w"]
    assert ((w != 0).sum(1) == 2).all()


def test_noise_level():
    task = LinearRegression(GaussianInputs(2), n_context=50, noise=0.5)
    e = task.sample(2000, generator(0), torch.float64)
    residual = e.ys - torch.einsum("bnd,bd->bn", e.xs, e.truth["w"])
    assert residual.std().item() == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize(
    "cfg",
    [
        {"d": 3, "n_context": 5, "cov": [1.0, 2.0]},  # wrong length
        {"d": 2, "n_context": 5, "cov": [[1.0, 2.0], [2.0, 1.0]]},  # not positive definite
        {"d": 2, "n_context": 0},
        {"d": 0, "n_context": 5},
        {"d": 2, "n_context": 5, "inputs": "laplace"},
        {"d": 2, "n_context": 5, "w_sparsity": 3},
        {"d": 2, "n_context": 5, "inputs": "uniform", "low": 1.0, "high": 0.0},
    ],
)
def test_impossible_configs_raise(cfg):
    with pytest.raises(ConfigError):
        linear_regression_from_config(cfg)


def test_episode_helpers():
    e = LinearRegression(GaussianInputs(2), n_context=3).sample(4, generator(0))
    assert e[1:3].batch_size == 2 and e.to(dtype=torch.float64).xs.dtype == torch.float64
    assert Episode.cat([e, e]).truth["w"].shape == (8, 2)


def test_paired_format_rows():
    task = LinearRegression(GaussianInputs(3, mean_scale=1.0), n_context=4, n_query=2)
    e = task.sample(2, generator(0))
    plain = PairedFormat().encode(e)
    assert plain.tokens.shape == (2, 6, 4) and plain.n_context == 4
    torch.testing.assert_close(plain.tokens[:, :4, :3], e.xs)
    torch.testing.assert_close(plain.tokens[:, :4, 3], e.ys)
    torch.testing.assert_close(plain.tokens[:, 4:, :3], e.x_query)
    assert (plain.tokens[:, 4:, 3] == 0).all()
    torch.testing.assert_close(plain.targets, e.y_query)
    # Descriptor rows sit between x and y, in every token.
    described = PairedFormat(descriptor="mu").encode(e)
    assert described.tokens.shape == (2, 6, 7)
    torch.testing.assert_close(described.tokens[:, :, 3:6], e.truth["mu"][:, None].expand(-1, 6, -1))
    torch.testing.assert_close(described.tokens[:, :4, 6], e.ys)
    assert PairedFormat(descriptor="mu").token_dim(e) == 7


@pytest.mark.parametrize(
    "cfg",
    [
        {"d": 3, "n_context": 4},
        {"d": 3, "n_context": 4, "cov": [1, 2, 3], "mean": [1, 0, -1], "noise": 0.5, "w_scale": 2.0, "w_sparsity": 2},
        {"d": 3, "n_context": 4, "mean_scale": 0.7, "n_means": 4},
        {"d": 3, "n_context": 4, "mean_scale": 0.7},
        {"d": 2, "n_context": 4, "inputs": "uniform", "low": -0.5, "high": 1.0},
        {"d": 3, "n_context": 4, "cov": [1, 2, 3], "w": [0.5, -1.0, 2.0], "noise": 0.3},
    ],
)
def test_linear_regression_zero_error_and_function_match_its_samples(cfg):
    task = linear_regression_from_config(cfg)
    episode = task.sample(200000, generator(0), torch.float64)
    # E[y²] by Monte Carlo: for Gaussian labels the relative standard error is √(2/200000) ≈ 0.3%, so 2% is ~6 of them.
    assert episode.ys.pow(2).mean().item() == pytest.approx(task.zero_error, rel=0.02)
    noiseless = task.function(episode.xs, episode.truth)
    if task.noise == 0:
        torch.testing.assert_close(noiseless, episode.ys)
    else:
        assert (episode.ys - noiseless).std().item() == pytest.approx(task.noise, rel=0.02)


def test_linear_regression_config_keys_are_checked():
    with pytest.raises(ConfigError, match="unknown linear-regression task keys: nois"):
        linear_regression_from_config({"d": 3, "n_context": 4, "nois": 0.1})


def test_a_fixed_w_is_every_prompts_w():
    w = [0.5, -1.0, 2.0]
    episode = linear_regression_from_config({"d": 3, "n_context": 4, "w": w}).sample(5, generator(0))
    torch.testing.assert_close(episode.truth["w"], torch.tensor([w] * 5))
    torch.testing.assert_close(episode.ys, episode.xs @ torch.tensor(w))
    with pytest.raises(ConfigError, match="d = 3 entries"):
        linear_regression_from_config({"d": 3, "n_context": 4, "w": [1.0, 2.0]})
    with pytest.raises(ConfigError, match="zero-mean"):
        linear_regression_from_config({"d": 3, "n_context": 4, "w": w, "mean_scale": 1.0})
