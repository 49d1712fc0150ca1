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
blow-up for too large ``ε``) is *divergent*; one that runs into a region where the log-density is
``-inf`` (a hard constraint) *hits a constraint*. Both are rejected (exact dynamics keep detailed
balance by reversing the momentum; uncorrected ones redraw it), so no non-finite value ever leaves
this module. Only divergences say that ``ε`` is too large: a step-size adaptation should leave
constraint hits out, or it shrinks ``ε`` until trajectories no longer reach the wall.

Nothing here imports PyMC. The pieces compose as in BlackJAX's ``ghmc``: a log-density callable
``q ↦ (log p(q), ∇ log p(q), aux)`` (``aux`` is carried with the point: tempering keeps the
log-likelihood there, so that swaps need no re-evaluation), a :class:`Metric` (the mass matrix as
three operations; a PyMC ``QuadPotential`` provides them), fixed :class:`DynamicsSettings`, and
:func:`transition`, one pure step from a :class:`PhaseState`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pymc_sfp._validation import check_int_at_least

__all__ = [
    "DynamicsSettings",
    "Metric",
    "PhaseState",
    "RowMassMatrix",
    "Trajectory",
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


class RowMassMatrix:
    """The mass matrices of a batch of points, one per row: diagonal or dense.

    Parameters
    ----------
    inverse_mass : ndarray, shape (n, d) or (n, d, d)
        ``M⁻¹`` of each row (its diagonal, or the whole symmetric positive-definite matrix);
        ``n = 1`` serves every row of a batch of any size.

    Notes
    -----
    With ``M⁻¹ = L Lᵀ`` (Cholesky), a row ``p = z L⁻¹`` of standard-normal ``z`` has covariance
    ``L⁻ᵀ L⁻¹ = M``; :meth:`whiten` is the inverse map ``p ↦ p L``. Keeping persistent momenta
    whitened lets them follow a mass matrix that changes while it is tuned, as ``N(0, M)`` draws
    follow ``M``.
    """

    def __init__(self, inverse_mass: np.ndarray):
        self.inverse_mass = np.asarray(inverse_mass, dtype=float)
        if self.inverse_mass.ndim not in (2, 3):
            raise ValueError(
                "inverse_mass must have shape (n, d) (diagonals) or (n, d, d) (matrices), got "
                f"shape {self.inverse_mass.shape}"
            )
        self.dense = self.inverse_mass.ndim == 3
        if self.dense:
            cholesky = np.linalg.cholesky(self.inverse_mass)
            self._whiten, self._colour = cholesky, np.linalg.inv(cholesky)
        else:
            self._colour = 1.0 / np.sqrt(self.inverse_mass)

    def rows(self, index: np.ndarray) -> RowMassMatrix:
        """The mass matrices of the rows ``index``: this batch itself where ``index`` is every
        row in order (a dense batch's copy would move three ``(n, d, d)`` arrays per call)."""
        index = np.asarray(index)
        n_rows = len(self.inverse_mass)
        if len(index) == n_rows and np.array_equal(index, np.arange(n_rows)):
            return self
        subset = object.__new__(RowMassMatrix)
        subset.inverse_mass, subset.dense = self.inverse_mass[index], self.dense
        subset._colour = self._colour[index]
        if self.dense:
            subset._whiten = self._whiten[index]
        return subset

    @staticmethod
    def _times(rows: np.ndarray, matrices: np.ndarray) -> np.ndarray:
        """Each row times its matrix (a row vector on the left).

        Products rounded, then added, as the compiled rounds compute them
        (:func:`pymc_sfp.core.compiled_tempering._row_times`): NumPy's ``matmul`` fuses a
        multiply and an add (FMA) on CPUs that have it, so in 2-D its result differed from the
        compiled one in the last bit on such a CPU, and the chains of the two drifted apart."""
        return np.add.reduce(rows[:, :, None] * matrices, axis=1)

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``M⁻¹ p`` row by row."""
        if self.dense:
            return self._times(momentum, self.inverse_mass)
        return momentum * self.inverse_mass

    def kinetic_energy(self, momentum: np.ndarray) -> np.ndarray:
        """``½ pᵀ M⁻¹ p`` row by row."""
        return 0.5 * np.add.reduce(momentum * self.velocity(momentum), axis=1)

    def colour(self, noise: np.ndarray) -> np.ndarray:
        """Rows of ``N(0, I)`` noise to rows of ``N(0, M)`` momenta."""
        if self.dense:
            return self._times(noise, self._colour)
        return noise * self._colour

    def whiten(self, momentum: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`colour`."""
        if self.dense:
            return self._times(momentum, self._whiten)
        return momentum / self._colour

    def metric(self, standard_normal: Callable[[], np.ndarray]) -> Metric:
        """The :class:`Metric` of the batch, drawing momenta from ``standard_normal()`` noise
        of the batch's shape."""
        return Metric(self.velocity, self.kinetic_energy, lambda: self.colour(standard_normal()))


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
    """``min(1, exp(-ΔH))`` (0 for a divergent trajectory or a constraint hit)."""
    accepted: bool
    energy_error: float
    energy: float
    diverging: bool
    n_grad: int
    """Gradient evaluations spent."""
    hit_constraint: bool = False
    """The trajectory ran into a ``-inf`` region of the log-density (a hard constraint), with a
    finite gradient there and no blow-up (``|ΔH| <= max_energy_error``) before it; it was
    rejected. Not a divergence."""
    energy_error_before_constraint: float = np.nan
    """For a constraint hit, ``ΔH`` at the last point before the wall (0 when the first step met
    it); NaN otherwise."""
    share_before_constraint: float = np.nan
    """For a constraint hit, the share of the ``n_steps`` steps completed before the wall; NaN
    otherwise. With the energy error before the wall, this is what a step-size adaptation can
    judge ``ε`` by (see :func:`transition`)."""


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


class Trajectory(NamedTuple):
    """What :func:`leapfrog` integrated."""

    end: PhaseState
    """The end of the trajectory. Where it stopped early, ``logp`` is ``-inf`` if it stopped at a
    point of zero density (log-density ``-inf`` with a finite gradient: a hard constraint) and
    NaN for any other non-finite value."""
    n_grad: int
    """Gradient evaluations spent (per point)."""
    last_finite: PhaseState
    """The last point before the trajectory stopped, with its full-step momentum (the end itself
    where it did not stop)."""
    n_finite_steps: np.ndarray | int
    """Steps completed before it stopped (``n_steps`` where it did not)."""


def leapfrog(
    state: PhaseState,
    step_size: float,
    n_steps: int,
    logp_grad: LogpGrad,
    velocity: Callable[[np.ndarray], np.ndarray],
) -> Trajectory:
    """``n_steps`` leapfrog steps (Neal 1993, Eq. 15) for ``H = -log p(q) + K(p)``.

    Consecutive half-steps of the momentum are merged, so the cost is ``n_steps`` gradient
    evaluations. ``state`` is one point (``position`` of shape ``(d,)``, a float ``logp``) or a
    batch of independent points integrated together (``position`` of shape ``(S, d)``, ``logp``
    of shape ``(S,)``; ``logp_grad`` and ``velocity`` then work row by row). A trajectory stops
    at the first non-finite log-density or gradient it meets; integration ends as soon as no
    trajectory is left finite.
    """
    q = state.position.copy()
    # The half kick, computed once (a batch's step sizes are a column: each product is an
    # array operation, paid per step otherwise).
    half_step = 0.5 * step_size
    p = state.momentum + half_step * state.grad
    logp, grad, aux = state.logp, state.grad, state.aux
    shape = np.shape(state.logp)
    failed = np.zeros(shape, dtype=bool)
    # Where a trajectory stopped: -inf at a hard constraint, NaN at any other non-finite value.
    stop_logp = np.zeros(shape)
    last_finite = state
    n_finite_steps = np.full(shape, n_steps)
    for step in range(n_steps):
        previous = (q, p, logp, grad, aux)
        q = q + step_size * velocity(p)
        logp, grad, aux = logp_grad(q)
        # One reduction tells that every value is finite (the common case); a non-finite sum
        # (or an overflowing one) takes the row-by-row test.
        if math.isfinite(_total(logp) + _total(grad)):
            newly_failed = None
        else:
            finite_grad = np.all(np.isfinite(grad), axis=-1)
            newly_failed = ~failed & ~(np.isfinite(logp) & finite_grad)
        if newly_failed is not None and newly_failed.any():
            at_constraint = (np.asarray(logp) == -np.inf) & finite_grad
            stop_logp = np.where(newly_failed, np.where(at_constraint, -np.inf, np.nan), stop_logp)
            last_finite = _take_rows(newly_failed, _full_step(previous, step_size), last_finite)
            n_finite_steps = np.where(newly_failed, step, n_finite_steps)
            failed = failed | newly_failed
            if failed.all():
                end = PhaseState(q, p, _stopped_logp(logp, failed, stop_logp), grad, aux)
                return Trajectory(end, step + 1, last_finite, _scalar(n_finite_steps))
        p = p + (half_step if step == n_steps - 1 else step_size) * grad
    if not failed.any():
        end = PhaseState(q, p, logp, grad, aux)
        return Trajectory(end, n_steps, end, _scalar(n_finite_steps))
    end = PhaseState(q, p, _stopped_logp(logp, failed, stop_logp), grad, aux)
    return Trajectory(end, n_steps, _take_rows(~failed, end, last_finite), _scalar(n_finite_steps))


def _total(values: np.ndarray | float) -> float:
    """``np.sum(values)``: the same reduction without ``np.sum``'s dispatch, which costs more
    than summing a ladder's few values, once per leapfrog step."""
    return np.add.reduce(values, axis=None)


def _full_step(point: tuple, step_size: float) -> PhaseState:
    """A point of the trajectory from its position, the half-step momentum that leaves it, and
    its log-density, gradient and ``aux``: the full-step momentum is half a kick back."""
    q, p_half, logp, grad, aux = point
    return PhaseState(q, p_half - 0.5 * step_size * grad, logp, grad, aux)


def _take_rows(rows: np.ndarray, new: PhaseState, old: PhaseState) -> PhaseState:
    """``new`` where ``rows``, ``old`` elsewhere (a batch's ``aux`` by its first axis)."""
    if rows.ndim == 0:
        return new if rows else old
    if rows.all():
        return new
    column = rows[:, None]
    aux = None
    if new.aux is not None and old.aux is not None:
        aux = np.where(rows.reshape(-1, *([1] * (np.ndim(new.aux) - 1))), new.aux, old.aux)
    return PhaseState(
        np.where(column, new.position, old.position),
        np.where(column, new.momentum, old.momentum),
        np.where(rows, new.logp, old.logp),
        np.where(column, new.grad, old.grad),
        aux,
    )


def _scalar(value: np.ndarray) -> np.ndarray | int:
    return int(value) if value.ndim == 0 else value


def _stopped_logp(
    logp: np.ndarray | float, failed: np.ndarray, stop_logp: np.ndarray
) -> np.ndarray | float:
    logp = np.where(failed, stop_logp, logp)
    return float(logp) if logp.ndim == 0 else logp


def transition(
    state: PhaseState,
    step_size: float | np.ndarray,
    settings: DynamicsSettings,
    logp_grad: LogpGrad,
    metric: Metric,
    uniform: Callable[[], float | np.ndarray],
    noise_scale: np.ndarray | float | None = None,
) -> tuple[PhaseState, TransitionInfo]:
    """One stochastic-dynamics transition: refresh, leapfrog, and (optionally) accept/reject.

    Works on one point or on a batch of independent points, as :func:`leapfrog` does: for a
    batch, ``step_size`` may be one per point, ``metric`` and ``uniform`` work row by row (``S``
    uniforms per call), ``aux`` is ``None`` or an array whose first axis is the batch, and the
    returned :class:`TransitionInfo` holds arrays.

    Parameters
    ----------
    state : PhaseState
        Current point; its momentum persists from the previous transition.
    step_size : float or ndarray of shape (S,)
        ``ε``.
    settings : DynamicsSettings
        Leapfrog steps, persistence ``α``, correction and divergence detection.
    logp_grad : callable
        ``q ↦ (log p(q), ∇ log p(q), aux)``.
    metric : Metric
    uniform : callable
        A draw from U(0, 1), or ``S`` of them (only called when ``settings.correct`` and some
        trajectory ended finite).
    noise_scale : array or float, optional
        Scale of the fresh momentum noise (default ``(1 − α²)^½``), see :func:`refresh_momentum`.

    Notes
    -----
    A step-size adaptation that targets the acceptance rate needs a statistic for trajectories
    that hit a hard constraint. Counting them as rejections (0) collapses ``ε`` for a chain near
    the wall: it must shorten its trajectories to avoid the wall, so it moves less, stays near
    it, and shortens them again (plain HMC on a truncated normal ended at ``ε ≈ 1e-4``).
    Judging them by the acceptance at their last point before the wall alone lets ``ε`` grow
    until every trajectory ends at the wall. Partial credit works: the acceptance before the
    wall times the share of the trajectory integrated before it (``TransitionInfo``'s
    ``share_before_constraint``), which is what :class:`pymc_sfp.StochasticDynamics` uses.
    """
    batched = np.ndim(state.logp) == 1
    if batched and np.ndim(step_size) == 1:
        step_size = np.asarray(step_size)[:, None]
    start = state._replace(
        momentum=refresh_momentum(
            state.momentum, settings.alpha, metric.draw_momentum(), noise_scale
        )
    )
    kinetic_start = metric.kinetic_energy(start.momentum)
    energy_start = -start.logp + kinetic_start
    # A blowing-up trajectory overflows; that is detected just below, not warned about.
    with np.errstate(over="ignore", invalid="ignore"):
        trajectory = leapfrog(start, step_size, settings.n_steps, logp_grad, metric.velocity)
        end = trajectory.end
        kinetic_end = metric.kinetic_energy(end.momentum)
        energy_end = -end.logp + kinetic_end
        energy_error = energy_end - energy_start
        blow_up = kinetic_end - kinetic_start if settings.noisy_logp else np.abs(energy_error)
        finite = np.isfinite(energy_error) & (blow_up <= settings.max_energy_error)
        accept_stat = np.where(finite, np.exp(-np.maximum(energy_error, 0.0)), 0.0)
    accepted = finite
    if settings.correct and finite.any():
        accepted = finite & (uniform() < accept_stat)
    hit_constraint, error_before = _constraint_hit(
        trajectory, metric, energy_start, kinetic_start, finite, settings
    )
    share_before = np.where(hit_constraint, trajectory.n_finite_steps / settings.n_steps, np.nan)
    # Exact dynamics treat a divergence or a constraint hit as a rejection, momentum reversed:
    # |ΔH| is the same for a trajectory and its reverse, so this keeps detailed balance.
    # Redrawing the momentum only after such trajectories would not (with persistent momentum
    # it biases the chain away from hard walls). Uncorrected dynamics restart with a fresh one.
    stay_momentum = -start.momentum
    if not settings.correct and not np.all(finite):
        stay_momentum = metric.draw_momentum()
    new = _take_rows(np.asarray(accepted), end, start._replace(momentum=stay_momentum))
    info = TransitionInfo(
        *_scalars(
            batched,
            accept_stat,
            accepted,
            energy_error,
            np.where(accepted, energy_end, energy_start),
            ~finite & ~hit_constraint,
        ),
        trajectory.n_grad,
        *_scalars(batched, hit_constraint, error_before, share_before),
    )
    return new, info


def _scalars(batched: bool, *values: np.ndarray) -> tuple:
    """Python scalars for one point (``float``/``bool``), the arrays for a batch."""
    if batched:
        return values
    return tuple(v.item() if isinstance(v, np.ndarray | np.generic) else v for v in values)


def _constraint_hit(
    trajectory: Trajectory,
    metric: Metric,
    energy_start: np.ndarray | float,
    kinetic_start: np.ndarray | float,
    finite: np.ndarray,
    settings: DynamicsSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """Which trajectories that did not end finite stopped at a hard constraint rather than
    diverging, and ``ΔH`` at their last point before the wall (0 where the wall came on the
    first step, where nothing was integrated; NaN for the others)."""
    at_wall = ~finite & (trajectory.end.logp == -np.inf)
    if not at_wall.any():
        return np.zeros_like(at_wall), np.full(np.shape(at_wall), np.nan)
    last = trajectory.last_finite
    with np.errstate(over="ignore", invalid="ignore"):
        kinetic = metric.kinetic_energy(last.momentum)
        error = np.where(trajectory.n_finite_steps == 0, 0.0, -last.logp + kinetic - energy_start)
        # Overflow to -inf after a blow-up also ends at logp = -inf: that is a divergence.
        blow_up = kinetic - kinetic_start if settings.noisy_logp else np.abs(error)
        hit = at_wall & np.isfinite(error) & (blow_up <= settings.max_energy_error)
    return hit, np.where(hit, error, np.nan)


def geometric_ladder(n_temperatures: int, min_beta: float) -> np.ndarray:
    """Inverse temperatures ``1 = β_0 > β_1 > … > β_{K-1} = min_beta``, evenly spaced in
    ``log β`` (for a near-Gaussian likelihood this equalises the swap rates of neighbours)."""
    # 2.5 would silently give three temperatures (np.arange) and a wrong spacing.
    n_temperatures = check_int_at_least(n_temperatures, 2, "n_temperatures")
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
        accept[k] = swap_acceptance(log_ratio)
        if uniform() < accept[k]:
            order[k], order[k + 1] = order[k + 1], order[k]
    return order, accept


def swap_acceptance(log_ratio: float) -> float:
    """``min(1, exp(log_ratio))``, NaN for a NaN ratio, as :func:`swap_neighbours` computes it
    (the compiled rounds recompute their tuning swap record with it, so that the schedule
    adapts to the same numbers as the NumPy rounds')."""
    return float(np.exp(min(log_ratio, 0.0)))
