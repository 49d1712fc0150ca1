"""MixtureADVI: the nn4post mixture family through PyMC's approximation API, its stratified
weight gradient, component growth and pruning."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.pytensorf import compile as pm_compile
from pymc.variational.callbacks import CheckParametersConvergence, Tracker
from pymc.variational.opvi import ParametrizationError
from scipy import special, stats

import pymc_sfp
from pymc_sfp.variational.mixture import MixtureADVI


def adam(rate: float = 0.05):
    return pm.adam(learning_rate=rate)


def mixture_target(name: str, weights, means, sd: float, shape=None) -> None:
    """A Flat variable with a mixture of isotropic Gaussians as its (normalised) density."""
    x = pm.Flat(name, shape=shape)
    terms = [
        np.log(w) + pm.logp(pm.Normal.dist(np.asarray(m), sd), x).sum()
        for w, m in zip(weights, means, strict=True)
    ]
    pm.Potential(f"{name}_density", pt.logsumexp(pt.stack(terms)))


@pytest.fixture(scope="module")
def bimodal_1d():
    with pm.Model() as model:
        mixture_target("x", [0.3, 0.7], [-3.0, 3.0], 0.5)
    return model


def advi_elbo(model, draws: int = 4000) -> float:
    """ELBO of a fitted mean-field ADVI (PyMC's own estimate, ``draws`` draws)."""
    with model:
        advi = pm.ADVI(random_seed=4)
        advi.fit(2000, obj_optimizer=adam(), progressbar=False)
    return -float(advi.objective.score_function(sc_n_mc=draws)())


# --- bad input ---------------------------------------------------------------------------


def test_bad_input_is_refused_with_the_argument_named(bimodal_1d):
    with bimodal_1d:
        with pytest.raises(ValueError, match="n_components"):
            MixtureADVI(0)
        with pytest.raises(ValueError, match=r"n_components must be a positive integer, got 1\.5"):
            MixtureADVI(1.5)
        with pytest.raises(TypeError, match="n_components must be a positive integer"):
            MixtureADVI("2")
        with pytest.raises(ValueError, match="max_components"):
            MixtureADVI(3, max_components=2)
        with pytest.raises(ValueError, match="start"):
            MixtureADVI(1, start={"x": np.nan})
        with pytest.raises(TypeError, match="grow must be True or False, got 'no'"):
            MixtureADVI(1, grow="no")
        with pytest.raises(TypeError, match=r"unknown keyword arguments \['init_scal'\]"):
            MixtureADVI(2, init_scal=50.0)
        for beta in (-1.0, np.nan):
            with pytest.raises(ValueError, match="beta must be a finite number ≥ 0"):
                MixtureADVI(1, beta=beta)
        with pytest.raises(TypeError, match="beta must be a real number"):
            MixtureADVI(1, beta="x")
        with pytest.raises(TypeError, match="prune_weight must be a real number"):
            MixtureADVI(1, prune_weight="0.1")
        with pytest.raises(TypeError, match="init_scale must be a real number"):
            MixtureADVI(2, init_scale="a")
    with pm.Model():
        pm.Poisson("k", 3.0)
        with pytest.raises(ParametrizationError, match="Discrete"):
            MixtureADVI(2)


# --- one component is mean-field ADVI -----------------------------------------------------


def test_one_component_reaches_the_mean_field_optimum_as_advi_does():
    rng = np.random.default_rng(3)
    y = rng.normal([1.0, -2.0], 1.0, size=(10, 2))
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 10.0, shape=2)
        pm.Normal("y", theta, 1.0, observed=y)
    # Conjugate and diagonal: the posterior is the mean-field optimum, exactly.
    precision = 10 + 1 / 100
    mean, sd = y.sum(axis=0) / precision, 1 / np.sqrt(precision)
    with model:
        mix = pm.fit(
            3000, method=MixtureADVI(1, random_seed=1), obj_optimizer=adam(0.02), obj_n_mc=10
        )
        advi = pm.fit(3000, method=pm.ADVI(random_seed=1), obj_optimizer=adam(0.02), obj_n_mc=10)
    # With the parameters held fixed inside ln q, the gradient estimate has zero variance once
    # q equals the posterior, so the iterate sits at the optimum up to rounding.
    np.testing.assert_allclose(mix.mean.eval(), mean, atol=1e-6 * sd)
    np.testing.assert_allclose(mix.std.eval(), sd, rtol=1e-6)
    # ADVI's iterate jitters about the same optimum: measured over 3 seeds × 2 coordinates its
    # error is 0.07 posterior sd (rms) in the mean and 0.04 relative in the sd; 4× that.
    np.testing.assert_allclose(advi.mean.eval(), mix.mean.eval(), atol=0.3 * sd)
    np.testing.assert_allclose(advi.std.eval(), mix.std.eval(), rtol=0.16)


