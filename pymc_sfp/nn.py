"""Multilayer perceptrons inside a ``pm.Model``: priors, likelihoods and fast prediction.

The networks of the papers: tanh hidden units, linear outputs for regression and softmax outputs
for classification (Berrones 2009, §3–4; Neal 1993, §3). :func:`mlp` builds the weights, biases
and output ``F(X, w)`` of a network as a PyTensor graph in the current model, with one of four
priors:

* ``"uniform"`` — every weight and bias ``U(-b, b)``; Berrones uses ``b = 1``, so the prior's
  support is the box that :class:`pymc_sfp.SFPStep` samples on.
* ``"gaussian"`` — every weight and bias ``N(0, s²)`` with a fixed ``s`` (Neal 1993, Eq. 7).
* ``"group"`` — Neal's / MacKay's hierarchical prior: one scale hyperparameter per weight group,
  sampled with the weights (Neal 1993, §3.1–3.2).
* ``"ard"`` — as ``"group"``, with one scale per input unit for the input→hidden weights
  (automatic relevance determination).

:func:`gaussian_likelihood` (known noise, unknown noise, Neal's noise integrated out, or
Berrones' cold quadratic loss, Eq. 23) and :func:`categorical_likelihood` attach the data.
With ``output_layer="integrated"`` a regression network's linear output layer is integrated
out analytically (:mod:`pymc_sfp.linear_gaussian`) and :meth:`Network.sample_output_layer`
draws it back.
:meth:`Network.predict` evaluates the network for every posterior draw at once in NumPy, and
:meth:`Network.predict_mean` averages it over the draws (Berrones Eq. 17; Neal Eq. 9).

Every array gets named dims, so the DataTree that ``pm.sample`` returns is readable: with
``name="net"`` and ``layer_sizes=(2, 16, 2)`` the data are ``net_X`` with dims
``("net_obs", "net_in")``, the weights ``net_w0`` ``("net_in", "net_hidden0")`` and ``net_w1``
``("net_hidden0", "net_out")``, the biases ``net_b0`` ``("net_hidden0",)`` and ``net_b1``
``("net_out",)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.pytensorf import floatX
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.tensor.variable import TensorVariable

from pymc_sfp import linear_gaussian

__all__ = [
    "NEAL_M0",
    "NEAL_S0",
    "OUTPUTS",
    "OUTPUT_LAYERS",
    "PRIORS",
    "Network",
    "categorical_likelihood",
    "gaussian_likelihood",
    "mlp",
]

#: Output units accepted by :func:`mlp`.
OUTPUTS = ("linear", "softmax")
#: Treatments of the output layer accepted by :func:`mlp`.
OUTPUT_LAYERS = ("sampled", "integrated")
#: Weight priors accepted by :func:`mlp`.
PRIORS = ("uniform", "gaussian", "group", "ard")
#: Neal's (1993, §3.1) parameters of the vague prior of the noise level that Eq. 3 integrates out.
NEAL_S0 = 0.1
NEAL_M0 = 0.1
#: How many offending row indices an error message lists.
_ROWS_SHOWN = 5
#: Draws per block when an integrated output layer is rebuilt in NumPy.
_DRAWS_PER_CHUNK = 256


@dataclass(frozen=True)
class Network:
    """A multilayer perceptron built by :func:`mlp` inside a ``pm.Model``.

    Attributes
    ----------
    name : str
        Prefix of every variable, dim and data container of the network.
    layer_sizes : tuple of int
        Units per layer, inputs first, outputs last.
    output_type : {"linear", "softmax"}
        The output units.
    prior : {"uniform", "gaussian", "group", "ard"}
        The weight prior.
    X : SharedVariable
        The input data container, shape ``(n, layer_sizes[0])``; change it with
        ``pm.set_data``.
    weights, biases : tuple of TensorVariable
        Per layer, the weights (``(units in, units out)``) and biases (``(units out,)``) on their
        own scale: random variables for the ``"uniform"`` and ``"gaussian"`` priors,
        ``pm.Deterministic`` ``scale · z`` for ``"group"`` and ``"ard"`` (random variables with
        ``centred=True``).
    scales : dict of str to TensorVariable
        The scale hyperparameter of each weight group (empty for the fixed priors): group name
        (``"w0"``, ``"b0"``, …, ``"out"``) → random variable.
    logits : TensorVariable or None
        The output units' summed input, ``(n, layer_sizes[-1])``; ``None`` when the output layer
        is integrated out.
    output : TensorVariable or None
        ``F(X, w)``: ``logits`` for linear outputs, their softmax otherwise; a
        ``pm.Deterministic`` named ``f"{name}_output"`` if :func:`mlp` was asked to keep it;
        ``None`` when the output layer is integrated out.
    obs_dim : str or None
        The dim of the data rows (``None`` for a user's data container without dims).
    unit_dims : tuple of str
        The dim of each layer's units, inputs first.
    out_coords : tuple
        Coordinate values of the output units.
    output_layer : {"sampled", "integrated"}
        Whether the output layer's weights and biases are variables of the model or integrated
        out (then :attr:`weights` and :attr:`biases` hold only the hidden layers).
    features : TensorVariable
        The last hidden layer's output, ``(n, layer_sizes[-2])``.
    output_sd : TensorVariable or float or None
        The prior sd of the output layer's weights and biases (the ``"out"`` scale, or the fixed
        ``prior_scale``); ``None`` for the uniform prior.
    """

    name: str
    layer_sizes: tuple[int, ...]
    output_type: str
    prior: str
    X: SharedVariable
    weights: tuple[TensorVariable, ...]
    biases: tuple[TensorVariable, ...]
    scales: dict[str, TensorVariable]
    logits: TensorVariable | None
    output: TensorVariable | None
    obs_dim: str | None
    unit_dims: tuple[str, ...]
    out_coords: tuple
    output_layer: str = "sampled"
    features: TensorVariable | None = None
    output_sd: TensorVariable | float | None = None
    # Filled by gaussian_likelihood for an integrated output layer: the targets' data container
    # and the noise sd, which prediction needs to rebuild the layer's conditional.
    _targets: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def predict(self, idata: Any, X_new: Any = None, *, group: str = "posterior") -> xr.DataArray:
        """The network's outputs for every draw, evaluated at once in NumPy.

        No PyMC sampling and no compilation: the weights and biases of each draw are read from
        ``idata`` (their constrained values, which the DataTree stores) and the layers are
        batched matrix products over the draws.

        Parameters
        ----------
        idata : xarray.DataTree or xarray.Dataset
            The result of ``pm.sample`` (or ``pm.sample_prior_predictive`` with
            ``group="prior"``), or one group of it as a Dataset. It must hold every variable in
            :attr:`weights` and :attr:`biases`. With an integrated output layer, each draw's
            output layer is its conditional mean given the data (a Rao–Blackwellised
            prediction, see :meth:`sample_output_layer`), unless ``idata`` holds the output
            layer's weights and biases (those of :meth:`sample_output_layer`), which are then
            used. The conditional is rebuilt from the model's current data, which must be the
            training data: predict at new inputs with ``X_new``, not ``pm.set_data``.
        X_new : array_like, shape (m, layer_sizes[0]), optional
            Inputs to predict at; the model's current ``X`` by default.
        group : str, default "posterior"
            The group of a DataTree to read.

        Returns
        -------
        xarray.DataArray
            ``F(X_new, w)`` with the draws' dims (``chain``, ``draw``) followed by
            ``(obs_dim, out dim)``; class probabilities for softmax outputs.

        Raises
        ------
        ValueError
            If ``X_new`` is not a 2-D array of ``layer_sizes[0]`` columns without NaN rows, or
            ``idata`` lacks a weight or bias.
        """
        X = self.X.get_value() if X_new is None else _matrix(X_new, "X_new")
        if X.shape[1] != self.layer_sizes[0]:
            raise ValueError(
                f"X_new has {X.shape[1]} columns but the network has {self.layer_sizes[0]} inputs"
            )
        samples = idata[group] if isinstance(idata, xr.DataTree) else idata
        layers, sample_dims, sample_coords = self._layer_draws(samples)
        if len(layers) < len(self.layer_sizes) - 1:
            layers.append(self._conditional_output_layer(samples, layers, draw=None))
        h = _forward(X, layers)
        if self.output_type == "softmax":
            h = np.exp(h - h.max(axis=-1, keepdims=True))
            h /= h.sum(axis=-1, keepdims=True)
        sample_shape = tuple(len(c) for c in sample_coords.values())
        obs_dim = self.obs_dim or f"{self.name}_obs"
        out_dim = self.unit_dims[-1]
        return xr.DataArray(
            h.reshape(*sample_shape, *h.shape[1:]),
            dims=(*sample_dims, obs_dim, out_dim),
            coords={**sample_coords, obs_dim: np.arange(len(X)), out_dim: list(self.out_coords)},
            name=f"{self.name}_output",
        )

    def predict_mean(
        self, idata: Any, X_new: Any = None, *, group: str = "posterior"
    ) -> xr.DataArray:
        """The posterior-mean prediction ``⟨F(x)⟩``, the average of ``F`` over the draws.

        Berrones (2009) Eq. 17 (SFP-S); Neal (1993) Eq. 9, the best prediction under squared
        loss. For softmax outputs, the predictive class probabilities. Arguments as in
        :meth:`predict`.

        Returns
        -------
        xarray.DataArray
            Dims ``(obs_dim, out dim)``.
        """
        draws = self.predict(idata, X_new, group=group)
        return draws.mean(dim=list(draws.dims[:-2]))

    def sample_output_layer(
        self, idata: Any, *, random_seed: Any = None, group: str = "posterior"
    ) -> xr.Dataset:
        """Draws of an integrated output layer's weights and biases, one per posterior draw.

        With ``output_layer="integrated"`` the sampler moves everything but the output layer;
        given a draw of the rest, the layer's weights and biases are Gaussian
        (:mod:`pymc_sfp.linear_gaussian`), and one exact draw from that conditional completes a
        draw of the joint posterior. Merge the result into the posterior to use it, e.g.
        ``posterior = idata["posterior"].to_dataset().merge(net.sample_output_layer(idata))``;
        :meth:`predict` then uses these weights instead of the conditional mean.

        Parameters
        ----------
        idata : xarray.DataTree or xarray.Dataset
            The result of ``pm.sample`` on the model, or its posterior group as a Dataset.
        random_seed : int, numpy Generator or None
            Seed of the draws.
        group : str, default "posterior"

        Returns
        -------
        xarray.Dataset
            ``f"{name}_w{L}"`` with dims ``(chain, draw, last hidden dim, out dim)`` and
            ``f"{name}_b{L}"`` with dims ``(chain, draw, out dim)``, ``L`` the output layer.

        Raises
        ------
        ValueError
            If the network's output layer is not integrated out, no targets are attached
            (:func:`gaussian_likelihood`), or ``idata`` lacks a variable of the network.
        """
        if self.output_layer != "integrated":
            raise ValueError(
                f"network {self.name!r} samples its output layer: its weights are in the "
                "posterior already"
            )
        samples = idata[group] if isinstance(idata, xr.DataTree) else idata
        layers, sample_dims, sample_coords = self._layer_draws(samples)
        W, b = self._conditional_output_layer(
            samples, layers, draw=np.random.default_rng(random_seed)
        )
        sample_shape = tuple(len(c) for c in sample_coords.values())
        w_name, b_name = self._output_layer_names()
        hidden_dim, out_dim = self.unit_dims[-2:]
        coords = {
            **sample_coords,
            hidden_dim: np.arange(self.layer_sizes[-2]),
            out_dim: list(self.out_coords),
        }
        return xr.Dataset(
            {
                w_name: (
                    (*sample_dims, hidden_dim, out_dim),
                    W.reshape(*sample_shape, *W.shape[1:]),
                ),
                b_name: ((*sample_dims, out_dim), b.reshape(*sample_shape, *b.shape[1:])),
            },
            coords=coords,
        )

    def _output_layer_names(self) -> tuple[str, str]:
        last = len(self.layer_sizes) - 2
        return f"{self.name}_w{last}", f"{self.name}_b{last}"

    def _layer_draws(
        self, samples: Any
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[str, ...], dict[str, np.ndarray]]:
        """Each layer's ``(W, b)`` draws, flattened over the draws; an integrated output layer
        only if the samples hold it."""
        names = [(W.name, b.name) for W, b in zip(self.weights, self.biases, strict=True)]
        if self.output_layer == "integrated" and all(
            name in samples for name in self._output_layer_names()
        ):
            names.append(self._output_layer_names())
        layers = []
        for layer, (w_name, b_name) in enumerate(names):
            dims_in, dims_out = self.unit_dims[layer], self.unit_dims[layer + 1]
            W, sample_dims, sample_coords = _draws(samples, w_name, (dims_in, dims_out))
            b, _, _ = _draws(samples, b_name, (dims_out,))
            layers.append((W, b))
        return layers, sample_dims, sample_coords

    def _conditional_output_layer(
        self,
        samples: Any,
        hidden_layers: list[tuple[np.ndarray, np.ndarray]],
        draw: np.random.Generator | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The integrated output layer for each draw of the hidden layers: its conditional mean
        (``draw=None``) or one draw from its conditional, as ``(W, b)``."""
        if not self._targets:
            raise ValueError(
                f"network {self.name!r} has no targets attached: its integrated output layer "
                "is defined by gaussian_likelihood(network, y, ...)"
            )
        X_train, Y = self.X.get_value(), self._targets["y"].get_value()
        if len(X_train) != len(Y):
            raise ValueError(
                f"the model's data have {len(X_train)} rows of X but {len(Y)} of y: an "
                "integrated output layer is rebuilt from the training data, so predict at new "
                "inputs with X_new instead of pm.set_data"
            )
        n_draws = len(hidden_layers[0][0])
        weight_sd = _hyper_draws(samples, self.output_sd, n_draws)
        noise_sd = _hyper_draws(samples, self._targets["sigma"], n_draws)
        chunks = []
        # Chunks of draws bound the memory of the hidden layer, (draws, rows, units).
        for begin in range(0, n_draws, _DRAWS_PER_CHUNK):
            part = slice(begin, begin + _DRAWS_PER_CHUNK)
            features = _forward(X_train, [(W[part], b[part]) for W, b in hidden_layers], True)
            args = (features, Y, weight_sd[part], noise_sd[part])
            if draw is None:
                chunks.append(linear_gaussian.posterior_mean(*args))
            else:
                chunks.append(linear_gaussian.posterior_draws(*args, draw))
        layer = np.concatenate(chunks)
        return layer[:, :-1, :], layer[:, -1, :]


