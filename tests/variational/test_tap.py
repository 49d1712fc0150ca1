"""fit_tap on PyMC models: structure read from the graph; an Approximation with its names."""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytest
from scipy import special

import pymc_sfp
import pymc_sfp.datasets.synthetic
from pymc_sfp.core.tap import TAPConvergenceWarning, predict, tap_fit


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    w = np.array([1.5, -1.0, 0.5])
    return X, w, rng


def classifier(X, y, **link):
    with pm.Model(coords={"feature": ["a", "b", "c"]}) as model:
        Xd = pm.Data("X", X)
        w = pm.Normal("w", 0.0, 2.0, dims="feature")
        if "logit" in link:
            pm.Bernoulli("y", logit_p=Xd @ w, observed=y)
        else:
            pm.Bernoulli("y", p=pm.math.invprobit(Xd @ w), observed=y)
    return model


def test_probit_model_gives_an_approximation_with_names_dims_and_attrs(data):
    X, w, rng = data
    y = (rng.random(60) < 0.5 + 0.4 * np.tanh(X @ w)).astype(int)
    with classifier(X, y):
        approx = pymc_sfp.fit_tap(random_seed=1)
    core = tap_fit(X, y, "probit", prior_var=4.0, field_scale=1.0)
    np.testing.assert_allclose(approx.tap.mean, core.mean)
    assert isinstance(approx, pm.variational.Approximation)
    assert approx.loo_error == core.loo_error
    np.testing.assert_allclose(approx.groups[0].cov.eval(), core.cov, atol=1e-10)
    draws = approx.sample(4000, random_seed=3)
    post = draws.posterior["w"]
    assert post.dims == ("chain", "draw", "feature")
    # Sample mean within 5 Monte Carlo standard errors of the TAP mean.
    se = np.sqrt(core.var / 4000)
    assert np.all(np.abs(post.mean(("chain", "draw")).values - core.mean) < 5 * se)
    assert draws.attrs["log_evidence"] == pytest.approx(core.log_evidence)
    assert draws.attrs["tap_variant"] == "adaptive"
    again = approx.sample(10, random_seed=3).posterior["w"].values
    np.testing.assert_array_equal(again, approx.sample(10, random_seed=3).posterior["w"].values)


def test_float32_model(data):
    # TAP reads and solves the model in float64 whatever floatX; its draws come back in floatX.
    X, w, rng = data
    y = (rng.random(60) < 0.5 + 0.4 * np.tanh(X @ w)).astype(int)
    core = tap_fit(X, y, "probit", prior_var=4.0, field_scale=1.0)
    with pytensor.config.change_flags(floatX="float32"):
        with classifier(X.astype("float32"), y):
            approx = pymc_sfp.fit_tap()
            draws = approx.sample(10, random_seed=3).posterior["w"]
            via_fit = pm.fit(method=pymc_sfp.TAP())
    np.testing.assert_allclose(approx.tap.mean, core.mean, rtol=1e-6)
    np.testing.assert_allclose(via_fit.tap.mean, core.mean, rtol=1e-6)
    assert draws.dtype == np.float32


def test_logit_link_is_recognised(data):
    X, _, rng = data
    y = (rng.random(60) < 0.5).astype(int)
    with classifier(X, y, logit=True):
        approx = pymc_sfp.fit_tap()
    assert approx.tap.likelihood == "logistic" and approx.tap.converged


def test_normal_model_is_the_conjugate_posterior(data):
    X, w, rng = data
    y = X @ w + 0.5 * rng.normal(size=60)
    with pm.Model():
        Xd = pm.Data("X", X)
        wv = pm.Normal("w", 0.0, 2.0, shape=3)
        pm.Normal("y", mu=Xd @ wv, sigma=0.5, observed=y)
        approx = pymc_sfp.fit_tap(tol=1e-12)
    cov = np.linalg.inv(np.eye(3) / 4.0 + X.T @ X / 0.25)
    np.testing.assert_allclose(approx.tap.mean, cov @ X.T @ y / 0.25, atol=1e-8)
    np.testing.assert_allclose(approx.tap.cov, cov, atol=1e-8)


