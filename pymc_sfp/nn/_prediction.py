"""A built network evaluated over posterior draws in NumPy, from and to xarray (private).

The bodies of :meth:`pymc_sfp.nn.Network.predict` and
:meth:`~pymc_sfp.nn.Network.sample_output_layer`: the draws of the weights and biases are read
from a DataTree group, flattened over the draws' dims, pushed through the layers as batched
matrix products, and the result gets the draws' dims back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from pytensor.tensor.variable import TensorVariable
from scipy.special import softmax

from pymc_sfp._validation import as_matrix
from pymc_sfp.core import linear_gaussian

if TYPE_CHECKING:
    from pymc_sfp.nn.network import Network

#: Draws per block when an integrated output layer is rebuilt in NumPy.
DRAWS_PER_CHUNK = 256

#: One layer's draws: weights ``(draws, units in, units out)`` and biases ``(draws, units out)``.
Layer = tuple[np.ndarray, np.ndarray]


def predict(network: Network, idata: Any, X_new: Any, group: str) -> xr.DataArray:
    """:meth:`Network.predict`: ``F(X_new, w)`` for every draw, with the draws' dims."""
    X = network.X.get_value() if X_new is None else as_matrix(X_new, "X_new")
    if X.shape[1] != network.layer_sizes[0]:
        raise ValueError(
            f"X_new has {X.shape[1]} columns but the network has {network.layer_sizes[0]} inputs"
        )
    samples = _group(idata, group)
    layers, sample_dims, sample_coords = _layer_draws(network, samples)
    if len(layers) < len(network.layer_sizes) - 1:
        training = _training_data(network, idata)
        layers.append(_conditional_output_layer(network, samples, layers, training, rng=None))
    h = forward(X, layers)
    if network.output_type == "softmax":
        h = softmax(h, axis=-1)
    h = h.astype(network_dtype(network), copy=False)
    sample_shape = tuple(len(c) for c in sample_coords.values())
    obs_dim = network.obs_dim or f"{network.name}_obs"
    out_dim = network.unit_dims[-1]
    # The model's labels of the rows hold for its own data only, not for X_new.
    obs_coords = _coords(network, obs_dim, len(X)) if X_new is None else np.arange(len(X))
    return xr.DataArray(
        h.reshape(*sample_shape, *h.shape[1:]),
        dims=(*sample_dims, obs_dim, out_dim),
        coords={**sample_coords, obs_dim: obs_coords, out_dim: list(network.out_coords)},
        name=f"{network.name}_output",
    )


def sample_output_layer(network: Network, idata: Any, random_seed: Any, group: str) -> xr.Dataset:
    """:meth:`Network.sample_output_layer`: one draw of the integrated output layer per draw."""
    if network.output_layer != "integrated":
        raise ValueError(
            f"network {network.name!r} samples its output layer: its weights are in the "
            "posterior already"
        )
    samples = _group(idata, group)
    layers, sample_dims, sample_coords = _layer_draws(network, samples)
    W, b = _conditional_output_layer(
        network, samples, layers, _training_data(network, idata), np.random.default_rng(random_seed)
    )
    dtype = network_dtype(network)
    W, b = W.astype(dtype, copy=False), b.astype(dtype, copy=False)
    sample_shape = tuple(len(c) for c in sample_coords.values())
    w_name, b_name = output_layer_names(network)
    hidden_dim, out_dim = network.unit_dims[-2:]
    coords = {
        **sample_coords,
        hidden_dim: _coords(network, hidden_dim, network.layer_sizes[-2]),
        out_dim: list(network.out_coords),
    }
    return xr.Dataset(
        {
            w_name: ((*sample_dims, hidden_dim, out_dim), W.reshape(*sample_shape, *W.shape[1:])),
            b_name: ((*sample_dims, out_dim), b.reshape(*sample_shape, *b.shape[1:])),
        },
        coords=coords,
    )


def network_dtype(network: Network) -> np.dtype:
    """The float type of the network's variables and inputs, which its predictions and drawn
    output layers carry (float32 in a model built with ``floatX="float32"``). They are computed
    in float64 where the inputs are (``X_new`` as given, the conditional of an integrated output
    layer), then cast to it."""
    return np.result_type(network.X.dtype, *(v.dtype for v in (*network.weights, *network.biases)))


def output_layer_names(network: Network) -> tuple[str, str]:
    """The names of the output layer's weights and biases."""
    last = len(network.layer_sizes) - 2
    return f"{network.name}_w{last}", f"{network.name}_b{last}"


def forward(X: np.ndarray, layers: Sequence[Layer], hidden_only: bool = False) -> np.ndarray:
    """The network on ``X`` for each draw of ``layers``, ``(draws, rows, units out)``: tanh after
    every layer but the last, or after every layer with ``hidden_only`` (the features of an
    integrated output layer)."""
    h = X
    for layer, (W, b) in enumerate(layers):
        h = h @ W + b[:, None, :]
        if hidden_only or layer < len(layers) - 1:
            h = np.tanh(h)
    return h


