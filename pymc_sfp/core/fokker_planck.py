"""One-dimensional stationary Fokker–Planck conditionals (Berrones 2009, §1).

For one coordinate ``x`` on a box ``[a, b]`` with every other coordinate fixed, the conditional
CDF ``y`` of the density ``exp(-V(x) / D)`` solves the stationary Fokker–Planck equation (Eq. 4)::

    y'' + (1/D) V'(x) y' = 0,    y(a) = 0,  y(b) = 1.

Two ways of solving it are provided, both returning a :class:`TabulatedConditional`:

* :func:`collocation_conditional` — the paper's method: the Fourier sine expansion of Eq. 11 with
  ``L`` basis functions, collocated at ``L - 1`` interior points (Eq. 4, 5). Needs ``V'`` on the
  nodes; spectrally accurate when valid, but it can return a non-monotone ``ŷ`` when ``L`` is too
  small for the conditional's width (detected by :func:`is_valid_cdf`).
* :func:`quadrature_conditional` — the same equation solved by its integrating factor,
  ``y' ∝ exp(-V/D)``: the log-density on a grid is interpolated piecewise-exponentially and
  integrated exactly. Needs only ``V`` (no gradient, so it also works for step-function
  likelihoods), is a valid CDF by construction and does not lose accuracy behind deep barriers.

Everything here is plain NumPy over arrays; nothing imports PyMC.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = [
    "CollocationBasis",
    "TabulatedConditional",
    "cell_log_mass",
    "collocation_conditional",
    "conditional_logpdf",
    "conditional_ppf",
    "is_valid_cdf",
    "quadrature_cdfs",
    "quadrature_conditional",
]

#: Tolerance for a collocation ``ŷ`` to count as a valid CDF. Far-edge negative mass below this
#: is numerically harmless and is clipped away instead of being reported.
VALIDITY_TOLERANCE = 1e-6


def _log_exprel(delta: np.ndarray) -> np.ndarray:
    """``log((exp(delta) - 1) / delta)``, stable for any finite ``delta`` (0 at ``delta = 0``)."""
    delta = np.asarray(delta, dtype=float)
    out = np.empty_like(delta)
    small = np.abs(delta) < 1e-6
    out[small] = 0.5 * delta[small] + delta[small] ** 2 / 24.0
    pos = ~small & (delta > 0)
    out[pos] = delta[pos] + np.log(-np.expm1(-delta[pos])) - np.log(delta[pos])
    neg = ~small & (delta < 0)
    out[neg] = np.log(-np.expm1(delta[neg])) - np.log(-delta[neg])
    return out


def _fraction_to_offset(fraction: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Position ``t ∈ [0, 1]`` in a cell whose density is ``∝ exp(delta * t)`` holding ``fraction``
    of the cell's mass: solves ``(exp(delta t) - 1) / (exp(delta) - 1) = fraction``."""
    fraction = np.asarray(fraction, dtype=float)
    delta = np.asarray(delta, dtype=float)
    t = fraction.copy()
    pos = delta > 1e-9
    t[pos] = 1.0 + np.log(fraction[pos] + (1.0 - fraction[pos]) * np.exp(-delta[pos])) / delta[pos]
    neg = delta < -1e-9
    t[neg] = np.log1p(fraction[neg] * np.expm1(delta[neg])) / delta[neg]
    return np.clip(t, 0.0, 1.0)


