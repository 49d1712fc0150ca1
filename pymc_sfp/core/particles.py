"""Sequential Monte Carlo and extended Kalman filtering of network weights (de Freitas et al. 1998).

The state-space model of the paper (Eqs. 1–2)::

    w_{k+1} = w_k + d_k,        d_k ~ N(0, Q)      (random-walk weights)
    y_k     = g(w_k, x_k) + v_k, v_k ~ N(0, R)      (the network's output plus noise)

with ``g`` a multilayer perceptron and the prior ``p(w_0)`` from the model. Two filters of the
weights' filtering density ``p(w_k | y_1..k)``:

* **Particles** (:func:`particle_step`). The prior is the proposal (the paper's choice, its
  Eq. 6): each particle is moved by the dynamics (Eq. 1), weighted by its likelihood
  ``p(y_k | w_k)`` (the importance ratios, Eqs. 3–5), and the cloud is *resampled* (S children by
  inverting the cumulative weights) always (SIR) or only when the effective sample size falls
  below a threshold (SIPR: Liu and Chen's partial resampling). Resampling schemes:
  :func:`multinomial_resample` (the paper's), :func:`systematic_resample` and
  :func:`residual_resample` (lower variance, the same expected counts).
* **The extended Kalman filter** (:func:`ekf_predict`, :func:`ekf_update`): ``g`` linearised at
  the predicted mean by its Jacobian in ``w``; on a linear ``g`` it is the Kalman filter, exactly
  (:func:`kalman_filter`, the reference of the tests).

Both give the log evidence increments ``log p(y_k | y_1..k-1)``, which add up to the log marginal
likelihood of the data: for particles, the log of the weighted mean likelihood
``log Σ_i W_i p(y_k | w_k^i)`` (an unbiased estimate of ``p(y_k | y_1..k-1)`` before the log);
for the EKF, the Gaussian density of ``y_k`` under the linearised predictive ``N(g, H P Hᵀ + R)``.

When every particle has zero likelihood (all log-weights ``-inf``, e.g. an outlier far beyond the
noise), no normalisation exists: :func:`particle_step` raises :class:`DegenerateWeightsError`,
leaving its input state untouched (the functions here are pure), so the caller can skip the
observation, widen the noise or re-draw the cloud and go on.

Nothing here imports PyMC: particles are rows of a ``(S, d)`` array of the weights' coordinates
and the likelihood a callable over all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import numpy as np

from pymc_sfp.core.dynamics import DynamicsSettings, PhaseState, RowMassMatrix, transition

__all__ = [
    "RESAMPLING_SCHEMES",
    "DegenerateWeightsError",
    "KalmanState",
    "KalmanUpdate",
    "MoveInfo",
    "ParticleInfo",
    "ParticleState",
    "effective_sample_size",
    "ekf_predict",
    "ekf_update",
    "hamiltonian_move",
    "init_particles",
    "kalman_filter",
    "logsumexp",
    "multinomial_resample",
    "normalise_log_weights",
    "particle_step",
    "propagate",
    "resample",
    "residual_resample",
    "systematic_resample",
    "weighted_moments",
]

#: Resampling schemes accepted by :func:`resample` and :func:`particle_step`.
RESAMPLING_SCHEMES = ("multinomial", "systematic", "residual")

#: ``particles (S, d) ↦ log p(y_k | w^i)`` for every particle, shape ``(S,)``.
LogLikelihood = Callable[[np.ndarray], np.ndarray]
#: ``particles (S, d) ↦ (log π(w^i), ∇ log π(w^i))``, shapes ``(S,)`` and ``(S, d)``.
LogDensityGrad = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class DegenerateWeightsError(FloatingPointError):
    """Every particle has zero likelihood (log-weight ``-inf`` or NaN): nothing to normalise.

    The sequential filter's EKF raises it too, when its update of an observation is not finite
    (an outlier so far that the Gaussian update overflows): the same failure, a filter that
    cannot absorb the observation, with the same recovery.

    The filter's state before the failed step is untouched and kept in :attr:`state`, so the
    caller can recover: skip the observation, increase the noise or re-draw the particles.

    Attributes
    ----------
    state : ParticleState or KalmanState
        The state the step started from.
    """

    def __init__(self, message: str, state: ParticleState):
        super().__init__(message)
        self.state = state


class ParticleState(NamedTuple):
    """A weighted particle cloud.

    Attributes
    ----------
    particles : ndarray, shape (S, d)
        The particles' coordinates.
    log_weights : ndarray, shape (S,)
        Normalised log-weights (``logsumexp(log_weights) == 0``).
    """

    particles: np.ndarray
    log_weights: np.ndarray


class ParticleInfo(NamedTuple):
    """What one :func:`particle_step` did.

    Attributes
    ----------
    log_evidence : float
        ``log p(y_k | y_1..k-1) ≈ log Σ_i W_i^{k-1} p(y_k | w_k^i)``.
    ess : float
        Effective sample size of the weights after the update, before any resampling.
    resampled : bool
        Whether the cloud was resampled.
    ancestors : ndarray of int, shape (S,)
        Parent of each new particle (``arange(S)`` without resampling).
    """

    log_evidence: float
    ess: float
    resampled: bool
    ancestors: np.ndarray


def logsumexp(values: np.ndarray) -> float:
    """``log Σ exp(values)`` of a vector with at least one finite entry, without overflow.

    SciPy's general version costs about a millisecond a call, as much as a whole filtering step
    of a hundred particles.
    """
    top = np.max(values)
    return float(top + np.log(np.sum(np.exp(values - top))))


def normalise_log_weights(log_weights: np.ndarray) -> tuple[np.ndarray, float]:
    """Normalised log-weights and the log of the normaliser ``log Σ_i exp(log_weights_i)``.

    Raises
    ------
    FloatingPointError
        If no weight is positive and finite (every entry ``-inf`` or NaN, or any ``+inf``).
    """
    log_weights = np.asarray(log_weights, dtype=float)
    finite = np.isfinite(log_weights)
    if not finite.any() or np.isnan(log_weights).any() or np.isposinf(log_weights).any():
        raise FloatingPointError(
            f"cannot normalise the weights: {int(np.sum(finite))} of {log_weights.size} "
            "log-weights are finite and the others are -inf, +inf or NaN"
        )
    # Shifted by the largest first: at log-weights of 1e15 or more, ``w - logsumexp(w)`` loses
    # the differences to rounding, and the weights would no longer sum to 1.
    shift = float(np.max(log_weights))
    shifted = log_weights - shift
    log_sum = float(logsumexp(shifted))
    return shifted - log_sum, shift + log_sum


def effective_sample_size(log_weights: np.ndarray) -> float:
    """Kish's effective sample size ``1 / Σ_i W_i²`` of (possibly unnormalised) log-weights.

    Equals the number of particles for equal weights and 1 when one particle has all the weight;
    the variance of the importance ratios that SIPR watches is ``S / ESS - 1``.
    """
    normalised, _ = normalise_log_weights(log_weights)
    return float(np.exp(-logsumexp(2.0 * normalised)))


def weighted_moments(state: ParticleState) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and standard deviation of each coordinate of the cloud, shapes ``(d,)``."""
    weights = np.exp(state.log_weights)
    mean = weights @ state.particles
    variance = weights @ np.square(state.particles - mean)
    return mean, np.sqrt(np.maximum(variance, 0.0))