def test_float32_mixture_density_stays_float32():
    """The mixture's log-density of float32 rows is float32: its normalising term's dimension
    (an int64 shape) is cast, not left to upcast a float32 model's objective to float64."""
    from pymc_sfp.variational.mixture import _mixture_logpdf

    with pytensor.config.change_flags(floatX="float32"):
        z, mu, sigma, w = (pt.tensor(name, shape=(None,) * 2) for name in ("z", "mu", "sigma", "w"))
        assert _mixture_logpdf(z, w[0], mu, sigma).dtype == "float32"


@pytest.mark.parametrize("n_components", [1, 2])
def test_float32_model(n_components):
    # The family's parameters are in floatX, as the model's; one component still reaches the
    # optimum of the conjugate model (up to float32 rounding), two fit and sample in float32.
    y = np.array([1.2, 0.4, 0.9, 1.5, 0.7], dtype="float32")
    precision = 1.0 + len(y)
    mean, sd = y.sum() / precision, precision**-0.5
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model():
            mu = pm.Normal("mu", 0.0, 1.0)
            pm.Normal("y", mu, 1.0, observed=y)
            inference = MixtureADVI(n_components, random_seed=1)
            # One Monte Carlo draw per step (pm.fit's default) takes PyMC's single-sample path.
            approx = pm.fit(3000, method=inference, obj_optimizer=adam(0.02))
            draws = approx.sample(1000, random_seed=2).posterior["mu"]
    assert draws.dtype == np.float32
    assert np.isfinite(approx.hist).all()
    if n_components == 1:
        assert float(approx.mean.eval()[0]) == pytest.approx(mean, abs=1e-3 * sd)
        assert float(approx.std.eval()[0]) == pytest.approx(sd, rel=1e-3)
    # Draws within 4 Monte Carlo standard errors of the exact posterior mean (the fit's is
    # within a fraction of that).
    assert abs(float(draws.mean()) - mean) < 4 * sd / np.sqrt(1000)


# --- bimodal targets ----------------------------------------------------------------------


def test_bimodal_1d_weights_elbo_and_draws(bimodal_1d):
    with bimodal_1d:
        inference = MixtureADVI(2, random_seed=1)
        approx = pm.fit(3000, method=inference, obj_optimizer=adam(), progressbar=False)
    weights = approx.weights.eval()
    order = np.argsort(approx.component_means.eval()[:, 0])
    assert np.all(np.abs(weights[order] - [0.3, 0.7]) < 0.05)
    elbo, se = inference.elbo(2000)
    # The target is normalised (log Z = 0): a single Gaussian on one mode has an ELBO of at most
    # ln 0.7 = -0.357, the mixture can reach 0. Both estimates have standard errors below 0.02.
    advi = advi_elbo(bimodal_1d)
    assert advi < np.log(0.7) + 0.05
    assert se < 0.02
    assert elbo > advi + 0.2
    idata = approx.sample(4000, random_seed=2)
    draws = idata.posterior["x"].values.ravel()
    # Share of the draws in the left mode: binomial standard error sqrt(0.21 / 4000) = 0.007.
    assert abs(np.mean(draws < 0) - 0.3) < 4 * np.sqrt(0.21 / 4000) + 0.05
    # Mixture moments: mean 0.3·(-3) + 0.7·3 = 1.2, variance 9.25 - 1.2² = 7.81; weights off by
    # at most 0.05 move the mean by at most 0.3 and the variance by at most 0.81 (10 %).
    np.testing.assert_allclose(approx.mean.eval(), [1.2], atol=0.3)
    np.testing.assert_allclose(approx.std.eval() ** 2, [7.81], rtol=0.11)


