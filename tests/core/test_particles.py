"""Tests for pymc_sfp.core.particles: resampling, ESS, SIR / SIPR steps and the (extended) Kalman
filter, on a linear-Gaussian state-space model where the Kalman filter is exact.

Plain NumPy: no PyMC, no PyTensor.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from pymc_sfp.core.particles import (
    RESAMPLING_SCHEMES,
    DegenerateWeightsError,
    KalmanState,
    effective_sample_size,
    hamiltonian_move,
    init_particles,
    kalman_filter,
    normalise_log_weights,
    particle_step,
    resample,
    weighted_moments,
)

WEIGHTS = np.array([0.31, 0.0, 0.05, 0.12, 0.2, 0.017, 0.083, 0.15, 0.07, 0.0])


def test_effective_sample_size_limits():
    assert effective_sample_size(np.zeros(50)) == pytest.approx(50)
    assert effective_sample_size(np.array([0.0, -np.inf, -np.inf])) == pytest.approx(1)
    # Two particles with weights 3/4 and 1/4: 1 / (9/16 + 1/16) = 1.6.
    assert effective_sample_size(np.log([3.0, 1.0])) == pytest.approx(1.6)


def test_huge_log_weights_keep_their_differences():
    """At log-weights of 1e15 and more, ``w - logsumexp(w)`` rounds the differences away."""
    for offset in (-1e17, -1e15, 1e16):
        log_weights, log_norm = normalise_log_weights(offset + np.array([0.0, 0.0, -50.0]))
        np.testing.assert_allclose(np.exp(log_weights), [0.5, 0.5, 0.0], atol=1e-15)
        assert log_norm == offset + np.log(2.0)
        assert effective_sample_size(np.full(200, offset)) == pytest.approx(200)


def test_a_far_outlier_does_not_round_the_previous_weights_away():
    """Log-likelihoods of about -1e15 plus previous log-weights of order 1: the update must be
    the one of the log-likelihoods' differences, as if they were shifted to 0."""
    previous = init_particles(np.zeros((4, 1)))._replace(log_weights=np.log([0.4, 0.3, 0.2, 0.1]))
    steps = []
    for offset in (0.0, -1e15):
        steps.append(
            particle_step(
                previous,
                lambda p, offset=offset: offset + np.array([0.0, -1.0, 0.0, -2.0]),
                np.random.default_rng(0),
                ess_threshold=0.0,
            )
        )
    np.testing.assert_allclose(steps[1][0].log_weights, steps[0][0].log_weights, rtol=1e-14)
    assert steps[1][1].log_evidence == pytest.approx(steps[0][1].log_evidence - 1e15, rel=1e-15)
    assert 1.0 <= steps[1][1].ess <= 4.0


def test_normalise_refuses_weights_without_mass():
    with pytest.raises(FloatingPointError, match="0 of 3 log-weights are finite"):
        normalise_log_weights(np.full(3, -np.inf))
    with pytest.raises(FloatingPointError):
        normalise_log_weights(np.array([0.0, np.nan]))


@pytest.mark.parametrize("scheme", RESAMPLING_SCHEMES)
def test_resampling_preserves_expected_counts(scheme):
    rng = np.random.default_rng(11)
    with np.errstate(divide="ignore"):
        log_weights = np.log(WEIGHTS)
    size, reps = 40, 4000
    counts = np.array(
        [np.bincount(resample(log_weights, rng, scheme, size), minlength=10) for _ in range(reps)]
    )
    assert np.all(counts.sum(axis=1) == size)
    assert np.all(counts[:, WEIGHTS == 0] == 0)
    # The mean of `reps` independent resamplings estimates E[count_i] = size · W_i with standard
    # error sd_i / √reps; 4 standard errors (plus rounding for schemes whose count is fixed).
    se = counts.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(counts.mean(axis=0) - size * WEIGHTS) <= 4 * se + 1e-12)
    expected = size * WEIGHTS
    if scheme == "systematic":
        assert np.all((counts >= np.floor(expected)) & (counts <= np.ceil(expected)))
    if scheme == "residual":
        assert np.all(counts >= np.floor(expected))


def test_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="resampling scheme must be one of"):
        resample(np.zeros(3), np.random.default_rng(0), "stratified-ish")


# A linear-Gaussian state-space model: y_k = x_k · w_k + v_k, w_k = w_k-1 + d_k.
D, T, Q_SD, R_SD = 2, 25, 0.05, 0.5


def linear_problem(seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, D))
    w = rng.normal(size=D) + np.cumsum(Q_SD * rng.normal(size=(T, D)), axis=0)
    y = np.sum(X * w, axis=1) + R_SD * rng.normal(size=T)
    return X, y


