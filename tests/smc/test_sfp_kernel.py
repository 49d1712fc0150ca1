"""SFPKernel: SFP sweeps as the mutation kernel of ``pm.sample_smc``.

Checked against exact answers on targets where PyMC's kernels need care: two modes 30 sd apart
(a 110-nat barrier), an egg-box of 3^10 modes on the coordinate grid, and a discontinuous
likelihood.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytest
from scipy import stats

import pymc_sfp
from pymc_sfp.compile import (
    compile_batched_local_lines,
    compile_batched_prior_likelihood,
    step_graph,
)

DRAWS = 1000


def sample_sfp_smc(**kwargs):
    """``pm.sample_smc`` with ``SFPKernel``, quietly (no progress bar, no convergence checks)."""
    return pm.sample_smc(
        kernel=pymc_sfp.SFPKernel, progressbar=False, compute_convergence_checks=False, **kwargs
    )


def two_modes() -> pm.Model:
    """0.3 N(-15, 1) + 0.7 N(15, 1) as a likelihood, under a N(0, 20²) prior."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 20.0)
        per_mode = pm.math.stack(
            [
                np.log(0.3) + pm.logp(pm.Normal.dist(-15.0, 1.0), x),
                np.log(0.7) + pm.logp(pm.Normal.dist(15.0, 1.0), x),
            ]
        )
        pm.Potential("mixture", pm.math.logsumexp(per_mode))
    return model


def test_two_far_modes_weights_moments_and_evidence():
    with two_modes():
        idata = sample_sfp_smc(
            draws=DRAWS,
            chains=2,
            cores=1,
            random_seed=3,
        )
    x = idata["posterior"]["x"].values
    # The exact posterior: 0.3 / 0.7 of N(∓15, 1) up to the prior's tilt (a shift of 15/400 of
    # an sd). Standard errors from DRAWS draws, doubled in variance for the duplicates that
    # resampling leaves (the kernel's acceptance is > 0.9, so a stage's particles are nearly
    # independent draws of its conditional). A chain stuck in one mode misses by 0.3 or 0.7.
    weight_se = np.sqrt(2 * 0.21 / DRAWS)
    assert np.all(np.abs((x > 0).mean(axis=1) - 0.7) < 4 * weight_se)
    upper = x[x > 0]
    mean_se = np.sqrt(2 / len(upper))
    assert abs(upper.mean() - 15 * 400 / 401) < 4 * mean_se
    assert abs(upper.std() - 1.0) < 4 * np.sqrt(2 * 0.5 / len(upper))
    # Evidence: ∫ N(x; 0, 400) [0.3 N(x; -15, 1) + 0.7 N(x; 15, 1)] dx = N(15; 0, 401). SMC's
    # estimate has an sd of about √(stages / ESS) ≈ √(3 / 500) ≈ 0.08 here: 3 sd per chain.
    stats_ = idata["sample_stats"]
    log_evidence = np.array([row[-1] for row in stats_["log_marginal_likelihood"].values])
    exact = stats.norm.logpdf(15.0, 0.0, np.sqrt(401.0))
    assert np.all(np.abs(log_evidence - exact) < 0.25)
    accept = np.array([row[-1] for row in stats_["mean_accept_rate"].values], dtype=float)
    assert np.all(accept > 0.5)


