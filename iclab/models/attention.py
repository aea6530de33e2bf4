"""Multi-head softmax self-attention, causal or bidirectional, with Boix-Adserà et al.'s identity terms.

Optional per-head scalars (Boix-Adserà et al., docs/papers.md §6), both initialised at 0 and absent unless switched
on: ``logit_identity`` adds a_h·XXᵀ to head h's attention logits (X = the attention input,
i.e. the LayerNormed block input; added to the logits as they enter the softmax, after QKᵀ's
1/√d_h, so it is W_K W_Qᵀ → W_K W_Qᵀ + √d_h·aI; with ``mask_identity_diagonal`` the diagonal
of XXᵀ is left out, so a_h weighs a token's similarity to the other tokens only, not its own
|x_i|², the variant of their language-model experiment), ``value_identity`` adds (Σ_h b_h A_h)X to the
attention output (A_h = head h's attention matrix), i.e. W_V W_Oᵀ → W_V W_Oᵀ + bI. Both terms
are multiplied by a fixed ``identity_scale`` (the authors' code has such multipliers, 1.0 by
default; under Adam a scale s acts like an s-fold learning rate for a and b).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ConfigError

ATTENTION = ("sdpa", "math")
"""``sdpa``: ``F.scaled_dot_product_attention``; ``math``: the same map written out as
softmax(QKᵀ/√d_h + mask)V. torch 2.13 has no vmap batching rule for SDPA on CPU (it falls
back to a slow per-seed loop), so seeds trained together through ``torch.func.vmap`` use
``math``; the two agree to float rounding."""


RECORDED = ("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z")
"""The attention's own named activations (under ``blocks.{l}.attn.``), computed by its written-out path."""


