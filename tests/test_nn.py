"""Tests for pymc_sfp.nn: network structure, prior and likelihood densities, prediction, errors.

Densities are checked against hand computations with scipy.stats at fixed points. Compiled graphs
are few and shared through module-scoped models: one with a network per prior, one with every
likelihood, one for predictions (its data are changed with ``pm.set_data``) and one tiny fit.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from pymc.logprob.transforms import IntervalTransform, LogTransform
from scipy import special, stats

from pymc_sfp import SFPStep, StochasticDynamics
from pymc_sfp.nn import NEAL_M0, NEAL_S0, PRIORS, categorical_likelihood, gaussian_likelihood, mlp

RNG = np.random.default_rng(20260101)
X6 = RNG.normal(size=(6, 2))
X9 = RNG.normal(size=(9, 2))
Y6 = RNG.normal(size=(6, 2))
LABELS6 = np.array([0, 2, 1, 1, 0, 2])
# The Python VM: these tests check graphs, not backends, and Numba's first (cold-cache) compile of
# every new graph costs tens of seconds.
FAST = {"mode": "FAST_COMPILE"}
# Prior scale of each network in the prior-density model.
PRIOR_SCALES = {"uniform": 1.0, "gaussian": 0.7, "group": 0.5, "ard": 1.3}


def forward(X, weights, biases, softmax=False):
    """The network by hand, for one set of weights."""
    h = X
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        h = h @ W + b
        if layer < len(weights) - 1:
            h = np.tanh(h)
    return special.softmax(h, axis=-1) if softmax else h


def random_point(model, rng):
    """Random constrained values of every free variable, and the matching value-variable point.

    Interval-transformed variables must be ``U(-1, 1)``; log-transformed ones get values in
    ``[0.2, 1.5]``.
    """
    point, values = {}, {}
    for rv in model.free_RVs:
        shape = model.shape_from_dims(model.named_vars_to_dims.get(rv.name, ()))
        transform = model.rvs_to_transforms[rv]
        if isinstance(transform, LogTransform):
            x = rng.uniform(0.2, 1.5, size=shape)
            value = np.log(x)
        else:
            x = rng.uniform(-0.9, 0.9, size=shape)
            value = np.log1p(x) - np.log1p(-x) if isinstance(transform, IntervalTransform) else x
        point[rv.name] = x
        values[model.rvs_to_values[rv].name] = value
    return point, values


def layer_values(point, name, n_layers):
    return [point[f"{name}_w{i}"] for i in range(n_layers)], [
        point[f"{name}_b{i}"] for i in range(n_layers)
    ]


# --- structure ------------------------------------------------------------------------------------


@pytest.mark.parametrize("prior", PRIORS)
def test_dims_coords_and_variables(prior):
    with pm.Model() as model:
        net = mlp(X6, (2, 4, 3, 2), prior=prior, prior_scale=0.5)
    unit_dims = ("net_in", "net_hidden0", "net_hidden1", "net_out")
    assert net.unit_dims == unit_dims
    assert [len(model.coords[d]) for d in unit_dims] == [2, 4, 3, 2]
    assert model.named_vars_to_dims["net_X"] == ("net_obs", "net_in")
    assert net.X is model["net_X"] and net.obs_dim == "net_obs"
    for layer in range(3):
        w_dims = unit_dims[layer : layer + 2]
        assert model.named_vars_to_dims[f"net_w{layer}"] == w_dims
        assert model.named_vars_to_dims[f"net_b{layer}"] == w_dims[1:]
        assert model.shape_from_dims(w_dims) == ((2, 4, 3, 2)[layer], (2, 4, 3, 2)[layer + 1])
        assert net.weights[layer] is model[f"net_w{layer}"]
        assert net.biases[layer] is model[f"net_b{layer}"]
    free = {rv.name: rv.owner.op.name for rv in model.free_RVs}
    params = [f"net_{kind}{layer}" for layer in range(3) for kind in "wb"]
    if prior in ("uniform", "gaussian"):
        assert free == dict.fromkeys(params, "uniform" if prior == "uniform" else "normal")
        assert net.scales == {}
        assert not model.deterministics
    else:
        groups = ["w0", "b0", "w1", "b1", "out"]
        assert free == {
            **{f"net_sd_{g}": "halfnormal" for g in groups},
            **{f"{p}_z": "normal" for p in params},
        }
        assert {g: v.name for g, v in net.scales.items()} == {g: f"net_sd_{g}" for g in groups}
        assert {v.name for v in model.deterministics} == set(params)
        assert model.named_vars_to_dims.get("net_sd_w0") == (
            ("net_in",) if prior == "ard" else None
        )
    assert net.output.ndim == 2 and net.logits is net.output


def test_existing_data_container_keeps_its_dims_and_coords():
    features = ["angle", "speed", "load"]
    with pm.Model(coords={"feature": features}) as model:
        X = pm.Data("inputs", RNG.normal(size=(5, 3)), dims=("case", "feature"))
        net = mlp(X, (3, 2, 2), output="softmax", name="clf", deterministic=True)
    assert net.X is X and net.obs_dim == "case"
    assert model.coords["feature"] == tuple(features)
    assert model.named_vars_to_dims["clf_w0"] == ("feature", "clf_hidden0")
    assert model.named_vars_to_dims["clf_output"] == ("case", "clf_out")
    assert net.output is model["clf_output"] and net.logits is not net.output


# --- prior densities ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prior_logps():
    """Prior log-density terms of four tiny 2-2-1 networks, one per prior, at a random point."""
    with pm.Model() as model:
        for prior, scale in PRIOR_SCALES.items():
            mlp(X6, (2, 2, 1), prior=prior, prior_scale=scale, name=prior)
    point, values = random_point(model, np.random.default_rng(1))
    terms = model.compile_logp(vars=model.free_RVs, jacobian=False, sum=False, **FAST)(values)
    logps = {rv.name: np.sum(term) for rv, term in zip(model.free_RVs, terms, strict=True)}
    return point, logps


@pytest.mark.parametrize("prior", PRIORS)
def test_prior_logp_matches_scipy(prior_logps, prior):
    point, logps = prior_logps
    scale = PRIOR_SCALES[prior]
    names = [n for n in logps if n.startswith(f"{prior}_")]
    if prior == "uniform":
        expected = sum(stats.uniform(-scale, 2 * scale).logpdf(point[n]).sum() for n in names)
        assert len(names) == 4
    elif prior == "gaussian":
        expected = sum(stats.norm(0, scale).logpdf(point[n]).sum() for n in names)
        assert len(names) == 4
    else:
        sds = [n for n in names if "_sd_" in n]
        zs = [n for n in names if n.endswith("_z")]
        assert len(sds) == 3 and len(zs) == 4 and len(names) == 7
        assert point[f"{prior}_sd_w0"].shape == ((2,) if prior == "ard" else ())
        expected = sum(stats.halfnorm(scale=scale).logpdf(point[n]).sum() for n in sds) + sum(
            stats.norm().logpdf(point[n]).sum() for n in zs
        )
    assert sum(logps[n] for n in names) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("prior", ["group", "ard"])
def test_centred_hierarchical_prior_samples_the_weights_themselves(prior):
    with pm.Model() as model:
        net = mlp(X6, (2, 3, 1), prior=prior, prior_scale=0.8, centred=True)
    free = {rv.name for rv in model.free_RVs}
    params = {f"net_{kind}{layer}" for layer in range(2) for kind in "wb"}
    assert free == params | {"net_sd_w0", "net_sd_b0", "net_sd_out"}
    assert not model.deterministics
    assert all(w is model[w.name] for w in (*net.weights, *net.biases))
    point, values = random_point(model, np.random.default_rng(2))
    logp = model.compile_logp(jacobian=False, **FAST)(values)
    sd_w0 = np.atleast_1d(point["net_sd_w0"])[:, None]  # ARD: one scale per input row
    expected = (
        sum(stats.halfnorm(scale=0.8).logpdf(point[f"net_sd_{g}"]).sum() for g in ("w0", "b0"))
        + stats.halfnorm(scale=0.8).logpdf(point["net_sd_out"])
        + stats.norm(0, sd_w0).logpdf(point["net_w0"]).sum()
        + stats.norm(0, point["net_sd_b0"]).logpdf(point["net_b0"]).sum()
        + stats.norm(0, point["net_sd_out"]).logpdf(point["net_w1"]).sum()
        + stats.norm(0, point["net_sd_out"]).logpdf(point["net_b1"]).sum()
    )
    assert logp == pytest.approx(expected, rel=1e-12)
    posterior = xr.Dataset(
        {
            name: (("chain", "draw", *(model.named_vars_to_dims.get(name) or ())), v[None, None])
            for name, v in point.items()
        }
    )
    weights = [point["net_w0"], point["net_w1"]]
    biases = [point["net_b0"], point["net_b1"]]
    np.testing.assert_allclose(
        net.predict(posterior, X9).values[0, 0], forward(X9, weights, biases), rtol=1e-12
    )


def test_centred_needs_a_hierarchical_prior():
    with pm.Model(), pytest.raises(ValueError, match=r"centred=True applies to .* not 'uniform'"):
        mlp(X6, (2, 3, 1), centred=True)


# --- likelihoods ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def likelihood_logps():
    """Every likelihood term on one regression and one softmax network, at a random point."""
    with pm.Model() as model:
        reg = mlp(X6, (2, 3, 2), prior="gaussian", name="reg")
        clf = mlp(X6, (2, 3, 3), output="softmax", name="clf")
        terms = {
            "known": gaussian_likelihood(reg, Y6, sigma=0.3, name="known"),
            "free": gaussian_likelihood(reg, Y6, name="free"),
            "free_sigma": model["free_sigma"],
            "neal": gaussian_likelihood(reg, Y6, sigma="integrated", name="neal"),
            "eq23": gaussian_likelihood(reg, Y6, D=0.01, name="eq23"),
            "labels": categorical_likelihood(clf, LABELS6, name="labels"),
        }
    point, values = random_point(model, np.random.default_rng(2))
    logp = model.compile_logp(vars=list(terms.values()), jacobian=False, sum=False, **FAST)(values)
    F_reg = forward(X6, *layer_values(point, "reg", 2))
    P_clf = forward(X6, *layer_values(point, "clf", 2), softmax=True)
    return dict(zip(terms, map(np.sum, logp), strict=True)), point, F_reg, P_clf


def test_gaussian_known_and_free_sigma(likelihood_logps):
    logps, point, F, _ = likelihood_logps
    assert logps["known"] == pytest.approx(stats.norm(F, 0.3).logpdf(Y6).sum(), rel=1e-12)
    sigma = point["free_sigma"]
    assert logps["free"] == pytest.approx(stats.norm(F, sigma).logpdf(Y6).sum(), rel=1e-12)
    assert logps["free_sigma"] == pytest.approx(stats.halfnorm().logpdf(sigma), rel=1e-12)


def test_neal_integrated_noise_eq3(likelihood_logps):
    logps, _, F, _ = likelihood_logps
    n, K = Y6.shape
    expected = -(NEAL_M0 + n * K) / 2 * np.log(NEAL_S0 + np.sum((Y6 - F) ** 2))
    assert logps["neal"] == pytest.approx(expected, rel=1e-12)


def test_berrones_cold_quadratic_loss_eq23(likelihood_logps):
    logps, _, F, _ = likelihood_logps
    expected = -np.sum((Y6 - F) ** 2) / (0.01 * len(Y6))
    assert logps["eq23"] == pytest.approx(expected, rel=1e-12)


def test_categorical_softmax(likelihood_logps):
    logps, _, _, P = likelihood_logps
    expected = np.log(P[np.arange(len(LABELS6)), LABELS6]).sum()
    assert logps["labels"] == pytest.approx(expected, rel=1e-12)


# --- prediction -----------------------------------------------------------------------------------


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


def hand_predictions(posterior, name, n_layers, X, softmax=False):
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


def test_predict_matches_hand_computation(prediction_setup):
    _, nets, idata = prediction_setup
    posterior = idata["posterior"].to_dataset()
    reg = nets["reg"].predict(idata, X9)
    assert reg.dims == ("chain", "draw", "reg_obs", "reg_out") and reg.shape == (2, 2, 9, 2)
    expected = hand_predictions(posterior, "reg", 3, X9)
    np.testing.assert_allclose(reg.values, expected, rtol=1e-12)
    # Eq. 17: the prediction is the average of F over the draws.
    mean = nets["reg"].predict_mean(idata, X9)
    assert mean.dims == ("reg_obs", "reg_out")
    np.testing.assert_allclose(mean.values, expected.mean(axis=(0, 1)), rtol=1e-12)

    probs = nets["clf"].predict(posterior, X9)  # a Dataset works too
    np.testing.assert_allclose(
        probs.values, hand_predictions(posterior, "clf", 2, X9, softmax=True), rtol=1e-12
    )
    np.testing.assert_allclose(probs.sum("clf_out").values, 1.0)
    # Without X_new: the model's current inputs.
    np.testing.assert_allclose(
        nets["clf"].predict_mean(idata).values,
        hand_predictions(posterior, "clf", 2, X6, softmax=True).mean(axis=(0, 1)),
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


# --- a tiny fit -----------------------------------------------------------------------------------


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


# --- errors ---------------------------------------------------------------------------------------


def test_mismatched_rows_and_columns():
    with pm.Model():
        net = mlp(X6, (2, 3, 2))
        with pytest.raises(ValueError, match="y has 5 rows but X has 6"):
            gaussian_likelihood(net, Y6[:5])
        with pytest.raises(ValueError, match=r"y must have shape \(n, 2\)"):
            gaussian_likelihood(net, Y6[:, 0])
        with pytest.raises(ValueError, match="X_new has 3 columns but the network has 2 inputs"):
            net.predict(xr.Dataset(), np.zeros((4, 3)))
        with pytest.raises(ValueError, match="either sigma or D"):
            gaussian_likelihood(net, Y6, sigma=1.0, D=0.1)
        with pytest.raises(ValueError, match="sigma must be finite and > 0"):
            gaussian_likelihood(net, Y6, sigma=-1.0)
        with pytest.raises(ValueError, match="D must be finite and > 0"):
            gaussian_likelihood(net, Y6, D=0.0)
        with pytest.raises(ValueError, match="samples hold no variable 'net_w0'"):
            net.predict(xr.Dataset(), X6)


def test_nan_rows_are_named():
    X = X6.copy()
    X[[1, 4], 0] = np.nan
    with pm.Model(), pytest.raises(ValueError, match=r"X has NaN .* 2 row\(s\): \[1, 4\]"):
        mlp(X, (2, 3, 1))
    Y = np.zeros((20, 1))
    Y[3:10] = np.nan
    with pm.Model():
        net = mlp(RNG.normal(size=(20, 2)), (2, 3, 1))
        with pytest.raises(ValueError, match=r"y has NaN .* 7 row\(s\): \[3, 4, 5, 6, 7, \.\.\.\]"):
            gaussian_likelihood(net, Y)
        with pytest.raises(ValueError, match=r"X_new has NaN .* \[0\]"):
            net.predict(xr.Dataset(), np.array([[np.nan, 1.0]]))


def test_bad_network_arguments():
    with pm.Model():
        with pytest.raises(ValueError, match=r"prior must be one of \('uniform', 'gaussian', "):
            mlp(X6, (2, 3, 1), prior="laplace")
        with pytest.raises(ValueError, match="output must be one of"):
            mlp(X6, (2, 3, 1), output="sigmoid")
        with pytest.raises(ValueError, match=r"layer_sizes\[0\] = 3 must equal .* columns of X, 2"):
            mlp(X6, (3, 3, 1))
        with pytest.raises(ValueError, match="at least three positive integers"):
            mlp(X6, (2, 1))
        with pytest.raises(ValueError, match="at least three positive integers"):
            mlp(X6, (2, 0, 1))
        with pytest.raises(ValueError, match="softmax outputs need"):
            mlp(X6, (2, 3, 1), output="softmax")
        with pytest.raises(ValueError, match="prior_scale must be finite"):
            mlp(X6, (2, 3, 1), prior_scale=0.0)
        with pytest.raises(ValueError, match="must be 2-D"):
            mlp(X6[:, 0], (1, 3, 1))
        with pytest.raises(ValueError, match="X has no rows"):
            mlp(np.zeros((0, 2)), (2, 3, 1))
    with pm.Model(coords={"net_hidden0": ["a", "b"]}), pytest.raises(ValueError, match="length 2"):
        mlp(X6, (2, 3, 1))


def test_bad_labels_are_named():
    with pm.Model():
        net = mlp(X6, (2, 3, 3), output="softmax")
        with pytest.raises(
            ValueError, match=r"integer labels in 0\.\.2; .* 3 row\(s\): \[1, 3, 5\]"
        ):
            categorical_likelihood(net, [0, 3, 1, -1, 2, 1.5])
        with pytest.raises(ValueError, match=r"y has NaN .* \[2\]"):
            categorical_likelihood(net, [0, 1, np.nan, 1, 2, 0])
        with pytest.raises(ValueError, match="y has 5 rows but X has 6"):
            categorical_likelihood(net, [0, 1, 2, 1, 0])
        regression = mlp(X6, (2, 3, 3), name="reg")
        with pytest.raises(ValueError, match="output='softmax'"):
            categorical_likelihood(regression, LABELS6)
