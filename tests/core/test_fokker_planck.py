"""The 1-D stationary Fokker–Planck conditionals, without PyMC."""

import numpy as np
import pytest
from scipy import stats

from pymc_sfp.core.fokker_planck import (
    CollocationBasis,
    TabulatedConditional,
    collocation_conditional,
    conditional_logpdf,
    conditional_ppf,
    is_valid_cdf,
    quadrature_cdfs,
    quadrature_conditional,
)

WEIGHTS = np.array([0.2, 0.2, 0.6])
MEANS = np.array([5.0, 20.0, 40.0])
SD = 2.0
LOWER, UPPER = -10.0, 60.0


def mixture_logpdf(x):
    return np.log(np.sum(WEIGHTS * stats.norm.pdf(np.asarray(x)[:, None], MEANS, SD), axis=1))


def mixture_dlogpdf(x):
    parts = WEIGHTS * stats.norm.pdf(np.asarray(x)[:, None], MEANS, SD)
    return np.sum(parts * -(x[:, None] - MEANS) / SD**2, axis=1) / parts.sum(axis=1)


def mixture_cdf(x):
    raw = np.sum(WEIGHTS * stats.norm.cdf(np.asarray(x)[:, None], MEANS, SD), axis=1)
    lo, hi = (np.sum(WEIGHTS * stats.norm.cdf(b, MEANS, SD)) for b in (LOWER, UPPER))
    return (raw - lo) / (hi - lo)


CHECK = np.linspace(LOWER, UPPER, 3001)


@pytest.mark.parametrize(("L", "tolerance"), [(100, 2e-4), (200, 5e-5)])
def test_quadrature_cdf_accuracy(L, tolerance):
    # Piecewise-exponential interpolation is second order: ~9e-5 at L=100, ~1e-5 at L=200.
    nodes = np.linspace(LOWER, UPPER, L)
    conditional = quadrature_conditional(nodes, mixture_logpdf(nodes))
    assert np.abs(conditional.cdf_at(CHECK) - mixture_cdf(CHECK)).max() < tolerance


def test_collocation_solves_eq4_to_lookup_table_accuracy():
    basis = CollocationBasis(200)
    nodes = LOWER + basis.collocation_points * (UPPER - LOWER)
    conditional, coefficients = collocation_conditional(basis, LOWER, UPPER, mixture_dlogpdf(nodes))
    assert conditional is not None
    # The expansion itself is spectrally accurate at the table points ...
    y_hat = basis.evaluate(coefficients)
    table = LOWER + basis.table_points * (UPPER - LOWER)
    assert np.abs(y_hat - mixture_cdf(table)).max() < 1e-8
    # ... and the lookup table interpolates it linearly between them.
    assert np.abs(conditional.cdf_at(CHECK) - mixture_cdf(CHECK)).max() < 1e-4


def test_collocation_too_small_L_is_invalid():
    basis = CollocationBasis(40)
    nodes = LOWER + basis.collocation_points * (UPPER - LOWER)
    conditional, coefficients = collocation_conditional(basis, LOWER, UPPER, mixture_dlogpdf(nodes))
    assert conditional is None
    assert not is_valid_cdf(basis.evaluate(coefficients))


def test_collocation_temperature_scales_the_potential():
    # V = (x - 0.5)^2 / (2 s^2) at temperature D is a normal with sd s * sqrt(D). (The sine basis
    # forces zero density at the upper edge -- the paper's "border effect" -- so targets whose
    # density does not vanish there are not represented exactly.)
    basis = CollocationBasis(80)
    nodes = basis.collocation_points
    s = 0.08
    x = np.linspace(0, 1, 101)
    for D in (1.0, 2.0):
        conditional, _ = collocation_conditional(basis, 0.0, 1.0, -(nodes - 0.5) / s**2, D=D)
        expected = stats.norm.cdf(x, 0.5, s * np.sqrt(D))
        assert np.abs(conditional.cdf_at(x) - expected).max() < 1e-4


def test_sampling_by_inverse_cdf_matches_target():
    nodes = np.linspace(LOWER, UPPER, 200)
    conditional = quadrature_conditional(nodes, mixture_logpdf(nodes))
    draws = conditional.ppf(np.random.default_rng(0).uniform(size=20_000))
    assert stats.kstest(draws, mixture_cdf).pvalue > 1e-3
    assert draws.min() >= LOWER and draws.max() <= UPPER


