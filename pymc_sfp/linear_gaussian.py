"""A linear layer with a Gaussian prior under Gaussian noise: integrated out, and drawn back.

For regression targets ``Y`` (n × D) on features ``H`` (n × h), a linear output layer
``Y = H̃ W + E`` with ``H̃ = [H, 1]`` (the bias as a constant feature), weights and biases
``W ~ N(0, s² I)`` independently and noise ``E ~ N(0, σ² I)`` is conjugate: each output column
is marginally ``y_d ~ N(0, s² H̃ H̃ᵀ + σ² I)``, and ``W`` given the data is Gaussian. A
network's last layer is such a layer (Neal 1993, Eq. 1–2 with the Gaussian prior of Eq. 7 on
the hidden→output weights), so a sampler need only move the hidden layers and the two scales;
the output layer's weights come back afterwards as exact draws from their conditional
(collapsed sampling: the marginal posterior first, the conditional afterwards).

Every formula goes through the ``k × k`` matrix ``B = H̃ᵀ H̃ + λ I`` with ``λ = σ² / s²`` and
``k = h + 1`` (Woodbury), never the ``n × n`` covariance; with ``μ = B⁻¹ H̃ᵀ Y``:

* ``log p(Y | H, s, σ) = -½ [ (‖Y − H̃ μ‖² + λ ‖μ‖²) / σ² + D log det C + n D log 2π ]``
  with ``log det C = 2 (n − k) log σ + 2 k log s + log det B``;
* ``W | Y, H, s, σ ~ N(μ, σ² B⁻¹)``, the same covariance for every output column.

The residual form of the quadratic term avoids the cancellation of ``‖Y‖² − …`` when the
features fit the data closely, as a network's do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytensor.tensor as pt
from pymc.pytensorf import floatX
from pytensor.graph.basic import Variable
from pytensor.tensor.variable import TensorVariable

__all__ = ["marginal_loglik", "posterior_draws", "posterior_mean"]


def _tensor(value: Any) -> TensorVariable:
    """A graph input as a tensor; numbers as floatX arrays, since PyTensor would store a float
    such as 2.0 in an integer dtype and take its logarithm in single precision."""
    if isinstance(value, Variable):
        return value
    return pt.as_tensor(floatX(np.asarray(value, dtype=float)))


def _with_bias(features: Any) -> Any:
    ones = pt.ones((features.shape[0], 1), dtype=features.dtype)
    return pt.concatenate([features, ones], axis=1)


def marginal_loglik(features: Any, Y: Any, weight_sd: Any, noise_sd: Any) -> TensorVariable:
    """``log p(Y | H, s, σ)`` with a linear layer's weights and biases integrated out.

    Parameters
    ----------
    features : TensorVariable or array_like, shape (n, h)
        ``H``, the inputs of the linear layer (a network's last hidden layer).
    Y : TensorVariable or array_like, shape (n, D)
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
    H = _with_bias(_tensor(features))
    Y = _tensor(Y)
    s = _tensor(weight_sd)
    sigma = _tensor(noise_sd)
    n, k = H.shape[0], H.shape[1]
    n_outputs = Y.shape[1]
    ridge = (sigma / s) ** 2
    cholesky = pt.linalg.cholesky(H.T @ H + ridge * pt.eye(k))
    # μ = B⁻¹ H̃ᵀ Y by two triangular solves with B's Cholesky factor.
    half = pt.linalg.solve_triangular(cholesky, H.T @ Y, lower=True)
    mean = pt.linalg.solve_triangular(cholesky.T, half, lower=False)
    misfit = pt.sum(pt.square(Y - H @ mean)) + ridge * pt.sum(pt.square(mean))
    log_det = (
        2 * (n - k) * pt.log(sigma) + 2 * k * pt.log(s) + 2 * pt.sum(pt.log(pt.diag(cholesky)))
    )
    return -0.5 * (misfit / sigma**2 + n_outputs * log_det + n * n_outputs * np.log(2 * np.pi))


def _normal_equations(
    features: np.ndarray, Y: np.ndarray, weight_sd: np.ndarray, noise_sd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``B`` (…, k, k) and ``H̃ᵀ Y`` (…, k, D), batched over draws."""
    H = np.concatenate([features, np.ones((*features.shape[:-1], 1))], axis=-1)
    ridge = (np.asarray(noise_sd, dtype=float) / np.asarray(weight_sd, dtype=float)) ** 2
    B = np.swapaxes(H, -1, -2) @ H + ridge[..., None, None] * np.eye(H.shape[-1])
    return B, np.swapaxes(H, -1, -2) @ Y


def posterior_mean(
    features: np.ndarray, Y: np.ndarray, weight_sd: np.ndarray, noise_sd: np.ndarray
) -> np.ndarray:
    """``E[W | Y, H, s, σ] = μ``, batched over any leading dims of draws.

    Parameters
    ----------
    features : ndarray, shape (..., n, h)
        ``H`` for each draw.
    Y : ndarray, shape (n, D)
        The targets (the same for every draw).
    weight_sd, noise_sd : ndarray, shape (...) or scalars
        ``s`` and ``σ`` for each draw.

    Returns
    -------
    ndarray, shape (..., h + 1, D)
        Weights in rows ``0 .. h - 1``, the biases in the last row.
    """
    return np.linalg.solve(*_normal_equations(features, Y, weight_sd, noise_sd))


def posterior_draws(
    features: np.ndarray,
    Y: np.ndarray,
    weight_sd: np.ndarray,
    noise_sd: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """One exact draw of ``W ~ N(μ, σ² B⁻¹)`` for each draw of ``(H, s, σ)``.

    Arguments and result as for :func:`posterior_mean`, plus ``rng``. ``σ L⁻ᵀ ε`` with
    ``B = L Lᵀ`` and ``ε`` standard normal has covariance ``σ² B⁻¹``.
    """
    B, projection = _normal_equations(features, Y, weight_sd, noise_sd)
    mean = np.linalg.solve(B, projection)
    cholesky = np.linalg.cholesky(B)
    noise = rng.standard_normal(mean.shape)
    sd = np.asarray(noise_sd, dtype=float)[..., None, None]
    return mean + sd * np.linalg.solve(np.swapaxes(cholesky, -1, -2), noise)
