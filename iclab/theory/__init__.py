"""Closed forms and exact optima of the theory papers; each function states its assumptions."""

from .linear import OneStepOptimum, gamma_matrix, gd_step_optimum, lsa_optimum, lsa_weights, moments

__all__ = ["OneStepOptimum", "gamma_matrix", "gd_step_optimum", "lsa_optimum", "lsa_weights", "moments"]
