"""A GPT-style softmax transformer, configured for interleaved prompts or for token sequences.

Tokens are read in to width W (token rows ``(B, T, D)`` by a linear map, or token ids
``(B, T)`` by an embedding), added to learned positions, passed through pre-LayerNorm blocks

    h ← h + Attn(LN(h)),   h ← h + MLP(LN(h))

(softmax attention, causal or bidirectional, see :mod:`iclab.models.attention`; GELU MLP;
optional GPT-2 dropout), a final LayerNorm and a read-out. Three ways to read:

* ``stride`` (Garg et al.; Akyürek et al.): the prediction for the label of example i is read
  at the token of x_i, every ``stride``-th token (``stride = 2`` for
  :class:`iclab.prompts.InterleavedFormat`; ``stride = 1`` reads every position, as a language
  model does), so ``forward`` returns ``(B, n_context)``.
* ``cls`` (Boix-Adserà et al., docs/papers.md §6; ViT-style): a learned CLS token is appended at the
  END of the sequence and the prediction is read there alone, ``(B, 1)``.
* ``read_last`` (Boix-Adserà et al.'s copying model): the prediction is read at the last input
  token alone, ``(B, 1)``.

The read-out is linear (``(B, ·)`` real predictions), or tied to the token embedding E
(``tied_output``: logits h Eᵀ, ``(B, ·, V)``, for symbolic labels and next tokens). Only the
read positions of the last block reach the output, so unless activations are asked for, the last
block computes its queries, MLP and residual stream there alone.

``model(tokens, n_context, activations=["blocks.0.attn.hook_pattern", ...])`` also returns the named
activations of the same pass (TransformerLens's hook names; see :mod:`iclab.models.activations`).

Per-head identity terms a·XXᵀ (optionally without XXᵀ's diagonal) and b·AX (``logit_identity``,
``mask_identity_diagonal``, ``value_identity``): see
:class:`iclab.models.attention.SelfAttention`.

Built as ``GPTTransformer(GPTConfig(...), generator)``; the config is kept as ``model.config``.

Parameter names: ``read_in`` or ``embedding``, ``positions``, ``cls_token`` (``cls``),
``layers.{l}.ln_attn``, ``layers.{l}.attn.qkv``, ``layers.{l}.attn.out``,
``layers.{l}.attn.a`` / ``.b`` (when on), ``layers.{l}.ln_mlp``, ``layers.{l}.mlp.0``,
``layers.{l}.mlp.2``, ``ln_out``, ``read_out`` (unless ``tied_output``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ..config import ConfigError
from .activations import ActivationCache, transformer_names
from .attention import SelfAttention
from .registry import rebuildable

INITS = ("gpt2", "pytorch", "garg")
"""``gpt2``: N(0, σ²) weights, embeddings and positions, zero biases, residual output
projections at σ/√(2L). ``pytorch``: every ``nn.Linear``'s own default (uniform ±1/√fan_in for
weights and biases) and N(0, 1) embeddings, positions and CLS token, as in ``nn.Embedding`` and
Boix-Adserà et al.'s ViT-style code. ``garg``: ``gpt2`` between a read-in and a read-out at
``nn.Linear``'s default, as Garg et al.'s model (Hugging Face's GPT-2 between two ``nn.Linear``)."""


ACTIVATIONS = {"gelu": "none", "gelu-tanh": "tanh"}
"""The MLP's GELU: exact (``gelu``, with erf) or its tanh approximation (``gelu-tanh``, GPT-2's
``gelu_new``), as ``nn.GELU(approximate=...)``."""


class Block(nn.Module):
    """One pre-LayerNorm block: attention then MLP, each on a residual branch."""

    def __init__(
        self, width: int, n_heads: int, mlp_ratio: float, activation: str = "gelu", dropout: float = 0.0, **attention
    ):
        super().__init__()
        hidden = int(mlp_ratio * width)
        self.ln_attn = nn.LayerNorm(width)
        self.attn = SelfAttention(width, n_heads, dropout=dropout, **attention)
        self.ln_mlp = nn.LayerNorm(width)
        gelu = nn.GELU(approximate=ACTIVATIONS[activation])
        self.mlp = nn.Sequential(nn.Linear(width, hidden), gelu, nn.Linear(hidden, width))
        self.drop = nn.Dropout(dropout)  # on each residual branch (GPT-2's residual dropout)

    def forward(
        self, h: torch.Tensor, queries: slice | None = None, cache: ActivationCache | None = None
    ) -> torch.Tensor:
        """The new hidden states, or only those at the positions ``queries`` (see
        :meth:`SelfAttention.forward`); ``cache`` records the block's named activations
        (see :mod:`iclab.models.activations`)."""
        if not cache:
            attended = self.drop(self.attn(self.ln_attn(h), queries))
            h = (h if queries is None else h[:, queries]) + attended
            return h + self.drop(self.mlp(self.ln_mlp(h)))
        # Every activation goes through the cache, which keeps those asked for and returns its edit, if any.
        h = cache.record("hook_resid_pre", h)  # (B, T, W)
        x = cache.record("ln1.hook_normalized", self.ln_attn(h))
        attended = cache.record("hook_attn_out", self.drop(self.attn(x, queries, cache=cache.scope("attn."))))
        h = cache.record("hook_resid_mid", (h if queries is None else h[:, queries]) + attended)
        x = cache.record("ln2.hook_normalized", self.ln_mlp(h))
        out = cache.record("hook_mlp_out", self.drop(self.mlp(x)))
        return cache.record("hook_resid_post", h + out)


@dataclass(frozen=True)
class GPTConfig:
    """The shape and options of a :class:`GPTTransformer` (nanoGPT's way: one record names a model).

    Attributes:
        token_dim: D, the size of a token row (a linear read-in), or None with ``vocab_size``.
        n_layers, n_heads, width: depth, heads per layer and residual width.
        mlp_ratio: the MLP's hidden width over ``width``.
        max_tokens: the number of learned positions (the longest sequence it can read, CLS included).
        stride: predictions are read at tokens 0, stride, 2·stride, … (2 for interleaved x/y).
        logit_identity, value_identity: switch on the per-head a·XXᵀ and b·AX terms.
        attention: ``"sdpa"`` or ``"math"`` (see :data:`iclab.models.attention.ATTENTION`).
        init_scale: σ of the ``gpt2`` initialisation.
        vocab_size: read token ids through an embedding of this many tokens (instead of ``token_dim``).
        head_dim: the size of each head (default ``width // n_heads``).
        causal: causal attention (GPT) or bidirectional (ViT).
        cls: append a learned CLS token at the end and read the prediction there.
        read_last: read the prediction at the last input token alone (no CLS token; Boix-Adserà et al.'s
            copying model).
        tied_output: logits h Eᵀ over the vocabulary instead of a linear read-out.
        bias: biases in the attention's Q, K, V and output projections.
        ln_out_affine: a learned scale and shift in the final LayerNorm.
        init: ``"gpt2"``, ``"pytorch"`` or ``"garg"`` (see :data:`INITS`).
        identity_scale: the fixed multiplier of the a·XXᵀ and b·AX terms.
        mask_identity_diagonal: leave XXᵀ's diagonal out of the a·XXᵀ term.
        activation: the MLP's ``gelu`` or ``gelu-tanh`` (see :data:`ACTIVATIONS`).
        dropout: GPT-2's dropout probability, in training, after the read-in (token + position), on
            the attention weights and on every residual branch (0: none).
    """

    token_dim: int | None = None
    n_layers: int = 4
    n_heads: int = 4
    width: int = 64
    mlp_ratio: float = 4.0
    max_tokens: int = 64
    stride: int = 2
    logit_identity: bool = False
    value_identity: bool = False
    attention: str = "sdpa"
    init_scale: float = 0.02
    vocab_size: int | None = None
    head_dim: int | None = None
    causal: bool = True
    cls: bool = False
    read_last: bool = False
    tied_output: bool = False
    bias: bool = True
    ln_out_affine: bool = True
    init: str = "gpt2"
    identity_scale: float = 1.0
    mask_identity_diagonal: bool = False
    activation: str = "gelu"
    dropout: float = 0.0

    def __post_init__(self):
        if (self.token_dim is None) == (self.vocab_size is None):
            raise ConfigError("transformer reads either token rows (token_dim) or token ids (vocab_size), not both")
        sizes = (
            self.token_dim or self.vocab_size,
            self.n_layers,
            self.n_heads,
            self.width,
            self.max_tokens,
            self.stride,
            self.head_dim or 1,
        )
        if min(sizes) < 1:
            raise ConfigError(f"transformer needs positive sizes, got width={self.width}, n_heads={self.n_heads}")
        if self.head_dim is None and self.width % self.n_heads:
            raise ConfigError(
                f"width must be divisible by n_heads (or give head_dim), got {self.width} and {self.n_heads}"
            )
        if self.tied_output and self.vocab_size is None:
            raise ConfigError("a tied output needs a token embedding (vocab_size)")
        if self.init not in INITS:
            raise ConfigError(f"init must be one of {INITS}, got {self.init!r}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")


@rebuildable
class GPTTransformer(nn.Module):
    """Pre-LN transformer with a linear or embedding read-in, shaped by a :class:`GPTConfig`; see the
    module docstring. ``generator`` is the random stream of the initialisation."""

    def __init__(self, config: GPTConfig, generator: torch.Generator | None = None):
        super().__init__()
        c = self.config = config
        self.max_tokens, self.stride = c.max_tokens, c.stride
        self.read_in = nn.Linear(c.token_dim, c.width) if c.vocab_size is None else None
        self.embedding = None if c.vocab_size is None else nn.Embedding(c.vocab_size, c.width)
        self.positions = nn.Parameter(torch.zeros(c.max_tokens, c.width))
        self.cls_token = nn.Parameter(torch.zeros(c.width)) if c.cls else None
        attention_options = dict(
            head_dim=c.head_dim,
            causal=c.causal,
            bias=c.bias,
            logit_identity=c.logit_identity,
            value_identity=c.value_identity,
            identity_scale=c.identity_scale,
            attention=c.attention,
            mask_identity_diagonal=c.mask_identity_diagonal,
        )
        self.layers = nn.ModuleList(
            Block(c.width, c.n_heads, c.mlp_ratio, c.activation, c.dropout, **attention_options)
            for _ in range(c.n_layers)
        )
        self.drop = nn.Dropout(c.dropout)
        self.ln_out = nn.LayerNorm(c.width, elementwise_affine=c.ln_out_affine)
        self.read_out = None if c.tied_output else nn.Linear(c.width, 1)
        self.reset_parameters(c.init_scale, generator, c.init)

    def reset_parameters(self, scale: float = 0.02, generator: torch.Generator | None = None, init: str = "gpt2"):
        """Initialise every weight from ``generator`` (see :data:`INITS`); LayerNorms are unit,
        the a, b scalars 0."""
        residual_scale = scale / math.sqrt(2 * len(self.layers))
        vector_scale = 1.0 if init == "pytorch" else scale
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in ("positions", "cls_token", "embedding.weight"):
                    p.copy_(vector_scale * torch.randn(p.shape, generator=generator))
            for name, module in self.named_modules():
                if isinstance(module, nn.Linear):
                    if init == "gpt2" or (init == "garg" and name not in ("read_in", "read_out")):
                        std = residual_scale if name.endswith(("attn.out", "mlp.2")) else scale
                        module.weight.copy_(std * torch.randn(module.weight.shape, generator=generator))
                        if module.bias is not None:
                            module.bias.zero_()
                    else:
                        # nn.Linear's default: both uniform on ±1/√fan_in (kaiming_uniform with a = √5).
                        bound = 1 / math.sqrt(module.in_features)
                        for p in (module.weight, module.bias):
                            if p is not None:
                                nn.init.uniform_(p, -bound, bound, generator=generator)
                elif isinstance(module, nn.LayerNorm):
                    module.reset_parameters()
                elif isinstance(module, SelfAttention):
                    for p in (module.a, module.b):
                        if p is not None:
                            p.zero_()

    def identity_terms(self) -> dict[str, torch.Tensor]:
        """The trainable identity scalars that are on, per layer and head: ``{"a": (L, H)}`` for the a·XXᵀ
        terms, ``{"b": (L, H)}`` for the b·AX ones (detached copies on the CPU)."""
        attentions = [layer.attn for layer in self.layers]
        return {
            name: torch.stack([getattr(attn, name).detach().cpu() for attn in attentions])
            for name in ("a", "b")
            if getattr(attentions[0], name) is not None
        }

    def set_identity_terms(self, a: float | None = None, b: float | None = None) -> None:
        """Set every layer's and head's a (and b) scalar to one value, e.g. a model at initialisation with
        the modification switched on at a given strength."""
        with torch.no_grad():
            for layer in self.layers:
                for name, value in (("a", a), ("b", b)):
                    if value is not None:
                        getattr(layer.attn, name).fill_(value)

    def features(self, tokens: torch.Tensor, n_context: int) -> torch.Tensor:
        """What the read-out reads: the final LayerNorm's output at the read positions, ``(B, n_read, W)``
        (one position, the CLS or last token, for a model that reads one)."""
        _, found = self(tokens, n_context, activations=["ln_final.hook_normalized"])
        return found["ln_final.hook_normalized"][:, self._read(found["ln_final.hook_normalized"].shape[1], n_context)]

    def _read(self, t: int, n_context: int) -> slice:
        """The positions the read-out reads in a sequence of ``t`` tokens (CLS included)."""
        one = self.cls_token is not None or self.config.read_last
        return slice(t - 1, t) if one else slice(0, self.stride * n_context, self.stride)

    def activation_names(self) -> list[str]:
        """Every name ``forward(..., activations=...)`` takes (see :mod:`iclab.models.activations`)."""
        return transformer_names(len(self.layers))

    def forward(self, tokens: torch.Tensor, n_context: int, activations: Iterable[str] | None = None):
        """Predictions read at every ``stride``-th token, ``(B, n_context)``, or at the CLS token or the
        last token (``read_last``), ``(B, 1)`` (logits ``(B, ·, V)`` with ``tied_output``).

        With ``activations`` (names from :meth:`activation_names`), returns ``(prediction, {name:
        tensor})``: those activations of this pass (:mod:`iclab.models.activations`), every block then
        computing every position.
        """
        cache = ActivationCache.asked(activations, self.activation_names, getattr(self, "activation_edits", None))
        h = self.read_in(tokens) if self.embedding is None else self.embedding(tokens)  # (B, T, W)
        if self.cls_token is not None:
            h = torch.cat([h, self.cls_token.expand(h.shape[0], 1, -1)], dim=1)
        t = h.shape[1]
        if t > self.max_tokens:
            raise ConfigError(f"sequence has {t} tokens but the transformer has {self.max_tokens} positions")
        h = cache.record("hook_embed", h)
        h = self.drop(h + cache.record("hook_pos_embed", self.positions[:t].expand_as(h)))
        read = self._read(t, n_context)
        if cache:
            for index, block in enumerate(self.layers):
                h = block(h, cache=cache.scope(f"blocks.{index}."))
            h = cache.record("ln_final.hook_normalized", self.ln_out(h))[:, read]  # (B, n_read, W)
        else:
            # Only the read positions of the last block reach the output: skip the rest of its work.
            for block in self.layers[:-1]:
                h = block(h)
            h = self.ln_out(self.layers[-1](h, read))  # (B, n_read, W)
        prediction = h @ self.embedding.weight.T if self.read_out is None else self.read_out(h)[..., 0]
        return (prediction, cache.found) if activations is not None else prediction
