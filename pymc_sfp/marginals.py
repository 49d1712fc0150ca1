"""Analytic (Rao–Blackwellised) marginals from SFP runs (Berrones 2009, Eq. 7).

Averaging the conditional CDFs that an SFP sweep solves for, over the draws, converges to the
marginal CDF of each coordinate: ``⟨ŷ⟩ → y(x_n)``. :class:`pymc_sfp.SFPStep` records each
conditional CDF on a grid in the sample stats (``sfp_cdf__<name>``, and the grid's box in
``sfp_box__<name>``), so the marginals can be rebuilt from the DataTree that ``pm.sample``
returns, whatever the number of chains or processes.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import xarray as xr
from scipy.interpolate import CubicSpline, PchipInterpolator
from scipy.optimize import minimize_scalar

__all__ = [
    "STAT_PREFIX_BOX",
    "STAT_PREFIX_CDF",
    "Marginal",
    "average_conditionals",
    "average_recorded_conditionals",
    "conditional_stats",
    "declare_conditional_stats",
    "recorded_grid",
    "sfp_marginals",
]

#: Sample-stat name prefixes of the SFP marginal format. For a variable ``name``, per draw:
#: ``sfp_cdf__<name>``, shape ``(*variable_shape, K)``, each coordinate's conditional CDF at the
#: ``K = marginal_points`` points of its grid (float32); ``sfp_box__<name>``, shape
#: ``(*variable_shape, 4)``, each coordinate's ``(lower, upper, shift, log)``: the grid is
#: ``shift + g(lower + p (upper - lower))`` for ``p = linspace(0, 1, K)``, with ``g = exp`` where
#: ``log`` is 1 and the identity where it is 0 (:func:`recorded_grid`). ``[lower, upper]`` is
#: the coordinate's box on the sampling scale, and ``g`` with ``shift`` maps it to the scale of
#: the marginal. Four numbers instead of the K grid points keep what a draw sends from a worker
#: process to the trace small.
#: Below this mean acceptance :func:`sfp_marginals` warns that the conditionals it averages
#: are off by up to ``1 −`` the acceptance in total variation (see ``_warn_if_unresolved``).
MIN_ACCEPT_FOR_MARGINALS = 0.98
#: Above this share of a conditional's mass in one recorded cell (the median over draws)
#: :func:`sfp_marginals` warns that the marginal cannot resolve the posterior.
MAX_RECORDED_CELL_MASS = 0.5
STAT_PREFIX_CDF = "sfp_cdf__"
STAT_PREFIX_BOX = "sfp_box__"
BOX_FIELDS = 4


def declare_conditional_stats(name: str, shape: tuple[int, ...], points: int) -> dict:
    """The ``stats_dtypes_shapes`` entries of a variable's recorded conditionals.

    They are object stats: PyMC's NDArray backend stores a float vector stat only as an object.
    """
    return {
        STAT_PREFIX_CDF + name: (object, [*shape, points]),
        STAT_PREFIX_BOX + name: (object, [*shape, BOX_FIELDS]),
    }


def conditional_stats(
    name: str, shape: tuple[int, ...], box: np.ndarray, cdf: np.ndarray
) -> dict[str, np.ndarray]:
    """One draw's stats for a variable: its coordinates' conditional CDFs ``cdf`` on the grids
    that ``box`` describes.

    Parameters
    ----------
    name : str
    shape : tuple of int
        The variable's shape.
    box : ndarray, shape (size, 4)
        Each coordinate's ``(lower, upper, shift, log)`` (see :data:`STAT_PREFIX_BOX`).
    cdf : ndarray, shape (size, K)
        One row per coordinate of the variable, in raveling order.

    Returns
    -------
    dict
        ``{STAT_PREFIX_BOX + name: box, STAT_PREFIX_CDF + name: cdf}``, of shapes
        ``(1, *shape, 4)`` and ``(1, *shape, K)`` (the CDF in float32). The leading length-1 axis
        makes PyMC's ``np.vstack`` of object stats over draws give ``(draws, *shape, ...)``;
        without it, a vector variable's rows would be stacked into draws.
    """
    return {
        STAT_PREFIX_BOX + name: box.reshape(1, *shape, BOX_FIELDS),
        STAT_PREFIX_CDF + name: cdf.astype(np.float32).reshape(1, *shape, cdf.shape[-1]),
    }


def recorded_grid(box: np.ndarray, points: int) -> np.ndarray:
    """The points at which a recorded conditional CDF was taken.

    Parameters
    ----------
    box : array_like, shape (..., 4)
        ``(lower, upper, shift, log)`` per coordinate (see :data:`STAT_PREFIX_BOX`).
    points : int
        ``K``, the number of points (the CDF stat's last axis).

    Returns
    -------
    ndarray, shape (..., K)
        ``shift + g(lower + p (upper - lower))`` for ``p = linspace(0, 1, K)``: the same numbers
        as the sweep's grid (``lower + p (upper - lower)``, :func:`pymc_sfp.core.sfp.sweep`)
        mapped to the marginal's scale.
    """
    box = np.asarray(box, dtype=float)
    fraction = np.linspace(0.0, 1.0, points)
    lower, upper = box[..., 0, None], box[..., 1, None]
    grid = lower + fraction * (upper - lower)
    on_log_scale = np.broadcast_to(box[..., 3, None] > 0, grid.shape)
    grid[on_log_scale] = np.exp(grid[on_log_scale])
    return grid + box[..., 2, None]


class Marginal:
    """A 1-D marginal given by its CDF at increasing points.

    :meth:`cdf` interpolates the CDF with a monotone cubic (PCHIP), so it never decreases, and
    :meth:`pdf` is its continuous, non-negative derivative, faithful in the far tails too.
    :meth:`mode` refines PCHIP's maximum on the derivative of a not-a-knot cubic spline through the
    same values: near a smooth peak that derivative is far more accurate than PCHIP's (on the test
    suite's Beta marginals the mode comes out within 1/400 of the grid spacing instead of 1/3).

    Its resolution is that of the recorded points: ``SFPStep`` records ``marginal_points``
    points spread evenly over each box, so a box much wider than the posterior (the automatic
    box of a log-transformed variable spans many e-folds) leaves few of them in the bulk, and
    the density between them is interpolated. Raise ``marginal_points``, or give ``bounds``,
    for finer marginals.

    Parameters
    ----------
    points : ndarray, shape (K,)
        Strictly increasing.
    cdf_values : ndarray, shape (K,)
        Non-decreasing values in ``[0, 1]`` that increase somewhere. They are rescaled to run
        from 0 to 1: the marginal is that of the recorded range.

    Raises
    ------
    ValueError
        If ``points`` or ``cdf_values`` are not as described.
    """

    def __init__(self, points: np.ndarray, cdf_values: np.ndarray):
        points = np.asarray(points, dtype=float)
        cdf_values = np.asarray(cdf_values, dtype=float)
        if points.ndim != 1 or len(points) < 2 or np.any(~(np.diff(points) > 0)):
            raise ValueError("points must be a strictly increasing 1-D array of length >= 2")
        if cdf_values.shape != points.shape or not np.all(np.isfinite(cdf_values)):
            raise ValueError(
                f"cdf_values must be {len(points)} finite numbers, one per point; got shape "
                f"{cdf_values.shape}"
            )
        # Recorded CDFs are float32: a decrease or an excursion past [0, 1] of a few of its
        # rounding errors is noise; more is not a CDF.
        slack = 1e-5
        if (
            np.any(np.diff(cdf_values) < -slack)
            or cdf_values.min() < -slack
            or cdf_values.max() > 1 + slack
            or not cdf_values[-1] - cdf_values[0] > 0
        ):
            raise ValueError(
                "cdf_values must be non-decreasing values in [0, 1] that increase over the "
                f"points; got values from {cdf_values.min():.6g} to {cdf_values.max():.6g}"
            )
        cdf_values = np.maximum.accumulate(cdf_values)
        # The marginal restricted to the recorded range, so that cdf, pdf, mean and quantile
        # describe one distribution.
        cdf_values = (cdf_values - cdf_values[0]) / (cdf_values[-1] - cdf_values[0])
        self.points = points
        self.cdf_values = cdf_values
        self._interpolant = PchipInterpolator(points, cdf_values, extrapolate=False)
        self._density = self._interpolant.derivative()
        self._smooth_density = CubicSpline(points, cdf_values).derivative()

    def cdf(self, x: Any) -> np.ndarray:
        """Marginal CDF at ``x`` (0 below the recorded range, 1 above, NaN at NaN)."""
        x = np.asarray(x, dtype=float)
        inside = np.nan_to_num(self._interpolant(x), nan=0.0)
        value = np.clip(
            np.where(x < self.points[0], 0.0, np.where(x > self.points[-1], 1.0, inside)), 0.0, 1.0
        )
        return np.where(np.isnan(x), np.nan, value)

    def pdf(self, x: Any) -> np.ndarray:
        """Marginal density at ``x`` (0 outside the recorded range, NaN at NaN)."""
        x = np.asarray(x, dtype=float)
        inside = (x >= self.points[0]) & (x <= self.points[-1])
        value = np.where(inside, np.clip(np.nan_to_num(self._density(x)), 0.0, None), 0.0)
        return np.where(np.isnan(x), np.nan, value)

    def mode(self) -> float:
        """The point of highest marginal density (a global 1-D maximisation).

        The global search is over :meth:`pdf` (PCHIP, which never overshoots); the mode is then
        refined on the cubic spline's density within the recorded cells around that maximum,
        where it is the more accurate of the two. Unevenly spaced points (a log-scale box) can
        make the spline overshoot far from the data's peak: the search never leaves those
        cells, and a refined point where :meth:`pdf` is not at least half its maximum is
        dropped for PCHIP's own.
        """
        dense = np.linspace(self.points[0], self.points[-1], 20 * len(self.points))
        density = np.clip(np.nan_to_num(self._density(dense)), 0.0, None)
        peak = dense[int(np.argmax(density))]
        cell = int(np.clip(np.searchsorted(self.points, peak) - 1, 0, len(self.points) - 2))
        lo, hi = self.points[max(cell - 1, 0)], self.points[min(cell + 2, len(self.points) - 1)]
        refined = self._maximise(self._smooth_density, lo, hi)
        if self.pdf(refined) >= 0.5 * self.pdf(peak):
            return refined
        return self._maximise(self._density, lo, hi)

    @staticmethod
    def _maximise(density: Any, lo: float, hi: float) -> float:
        """The maximum of ``density`` on ``[lo, hi]``: a grid search, then a bounded refinement
        around the best grid point."""
        grid = np.linspace(lo, hi, 201)
        j = int(np.argmax(density(grid)))
        result = minimize_scalar(
            lambda t: -float(density(t)),
            bounds=(grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]),
            method="bounded",
            options={"xatol": 1e-10 * (1 + abs(grid[j]))},
        )
        return float(result.x) if -result.fun >= density(grid[j]) else float(grid[j])

    def mean(self) -> float:
        """Mean of the marginal (midpoint rule over the CDF increments)."""
        mid = 0.5 * (self.points[1:] + self.points[:-1])
        return float(np.sum(mid * np.diff(self.cdf_values)))

    def quantile(self, q: Any) -> np.ndarray:
        """Inverse CDF (monotone linear interpolation between the recorded points); NaN for
        ``q`` outside ``[0, 1]``, as :mod:`scipy.stats` ``ppf`` gives."""
        q = np.asarray(q, dtype=float)
        value = np.interp(q, self.cdf_values, self.points)
        return np.where((q >= 0) & (q <= 1), value, np.nan)

    def __repr__(self) -> str:
        return (
            f"Marginal(range=[{self.points[0]:.4g}, {self.points[-1]:.4g}], "
            f"mode={self.mode():.4g}, mean={self.mean():.4g})"
        )


def average_conditionals(grids: np.ndarray, cdfs: np.ndarray) -> Marginal:
    """Average conditional CDFs recorded on (possibly different) grids into one marginal (Eq. 7).

    Parameters
    ----------
    grids : ndarray, shape (draws, K)
        The increasing points at which each draw's conditional CDF was recorded.
    cdfs : ndarray, shape (draws, K)
        The conditional CDFs at those points.

    Returns
    -------
    Marginal
        The average of the conditionals, on the union of the grids (each conditional is 0 below
        and 1 above its own grid).
    """
    grids = np.asarray(grids, dtype=float)
    cdfs = np.asarray(cdfs, dtype=float)
    if grids.ndim != 2 or grids.shape != cdfs.shape or len(grids) == 0:
        raise ValueError(
            "grids and cdfs must be arrays of the same shape (draws, points) with at least one "
            f"draw; got {grids.shape} and {cdfs.shape}"
        )
    return _average_of_groups(_grouped(grids, cdfs, lambda rows: rows))


def average_recorded_conditionals(boxes: np.ndarray, cdfs: np.ndarray) -> Marginal:
    """:func:`average_conditionals` of conditional CDFs recorded with their boxes, as
    :class:`~pymc_sfp.SFPStep` records them (:data:`STAT_PREFIX_BOX`).

    The same marginal as ``average_conditionals(recorded_grid(boxes, K), cdfs)``, computed
    from the distinct boxes: a chain's boxes are all equal after tuning, so the grids are made
    once per box rather than once per draw, and the CDFs are summed per run of equal boxes.

    Parameters
    ----------
    boxes : ndarray, shape (draws, 4)
        Each draw's ``(lower, upper, shift, log)``.
    cdfs : ndarray, shape (draws, K)
        Each draw's conditional CDF at the ``K`` points of its box (any float dtype; summed in
        float64).

    Returns
    -------
    Marginal
    """
    boxes = np.asarray(boxes, dtype=float)
    cdfs = np.asarray(cdfs)
    if boxes.ndim != 2 or boxes.shape != (len(cdfs), BOX_FIELDS) or cdfs.ndim != 2 or not cdfs.size:
        raise ValueError(
            f"boxes and cdfs must be arrays of shapes (draws, {BOX_FIELDS}) and (draws, points) "
            f"with at least one draw; got {boxes.shape} and {cdfs.shape}"
        )
    return _average_of_groups(_recorded_groups(boxes, cdfs))


class _Groups(NamedTuple):
    """Conditionals recorded on a few distinct grids: each grid (rows), how many draws were
    recorded on it, and their mean CDF on it."""

    grids: np.ndarray
    counts: np.ndarray
    means: np.ndarray


def _grouped(keys: np.ndarray, cdfs: np.ndarray, grid_of: Callable) -> _Groups:
    """Draws grouped by their rows of ``keys`` (the grid, or the box it is made from).

    Runs of equal consecutive keys are found at once (after tuning a chain has one run) and
    told apart by their bytes, so that a key that recurs later joins its group:
    ``np.unique(axis=0)``, sorting the rows column by column, took most of the time.
    ``grid_of`` makes the groups' grids from their first draws' keys.
    """
    n = len(keys)
    starts = np.concatenate([[0], np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1])
    first: dict[bytes, int] = {}
    group_of_run = np.array([first.setdefault(keys[i].tobytes(), len(first)) for i in starts])
    sums = np.zeros((len(first), cdfs.shape[1]))
    np.add.at(sums, group_of_run, np.add.reduceat(cdfs, starts, axis=0, dtype=np.float64))
    counts = np.bincount(group_of_run, weights=np.diff(np.append(starts, n)))
    leading = starts[np.unique(group_of_run, return_index=True)[1]]
    return _Groups(grid_of(keys[leading]), counts, sums / counts[:, None])


def _recorded_groups(boxes: np.ndarray, cdfs: np.ndarray) -> _Groups:
    """:func:`_grouped` by box, each group's grid made by :func:`recorded_grid`."""
    return _grouped(boxes, cdfs, lambda rows: recorded_grid(rows, cdfs.shape[1]))


