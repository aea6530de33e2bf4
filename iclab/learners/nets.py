"""Fitted networks: a 2-layer ReLU network trained by gradient descent on each prompt's examples."""

from __future__ import annotations

import math

import torch

from ..config import ConfigError
from ..rng import generator
from .base import Learner


def initial_net(d: int, hidden: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """One 2-layer network's weights (U ``(h, d)``, a ``(h,)``, v ``(h,)``, c ``()``), float32 on the CPU, as
    PyTorch's default ``nn.Linear`` initialisation draws them: U(−1/√fan_in, 1/√fan_in)."""
    uniform = lambda shape, fan_in: (2 * torch.rand(shape, generator=g) - 1) / math.sqrt(fan_in)
    return uniform((hidden, d), d), uniform((hidden,), d), uniform((hidden,), hidden), uniform((), hidden)


def fit_two_layer_nets(
    x: torch.Tensor, y: torch.Tensor, active: torch.Tensor, init: tuple[torch.Tensor, ...], steps: int, lr: float
) -> tuple[torch.Tensor, ...]:
    """Train one network ŷ = vᵀrelu(Ux + a) + c per problem on its ``active`` points with Adam.

    Every network starts from ``init`` (:func:`initial_net`) and minimises the mean squared error over
    its own active points, full batch. The networks are independent: the loss summed over problems
    gives each one its own gradient, and Adam acts elementwise, so every network takes exactly the
    steps it would take alone. Shapes: x ``(M, P, d)``, y ``(M, P)``, active ``(M, P)`` bool; returns
    (U, a, v, c) with a leading M.
    """
    params = [p.to(x).expand(len(x), *p.shape).clone().requires_grad_(True) for p in init]
    weight = active.to(x.dtype) / active.sum(1, keepdim=True).clamp(min=1)  # mean over each problem's points
    optimizer = torch.optim.Adam(params, lr=lr)
    with torch.enable_grad():
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = (weight * (two_layer_net(x, params) - y) ** 2).sum()
            loss.backward()
            optimizer.step()
    return tuple(p.detach() for p in params)


def two_layer_net(x: torch.Tensor, params) -> torch.Tensor:
    """vᵀrelu(Ux + a) + c for each problem's own network: x ``(M, P, d)`` → ``(M, P)``."""
    u, a, v, c = params
    hidden = torch.relu(torch.einsum("mpd,mhd->mph", x, u) + a[:, None, :])  # (M, P, h)
    return torch.einsum("mph,mh->mp", hidden, v) + c[:, None]


class TwoLayerNetGD(Learner):
    """Garg et al.'s '2-layer NN, GD' baseline: a fresh ReLU network with ``hidden`` units fitted to
    the prompt's examples by ``steps`` full-batch Adam steps of size ``lr`` (theirs: 100 units,
    100 steps, lr 5e-3; batches of 100 examples, i.e. every example of their prompts).

    Every network, for every prompt and prefix, starts from the same initialisation, drawn from the
    ``(seed, "two-layer-net")`` stream: a prompt's prediction depends on its examples and the seed
    only, not on the batch around it, and a prefix's prediction is the one its context alone gets.
    All prompts (and all prefixes) train together, in chunks of ``chunk`` networks.
    """

    def __init__(self, hidden: int = 100, steps: int = 100, lr: float = 5e-3, seed: int = 0, chunk: int = 2048):
        if min(hidden, steps, chunk) < 1 or lr <= 0:
            raise ConfigError("2-layer net GD needs hidden, steps, chunk >= 1 and lr > 0")
        self.hidden, self.steps, self.lr, self.seed, self.chunk = hidden, steps, lr, seed, chunk
        self.name = f"2-layer net GD ({hidden} units)"

    def _values(self, x, y, active):
        # Fitted in float32: rounding there is far below what 100 Adam steps leave of the optimisation error.
        x, y = x.float(), y.float()
        init = initial_net(x.shape[-1], self.hidden, generator(self.seed, "two-layer-net"))
        out = []
        for start in range(0, len(x), self.chunk):
            part = slice(start, start + self.chunk)
            params = fit_two_layer_nets(x[part], y[part], active[part], init, self.steps, self.lr)
            out.append(torch.where(active[part].any(1, keepdim=True), two_layer_net(x[part], params), 0.0))
        return torch.cat(out).double()

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        n = xs.shape[1]
        points = torch.cat([xs, x_query], 1)
        labels = torch.cat([ys, torch.zeros_like(x_query[..., 0])], 1)
        active = (torch.arange(points.shape[1], device=xs.device) < n).expand(len(xs), -1)
        return self._values(points, labels, active)[:, n:]

    def predict_prefixes(self, xs, ys):
        """One network per (prompt, prefix k) on the first k examples, evaluated at x_{k+1} (0 for k = 0)."""
        xs, ys = xs.double(), ys.double()
        b, n, d = xs.shape
        index = torch.arange(n, device=xs.device)
        prefix = (index[None, :] < index[:, None]).expand(b, -1, -1).flatten(0, 1)  # (B·k, i)
        values = self._values(
            xs[:, None].expand(-1, n, -1, -1).flatten(0, 1), ys[:, None].expand(-1, n, -1).flatten(0, 1), prefix
        ).view(b, n, n)
        return values.diagonal(dim1=1, dim2=2)
