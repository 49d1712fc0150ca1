"""The compiled sweep against the NumPy reference sweep: the same draws, counts and conditionals
from the same generator state, on log-densities written as Numba functions (no PyMC)."""

from functools import cache

import numba
import numpy as np
import pytest

from pymc_sfp.core import sfp
from pymc_sfp.core.compiled_sweep import (
    AddressedFunctionType,
    FunctionAddress,
    ModelCallError,
    _cdf_along,
    _cdf_at,
    _tabulate,
    compiled_probe,
    compiled_sweep,
)
from pymc_sfp.core.fokker_planck import CollocationBasis
from pymc_sfp.core.sfp import SweepSettings, SweepState, sweep

PRECISION = np.linalg.inv(np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 1.0]]))


@numba.njit
def _gaussian(x):
    return -0.5 * (x @ (PRECISION @ x))


@numba.njit
def _constrained(x):
    # A hard constraint cuts the Gaussian: -inf where x0 + x1 > 1.
    return -np.inf if x[0] + x[1] > 1.0 else _gaussian(x)


@numba.njit
def _beta_like(x):
    # Coordinates 0 and 1 on the interval (0, 1), sampled on their own scale: a Beta(2, 3)-like
    # density tied to the Gaussian coordinate 2 (-inf outside the support).
    if x[0] <= 0.0 or x[0] >= 1.0 or x[1] <= 0.0 or x[1] >= 1.0:
        return -np.inf
    return np.log(x[0]) + 2 * np.log1p(-x[0]) + 3 * np.log(x[1]) - 0.5 * (x[2] - x[0]) ** 2


@numba.njit
def _raising(x):
    if x[1] > 2.0:
        raise ValueError("x1 beyond 2")
    return _gaussian(x)


@cache
def jitted(density):
    """``point`` and ``along`` in the calling convention of PyTensor's Numba functions (cached:
    the kernel compiles once per pair of functions)."""

    @numba.njit
    def point(x):
        return (np.array(density(x)),)

    @numba.njit
    def along(x, index, values):
        out = np.empty(len(values))
        row = x.copy()
        for k in range(len(values)):
            row[index[()]] = values[k]
            out[k] = density(row)
        return (out,)

    def line_logp(x, i, values):
        return along(x, np.array(i), values)[0], None

    def point_logp(x):
        return float(point(x)[0])

    return point, along, line_logp, point_logp


def settings(correct, interval=(False, False, False), L=6, report=5):
    return SweepSettings(
        unit_nodes=np.linspace(0.0, 1.0, L),
        basis=None,
        D=1.0,
        correct=correct,
        interval=np.array(interval),
        watch_edges=np.ones(3, dtype=bool),
        report_points=np.linspace(0.0, 1.0, report),
    )


@cache
def shifted(density):
    """``along`` and ``line_logp`` of ``density`` off by a constant of the line: a function of
    the other coordinates, as a local line is (``relative=True``)."""
    _, along, _, _ = jitted(density)

    @numba.njit
    def shifted_along(x, index, values):
        (out,) = along(x, index, values)
        return (out + 3.0 + 7.0 * (np.sum(x) - x[index[()]]),)

    def line_logp(x, i, values):
        return shifted_along(x, np.array(i), values)[0], None

    return shifted_along, line_logp