@pytest.mark.slow
def test_egg_box_whose_every_conditional_has_three_modes():
    """x ~ U(−10, 10)^10 and, per coordinate, 0.2 N(−6, ½²) + 0.2 N(0, ½²) + 0.6 N(6, ½²):
    59049 modes 12 sd apart, each reachable from another along one coordinate. The share of
    coordinates in the upper mode must be within 4 standard errors (of 10 × 2 DRAWS draws,
    doubled in variance for resampling's duplicates), and the log evidence within 3 of its
    standard deviations, about √(stages / ESS) with an ESS of half the particles. PyMC's IMH and
    MH kernels miss here (benchmark, 4 chains: worst chain's share off by 0.23 and 0.11, log
    evidence by −2.9 and −1.8)."""
    dim = 10
    weights, means, sd = np.array([0.2, 0.2, 0.6]), np.array([-6.0, 0.0, 6.0]), 0.5
    with pm.Model():
        x = pm.Uniform("x", -10.0, 10.0, shape=dim)
        per_mode = np.log(weights) + pm.logp(pm.Normal.dist(means, sd), x[:, None])
        pm.Potential("mixture", pm.math.logsumexp(per_mode, axis=1).sum())
        idata = sample_sfp_smc(
            draws=2 * DRAWS,
            chains=1,
            random_seed=11,
        )
    upper = float(weights @ stats.norm.sf(3.0, means, sd))  # the box cuts < 1e-20 of the mass
    share = (idata["posterior"]["x"].values > 3.0).mean()
    assert abs(share - upper) < 4 * np.sqrt(2 * upper * (1 - upper) / (dim * 2 * DRAWS))
    # Per stage, NaN (or None) before the last stage's estimate.
    per_stage = np.array(
        [np.nan if v is None else float(v) for v in np.ravel(idata["sample_stats"]["beta"])]
    )
    stages = int(np.count_nonzero(np.isfinite(per_stage)))
    estimates = np.array(
        [
            np.nan if v is None else float(v)
            for v in np.ravel(idata["sample_stats"]["log_marginal_likelihood"])
        ]
    )
    log_evidence = estimates[np.isfinite(estimates)][-1]
    assert abs(log_evidence - dim * np.log(1 / 20.0)) < 3 * np.sqrt(stages / DRAWS)


def test_discontinuous_likelihood_on_a_bounded_prior():
    """Density ∝ 1 on (1, 3) and e⁻² on (-1, 1): P(x > 1) = 1 / (1 + e⁻²)."""
    with pm.Model():
        x = pm.Uniform("x", -1.0, 3.0)
        pm.Potential("step", pm.math.switch(x > 1.0, 0.0, -2.0))
        idata = sample_sfp_smc(
            draws=DRAWS,
            chains=1,
            L=20,
            random_seed=5,
        )
    p = 1 / (1 + np.exp(-2.0))
    upper = (idata["posterior"]["x"].values > 1.0).mean()
    assert abs(upper - p) < 4 * np.sqrt(2 * p * (1 - p) / DRAWS)
    assert idata["sample_stats"].attrs["L"] == 20


def test_hierarchical_gaussian_whose_lines_read_other_coordinates():
    """mu ~ N(0, 1), theta_j ~ N(mu, 1), y_j ~ N(theta_j, 1): the kernel evaluates only the
    terms that read a coordinate, and theta's read mu from each particle, so each particle's
    line is its own. The joint posterior is Gaussian: every mean and sd within 4 standard
    errors (variance doubled for resampling's duplicates, as above)."""
    y = np.array([1.5, -0.5, 2.5])
    precision = np.diag([1.0 + len(y), 2.0, 2.0, 2.0])
    precision[0, 1:] = precision[1:, 0] = -1.0
    covariance = np.linalg.inv(precision)
    mean = covariance @ np.concatenate([[0.0], y])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        theta = pm.Normal("theta", mu, 1.0, shape=3)
        pm.Normal("y", theta, 1.0, observed=y)
        idata = sample_sfp_smc(
            draws=2 * DRAWS,
            chains=1,
            random_seed=2,
        )
    graph = step_graph(model, model.value_vars)
    lines = compile_batched_local_lines(graph, compile_batched_prior_likelihood(graph))
    assert lines is not None and "pairs one element each" in lines[1]  # the local path ran
    draws = np.column_stack(
        [idata["posterior"]["mu"].values.ravel(), idata["posterior"]["theta"].values[0]]
    )
    sd = np.sqrt(np.diag(covariance))
    n = len(draws)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd * np.sqrt(2 / n))
    assert np.all(np.abs(draws.std(axis=0) - sd) < 4 * sd * np.sqrt(2 * 0.5 / n))
    # The Metropolis test keeps even a wrong line exact, so it shows in the acceptance: each
    # particle's own conditional is accepted 0.997 of the time here, particle 0's for all 0.44.
    accept = [a for a in np.ravel(idata["sample_stats"]["mean_accept_rate"]) if a is not None]
    assert np.all(np.array(accept, dtype=float) > 0.9)


