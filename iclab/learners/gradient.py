"""Gradient-descent learners: k steps of (preconditioned, optionally ridge-penalised) GD from w = 0,
one-pass SGD (Akyürek et al.), and GD++ (von Oswald et al.)."""

from __future__ import annotations

import math

import torch

from ..config import ConfigError
from ..tasks.base import Episode
from .base import LinearLearner, prefix_sums

RESTART_ITERATIONS = 40
"""The iterations each start of :meth:`GDPlusPlus.fit` is searched for before the best are searched on."""
POLISHED = 3
"""How many of :meth:`GDPlusPlus.fit`'s briefly searched starts are searched on to convergence."""


class GradientDescent(LinearLearner):
    """k steps of (preconditioned) gradient descent from w₀ = 0 on

        L(w) = (1/2c) [Σ (wᵀx_i − y_i)² + λ‖w‖²],   c = N (``average``, the default) or 1.

    Each step is w ← w − η P ∇L(w) = w − (η/c) P (XᵀXw − Xᵀy + λw), P = ``preconditioner``
    (identity if None). The default is plain GD on the mean squared error (1/2N)Σ(wᵀx − y)²;
    Akyürek et al.'s one-step batch GD w = w₀ − 2α(XᵀXw₀ − XᵀY + λw₀) is
    ``GradientDescent(1, lr=2α, lam=λ, average=False)``.
    """

    def __init__(
        self,
        steps: int = 1,
        lr: float = 1.0,
        preconditioner: torch.Tensor | None = None,
        lam: float = 0.0,
        average: bool = True,
    ):
        if steps < 1 or lam < 0:
            raise ConfigError(f"GD needs steps >= 1 and lam >= 0, got {steps}, {lam}")
        self.steps, self.lr, self.lam, self.average = steps, lr, lam, average
        self.preconditioner = None if preconditioner is None else torch.as_tensor(preconditioner, dtype=torch.float64)
        extras = (
            (", P" if preconditioner is not None else "") + (f", λ={lam:g}" if lam else "") + ("" if average else ", Σ")
        )
        self.name = f"gd{steps}(η={lr:.3g}{extras})"

    def _descend(self, gram: torch.Tensor, moment: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        """The steps from w = 0 given XᵀX ``(..., d, d)``, Xᵀy ``(..., d)`` and N ``(..., 1)``."""
        scale = count.clamp(min=1) if self.average else torch.ones_like(count)
        w = torch.zeros_like(moment)
        for _ in range(self.steps):
            grad = (torch.einsum("...ij,...j->...i", gram, w) - moment + self.lam * w) / scale
            if self.preconditioner is not None:
                grad = grad @ self.preconditioner.to(gram.device).T
            w = w - self.lr * grad
        return w

    def weights(self, xs, ys):
        count = torch.full((xs.shape[0], 1), xs.shape[1], dtype=xs.dtype, device=xs.device)
        return self._descend(xs.transpose(1, 2) @ xs, torch.einsum("bnd,bn->bd", xs, ys), count)

    def prefix_weights(self, xs, ys):
        """The same steps for every prefix at once, with prefix-summed Gram matrices (w = 0 at k = 0)."""
        gram, moment = prefix_sums(xs, ys)
        count = torch.arange(xs.shape[1], dtype=xs.dtype, device=xs.device)[None, :, None]
        return self._descend(gram, moment, count)


class OnePassSGD(LinearLearner):
    """One pass of SGD with batch 1 over the context, in order, from w₀ = 0 (Akyürek et al.):

        w_i = w_{i−1} − η (x_i x_iᵀ w_{i−1} − x_i y_i + λ w_{i−1}),

    a step on ½[(wᵀx_i − y_i)² + λ‖w‖²]; Akyürek et al.'s step α is η = 2α. The weights after k
    examples are the prefix weights at k, so every prefix comes out of the one pass.
    """

    def __init__(self, lr: float, lam: float = 0.0):
        if lr <= 0 or lam < 0:
            raise ConfigError(f"SGD needs lr > 0 and lam >= 0, got {lr}, {lam}")
        self.lr, self.lam = lr, lam
        self.name = f"sgd(η={lr:.3g}" + (f", λ={lam:g})" if lam else ")")

    def _pass(self, xs: torch.Tensor, ys: torch.Tensor, steps: int) -> torch.Tensor:
        """``(B, steps + 1, d)``: w₀ = 0 and the weights after each of the first ``steps`` examples."""
        w = xs.new_zeros(xs.shape[0], xs.shape[2])
        out = [w]
        for i in range(steps):
            x, y = xs[:, i], ys[:, i]
            w = w - self.lr * (x * (torch.einsum("bd,bd->b", x, w) - y)[:, None] + self.lam * w)
            out.append(w)
        return torch.stack(out, dim=1)

    def weights(self, xs, ys):
        return self._pass(xs, ys, xs.shape[1])[:, -1]

    def prefix_weights(self, xs, ys):
        """``(B, N, d)`` from one loop over positions, vectorised over prompts."""
        return self._pass(xs, ys, xs.shape[1] - 1)


def gd_plus_plus(
    xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor, lrs, gammas, clip: float | None = None
) -> torch.Tensor:
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
    L(w) = (1/2N) Σ (wᵀx_i − y_i)². The last step's γ never reaches the prediction. With ``clip`` every
    token's coordinates are clipped to ±clip after each step, as von Oswald et al.'s code clips the tokens
    of its deep models and of their GD++ alike (the prediction is then no longer linear in x_q).
    Shapes: xs (B, N, d), ys (B, N), x_query (B, Q, d), lrs and gammas (L,); returns (B, Q).
    """
    n = xs.shape[1]
    x, r = torch.cat([xs, x_query], 1), torch.cat([ys, torch.zeros_like(x_query[..., 0])], 1)
    for lr, gamma in zip(lrs, gammas):
        xc = x[:, :n]
        step = lr / max(n, 1) * torch.einsum("bn,bnd->bd", r[:, :n], xc)  # 0 without context
        r = r - torch.einsum("btd,bd->bt", x, step)
        x = x - gamma * (x @ (xc.transpose(1, 2) @ xc))
        if clip is not None:
            x, r = x.clamp(-clip, clip), r.clamp(-clip, clip)
    return -r[:, n:]


class GDPlusPlus(LinearLearner):
    """L steps of GD++ with per-step (η_l, γ_l); see :func:`gd_plus_plus`.

    ``GDPlusPlus([η] * L, [0] * L)`` is L steps of plain GD with step η. :meth:`fit` tunes the
    steps (and optionally γ) on a fixed sample of prompts. ``clip`` clips every token after each step
    (see :func:`gd_plus_plus`).
    """

    def __init__(self, lrs, gammas=None, clip: float | None = None):
        self.lrs = torch.as_tensor(lrs, dtype=torch.float64).flatten()
        self.gammas = (
            torch.zeros_like(self.lrs) if gammas is None else torch.as_tensor(gammas, dtype=torch.float64).flatten()
        )
        if len(self.lrs) < 1 or self.lrs.shape != self.gammas.shape:
            raise ConfigError(
                f"GD++ needs as many step sizes as gammas (>= 1), got {len(self.lrs)} and {len(self.gammas)}"
            )
        if clip is not None and not clip > 0:
            raise ConfigError(f"GD++ clip must be positive or None, got {clip}")
        self.clip = clip
        kind = "gd++" if self.gammas.any() else "gd"
        self.name = (
            f"{kind}{len(self.lrs)}(η={_short(self.lrs)}"
            + (f", γ={_short(self.gammas)}" if kind == "gd++" else "")
            + (f", clip ±{clip:g}" if clip is not None else "")
            + ")"
        )

    @property
    def steps(self) -> int:
        return len(self.lrs)

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        return gd_plus_plus(xs, ys, x_query, self.lrs.to(xs.device), self.gammas.to(xs.device), self.clip)

    def weights(self, xs, ys):
        if self.clip is not None:
            raise ConfigError(f"{self.name} clips its tokens: its prediction is not linear in the query, no weights")
        # The prediction is linear in x_q, so the unit vectors as queries read off w.
        eye = torch.eye(xs.shape[2], dtype=xs.dtype, device=xs.device).expand(xs.shape[0], -1, -1)
        return gd_plus_plus(xs, ys, eye, self.lrs.to(xs.device, xs.dtype), self.gammas.to(xs.device, xs.dtype))

    @classmethod
    def fit(
        cls,
        episode: Episode,
        steps: int,
        shared: bool = True,
        curvature: bool = True,
        start: tuple = (1.0, 0.0),
        iterations: int = 500,
        rtol: float = 1e-9,
        restarts: int = 0,
        generator: torch.Generator | None = None,
        validation: Episode | None = None,
        clip: float | None = None,
    ) -> GDPlusPlus:
        """Step sizes (and γ when ``curvature``) minimising the query MSE on ``episode``, in float64.

        ``shared`` fits one (η, γ) used at every step (the recurrent construction), otherwise
        one per step. The search starts from ``start`` = (η, γ), scalars or per-step sequences
        (e.g. the best one-step η from :func:`iclab.theory.gd_step_optimum`, or a recurrent fit to
        start a per-step one). Each search returns a local minimum, in general not the only one: from
        two per-step layers on, different starts find different minima. So ``restarts`` further
        searches start from random points drawn from ``generator`` (each η_l the start's η_l times a
        log-uniform factor in [1/2, 16], each free γ_l uniform in [0, 1/λ̄], λ̄ the mean eigenvalue of
        the context's XᵀX); every start is searched for at most :data:`RESTART_ITERATIONS` iterations, the
        :data:`POLISHED` of lowest loss on ``episode`` (the start's own among them) are searched on to
        convergence, and the one of lowest loss on ``validation`` (held-out prompts; ``episode`` without
        them) wins: a deep GD++ is a high-degree polynomial of the labels, and a minimum of one sample's
        loss can have steps so large that fresh prompts blow it up. ``clip``: the fitted GD++ clips its
        tokens (:func:`gd_plus_plus`). A
        per-step fit leaves the last γ at its start value (it does not affect the prediction).

        The loss is a sum of squared residuals, so each search is Levenberg–Marquardt: each
        iteration solves the damped Gauss–Newton system and keeps the step only if it lowers the
        loss (a step into the high-degree polynomial's blow-up is refused and the damping
        raised). It stops when a step taken at the iteration's first try gains less than ``rtol``
        of the loss (one taken after refusals is short by construction and says nothing), when
        no step lowers the loss even at the largest damping or the gradient is exactly zero, or
        after ``iterations``. At four and more per-step layers L-BFGS stalls far from the minimum.
        """
        if iterations < 1 or rtol < 0 or restarts < 0:
            raise ConfigError(
                f"GD++ fit needs iterations >= 1, rtol >= 0 and restarts >= 0, got {iterations}, {rtol}, {restarts}"
            )
        if restarts and generator is None:
            raise ConfigError("GD++ fit: restarts need a generator to draw their starts from")
        e = episode.to(dtype=torch.float64)

        def initial(value):
            v = torch.as_tensor(value, dtype=torch.float64, device=e.xs.device).flatten()
            if len(v) not in (1, steps):
                raise ConfigError(f"start values must be scalars or have {steps} entries")
            return v[:1] if shared else v.expand(steps).clone()

        lr, gamma = initial(start[0]), initial(start[1] if curvature else 0.0)
        # The parameters searched: η and, with curvature, γ; per-step fits leave out the last γ.
        free_gammas = (1 if shared else steps - 1) if curvature else 0

        def unpack(theta):
            lrs, gammas = theta[: len(lr)], torch.cat([theta[len(lr) :], gamma[free_gammas:]])
            return (lrs.expand(steps), gammas.expand(steps)) if shared else (lrs, gammas)

        def residuals(theta):
            return (gd_plus_plus(e.xs, e.ys, e.x_query, *unpack(theta), clip) - e.y_query).flatten()

        first = torch.cat([lr, gamma[:free_gammas]])
        if not torch.isfinite(residuals(first).pow(2).mean()):
            raise ConfigError(f"GD++ fit: the start {start} gives a non-finite loss on these prompts")
        starts = [first]
        if restarts:
            mean_eigenvalue = (e.xs.pow(2).sum((1, 2)).mean() / e.xs.shape[2]).item()
            for _ in range(restarts):
                factor = torch.exp(torch.empty_like(lr).uniform_(math.log(0.5), math.log(16), generator=generator))
                gammas = torch.rand(free_gammas, dtype=torch.float64, generator=generator) / max(mean_eigenvalue, 1e-12)
                starts.append(torch.cat([lr * factor, gammas.to(lr.device)]))
        # Each start is searched briefly, the best few on to convergence, and the winner judged on held-out prompts.
        brief = min(iterations, RESTART_ITERATIONS)
        screened = [f for f in (_levenberg_marquardt(t, residuals, brief, rtol) for t in starts) if f is not None]
        finalists = [t for t, _ in sorted(screened, key=lambda f: f[1].item())[:POLISHED]]
        polished = [_levenberg_marquardt(t, residuals, iterations, rtol)[0] for t in finalists]
        held_out = e if validation is None else validation.to(dtype=torch.float64)

        def judged(theta):
            predicted = gd_plus_plus(held_out.xs, held_out.ys, held_out.x_query, *unpack(theta), clip)
            loss = (predicted - held_out.y_query).pow(2)
            return loss.mean().nan_to_num(math.inf).item()

        best = min(polished, key=judged)
        return cls(*(v.detach().clone() for v in unpack(best)), clip=clip)


def _levenberg_marquardt(theta: torch.Tensor, residuals, iterations: int, rtol: float):
    """``(θ, loss)`` at the end of :meth:`GDPlusPlus.fit`'s search from ``theta`` (its docstring), or None when the
    start's loss is not finite (a random start in the polynomial's blow-up)."""
    r = residuals(theta)
    loss, damping = r.pow(2).mean(), 1e-3
    if not torch.isfinite(loss):
        return None
    for _ in range(iterations):
        jacobian = torch.func.jacfwd(residuals)(theta)
        curvature_matrix, gradient = jacobian.T @ jacobian, jacobian.T @ r
        if not gradient.any():
            break  # nothing moves the prediction (e.g. prompts without context)
        # Marquardt's scaling, floored so that a parameter without effect gets a zero step.
        scale = torch.diag(curvature_matrix.diagonal() + 1e-12 * curvature_matrix.diagonal().max())
        refused = 0
        while damping < 1e12:
            trial = theta + torch.linalg.solve(curvature_matrix + damping * scale, -gradient)
            trial_r = residuals(trial)
            trial_loss = trial_r.pow(2).mean()
            if trial_loss < loss:  # False for NaN too
                break
            damping, refused = damping * 4, refused + 1
        else:
            break  # no step lowers the loss: at the minimum
        gain = (loss - trial_loss) / loss
        theta, r, loss, damping = trial, trial_r, trial_loss, max(damping / 3, 1e-12)
        if gain < rtol and not refused:
            break
    return theta, loss


def _short(values: torch.Tensor) -> str:
    """'0.123' for one distinct value, else '[0.1, 0.2]' (for learner names)."""
    values = values.tolist()
    if len(set(values)) == 1:
        return f"{values[0]:.3g}"
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"
