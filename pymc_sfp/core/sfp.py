"""One SFP sweep (Berrones 2009, §1) as plain functions over arrays: conditional → proposal →
accept/reject, coordinate by coordinate, and the tuning of automatic boxes.

A sweep visits every coordinate of ``x`` once. For coordinate ``i`` on its box ``[a_i, b_i]``,
with the others fixed, the log-density is tabulated on a grid (``line_logp``), the conditional CDF
is built by :mod:`pymc_sfp.core.fokker_planck` (Eq. 4, by quadrature or by the paper's
collocation, Eq. 5 and 11), and a value is drawn by inverting it. With ``correct=True`` the draw is
an independence proposal for that coordinate, mixed with a little uniform mass on the box
(:data:`DEFENSIVE_WEIGHT`), and accepted or rejected with the exact log-density ratio
(Metropolis-within-Gibbs); ``correct=False`` is the paper's uncorrected sampler.

The log-density is passed in as two callables, so nothing here imports PyMC:
``line_logp(x, i, values) -> (logp, dlogp or None)`` along coordinate ``i`` and
``point_logp(x) -> float``. Randomness comes from a NumPy ``Generator``: each sweep draws its
uniforms in one block first (:func:`draw_uniforms`, three per coordinate), so a sweep is
reproducible from the generator's state and the compiled sweep
(:mod:`pymc_sfp.core.compiled_sweep`) makes the same draws from the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_sfp.core.fokker_planck import (
    CollocationBasis,
    TabulatedConditional,
    cell_log_mass,
    collocation_conditional,
    conditional_logpdf,
    conditional_ppf,
    quadrature_conditional,
)

__all__ = [
    "DEFENSIVE_WEIGHT",
    "BoxTuning",
    "SweepInfo",
    "SweepSettings",
    "SweepState",
    "curvature_pieces",
    "draw_uniforms",
    "interpolation_error",
    "logp_at_proposal",
    "open_interval",
    "probe_interval",
    "probe_line",
    "propose",
    "propose_on_grid",
    "refit_boxes",
    "resolve_line",
    "sweep",
    "track_boxes",
]

#: Weight of the uniform component mixed into corrected proposals, so that every point of the box
#: can be proposed even where the tabulated conditional is zero.
DEFENSIVE_WEIGHT = 1e-3
#: Share of the box width, at each edge, where conditional mass counts as piling up at the edge.
EDGE_FRACTION = 0.01
#: Conditional mass within ``EDGE_FRACTION`` of an edge above which the edge counts as hit.
EDGE_MASS = 1e-3
#: Quantiles whose envelope, over tuning draws, sets the automatic boxes.
ENVELOPE_QUANTILE = 1e-6
#: Change of the log-density (in units of ``D``) between neighbouring nodes above which a cell
#: that holds mass is split: the conditional is resolved wherever it has mass.
RESOLUTION_NATS = 5.0
#: Estimated error (nats) of the piecewise-exponential interpolation inside a cell that holds
#: mass, from the curvature of the log-density at its ends, above which the cell is split: a
#: coarse grid is refined where the conditional is curved and has mass, so that a smooth
#: conditional is resolved with few nodes. Unlike the other criteria it is not required: a line
#: whose refinement budget ends with only curved cells left counts as resolved.
CURVATURE_NATS = 0.03
#: Share of the conditional's mass below which a cell is not split for its curvature: its
#: interpolation error costs little acceptance.
CURVATURE_MASS = 0.01
#: Most pieces a cell is cut into in one round for its curvature.
MAX_CURVATURE_PIECES = 8
#: The line's cells are cut for their curvature only where the sum over cells of their share of
#: the mass times their interpolation error exceeds this (nats). On Gaussians and mixtures that
#: sum was 2.5-8 times the total-variation distance between the interpolated conditional and the
#: exact one, which bounds the marginals' error and is about the rejection rate, so below it that
#: distance stays below about 0.02 (an acceptance of 0.98, below which
#: :func:`pymc_sfp.sfp_marginals` warns). Refining further does not pay: a round costs a call of
#: the model and a new table of the line, more than the effective sample size that a rejection
#: rate of 1-2 % loses (about twice that rate; ``benchmarks/RESULTS.md``, "Grid resolution").
CURVATURE_BUDGET = 0.05
#: Share of the conditional's mass (bounded above per cell) below which a cell is not refined.
NEGLIGIBLE_MASS = 1e-6
#: Largest share of the conditional's mass that one cell may hold: a conditional whose mass sits
#: in a few cells (a mode narrower than the grid spacing) is resolved by splitting them.
MAX_CELL_MASS = 0.2
#: Share of the mass at which a cell with one finite and one non-finite end (the edge of a hard
#: constraint) stops being split; its flat density then wastes at most this share of proposals.
EDGE_CELL_MASS = 1e-3
#: How many times wider than an automatic box the line is probed for mass it misses.
PROBE_FACTOR = 9.0
#: Most nodes that refinement may add to a line, as a multiple of its initial nodes.
REFINEMENT_BUDGET = 4

LineLogp = Callable[[np.ndarray, int, np.ndarray], tuple[np.ndarray, np.ndarray | None]]
PointLogp = Callable[[np.ndarray], float]
#: A box's end: one coordinate's, or every coordinate's.
Bound = float | np.ndarray


class SweepSettings(NamedTuple):
    """What stays fixed from sweep to sweep.

    Attributes
    ----------
    unit_nodes : ndarray
        Grid of the conditional on the unit interval (collocation points, or ``L`` equally
        spaced points for quadrature).
    basis : CollocationBasis or None
        The collocation basis, or ``None`` for quadrature.
    D : float
        Diffusion constant: the sweep targets ``exp(logp / D)``.
    correct : bool
        Metropolis-correct each coordinate's draw.
    interval : ndarray of bool, shape (N,)
        Coordinates whose box is an open support (their end points are never evaluated).
    watch_edges : ndarray of bool, shape (N,)
        Coordinates whose conditional mass near the box edges is checked (user and automatic
        boxes; a support is no truncation).
    report_points : ndarray, shape (K,)
        Points on the unit interval where each conditional CDF is recorded (``K = 0``: none).
    """

    unit_nodes: np.ndarray
    basis: CollocationBasis | None
    D: float
    correct: bool
    interval: np.ndarray
    watch_edges: np.ndarray
    report_points: np.ndarray


class SweepState(NamedTuple):
    """The chain's position (sampling coordinates) and the log-density there."""

    position: np.ndarray
    logp: float


