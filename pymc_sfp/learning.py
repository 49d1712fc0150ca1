"""Learning modes built on SFP's analytic marginals (Berrones 2009, §3).

* **SFP-S** (Eq. 16–17), predicting with the average of ``F(x, w)`` over the sampled weights,
  needs nothing new: ``pm.sample(step=SFPStep(...))`` and :meth:`pymc_sfp.nn.Network.predict_mean`.
* **SFP-MLE** (Eq. 18–19): :func:`sfp_mle` takes the mode ``w_o`` and the mean ``⟨w⟩`` of each
  weight's marginal (:func:`pymc_sfp.sfp_marginals`) and returns an :class:`MLEPredictor`, the
  first-order expansion ``F(x, w_o) + ∇_w F(x, w_o) · (⟨w⟩ − w_o)`` evaluated exactly in NumPy.
* **SFP-I** (Eq. 20–22): :func:`marginal_prior` turns learned marginals into the prior
  ``Π_i p(w_i | A)`` of a new model (Eq. 21); :class:`IncrementalSFP` learns from data that
  arrive one at a time, one SFP sweep per datum over the whole accumulated sample (Eq. 22).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.blocking import DictToArrayBijection
from pytensor.tensor.variable import TensorVariable

from pymc_sfp.marginals import STAT_PREFIX_CDF, STAT_PREFIX_GRID, Marginal, sfp_marginals
from pymc_sfp.nn import OUTPUTS, Network, _matrix, gaussian_likelihood, mlp
from pymc_sfp.step_methods.sfp import SFPStep

__all__ = [
    "IncrementalSFP",
    "MLEPredictor",
    "interpolated_log_density",
    "log_density_table",
    "marginal_prior",
    "sfp_mle",
]


# --------------------------------------------------------------------------------------------
# SFP-MLE (Eq. 18)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLEPredictor:
    """A deterministic network from per-weight marginal modes and means (Berrones 2009, Eq. 18).

    ``predict`` evaluates the first-order expansion of the posterior-mean prediction around the
    marginal modes ``w_o``,

    .. math:: \\langle F(x) \\rangle \\approx F(x, w_o) + \\nabla_w F(x, w_o) \\cdot
              (\\langle w \\rangle - w_o),

    the form the paper uses for SFP-MLE. The directional derivative is computed exactly by
    forward-mode differentiation through the tanh layers (and the softmax), at the cost of about
    two forward passes.

    Attributes
    ----------
    weights, biases : tuple of ndarray
        ``w_o``: per layer, the weights ``(units in, units out)`` and biases ``(units out,)``.
    weight_means, bias_means : tuple of ndarray
        ``⟨w⟩``, shaped like ``weights`` and ``biases``.
    output_type : {"linear", "softmax"}, default "linear"
        The output units.

    Raises
    ------
    ValueError
        If the layers' shapes do not chain or the means are not shaped like the modes.
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    weight_means: tuple[np.ndarray, ...]
    bias_means: tuple[np.ndarray, ...]
    output_type: Literal["linear", "softmax"] = "linear"

    def __post_init__(self) -> None:
        if self.output_type not in OUTPUTS:
            raise ValueError(f"output_type must be one of {OUTPUTS}, got {self.output_type!r}")
        fields = ("weights", "biases", "weight_means", "bias_means")
        for field in fields:
            object.__setattr__(
                self, field, tuple(np.asarray(a, dtype=float) for a in getattr(self, field))
            )
        arrays = tuple(getattr(self, field) for field in fields)
        if len({len(a) for a in arrays}) != 1 or not self.weights:
            raise ValueError("weights, biases and their means need one entry per layer")
        for layer, (W, b, W_mean, b_mean) in enumerate(zip(*arrays, strict=True)):
            if W.ndim != 2 or b.shape != W.shape[1:]:
                raise ValueError(f"layer {layer}: weights {W.shape} and biases {b.shape} mismatch")
            if W_mean.shape != W.shape or b_mean.shape != b.shape:
                raise ValueError(f"layer {layer}: means are not shaped like the modes")
            if layer and W.shape[0] != self.weights[layer - 1].shape[1]:
                raise ValueError(
                    f"layer {layer} has {W.shape[0]} inputs but layer {layer - 1} has "
                    f"{self.weights[layer - 1].shape[1]} outputs"
                )

    @property
    def n_inputs(self) -> int:
        """Width of the network's input."""
        return self.weights[0].shape[0]

    def predict(self, X: Any, *, first_order: bool = True) -> np.ndarray:
        """Evaluate the network at the inputs ``X``.

        Parameters
        ----------
        X : array_like, shape (n, n_inputs)
        first_order : bool, default True
            Add the first-order correction ``∇_w F(x, w_o) · (⟨w⟩ − w_o)`` of Eq. 18 (the
            paper's SFP-MLE); ``False`` gives the zeroth order ``F(x, w_o)``.

        Returns
        -------
        ndarray, shape (n, outputs)
            For softmax outputs, class probabilities (the first-order values need not lie in
            ``[0, 1]``; their argmax is the predicted class).

        Raises
        ------
        ValueError
            If ``X`` is not a finite 2-D array with ``n_inputs`` columns.
        """
        h = _matrix(X, "X")
        if h.shape[1] != self.n_inputs:
            raise ValueError(f"X has {h.shape[1]} columns but the network has {self.n_inputs}")
        dh = np.zeros_like(h)
        last = len(self.weights) - 1
        for layer, (W, b, W_mean, b_mean) in enumerate(
            zip(self.weights, self.biases, self.weight_means, self.bias_means, strict=True)
        ):
            z = h @ W + b
            dz = dh @ W + h @ (W_mean - W) + (b_mean - b)
            if layer < last:
                h = np.tanh(z)
                dh = (1.0 - h**2) * dz
            else:
                h, dh = z, dz
        if self.output_type == "softmax":
            h = np.exp(h - h.max(axis=-1, keepdims=True))
            h /= h.sum(axis=-1, keepdims=True)
            dh = h * (dh - np.sum(h * dh, axis=-1, keepdims=True))
        return h + dh if first_order else h


