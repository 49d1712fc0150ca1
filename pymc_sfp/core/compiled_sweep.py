"""The SFP sweep of :func:`pymc_sfp.core.sfp.sweep` compiled with Numba (Berrones 2009, §1).

The reference sweep calls the log-density, builds the conditional, draws and accepts from Python,
coordinate by coordinate; at ``L = 100`` that Python work costs far more than the model's own
evaluation. Here a whole sweep is one call of machine code: the line evaluation, the grid
refinement (:func:`~pymc_sfp.core.sfp.resolve_line`), the quadrature conditional (Eq. 4 by its
integrating factor, :func:`~pymc_sfp.core.fokker_planck.quadrature_conditional`), the inverse-CDF
draw and the Metropolis correction, with the same formulas, save two that are cheaper and as
accurate: the cells' masses are summed in linear scale relative to the largest density (one
``exp`` per node, one ``expm1`` per cell; the reference sums logarithms), and the CDF inside a
cell takes one ``expm1`` per point. For the same uniforms
(:func:`~pymc_sfp.core.sfp.draw_uniforms`) and the same log-density it makes the same draws as
the reference, which stays the tested specification: the same decisions (refinement,
acceptance, edges), and the same numbers up to the last bits (those formulas, and NumPy's
vectorised ``exp`` and ``log`` and the C library's, which Numba calls, round differently).

The log-density is given as two Numba-jitted callables, the calling convention of the functions
PyTensor's Numba backend generates (each returns a tuple of its outputs)::

    point(x, *point_extra) -> (logp,)                 # logp a 0-d float64 array
    along(x, index, values, *along_extra) -> (logp,)  # logp with x[index] = values, shape (G,)

``index`` is a 0-d int64 array; ``point_extra`` and ``along_extra`` are tuples of further inputs
passed through unchanged (a compiled model's shared variables). ``along`` may also be several
functions of the same signature, each serving a range of coordinates (``line_starts``): a
model's line compiled per variable computes only what that variable reads. Only the quadrature
solver is compiled: collocation stays with the reference sweep. Nothing here imports PyMC.

With ``relative=True`` the line may differ from the log-density by a constant of the line (any
function of the other coordinates), as a line that evaluates only the terms reading the
coordinate does: the conditional is normalised, and the Metropolis correction takes the
proposal's log-density as the current one plus the change along the line, ``along`` at the
current value and the proposal (``point`` only where the current log-density is not finite).
The draws are the reference sweep's up to rounding.

The kernel receives the two functions by the address of their machine code
(:class:`FunctionAddress`, Numba's first-class functions), not as Numba functions: a kernel
that took them as such would be compiled for each function, so for each model and in every
process (seconds), while one taking their addresses is compiled for their signature, once, and
cached on disk. A model's exception cannot cross such a call (Numba prints it and the call
returns no array), so the kernel checks every result and stops with :class:`ModelCallError`.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Sequence

import numba
import numpy as np
from numba.core import cgutils
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.core.types.function_type import FunctionType, WrapperAddressProtocol
from numba.experimental.function_type import FunctionModel
from numba.extending import NativeValue, register_model, typeof_impl, unbox

from pymc_sfp.core import sfp
from pymc_sfp.core.sfp import SweepInfo, SweepSettings, SweepState, draw_uniforms

__all__ = [
    "AddressedFunctionType",
    "CompiledSweep",
    "FunctionAddress",
    "ModelCallError",
    "compiled_probe",
    "compiled_sweep",
    "sweep_kernel",
]

_LOG2 = math.log(2.0)

# The arithmetic of the conditionals is cached on disk and only the functions that call the
# model's (the kernel, the refinement loop, the evaluation) are compiled per model. Those do no
# array arithmetic of their own: each NumPy function or array expression in them is compiled
# again in every process, for seconds (the shape checks of an array assignment alone took 6 s).
# Cached functions get the constants of ``core.sfp`` as arguments: Numba's cache would not see
# a constant they read change.
_jit = numba.njit(cache=True, nogil=True)


def _constants() -> tuple:
    """The constants of ``core.sfp`` the kernel uses, read when a :class:`CompiledSweep` is
    made: a kernel compiled once is reused for every model built again, so it must not freeze
    them. ``resolve_line``'s
    limits are in the order :func:`_refinement` takes them. As floats, so that their types, and
    with them the kernel's signature, are always the same."""
    return (
        float(sfp.REFINEMENT_BUDGET),
        (
            float(sfp.NEGLIGIBLE_MASS),
            float(sfp.EDGE_CELL_MASS),
            float(sfp.MAX_CELL_MASS),
            float(sfp.RESOLUTION_NATS),
            float(sfp.CURVATURE_NATS),
            float(sfp.CURVATURE_MASS),
            float(sfp.MAX_CURVATURE_PIECES),
            float(sfp.CURVATURE_BUDGET),
        ),
        float(sfp.DEFENSIVE_WEIGHT),
        float(sfp.EDGE_FRACTION),
        float(sfp.EDGE_MASS),
        float(sfp.ENVELOPE_QUANTILE),
    )


