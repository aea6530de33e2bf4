"""Task distributions over in-context problems."""

from .autoregressive import AutoregressiveSequences, StartDistribution, autoregressive_from_config
from .base import Episode
from .functions import CLASSES, FunctionClass, function_class
from .linear import GaussianInputs, LinearRegression, UniformInputs, linear_regression_from_config
from .sine import SineRegression

__all__ = [
    "CLASSES",
    "FunctionClass",
    "function_class",
    "AutoregressiveSequences",
    "Episode",
    "GaussianInputs",
    "LinearRegression",
    "SineRegression",
    "StartDistribution",
    "UniformInputs",
    "autoregressive_from_config",
    "linear_regression_from_config",
]
