"""Variational and mean-field approximations returned as PyMC ``Approximation`` objects.

fit_tap
    TAP mean-field Bayes learning (Opper & Winther 1996) and adaptive TAP / EP for a Gaussian
    prior vector and a likelihood through ``X @ w`` (:mod:`pymc_sfp.variational.tap`).
    (a model, or arrays ``X``, ``y``, ``likelihood``).
TAP
    The same as a PyMC ``Inference``: ``pm.fit(method=TAP(...))``.
tap_model
    The PyMC model of a TAP problem given as arrays.
TAPApproximation
    The result: a full-rank Gaussian ``Approximation`` with predictions, the leave-one-out
    figures and the approximate log evidence.
MixtureADVI
    A mixture of diagonal Gaussians (nn4post) fitted with a stratified ELBO, for
    ``pm.fit(n, method=MixtureADVI(K))``, with optional component growth and pruning
    (:mod:`pymc_sfp.variational.mixture`); its result is a ``MixtureApproximation``.
"""

from pymc_sfp.variational.mixture import MixtureADVI, MixtureApproximation
from pymc_sfp.variational.tap import TAP, TAPApproximation, fit_tap, tap_model

__all__ = ["TAP", "MixtureADVI", "MixtureApproximation", "TAPApproximation", "fit_tap", "tap_model"]