def _joined(groups: Sequence[_Groups]) -> _Groups:
    return _Groups(*(np.concatenate(parts) for parts in zip(*groups, strict=True)))


def _average_of_groups(groups: _Groups) -> Marginal:
    """The average of the groups' conditionals (Eq. 7), on the union of their grids (each is
    0 below and 1 above its own grid)."""
    points = np.unique(groups.grids)
    return Marginal(points, _cdf_of_groups(groups, points))


def _cdf_of_groups(groups: _Groups, x: np.ndarray) -> np.ndarray:
    """The average of the groups' conditional CDFs at ``x``, interpolated linearly on each
    grid."""
    total = np.zeros(np.shape(x))
    for grid, count, mean in zip(*groups, strict=True):
        total += count * np.interp(x, grid, mean, left=0.0, right=1.0)
    return total / groups.counts.sum()


#: Share of one chain's marginal mass outside another chain's box above which they disagree.
BOX_DISAGREEMENT = 1e-3


def _warn_if_narrower_than_recorded(name: str, cdf: np.ndarray) -> None:
    """Warn when a coordinate's conditionals put most of their mass in one cell of the recorded
    grid: its marginal, interpolated between the recorded points, cannot resolve the posterior
    (a posterior of width 1e-5 in a box of width 1 recorded at 100 points gave a marginal mean
    of 5e-3, the cell's middle).

    Parameters
    ----------
    cdf : ndarray, shape (chain, draw, *shape, K)
    """
    if cdf.shape[-1] < 2 or cdf.size == 0:
        return
    largest_cell = np.max(np.diff(cdf, axis=-1), axis=-1)  # (chain, draw, *shape)
    typical = np.median(largest_cell.reshape(-1, *cdf.shape[2:-1]), axis=0)
    if typical.max() > MAX_RECORDED_CELL_MASS:
        where = np.unravel_index(int(np.argmax(typical)), typical.shape)
        label = name + (f"[{', '.join(map(str, where))}]" if where else "")
        warnings.warn(
            f"the conditionals of {label} put {typical.max():.0%} of their mass in one cell of "
            f"the {cdf.shape[-1]} recorded points (the median over draws): its marginal cannot "
            "resolve the posterior there. Raise marginal_points, or give SFPStep bounds that "
            "fit the posterior more closely (the draws are not affected).",
            UserWarning,
            stacklevel=3,
        )


