"""Reference in-context learners: algorithms that predict query labels from the context.

Every learner follows one batched interface, in float64 and without a Python loop over
prompts::

    learner.predict(xs, ys, x_query) -> (B, Q)    # xs (B, N, d), ys (B, N), x_query (B, Q, d)
    learner.predict_episode(episode) -> (B, Q)

Linear learners also expose ``weights(xs, ys) -> (B, d)``, the w they predict with.

Every learner also predicts each context label from the examples before it, for all prefix
lengths at once (what a causal transformer on interleaved prompts is compared with)::

    learner.predict_prefixes(xs, ys) -> (B, N)    # [:, k] predicts y_{k+1} from the first k examples

With no example (k = 0) every learner predicts 0. The base class answers with one batched
``predict`` call per prefix length; the learners below override it with a computation
vectorised over prefixes too (prefix sums, masked batched solves, masked distances).
"""

from __future__ import annotations

import torch

from .config import ConfigError
from .tasks.base import Episode


class Learner:
    """Base class: subclasses implement :meth:`predict`; ``name`` labels results."""

    name = "learner"

    def predict(self, xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict_episode(self, episode: Episode) -> torch.Tensor:
        """Predict ``episode.y_query`` in float64."""
        e = episode.to(dtype=torch.float64)
        return self.predict(e.xs, e.ys, e.x_query)

    def predict_prefixes(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """``(B, N)``: column k predicts y_{k+1} at x_{k+1} from the first k examples (0 for k = 0).

        Generic fallback: one batched :meth:`predict` per prefix length; subclasses vectorise it.
        """
        xs, ys = xs.double(), ys.double()
        columns = [torch.zeros_like(ys[:, 0])]
        columns += [self.predict(xs[:, :k], ys[:, :k], xs[:, k : k + 1])[:, 0] for k in range(1, xs.shape[1])]
        return torch.stack(columns, dim=1)

    def predict_prefixes_episode(self, episode: Episode) -> torch.Tensor:
        """:meth:`predict_prefixes` on an episode's context, in float64."""
        return self.predict_prefixes(episode.xs, episode.ys)

    def __repr__(self) -> str:
        return self.name


class LinearLearner(Learner):
    """A learner that fits one weight vector per prompt and predicts x_qᵀw."""

    def weights(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict(self, xs, ys, x_query):
        w = self.weights(xs.double(), ys.double())
        return torch.einsum("bqd,bd->bq", x_query.double(), w)

    def prefix_weights(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor | None:
        """``(B, N, d)``: the weights fitted on the first k examples, k = 0…N − 1, or None when
        this learner has no vectorised form (then the generic per-prefix fallback is used)."""
        return None

    def predict_prefixes(self, xs, ys):
        xs, ys = xs.double(), ys.double()
        w = self.prefix_weights(xs, ys)
        if w is None:
            return super().predict_prefixes(xs, ys)
        return torch.einsum("bkd,bkd->bk", xs, w)


def _sequential_kernel_predict(cov: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """For y ~ N(0, C), the conditional means E[y_{k+1} | y_1…y_k] for every k at once, ``(B, N)``.

    With C = LLᵀ (Cholesky) and innovations e = L⁻¹y, y_{k+1} = Σ_{j≤k+1} L_{k+1,j} e_j and
    e_{k+1} is independent of y_1…y_k, so the conditional mean is Σ_{j≤k} L_{k+1,j} e_j: the
    strictly lower part of L applied to e. With C = XXᵀ + λI this is ridge(λ) on every prefix
    (the kernel form of x_{k+1}ᵀ(X_kᵀX_k + λI)⁻¹X_kᵀy_k); with λ = 0 and k < d, min-norm OLS.
    """
    chol = torch.linalg.cholesky(cov)
    innovations = torch.linalg.solve_triangular(chol, ys[..., None], upper=False)
    return (chol.tril(-1) @ innovations)[..., 0]


def _prefix_sums(xs: torch.Tensor, ys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gram matrices Σ_{i<k} x_i x_iᵀ ``(B, N, d, d)`` and moments Σ_{i<k} y_i x_i ``(B, N, d)``
    of the first k examples, k = 0…N − 1 (exclusive prefix sums)."""
    outer = torch.einsum("bni,bnj->bnij", xs, xs)
    gram = torch.cumsum(outer, dim=1) - outer
    moment = ys[..., None] * xs
    return gram, torch.cumsum(moment, dim=1) - moment


class LeastSquares(LinearLearner):
    """Ordinary least squares; the minimum-norm solution when N < d (via the pseudo-inverse)."""

    name = "ols"

    def weights(self, xs, ys):
        return (torch.linalg.pinv(xs) @ ys[..., None])[..., 0]

    def predict_prefixes(self, xs, ys):
        """Every prefix without a loop over k, from two small Cholesky factors per prompt.

        k < d (under-determined): the minimum-norm solution is the noiseless kernel predictor,
        read off one Cholesky factor of the first points' kernel (:func:`_sequential_kernel_predict`).
        k ≥ d: after the first d points w_d = G_d⁻¹X_dᵀy_d (G_d = X_dᵀX_d), and adding the later
        points is a conjugate Gaussian update: their residuals r = y − Uw_d (U = the later inputs)
        behave as N(0, I + U G_d⁻¹ Uᵀ), and OLS on prefix k predicts x_{k+1}ᵀw_d plus the
        conditional mean of r_{k+1} given the earlier residuals, the kernel predictor again.
        """
        xs, ys = xs.double(), ys.double()
        n, d = xs.shape[1:]
        m = min(n, d)
        small = _sequential_kernel_predict(xs[:, :m] @ xs[:, :m].transpose(1, 2), ys[:, :m])
        if n <= d:
            return small
        head, later = xs[:, :d], xs[:, d:]
        chol = torch.linalg.cholesky(head.transpose(1, 2) @ head)
        w = torch.cholesky_solve(head.transpose(1, 2) @ ys[:, :d, None], chol)
        whitened = torch.linalg.solve_triangular(chol, later.transpose(1, 2), upper=False)  # L⁻¹Uᵀ
        kernel = whitened.transpose(1, 2) @ whitened + torch.eye(n - d, dtype=xs.dtype, device=xs.device)
        base = (later @ w)[..., 0]
        return torch.cat([small, base + _sequential_kernel_predict(kernel, ys[:, d:] - base)], dim=1)


class Ridge(LinearLearner):
    """Ridge regression w = (XᵀX + λI)⁻¹Xᵀy (λ unscaled by N; λ = σ²/τ² is the Bayes choice)."""

    def __init__(self, lam: float):
        if lam <= 0:
            raise ConfigError(f"ridge needs lam > 0, got {lam}")
        self.lam = lam
        self.name = f"ridge({lam:g})"

    def weights(self, xs, ys):
        d = xs.shape[-1]
        gram = xs.transpose(1, 2) @ xs + self.lam * torch.eye(d, dtype=xs.dtype, device=xs.device)
        return torch.linalg.solve(gram, xs.transpose(1, 2) @ ys[..., None])[..., 0]

    def predict_prefixes(self, xs, ys):
        """Every prefix from one Cholesky factor of the N×N kernel XXᵀ + λI (see
        :func:`_sequential_kernel_predict`): ridge's x_{k+1}ᵀw_k is k_{k+1}ᵀ(K_k + λI)⁻¹y_k."""
        xs, ys = xs.double(), ys.double()
        kernel = xs @ xs.transpose(1, 2) + self.lam * torch.eye(xs.shape[1], dtype=xs.dtype, device=xs.device)
        return _sequential_kernel_predict(kernel, ys)


class BayesLinear(LinearLearner):
    """Posterior mean of w under w ~ N(0, τ²I) and label noise N(0, σ²).

    It is ridge with λ = σ²/τ², and the minimum-norm least-squares solution when σ = 0.
    Optimal for Gaussian (dense) priors only.
    """

    name = "bayes"

    def __init__(self, w_scale: float = 1.0, noise: float = 0.0):
        self.inner = Ridge(noise**2 / w_scale**2) if noise > 0 else LeastSquares()

    def weights(self, xs, ys):
        return self.inner.weights(xs, ys)

    def predict_prefixes(self, xs, ys):
        return self.inner.predict_prefixes(xs, ys)


class GradientDescent(LinearLearner):
    """k steps of (preconditioned) gradient descent from w₀ = 0 on L(w) = (1/2N) Σ (wᵀx_i − y_i)².

    Each step is w ← w − η P ∇L(w) with P = ``preconditioner`` (identity if None).
    """

    def __init__(self, steps: int = 1, lr: float = 1.0, preconditioner: torch.Tensor | None = None):
        if steps < 1:
            raise ConfigError(f"GD needs steps >= 1, got {steps}")
        self.steps, self.lr = steps, lr
        self.preconditioner = None if preconditioner is None else torch.as_tensor(preconditioner, dtype=torch.float64)
        self.name = f"gd{steps}(η={lr:.3g}{', P' if preconditioner is not None else ''})"

    def weights(self, xs, ys):
        n = xs.shape[1]
        w = torch.zeros(xs.shape[0], xs.shape[2], dtype=xs.dtype, device=xs.device)
        for _ in range(self.steps):
            grad = torch.einsum("bnd,bn->bd", xs, torch.einsum("bnd,bd->bn", xs, w) - ys) / n
            if self.preconditioner is not None:
                grad = grad @ self.preconditioner.to(xs.device).T
            w = w - self.lr * grad
        return w

    def prefix_weights(self, xs, ys):
        """The same steps for every prefix at once, with prefix-summed Gram matrices (w = 0 at k = 0)."""
        gram, moment = _prefix_sums(xs, ys)
        count = torch.arange(xs.shape[1], dtype=xs.dtype, device=xs.device).clamp(min=1)[None, :, None]
        w = torch.zeros_like(moment)
        for _ in range(self.steps):
            grad = (torch.einsum("bkij,bkj->bki", gram, w) - moment) / count
            if self.preconditioner is not None:
                grad = grad @ self.preconditioner.to(xs.device).T
            w = w - self.lr * grad
        return w


class Averaging(LinearLearner):
    """w = (1/N) Σ y_i x_i, the 'averaging' estimator of Garg et al."""

    name = "averaging"

    def weights(self, xs, ys):
        return torch.einsum("bnd,bn->bd", xs, ys) / xs.shape[1]

    def prefix_weights(self, xs, ys):
        moment = ys[..., None] * xs
        count = torch.arange(xs.shape[1], dtype=xs.dtype, device=xs.device).clamp(min=1)[None, :, None]
        return (torch.cumsum(moment, dim=1) - moment) / count


class ZeroPredictor(Learner):
    """Predicts 0 for every query: the trivial baseline."""

    name = "zero"

    def predict(self, xs, ys, x_query):
        return torch.zeros(x_query.shape[:2], dtype=torch.float64, device=x_query.device)

    def predict_prefixes(self, xs, ys):
        return torch.zeros(ys.shape, dtype=torch.float64, device=ys.device)


class NearestNeighbours(Learner):
    """k-nearest-neighbour regression over the context (all of it when N < k).

    ``weights="uniform"`` averages the neighbours' labels; ``"distance"`` weights them by 1/distance
    (an exact match takes its own label).
    """

    def __init__(self, k: int = 3, weights: str = "uniform"):
        if k < 1 or weights not in ("uniform", "distance"):
            raise ConfigError(f"kNN needs k >= 1 and weights 'uniform' or 'distance', got {k}, {weights!r}")
        self.k, self.weighting = k, weights
        self.name = f"{k}-nn" + ("" if weights == "uniform" else "(1/dist)")

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        dist = torch.cdist(x_query, xs)  # (B, Q, N)
        k = min(self.k, xs.shape[1])
        near, index = dist.topk(k, dim=-1, largest=False)
        labels = torch.gather(ys[:, None, :].expand(-1, x_query.shape[1], -1), 2, index)
        if self.weighting == "uniform":
            return labels.mean(-1)
        inverse = 1.0 / near.clamp_min(1e-12)
        return (inverse * labels).sum(-1) / inverse.sum(-1)

    def predict_prefixes(self, xs, ys):
        """All prefixes from one masked distance matrix: x_{k+1}'s neighbours are among x_1…x_k."""
        xs, ys = xs.double(), ys.double()
        n = xs.shape[1]
        later = torch.ones(n, n, dtype=torch.bool, device=xs.device).triu()  # example i ≥ k is not in prefix k
        # Rank by squared distances from one matmul (cdist is several times slower on small batched
        # inputs), then measure the chosen neighbours' distances exactly.
        norms = xs.pow(2).sum(-1)
        squared = norms[:, :, None] + norms[:, None, :] - 2 * xs @ xs.transpose(1, 2)
        near, index = squared.masked_fill(later, float("inf")).topk(min(self.k, n), dim=-1, largest=False)
        valid = near.isfinite()
        labels = torch.gather(ys[:, None, :].expand(-1, n, -1), 2, index)
        if self.weighting == "uniform":
            weight = valid.to(ys.dtype)
        else:
            neighbours = torch.gather(xs[:, None].expand(-1, n, -1, -1), 2, index[..., None].expand(-1, -1, -1, xs.shape[2]))
            distance = (neighbours - xs[:, :, None]).norm(dim=-1)
            weight = torch.where(valid, 1.0 / distance.clamp_min(1e-12), 0.0)
        return (weight * labels).sum(-1) / weight.sum(-1).clamp_min(1e-300)


def gd_plus_plus(xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor, lrs, gammas) -> torch.Tensor:
    """Predictions of L steps of GD++ (von Oswald et al. 2023), differentiable in ``lrs``/``gammas``.

    GD++ is exactly what the linear self-attention construction computes, every token (query
    included) being updated at every layer. Each token j carries an input x_j and a residual
    r_j (r_i = y_i for context points, r_q = 0 for queries); with S_l = Σ_i x_i x_iᵀ over the
    current context inputs, step l updates every token at once, from the old values:

        r_j ← r_j − (η_l/N) g_lᵀ x_j,   g_l = Σ_i r_i x_i      (a GD step on the labels)
        x_j ← (I − γ_l S_l) x_j                                (the curvature correction)

    and the prediction is −r_q. So step l is a GD step on the data as transformed by steps
    < l, and every x (query too) is mapped by the same T_l = Π_k (I − γ_k S_k): the prediction
    is linear in x_q. With every γ_l = 0 this is plain GD from w = 0 with steps η_l on
    L(w) = (1/2N) Σ (wᵀx_i − y_i)². The last step's γ never reaches the prediction. Shapes: xs (B, N, d), ys (B, N), x_query (B, Q, d), lrs and
    gammas (L,); returns (B, Q).
    """
    n = xs.shape[1]
    x, r = torch.cat([xs, x_query], 1), torch.cat([ys, torch.zeros_like(x_query[..., 0])], 1)
    for lr, gamma in zip(lrs, gammas):
        xc = x[:, :n]
        step = lr / n * torch.einsum("bn,bnd->bd", r[:, :n], xc)
        r = r - torch.einsum("btd,bd->bt", x, step)
        x = x - gamma * (x @ (xc.transpose(1, 2) @ xc))
    return -r[:, n:]


class GDPlusPlus(LinearLearner):
    """L steps of GD++ with per-step (η_l, γ_l); see :func:`gd_plus_plus`.

    ``GDPlusPlus([η] * L, [0] * L)`` is L steps of plain GD with step η. :meth:`fit` tunes the
    steps (and optionally γ) on a fixed sample of prompts.
    """

    def __init__(self, lrs, gammas=None):
        self.lrs = torch.as_tensor(lrs, dtype=torch.float64).flatten()
        self.gammas = torch.zeros_like(self.lrs) if gammas is None else torch.as_tensor(gammas, dtype=torch.float64).flatten()
        if len(self.lrs) < 1 or self.lrs.shape != self.gammas.shape:
            raise ConfigError(f"GD++ needs as many step sizes as gammas (>= 1), got {len(self.lrs)} and {len(self.gammas)}")
        kind = "gd++" if self.gammas.any() else "gd"
        self.name = f"{kind}{len(self.lrs)}(η={_short(self.lrs)}" + (f", γ={_short(self.gammas)})" if kind == "gd++" else ")")

    @property
    def steps(self) -> int:
        return len(self.lrs)

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        return gd_plus_plus(xs, ys, x_query, self.lrs.to(xs.device), self.gammas.to(xs.device))

    def weights(self, xs, ys):
        # The prediction is linear in x_q, so the unit vectors as queries read off w.
        eye = torch.eye(xs.shape[2], dtype=xs.dtype, device=xs.device).expand(xs.shape[0], -1, -1)
        return gd_plus_plus(xs, ys, eye, self.lrs.to(xs.device, xs.dtype), self.gammas.to(xs.device, xs.dtype))

    @classmethod
    def fit(cls, episode: Episode, steps: int, shared: bool = True, curvature: bool = True,
            start: tuple = (1.0, 0.0), iterations: int = 20) -> "GDPlusPlus":
        """Step sizes (and γ when ``curvature``) minimising the query MSE on ``episode``, in float64.

        ``shared`` fits one (η, γ) used at every step (the recurrent construction), otherwise
        one per step. The search is L-BFGS with a strong-Wolfe line search from ``start`` = (η, γ),
        scalars or per-step sequences (e.g. the best one-step η from
        :func:`iclab.theory.gd_step_optimum`, or a recurrent fit to start a per-step one). The
        objective is a polynomial in (η, γ), so this finds the local minimum next to the start.
        A per-step fit leaves the last γ at its start value (it does not affect the prediction).
        """
        e = episode.to(dtype=torch.float64)
        size = 1 if shared else steps

        def initial(value, trainable):
            v = torch.as_tensor(value, dtype=torch.float64).flatten()
            return (v[:1] if shared else v.expand(steps)).clone().requires_grad_(trainable)

        lr, gamma = initial(start[0], True), initial(start[1] if curvature else 0.0, curvature)
        if len(lr) != size or len(gamma) != size:
            raise ConfigError(f"start values must be scalars or have {steps} entries")
        optimizer = torch.optim.LBFGS([lr, gamma] if curvature else [lr], max_iter=iterations,
                                      line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-14)

        def expand(v):
            return v.expand(steps) if shared else v

        def closure():
            optimizer.zero_grad()
            loss = (gd_plus_plus(e.xs, e.ys, e.x_query, expand(lr), expand(gamma)) - e.y_query).pow(2).mean()
            loss.backward()
            return loss

        optimizer.step(closure)
        return cls(expand(lr).detach().clone(), expand(gamma).detach().clone())


def _short(values: torch.Tensor) -> str:
    """'0.123' for one distinct value, else '[0.1, 0.2]' (for learner names)."""
    values = values.tolist()
    if len(set(values)) == 1:
        return f"{values[0]:.3g}"
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"
