"""Tests for the prediction of pymc_sfp.nn.Network in NumPy: against a hand computation and
against PyMC's posterior predictive; and two tiny fits that predict.

The prediction model is built once (module-scoped fixture) and its data changed with
``pm.set_data``; graphs are compiled in PyTensor's Python VM, since these tests check graphs, not
backends, and Numba's first (cold-cache) compile of every new graph costs tens of seconds.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytest
import xarray as xr

from pymc_sfp import SFPStep, StochasticDynamics
from pymc_sfp.nn import categorical_likelihood, gaussian_likelihood, mlp

RNG = np.random.default_rng(20260101)
X6 = RNG.normal(size=(6, 2))
X9 = RNG.normal(size=(9, 2))
Y6 = RNG.normal(size=(6, 2))
LABELS6 = np.array([0, 2, 1, 1, 0, 2])
FAST = {"mode": "FAST_COMPILE"}


@pytest.fixture(scope="module")
def prediction_setup():
    """Three networks and a fake 2-chain × 2-draw posterior drawn from their prior.

    ``reg``: 2-4-3-2, ARD prior, output kept; ``clf``: 2-3-3 softmax, group prior; ``plain``: a
    data container without dims.
    """
    with pm.Model() as model:
        reg = mlp(X6, (2, 4, 3, 2), prior="ard", name="reg", deterministic=True)
        gaussian_likelihood(reg, Y6, sigma=0.5)
        clf = mlp(X6, (2, 3, 3), output="softmax", prior="group", name="clf")
        categorical_likelihood(clf, LABELS6)
        plain = mlp(pm.Data("plain_inputs", X6), (2, 2, 1), prior="gaussian", name="plain")
        gaussian_likelihood(plain, Y6[:, 0], sigma=0.5)
        prior = (
            pm.sample_prior_predictive(draws=4, random_seed=3, compile_kwargs=FAST)
            .prior.to_dataset()
            .isel(chain=0)
        )
    halves = [prior.isel(draw=[0, 1]), prior.isel(draw=[2, 3]).assign_coords(draw=[0, 1])]
    posterior = xr.concat(halves, dim="chain").assign_coords(chain=[0, 1])
    idata = xr.DataTree.from_dict({"posterior": posterior})
    return model, {"reg": reg, "clf": clf, "plain": plain}, idata


def hand_predictions(forward, posterior, name, n_layers, X, softmax=False):
    """``F(X, w)`` per draw by hand, with the weights rebuilt from the unscaled ``z`` when the
    prior is hierarchical (``w = scale · z``, ARD scales per input row of the first layer)."""
    out = np.empty((posterior.sizes["chain"], posterior.sizes["draw"]), dtype=object)
    for c in range(out.shape[0]):
        for d in range(out.shape[1]):
            draw = posterior.isel(chain=c, draw=d)
            weights, biases = [], []
            for layer in range(n_layers):
                w_scale = f"{name}_sd_w{layer}" if layer < n_layers - 1 else f"{name}_sd_out"
                b_scale = f"{name}_sd_b{layer}" if layer < n_layers - 1 else f"{name}_sd_out"
                scale = draw[w_scale].values
                weights.append(np.atleast_1d(scale)[:, None] * draw[f"{name}_w{layer}_z"].values)
                biases.append(draw[b_scale].values * draw[f"{name}_b{layer}_z"].values)
            out[c, d] = forward(X, weights, biases, softmax)
    return np.array(out.tolist())


def test_predict_matches_hand_computation(prediction_setup, forward):
    _, nets, idata = prediction_setup
    posterior = idata["posterior"].to_dataset()
    reg = nets["reg"].predict(idata, X9)
    assert reg.dims == ("chain", "draw", "reg_obs", "reg_out") and reg.shape == (2, 2, 9, 2)
    expected = hand_predictions(forward, posterior, "reg", 3, X9)
    np.testing.assert_allclose(reg.values, expected, rtol=1e-12)
    # Eq. 17: the prediction is the average of F over the draws.
    mean = nets["reg"].predict_mean(idata, X9)
    assert mean.dims == ("reg_obs", "reg_out")
    np.testing.assert_allclose(mean.values, expected.mean(axis=(0, 1)), rtol=1e-12)

    probs = nets["clf"].predict(posterior, X9)  # a Dataset works too
    np.testing.assert_allclose(
        probs.values, hand_predictions(forward, posterior, "clf", 2, X9, softmax=True), rtol=1e-12
    )
    np.testing.assert_allclose(probs.sum("clf_out").values, 1.0)
    # ... and so does one group's node of the DataTree (idata.posterior).
    np.testing.assert_array_equal(nets["clf"].predict(idata.posterior, X9).values, probs.values)
    with pytest.raises(ValueError, match=r"idata has no group 'prior'; its groups: \["):
        nets["clf"].predict(idata, X9, group="prior")
    # Without X_new: the model's current inputs.
    np.testing.assert_allclose(
        nets["clf"].predict_mean(idata).values,
        hand_predictions(forward, posterior, "clf", 2, X6, softmax=True).mean(axis=(0, 1)),
        rtol=1e-12,
    )


def test_set_data_and_posterior_predictive_with_new_rows(prediction_setup):
    model, nets, idata = prediction_setup
    try:
        with model:
            pm.set_data({"reg_X": X9, "clf_X": X9, "plain_inputs": X9})
            pp = pm.sample_posterior_predictive(
                idata,
                var_names=["reg_output", "reg_y", "clf_y", "plain_y"],
                random_seed=4,
                progressbar=False,
                compile_kwargs=FAST,
            ).posterior_predictive
    finally:
        with model:
            pm.set_data({"reg_X": X6, "clf_X": X6, "plain_inputs": X6})
    assert pp["reg_y"].dims == ("chain", "draw", "reg_obs", "reg_out")
    assert pp["reg_y"].shape == (2, 2, 9, 2)
    assert pp["clf_y"].shape == (2, 2, 9)
    assert pp["plain_y"].shape == (2, 2, 9, 1)
    assert set(np.unique(pp["clf_y"].values)) <= {0, 1, 2}
    # The fast helper equals the PyTensor graph evaluated by PyMC at the same weights.
    np.testing.assert_allclose(
        pp["reg_output"].values, nets["reg"].predict(idata, X9).values, rtol=1e-10, atol=1e-12
    )
    # The draws scatter around the network's output with the known noise sd 0.5.
    residual = pp["reg_y"].values - pp["reg_output"].values
    assert 0.2 < residual.std() < 1.0


def test_sfp_fit_of_a_1_3_1_network_beats_the_mean():
    rng = np.random.default_rng(5)
    x = np.linspace(-2, 2, 20)[:, None]
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=20)
    with pm.Model():
        net = mlp(x, (1, 3, 1))  # Berrones: every weight U(-1, 1)
        gaussian_likelihood(net, y, sigma=0.1)
        idata = pm.sample(
            draws=50,
            tune=10,
            chains=1,
            step=SFPStep(L=20, marginal_points=0, compile_kwargs=FAST),
            compile_kwargs=FAST,
            random_seed=6,
            progressbar=False,
            compute_convergence_checks=False,
        )
    x_test = np.linspace(-1.9, 1.9, 15)[:, None]
    mse = np.mean((net.predict_mean(idata, x_test).values[:, 0] - np.sin(x_test[:, 0])) ** 2)
    assert mse < 0.1 * np.var(np.sin(x_test))


def test_split_scheme_of_the_guide_samples_a_centred_network():
    # docs/dynamics.rst: dynamics on the centred weights, Slice on the scales and the noise.
    rng = np.random.default_rng(8)
    x = np.linspace(-2, 2, 12)[:, None]
    y = np.sin(x) + 0.1 * rng.normal(size=(12, 1))
    with pm.Model():
        net = mlp(x, (1, 3, 1), prior="group", centred=True)
        sigma = pm.HalfNormal("sigma", 1.0)
        gaussian_likelihood(net, y, sigma=sigma)
        step = [
            StochasticDynamics([*net.weights, *net.biases], n_leapfrog=3, compile_kwargs=FAST),
            pm.Slice([*net.scales.values(), sigma], compile_kwargs=FAST),
        ]
        idata = pm.sample(
            draws=20,
            tune=20,
            chains=2,
            cores=1,
            step=step,
            random_seed=9,
            progressbar=False,
            compute_convergence_checks=False,
            compile_kwargs=FAST,
        )
    posterior = idata["posterior"]
    assert {"net_w0", "net_sd_w0", "sigma"} <= set(posterior.data_vars)
    assert all(np.isfinite(posterior[v].values).all() for v in posterior.data_vars)
    assert not np.array_equal(posterior["net_w0"].values[:, 0], posterior["net_w0"].values[:, -1])
    assert not np.array_equal(posterior["sigma"].values[:, 0], posterior["sigma"].values[:, -1])


@pytest.mark.parametrize("output", ["linear", "softmax"])
def test_float32_network_predicts_float32_at_float64_inputs(output):
    """``X_new`` is read as float64 (users pass NumPy's default): a float32 network's
    predictions at it were float64, unlike those at its own inputs. Both are float32 now."""
    with pytensor.config.change_flags(floatX="float32"), pm.Model():
        net = mlp(X6.astype("float32"), (2, 3, 3), output=output, prior="gaussian")
        if output == "softmax":
            categorical_likelihood(net, LABELS6)
        else:
            gaussian_likelihood(net, RNG.normal(size=(6, 3)).astype("float32"), sigma=0.5)
        prior = pm.sample_prior_predictive(draws=2, random_seed=1, compile_kwargs=FAST)
    assert net.predict(prior, group="prior").dtype == np.float32
    predictions = net.predict(prior, X9, group="prior")
    assert predictions.dtype == np.float32 and np.isfinite(predictions.values).all()