def test_logpdf_is_normalised_and_consistent_with_cdf():
    nodes = np.linspace(LOWER, UPPER, 50)
    conditional = quadrature_conditional(nodes, mixture_logpdf(nodes))
    x = np.linspace(LOWER, UPPER, 200_001)
    density = np.exp(conditional.logpdf(x))
    assert np.trapezoid(density, x) == pytest.approx(1.0, abs=1e-6)
    assert np.trapezoid(density[x <= 12.5], x[x <= 12.5]) == pytest.approx(
        float(conditional.cdf_at(12.5)), abs=1e-6
    )
    u = np.array([1e-6, 0.1, 0.5, 0.9, 1 - 1e-6])
    assert np.allclose(conditional.cdf_at(conditional.ppf(u)), u, atol=1e-12)
    assert conditional.logpdf(UPPER + 1) == -np.inf


def test_quadrature_handles_deep_barriers_and_nonfinite_values():
    # Two modes 60 sd apart (a barrier of ~450 nats) keep their weights exactly.
    nodes = np.linspace(-50, 50, 400)
    logp = np.logaddexp(
        np.log(0.3) + stats.norm.logpdf(nodes, -30, 1),
        np.log(0.7) + stats.norm.logpdf(nodes, 30, 1),
    )
    logp[::7] = np.nan  # NaN counts as zero density
    conditional = quadrature_conditional(nodes, logp)
    assert float(conditional.cdf_at(0.0)) == pytest.approx(0.3, abs=2e-3)
    assert np.all(np.diff(conditional.cdf) >= 0)
    assert quadrature_conditional(nodes, np.full(400, -np.inf)) is None


def test_edge_mass_and_validity_check():
    conditional = TabulatedConditional(np.linspace(0, 1, 3), np.array([0.0, 0.5, 1.0]), np.zeros(2))
    low, high = conditional.mass_near_edges(0.1)
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)
    assert is_valid_cdf(np.array([0.0, 0.4, 1.0]))
    assert not is_valid_cdf(np.array([0.0, 0.6, 0.4, 1.0]))
    assert not is_valid_cdf(np.array([0.0, 1.2, 1.0]))
    with pytest.raises(ValueError, match="L must be"):
        CollocationBasis(2)


def test_many_lines_on_one_grid_each_get_their_own_conditional():
    # Gaussian lines of other means and widths, one with no finite value, one with a hole (NaN)
    # and a hard edge (-inf), tabulated on one grid: each row is its own line's conditional.
    nodes = np.linspace(-6.0, 6.0, 120)
    means, sds = np.array([-2.0, 0.0, 0.5, 3.0]), np.array([0.5, 1.0, 2.0, 0.8])
    lines = stats.norm.logpdf(nodes, means[:, None], sds[:, None])
    holed = stats.norm.logpdf(nodes, 1.0, 1.0)
    holed[::9] = np.nan
    holed[nodes < -1.0] = -np.inf
    lines = np.vstack([lines[:2], np.full(len(nodes), -np.inf), lines[2:], holed])
    cdf, slopes, valid = quadrature_cdfs(nodes, lines)
    assert valid.tolist() == [True, True, False, True, True, True]
    assert cdf.shape == (5, 120) and slopes.shape == (5, 119)
    for row, line in zip(cdf, lines[valid], strict=True):
        assert np.array_equal(row, quadrature_conditional(nodes, line).cdf)
    # Against the exact CDFs (truncated to the grid), to the quadrature's accuracy at L = 120.
    exact = stats.norm.cdf(nodes, means[:, None], sds[:, None])
    exact = (exact - exact[:, :1]) / (exact[:, -1:] - exact[:, :1])
    np.testing.assert_allclose(cdf[:4], exact, atol=2e-3)
    # Each row's quantile at its own u, and its log-density at its own point.
    u = np.array([1e-6, 0.25, 0.5, 0.9, 1 - 1e-9])
    quantiles = conditional_ppf(nodes, cdf, slopes, u)
    for k in range(5):
        alone = TabulatedConditional(nodes, cdf[k], slopes[k])
        assert float(alone.cdf_at(quantiles[k])) == pytest.approx(u[k], abs=1e-12)
    # Nothing below the hard edge but in the cell that straddles it.
    lowest = conditional_ppf(nodes, cdf[4:], slopes[4:], np.array([1e-12]))[0]
    assert lowest >= nodes[nodes < -1.0][-1]
    # Normalised (the smooth lines: the holed one jumps, which the trapezoid rule does not see).
    x = np.linspace(-6.0, 6.0, 20_001)
    for k in range(4):
        rows = np.broadcast_to(cdf[k], (len(x), 120)), np.broadcast_to(slopes[k], (len(x), 119))
        density = np.exp(conditional_logpdf(nodes, *rows, x))
        assert np.trapezoid(density, x) == pytest.approx(1.0, abs=1e-6)
    assert conditional_logpdf(nodes, cdf[:1], slopes[:1], np.array([6.5]))[0] == -np.inf
