"""Marginals turned into a prior: ``Π_i p(w_i | A)`` of Berrones (2009) Eq. 21.

:func:`log_density_table` tabulates the log-densities of 1-D marginals (e.g. those of
:func:`pymc_sfp.sfp_marginals`), :func:`interpolated_log_density` interpolates such a table in a
PyTensor graph, and :func:`marginal_prior` puts the product of the marginals on a model variable
as a ``pm.Potential`` whose tables can be replaced without recompiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.type import float_dtypes
from pytensor.tensor.variable import TensorVariable

from pymc_sfp._network_line import mark_elementwise
from pymc_sfp._validation import check_int_at_least, check_real

__all__ = ["interpolated_log_density", "log_density_table", "marginal_prior"]


def log_density_table(
    marginals: Any, *, points: int = 257, floor: float = 1e-6
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tabulate the log-densities of 1-D marginals on a uniform grid over each one's range.

    The density tabulated is ``(1 - floor) · p(w) + floor / (upper - lower)``: the marginals
    of an SFP run are averages of float32 CDFs, so their far tails are exactly zero, and a prior
    that is zero where the chain may stand would pin it there.

    Parameters
    ----------
    marginals : Marginal or array_like of Marginal
        E.g. an entry of :func:`pymc_sfp.sfp_marginals`.
    points : int, default 257
        Grid points per marginal, ``>= 2``.
    floor : float, default 1e-6
        Weight of the uniform component, in ``[0, 1)``.

    Returns
    -------
    lower, upper : ndarray, shape (n,)
        The range of each marginal (flattened in C order).
    table : ndarray, shape (n, points)
        ``log`` of the floored density at ``linspace(lower, upper, points)``.

    Raises
    ------
    TypeError
        If ``points`` is not an integer or ``floor`` not a real number.
    ValueError
        If ``points < 2`` or ``floor`` is outside ``[0, 1)``.
    """
    points = check_int_at_least(points, 2, "points")
    floor = check_real(floor, "floor")
    if not 0 <= floor < 1:
        raise ValueError(f"floor must be in [0, 1), got {floor!r}")
    flat = np.asarray(marginals, dtype=object).ravel()
    lower = np.array([m.points[0] for m in flat], dtype=float)
    upper = np.array([m.points[-1] for m in flat], dtype=float)
    unit = np.linspace(0.0, 1.0, points)
    grids = lower[:, None] + unit * (upper - lower)[:, None]
    density = np.array([m.pdf(grid) for m, grid in zip(flat, grids, strict=True)])
    with np.errstate(divide="ignore"):
        table = np.log((1.0 - floor) * density + floor / (upper - lower)[:, None])
    return lower, upper, table


def interpolated_log_density(value: Any, lower: Any, upper: Any, table: Any) -> TensorVariable:
    """Elementwise log-density, linear in each tabulated log-density (PyTensor).

    Parameters
    ----------
    value : TensorVariable or array_like
        Shape ``(..., *shape)`` with ``prod(shape) = n``: element ``i`` (C order) of each trailing
        block of ``n`` is looked up in row ``i`` of ``table``; leading axes are a batch.
    lower, upper : TensorVariable or array_like, shape (n,)
    table : TensorVariable or array_like, shape (n, G)
        As returned by :func:`log_density_table`.

    Returns
    -------
    TensorVariable
        Shaped like ``value``; ``-inf`` outside ``[lower, upper]``.
    """
    value = pt.as_tensor(value)
    lower, upper, table = pt.as_tensor(lower), pt.as_tensor(upper), pt.as_tensor(table)
    n_rows, n_points = table.shape[0], table.shape[1]
    flat = value.reshape((-1, n_rows))
    ratio = (flat - lower) / (upper - lower)
    # The shapes are int64: cast, or they would turn float32 arithmetic (a float32 model's
    # values and floatX tables) into float64.
    last = pt.cast(n_points - 1, ratio.dtype)
    position = ratio * last
    cell = pt.clip(pt.floor(position), 0, last - 1).astype("int64")
    fraction = position - pt.cast(cell, position.dtype)
    rows = pt.arange(n_rows)[None, :]
    left, right = table[rows, cell], table[rows, cell + 1]
    # Next to an empty node (log p = -inf) the interpolation would be NaN (0 · inf or inf - inf,
    # depending on how PyTensor rewrites it): the density there is zero, except at a nonempty
    # node itself. The masked operands keep NaN out of the unselected branch, and so out of
    # gradients through the switch.
    finite = pt.isfinite(left) & pt.isfinite(right)
    interpolated = (1.0 - fraction) * pt.switch(finite, left, 0.0) + fraction * pt.switch(
        finite, right, 0.0
    )
    at_node = pt.switch(pt.eq(fraction, 0.0), left, pt.switch(pt.eq(fraction, 1.0), right, -np.inf))
    logp = pt.switch(finite, interpolated, at_node)
    inside = (flat >= lower) & (flat <= upper)
    return pt.switch(inside, logp, -np.inf).reshape(value.shape)


