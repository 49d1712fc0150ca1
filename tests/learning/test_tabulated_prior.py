"""Tests for pymc_sfp.learning.tabulated_prior: marginals turned into a prior (Eq. 21).

Known marginals are Beta CDFs on [-1, 1]; the tabulated, interpolated density is compared with
theirs, and the potential in a model with their log-densities. PyTensor's Python VM: these tests
check graphs, not backends.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytest

from pymc_sfp import Marginal
from pymc_sfp.learning import interpolated_log_density, log_density_table, marginal_prior

FAST = "FAST_COMPILE"
RNG = np.random.default_rng(20260102)


def test_marginal_prior_reproduces_the_marginals_log_densities(grid, beta_on_box):
    ab = np.array([[(3.0, 5.0), (2.5, 2.0), (6.0, 3.0)], [(1.5, 1.5), (4.0, 8.0), (2.0, 2.0)]])
    marginals = np.empty((2, 3), dtype=object)
    for index in np.ndindex(2, 3):
        marginals[index] = Marginal(grid, beta_on_box(*ab[index]).cdf(grid))
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
    spike = Marginal(grid, (grid > 0.2).astype(float))
    _, _, floored = log_density_table(np.array([spike], dtype=object), floor=1e-6)
    assert np.isfinite(floored).all() and floored.min() == pytest.approx(np.log(1e-6 / 2))


def test_marginal_prior_shape_must_match(grid):
    with pm.Model():
        w = pm.Uniform("w", -1, 1, shape=3)
        with pytest.raises(ValueError, match="shape"):
            marginal_prior(w, np.full(4, Marginal(grid, (grid + 1) / 2), dtype=object))


def test_table_settings_are_checked(grid, beta_on_box):
    marginals = np.array([Marginal(grid, beta_on_box(2.0, 3.0).cdf(grid))], dtype=object)
    with pytest.raises(TypeError, match="floor must be a real number"):
        log_density_table(marginals, floor="a")
    with pytest.raises(ValueError, match=r"floor must be in \[0, 1\)"):
        log_density_table(marginals, floor=1.0)
    with pytest.raises(ValueError, match="points must be an integer >= 2"):
        log_density_table(marginals, points=1)
    with pytest.raises(TypeError, match="points must be an integer >= 2"):
        log_density_table(marginals, points="10")


def test_float32_model_stays_float32(grid, beta_on_box):
    """In a float32 model the potential is float32 and so is the model's log-density: the
    tables' int64 sizes made the interpolation float64, which upcast the whole log-density (and
    failed under ``warn_float64="raise"``, which the model's own variables pass). The values are
    the float64 model's to float32 rounding."""
    marginals = np.array(
        [Marginal(grid, beta_on_box(a, b).cdf(grid)) for a, b in [(3.0, 5.0), (2.0, 2.0)]],
        dtype=object,
    )
    point = {"w_interval__": np.array([0.3, -0.8])}
    logp = {}
    for floatx in ("float64", "float32"):
        warn = "raise" if floatx == "float32" else "ignore"
        with pytensor.config.change_flags(floatX=floatx, warn_float64=warn):
            with pm.Model() as model:
                w = pm.Uniform("w", -1, 1, shape=2)
                potential = marginal_prior(w, marginals)
            assert potential.dtype == floatx
            assert model.logp().dtype == floatx and model.dlogp().dtype == floatx
            logp[floatx] = model.compile_logp(mode=FAST)(point)
    assert logp["float32"] == pytest.approx(logp["float64"], rel=1e-6)