class SweepInfo(NamedTuple):
    """What one sweep did.

    Attributes
    ----------
    n_accepted : int
        Coordinates whose draw was accepted (all of them with ``correct=False``).
    n_invalid : int
        Collocation conditionals ``ŷ`` that were not CDFs (replaced by the quadrature
        conditional on the same points, refined).
    empty : ndarray of bool, shape (N,)
        Lines with no finite log-density at any node (the coordinate stays where it is).
    unresolved : ndarray of bool, shape (N,)
        Conditionals still under-resolved after refinement (:func:`resolve_line`): their
        proposal is poor, so the chain mixes slowly in that coordinate (exact all the same when
        corrected).
    n_nonfinite : int
        Non-finite log-densities met on the grids and at the proposals.
    n_logp_evals : int
        Log-density evaluations.
    edge_low, edge_high : ndarray of bool, shape (N,)
        Conditional mass piled up at the lower / upper box edge (``watch_edges`` coordinates).
    quantile_low, quantile_high : ndarray, shape (N,)
        The conditional's ``ENVELOPE_QUANTILE`` and ``1 - ENVELOPE_QUANTILE`` quantiles, for the
        coordinates asked for and not at an edge (NaN elsewhere).
    report_grid, report_cdf : ndarray, shape (N, K)
        Each conditional CDF at ``report_points`` scaled to its box.
    """

    n_accepted: int
    n_invalid: int
    empty: np.ndarray
    unresolved: np.ndarray
    n_nonfinite: int
    n_logp_evals: int
    edge_low: np.ndarray
    edge_high: np.ndarray
    quantile_low: np.ndarray
    quantile_high: np.ndarray
    report_grid: np.ndarray
    report_cdf: np.ndarray