def compare(
    density,
    config,
    lower,
    upper,
    start,
    n_sweeps=15,
    order="sequential",
    relative=False,
    start_logp=None,
):
    """Run both sweeps from the same seed; every draw and every field of the info must agree.
    ``relative``: both take the line off by a constant of the line (:func:`shifted`);
    ``start_logp``: the start's log-density passed in (default: evaluated here)."""
    point, along, line_logp, point_logp = jitted(density)
    if relative:
        along, line_logp = shifted(density)
    states = [SweepState(start, point_logp(start) if start_logp is None else start_logp)] * 2
    rngs = [np.random.default_rng(11), np.random.default_rng(11)]
    track = np.array([True, False, True])
    for t in range(n_sweeps):
        sweep_order = rngs[0].permutation(3) if order == "random" else None
        if order == "random":
            assert np.array_equal(rngs[1].permutation(3), sweep_order)
        reference, info = sweep(
            states[0], lower, upper, config, line_logp, point_logp, rngs[0],
            order=sweep_order, track_quantiles=track, relative=relative,
        )  # fmt: skip
        compiled, compiled_info = compiled_sweep(
            states[1], lower, upper, config, point, (), along, (), rngs[1],
            order=sweep_order, track_quantiles=track, relative=relative,
        )  # fmt: skip
        # The same uniforms and log-densities give the same draws. The compiled kernel sums the
        # cells' masses relative to the largest density, the reference relative to the largest
        # mass (in logarithms), and NumPy's vectorised exp/log and the C library's may differ in
        # the last bit: the CDFs agree to a few units of 1e-16, so floats agree to 1e-12
        # relative (positions: to 1e-12 of the box's width, as a draw near 0 is placed within its
        # box), and every decision (acceptance, refinement, edges) exactly. The envelope
        # quantiles invert the CDF at ENVELOPE_QUANTILE from its ends, where that rounding is
        # divided by 1e-6: 1e-9 relative for them.
        close = {"rtol": 1e-12, "atol": 0.0, "err_msg": f"sweep {t}"}
        tail = close | {"rtol": 1e-12 / sfp.ENVELOPE_QUANTILE}
        placed = close | {"atol": 1e-12 * float(np.max(upper - lower))}
        np.testing.assert_allclose(compiled.position, reference.position, **placed)
        np.testing.assert_allclose(compiled.logp, reference.logp, **close)
        for field in info._fields:
            value, expected = getattr(compiled_info, field), getattr(info, field)
            if np.asarray(expected).dtype == float:
                within = tail if field.startswith("quantile") else close
                np.testing.assert_allclose(value, expected, **within | {"err_msg": field})
            else:
                np.testing.assert_array_equal(value, expected, err_msg=f"{field}, sweep {t}")
        states = [reference, compiled]
    return info


@pytest.mark.parametrize("report", [5, 11], ids=["report-between-nodes", "report-nodes-middles"])
@pytest.mark.parametrize("correct", [True, False])
def test_same_draws_as_the_reference_with_refinement(correct, report):
    """Six grid points on [-6, 6] are refined on every line; corrected or not, both sweeps make
    the same draws, quantiles, edge flags and reported CDFs, reported between the nodes or at
    the nodes and the cells' middles (``2 L − 1`` points, ``SFPStep``'s default)."""
    lower, upper = np.full(3, -6.0), np.full(3, 6.0)
    info = compare(_gaussian, settings(correct, report=report), lower, upper, np.zeros(3))
    assert info.n_logp_evals > 3 * (6 + correct)  # refinement took place


def test_same_draws_with_a_hard_constraint_and_random_order():
    """A -inf region: refinement locates its edge; proposals there are rejected alike."""
    lower, upper = np.full(3, -4.0), np.full(3, 4.0)
    info = compare(_constrained, settings(True), lower, upper, np.zeros(3), order="random")
    assert info.n_nonfinite > 0


def test_same_draws_on_interval_coordinates():
    """Coordinates sampled on their support: end points clipped inside, in both sweeps."""
    lower, upper = np.array([0.0, 0.0, -5.0]), np.array([1.0, 1.0, 5.0])
    config = settings(True, interval=(True, True, False))
    compare(_beta_like, config, lower, upper, np.array([0.5, 0.5, 0.0]))