def test_kalman_filter_matches_the_joint_gaussian():
    """The filter's last mean, covariance and total log evidence equal Gaussian conditioning on
    the joint density of (w_T, y_1..T): Cov(w_j, w_k) = P0 + min(j, k) Q (1-based steps)."""
    X, y = linear_problem()
    P0 = np.eye(D)
    means, covs, log_evidence = kalman_filter(y, X, KalmanState(np.zeros(D), P0), Q_SD**2, R_SD**2)
    steps = np.arange(1, T + 1)
    cov_w = P0[None, None] + np.minimum.outer(steps, steps)[..., None, None] * Q_SD**2 * np.eye(D)
    cov_y = np.einsum("jd,jkde,ke->jk", X, cov_w, X) + R_SD**2 * np.eye(T)
    cov_wy = np.einsum("kde,ke->dk", cov_w[-1], X)  # Cov(w_T, y_k)
    gain = np.linalg.solve(cov_y, cov_wy.T).T
    np.testing.assert_allclose(means[-1], gain @ y, rtol=1e-9)
    np.testing.assert_allclose(covs[-1], cov_w[-1, -1] - gain @ cov_wy.T, rtol=1e-9, atol=1e-12)
    assert log_evidence.sum() == pytest.approx(
        multivariate_normal(np.zeros(T), cov_y).logpdf(y), rel=1e-10
    )


def run_filter(X, y, threshold, seed, particles=2000):
    rng = np.random.default_rng(seed)
    state = init_particles(rng.normal(size=(particles, D)))
    log_evidence, n_resampled = 0.0, 0
    for x_k, y_k in zip(X, y, strict=True):

        def log_likelihood(w, x_k=x_k, y_k=y_k):
            return -0.5 * ((y_k - w @ x_k) / R_SD) ** 2 - np.log(R_SD * np.sqrt(2 * np.pi))

        state, info = particle_step(
            state, log_likelihood, rng, process_sd=Q_SD, ess_threshold=threshold
        )
        log_evidence += info.log_evidence
        n_resampled += info.resampled
    mean, sd = weighted_moments(state)
    return mean, sd**2, log_evidence, n_resampled


@pytest.mark.parametrize(("threshold", "name"), [(1.0, "SIR"), (0.5, "SIPR")])
def test_particle_filters_agree_with_kalman(threshold, name):
    X, y = linear_problem()
    means, covs, log_evidence = kalman_filter(
        y, X, KalmanState(np.zeros(D), np.eye(D)), Q_SD**2, R_SD**2
    )
    runs = [run_filter(X, y, threshold, seed) for seed in range(20)]
    mean = np.array([r[0] for r in runs])
    var = np.array([r[1] for r in runs])
    log_z = np.array([r[2] for r in runs])
    resampled = np.array([r[3] for r in runs])
    if name == "SIR":
        assert np.all(resampled == T)
    else:
        assert np.all((resampled > 0) & (resampled < T))
    # Independent runs: each estimate's average over R = 20 runs has standard error sd / √R
    # (sd across runs). The self-normalised estimators' bias is O(1/S) with S = 2000 particles, a
    # fraction of that standard error (≈ sd_post / √(S R) · inflation); 4 standard errors.
    R = len(runs)
    truth_var = np.diag(covs[-1])
    for estimates, truth in [(mean, means[-1]), (var, truth_var)]:
        se = estimates.std(axis=0, ddof=1) / np.sqrt(R)
        assert np.all(np.abs(estimates.mean(axis=0) - truth) < 4 * se), name
        # Power: the test resolves errors of a few percent of the posterior sd / variance.
        assert np.all(se < 0.05 * np.sqrt(truth_var)), name
    # The evidence estimate Ẑ is unbiased, so E[log Ẑ] ≈ log Z − Var(log Ẑ) / 2 (delta method);
    # compare the bias-corrected mean within 4 standard errors.
    se = log_z.std(ddof=1) / np.sqrt(R)
    corrected = log_z.mean() + 0.5 * log_z.var(ddof=1)
    assert abs(corrected - log_evidence.sum()) < 4 * se
    assert se < 0.05


def test_all_minus_inf_log_weights_raise_a_recoverable_error():
    rng = np.random.default_rng(0)
    state = init_particles(rng.normal(size=(50, D)))
    with pytest.raises(DegenerateWeightsError, match="every particle has zero likelihood") as err:
        particle_step(state, lambda w: np.full(len(w), -np.inf), rng, process_sd=0.1)
    assert err.value.state is state
    # The state is intact: the filter goes on with the next observation.
    new_state, info = particle_step(state, lambda w: -0.5 * np.sum(w**2, axis=1), rng)
    assert np.isfinite(info.log_evidence) and new_state.particles.shape == (50, D)


