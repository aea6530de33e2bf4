"""Models map prompt tokens to predictions; they never see Task objects."""

from .attention import SelfAttention
from .baselines import OneHotMLP
from .causal_attention import CausalLinearAttention
from .constructions import gd_construction, interpolate_lsa, match_scale, merged_lsa
from .features import MLP, FeatureLSA
from .linearised import Linearised
from .lsa import LinearSelfAttention, LSALayer
from .recurrent import RecurrentReader
from .registry import MODELS, describe, rebuild, rebuildable
from .transformer import GPTConfig, GPTTransformer

__all__ = [
    "MLP",
    "MODELS",
    "CausalLinearAttention",
    "FeatureLSA",
    "GPTConfig",
    "GPTTransformer",
    "LSALayer",
    "Linearised",
    "LinearSelfAttention",
    "OneHotMLP",
    "RecurrentReader",
    "SelfAttention",
    "describe",
    "gd_construction",
    "interpolate_lsa",
    "match_scale",
    "merged_lsa",
    "rebuild",
    "rebuildable",
]
