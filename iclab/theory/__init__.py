"""Closed forms and exact optima of the theory papers; each function states its assumptions."""

from .descriptors import (
    DescriptorOptimum,
    GradientFlow,
    descriptor_optimum,
    gradient_flow,
    infinite_n_solution,
    infinite_n_solution_loss,
    no_descriptor_limit_loss,
)
from .kernels import TemplateMatrix, condition_number, template_matrix
from .linear import OneStepOptimum, gamma_matrix, gd_step_optimum, lsa_optimum, lsa_weights, moments
from .mesa import (
    ExpectedGradient,
    ProductOptimum,
    best_diagonal,
    best_product,
    diagonal_gradients,
    diagonal_learning_rate,
    expected_gradient,
    one_step_predictions,
    product_optimum,
    product_scatter,
)

__all__ = [
    "DescriptorOptimum",
    "ExpectedGradient",
    "GradientFlow",
    "OneStepOptimum",
    "ProductOptimum",
    "TemplateMatrix",
    "best_diagonal",
    "best_product",
    "condition_number",
    "descriptor_optimum",
    "diagonal_gradients",
    "diagonal_learning_rate",
    "expected_gradient",
    "gamma_matrix",
    "gd_step_optimum",
    "gradient_flow",
    "infinite_n_solution",
    "infinite_n_solution_loss",
    "lsa_optimum",
    "lsa_weights",
    "moments",
    "no_descriptor_limit_loss",
    "one_step_predictions",
    "product_optimum",
    "product_scatter",
    "template_matrix",
]
