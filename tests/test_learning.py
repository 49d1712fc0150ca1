"""Tests for pymc_sfp.learning: SFP-MLE (Eq. 18), marginal priors (Eq. 21), SFP-I (Eq. 22).

Known marginals are built from Beta CDFs on [-1, 1], so modes and means have closed forms. Two
graphs are compiled for the sampler (the incremental learner's and the glass network's); the
density checks use PyTensor's Python VM.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytest
import xarray as xr
from scipy import stats

from pymc_sfp import Marginal, SFPStep, datasets
from pymc_sfp.learning import (
    IncrementalSFP,
    MLEPredictor,
    interpolated_log_density,
    log_density_table,
    marginal_prior,
    sfp_mle,
)
from pymc_sfp.nn import gaussian_likelihood, mlp

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FAST = "FAST_COMPILE"
RNG = np.random.default_rng(20260102)
GRID = np.linspace(-1.0, 1.0, 100)  # SFPStep's default recording grid of a U(-1, 1) weight


def beta_on_box(a: float, b: float):
    """Beta(a, b) stretched to [-1, 1]."""
    return stats.beta(a, b, loc=-1.0, scale=2.0)


def tiny_network(output="linear", sizes=(3, 4, 2), prior="uniform"):
    with pm.Model() as model:
        network = mlp(RNG.normal(size=(5, sizes[0])), sizes, output=output, prior=prior)
    return model, network


def one_draw(network, weights, biases):
    """A posterior Dataset holding the given weights as draws (leading axis = draws)."""
    data = {}
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        dims = network.unit_dims[layer : layer + 2]
        data[network.weights[layer].name] = (("chain", "draw", *dims), np.asarray(W)[None, None])
        data[network.biases[layer].name] = (("chain", "draw", dims[1]), np.asarray(b)[None, None])
    return xr.Dataset(data)


def random_predictor(network, rng, shift=0.0):
    modes_w = [
        rng.uniform(-1, 1, size=W)
        for W in zip(network.layer_sizes, network.layer_sizes[1:], strict=False)
    ]
    modes_b = [rng.uniform(-1, 1, size=n) for n in network.layer_sizes[1:]]
    means_w = [W + shift * rng.normal(size=W.shape) for W in modes_w]
    means_b = [b + shift * rng.normal(size=b.shape) for b in modes_b]
    return MLEPredictor(
        tuple(modes_w), tuple(modes_b), tuple(means_w), tuple(means_b), network.output_type
    )


# ------------------------------------------------------------------------------------ SFP-MLE


@pytest.mark.parametrize("output", ["linear", "softmax"])
def test_mle_predictor_is_the_network_at_the_modes_when_means_equal_modes(output):
    _, network = tiny_network(output)
    predictor = random_predictor(network, np.random.default_rng(1), shift=0.0)
    X = RNG.normal(size=(7, 3))
    draw = one_draw(network, predictor.weights, predictor.biases)
    at_modes = network.predict(draw, X).values[0, 0]
    np.testing.assert_allclose(predictor.predict(X, first_order=False), at_modes, rtol=1e-12)
    np.testing.assert_allclose(predictor.predict(X), at_modes, rtol=1e-12)


@pytest.mark.parametrize("output", ["linear", "softmax"])
def test_mle_first_order_term_is_the_directional_derivative(output):
    _, network = tiny_network(output)
    predictor = random_predictor(network, np.random.default_rng(2), shift=0.3)
    X = RNG.normal(size=(7, 3))
    jvp = predictor.predict(X) - predictor.predict(X, first_order=False)
    assert np.abs(jvp).max() > 1e-2  # a real correction

    def central_difference(h):
        def shifted(sign):
            weights = [
                W + sign * h * (M - W)
                for W, M in zip(predictor.weights, predictor.weight_means, strict=True)
            ]
            biases = [
                b + sign * h * (M - b)
                for b, M in zip(predictor.biases, predictor.bias_means, strict=True)
            ]
            return network.predict(one_draw(network, weights, biases), X).values[0, 0]

        return (shifted(1) - shifted(-1)) / (2 * h)

    coarse, fine = central_difference(1e-3), central_difference(5e-4)
    # O(h²) truncation: the error of `fine` is about |coarse - fine| / 3; allow 2× that plus
    # rounding (~1e-16 / h).
    tolerance = 2 * np.abs(coarse - fine) / 3 + 1e-11
    assert np.all(np.abs(jvp - fine) <= tolerance)


def test_mle_predictor_rejects_bad_input():
    _, network = tiny_network()
    predictor = random_predictor(network, np.random.default_rng(3))
    with pytest.raises(ValueError, match="3"):
        predictor.predict(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="NaN"):
        predictor.predict(np.array([[0.0, np.nan, 1.0]]))
    with pytest.raises(ValueError, match="layer 1"):
        MLEPredictor(
            (predictor.weights[0], np.zeros((5, 2))),
            predictor.biases,
            predictor.weight_means,
            predictor.bias_means,
        )


def known_marginal_tree(network, shapes_ab):
    """sample_stats with conditional CDFs = Beta CDFs (the marginals are then those Betas)."""
    data = {}
    for var, (a, b) in shapes_ab.items():
        cdf = np.broadcast_to(beta_on_box(a, b).cdf(GRID), (*var_shape(network, var), len(GRID)))
        grid = np.broadcast_to(GRID, cdf.shape)
        dims = tuple(f"{var.name}_d{j}" for j in range(cdf.ndim))
        data[f"sfp_cdf__{var.name}"] = (("chain", "draw", *dims), cdf[None, None])
        data[f"sfp_grid__{var.name}"] = (("chain", "draw", *dims), grid[None, None])
    return xr.DataTree.from_dict({"sample_stats": xr.Dataset(data)})


def var_shape(network, var):
    sizes = network.layer_sizes
    for layer, (W, b) in enumerate(zip(network.weights, network.biases, strict=True)):
        if var is W:
            return sizes[layer], sizes[layer + 1]
        if var is b:
            return (sizes[layer + 1],)
    raise KeyError(var)


def test_sfp_mle_modes_and_means_of_known_marginals():
    _, network = tiny_network(sizes=(1, 2, 1))
    ab = [(3.0, 5.0), (2.5, 2.0), (6.0, 3.0), (4.0, 4.0)]
    params = (*network.weights, *network.biases)
    tree = known_marginal_tree(network, dict(zip(params, ab, strict=True)))
    predictor = sfp_mle(tree, network)
    dense = np.linspace(-1, 1, 200_001)
    got_modes = (*predictor.weights, *predictor.biases)
    got_means = (*predictor.weight_means, *predictor.bias_means)
    for (a, b), mode, mean in zip(ab, got_modes, got_means, strict=True):
        true = beta_on_box(a, b)
        brute_true = dense[np.argmax(true.pdf(dense))]
        assert brute_true == pytest.approx(-1 + 2 * (a - 1) / (a + b - 2), abs=1e-5)
        # The CDF is known on a grid 2/99 apart: the mode is found to within a fraction of it.
        np.testing.assert_allclose(mode, brute_true, atol=0.25 * (GRID[1] - GRID[0]))
        # ... and is the global peak of the recorded marginal's density, not a local one.
        marginal = Marginal(GRID, true.cdf(GRID))
        assert np.all(marginal.pdf(mode) > 0.99 * marginal.pdf(dense).max())
        # Midpoint rule over the CDF increments: O(h²) error.
        np.testing.assert_allclose(mean, true.mean(), atol=1e-3)


def test_sfp_mle_needs_sampled_weights():
    _, network = tiny_network(prior="group")
    with pytest.raises(ValueError, match="prior='uniform'"):
        sfp_mle(xr.DataTree(), network)


# ------------------------------------------------------------------------- marginal prior


def test_marginal_prior_reproduces_the_marginals_log_densities():
    ab = np.array([[(3.0, 5.0), (2.5, 2.0), (6.0, 3.0)], [(1.5, 1.5), (4.0, 8.0), (2.0, 2.0)]])
    marginals = np.empty((2, 3), dtype=object)
    for index in np.ndindex(2, 3):
        marginals[index] = Marginal(GRID, beta_on_box(*ab[index]).cdf(GRID))
    with pm.Model() as model:
        w = pm.Uniform("w", -1, 1, shape=(2, 3))
        potential = marginal_prior(w, marginals, floor=0.0)

    points = RNG.uniform(-0.95, 0.95, size=(50, 2, 3))
    expected = np.log(np.vectorize(lambda m, x: float(m.pdf(x)), otypes=[float])(marginals, points))
    lower, upper, table = log_density_table(marginals, points=257, floor=0.0)
    value = pytensor.tensor.tensor3("value")
    elementwise = pytensor.function(
        [value], interpolated_log_density(value, lower, upper, table), mode=FAST
    )
    error = np.abs(elementwise(points) - expected)
    # As a prior what matters is the density: the tabulated one must be within 1e-3 of the
    # marginal's in total variation (linear interpolation of log p, 257 points; the PCHIP density
    # of a 100-point CDF has kinks at its nodes, so pointwise log errors in the far tails, where
    # p is ~1e-8, can reach 0.4 without mattering).
    dense = np.linspace(-1, 1, 20_001)
    stacked = np.broadcast_to(dense[:, None, None], (len(dense), 2, 3))
    tabulated = np.exp(elementwise(np.ascontiguousarray(stacked)))
    recorded = np.stack([np.vectorize(lambda m, x=x: float(m.pdf(x)))(marginals) for x in dense])
    total_variation = 0.5 * np.trapezoid(np.abs(tabulated - recorded), dense, axis=0)
    assert total_variation.max() < 1e-3
    assert np.isfinite(error).all()
    assert np.median(error) < 2e-4

    # In the model: the potential is the sum, the uniform prior adds only a constant.
    logp_fn = model.compile_fn(potential, inputs=[w], mode=FAST)
    for point, row in zip(points[:5], expected[:5], strict=True):
        assert float(logp_fn({"w": point})) == pytest.approx(row.sum(), abs=6 * 5e-3)

    # Beyond the ranges: zero density; the floor keeps empty tails finite.
    assert np.isneginf(elementwise(np.full((1, 2, 3), 1.5))).all()
    spike = Marginal(GRID, (GRID > 0.2).astype(float))
    _, _, floored = log_density_table(np.array([spike], dtype=object), floor=1e-6)
    assert np.isfinite(floored).all() and floored.min() == pytest.approx(np.log(1e-6 / 2))


def test_marginal_prior_shape_must_match():
    with pm.Model():
        w = pm.Uniform("w", -1, 1, shape=3)
        with pytest.raises(ValueError, match="shape"):
            marginal_prior(w, np.full(4, Marginal(GRID, (GRID + 1) / 2), dtype=object))


# --------------------------------------------------------------------------------- SFP-I


def sine_data(n, rng):
    X = rng.uniform(-2, 2, size=(n, 1))
    return X, np.sin(1.5 * X[:, 0]) + 0.1 * rng.normal(size=n)


@pytest.fixture(scope="module")
def incremental():
    rng = np.random.default_rng(7)
    X, y = sine_data(70, rng)
    X_test = np.linspace(-2, 2, 41)[:, None]
    learner = IncrementalSFP((1, 5, 1), D=0.01, L=40, window=10, random_seed=1)
    learner.fit(X[:10], y[:10], sweeps=30, discard=10)
    mse_initial = np.mean((learner.predict(X_test)[:, 0] - np.sin(1.5 * X_test[:, 0])) ** 2)
    return learner, X, y, X_test, mse_initial


def test_incremental_learner_runs_without_recompiling(incremental, monkeypatch):
    learner, X, y, X_test, mse_initial = incremental
    compiled = []
    original = pytensor.function

    def counting(*args, **kwargs):
        compiled.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(pytensor, "function", counting)
    step = learner.step
    n_draws = len(learner.draws)
    learner.partial_fit(X[10:], y[10:])
    assert compiled == []
    assert learner.step is step
    assert learner.n_data == 70 and len(learner.draws) == n_draws + 60
    assert len(learner.sweep_seconds) == 60
    # A recompilation costs seconds; a sweep of 16 weights costs ~20 ms whatever the data size.
    assert max(learner.sweep_seconds) < 1.0

    mse_final = np.mean((learner.predict(X_test)[:, 0] - np.sin(1.5 * X_test[:, 0])) ** 2)
    # Measured with random_seed 1, 2, 3: final / initial = 0.74, 0.83, 0.80. The gain is modest
    # because the prior learned from the first 10 points stays fixed (Eq. 22).
    assert mse_final < 0.9 * mse_initial


def test_incremental_prior_is_the_learned_marginals(incremental):
    learner = incremental[0]
    marginals = learner.prior_marginals["net_w0"]
    assert marginals.shape == (1, 5)
    lower, upper, table = log_density_table(marginals, points=learner.prior_points)
    prior = "net_w0_marginal_prior"
    np.testing.assert_allclose(learner.model[f"{prior}_logpdf"].get_value(), table)
    np.testing.assert_allclose(learner.model[f"{prior}_lower"].get_value(), lower)
    np.testing.assert_allclose(learner.model[f"{prior}_upper"].get_value(), upper)
    stored = table
    assert np.ptp(stored) > 1.0  # no longer the flat U(-1, 1) of the initial fit


def test_incremental_learner_rejects_bad_input(incremental):
    learner = incremental[0]
    n = learner.n_data
    with pytest.raises(ValueError, match="1 column"):
        learner.partial_fit(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        learner.partial_fit(np.array([[0.1], [np.nan]]), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        learner.partial_fit(np.array([[0.1]]), np.array([np.inf]))
    with pytest.raises(ValueError, match="rows"):
        learner.partial_fit(np.zeros((3, 1)), np.zeros(2))
    with pytest.raises(RuntimeError, match="fit was called"):
        learner.fit(np.zeros((3, 1)), np.zeros(3))
    assert learner.n_data == n
    fresh = IncrementalSFP((1, 5, 1), D=0.01)
    with pytest.raises(RuntimeError, match="fit"):
        fresh.partial_fit(np.zeros((1, 1)), np.zeros(1))
    with pytest.raises(RuntimeError, match="fit"):
        fresh.predict(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="discard"):
        fresh.fit(np.zeros((3, 1)), np.zeros(3), sweeps=10, discard=10)


# ------------------------------------------------------------------------ glass end to end


@pytest.fixture
def glass_data(monkeypatch):
    if not os.environ.get(datasets.DATA_ENV_VAR):
        if not SHARED_DATA.is_dir():
            pytest.skip(f"no local data: set {datasets.DATA_ENV_VAR}")
        monkeypatch.setenv(datasets.DATA_ENV_VAR, str(SHARED_DATA))
    return datasets.glass_split(np.random.default_rng(0))


def test_sfp_s_and_mle_on_glass_beat_the_base_rate(glass_data):
    X_train, y_train, X_test, y_test = glass_data
    with pm.Model():
        network = mlp(X_train, (9, 6, 4), output="softmax")
        gaussian_likelihood(network, np.eye(4)[y_train], D=5e-4)
        idata = pm.sample(
            draws=20,
            tune=10,
            chains=1,
            step=SFPStep(L=50),
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    base_rate = 1 - np.mean(y_test == np.bincount(y_train).argmax())
    assert base_rate == pytest.approx(0.615, abs=1e-3)  # the paper's split: 1 - 37/96
    sfp_s = network.predict_mean(idata, X_test).values.argmax(axis=1)
    sfp_mle_classes = sfp_mle(idata, network).predict(X_test).argmax(axis=1)
    assert np.mean(sfp_s != y_test) < 0.45
    assert np.mean(sfp_mle_classes != y_test) < 0.5
