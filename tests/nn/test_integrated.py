"""Tests for pymc_sfp.nn.integrated and ``mlp(..., output_layer="integrated")``.

The marginal likelihood is checked against the dense ``n × n`` Gaussian formula, its gradient
against finite differences of it. End to end, a 1-1-1 network with its output layer integrated
out is sampled and its output layer drawn back; the moments are compared with a quadrature over
the two hidden-layer parameters of the dense marginal, within Monte Carlo error.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import xarray as xr
from pymc.pytensorf import compile
from scipy import stats

from pymc_sfp import StochasticDynamics
from pymc_sfp.nn import gaussian_likelihood, mlp
from pymc_sfp.nn.integrated import marginal_loglik

RNG = np.random.default_rng(20261123)
FAST = {"mode": "FAST_COMPILE"}


def dense_marginal(H, Y, s, sigma):
    Ht = np.column_stack([H, np.ones(len(H))])
    C = s**2 * Ht @ Ht.T + sigma**2 * np.eye(len(H))
    return sum(stats.multivariate_normal(np.zeros(len(H)), C).logpdf(y) for y in Y.T)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 2.0])
def test_marginal_loglik_matches_dense_gaussian(sigma):
    H, Y = np.tanh(RNG.normal(size=(30, 4))), RNG.normal(size=(30, 2))
    s = 1.7
    # Numbers, not variables, as arguments: the graph's own conversion of constants is checked too.
    logp = marginal_loglik(H, Y, s, sigma).eval(mode="FAST_COMPILE")
    assert logp == pytest.approx(dense_marginal(H, Y, s, sigma), rel=1e-10)


def test_marginal_loglik_gradient_matches_finite_differences():
    H, Y = np.tanh(RNG.normal(size=(12, 3))), RNG.normal(size=(12, 2))
    h_var = pt.matrix("H")
    s_var, sigma_var = pt.scalar("s"), pt.scalar("sigma")
    logp = marginal_loglik(h_var, Y, s_var, sigma_var)
    grads = pt.grad(logp, [h_var, s_var, sigma_var])
    grad_fn = compile([h_var, s_var, sigma_var], grads, **FAST)
    s, sigma, h = 0.8, 0.4, 1e-6
    g_H, g_s, g_sigma = grad_fn(H, s, sigma)
    assert g_s == pytest.approx(
        (dense_marginal(H, Y, s + h, sigma) - dense_marginal(H, Y, s - h, sigma)) / (2 * h),
        rel=1e-5,
    )
    assert g_sigma == pytest.approx(
        (dense_marginal(H, Y, s, sigma + h) - dense_marginal(H, Y, s, sigma - h)) / (2 * h),
        rel=1e-5,
    )
    step = np.zeros_like(H)
    step[3, 1] = h
    assert g_H[3, 1] == pytest.approx(
        (dense_marginal(H + step, Y, s, sigma) - dense_marginal(H - step, Y, s, sigma)) / (2 * h),
        rel=1e-5,
    )


# ------------------------------------------------------------------------ the network, end to end
X_111 = np.linspace(-2.0, 2.0, 15)[:, None]
Y_111 = 0.8 * np.tanh(1.5 * X_111 + 0.3) + 0.2 + 0.3 * RNG.normal(size=(15, 1))
NOISE_111 = 0.3


def quadrature_reference():
    """Exact posterior moments of the 1-1-1 network (N(0, 1) weights, known noise) by quadrature
    over the hidden weight ``u`` and bias ``c`` of the dense marginal, the output layer's
    conditional moments added: ``E[u²], E[c²], E[v²], E[d]``."""
    grid = np.linspace(-6.0, 6.0, 241)
    u, c = (a.ravel() for a in np.meshgrid(grid, grid, indexing="ij"))
    n = len(X_111)
    # Every grid point at once: features with the bias column, (points, n, 2).
    H = np.stack([np.tanh(u[:, None] * X_111[:, 0] + c[:, None]), np.ones((len(u), n))], axis=2)
    y = Y_111[:, 0]
    covariance_y = H @ np.swapaxes(H, 1, 2) + NOISE_111**2 * np.eye(n)
    _, log_det = np.linalg.slogdet(covariance_y)
    alpha = np.linalg.solve(covariance_y, np.broadcast_to(y, (len(u), n))[..., None])[..., 0]
    log_post = stats.norm.logpdf(u) + stats.norm.logpdf(c) - 0.5 * (log_det + alpha @ y)
    # The output layer given (u, c): precision HᵀH/σ² + I, mean Σ Hᵀy/σ².
    precision = np.swapaxes(H, 1, 2) @ H / NOISE_111**2 + np.eye(2)
    covariance_w = np.linalg.inv(precision)
    mean_w = (covariance_w @ (np.swapaxes(H, 1, 2) @ y)[..., None])[..., 0] / NOISE_111**2
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    return {
        "u2": float(weights @ u**2),
        "c2": float(weights @ c**2),
        "v2": float(weights @ (mean_w[:, 0] ** 2 + covariance_w[:, 0, 0])),
        "d": float(weights @ mean_w[:, 1]),
    }


@pytest.fixture(scope="module")
def integrated_run():
    with pm.Model() as model:
        net = mlp(X_111, (1, 1, 1), prior="gaussian", output_layer="integrated")
        gaussian_likelihood(net, Y_111, sigma=NOISE_111)
        idata = pm.sample(
            draws=2000,
            tune=1000,
            chains=4,
            cores=1,
            step=StochasticDynamics(alpha=0.9, n_leapfrog=5),
            random_seed=11,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return model, net, idata


@pytest.mark.slow
def test_integrated_output_layer_recovers_the_joint_posterior(integrated_run):
    _, net, idata = integrated_run
    reference = quadrature_reference()
    posterior = idata["posterior"].to_dataset()
    assert "net_w1" not in posterior and "net_b1" not in posterior
    layer = net.sample_output_layer(idata, random_seed=5)
    assert layer["net_w1"].dims == ("chain", "draw", "net_hidden0", "net_out")
    assert layer["net_b1"].dims == ("chain", "draw", "net_out")
    draws = {
        "u2": posterior["net_w0"].values[..., 0, 0] ** 2,
        "c2": posterior["net_b0"].values[..., 0] ** 2,
        "v2": layer["net_w1"].values[..., 0, 0] ** 2,
        "d": layer["net_b1"].values[..., 0],
    }
    for key, values in draws.items():
        error = values.std() / np.sqrt(float(az.ess(values)))
        assert abs(values.mean() - reference[key]) < 4 * error, key


@pytest.mark.slow
def test_integrated_predictions(integrated_run):
    """``predict`` uses each draw's conditional-mean output layer; with drawn output layers
    merged into the posterior it uses those (checked by hand). Per draw, the drawn prediction
    minus the conditional mean is independent zero-mean noise, so its average over the draws is
    within Monte Carlo error of zero."""
    _, net, idata = integrated_run
    X_new = np.array([[-1.0], [0.5]])
    conditional_means = net.predict(idata, X_new).values
    merged = idata["posterior"].to_dataset().merge(net.sample_output_layer(idata, random_seed=3))
    drawn = net.predict(merged, X_new)
    by_hand = (
        np.tanh(merged["net_w0"].values[..., None, 0, 0] * X_new[:, 0] + merged["net_b0"].values)
        * merged["net_w1"].values[..., None, 0, 0]
        + merged["net_b1"].values
    )
    np.testing.assert_allclose(drawn.values[..., 0], by_hand, rtol=1e-12)
    noise = (drawn.values - conditional_means).reshape(-1, len(X_new))
    assert np.all(np.abs(noise.mean(axis=0)) < 4 * noise.std(axis=0) / np.sqrt(len(noise)))
    np.testing.assert_allclose(
        net.predict_mean(idata, X_new).values, conditional_means.mean(axis=(0, 1))
    )


def test_integrated_output_layer_bad_input():
    with pm.Model() as model:
        with pytest.raises(ValueError, match="output_layer must be one of"):
            mlp(X_111, (1, 2, 1), prior="gaussian", output_layer="marginal")
        for kwargs in (
            {"prior": "uniform"},
            {"prior": "gaussian", "output": "softmax"},
            {"prior": "gaussian", "deterministic": True},
        ):
            with pytest.raises(ValueError, match="needs linear outputs, a Gaussian prior"):
                mlp(X_111, (1, 2, 2), output_layer="integrated", **kwargs)
        net = mlp(X_111, (1, 2, 1), prior="group", output_layer="integrated")
        assert net.output is None and net.logits is None and len(net.weights) == 1
        assert not net.targets.attached
        assert set(net.scales) == {"w0", "b0", "out"}
        hidden_draws = xr.Dataset(
            {
                "net_w0": (("chain", "draw", "net_in", "net_hidden0"), np.zeros((1, 3, 1, 2))),
                "net_b0": (("chain", "draw", "net_hidden0"), np.zeros((1, 3, 2))),
            }
        )
        with pytest.raises(ValueError, match="has no targets attached"):
            net.predict(hidden_draws)
        with pytest.raises(ValueError, match="not conjugate"):
            gaussian_likelihood(net, Y_111, sigma="integrated")
        with pytest.raises(ValueError, match="not conjugate"):
            gaussian_likelihood(net, Y_111, D=0.01)
        with pytest.raises(ValueError, match="sigma must be a scalar"):
            gaussian_likelihood(net, Y_111, sigma=np.array([0.1]))
        likelihood = gaussian_likelihood(net, Y_111, sigma=0.2)
        assert net.targets.y is model[f"{likelihood.name}_data"]
        np.testing.assert_array_equal(net.targets.noise_sd, 0.2)
        with pytest.raises(ValueError, match="already has targets"):
            gaussian_likelihood(net, Y_111, sigma=0.2, name="again")
        pm.set_data({"net_X": X_111[:5]})
        with pytest.raises(ValueError, match="predict at new inputs with X_new"):
            net.predict(hidden_draws)
        sampled = mlp(X_111, (1, 2, 1), prior="gaussian", name="plain")
        with pytest.raises(ValueError, match="samples its output layer"):
            sampled.sample_output_layer({})


def test_posterior_predictive_goes_through_predict():
    """``pm.sample_posterior_predictive`` cannot draw the targets of an integrated output layer
    (they are a ``pm.Potential``): it warns and returns nothing. The documented route (the
    ``mlp`` and ``gaussian_likelihood`` docstrings, the dynamics guide) draws each posterior
    draw's output layer from its conditional, then the outputs, then the noise."""
    rng = np.random.default_rng(4)
    X_new = np.array([[-1.0], [0.5]])
    with pm.Model():
        net = mlp(X_111, (1, 2, 1), prior="gaussian", output_layer="integrated")
        gaussian_likelihood(net, Y_111)  # sigma ~ HalfNormal(1), named net_y_sigma
        draws = (2, 200)
        posterior = xr.Dataset(
            {
                "net_w0": (
                    ("chain", "draw", "net_in", "net_hidden0"),
                    rng.normal(size=(*draws, 1, 2)),
                ),
                "net_b0": (("chain", "draw", "net_hidden0"), rng.normal(size=(*draws, 2))),
                "net_y_sigma": (("chain", "draw"), rng.uniform(0.1, 0.3, size=draws)),
            }
        )
        idata = xr.DataTree.from_dict({"posterior": posterior})
        with pytest.warns(UserWarning, match="Potentials .* ignored"):
            predictive = pm.sample_posterior_predictive(idata, progressbar=False)
    assert "net_y" not in predictive.get("posterior_predictive", xr.Dataset())

    # The route as documented.
    layer = net.sample_output_layer(idata, random_seed=1)
    posterior = idata["posterior"].to_dataset().merge(layer)
    outputs = net.predict(posterior, X_new)
    noise = outputs.copy(data=rng.standard_normal(outputs.shape))
    y_new = outputs + posterior["net_y_sigma"] * noise

    assert y_new.dims == ("chain", "draw", "net_obs", "net_out") and y_new.shape == (2, 200, 2, 1)
    # Given a draw, y_new − (conditional-mean prediction) is zero-mean noise.
    error = (y_new - net.predict(idata, X_new)).values.reshape(-1, len(X_new))
    assert np.all(np.abs(error.mean(axis=0)) < 4 * error.std(axis=0) / np.sqrt(len(error)))


