"""A linear layer with a Gaussian prior under Gaussian noise: its conditional, in NumPy.

For regression targets ``Y`` (n × K) on features ``H`` (n × h), a linear output layer
``Y = H̃ W + E`` with ``H̃ = [H, 1]`` (the bias as a constant feature), weights and biases
``W ~ N(0, s² I)`` independently and noise ``E ~ N(0, σ² I)`` is conjugate: each of the ``K``
output columns is marginally ``y_k ~ N(0, s² H̃ H̃ᵀ + σ² I)``, and ``W`` given the data is
Gaussian. A network's last layer is such a layer (Neal 1993, Eq. 1–2 with the Gaussian prior of
Eq. 7 on the hidden→output weights), so a sampler need only move the hidden layers and the two
scales; the output layer's weights come back afterwards as exact draws from their conditional
(collapsed sampling: the marginal posterior first, the conditional afterwards).

Every formula goes through the ``k × k`` matrix ``B = H̃ᵀ H̃ + λ I`` with ``λ = σ² / s²`` and
``k = h + 1`` (Woodbury), never the ``n × n`` covariance; with ``μ = B⁻¹ H̃ᵀ Y``,
``W | Y, H, s, σ ~ N(μ, σ² B⁻¹)``, the same covariance for every output column.

This module holds that conditional, batched over draws (prediction and the draws of
:meth:`pymc_sfp.nn.Network.sample_output_layer`); the marginal likelihood, a PyTensor graph that
a sampler differentiates, is :func:`pymc_sfp.nn.integrated.marginal_loglik`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["normal_equations", "posterior_draws", "posterior_mean"]


def normal_equations(
    features: np.ndarray, Y: np.ndarray, weight_sd: np.ndarray, noise_sd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The normal equations ``B μ = H̃ᵀ Y`` of the layer's conditional mean, batched over draws.

    Parameters
    ----------
    features : ndarray, shape (..., n, h)
        ``H`` for each draw.
    Y : ndarray, shape (n, K)
        The targets (the same for every draw).
    weight_sd, noise_sd : ndarray, shape (...) or scalars
        ``s`` and ``σ`` for each draw.

    Returns
    -------
    B : ndarray, shape (..., h + 1, h + 1)
        ``H̃ᵀ H̃ + (σ / s)² I``.
    projection : ndarray, shape (..., h + 1, K)
        ``H̃ᵀ Y``.
    """
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
    Y : ndarray, shape (n, K)
        The targets (the same for every draw).
    weight_sd, noise_sd : ndarray, shape (...) or scalars
        ``s`` and ``σ`` for each draw.

    Returns
    -------
    ndarray, shape (..., h + 1, K)
        Weights in rows ``0 .. h - 1``, the biases in the last row.
    """
    return np.linalg.solve(*normal_equations(features, Y, weight_sd, noise_sd))


def posterior_draws(
    features: np.ndarray,
    Y: np.ndarray,
    weight_sd: np.ndarray,
    noise_sd: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """One exact draw of ``W ~ N(μ, σ² B⁻¹)`` for each draw of ``(H, s, σ)``.

    Arguments and result as for :func:`posterior_mean`, plus ``rng``. ``σ C⁻ᵀ ε`` with
    ``B = C Cᵀ`` (Cholesky) and ``ε`` standard normal has covariance ``σ² B⁻¹``.
    """
    B, projection = normal_equations(features, Y, weight_sd, noise_sd)
    mean = np.linalg.solve(B, projection)
    cholesky = np.linalg.cholesky(B)
    noise = rng.standard_normal(mean.shape)
    sd = np.asarray(noise_sd, dtype=float)[..., None, None]
    return mean + sd * np.linalg.solve(np.swapaxes(cholesky, -1, -2), noise)