def _float(value: float) -> np.ndarray:
    """A number as a floatX array: PyTensor stores a Python float such as 0.5 in the smallest
    dtype that holds it exactly, and log-densities of float32 parameters lose precision."""
    return floatX(np.asarray(value))


def _rows_message(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:_ROWS_SHOWN])
    more = ", ..." if len(rows) > _ROWS_SHOWN else ""
    return f"{len(rows)} row(s): [{shown}{more}]"


def _check_finite_rows(values: np.ndarray, arg: str) -> None:
    bad = ~np.isfinite(values).all(axis=tuple(range(1, values.ndim)))
    if bad.any():
        raise ValueError(
            f"{arg} has NaN or infinite values in {_rows_message(np.flatnonzero(bad))}"
        )


def _matrix(values: Any, arg: str) -> np.ndarray:
    """``values`` as a finite float matrix, or a ValueError naming ``arg``."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{arg} must be a numeric array: {error}") from None
    if array.ndim != 2:
        raise ValueError(f"{arg} must be 2-D (rows × columns), got shape {array.shape}")
    if len(array) == 0:
        raise ValueError(f"{arg} has no rows")
    _check_finite_rows(array, arg)
    return array


def _draws(
    samples: Any, name: str, dims: tuple[str, ...]
) -> tuple[np.ndarray, tuple[str, ...], dict[str, np.ndarray]]:
    """A variable's draws from a DataTree group as ``(n draws, *shape)``, with the draws' dims."""
    try:
        array = samples[name]
    except KeyError:
        raise ValueError(
            f"the samples hold no variable {name!r}: sample with it kept (it is needed to "
            "rebuild the network)"
        ) from None
    missing = [d for d in dims if d not in array.dims]
    if missing:
        raise ValueError(f"{name!r} in the samples lacks the dims {missing}")
    sample_dims = tuple(d for d in array.dims if d not in dims)
    values = array.transpose(*sample_dims, *dims).values
    coords = {d: array[d].values for d in sample_dims}
    return values.reshape(-1, *values.shape[len(sample_dims) :]), sample_dims, coords


def _hyper_draws(samples: Any, value: Any, n_draws: int) -> np.ndarray:
    """A scalar hyperparameter per draw: a model variable's draws, or a constant repeated."""
    if isinstance(value, TensorVariable) and value.name is not None:
        return _draws(samples, value.name, ())[0]
    try:
        constant = float(value)
    except TypeError:
        raise ValueError(
            "the noise sd and the prior sd of an integrated output layer must be numbers or "
            "named model variables (wrap an expression in pm.Deterministic) to predict from "
            "the samples"
        ) from None
    return np.full(n_draws, constant)