def test_predictions_and_output_layers_carry_the_models_labels():
    """Labels the model gives the rows and the hidden units label ``predict`` (on the model's own
    rows) and ``sample_output_layer``: with 0..n-1 instead, the guide's merge of a drawn output
    layer into the posterior padded the hidden units with NaN, and subtracting a prediction from
    the observed data aligned nothing."""
    rows, units = list("abcdef"), list("pqr")
    with pm.Model(coords={"row": rows, "feature": ["x0", "x1"], "net_hidden0": units}):
        X = pm.Data("X", RNG.normal(size=(6, 2)), dims=("row", "feature"))
        net = mlp(X, (2, 3, 2), prior="gaussian", output_layer="integrated")
        gaussian_likelihood(net, RNG.normal(size=(6, 2)), sigma=0.5)
        prior = pm.sample_prior_predictive(draws=3, random_seed=1, compile_kwargs=FAST)
    layer = net.sample_output_layer(prior, random_seed=2, group="prior")
    assert list(layer["net_hidden0"].values) == units
    merged = prior["prior"].to_dataset().merge(layer)
    assert merged.sizes["net_hidden0"] == 3
    outputs = net.predict(merged)
    assert list(outputs["row"].values) == rows and np.isfinite(outputs.values).all()
    assert list(net.predict(merged, np.zeros((2, 2)))["row"].values) == [0, 1]


