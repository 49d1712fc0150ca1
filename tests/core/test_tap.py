"""TAP mean-field / adaptive TAP (EP) numerics against exact and long-run references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pymc_sfp.core.tap import (
    GROWTH_WINDOW,
    TAPConvergenceWarning,
    TAPResult,
    bayes_optimal_learning_curve,
    log_partition,
    predict,
    select_hyperparameters,
    tap_fit,
)


def correlated_inputs(rng, m, n, rho):
    """Equicorrelated standard-normal inputs (correlation ``rho`` between components)."""
    C = rho * np.ones((n, n)) + (1.0 - rho) * np.eye(n)
    # Cholesky, not the default SVD: C has a repeated eigenvalue, whose eigenvectors (and so the
    # draws) the SVD leaves to the LAPACK build; the Cholesky factor is unique.
    return rng.multivariate_normal(np.zeros(n), C, size=m, method="cholesky")


def probit_labels(rng, X, w):
    return np.where(rng.random(len(X)) < special.ndtr(X @ w / np.sqrt(X.shape[1])), 1.0, -1.0)


def importance_reference(X, y, likelihood, prior_var, fit, draws, rng, beta=np.nan):
    """Posterior mean, variances and ESS by self-normalised importance sampling.

    The proposal is a Student-t (5 degrees of freedom) around the fit with 1.5 times its
    covariance: heavier-tailed than the posterior, so the estimate is consistent whatever the fit
    (the fit only makes it efficient).
    """
    A = X / np.sqrt(X.shape[1])
    proposal = stats.multivariate_t(fit.mean, 1.5 * fit.cov, df=5, seed=rng)
    W = proposal.rvs(draws)
    H = (W @ A.T) * y
    if likelihood == "probit":
        loglik = special.log_ndtr(H).sum(axis=1)
    else:  # the noisy perceptron, Eq. 4 (up to a constant)
        loglik = np.where(H > 0, 0.0, -beta).sum(axis=1)
    log_w = loglik - 0.5 * np.sum(W**2, axis=1) / prior_var - proposal.logpdf(W)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    mean = weights @ W
    return mean, weights @ (W - mean) ** 2, 1.0 / np.sum(weights**2)


# --- Gaussian likelihood: exact -----------------------------------------------------------------


@pytest.fixture
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    y = X @ rng.normal(size=5) * 1.5 / np.sqrt(5) + 0.3 * rng.normal(size=30)
    return X, y


def conjugate(X, y, prior_var, noise_var):
    A = X / np.sqrt(X.shape[1])
    cov = np.linalg.inv(np.eye(X.shape[1]) / prior_var + A.T @ A / noise_var)
    K = prior_var * A @ A.T + noise_var * np.eye(len(y))
    return cov @ A.T @ y / noise_var, cov, K


def test_gaussian_likelihood_is_the_conjugate_posterior(regression):
    X, y = regression
    result = tap_fit(X, y, "gaussian", prior_var=2.0, noise_var=0.09, tol=1e-12)
    mean, cov, K = conjugate(X, y, 2.0, 0.09)
    assert result.converged
    np.testing.assert_allclose(result.mean, mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result.cov, cov, rtol=0, atol=1e-8)
    # The free energy is the exact log marginal likelihood ...
    exact = stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    assert result.log_evidence == pytest.approx(exact, abs=1e-8)
    # ... and the cavities are the exact leave-one-out predictives (Sundararajan & Keerthi).
    K_inv = np.linalg.inv(K)
    loo_var = 1.0 / np.diag(K_inv)
    np.testing.assert_allclose(result.state.cav_mean, y - K_inv @ y * loo_var, atol=1e-8)
    np.testing.assert_allclose(result.state.cav_var + 0.09, loo_var, atol=1e-8)
    pred = predict(result, X[:4])
    np.testing.assert_allclose(pred.field_mean, X[:4] @ mean / np.sqrt(5), atol=1e-8)
    assert pred.prob is None


@pytest.mark.parametrize(
    ("likelihood", "options"),
    [
        ("gaussian", {"noise_var": 0.09}),
        ("probit", {}),
        ("logistic", {}),
        ("perceptron", {"beta": 2.0}),
    ],
)
def test_rows_of_zeros_carry_no_information(regression, likelihood, options):
    # A row of zeros has the field 0 whatever the weights: q(w) is the fit without it, and the
    # evidence gains ln P(y | h = 0), its leave-one-out predictive (½ for the classifiers).
    X, y = regression
    X[[3, 17]] = 0.0
    if likelihood != "gaussian":
        y = np.sign(y)
    result = tap_fit(X, y, likelihood, tol=1e-12, **options)
    without = tap_fit(np.delete(X, [3, 17], 0), np.delete(y, [3, 17]), likelihood, **options)
    assert result.converged
    np.testing.assert_allclose(result.mean, without.mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result.cov, without.cov, rtol=0, atol=1e-8)
    for values in result.state:
        np.testing.assert_array_equal(values[[3, 17]], 0.0)
    at_zero = stats.norm(0.0, 0.3).pdf(y[[3, 17]]) if likelihood == "gaussian" else np.full(2, 0.5)
    np.testing.assert_allclose(result.loo_predictive[[3, 17]], at_zero, rtol=1e-12)
    gain = result.log_evidence - without.log_evidence
    assert gain == pytest.approx(np.sum(np.log(at_zero)), abs=1e-8)
    if likelihood == "gaussian":
        _, _, K = conjugate(X, y, 1.0, 0.09)
        exact = stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
        assert result.log_evidence == pytest.approx(exact, abs=1e-8)


def test_inputs_all_zero_are_refused():
    with pytest.raises(ValueError, match="X: every row is zero"):
        tap_fit(np.zeros((5, 2)), np.ones(5), "probit")


# --- correlated inputs: adaptive TAP against importance sampling --------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_adaptive_probit_on_correlated_inputs_matches_reference_naive_is_worse(seed):
    rng = np.random.default_rng(seed)
    X = correlated_inputs(rng, 60, 20, 0.9)
    y = probit_labels(rng, X, rng.normal(size=20))
    adaptive = tap_fit(X, y, "probit")
    naive = tap_fit(X, y, "probit", variant="naive", damping=0.1, max_iter=3000)
    assert adaptive.converged and naive.converged
    mean, var, ess = importance_reference(X, y, "probit", 1.0, adaptive, 100_000, rng)
    assert ess > 20_000
    sd = np.sqrt(var)
    # Five Monte Carlo standard errors (≈ sd / √ESS per component) bound the adaptive error.
    bound = 5.0 / np.sqrt(ess)
    err_adaptive = np.max(np.abs(adaptive.mean - mean) / sd)
    err_naive = np.max(np.abs(naive.mean - mean) / sd)
    assert err_adaptive < bound
    assert np.corrcoef(adaptive.mean, mean)[0, 1] > 0.99
    np.testing.assert_allclose(adaptive.var, var, rtol=0.10)
    # The naive cavity variance Λ = 1 − q assumes uncorrelated inputs: visibly worse here.
    assert err_naive > bound and err_naive > 3.0 * err_adaptive


def test_noisy_perceptron_matches_reference():
    rng = np.random.default_rng(5)
    # Small N: the step likelihood's posterior is far from Gaussian in high dimension, where
    # importance sampling would need far more draws.
    X = correlated_inputs(rng, 30, 6, 0.5)
    y = np.sign(X @ rng.normal(size=6))
    flip = rng.random(30) < np.exp(-1.0) / (1.0 + np.exp(-1.0))
    y[flip] *= -1.0
    fit = tap_fit(X, y, "perceptron", beta=1.0)
    assert fit.converged
    mean, var, ess = importance_reference(X, y, "perceptron", 1.0, fit, 100_000, rng, beta=1.0)
    assert ess > 10_000
    # EP is not exact for the step likelihood: the criteria, correlation and variances.
    assert np.corrcoef(fit.mean, mean)[0, 1] > 0.99
    np.testing.assert_allclose(fit.var, var, rtol=0.10)


# --- leave-one-out, prediction, evidence ----------------------------------------------------


def loo_against_refits(m: int, seed: int = 2) -> tuple[TAPResult, np.ndarray, np.ndarray]:
    """The full fit on ``m`` probit examples, the leave-one-out predictive of each example's label
    from brute-force refits without it, and the full fit's own predictive of it (nothing left
    out)."""
    rng = np.random.default_rng(seed)
    X = correlated_inputs(rng, m, 4, 0.3)
    y = probit_labels(rng, X, 2.0 * rng.normal(size=4))
    full = tap_fit(X, y, "probit", prior_var=4.0)
    refit_prob = np.empty(m)
    for mu in range(m):
        keep = np.arange(m) != mu
        refit = tap_fit(X[keep], y[keep], "probit", prior_var=4.0)
        p_plus = predict(refit, X[mu : mu + 1]).prob[0]
        refit_prob[mu] = p_plus if y[mu] > 0 else 1.0 - p_plus
    p_plus = predict(full, X).prob
    return full, refit_prob, np.where(y > 0, p_plus, 1.0 - p_plus)


def test_loo_agrees_with_brute_force_refits_to_second_order():
    """The cavity estimate (NOTES §3: the full mean minus the Onsager term) leaves example μ out
    without refitting. It neglects only how the other examples' sites react to μ's removal, so
    its error against refits shrinks like 1/m² on average, while the full fit's own predictive,
    which keeps μ in, is off by μ's own O(1/m) pull. From m = 25 to 100 the cavity's mean error
    must fall at least 8-fold (1/m² gives 16, 1/m gives 4), the naive one's by less, and the
    cavity be the closer by a wide margin at each size. (Measured: 0.0035 → 0.00024, against
    0.058 → 0.013 for the naive predictive.)"""
    errors = {}
    for m in (25, 100):
        full, refit_prob, naive = loo_against_refits(m)
        errors[m] = (
            np.mean(np.abs(full.loo_predictive - refit_prob)),
            np.mean(np.abs(naive - refit_prob)),
        )
        assert errors[m][0] < errors[m][1] / 5, (m, errors[m])
        assert full.loo_error == pytest.approx(np.mean(refit_prob < 0.5))
    assert errors[25][0] / errors[100][0] >= 8.0, errors
    assert errors[25][1] / errors[100][1] < 8.0, errors


def test_predictive_probabilities_normalised_and_logistic_quadrature():
    rng = np.random.default_rng(4)
    M, V = rng.normal(size=6) * 3.0, rng.uniform(0.1, 20.0, size=6)
    for lik, kw in [("perceptron", {"beta": 0.5}), ("probit", {}), ("logistic", {})]:
        up, _, _ = log_partition(lik, np.ones(6), M, V, **kw)
        down, _, _ = log_partition(lik, -np.ones(6), M, V, **kw)
        np.testing.assert_allclose(np.exp(up) + np.exp(down), 1.0, atol=1e-12)
    # Logistic Gaussian average and its derivatives against dense numerical integration.
    log_z, d1, d2 = log_partition("logistic", np.ones(6), M, V)
    h = np.linspace(-60, 60, 200_001)
    for i in range(6):
        g = special.expit(h) * stats.norm.pdf(h, M[i], np.sqrt(V[i]))
        z = np.trapezoid(g, h)
        t_mean = np.trapezoid(h * g, h) / z
        t_var = np.trapezoid((h - t_mean) ** 2 * g, h) / z
        assert log_z[i] == pytest.approx(np.log(z), abs=1e-9)
        assert d1[i] == pytest.approx((t_mean - M[i]) / V[i], abs=1e-8)
        assert d2[i] == pytest.approx((t_var - V[i]) / V[i] ** 2, abs=1e-8)


def test_evidence_picks_the_true_prior_variance():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 10))
    y = probit_labels(rng, X, np.sqrt(4.0) * rng.normal(size=10))
    choice = select_hyperparameters(X, y, "probit", prior_vars=[0.25, 1.0, 4.0, 16.0, 64.0])
    assert choice.prior_var == 4.0
    assert np.isnan(choice.noise)
    assert choice.result.log_evidence == pytest.approx(np.nanmax(choice.log_evidence))


def test_evidence_picks_the_noise_variance(regression):
    X, y = regression
    choice = select_hyperparameters(
        X, y, "gaussian", prior_vars=[0.5, 2.0], noises=[0.01, 0.09, 0.81]
    )
    assert choice.noise == 0.09


def test_naive_tap_matches_adaptive_for_iid_inputs_at_large_n():
    # The paper's regime: i.i.d. inputs, N = 100; there both variants give the same weights.
    rng = np.random.default_rng(8)
    X = rng.normal(size=(150, 100))
    y = np.sign(X @ rng.normal(size=100))
    naive = tap_fit(X, y, "perceptron", beta=2.0, variant="naive")
    adaptive = tap_fit(X, y, "perceptron", beta=2.0)
    assert naive.converged and adaptive.converged
    assert np.corrcoef(naive.mean, adaptive.mean)[0, 1] > 0.99
    assert naive.state.cav_var[0] == pytest.approx(np.mean(adaptive.state.cav_var), rel=0.1)


# --- bad input ----------------------------------------------------------------------------------


def test_labels_zero_one_are_accepted():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(20, 3))
    y = np.sign(X[:, 0])
    a = tap_fit(X, y, "probit")
    b = tap_fit(X, (y + 1) / 2, "probit")
    np.testing.assert_allclose(a.mean, b.mean)


@pytest.mark.parametrize("labels", [[0.0, 2.0], [-1.0, 0.5]])
def test_labels_outside_the_two_codings_are_refused(labels):
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="labels for the probit likelihood"):
        tap_fit(X, np.resize(labels, 4), "probit")


def test_nan_in_inputs_is_refused():
    X = np.ones((4, 2))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X has NaN or infinite values in 1 row\(s\): \[2\]"):
        tap_fit(X, np.ones(4), "probit")


def test_bad_arguments_are_refused():
    X, y = np.ones((4, 2)), np.ones(4)
    with pytest.raises(ValueError, match="likelihood must be one of"):
        tap_fit(X, y, "cauchy")
    with pytest.raises(ValueError, match="variant"):
        tap_fit(X, y, "probit", variant="exact")
    with pytest.raises(ValueError, match="needs beta"):
        tap_fit(X, y, "perceptron")
    with pytest.raises(ValueError, match="noise_var"):
        tap_fit(X, y, "gaussian")
    with pytest.raises(ValueError, match="damping"):
        tap_fit(X, y, "probit", damping=0.0)
    with pytest.raises(
        ValueError, match=r"prior_var must be a scalar or one value per weight \(2\)"
    ):
        tap_fit(X, y, "probit", prior_var=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="beta is the perceptron's noise parameter; the probit"):
        tap_fit(X, y, "probit", beta=2.0)
    with pytest.raises(ValueError, match="noise_var is the gaussian likelihood's; the logistic"):
        tap_fit(X, y, "logistic", noise_var=1.0)
    # Settings of the wrong kind are named, not turned into 1 (True) or failed on deep inside.
    wrong_kind = [
        ({"max_iter": True}, "max_iter must be a positive integer"),
        ({"batch": True}, "batch must be a positive integer"),
        ({"damping": "0.5"}, "damping must be a real number"),
        ({"beta": "2"}, "beta must be a real number"),
    ]
    for setting, message in wrong_kind:
        with pytest.raises(TypeError, match=message):
            tap_fit(X, y, "perceptron", **({"beta": 2.0} | setting))
    for setting in ({"tol": np.inf}, {"max_iter": np.nan}, {"field_scale": 0.0}):
        with pytest.raises(ValueError, match=next(iter(setting))):
            tap_fit(X, y, "probit", **setting)


def test_non_convergence_warns_with_the_residual_history(regression):
    X, y = regression
    with pytest.warns(TAPConvergenceWarning, match="lower damping.*result.residuals"):
        result = tap_fit(X, np.sign(y), "probit", max_iter=3)
    assert not result.converged
    assert result.n_iter == 3 and len(result.residuals) == 3


@pytest.mark.parametrize("damping", [1.0, 0.5])
def test_divergence_warns_and_keeps_a_finite_iterate(regression, damping):
    # Naive TAP on a regression with m/N = 6 and little noise: the map diverges. At damping 0.5
    # its last finite iterate overflowed the Gaussian's sites and the fit raised scipy's
    # "array must not contain infs or NaNs".
    X, y = regression
    with pytest.warns(TAPConvergenceWarning, match="diverged"):
        result = tap_fit(X, y, "gaussian", noise_var=0.09, variant="naive", damping=damping)
    assert not result.converged and result.diverged
    assert np.isfinite(result.residuals).all()


def test_growing_residuals_stop_the_fit_at_that_stage():
    """Naive TAP of a noisy perceptron, undamped, at α = 2: the residuals settle at O(1) and
    never overflow, so every one of the 8 stages ran to max_iter (6090 iterations) before it
    warned. The growth of the residuals stops it within the stage where it began."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 20))
    y = np.sign(X @ rng.normal(size=20))
    with pytest.warns(
        TAPConvergenceWarning,
        match=r"naive TAP diverged: its residuals grew from .* in stage 3 of 8 .*later stages "
        r"not run.*variant='adaptive'",
    ):
        result = tap_fit(X, y, "perceptron", beta=2.0, variant="naive", damping=1.0)
    assert not result.converged
    assert result.diverged.startswith("its residuals grew")
    assert result.n_iter < 1000  # less than one stage's max_iter
    assert np.isfinite(result.residuals).all() and np.isfinite(result.mean).all()


