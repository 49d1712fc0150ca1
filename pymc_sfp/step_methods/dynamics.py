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
import pytensor.tensor as pt
from pymc.blocking import RaveledVars, StatsType
from pymc.exceptions import SamplingError
from pymc.pytensorf import compile, join_nonshared_inputs
from pymc.step_methods.arraystep import GradientSharedStep
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.hmc.quadpotential import (
    PotentialState,
    QuadPotential,
    QuadPotentialDiagAdapt,
    quad_potential,
)
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation, StepSizeState
from pymc.vartypes import continuous_types
from pytensor.tensor.random.type import RandomGeneratorType

from pymc_sfp.core.dynamics import (
    PhaseState,
    equal_rejection_ladder,
    geometric_ladder,
    swap_neighbours,
    transition,
)
from pymc_sfp.step_methods._common import (
    ProgressField,
    continuous_value_vars,
    progressbar_config,
    progressbar_updates,
)

__all__ = ["ReplicaExchangeDynamics", "StochasticDynamics"]

_PROGRESS_FIELDS: tuple[ProgressField, ...] = (
    ("divergences", "Divergences", "d", 0),
    ("step_size", "Step size", ".3g", 0.0),
    ("accept", "Accept", ".3f", 1.0),
)


@dataclass_state
class StochasticDynamicsState(StepMethodState):
    momentum: np.ndarray
    step_adapt: StepSizeState
    potential: PotentialState
    tune: bool
    divergences: int
    gradient_noise: np.ndarray