def _forward(
    X: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]], hidden_only: bool = False
) -> np.ndarray:
    """The network on ``X`` for each draw of ``layers``: tanh after every layer but the last,
    or after every layer with ``hidden_only`` (the features of an integrated output layer)."""
    h = X
    for layer, (W, b) in enumerate(layers):
        h = h @ W + b[:, None, :]
        if hidden_only or layer < len(layers) - 1:
            h = np.tanh(h)
    return h


def _ensure_coord(model: pm.Model, dim: str, size: int) -> None:
    """Add ``dim`` with values ``0 .. size - 1`` unless the model has it (then check its length)."""
    if dim not in model.coords:
        model.add_coord(dim, np.arange(size))
        return
    values = model.coords[dim]
    if values is not None and len(values) != size:
        raise ValueError(f"the model's coords give dim {dim!r} length {len(values)}, not {size}")


def _input_data(
    model: pm.Model, X: Any, name: str, n_inputs: int
) -> tuple[SharedVariable, str | None, str]:
    """The input data container with its row dim and column dim; validates its values."""
    if isinstance(X, SharedVariable):
        if model.named_vars.get(X.name) is not X:
            raise ValueError("X is a shared variable not registered in this model: use pm.Data")
        values = _matrix(X.get_value(), "X")
        obs_dim, in_dim = model.named_vars_to_dims.get(X.name) or (None, None)
        in_dim = in_dim or f"{name}_in"
    else:
        values = _matrix(X, "X")
        obs_dim, in_dim = f"{name}_obs", f"{name}_in"
    if values.shape[1] != n_inputs:
        raise ValueError(
            f"layer_sizes[0] = {n_inputs} must equal the number of columns of X, {values.shape[1]}"
        )
    _ensure_coord(model, in_dim, n_inputs)
    if not isinstance(X, SharedVariable):
        X = pm.Data(f"{name}_X", values, dims=(obs_dim, in_dim))
    return X, obs_dim, in_dim


