"""Tests for pymc_sfp.core.linear_gaussian: the conditional of a conjugate linear-Gaussian layer.

The conditional mean and exact draws are checked against the dense precision-matrix formulas; the
draws within Monte Carlo error. Plain NumPy: no PyMC, no PyTensor.
"""

from __future__ import annotations

import numpy as np

from pymc_sfp.core.linear_gaussian import posterior_draws, posterior_mean

RNG = np.random.default_rng(20261123)


def dense_posterior(H, Y, s, sigma):
    """Mean (k, K) and covariance (k, k) of the layer's weights from the precision matrix."""
    Ht = np.column_stack([H, np.ones(len(H))])
    precision = Ht.T @ Ht / sigma**2 + np.eye(Ht.shape[1]) / s**2
    covariance = np.linalg.inv(precision)
    return covariance @ Ht.T @ Y / sigma**2, covariance


def test_posterior_mean_and_draws_match_the_dense_conditional():
    H, Y = np.tanh(RNG.normal(size=(25, 3))), RNG.normal(size=(25, 2))
    s, sigma = 1.2, 0.5
    mean, covariance = dense_posterior(H, Y, s, sigma)
    n = 20_000
    batch = np.broadcast_to(H, (n, *H.shape))
    np.testing.assert_allclose(posterior_mean(H, Y, s, sigma), mean, rtol=1e-10)
    draws = posterior_draws(batch, Y, np.full(n, s), np.full(n, sigma), np.random.default_rng(1))
    assert draws.shape == (n, 4, 2)
    sd = np.sqrt(np.diag(covariance))[:, None]
    # Independent exact draws: each mean within 4 standard errors, and the covariance of each
    # output column's weights within 4 standard errors of a sample covariance (≈ √(2/n) relative
    # on the diagonal).
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(n))
    for column in range(2):
        sample_cov = np.cov(draws[:, :, column], rowvar=False)
        scale = np.sqrt(np.outer(np.diag(covariance), np.diag(covariance)))
        assert np.all(np.abs(sample_cov - covariance) < 4 * scale * np.sqrt(2 / n))