def test_float32_model():
    """floatX float32: mu ~ N(0, 3²), y_i ~ N(mu, 1); the posterior mean within 4 standard
    errors (the variance doubled for resampling's duplicates, as above)."""
    y = np.array([0.9, 1.6, 0.4, 1.3, 1.1])
    precision = len(y) + 3.0**-2
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model():
            mu = pm.Normal("mu", 0.0, 3.0)
            pm.Normal("y", mu, 1.0, observed=y)
            idata = sample_sfp_smc(
                draws=DRAWS,
                chains=1,
                L=20,
                random_seed=4,
            )
    draws = idata["posterior"]["mu"].values.ravel()
    assert np.all(np.isfinite(draws))
    sd = precision**-0.5
    assert abs(draws.mean() - y.sum() / precision) < 4 * sd * np.sqrt(2 / DRAWS)


def test_discrete_variable_is_rounded_as_pymc_reports_it():
    """k ~ Poisson(3), mu ~ N(0, 5²), y_i ~ N(mu + k, 1): PyMC's SMC rounds a discrete
    variable's particles, so the kernel must evaluate them rounded too (truncated, a particle
    at -0.7 was evaluated as k = 0 and reported as k = -1). Each P(k) within 4 standard errors
    (variance doubled for resampling's duplicates)."""
    y = np.random.default_rng(0).normal(1.0, 1.0, 20)
    ks = np.arange(40)
    marginal = stats.multivariate_normal(np.zeros(20), 25.0 + np.eye(20))
    log_post = stats.poisson(3.0).logpmf(ks) + [marginal.logpdf(y - k) for k in ks]
    exact = np.exp(log_post - log_post.max())
    exact /= exact.sum()
    with pm.Model():
        k = pm.Poisson("k", 3.0)
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu + k, 1.0, observed=y)
        idata = sample_sfp_smc(
            draws=2 * DRAWS,
            chains=1,
            L=20,
            random_seed=1,
        )
    draws = idata["posterior"]["k"].values.ravel()
    assert draws.min() >= 0
    frequencies = np.bincount(draws, minlength=len(ks))[: len(ks)] / draws.size
    se = np.sqrt(2 * exact * (1 - exact) / draws.size)
    assert np.all(np.abs(frequencies - exact) < 4 * se + 1e-12), (frequencies[:8], exact[:8])


def test_hard_constraint_gives_the_truncated_posterior():
    """N(0, 2²) restricted to x > 1 by a -inf potential: a truncated normal, α = 0.5."""
    with pm.Model():
        x = pm.Normal("x", 0.0, 2.0)
        pm.Potential("bound", pm.math.switch(x > 1.0, 0.0, -np.inf))
        idata = sample_sfp_smc(
            draws=DRAWS,
            chains=1,
            random_seed=9,
        )
    draws = idata["posterior"]["x"].values.ravel()
    assert draws.min() > 1.0
    alpha = 0.5
    hazard = stats.norm.pdf(alpha) / stats.norm.sf(alpha)
    mean = 2.0 * hazard
    sd = 2.0 * np.sqrt(1 + alpha * hazard - hazard**2)
    # 4 standard errors, the variance doubled for resampling's duplicates (as above).
    assert abs(draws.mean() - mean) < 4 * sd * np.sqrt(2 / DRAWS)
    assert abs(draws.std() - sd) < 4 * sd * np.sqrt(2 * 0.5 / DRAWS)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"L": 2}, "L"),
        ({"n_sweeps": 0}, "n_sweeps"),
        ({"box_margin": 0.0}, "box_margin"),
        ({"box_margin": np.inf}, "box_margin"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with two_modes(), pytest.raises(ValueError, match=match):
        sample_sfp_smc(draws=20, chains=1, **kwargs)