class StochasticDynamics(GradientSharedStep):
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
        Continuous variables to sample (default: all of the model's).
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
        ``exp(-|ΔH|)`` to ``exp(-target_energy_error)``.
    target_noise_share : float, default 0.5
        Step-size tuning target with ``pm.Minibatch`` data: the share of the momentum's heat
        supplied by gradient noise (stat ``gradient_noise_share``, see Notes).
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
        Diagonal of the mass matrix (or its inverse with ``is_cov=True``), or a full matrix. If
        neither ``scaling`` nor ``potential`` is given, a diagonal mass matrix is adapted during
        tuning from the draws' variances (PyMC's ``QuadPotentialDiagAdapt``).
    is_cov : bool, default False
    potential : pymc QuadPotential, optional
        Any of PyMC's mass-matrix potentials.
    max_energy_error : float, default 1000
        ``|ΔH|`` above which a trajectory is divergent: it is counted (``diverging``), the chain
        returns to the start of the transition with a fresh momentum, and during tuning the step
        size shrinks (the divergence enters dual averaging with acceptance 0).
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

    Sample stats: ``accept`` (mean ``min(1, exp(-ΔH))`` over the draw's transitions),
    ``n_accepted``, ``diverging``, ``divergences`` (running count after tuning), ``energy``,
    ``energy_error`` (last transition),
    ``step_size`` (the tuned ``ε``, before the per-transition jitter), ``step_size_bar``,
    ``n_grad_evals``, ``gradient_noise_share`` and ``model_logp``.

    References
    ----------
    .. [1] Neal, R. M. (1993). Bayesian learning via stochastic dynamics. NIPS 5, 475–482.
    .. [2] Horowitz, A. M. (1991). A generalized guided Monte Carlo algorithm. Phys. Lett. B 268,
       247–252.
    """

    name = "stochastic_dynamics"
    default_blocked = True
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "n_accepted": (np.int64, []),
        "diverging": (bool, []),
        "divergences": (np.int64, []),
        "energy": (np.float64, []),
        "energy_error": (np.float64, []),
        "step_size": (np.float64, []),
        "step_size_bar": (np.float64, []),
        "n_grad_evals": (np.int64, []),
        "gradient_noise_share": (np.float64, []),
        "model_logp": (np.float64, []),
    }
    _state_class = StochasticDynamicsState

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
        if kwargs:
            raise TypeError(
                f"StochasticDynamics got unexpected keyword arguments: {sorted(kwargs)}"
            )
        if not (0.0 <= alpha < 1.0):
            raise ValueError(f"alpha must be in [0, 1), got {alpha!r}")
        for label, value in (("n_leapfrog", n_leapfrog), ("thin", thin)):
            if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be a finite number > 0, got {step_size!r}")
        if not 0.0 <= step_size_jitter < 1.0:
            raise ValueError(f"step_size_jitter must be in [0, 1), got {step_size_jitter!r}")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept!r}")
        if not target_noise_share > 0:
            raise ValueError(f"target_noise_share must be > 0, got {target_noise_share!r}")
        if not target_energy_error > 0:
            raise ValueError(f"target_energy_error must be > 0, got {target_energy_error!r}")
        if scaling is not None and potential is not None:
            raise ValueError("give at most one of `scaling` and `potential`")

        value_vars = continuous_value_vars(model, vars, "StochasticDynamics")
        if initial_point is None:
            initial_point = model.initial_point()
        super().__init__(
            value_vars,
            model=model,
            blocked=blocked,
            rng=rng,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
        )
        self._minibatch_rngs = [
            shared
            for shared in self._logp_dlogp_func._pytensor_function.get_shared()
            if isinstance(shared.type, RandomGeneratorType)
        ]
        if self._minibatch_rngs and correct:
            raise ValueError(
                "the model's log-density is random (pm.Minibatch data): a Metropolis test "
                "on it is meaningless; use StochasticDynamics(correct=False)"
            )
        size = int(sum(np.size(initial_point[v.name]) for v in value_vars))
        self.alpha = float(alpha)
        self.n_leapfrog = int(n_leapfrog)
        self.thin = int(thin)
        self.correct = bool(correct)
        self.adapt_step_size = bool(adapt_step_size)
        self.step_size_jitter = float(step_size_jitter)
        self.max_energy_error = float(max_energy_error)
        initial_step = 0.25 / size**0.25 if step_size is None else float(step_size)
        if self._minibatch_rngs:
            target = float(np.exp(-target_noise_share))
        else:
            target = target_accept if correct else float(np.exp(-target_energy_error))
        self.step_adapt = DualAverageAdaptation(initial_step, target, 0.05, 0.75, 10)
        if potential is None:
            potential = (
                QuadPotentialDiagAdapt(size, np.zeros(size), np.ones(size), 10, dtype="float64")
                if scaling is None
                else quad_potential(np.asarray(scaling, dtype=float), is_cov)
            )
        self.potential = potential
        # PyTensor's Numba backend generates machine code on the first call: do it here, once,
        # so that forked chain processes inherit it (minibatch streams are re-seeded per chain).
        self._logp_grad(
            np.concatenate([np.ravel(initial_point[v.name]) for v in value_vars]).astype(float)
        )
        self.reset_tuning()

    # ------------------------------------------------------------------ PyMC hooks
    def reset_tuning(self) -> None:
        self.step_adapt.reset()
        self.potential.reset()
        self.momentum = np.empty(0)
        self.gradient_noise = np.empty(0)
        self.divergences = 0
        self.tune = True

    def stop_tuning(self) -> None:
        self.tune = False

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        super().setup_chain(rng, tune, draws)
        self.potential.set_rng(self.rng.spawn(1)[0])
        for shared, seed in zip(
            self._minibatch_rngs, self.rng.spawn(len(self._minibatch_rngs)), strict=True
        ):
            shared.set_value(np.random.default_rng(seed), borrow=True)

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
    def _logp_grad(self, q: np.ndarray) -> tuple[float, np.ndarray]:
        logp, grad = self._logp_dlogp_func._pytensor_function(q)
        return float(logp), grad

    def _minibatch_noise_scale(
        self, q: np.ndarray, grad: np.ndarray, step_size: float
    ) -> tuple[np.ndarray, float]:
        """SGHMC heat balance: fresh-noise scale per coordinate, and the share of the heat that
        the gradient noise supplies (see the class Notes)."""
        _, other_batch_grad = self._logp_grad(q)
        sample = 0.5 * (grad - other_batch_grad) ** 2
        if self.gradient_noise.shape != q.shape:
            self.gradient_noise = sample
        else:
            self.gradient_noise = 0.95 * self.gradient_noise + 0.05 * sample
        inverse_mass = self.potential.velocity(np.ones_like(q))
        heat = self.n_leapfrog * step_size**2 * self.gradient_noise * inverse_mass
        friction = 1.0 - self.alpha**2
        return np.sqrt(np.clip(friction - heat, 0.0, None)), float(np.mean(heat) / friction)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        q = np.ascontiguousarray(q0.data, dtype=np.float64)
        position, stats = self._transitions(q, self._logp_grad, q0)
        return RaveledVars(position, q0.point_map_info), [stats]

    def _transitions(
        self,
        q: np.ndarray,
        logp_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
        q0: RaveledVars,
    ) -> tuple[np.ndarray, dict]:
        """One draw: ``thin`` transitions from ``q`` under ``logp_grad`` with the current
        momentum, step-size adaptation and potential; the new position and the draw's stats."""
        logp, grad = logp_grad(q)
        if not (np.isfinite(logp) and np.all(np.isfinite(grad))):
            raise SamplingError(
                f"{type(self).__name__}: the log-density or its gradient is not finite at the "
                f"starting point {pm.blocking.DictToArrayBijection.rmap(q0)}; check the model "
                "with model.debug() or pass another initial point"
            )
        if self.momentum.shape != q.shape:
            self.momentum = self.potential.random()
        state = PhaseState(q, self.momentum, logp, grad)
        adapt = self.tune and self.adapt_step_size
        step_size = self.step_adapt.current(adapt)
        n_grad = 1
        noise_scale, noise_share = None, 0.0
        if self._minibatch_rngs:
            noise_scale, noise_share = self._minibatch_noise_scale(q, grad, step_size)
            n_grad += 1
        accept_total = 0.0
        n_accepted = 0
        diverging = False
        for _ in range(self.thin):
            jitter = self.step_size_jitter
            state, info = transition(
                state,
                step_size=step_size * self.rng.uniform(1.0 - jitter, 1.0 + jitter)
                if jitter
                else step_size,
                n_steps=self.n_leapfrog,
                alpha=self.alpha,
                correct=self.correct,
                logp_grad=logp_grad,
                velocity=self.potential.velocity,
                kinetic_energy=self.potential.energy,
                draw_momentum=self.potential.random,
                uniform=self.rng.uniform,
                max_energy_error=self.max_energy_error,
                noise_scale=noise_scale,
                noisy_logp=bool(self._minibatch_rngs),
            )
            if self._minibatch_rngs:
                statistic = float(np.exp(-noise_share))
            elif self.correct:
                statistic = info.accept_stat
            else:
                statistic = float(np.exp(-abs(info.energy_error)))
            self.step_adapt.update(0.0 if info.diverging else statistic, adapt)
            accept_total += info.accept_stat
            n_accepted += info.accepted
            n_grad += info.n_grad
            diverging |= info.diverging
        self.momentum = state.momentum
        self.potential.update(state.position, state.grad, self.tune)
        if diverging and not self.tune:
            self.divergences += 1
        stats = {
            "accept": accept_total / self.thin,
            "n_accepted": n_accepted,
            "diverging": diverging,
            "divergences": self.divergences,
            "energy": info.energy,
            "energy_error": info.energy_error,
            "n_grad_evals": n_grad,
            "gradient_noise_share": noise_share,
            "model_logp": state.logp,
            **self.step_adapt.stats(),
            "step_size": step_size,
        }
        return state.position, stats


@dataclass_state
class ReplicaExchangeState(StochasticDynamicsState):
    replicas: np.ndarray
    replica_momenta: list
    replica_adapts: list
    replica_potentials: list
    n_swap_rounds: int
    betas: np.ndarray
    swap_rejections: np.ndarray
    swap_proposals: np.ndarray


class ReplicaExchangeDynamics(StochasticDynamics):
    r"""Stochastic dynamics with replica exchange (parallel tempering) over the likelihood.

    ``K`` replicas of the chain target ``p(θ) · p(y | θ)^β_k`` for a ladder ``1 = β_0 > … >
    β_{K-1}``; each runs the transitions of :class:`StochasticDynamics` (its own momentum, tuned
    step size and mass matrix), and after every draw neighbouring replicas propose to exchange
    their states (:func:`pymc_sfp.core.dynamics.swap_neighbours`, even and odd pairs alternately).
    Hot replicas cross the barriers between modes of the likelihood and hand what they find
    down to the cold replica ``β_0 = 1``, whose states are the draws. Exact for
    ``correct=True``. Each draw costs ``K`` times a draw of :class:`StochasticDynamics`.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable of the model (the default): tempering one block inside a
        ``CompoundStep`` is not exact, because the hot replicas' targets would depend on the
        other blocks.
    n_temperatures : int, default 8
        ``K >= 2``.
    min_beta : float, default 0.1
        ``β_{K-1}`` in ``(0, 1)``; the starting ladder is geometric (:func:`geometric_ladder`).
    betas : array, optional
        An explicit ladder instead: strictly decreasing, starting at 1, all in ``(0, 1]``.
    adapt_ladder : bool, default True
        During tuning, move the inner temperatures so that neighbours reject swaps equally often
        (:func:`pymc_sfp.core.dynamics.equal_rejection_ladder`), at the ends of tuning rounds of
        doubling length: after 1/8, 1/4 and 1/2 of the tuning draws, each from the swaps since
        the last. The ends ``1`` and ``min_beta`` (or ``betas[-1]``) stay; the second half of
        tuning lets each replica's step size and mass matrix settle on the final ladder.
    **kwargs :
        As for :class:`StochasticDynamics` (``pm.Minibatch`` data is not supported).

    Notes
    -----
    The likelihood is the model's observed variables together with its ``pm.Potential`` terms;
    the prior (free variables, with their Jacobians) is never tempered, so every replica's
    target is proper. Choose ``min_beta`` so that the hottest replica moves freely between the
    modes, and ``K`` so that neighbours swap often (stat ``swap_accept``, one value per pair,
    NaN for the pairs not proposed in that draw; about 0.2–0.5 is healthy). Pairs that still
    rarely swap after the ladder has adapted call for more temperatures.

    Sample stats: those of :class:`StochasticDynamics` for the cold replica, with
    ``n_grad_evals`` counting all replicas, plus ``swap_accept``, ``betas`` (the ladder in use)
    and ``replica_diverging`` (one flag per replica, coldest first, during tuning too). A hot
    replica recovers from a divergent trajectory as the cold one does, by returning to its
    start; ``diverging`` and ``divergences`` report only the cold replica, whose states are the
    draws.
    """

    name = "replica_exchange_dynamics"
    _state_class = ReplicaExchangeState

    def __init__(
        self,
        vars: Sequence | None = None,
        *,
        n_temperatures: int = 8,
        min_beta: float = 0.1,
        betas: Sequence[float] | None = None,
        adapt_ladder: bool = True,
        model: pm.Model | None = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        **kwargs: Any,
    ):
        model = pm.modelcontext(model)
        if betas is None:
            ladder = geometric_ladder(n_temperatures, min_beta)
        else:
            ladder = np.asarray(betas, dtype=float)
            if (
                ladder.ndim != 1
                or len(ladder) < 2
                or ladder[0] != 1.0
                or not np.all(np.diff(ladder) < 0)
                or ladder[-1] <= 0
            ):
                raise ValueError(
                    "betas must be a strictly decreasing sequence of at least two inverse "
                    f"temperatures in (0, 1] starting at 1, got {betas!r}"
                )
        if initial_point is None:
            initial_point = model.initial_point()
        # Set before StochasticDynamics.__init__, whose reset_tuning starts the ladder from it.
        self.initial_betas = ladder
        self.adapt_ladder = bool(adapt_ladder)
        self.n_tune = 0
        super().__init__(
            vars,
            model=model,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
            **kwargs,
        )
        owned = {v.name for v in self.vars}
        missing = sorted(v.name for v in model.value_vars if v.name not in owned)
        if missing:
            raise ValueError(
                "ReplicaExchangeDynamics must sample every free variable of the model (tempering "
                f"one block of a CompoundStep is not exact); it would not sample {missing}"
            )
        if self._minibatch_rngs:
            raise ValueError("ReplicaExchangeDynamics does not support pm.Minibatch data")
        likelihood_terms = [*model.observed_RVs, *model.potentials]
        if not likelihood_terms:
            raise ValueError(
                "the model has no observed variables or potentials: there is no likelihood to "
                "temper"
            )
        # The number of pairs is known only now: PyMC's __new__ set the class's declarations on
        # the instance, and they are replaced here. A vector stat is an object stat for PyMC's
        # NDArray backend (see `astep`).
        self.stats_dtypes_shapes = {
            **StochasticDynamics.stats_dtypes_shapes,
            "swap_accept": (object, [len(ladder) - 1]),
            "replica_diverging": (object, [len(ladder)]),
            "betas": (object, [len(ladder)]),
        }
        self.stats_dtypes = [{k: dtype for k, (dtype, _) in self.stats_dtypes_shapes.items()}]
        prior = model.logp(vars=model.free_RVs)
        likelihood = model.logp(vars=likelihood_terms)
        (prior, likelihood), flat = join_nonshared_inputs(
            initial_point, [prior, likelihood], self.vars
        )
        self._prior_likelihood = compile(
            [flat],
            [prior, likelihood, pt.grad(prior, flat), pt.grad(likelihood, flat)],
            **(compile_kwargs or {}),
        )
        start = np.concatenate([np.ravel(initial_point[v.name]) for v in self.vars])
        self._prior_likelihood(start.astype(float))  # machine code now, before forking
        self.replica_adapts = [deepcopy(self.step_adapt) for _ in ladder]
        self.replica_potentials = [deepcopy(self.potential) for _ in ladder]
        self.reset_tuning()

    def reset_tuning(self) -> None:
        super().reset_tuning()
        # Adaptation restarts in place: the potentials keep the generators setup_chain gave them.
        # (StochasticDynamics.__init__ calls this before the replicas' lists exist.)
        adapts = getattr(self, "replica_adapts", [])
        potentials = getattr(self, "replica_potentials", [])
        for adapt, potential in zip(adapts, potentials, strict=True):
            adapt.reset()
            potential.reset()
        self.replicas = np.empty((0, 0))
        self.replica_momenta = []
        self.n_swap_rounds = 0
        self.betas = self.initial_betas.copy()
        self.swap_rejections = np.zeros(len(self.betas) - 1)
        self.swap_proposals = np.zeros(len(self.betas) - 1, dtype=int)

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        super().setup_chain(rng, tune, draws)
        self.n_tune = int(tune)
        for potential, seed in zip(
            self.replica_potentials, self.rng.spawn(len(self.betas)), strict=True
        ):
            potential.set_rng(np.random.default_rng(seed))

    def _tempered(self, beta: float):
        def logp_grad(q: np.ndarray) -> tuple[float, np.ndarray]:
            prior, likelihood, d_prior, d_likelihood = self._prior_likelihood(q)
            return float(prior + beta * likelihood), d_prior + beta * d_likelihood

        return logp_grad

    def _adapt_ladder(self, swap_accept: np.ndarray) -> None:
        proposed = ~np.isnan(swap_accept)
        self.swap_rejections[proposed] += 1.0 - swap_accept[proposed]
        self.swap_proposals += proposed
        round_ends = {self.n_tune // 8, self.n_tune // 4, self.n_tune // 2}
        # A round needs a few proposals of every pair for its rates to mean anything.
        if self.n_swap_rounds in round_ends and self.swap_proposals.min() >= 5:
            self.betas = equal_rejection_ladder(
                self.betas, self.swap_rejections / self.swap_proposals
            )
            self.swap_rejections[:] = 0.0
            self.swap_proposals[:] = 0

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        q = np.ascontiguousarray(q0.data, dtype=np.float64)
        if self.replicas.shape != (len(self.betas), q.size):
            self.replicas = np.tile(q, (len(self.betas), 1))
            self.replica_momenta = [p.random() for p in self.replica_potentials]
        self.replicas[0] = q
        n_grad = 0
        cold_stats: dict = {}
        cold_divergences = self.divergences
        replica_diverging = np.zeros(len(self.betas), dtype=bool)
        for k, beta in enumerate(self.betas):
            self.step_adapt, self.potential = self.replica_adapts[k], self.replica_potentials[k]
            self.momentum = self.replica_momenta[k]
            position, stats = self._transitions(self.replicas[k], self._tempered(beta), q0)
            self.replicas[k], self.replica_momenta[k] = position, self.momentum
            n_grad += stats["n_grad_evals"]
            replica_diverging[k] = stats["diverging"]
            if k == 0:
                cold_stats, cold_divergences = stats, self.divergences
        # `divergences` counts the cold replica's, as `diverging` reports it.
        self.divergences = cold_divergences
        self.step_adapt, self.potential = self.replica_adapts[0], self.replica_potentials[0]
        self.momentum = self.replica_momenta[0]
        terms = np.array([self._prior_likelihood(x)[:2] for x in self.replicas])
        order, swap_accept = swap_neighbours(
            terms[:, 1], self.betas, self.n_swap_rounds % 2, self.rng.uniform
        )
        self.replicas = self.replicas[order]
        self.n_swap_rounds += 1
        ladder = self.betas
        if self.tune and self.adapt_ladder:
            self._adapt_ladder(swap_accept)
        n_grad += len(self.betas)
        stats = cold_stats | {
            "n_grad_evals": n_grad,
            "model_logp": float(terms[order[0]].sum()),
            # The leading length-1 axis makes PyMC's np.vstack of object stats over draws give
            # (draw, pair), as for SFPStep's marginals.
            "swap_accept": swap_accept[None, :],
            "replica_diverging": replica_diverging[None, :],
            "betas": ladder[None, :],
        }
        return RaveledVars(self.replicas[0].copy(), q0.point_map_info), [stats]