def test_unsupported_structures_are_named(data):
    X, _, rng = data
    y = (rng.random(60) < 0.5).astype(int)
    with pm.Model():
        Xd = pm.Data("X", X)
        wv = pm.Normal("w", 0.0, 1.0, shape=3)
        pm.Normal("b", 0.0, 1.0)
        pm.Bernoulli("y", p=pm.math.invprobit(Xd @ wv), observed=y)
        with pytest.raises(ValueError, match="exactly one free variable"):
            pymc_sfp.fit_tap()
    with pm.Model():
        Xd = pm.Data("X", X)
        wv = pm.Normal("w", 0.0, 1.0, shape=3)
        pm.Bernoulli("y", p=pm.math.invprobit(Xd @ wv + 1.0), observed=y)
        with pytest.raises(ValueError, match="neither link"):
            pymc_sfp.fit_tap()
    with pm.Model():
        Xd = pm.Data("X", X)
        wv = pm.Normal("w", 1.0, 1.0, shape=3)
        pm.Bernoulli("y", p=pm.math.invprobit(Xd @ wv), observed=y)
        with pytest.raises(ValueError, match="mean 0"):
            pymc_sfp.fit_tap()
    with pm.Model():
        Xd = pm.Data("X", X)
        wv = pm.Normal("w", 0.0, 1.0, shape=3)
        pm.StudentT("y", nu=3, mu=Xd @ wv, sigma=1.0, observed=y)
        with pytest.raises(ValueError, match="supported: Bernoulli"):
            pymc_sfp.fit_tap()
    with classifier(X, 2 * y - 1):
        with pytest.raises(
            ValueError, match=r"'y' observes values other than 0 and 1 \(\[-1\.0\]\)"
        ):
            pymc_sfp.fit_tap()


# --- the noisy perceptron in a model, arrays, pm.fit ---------------------------------------------


@pytest.fixture
def perceptron():
    S, sigma, _ = pymc_sfp.datasets.synthetic.make_teacher_perceptron(80, 6, rng=3, beta=2.0)
    return S, sigma


def test_noisy_perceptron_model_is_read_from_the_graph(perceptron):
    S, sigma = perceptron
    with pm.Model():
        Xd = pm.Data("S", S)
        w = pm.Normal("w", 0.0, 0.5, shape=6)
        pymc_sfp.nn.NoisyPerceptron("y", field=Xd @ w, beta=2.0, observed=sigma)
        approx = pymc_sfp.fit_tap()
    core = tap_fit(S, sigma, "perceptron", beta=2.0, prior_var=0.25, field_scale=1.0)
    assert approx.tap.likelihood == "perceptron" and approx.tap.beta == 2.0
    np.testing.assert_allclose(approx.tap.mean, core.mean)
    assert approx.loo_error == core.loo_error
    with pm.Model():
        Xd = pm.Data("S", S)
        w = pm.Normal("w", 0.0, 0.5, shape=6)
        pymc_sfp.nn.NoisyPerceptron("y", field=2.0 * Xd @ w, beta=2.0, observed=sigma)
        with pytest.raises(ValueError, match="must have field = X @ w"):
            pymc_sfp.fit_tap()


def test_array_form_builds_the_model_and_predicts(perceptron):
    S, sigma = perceptron
    approx = pymc_sfp.fit_tap(X=S, y=sigma, likelihood="perceptron", beta=2.0, prior_var=0.25)
    core = tap_fit(S, sigma, "perceptron", beta=2.0, prior_var=0.25, field_scale=1.0)
    np.testing.assert_allclose(approx.tap.mean, core.mean)
    np.testing.assert_allclose(approx.mean.eval(), core.mean, atol=1e-12)
    np.testing.assert_allclose(approx.cov.eval(), core.cov, atol=1e-10)
    assert approx.log_evidence == core.log_evidence
    np.testing.assert_array_equal(approx.hist, core.residuals)
    np.testing.assert_allclose(approx.predict(S[:5]).prob, predict(core, S[:5]).prob)
    assert approx.model["y"].owner.op.name == "noisy_perceptron"
    # {0, 1} labels are the same data as ±1 labels.
    zero_one = pymc_sfp.fit_tap(X=S, y=(sigma + 1) / 2, likelihood="probit")
    np.testing.assert_allclose(
        zero_one.tap.mean, pymc_sfp.fit_tap(X=S, y=sigma, likelihood="probit").tap.mean
    )


def test_array_form_and_model_are_not_mixed(perceptron):
    S, sigma = perceptron
    with pytest.raises(ValueError, match=r"missing \['likelihood'\]"):
        pymc_sfp.fit_tap(X=S, y=sigma)
    model = pymc_sfp.tap_model(S, sigma, "probit")
    with pytest.raises(ValueError, match="not both"):
        pymc_sfp.fit_tap(model, X=S, y=sigma, likelihood="probit")
    with pytest.raises(ValueError, match=r"\['beta'\] go with the arrays"):
        pymc_sfp.fit_tap(model, beta=1.0)
    with pytest.raises(ValueError, match="needs beta"):
        pymc_sfp.tap_model(S, sigma, "perceptron")
    with pytest.raises(ValueError, match="labels for the logistic"):
        pymc_sfp.tap_model(S, 2.0 * sigma, "logistic")