def test_bimodal_2d_weights_and_elbo():
    with pm.Model() as model:
        mixture_target("x", [0.3, 0.7], [[-2.5, -2.5], [2.5, 2.5]], 0.5, shape=2)
    with model:
        inference = MixtureADVI(2, random_seed=2)
        approx = pm.fit(3000, method=inference, obj_optimizer=adam(), progressbar=False)
    order = np.argsort(approx.component_means.eval()[:, 0])
    assert np.all(np.abs(approx.weights.eval()[order] - [0.3, 0.7]) < 0.05)
    means = approx.component_means.eval()[order]
    np.testing.assert_allclose(means, [[-2.5, -2.5], [2.5, 2.5]], atol=0.1)
    elbo, _ = inference.elbo(2000)
    assert elbo > advi_elbo(model) + 0.2


# --- the weight gradient ------------------------------------------------------------------


def quadrature_elbo(a, mu, sigma, weights, means, sd) -> float:
    """ELBO of a 1-D mixture q against the normalised 1-D mixture target, on a fine grid."""
    z = np.linspace(-12, 12, 48001)
    log_q = special.logsumexp(
        special.log_softmax(a)[:, None] + stats.norm.logpdf(z, mu[:, None], sigma[:, None]), axis=0
    )
    log_p = special.logsumexp(
        np.log(weights)[:, None] + stats.norm.logpdf(z, np.asarray(means)[:, None], sd), axis=0
    )
    return float(np.trapezoid(np.exp(log_q) * (log_p - log_q), z))


def test_weight_gradient_estimate_matches_the_finite_difference_elbo_derivative(bimodal_1d):
    a, mu, sigma = np.array([0.2, -0.1]), np.array([-2.5, 3.5]), np.array([0.6, 0.4])
    with bimodal_1d:
        inference = MixtureADVI(2, random_seed=3, prune_weight=None)
    group = inference.approx.group
    group.shared_params["a"].set_value(a)
    group.shared_params["mu"].set_value(mu[:, None])
    group.shared_params["zeta"].set_value(np.log(np.expm1(sigma))[:, None])
    loss = inference.objective(2000)  # negative ELBO, 2000 draws per component
    gradient = pm_compile([], pt.grad(loss, group.shared_params["a"]), random_seed=5)
    estimates = -np.array([gradient() for _ in range(40)])
    mean, se = estimates.mean(axis=0), estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    h = 1e-4
    finite_difference = np.array(
        [
            (
                quadrature_elbo(a + h * e, mu, sigma, [0.3, 0.7], [-3, 3], 0.5)
                - quadrature_elbo(a - h * e, mu, sigma, [0.3, 0.7], [-3, 3], 0.5)
            )
            / (2 * h)
            for e in np.eye(2)
        ]
    )
    # Unbiased estimator: its mean over 40 independent estimates within 4 standard errors of
    # the derivative; and precise enough that a zero-mean (categorical-draw) gradient would fail.
    assert np.all(np.abs(mean - finite_difference) < 4 * se)
    assert np.all(4 * se < 0.25 * np.abs(finite_difference))


# --- API: names, dims, constrained scale, callbacks, minibatches, seeds -------------------


def test_sample_names_dims_constrained_scale_and_components():
    with pm.Model(coords={"city": ["a", "b", "c"]}) as model:
        theta = pm.Normal("theta", 0.0, 1.0, dims="city")
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", theta, s, observed=[[0.1, 1.0, -0.5], [0.3, 1.2, -0.4]])
    tracker = Tracker(logits=lambda approx, hist, i: approx.params[0].get_value())
    with model:
        approx = pm.fit(
            300,
            method=MixtureADVI(2, random_seed=1, prune_weight=None),
            obj_optimizer=adam(),
            callbacks=[tracker],
            progressbar=False,
        )
    idata = approx.sample(50, random_seed=1)
    assert idata.posterior["theta"].dims == ("chain", "draw", "city")
    assert list(idata.posterior["city"].values) == ["a", "b", "c"]
    assert (idata.posterior["s"].values > 0).all()
    assert len(tracker["logits"]) == 300
    components = approx.component_data()
    assert components["theta_mean"].dims == ("component", "city")
    assert components["weight"].sum() == pytest.approx(1.0)
    assert approx.n_components == 2
    assert approx.mean.eval().shape == approx.std.eval().shape == (4,)
    assert set(approx.state.mean.data_vars) == {"theta", "s"}