@_jit
def _logaddexp(x: float, y: float) -> float:
    # NumPy's npy_logaddexp, step for step, so reductions agree with np.logaddexp.reduce.
    if x == y:
        return x + _LOG2
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(math.exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(math.exp(tmp))
    return tmp


@_jit
def _log_exprel(delta: float) -> float:
    if abs(delta) < 1e-6:
        return 0.5 * delta + delta * delta / 24.0
    if delta > 0:
        return delta + math.log(-math.expm1(-delta)) - math.log(delta)
    return math.log(-math.expm1(delta)) - math.log(-delta)


@_jit
def _fraction_to_offset(fraction: float, delta: float) -> float:
    if delta > 1e-9:
        t = 1.0 + math.log(fraction + (1.0 - fraction) * math.exp(-delta)) / delta
    elif delta < -1e-9:
        t = math.log1p(fraction * math.expm1(delta)) / delta
    else:
        t = fraction
    return min(max(t, 0.0), 1.0)


@_jit
def _offset_to_fraction(t: float, delta: float) -> float:
    return _fraction_in_cell(t, delta, _cell_scale(delta))


#: Slope above which ``expm1(delta)`` overflows: such cells take the overflow-free form.
_STEEPEST = 700.0


@_jit
def _cell_scale(delta: float) -> float:
    """The factor of :func:`_fraction_in_cell` for a cell of slope ``delta``: the reciprocal
    of ``expm1(delta)`` (of ``expm1(-delta)`` beyond :data:`_STEEPEST`), computed once for
    the many points of one cell."""
    if delta > _STEEPEST:
        return 1.0 / math.expm1(-delta)
    if abs(delta) > 1e-9:
        return 1.0 / math.expm1(delta)
    return 1.0


@_jit
def _fraction_in_cell(t: float, delta: float, scale: float) -> float:
    """The share of a cell's mass below offset ``t`` (``fokker_planck._offset_to_fraction``),
    ``expm1(delta t) / expm1(delta)``: one ``expm1`` per point, ``scale`` the cell's
    :func:`_cell_scale`. Both ``expm1`` are accurate to the last bits, so the share is, down to
    the smallest; beyond :data:`_STEEPEST` it is ``exp(delta (t - 1)) expm1(-delta t) /
    expm1(-delta)``, as the reference computes it for every rising cell."""
    if delta > _STEEPEST:
        frac = math.exp(delta * (t - 1.0)) * math.expm1(-delta * t) * scale
    elif abs(delta) > 1e-9:
        frac = math.expm1(delta * t) * scale
    else:
        frac = t
    return min(max(frac, 0.0), 1.0)


#: A report point within this offset of its cell's middle takes the middle's share of the mass,
#: :func:`_midpoint_fraction`: the points of the default report, ``2 L − 1`` evenly spread over
#: the box, are the grid's nodes and its cells' middles up to rounding (offsets ``0.5 ± 1e-15``
#: on an unrefined grid), and the share at ``0.5 + ε`` differs from the middle's by a relative
#: ``|delta| ε`` at most.
MIDPOINT_TOLERANCE = 1e-13


@_jit
def _midpoint_fraction(delta: float) -> float:
    """The share of a cell's mass below its middle, ``expm1(delta / 2) / expm1(delta) =
    1 / (1 + exp(delta / 2))``: one ``exp``, against two ``expm1`` for a lone point at any
    offset (:func:`_cell_scale`, :func:`_fraction_in_cell`, which it matches to rounding,
    flat cells included)."""
    if abs(delta) <= 1e-9:
        return 0.5
    return 1.0 / (1.0 + math.exp(0.5 * delta))


@_jit
def _scaled(logp: np.ndarray, D: float) -> np.ndarray:
    f = logp / D
    for k in range(len(f)):
        if not np.isfinite(f[k]):
            f[k] = -np.inf
    return f


@_jit
def _exprel_of_descent(drop: float) -> float:
    """``(1 − exp(−drop)) / drop``, 1 at 0: a cell's mass relative to its width times its
    larger end's density, for a log-density that falls by ``drop ≥ 0`` across it."""
    if drop == 0.0:
        return 1.0
    return -math.expm1(-drop) / drop


@_jit
def _tabulate(
    nodes: np.ndarray, logp: np.ndarray, D: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What both the refinement test (``resolve_line``) and the conditional
    (``quadrature_conditional``) read of a tabulated line, computed once: the scaled log-density
    less its maximum at the nodes; per cell the bound on its mass (its width times its larger
    end's density) and its slope (``cell_log_mass``'s ``delta``); and the CDF at the nodes
    before normalisation, the cumulative sum of the cells' masses under the
    piecewise-exponential interpolation. The CDF is empty when the log-density is finite
    nowhere.

    The reference works with logarithms of the masses; here they are linear, relative to the
    largest density (no cell's bound exceeds its width): one ``exp`` per node and one ``expm1``
    per cell instead of three logarithms and exponentials per cell, and what underflows is
    below ``1e-300`` of the peak, far below every threshold of the refinement."""
    f = _scaled(logp, D)
    top = np.max(f)
    cells = len(nodes) - 1
    bound = np.zeros(cells)
    delta = np.zeros(cells)
    if not np.isfinite(top):
        return f, bound, delta, np.empty(0)
    f -= top
    cdf = np.zeros(len(nodes))
    right_density = math.exp(f[0])
    for k in range(cells):
        left, right = f[k], f[k + 1]
        left_density, right_density = right_density, math.exp(right)
        bound[k] = (nodes[k + 1] - nodes[k]) * max(left_density, right_density)
        mass = 0.0
        finite_left, finite_right = np.isfinite(left), np.isfinite(right)
        if finite_left and finite_right:
            delta[k] = right - left
            mass = bound[k] * _exprel_of_descent(abs(delta[k]))
        elif finite_left != finite_right:
            mass = bound[k]
        cdf[k + 1] = cdf[k] + mass
    return f, bound, delta, cdf


@_jit
def _normalised(cdf: np.ndarray) -> np.ndarray:
    """The CDF of :func:`_tabulate` normalised (``quadrature_conditional``), in place."""
    total = cdf[-1]
    for k in range(len(cdf) - 1):
        cdf[k] /= total
    cdf[-1] = 1.0
    return cdf


@_jit
def _ppf(nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    cells = len(nodes) - 1
    k = np.searchsorted(cdf[1:], u, side="left")
    k = min(max(k, 0), cells - 1)
    mass = cdf[k + 1] - cdf[k]
    if not mass > 0:
        # Never land in an empty cell: the first cell that holds mass.
        for j in range(cells):
            if cdf[j + 1] - cdf[j] > 0:
                k = j
                break
        mass = cdf[k + 1] - cdf[k]
    fraction = (u - cdf[k]) / mass if mass > 0 else 0.5
    t = _fraction_to_offset(min(max(fraction, 0.0), 1.0), slopes[k])
    return nodes[k] + t * (nodes[k + 1] - nodes[k])


@_jit
def _cell_of(nodes: np.ndarray, x: float) -> tuple[int, float]:
    k = np.searchsorted(nodes, x, side="right") - 1
    k = min(max(k, 0), len(nodes) - 2)
    return k, (x - nodes[k]) / (nodes[k + 1] - nodes[k])


@_jit
def _cdf_at(nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, x: float) -> float:
    if x < nodes[0]:
        return 0.0
    if x > nodes[-1]:
        return 1.0
    k, t = _cell_of(nodes, x)
    return cdf[k] + (cdf[k + 1] - cdf[k]) * _offset_to_fraction(min(max(t, 0.0), 1.0), slopes[k])


@_jit
def _cdf_along(
    nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, points: np.ndarray, out: np.ndarray
) -> None:
    """``out[m] = _cdf_at(..., points[m])``, the same numbers, in one walk over the cells for
    increasing points (the walk starts again where they decrease). A point at a node takes the
    node's CDF (the fraction of a cell at its left node is exactly 0), and one at a cell's
    middle its :func:`_midpoint_fraction`, so the default report, whose points are the grid's
    nodes and its cells' middles (``marginal_points == 2 L − 1``), costs one ``exp`` per cell;
    other points compute their cell's :func:`_cell_scale` once per cell."""
    cells = len(nodes) - 1
    k, previous = 0, -np.inf
    scale, scale_cell = 1.0, -1
    for m in range(len(points)):
        x = points[m]
        if x < nodes[0]:
            out[m] = 0.0
            continue
        if x > nodes[-1]:
            out[m] = 1.0
            continue
        if x < previous:
            k = 0
        previous = x
        while k < cells - 1 and nodes[k + 1] <= x:
            k += 1
        if x == nodes[k]:
            out[m] = cdf[k]
            continue
        t = (x - nodes[k]) / (nodes[k + 1] - nodes[k])
        if abs(t - 0.5) <= MIDPOINT_TOLERANCE:
            fraction = _midpoint_fraction(slopes[k])
        else:
            if scale_cell != k:
                scale, scale_cell = _cell_scale(slopes[k]), k
            fraction = _fraction_in_cell(min(max(t, 0.0), 1.0), slopes[k], scale)
        out[m] = cdf[k] + (cdf[k + 1] - cdf[k]) * fraction


@_jit
def _logpdf(nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, x: float) -> float:
    if x < nodes[0] or x > nodes[-1]:
        return -np.inf
    k, t = _cell_of(nodes, x)
    mass = cdf[k + 1] - cdf[k]
    log_mass = math.log(mass) if mass > 0 else -np.inf
    delta = slopes[k]
    return log_mass - math.log(nodes[k + 1] - nodes[k]) + delta * t - _log_exprel(delta)


@_jit
def _proposal_logpdf(
    nodes: np.ndarray,
    cdf: np.ndarray,
    slopes: np.ndarray,
    x: float,
    lower: float,
    upper: float,
    defensive_weight: float,
) -> float:
    return _logaddexp(
        math.log1p(-defensive_weight) + _logpdf(nodes, cdf, slopes, x),
        math.log(defensive_weight) - math.log(upper - lower),
    )


@_jit
def _interpolation_error(nodes: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``core.sfp.interpolation_error``, in the same order of operations."""
    cells = len(nodes) - 1
    error = np.empty(cells)
    # The curvature at node k + 1, the right end of cell k; 0 at the grid's ends.
    left_curvature = 0.0
    for k in range(cells):
        right_curvature = 0.0
        if k + 1 < cells:
            width_left = nodes[k + 1] - nodes[k]
            width_right = nodes[k + 2] - nodes[k + 1]
            slope_left = (f[k + 1] - f[k]) / width_left
            slope_right = (f[k + 2] - f[k + 1]) / width_right
            bend = abs(slope_right - slope_left) * 2.0 / (width_left + width_right)
            if np.isfinite(bend):
                right_curvature = bend
        width = nodes[k + 1] - nodes[k]
        error[k] = width * width * max(left_curvature, right_curvature) / 8.0
        left_curvature = right_curvature
    return error


@_jit
def _refinement(
    nodes: np.ndarray,
    table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    min_width: float,
    limits: tuple[float, ...],
):
    """One round of ``resolve_line``'s test on the line's :func:`_tabulate`: the pieces to cut
    each cell into (1: none; for their curvature, ``core.sfp.curvature_pieces``, only where no
    cell needs a split for another reason), whether a steep cell cannot be split, whether a cell
    to split is steep, and whether the log-density is finite nowhere. ``limits`` are the
    refinement limits of :func:`_constants`."""
    (
        negligible_mass,
        edge_cell_mass,
        max_cell_mass,
        resolution_nats,
        curvature_nats,
        curvature_mass,
        max_pieces,
        curvature_budget,
    ) = limits
    f, bound, _, cdf = table
    cells = len(nodes) - 1
    pieces = np.ones(cells, dtype=np.int64)
    if len(cdf) == 0:
        return pieces, False, False, True
    total = 0.0
    for k in range(cells):
        total += bound[k]
    negligible = total * negligible_mass
    edge_cut = total * edge_cell_mass
    most = max_cell_mass * cdf[-1]
    stuck = split_steep = any_split = False
    for k in range(cells):
        left, right = f[k], f[k + 1]
        steep = abs(right - left) > resolution_nats and bound[k] > negligible
        steep = steep or (cdf[k + 1] - cdf[k] > most)
        edge = np.isfinite(left) != np.isfinite(right)
        want = steep or (edge and bound[k] > edge_cut)
        if nodes[k + 1] - nodes[k] > min_width:
            if want:
                pieces[k] = 2
            any_split = any_split or want
            split_steep = split_steep or steep
        elif steep:
            stuck = True
    if any_split:
        return pieces, stuck, split_steep, False
    # Only now, as the reference: cells are cut for their curvature once nothing else needs a
    # split.
    error = _interpolation_error(nodes, f)
    weighted = 0.0
    for k in range(cells):
        weighted += (cdf[k + 1] - cdf[k]) / cdf[-1] * error[k]
    if not weighted > curvature_budget:
        return pieces, stuck, split_steep, False
    for k in range(cells):
        width = nodes[k + 1] - nodes[k]
        share = (cdf[k + 1] - cdf[k]) / cdf[-1]
        if width > min_width and share > curvature_mass and error[k] > curvature_nats:
            wanted = np.ceil(np.sqrt(error[k] / curvature_nats))
            room = min(max_pieces, np.floor(width / min_width))
            pieces[k] = int(max(2.0, min(wanted, room)))
    return pieces, stuck, split_steep, False


@_jit
def _insert(old: np.ndarray, pieces: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old`` with ``pieces[k] - 1`` values of ``new`` after its ``k``-th, in order."""
    out = np.empty(len(old) + len(new))
    j = 0
    m = 0
    for k in range(len(old)):
        out[j] = old[k]
        j += 1
        if k < len(pieces):
            for _ in range(pieces[k] - 1):
                out[j] = new[m]
                j += 1
                m += 1
    return out


@_jit
def _new_nodes(pieces: np.ndarray) -> int:
    """How many nodes cutting each cell into ``pieces`` adds."""
    count = 0
    for k in range(len(pieces)):
        count += pieces[k] - 1
    return count


@_jit
def _subdivisions(nodes: np.ndarray, pieces: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` (:func:`_new_nodes`) points that cut each cell into ``pieces`` equal
    ones, in order."""
    out = np.empty(count)
    m = 0
    for k in range(len(pieces)):
        width = nodes[k + 1] - nodes[k]
        for step in range(1, pieces[k]):
            out[m] = nodes[k] + width * float(step) / float(pieces[k])
            m += 1
    return out


@_jit
def _min_width(nodes: np.ndarray) -> float:
    """The narrowest cell ``resolve_line`` splits."""
    return 64 * np.finfo(np.float64).eps * max(abs(nodes[0]), abs(nodes[-1]), nodes[-1] - nodes[0])


@_jit
def _index_array(index: int) -> np.ndarray:
    return np.array(index, dtype=np.int64)


@_jit
def _float64_copy(values: np.ndarray) -> np.ndarray:
    out = np.empty(len(values))
    for k in range(len(values)):
        out[k] = values[k]
    return out


@_jit
def _grid(unit_nodes: np.ndarray, a: float, b: float, interval: bool):
    """The nodes of the box ``[a, b]``, and the points to evaluate at: the nodes, moved off
    the ends of an open interval by ``1e-12`` of its width."""
    nodes = a + unit_nodes * (b - a)
    if not interval:
        return nodes, nodes
    margin = 1e-12 * (b - a)
    return nodes, np.minimum(np.maximum(nodes, a + margin), b - margin)


@_jit
def _sweep_outputs(n: int, n_report: int):
    """The per-coordinate outputs of a sweep, before it: ``flags``, whose rows are ``empty``,
    ``unresolved``, ``edge_low`` and ``edge_high`` (all ``False``; one array, because each
    array the kernel returns costs Python an object), ``quantiles`` (NaN) and the report
    arrays."""
    return (
        np.zeros((4, n), dtype=np.bool_),
        np.full((2, n), np.nan),
        np.empty((n, n_report)),
        np.empty((n, n_report)),
    )


@_jit
def _copy(x: np.ndarray) -> np.ndarray:
    return x.copy()


@_jit
def _failed(values: np.ndarray) -> bool:
    """Whether a model call returned no array: the address call's result when the model raised
    (Numba's wrapper prints the exception and returns zeros)."""
    return values.ctypes.data == 0


@numba.njit(cache=True, nogil=True, inline="always")
def _resolve(along, extra, x, index, nodes, logp, D, budget_factor, limits):
    """``resolve_line``: refine until the conditional is resolved where it has mass. Returns
    the nodes, their log-density, the evaluations made, whether it is resolved, whether a
    call of the model failed, and the :func:`_tabulate` of the nodes returned. ``index`` is
    the coordinate as the line function takes it (:func:`_index_array`)."""
    budget = budget_factor * len(nodes)
    min_width = _min_width(nodes)
    n_evals = 0
    while True:
        table = _tabulate(nodes, logp, D)
        pieces, stuck, split_steep, empty = _refinement(nodes, table, min_width, limits)
        if empty:
            return nodes, logp, n_evals, True, False, table
        count = _new_nodes(pieces)
        if count == 0:
            return nodes, logp, n_evals, not stuck, False, table
        if n_evals + count > budget:
            return nodes, logp, n_evals, not split_steep, False, table
        new_nodes = _subdivisions(nodes, pieces, count)
        (line,) = along((x, index, new_nodes) + extra)  # noqa: RUF005
        if _failed(line):
            return nodes, logp, n_evals, False, True, table
        new_logp = _float64_copy(line)
        n_evals += count
        nodes = _insert(nodes, pieces, new_nodes)
        logp = _insert(logp, pieces, new_logp)


@_jit
def _line_of(line_starts: np.ndarray, i: int) -> int:
    """Which of the line functions serves coordinate ``i``: the last that starts at or before
    it."""
    return np.searchsorted(line_starts, i, side="right") - 1


@_jit
def sweep_kernel(
    point,
    point_extra,
    alongs,
    line_starts,
    along_extra,
    x,
    logp_current,
    lower,
    upper,
    unit_nodes,
    D,
    correct,
    relative,
    interval,
    watch_edges,
    report_points,
    order,
    track,
    probe,
    uniforms,
    constants,
):
    """One sweep in machine code: :func:`pymc_sfp.core.sfp.sweep` for the quadrature solver.

    ``point`` and each of ``alongs`` are :class:`FunctionAddress` es, called with one tuple of
    arguments, ``alongs[k]`` for the coordinates from ``line_starts[k]`` up to the next start;
    ``relative``: the line is known up to a constant of the line (module docstring);
    ``uniforms[i]`` are coordinate ``i``'s three uniforms; ``track`` as ``track_quantiles``
    (all ``False`` for none); ``constants`` those of :func:`_constants`.
    ``probe``: draw nothing; each coordinate of ``order`` gets the envelope quantiles of its
    conditional on its box at ``x`` in ``quantiles`` (NaN where the log-density is finite
    nowhere on it), what :func:`~pymc_sfp.core.sfp.probe_line` finds on that line.
    A NaN ``logp_current`` is evaluated first (as the reference sweep does). Returns the
    coordinate at which a call of the model failed (``-1`` for none, ``len(x)`` for the start's
    evaluation: the sweep stops there), the new position and log-density, then the counts and
    arrays of :class:`~pymc_sfp.core.sfp.SweepInfo` (``n_invalid`` is always 0), its four
    boolean arrays as the rows of one (:func:`_sweep_outputs`).
    """
    budget_factor, limits, defensive_weight, edge_fraction, edge_mass, envelope_quantile = constants
    x = _copy(x)
    n = len(x)
    n_report = len(report_points)
    accepted = n_nonfinite = evaluations = 0
    failed = -1
    flags, quantiles, report_grid, report_cdf = _sweep_outputs(n, n_report)
    empty, unresolved, edge_low, edge_high = flags[0], flags[1], flags[2], flags[3]
    if math.isnan(logp_current):
        (start,) = point((x,) + point_extra)  # noqa: RUF005
        if _failed(start):
            order = order[:0]
            failed = n
        else:
            logp_current = float(start[()])
            if not math.isfinite(logp_current):
                logp_current = -np.inf
            evaluations += 1
    # The current value and the proposal, where the correction evaluates the line at both.
    ends = np.empty(2)
    for i in order:
        a, b = lower[i], upper[i]
        margin = 1e-12 * (b - a)
        nodes, points = _grid(unit_nodes, a, b, interval[i])
        along = alongs[_line_of(line_starts, i)]
        # The model's functions take one tuple (FunctionAddress); Numba builds it by
        # concatenation, not by unpacking into a display.
        index = _index_array(i)
        (line,) = along((x, index, points) + along_extra)  # noqa: RUF005
        if _failed(line):
            failed = i
            break
        logp = _float64_copy(line)
        evaluations += len(points)
        nodes, logp, n_new, resolved, failure, table = _resolve(
            along, along_extra, x, index, nodes, logp, D, budget_factor, limits
        )
        evaluations += n_new
        if failure:
            failed = i
            break
        unresolved[i] = not resolved
        _, _, slopes, cdf = table
        if len(cdf):
            cdf = _normalised(cdf)
        for value in logp:
            n_nonfinite += not math.isfinite(value)
        if probe:
            if len(cdf):
                quantiles[0, i] = _ppf(nodes, cdf, slopes, envelope_quantile)
                quantiles[1, i] = _ppf(nodes, cdf, slopes, 1 - envelope_quantile)
            continue
        for k in range(n_report):
            report_grid[i, k] = a + report_points[k] * (b - a)
        if len(cdf) == 0:
            empty[i] = True
            for k in range(n_report):
                report_cdf[i, k] = 1.0 if report_grid[i, k] >= x[i] else 0.0
            continue

        u = uniforms[i]
        if correct and u[0] < defensive_weight:
            proposal = a + (b - a) * u[1]
        else:
            proposal = _ppf(nodes, cdf, slopes, u[1])
        if interval[i]:
            proposal = min(max(proposal, a + margin), b - margin)
        if correct:
            log_q_proposal = _proposal_logpdf(nodes, cdf, slopes, proposal, a, b, defensive_weight)
            current = x[i]
            change = np.nan
            if relative and math.isfinite(logp_current):
                ends[0], ends[1] = current, proposal
                (pair,) = along((x, index, ends) + along_extra)  # noqa: RUF005
                if _failed(pair):
                    failed = i
                    break
                evaluations += 2
                if math.isfinite(pair[0]):
                    change = pair[1] - pair[0]
            if not math.isnan(change):
                logp_proposal = logp_current + change
            else:
                x[i] = proposal
                (value,) = point((x,) + point_extra)  # noqa: RUF005
                x[i] = current
                if _failed(value):
                    failed = i
                    break
                logp_proposal = float(value[()])
                evaluations += 1
            if not math.isfinite(logp_proposal):
                n_nonfinite += 1
                log_ratio = -np.inf
            else:
                log_q_current = _proposal_logpdf(
                    nodes, cdf, slopes, current, a, b, defensive_weight
                )
                log_ratio = (logp_proposal - logp_current) / D - (log_q_proposal - log_q_current)
            if math.log(u[2]) < log_ratio:
                x[i] = proposal
                logp_current = logp_proposal
                accepted += 1
        else:
            x[i] = proposal
            accepted += 1

        if watch_edges[i]:
            span = nodes[-1] - nodes[0]
            low_mass = _cdf_at(nodes, cdf, slopes, nodes[0] + edge_fraction * span)
            high_mass = 1.0 - _cdf_at(nodes, cdf, slopes, nodes[-1] - edge_fraction * span)
            edge_low[i], edge_high[i] = low_mass > edge_mass, high_mass > edge_mass
            if track[i] and not (edge_low[i] or edge_high[i]):
                quantiles[0, i] = _ppf(nodes, cdf, slopes, envelope_quantile)
                quantiles[1, i] = _ppf(nodes, cdf, slopes, 1 - envelope_quantile)
        if n_report:
            _cdf_along(nodes, cdf, slopes, report_grid[i], report_cdf[i])
    return (
        failed,
        x,
        logp_current,
        accepted,
        n_nonfinite,
        evaluations,
        flags,
        quantiles,
        report_grid,
        report_cdf,
    )


class ModelCallError(RuntimeError):
    """A call of the model's compiled log-density failed inside :func:`compiled_sweep` (the
    model raised; Numba printed its exception). ``index`` is the coordinate being updated
    (``None`` for the evaluation at the sweep's start)."""

    def __init__(self, index: int | None):
        where = "at the sweep's start" if index is None else f"at coordinate {index}"
        super().__init__(
            f"the model's log-density raised an error inside the compiled sweep {where} "
            "(printed above by Numba)"
        )
        self.index = index


class AddressedFunctionType(FunctionType):
    """Numba's first-class function type, for a :class:`FunctionAddress`: the same calls, but
    unboxed by reading the address the object holds. Numba's own unboxing of a first-class
    function calls back into Python twice per function and call (``_get_wrapper_address``
    and ``_get_jit_address``, each after unpickling the signature): about 3 µs a function, a
    tenth of a sweep over ten coordinates."""


register_model(AddressedFunctionType)(FunctionModel)


@unbox(AddressedFunctionType)
def _unbox_function_address(typ, obj, c):
    function = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    voidptr = c.context.get_value_type(numba.types.voidptr)
    # The address is read from the object's ``_address``; where that fails, the error stops
    # the call before the kernel runs.
    function.c_addr = cgutils.get_null_value(voidptr)
    function.jit_addr = cgutils.get_null_value(voidptr)
    function.py_addr = c.builder.bitcast(obj, voidptr)
    address = c.pyapi.object_getattr_string(obj, "_address")
    failed = cgutils.is_null(c.builder, address)
    with c.builder.if_then(c.builder.not_(failed), likely=True):
        function.c_addr = c.pyapi.long_as_voidptr(address)
        c.pyapi.decref(address)
    return NativeValue(function._getvalue(), is_error=failed)


class FunctionAddress(WrapperAddressProtocol):
    """A jitted function passed to :func:`sweep_kernel` by the address of its machine code.

    The kernel is then compiled for the function's signature instead of for the function, so
    one compilation, cached on disk, serves every model whose arguments have the same types,
    in this process and the next. The function is called with one tuple of arguments: the
    overload a call from Python with those arguments unpacked makes (``def f(*args)``, as
    PyTensor's Numba functions are). Built by :func:`_address`.

    ``any_layout``: the arrays it returns are typed with the general layout (``"A"``), so that
    functions whose outputs are contiguous and functions whose outputs are views have one type
    and can be passed as one tuple (a line compiled per variable). Numba lays an array out in
    memory the same way whatever its layout type (data, shape and strides), so reading a
    contiguous array through the general type reads the same numbers.

    Numba types it as :class:`AddressedFunctionType`, whose unboxing reads ``_address``.
    """

    def __init__(self, function: Callable, arguments: tuple, *, any_layout: bool = False):
        function = _taking_a_tuple(function)
        signature = (numba.typeof(arguments),)
        if signature not in function.overloads:
            function(*arguments)
        result = function.overloads[signature]
        self._signature = _any_layout(result.signature) if any_layout else result.signature
        self._address = result.library.get_pointer_to_function(
            result.fndesc.llvm_cfunc_wrapper_name
        )
        self.function = function  # keeps the machine code alive

    def __wrapper_address__(self) -> int:
        return self._address

    def signature(self):
        return self._signature


@typeof_impl.register(FunctionAddress)
def _typeof_function_address(value: FunctionAddress, context) -> AddressedFunctionType:
    return AddressedFunctionType(value.signature())


def _taking_a_tuple(function: Callable) -> Callable:
    """``function`` if it is ``def f(*args)``, else a jitted ``f(*args)`` that calls it."""
    if function.py_func.__code__.co_flags & inspect.CO_VARARGS:
        return function

    @numba.njit(nogil=True)
    def call(*arguments):
        return function(*arguments)

    return call


def _fingerprint(values: tuple) -> tuple:
    """What Numba's types of the arrays ``values`` depend on, computed faster than
    ``numba.typeof``; anything else by its Python type."""
    return tuple(_array_key(v) if isinstance(v, np.ndarray) else type(v) for v in values)


def _array_key(value: np.ndarray) -> tuple:
    flags = value.flags
    layout = (flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
    return value.dtype.str, value.ndim, layout


def _copied(values: tuple) -> tuple:
    return tuple(np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values)


#: Per (function, argument fingerprint), its :class:`FunctionAddress`; the oldest dropped first
#: (as from the kernel's entry points).
_ADDRESSES: dict[tuple, FunctionAddress] = {}
_MOST_ADDRESSES = 64
#: Per kernel and its functions' addresses (:func:`_entry_point`), the kernel's entry point.
_ENTRY_POINTS: dict[tuple, Callable] = {}


def _any_layout(signature: numba.core.typing.Signature) -> numba.core.typing.Signature:
    """``signature`` with the arrays of its returned tuple typed with the general layout."""
    returned = signature.return_type
    if isinstance(returned, numba.types.BaseTuple):
        relaxed = [t.copy(layout="A") if isinstance(t, numba.types.Array) else t for t in returned]
        returned = numba.types.Tuple(relaxed)
    return numba.core.typing.signature(returned, *signature.args)


def _address(
    function: Callable, extras: tuple, leading: Callable[[], tuple], *, any_layout: bool = False
) -> FunctionAddress:
    """``function``'s :class:`FunctionAddress` for arguments ``(*leading(), *extras)`` of these
    types. The leading arguments' types never change (:func:`compiled_sweep` makes them), so
    only the extras' are looked at; ``leading`` is called, and the function once with copies of
    all the arguments, only when it has no such overload yet."""
    key = (function, _fingerprint(extras), any_layout)
    address = _ADDRESSES.get(key)
    if address is None:
        arguments = _copied((*leading(), *extras))
        address = _ADDRESSES[key] = FunctionAddress(function, arguments, any_layout=any_layout)
        if len(_ADDRESSES) > _MOST_ADDRESSES:
            del _ADDRESSES[next(iter(_ADDRESSES))]
    return address


def _entry_point(kernel: Callable, key: tuple, arguments: tuple) -> Callable:
    """The entry point of the jitted ``kernel``'s machine code for ``arguments``: compiled, or
    loaded from Numba's disk cache, once per argument types; called directly, it skips the
    dispatcher's typing of every argument at every call (for a function's address alone, tens
    of µs).

    ``key`` stands for the argument types: the callers fix every type but those of function
    addresses, and an address stands for the types of the extras it was built for, so the
    addresses are the key (:func:`compiled_sweep`: the model's point and line functions; the
    tempering kernels: the density's or the prior sampler's)."""
    key = (kernel, *key)
    entry = _ENTRY_POINTS.get(key)
    if entry is None:
        # The addresses are Numba's first-class functions, which it calls experimental when it
        # types a tuple of them and when it compiles: a warning the user can do nothing about.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            signature = tuple(numba.typeof(v) for v in arguments)
            if signature not in kernel.overloads:
                kernel.compile(signature)
        entry = _ENTRY_POINTS[key] = kernel.overloads[signature].entry_point
        if len(_ENTRY_POINTS) > _MOST_ADDRESSES:
            del _ENTRY_POINTS[next(iter(_ENTRY_POINTS))]
    return entry


class CompiledSweep:
    """:func:`sweep_kernel` for one log-density and one :class:`~pymc_sfp.core.sfp.SweepSettings`,
    called once per sweep.

    What stays fixed from sweep to sweep (the settings' arrays, the constants, the line
    functions' addresses and the kernel's entry point for the extras' types) is prepared once,
    so that a sweep costs the kernel and about 3 µs from Python (over ten coordinates the kernel
    itself takes about 30 µs); packing the kernel's twenty arguments afresh at every sweep
    cost a few microseconds more. A step
    makes one per chain (:class:`~pymc_sfp.step_methods.sfp.SFPStep`); :func:`compiled_sweep`
    and :func:`compiled_probe` make one per call.

    Parameters
    ----------
    settings : SweepSettings
        With ``basis=None`` (the quadrature solver).
    point, along, relative, line_starts
        The log-density, as for :func:`compiled_sweep`.

    Raises
    ------
    ValueError
        If ``settings`` asks for the collocation solver (only quadrature is compiled).
    """

    def __init__(
        self,
        settings: SweepSettings,
        point: Callable,
        along: Callable | Sequence[Callable],
        *,
        relative: bool = False,
        line_starts: np.ndarray | None = None,
    ):
        if settings.basis is not None:
            raise ValueError("compiled_sweep needs settings.basis=None (the quadrature solver)")
        self._point = point
        self._alongs = tuple(along) if isinstance(along, Sequence) else (along,)
        self._line_starts = (
            np.zeros(1, dtype=np.int64)
            if line_starts is None
            else np.ascontiguousarray(line_starts, dtype=np.int64)
        )
        self._fixed = (
            np.ascontiguousarray(settings.unit_nodes, dtype=np.float64),
            float(settings.D),
            bool(settings.correct),
            bool(relative),
            np.ascontiguousarray(settings.interval, dtype=np.bool_),
            np.ascontiguousarray(settings.watch_edges, dtype=np.bool_),
        )
        self._report_points = np.ascontiguousarray(settings.report_points, dtype=np.float64)
        self._constants = _constants()
        n = len(settings.interval)
        # The kernel only reads them: one array each for every sweep in the default order and
        # every sweep that tracks nothing.
        self._every_coordinate = np.arange(n, dtype=np.int64)
        self._no_coordinate = np.zeros(n, dtype=np.bool_)
        self._probe_uniforms = np.zeros((n, 3))
        self._no_report = np.zeros(0)
        #: Per fingerprint of the extras, the functions' addresses and the kernel's entry point.
        self._entries: dict[tuple, tuple] = {}

    def _call(
        self,
        position: np.ndarray,
        logp: float,
        lower: np.ndarray,
        upper: np.ndarray,
        point_extra: tuple,
        along_extra: tuple,
        *,
        order: np.ndarray | None,
        track: np.ndarray | None,
        probe: bool,
        uniforms: np.ndarray,
        report_points: np.ndarray,
    ) -> tuple:
        """:func:`sweep_kernel`'s results, or :class:`ModelCallError` where a call of the model
        failed."""
        position = np.ascontiguousarray(position, dtype=np.float64)
        key = (_fingerprint(point_extra), _fingerprint(along_extra))
        entry = self._entries.get(key)
        if entry is None:
            point_address = _address(self._point, point_extra, lambda: (position,))
            along_addresses = tuple(
                _address(
                    function,
                    along_extra,
                    lambda: (position, np.array(0, dtype=np.int64), position[:1]),
                    any_layout=True,
                )
                for function in self._alongs
            )
            entry = (point_address, along_addresses, None)
        point_address, along_addresses, kernel = entry
        arguments = (
            point_address,
            tuple(point_extra),
            along_addresses,
            self._line_starts,
            tuple(along_extra),
            position,
            float(logp),
            np.ascontiguousarray(lower, dtype=np.float64),
            np.ascontiguousarray(upper, dtype=np.float64),
            *self._fixed,
            report_points,
            self._every_coordinate if order is None else np.ascontiguousarray(order, np.int64),
            self._no_coordinate if track is None else np.ascontiguousarray(track, np.bool_),
            probe,
            np.ascontiguousarray(uniforms, dtype=np.float64),
            self._constants,
        )
        if kernel is None:
            kernel = _entry_point(sweep_kernel, (point_address, *along_addresses), arguments)
            self._entries[key] = (point_address, along_addresses, kernel)
        results = kernel(*arguments)
        if results[0] >= 0:
            raise ModelCallError(int(results[0]) if results[0] < len(position) else None)
        return results

    def sweep(
        self,
        state: SweepState,
        lower: np.ndarray,
        upper: np.ndarray,
        point_extra: tuple,
        along_extra: tuple,
        uniforms: np.ndarray,
        *,
        order: np.ndarray | None = None,
        track_quantiles: np.ndarray | None = None,
    ) -> tuple[SweepState, SweepInfo]:
        """One sweep from ``state``: :func:`compiled_sweep` with the uniforms given.

        Raises
        ------
        ModelCallError
            If a call of the log-density raised; ``state`` is left as it was.
        """
        _, x, logp, accepted, n_nonfinite, evaluations, *per_coordinate = self._call(
            state.position,
            state.logp,
            lower,
            upper,
            point_extra,
            along_extra,
            order=order,
            track=track_quantiles,
            probe=False,
            uniforms=uniforms,
            report_points=self._report_points,
        )
        flags, quantiles, report_grid, report_cdf = per_coordinate
        empty, unresolved, edge_low, edge_high = flags
        info = SweepInfo(
            n_accepted=int(accepted),
            n_invalid=0,
            empty=empty,
            unresolved=unresolved,
            n_nonfinite=int(n_nonfinite),
            n_logp_evals=int(evaluations),
            edge_low=edge_low,
            edge_high=edge_high,
            quantile_low=quantiles[0],
            quantile_high=quantiles[1],
            report_grid=report_grid,
            report_cdf=report_cdf,
        )
        return SweepState(x, float(logp)), info

    def probe(
        self,
        position: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        point_extra: tuple,
        along_extra: tuple,
        coordinates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`compiled_probe` of ``coordinates`` at ``position``.

        Raises
        ------
        ModelCallError
            If a call of the log-density raised.
        """
        probe_lower, probe_upper = sfp.probe_interval(np.asarray(lower), np.asarray(upper))
        # A finite log-density at the start, so that the kernel does not evaluate it: nothing
        # is drawn, so nothing reads it.
        *_, quantiles, _, _ = self._call(
            position,
            0.0,
            probe_lower,
            probe_upper,
            point_extra,
            along_extra,
            order=coordinates,
            track=None,
            probe=True,
            uniforms=self._probe_uniforms,
            report_points=self._no_report,
        )
        return quantiles[0], quantiles[1]


def compiled_sweep(
    state: SweepState,
    lower: np.ndarray,
    upper: np.ndarray,
    settings: SweepSettings,
    point: Callable,
    point_extra: tuple,
    along: Callable | Sequence[Callable],
    along_extra: tuple,
    rng: np.random.Generator,
    *,
    order: np.ndarray | None = None,
    track_quantiles: np.ndarray | None = None,
    relative: bool = False,
    line_starts: np.ndarray | None = None,
    uniforms: np.ndarray | None = None,
) -> tuple[SweepState, SweepInfo]:
    """:func:`~pymc_sfp.core.sfp.sweep` in one call of :func:`sweep_kernel`.

    Same arguments and results as the reference sweep, with the log-density given as the jitted
    ``point`` and ``along`` and their further inputs (see the module docstring; ``relative``:
    ``along`` is known up to a constant of the line; several ``along`` functions, of the same
    signature, serve the coordinates from their ``line_starts`` on); each is
    called once from Python, with copies of the arguments, the first time it is seen with
    arguments of these types. The uniforms are drawn from ``rng`` as the reference draws them,
    so both make the same draws from the same generator state; or given (``uniforms``), as to
    the reference.

    Raises
    ------
    ValueError
        If ``settings`` asks for the collocation solver (only quadrature is compiled).
    ModelCallError
        If a call of the log-density raised; ``state`` is left as it was.
    """
    if uniforms is None:
        uniforms = draw_uniforms(rng, len(state.position))
    kernel = CompiledSweep(settings, point, along, relative=relative, line_starts=line_starts)
    return kernel.sweep(
        state,
        lower,
        upper,
        point_extra,
        along_extra,
        uniforms,
        order=order,
        track_quantiles=track_quantiles,
    )


def compiled_probe(
    position: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    settings: SweepSettings,
    point: Callable,
    point_extra: tuple,
    along: Callable | Sequence[Callable],
    along_extra: tuple,
    coordinates: np.ndarray,
    *,
    relative: bool = False,
    line_starts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~pymc_sfp.core.sfp.probe_line` of each of ``coordinates`` at ``position``, on
    the grid of ``settings`` (``probe_line``'s ``n_points`` is the length of its
    ``unit_nodes``), in one call of :func:`sweep_kernel`.

    ``lower`` and ``upper`` are the boxes, widened as ``probe_line`` widens them
    (:func:`~pymc_sfp.core.sfp.probe_interval`); the other arguments as for
    :func:`compiled_sweep`. The kernel's conditionals and quantiles are those of the compiled
    sweep, so the quantiles agree with the reference's as the sweep's tracked quantiles do.

    Returns
    -------
    quantile_low, quantile_high : ndarray, shape (len(position),)
        The probed conditionals' ``ENVELOPE_QUANTILE`` and ``1 - ENVELOPE_QUANTILE``
        quantiles; NaN for the coordinates not probed and where ``probe_line`` returns ``None``
        (the log-density finite nowhere on the probed line).

    Raises
    ------
    ModelCallError
        If a call of the log-density raised.
    """
    kernel = CompiledSweep(settings, point, along, relative=relative, line_starts=line_starts)
    return kernel.probe(position, lower, upper, point_extra, along_extra, coordinates)