def test_pm_fit_with_a_tap_instance_returns_the_same_approximation(perceptron):
    S, sigma = perceptron
    # α = m/N = 2, where the naive iteration converges.
    model = pymc_sfp.tap_model(S[:12], sigma[:12], "perceptron", beta=2.0, prior_var=0.25)
    direct = pymc_sfp.fit_tap(model, variant="naive", damping=0.3)
    with model:
        inference = pymc_sfp.TAP("naive", random_seed=1, damping=0.3)
        approx = pm.fit(method=inference)
    assert isinstance(approx, pymc_sfp.TAPApproximation) and inference.approx is approx
    np.testing.assert_array_equal(approx.tap.mean, direct.tap.mean)
    assert approx.tap.variant == "naive" and approx.tap.converged
    np.testing.assert_array_equal(inference.hist, approx.hist)
    # pm.fit's n caps the iterations per stage.
    with model, pytest.warns(pymc_sfp.core.tap.TAPConvergenceWarning, match="did not converge"):
        capped = pm.fit(3, method=pymc_sfp.TAP())
    assert capped.tap.n_iter == 3
    with pytest.raises(TypeError, match="obj_n_mc"):
        pm.fit(method=pymc_sfp.TAP(model=model), model=model, obj_n_mc=10)
    with pytest.raises(ValueError, match=r"iteration cap is pm\.fit's n"):
        pymc_sfp.TAP(model=model, max_iter=10)
    with pytest.raises(TypeError, match=r"TAP got unknown keyword arguments \['dampning'\]"):
        pymc_sfp.TAP(model=model, dampning=0.3)
    with pytest.raises(TypeError, match=r"fit_tap got unknown keyword arguments \['field_scale'\]"):
        pymc_sfp.fit_tap(model, field_scale=2.0)
    with model, pytest.raises(ValueError, match="n must be a positive integer, got 0"):
        pm.fit(0, method=pymc_sfp.TAP())
    with pytest.raises(AttributeError, match="before fit"):
        _ = pymc_sfp.TAP(model=model).approx


def test_new_inputs_through_set_data_and_posterior_predictive(perceptron):
    S, sigma = perceptron
    approx = pymc_sfp.fit_tap(X=S, y=sigma, likelihood="perceptron", beta=2.0, prior_var=0.25)
    draws = approx.sample(4000, random_seed=2)
    S_new = np.random.default_rng(4).normal(size=(5, 6))
    with approx.model:
        pm.set_data({"X": S_new})
        pred = pm.sample_posterior_predictive(draws, random_seed=5, progressbar=False)
    y_new = pred.posterior_predictive["y"]
    assert y_new.shape == (1, 4000, 5)
    # The frequency of +1 over 4000 predictive draws estimates P(+1 | s) of the Gaussian q; five
    # binomial standard errors (≤ 0.5/√4000 each) bound its distance to predict()'s value.
    freq = (y_new.values > 0).mean(axis=(0, 1))
    p = approx.predict(S_new).prob
    assert np.all(np.abs(freq - p) < 5.0 * np.sqrt(p * (1.0 - p) / 4000))


# --- against long MCMC runs --------------------------------------------------------------------


def equicorrelated(rng, m, n, rho):
    C = rho * np.ones((n, n)) + (1.0 - rho) * np.eye(n)
    # Cholesky, not the default SVD: C has a repeated eigenvalue, whose eigenvectors (and so the
    # draws) the SVD leaves to the LAPACK build; the Cholesky factor is unique.
    return rng.multivariate_normal(np.zeros(n), C, size=m, method="cholesky")


