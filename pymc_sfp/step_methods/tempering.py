"""``ParallelTempering``: non-reversible parallel tempering from the prior to the posterior, with
any step method as the explorer of each tempered replica, as a PyMC step method.

The numerics (swaps, index process, communication barrier, schedule, stepping stones) are the
pure functions of :mod:`pymc_sfp.core.tempering`; this module adds what PyMC needs. The explorer
is built once, on a view of the model whose log-density is ``prior + β · likelihood`` with a
shared ``β`` (:func:`pymc_sfp.compile.tempered_model`). Each rung gets a clone of it that shares
its compiled functions but owns its per-chain state (the fields of the step's PyMC sampling state:
tuned step size, mass matrix, momentum, random generator), and sets ``β`` before it steps, so
one compilation serves every rung (Pigeons.jl's explorer interface: any kernel invariant for the
rung's tempered distribution). The default explorer, :class:`StochasticDynamics`, instead moves
every rung at once (:class:`~pymc_sfp.step_methods.dynamics.LadderDynamics` on the model's
log-density vectorised over rows and their ``β``,
:func:`pymc_sfp.compile.compile_batched_tempered_density`): the same chains, without ``K``
Python-level step calls per round; after tuning the rounds of a draw then run as one call of
machine code (:mod:`pymc_sfp.core.compiled_tempering`, the ``compiled`` argument).
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any, NamedTuple

import numba
import numpy as np
import pymc as pm
import pytensor
from pymc.blocking import DictToArrayBijection, RaveledVars, StatsType
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import BlockedStep, CompoundStep, flat_statname

from pymc_sfp._validation import check_bool, check_int_at_least
from pymc_sfp.compile import (
    StepGraph,
    compile_batched_tempered_density,
    compile_log_likelihood,
    compile_prior_sampler,
    float64_internals,
    garbage_collector_paused,
    improper_prior_names,
    likelihood_terms,
    random_generators,
    reseed,
    step_graph,
    tempered_model,
)
from pymc_sfp.core.compiled_sweep import ModelCallError
from pymc_sfp.core.compiled_tempering import (
    START_NOT_FINITE,
    LadderError,
    compiled_rounds,
    prior_draws,
)
from pymc_sfp.core.dynamics import swap_acceptance, swap_neighbours
from pymc_sfp.core.tempering import (
    EvidenceEstimate,
    barrier_total,
    check_schedule,
    communication_barrier,
    init_index_process,
    init_swap_record,
    optimal_schedule,
    recommended_n_chains,
    recommended_rounds_per_draw,
    record_swaps,
    rounds_per_round_trip,
    stepping_stone,
    uniform_schedule,
    update_index_process,
)
from pymc_sfp.step_methods._common import (
    FiniteValueCheck,
    ProgressField,
    progressbar_config,
    progressbar_updates,
    user_value_vars,
)
from pymc_sfp.step_methods.dynamics import LadderDynamics, StochasticDynamics

__all__ = ["LogEvidence", "ParallelTempering", "RoundTripWarning", "tempering_log_evidence"]

_PROGRESS_FIELDS: tuple[ProgressField, ...] = (
    ("n_chains", "Chains", "d", 0),
    ("barrier", "Barrier", ".2f", 0.0),
    ("round_trips", "Round trips", "d", 0),
)

#: Leapfrog steps per round of the default explorer: swaps, not the explorer, carry states between
#: the prior and the posterior, and on the nine benchmark targets more rounds of 2 steps made
#: more round trips per density evaluation than rounds of 5 (a scratch scan of 1, 2 and 5).
DEFAULT_N_LEAPFROG = 2

#: Tuning draws of the first adaptation round; rounds then double in length (Pigeons.jl).
FIRST_ROUND = 16

#: ``rounds_per_draw="auto"``: a draw is this many times the fewest rounds per round trip at the
#: tuned swap rates (Theorem 1), within ``AUTO_ROUNDS_RANGE``; ``AUTO_ROUNDS_WITHOUT_TUNING``
#: where tuning measured no swap rates.
AUTO_ROUNDS_PER_ROUND_TRIP = 5.0
AUTO_ROUNDS_RANGE = (10, 100)
AUTO_ROUNDS_WITHOUT_TUNING = 30


class RoundTripWarning(UserWarning):
    """Too few round trips between prior and posterior to trust the weights of separated modes."""


class ParallelTempering(ArrayStepShared):
    r"""Non-reversible parallel tempering on the path from the prior to the posterior.

    ``K`` replicas target ``π_β(x) ∝ p(x) p(y | x)^β`` on a schedule ``0 = β_0 < … < β_{K-1} = 1``
    (Syed et al. 2022). In each *round*, every replica takes one step of the *explorer* for its
    own ``β``; the replica at ``β = 0`` is instead drawn exactly from the prior when the prior can
    be forward-sampled (as ``pm.sample_smc`` draws its first population). Then neighbours propose
    to exchange states, even pairs and odd pairs alternately (the non-reversible DEO scheme,
    Sec. 3), so that a fresh prior draw travels up the ladder without a random walk. A draw is
    ``rounds_per_draw`` rounds (a tuning draw is one), and records the state of the replica at
    ``β = 1``.

    During tuning, the schedule is adapted at the end of rounds of doubling length (16, 32, 64, …
    draws, until half of the tuning draws): the rejection rates of the round estimate the
    communication barrier ``Λ(β)`` (Eq. 17–18), and the new schedule splits it evenly (Eq. 30).
    The number of replicas is set to about ``2Λ`` (within ``[min_chains, max_chains]``). The
    second half of tuning lets every replica's explorer adapt to the final schedule.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable of the model (the default): tempering one block of a
        ``CompoundStep`` would make the hot replicas' targets depend on the other blocks.
    explorer : step class or callable, optional
        Builds the explorer as ``explorer(vars=..., model=..., initial_point=...,
        compile_kwargs=..., **explorer_kwargs)``, like any PyMC step: e.g.
        :class:`~pymc_sfp.StochasticDynamics` (the default, with ``n_leapfrog=2``),
        :class:`~pymc_sfp.SFPStep`, ``pm.Slice`` or ``pm.Metropolis``, or a
        ``functools.partial`` of one. It must declare its per-chain state (PyMC's
        ``sampling_state``), as PyMC's and this package's steps do.
    explorer_kwargs : dict, optional
        Keyword arguments of ``explorer``.
    n_chains : int, optional
        ``K`` at the start (or throughout, with ``adapt_n_chains=False``); ``>= 2``, default 8.
        Not with ``betas``, which sets it.
    betas : array, optional
        An explicit starting schedule instead of the uniform one of ``n_chains`` rungs:
        strictly increasing to 1, from 0 (the prior). With ``prior_draws=False`` it may start at
        a hottest ``β_0 > 0`` (explored like the other rungs, and kept there by the adaptation);
        the prior may then be improper, and there is no stepping-stone evidence.
    rounds_per_draw : int or "auto", optional
        Explore-and-swap rounds per draw after tuning (``>= 1``; a tuning draw is always one
        round). More rounds carry more fresh states from the prior to the posterior between
        draws, so the mode weights of separated modes decorrelate faster per draw, at that many
        times the cost of the rounds; like thinning, but every round's swaps count for the
        barrier. ``"auto"``: at the end of tuning, five times the fewest rounds per round trip
        at the tuned swap rates, ``2 + 2 Σ r_k / (1 − r_k)`` (Theorem 1), within 10–100 (30
        without tuning), so that every draw spans several round trips whatever the barrier
        (the stat ``rounds_per_draw`` records the choice). Default: ``"auto"`` where the
        rounds are compiled (``compiled``, below), where a round costs a few explorer steps of
        machine code; 1 otherwise, where each round costs ``K`` explorer steps from Python.
        With ``"auto"`` the tempering benchmark got every chain's mode weights within about
        0.02 on all nine targets (see the tempering guide).
    adapt_schedule : bool, default True
        Adapt the schedule during tuning (see above). With ``False`` the schedule stays as given.
    adapt_n_chains : bool, default True
        Let ``K`` follow the barrier estimate; only when ``adapt_schedule`` is on (with a fixed
        schedule ``K`` stays fixed too, whatever this says).
    min_chains, max_chains : int, default 4 and 32
        The range of ``K`` when it adapts. ``max_chains`` also sizes the per-rung stats.
    prior_draws : bool, optional
        Draw the ``β = 0`` replica exactly from the prior. Default: when the prior can be
        forward-sampled (:func:`pymc_sfp.compile.compile_prior_sampler`) and the explorer
        samples the whole support (not an ``SFPStep`` with ``bounds`` narrower than it, whose
        rungs sample the target restricted to its box), else explore it. ``True`` makes it an
        error if it cannot.
    min_round_trips : int, default 10
        Warn (:class:`RoundTripWarning`) when a PyMC chain's ladder is predicted at the end of
        tuning to make, or at the end of sampling has completed, fewer round trips in its draws
        after tuning; round trips are counted over the ladder's replicas together.
    vectorized : bool, optional
        Move every rung in one vectorised computation (:class:`~pymc_sfp.step_methods.dynamics.
        LadderDynamics`: one compiled call of the tempered log-density and its gradient per
        leapfrog step for the whole ladder) instead of calling the explorer rung by rung. The
        chains are the same Markov chains either way. Default: when the explorer is
        :class:`~pymc_sfp.StochasticDynamics` with one of PyMC's diagonal or dense mass
        matrices (any ``scaling`` or ``potential`` but a sparse one); ``True`` makes it an
        error otherwise.
    compiled : bool, optional
        Run all the rounds of a draw as one call of machine code
        (:func:`pymc_sfp.core.compiled_tempering.compiled_rounds`): the vectorised ladder's
        dynamics, the swaps, the index process and the swap record, with the same random
        numbers, so the same draws and stats as the NumPy rounds up to the last bits of
        ``exp`` (a tuning draw's one round too, whose transitions and swaps the adaptations
        then read, as they read the NumPy round's: the swap record of tuning is computed with
        NumPy's ``exp``, so the schedule, step sizes and mass matrices adapt exactly as with
        the NumPy rounds). Default: where it applies, i.e. with the vectorised ladder and a
        log-density compiled by PyTensor's Numba backend; other explorers and
        ``compiled=False`` run the NumPy rounds (``fallback_reason`` says why). ``True`` makes
        it an error where it does not apply.
    model, rng, initial_point, compile_kwargs, blocked :
        As for PyMC's steps.

    Notes
    -----
    *The reference.* The prior must be proper (no ``pm.Flat``/``pm.HalfFlat``): it is the
    ``β = 0`` replica. The likelihood is the model's observed variables and ``pm.Potential``
    terms, the prior everything else (with the transforms' Jacobians).

    *How many round trips.* A round trip is a replica's journey from the prior to the posterior
    and back (Sec. 3.4). Each one carries a fresh, independent draw of the prior to the posterior,
    so the weights of modes the explorers cannot cross between are estimated from roughly that
    many independent visits: with 10 round trips a mode weight of 0.3 is uncertain by about
    ±0.15. Their rate, counted over the ladder's replicas together, is at most ``1 / (2 + 2Λ)``
    per round (Theorem 1; a draw is ``rounds_per_draw`` rounds): a barrier ``Λ`` of 5 costs at
    least 12 rounds per round trip, whatever ``K``. The warnings and the ``round_trips`` stat
    count them per PyMC chain.

    *Evidence.* Each chain's stepping-stone estimate of ``log p(y)`` and its standard error are
    the stats ``log_evidence`` and ``log_evidence_se`` of its last draw (NaN in the other draws,
    and for a ladder that stops short of the prior); :func:`tempering_log_evidence` combines
    the chains, computing them from the stats ``log_likelihoods`` and ``betas``.

    *The explorer's stats* are recorded too, under their own names (``sampler_<i>__<name>`` for
    a ``CompoundStep`` explorer), except where a name is one of the stats below: those of the
    replica at ``β = 1`` in the last round of the draw, except counts (integer stats named
    ``n_…``, e.g. ``n_grad_evals``), which are summed over every replica and round of the draw,
    and PyMC's ``warning``, which carries the first warning of any replica, so that ``pm.sample``
    logs it. An explorer with a ``diverging`` stat adds ``replica_diverging``: a flag per rung
    (coldest last, as ``betas``), set if that rung's explorer diverged in any round of the draw.

    Sample stats (per-rung vectors padded with NaN up to ``max_chains``, coldest last):
    ``betas`` (the schedule), ``log_likelihoods`` (``ℓ`` of each rung's state after the swaps),
    ``swap_accept`` (acceptance probability of each pair, NaN if not proposed in that draw),
    ``n_chains``, ``barrier`` (the ``Λ`` estimate: of the last tuning round during tuning,
    then of the swaps since tuning ended), ``round_trips`` (completed by the ladder's replicas
    together since tuning ended; since the last schedule change during tuning),
    ``rounds_per_draw`` (the rounds of the draw: 1 during tuning), ``model_logp`` (``lp`` in the
    DataTree).
    With several rounds per draw ``swap_accept`` is the mean over the rounds that proposed the
    pair, and ``log_likelihoods`` those of the last round.

    References
    ----------
    .. [1] Syed, S., Bouchard-Côté, A., Deligiannidis, G. and Doucet, A. (2022). Non-reversible
       parallel tempering: a scalable highly parallel MCMC scheme. JRSS-B 84(2), 321–350.
    .. [2] Surjanovic, N., Biron-Lattes, M., Tiede, P., Syed, S., Campbell, T. and
       Bouchard-Côté, A. (2023). Pigeons.jl: distributed sampling from intractable distributions.
    """

    name = "parallel_tempering"
    default_blocked = True
    stats_dtypes_shapes: dict[str, tuple[Any, list]] = {
        "n_chains": (np.dtype(np.int64), []),
        "barrier": (np.dtype(np.float64), []),
        "round_trips": (np.dtype(np.int64), []),
        "rounds_per_draw": (np.dtype(np.int64), []),
        "model_logp": (np.dtype(np.float64), []),
        "log_evidence": (np.dtype(np.float64), []),
        "log_evidence_se": (np.dtype(np.float64), []),
    }

    @garbage_collector_paused()
    def __init__(
        self,
        vars: Sequence | None = None,
        *,
        explorer: Callable[..., BlockedStep] | None = None,
        explorer_kwargs: Mapping[str, Any] | None = None,
        n_chains: int | None = None,
        betas: Sequence[float] | None = None,
        rounds_per_draw: int | str | None = None,
        adapt_schedule: bool = True,
        adapt_n_chains: bool = True,
        min_chains: int = 4,
        max_chains: int = 32,
        prior_draws: bool | None = None,
        min_round_trips: int = 10,
        vectorized: bool | None = None,
        compiled: bool | None = None,
        model: pm.Model | None = None,
        rng: Any = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        **kwargs: Any,
    ):
        model = pm.modelcontext(model)
        if kwargs:
            raise TypeError(f"ParallelTempering got unexpected keyword arguments: {sorted(kwargs)}")
        prior_draws = None if prior_draws is None else check_bool(prior_draws, "prior_draws")
        vectorized = None if vectorized is None else check_bool(vectorized, "vectorized")
        compiled = None if compiled is None else check_bool(compiled, "compiled")
        max_chains = check_int_at_least(max_chains, 2, "max_chains")
        min_chains = check_int_at_least(min_chains, 2, "min_chains")
        if min_chains > max_chains:
            raise ValueError(f"min_chains ({min_chains}) must not exceed max_chains ({max_chains})")
        if betas is None:
            n_chains = 8 if n_chains is None else n_chains
            schedule = uniform_schedule(check_int_at_least(n_chains, 2, "n_chains"))
        elif n_chains is not None:
            raise ValueError(
                "give n_chains (a uniform starting schedule) or betas (an explicit one), not "
                f"both: got n_chains={n_chains!r}, betas={betas!r}"
            )
        else:
            schedule = check_schedule(betas, from_prior=prior_draws is not False)
        if explorer is not None and not callable(explorer):
            raise TypeError(
                "explorer must be a step method class (or a callable building a step method "
                f"from vars=, model=, ...), got {explorer!r}"
            )
        if explorer_kwargs is not None and not isinstance(explorer_kwargs, Mapping):
            raise TypeError(
                "explorer_kwargs must be a dict of the explorer's arguments, got "
                f"{explorer_kwargs!r}"
            )
        if rounds_per_draw is not None and not (
            isinstance(rounds_per_draw, str) and rounds_per_draw == "auto"
        ):
            rounds_per_draw = check_int_at_least(
                rounds_per_draw,
                1,
                "rounds_per_draw",
                "rounds_per_draw must be an integer >= 1 or 'auto'",
            )
        if len(schedule) > max_chains:
            raise ValueError(
                f"the starting schedule has {len(schedule)} rungs, more than max_chains="
                f"{max_chains}; raise max_chains or give fewer"
            )
        self.min_round_trips = check_int_at_least(min_round_trips, 0, "min_round_trips")
        if not likelihood_terms(model):
            raise ValueError(
                "the model has no observed variables or potentials: there is no likelihood to "
                "temper"
            )
        value_vars = (
            list(model.value_vars)
            if vars is None
            else user_value_vars(model, vars, type(self).__name__)
        )
        missing = sorted({v.name for v in model.value_vars} - {v.name for v in value_vars})
        if missing:
            raise ValueError(
                f"{type(self).__name__} must sample every free variable of the model (tempering "
                f"one block of a CompoundStep is not exact); it would not sample {missing}"
            )
        improper = improper_prior_names(model)
        if improper and schedule[0] == 0.0:
            raise ValueError(
                f"the prior is improper ({improper} are pm.Flat/pm.HalfFlat): parallel tempering "
                "starts from the prior (β = 0); give them proper priors, e.g. a wide pm.Uniform, "
                "or give betas starting above 0 with prior_draws=False"
            )
        graph = step_graph(model, value_vars, initial_point)
        if random_generators(graph):
            raise ValueError(
                f"{type(self).__name__} does not support pm.Minibatch data: the swaps compare "
                "log-likelihoods, which must be of the full data"
            )

        # One explorer for every rung, on the tempered view of the model: β is shared, float64
        # whatever floatX, so the explorer (any PyMC step) compiles a float64 density.
        if explorer is None:
            explorer = functools.partial(_DeferredDynamics, n_leapfrog=DEFAULT_N_LEAPFROG)
        with float64_internals():
            self._beta = pytensor.shared(np.float64(1.0), name="tempering_beta")
            self._explorer = explorer(
                vars=value_vars,
                model=tempered_model(model, self._beta),
                initial_point=graph.initial_point,
                compile_kwargs=compile_kwargs,
                **dict(explorer_kwargs or {}),
            )
        if not isinstance(self._explorer, BlockedStep | CompoundStep):
            raise TypeError(
                f"explorer must build a PyMC step method, got {type(self._explorer).__name__}"
            )
        boxed = [
            type(method).__name__
            for method in getattr(self._explorer, "methods", [self._explorer])
            if getattr(method, "restricts_support", False)
        ]
        if boxed and prior_draws:
            raise ValueError(
                f"prior_draws=True, but the explorer ({boxed[0]}) samples inside a box narrower "
                "than the support (its `bounds`): draws of the whole prior would leave it. Pass "
                "prior_draws=False; the β = 0 rung is then explored inside the box, as every rung "
                "is"
            )
        self._prior_sampler = None
        # Whether the prior sampler's machine code makes its draws (_prior_states): decided
        # at the first draw.
        self._prior_in_place: bool | None = None
        if schedule[0] == 0.0 and prior_draws is not False and not boxed:
            self._prior_sampler = compile_prior_sampler(graph, compile_kwargs)
            if prior_draws and self._prior_sampler is None:
                raise ValueError(
                    "prior_draws=True, but the prior cannot be drawn from exactly (a variable "
                    "without a random method, or with a non-default transform)"
                )

        if vectorized is None:
            vectorized = LadderDynamics.supports(self._explorer)
        elif vectorized and not LadderDynamics.supports(self._explorer):
            got = (
                f"StochasticDynamics with a {type(self._explorer.potential).__name__} mass matrix"
                if isinstance(self._explorer, StochasticDynamics)
                else type(self._explorer).__name__
            )
            raise ValueError(
                "vectorized=True needs StochasticDynamics as the explorer, with one of PyMC's "
                f"diagonal or dense mass matrices; got {got}"
            )
        if isinstance(self._explorer, _DeferredDynamics):
            self._explorer.compile_density(needed=not vectorized)
        # The ladder reads every rung's prior and likelihood from its tempered density; rung by
        # rung they are evaluated apart from the explorer's step.
        self._tempered_density = self._log_likelihood = None
        if vectorized:
            self._tempered_density = compile_batched_tempered_density(graph, compile_kwargs)
        else:
            self._log_likelihood = compile_log_likelihood(graph, compile_kwargs)
        self._check_finite_values = FiniteValueCheck(graph, compile_kwargs, type(self).__name__)
        self.fallback_reason = self._compiled_rounds_unavailable(compiled, graph.start)
        if compiled and self.fallback_reason is not None:
            raise ValueError(
                f"compiled=True, but the rounds cannot be compiled: {self.fallback_reason}"
            )
        if rounds_per_draw is None:
            rounds_per_draw = "auto" if self.fallback_reason is None else 1
        self._rounds_setting: int | str = rounds_per_draw

        self.initial_betas = schedule
        self.adapt_schedule = check_bool(adapt_schedule, "adapt_schedule")
        self.adapt_n_chains = check_bool(adapt_n_chains, "adapt_n_chains") and self.adapt_schedule
        self.min_chains, self.max_chains = min_chains, max_chains
        own = {
            **ParallelTempering.stats_dtypes_shapes,
            # Vectors are object stats for PyMC's NDArray backend; the leading length-1 axis
            # (see astep) makes its stacking over draws give (draw, rung).
            "betas": (object, [max_chains]),
            "log_likelihoods": (object, [max_chains]),
            "swap_accept": (object, [max_chains - 1]),
        }
        self._forwarded = _ForwardedStats(self._explorer, set(own))
        if self._forwarded.has_diverging:
            own["replica_diverging"] = (object, [max_chains])
        self.stats_dtypes_shapes = self._forwarded.dtypes_shapes | own
        self.stats_dtypes = [{k: dtype for k, (dtype, _) in self.stats_dtypes_shapes.items()}]
        super().__init__(value_vars, graph.shared, blocked=blocked, rng=rng)
        self.tune = True
        self._reset_chain(self.rng, tune=0, draws=0)

    # -- per-chain state ---------------------------------------------------------------------

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        super().setup_chain(rng, tune, draws)
        self._reset_chain(self.rng, tune, draws)

    def _reset_chain(self, rng: np.random.Generator, tune: int, draws: int) -> None:
        """Everything a chain changes, from scratch (PyMC may reuse the step for the next
        chain); the random streams of the explorers and the prior draws come from ``rng``."""
        self.n_tune, self.n_draws = int(tune), int(draws)
        self.tune = tune > 0
        self.rounds_per_draw = (
            AUTO_ROUNDS_WITHOUT_TUNING
            if self._rounds_setting == "auto"
            else int(self._rounds_setting)
        )
        self.betas = self.initial_betas.copy()
        self.round_ends = _round_ends(self.n_tune) if self.adapt_schedule else set()
        self.n_rounds = 0
        self.tuning_draws = 0
        self.draws_done = 0
        self.draw_log_likelihoods: list[np.ndarray] = []
        self.barrier = float("nan")
        self.replicas = np.empty((0, 0))
        self.swap_record = init_swap_record(len(self.betas) - 1)
        self.index_process = init_index_process(len(self.betas))
        self._explorers = self._fresh_explorers(len(self.betas), rng, tune, draws)
        if not self.tune:
            self._stop_explorers()
        if self._prior_sampler is not None:
            reseed(self._prior_sampler[1], rng)

    def _fresh_explorers(
        self, n_chains: int, rng: np.random.Generator, tune: int, draws: int
    ) -> list | LadderDynamics:
        """One clone of the (never stepped) explorer per rung, each with its own random stream;
        or, vectorised, one :class:`LadderDynamics` for every rung."""
        if self._tempered_density is not None:
            return LadderDynamics(self._explorer, n_chains, rng.spawn(1)[0], tune > 0)
        explorers = []
        for seed in rng.spawn(n_chains):
            explorer = _clone_step(self._explorer)
            explorer.setup_chain(np.random.default_rng(seed), tune, draws)
            explorers.append(explorer)
        return explorers

    def reset_tuning(self) -> None:
        self.tune = True

    def stop_tuning(self) -> None:
        if not self.tune:
            return
        self.tune = False
        self._stop_explorers()
        rates = self.swap_record.rejection_rates
        if self.n_draws and np.all(np.isfinite(rates)):
            # Without adaptation no tuning round has estimated it yet.
            self._update_barrier()
            if self._rounds_setting == "auto":
                self.rounds_per_draw = recommended_rounds_per_draw(
                    rates, AUTO_ROUNDS_PER_ROUND_TRIP, *AUTO_ROUNDS_RANGE
                )
            expected = self.n_draws * self.rounds_per_draw / rounds_per_round_trip(rates)
            if expected < self.min_round_trips:
                warnings.warn(
                    "ParallelTempering, end of tuning: at the tuned schedule "
                    f"({len(self.betas)} tempered chains, i.e. rungs; barrier Λ ≈ "
                    f"{self.barrier:.2f}) this PyMC chain's {self.n_draws} draws after tuning "
                    f"are predicted to make {expected:.1f} round trips between prior and "
                    "posterior in all (its ladder's replicas together; Theorem 1 at the swap "
                    f"rates of tuning), fewer than min_round_trips={self.min_round_trips}: "
                    "mode weights will be unreliable; draw more, or raise max_chains if the "
                    "swap rates are low",
                    RoundTripWarning,
                    stacklevel=2,
                )
        self.swap_record = init_swap_record(len(self.betas) - 1)
        self.index_process = self.index_process._replace(round_trips=0)

    def _stop_explorers(self) -> None:
        if isinstance(self._explorers, LadderDynamics):
            self._explorers.stop_tuning()
            return
        for explorer in self._explorers:
            explorer.stop_tuning()

    # -- one draw ------------------------------------------------------------------------------

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        info = q0.point_map_info
        n_chains = len(self.betas)
        if self.replicas.shape[0] != n_chains:
            self.replicas = np.tile(np.asarray(q0.data, dtype=np.float64), (n_chains, 1))
        self.replicas[-1] = q0.data
        collected = self._forwarded.start(n_chains)
        # A tuning draw is one round: the adaptation works round by round.
        n_rounds = 1 if self.tune else self.rounds_per_draw
        rounds = None
        if self.fallback_reason is None:
            rounds = self._compiled_rounds(collected, n_rounds)
        if rounds is not None:
            terms, accepted, proposed = rounds
        else:
            accepted, proposed = np.zeros(n_chains - 1), np.zeros(n_chains - 1)
            for _ in range(n_rounds):
                terms, swap_accept = self._round(info, collected)
                swapped = ~np.isnan(swap_accept)
                np.add(accepted, swap_accept, out=accepted, where=swapped)
                proposed += swapped
        betas = self.betas
        evidence = (np.nan, np.nan)
        if self.tune:
            self.tuning_draws += 1
            if self.tuning_draws in self.round_ends:
                self._adapt()
        else:
            self._update_barrier()
            self.draws_done += 1
            self.draw_log_likelihoods.append(terms[:, 1])
            if self.draws_done == self.n_draws:
                self._warn_round_trips()
                evidence = self._chain_evidence()
        mean_accept = np.divide(
            accepted, proposed, out=np.full(len(proposed), np.nan), where=proposed > 0
        )
        stats = collected.stats(self.max_chains) | {
            "n_chains": n_chains,
            "barrier": self.barrier,
            "round_trips": self.index_process.round_trips,
            "rounds_per_draw": n_rounds,
            "model_logp": float(terms[-1].sum()),
            "log_evidence": evidence[0],
            "log_evidence_se": evidence[1],
            "betas": self._padded(betas, self.max_chains),
            "log_likelihoods": self._padded(terms[:, 1], self.max_chains),
            "swap_accept": self._padded(mean_accept, self.max_chains - 1),
        }
        self._check_finite_values(self.replicas[-1])
        return RaveledVars(self.replicas[-1].copy(), info), [stats]

    def _round(self, info, collected: _Collected) -> tuple[np.ndarray, np.ndarray]:
        """One round: every rung explores (or draws from the prior), then one even or odd set of
        swaps. Returns each rung's ``(prior, log-likelihood)`` after the swaps and the swaps'
        acceptance probabilities."""
        terms = np.empty((len(self.betas), 2))
        if isinstance(self._explorers, LadderDynamics):
            self._explore_ladder(terms, collected)
        else:
            for k, beta in enumerate(self.betas):
                if k == 0 and self._prior_sampler is not None:
                    self.replicas[0] = self._prior_sampler[0]()
                else:
                    self.replicas[k] = self._explore(k, beta, self.replicas[k], info, collected)
                terms[k] = self._log_likelihood(np.ascontiguousarray(self.replicas[k]))
        # A finite sum (the common case) says that every term is finite, with one reduction.
        if not np.isfinite(np.add.reduce(terms, axis=None)):
            self._check_terms(terms)
        order, swap_accept = swap_neighbours(
            terms[:, 1], self.betas, self.n_rounds % 2, self.rng.uniform
        )
        self.replicas, terms = self.replicas[order], terms[order]
        self.n_rounds += 1
        self.swap_record = record_swaps(self.swap_record, swap_accept)
        self.index_process = update_index_process(self.index_process, order)
        return terms, swap_accept

    def _compiled_rounds_unavailable(self, compiled: bool | None, start: np.ndarray) -> str | None:
        """Why the rounds after tuning cannot run compiled (``None`` when they can); compiles
        the kernel otherwise, with no round, so that forked chains inherit the machine code."""
        if compiled is False:
            return "compiled=False"
        if self._tempered_density is None:
            return "the explorer does not run as a vectorised ladder (vectorized=False)"
        try:
            jit_fn, cells = self._tempered_density.machine_code()
            ladder = LadderDynamics(self._explorer, 2, np.random.default_rng(0), tune=False)
            mass, settings = ladder.kernel_inputs()
            replicas = np.tile(np.asarray(start, dtype=np.float64), (2, 1))
            drawn = self._prior_sampler is not None
            d = replicas.shape[1]
            compiled_rounds(
                jit_fn,
                tuple(cell[0] for cell in cells),
                replicas,
                np.array([0.0, 1.0]),
                np.empty((0, d)) if drawn else None,
                np.empty((0, 2 + 2 * d)) if drawn else None,
                ladder._noise,
                ladder._divergences,
                mass,
                ladder._step_size,
                settings,
                0,
                0,
                np.zeros(1),
                np.zeros(1, dtype=np.int64),
                np.arange(2),
                np.array([0, 1]),
                0,
                ladder.rng,
                np.random.default_rng(0),
            )
        except NotImplementedError as err:
            return str(err)
        except numba.core.errors.NumbaError as err:
            return f"Numba cannot compile the rounds for this model: {str(err).splitlines()[0]}"
        return None

    def _compiled_rounds(
        self, collected: _Collected, n_rounds: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The draw's ``n_rounds`` rounds in one call of machine code
        (:func:`~pymc_sfp.core.compiled_tempering.compiled_rounds`): the same draws and stats
        as :meth:`_round`'s, from the same random streams, and while tuning the same
        adaptation. Returns the terms after the last round and the summed and counted swap
        acceptances, or ``None`` where a call of the model raised inside the machine code (the
        rounds then run in Python, which raises the model's error itself)."""
        ladder = self._explorers
        prior_states = prior_parts = None
        if self._prior_sampler is not None:
            prior_states = self._prior_states(n_rounds)
            if prior_states is None:
                return None
            prior_parts = self._prior_parts(prior_states)
        jit_fn, cells = self._tempered_density.machine_code()
        mass, settings = ladder.kernel_inputs()
        index, record = self.index_process, self.swap_record
        try:
            result = compiled_rounds(
                jit_fn,
                tuple(cell[0] for cell in cells),
                self.replicas,
                self.betas,
                prior_states,
                prior_parts,
                ladder._noise,
                ladder._divergences,
                mass,
                ladder._step_size,
                settings,
                self.n_rounds,
                n_rounds,
                record.rejections,
                record.proposals,
                index.rung,
                index.last_end,
                index.round_trips,
                ladder.rng,
                self.rng,
            )
        except ModelCallError:
            return None
        except LadderError as err:
            if err.status == START_NOT_FINITE:
                first = 1 if self._prior_sampler is not None else 0
                raise ladder.start_error(np.flatnonzero(err.bad) + first) from None
            self._check_terms(err.terms)
            raise
        self.replicas = result.replicas
        self.n_rounds += n_rounds
        accepted, proposed = result.swap_accepted, result.swap_proposed
        if self.tune:
            # The schedule adapts to the swap record: computed with NumPy's exp, as the NumPy
            # rounds compute it (the C library's exp of the machine code may differ in the last
            # bit, which the adaptation would carry into every later draw).
            swap_accept = np.array([swap_acceptance(r) for r in result.last_round.swap_log_ratio])
            self.swap_record = record_swaps(record, swap_accept)
            proposed = (~np.isnan(swap_accept)).astype(np.float64)
            accepted = np.where(proposed == 1.0, swap_accept, 0.0)
        else:
            self.swap_record = record._replace(
                rejections=result.rejections, proposals=result.proposals
            )
        self.index_process = index._replace(
            rung=result.rung, last_end=result.last_end, round_trips=result.round_trips
        )
        cold, counts = ladder.compiled_stats(result)
        collected.add_compiled(cold, counts, result.diverging)
        if self.tune:
            first = 0 if prior_states is None else 1
            ladder.adapt_compiled(result.last_round, np.arange(first, len(self.betas)))
        return result.terms, accepted, proposed

    def _prior_parts(self, states: np.ndarray) -> np.ndarray:
        """The prior rung's ``states`` (rows) with what the ladder's tempered density is formed
        from, side by side: ``[prior, likelihood, ∇ prior, ∇ likelihood]``, in one call (its
        rows are computed alike, so the compiled rounds, which pass a draw's prior states
        together, and the NumPy rounds, one at a time, get the same numbers)."""
        return np.array(self._tempered_density.parts(states))

    def _prior_states(self, n_rounds: int) -> np.ndarray | None:
        """The prior rung's draws of ``n_rounds`` rounds, as many calls of the prior sampler
        would make them: through its machine code in one call where it has one that advances
        its generator in place (PyTensor's Numba backend), else call by call. ``None`` where
        the sampler raised inside the machine code."""
        draw = self._prior_sampler[0]
        if self._prior_in_place is None:
            self._prior_in_place = _advances_in_place(draw)
        if self._prior_in_place:
            # Looked up at each call: the function's storage, which seeding a chain refills,
            # is not the same object after the step is copied to a worker process.
            vm = draw.function.vm
            try:
                return prior_draws(vm.jit_fn, vm.inputs[0][0], n_rounds, self.replicas.shape[1])
            except ModelCallError:
                return None
        return np.array([draw() for _ in range(n_rounds)])

    def _check_terms(self, terms: np.ndarray) -> None:
        """Raise where a rung's prior or likelihood is not finite, except a likelihood of 0 at
        the prior (read into ``terms`` as ``-inf``, as a NaN is too)."""
        # A state of the prior (β = 0) may have likelihood 0 (a hard constraint, or a NaN,
        # which is zero density as everywhere in the package): it is never swapped up, since the
        # swap's acceptance is then 0.
        terms[:, 1] = np.where(np.isnan(terms[:, 1]), -np.inf, terms[:, 1])
        valid = np.isfinite(terms[:, 0]) & (
            np.isfinite(terms[:, 1]) | ((self.betas == 0.0) & (terms[:, 1] == -np.inf))
        )
        if not np.all(valid):
            bad = np.flatnonzero(~valid).tolist()
            raise pm.exceptions.SamplingError(
                f"{type(self).__name__}: the prior or likelihood is not finite at the states of "
                f"rungs {bad} (β = {self.betas[bad]})"
            )

    def _explore(
        self, k: int, beta: float, q: np.ndarray, info, collected: _Collected
    ) -> np.ndarray:
        """One step of the explorer of rung ``k`` at ``β``."""
        self._beta.set_value(np.float64(beta))
        point = DictToArrayBijection.rmap(RaveledVars(q, info))
        new_point, stats = self._explorers[k].step(point)
        collected.add(k, stats)
        return DictToArrayBijection.map({name: new_point[name] for name, *_ in info}).data

    def _explore_ladder(self, terms: np.ndarray, collected: _Collected) -> None:
        """Every rung's explorer step as one vectorised :class:`LadderDynamics` step (the prior
        rung drawn instead, where it is), filling ``terms`` with each rung's prior and
        log-likelihood."""
        rungs = np.arange(len(self.betas))
        if self._prior_sampler is not None:
            self.replicas[0] = self._prior_sampler[0]()
            terms[0] = self._prior_parts(self.replicas[:1])[0, :2]
            rungs = rungs[1:]
        betas = self.betas[rungs]

        def density(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return self._tempered_density(x, betas)

        state, stats = self._explorers.step(self.replicas[rungs], rungs, density)
        self.replicas[rungs] = state.position
        terms[rungs] = state.aux
        collected.add_batch(rungs, stats)

    @staticmethod
    def _padded(values: np.ndarray, size: int) -> np.ndarray:
        out = np.full((1, size), np.nan)
        out[0, : len(values)] = values
        return out

    # -- adaptation ------------------------------------------------------------------------------

    def _update_barrier(self) -> None:
        total = barrier_total(self.swap_record)
        if np.isfinite(total):
            self.barrier = total

    def _adapt(self) -> None:
        """End of a tuning round: the schedule (and the number of chains) from its swaps."""
        rates = self.swap_record.rejection_rates
        if not np.all(np.isfinite(rates)):
            return
        barrier = communication_barrier(self.betas, rates)
        self.barrier = barrier.total
        n_chains = len(self.betas)
        if self.adapt_n_chains:
            n_chains = recommended_n_chains(barrier.total, self.min_chains, self.max_chains)
        betas = optimal_schedule(barrier, n_chains)
        if n_chains != len(self.betas):
            # Each new rung starts from the state of the old rung nearest in barrier; the
            # explorers start afresh (their tuning restarts on the new rungs). A rung above the
            # prior never takes the prior rung's state, whose likelihood may be 0.
            distance = np.abs(barrier(betas)[:, None] - barrier.cumulative[None, :])
            if self.betas[0] == 0.0:
                distance[betas > 0.0, 0] = np.inf
            nearest = distance.argmin(1)
            self.replicas = self.replicas[nearest]
            self._explorers = self._fresh_explorers(n_chains, self.rng, self.n_tune, self.n_draws)
            self.index_process = init_index_process(n_chains)
        self.betas = betas
        self.swap_record = init_swap_record(n_chains - 1)

    def _chain_evidence(self) -> tuple[float, float]:
        """The chain's stepping-stone log evidence and its standard error, from the draws after
        tuning (NaN for a ladder that stops short of the prior, or fewer than 4 draws)."""
        if self.betas[0] != 0.0 or len(self.draw_log_likelihoods) < 4:
            return np.nan, np.nan
        estimate = stepping_stone(self.betas, np.array(self.draw_log_likelihoods))
        return estimate.log_evidence, estimate.standard_error

    def _warn_round_trips(self) -> None:
        trips = self.index_process.round_trips
        if trips < self.min_round_trips:
            warnings.warn(
                f"ParallelTempering, end of sampling: this PyMC chain's ladder "
                f"({len(self.betas)} tempered chains, i.e. rungs; barrier Λ ≈ "
                f"{self.barrier:.2f} from the swaps after tuning) completed {trips} round trips "
                "between prior and posterior in all (its replicas together) during its "
                f"{self.n_draws} draws after tuning "
                "(a trip begun in tuning counts when it ends), fewer than min_round_trips="
                f"{self.min_round_trips}: the weights of separated modes rest on few "
                "independent visits",
                RoundTripWarning,
                stacklevel=2,
            )

    @staticmethod
    def _progressbar_config(n_chains=1):
        return progressbar_config(_PROGRESS_FIELDS, n_chains)

    @staticmethod
    def _make_progressbar_update_functions():
        return progressbar_updates(_PROGRESS_FIELDS)


class _ForwardedStats:
    """Which of the explorer's stats a draw records, and how (see :class:`ParallelTempering`'s
    Notes): names flattened as PyMC flattens a ``CompoundStep``'s, clashes with the tempering's
    own stats dropped, counts summed."""

    def __init__(self, explorer: Any, own: set[str]):
        self.compound = isinstance(explorer, CompoundStep)
        self.dtypes_shapes = {
            name: spec for name, spec in explorer.stats_dtypes_shapes.items() if name not in own
        }
        self.counts = {
            name
            for name, (dtype, _) in self.dtypes_shapes.items()
            if name.rpartition("__")[2].startswith("n_")
            and np.issubdtype(np.dtype(dtype), np.integer)
        }
        self.warnings = {
            name for name in self.dtypes_shapes if name.rpartition("__")[2] == "warning"
        }
        self.has_diverging = "diverging" in self.dtypes_shapes

    def flatten(self, stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {
            flat_statname(i, name) if self.compound else name: value
            for i, part in enumerate(stats)
            for name, value in part.items()
        }

    def start(self, n_chains: int) -> _Collected:
        return _Collected(self, n_chains)


class _Collected:
    """The explorer stats of one draw, gathered over its rounds and rungs."""

    def __init__(self, forwarded: _ForwardedStats, n_chains: int):
        self.forwarded = forwarded
        self.n_chains = n_chains
        self.cold: dict[str, Any] = {}
        self.counts = dict.fromkeys(forwarded.counts, 0)
        self.warnings: dict[str, Any] = dict.fromkeys(forwarded.warnings)
        self.diverging = np.zeros(n_chains, dtype=bool)
        self._cold_batch: Mapping[str, np.ndarray] | None = None

    def add(self, rung: int, stats: Sequence[Mapping[str, Any]]) -> None:
        flat = self.forwarded.flatten(stats)
        if rung == self.n_chains - 1:
            self.cold = flat
        for name in self.counts:
            self.counts[name] += int(flat.get(name, 0))
        for name in self.warnings:
            if self.warnings[name] is None:
                self.warnings[name] = flat.get(name)
        self.diverging[rung] |= bool(flat.get("diverging", False))

    def add_batch(self, rungs: np.ndarray, stats: Mapping[str, np.ndarray]) -> None:
        """The stats of a :class:`~pymc_sfp.step_methods.dynamics.LadderDynamics` step: one
        value per rung in ``rungs`` (in increasing order)."""
        # The cold rung is the last of the rungs the ladder steps (the prior rung, drawn
        # instead, is the first); its stats are read out at the end of the draw, from the
        # last round's.
        if rungs[-1] == self.n_chains - 1:
            self._cold_batch = stats
        for name in self.counts:
            self.counts[name] += int(np.add.reduce(stats.get(name, 0), axis=None))
        self.diverging[rungs] |= stats["diverging"]

    def add_compiled(
        self, cold: Mapping[str, Any], counts: Mapping[str, int], diverging: np.ndarray
    ) -> None:
        """The stats of compiled rounds (:meth:`LadderDynamics.compiled_stats`): the cold
        rung's of the last round, the counts over every rung and round, and per rung whether it
        diverged in any round."""
        self.cold = dict(cold)
        self._cold_batch = None
        for name in self.counts:
            self.counts[name] += counts.get(name, 0)
        self.diverging |= diverging

    def stats(self, max_chains: int) -> dict[str, Any]:
        if self._cold_batch is not None:
            self.cold = {name: values[-1] for name, values in self._cold_batch.items()}
            self._cold_batch = None
        out = {
            name: value for name, value in self.cold.items() if name in self.forwarded.dtypes_shapes
        }
        out |= self.counts | self.warnings
        if self.forwarded.has_diverging:
            flags = np.zeros((1, max_chains), dtype=bool)
            flags[0, : self.n_chains] = self.diverging
            out["replica_diverging"] = flags
        return out


class _DeferredDynamics(StochasticDynamics):
    """The default explorer: :class:`StochasticDynamics` that compiles its log-density and
    gradient only when :meth:`compile_density` says they are needed. The vectorised ladder
    (:class:`LadderDynamics`) reads the explorer's settings and adaptation only and evaluates the
    whole ladder through its own compiled function, so compiling the explorer's would be wasted
    (about a second)."""

    def _compile_density(self, graph: StepGraph, compile_kwargs: dict | None) -> None:
        self._deferred = (graph, compile_kwargs)

    def compile_density(self, *, needed: bool) -> None:
        """Compile now if ``needed`` (the rungs are stepped one by one); drop what compiling
        needs either way."""
        deferred = self.__dict__.pop("_deferred")
        if needed:
            super()._compile_density(*deferred)


# Messages name the step as users know it (pickling goes by the qualified name, unchanged).
_DeferredDynamics.__name__ = StochasticDynamics.__name__


def _clone_step(step: Any) -> Any:
    """A copy of a step method that shares its compiled functions but owns its per-chain state:
    the attributes its PyMC sampling state declares (deep copies; the sub-steps of a
    ``CompoundStep`` are cloned in turn). Stepping the clone leaves ``step`` untouched."""
    clone = copy.copy(step)
    if isinstance(step, CompoundStep):
        clone.methods = [_clone_step(method) for method in step.methods]
        return clone
    copied: dict[int, Any] = {}
    for field in fields(step._state_class):
        if not field.metadata.get("tensor_name", False) and hasattr(step, field.name):
            original = getattr(step, field.name)
            setattr(clone, field.name, copy.deepcopy(original))
            if hasattr(original, "__dict__"):  # an object, not a shared immutable like True
                copied[id(original)] = getattr(clone, field.name)
    # A helper object that holds part of that state must hold the clone's copy: PyMC's HMC
    # integrator keeps the potential (mass matrix) whose momenta it prices, and with the
    # template's it computed energies under a matrix that the rung's momenta did not come from.
    for name, helper in vars(step).items():
        if id(helper) in copied or not hasattr(helper, "__dict__") or callable(helper):
            continue
        held = {key for key, value in vars(helper).items() if id(value) in copied}
        if held:
            rewired = copy.copy(helper)
            for key in held:
                setattr(rewired, key, copied[id(getattr(helper, key))])
            setattr(clone, name, rewired)
    return clone


def _advances_in_place(draw: Callable[[], np.ndarray]) -> bool:
    """Whether the prior sampler has machine code (PyTensor's Numba backend) of one generator
    that returns the generator it is given, advanced (tried on a copy): its draws are then
    those of the sampler, and :func:`~pymc_sfp.core.compiled_tempering.prior_draws` makes
    them."""
    function = getattr(draw, "function", None)
    jit_fn = getattr(getattr(function, "vm", None), "jit_fn", None)
    cells = getattr(function.vm, "inputs", ()) if jit_fn is not None else ()
    if not (
        len(cells) == 1
        and isinstance(cells[0][0], np.random.Generator)
        and function.maker.fgraph.update_mapping == {1: 0}
    ):
        return False
    trial = copy.deepcopy(cells[0][0])
    return jit_fn(trial)[-1] is trial


def _round_ends(n_tune: int) -> set[int]:
    """Ends of tuning rounds of doubling length, 16, 16 + 32, …, within the first half."""
    ends, end, length = set(), 0, FIRST_ROUND
    while end + length <= n_tune // 2:
        end += length
        ends.add(end)
        length *= 2
    return ends


class LogEvidence(NamedTuple):
    """The stepping-stone estimate of ``log p(y)`` from a :class:`ParallelTempering` run."""

    log_evidence: float
    standard_error: float
    per_chain: tuple[EvidenceEstimate, ...]


def tempering_log_evidence(idata: Any) -> LogEvidence:
    """The stepping-stone log evidence of a :class:`ParallelTempering` run, with its standard
    error (:func:`pymc_sfp.core.tempering.stepping_stone`, one estimate per chain, averaged).

    Parameters
    ----------
    idata : DataTree
        What ``pm.sample`` returned; reads ``sample_stats`` ``betas`` and ``log_likelihoods``
        of the draws after tuning (the schedule is fixed there).

    Raises
    ------
    ValueError
        If the stats are missing (not a ``ParallelTempering`` run), a chain's schedule changes
        within the draws (tuning draws kept with ``discard_tuned_samples=False``), or its
        ladder does not start at the prior (``β = 0``; e.g. a ``ReplicaExchangeDynamics`` run).
    """
    try:
        stats = idata["sample_stats"]
        betas = np.asarray(stats["betas"].values, dtype=float)
        ell = np.asarray(stats["log_likelihoods"].values, dtype=float)
    except KeyError:
        raise ValueError(
            "idata has no sample_stats betas/log_likelihoods: pass the result of pm.sample with "
            "step=ParallelTempering(...)"
        ) from None
    estimates = []
    for chain in range(betas.shape[0]):
        rungs = ~np.isnan(betas[chain, 0])
        schedule = betas[chain][:, rungs]
        if not np.all(schedule == schedule[0]):
            raise ValueError(
                f"the schedule of chain {chain} changes within the draws: use only draws after "
                "tuning (pm.sample's default discard_tuned_samples=True)"
            )
        if schedule[0][0] != 0.0:
            raise ValueError(
                f"the ladder of chain {chain} starts at β = {schedule[0][0]:.4g}, not at the "
                "prior (β = 0): stepping stones need the whole path from the prior (the run's "
                "log_evidence stat is NaN too); sample with a ladder from 0, as "
                "ParallelTempering's default"
            )
        estimates.append(stepping_stone(schedule[0], ell[chain][:, rungs]))
    values = np.array([e.log_evidence for e in estimates])
    errors = np.array([e.standard_error for e in estimates])
    # Independent chains: the mean's error is the root of the summed variances over C².
    return LogEvidence(
        float(values.mean()), float(np.sqrt(np.sum(errors**2)) / len(errors)), tuple(estimates)
    )
