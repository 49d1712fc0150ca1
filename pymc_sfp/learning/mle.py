"""SFP-MLE (Berrones 2009, Eq. 18–19): a deterministic predictor from the weights' marginals.

:func:`sfp_mle` takes the mode ``w_o`` and the mean ``⟨w⟩`` of each weight's analytic marginal
(:func:`pymc_sfp.sfp_marginals`, Eq. 7) and returns an :class:`MLEPredictor`, the first-order
expansion ``F(x, w_o) + ∇_w F(x, w_o) · (⟨w⟩ − w_o)`` evaluated exactly in NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pytensor.tensor.variable import TensorVariable
from scipy.special import softmax

from pymc_sfp._validation import as_matrix
from pymc_sfp.marginals import sfp_marginals
from pymc_sfp.nn import OUTPUTS, Network

__all__ = ["MLEPredictor", "sfp_mle"]


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
        h = as_matrix(X, "X")
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
            h = softmax(h, axis=-1)
            # The softmax's Jacobian-vector product: (diag(p) − p pᵀ) dh.
            dh = h * (dh - np.sum(h * dh, axis=-1, keepdims=True))
        return h + dh if first_order else h


def sampled_parameters(network: Network) -> tuple[TensorVariable, ...]:
    """The weights and biases of a network whose weights are its free variables, as SFP marginals
    need (``prior="uniform"`` or ``"gaussian"``); a ValueError for the hierarchical priors."""
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
        The network ``idata`` was sampled with, built by :func:`pymc_sfp.nn.mlp` with
        ``prior="uniform"`` or ``"gaussian"``. Only the names and shapes of its weights can be
        checked against ``idata``; its output type is taken as given.

    Returns
    -------
    MLEPredictor

    Raises
    ------
    ValueError
        If the network's weights are not sampled variables, ``idata`` holds no SFP marginals
        for them, or their shapes in ``idata`` are not the network's.
    """
    names = [var.name for var in sampled_parameters(network)]
    marginals = sfp_marginals(idata, var_names=names)
    n_layers = len(network.weights)
    sizes = network.layer_sizes
    expected = [(sizes[k], sizes[k + 1]) for k in range(n_layers)]
    expected += [(sizes[k + 1],) for k in range(n_layers)]
    for name, shape in zip(names, expected, strict=True):
        found = np.shape(marginals[name])
        if found != shape:
            raise ValueError(
                f"idata's {name} has shape {found}, but the network's has shape {shape} "
                f"(layer_sizes {sizes}): pass the network idata was sampled with"
            )
    modes = [_elementwise(marginals[name], "mode") for name in names]
    means = [_elementwise(marginals[name], "mean") for name in names]
    return MLEPredictor(
        weights=tuple(modes[:n_layers]),
        biases=tuple(modes[n_layers:]),
        weight_means=tuple(means[:n_layers]),
        bias_means=tuple(means[n_layers:]),
        output_type=network.output_type,  # type: ignore[arg-type]
    )
