"""``ReplicaExchangeDynamics``: stochastic dynamics on a ladder of tempered likelihoods with
replica exchange — :class:`~pymc_sfp.ParallelTempering` with :class:`~pymc_sfp.StochasticDynamics`
as the explorer of every replica and a ladder that stops at a hottest ``β > 0``.

There is one tempering implementation (``ParallelTempering``); this class only translates the
dynamics-style arguments (a geometric ladder from 1 down to ``min_beta``, the dynamics' own
keyword arguments) into it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import pymc as pm

from pymc_sfp._validation import check_bool, check_real
from pymc_sfp.core.dynamics import geometric_ladder
from pymc_sfp.step_methods.dynamics import StochasticDynamics
from pymc_sfp.step_methods.tempering import ParallelTempering, _DeferredDynamics

__all__ = ["ReplicaExchangeDynamics"]

#: The geometric ladder used when no ``betas`` are given: its size and its hottest temperature.
DEFAULT_TEMPERATURES = 8
DEFAULT_MIN_BETA = 0.1
#: Arguments of StochasticDynamics that the ladder sets itself, not settings a user passes on.
_NOT_SETTINGS = {
    "self",
    "vars",
    "model",
    "rng",
    "initial_point",
    "compile_kwargs",
    "blocked",
    "kwargs",
}


class ReplicaExchangeDynamics(ParallelTempering):
    r"""Stochastic dynamics with replica exchange (parallel tempering) over the likelihood.

    ``K`` replicas of the chain target ``p(θ) · p(y | θ)^β_k`` for a ladder ``1 = β_0 > … >
    β_{K-1} = min_beta``; each runs the transitions of :class:`StochasticDynamics` (its own
    momentum, tuned step size and mass matrix), and after every draw neighbouring replicas
    propose to exchange their states, even and odd pairs alternately (the non-reversible scheme
    of :class:`ParallelTempering`, which this is with ``explorer=StochasticDynamics``, the ladder
    reversed, ``prior_draws=False`` and a fixed number of replicas). Hot replicas cross the
    barriers between modes of the likelihood and hand what they find down to the cold replica
    ``β = 1``, whose states are the draws. Exact for ``correct=True``. Each draw costs ``K``
    times a draw of :class:`StochasticDynamics`.

    Prefer :class:`ParallelTempering` for new work: its ladder reaches the prior (``β = 0``,
    drawn exactly), so no barrier is left at the hottest replica, and it chooses the number of
    replicas. This class keeps a hottest ``β > 0``, which also allows improper priors.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable of the model (the default): tempering one block inside a
        ``CompoundStep`` is not exact, because the hot replicas' targets would depend on the
        other blocks.
    n_temperatures : int, optional
        ``K``, an integer ``>= 2``; 8 unless ``betas`` is given.
    min_beta : float, optional
        The hottest ``β`` in ``(0, 1)``; 0.1 unless ``betas`` is given. The starting ladder is
        geometric (:func:`~pymc_sfp.core.dynamics.geometric_ladder`). The hottest replica must
        move freely between the modes: a barrier of ``B`` nats in the likelihood is still
        ``min_beta · B`` there (0.1 leaves 11 of a 110-nat barrier, which it will not cross).
    betas : array, optional
        An explicit ladder instead of ``n_temperatures`` and ``min_beta`` (giving it together
        with either is an error): strictly decreasing, starting at 1, all in ``(0, 1]``.
    adapt_ladder : bool, default True
        During tuning, move the inner temperatures so that neighbours reject swaps equally often
        (:func:`pymc_sfp.core.tempering.optimal_schedule`, in rounds of doubling length as
        :class:`ParallelTempering` does). The ends ``1`` and ``min_beta`` stay.
    rounds_per_draw : int, default 1
        As for :class:`ParallelTempering`.
    **kwargs :
        As for :class:`StochasticDynamics` (``pm.Minibatch`` data is not supported); ``rng``,
        ``initial_point``, ``compile_kwargs`` and ``blocked`` as for any PyMC step.

    Notes
    -----
    The likelihood is the model's observed variables together with its ``pm.Potential`` terms;
    the prior (free variables, with their Jacobians) is never tempered, so every replica's
    target is proper. Choose ``K`` so that neighbours swap often (stat ``swap_accept``, one value
    per pair, NaN for the pairs not proposed in that draw; about 0.2–0.5 is healthy).

    Sample stats: those of :class:`ParallelTempering`, rungs ordered hottest first, coldest
    last (``betas``, ``swap_accept``, ``log_likelihoods``, ``replica_diverging``), and those of
    :class:`StochasticDynamics` for the cold replica, with ``n_grad_evals`` and ``n_accepted``
    summed over all replicas. A hot replica recovers from a divergent trajectory as the cold one
    does, by returning to its start; ``diverging`` and ``divergences`` report only the cold
    replica, whose states are the draws.
    """

    name = "replica_exchange_dynamics"

    def __init__(
        self,
        vars: Sequence | None = None,
        *,
        n_temperatures: int | None = None,
        min_beta: float | None = None,
        betas: Sequence[float] | None = None,
        adapt_ladder: bool = True,
        rounds_per_draw: int = 1,
        model: pm.Model | None = None,
        rng: Any = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        **kwargs: Any,
    ):
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
            try:
                ladder = np.asarray(betas, dtype=float)
            except (TypeError, ValueError):
                ladder = np.empty(0)  # not numbers: refused below, naming the argument
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
        settings = set(inspect.signature(StochasticDynamics).parameters) - _NOT_SETTINGS
        unknown = sorted(set(kwargs) - settings)
        if unknown:
            raise TypeError(
                f"ReplicaExchangeDynamics got unexpected keyword arguments: {unknown}; besides "
                f"its own, it takes StochasticDynamics' settings: {sorted(settings)}"
            )
        super().__init__(
            vars,
            explorer=functools.partial(_DeferredDynamics, **kwargs),
            betas=ladder[::-1],
            rounds_per_draw=rounds_per_draw,
            adapt_schedule=check_bool(adapt_ladder, "adapt_ladder"),
            adapt_n_chains=False,
            min_chains=len(ladder),
            max_chains=len(ladder),
            prior_draws=False,
            min_round_trips=0,
            model=model,
            rng=rng,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
            blocked=blocked,
        )
