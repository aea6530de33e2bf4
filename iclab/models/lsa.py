"""Linear self-attention (LSA), the model of the in-context-learning theory papers.

One layer maps token rows H (B, T, D) to

    H + (H W_KQᵀ)(H_cᵀ H_c) W_PVᵀ / n,

i.e. each token attends, without softmax, to the context tokens H_c (the first N rows) as
keys and values. In the papers' column notation this is E + W^{PV} E_c E_cᵀ W^{KQ} E / n.
``n`` is N with ``normalize=True`` (else 1); in causal mode token t sees context tokens i ≤ t
and ``n`` counts them. The prediction is the query tokens' last (label) row, times
``readout_sign``.

Parameters are merged (``layers.{l}.w_kq``, ``layers.{l}.w_pv``) or separate
(``layers.{l}.w_q, w_k, w_v, w_p`` with W_KQ = W_Kᵀ W_Q and W_PV = W_P W_V); every matrix
is D×D. With ``shared=True`` one layer's weights are applied ``n_layers`` times (only
``layers.0.*`` exists). Its named activations (:mod:`iclab.models.activations`) are every applied
layer's input tokens, its attention's output and its output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..config import ConfigError
from .activations import ActivationCache
from .registry import rebuildable

PARAMETRIZATIONS = {"merged": ("w_kq", "w_pv"), "separate": ("w_q", "w_k", "w_v", "w_p")}
INITS = ("small", "variance_scaling", "balanced", "zero")
TRUNCATED_STD = 0.87962566103423978
"""The standard deviation of a unit normal truncated at ±2: a truncated draw is divided by it to keep its variance."""


class LSALayer(nn.Module):
    """One linear self-attention layer; see the module docstring for the map."""

    def __init__(self, dim: int, parametrization: str = "merged"):
        super().__init__()
        if parametrization not in PARAMETRIZATIONS:
            raise ConfigError(f"parametrization must be one of {list(PARAMETRIZATIONS)}, got {parametrization!r}")
        self.parametrization = parametrization
        for name in PARAMETRIZATIONS[parametrization]:
            self.register_parameter(name, nn.Parameter(torch.zeros(dim, dim)))

    def merged(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_KQ, W_PV), computed from W_Q, W_K, W_V, P in the separate parametrization."""
        if self.parametrization == "merged":
            return self.w_kq, self.w_pv
        return self.w_k.T @ self.w_q, self.w_p @ self.w_v

    def forward(self, h: torch.Tensor, n_context: int, causal: bool = False, normalize: bool = True):
        return h + self.attend(h, n_context, causal, normalize)

    def attend(self, h: torch.Tensor, n_context: int, causal: bool = False, normalize: bool = True) -> torch.Tensor:
        """What the layer adds to the tokens: the attention's output ``(B, T, D)``."""
        w_kq, w_pv = self.merged()
        context = h[:, :n_context]
        if not causal:
            # (H W_KQᵀ)(H_cᵀH_c)W_PVᵀ, associated so the cost is O(T·D²) rather than O(T·N·D).
            gram = context.transpose(1, 2) @ context
            if normalize:
                gram = gram / n_context
            return h @ (w_kq.T @ gram @ w_pv.T)
        t = h.shape[1]
        mask = torch.ones(t, n_context, dtype=h.dtype, device=h.device).tril()
        if normalize:
            mask = mask / mask.sum(1, keepdim=True)
        scores = (h @ w_kq.T) @ context.transpose(1, 2) * mask
        return scores @ context @ w_pv.T