def _scaled_normal(
    var_name: str, scale: TensorVariable, dims: tuple[str, ...], centred: bool
) -> TensorVariable:
    """``w ~ N(0, scale²)``: non-centred as ``w = scale · z``, ``z ~ N(0, 1)`` (Neal's 1993, §3.2
    unscaled weights), or centred, ``w`` itself a free variable."""
    if centred:
        return pm.Normal(var_name, 0.0, scale, dims=dims)
    z = pm.Normal(f"{var_name}_z", 0.0, 1.0, dims=dims)
    return pm.Deterministic(var_name, scale * z, dims=dims)


def _priors(
    prior: str,
    name: str,
    unit_dims: Sequence[str],
    prior_scale: float,
    centred: bool,
    integrate_output: bool,
) -> tuple[list[TensorVariable], list[TensorVariable], dict[str, TensorVariable], Any]:
    """The weights, biases and group scales of every layer under ``prior``, and the prior sd of
    the output layer. With ``integrate_output`` the output layer gets its scale but no weights."""
    n_layers = len(unit_dims) - 1
    scale = _float(prior_scale)
    weights, biases, scales = [], [], {}
    output_sd = None if prior == "uniform" else scale
    for layer in range(n_layers):
        w_name, b_name = f"{name}_w{layer}", f"{name}_b{layer}"
        w_dims, b_dims = (unit_dims[layer], unit_dims[layer + 1]), (unit_dims[layer + 1],)
        is_output = layer == n_layers - 1
        if prior in ("group", "ard") and is_output:
            output_sd = pm.HalfNormal(f"{name}_sd_out", scale)
            scales["out"] = output_sd
        if is_output and integrate_output:
            break
        if prior == "uniform":
            weights.append(pm.Uniform(w_name, -scale, scale, dims=w_dims))
            biases.append(pm.Uniform(b_name, -scale, scale, dims=b_dims))
        elif prior == "gaussian":
            weights.append(pm.Normal(w_name, 0.0, scale, dims=w_dims))
            biases.append(pm.Normal(b_name, 0.0, scale, dims=b_dims))
        elif is_output:
            weights.append(_scaled_normal(w_name, output_sd, w_dims, centred))
            biases.append(_scaled_normal(b_name, output_sd, b_dims, centred))
        else:
            ard = prior == "ard" and layer == 0
            w_scale = pm.HalfNormal(
                f"{name}_sd_w{layer}", scale, dims=(unit_dims[0],) if ard else None
            )
            b_scale = pm.HalfNormal(f"{name}_sd_b{layer}", scale)
            scales[f"w{layer}"], scales[f"b{layer}"] = w_scale, b_scale
            w_sd = w_scale[:, None] if ard else w_scale
            weights.append(_scaled_normal(w_name, w_sd, w_dims, centred))
            biases.append(_scaled_normal(b_name, b_scale, b_dims, centred))
    return weights, biases, scales, output_sd


