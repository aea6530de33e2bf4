"""Task distributions over in-context problems."""

from .base import Episode
from .linear import GaussianInputs, LinearRegression, UniformInputs, linear_regression_from_config

__all__ = ["Episode", "GaussianInputs", "LinearRegression", "UniformInputs", "linear_regression_from_config"]
