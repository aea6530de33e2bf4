"""A GPT-style softmax transformer for interleaved prompts (Garg et al.; Akyürek et al.).

Token rows (B, T, D) are read in linearly to width W, added to learned positions, passed
through pre-LayerNorm blocks

    h ← h + Attn(LN(h)),   h ← h + MLP(LN(h))

(causal softmax attention through ``scaled_dot_product_attention`` or written out, see
:data:`ATTENTION`; GELU MLP, no dropout),
a final LayerNorm and a linear read-out. The prediction for the label of example i is read
at the token of x_i (every ``stride``-th token, ``stride = 2`` for
:class:`iclab.prompts.InterleavedFormat`), so ``forward`` returns ``(B, n_context)``. Only
those positions of the last block reach the output, so unless the hidden states are asked
for, the last block computes its queries, MLP and residual stream there alone (the same
predictions for about half of that block's work).

Optional per-head scalars (Boix-Adserà et al., PAPERS.md §6), both initialised at 0 and
absent unless switched on: ``logit_identity`` adds a_h·XXᵀ to head h's attention logits
(X = the attention input; added to the logits as they enter the softmax, after QKᵀ's 1/√d_h,
so it is W_K W_Qᵀ → W_K W_Qᵀ + √d_h·aI), ``value_identity`` adds b_h·A_h X to the attention
output (A_h = head h's attention matrix), i.e. W_V W_Oᵀ → W_V W_Oᵀ + bI.

Parameter names: ``read_in``, ``positions``, ``layers.{l}.ln_attn``, ``layers.{l}.attn.qkv``,
``layers.{l}.attn.out``, ``layers.{l}.attn.a`` / ``.b`` (when on), ``layers.{l}.ln_mlp``,
``layers.{l}.mlp.0``, ``layers.{l}.mlp.2``, ``ln_out``, ``read_out``.
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


class CausalSelfAttention(nn.Module):
    """Multi-head causal softmax attention with optional a·XXᵀ and b·AX terms."""

    def __init__(self, width: int, n_heads: int, logit_identity: bool = False, value_identity: bool = False,
                 attention: str = "sdpa"):
        super().__init__()
        if attention not in ATTENTION:
            raise ConfigError(f"attention must be one of {ATTENTION}, got {attention!r}")
        self.n_heads, self.head_dim, self.attention = n_heads, width // n_heads, attention
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.a = nn.Parameter(torch.zeros(n_heads)) if logit_identity else None
        self.b = nn.Parameter(torch.zeros(n_heads)) if value_identity else None

    def forward(self, x: torch.Tensor, queries: slice | None = None) -> torch.Tensor:
        """Attention outputs ``(B, T, W)``, or only at the token positions ``queries`` (keys and
        values still come from every token, each query seeing the tokens up to its own)."""
        batch, t, width = x.shape
        rows = slice(None) if queries is None else queries
        # (B, H, T, d_h) views of the one qkv product; splitting it first keeps every later
        # copy 4-D, which is several times cheaper on CPU than permuting the 5-D (B, T, 3, H, d_h).
        q, k, v = (part.unflatten(-1, (self.n_heads, self.head_dim)).transpose(1, 2)
                   for part in self.qkv(x).split(width, -1))
        q = q[:, :, rows]
        if self.b is not None:
            # A_h X for every head comes out of the same attention call: append X to each head's values.
            v = torch.cat([v, x[:, None].expand(-1, self.n_heads, -1, -1)], dim=-1)
        if self.attention == "sdpa" and self.a is None and queries is None:
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # Additive mask (query rows × key columns): -inf above the diagonal, i.e. on future tokens.
            mask = torch.full((t, t), float("-inf"), device=x.device, dtype=x.dtype).triu(1)[rows]
            if self.a is not None:
                # Added after QKᵀ is scaled by 1/√d_h: the logits gain exactly a·XXᵀ.
                mask = mask + self.a[:, None, None] * (x[:, rows] @ x.transpose(1, 2))[:, None]
            if self.attention == "sdpa":
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                heads = _softmax_attention(q, k, v, mask)
        tq = heads.shape[2]
        out = self.out(heads[..., : self.head_dim].transpose(1, 2).reshape(batch, tq, width))
        if self.b is not None:
            out = out + torch.einsum("h,bhtw->btw", self.b, heads[..., self.head_dim:])
        return out


def _softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(QKᵀ/√d_h + mask)V for ``(B, H, ·, ·)`` inputs, with heads folded into the batch
    so the scale, the mask and QKᵀ are one ``baddbmm``."""
    batch, heads, tq, head_dim = q.shape
    fold = lambda z: z.reshape(batch * heads, *z.shape[2:])  # noqa: E731
    logits = torch.baddbmm(mask if mask.ndim == 2 else fold(mask), fold(q), fold(k).transpose(1, 2),
                           alpha=1 / math.sqrt(head_dim))
    return (logits.softmax(-1) @ fold(v)).view(batch, heads, tq, -1)