def mlp(
    X: Any,
    layer_sizes: Sequence[int],
    *,
    output: Literal["linear", "softmax"] = "linear",
    prior: Literal["uniform", "gaussian", "group", "ard"] = "uniform",
    prior_scale: float = 1.0,
    name: str = "net",
    centred: bool = False,
    deterministic: bool = False,
    output_layer: Literal["sampled", "integrated"] = "sampled",
) -> Network:
    """Build a multilayer perceptron with tanh hidden units in the current ``pm.Model``.

    For a row ``x`` of inputs, ``F(x, w) = g(tanh(… tanh(x W_0 + b_0) …) W_L + b_L)`` with
    ``g`` the identity (regression) or the softmax (classification), as in Berrones (2009,
    §3–4) and Neal (1993, §3); ``W_l`` has shape ``(units in, units out)``.

    Parameters
    ----------
    X : array_like or SharedVariable, shape (n, layer_sizes[0])
        The inputs. An array is wrapped in ``pm.Data(f"{name}_X", X, dims=(f"{name}_obs",
        f"{name}_in"))``; a ``pm.Data`` of the model is used as it is, with its own dims if it
        has any.
    layer_sizes : sequence of int
        Units per layer: inputs, one or more hidden layers, outputs, e.g. ``(2, 16, 2)``.
    output : {"linear", "softmax"}, default "linear"
        The output units.
    prior : {"uniform", "gaussian", "group", "ard"}, default "uniform"
        The prior of the weights and biases (module docstring; see Notes).
    prior_scale : float, default 1.0
        ``"uniform"``: the bound ``b`` of ``U(-b, b)`` (Berrones: 1). ``"gaussian"``: the
        standard deviation. ``"group"``, ``"ard"``: the scale of the half-normal prior of each
        group's standard deviation.
    name : str, default "net"
        Prefix of the network's variables, dims and data.
    centred : bool, default False
        ``"group"`` and ``"ard"`` only: sample the weights themselves, ``w ~ N(0, scale²)``,
        instead of the unscaled ``z`` with ``w = scale · z`` (see Notes).
    deterministic : bool, default False
        Keep the output in the trace as ``pm.Deterministic(f"{name}_output")`` (memory
        ``n × outputs`` per draw), so that ``pm.sample_posterior_predictive`` can return it after
        ``pm.set_data``. :meth:`Network.predict` does not need it.
    output_layer : {"sampled", "integrated"}, default "sampled"
        ``"integrated"``: the output layer's weights and biases are not variables of the model;
        :func:`gaussian_likelihood` integrates them out analytically (see Notes). Needs linear
        outputs and a Gaussian prior (``"gaussian"``, ``"group"`` or ``"ard"``).

    Returns
    -------
    Network

    Raises
    ------
    ValueError
        For an unknown ``output`` or ``prior``, a ``prior_scale`` that is not finite and > 0,
        ``centred=True`` with a prior other than ``"group"`` or ``"ard"``, an unknown
        ``output_layer``, ``"integrated"`` with softmax outputs, the uniform prior or
        ``deterministic=True``, ``layer_sizes``
        that are not at least three positive integers, ``layer_sizes[0]`` not
        equal to the columns of ``X``, fewer than two softmax outputs, or ``X`` with NaN or
        infinite values (the rows are named).

    Notes
    -----
    Weight groups of the hierarchical priors (Neal 1993, §3.1: "input to hidden, bias to hidden,
    and hidden/bias to output", after MacKay): for each hidden layer ``l`` its incoming weights
    (group ``"w{l}"``, scale ``f"{name}_sd_w{l}"``) and its biases (``"b{l}"``); the weights and
    biases of the output layer form one group (``"out"``). Neal fixes the prior width to one and
    multiplies each weight by its group's scale factor, sampling the unscaled weights and the
    scale factors: here ``w = scale · z``, ``z ~ N(0, 1)`` (variables ``f"{name}_w{l}_z"``), which
    is also the non-centred form that gradient samplers need. ``"ard"`` gives the first layer's
    weights one scale per input unit (dims ``(f"{name}_in",)``).

    ``centred=True`` makes the weights and biases the free variables (same names, no ``_z``).
    This is the form for Neal's split scheme, where the dynamics move the weights and another
    step moves the scales given the weights (``pm.Slice`` in a ``CompoundStep``; see the
    stochastic-dynamics guide): on the robot arm it mixes the scales better than any sampler of
    the full non-centred posterior, though far worse than integrating the output layer out
    (below), the better choice for regression. With one gradient sampler for every variable keep
    the non-centred default, since a centred scale and its weights form a funnel.

    Scale prior: Neal (1993) does not state it. His later work (Neal 1996, *Bayesian Learning
    for Neural Networks*) puts Gamma priors on the precisions ``1 / scale²``; MacKay's evidence
    framework optimises them under a flat prior on their logarithm. Made vague, these approach
    the improper ``1 / scale``, under which the posterior is improper (the likelihood tends to a
    constant as a scale → 0). Here each scale is ``HalfNormal(prior_scale)``: proper, weakly
    informative for standardised inputs and outputs, and with a finite density at zero, so that
    a group can be switched off without a funnel in the non-centred coordinates. Pass
    ``prior_scale`` for data on other scales. The scales are not divided by the square root of
    the number of units feeding in (Neal 1996's rule for wide networks).

    *Integrated output layer.* A linear output layer with a Gaussian prior under Gaussian noise
    is conjugate: given the hidden layers, the targets are Gaussian with the layer's weights
    integrated out (:mod:`pymc_sfp.linear_gaussian`), and the weights given the data are
    Gaussian too. The posterior of everything else is unchanged, but the sampler no longer has to
    move the output weights together with the hidden ones: on the robot arm, where no sampler
    of the full posterior converged the group scales, the exact dynamics then converge them in
    a few thousand draws (see the stochastic-dynamics guide). The cost per gradient grows by a
    ``(h + 1) × (h + 1)`` Cholesky factorisation, ``h`` the last hidden layer's width.
    :meth:`Network.predict` then uses each draw's conditional-mean output layer, and
    :meth:`Network.sample_output_layer` draws the weights themselves.
    """
    model = pm.modelcontext(None)
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
    if not np.isfinite(prior_scale) or prior_scale <= 0:
        raise ValueError(f"prior_scale must be finite and > 0, got {prior_scale!r}")
    if centred and prior not in ("group", "ard"):
        raise ValueError(
            f"centred=True applies to the hierarchical priors 'group' and 'ard', not {prior!r}"
        )
    if output_layer not in OUTPUT_LAYERS:
        raise ValueError(f"output_layer must be one of {OUTPUT_LAYERS}, got {output_layer!r}")
    integrate_output = output_layer == "integrated"
    if integrate_output and (output != "linear" or prior == "uniform" or deterministic):
        raise ValueError(
            "output_layer='integrated' needs linear outputs, a Gaussian prior ('gaussian', "
            "'group' or 'ard') and deterministic=False (there is no output graph to keep); got "
            f"output={output!r}, prior={prior!r}, deterministic={deterministic!r}"
        )
    sizes = tuple(layer_sizes)
    if len(sizes) < 3 or not all(
        isinstance(s, int | np.integer) and not isinstance(s, bool) and s > 0 for s in sizes
    ):
        raise ValueError(
            "layer_sizes must be at least three positive integers (inputs, hidden layers, "
            f"outputs), got {layer_sizes!r}"
        )
    sizes = tuple(int(s) for s in sizes)
    if output == "softmax" and sizes[-1] < 2:
        raise ValueError(f"softmax outputs need layer_sizes[-1] >= 2, got {sizes[-1]}")

    X_data, obs_dim, in_dim = _input_data(model, X, name, sizes[0])
    hidden_dims = [f"{name}_hidden{i}" for i in range(len(sizes) - 2)]
    out_dim = f"{name}_out"
    unit_dims = (in_dim, *hidden_dims, out_dim)
    for dim, size in zip(unit_dims[1:], sizes[1:], strict=True):
        _ensure_coord(model, dim, size)
    weights, biases, scales, output_sd = _priors(
        prior, name, unit_dims, prior_scale, centred, integrate_output
    )

    n_hidden = len(sizes) - 2
    features = X_data
    for W, b in zip(weights[:n_hidden], biases[:n_hidden], strict=True):
        features = pt.tanh(pt.dot(features, W) + b)
    if integrate_output:
        logits = F = None
    else:
        logits = pt.dot(features, weights[-1]) + biases[-1]
        F = pt.special.softmax(logits, axis=-1) if output == "softmax" else logits
    if deterministic:
        F = pm.Deterministic(
            f"{name}_output", F, dims=(obs_dim, out_dim) if obs_dim is not None else None
        )
    return Network(
        name=name,
        layer_sizes=sizes,
        output_type=output,
        prior=prior,
        X=X_data,
        weights=tuple(weights),
        biases=tuple(biases),
        scales=scales,
        logits=logits,
        output=F,
        obs_dim=obs_dim,
        unit_dims=unit_dims,
        out_coords=tuple(model.coords[out_dim] or range(sizes[-1])),
        output_layer=output_layer,
        features=features,
        output_sd=output_sd,
    )