def _warn_if_boxes_disagree(
    name: str, per_chain: dict[tuple, list[_Groups]], last_boxes: np.ndarray
) -> None:
    """Warn when one chain's conditionals put mass outside another chain's (last) box.

    Automatic boxes are tuned per chain: chains that started near different modes can end with
    boxes that each hold only their own mode, and each chain then samples the posterior
    restricted to its box. Only the recorded stats are needed to see it.

    Parameters
    ----------
    per_chain : dict
        Per coordinate (its index in the variable), each chain's conditionals
        (:func:`_recorded_groups`).
    last_boxes : ndarray, shape (chain, *shape, 4)
        Each chain's last box of each coordinate.
    """
    n_chains = last_boxes.shape[0]
    if n_chains < 2:
        return
    edges = recorded_grid(last_boxes, 2)
    worst, where = 0.0, None
    for index, groups in per_chain.items():
        # Each chain's mean conditional CDF at every chain's box edges.
        ends = edges[(slice(None), *index)]  # (chain, 2)
        for c in range(n_chains):
            at_ends = _cdf_of_groups(groups[c], ends)
            outside = at_ends[:, 0] + 1.0 - at_ends[:, 1]
            outside[c] = 0.0
            d = int(np.argmax(outside))
            if outside[d] > worst:
                worst, where = float(outside[d]), (c, d, index)
    if worst > BOX_DISAGREEMENT and where is not None:
        c, d, index = where
        lower, upper = edges[(d, *index)]
        label = name + (f"[{', '.join(str(int(i)) for i in index)}]" if index else "")
        warnings.warn(
            f"SFP boxes of {label} disagree between chains: chain {c} puts {worst:.3g} of its "
            f"mass outside chain {d}'s box [{float(lower):.4g}, {float(upper):.4g}], so the "
            "chains sample different restrictions of the posterior (e.g. each around its own "
            "mode). Pass common `bounds` wide enough for every chain, or tune longer.",
            UserWarning,
            stacklevel=3,
        )


