"""Models map prompt tokens to predictions; they never see Task objects."""

from .causal_attention import CausalLinearAttention
from .lsa import LinearSelfAttention, LSALayer

__all__ = ["CausalLinearAttention", "LinearSelfAttention", "LSALayer"]