@pytest.mark.parametrize(
    "density, interval, lower, upper, start",
    [
        (_gaussian, (False,) * 3, [-6.0] * 3, [6.0] * 3, [0.0] * 3),
        (_constrained, (False,) * 3, [-4.0] * 3, [4.0] * 3, [0.0] * 3),
        (_beta_like, (True, True, False), [0.0, 0.0, -5.0], [1.0, 1.0, 5.0], [0.5, 0.5, 0.0]),
    ],
)
def test_a_line_known_up_to_a_constant_makes_the_same_draws(density, interval, lower, upper, start):
    """``relative=True``, with the line off by a function of the other coordinates: both sweeps
    agree, and make the draws of the exact line (the proposal's log-density is the current one
    plus the change along the line, equal up to rounding); only the count of evaluations
    differs, by one per corrected proposal."""
    config = settings(True, interval=interval)
    box = np.array(lower), np.array(upper)
    exact = compare(density, config, *box, np.array(start), order="random")
    shifted_info = compare(density, config, *box, np.array(start), order="random", relative=True)
    np.testing.assert_array_equal(shifted_info.empty, exact.empty)
    assert shifted_info.n_accepted == exact.n_accepted
    assert shifted_info.n_nonfinite == exact.n_nonfinite
    assert shifted_info.n_logp_evals == exact.n_logp_evals + 3


@pytest.mark.parametrize(
    "density, start",
    [(_gaussian, [0.5, -0.5, 0.0]), (_constrained, [1.0, 1.0, 0.0])],
    ids=["finite", "outside-the-constraint"],
)
def test_a_start_without_its_log_density_is_evaluated_first(density, start):
    """``SweepState(x, nan)``: both sweeps evaluate the log-density at the start (``-inf``
    where it is not finite), count that evaluation, and then draw as from the given value."""
    box = np.full(3, -4.0), np.full(3, 4.0)
    given = compare(density, settings(True), *box, np.array(start), n_sweeps=1)
    evaluated = compare(
        density, settings(True), *box, np.array(start), n_sweeps=1, start_logp=np.nan
    )
    assert evaluated.n_logp_evals == given.n_logp_evals + 1
    assert evaluated.n_accepted == given.n_accepted
    np.testing.assert_array_equal(evaluated.report_cdf, given.report_cdf)


@pytest.mark.parametrize("relative", [False, True], ids=["exact-line", "line-up-to-a-constant"])
@pytest.mark.parametrize(
    "density, start, coordinates",
    [
        (_gaussian, [0.5, -0.5, 2.0], [0, 1, 2]),
        # Refinement locates the constraint's edge on lines 0 and 1; on line 2 (x0 + x1 = 6)
        # the log-density is finite nowhere, where probe_line finds nothing.
        (_constrained, [3.0, 3.0, 0.0], [0, 1, 2]),
        (_gaussian, [0.5, -0.5, 2.0], [2, 0]),
    ],
    ids=["gaussian", "constrained", "some-coordinates"],
)
def test_compiled_probe_finds_what_probe_line_finds(density, start, coordinates, relative):
    """Every probed line's quantiles equal ``probe_line``'s (to the tolerance of the sweep's
    tracked quantiles: the CDF's last bits divided by ``ENVELOPE_QUANTILE``), NaN where it
    finds nothing and for the coordinates not probed; the point is not moved."""
    point, along, line_logp, _ = jitted(density)
    if relative:
        along, line_logp = shifted(density)
    config = settings(True, L=12)
    start = np.array(start)
    lower, upper = np.array([-1.0, -0.5, 0.0]), np.array([1.0, 1.5, 0.5])
    low, high = compiled_probe(
        start, lower, upper, config, point, (), along, (), np.array(coordinates), relative=relative
    )
    tail = {"rtol": 1e-12 / sfp.ENVELOPE_QUANTILE, "atol": 0.0}
    for i in range(3):
        found = None
        if i in coordinates:
            found = sfp.probe_line(start, i, lower[i], upper[i], line_logp, config.D, 12)
        if found is None:
            assert np.isnan(low[i]) and np.isnan(high[i]), i
        else:
            np.testing.assert_allclose([low[i], high[i]], found, **tail, err_msg=f"line {i}")
            # The probed line reaches beyond the box: a probe that ignored the widening would
            # find nothing outside it.
            assert found[0] < lower[i] or found[1] > upper[i]
    assert (density is _constrained) == np.isnan(low[list(coordinates)]).any()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_density_that_raises_stops_the_probe():
    """A model call that raises inside the compiled probe is reported as for the sweep."""
    point, along, _, _ = jitted(_raising)
    with pytest.raises(ModelCallError, match="coordinate 1"):
        compiled_probe(
            np.zeros(3), np.full(3, -1.0), np.full(3, 1.0), settings(True), point, (), along,
            (), np.arange(3),
        )  # fmt: skip