def static_shape(var: TensorVariable, model: pm.Model) -> tuple[int, ...]:
    """The shape of a model variable, from its dims or else its static type."""
    dims = model.named_vars_to_dims.get(var.name)
    if dims:
        return tuple(int(s) for s in model.shape_from_dims(dims))
    if any(s is None for s in var.type.shape):
        raise ValueError(f"the shape of {var.name!r} is not known: give it dims or a fixed shape")
    return tuple(var.type.shape)


def marginal_prior(
    var: TensorVariable,
    marginals: Any,
    *,
    points: int = 257,
    floor: float = 1e-6,
    name: str | None = None,
) -> TensorVariable:
    """The prior ``Π_i p(w_i | A)`` of Berrones (2009) Eq. 21 on an existing model variable.

    Adds ``Σ_i log p_i(w_i)`` as a ``pm.Potential``, where ``log p_i`` interpolates linearly the
    log-density of marginal ``i`` tabulated by :func:`log_density_table`. Put it on a variable
    whose own prior is uniform on a box containing the marginals' ranges (e.g. the weights of
    :func:`pymc_sfp.nn.mlp` with ``prior="uniform"``): the product is then the marginal prior.
    Outside a marginal's range the density is zero.

    The tables are ``pm.Data`` containers ``f"{name}_lower"``, ``f"{name}_upper"`` and
    ``f"{name}_logpdf"``: replace them with ``pm.set_data`` (same ``points``, entries from
    :func:`log_density_table`) to change the prior without recompiling.

    Parameters
    ----------
    var : TensorVariable
        A model variable of known shape (static, or from its dims).
    marginals : Marginal or array_like of Marginal
        One per element of ``var``, shaped like it (e.g. ``sfp_marginals(idata)[var.name]``).
    points, floor
        See :func:`log_density_table`.
    name : str, optional
        Name of the potential; ``f"{var.name}_marginal_prior"`` by default.

    Returns
    -------
    TensorVariable
        The potential.

    Raises
    ------
    ValueError
        If ``marginals`` is not shaped like ``var``, or see :func:`log_density_table`.
    """
    model = pm.modelcontext(None)
    name = name or f"{var.name}_marginal_prior"
    shape = static_shape(var, model)
    if np.shape(np.asarray(marginals, dtype=object)) != shape:
        raise ValueError(
            f"marginals have shape {np.shape(np.asarray(marginals, dtype=object))}, but "
            f"{var.name!r} has shape {shape}"
        )
    lower, upper, table = log_density_table(marginals, points=points, floor=floor)
    lower_data = pm.Data(f"{name}_lower", lower)
    upper_data = pm.Data(f"{name}_upper", upper)
    table_data = pm.Data(f"{name}_logpdf", table)

    def terms(value: TensorVariable) -> TensorVariable:
        return interpolated_log_density(value, lower_data, upper_data, table_data)

    def element(values: TensorVariable, i: TensorVariable) -> TensorVariable:
        return interpolated_log_density(
            values[:, None], lower_data[i][None], upper_data[i][None], table_data[i][None]
        )[:, 0]

    log_density = pt.sum(terms(var))
    if var.dtype in float_dtypes:
        # A float32 model's log-density stays float32 (tables of another floatX, e.g.).
        log_density = log_density.astype(var.dtype)
    potential = pm.Potential(name, log_density)
    # SFP's line along one weight then reads that weight's row of the table alone.
    mark_elementwise(potential, var, terms, element)
    return potential
