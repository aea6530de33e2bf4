"""The template matrix N of a random-feature kernel (Boix-Adserà et al., ICLR 2024; docs/papers.md §6).

For a kernel K that does not care which symbols fill a template, only which positions hold
equal symbols, K(x, x') for two strings over DISJOINT alphabets depends on their templates
alone: N_ts = K(x, x') with x of template t and x' of template s. A kernel method trained on
one alphabet predicts on a disjoint one through N only, so it can learn a template task on
unseen symbols iff the r × r matrix N is non-singular, and the better N is conditioned the
fewer samples it needs (the paper's theorem and its remedy: W_K W_Qᵀ + aI).

This module estimates N for the random-feature kernel K(x, x') = E_θ φ_θ(x)·φ_θ(x')/F of a
feature map at its random initialisation θ, by Monte Carlo over initialisations and
substitutions. It returns numbers only; the feature map (built from a model) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..rng import generator as make_generator

FeatureMap = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
"""``features(tokens (B, L), generator) -> (B, F)``: features of token sequences under a fresh
random initialisation drawn from ``generator`` (one initialisation per call)."""


@dataclass(frozen=True)
class TemplateMatrix:
    """A Monte Carlo estimate of N (float64).

    Attributes:
        matrix: N, ``(r, r)``, symmetrised.
        stderr: its entries' standard errors over draws, ``(r, r)``.
        condition: σ_max(N)/σ_min(N).
        condition_band: the 5–95% bootstrap band of the condition number over draws.
        smallest: N's smallest eigenvalue, vᵀNv along its eigenvector v.
        smallest_stderr: the standard error of vᵀN_i v over draws i (a paired estimate: the part
            of the kernel common to all templates cancels draw by draw), so N is singular within
            Monte Carlo error when |smallest| is a few standard errors or less.
        draws: the number of initialisations.
    """

    matrix: torch.Tensor
    stderr: torch.Tensor
    condition: float
    condition_band: tuple[float, float]
    smallest: float
    smallest_stderr: float
    draws: int


def condition_number(matrix: torch.Tensor) -> torch.Tensor:
    """σ_max/σ_min of a (batch of) square matrices (inf when singular)."""
    s = torch.linalg.svdvals(matrix)
    return s[..., 0] / s[..., -1]


def template_matrix(
    features: FeatureMap, task, draws: int, seed: int, strings: int = 64, n_boot: int = 500
) -> TemplateMatrix:
    """Estimate N for a :class:`iclab.tasks.templates.TemplateTask` under ``features``.

    Each draw takes a fresh initialisation θ and ``strings`` strings of every template from the
    train alphabet and as many from the test alphabet (disjoint), averages the features of each
    template's strings per alphabet (μ_t, μ'_s: unbiased for E[φ(x) | θ], with the symbols'
    noise cut by √strings at the cost of one initialisation) and records μ_t·μ'_s/F, unbiased
    for N_ts since the alphabets are independent given θ; N is the mean over draws, symmetrised
    (the alphabets are exchangeable, so N is symmetric). Draws use the ``(seed, "kernel", i)`` streams.
    """
    r = task.n_templates
    which = torch.arange(r).repeat_interleave(strings)
    samples = []
    for i in range(draws):
        g = make_generator(seed, "kernel", i)
        tokens = torch.cat([task.sample(len(which), g, split, templates=which).tokens for split in ("train", "test")])
        with torch.no_grad():
            phi = features(tokens, g).double().view(2, r, strings, -1).mean(2)  # (alphabet, template, F)
        samples.append(phi[0] @ phi[1].T / phi.shape[-1])  # (r, r)
    stacked = torch.stack(samples)  # (draws, r, r)
    symmetric = (stacked + stacked.transpose(1, 2)) / 2
    matrix = symmetric.mean(0)
    stderr = symmetric.std(0) / draws**0.5
    # Bootstrap over draws, each replicate as resampling counts times the draws (one product).
    index = torch.randint(draws, (n_boot, draws), generator=make_generator(seed, "kernel-bootstrap"))
    counts = torch.zeros(n_boot, draws, dtype=torch.float64).scatter_add_(
        1, index, torch.ones(n_boot, draws, dtype=torch.float64)
    )
    boot = condition_number((counts @ symmetric.flatten(1) / draws).view(n_boot, r, r))
    low, high = torch.quantile(boot, torch.tensor([0.05, 0.95], dtype=torch.float64)).tolist()
    v = torch.linalg.eigh(matrix).eigenvectors[:, 0]
    along = symmetric @ v @ v  # (draws,): vᵀ N_i v
    return TemplateMatrix(
        matrix,
        stderr,
        condition_number(matrix).item(),
        (low, high),
        along.mean().item(),
        (along.std() / draws**0.5).item(),
        draws,
    )
