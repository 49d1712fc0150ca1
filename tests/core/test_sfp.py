"""The SFP sweep kernel without PyMC: exactness on a correlated Gaussian at a coarse resolution,
the bias the correction removes, box tuning, and lines with no finite log-density."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_sfp.core import sfp
from pymc_sfp.core.fokker_planck import (
    CollocationBasis,
    cell_log_mass,
    quadrature_cdfs,
    quadrature_conditional,
)
from pymc_sfp.core.sfp import (
    DEFENSIVE_WEIGHT,
    BoxTuning,
    SweepInfo,
    SweepSettings,
    SweepState,
    proposal_logpdf,
    propose,
    propose_on_grid,
    refit_boxes,
    sweep,
    track_boxes,
)

COV = np.array([[1.0, 0.8], [0.8, 1.0]])
PRECISION = np.linalg.inv(COV)


def gaussian_logp(x):
    return -0.5 * float(x @ PRECISION @ x)


def gaussian_line(x, i, values):
    points = np.repeat(x[None, :], len(values), axis=0)
    points[:, i] = values
    return -0.5 * np.einsum("gi,ij,gj->g", points, PRECISION, points), None


def settings(n=2, L=5, correct=True, report=0, basis=None):
    return SweepSettings(
        unit_nodes=np.linspace(0.0, 1.0, L) if basis is None else basis.collocation_points,
        basis=basis,
        D=1.0,
        correct=correct,
        interval=np.zeros(n, dtype=bool),
        watch_edges=np.ones(n, dtype=bool),
        report_points=np.linspace(0.0, 1.0, report),
    )


def run_chain(config, n_sweeps, seed=0):
    rng = np.random.default_rng(seed)
    lower, upper = np.full(2, -6.0), np.full(2, 6.0)
    state = SweepState(np.zeros(2), gaussian_logp(np.zeros(2)))
    draws = np.empty((n_sweeps, 2))
    for t in range(n_sweeps):
        state, _ = sweep(state, lower, upper, config, gaussian_line, gaussian_logp, rng)
        draws[t] = state.position
    return draws


def batch_means_se(values, n_batches=40):
    """Standard error of the mean of a correlated series by batch means."""
    batches = values[: len(values) // n_batches * n_batches].reshape(n_batches, -1).mean(axis=1)
    return batches.std(ddof=1) / np.sqrt(n_batches)


@pytest.fixture
def without_refinement(monkeypatch):
    """Grids stay as given (refinement may add no node): a poor proposal at L=5."""
    monkeypatch.setattr(sfp, "REFINEMENT_BUDGET", 0)


@pytest.mark.parametrize("refined", [True, False])
def test_corrected_sweep_is_exact_at_a_coarse_resolution(refined, request):
    """Five grid points per conditional, refined or not: the Metropolis correction makes the
    chain target N(0, COV) exactly (moments within 4 standard errors)."""
    if not refined:
        request.getfixturevalue("without_refinement")
    draws = run_chain(settings(L=5), 4_000)
    for values, expected in (
        (draws[:, 0] ** 2, COV[0, 0]),
        (draws[:, 1] ** 2, COV[1, 1]),
        (draws[:, 0] * draws[:, 1], COV[0, 1]),
        (draws[:, 0], 0.0),
    ):
        assert abs(values.mean() - expected) < 4 * batch_means_se(values)


def test_uncorrected_sweep_is_biased_at_the_same_resolution(without_refinement):
    """The same unrefined chain without the correction misses the variance by many standard
    errors, so the test above can fail."""
    draws = run_chain(settings(L=5, correct=False), 4_000)
    values = draws[:, 0] ** 2
    assert abs(values.mean() - COV[0, 0]) > 10 * batch_means_se(values)


def test_sweep_is_reproducible_and_reports_conditionals():
    config = settings(L=60, report=11)
    lower, upper = np.full(2, -6.0), np.full(2, 6.0)
    start = SweepState(np.array([0.5, -0.5]), gaussian_logp(np.array([0.5, -0.5])))
    results = [
        sweep(start, lower, upper, config, gaussian_line, gaussian_logp, np.random.default_rng(3))
        for _ in range(2)
    ]
    np.testing.assert_array_equal(results[0][0].position, results[1][0].position)
    state, info = results[0]
    assert state.logp == pytest.approx(gaussian_logp(state.position))
    assert info.n_logp_evals == 2 * (60 + 1)  # resolved: no refinement
    np.testing.assert_allclose(info.report_grid[0], np.linspace(-6.0, 6.0, 11))
    assert np.all(np.diff(info.report_cdf, axis=1) >= 0)
    assert info.report_cdf[:, 0] == pytest.approx(0.0, abs=1e-6)
    assert not info.edge_low.any() and not info.edge_high.any()


def test_collocation_sweep_counts_and_replaces_invalid_conditionals():
    """Collocation with too few basis functions for a narrow conditional is replaced by the
    quadrature conditional on the same points, and counted."""
    config = settings(L=4, basis=CollocationBasis(4))

    def narrow_line(x, i, values):
        return -0.5 * (values / 0.05) ** 2, -values / 0.05**2

    state = SweepState(np.zeros(2), 0.0)
    lower, upper = np.full(2, -6.0), np.full(2, 6.0)
    _, info = sweep(
        state, lower, upper, config, narrow_line, lambda x: 0.0, np.random.default_rng(0)
    )
    assert info.n_invalid == 2


def test_line_without_finite_density_stays_put():
    config = settings(report=5)
    state = SweepState(np.array([1.0, 2.0]), -np.inf)
    _, info = sweep(
        state,
        np.full(2, -3.0),
        np.full(2, 3.0),
        config,
        lambda x, i, values: (np.full(len(values), -np.inf), None),
        lambda x: -np.inf,
        np.random.default_rng(0),
    )
    assert info.empty.all() and info.n_accepted == 0 and info.n_nonfinite == 2 * 5
    # The recorded "conditional" is the point mass at the current value.
    np.testing.assert_array_equal(info.report_cdf[0], [0, 0, 0, 1, 1])


def test_defensive_proposal_is_normalised():
    nodes = np.linspace(-2.0, 3.0, 50)
    conditional = quadrature_conditional(nodes, -0.5 * nodes**2)
    grid = np.linspace(-2.0, 3.0, 20_001)
    density = np.exp([proposal_logpdf(conditional, v, -2.0, 3.0) for v in grid])
    assert np.trapezoid(density, grid) == pytest.approx(1.0, abs=1e-4)
    # The uniform component keeps the density away from zero everywhere on the box.
    assert density.min() >= DEFENSIVE_WEIGHT / 5.0 * (1 - 1e-12)


def test_proposals_of_many_lines_are_each_lines_proposal():
    # Lines of other means on one grid (the particles of SFPKernel): each row's draw and
    # log q(current) - log q(draw) are those of propose / proposal_logpdf alone, with the
    # uniforms forced into the defensive component for some rows.
    rng = np.random.default_rng(3)
    nodes = np.linspace(-4.0, 5.0, 40)
    means = rng.uniform(-2.0, 3.0, 300)
    cdf, slopes, valid = quadrature_cdfs(nodes, -0.5 * (nodes - means[:, None]) ** 2)
    assert valid.all()
    uniforms = rng.uniform(size=(300, 3))
    uniforms[::7, 0] = 0.5 * DEFENSIVE_WEIGHT
    current = rng.uniform(-4.0, 5.0, 300)
    proposals, log_q_ratio = propose_on_grid(nodes, cdf, slopes, -4.0, 5.0, current, uniforms)
    for k in range(300):
        conditional = quadrature_conditional(nodes, -0.5 * (nodes - means[k]) ** 2)
        value, log_q = propose(conditional, -4.0, 5.0, True, uniforms[k])
        assert proposals[k] == value
        assert log_q_ratio[k] == proposal_logpdf(conditional, current[k], -4.0, 5.0) - log_q
    # The draws of one line follow its defensive proposal (a KS test at a fixed seed).
    cdf, slopes, _ = quadrature_cdfs(nodes, np.tile(-0.5 * nodes**2, (5000, 1)))
    draws, _ = propose_on_grid(
        nodes, cdf, slopes, -4.0, 5.0, np.zeros(5000), rng.uniform(size=(5000, 3))
    )
    conditional = quadrature_conditional(nodes, -0.5 * nodes**2)

    def defensive_cdf(x):
        uniform = (np.asarray(x) + 4.0) / 9.0
        return (1 - DEFENSIVE_WEIGHT) * conditional.cdf_at(x) + DEFENSIVE_WEIGHT * uniform

    assert stats.kstest(draws, defensive_cdf).pvalue > 1e-3


def _info(n, **fields):
    base = dict(
        n_accepted=0,
        n_invalid=0,
        empty=np.zeros(n, dtype=bool),
        unresolved=np.zeros(n, dtype=bool),
        n_nonfinite=0,
        n_logp_evals=0,
        edge_low=np.zeros(n, dtype=bool),
        edge_high=np.zeros(n, dtype=bool),
        quantile_low=np.full(n, np.nan),
        quantile_high=np.full(n, np.nan),
        report_grid=np.empty((n, 0)),
        report_cdf=np.empty((n, 0)),
    )
    return SweepInfo(**(base | fields))


def test_box_tuning_widens_hit_edges_and_refits_to_the_envelope():
    auto = np.array([True, True, False])
    boxes = BoxTuning(
        np.array([-1.0, -1.0, -1.0]),
        np.array([1.0, 1.0, 1.0]),
        np.full(3, np.inf),
        np.full(3, -np.inf),
    )
    info = _info(
        3,
        edge_high=np.array([True, False, True]),
        quantile_low=np.array([np.nan, -0.2, -0.5]),
        quantile_high=np.array([np.nan, 0.4, 0.5]),
    )
    boxes = track_boxes(boxes, auto, info)
    # Coordinate 0 hit its upper edge: it moves out by one width. Coordinate 2 is not automatic.
    np.testing.assert_array_equal(boxes.lower, [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(boxes.upper, [3.0, 1.0, 1.0])
    np.testing.assert_array_equal(boxes.envelope_lower, [np.inf, -0.2, np.inf])
    np.testing.assert_array_equal(boxes.envelope_upper, [-np.inf, 0.4, -np.inf])
    refit = refit_boxes(boxes, auto, allow_shrink=True)
    # Envelope [-0.2, 0.4] widened by half its width on each side.
    np.testing.assert_allclose([refit.lower[1], refit.upper[1]], [-0.5, 0.7])
    assert refit.upper[0] == 3.0 and np.isinf(refit.envelope_lower[1])
    kept = refit_boxes(boxes, auto, allow_shrink=False)
    np.testing.assert_allclose([kept.lower[1], kept.upper[1]], [-1.0, 1.0])


def test_box_tuning_without_an_edge_hit_keeps_the_boxes_and_widens_the_envelopes():
    """The usual tuning sweep hits no edge: the boxes stay (as new arrays: the step keeps the
    result and the caller's arrays are not changed), the envelopes of the tracked automatic
    coordinates widen, and the rest keep theirs."""
    auto = np.array([True, True, False, True])
    boxes = BoxTuning(
        np.array([-1.0, -2.0, -1.0, 0.0]),
        np.array([1.0, 2.0, 1.0, 3.0]),
        np.array([-0.1, 0.5, 7.0, -0.3]),
        np.array([0.2, 0.6, 8.0, 0.9]),
    )
    before = BoxTuning(*(a.copy() for a in boxes))
    info = _info(
        4,
        quantile_low=np.array([-0.4, 0.7, -5.0, np.nan]),
        quantile_high=np.array([0.1, 1.5, 5.0, np.nan]),
    )
    tuned = track_boxes(boxes, auto, info)
    np.testing.assert_array_equal(tuned.lower, before.lower)
    np.testing.assert_array_equal(tuned.upper, before.upper)
    assert tuned.lower is not boxes.lower and tuned.upper is not boxes.upper
    # Widened to the quantiles where they reach further; coordinate 2 is not automatic and
    # coordinate 3 has no quantiles this sweep.
    np.testing.assert_array_equal(tuned.envelope_lower, [-0.4, 0.5, 7.0, -0.3])
    np.testing.assert_array_equal(tuned.envelope_upper, [0.2, 1.5, 8.0, 0.9])
    for field, value in zip(before, boxes, strict=True):
        np.testing.assert_array_equal(value, field)


def test_interpolation_error_is_that_of_a_parabola():
    """On a Gaussian log-density the second divided differences are exact: every cell's error
    estimate is ``h² / (8 σ²)``; next to a non-finite value the curvature counts as zero."""
    sigma, h = 2.0, 0.5
    nodes = np.arange(-5.0, 5.0 + h / 2, h)
    f = -0.5 * (nodes / sigma) ** 2
    np.testing.assert_allclose(sfp.interpolation_error(nodes, f), h**2 / (8 * sigma**2), rtol=1e-9)
    f[0] = -np.inf
    error = sfp.interpolation_error(nodes, f)
    assert error[0] == 0.0
    assert error[1] == pytest.approx(h**2 / (8 * sigma**2))


def _normal_line(x, i, values):
    return -0.5 * (values - 1.3) ** 2, None


def _refined_cdf_error(L):
    """Largest error of the refined quadrature conditional's CDF of N(1.3, 1) on [−8, 8]."""
    nodes = np.linspace(-8.0, 8.0, L)
    nodes, logp, n_evals, resolved = sfp.resolve_line(
        np.zeros(1), 0, nodes, _normal_line(None, 0, nodes)[0], _normal_line, 1.0
    )
    assert resolved
    grid = np.linspace(-8.0, 8.0, 2001)
    cdf = stats.norm.cdf(grid, 1.3)
    exact = (cdf - cdf[0]) / (cdf[-1] - cdf[0])
    error = np.abs(quadrature_conditional(nodes, logp, 1.0).cdf_at(grid) - exact).max()
    return error, n_evals


def test_curvature_refines_a_coarse_grid_where_the_conditional_has_mass(monkeypatch):
    """Nine nodes two standard deviations apart: splitting the curved cells with mass makes the
    conditional's CDF more than 10× more accurate, for a few dozen evaluations; without the
    curvature criterion (the steepness and mass criteria alone) it stays off by 2 %."""
    error, n_evals = _refined_cdf_error(9)
    assert error < 2e-3
    assert n_evals < 50
    monkeypatch.setattr(sfp, "CURVATURE_NATS", np.inf)
    error_without, _ = _refined_cdf_error(9)
    assert error_without > 10 * error


def test_a_line_resolved_within_the_curvature_budget_is_not_cut_for_curvature(monkeypatch):
    """N(0, 1) on [−15, 15] at L = 50: the cells with mass are over CURVATURE_NATS (h² / 8 =
    0.047 nats) but their share-weighted errors sum to less than CURVATURE_BUDGET, so the line
    gets the splits of the other criteria alone (the central cell holds over MAX_CELL_MASS);
    with no budget its curved cells are cut as well."""
    nodes = np.linspace(-15.0, 15.0, 50)
    f = -0.5 * nodes**2
    error = sfp.interpolation_error(nodes, f)
    log_mass, _ = cell_log_mass(nodes, f)
    share = np.exp(log_mass - logsumexp(log_mass))
    assert error[share > sfp.CURVATURE_MASS].min() > sfp.CURVATURE_NATS
    assert np.sum(share * error) < sfp.CURVATURE_BUDGET

    def line(x, i, values):
        return -0.5 * values**2, None

    def evaluations() -> int:
        _, _, n_evals, resolved = sfp.resolve_line(np.zeros(1), 0, nodes, f, line, 1.0)
        assert resolved
        return n_evals

    default = evaluations()
    monkeypatch.setattr(sfp, "CURVATURE_NATS", np.inf)
    assert evaluations() == default
    monkeypatch.setattr(sfp, "CURVATURE_NATS", 0.03)
    monkeypatch.setattr(sfp, "CURVATURE_BUDGET", 0.0)
    assert evaluations() > default


def test_curvature_pieces_bring_the_error_to_the_threshold():
    """Error falls with the square of the width: a cell 8.9 times over the threshold is cut
    in three; at least two pieces, at most MAX_CURVATURE_PIECES, none narrower than allowed."""
    error = sfp.CURVATURE_NATS * np.array([8.9, 1.5, 1e6, 1e6])
    width = np.array([1.0, 1.0, 1.0, 3e-12])
    pieces = sfp.curvature_pieces(error, width, min_width=1e-12)
    np.testing.assert_array_equal(pieces, [3, 2, sfp.MAX_CURVATURE_PIECES, 3])