class Block(nn.Module):
    """One pre-LayerNorm GPT block: attention then MLP, each on a residual branch."""

    def __init__(self, width: int, n_heads: int, mlp_ratio: float, logit_identity: bool, value_identity: bool,
                 attention: str):
        super().__init__()
        hidden = int(mlp_ratio * width)
        self.ln_attn = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, n_heads, logit_identity, value_identity, attention)
        self.ln_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))

    def forward(self, h: torch.Tensor, queries: slice | None = None) -> torch.Tensor:
        """The new hidden states, or only those at the positions ``queries`` (see
        :meth:`CausalSelfAttention.forward`)."""
        attended = self.attn(self.ln_attn(h), queries)
        h = (h if queries is None else h[:, queries]) + attended
        return h + self.mlp(self.ln_mlp(h))


class GPTTransformer(nn.Module):
    """Pre-LN causal transformer with linear read-in/read-out; see the module docstring.

    Args:
        token_dim: D, the size of a token row.
        n_layers, n_heads, width: depth, heads per layer and residual width (``width`` must be
            a multiple of ``n_heads``).
        mlp_ratio: the MLP's hidden width over ``width``.
        max_tokens: the number of learned positions (the longest prompt it can read).
        stride: predictions are read at tokens 0, stride, 2·stride, … (2 for interleaved x/y).
        logit_identity, value_identity: switch on the per-head a·XXᵀ and b·AX terms.
        attention: ``"sdpa"`` or ``"math"`` (see :data:`ATTENTION`; same function, pick by speed).
        init_scale: standard deviation of the N(0, σ²) weight init (GPT-2: 0.02; the output
            projections of each residual branch get σ/√(2·n_layers)).
        generator: the random stream for the initialisation.
    """

    def __init__(
        self,
        token_dim: int,
        n_layers: int = 4,
        n_heads: int = 4,
        width: int = 64,
        mlp_ratio: float = 4.0,
        max_tokens: int = 64,
        stride: int = 2,
        logit_identity: bool = False,
        value_identity: bool = False,
        attention: str = "sdpa",
        init_scale: float = 0.02,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if min(token_dim, n_layers, n_heads, width, max_tokens, stride) < 1 or width % n_heads:
            raise ConfigError(
                f"transformer needs positive sizes and width divisible by n_heads, got width={width}, n_heads={n_heads}"
            )
        self.max_tokens, self.stride = max_tokens, stride
        self.read_in = nn.Linear(token_dim, width)
        self.positions = nn.Parameter(torch.zeros(max_tokens, width))
        self.layers = nn.ModuleList(
            Block(width, n_heads, mlp_ratio, logit_identity, value_identity, attention) for _ in range(n_layers)
        )
        self.ln_out = nn.LayerNorm(width)
        self.read_out = nn.Linear(width, 1)
        self.reset_parameters(init_scale, generator)

    def reset_parameters(self, scale: float = 0.02, generator: torch.Generator | None = None):
        """GPT-2 initialisation: N(0, σ²) weights and positions, zero biases, unit LayerNorms,
        residual output projections scaled by 1/√(2L); the a, b scalars stay at 0."""
        residual_scale = scale / math.sqrt(2 * len(self.layers))
        with torch.no_grad():
            self.positions.copy_(scale * torch.randn(self.positions.shape, generator=generator))
            for name, module in self.named_modules():
                if isinstance(module, nn.Linear):
                    std = residual_scale if name.endswith(("attn.out", "mlp.2")) else scale
                    module.weight.copy_(std * torch.randn(module.weight.shape, generator=generator))
                    module.bias.zero_()
                elif isinstance(module, nn.LayerNorm):
                    module.reset_parameters()
                elif isinstance(module, CausalSelfAttention):
                    for p in (module.a, module.b):
                        if p is not None:
                            p.zero_()

    def forward(self, tokens: torch.Tensor, n_context: int, return_hidden: bool = False):
        """Predictions ``(B, n_context)`` read at every ``stride``-th token; optionally also the
        hidden states ``[after read-in, after block 1, …, after block L]``, each ``(B, T, W)``."""
        t = tokens.shape[1]
        if t > self.max_tokens:
            raise ConfigError(f"prompt has {t} tokens but the transformer has {self.max_tokens} positions")
        h = self.read_in(tokens) + self.positions[:t]
        read = slice(0, self.stride * n_context, self.stride)
        if return_hidden:
            hidden = [h]
            for block in self.layers:
                h = block(h)
                hidden.append(h)
            h = h[:, read]
        else:
            # Only the read positions of the last block reach the output: skip the rest of its work.
            for block in self.layers[:-1]:
                h = block(h)
            h = self.layers[-1](h, read)
        prediction = self.read_out(self.ln_out(h))[..., 0]
        return (prediction, hidden) if return_hidden else prediction
