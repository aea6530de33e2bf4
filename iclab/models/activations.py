"""Named activations: a model's forward pass can return its internal tensors by name.

``model(tokens, n_context, activations=names)`` returns ``(prediction, {name: tensor})`` with the
activations asked for, computed in the same pass as the prediction, so probes, figures and metrics
read one source instead of re-running parts of the model. The names are TransformerLens's hook names
(``blocks.0.attn.hook_pattern``), which name a model's stages rather than its parameters: a block
is ``blocks.{l}`` here and ``layers.{l}`` in the state dict.

:class:`~iclab.models.GPTTransformer` (T tokens, the CLS token included; W the width, H the heads):

* ``hook_embed`` ``(B, T, W)``: the read-in of the tokens (linear map or embedding), the CLS token appended;
* ``hook_pos_embed`` ``(B, T, W)``: the learned positions added to it;
* ``blocks.{l}.hook_resid_pre`` ``(B, T, W)``: block l's input (block 0's: the read-in plus positions);
* ``blocks.{l}.ln1.hook_normalized`` ``(B, T, W)``: LN(h), what the attention reads;
* ``blocks.{l}.attn.hook_pattern`` ``(B, H, T, T)``: the attention matrices A_h (rows: queries, summing to 1);
* ``blocks.{l}.hook_attn_out`` ``(B, T, W)``: the attention's output;
* ``blocks.{l}.hook_resid_mid`` ``(B, T, W)``: the block's input plus the attention's output;
* ``blocks.{l}.ln2.hook_normalized`` ``(B, T, W)``: what the MLP reads;
* ``blocks.{l}.hook_mlp_out`` ``(B, T, W)``: the MLP's output;
* ``blocks.{l}.hook_resid_post`` ``(B, T, W)``: block l's output;
* ``ln_final.hook_normalized`` ``(B, T, W)``: the final LayerNorm at every position (the read-out reads
  its rows at the read positions).

:class:`~iclab.models.LinearSelfAttention` (and :class:`~iclab.models.FeatureLSA`, whose names are its
LSA's): ``blocks.{l}.hook_resid_pre`` and ``blocks.{l}.hook_resid_post``, ``(B, T, D)``, for every
applied layer l (a shared layer applied L times has L blocks).

:func:`residual_stream` names the hidden states of a model of L blocks, after the read-in and after
each block, as probes read them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

from ..config import ConfigError

BLOCK_HOOKS = (
    "hook_resid_pre",
    "ln1.hook_normalized",
    "attn.hook_pattern",
    "hook_attn_out",
    "hook_resid_mid",
    "ln2.hook_normalized",
    "hook_mlp_out",
    "hook_resid_post",
)
"""The activations of one transformer block, under ``blocks.{l}.``."""


def transformer_names(n_layers: int) -> list[str]:
    """Every activation name of a transformer of ``n_layers`` blocks, in the order they are computed."""
    blocks = [f"blocks.{layer}.{hook}" for layer in range(n_layers) for hook in BLOCK_HOOKS]
    return ["hook_embed", "hook_pos_embed", *blocks, "ln_final.hook_normalized"]


def residual_stream(n_layers: int) -> list[str]:
    """The residual stream of ``n_layers`` blocks: ``blocks.0.hook_resid_pre`` (after the read-in), then
    ``blocks.{l}.hook_resid_post`` for every block l, ``n_layers + 1`` names."""
    return ["blocks.0.hook_resid_pre", *(f"blocks.{layer}.hook_resid_post" for layer in range(n_layers))]


class ActivationCache:
    """The activations one forward pass was asked for: a model records what it computes with
    :meth:`record`, and only the names asked for are kept in :attr:`found` (so recording costs
    nothing otherwise). :meth:`scope` gives a part of the model (a block) its own prefix."""

    def __init__(self, names: Iterable[str] = (), prefix: str = "", found: dict[str, torch.Tensor] | None = None):
        self.names, self.prefix = frozenset(names), prefix
        self.found: dict[str, torch.Tensor] = {} if found is None else found

    @classmethod
    def asked(cls, names: Iterable[str] | None, available: Callable[[], Sequence[str]]) -> ActivationCache:
        """A cache for ``names`` (None: nothing, the training path), which must all be in
        ``available()`` (the model's names, listed only when something is asked for): an unknown one
        is a :class:`~iclab.config.ConfigError` that lists them."""
        if names is None:
            return cls()
        names = [names] if isinstance(names, str) else list(names)
        available = available()
        unknown = sorted(set(names) - set(available))
        if unknown:
            raise ConfigError(f"unknown activation(s) {', '.join(unknown)}; this model has: {', '.join(available)}")
        return cls(names)

    def __bool__(self) -> bool:
        """Whether anything at all was asked for."""
        return bool(self.names)

    def wants(self, name: str) -> bool:
        """Whether ``name`` (under this cache's prefix) was asked for."""
        return self.prefix + name in self.names

    def record(self, name: str, value: torch.Tensor) -> None:
        """Keep ``value`` as ``name`` (under this cache's prefix) if it was asked for."""
        if self.wants(name):
            self.found[self.prefix + name] = value

    def scope(self, prefix: str) -> ActivationCache:
        """The same cache for a part of the model whose names start with ``prefix`` (e.g. ``blocks.0.``)."""
        return ActivationCache(self.names, self.prefix + prefix, self.found)
