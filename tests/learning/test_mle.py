"""Tests for pymc_sfp.learning.mle: SFP-MLE (Berrones 2009, Eq. 18).

The predictor is checked against the network at its modes and against a central difference of it;
``sfp_mle`` against known marginals (Beta CDFs on [-1, 1], whose modes and means have closed
forms). End to end, SFP-S and SFP-MLE on the paper's glass split (real data, ``shared_data``).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pymc_sfp import Marginal, SFPStep, datasets
from pymc_sfp.learning import MLEPredictor, sfp_mle
from pymc_sfp.nn import gaussian_likelihood, mlp

RNG = np.random.default_rng(20260102)


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


def known_marginal_tree(network, shapes_ab, grid, beta_on_box):
    """sample_stats with conditional CDFs = Beta CDFs (the marginals are then those Betas)."""
    data = {}
    for var, (a, b) in shapes_ab.items():
        cdf = np.broadcast_to(beta_on_box(a, b).cdf(grid), (*var_shape(network, var), len(grid)))
        box = np.broadcast_to([grid[0], grid[-1], 0.0, 0.0], (*cdf.shape[:-1], 4))
        dims = tuple(f"{var.name}_d{j}" for j in range(cdf.ndim))
        data[f"sfp_cdf__{var.name}"] = (("chain", "draw", *dims), cdf[None, None])
        data[f"sfp_box__{var.name}"] = (("chain", "draw", *dims[:-1], "box"), box[None, None])
    return xr.DataTree.from_dict({"sample_stats": xr.Dataset(data)})


def var_shape(network, var):
    sizes = network.layer_sizes
    for layer, (W, b) in enumerate(zip(network.weights, network.biases, strict=True)):
        if var is W:
            return sizes[layer], sizes[layer + 1]
        if var is b:
            return (sizes[layer + 1],)
    raise KeyError(var)


def test_sfp_mle_modes_and_means_of_known_marginals(grid, beta_on_box):
    _, network = tiny_network(sizes=(1, 2, 1))
    ab = [(3.0, 5.0), (2.5, 2.0), (6.0, 3.0), (4.0, 4.0)]
    params = (*network.weights, *network.biases)
    tree = known_marginal_tree(network, dict(zip(params, ab, strict=True)), grid, beta_on_box)
    predictor = sfp_mle(tree, network)
    dense = np.linspace(-1, 1, 200_001)
    got_modes = (*predictor.weights, *predictor.biases)
    got_means = (*predictor.weight_means, *predictor.bias_means)
    for (a, b), mode, mean in zip(ab, got_modes, got_means, strict=True):
        true = beta_on_box(a, b)
        brute_true = dense[np.argmax(true.pdf(dense))]
        assert brute_true == pytest.approx(-1 + 2 * (a - 1) / (a + b - 2), abs=1e-5)
        # The CDF is known on a grid 2/99 apart: the mode is found to within a fraction of it.
        np.testing.assert_allclose(mode, brute_true, atol=0.25 * (grid[1] - grid[0]))
        # ... and is the global peak of the recorded marginal's density, not a local one.
        marginal = Marginal(grid, true.cdf(grid))
        assert np.all(marginal.pdf(mode) > 0.99 * marginal.pdf(dense).max())
        # Midpoint rule over the CDF increments: O(h²) error.
        np.testing.assert_allclose(mean, true.mean(), atol=1e-3)


def test_sfp_mle_refuses_marginals_of_another_architecture(grid, beta_on_box):
    _, sampled = tiny_network(sizes=(1, 2, 1))
    params = (*sampled.weights, *sampled.biases)
    tree = known_marginal_tree(sampled, dict.fromkeys(params, (2.0, 2.0)), grid, beta_on_box)
    _, wider = tiny_network(sizes=(1, 3, 1))
    with pytest.raises(ValueError, match=r"net_w0 has shape \(1, 2\).*\(1, 3\)"):
        sfp_mle(tree, wider)


def test_sfp_mle_needs_sampled_weights():
    _, network = tiny_network(prior="group")
    with pytest.raises(ValueError, match="prior='uniform'"):
        sfp_mle(xr.DataTree(), network)


@pytest.fixture
def glass_data(shared_data, monkeypatch):
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(shared_data))
    return datasets.glass_split(np.random.default_rng(0))


@pytest.mark.slow
@pytest.mark.dataset("glass")
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
