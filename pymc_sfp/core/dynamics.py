"""Stochastic dynamics with persistent momentum (Neal 1993), as plain functions over arrays.

The energy is ``E(q) = -log p(q)`` and the Hamiltonian ``H(q, p) = E(q) + ½ pᵀ M⁻¹ p``. One
*transition* is

1. partial momentum refreshment (Eq. 16): ``p ← α p + (1 − α²)^½ n``, ``n ~ N(0, M)``;
2. ``n_steps`` leapfrog steps of size ``ε`` (Eq. 15);
3. with ``correct=True``, a Metropolis test on ``ΔH`` — Horowitz's generalised hybrid Monte Carlo:
   the end point is accepted with probability ``min(1, exp(-ΔH))``, and on rejection the chain
   stays at the start with its momentum *negated*. This leaves the posterior exactly invariant
   for any ``ε``. With ``correct=False`` the end point is always taken (Neal's uncorrected method,
   biased by ``O(ε²)``).

``α = 0`` is plain hybrid (Hamiltonian) Monte Carlo; ``α`` close to 1 with one leapfrog step per
transition is "loosely equivalent" to long HMC trajectories without their random-walk restarts.

A trajectory whose energy error is not finite or exceeds ``max_energy_error`` (Neal's Fig. 4b
blow-up for too large ``ε``) is *divergent*: the chain is restored to the start of the transition
with a freshly drawn momentum, so no non-finite value ever leaves this module.

Nothing here imports PyMC. The pieces compose as in BlackJAX's ``ghmc``: a log-density callable
``q ↦ (log p(q), ∇ log p(q), aux)`` (``aux`` is carried with the point: tempering keeps the
log-likelihood there, so that swaps need no re-evaluation), a :class:`Metric` (the mass matrix as
three operations; a PyMC ``QuadPotential`` provides them), fixed :class:`DynamicsSettings`, and
:func:`transition`, one pure step from a :class:`PhaseState`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "DynamicsSettings",
    "Metric",
    "PhaseState",
    "TransitionInfo",
    "geometric_ladder",
    "leapfrog",
    "refresh_momentum",
    "swap_neighbours",
    "transition",
]

#: ``q ↦ (log p(q), ∇ log p(q), aux)``; ``aux`` is anything to carry with the point.
LogpGrad = Callable[[np.ndarray], tuple[float, np.ndarray, Any]]


class PhaseState(NamedTuple):
    """A point in phase space with its cached log-density, gradient and ``aux`` value."""

    position: np.ndarray
    momentum: np.ndarray
    logp: float
    grad: np.ndarray
    aux: Any = None


class Metric(NamedTuple):
    """The mass matrix ``M`` of the kinetic energy, as the operations the dynamics need."""

    velocity: Callable[[np.ndarray], np.ndarray]
    """``p ↦ M⁻¹ p``."""
    kinetic_energy: Callable[[np.ndarray], float]
    """``p ↦ ½ pᵀ M⁻¹ p``."""
    draw_momentum: Callable[[], np.ndarray]
    """A draw from ``N(0, M)``."""


class DynamicsSettings(NamedTuple):
    """What stays fixed from transition to transition.

    Attributes
    ----------
    n_steps : int
        Leapfrog steps per transition.
    alpha : float
        Momentum persistence ``α ∈ [0, 1)`` (Eq. 16).
    correct : bool
        Metropolis test with momentum negation on rejection (generalised HMC), or none.
    max_energy_error : float
        ``|ΔH|`` above which a trajectory counts as divergent.
    noisy_logp : bool
        The log-density is a random estimate (minibatches), so ``ΔH`` mixes the discretisation
        error with the estimate's noise: divergence is then judged by the growth of the kinetic
        energy alone, and ``correct`` must be ``False``.
    """

    n_steps: int
    alpha: float
    correct: bool = True
    max_energy_error: float = 1000.0
    noisy_logp: bool = False


class TransitionInfo(NamedTuple):
    """What one transition did."""

    accept_stat: float
    """``min(1, exp(-ΔH))`` (0 for a divergent trajectory)."""
    accepted: bool
    energy_error: float
    energy: float
    diverging: bool
    n_grad: int
    """Gradient evaluations spent."""


def refresh_momentum(
    momentum: np.ndarray,
    alpha: float,
    noise: np.ndarray,
    noise_scale: np.ndarray | float | None = None,
) -> np.ndarray:
    """Partial momentum refreshment, Eq. 16: ``α p + (1 − α²)^½ n`` with ``n ~ N(0, M)``.

    ``noise_scale`` replaces ``(1 − α²)^½`` (per coordinate): with noisy minibatch gradients, the
    gradient noise already heats the momentum, and less fresh noise is injected (SGHMC).
    """
    scale = np.sqrt(1.0 - alpha * alpha) if noise_scale is None else noise_scale
    return alpha * momentum + scale * noise


def leapfrog(
    state: PhaseState,
    step_size: float,
    n_steps: int,
    logp_grad: LogpGrad,
    velocity: Callable[[np.ndarray], np.ndarray],
) -> tuple[PhaseState, int]:
    """``n_steps`` leapfrog steps (Neal 1993, Eq. 15) for ``H = -log p(q) + K(p)``.

    Consecutive half-steps of the momentum are merged, so the cost is ``n_steps`` gradient
    evaluations. ``state`` is one point (``position`` of shape ``(d,)``, a float ``logp``) or a
    batch of independent points integrated together (``position`` of shape ``(S, d)``, ``logp``
    of shape ``(S,)``; ``logp_grad`` and ``velocity`` then work row by row). A trajectory that
    meets a non-finite log-density or gradient ends with ``logp = -inf``; integration stops as
    soon as no trajectory is left finite.

    Returns
    -------
    state : PhaseState
        The end of the trajectory (``logp = -inf`` where it met a non-finite value).
    n_grad : int
        Gradient evaluations spent (per point).
    """
    q = state.position.copy()
    p = state.momentum + 0.5 * step_size * state.grad
    logp, grad, aux = state.logp, state.grad, state.aux
    failed = np.zeros(np.shape(state.logp), dtype=bool)
    for step in range(n_steps):
        q = q + step_size * velocity(p)
        logp, grad, aux = logp_grad(q)
        failed = failed | ~(np.isfinite(logp) & np.all(np.isfinite(grad), axis=-1))
        if failed.all():
            return PhaseState(q, p, _failed_to_minus_inf(logp, failed), grad, aux), step + 1
        last = step == n_steps - 1
        p = p + (0.5 if last else 1.0) * step_size * grad
    return PhaseState(q, p, _failed_to_minus_inf(logp, failed), grad, aux), n_steps


def _failed_to_minus_inf(logp: np.ndarray | float, failed: np.ndarray) -> np.ndarray | float:
    logp = np.where(failed, -np.inf, logp)
    return float(logp) if logp.ndim == 0 else logp


def transition(
    state: PhaseState,
    step_size: float,
    settings: DynamicsSettings,
    logp_grad: LogpGrad,
    metric: Metric,
    uniform: Callable[[], float],
    noise_scale: np.ndarray | float | None = None,
) -> tuple[PhaseState, TransitionInfo]:
    """One stochastic-dynamics transition: refresh, leapfrog, and (optionally) accept/reject.

    Parameters
    ----------
    state : PhaseState
        Current point; its momentum persists from the previous transition.
    step_size : float
        ``ε``.
    settings : DynamicsSettings
        Leapfrog steps, persistence ``α``, correction and divergence detection.
    logp_grad : callable
        ``q ↦ (log p(q), ∇ log p(q), aux)``.
    metric : Metric
    uniform : callable
        A draw from U(0, 1) (only called when ``settings.correct``).
    noise_scale : array or float, optional
        Scale of the fresh momentum noise (default ``(1 − α²)^½``), see :func:`refresh_momentum`.
    """
    start = state._replace(
        momentum=refresh_momentum(
            state.momentum, settings.alpha, metric.draw_momentum(), noise_scale
        )
    )
    kinetic_start = metric.kinetic_energy(start.momentum)
    energy_start = -start.logp + kinetic_start
    # A blowing-up trajectory overflows; that is detected just below, not warned about.
    with np.errstate(over="ignore", invalid="ignore"):
        end, n_grad = leapfrog(start, step_size, settings.n_steps, logp_grad, metric.velocity)
        kinetic_end = metric.kinetic_energy(end.momentum)
        energy_end = -end.logp + kinetic_end
        energy_error = energy_end - energy_start
    blow_up = kinetic_end - kinetic_start if settings.noisy_logp else abs(energy_error)
    if not np.isfinite(energy_error) or blow_up > settings.max_energy_error:
        # Exact dynamics treat a divergence as a rejection, momentum reversed: |ΔH| is the same
        # for a trajectory and its reverse, so this keeps detailed balance. Redrawing the
        # momentum only after divergent trajectories would not (with persistent momentum it
        # biases the chain away from hard walls). Uncorrected dynamics restart with a fresh one.
        momentum = -start.momentum if settings.correct else metric.draw_momentum()
        info = TransitionInfo(0.0, False, float(energy_error), energy_start, True, n_grad)
        return start._replace(momentum=momentum), info
    accept_stat = float(np.exp(-max(energy_error, 0.0)))
    if not settings.correct or uniform() < accept_stat:
        return end, TransitionInfo(
            accept_stat, True, float(energy_error), energy_end, False, n_grad
        )
    rejected = start._replace(momentum=-start.momentum)
    return rejected, TransitionInfo(
        accept_stat, False, float(energy_error), energy_start, False, n_grad
    )


def geometric_ladder(n_temperatures: int, min_beta: float) -> np.ndarray:
    """Inverse temperatures ``1 = β_0 > β_1 > … > β_{K-1} = min_beta``, evenly spaced in
    ``log β`` (for a near-Gaussian likelihood this equalises the swap rates of neighbours)."""
    # 2.5 would silently give three temperatures (np.arange) and a wrong spacing.
    integer = isinstance(n_temperatures, int | np.integer) and not isinstance(n_temperatures, bool)
    if not integer or n_temperatures < 2:
        raise ValueError(f"n_temperatures must be an integer >= 2, got {n_temperatures!r}")
    if not 0.0 < min_beta < 1.0:
        raise ValueError(f"min_beta must be in (0, 1), got {min_beta!r}")
    return min_beta ** (np.arange(n_temperatures) / (n_temperatures - 1))


def swap_neighbours(
    log_likelihoods: np.ndarray,
    betas: np.ndarray,
    first: int,
    uniform: Callable[[], float],
) -> tuple[np.ndarray, np.ndarray]:
    """Replica-exchange swaps between the neighbours ``(k, k+1)`` for ``k = first, first+2, …``.

    Replica ``k`` targets ``prior · likelihood^β_k``. Exchanging the states of ``k`` and ``k+1``
    is accepted with probability ``min(1, exp((β_k − β_{k+1}) (ℓ_{k+1} − ℓ_k)))``, with ``ℓ`` the
    log-likelihoods of their current states; alternating ``first`` between 0 and 1 from draw to
    draw gives the deterministic even/odd scheme.

    Returns
    -------
    order : ndarray of int
        Replica ``k`` takes the state that replica ``order[k]`` held.
    accept : ndarray of float, shape (K - 1,)
        Acceptance probability of each proposed pair, NaN for the pairs not proposed.
    """
    order = np.arange(len(betas))
    accept = np.full(len(betas) - 1, np.nan)
    for k in range(first, len(betas) - 1, 2):
        log_ratio = (betas[k] - betas[k + 1]) * (log_likelihoods[k + 1] - log_likelihoods[k])
        accept[k] = float(np.exp(min(log_ratio, 0.0)))
        if uniform() < accept[k]:
            order[k], order[k + 1] = order[k + 1], order[k]
    return order, accept
