"""Task distributions over in-context problems."""

from .base import Episode
from .linear import GaussianInputs, LinearRegression, UniformInputs, linear_regression_from_config
from .sine import SineRegression

__all__ = ["Episode", "GaussianInputs", "LinearRegression", "SineRegression", "UniformInputs", "linear_regression_from_config"]
