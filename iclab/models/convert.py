"""State dicts in other layouts, to and from iclab's: pure functions, tensors and dicts in and out.

**The Hugging Face Hub layout** (what ``iclab export`` writes, offline): a folder with
``model.safetensors`` (the weights under iclab's own parameter names, metadata ``format: pt``) and
``config.json``::

    {"model_type": "iclab", "architectures": ["GPTTransformer"], "iclab": {<the checkpoint's metadata:
     class, arguments, prompt_format, task, experiment, setting, name, seed, step, iclab, ...>}}

:func:`to_hub` and :func:`from_hub` map a state dict and its metadata to these two files' contents
and back.

**Garg et al.'s ``TransformerModel``** (NeurIPS 2022; ``n_dims, n_positions, n_embd, n_layer, n_head``):
``_read_in`` (``nn.Linear(n_dims, n_embd)``), a Hugging Face ``GPT2Model`` backbone (``2·n_positions``
learned positions, pre-LN blocks with a fused ``c_attn`` and ``Conv1D`` weights stored (in, out),
``gelu_new`` MLPs of width 4·n_embd, LayerNorm ε = 1e-5, final ``ln_f``, no dropout; the token
embedding ``wte`` is unused, inputs enter as embeddings) and ``_read_out`` (``nn.Linear(n_embd, 1)``),
read at every x token. Their prompts interleave x_i (n_dims) with y tokens [y_i, 0, …, 0] (y in the
FIRST coordinate); iclab's :class:`iclab.prompts.InterleavedFormat` tokens are [x_i; 0] and [0_d; y_i]
(D = d + 1, y last). :func:`from_garg` gives the :class:`GPTTransformer` with the same predictions:
``gelu-tanh`` activation, the read-in's y column a copy of their first column, every ``Conv1D``
weight transposed. The converse is not defined: an iclab read-in has its own y column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..config import ConfigError
from .transformer import GPTConfig

HUB_MODEL_TYPE = "iclab"


def to_hub(state_dict: Mapping[str, torch.Tensor], metadata: Mapping[str, Any]) -> tuple[dict, dict]:
    """``(tensors, config)``: the contents of an export's ``model.safetensors`` (contiguous CPU
    tensors) and ``config.json`` for a model's state dict and its checkpoint metadata."""
    if "class" not in metadata or "arguments" not in metadata:
        raise ConfigError("the metadata names no model class and arguments: nothing could rebuild the export")
    tensors = {k: v.detach().cpu().contiguous() for k, v in state_dict.items()}
    return tensors, {"model_type": HUB_MODEL_TYPE, "architectures": [metadata["class"]], "iclab": dict(metadata)}


def from_hub(tensors: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> tuple[dict, dict]:
    """``(state_dict, metadata)`` from an export's tensors and ``config.json`` (see :func:`to_hub`)."""
    if config.get("model_type") != HUB_MODEL_TYPE or "iclab" not in config:
        raise ConfigError(f"config.json is not an iclab export (model_type {config.get('model_type')!r})")
    return dict(tensors), dict(config["iclab"])


def garg_config(n_dims: int, n_positions: int, n_embd: int, n_layer: int, n_head: int) -> GPTConfig:
    """The :class:`GPTConfig` of Garg et al.'s ``TransformerModel(n_dims, n_positions, n_embd, n_layer, n_head)``."""
    return GPTConfig(
        token_dim=n_dims + 1,
        n_layers=n_layer,
        n_heads=n_head,
        width=n_embd,
        mlp_ratio=4.0,
        max_tokens=2 * n_positions,
        stride=2,
        activation="gelu-tanh",
        init="garg",
    )


def from_garg(state_dict: Mapping[str, torch.Tensor], config: GPTConfig) -> dict[str, torch.Tensor]:
    """iclab's state dict for Garg et al.'s ``TransformerModel`` state dict (its ``model_state_dict``),
    for a model of :func:`garg_config`. Their unused token embedding and the attention-mask buffers
    older ``transformers`` versions saved are dropped."""
    sd = {k.removeprefix("_backbone."): v for k, v in state_dict.items()}
    wrong = ConfigError(
        f"not a state dict of Garg et al.'s TransformerModel with {config.n_layers} layers of width "
        f"{config.width}, {config.max_tokens} positions and {config.token_dim - 1} input dimensions"
    )
    positions, read_in = (
        sd.get("wpe.weight"),
        sd.get("_read_in.weight"),
    )  # read_in (n_embd, n_dims): y enters by column 0
    if (
        positions is None
        or positions.shape != (config.max_tokens, config.width)
        or read_in is None
        or read_in.shape != (config.width, config.token_dim - 1)
        or f"h.{config.n_layers}.ln_1.weight" in sd
    ):
        raise wrong
    out = {
        "positions": positions,
        "read_in.weight": torch.cat([read_in, read_in[:, :1]], dim=1),  # (n_embd, n_dims + 1): iclab's y is last
        "read_in.bias": sd["_read_in.bias"],
        "ln_out.weight": sd["ln_f.weight"],
        "ln_out.bias": sd["ln_f.bias"],
        "read_out.weight": sd["_read_out.weight"],
        "read_out.bias": sd["_read_out.bias"],
    }
    # GPT-2's Conv1D stores (in, out): nn.Linear's weight is its transpose; c_attn's columns are [q | k | v].
    names = {
        "ln_1": "ln_attn",
        "attn.c_attn": "attn.qkv",
        "attn.c_proj": "attn.out",
        "ln_2": "ln_mlp",
        "mlp.c_fc": "mlp.0",
        "mlp.c_proj": "mlp.2",
    }
    try:
        for layer in range(config.n_layers):
            for theirs, ours in names.items():
                weight = sd[f"h.{layer}.{theirs}.weight"]
                out[f"layers.{layer}.{ours}.weight"] = weight if theirs.startswith("ln") else weight.T
                out[f"layers.{layer}.{ours}.bias"] = sd[f"h.{layer}.{theirs}.bias"]
    except KeyError:
        raise wrong from None
    return {k: v.contiguous() for k, v in out.items()}
