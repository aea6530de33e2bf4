import pytest
import torch

from iclab.learners import GradientDescent
from iclab.metrics import evaluate, model_predictor
from iclab.models import LinearSelfAttention
from iclab.tasks import GaussianInputs, LinearRegression, UniformInputs
from iclab.theory import gamma_matrix, gd_step_optimum, lsa_optimum, lsa_weights


def _mc_loss(predict, task, n=200_000):
    mean, stderr = evaluate({"p": predict}, task, n, seed=7)["p"]
    return mean, stderr


def test_isotropic_closed_form_matches_paper():
    for d, n in [(5, 20), (3, 7)]:
        task = LinearRegression(GaussianInputs(d), n_context=n)
        assert lsa_optimum(task).loss == pytest.approx(d * (d + 1) / (n + d + 1), rel=1e-12)
        torch.testing.assert_close(lsa_optimum(task).gamma, gamma_matrix(torch.eye(d), n))


def test_anisotropic_gamma_and_loss_against_monte_carlo():
    eig = [0.4, 0.7, 1.0, 1.3, 1.6]
    task = LinearRegression(GaussianInputs(5, cov=eig), n_context=20)
    opt = lsa_optimum(task)
    lam = torch.diag(torch.tensor(eig, dtype=torch.float64))
    torch.testing.assert_close(opt.gamma, gamma_matrix(lam, 20))
    paper_loss = torch.trace(lam) - torch.trace(lam @ torch.linalg.inv(gamma_matrix(lam, 20)) @ lam)
    assert opt.loss == pytest.approx(paper_loss.item(), rel=1e-12)
    mean, stderr = _mc_loss(GradientDescent(1, 1.0, opt.preconditioner).predict_episode, task)
    assert abs(mean - opt.loss) < 4 * stderr


def test_noisy_optimum_is_optimal_and_matches_monte_carlo():
    task = LinearRegression(GaussianInputs(4, cov=[0.5, 1.0, 1.5, 2.0]), n_context=10, noise=0.5, w_scale=1.5)
    opt = lsa_optimum(task)
    mean, stderr = _mc_loss(GradientDescent(1, 1.0, opt.preconditioner).predict_episode, task)
    assert abs(mean - opt.loss) < 4 * stderr
    # Perturbing B can only increase the exact loss, checked on the same prompts.
    worse, _ = _mc_loss(GradientDescent(1, 1.0, opt.preconditioner * 1.1).predict_episode, task)
    assert worse > mean


def test_gd_step_von_oswald_numbers():
    task = LinearRegression(UniformInputs(10, -0.5, 0.5), n_context=10)
    gd = gd_step_optimum(task)
    assert 0.5 * gd.loss == pytest.approx(0.206, abs=0.001)  # docs/papers.md §2: paper 0.205, exact 0.2062
    assert gd.lr == pytest.approx(6.06, abs=0.05)
    mean, stderr = _mc_loss(GradientDescent(1, gd.lr).predict_episode, task)
    assert abs(mean - gd.loss) < 4 * stderr


def test_gd_step_monte_carlo_fallback_agrees_with_exact():
    # An asymmetric range (mean 5e-10) takes the Monte Carlo path; its answer must match the
    # exact one of the symmetric range to within sampling error.
    exact = gd_step_optimum(LinearRegression(UniformInputs(4, -1.0, 1.0), n_context=6))
    mc = gd_step_optimum(LinearRegression(UniformInputs(4, -1.0, 1.0 + 1e-9), n_context=6), mc_prompts=400_000)
    assert mc.method.startswith("monte-carlo")
    assert mc.lr == pytest.approx(exact.lr, rel=0.02)
    assert mc.loss == pytest.approx(exact.loss, rel=0.02)


def test_lsa_set_to_gamma_inverse_reaches_theory_loss():
    eig = [0.4, 0.7, 1.0, 1.3, 1.6]
    task = LinearRegression(GaussianInputs(5, cov=eig), n_context=20)
    opt = lsa_optimum(task)
    model = LinearSelfAttention(6, init="zero")
    w_kq, w_pv = lsa_weights(opt.preconditioner, 6)
    with torch.no_grad():
        model.layers[0].w_kq.copy_(w_kq)
        model.layers[0].w_pv.copy_(w_pv)
    mean, stderr = _mc_loss(model_predictor(model), task, n=100_000)
    assert abs(mean - opt.loss) < 4 * stderr