def _observed(
    network: Network, values: np.ndarray, name: str, dims: tuple[str, ...], shape: Any
) -> tuple[SharedVariable, dict[str, Any]]:
    """Check the rows of ``values`` against ``X`` and wrap them in ``pm.Data(f"{name}_data")``.

    Also returns the size arguments of the observed variable: its dims ``(obs_dim, *dims)``, or,
    for a data container without a row dim, ``shape`` (tied to ``X``'s rows), so that its length
    follows ``pm.set_data`` of new inputs.
    """
    _check_finite_rows(values, "y")
    n_rows = network.X.get_value().shape[0]
    if len(values) != n_rows:
        raise ValueError(f"y has {len(values)} rows but X has {n_rows}")
    if network.obs_dim is None:
        return pm.Data(f"{name}_data", values), {"shape": shape}
    dims = (network.obs_dim, *dims)
    return pm.Data(f"{name}_data", values, dims=dims), {"dims": dims}


def gaussian_likelihood(
    network: Network,
    y: Any,
    *,
    sigma: float | TensorVariable | Literal["integrated"] | None = None,
    D: float | None = None,
    name: str | None = None,
) -> TensorVariable:
    """Attach regression targets ``y`` to a network's outputs.

    Four forms, chosen by ``sigma`` and ``D``:

    * ``sigma`` a number or a model variable: ``y ~ N(F(x, w), sigma²)`` independently (Neal
      1993, Eq. 2).
    * ``sigma=None`` (default): unknown noise, ``sigma ~ HalfNormal(1)`` named
      ``f"{name}_sigma"``, shared by all outputs (vague for standardised outputs; pass your own
      variable as ``sigma`` otherwise).
    * ``sigma="integrated"``: Neal's (1993) Eq. 3, the noise level integrated out under a vague
      prior, ``log p(y | w) = -(m0 + n·K)/2 · log(s0 + Σ_c ‖y_c − F(x_c, w)‖²)`` with
      ``s0 = m0 = 0.1`` (:data:`NEAL_S0`, :data:`NEAL_M0`), ``n`` rows and ``K`` outputs,
      added as a ``pm.Potential``.
    * ``D`` given: Berrones' (2009) Eq. 23 cold quadratic loss,
      ``log p(y | w) = -(1/D)(1/n) Σ_c ‖y_c − F(x_c, w)‖²``, added as a ``pm.Potential``. It
      equals a Gaussian with ``sigma² = D·n/2`` up to a constant; a small ``D`` sharpens the
      likelihood while the sampler runs at temperature 1 (the paper uses 5e-4 and 5e-3).

    For a network built with ``output_layer="integrated"`` only Gaussian noise with one sd
    (``sigma`` a number, a scalar variable, or ``None``) is possible: the output layer's weights
    and biases are integrated out, and the likelihood is the marginal density of ``y`` given
    the hidden layers, added as a ``pm.Potential`` (:func:`linear_gaussian.marginal_loglik`).

    Parameters
    ----------
    network : Network
    y : array_like, shape (n, outputs), or (n,) for one output
        The targets, one row per row of ``X``. Stored as ``pm.Data(f"{name}_data")``.
    sigma : float, array_like, TensorVariable, "integrated" or None, default None
        The noise standard deviation (see above); an array broadcasts against the outputs,
        e.g. one sd per output.
    D : float, optional
        Berrones' likelihood temperature; exclusive with ``sigma``.
    name : str, optional
        Name of the observed variable or potential; ``f"{network.name}_y"`` by default.

    Returns
    -------
    TensorVariable
        The observed variable (dims ``(obs, out)``; it has posterior-predictive draws after
        ``pm.set_data`` of new inputs), or the potential for ``"integrated"``, ``D`` and an
        integrated output layer, which has none: predict those with
        :meth:`Network.predict_mean`.

    Raises
    ------
    ValueError
        If ``y`` has NaN rows (named), a different number of rows than ``X`` or columns than
        outputs, ``sigma`` is not finite and > 0 or an unknown string, ``D`` is not finite and
        > 0, or both ``sigma`` and ``D`` are given; for an integrated output layer, if
        ``sigma`` is ``"integrated"``, not a scalar, or ``D`` is given, or the network already
        has targets.
    """
    name = name or f"{network.name}_y"
    n_outputs = network.layer_sizes[-1]
    values = np.asarray(y, dtype=float)
    if values.ndim == 1 and n_outputs == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[1] != n_outputs:
        raise ValueError(f"y must have shape (n, {n_outputs}), got {values.shape}")
    if D is not None:
        if sigma is not None:
            raise ValueError("pass either sigma or D (Berrones' Eq. 23 loss), not both")
        if not np.isfinite(D) or D <= 0:
            raise ValueError(f"D must be finite and > 0, got {D!r}")
    if isinstance(sigma, str):
        if sigma != "integrated":
            raise ValueError(f"sigma must be a number, a variable, None or 'integrated': {sigma!r}")
    elif sigma is not None and not isinstance(sigma, TensorVariable):
        sigma = _float(sigma)
        if not np.all(np.isfinite(sigma) & (sigma > 0)):
            raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")

    if network.output_layer == "integrated":
        return _integrated_output_likelihood(network, values, sigma, D, name)
    y_data, size = _observed(network, values, name, network.unit_dims[-1:], network.output.shape)
    squares = pt.sum(pt.square(y_data - network.output))
    if D is not None:
        return pm.Potential(name, -squares / (_float(D) * y_data.shape[0]))
    if isinstance(sigma, str):
        exponent = (NEAL_M0 + y_data.shape[0] * n_outputs) / 2
        return pm.Potential(name, -exponent * pt.log(NEAL_S0 + squares))
    if sigma is None:
        sigma = pm.HalfNormal(f"{name}_sigma", 1.0)
    return pm.Normal(name, mu=network.output, sigma=sigma, observed=y_data, **size)


