"""Models map prompt tokens to predictions; they never see Task objects."""

from .causal_attention import CausalLinearAttention
from .constructions import gd_construction, merged_lsa
from .features import FeatureLSA, mlp
from .lsa import LinearSelfAttention, LSALayer
from .transformer import GPTTransformer

__all__ = ["CausalLinearAttention", "FeatureLSA", "GPTTransformer", "LSALayer", "LinearSelfAttention", "gd_construction", "merged_lsa", "mlp"]
