"""fit_tap on PyMC models: structure read from the graph; an Approximation with its names."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_sfp
from pymc_sfp.core.tap import tap_fit


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
