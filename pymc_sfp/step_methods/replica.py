"""``ReplicaExchangeDynamics``: stochastic dynamics on a ladder of tempered likelihoods with
replica exchange, as a PyMC step method.

Each replica runs the transitions of :class:`~pymc_sfp.StochasticDynamics` with its own momentum,
step size and mass matrix; the swaps and the ladder's adaptation are the plain functions of
:mod:`pymc_sfp.core.dynamics`. Prior and likelihood are compiled apart
(:func:`pymc_sfp.compile.compile_prior_likelihood`) and each replica's state carries both, so a
swap needs no further evaluation of the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from typing import Any

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars, StatsType
from pymc.step_methods.state import dataclass_state

from pymc_sfp._validation import check_real
from pymc_sfp.compile import StepGraph, compile_prior_likelihood, likelihood_terms
from pymc_sfp.core.dynamics import (
    LogpGrad,
    equal_rejection_ladder,
    geometric_ladder,
    swap_neighbours,
)
from pymc_sfp.step_methods._common import continuous_value_vars
from pymc_sfp.step_methods.dynamics import StochasticDynamics, StochasticDynamicsState

__all__ = ["ReplicaExchangeDynamics"]

#: The geometric ladder used when no ``betas`` are given: its size and its hottest temperature.
DEFAULT_TEMPERATURES = 8
DEFAULT_MIN_BETA = 0.1


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
    n_temperatures : int, optional
        ``K``, an integer ``>= 2``; 8 unless ``betas`` is given.
    min_beta : float, optional
        ``β_{K-1}`` in ``(0, 1)``; 0.1 unless ``betas`` is given. The starting ladder is
        geometric (:func:`geometric_ladder`).
    betas : array, optional
        An explicit ladder instead of ``n_temperatures`` and ``min_beta`` (giving it together
        with either is an error): strictly decreasing, starting at 1, all in ``(0, 1]``.
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
        n_temperatures: int | None = None,
        min_beta: float | None = None,
        betas: Sequence[float] | None = None,
        adapt_ladder: bool = True,
        model: pm.Model | None = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        **kwargs: Any,
    ):
        model = pm.modelcontext(model)
        if betas is None:
            ladder = geometric_ladder(
                DEFAULT_TEMPERATURES if n_temperatures is None else n_temperatures,
                DEFAULT_MIN_BETA if min_beta is None else check_real(min_beta, "min_beta"),
            )
        elif n_temperatures is not None or min_beta is not None:
            raise ValueError(
                "give either betas (an explicit ladder) or n_temperatures/min_beta (a geometric "
                f"one), not both: got betas={betas!r}, n_temperatures={n_temperatures!r}, "
                f"min_beta={min_beta!r}"
            )
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
        if not likelihood_terms(model):
            raise ValueError(
                "the model has no observed variables or potentials: there is no likelihood to "
                "temper"
            )
        owned = {v.name for v in continuous_value_vars(model, vars, type(self).__name__)}
        missing = sorted(v.name for v in model.value_vars if v.name not in owned)
        if missing:
            raise ValueError(
                "ReplicaExchangeDynamics must sample every free variable of the model (tempering "
                f"one block of a CompoundStep is not exact); it would not sample {missing}"
            )
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

    def _compile_density(self, graph: StepGraph, compile_kwargs: dict | None) -> None:
        if self._minibatch_rngs:
            raise ValueError("ReplicaExchangeDynamics does not support pm.Minibatch data")
        # Only the tempered pieces: every replica, the cold one too, is prior + β · likelihood.
        self._prior_likelihood = compile_prior_likelihood(graph, compile_kwargs)

    def _tempered(self, beta: float) -> LogpGrad:
        """``q ↦ (prior + β likelihood, its gradient, (prior, likelihood))``."""

        def logp_grad(q: np.ndarray) -> tuple[float, np.ndarray, tuple[float, float]]:
            prior, likelihood, d_prior, d_likelihood = self._prior_likelihood(q)
            return prior + beta * likelihood, d_prior + beta * d_likelihood, (prior, likelihood)

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
        replica_diverging = np.zeros(len(self.betas), dtype=bool)
        terms = np.empty((len(self.betas), 2))
        for k, beta in enumerate(self.betas):
            state, stats = self._transitions(
                self.replicas[k],
                self._tempered(beta),
                q0,
                self.replica_momenta[k],
                self.replica_adapts[k],
                self.replica_potentials[k],
            )
            self.replicas[k], self.replica_momenta[k] = state.position, state.momentum
            terms[k] = state.aux
            n_grad += stats["n_grad_evals"]
            replica_diverging[k] = stats["diverging"]
            if k == 0:
                cold_stats = stats
        # `divergences` counts the cold replica's, as `diverging` reports it.
        if cold_stats["diverging"] and not self.tune:
            self.divergences += 1
        self.momentum = self.replica_momenta[0]
        order, swap_accept = swap_neighbours(
            terms[:, 1], self.betas, self.n_swap_rounds % 2, self.rng.uniform
        )
        self.replicas = self.replicas[order]
        self.n_swap_rounds += 1
        ladder = self.betas
        if self.tune and self.adapt_ladder:
            self._adapt_ladder(swap_accept)
        stats = cold_stats | {
            "divergences": self.divergences,
            "n_grad_evals": n_grad,
            "model_logp": float(terms[order[0]].sum()),
            # The leading length-1 axis makes PyMC's np.vstack of object stats over draws give
            # (draw, pair), as for SFPStep's marginals.
            "swap_accept": swap_accept[None, :],
            "replica_diverging": replica_diverging[None, :],
            "betas": ladder[None, :],
        }
        return RaveledVars(self.replicas[0].copy(), q0.point_map_info), [stats]
