"""The noisy perceptron distribution (Opper & Winther 1996, Eq. 4): log-probability and draws."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_sfp.nn import NoisyPerceptron


def test_logp_is_eq_4_normalised_over_the_two_labels():
    field = np.array([-2.0, -0.1, 0.3, 5.0])
    for beta in (0.5, 3.0):
        dist = NoisyPerceptron.dist(field=field, beta=beta)
        up = pm.logp(dist, np.ones(4, dtype=int)).eval()
        down = pm.logp(dist, -np.ones(4, dtype=int)).eval()
        np.testing.assert_allclose(np.exp(up) + np.exp(down), 1.0, atol=1e-12)
        # The label against the field's sign costs β: e^(−β) / (1 + e^(−β)).
        flip = np.exp(-beta) / (1.0 + np.exp(-beta))
        np.testing.assert_allclose(np.exp(up), np.where(field > 0, 1.0 - flip, flip))
    clean = NoisyPerceptron.dist(field=field, beta=np.inf)
    np.testing.assert_array_equal(pm.logp(clean, np.sign(field).astype(int)).eval(), np.zeros(4))
    assert np.all(np.isneginf(pm.logp(clean, -np.sign(field).astype(int)).eval()))


def test_labels_other_than_plus_minus_one_have_zero_probability_and_beta_is_checked():
    dist = NoisyPerceptron.dist(field=np.ones(2), beta=1.0)
    assert np.all(np.isneginf(pm.logp(dist, np.array([0, 2])).eval()))
    with pytest.raises(pm.logprob.utils.ParameterValueError, match="beta > 0"):
        pm.logp(NoisyPerceptron.dist(field=np.ones(2), beta=-1.0), np.ones(2, dtype=int)).eval()


def test_draws_flip_the_sign_at_the_noise_rate():
    beta, n = 1.0, 20_000
    field = np.where(np.arange(n) % 2 == 0, 1.5, -0.5)
    draws = pm.draw(NoisyPerceptron.dist(field=field, beta=beta), random_seed=1)
    assert set(np.unique(draws)) == {-1, 1}
    flipped = np.mean(draws != np.sign(field))
    rate = 1.0 / (1.0 + np.exp(beta))
    # Binomial(n, rate): five standard errors.
    assert abs(flipped - rate) < 5.0 * np.sqrt(rate * (1.0 - rate) / n)
    clean = pm.draw(NoisyPerceptron.dist(field=field, beta=np.inf), random_seed=1)
    np.testing.assert_array_equal(clean, np.sign(field))