@cache
def one_line_per_coordinate(density):
    """``along`` of ``density`` as three functions, the ``k``-th right only for coordinate
    ``k`` (NaN elsewhere), the second returning a strided view (Numba's layout ``"A"``, the
    others ``"C"``), as a line compiled per variable may."""
    _, along, _, _ = jitted(density)

    def only(k, strided):
        @numba.njit
        def along_k(x, index, values):
            (out,) = along(x, index, values)
            if index[()] != k:
                out[:] = np.nan
            if strided:
                wide = np.empty(2 * len(out))
                wide[::2] = out
                return (wide[::2],)
            return (out,)

        return along_k

    return tuple(only(k, k == 1) for k in range(3))


@pytest.mark.parametrize("order", ["sequential", "random"])
def test_a_line_given_per_coordinate_range_makes_the_same_draws(order):
    """``along`` as several functions with ``line_starts``: each coordinate's line is its own
    function's (the others' NaN would leave the line empty), and the draws are those of the
    single function."""
    point, along, _, point_logp = jitted(_gaussian)
    lower, upper, start = np.full(3, -6.0), np.full(3, 6.0), np.array([0.5, -0.5, 0.0])
    runs = []
    for functions, starts in [(along, None), (one_line_per_coordinate(_gaussian), [0, 1, 2])]:
        rng = np.random.default_rng(5)
        state = SweepState(start, point_logp(start))
        for _ in range(5):
            sweep_order = rng.permutation(3) if order == "random" else None
            state, info = compiled_sweep(
                state, lower, upper, settings(True), point, (), functions, (), rng,
                order=sweep_order, line_starts=starts,
            )  # fmt: skip
            assert not info.empty.any()
        runs.append((state.position, info.n_logp_evals))
    np.testing.assert_array_equal(runs[1][0], runs[0][0])
    assert runs[1][1] == runs[0][1]


def test_a_line_with_no_finite_density_stays_put():
    """Both sweeps leave a coordinate whose whole box is -inf in place and flag it empty."""
    # x0 + x1 > 1 on all of x0's box, whatever x1 in its box.
    lower, upper = np.array([6.0, -4.0, -4.0]), np.array([7.0, 4.0, 4.0])
    info = compare(_constrained, settings(True), lower, upper, np.array([0.5, 0.0, 0.0]), 3)
    assert info.empty[0]


def test_collocation_is_refused():
    point, along, _, _ = jitted(_gaussian)
    config = settings(True)._replace(basis=CollocationBasis(5))
    with pytest.raises(ValueError, match="quadrature"):
        compiled_sweep(
            SweepState(np.zeros(3), 0.0), np.full(3, -1.0), np.ones(3), config,
            point, (), along, (), np.random.default_rng(0),
        )  # fmt: skip


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_density_that_raises_stops_the_sweep():
    """A call of the model that raises inside the kernel (reached by address, where Numba can
    only print the exception) stops the sweep with ``ModelCallError`` naming the coordinate;
    the state passed in is left as it was."""
    point, along, _, point_logp = jitted(_raising)
    start = np.zeros(3)
    state = SweepState(start.copy(), point_logp(start))
    with pytest.raises(ModelCallError, match="coordinate 1") as error:
        compiled_sweep(
            state, np.full(3, -3.0), np.full(3, 3.0), settings(True), point, (), along, (),
            np.random.default_rng(0),
        )  # fmt: skip
    assert error.value.index == 1
    np.testing.assert_array_equal(state.position, start)
    # The start's own evaluation, when the sweep makes it, fails before any coordinate.
    beyond = np.array([0.0, 2.5, 0.0])
    with pytest.raises(ModelCallError, match="sweep's start") as error:
        compiled_sweep(
            SweepState(beyond, np.nan), np.full(3, -3.0), np.full(3, 3.0), settings(True),
            point, (), along, (), np.random.default_rng(0),
        )  # fmt: skip
    assert error.value.index is None