def reference(model, step=None, draws=2500, tune=800, **kwargs):
    """Pooled posterior mean and variance of ``w`` from two chains, and the smallest bulk ESS."""
    with model:
        idata = pm.sample(
            draws,
            tune=tune,
            chains=2,
            cores=1,
            step=step,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
            **kwargs,
        )
    w = idata.posterior["w"]
    ess = float(az.ess(idata, var_names=["w"])["w"].min())
    return w.mean(("chain", "draw")).values, w.var(("chain", "draw")).values, ess


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:QuadPotentialFullAdapt is an experimental feature")
@pytest.mark.parametrize("likelihood", ["probit", "logistic"])
def test_adaptive_tap_matches_nuts_on_correlated_inputs_naive_is_worse(likelihood):
    rng = np.random.default_rng(11)
    X = equicorrelated(rng, 60, 8, 0.9)
    link = special.ndtr if likelihood == "probit" else special.expit
    field = X @ rng.normal(size=8) / np.sqrt(2.0)
    y = (rng.random(60) < link(field)).astype(int)
    model = pymc_sfp.tap_model(X, y, likelihood, prior_var=0.5)
    adaptive = pymc_sfp.fit_tap(model).tap
    naive = pymc_sfp.fit_tap(model, variant="naive", damping=0.1, max_iter=5000).tap
    assert adaptive.converged and naive.converged
    # Inputs with correlation 0.9 make the posterior correlated: a dense mass matrix keeps the
    # NUTS trees short.
    mean, var, ess = reference(model, init="jitter+adapt_full", draws=10000)
    assert ess > 16000
    sd = np.sqrt(var)
    # The reference mean's standard error is sd/√ESS: five of them bound the adaptive error ...
    # (a long reference, so that the bound, about 0.033 sd, resolves the naive variant's bias:
    # about 0.06 sd on the probit data, 0.11 on the logistic)
    bound = 5.0 / np.sqrt(ess)
    assert np.max(np.abs(adaptive.mean - mean) / sd) < bound
    assert np.corrcoef(adaptive.mean, mean)[0, 1] > 0.99
    # ... and the variances meet the 10 % criterion, against a reference whose own relative
    # error is √(2/ESS) < 0.012.
    np.testing.assert_allclose(adaptive.var, var, rtol=0.10)
    # The naive Λ = 1 − q assumes uncorrelated inputs: its means are off by more than the bound.
    assert np.max(np.abs(naive.mean - mean) / sd) > bound


@pytest.mark.slow
def test_noisy_perceptron_matches_a_long_slice_run():
    rng = np.random.default_rng(5)
    X = equicorrelated(rng, 25, 5, 0.5)
    y = np.sign(X @ rng.normal(size=5))
    y[rng.random(25) < 1.0 / (1.0 + np.e)] *= -1.0  # β = 1
    model = pymc_sfp.tap_model(X, y, "perceptron", beta=1.0, prior_var=0.2)
    fit = pymc_sfp.fit_tap(model).tap
    assert fit.converged
    # The step likelihood has no gradient: slice sampling, the package's SFPStep being slower.
    mean, var, ess = reference(model, step=pm.Slice(model=model), draws=8000, tune=500)
    assert ess > 3000
    # EP is not exact for the step likelihood: the criteria, correlation > 0.99 and
    # variances within 10 % (the reference's own relative error √(2/ESS) < 0.026).
    assert np.corrcoef(fit.mean, mean)[0, 1] > 0.99
    np.testing.assert_allclose(fit.var, var, rtol=0.10)


def test_a_diverged_fit_refuses_to_sample_or_predict():
    """A noise variance of 1e-18 overflows EP: the fit warns, and its approximation must not
    hand out NaN draws or predictions as if they were a posterior."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 10))
    y = X @ rng.normal(size=10)
    with pytest.warns(TAPConvergenceWarning, match="diverged"):
        approx = pymc_sfp.fit_tap(X=X, y=y, likelihood="gaussian", noise_var=1e-18)
    with pytest.raises(FloatingPointError, match=r"diverged .* no finite Gaussian"):
        approx.sample(10, random_seed=1)
    with pytest.raises(FloatingPointError, match="no finite Gaussian"):
        approx.predict(X[:2])


def test_random_seed_takes_a_generator_and_names_a_bad_one(perceptron):
    """The docstrings' "int or Generator": PyMC's approximation takes an integer seed only."""
    S, sigma = perceptron
    by_generator = pymc_sfp.fit_tap(
        X=S, y=sigma, likelihood="probit", random_seed=np.random.default_rng(2)
    )
    by_int = pymc_sfp.fit_tap(X=S, y=sigma, likelihood="probit", random_seed=2)
    np.testing.assert_array_equal(by_generator.tap.mean, by_int.tap.mean)
    with pm.Model():
        w = pm.Normal("w", 0.0, 1.0, shape=6)
        pm.Bernoulli("y", p=pm.math.invprobit(pm.Data("S", S) @ w), observed=sigma > 0)
        approx = pm.fit(method=pymc_sfp.TAP(random_seed=np.random.default_rng(2)))
    assert np.isfinite(approx.tap.mean).all()
    for bad in (-1, 1.5, "x"):
        with pytest.raises((TypeError, ValueError), match="random_seed must be"):
            pymc_sfp.fit_tap(X=S, y=sigma, likelihood="probit", random_seed=bad)
        with pytest.raises((TypeError, ValueError), match="random_seed must be"):
            pymc_sfp.TAP(random_seed=bad, model=pm.Model())
