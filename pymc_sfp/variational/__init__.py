"""Variational and mean-field approximations returned as PyMC ``Approximation`` objects.

fit_tap
    TAP mean-field Bayes learning (Opper & Winther 1996) and adaptive TAP / EP for a Gaussian
    prior vector and a likelihood through ``X @ w`` (:mod:`pymc_sfp.variational.tap`).
TAPApproximation
    Its result: a full-rank Gaussian ``Approximation`` with the leave-one-out figures and the
    approximate log evidence.
"""

from pymc_sfp.variational.tap import TAPApproximation, fit_tap

__all__ = ["TAPApproximation", "fit_tap"]