class SelfAttention(nn.Module):
    """Multi-head softmax self-attention with optional a·XXᵀ and b·AX terms.

    Args:
        width: the residual width (input and output size).
        n_heads, head_dim: heads and their size (``head_dim`` defaults to ``width // n_heads``).
        causal: each token attends to the tokens up to itself (GPT), or to every token (ViT).
        bias: biases in the Q, K, V and output projections.
        logit_identity, value_identity: switch on the per-head a·XXᵀ and b·AX terms.
        identity_scale: the fixed multiplier of both terms.
        attention: ``"sdpa"`` or ``"math"`` (see :data:`ATTENTION`).
        mask_identity_diagonal: leave XXᵀ's diagonal out of the a·XXᵀ term (needs ``logit_identity``).
        dropout: the probability of dropping an attention weight in training (GPT-2's attention dropout).
    """

    def __init__(
        self,
        width: int,
        n_heads: int,
        head_dim: int | None = None,
        causal: bool = True,
        bias: bool = True,
        logit_identity: bool = False,
        value_identity: bool = False,
        identity_scale: float = 1.0,
        attention: str = "sdpa",
        mask_identity_diagonal: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        if attention not in ATTENTION:
            raise ConfigError(f"attention must be one of {ATTENTION}, got {attention!r}")
        if mask_identity_diagonal and not logit_identity:
            raise ConfigError("mask_identity_diagonal masks the a·XXᵀ term: it needs logit_identity")
        self.n_heads, self.head_dim = n_heads, head_dim or width // n_heads
        self.causal, self.attention, self.identity_scale = causal, attention, identity_scale
        self.mask_identity_diagonal, self.dropout = mask_identity_diagonal, dropout
        inner = self.n_heads * self.head_dim
        self.qkv = nn.Linear(width, 3 * inner, bias=bias)
        self.out = nn.Linear(inner, width, bias=bias)
        self.a = nn.Parameter(torch.zeros(n_heads)) if logit_identity else None
        self.b = nn.Parameter(torch.zeros(n_heads)) if value_identity else None

    def forward(self, x: torch.Tensor, queries: slice | None = None, pattern: bool = False, cache=None):
        """Attention outputs ``(B, T, W)``, or only at the token positions ``queries`` (keys and
        values still come from every token; a causal query sees the tokens up to its own).

        With ``pattern``, also every head's attention matrix A_h ``(B, H, Tq, T)`` (rows: queries,
        summing to 1), the softmax of this same pass: SDPA does not return it, so the pass then
        takes the written-out softmax (``math``) path, which agrees with SDPA to float rounding.
        With a ``cache`` (an :class:`~iclab.models.activations.ActivationCache` scoped to ``attn.``) that asks for
        or edits any of the attention's own activations (:data:`RECORDED`), the written-out path passes its queries,
        keys, values, scores, pattern and head outputs through it (:mod:`iclab.models.activations`).
        """
        if cache is not None and any(cache.wants(name) for name in RECORDED):
            return self._recorded(x, queries, cache)
        batch = x.shape[0]
        inner = self.n_heads * self.head_dim
        q, k, v = self._qkv(x, queries)  # (B, H, Tq, d_h), (B, H, T, d_h), (B, H, T, d_h)
        if self.b is not None:
            # A_h X for every head comes out of the same attention call: append X to each head's values.
            v = torch.cat([v, x[:, None].expand(-1, self.n_heads, -1, -1)], dim=-1)  # (B, H, T, d_h + W)
        dropout = self.dropout if self.training else 0.0
        weights = None
        if self.attention == "sdpa" and self.a is None and queries is None and not pattern:
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, dropout_p=dropout)
        else:
            mask = self._logit_bias(x, queries)
            if self.attention == "sdpa" and not pattern:
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
            else:
                heads, weights = _softmax_attention(q, k, v, mask, dropout)
        tq = heads.shape[2]
        out = self.out(heads[..., : self.head_dim].transpose(1, 2).reshape(batch, tq, inner))  # (B, Tq, W)
        if self.b is not None:
            out = out + torch.einsum("h,bhtw->btw", self.identity_scale * self.b, heads[..., self.head_dim :])
        return (out, weights) if pattern else out

    def _recorded(self, x: torch.Tensor, queries: slice | None, cache) -> torch.Tensor:
        """:meth:`forward` written out step by step, each step's named activation read or edited through ``cache``
        (TransformerLens's layouts: q, k, v and z ``(B, T, H, d_h)``, scores and pattern ``(B, H, Tq, T)``)."""
        heads_first = lambda name, value: cache.record(name, value.transpose(1, 2)).transpose(1, 2)  # noqa: E731
        q, k, v = (heads_first(f"hook_{name}", part) for name, part in zip("qkv", self._qkv(x, queries)))
        if self.b is not None:
            v = torch.cat([v, x[:, None].expand(-1, self.n_heads, -1, -1)], dim=-1)  # as in forward
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # (B, H, Tq, T)
        mask = self._logit_bias(x, queries)
        scores = cache.record("hook_attn_scores", scores if mask is None else scores + mask)
        weights = cache.record("hook_pattern", scores.softmax(-1))
        heads = (F.dropout(weights, self.dropout) if self.training and self.dropout else weights) @ v
        z = cache.record("hook_z", heads[..., : self.head_dim].transpose(1, 2))  # (B, Tq, H, d_h)
        out = self.out(z.flatten(2))
        if self.b is not None:
            out = out + torch.einsum("h,bhtw->btw", self.identity_scale * self.b, heads[..., self.head_dim :])
        return out

    def _qkv(self, x: torch.Tensor, queries: slice | None):
        """Queries (at the positions ``queries`` only), keys and values, each ``(B, H, ·, d_h)``."""
        inner = self.n_heads * self.head_dim
        # (B, H, T, d_h) views of the one qkv product; splitting it first keeps every later
        # copy 4-D, which is several times cheaper on CPU than permuting the 5-D (B, T, 3, H, d_h).
        q, k, v = (
            part.unflatten(-1, (self.n_heads, self.head_dim)).transpose(1, 2) for part in self.qkv(x).split(inner, -1)
        )
        return q[:, :, slice(None) if queries is None else queries], k, v

    def _logit_bias(self, x: torch.Tensor, queries: slice | None) -> torch.Tensor | None:
        """What is added to the scaled logits QKᵀ/√d_h (query rows × key columns): -inf on
        future tokens when causal, plus a_h·XXᵀ when on; None when nothing is."""
        t = x.shape[1]
        rows = slice(None) if queries is None else queries
        mask = torch.full((t, t), float("-inf"), device=x.device, dtype=x.dtype).triu(1)[rows] if self.causal else None
        if self.a is not None:
            # Added after QKᵀ is scaled by 1/√d_h: the logits gain exactly a·XXᵀ.
            gram = x[:, rows] @ x.transpose(1, 2)  # (B, Tq, T)
            if self.mask_identity_diagonal:
                positions = torch.arange(t, device=x.device)
                gram = gram.masked_fill(positions[rows, None] == positions, 0.0)
            identity = (self.identity_scale * self.a)[:, None, None] * gram[:, None]  # (B, H, Tq, T)
            mask = identity if mask is None else mask + identity
        return mask


def _softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(QKᵀ/√d_h + mask)V for ``(B, H, ·, ·)`` inputs, and the softmax weights ``(B, H, Tq, T)``,
    with heads folded into the batch so the scale, the mask and QKᵀ are one ``baddbmm`` (a ``bmm``
    without a mask); ``dropout`` drops attention weights after the pattern is taken (as SDPA's
    ``dropout_p``)."""
    batch, heads, tq, head_dim = q.shape
    fold = lambda z: z.reshape(batch * heads, *z.shape[2:])
    scale = 1 / math.sqrt(head_dim)
    if mask is None:
        logits = torch.bmm(fold(q), fold(k).transpose(1, 2)) * scale  # (B·H, Tq, T)
    else:
        logits = torch.baddbmm(mask if mask.ndim == 2 else fold(mask), fold(q), fold(k).transpose(1, 2), alpha=scale)
    weights = logits.softmax(-1)  # (B·H, Tq, T)
    dropped = F.dropout(weights, dropout) if dropout else weights
    return (dropped @ fold(v)).view(batch, heads, tq, -1), weights.view(batch, heads, tq, -1)
