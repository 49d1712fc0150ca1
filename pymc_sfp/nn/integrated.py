"""The conjugate linear-Gaussian output layer, integrated out: its marginal likelihood graph.

With ``mlp(..., output_layer="integrated")`` a regression network's linear output layer is not
part of the model. For targets ``Y`` (n × K) on the last hidden layer's features ``H`` (n × h),
weights and biases ``W ~ N(0, s² I)`` and Gaussian noise of sd ``σ``, each output column is
marginally ``y_k ~ N(0, s² H̃ H̃ᵀ + σ² I)`` with ``H̃ = [H, 1]``
(:mod:`pymc_sfp.core.linear_gaussian`), so the likelihood that :func:`gaussian_likelihood`
attaches is that marginal density, a differentiable PyTensor graph (:func:`marginal_loglik`).
Prediction rebuilds the layer's Gaussian conditional from the samples in NumPy
(:meth:`pymc_sfp.nn.Network.predict`, :meth:`~pymc_sfp.nn.Network.sample_output_layer`), which
needs the targets and the noise sd: :class:`OutputTargets` keeps them with the network.

In terms of the ``k × k`` matrix ``B = H̃ᵀ H̃ + λ I``, ``λ = σ² / s²``, ``k = h + 1``, and
``μ = B⁻¹ H̃ᵀ Y`` (Woodbury; never the ``n × n`` covariance ``C``),

``log p(Y | H, s, σ) = -½ [ (‖Y − H̃ μ‖² + λ ‖μ‖²) / σ² + K log det C + n K log 2π ]``

with ``log det C = 2 (n − k) log σ + 2 k log s + log det B``. The residual form of the quadratic
term avoids the cancellation of ``‖Y‖² − …`` when the features fit the data closely, as a
network's do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.tensor.variable import TensorVariable

from pymc_sfp.nn._data import floatx, observed_data

if TYPE_CHECKING:
    from pymc_sfp.nn.network import Network

__all__ = ["OutputTargets", "marginal_loglik"]


@dataclass(eq=False)
class OutputTargets:
    """The targets of an integrated output layer and their noise sd: the mutable part of a
    :class:`~pymc_sfp.nn.Network`.

    The layer's conditional, which prediction rebuilds, depends on the targets and the noise as
    much as on the network, but they arrive after the network is built, with
    :func:`~pymc_sfp.nn.gaussian_likelihood`. So :func:`~pymc_sfp.nn.mlp` gives a network whose
    output layer is integrated out an empty ``OutputTargets`` (:attr:`Network.targets`), and
    ``gaussian_likelihood`` fills it, once; the rest of the network stays frozen.

    Attributes
    ----------
    y : SharedVariable or None
        The targets' data container, ``(n, outputs)``; ``None`` until attached.
    noise_sd : TensorVariable or ndarray or None
        The noise sd ``σ``, a scalar; ``None`` until attached.
    """

    y: SharedVariable | None = None
    noise_sd: TensorVariable | np.ndarray | None = None

    @property
    def attached(self) -> bool:
        """Whether :func:`~pymc_sfp.nn.gaussian_likelihood` has attached the targets."""
        return self.y is not None


def _tensor(value: Any) -> TensorVariable:
    """A graph input as a tensor; numbers as floatX arrays (see :func:`floatx`)."""
    if isinstance(value, Variable):
        return value
    return pt.as_tensor(floatx(value))


def marginal_loglik(features: Any, Y: Any, weight_sd: Any, noise_sd: Any) -> TensorVariable:
    """``log p(Y | H, s, σ)`` with a linear layer's weights and biases integrated out.

    Parameters
    ----------
    features : TensorVariable or array_like, shape (n, h)
        ``H``, the inputs of the linear layer (a network's last hidden layer).
    Y : TensorVariable or array_like, shape (n, K)
        The targets.
    weight_sd : scalar TensorVariable or float
        ``s``, the prior sd of every weight and bias of the layer.
    noise_sd : scalar TensorVariable or float
        ``σ``, the noise sd, shared by the outputs.

    Returns
    -------
    TensorVariable
        A scalar: the log-density of all of ``Y`` (module docstring), differentiable in every
        argument.
    """
    H = _tensor(features)
    H = pt.concatenate([H, pt.ones((H.shape[0], 1), dtype=H.dtype)], axis=1)
    Y = _tensor(Y)
    s = _tensor(weight_sd)
    sigma = _tensor(noise_sd)
    # Counts in the dtype of the features: int64 shapes would turn a float32 graph into float64.
    n, k, n_outputs = (pt.cast(size, H.dtype) for size in (H.shape[0], H.shape[1], Y.shape[1]))
    ridge = (sigma / s) ** 2
    cholesky = pt.linalg.cholesky(H.T @ H + ridge * pt.eye(H.shape[1], dtype=H.dtype))
    # μ = B⁻¹ H̃ᵀ Y by two triangular solves with B's Cholesky factor.
    half = pt.linalg.solve_triangular(cholesky, H.T @ Y, lower=True)
    mean = pt.linalg.solve_triangular(cholesky.T, half, lower=False)
    misfit = pt.sum(pt.square(Y - H @ mean)) + ridge * pt.sum(pt.square(mean))
    log_det = (
        2 * (n - k) * pt.log(sigma) + 2 * k * pt.log(s) + 2 * pt.sum(pt.log(pt.diag(cholesky)))
    )
    log_2pi = pt.constant(np.log(2 * np.pi), dtype=H.dtype)
    return -0.5 * (misfit / sigma**2 + n_outputs * log_det + n * n_outputs * log_2pi)


def integrated_likelihood(
    network: Network, values: np.ndarray, sigma: Any, temperature: float | None, name: str
) -> TensorVariable:
    """:func:`~pymc_sfp.nn.gaussian_likelihood` of a network whose output layer is integrated out.

    Adds ``pm.Potential(name, marginal_loglik(features, y, output_sd, sigma))`` and attaches the
    targets and the noise sd to :attr:`Network.targets`. ``values`` are the checked targets,
    ``(n, outputs)``; ``sigma`` a checked number, a variable or ``None`` (a ``HalfNormal(1)``
    variable ``f"{name}_sigma"``); ``temperature`` the D of Berrones' Eq. 23, which must be
    ``None``.
    """
    if temperature is not None or isinstance(sigma, str):
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
    if network.targets.attached:
        raise ValueError(f"network {network.name!r} already has targets attached")
    y_data, _ = observed_data(network, values, name, network.unit_dims[-1:], None)
    if sigma is None:
        sigma = pm.HalfNormal(f"{name}_sigma", 1.0)
    network.targets.y, network.targets.noise_sd = y_data, sigma
    return pm.Potential(name, marginal_loglik(network.features, y_data, network.output_sd, sigma))