def test_a_slowly_converging_fit_is_not_stopped():
    """Heavily damped naive TAP on correlated inputs takes hundreds of iterations per stage
    (more than the 100 after which growth is looked for); its falling residuals are left alone."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 20)) @ rng.normal(size=(20, 20)) * 2 / np.sqrt(20)
    y = np.sign(X @ rng.normal(size=20))
    result = tap_fit(X, y, "probit", variant="naive", damping=0.1)
    assert result.converged and not result.diverged
    assert result.n_iter > 8 * 2 * GROWTH_WINDOW  # 8 stages


# --- the large-N theory of Fig. 1 ---------------------------------------------------------------


def test_learning_curve_noise_free_limit_and_noisy_labels():
    # Noise-free Bayes-optimal learning: ε → 0.442/α for large α (Opper & Haussler 1991); the
    # correction at α = 50 is below 1 % of it.
    assert 50.0 * bayes_optimal_learning_curve(50.0, np.inf).error[0] == pytest.approx(
        0.442, rel=0.01
    )
    curve = bayes_optimal_learning_curve([0.0, 1.0, 3.0, 6.0], 0.5)
    assert curve.error[0] == 0.5 and curve.overlap[0] == 0.0
    assert np.all(np.diff(curve.error) < 0)
    flip = 1.0 / (1.0 + np.exp(0.5))
    np.testing.assert_allclose(curve.error_noisy, flip + (1 - 2 * flip) * curve.error)
    # The order of the α grid does not matter (warm starts only from smaller α).
    reverse = bayes_optimal_learning_curve([6.0, 3.0, 1.0, 0.0], 0.5)
    np.testing.assert_allclose(reverse.error[::-1], curve.error, atol=1e-9)
    with pytest.raises(ValueError, match="beta must be > 0"):
        bayes_optimal_learning_curve(1.0, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        bayes_optimal_learning_curve(-1.0, 1.0)