def sfp_marginals(idata: Any, var_names: str | list[str] | None = None) -> dict[str, Any]:
    """Rao–Blackwellised marginals of every scalar parameter sampled by an ``SFPStep``.

    Implements Berrones (2009) Eq. 7: the marginal CDF of each coordinate is the average, over
    all draws and chains in ``idata``, of the conditional CDFs the sampler solved for.

    Parameters
    ----------
    idata : xarray.DataTree or pymc.backends.base.MultiTrace
        The result of ``pm.sample`` with an :class:`~pymc_sfp.SFPStep` (``marginal_points > 0``):
        the DataTree, of which only the ``sample_stats`` group is read (so tuning draws are
        excluded: kept ones are in ``warmup_sample_stats``), or the ``MultiTrace`` of
        ``return_inferencedata=False``, whose sampler stats are read (every draw it holds,
        tuning draws too if they were kept).
    var_names : str or list of str, optional
        Restrict to these variables.

    Returns
    -------
    dict
        Variable name → :class:`Marginal` for a scalar variable, or an object array of
        :class:`Marginal` with the variable's shape. Marginals are on the variable's own scale
        for untransformed, interval-bounded and log-transformed variables, and on PyMC's
        unconstrained scale (keyed by the value variable's name) otherwise.

    Raises
    ------
    TypeError
        If ``idata`` is neither a DataTree nor a MultiTrace.
    ValueError
        If it holds no SFP conditional CDFs, or none for a name in ``var_names``.

    Warns
    -----
    UserWarning
        When a chain's conditionals put more than 0.1 % of their mass outside another chain's
        box: automatic boxes that each hold a different part of the posterior. When the SFP
        acceptance averaged below 0.98 (a step's own ``accept``, not a ``CompoundStep``'s):
        each proposal comes from the tabulated conditional, so ``1 −`` the acceptance bounds
        the total-variation distance of the conditionals from the exact ones, which the
        marginals inherit. When a coordinate's conditionals put more than half their mass in
        one cell of the recorded points: a posterior narrower than the recording grid.
    """
    read, stat_names = _stat_reader(idata)
    # A CompoundStep's sub-step stats are prefixed ``sampler_<i>__`` when a parallel-tempering
    # step records its explorer's.
    prefixes = {}
    for stat in stat_names:
        match = re.fullmatch(rf"(sampler_\d+__)?{STAT_PREFIX_CDF}(.+)", stat)
        if match:
            prefixes.setdefault(match.group(2), match.group(1) or "")
    names = list(prefixes)
    if not names:
        raise ValueError(
            "idata holds no SFP conditional CDFs (sample stats 'sfp_cdf__*'): sample with "
            "pymc_sfp.SFPStep(marginal_points > 0)"
        )
    if var_names is not None:
        var_names = [var_names] if isinstance(var_names, str) else var_names
        if not isinstance(var_names, list | tuple) or not all(
            isinstance(n, str) for n in var_names
        ):
            raise TypeError(f"var_names must be a name or a list of names, got {var_names!r}")
        missing = sorted(set(var_names) - set(names))
        if missing:
            raise ValueError(f"no SFP marginals recorded for {missing}; available: {names}")
        names = [n for n in names if n in var_names]
    if "accept" in stat_names:
        accept = read("accept")
        if accept.ndim == 2:  # one step's (a CompoundStep's has a column per step)
            _warn_if_unresolved(float(np.nanmean(accept)))
    out: dict[str, Any] = {}
    for name in names:
        # The CDFs as recorded (float32): half the memory of float64, summed in float64.
        cdf = read(prefixes[name] + STAT_PREFIX_CDF + name, np.float32)
        box = read(prefixes[name] + STAT_PREFIX_BOX + name, float)
        _warn_if_narrower_than_recorded(name, cdf)
        if cdf.shape[1] == 0:
            raise ValueError(f"idata holds no draws of the SFP conditionals of {name}")
        # (chain, draw, *shape, K) → (chain, *shape, draw, K): a coordinate's draws contiguous.
        cdf, box = (np.ascontiguousarray(np.moveaxis(a, 1, -2)) for a in (cdf, box))
        shape = cdf.shape[1:-2]
        per_chain = {
            index: [
                _recorded_groups(b, c) for b, c in zip(box[:, *index], cdf[:, *index], strict=True)
            ]
            for index in np.ndindex(*shape)
        }
        _warn_if_boxes_disagree(name, per_chain, box[..., -1, :])
        marginals = np.empty(shape, dtype=object)
        for index, groups in per_chain.items():
            marginals[index] = _average_of_groups(_joined(groups))
        out[name] = marginals if shape else marginals[()]
    return out


