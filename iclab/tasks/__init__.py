"""Task distributions over in-context problems."""

from .autoregressive import AutoregressiveSequences, StartDistribution, autoregressive_from_config
from .base import Episode, TokenBatch
from .descriptions import describe_task, task_from_description
from .functions import CLASSES, FunctionClass, function_class
from .linear import GaussianInputs, LinearRegression, UniformInputs, linear_regression_from_config
from .sine import SineRegression
from .templates import Template, TemplateTask, parse_templates, template_task

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
    "Template",
    "TemplateTask",
    "TokenBatch",
    "UniformInputs",
    "autoregressive_from_config",
    "describe_task",
    "linear_regression_from_config",
    "parse_templates",
    "task_from_description",
    "template_task",
]