def test_cdf_along_points_is_the_cdf_at_each_point():
    """The report row's one walk over the cells gives the pointwise CDF, bit for bit, for
    increasing points, points that turn back (the walk restarts), repeated points, nodes and
    points outside the grid."""
    rng = np.random.default_rng(3)
    nodes = np.sort(rng.uniform(-3.0, 3.0, 12))
    # Flat, rising and falling cells, and a cell with no mass (-inf at both ends).
    logp = -0.5 * nodes**2
    logp[4:6] = -np.inf
    logp[7] = logp[8]
    _, _, slopes, cdf = _tabulate(nodes, logp, 1.0)
    cdf = cdf / cdf[-1]
    points = np.concatenate(
        [
            np.linspace(-4.0, 4.0, 41),
            rng.uniform(-4.0, 4.0, 30),
            nodes,
            nodes[::-1],
            [nodes[3], nodes[3], -5.0, 5.0],
        ]
    )
    out = np.empty(len(points))
    _cdf_along(nodes, cdf, slopes, points, out)
    expected = np.array([_cdf_at(nodes, cdf, slopes, p) for p in points])
    np.testing.assert_array_equal(out, expected)
    assert np.all(np.diff(out[:41]) >= 0) and out[0] == 0.0 and out[40] == 1.0


def test_a_cells_middle_takes_its_share_of_the_mass_from_one_exponential():
    """Points at the cells' middles (the default report's) take the middle's share, which agrees
    with the CDF at the point to rounding on flat, rising, falling, steep (past the overflow of
    ``expm1``), half-infinite and empty cells; a point just off a middle takes the general
    path, bit for bit."""
    nodes = np.linspace(-3.0, 3.0, 13)
    logp = -0.5 * nodes**2
    logp[4:6] = -np.inf
    logp[7] = logp[8]
    logp[10] = logp[9] + 800.0
    _, _, slopes, cdf = _tabulate(nodes, logp, 1.0)
    cdf = cdf / cdf[-1]
    middles = 0.5 * (nodes[1:] + nodes[:-1])
    off = middles + 1e-6
    for points, check in [
        (middles, lambda out, exact: np.testing.assert_allclose(out, exact, rtol=1e-13, atol=0)),
        (off, np.testing.assert_array_equal),
    ]:
        out = np.empty(len(points))
        _cdf_along(nodes, cdf, slopes, points, out)
        check(out, np.array([_cdf_at(nodes, cdf, slopes, p) for p in points]))


def test_same_draws_where_cells_are_split_for_their_curvature(monkeypatch):
    """Twelve nodes on [-6, 6], about two conditional standard deviations apart: the
    curvature criterion cuts cells into several pieces (more evaluations than without it), and
    both sweeps cut the same ones."""
    lower, upper = np.full(3, -6.0), np.full(3, 6.0)
    info = compare(_gaussian, settings(True, L=12), lower, upper, np.zeros(3))
    monkeypatch.setattr(sfp, "CURVATURE_NATS", np.inf)
    without = compare(_gaussian, settings(True, L=12), lower, upper, np.zeros(3))
    assert info.n_logp_evals > without.n_logp_evals


@numba.njit
def _call_at(function, x):
    return function((x,))[0][()]


def test_a_function_address_is_called_through_the_address_it_holds():
    point, *_ = jitted(_gaussian)
    x = np.array([0.3, -1.2, 0.5])
    address = FunctionAddress(point, (x.copy(),))
    assert isinstance(numba.typeof(address), AddressedFunctionType)
    assert _call_at(address, x) == _gaussian(x)
    # A second function of the same signature: the same compiled caller, the other function.
    other = FunctionAddress(jitted(_beta_like)[0], (x.copy(),))
    y = np.array([0.4, 0.6, 0.1])
    assert _call_at(other, y) == _beta_like(y)


def test_a_function_address_that_lost_its_address_raises_instead_of_calling():
    point, *_ = jitted(_gaussian)
    x = np.array([0.3, -1.2, 0.5])
    address = FunctionAddress(point, (x.copy(),))
    del address._address
    with pytest.raises(AttributeError, match="_address"):
        _call_at(address, x)