def _coords(network: Network, dim: str, size: int) -> np.ndarray:
    """The model's labels of ``dim`` if it has ``size`` of them, else ``0 .. size - 1``."""
    values = network.model.coords.get(dim) if network.model is not None else None
    return np.asarray(values) if values is not None and len(values) == size else np.arange(size)


def _group(idata: Any, group: str) -> Any:
    """The draws of ``group`` in a DataTree; a Dataset, or one group's node of a DataTree
    (``idata.posterior``), as it is."""
    if not isinstance(idata, xr.DataTree) or group in idata.children:
        return idata[group] if isinstance(idata, xr.DataTree) else idata
    if idata.children:
        raise ValueError(f"idata has no group {group!r}; its groups: {list(idata.children)}")
    return idata


def _layer_draws(
    network: Network, samples: Any
) -> tuple[list[Layer], tuple[str, ...], dict[str, np.ndarray]]:
    """Each layer's ``(W, b)`` draws, flattened over the draws, with the draws' dims and coords;
    an integrated output layer only if the samples hold it."""
    names = [(W.name, b.name) for W, b in zip(network.weights, network.biases, strict=True)]
    if network.output_layer == "integrated" and all(
        name in samples for name in output_layer_names(network)
    ):
        names.append(output_layer_names(network))
    layers = []
    for layer, (w_name, b_name) in enumerate(names):
        dims_in, dims_out = network.unit_dims[layer], network.unit_dims[layer + 1]
        W, sample_dims, sample_coords = _draws(samples, w_name, (dims_in, dims_out))
        b, _, _ = _draws(samples, b_name, (dims_out,))
        layers.append((W, b))
    return layers, sample_dims, sample_coords


def _training_data(network: Network, idata: Any) -> tuple[np.ndarray, np.ndarray]:
    """The inputs and targets an integrated output layer is conditioned on: those that the
    DataTree of ``pm.sample`` recorded in its ``constant_data`` group (also for one of its groups
    passed alone), else the model's current data containers."""
    targets = network.targets
    if targets is None or not targets.attached:
        raise ValueError(
            f"network {network.name!r} has no targets attached: its integrated output layer "
            "is defined by gaussian_likelihood(network, y, ...)"
        )
    names = (network.X.name, targets.y.name)
    root = idata.root if isinstance(idata, xr.DataTree) else None
    recorded = (
        root["constant_data"] if root is not None and "constant_data" in root.children else {}
    )
    if all(name in recorded for name in names):
        X_train, Y = (np.asarray(recorded[name].values, dtype=float) for name in names)
        origin = "the DataTree's constant_data"
    else:
        X_train, Y = network.X.get_value(), targets.y.get_value()
        origin = "the model's data (the idata records none)"
    # pm.sample_posterior_predictive(..., extend_inferencedata=True) after pm.set_data
    # overwrites constant_data with the new inputs, padded with NaN to the old length.
    if len(X_train) != len(Y) or not (np.isfinite(X_train).all() and np.isfinite(Y).all()):
        raise ValueError(
            f"the training data in {origin} are not those the layer was sampled with "
            f"({len(X_train)} rows of X, {len(Y)} of y, or non-finite values): an integrated "
            "output layer is rebuilt from the training data, so predict at new inputs with "
            "X_new instead of pm.set_data"
        )
    return X_train, Y


def _conditional_output_layer(
    network: Network,
    samples: Any,
    hidden_layers: list[Layer],
    training: tuple[np.ndarray, np.ndarray],
    rng: np.random.Generator | None,
) -> Layer:
    """The integrated output layer for each draw of the hidden layers given the ``training``
    inputs and targets: its conditional mean (``rng=None``) or one draw from its conditional, as
    ``(W, b)``."""
    X_train, Y = training
    targets = network.targets
    n_draws = len(hidden_layers[0][0])
    weight_sd = _hyper_draws(samples, network.output_sd, n_draws)
    noise_sd = _hyper_draws(samples, targets.noise_sd, n_draws)
    chunks = []
    # Chunks of draws bound the memory of the hidden layer, (draws, rows, units).
    for begin in range(0, n_draws, DRAWS_PER_CHUNK):
        part = slice(begin, begin + DRAWS_PER_CHUNK)
        features = forward(X_train, [(W[part], b[part]) for W, b in hidden_layers], True)
        args = (features, Y, weight_sd[part], noise_sd[part])
        if rng is None:
            chunks.append(linear_gaussian.posterior_mean(*args))
        else:
            chunks.append(linear_gaussian.posterior_draws(*args, rng))
    layer = np.concatenate(chunks)
    return layer[:, :-1, :], layer[:, -1, :]


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