def test_nan_likelihoods_get_zero_weight():
    rng = np.random.default_rng(1)
    state = init_particles(np.arange(4.0)[:, None])
    values = np.array([0.0, np.nan, 0.0, np.nan])
    new, info = particle_step(state, lambda w: values, rng, ess_threshold=0.0)
    np.testing.assert_allclose(np.exp(new.log_weights), [0.5, 0.0, 0.5, 0.0])
    assert info.ess == pytest.approx(2.0) and not info.resampled


def correlated_gaussian():
    covariance = np.array([[4.0, 1.9], [1.9, 1.0]])  # correlation 0.95, scales 2 and 1
    precision = np.linalg.inv(covariance)

    def log_density_grad(x):
        g = -x @ precision
        return 0.5 * np.sum(x * g, axis=1), g

    return covariance, log_density_grad


def test_hamiltonian_move_leaves_the_target_invariant_and_mixes():
    covariance, log_density_grad = correlated_gaussian()
    rng = np.random.default_rng(11)
    S = 4000
    start = rng.multivariate_normal([0.0, 0.0], covariance, size=S)
    moved, info = hamiltonian_move(
        start,
        log_density_grad,
        rng,
        step_size=0.3,
        n_leapfrog=10,
        n_transitions=3,
        alpha=0.8,
        inverse_mass=np.var(start, axis=0),
    )
    assert info.n_divergent == 0 and 0.3 < info.acceptance < 1.0
    # Invariance: S independent particles, each moved by its own chain, are still S independent
    # draws of the target. Standard errors: sd/√S for a mean, sd²·√(2/S) for a variance.
    sd = np.sqrt(np.diag(covariance))
    assert np.all(np.abs(moved.mean(axis=0)) < 4 * sd / np.sqrt(S))
    assert np.all(np.abs(moved.var(axis=0) - sd**2) < 4 * sd**2 * np.sqrt(2 / S))
    assert abs(np.corrcoef(moved.T)[0, 1] - 0.95) < 4 * (1 - 0.95**2) / np.sqrt(S)
    # And the particles did move: after three transitions a particle is far less correlated
    # with where it started than a kernel that stays put (correlation 1).
    assert np.corrcoef(start[:, 0], moved[:, 0])[0, 1] < 0.6


def test_hamiltonian_move_pulls_a_wrong_cloud_to_the_target():
    covariance, log_density_grad = correlated_gaussian()
    rng = np.random.default_rng(12)
    S = 2000
    start = rng.normal(size=(S, 2)) * 0.1 + [3.0, -2.0]
    moved, _ = hamiltonian_move(
        start,
        log_density_grad,
        rng,
        step_size=0.2,
        n_leapfrog=10,
        n_transitions=40,
        alpha=0.0,
        inverse_mass=np.ones(2),
    )
    sd = np.sqrt(np.diag(covariance))
    # From a start 3 sd away, 40 transitions of 2 time units reach the target up to Monte Carlo
    # error (a biased kernel, or one that does not move, misses by sd-sized amounts).
    assert np.all(np.abs(moved.mean(axis=0)) < 5 * sd / np.sqrt(S))
    assert np.all(np.abs(moved.std(axis=0) / sd - 1) < 0.1)


def test_hamiltonian_move_counts_divergences_and_keeps_the_particles():
    _, log_density_grad = correlated_gaussian()
    rng = np.random.default_rng(13)
    start = rng.normal(size=(50, 2))
    moved, info = hamiltonian_move(
        start,
        log_density_grad,
        rng,
        step_size=50.0,
        n_leapfrog=20,
        n_transitions=2,
        alpha=0.8,
        inverse_mass=np.ones(2),
    )
    assert info.n_divergent == 100 and info.acceptance == 0.0
    np.testing.assert_array_equal(moved, start)


def test_hamiltonian_move_is_exact_at_a_hard_wall():
    # N(0, 1) cut at x > 0.5 (a -inf region): trajectories that cross the wall are rejected with
    # the momentum reversed. Redrawing the momentum after them instead (with persistent momentum,
    # alpha = 0.9) pushed an exact cloud away from the wall.
    from scipy import stats

    def log_density_grad(x):
        logp = -0.5 * x[:, 0] ** 2
        return np.where(x[:, 0] > 0.5, logp, -np.inf), -x

    rng = np.random.default_rng(14)
    S = 4000
    start = stats.truncnorm.rvs(0.5, np.inf, size=(S, 1), random_state=rng)
    moved, info = hamiltonian_move(
        start,
        log_density_grad,
        rng,
        step_size=0.2,
        n_leapfrog=3,
        n_transitions=50,
        alpha=0.9,
        inverse_mass=np.ones(1),
    )
    assert info.n_divergent > 0  # the wall was met (redrawing the momentum: 25 SE too low)
    mean, sd = stats.truncnorm.stats(0.5, np.inf, moments="mv")
    assert moved.min() > 0.5
    assert abs(moved.mean() - mean) < 4 * np.sqrt(sd / S)