def test_minibatch_scaling_convergence_callback_and_seed():
    rng = np.random.default_rng(0)
    n = 2000
    x = rng.normal(size=n)
    y = 1.0 + 2.0 * x + rng.normal(size=n)

    def fit(seed):
        xb, yb = pm.Minibatch(x, y, batch_size=100)
        with pm.Model():
            b = pm.Normal("b", 0.0, 10.0, shape=2)
            pm.Normal("y", b[0] + b[1] * xb, 1.0, observed=yb, total_size=n)
            inference = MixtureADVI(1, random_seed=seed)
            approx = inference.fit(
                5000,
                obj_optimizer=adam(0.05),
                callbacks=[CheckParametersConvergence(every=1000, tolerance=1.0, diff="absolute")],
                progressbar=False,
            )
        return inference, approx

    inference, approx = fit(7)
    assert len(inference.hist) < 5000  # the convergence callback stopped it
    # Posterior sd of each coefficient with the full data is about 1/sqrt(n) = 0.022; without
    # the total_size scaling the fit would be sqrt(n / 100) = 4.5 times as wide.
    std = approx.std.eval()
    assert np.all((0.5 / np.sqrt(n) < std) & (std < 2 / np.sqrt(n)))
    again, _ = fit(7)
    other, _ = fit(8)
    for name in ("a", "mu", "zeta"):
        first = inference.approx.group.shared_params[name].get_value()
        np.testing.assert_array_equal(first, again.approx.group.shared_params[name].get_value())
    assert not np.array_equal(
        inference.approx.group.shared_params["mu"].get_value(),
        other.approx.group.shared_params["mu"].get_value(),
    )


# --- collapse, pruning and growth ---------------------------------------------------------


@pytest.mark.slow
def test_shadow_network_two_components_collapse_to_one_peak():
    """nn4post's "shadow network" (Fig. 1): on a one-peak posterior, Nc = 2 ends with one
    effective peak and the same loss as Nc = 1. Here a one-unit linear network."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=20)
    y = 0.8 * x + 0.3 + 0.5 * rng.normal(size=20)
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 1.0)
        pm.Normal("y", w * x + b, 0.5, observed=y)
    elbos = {}
    with model:
        for nc in (1, 2):
            inference = MixtureADVI(nc, random_seed=2, prune_weight=None)
            approx = inference.fit(4000, obj_optimizer=adam(), progressbar=False)
            elbos[nc] = inference.elbo(2000)
    means, stds = approx.component_means.eval(), approx.component_stds.eval()
    weights = approx.weights.eval()
    one_peak = weights.min() < 0.01 or np.all(np.abs(means[0] - means[1]) < 0.1 * stds.min(0))
    assert one_peak
    gain = elbos[2][0] - elbos[1][0]
    assert abs(gain) < 4 * np.hypot(elbos[1][1], elbos[2][1])


@pytest.mark.slow
def test_growth_stops_at_three_components_on_a_three_mode_target():
    with pm.Model():
        mixture_target("x", [0.3, 0.3, 0.4], [-5.0, 0.0, 5.0], 0.5)
        inference = MixtureADVI(grow=True, random_seed=2, plateau_window=200)
        approx = inference.fit(20000, obj_optimizer=adam(), progressbar=False)
    assert approx.n_components == 3
    # The fourth component is refused (no ELBO gain, or pruned away with a collapsed weight).
    assert [stage.n_components for stage in inference.growth][:3] == [1, 2, 3]
    assert [stage.accepted for stage in inference.growth] == [True, True, True, False]
    order = np.argsort(approx.component_means.eval()[:, 0])
    np.testing.assert_allclose(approx.weights.eval()[order], [0.3, 0.3, 0.4], atol=0.05)


def test_pruning_removes_a_collapsed_component_and_fitting_goes_on(bimodal_1d):
    with bimodal_1d:
        inference = MixtureADVI(3, random_seed=1)
    group = inference.approx.group
    group.shared_params["a"].set_value(np.array([0.0, -8.0, 0.5]))
    means = group.shared_params["mu"].get_value()
    assert inference.prune(0.01) == 1
    approx = inference.approx
    assert approx.n_components == 2
    np.testing.assert_array_equal(approx.component_means.eval(), means[[0, 2]])
    np.testing.assert_allclose(approx.weights.eval(), special.softmax([0.0, 0.5]))
    with bimodal_1d:
        assert inference.fit(50, obj_optimizer=adam(), progressbar=False) is inference.approx
    assert inference.approx.n_components == 2


def test_public_name():
    assert pymc_sfp.MixtureADVI is MixtureADVI