def _weights(log_weights: np.ndarray) -> np.ndarray:
    weights = np.exp(normalise_log_weights(log_weights)[0])
    return weights / weights.sum()


def multinomial_resample(
    log_weights: np.ndarray, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """Indices of ``size`` children drawn independently with probabilities ``W_i``.

    The paper's scheme: each child inverts the cumulative weights at an independent uniform.
    ``size`` defaults to the number of particles.
    """
    weights = _weights(log_weights)
    size = len(weights) if size is None else size
    cumulative = np.cumsum(weights)
    return np.minimum(np.searchsorted(cumulative, rng.random(size), side="right"), len(weights) - 1)


def systematic_resample(
    log_weights: np.ndarray, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """Indices of ``size`` children from one uniform: the points ``(u + j) / size``, ``j < size``.

    Each particle gets ``⌊size W_i⌋`` or ``⌈size W_i⌉`` children, ``size W_i`` on average.
    """
    weights = _weights(log_weights)
    size = len(weights) if size is None else size
    points = (rng.random() + np.arange(size)) / size
    indices = np.searchsorted(np.cumsum(weights), points, side="right")
    return np.minimum(indices, len(weights) - 1)


def residual_resample(
    log_weights: np.ndarray, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """``⌊size W_i⌋`` children of each particle, the remainder multinomially on the residuals."""
    weights = _weights(log_weights)
    size = len(weights) if size is None else size
    expected = size * weights
    counts = np.floor(expected).astype(np.int64)
    remainder = size - int(counts.sum())
    if remainder > 0:
        residual = expected - counts
        extra = rng.choice(len(weights), size=remainder, p=residual / residual.sum())
        counts += np.bincount(extra, minlength=len(weights))
    return np.repeat(np.arange(len(weights)), counts)


_RESAMPLERS = {
    "multinomial": multinomial_resample,
    "systematic": systematic_resample,
    "residual": residual_resample,
}


def resample(
    log_weights: np.ndarray,
    rng: np.random.Generator,
    scheme: Literal["multinomial", "systematic", "residual"] = "systematic",
    size: int | None = None,
) -> np.ndarray:
    """Indices of the children of a resampling by ``scheme`` (one of :data:`RESAMPLING_SCHEMES`).

    Every scheme gives particle ``i`` ``size · W_i`` children in expectation.

    Raises
    ------
    ValueError
        For an unknown ``scheme``.
    FloatingPointError
        If no weight is positive (see :func:`normalise_log_weights`).
    """
    if scheme not in _RESAMPLERS:
        raise ValueError(f"resampling scheme must be one of {RESAMPLING_SCHEMES}, got {scheme!r}")
    return _RESAMPLERS[scheme](log_weights, rng, size)


def init_particles(particles: np.ndarray) -> ParticleState:
    """An equally weighted cloud of ``(S, d)`` particles (draws of the prior, Eq. 6)."""
    particles = np.asarray(particles, dtype=float)
    if particles.ndim != 2 or len(particles) == 0:
        raise ValueError(f"particles must have shape (S, d) with S > 0, got {particles.shape}")
    return ParticleState(particles, np.full(len(particles), -np.log(len(particles))))


def propagate(
    particles: np.ndarray, process_sd: np.ndarray | float, rng: np.random.Generator
) -> np.ndarray:
    """The random-walk dynamics of Eq. 1, ``w_k = w_k-1 + d_k``, ``d_k ~ N(0, diag(process_sd²))``.

    Returns a new array (the input is not modified); no draw is made when ``process_sd`` is 0.
    """
    sd = np.asarray(process_sd, dtype=float)
    if not np.any(sd > 0):
        return particles
    return particles + sd * rng.standard_normal(particles.shape)


def particle_step(
    state: ParticleState,
    log_likelihood: LogLikelihood,
    rng: np.random.Generator,
    *,
    process_sd: np.ndarray | float = 0.0,
    ess_threshold: float = 1.0,
    scheme: Literal["multinomial", "systematic", "residual"] = "systematic",
) -> tuple[ParticleState, ParticleInfo]:
    """One step of SIR / SIPR: predict (Eq. 1), weight by the likelihood (Eqs. 3–5), resample.

    Parameters
    ----------
    state : ParticleState
        The filtering cloud at step ``k - 1``.
    log_likelihood : callable
        ``(S, d) particles ↦ (S,)`` log-likelihoods ``log p(y_k | w_k^i)`` (one call for the
        whole cloud).
    rng : numpy.random.Generator
    process_sd : float or ndarray, shape (d,)
        Standard deviation of the random-walk step ``d_k`` of each coordinate (``Q`` diagonal,
        ``Q = diag(process_sd²)``); ``0`` keeps the weights static.
    ess_threshold : float, default 1.0
        Resample when the effective sample size after the update is below
        ``ess_threshold · S``. ``1.0`` resamples at every step unless the weights stay exactly
        equal (SIR, up to that case); ``0.5`` is the usual SIPR; ``0`` never resamples
        (sequential importance sampling).
    scheme : {"multinomial", "systematic", "residual"}

    Returns
    -------
    state : ParticleState
        The cloud at step ``k``; after resampling its weights are equal.
    info : ParticleInfo

    Raises
    ------
    DegenerateWeightsError
        If every particle's log-likelihood is ``-inf`` or NaN; ``state`` is left as it was.
    """
    particles = propagate(state.particles, process_sd, rng)
    log_likelihood_values = np.asarray(log_likelihood(particles), dtype=float)
    # NaN likelihoods (a network overflow) are zero weight, not garbage in the normaliser.
    log_likelihood_values = np.where(
        np.isnan(log_likelihood_values), -np.inf, log_likelihood_values
    )
    # Only differences between particles matter to the weights: shifted by their largest, huge
    # log-likelihoods (a far outlier) do not round the previous weights away when added.
    finite = np.isfinite(log_likelihood_values)
    shift = float(np.max(log_likelihood_values[finite])) if finite.any() else 0.0
    unnormalised = state.log_weights + (log_likelihood_values - shift)
    try:
        log_weights, log_increment = normalise_log_weights(unnormalised)
    except FloatingPointError:
        raise DegenerateWeightsError(
            "every particle has zero likelihood for this observation (all log-weights are -inf): "
            "skip the observation, increase the observation noise or the number of particles",
            state,
        ) from None
    log_evidence = log_increment + shift
    ess = float(np.exp(-logsumexp(2.0 * log_weights)))
    n = len(log_weights)
    ancestors = np.arange(n)
    # Equal weights carry no information to resample on (ESS == S up to rounding).
    resampled = ess < ess_threshold * n * (1.0 - 1e-12)
    if resampled:
        ancestors = resample(log_weights, rng, scheme)
        particles = particles[ancestors]
        log_weights = np.full(n, -np.log(n))
    return ParticleState(particles, log_weights), ParticleInfo(
        log_evidence, ess, bool(resampled), ancestors
    )


class MoveInfo(NamedTuple):
    """What one :func:`hamiltonian_move` did."""

    acceptance: float
    """Mean acceptance probability ``min(1, exp(-ΔH))`` over particles and transitions."""
    n_divergent: int
    """Trajectories that met a non-finite value or an energy error above the limit (rejected)."""


def hamiltonian_move(
    particles: np.ndarray,
    log_density_grad: LogDensityGrad,
    rng: np.random.Generator,
    *,
    step_size: float,
    n_leapfrog: int,
    n_transitions: int,
    alpha: float,
    inverse_mass: np.ndarray,
    max_energy_error: float = 1000.0,
) -> tuple[np.ndarray, MoveInfo]:
    """Rejuvenate a cloud by Neal's (1993) stochastic dynamics, every particle at once.

    Each particle runs its own chain of ``n_transitions`` transitions that leave ``π``
    invariant: partial momentum refreshment ``p ← α p + (1 − α²)^½ n`` (Eq. 16), ``n_leapfrog``
    leapfrog steps (Eq. 15) and a Metropolis test on the energy error, with the momentum negated
    on rejection (the exact, generalised-HMC form). The momentum starts fresh at every call, so
    the move is a valid resample-move kernel (Gilks and Berzuini 2001) whatever ``step_size``
    and ``inverse_mass`` were chosen from the cloud before it. All particles go through
    ``log_density_grad`` together: one call per leapfrog step.

    Parameters
    ----------
    particles : ndarray, shape (S, d)
    log_density_grad : callable
        ``(S, d) ↦ (log π, ∇ log π)`` for the whole cloud.
    rng : numpy.random.Generator
    step_size : float
        ``ε``.
    n_leapfrog, n_transitions : int
    alpha : float
        Momentum persistence in ``[0, 1)``; 0 is plain HMC.
    inverse_mass : ndarray, shape (d,) or (d, d)
        ``M⁻¹``, or its diagonal: e.g. the cloud's covariance or variances, so that ``ε`` is
        scale-free (a dense one also undoes correlations, which otherwise lower the leapfrog's
        stability limit on ``ε``).
    max_energy_error : float, default 1000
        ``|ΔH|`` above which a trajectory counts as divergent.

    Returns
    -------
    particles : ndarray, shape (S, d)
    info : MoveInfo
    """
    mass = RowMassMatrix(np.asarray(inverse_mass, dtype=float)[None])

    def trajectory_density(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
        logp, grad = log_density_grad(q)
        return logp, grad, None

    logp, grad = log_density_grad(particles)
    metric = mass.metric(lambda: rng.standard_normal(particles.shape))
    state = PhaseState(particles, metric.draw_momentum(), np.asarray(logp, dtype=float), grad)
    settings = DynamicsSettings(n_leapfrog, alpha, max_energy_error=max_energy_error)
    acceptance = 0.0
    n_divergent = 0
    for _ in range(n_transitions):
        state, info = transition(
            state,
            step_size,
            settings,
            trajectory_density,
            metric,
            lambda: rng.random(len(particles)),
        )
        acceptance += float(np.mean(info.accept_stat))
        n_divergent += int(np.count_nonzero(info.diverging | info.hit_constraint))
    return state.position, MoveInfo(acceptance / n_transitions, n_divergent)


class KalmanState(NamedTuple):
    """A Gaussian belief ``N(mean, cov)`` of the weights."""

    mean: np.ndarray
    cov: np.ndarray


class KalmanUpdate(NamedTuple):
    """The predictive of one observation and its log evidence under the (extended) Kalman filter.

    Attributes
    ----------
    log_evidence : float
        ``log N(y_k; ŷ_k, S_k)``.
    predictive_mean : ndarray, shape (K,)
        ``ŷ_k``, the (linearised) network output at the predicted mean.
    predictive_cov : ndarray, shape (K, K)
        ``S_k = H_k P_k|k-1 H_kᵀ + R``.
    """

    log_evidence: float
    predictive_mean: np.ndarray
    predictive_cov: np.ndarray


def ekf_predict(state: KalmanState, process_cov: np.ndarray | float) -> KalmanState:
    """Time update of Eq. 1: ``m_k|k-1 = m_k-1``, ``P_k|k-1 = P_k-1 + Q``.

    ``process_cov`` is ``Q``: a matrix, a vector (its diagonal) or a scalar.
    """
    return KalmanState(state.mean, state.cov + _as_covariance(process_cov, len(state.mean)))


def _as_covariance(value: np.ndarray | float, size: int) -> np.ndarray:
    # A scalar is a multiple of the identity, a vector the diagonal.
    matrix = np.asarray(value, dtype=float)
    if matrix.ndim == 0:
        return matrix * np.eye(size)
    return np.diag(matrix) if matrix.ndim == 1 else matrix


def ekf_update(
    state: KalmanState,
    y: np.ndarray,
    output: np.ndarray,
    jacobian: np.ndarray,
    noise_cov: np.ndarray | float,
) -> tuple[KalmanState, KalmanUpdate]:
    """Measurement update of Eq. 2 linearised at the predicted mean (the extended Kalman filter).

    With ``g(w) ≈ g(m) + H (w - m)``: ``S = H P Hᵀ + R``, gain ``K = P Hᵀ S⁻¹``,
    ``m ← m + K (y - g(m))`` and the covariance in Joseph's form
    ``P ← (I - K H) P (I - K H)ᵀ + K R Kᵀ``, which stays symmetric positive semi-definite in
    floating point where the short form ``(I - K H) P`` does not.

    Parameters
    ----------
    state : KalmanState
        The predicted belief ``N(m_k|k-1, P_k|k-1)``, ``d`` coordinates.
    y : ndarray, shape (K,)
        The observation.
    output : ndarray, shape (K,)
        ``g(m, x_k)``.
    jacobian : ndarray, shape (K, d)
        ``H = ∂g/∂w`` at ``m``.
    noise_cov : float or ndarray, shape (K,) or (K, K)
        ``R``.

    Returns
    -------
    state : KalmanState
        The filtered belief.
    update : KalmanUpdate
        The predictive of ``y`` and its log density.
    """
    y = np.atleast_1d(np.asarray(y, dtype=float))
    output = np.atleast_1d(np.asarray(output, dtype=float))
    H = np.atleast_2d(np.asarray(jacobian, dtype=float))
    R = _as_covariance(noise_cov, len(y))
    P = state.cov
    PHt = P @ H.T
    S = H @ PHt + R
    S = 0.5 * (S + S.T)
    cholesky = np.linalg.cholesky(S)
    gain = np.linalg.solve(S, PHt.T).T
    residual = y - output
    mean = state.mean + gain @ residual
    A = np.eye(len(mean)) - gain @ H
    cov = A @ P @ A.T + gain @ R @ gain.T
    whitened = np.linalg.solve(cholesky, residual)
    log_evidence = -0.5 * (
        len(y) * np.log(2 * np.pi) + 2 * np.sum(np.log(np.diag(cholesky))) + whitened @ whitened
    )
    return KalmanState(mean, 0.5 * (cov + cov.T)), KalmanUpdate(float(log_evidence), output, S)


def kalman_filter(
    y: np.ndarray,
    design: np.ndarray,
    initial: KalmanState,
    process_cov: np.ndarray | float,
    noise_cov: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact filter of random-walk weights observed linearly: ``y_k = H_k w_k + v_k``.

    The reference for the particle filters and the EKF on a linear-Gaussian model: the filtering
    densities are Gaussian and the Kalman filter computes them exactly.

    Parameters
    ----------
    y : ndarray, shape (T, K)
        Observations (a ``(T,)`` vector is ``K = 1``).
    design : ndarray, shape (T, K, d)
        ``H_k`` (``(T, d)`` for ``K = 1``).
    initial : KalmanState
        The prior of ``w_0``; the first observation is made after one step of the dynamics, as
        in :func:`particle_step`.
    process_cov, noise_cov
        ``Q`` and ``R`` as in :func:`ekf_predict` and :func:`ekf_update`.

    Returns
    -------
    means : ndarray, shape (T, d)
    covs : ndarray, shape (T, d, d)
    log_evidence : ndarray, shape (T,)
        ``log p(y_k | y_1..k-1)``.
    """
    y = np.asarray(y, dtype=float)
    y = y[:, None] if y.ndim == 1 else y
    design = np.asarray(design, dtype=float)
    design = design[:, None, :] if design.ndim == 2 else design
    state = initial
    means, covs, log_evidence = [], [], []
    for y_k, H_k in zip(y, design, strict=True):
        state = ekf_predict(state, process_cov)
        state, update = ekf_update(state, y_k, H_k @ state.mean, H_k, noise_cov)
        means.append(state.mean)
        covs.append(state.cov)
        log_evidence.append(update.log_evidence)
    return np.array(means), np.array(covs), np.array(log_evidence)
