"""The local learning coefficient (LLC) of a model at its weights, estimated with devinterp (an optional extra:
``pip install 'iclab[devinterp]'``).

Lau et al.'s estimator, as devinterp computes it: SGLD chains sample weights w from the tempered posterior localised at
the checkpoint's w*, ∝ exp(−nβ·L_n(w) − (γ/2)‖w − w*‖²), with nβ = n / log n, and λ̂ = nβ·(E_w[L_n(w)] − L_n(w*)).
For a regular model λ = p/2 (p parameters); a model that uses fewer effective directions has a smaller λ, so its
changes over training mark developmental stages. L_n is half the squared error of every prediction of n prompts
(the Gaussian negative log-likelihood at unit noise, up to a constant), and L_n(w*) is measured on every full
minibatch of them, the batches the chains cycle through. The settings (:class:`Settings`: SGLD's step ε, the
localisation γ, chains, draws, batch size, n) are recorded beside every estimate, and so is devinterp's diagnostic,
each chain's loss at every draw: an estimate has settled when the traces have stopped drifting and the chains agree.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ..config import ConfigError


@dataclass(frozen=True)
class Settings:
    """The SGLD sampler's settings (devinterp's names in brackets): ``lr`` the step size ε (``lr``), ``localization``
    γ (``localization``), ``chains`` and ``draws`` per chain (``num_chains``, ``num_draws``), ``batch_size`` the
    minibatch of each step, ``samples`` n (the prompts the loss is measured on; nβ = n / log n), ``seed``."""

    lr: float = 1e-4
    localization: float = 100.0
    chains: int = 4
    draws: int = 200
    batch_size: int = 64
    samples: int = 1024
    seed: int = 0

    def __post_init__(self):
        if not (self.lr > 0 and self.localization >= 0 and min(self.chains, self.draws) >= 1):
            raise ConfigError(f"LLC settings need lr > 0, localization >= 0, chains and draws >= 1, got {self}")
        if not 2 <= self.batch_size <= self.samples:
            raise ConfigError(f"LLC settings need 2 <= batch_size <= samples, got {self.batch_size}, {self.samples}")

    @property
    def nbeta(self) -> float:
        """nβ = n / log n, the inverse temperature of Watanabe's WBIC (devinterp's default)."""
        return self.samples / math.log(self.samples)


def require() -> None:
    """A :class:`ConfigError` unless devinterp (and the ``datasets`` it reads samples from) can be imported."""
    try:
        import datasets  # noqa: F401
        import devinterp.slt.llc  # noqa: F401
    except ImportError:
        raise ConfigError("the LLC is estimated with devinterp: pip install 'iclab[devinterp]'") from None


def estimate(model: nn.Module, loss: Callable[[nn.Module, torch.Tensor], torch.Tensor], settings: Settings) -> dict:
    """λ̂ of ``model`` at its weights, where ``loss(model, indices)`` is the loss of each of the samples at
    ``indices`` (``(b,)`` of 0…n − 1) → ``(b,)``. Returns ``{"mean", "std", "per_chain", "init_loss", "loss_trace"
    (chains × draws), "nbeta", "settings"}``; ``std`` is the spread between chains, which see the same minibatches."""
    require()
    from datasets import Dataset
    from devinterp.slt.llc import llc

    # devinterp reads language-model batches of token ids: each row names one sample, its loss one "next token".
    rows = Dataset.from_dict({"input_ids": [[index, 0] for index in range(settings.samples)]}).with_format("torch")
    device = str(next(model.parameters()).device)
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stderr(io.StringIO()):  # its progress bars
        out = llc(
            model,
            rows,
            {},
            lr=settings.lr,
            n_beta=settings.nbeta,
            localization=settings.localization,
            num_chains=settings.chains,
            num_draws=settings.draws,
            batch_size=settings.batch_size,
            num_init_loss_batches=settings.samples // settings.batch_size,  # L_n(w*) on the batches the chains see
            init_seed=settings.seed,
            loss_fn=lambda network, ids: loss(network, ids[:, 0])[:, None],
            device=device,
            output_path=Path(scratch) / "samples.zarr",
        )
        return {
            "mean": float(out.llc_mean),
            "std": float(out.llc_std),
            "per_chain": [float(v) for v in out.llc_per_chain.values],
            "init_loss": float(out.init_loss),
            "loss_trace": out.loss_trace.values.tolist(),
            "nbeta": settings.nbeta,
            "settings": asdict(settings),
        }


def prompt_loss(prompt_format, episode) -> Callable[[nn.Module, torch.Tensor], torch.Tensor]:
    """Half the squared error of an iclab model's predictions on each prompt of ``episode`` (its mean over the
    prompt's predictions: every context label of an interleaved prompt, every query of a paired one)."""
    prompt = prompt_format.encode(episode)

    def loss(model: nn.Module, indices: torch.Tensor) -> torch.Tensor:
        parameter = next(model.parameters())
        indices = indices.cpu()
        tokens = prompt.tokens[indices].to(parameter.device, parameter.dtype)
        prediction = model(tokens, prompt.n_context)
        return 0.5 * (prediction - prompt.targets[indices].to(prediction)).pow(2).mean(-1)

    return loss
