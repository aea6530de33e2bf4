"""Models map prompt tokens to predictions; they never see Task objects."""

from .constructions import gd_construction
from .features import FeatureLSA, mlp
from .lsa import LinearSelfAttention, LSALayer

__all__ = ["FeatureLSA", "LinearSelfAttention", "LSALayer", "gd_construction", "mlp"]
