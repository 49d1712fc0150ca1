"""``StochasticDynamics``: Neal's (1993) persistent-momentum dynamics as a PyMC step method.

The numerical core is :mod:`pymc_sfp.core.dynamics`; this module adds what PyMC needs: compiled
log-density and gradient, PyMC's mass-matrix potentials, dual-averaging step-size tuning,
declared sample stats, and per-chain state (the momentum persists from draw to draw).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars, StatsType
from pymc.exceptions import SamplingError
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.hmc.quadpotential import (
    PotentialState,
    QuadPotential,
    QuadPotentialDiag,
    QuadPotentialDiagAdapt,
    QuadPotentialFull,
    QuadPotentialFullInv,
    quad_potential,
)
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation, StepSizeState
from pymc.vartypes import continuous_types

from pymc_sfp._validation import (
    check_bool,
    check_int_at_least,
    check_positive_finite,
    check_real,
)
from pymc_sfp.compile import (
    StepGraph,
    compile_logp_dlogp,
    float64_internals,
    garbage_collector_paused,
    log_density_eps,
    random_generators,
    reseed,
    step_graph,
)
from pymc_sfp.core.compiled_tempering import (
    LadderKernelResult,
    LadderMass,
    LadderSettings,
    LastRound,
)
from pymc_sfp.core.dynamics import (
    DynamicsSettings,
    LogpGrad,
    Metric,
    PhaseState,
    RowMassMatrix,
    TransitionInfo,
    transition,
)
from pymc_sfp.step_methods._common import (
    FiniteValueCheck,
    ProgressField,
    check_not_empty,
    continuous_value_vars,
    progressbar_config,
    progressbar_updates,
)

__all__ = ["LadderDynamics", "StochasticDynamics"]

#: PyMC's mass-matrix potentials that :class:`LadderDynamics` reads as diagonals or matrices
#: (``QuadPotentialFullAdapt`` is a ``QuadPotentialFull``).
_DIAGONAL_POTENTIALS = (QuadPotentialDiag, QuadPotentialDiagAdapt)
_DENSE_POTENTIALS = (QuadPotentialFull, QuadPotentialFullInv)


def _inverse_mass(potential: QuadPotential, size: int) -> np.ndarray | None:
    """``M⁻¹`` of one of PyMC's diagonal potentials (its diagonal) or dense ones (the matrix),
    read as the potential's velocity of ones or of the identity; ``None`` for any other."""
    if isinstance(potential, _DIAGONAL_POTENTIALS):
        return np.array(potential.velocity(np.ones(size)), dtype=float)
    if isinstance(potential, _DENSE_POTENTIALS):
        return np.array(potential.velocity(np.eye(size)), dtype=float)
    return None


def _momentum_following(
    momentum: np.ndarray, before: np.ndarray | None, after: np.ndarray | None
) -> np.ndarray:
    """A persistent momentum, ``N(0, M)`` under the mass matrix with inverse ``before``, carried
    to the one with inverse ``after``: whitened under the old, coloured under the new, as the
    ladder keeps its momenta (:class:`LadderDynamics`). Unchanged where the matrix did not change
    or cannot be read."""
    if before is None or after is None or np.array_equal(before, after):
        return momentum
    old, new = RowMassMatrix(before[None]), RowMassMatrix(after[None])
    return new.colour(old.whiten(momentum[None]))[0]


_PROGRESS_FIELDS: tuple[ProgressField, ...] = (
    ("divergences", "Divergences", "d", 0),
    ("step_size", "Step size", ".3g", 0.0),
    ("accept", "Accept", ".3f", 1.0),
)