def _integrated_output_likelihood(
    network: Network, values: np.ndarray, sigma: Any, D: float | None, name: str
) -> TensorVariable:
    """``gaussian_likelihood`` of a network whose output layer is integrated out: a
    ``pm.Potential`` of the marginal log-likelihood (:func:`linear_gaussian.marginal_loglik`)."""
    if D is not None or isinstance(sigma, str):
        raise ValueError(
            "an integrated output layer needs Gaussian noise of sd `sigma` (a number, a scalar "
            "variable, or None for a HalfNormal(1) variable); Neal's integrated noise and "
            "Berrones' D are not conjugate to it"
        )
    if getattr(sigma, "ndim", 0) != 0:
        raise ValueError(
            "an integrated output layer needs one noise sd shared by all outputs: sigma must be "
            f"a scalar, got {sigma.ndim} dims"
        )
    if network._targets:
        raise ValueError(f"network {network.name!r} already has targets attached")
    y_data, _ = _observed(network, values, name, network.unit_dims[-1:], None)
    if sigma is None:
        sigma = pm.HalfNormal(f"{name}_sigma", 1.0)
    network._targets.update(y=y_data, sigma=sigma)
    return pm.Potential(
        name, linear_gaussian.marginal_loglik(network.features, y_data, network.output_sd, sigma)
    )