def open_interval(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box shrunk by ``1e-12`` of its width at each end (a support's end points are not in
    the domain of its transform)."""
    margin = 1e-12 * (upper - lower)
    return lower + margin, upper - margin


def interpolation_error(nodes: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Estimated error (nats) of the linear interpolation of ``f`` inside each cell.

    ``h² |f''| / 8`` with ``h`` the cell's width and ``|f''|`` the larger of the second divided
    differences at its two ends (zero at the grid's ends and next to a non-finite value): for a
    Gaussian conditional of sd ``σ`` it is ``h² / (8 σ²)``.

    Parameters
    ----------
    nodes : ndarray, shape (G,)
        Strictly increasing.
    f : ndarray, shape (G,)
        The scaled log-density at the nodes (``-inf`` where it is not finite).

    Returns
    -------
    ndarray, shape (G - 1,)
    """
    width = np.diff(nodes)
    with np.errstate(invalid="ignore"):
        slope = np.diff(f) / width
        bend = np.abs(np.diff(slope)) * 2.0 / (width[:-1] + width[1:])
    curvature = np.zeros(len(nodes))
    curvature[1:-1] = np.where(np.isfinite(bend), bend, 0.0)
    return width * width * np.maximum(curvature[:-1], curvature[1:]) / 8.0


def curvature_pieces(error: np.ndarray, width: np.ndarray, min_width: float) -> np.ndarray:
    """How many equal pieces to cut each cell into for its curvature: enough to bring its
    interpolation error (which falls with the square of the width) to :data:`CURVATURE_NATS`,
    at least 2, at most :data:`MAX_CURVATURE_PIECES`, and none narrower than ``min_width``."""
    wanted = np.ceil(np.sqrt(error / CURVATURE_NATS))
    most = np.minimum(float(MAX_CURVATURE_PIECES), np.floor(width / min_width))
    return np.maximum(2.0, np.minimum(wanted, most)).astype(np.int64)


def resolve_line(
    x: np.ndarray,
    index: int,
    nodes: np.ndarray,
    logp: np.ndarray,
    line_logp: LineLogp,
    D: float,
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Refine a tabulated line until the conditional is resolved wherever it has mass.

    A cell is split at its midpoint while it may hold more than :data:`NEGLIGIBLE_MASS` of the
    mass (bounded by its width times its larger end's density) and the log-density changes across
    it by more than :data:`RESOLUTION_NATS` (the piecewise-exponential interpolation of
    :func:`~pymc_sfp.core.fokker_planck.quadrature_conditional` is poor there: a narrow mode may
    hide between two nodes); while it holds more than :data:`MAX_CELL_MASS` of the interpolated
    mass (the mode is narrower than the spacing); and while it has one finite and one non-finite
    end and may hold more than :data:`EDGE_CELL_MASS` (the edge of a hard constraint, located by
    bisection). Once no cell needs a split for those reasons, a line resolved so poorly that the
    cells' shares of the mass times their interpolation errors (:func:`interpolation_error`) sum
    to more than :data:`CURVATURE_BUDGET` has its cells that hold more than
    :data:`CURVATURE_MASS` of the mass and whose error exceeds :data:`CURVATURE_NATS` cut into
    as many pieces as that error asks for (:func:`curvature_pieces`), so that it takes few
    rounds: a safety net for a grid much coarser than the conditional (a wide box, a small
    ``L``), which never takes the budget from the other criteria. New nodes are
    evaluated in one call of ``line_logp`` per round. A line that needs no refinement is returned
    unchanged, without evaluations.

    Parameters
    ----------
    x : ndarray
        The current point; coordinate ``index`` varies along the line.
    index : int
    nodes, logp : ndarray, shape (G,)
        The initial grid (strictly increasing) and the log-density there.
    line_logp : callable
    D : float
        Diffusion constant (the conditional is ``exp(logp / D)``).

    Returns
    -------
    nodes, logp : ndarray
        The refined grid and the log-density there.
    n_evals : int
        Log-density evaluations spent.
    resolved : bool
        ``False`` when cells that hold mass still change by more than :data:`RESOLUTION_NATS`
        after :data:`REFINEMENT_BUDGET` times the initial number of nodes, or cannot be split in
        floating point.
    """
    budget = REFINEMENT_BUDGET * len(nodes)
    min_width = 64 * np.finfo(float).eps * max(abs(nodes[0]), abs(nodes[-1]), nodes[-1] - nodes[0])
    n_evals = 0
    while True:
        f = np.where(np.isfinite(logp), logp / D, -np.inf)
        if not np.isfinite(f).any():
            return nodes, logp, n_evals, True
        # Relative to the maximum, as quadrature_conditional: the compiled sweep computes the
        # cells once for both. Sums are cumulative sums, in the compiled sweep's order.
        f = f - np.max(f)
        left, right = f[:-1], f[1:]
        log_bound = np.log(np.diff(nodes)) + np.maximum(left, right)
        bound_peak = np.max(log_bound)
        log_total = bound_peak + np.log(np.cumsum(np.exp(log_bound - bound_peak))[-1])
        edge = np.isfinite(left) != np.isfinite(right)
        log_mass, _ = cell_log_mass(nodes, f)
        cumulative = np.concatenate([[0.0], np.cumsum(np.exp(log_mass - np.max(log_mass)))])
        with np.errstate(invalid="ignore"):
            steep = np.abs(right - left) > RESOLUTION_NATS
        has_mass = log_bound > log_total + np.log(NEGLIGIBLE_MASS)
        steep = (steep & has_mass) | (np.diff(cumulative) > MAX_CELL_MASS * cumulative[-1])
        required = steep | (edge & (log_bound > log_total + np.log(EDGE_CELL_MASS)))
        error = interpolation_error(nodes, f)
        share = np.diff(cumulative) / cumulative[-1]
        curved = (share > CURVATURE_MASS) & (error > CURVATURE_NATS)
        curved &= np.cumsum(share * error)[-1] > CURVATURE_BUDGET
        width = np.diff(nodes)
        divisible = width > min_width
        unresolved = (required & steep & ~divisible).any()
        # Curvature only costs acceptance: its splits wait until no other cell needs one, so
        # that they never take the budget from those.
        split = required & divisible
        pieces = np.where(split, 2, 1)
        if not split.any():
            split = curved & divisible
            pieces = np.where(split, curvature_pieces(error, width, min_width), 1)
        if not split.any():
            return nodes, logp, n_evals, not unresolved
        count = int(np.sum(pieces - 1))
        if n_evals + count > budget:
            return nodes, logp, n_evals, not (split & steep).any()
        cells = np.repeat(np.arange(len(width)), pieces - 1)
        step = np.concatenate([np.arange(1, p) for p in pieces]).astype(float)
        new_nodes = nodes[cells] + width[cells] * step / pieces[cells]
        new_logp, _ = line_logp(x, index, new_nodes)
        n_evals += count
        nodes = np.insert(nodes, cells + 1, new_nodes)
        logp = np.insert(np.asarray(logp, dtype=float), cells + 1, new_logp)


def _defensive_logpdf(log_density: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """The defensive proposal's log-density from the conditional's, ``log_density``, at the
    same points."""
    return np.logaddexp(
        np.log1p(-DEFENSIVE_WEIGHT) + log_density,
        np.log(DEFENSIVE_WEIGHT) - np.log(upper - lower),
    )


def proposal_logpdf(
    conditional: TabulatedConditional, value: float, lower: float, upper: float
) -> float:
    """Log-density of the defensive proposal ``(1 − w) · conditional + w · U(lower, upper)``."""
    return float(_defensive_logpdf(conditional.logpdf(value), lower, upper))


def propose_on_grid(
    nodes: np.ndarray,
    cdf: np.ndarray,
    slopes: np.ndarray,
    lower: float,
    upper: float,
    current: np.ndarray,
    uniforms: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Corrected proposals (:func:`propose`) of many lines tabulated on one grid, at once.

    Parameters
    ----------
    nodes : ndarray, shape (G,)
        The grid, from ``lower`` to ``upper``.
    cdf, slopes : ndarray, shape (R, G) and (R, G - 1)
        The lines' conditionals (:func:`~pymc_sfp.core.fokker_planck.quadrature_cdfs`).
    lower, upper : float
        The box.
    current : ndarray, shape (R,)
        Each line's current value.
    uniforms : ndarray, shape (R, 3)
        Each line's row of :func:`draw_uniforms`.

    Returns
    -------
    proposals : ndarray, shape (R,)
        The draws, each what :func:`propose` draws from the same row of uniforms.
    log_q_ratio : ndarray, shape (R,)
        ``log q(current) − log q(proposal)`` (:func:`proposal_logpdf`), for the Metropolis test.
    """
    drawn = conditional_ppf(nodes, cdf, slopes, uniforms[:, 1])
    uniform = lower + (upper - lower) * uniforms[:, 1]
    proposals = np.where(uniforms[:, 0] < DEFENSIVE_WEIGHT, uniform, drawn)
    log_q_proposal = _defensive_logpdf(
        conditional_logpdf(nodes, cdf, slopes, proposals), lower, upper
    )
    log_q_current = _defensive_logpdf(conditional_logpdf(nodes, cdf, slopes, current), lower, upper)
    return proposals, log_q_current - log_q_proposal


def draw_uniforms(rng: np.random.Generator, n: int) -> np.ndarray:
    """The uniforms of one sweep over ``n`` coordinates, shape ``(n, 3)``.

    Row ``i`` belongs to coordinate ``i``: whether the corrected proposal takes the defensive
    uniform component, the proposal's quantile (or its position on the box for the uniform
    component), and the Metropolis test. Uncorrected sweeps use only the second column.
    ``rng.random`` makes the numbers of ``rng.uniform`` in half its time.
    """
    return rng.random((n, 3))


def propose(
    conditional: TabulatedConditional,
    lower: float,
    upper: float,
    correct: bool,
    uniforms: np.ndarray,
) -> tuple[float, float]:
    """A draw from the proposal and its log-density (0 when uncorrected: it is not needed).

    ``uniforms`` is one coordinate's row of :func:`draw_uniforms`. Corrected: the defensive
    proposal of :func:`proposal_logpdf`; uncorrected: the conditional alone.
    """
    if not correct:
        return float(conditional.ppf(uniforms[1])), 0.0
    if uniforms[0] < DEFENSIVE_WEIGHT:
        value = float(lower + (upper - lower) * uniforms[1])
    else:
        value = float(conditional.ppf(uniforms[1]))
    return value, proposal_logpdf(conditional, value, lower, upper)


def logp_at_proposal(
    x: np.ndarray,
    index: int,
    proposal: float,
    logp_current: float,
    line_logp: LineLogp,
    point_logp: PointLogp,
    relative: bool,
) -> tuple[float, int]:
    """The log-density at ``x`` with ``x[index] = proposal``, and the evaluations it took.

    For a ``relative`` line (known up to a constant of the line), the current log-density plus
    the line's change from ``x[index]`` to ``proposal`` (two evaluations of the line, which cost
    little where the line evaluates only the terms reading the coordinate); at one point with
    ``point_logp`` otherwise, and where the current log-density or the change is not a number.
    """
    n_evals = 0
    if relative and np.isfinite(logp_current):
        ends, _ = line_logp(x, index, np.array([x[index], proposal]))
        n_evals = 2
        change = ends[1] - ends[0] if np.isfinite(ends[0]) else np.nan
        if not np.isnan(change):
            return float(logp_current + change), n_evals
    candidate = x.copy()
    candidate[index] = proposal
    return float(point_logp(candidate)), n_evals + 1


def sweep(
    state: SweepState,
    lower: np.ndarray,
    upper: np.ndarray,
    settings: SweepSettings,
    line_logp: LineLogp,
    point_logp: PointLogp,
    rng: np.random.Generator,
    *,
    order: np.ndarray | None = None,
    track_quantiles: np.ndarray | None = None,
    relative: bool = False,
    uniforms: np.ndarray | None = None,
) -> tuple[SweepState, SweepInfo]:
    """One SFP sweep: every coordinate, in ``order``, drawn from its conditional on its box.

    Parameters
    ----------
    state : SweepState
        Start of the sweep; ``state.logp`` must be ``point_logp(state.position)`` (``-inf`` if not
        finite) when ``settings.correct``, or NaN: the sweep then evaluates it (counted in
        ``n_logp_evals``).
    lower, upper : ndarray, shape (N,)
        Each coordinate's box.
    settings : SweepSettings
    line_logp, point_logp : callable
        The log-density along one coordinate and at one point (see the module docstring).
    rng : numpy.random.Generator
    order : ndarray of int, optional
        Coordinate order (default ``0 … N-1``).
    track_quantiles : ndarray of bool, shape (N,), optional
        Coordinates whose conditional quantiles are wanted in the info (box tuning).
    relative : bool, default False
        ``line_logp`` may differ from the log-density by a constant of the line (a function of
        the other coordinates): the proposal's log-density is then the current one plus the
        change along the line (:func:`logp_at_proposal`).
    uniforms : ndarray, shape (N, 3), optional
        The sweep's uniforms (:func:`draw_uniforms`); drawn from ``rng`` when not given. A
        caller that may run a sweep again after a failed one gives them, so that the second
        makes the draws the first would have made.

    Returns
    -------
    state : SweepState
        The new position and its log-density (not re-evaluated when uncorrected: ``logp`` is then
        the start's).
    info : SweepInfo
    """
    x = state.position.copy()
    logp_current = state.logp
    n = len(x)
    n_report = len(settings.report_points)
    accepted = n_invalid = n_nonfinite = evaluations = 0
    if np.isnan(logp_current):
        logp_current = float(point_logp(x))
        logp_current = logp_current if np.isfinite(logp_current) else -np.inf
        evaluations += 1
    empty = np.zeros(n, dtype=bool)
    unresolved = np.zeros(n, dtype=bool)
    edge_low = np.zeros(n, dtype=bool)
    edge_high = np.zeros(n, dtype=bool)
    quantiles = np.full((2, n), np.nan)
    report_grid = np.empty((n, n_report))
    report_cdf = np.empty((n, n_report))
    if uniforms is None:
        uniforms = draw_uniforms(rng, n)
    for i in range(n) if order is None else order:
        a, b = lower[i], upper[i]
        nodes = a + settings.unit_nodes * (b - a)
        points = nodes
        if settings.interval[i]:
            points = np.clip(nodes, *open_interval(a, b))
        logp, dlogp = line_logp(x, i, points)
        evaluations += len(points)
        conditional = None
        # The gradients that collocation solves with are blind to where the density is zero (a
        # hard constraint, a NaN hole): such a line takes the quadrature conditional, which is.
        if settings.basis is not None and np.all(np.isfinite(logp)):
            conditional, _ = collocation_conditional(settings.basis, a, b, dlogp, settings.D)
            n_invalid += conditional is None
        if conditional is None:
            nodes, logp, n_new, resolved = resolve_line(x, i, nodes, logp, line_logp, settings.D)
            evaluations += n_new
            unresolved[i] = not resolved
            conditional = quadrature_conditional(nodes, logp, settings.D)
        n_nonfinite += int(np.count_nonzero(~np.isfinite(logp)))
        if n_report:
            report_grid[i] = a + settings.report_points * (b - a)
        if conditional is None:
            # No finite log-density anywhere on the line: nothing to draw from, stay put.
            empty[i] = True
            if n_report:
                report_cdf[i] = (report_grid[i] >= x[i]).astype(float)
            continue

        proposal, log_q_proposal = propose(conditional, a, b, settings.correct, uniforms[i])
        if settings.interval[i]:
            proposal = float(np.clip(proposal, *open_interval(a, b)))
        if settings.correct:
            logp_proposal, n_evals = logp_at_proposal(
                x, i, proposal, logp_current, line_logp, point_logp, relative
            )
            evaluations += n_evals
            if not np.isfinite(logp_proposal):
                n_nonfinite += 1
                log_ratio = -np.inf
            else:
                log_q_current = proposal_logpdf(conditional, x[i], a, b)
                log_ratio = (logp_proposal - logp_current) / settings.D - (
                    log_q_proposal - log_q_current
                )
            if np.log(uniforms[i, 2]) < log_ratio:
                x[i] = proposal
                logp_current = logp_proposal
                accepted += 1
        else:
            x[i] = proposal
            accepted += 1

        if settings.watch_edges[i]:
            low_mass, high_mass = conditional.mass_near_edges(EDGE_FRACTION)
            edge_low[i], edge_high[i] = low_mass > EDGE_MASS, high_mass > EDGE_MASS
            if (
                track_quantiles is not None
                and track_quantiles[i]
                and not (edge_low[i] or edge_high[i])
            ):
                quantiles[:, i] = conditional.ppf(
                    np.array([ENVELOPE_QUANTILE, 1 - ENVELOPE_QUANTILE])
                )
        if n_report:
            report_cdf[i] = conditional.cdf_at(report_grid[i])
    info = SweepInfo(
        n_accepted=accepted,
        n_invalid=n_invalid,
        empty=empty,
        unresolved=unresolved,
        n_nonfinite=n_nonfinite,
        n_logp_evals=evaluations,
        edge_low=edge_low,
        edge_high=edge_high,
        quantile_low=quantiles[0],
        quantile_high=quantiles[1],
        report_grid=report_grid,
        report_cdf=report_cdf,
    )
    return SweepState(x, logp_current), info


class BoxTuning(NamedTuple):
    """Automatic boxes during tuning: the boxes, and the envelope of the conditionals'
    quantiles since the last refit (``inf``/``-inf`` where nothing was seen)."""

    lower: np.ndarray
    upper: np.ndarray
    envelope_lower: np.ndarray
    envelope_upper: np.ndarray


def track_boxes(boxes: BoxTuning, auto: np.ndarray, info: SweepInfo) -> BoxTuning:
    """After a tuning sweep: an automatic box whose edge was hit moves that edge out by one box
    width (and forgets its envelope); the others widen their quantile envelope."""
    hit_low, hit_high = info.edge_low & auto, info.edge_high & auto
    # Called after every tuning sweep, mostly with no edge hit: whole-array operations only
    # (a boolean-indexed update costs several array operations), and none for the boxes then.
    # fmin and fmax keep the envelope where no quantile was tracked (NaN, as at an edge hit).
    envelope_lower = np.where(
        auto, np.fmin(boxes.envelope_lower, info.quantile_low), boxes.envelope_lower
    )
    envelope_upper = np.where(
        auto, np.fmax(boxes.envelope_upper, info.quantile_high), boxes.envelope_upper
    )
    if not (hit_low.any() or hit_high.any()):
        return BoxTuning(boxes.lower.copy(), boxes.upper.copy(), envelope_lower, envelope_upper)
    hit = hit_low | hit_high
    width = boxes.upper - boxes.lower
    lower = boxes.lower - width * hit_low
    upper = boxes.upper + width * hit_high
    envelope_lower[hit] = np.inf
    envelope_upper[hit] = -np.inf
    return BoxTuning(lower, upper, envelope_lower, envelope_upper)


def refit_boxes(boxes: BoxTuning, auto: np.ndarray, *, allow_shrink: bool) -> BoxTuning:
    """Refit automatic boxes to their quantile envelope widened by half its width on each side
    (never narrower than before unless ``allow_shrink``); the envelopes restart."""
    refit = auto & np.isfinite(boxes.envelope_lower) & np.isfinite(boxes.envelope_upper)
    low, high = boxes.envelope_lower[refit], boxes.envelope_upper[refit]
    span = np.maximum(high - low, 1e-8 * (1.0 + np.abs(low)))
    new_lower, new_upper = low - 0.5 * span, high + 0.5 * span
    if not allow_shrink:
        new_lower = np.minimum(new_lower, boxes.lower[refit])
        new_upper = np.maximum(new_upper, boxes.upper[refit])
    lower, upper = boxes.lower.copy(), boxes.upper.copy()
    envelope_lower, envelope_upper = boxes.envelope_lower.copy(), boxes.envelope_upper.copy()
    lower[refit], upper[refit] = new_lower, new_upper
    envelope_lower[refit], envelope_upper[refit] = np.inf, -np.inf
    return BoxTuning(lower, upper, envelope_lower, envelope_upper)


def probe_interval(lower: Bound, upper: Bound) -> tuple[Bound, Bound]:
    """The line :func:`probe_line` probes for the box ``[lower, upper]``: centred on it,
    :data:`PROBE_FACTOR` times as wide."""
    centre, half_width = 0.5 * (lower + upper), 0.5 * PROBE_FACTOR * (upper - lower)
    return centre - half_width, centre + half_width


def probe_line(
    x: np.ndarray,
    index: int,
    lower: float,
    upper: float,
    line_logp: LineLogp,
    D: float,
    n_points: int,
) -> tuple[float, float] | None:
    """Where the conditional has mass on a line :data:`PROBE_FACTOR` times wider than the box.

    An automatic box tuned from the conditionals it contains never learns of mass outside it:
    a chain that starts at one of two distant modes keeps a box around that mode. Probing a
    wider, centred line (``n_points`` nodes, refined by :func:`resolve_line`) finds such mass.

    Returns
    -------
    tuple of float or None
        The probed conditional's ``ENVELOPE_QUANTILE`` and ``1 - ENVELOPE_QUANTILE`` quantiles,
        or ``None`` when the log-density is finite nowhere on the probed line.
    """
    a, b = probe_interval(lower, upper)
    # As the sweep places its nodes on a box (and the compiled probe does).
    nodes = a + np.linspace(0.0, 1.0, n_points) * (b - a)
    logp, _ = line_logp(x, index, nodes)
    nodes, logp, _, _ = resolve_line(x, index, nodes, logp, line_logp, D)
    conditional = quadrature_conditional(nodes, logp, D)
    if conditional is None:
        return None
    low, high = conditional.ppf(np.array([ENVELOPE_QUANTILE, 1 - ENVELOPE_QUANTILE]))
    return float(low), float(high)