def _offset_to_fraction(t: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_fraction_to_offset`: the share of a cell's mass below offset ``t``."""
    t = np.asarray(t, dtype=float)
    delta = np.asarray(delta, dtype=float)
    frac = t.copy()
    pos = delta > 1e-9
    # exp(delta (t - 1)) * (1 - exp(-delta t)) / (1 - exp(-delta)), overflow-free for large delta.
    frac[pos] = (
        np.exp(delta[pos] * (t[pos] - 1.0)) * np.expm1(-delta[pos] * t[pos]) / np.expm1(-delta[pos])
    )
    neg = delta < -1e-9
    frac[neg] = np.expm1(delta[neg] * t[neg]) / np.expm1(delta[neg])
    return np.clip(frac, 0.0, 1.0)


def _cell_of(nodes: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cell of ``nodes`` that holds each of ``x`` (the first or last one outside them) and
    the position in it, ``t`` (in ``[0, 1]`` inside)."""
    k = np.clip(np.searchsorted(nodes, x, side="right") - 1, 0, len(nodes) - 2)
    return k, (x - nodes[k]) / (nodes[k + 1] - nodes[k])


@dataclass(frozen=True)
class TabulatedConditional:
    """A 1-D density on ``[nodes[0], nodes[-1]]`` given by its CDF at nodes.

    Inside cell ``k`` the density is ``∝ exp(slopes[k] * t)``, ``t`` the position in the cell in
    ``[0, 1]``: ``slopes = 0`` is the lookup table of the paper (piecewise-linear CDF), non-zero
    slopes give the piecewise-exponential interpolation of a log-density grid.

    Parameters
    ----------
    nodes : ndarray, shape (T,)
        Strictly increasing cell edges.
    cdf : ndarray, shape (T,)
        Non-decreasing, ``cdf[0] = 0``, ``cdf[-1] = 1``.
    slopes : ndarray, shape (T - 1,)
        Change of the log-density across each cell.
    """

    nodes: np.ndarray
    cdf: np.ndarray
    slopes: np.ndarray

    @property
    def lower(self) -> float:
        return float(self.nodes[0])

    @property
    def upper(self) -> float:
        return float(self.nodes[-1])

    @cached_property
    def _cell_mass(self) -> np.ndarray:
        return np.diff(self.cdf)

    def _as_rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The CDF and slopes as ``n`` identical rows (views), for :func:`conditional_ppf`."""
        return (
            np.broadcast_to(self.cdf, (n, len(self.cdf))),
            np.broadcast_to(self.slopes, (n, len(self.slopes))),
        )

    def ppf(self, u: np.ndarray | float) -> np.ndarray:
        """Inverse CDF: the value below which a fraction ``u`` of the mass lies."""
        u = np.asarray(u, dtype=float)
        flat = u.reshape(-1)
        return conditional_ppf(self.nodes, *self._as_rows(len(flat)), flat).reshape(u.shape)

    def cdf_at(self, x: np.ndarray | float) -> np.ndarray:
        """CDF at arbitrary points (0 below the box, 1 above)."""
        x = np.asarray(x, dtype=float)
        k, t = _cell_of(self.nodes, x)
        inside = self.cdf[k] + self._cell_mass[k] * _offset_to_fraction(
            np.clip(t, 0.0, 1.0), self.slopes[k]
        )
        return np.where(x < self.lower, 0.0, np.where(x > self.upper, 1.0, inside))

    def logpdf(self, x: np.ndarray | float) -> np.ndarray:
        """Normalised log-density (``-inf`` outside the box and in empty cells)."""
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1)
        return conditional_logpdf(self.nodes, *self._as_rows(len(flat)), flat).reshape(x.shape)

    def mass_near_edges(self, fraction: float) -> tuple[float, float]:
        """Probability mass within ``fraction`` of the box width from each edge."""
        span = self.upper - self.lower
        inner = self.cdf_at(np.array([self.lower + fraction * span, self.upper - fraction * span]))
        return float(inner[0]), float(1.0 - inner[1])


def cell_log_mass(nodes: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log of each cell's mass under the piecewise-exponential interpolation of ``f``.

    Parameters
    ----------
    nodes : ndarray, shape (G,)
        Strictly increasing cell edges.
    f : ndarray, shape (..., G)
        The log-density at the nodes, ``-inf`` where it is not finite (a row per line).

    Returns
    -------
    log_mass : ndarray, shape (..., G - 1)
        ``log ∫ exp(f)`` over each cell with ``f`` interpolated linearly; a cell with one finite
        and one non-finite end gets the flat density of its finite end; ``-inf`` for a cell
        with no finite end.
    delta : ndarray, shape (..., G - 1)
        The change of ``f`` across each cell (0 unless both ends are finite).
    """
    left, right = f[..., :-1], f[..., 1:]
    width = np.broadcast_to(np.diff(nodes), left.shape)
    finite = np.isfinite(left) & np.isfinite(right)
    delta = np.zeros(left.shape)
    delta[finite] = right[finite] - left[finite]
    log_mass = np.full(left.shape, -np.inf)
    log_mass[finite] = np.log(width[finite]) + left[finite] + _log_exprel(delta[finite])
    edge = np.isfinite(left) != np.isfinite(right)
    log_mass[edge] = np.log(width[edge]) + np.maximum(left[edge], right[edge])
    return log_mass, delta


def quadrature_conditional(
    nodes: np.ndarray, logdensity: np.ndarray, D: float = 1.0
) -> TabulatedConditional | None:
    """Conditional CDF from the log-density on a grid (integrating factor of Eq. 4).

    With ``V = -logdensity``, Eq. 4 gives ``y' ∝ exp(-V/D)``. The exponent is interpolated linearly
    between nodes and each cell integrated exactly, so the result is a valid CDF whatever the
    grid, and its relative accuracy does not depend on how deep the barriers between modes are.

    A cell with one finite and one non-finite end (the edge of a hard constraint, or a NaN) gets
    the flat density of its finite end: the conditional then covers every point whose log-density
    is finite, at the price of some mass where it is not (refine such cells, as
    :func:`pymc_sfp.core.sfp.resolve_line` does, to make that mass small).

    Parameters
    ----------
    nodes : ndarray, shape (G,)
        Strictly increasing grid over the box, ``nodes[0] = a``, ``nodes[-1] = b``.
    logdensity : ndarray, shape (G,)
        ``-V`` at the nodes, up to a constant. NaN and ``±inf`` count as zero density.
    D : float
        Diffusion constant (temperature).

    Returns
    -------
    TabulatedConditional or None
        ``None`` when the log-density is not finite at any node.
    """
    cdf, slopes, valid = quadrature_cdfs(nodes, np.asarray(logdensity)[None], D)
    if not valid[0]:
        return None
    return TabulatedConditional(np.asarray(nodes, dtype=float), cdf[0], slopes[0])


def quadrature_cdfs(
    nodes: np.ndarray, logdensity: np.ndarray, D: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`quadrature_conditional` of many lines tabulated on one grid, as arrays.

    Parameters
    ----------
    nodes : ndarray, shape (G,)
    logdensity : ndarray, shape (R, G)
        A line per row.
    D : float

    Returns
    -------
    cdf : ndarray, shape (R', G)
        The CDF at the nodes of each row with a finite log-density somewhere (``R'`` of them).
    slopes : ndarray, shape (R', G - 1)
        Their :attr:`TabulatedConditional.slopes`.
    valid : ndarray of bool, shape (R,)
        The rows with a finite log-density somewhere, in order.
    """
    f = np.asarray(logdensity, dtype=float) / D
    f = np.where(np.isfinite(f), f, -np.inf)
    valid = np.isfinite(f).any(axis=1)
    f = f[valid]
    log_mass, delta = cell_log_mass(nodes, f - np.max(f, axis=1, keepdims=True))
    mass = np.exp(log_mass - np.max(log_mass, axis=1, keepdims=True))
    cdf = np.concatenate([np.zeros((len(f), 1)), np.cumsum(mass, axis=1)], axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    return cdf, delta, valid


def conditional_ppf(
    nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, u: np.ndarray
) -> np.ndarray:
    """Inverse CDFs (:meth:`TabulatedConditional.ppf`) of conditionals on one grid, a row each.

    Parameters
    ----------
    nodes : ndarray, shape (T,)
    cdf, slopes : ndarray, shape (R, T) and (R, T - 1)
        As :func:`quadrature_cdfs` returns them.
    u : ndarray, shape (R,)
        Each row's quantile.

    Returns
    -------
    ndarray, shape (R,)
    """
    u = np.clip(u, 0.0, 1.0)
    mass = np.diff(cdf, axis=1)
    rows = np.arange(len(u))
    # Each row's searchsorted(cdf[1:], u, side="left"): how many of its values lie below u.
    k = np.count_nonzero(cdf[:, 1:] < u[:, None], axis=1)
    k = np.clip(k, 0, mass.shape[1] - 1)
    # Never land in an empty cell: search among cells that hold mass.
    k = np.where(mass[rows, k] > 0, k, np.argmax(mass > 0, axis=1))
    cell = mass[rows, k]
    fraction = np.divide(u - cdf[rows, k], cell, out=np.full_like(u, 0.5), where=cell > 0)
    t = _fraction_to_offset(np.clip(fraction, 0.0, 1.0), slopes[rows, k])
    return nodes[k] + t * (nodes[k + 1] - nodes[k])


def conditional_logpdf(
    nodes: np.ndarray, cdf: np.ndarray, slopes: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """Normalised log-densities (:meth:`TabulatedConditional.logpdf`) of conditionals on one
    grid, a row each (as :func:`conditional_ppf`), each at its own ``x``, shape ``(R,)``;
    ``-inf`` outside the box and in empty cells."""
    rows = np.arange(len(x))
    k, t = _cell_of(nodes, x)
    width = nodes[k + 1] - nodes[k]
    delta = slopes[rows, k]
    with np.errstate(divide="ignore"):
        log_mass = np.log(cdf[rows, k + 1] - cdf[rows, k])
    out = log_mass - np.log(width) + delta * t - _log_exprel(delta)
    return np.where((x < nodes[0]) | (x > nodes[-1]), -np.inf, out)


class CollocationBasis:
    """Fourier sine basis of Eq. 11, tabulated once for a given ``L``.

    ``φ_l(x) = sin(k_l t)`` with ``t = (x - a) / (b - a)`` and ``k_l = (2l - 1) π / 2``, so every
    ``φ_l(a) = 0`` and ``φ_l(b) = (-1)^(l+1)``. Collocation points are the ``L - 1`` equally
    spaced interior points ``t_j = j / L``; on a box of width ``w`` the collocated Eq. 4 reads
    ``Σ_l a_l [-k_l² sin(k_l t_j) + (w / D) V'(x_j) k_l cos(k_l t_j)] = 0``, with
    ``V' = -dlogdensity``.

    Parameters
    ----------
    L : int
        Number of basis functions (>= 3).
    table_size : int, optional
        Number of points of the lookup table on which ``ŷ`` is evaluated (default ``4 L + 1``).
    """

    def __init__(self, L: int, table_size: int | None = None):
        if L < 3:
            raise ValueError(f"L must be an integer >= 3, got {L}")
        self.L = int(L)
        self.wavenumbers = (2 * np.arange(1, L + 1) - 1) * np.pi / 2
        #: Collocation points on the unit interval (interior, equally spaced).
        self.collocation_points = np.arange(1, L) / L
        phase = np.outer(self.collocation_points, self.wavenumbers)
        self._second_derivative = -np.sin(phase) * self.wavenumbers**2
        self._first_derivative = np.cos(phase) * self.wavenumbers
        self._boundary_row = np.sin(self.wavenumbers)
        size = 4 * L + 1 if table_size is None else int(table_size)
        #: Lookup-table points on the unit interval.
        self.table_points = np.linspace(0.0, 1.0, size)
        self._table = np.sin(np.outer(self.table_points, self.wavenumbers))

    def coefficients(self, width: float, dlogdensity: np.ndarray, D: float = 1.0) -> np.ndarray:
        """Solve the ``L × L`` collocation system for the coefficients ``a`` (Eq. 5).

        Parameters
        ----------
        width : float
            Box width ``b - a``.
        dlogdensity : ndarray, shape (L - 1,)
            ``-V'`` (derivative of the log-density) at the collocation points.
        D : float
            Diffusion constant.
        """
        system = np.empty((self.L, self.L))
        system[:-1] = self._second_derivative - (width / D) * (
            np.asarray(dlogdensity, dtype=float)[:, None] * self._first_derivative
        )
        system[-1] = self._boundary_row
        rhs = np.zeros(self.L)
        rhs[-1] = 1.0
        return np.linalg.solve(system, rhs)

    def evaluate(self, coefficients: np.ndarray) -> np.ndarray:
        """``ŷ`` on the lookup table."""
        return self._table @ coefficients


def is_valid_cdf(values: np.ndarray, tolerance: float = VALIDITY_TOLERANCE) -> bool:
    """Whether tabulated ``ŷ`` is a CDF: finite, within ``[0, 1]`` and non-decreasing
    (each up to ``tolerance``)."""
    values = np.asarray(values)
    return bool(
        np.isfinite(values).all()
        and values.min() >= -tolerance
        and values.max() <= 1.0 + tolerance
        and np.diff(values).min() >= -tolerance
    )


def collocation_conditional(
    basis: CollocationBasis,
    lower: float,
    upper: float,
    dlogdensity: np.ndarray,
    D: float = 1.0,
) -> tuple[TabulatedConditional | None, np.ndarray]:
    """The paper's SFP conditional: collocation solve, then a lookup table.

    Parameters
    ----------
    basis : CollocationBasis
    lower, upper : float
        The box.
    dlogdensity : ndarray, shape (L - 1,)
        Derivative of the log-density at ``lower + basis.collocation_points * (upper - lower)``.
    D : float
        Diffusion constant.

    Returns
    -------
    conditional : TabulatedConditional or None
        The lookup table (piecewise-linear CDF), or ``None`` if ``ŷ`` is not a valid CDF
        (non-monotone, outside ``[0, 1]``, or the system was singular / the gradient not finite).
    coefficients : ndarray, shape (L,)
        The expansion coefficients ``a_l`` (NaN when the solve failed).
    """
    width = upper - lower
    dlogdensity = np.asarray(dlogdensity, dtype=float)
    if not np.isfinite(dlogdensity).all():
        return None, np.full(basis.L, np.nan)
    try:
        coefficients = basis.coefficients(width, dlogdensity, D)
    except np.linalg.LinAlgError:
        return None, np.full(basis.L, np.nan)
    y_hat = basis.evaluate(coefficients)
    if not is_valid_cdf(y_hat):
        return None, coefficients
    cdf = np.clip(np.maximum.accumulate(y_hat), 0.0, 1.0)
    cdf[0], cdf[-1] = 0.0, 1.0
    nodes = lower + basis.table_points * width
    return TabulatedConditional(nodes, cdf, np.zeros(len(nodes) - 1)), coefficients