def test_output_layer_is_conditioned_on_the_recorded_training_data():
    """After ``pm.set_data`` of new inputs with as many rows, the conditional output layer still
    comes from the training data that the DataTree records, not from the new inputs (which it
    silently paired with the old targets)."""
    X, Y = RNG.normal(size=(6, 1)), RNG.normal(size=(6, 1))
    with pm.Model() as model:
        net = mlp(X, (1, 2, 1), prior="gaussian", output_layer="integrated")
        gaussian_likelihood(net, Y, sigma=0.5)
        prior = pm.sample_prior_predictive(draws=3, random_seed=1, compile_kwargs=FAST)
    assert "constant_data" in prior.children
    X_test = np.array([[0.3], [-1.2]])
    before = net.predict(prior, X_test, group="prior").values
    try:
        with model:
            pm.set_data({"net_X": X[::-1] + 1.0})
        np.testing.assert_array_equal(net.predict(prior, X_test, group="prior").values, before)
        with model:
            pm.set_data({"net_X": X[:4]})
        with pytest.raises(ValueError, match="4 rows of X, 6 of y"):
            net.predict(prior["prior"].to_dataset(), X_test)
    finally:
        with model:
            pm.set_data({"net_X": X})


@pytest.mark.filterwarnings("ignore:The effect of Potentials on other parameters")
def test_float32_network_predicts_in_float32():
    """A float32 network's integrated output layer is rebuilt in float64 (a Cholesky solve per
    draw), but what the user gets carries the network's dtype, as its sampled weights do: the
    conditional-mean predictions, the drawn output layer and the predictions with it were
    float64. They agree with the float64 computation to float32 rounding."""
    X, Y = RNG.normal(size=(6, 1)), RNG.normal(size=(6, 1))
    X_new = np.array([[0.3], [-1.2]])  # float64, as users pass them
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model():
            net = mlp(X.astype("float32"), (1, 2, 1), prior="gaussian", output_layer="integrated")
            gaussian_likelihood(net, Y.astype("float32"), sigma=0.5)
            prior = pm.sample_prior_predictive(draws=3, random_seed=1, compile_kwargs=FAST)
    assert prior["prior"]["net_w0"].dtype == np.float32
    layer = net.sample_output_layer(prior, random_seed=2, group="prior")
    assert layer["net_w1"].dtype == np.float32 and layer["net_b1"].dtype == np.float32
    merged = prior["prior"].to_dataset().merge(layer)
    for predictions in (
        net.predict(prior, group="prior"),
        net.predict(prior, X_new, group="prior"),
        net.predict(merged),
        net.predict(merged, X_new),
    ):
        assert predictions.dtype == np.float32
    # The float64 layers of the same draws, by hand: the cast is the only difference.
    w0, b0, w1, b1 = (merged[f"net_{v}"].values.astype(float) for v in ("w0", "b0", "w1", "b1"))
    hidden = np.tanh(np.einsum("ri,cdih->cdrh", X_new, w0) + b0[..., None, :])
    by_hand = np.einsum("cdrh,cdho->cdro", hidden, w1) + b1[..., None, :]
    np.testing.assert_allclose(net.predict(merged, X_new).values, by_hand, rtol=1e-6)