def _check_scaling(scaling: Any, size: int) -> np.ndarray:
    """``scaling`` as a finite float array: a diagonal of ``size`` or a ``size × size`` matrix
    (whether it is positive definite, PyMC's ``quad_potential`` checks)."""
    try:
        array = np.asarray(scaling, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"scaling must be a numeric array, got {scaling!r}") from None
    if array.shape not in ((size,), (size, size)):
        raise ValueError(
            f"scaling must have shape ({size},) (a diagonal) or ({size}, {size}) (a full "
            f"matrix) for the step's {size} coordinate(s), got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError("scaling must be finite")
    return array


def _reset_potential(potential: QuadPotential) -> None:
    """``potential.reset()``: PyMC's adapted potentials make a shared variable of their dtype
    afresh, float64 for the step's own (whatever ``floatX``, see :func:`float64_internals`)."""
    with float64_internals():
        potential.reset()


def _check_potential(potential: Any, size: int) -> QuadPotential:
    """``potential`` if it is a PyMC mass-matrix potential for ``size`` coordinates.

    A potential built for another size would otherwise fail deep inside the first trajectory
    with a NumPy broadcasting error, or, for a size-1 diagonal, silently broadcast."""
    if not isinstance(potential, QuadPotential):
        raise TypeError(
            "potential must be one of PyMC's mass-matrix potentials (a pymc QuadPotential, "
            f"e.g. QuadPotentialDiag), got {type(potential).__name__}"
        )
    # A momentum draw has the potential's own size; a copy keeps the user's RNG state untouched.
    momentum_shape = np.shape(deepcopy(potential).random())
    if momentum_shape != (size,):
        raise ValueError(
            f"potential draws momenta of shape {momentum_shape}, but the step has {size} "
            f"coordinate(s): build it for {size} (e.g. QuadPotentialDiag(np.ones({size})))"
        )
    return potential


@dataclass_state
class StochasticDynamicsState(StepMethodState):
    momentum: np.ndarray
    step_adapt: StepSizeState
    potential: PotentialState
    tune: bool
    divergences: int
    gradient_noise: np.ndarray


class StochasticDynamics(ArrayStepShared):
    r"""Stochastic dynamics with partial momentum refreshment (Neal 1993), exact or uncorrected.

    Each draw runs ``thin`` transitions. A transition refreshes the momentum partially,
    ``p ← α p + (1 − α²)^½ n`` with ``n ~ N(0, M)`` (Eq. 16), then takes ``n_leapfrog`` leapfrog
    steps of size ``ε`` (Eq. 15). With ``correct=True`` the end point is accepted with probability
    ``min(1, exp(-ΔH))`` and the momentum is negated on rejection: Horowitz's generalised hybrid
    Monte Carlo, exact for any ``ε``. With ``correct=False`` every end point is taken: Neal's
    uncorrected method, whose bias grows with ``ε`` (roughly as ``ε²``). ``alpha=0`` is plain
    Hamiltonian Monte Carlo with ``n_leapfrog`` steps per trajectory.

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample: random variables, value variables or their names
        (default: every free variable of the model; a discrete one is an error, to be assigned
        to another step in a ``CompoundStep``); together they need at least one element (a
        lone shape-``(0,)`` variable is refused).
    step_size : float, optional
        Leapfrog step ``ε`` (in units of the mass matrix's scales). Default ``0.25 / N^¼``, the
        starting point of tuning.
    alpha : float, default 0.9
        Momentum persistence, in ``[0, 1)``. Neal used 0.999 with one leapfrog step per
        transition; values close to 1 suppress random walks.
    n_leapfrog : int, default 10
        Leapfrog steps per transition.
    thin : int, default 1
        Transitions per recorded draw.
    correct : bool, default True
        Exact (Metropolis-corrected) or uncorrected dynamics. Must be ``False`` for a model
        with ``pm.Minibatch`` data (see Notes).
    target_accept : float, default 0.9
        Step-size tuning target for the mean acceptance probability (``correct=True``).
    target_energy_error : float, default 0.1
        Step-size tuning target for ``correct=False``: dual averaging drives the mean of
        ``exp(-|ΔH|)`` to ``exp(-target_energy_error)``; finite and > 0.
    target_noise_share : float, default 0.5
        Step-size tuning target with ``pm.Minibatch`` data: the share of the momentum's heat
        supplied by gradient noise (stat ``gradient_noise_share``, see Notes); finite and > 0.
    adapt_step_size : bool, default True
        Dual averaging of ``log ε`` during tuning (Hoffman & Gelman 2014), then frozen at its
        averaged value.
    step_size_jitter : float, default 0.15
        Each transition uses ``ε · U(1 − j, 1 + j)`` (PyMC's ``HamiltonianMC`` does the same).
        Trajectories of one fixed length can return close to where they started in some
        direction of a near-Gaussian posterior (with ``alpha=0`` this makes exact HMC mix
        badly, or not at all, in that direction); varying the length breaks that resonance.
        ``0`` disables it. In ``[0, 1)``.
    scaling : array, optional
        Diagonal of the mass matrix (or its inverse with ``is_cov=True``), shape ``(N,)``, or a
        full matrix, ``(N, N)``, for the step's ``N`` raveled coordinates; finite. If neither
        ``scaling`` nor ``potential`` is given, a diagonal mass matrix is adapted during tuning
        from the draws' variances (PyMC's ``QuadPotentialDiagAdapt``).
    is_cov : bool, default False
        ``scaling`` is the inverse mass matrix (a covariance); only with ``scaling``.
    potential : pymc QuadPotential, optional
        Any of PyMC's mass-matrix potentials.
    max_energy_error : float, default 1000
        ``|ΔH|`` above which a trajectory is divergent: it is counted (``diverging``), the chain
        stays at the start of the transition (exact dynamics reverse its momentum, uncorrected
        ones draw a fresh one), and during tuning the step size shrinks (the divergence enters
        dual averaging with acceptance 0). Must be ``> 0``; ``inf`` leaves only non-finite
        energy errors divergent.
    model, rng, initial_point, compile_kwargs, blocked :
        As for PyMC's steps.

    Notes
    -----
    *Minibatches.* With ``pm.Minibatch`` data (``X_batch, y_batch = pm.Minibatch(X, y,
    batch_size=...)``, which keeps rows of ``X`` and ``y`` paired, and ``total_size=`` on the
    likelihood) every gradient evaluation sees a fresh random batch. The dynamics then run
    uncorrected, and the partial refreshment acts as SGHMC's friction (Chen et al. 2014): each
    draw evaluates the gradient twice at its starting point, keeps a running estimate ``B̂`` of
    the gradient-noise variance, and injects only the heat the gradient noise does not already
    add, ``(1 − α² − n_leapfrog ε² B̂ M⁻¹)^½`` instead of ``(1 − α²)^½``. The sample stat
    ``gradient_noise_share`` is ``n_leapfrog ε² B̂ M⁻¹ / (1 − α²)`` averaged over coordinates;
    above 1 the noise alone overheats the chain (the posterior comes out too wide): lower
    ``step_size``, raise ``alpha``'s friction (lower ``alpha``) or the batch size. What remains
    is the ``O(ε)`` discretisation bias of uncorrected dynamics and the error of ``B̂``; both
    shrink with ``ε``. ``ΔH`` is not informative here (each evaluation sees another batch): the
    step size is tuned so that ``gradient_noise_share`` averages ``target_noise_share``, and a
    trajectory counts as divergent when its kinetic energy grows by more than
    ``max_energy_error``. The minibatch random stream is re-seeded per chain, so
    ``random_seed`` still reproduces the draws.

    *Hard constraints.* A trajectory that runs into a region where the log-density is ``-inf``
    (e.g. a ``pm.Potential`` of ``-inf`` outside a set) is rejected like any other proposal and
    counted in ``n_constraint_hits``; it is not a divergence. Step-size tuning gives it partial
    credit: its acceptance at the last point before the wall times the share of the trajectory
    integrated before it. Counting every wall hit as a rejection drove ``ε`` towards 0 for
    chains near the wall, which then could not leave it (plain HMC, ``alpha=0``, on a truncated
    normal); ignoring the hits let ``ε`` grow until every trajectory ended at the wall. (The
    gradient must be finite where the log-density is ``-inf``, as it is for a ``pm.Potential``
    built with ``pm.math.switch``; a NaN there is a divergence.)

    *Models.* Models built with ``floatX="float32"`` are sampled as PyMC's steps sample them:
    the model evaluates in float32, the dynamics run in float64, the draws come back float32.
    In a ``CompoundStep`` the step goes with any of PyMC's steps, in any position.

    Sample stats: ``accept`` (mean ``min(1, exp(-ΔH))`` over the draw's transitions),
    ``n_accepted``, ``diverging``, ``divergences`` (running count after tuning),
    ``n_constraint_hits`` (transitions rejected at a hard constraint), ``energy``,
    ``energy_error`` (last transition),
    ``step_size`` (the tuned ``ε``, before the per-transition jitter), ``step_size_bar``,
    ``n_grad_evals``, ``gradient_noise_share`` and ``model_logp`` (``lp`` in the DataTree: PyMC
    renames it).

    Raises
    ------
    TypeError
        For an unknown keyword, a discrete variable, or an argument of the wrong kind (a number
        given as a string, a ``bool`` as a number, a ``scaling`` that is not numeric).
    ValueError
        For an argument out of its range (named in the message), a ``scaling`` of the wrong
        shape, ``is_cov=True`` without ``scaling``, variables with no elements, or
        ``correct=True`` with ``pm.Minibatch`` data.

    References
    ----------
    .. [1] Neal, R. M. (1993). Bayesian learning via stochastic dynamics. NIPS 5, 475–482.
    .. [2] Horowitz, A. M. (1991). A generalized guided Monte Carlo algorithm. Phys. Lett. B 268,
       247–252.
    """

    name = "stochastic_dynamics"
    default_blocked = True
    # Declared as dtype instances, not scalar types: in a CompoundStep, PyMC requires a stat
    # shared by name to be declared equal by every sub-step, and its own steps disagree
    # (`divergences` is `int` for NUTS and `np.int64` for HamiltonianMC); np.dtype("int64")
    # compares equal to both, so either can share a compound with this step.
    stats_dtypes_shapes = {
        "accept": (np.dtype(np.float64), []),
        "n_accepted": (np.dtype(np.int64), []),
        "diverging": (np.dtype(bool), []),
        "divergences": (np.dtype(np.int64), []),
        "n_constraint_hits": (np.dtype(np.int64), []),
        "energy": (np.dtype(np.float64), []),
        "energy_error": (np.dtype(np.float64), []),
        "step_size": (np.dtype(np.float64), []),
        "step_size_bar": (np.dtype(np.float64), []),
        "n_grad_evals": (np.dtype(np.int64), []),
        "gradient_noise_share": (np.dtype(np.float64), []),
        "model_logp": (np.dtype(np.float64), []),
    }
    _state_class = StochasticDynamicsState

    @garbage_collector_paused()
    def __init__(
        self,
        vars: Sequence | None = None,
        *,
        step_size: float | None = None,
        alpha: float = 0.9,
        n_leapfrog: int = 10,
        thin: int = 1,
        correct: bool = True,
        target_accept: float = 0.9,
        target_energy_error: float = 0.1,
        target_noise_share: float = 0.5,
        adapt_step_size: bool = True,
        step_size_jitter: float = 0.15,
        scaling: Any = None,
        is_cov: bool = False,
        potential: QuadPotential | None = None,
        max_energy_error: float = 1000.0,
        model: pm.Model | None = None,
        rng: Any = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        **kwargs: Any,
    ):
        model = pm.modelcontext(model)
        step_name = type(self).__name__
        if kwargs:
            raise TypeError(f"{step_name} got unexpected keyword arguments: {sorted(kwargs)}")
        n_leapfrog = check_int_at_least(n_leapfrog, 1, "n_leapfrog")
        thin = check_int_at_least(thin, 1, "thin")
        alpha = check_real(alpha, "alpha")
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha!r}")
        if step_size is not None:
            step_size = check_positive_finite(step_size, "step_size")
        step_size_jitter = check_real(step_size_jitter, "step_size_jitter")
        if not 0.0 <= step_size_jitter < 1.0:
            raise ValueError(f"step_size_jitter must be in [0, 1), got {step_size_jitter!r}")
        target_accept = check_real(target_accept, "target_accept")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept!r}")
        target_noise_share = check_positive_finite(target_noise_share, "target_noise_share")
        target_energy_error = check_positive_finite(target_energy_error, "target_energy_error")
        if check_bool(is_cov, "is_cov") and scaling is None:
            raise ValueError("is_cov=True says how to read scaling, but no scaling was given")
        # inf is allowed: then only a non-finite energy error makes a trajectory divergent.
        max_energy_error = check_real(max_energy_error, "max_energy_error")
        if not max_energy_error > 0:
            raise ValueError(
                "max_energy_error must be a number > 0 (or inf, to count only non-finite "
                f"energy errors as divergent), got {max_energy_error!r}"
            )
        if scaling is not None and potential is not None:
            raise ValueError("give at most one of `scaling` and `potential`")

        value_vars = continuous_value_vars(model, vars, step_name)
        graph = step_graph(model, value_vars, initial_point)
        check_not_empty(graph, step_name)
        if scaling is not None:
            scaling = _check_scaling(scaling, graph.start.size)
        if potential is not None:
            potential = _check_potential(potential, graph.start.size)
        self._minibatch_rngs = random_generators(graph)
        if self._minibatch_rngs and correct:
            raise ValueError(
                "the model's log-density is random (pm.Minibatch data): a Metropolis test "
                "on it is meaningless; use StochasticDynamics(correct=False)"
            )
        size = graph.start.size
        self._size = size
        self.alpha = alpha
        self.n_leapfrog = n_leapfrog
        self.thin = thin
        self.correct = check_bool(correct, "correct")
        self.adapt_step_size = check_bool(adapt_step_size, "adapt_step_size")
        self.step_size_jitter = step_size_jitter
        self.max_energy_error = max_energy_error
        initial_step = 0.25 / size**0.25 if step_size is None else step_size
        if self._minibatch_rngs:
            target = float(np.exp(-target_noise_share))
        else:
            target = target_accept if correct else float(np.exp(-target_energy_error))
        self.step_adapt = DualAverageAdaptation(initial_step, target, 0.05, 0.75, 10)
        if potential is None:
            # A float64 mass matrix (a shared variable) whatever floatX, as the dynamics are.
            with float64_internals():
                potential = (
                    QuadPotentialDiagAdapt(size, np.zeros(size), np.ones(size), 10, dtype="float64")
                    if scaling is None
                    else quad_potential(scaling, is_cov)
                )
        self.potential = potential
        self._settings = DynamicsSettings(
            n_steps=self.n_leapfrog,
            alpha=self.alpha,
            correct=self.correct,
            max_energy_error=self.max_energy_error,
            noisy_logp=bool(self._minibatch_rngs),
        )
        #: Machine epsilon of the model's log-density (float32 terms round it coarsely).
        self._logp_eps = log_density_eps(graph)
        self._compile_density(graph, compile_kwargs)
        self.reset_tuning()
        super().__init__(value_vars, graph.shared, blocked=blocked, rng=rng)
        # Seeded from ``rng`` now, as PyMC's HMC does, for a step called without ``pm.sample``.
        self.potential.set_rng(self.rng.spawn(1)[0])

    def _compile_density(self, graph: StepGraph, compile_kwargs: dict | None) -> None:
        """Compile what ``astep`` evaluates of the model (through :mod:`pymc_sfp.compile`)."""
        self._logp_dlogp = compile_logp_dlogp(graph, compile_kwargs)
        self._check_finite_values = FiniteValueCheck(graph, compile_kwargs, type(self).__name__)

    # ------------------------------------------------------------------ PyMC hooks
    def reset_tuning(self) -> None:
        self.step_adapt.reset()
        _reset_potential(self.potential)
        self.momentum = np.empty(0)
        self.gradient_noise = np.empty(0)
        self.divergences = 0
        self.tune = True

    def stop_tuning(self) -> None:
        self.tune = False

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        super().setup_chain(rng, tune, draws)
        # PyMC's parallel sampling sends the step as it is, without ``reset_tuning``: a step
        # reused after another run would start from that run's step size and mass matrix.
        self.reset_tuning()
        self.potential.set_rng(self.rng.spawn(1)[0])
        reseed(self._minibatch_rngs, self.rng)

    @staticmethod
    def competence(var, has_grad):
        if var.dtype in continuous_types and has_grad:
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        return progressbar_config(_PROGRESS_FIELDS, n_chains)

    @staticmethod
    def _make_progressbar_update_functions():
        return progressbar_updates(_PROGRESS_FIELDS)

    # ------------------------------------------------------------------ sampling
    def _logp_grad(self, q: np.ndarray) -> tuple[float, np.ndarray, None]:
        logp, grad = self._logp_dlogp(q)
        return logp, grad, None

    def _minibatch_noise_scale(
        self, q: np.ndarray, grad: np.ndarray, step_size: float, potential: QuadPotential
    ) -> tuple[np.ndarray, float]:
        """SGHMC heat balance: fresh-noise scale per coordinate, and the share of the heat that
        the gradient noise supplies (see the class Notes)."""
        _, other_batch_grad = self._logp_dlogp(q)
        sample = 0.5 * (grad - other_batch_grad) ** 2
        if self.gradient_noise.shape != q.shape:
            self.gradient_noise = sample
        else:
            self.gradient_noise = 0.95 * self.gradient_noise + 0.05 * sample
        inverse_mass = potential.velocity(np.ones_like(q))
        heat = self.n_leapfrog * step_size**2 * self.gradient_noise * inverse_mass
        friction = 1.0 - self.alpha**2
        return np.sqrt(np.clip(friction - heat, 0.0, None)), float(np.mean(heat) / friction)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        q = np.ascontiguousarray(q0.data, dtype=np.float64)
        state, stats = self._transitions(
            q, self._logp_grad, q0, self.momentum, self.step_adapt, self.potential
        )
        self.momentum = state.momentum
        self._check_finite_values(state.position)
        if stats["diverging"] and not self.tune:
            self.divergences += 1
        stats["divergences"] = self.divergences
        return RaveledVars(state.position, q0.point_map_info), [stats]

    def _tuning_statistic(
        self,
        info: TransitionInfo,
        noise_share: float = 0.0,
        logp: float | np.ndarray = 0.0,
    ) -> float | np.ndarray:
        """What dual averaging drives to its target: the acceptance probability (``exp(-|ΔH|)``
        uncorrected), 0 for a divergence, and for a trajectory stopped at a hard constraint its
        acceptance before the wall times the share of the trajectory before it (see
        :func:`pymc_sfp.core.dynamics.transition`). One value per trajectory of a batch.

        An energy error within the rounding of the log-density ``logp`` at the trajectory's
        start counts as none: a float32 log-density of 6e7 nats is known to ±4 nats, an error
        no step size reduces, and chasing it shrank the step size until the chain froze far
        from the posterior."""
        if self._minibatch_rngs:
            return float(np.exp(-noise_share))
        hit = np.asarray(info.hit_constraint)
        error = np.where(hit, info.energy_error_before_constraint, info.energy_error)
        # A float64 log-density's rounding is far below any error that matters: only a coarser
        # one is allowed for, which leaves float64 runs as they were.
        if self._logp_eps > np.finfo(np.float64).eps:
            rounding = 2.0 * self._logp_eps * np.abs(logp)
            with np.errstate(invalid="ignore"):
                error = np.sign(error) * np.maximum(np.abs(error) - rounding, 0.0)
        credit = np.where(hit, info.share_before_constraint, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            accept = np.exp(-(np.maximum(error, 0.0) if self.correct else np.abs(error)))
        statistic = np.where(info.diverging, 0.0, credit * accept)
        return float(statistic) if statistic.ndim == 0 else statistic

    def _transitions(
        self,
        q: np.ndarray,
        logp_grad: LogpGrad,
        q0: RaveledVars,
        momentum: np.ndarray,
        step_adapt: DualAverageAdaptation,
        potential: QuadPotential,
    ) -> tuple[PhaseState, dict]:
        """One draw of one chain: ``thin`` transitions from ``q`` under ``logp_grad`` with its
        momentum, step-size adaptation and mass matrix (the latter two adapt in place); the end
        state and the draw's stats (all but ``divergences``, which the caller counts)."""
        logp, grad, aux = logp_grad(q)
        if not (np.isfinite(logp) and np.all(np.isfinite(grad))):
            raise SamplingError(
                f"{type(self).__name__}: the log-density or its gradient is not finite at the "
                f"starting point {pm.blocking.DictToArrayBijection.rmap(q0)}; check the model "
                "with model.debug() or pass another initial point"
            )
        if momentum.shape != q.shape:
            momentum = potential.random()
        state = PhaseState(q, momentum, logp, grad, aux)
        adapt = self.tune and self.adapt_step_size
        step_size = step_adapt.current(adapt)
        n_grad = 1
        noise_scale, noise_share = None, 0.0
        if self._minibatch_rngs:
            noise_scale, noise_share = self._minibatch_noise_scale(q, grad, step_size, potential)
            n_grad += 1
        metric = Metric(potential.velocity, potential.energy, potential.random)

        def update_step_size(info: TransitionInfo) -> None:
            step_adapt.update(self._tuning_statistic(info, noise_share, logp), adapt)

        state, stats = self._draw(
            state, step_size, metric, logp_grad, self.rng, update_step_size, n_grad, noise_scale
        )
        # An adapted mass matrix changes after every tuning draw (PyMC's diagonal one also swaps
        # its estimation windows); a momentum drawn under the old one can carry a huge kinetic
        # energy under the new one, which the leapfrog turns into a jump to an absurd point at
        # a small energy error: dual averaging then shrinks the step size until the chain
        # freezes (3 scales 1e-3…1e3, 4 chains: one frozen, R-hat 1.6).
        before = _inverse_mass(potential, len(state.momentum)) if self.tune else None
        potential.update(state.position, state.grad, self.tune)
        if before is not None:
            after = _inverse_mass(potential, len(state.momentum))
            state = state._replace(momentum=_momentum_following(state.momentum, before, after))
        stats |= {
            "gradient_noise_share": noise_share,
            **step_adapt.stats(),
            "step_size": step_size,
        }
        return state, stats

    def _draw(
        self,
        state: PhaseState,
        step_size: float | np.ndarray,
        metric: Metric,
        logp_grad: LogpGrad,
        rng: np.random.Generator,
        update_step_size: Callable[[TransitionInfo], None],
        n_grad: int = 1,
        noise_scale: np.ndarray | None = None,
    ) -> tuple[PhaseState, dict[str, Any]]:
        """The ``thin`` transitions of one draw, from ``state``: of one chain, or of a batch of
        chains (one row each, ``step_size`` one per row). ``update_step_size`` sees each
        transition's info; ``n_grad`` counts the gradients spent before. Returns the end state
        and the stats this loop knows, as Python scalars or, for a batch, one value per row."""
        size = None if np.ndim(state.logp) == 0 else len(state.logp)
        accept_total, n_accepted, n_hits, diverging = 0.0, 0, 0, False
        jitter = self.step_size_jitter
        for _ in range(self.thin):
            epsilon = (
                step_size * rng.uniform(1.0 - jitter, 1.0 + jitter, size) if jitter else step_size
            )
            state, info = transition(
                state,
                epsilon,
                self._settings,
                logp_grad,
                metric,
                lambda: rng.uniform(size=size),
                noise_scale,
            )
            update_step_size(info)
            accept_total += info.accept_stat
            n_accepted += info.accepted
            n_hits += info.hit_constraint
            n_grad += info.n_grad
            diverging |= info.diverging
        return state, {
            "accept": accept_total / self.thin,
            "n_accepted": n_accepted,
            "diverging": diverging,
            "n_constraint_hits": n_hits,
            "energy": info.energy,
            "energy_error": info.energy_error,
            "n_grad_evals": n_grad,
            "model_logp": state.logp,
        }


class _DiagonalAdaptation:
    """PyMC's ``QuadPotentialDiagAdapt`` for a ladder's chains at once: one row per chain, each
    adapting as its own potential would, and updated in one vectorised call.

    A ladder stepped ``K`` potentials one by one after every tuning draw, each update a dozen
    small NumPy calls and a shared-variable write: for a small model, most of a tuning round.
    The arithmetic here is PyMC's, operation for operation (windowed running variances, clipped
    to ``[1e-12, 1e12]``), so each row holds exactly the diagonal that chain's potential would.

    Parameters
    ----------
    potential : QuadPotentialDiagAdapt
        The (reset) template whose settings every row takes.
    n_chains : int
    """

    def __init__(self, potential: QuadPotentialDiagAdapt, n_chains: int):
        size = potential._n
        self.discard_window = potential._discard_window
        self.early_update = potential._early_update
        self.multiplier = potential.adaptation_window_multiplier
        self.window = np.full(n_chains, potential.adaptation_window)
        self.n_samples = np.zeros(n_chains, dtype=np.int64)
        self.variance = np.tile(
            np.asarray(potential._initial_diag, dtype=np.float64), (n_chains, 1)
        )
        # (weight, mean, raw variance) of the foreground and background estimates, as PyMC's
        # _WeightedVariance starts them: the initial guess at its weight, and nothing.
        weight = float(potential._initial_weight)
        self.foreground = (
            np.full(n_chains, weight),
            np.tile(np.asarray(potential._initial_mean, dtype=np.float64), (n_chains, 1)),
            self.variance * weight,
        )
        self.background = (
            np.zeros(n_chains),
            np.zeros((n_chains, size)),
            np.zeros((n_chains, size)),
        )

    #: What it reads of PyMC's potential (private: a PyMC without them keeps the potentials).
    _READS = (
        "_n",
        "_discard_window",
        "_early_update",
        "_initial_mean",
        "_initial_diag",
        "_initial_weight",
        "_store_mass_matrix_trace",
        "adaptation_window",
        "adaptation_window_multiplier",
        "dtype",
    )

    @staticmethod
    def supports(potential: QuadPotential) -> bool:
        """Whether ``potential`` adapts as this class does: PyMC's own diagonal adaptation in
        float64 (not a subclass, which may adapt otherwise), without a trace of its matrices."""
        return (
            type(potential) is QuadPotentialDiagAdapt
            and all(hasattr(potential, name) for name in _DiagonalAdaptation._READS)
            and np.dtype(potential.dtype) == np.float64
            and not potential._store_mass_matrix_trace
            # PyMC raises on a variance of no samples; this would not.
            and (potential._initial_weight > 0 or not potential._early_update)
        )

    def update(self, rows: np.ndarray, samples: np.ndarray) -> None:
        """``potential.update(sample, grad, tune=True)`` of the chains ``rows`` (increasing),
        one sample each."""
        rows = np.asarray(rows)
        count = self.n_samples[rows]
        # A row's windows follow from its count alone, so rows with one count (a ladder's rows
        # update together: one group) update as one potential would.
        for n in np.unique(count).tolist():
            group = count == n
            self._update_group(_as_slice(rows[group]), samples[group], n)

    def _update_group(self, rows: slice | np.ndarray, samples: np.ndarray, n: int) -> None:
        """PyMC's update, of ``rows`` that have all seen ``n`` samples."""
        window = int(self.window[rows][0])
        if n > self.discard_window:
            for weight, mean, raw in (self.foreground, self.background):
                weight[rows] += 1.0
                old_diff = samples - mean[rows]
                mean[rows] += old_diff / weight[rows, None]
                raw[rows] += old_diff * (samples - mean[rows])
        if self.early_update or n > window:
            weight, _, raw = self.foreground
            self.variance[rows] = np.clip(raw[rows] / weight[rows, None], 1e-12, 1e12)
        if n > 0 and n % window == 0:
            for new, old in zip(self.foreground, self.background, strict=True):
                new[rows] = old[rows]
                old[rows] = 0.0
            self.window[rows] = int(window * self.multiplier)
        self.n_samples[rows] += 1


def _as_slice(rows: np.ndarray) -> slice | np.ndarray:
    """Increasing ``rows`` as a slice where they are consecutive (views, not copies)."""
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


class LadderDynamics:
    """A :class:`StochasticDynamics` step run for a ladder of chains at once: the replicas of
    parallel tempering, each with its own target, momentum, step-size adaptation and mass
    matrix (diagonal or dense), moved together by one vectorised transition (one compiled call
    of the batched log-density per leapfrog step for all of them).

    Every chain makes exactly the transitions :class:`StochasticDynamics` makes (the same
    :func:`~pymc_sfp.core.dynamics.transition`, tuning statistic and PyMC adaptation objects,
    or for PyMC's adapted diagonal mass matrix, the default, the same arithmetic on every chain
    at once); only the random streams differ, one for the ladder.

    Parameters
    ----------
    template : StochasticDynamics
        The step whose settings every chain uses (never stepped itself); see :meth:`supports`.
    n_chains : int
    rng : numpy.random.Generator
    tune : bool
        Whether the chains start in tuning.
    """

    def __init__(
        self, template: StochasticDynamics, n_chains: int, rng: np.random.Generator, tune: bool
    ):
        self._template = template
        self._step_adapts = [deepcopy(template.step_adapt) for _ in range(n_chains)]
        for adapt in self._step_adapts:
            adapt.reset()
        # PyMC's adapted diagonal (the default) for every chain in one array; any other mass
        # matrix as one potential per chain.
        self._diagonal: _DiagonalAdaptation | None = None
        self._potentials: list[QuadPotential] = []
        if _DiagonalAdaptation.supports(template.potential):
            self._diagonal = _DiagonalAdaptation(template.potential, n_chains)
        else:
            self._potentials = [deepcopy(template.potential) for _ in range(n_chains)]
            for potential in self._potentials:
                _reset_potential(potential)
        self._dense = not isinstance(template.potential, _DIAGONAL_POTENTIALS)
        size = template._size
        # Persistent momenta, whitened (see RowMassMatrix): drawn at the first step.
        self._noise: np.ndarray | None = None
        self._divergences = np.zeros(n_chains, dtype=np.int64)
        self.rng = rng
        self.tune = tune
        self._step_size, self._step_size_bar = np.empty(n_chains), np.empty(n_chains)
        self._inverse_mass = np.empty((n_chains, size, size) if self._dense else (n_chains, size))
        self._mass: RowMassMatrix | None = None
        self._read_adaptation(np.arange(n_chains))

    @staticmethod
    def supports(step: Any) -> bool:
        """Whether ``step`` can run as a ladder: a :class:`StochasticDynamics` with one of
        PyMC's diagonal (``QuadPotentialDiag``, ``QuadPotentialDiagAdapt``) or dense
        (``QuadPotentialFull``, ``QuadPotentialFullAdapt``, ``QuadPotentialFullInv``) mass
        matrices, on the full data (no ``pm.Minibatch``)."""
        return (
            isinstance(step, StochasticDynamics)
            and isinstance(step.potential, _DIAGONAL_POTENTIALS + _DENSE_POTENTIALS)
            and not step._minibatch_rngs
        )

    def stop_tuning(self) -> None:
        self.tune = False
        self._read_adaptation(np.arange(len(self._step_adapts)))

    def _read_adaptation(self, chains: np.ndarray) -> None:
        """Cache the step sizes and mass matrices of ``chains`` as arrays (they change only
        while tuning)."""
        adapt = self.tune and self._template.adapt_step_size
        changed = self._mass is None
        for k in chains:
            self._step_size[k] = self._step_adapts[k].current(adapt)
            self._step_size_bar[k] = self._step_adapts[k].stats()["step_size_bar"]
        inverse_mass = self.inverse_masses(chains)
        if changed or not np.array_equal(inverse_mass, self._inverse_mass[chains]):
            self._inverse_mass[chains] = inverse_mass
            changed = True
        # A fixed matrix never changes while the step sizes are tuned, and an adapted dense one
        # only every `update_window` draws: refactorising every rung's matrix after every
        # tuning draw would be wasted work.
        if changed:
            self._mass = RowMassMatrix(self._inverse_mass)

    def inverse_masses(self, chains: np.ndarray) -> np.ndarray:
        """``M⁻¹`` of each chain of ``chains`` as its adaptation holds it now (a diagonal, or a
        dense matrix), one row each."""
        if self._diagonal is not None:
            return self._diagonal.variance[chains]
        size = self._template._size
        return np.array([_inverse_mass(self._potentials[k], size) for k in chains])

    def start_error(self, rungs: np.ndarray) -> SamplingError:
        """The error for a step from points of ``rungs`` where the density is not finite."""
        return SamplingError(
            f"{type(self._template).__name__} on a tempering ladder: the tempered log-density or "
            f"its gradient is not finite at the starting points of rungs "
            f"{np.asarray(rungs).tolist()} (0 is the hottest); start the chain inside the model's "
            "support (initvals), or check the model with model.debug()"
        )

    def kernel_inputs(self) -> tuple[LadderMass, LadderSettings]:
        """The mass matrices and settings of the chains as
        :func:`~pymc_sfp.core.compiled_tempering.compiled_rounds` takes them (after tuning,
        where they are fixed); draws the persistent momenta where no step has drawn them yet,
        as :meth:`step` would first."""
        if self._noise is None:
            self._noise = self.rng.standard_normal(self._inverse_mass.shape[:2])
        mass = self._mass
        n = len(self._step_size)
        if mass.dense:
            none = np.empty((n, 0))
            rows = LadderMass(True, none, none, mass.inverse_mass, mass._colour, mass._whiten)
        else:
            none = np.empty((n, 0, 0))
            rows = LadderMass(False, mass.inverse_mass, mass._colour, none, none, none)
        template = self._template
        settings = template._settings
        return rows, LadderSettings(
            settings.n_steps,
            settings.alpha,
            settings.correct,
            settings.max_energy_error,
            template.thin,
            template.step_size_jitter,
        )

    def compiled_stats(self, result: LadderKernelResult) -> tuple[dict[str, Any], dict[str, int]]:
        """Take the momenta and (after tuning) divergence counts of
        :func:`~pymc_sfp.core.compiled_tempering.compiled_rounds`' ``result``; return the
        coldest chain's stats of the last round (as :meth:`step`'s last value of each,
        counts left out) and the counts summed over the chains and rounds."""
        self._noise = result.noise
        if not self.tune:  # divergences count after tuning, as in step
            self._divergences = result.divergences
        accept, diverging, energy, energy_error = result.cold
        cold = {
            "accept": np.float64(accept),
            "diverging": np.bool_(diverging),
            "energy": np.float64(energy),
            "energy_error": np.float64(energy_error),
            "divergences": self._divergences[-1],
            "step_size": self._step_size[-1],
            "step_size_bar": self._step_size_bar[-1],
            "gradient_noise_share": np.float64(0.0),
        }
        n_accepted, n_hits, n_grad = result.counts
        counts = {"n_accepted": n_accepted, "n_constraint_hits": n_hits, "n_grad_evals": n_grad}
        return cold, counts

    def step(
        self,
        positions: np.ndarray,
        chains: np.ndarray,
        density: LogpGrad,
    ) -> tuple[PhaseState, dict[str, np.ndarray]]:
        """One draw of the chains ``chains`` (indices into the ladder) from ``positions`` (one
        row each), under ``density``, a batched ``X ↦ (log p, ∇ log p, aux)`` (``aux`` one row
        per chain). Returns the end states and the draws' :class:`StochasticDynamics` stats,
        one value per chain."""
        template = self._template
        logp, grad, aux = density(positions)
        # One reduction for the common case, every value finite.
        finite = np.isfinite(np.add.reduce(logp) + np.add.reduce(grad, axis=None))
        bad = None if finite else ~(np.isfinite(logp) & np.all(np.isfinite(grad), axis=1))
        if bad is not None and bad.any():
            raise self.start_error(chains[bad])
        if self._noise is None:
            self._noise = self.rng.standard_normal(self._inverse_mass.shape[:2])
        mass = self._mass.rows(chains)
        metric = mass.metric(lambda: self.rng.standard_normal(positions.shape))
        adapt = self.tune and template.adapt_step_size
        step_size = self._step_size[chains]
        state = PhaseState(positions, mass.colour(self._noise[chains]), logp, grad, aux)

        def update_step_sizes(info: TransitionInfo) -> None:
            if adapt:
                self._update_step_sizes(chains, info, logp)

        state, stats = template._draw(
            state, step_size, metric, density, self.rng, update_step_sizes
        )
        if self.tune:
            self._update_masses(chains, state.position, state.grad)
        else:
            self._divergences[chains] += stats["diverging"]
        self._noise[chains] = mass.whiten(state.momentum)
        n = len(chains)
        stats |= {
            "divergences": self._divergences[chains],
            "step_size": step_size,
            "step_size_bar": self._step_size_bar[chains],
            "n_grad_evals": np.full(n, stats["n_grad_evals"]),
            "gradient_noise_share": np.zeros(n),
        }
        if self.tune:
            self._read_adaptation(chains)
        return state, stats

    def adapt_compiled(self, last: LastRound, chains: np.ndarray) -> None:
        """A tuning draw made by compiled rounds (one round): the step-size and mass
        adaptations of ``chains`` (the rows of ``last``) updated from the round's transitions
        and end states, as :meth:`step` updates them."""
        if self._template.adapt_step_size:
            for fields in last.transitions:
                error, diverging, hit, before, share = fields.T
                # The fields the tuning statistic reads; it reads no other.
                info = TransitionInfo(
                    accept_stat=np.nan,
                    accepted=np.nan,
                    energy_error=error,
                    energy=np.nan,
                    diverging=diverging == 1.0,
                    n_grad=0,
                    hit_constraint=hit == 1.0,
                    energy_error_before_constraint=before,
                    share_before_constraint=share,
                )
                self._update_step_sizes(chains, info, last.start_logp)
        self._update_masses(chains, last.position, last.grad)
        self._read_adaptation(chains)

    def _update_step_sizes(
        self, chains: np.ndarray, info: TransitionInfo, logp: np.ndarray
    ) -> None:
        """Dual averaging of each chain's step size after one batched transition (``logp`` at
        the draw's start)."""
        statistic = self._template._tuning_statistic(info, logp=logp)
        for i, k in enumerate(chains):
            self._step_adapts[k].update(float(statistic[i]), True)

    def _update_masses(self, chains: np.ndarray, position: np.ndarray, grad: np.ndarray) -> None:
        """The mass-matrix adaptation of each chain after a tuning draw ending at ``position``
        (one row per chain) with gradient ``grad``."""
        if self._diagonal is not None:
            self._diagonal.update(chains, position)
            return
        for i, k in enumerate(chains):
            self._potentials[k].update(position[i], grad[i], True)