def _parameters(network: Network) -> tuple[TensorVariable, ...]:
    """The network's weights and biases, which must be model variables with marginals."""
    if network.prior not in ("uniform", "gaussian"):
        raise ValueError(
            f"SFP marginals exist for sampled weights only: a network with prior={network.prior!r} "
            "samples unscaled weights and group scales; use prior='uniform' (the paper's) or "
            "'gaussian'"
        )
    return (*network.weights, *network.biases)


def _elementwise(marginals: Any, method: str) -> np.ndarray:
    """``Marginal.<method>()`` of each marginal of an object array (or one marginal)."""
    array = np.asarray(marginals, dtype=object)
    return np.array([getattr(m, method)() for m in array.ravel()]).reshape(array.shape)


def sfp_mle(idata: Any, network: Network) -> MLEPredictor:
    """SFP-MLE (Berrones 2009, Eq. 18): a predictor from the weights' analytic marginals.

    Each weight's marginal (Eq. 7, :func:`pymc_sfp.sfp_marginals`) is maximised in 1-D
    (:meth:`Marginal.mode`), giving ``w_o``; its mean gives ``⟨w⟩``. Weights are treated as
    independent, so the expansion needs no cross moments (Eq. 19).

    Parameters
    ----------
    idata : xarray.DataTree
        The result of ``pm.sample`` with an :class:`~pymc_sfp.SFPStep` over the network's
        weights and biases (``marginal_points > 0``).
    network : Network
        Built by :func:`pymc_sfp.nn.mlp` with ``prior="uniform"`` or ``"gaussian"``.

    Returns
    -------
    MLEPredictor

    Raises
    ------
    ValueError
        If the network's weights are not sampled variables, or ``idata`` holds no SFP marginals
        for them.
    """
    names = [var.name for var in _parameters(network)]
    marginals = sfp_marginals(idata, var_names=names)
    n_layers = len(network.weights)
    modes = [_elementwise(marginals[name], "mode") for name in names]
    means = [_elementwise(marginals[name], "mean") for name in names]
    return MLEPredictor(
        weights=tuple(modes[:n_layers]),
        biases=tuple(modes[n_layers:]),
        weight_means=tuple(means[:n_layers]),
        bias_means=tuple(means[n_layers:]),
        output_type=network.output_type,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------------------------
# Marginal priors (Eq. 21)
# --------------------------------------------------------------------------------------------


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
    ValueError
        If ``points < 2`` or ``floor`` is outside ``[0, 1)``.
    """
    if not isinstance(points, int | np.integer) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
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
    position = (flat - lower) / (upper - lower) * (n_points - 1)
    cell = pt.clip(pt.floor(position), 0, n_points - 2).astype("int64")
    fraction = position - cell
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


def _static_shape(var: TensorVariable, model: pm.Model) -> tuple[int, ...]:
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
    shape = _static_shape(var, model)
    if np.shape(np.asarray(marginals, dtype=object)) != shape:
        raise ValueError(
            f"marginals have shape {np.shape(np.asarray(marginals, dtype=object))}, but "
            f"{var.name!r} has shape {shape}"
        )
    lower, upper, table = log_density_table(marginals, points=points, floor=floor)
    lower_data = pm.Data(f"{name}_lower", lower)
    upper_data = pm.Data(f"{name}_upper", upper)
    table_data = pm.Data(f"{name}_logpdf", table)
    return pm.Potential(
        name, pt.sum(interpolated_log_density(var, lower_data, upper_data, table_data))
    )


# --------------------------------------------------------------------------------------------
# Incremental SFP (Eq. 20–22)
# --------------------------------------------------------------------------------------------


def _rows(values: Any, width: int, arg: str) -> np.ndarray:
    """``values`` as finite rows of ``width`` columns (one 1-D row allowed)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        array = array[None, :] if width > 1 or array.size == 1 else array[:, None]
    array = _matrix(array, arg)
    if array.shape[1] != width:
        raise ValueError(f"{arg} must have {width} column(s), got {array.shape[1]}")
    return array


class IncrementalSFP:
    """SFP-I: incremental Bayesian learning of a network (Berrones 2009, §3.3, Eq. 20–22).

    :meth:`fit` learns from an initial sample ``A`` under the paper's ``U(-1, 1)`` prior and
    turns the weights' analytic marginals into the new prior ``Π_i p(w_i | A)`` (Eq. 21). Each
    datum then passed to :meth:`partial_fit` is appended to the accumulated sample and followed
    by one SFP sweep with the potential of Eq. 22,

    .. math:: V(w | A + 1) = -\\Big[\\sum_i \\ln p(w_i | A) + \\ln p(A + 1 | w)\\Big],

    whose likelihood is Berrones' cold quadratic loss (Eq. 23) over the whole accumulated sample.
    The prior stays ``Π_i p(w_i | A)`` from the initial fit (so the initial data enter twice,
    through the prior and the likelihood, as in the paper). :meth:`predict` averages the network
    over the most recent ``window`` sweeps (Eq. 17); the paper does not say how its SFP-I
    predicts.

    The model and the sampler are built once, in :meth:`fit`: new data go into the model's
    ``pm.Data`` containers with ``pm.set_data``, which changes their number of rows without
    recompiling the sampler's functions (they take the containers as shared inputs), and the
    prior is installed the same way (:func:`marginal_prior`). Sweeps call
    :meth:`SFPStep.astep` directly.

    Parameters
    ----------
    layer_sizes : sequence of int
        Units per layer, inputs first (see :func:`pymc_sfp.nn.mlp`).
    D : float
        Likelihood temperature of Eq. 23 (the paper: 5e-4 for glass, 5e-3 for time series).
    output : {"linear", "softmax"}, default "linear"
        Regression, or classification on one-hot targets with the quadratic loss, as in the
        paper.
    L : int, default 100
        Resolution of :class:`~pymc_sfp.SFPStep`.
    window : int, default 15
        Sweeps averaged by :meth:`predict`.
    prior_points, floor
        Tabulation of the marginal prior (:func:`log_density_table`).
    random_seed : int or numpy.random.Generator, optional
    name : str, default "net"
        Name of the network in the model.

    Attributes
    ----------
    model : pm.Model
    network : Network
    step : SFPStep
    prior_marginals : dict
        Variable name → object array of :class:`~pymc_sfp.Marginal`: ``p(w_i | A)`` after
        :meth:`fit`.
    draws : list of dict
        The weights and biases (name → array) after each sweep.
    sweep_seconds : list of float
        Wall time of each :meth:`partial_fit` datum (``pm.set_data`` plus the sweep).
    n_data : int
        Size of the accumulated sample.
    """

    def __init__(
        self,
        layer_sizes: Sequence[int],
        *,
        D: float,
        output: Literal["linear", "softmax"] = "linear",
        L: int = 100,
        window: int = 15,
        prior_points: int = 257,
        floor: float = 1e-6,
        random_seed: int | np.random.Generator | None = None,
        name: str = "net",
    ):
        if not isinstance(window, int | np.integer) or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        self.layer_sizes = tuple(layer_sizes)
        self.D = D
        self.output = output
        self.L = L
        self.window = int(window)
        self.prior_points = prior_points
        self.floor = floor
        self.random_seed = random_seed
        self.name = name
        self.model: pm.Model | None = None
        self.draws: list[dict[str, np.ndarray]] = []
        self.sweep_seconds: list[float] = []
        self.prior_marginals: dict[str, np.ndarray] = {}

    @property
    def n_data(self) -> int:
        return 0 if self.model is None else len(self._X)

    def fit(self, X: Any, y: Any, *, sweeps: int = 100, discard: int = 15) -> Self:
        """Learn from the initial sample ``A`` and make the marginal prior of Eq. 21.

        Builds the model (the ``U(-1, 1)`` prior, the data, the quadratic loss) and the
        :class:`~pymc_sfp.SFPStep`, runs ``sweeps`` sweeps from the all-zero weights, and
        averages the conditional CDFs of the sweeps after the first ``discard`` into the
        marginals ``p(w_i | A)``, which replace the prior.

        Parameters
        ----------
        X : array_like, shape (n, layer_sizes[0])
        y : array_like, shape (n, layer_sizes[-1]), or (n,) for one output
        sweeps : int, default 100
            The paper's ``M``.
        discard : int, default 15
            Initial sweeps left out of the marginals (the paper discards 15).

        Returns
        -------
        IncrementalSFP
            ``self``.

        Raises
        ------
        RuntimeError
            If the learner was fitted already.
        ValueError
            For bad data (wrong widths, NaN, mismatched rows) or ``discard >= sweeps``.
        """
        if self.model is not None:
            raise RuntimeError("fit was called already: make a new IncrementalSFP to start over")
        if not 0 <= discard < sweeps:
            raise ValueError(f"need 0 <= discard < sweeps, got discard={discard}, sweeps={sweeps}")
        X = _rows(X, self.layer_sizes[0], "X")
        Y = _rows(y, self.layer_sizes[-1], "y")
        if len(X) != len(Y):
            raise ValueError(f"X has {len(X)} rows but y has {len(Y)}")

        with pm.Model() as model:
            X_data = pm.Data(f"{self.name}_X", X)
            network = mlp(X_data, self.layer_sizes, output=self.output, name=self.name)
            likelihood = gaussian_likelihood(network, Y, D=self.D)
            flat = Marginal(np.array([-1.0, 1.0]), np.array([0.0, 1.0]))
            for var in _parameters(network):
                marginals = np.full(_static_shape(var, model), flat, dtype=object)
                marginal_prior(var, marginals, points=self.prior_points, floor=self.floor)
            step = SFPStep(L=self.L, model=model)
        step.rng = np.random.default_rng(self.random_seed)
        self.model, self.network, self.step = model, network, step
        self._y_name = f"{likelihood.name}_data"
        self._X, self._Y = X, Y
        self._q = DictToArrayBijection.map(model.initial_point())

        kept = []
        for sweep in range(sweeps):
            if sweep == discard:
                step.stop_tuning()
            stats = self._sweep()
            if sweep >= discard:
                kept.append(stats)
        self._install_prior(kept)
        return self

    def partial_fit(self, X_new: Any, y_new: Any) -> Self:
        """Add data one datum at a time, with one SFP sweep after each (Eq. 22).

        Parameters
        ----------
        X_new : array_like, shape (m, layer_sizes[0]), or one row
        y_new : array_like, shape (m, layer_sizes[-1]), or (m,) for one output

        Returns
        -------
        IncrementalSFP
            ``self``.

        Raises
        ------
        RuntimeError
            Before :meth:`fit`.
        ValueError
            If the rows have the wrong width, NaN or infinite values, or ``X_new`` and ``y_new``
            have different numbers of rows; nothing is added then.
        """
        if self.model is None:
            raise RuntimeError("call fit on an initial sample before partial_fit")
        X_new = _rows(X_new, self.layer_sizes[0], "X_new")
        Y_new = _rows(y_new, self.layer_sizes[-1], "y_new")
        if len(X_new) != len(Y_new):
            raise ValueError(f"X_new has {len(X_new)} rows but y_new has {len(Y_new)}")
        for x_row, y_row in zip(X_new, Y_new, strict=True):
            start = time.perf_counter()
            self._X = np.vstack([self._X, x_row])
            self._Y = np.vstack([self._Y, y_row])
            pm.set_data(
                {f"{self.name}_X": self._X, self._y_name: self._Y},
                model=self.model,
            )
            self._sweep()
            self.sweep_seconds.append(time.perf_counter() - start)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The network averaged over the last ``window`` sweeps (Eq. 17).

        Parameters
        ----------
        X : array_like, shape (n, layer_sizes[0])

        Returns
        -------
        ndarray, shape (n, outputs)

        Raises
        ------
        RuntimeError
            Before :meth:`fit`.
        ValueError
            If ``X`` is not a finite 2-D array of ``layer_sizes[0]`` columns.
        """
        if self.model is None:
            raise RuntimeError("call fit before predict")
        recent = self.draws[-self.window :]
        samples = xr.Dataset(
            {
                var.name: (
                    ("chain", "draw", *self.model.named_vars_to_dims[var.name]),
                    np.stack([d[var.name] for d in recent])[None],
                )
                for var in _parameters(self.network)
            }
        )
        return self.network.predict_mean(samples, X).values

    def _sweep(self) -> dict[str, Any]:
        """One SFP sweep from the current state; records the draw and returns the stats."""
        self._q, stats = self.step.astep(self._q)
        x = self.step.layout.from_value(self._q.data)
        self.draws.append(
            {
                name: x[slc].reshape(shape)
                for name, shape, slc in zip(
                    self.step.layout.rv_names,
                    self.step.layout.shapes,
                    self.step.layout.slices,
                    strict=True,
                )
            }
        )
        return stats[0]

    def _install_prior(self, kept: list[dict[str, Any]]) -> None:
        """Marginals of the kept sweeps (Eq. 7) → the prior tables of Eq. 21."""
        data = {}
        for var in _parameters(self.network):
            for prefix in (STAT_PREFIX_CDF, STAT_PREFIX_GRID):
                # Each sweep's stat carries a leading draw axis of length 1 (see SFPStep).
                values = np.concatenate([s[prefix + var.name] for s in kept]).astype(float)
                dims = tuple(f"{prefix}{var.name}_dim_{j}" for j in range(values.ndim - 1))
                data[prefix + var.name] = (("chain", "draw", *dims), values[None])
        tree = xr.DataTree.from_dict({"sample_stats": xr.Dataset(data)})
        self.prior_marginals = sfp_marginals(tree)
        new_tables = {}
        for var_name, marginals in self.prior_marginals.items():
            lower, upper, table = log_density_table(
                marginals, points=self.prior_points, floor=self.floor
            )
            prefix = f"{var_name}_marginal_prior"
            new_tables |= {
                f"{prefix}_lower": lower,
                f"{prefix}_upper": upper,
                f"{prefix}_logpdf": table,
            }
        pm.set_data(new_tables, model=self.model)