@rebuildable
class LinearSelfAttention(nn.Module):
    """A stack of LSA layers with residual connections and a label-row readout.

    Args:
        dim: D, the token size.
        n_layers: L, number of attention layers applied.
        parametrization: ``"merged"`` (W_KQ, W_PV) or ``"separate"`` (W_Q, W_K, W_V, P).
        normalize: divide the attention sum by the number of keys (1/N).
        causal: token t attends only to context tokens at positions ≤ t.
        shared: apply the same layer ``n_layers`` times (recurrent weight sharing).
        readout_sign: the prediction is ``readout_sign`` × the query's label row
            (von Oswald et al. read −y).
        clip: clip every layer's output tokens to [−clip, clip] (von Oswald et al.'s code does so
            for stacks deeper than 3 layers); None: no clipping.
        init: ``"small"`` (i.i.d. N(0, init_scale²)), ``"variance_scaling"`` (von Oswald et al.'s: Haiku's
            ``VarianceScaling(init_scale)``, a normal of variance init_scale / fan_in truncated at two standard
            deviations, rescaled to keep that variance), ``"balanced"`` (Zhang et al.: W_PV = σ e_D e_Dᵀ,
            W_KQ = σ [[ΘΘᵀ, 0], [0, 0]] with ‖ΘΘᵀ‖_F = 1, σ = init_scale; merged only) or ``"zero"``.
        init_scale: the standard deviation, the variance scale, or σ for the balanced init.
        generator: the random stream for the initialisation.
    """

    def __init__(
        self,
        dim: int,
        n_layers: int = 1,
        parametrization: str = "merged",
        normalize: bool = True,
        causal: bool = False,
        shared: bool = False,
        readout_sign: float = 1.0,
        clip: float | None = None,
        init: str = "small",
        init_scale: float = 0.02,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if dim < 2 or n_layers < 1:
            raise ConfigError(f"LSA needs dim >= 2 and n_layers >= 1, got dim={dim}, n_layers={n_layers}")
        if clip is not None and not clip > 0:
            raise ConfigError(f"LSA clip must be > 0 or None, got {clip}")
        self.dim, self.n_layers = dim, n_layers
        self.normalize, self.causal, self.shared = normalize, causal, shared
        self.readout_sign, self.clip = readout_sign, clip
        self.layers = nn.ModuleList(LSALayer(dim, parametrization) for _ in range(1 if shared else n_layers))
        self.reset_parameters(init, init_scale, generator)

    def reset_parameters(self, init: str = "small", scale: float = 0.02, generator: torch.Generator | None = None):
        """Re-initialise every layer (see the class docstring for the schemes)."""
        if init not in INITS:
            raise ConfigError(f"init must be one of {INITS}, got {init!r}")
        with torch.no_grad():
            for layer in self.layers:
                for p in layer.parameters():
                    if init == "small":
                        p.copy_(scale * torch.randn(p.shape, generator=generator))
                    elif init == "variance_scaling":
                        std = math.sqrt(scale / p.shape[1]) / TRUNCATED_STD  # fan_in: the columns x multiplies
                        nn.init.trunc_normal_(p, 0.0, std, -2 * std, 2 * std, generator=generator)
                    else:
                        p.zero_()
                if init == "balanced":
                    if layer.parametrization != "merged":
                        raise ConfigError("the balanced initialisation needs parametrization='merged'")
                    theta = torch.randn(self.dim - 1, self.dim - 1, generator=generator)
                    block = theta @ theta.T
                    layer.w_kq[:-1, :-1] = scale * block / block.norm()
                    layer.w_pv[-1, -1] = scale

    def layer(self, index: int) -> LSALayer:
        """The module applied at depth ``index`` (the same one for every depth when shared)."""
        return self.layers[0 if self.shared else index]

    def activation_names(self) -> list[str]:
        """Every name ``forward(..., activations=...)`` takes: ``blocks.{l}.hook_resid_pre``, ``hook_attn_out`` and
        ``hook_resid_post`` of every applied layer (see :mod:`iclab.models.activations`)."""
        hooks = ("hook_resid_pre", "hook_attn_out", "hook_resid_post")
        return [f"blocks.{index}.{hook}" for index in range(self.n_layers) for hook in hooks]

    def forward(self, tokens: torch.Tensor, n_context: int, activations: Iterable[str] | None = None):
        """Predict the query labels, ``(B, T − n_context)``; with ``activations`` (names from
        :meth:`activation_names`), ``(prediction, {name: tensor})`` with those tokens ``(B, T, D)``."""
        cache = ActivationCache.asked(activations, self.activation_names, getattr(self, "activation_edits", None))
        h = tokens  # (B, T, D)
        for index in range(self.n_layers):
            block = cache.scope(f"blocks.{index}.")  # each activation read, or edited, through the cache
            h = block.record("hook_resid_pre", h)
            h = h + block.record("hook_attn_out", self.layer(index).attend(h, n_context, self.causal, self.normalize))
            if self.clip is not None:
                h = h.clamp(-self.clip, self.clip)
            h = block.record("hook_resid_post", h)
        prediction = self.readout_sign * h[:, n_context:, -1]  # (B, T − n_context)
        return (prediction, cache.found) if activations is not None else prediction