def categorical_likelihood(network: Network, y: Any, *, name: str | None = None) -> TensorVariable:
    """Attach class labels ``y`` to a softmax network: ``y ~ Categorical(softmax(logits))``.

    The likelihood of classification in Berrones (2009, §4.1) with softmax outputs, evaluated
    from the logits for numerical stability. (The paper's runs use the quadratic loss of Eq. 23
    on one-hot targets instead: :func:`gaussian_likelihood` with ``D`` and ``y`` one-hot.)

    Parameters
    ----------
    network : Network
        Built with ``output="softmax"``.
    y : array_like of int, shape (n,)
        Labels in ``0 .. layer_sizes[-1] - 1``, one per row of ``X``; stored as
        ``pm.Data(f"{name}_data")``.
    name : str, optional
        Name of the observed variable; ``f"{network.name}_y"`` by default.

    Returns
    -------
    TensorVariable
        The observed variable, dims ``(obs,)``.

    Raises
    ------
    ValueError
        If the network's outputs are not softmax, or ``y`` is not 1-D, has a different number
        of rows than ``X``, or has NaN, non-integer or out-of-range labels (the rows are named).
    """
    if network.output_type != "softmax":
        raise ValueError(
            f"categorical_likelihood needs a network with output='softmax', not "
            f"{network.output_type!r}"
        )
    name = name or f"{network.name}_y"
    n_classes = network.layer_sizes[-1]
    values = np.asarray(y)
    if values.ndim != 1:
        raise ValueError(f"y must be 1-D class labels, got shape {values.shape}")
    labels = values.astype(float)
    _check_finite_rows(labels, "y")
    bad = (labels != np.round(labels)) | (labels < 0) | (labels >= n_classes)
    if bad.any():
        raise ValueError(
            f"y must hold integer labels in 0..{n_classes - 1}; bad labels in "
            f"{_rows_message(np.flatnonzero(bad))}"
        )
    y_data, size = _observed(network, labels.astype(np.int64), name, (), network.logits.shape[:1])
    return pm.Categorical(name, logit_p=network.logits, observed=y_data, **size)
