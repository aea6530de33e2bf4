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
* ``blocks.{l}.attn.hook_q``, ``.attn.hook_k``, ``.attn.hook_v`` ``(B, T, H, d_h)``: every head's queries, keys and
  values;
* ``blocks.{l}.attn.hook_attn_scores`` ``(B, H, T, T)``: the logits QKᵀ/√d_h with the causal mask (−inf) and the
  a·XXᵀ term added, what the softmax reads;
* ``blocks.{l}.attn.hook_pattern`` ``(B, H, T, T)``: the attention matrices A_h (rows: queries, summing to 1);
* ``blocks.{l}.attn.hook_z`` ``(B, T, H, d_h)``: every head's output A_h V_h, before the output map;
* ``blocks.{l}.hook_attn_out`` ``(B, T, W)``: the attention's output;
* ``blocks.{l}.hook_resid_mid`` ``(B, T, W)``: the block's input plus the attention's output;
* ``blocks.{l}.ln2.hook_normalized`` ``(B, T, W)``: what the MLP reads;
* ``blocks.{l}.hook_mlp_out`` ``(B, T, W)``: the MLP's output;
* ``blocks.{l}.hook_resid_post`` ``(B, T, W)``: block l's output;
* ``ln_final.hook_normalized`` ``(B, T, W)``: the final LayerNorm at every position (the read-out reads
  its rows at the read positions).

:class:`~iclab.models.LinearSelfAttention` (and :class:`~iclab.models.FeatureLSA`, whose names are its
LSA's): ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.hook_attn_out`` (the attention's output, what the layer
adds to the tokens) and ``blocks.{l}.hook_resid_post``, ``(B, T, D)``, for every applied layer l (a shared layer
applied L times has L blocks).

Activations can be written as well as read: a model whose ``activation_edits`` maps names to functions applies each
to its activation as it is computed, and the pass goes on with the result (:mod:`iclab.models.interventions` sets
them for the length of a ``with`` block: patching, zero- and mean-ablation).

:func:`residual_stream` names the hidden states of a model of L blocks, after the read-in and after
each block, as probes read them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import torch

from ..config import ConfigError

BLOCK_HOOKS = (
    "hook_resid_pre",
    "ln1.hook_normalized",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
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
    """The activations one forward pass was asked for, and the edits it applies: a model passes what it computes
    through :meth:`record`, which keeps only the names asked for in :attr:`found` (so recording costs nothing
    otherwise) and returns the value the pass goes on with (edited when an edit names it). :meth:`scope` gives a
    part of the model (a block) its own prefix."""

    def __init__(
        self,
        names: Iterable[str] = (),
        prefix: str = "",
        found: dict[str, torch.Tensor] | None = None,
        edits: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] | None = None,
    ):
        self.names, self.prefix = frozenset(names), prefix
        self.found: dict[str, torch.Tensor] = {} if found is None else found
        self.edits = {} if edits is None else edits

    @classmethod
    def asked(
        cls,
        names: Iterable[str] | None,
        available: Callable[[], Sequence[str]],
        edits: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] | None = None,
    ) -> ActivationCache:
        """A cache for ``names`` (None: nothing, the training path), which must all be in
        ``available()`` (the model's names, listed only when something is asked for): an unknown one
        is a :class:`~iclab.config.ConfigError` that lists them. ``edits``: the model's ``activation_edits``."""
        if names is None:
            return cls(edits=edits)
        names = [names] if isinstance(names, str) else list(names)
        available = available()
        unknown = sorted(set(names) - set(available))
        if unknown:
            raise ConfigError(f"unknown activation(s) {', '.join(unknown)}; this model has: {', '.join(available)}")
        return cls(names, edits=edits)

    def __bool__(self) -> bool:
        """Whether anything at all was asked for or is edited (the pass then computes every activation)."""
        return bool(self.names or self.edits)

    def wants(self, name: str) -> bool:
        """Whether ``name`` (under this cache's prefix) was asked for or is edited."""
        return self.prefix + name in self.names or self.prefix + name in self.edits

    def record(self, name: str, value: torch.Tensor) -> torch.Tensor:
        """The value the pass goes on with: ``value``, or its edit when one names ``name`` (under this cache's
        prefix); kept as ``name`` if it was asked for."""
        full = self.prefix + name
        if full in self.edits:
            value = self.edits[full](value)
        if full in self.names:
            self.found[full] = value
        return value

    def scope(self, prefix: str) -> ActivationCache:
        """The same cache for a part of the model whose names start with ``prefix`` (e.g. ``blocks.0.``)."""
        return ActivationCache(self.names, self.prefix + prefix, self.found, self.edits)
