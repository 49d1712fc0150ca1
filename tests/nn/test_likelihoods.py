"""Tests for pymc_sfp.nn.likelihoods: every likelihood term against a hand computation at a random
point, and the checks of targets and labels.

One model holds every likelihood, compiled once (module-scoped fixture), in PyTensor's Python VM:
these tests check graphs, not backends.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytest
import xarray as xr
from scipy import stats

from pymc_sfp.nn import NEAL_M0, NEAL_S0, categorical_likelihood, gaussian_likelihood, mlp

RNG = np.random.default_rng(20260101)
X6 = RNG.normal(size=(6, 2))
Y6 = RNG.normal(size=(6, 2))
LABELS6 = np.array([0, 2, 1, 1, 0, 2])
FAST = {"mode": "FAST_COMPILE"}


def layer_values(point, name, n_layers):
    return [point[f"{name}_w{i}"] for i in range(n_layers)], [
        point[f"{name}_b{i}"] for i in range(n_layers)
    ]


@pytest.fixture(scope="module")
def likelihood_logps(forward, random_point):
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
        with pytest.raises(ValueError, match="D must be a finite number > 0"):
            gaussian_likelihood(net, Y6, D=0.0)
        with pytest.raises(TypeError, match="D must be a real number"):
            gaussian_likelihood(net, Y6, D="0.1")
        with pytest.raises(ValueError, match="samples hold no variable 'net_w0'"):
            net.predict(xr.Dataset(), X6)


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


@pytest.mark.parametrize(
    "kwargs", [{"sigma": 0.3}, {"D": 0.01}, {}], ids=["gaussian", "eq23", "categorical"]
)
def test_minibatch_likelihood_is_unbiased(kwargs, forward, random_point):
    """The batch estimate averages to the full likelihood: a batch that was not scaled up by
    n / batch_size (3 here), or rows of X paired with other rows of y, miss it by far more than
    the Monte Carlo error."""
    with pm.Model() as model:
        if kwargs:
            net = mlp(X6, (2, 3, 2), prior="gaussian")
            term = gaussian_likelihood(net, Y6, batch_size=2, **kwargs)
        else:
            net = mlp(X6, (2, 3, 3), prior="gaussian", output="softmax")
            term = categorical_likelihood(net, LABELS6, batch_size=2)
    assert not model.named_vars_to_dims.get(term.name)
    point, values = random_point(model, np.random.default_rng(3))
    logp = model.compile_logp(vars=[term], jacobian=False, **FAST)
    draws = np.array([logp(values) for _ in range(20_000)])
    F = forward(X6, *layer_values(point, "net", 2), softmax=not kwargs)
    if "D" in kwargs:
        full = -np.sum((Y6 - F) ** 2) / (kwargs["D"] * len(Y6))
    elif "sigma" in kwargs:
        full = stats.norm(F, kwargs["sigma"]).logpdf(Y6).sum()
    else:
        full = np.log(F[np.arange(len(LABELS6)), LABELS6]).sum()
    assert np.ptp(draws) > 0
    assert abs(draws.mean() - full) < 4 * draws.std() / np.sqrt(len(draws))


def test_minibatch_likelihood_refusals():
    with pm.Model():
        net = mlp(X6, (2, 3, 2), prior="gaussian")
        with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
            gaussian_likelihood(net, Y6, batch_size=0)
        with pytest.raises(TypeError, match="batch_size must be a positive integer"):
            gaussian_likelihood(net, Y6, batch_size="2")
        with pytest.raises(ValueError, match="batch_size must be at most the 6 rows, got 7"):
            gaussian_likelihood(net, Y6, batch_size=7)
        with pytest.raises(ValueError, match="sum over the rows"):
            gaussian_likelihood(net, Y6, sigma="integrated", batch_size=2)
        with pytest.raises(ValueError, match="not those of sigma"):
            gaussian_likelihood(net, Y6, sigma=np.ones((6, 2)), batch_size=2)
    with pm.Model():
        net = mlp(X6, (2, 3, 2), prior="gaussian", output_layer="integrated")
        with pytest.raises(ValueError, match="sum over the rows"):
            gaussian_likelihood(net, Y6, sigma=0.3, batch_size=2)
    with pm.Model():
        net = mlp(X6, (2, 3, 3), output="softmax")
        with pytest.raises(ValueError, match="batch_size must be at most the 6 rows, got 7"):
            categorical_likelihood(net, LABELS6, batch_size=7)
        with pytest.raises(TypeError, match="batch_size must be a positive integer"):
            categorical_likelihood(net, LABELS6, batch_size=2.0j)


@pytest.mark.parametrize(
    "kwargs",
    [{"sigma": 0.5}, {"sigma": "integrated"}, {"D": 0.01}, {"output_layer": "integrated"}],
    ids=["gaussian", "neal", "eq23", "integrated-layer"],
)
def test_float32_models_stay_float32(kwargs):
    """Row counts and constants in floatX: an int64 shape or a float64 constant turned float32
    log-densities and gradients into float64."""
    kwargs = dict(kwargs)
    output_layer = kwargs.pop("output_layer", "sampled")
    with pytensor.config.change_flags(floatX="float32"), pm.Model() as model:
        net = mlp(X6, (2, 3, 2), prior="group", output_layer=output_layer)
        gaussian_likelihood(net, Y6, **(kwargs or {"sigma": 0.5}))
        assert model.logp().dtype == "float32"
        assert model.dlogp().dtype == "float32"


def test_minibatch_scale_follows_new_training_rows(forward, random_point):
    """``pm.set_data`` of another training set (9 rows instead of 6) keeps the batch estimate
    unbiased: a scale fixed at the rows the likelihood was built with was 6/9 of the right one."""
    X9, Y9 = RNG.normal(size=(9, 2)), RNG.normal(size=(9, 2))
    with pm.Model() as model:
        net = mlp(X6, (2, 3, 2), prior="gaussian")
        term = gaussian_likelihood(net, Y6, sigma=0.3, batch_size=2)
        pm.set_data({"net_X": X9, "net_y_data": Y9})
    point, values = random_point(model, np.random.default_rng(4))
    logp = model.compile_logp(vars=[term], jacobian=False, **FAST)
    draws = np.array([logp(values) for _ in range(20_000)])
    full = stats.norm(forward(X9, *layer_values(point, "net", 2)), 0.3).logpdf(Y9).sum()
    assert abs(draws.mean() - full) < 4 * draws.std() / np.sqrt(len(draws))
