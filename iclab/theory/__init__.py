"""Closed forms and exact optima of the theory papers; each function states its assumptions."""

from .linear import OneStepOptimum, gamma_matrix, gd_step_optimum, lsa_optimum, lsa_weights, moments
from .mesa import ProductOptimum, best_product, one_step_predictions, product_optimum, product_scatter

__all__ = [
    "OneStepOptimum", "ProductOptimum", "best_product", "gamma_matrix", "gd_step_optimum", "lsa_optimum",
    "lsa_weights", "moments", "one_step_predictions", "product_optimum", "product_scatter",
]