def _warn_if_unresolved(mean_accept: float) -> None:
    """Warn when the acceptance says the conditionals the marginals average are off.

    SFP proposes each coordinate from its tabulated conditional ``q`` against the exact one
    ``p``, an independence proposal, whose acceptance probability averages at most
    ``1 − TV(p, q)``: ``1 − accept ≥ ∫ (p − q)₊`` (Jensen's inequality over the proposed
    point). So ``1 −`` the mean ``accept`` bounds the average total-variation error of the
    conditionals, and with it how far a marginal CDF, their average, can be off.
    """
    if mean_accept < MIN_ACCEPT_FOR_MARGINALS:
        warnings.warn(
            f"the SFP acceptance averaged {mean_accept:.3f}: the conditionals these marginals "
            f"average were off by up to {1.0 - mean_accept:.2g} in probability (total variation, "
            "averaged over the coordinates; the draws are exact all the same with "
            "correct=True). Raise L or narrow the boxes for marginals as exact as the draws.",
            UserWarning,
            stacklevel=3,
        )


def _stat_reader(idata: Any) -> tuple[Callable[..., np.ndarray], list[str]]:
    """A reader of one sample stat as an array ``(chain, draw, *stat shape)`` of a float dtype
    (float64 unless given), and the names of the stats ``idata`` holds."""
    if isinstance(idata, xr.DataTree):
        stats = idata["sample_stats"] if "sample_stats" in idata.children else xr.Dataset()

        def read_group(name: str, dtype: type = float) -> np.ndarray:
            return np.asarray(stats[name].values, dtype=dtype)

        return read_group, [str(v) for v in stats.data_vars]
    # PyMC's MultiTrace, recognised by its interface (this module imports no sampler code).
    if hasattr(idata, "get_sampler_stats") and hasattr(idata, "stat_names"):

        def read_trace(name: str, dtype: type = float) -> np.ndarray:
            # One array per chain, (draw, ...): PyMC stacks a draw's object stats, (1, ...).
            chains = idata.get_sampler_stats(name, combine=False, squeeze=False)
            return np.stack([np.asarray(c, dtype=dtype) for c in chains])

        return read_trace, sorted(idata.stat_names)
    raise TypeError(
        "idata must be the xarray.DataTree that pm.sample returns, or the MultiTrace of "
        f"pm.sample(return_inferencedata=False); got {type(idata).__name__}"
    )
