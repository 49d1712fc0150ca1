"""Non-reversible parallel tempering on the path from the prior to the posterior, as plain
functions over arrays (Syed, Bouchard-Côté, Deligiannidis & Doucet 2022, "Non-reversible parallel
tempering: a scalable highly parallel MCMC scheme", JRSS-B 84, 321–350).

Replica ``k`` of a ladder ``0 = β_0 < β_1 < … < β_{K-1} = 1`` targets the tempered density

    π_β(x) ∝ p(x) · p(y | x)^β,      log π_β = prior + β · loglik,

so ``β = 0`` is the prior (a proper reference that can often be drawn from exactly) and
``β = 1`` the posterior. (A ladder may also stop at a hottest ``β_0 > 0``, explored like the
other rungs; the schedule's functions accept it, the stepping-stone evidence needs ``β_0 = 0``.)
After each exploration step neighbours propose to exchange their states,
the even pairs ``(0, 1), (2, 3), …`` and the odd pairs ``(1, 2), (3, 4), …`` alternately
(the deterministic even/odd scheme, DEO, Sec. 3.2): a state then keeps moving in one direction
along the ladder until a swap is rejected, which is what makes the scheme non-reversible.

The pieces, each a pure function or a ``NamedTuple``:

* :func:`pymc_sfp.core.dynamics.swap_neighbours`: one even or odd round of swaps;
* :class:`IndexProcess` and :func:`update_index_process`: which state sits at which rung, which
  end it visited last, and the round trips completed (reference → target → reference);
* :class:`SwapRecord` and :func:`record_swaps`: the rejection rate of each pair;
* :func:`communication_barrier`: the cumulative barrier ``Λ(β)`` and the global barrier ``Λ``
  (Eq. 17–18, Sec. 4), with :func:`optimal_schedule` (Sec. 5.1, Eq. 30) and
  :func:`recommended_n_chains`, :func:`rounds_per_round_trip` (Theorem 1) and
  :func:`recommended_rounds_per_draw`;
* :func:`stepping_stone`: the log evidence from the replicas' log-likelihoods, with a standard
  error that accounts for autocorrelation (batch means) and for the correlation between rungs.

Nothing here imports PyMC.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.optimize import brentq

__all__ = [
    "Barrier",
    "EvidenceEstimate",
    "IndexProcess",
    "SwapRecord",
    "barrier_total",
    "check_schedule",
    "communication_barrier",
    "init_index_process",
    "init_swap_record",
    "optimal_schedule",
    "recommended_n_chains",
    "recommended_rounds_per_draw",
    "record_swaps",
    "rounds_per_round_trip",
    "stepping_stone",
    "uniform_schedule",
    "update_index_process",
]


def check_schedule(
    betas: np.ndarray, name: str = "betas", *, from_prior: bool = True
) -> np.ndarray:
    """``betas`` as a float array if it is a valid schedule, else ``ValueError`` naming ``name``.

    A schedule is strictly increasing to 1 with at least two rungs, and starts at 0 (the prior)
    when ``from_prior``; otherwise its hottest rung may be any ``β_0`` in ``[0, 1)`` (a ladder
    whose hottest replica is explored rather than drawn from the prior)."""
    try:
        ladder = np.asarray(betas, dtype=float)
    except (TypeError, ValueError):
        ladder = np.empty(0)  # not numbers: refused below, naming the argument
    valid = (
        ladder.ndim == 1
        and len(ladder) >= 2
        and ladder[-1] == 1.0
        and bool(np.all(np.diff(ladder) > 0))
        and (ladder[0] == 0.0 if from_prior else ladder[0] >= 0.0)
    )
    if not valid:
        start = "from 0 (the prior)" if from_prior else "from β_0 >= 0"
        raise ValueError(
            f"{name} must be a strictly increasing sequence of at least two inverse "
            f"temperatures {start} to 1 (the posterior), got {betas!r}"
        )
    return ladder


def uniform_schedule(n_chains: int) -> np.ndarray:
    """``n_chains`` inverse temperatures evenly spaced on ``[0, 1]`` (the starting schedule of
    Pigeons.jl; the adaptation moves them where swaps are hard)."""
    integer = isinstance(n_chains, int | np.integer) and not isinstance(n_chains, bool)
    if not integer or n_chains < 2:
        raise ValueError(f"n_chains must be an integer >= 2, got {n_chains!r}")
    return np.linspace(0.0, 1.0, n_chains)


class IndexProcess(NamedTuple):
    """Where each state is on the ladder, for counting round trips.

    Attributes
    ----------
    rung : ndarray of int, shape (K,)
        ``rung[m]`` is the rung that state ``m`` occupies (a permutation of ``0 … K-1``).
    last_end : ndarray of int, shape (K,)
        The end of the ladder state ``m`` visited last: ``0`` the reference (β = 0), ``1`` the
        target (β = 1), ``-1`` neither yet.
    round_trips : int
        Completed round trips: arrivals at the reference of a state whose last end was the target
        (Sec. 3.4; each such trip carries a fresh draw of the reference to the target).
    """

    rung: np.ndarray
    last_end: np.ndarray
    round_trips: int


def init_index_process(n_chains: int) -> IndexProcess:
    """State ``m`` on rung ``m``; the states at the two ends have visited them."""
    last_end = np.full(n_chains, -1)
    last_end[0], last_end[-1] = 0, 1
    return IndexProcess(np.arange(n_chains), last_end, 0)


def update_index_process(process: IndexProcess, order: np.ndarray) -> IndexProcess:
    """The index process after the rungs exchanged states by ``order`` (rung ``k`` takes the
    state rung ``order[k]`` held, as :func:`swap_neighbours` returns it)."""
    at_rung = np.empty_like(process.rung)
    at_rung[process.rung] = np.arange(len(process.rung))  # state at each rung, before
    moved = at_rung[order]  # state at each rung, after
    rung = np.empty_like(process.rung)
    rung[moved] = np.arange(len(moved))
    last_end = process.last_end.copy()
    reference, target = moved[0], moved[-1]
    completed = int(last_end[reference] == 1)
    last_end[reference], last_end[target] = 0, 1
    return IndexProcess(rung, last_end, process.round_trips + completed)


class SwapRecord(NamedTuple):
    """Summed swap rejection probabilities ``1 − min(1, ratio)`` and proposal counts per pair."""

    rejections: np.ndarray
    proposals: np.ndarray

    @property
    def rejection_rates(self) -> np.ndarray:
        """Mean rejection probability of each pair (NaN for a pair never proposed)."""
        # Divided only where proposed: no 0/0 to silence (an errstate costs more than this, and
        # a sampler reads the rates after every draw).
        rates = np.full(len(self.rejections), np.nan)
        return np.divide(self.rejections, self.proposals, out=rates, where=self.proposals > 0)


def init_swap_record(n_pairs: int) -> SwapRecord:
    return SwapRecord(np.zeros(n_pairs), np.zeros(n_pairs, dtype=int))


def record_swaps(record: SwapRecord, accept: np.ndarray) -> SwapRecord:
    """Add one round of swaps (``accept`` as :func:`swap_neighbours` returns it, NaN for pairs
    not proposed). The acceptance *probabilities* are averaged, not the accept/reject outcomes:
    a Rao–Blackwellised estimate of the rejection rate with the same expectation."""
    proposed = ~np.isnan(accept)
    rejections = record.rejections.copy()
    rejections[proposed] += 1.0 - accept[proposed]
    return SwapRecord(rejections, record.proposals + proposed)


class Barrier(NamedTuple):
    """The communication barrier of a schedule, estimated from its swap rejection rates.

    Attributes
    ----------
    betas : ndarray, shape (K,)
        The schedule the rates were measured on.
    cumulative : ndarray, shape (K,)
        ``Λ(β_k) ≈ Σ_{j<k} r_j``, the cumulative barrier at each rung (Eq. 18 with Theorem 3's
        ``r(β, β') ≈ Λ(β') − Λ(β)`` for close rungs).
    local : ndarray, shape (K - 1,)
        ``λ`` between each pair of rungs, ``r_k / (β_{k+1} − β_k)`` (Eq. 17).
    total : float
        The global communication barrier ``Λ = Λ(1)``.
    """

    betas: np.ndarray
    cumulative: np.ndarray
    local: np.ndarray
    total: float

    def __call__(self, beta: np.ndarray | float) -> np.ndarray:
        """``Λ(β)`` between the rungs: the monotone (Fritsch–Carlson / PCHIP) interpolation of
        :attr:`cumulative`, as Pigeons.jl does."""
        return PchipInterpolator(self.betas, self.cumulative)(beta)


def communication_barrier(
    betas: np.ndarray, rejection_rates: np.ndarray, min_rate: float = 1e-6
) -> Barrier:
    """The cumulative and global communication barriers of a schedule from its rejection rates.

    Parameters
    ----------
    betas : ndarray, shape (K,)
        The schedule, increasing to 1 (from 0, or from a hottest ``β_0 > 0``).
    rejection_rates : ndarray, shape (K - 1,)
        Mean swap rejection probability of each neighbouring pair.
    min_rate : float
        Floor on each pair's rate, so that ``Λ(β)`` is strictly increasing and can be inverted.
    """
    betas = check_schedule(betas, from_prior=False)
    rates = np.asarray(rejection_rates, dtype=float)
    if rates.shape != (len(betas) - 1,) or not np.all(np.isfinite(rates)):
        raise ValueError(
            f"rejection_rates must be {len(betas) - 1} finite numbers (one per pair), got "
            f"{rejection_rates!r}"
        )
    rates = np.clip(rates, min_rate, 1.0)
    cumulative = np.concatenate([[0.0], np.cumsum(rates)])
    return Barrier(betas, cumulative, rates / np.diff(betas), float(cumulative[-1]))


def barrier_total(record: SwapRecord, min_rate: float = 1e-6) -> float:
    """The global barrier ``Λ`` of :func:`communication_barrier` at the rejection rates of
    ``record``, alone and without its checks: what a sampler reports after every draw. NaN where
    a pair was never proposed."""
    # In Python floats: for a ladder's few pairs NumPy's dispatch costs more than the
    # arithmetic, after every draw. Added in order, as communication_barrier's cumsum adds.
    total = 0.0
    for rejections, proposals in zip(
        record.rejections.tolist(), record.proposals.tolist(), strict=True
    ):
        if proposals == 0:
            return math.nan
        total += min(max(rejections / proposals, min_rate), 1.0)
    return total


def optimal_schedule(barrier: Barrier, n_chains: int) -> np.ndarray:
    """The schedule of ``n_chains`` rungs that splits the barrier evenly (Sec. 5.1, Eq. 30):
    ``β_k = Λ⁻¹(k Λ / (n_chains − 1))``, so that every pair is expected to reject swaps equally
    often, at rate about ``Λ / (n_chains − 1)``. The ends stay where they were (0, or the
    hottest ``β_0`` of the schedule the barrier was measured on, and 1)."""
    uniform_schedule(n_chains)  # validates n_chains
    spline = PchipInterpolator(barrier.betas, barrier.cumulative)
    levels = np.linspace(0.0, barrier.total, n_chains)
    hottest = float(barrier.betas[0])
    betas = np.empty(n_chains)
    betas[0], betas[-1] = hottest, 1.0
    for k in range(1, n_chains - 1):
        betas[k] = brentq(
            lambda b, level=levels[k]: float(spline(b)) - level, hottest, 1.0, xtol=1e-15
        )
    return betas


def recommended_n_chains(barrier_total: float, min_chains: int, max_chains: int) -> int:
    """About ``2Λ`` chains, within ``[min_chains, max_chains]``.

    The round-trip rate of DEO with ``N`` chains is ``(2 + 2 Σ r_k / (1 − r_k))⁻¹`` (Theorem 1),
    which with equal rates ``r = Λ / N`` approaches its limit ``(2 + 2Λ)⁻¹`` once ``r`` is small;
    ``N ≈ 2Λ`` (rates about one half) gets within a few per cent of it in most cases (Sec. 5.3),
    and more chains buy little.
    """
    return int(np.clip(int(np.ceil(2.0 * barrier_total)) + 1, min_chains, max_chains))


def rounds_per_round_trip(rejection_rates: np.ndarray) -> float:
    """The fewest rounds per round trip at these swap rejection rates, ``2 + 2 Σ r_k / (1 − r_k)``:
    the inverse of DEO's round-trip rate under efficient local exploration (Theorem 1), counted
    over the ladder's replicas together (one round is one set of swaps). Explorers that do not
    decorrelate a replica within a round make fewer round trips than this predicts."""
    rates = np.asarray(rejection_rates, dtype=np.float64)
    return float(2.0 + 2.0 * np.sum(rates / np.maximum(1.0 - rates, 1e-12)))


def recommended_rounds_per_draw(
    rejection_rates: np.ndarray, per_round_trip: float, min_rounds: int, max_rounds: int
) -> int:
    """``per_round_trip`` times :func:`rounds_per_round_trip`, rounded up, within
    ``[min_rounds, max_rounds]``: enough rounds that each draw spans several round trips, so that
    draws of a chain are nearly independent across modes the explorer cannot cross between,
    whatever the barrier."""
    rounds = np.ceil(per_round_trip * rounds_per_round_trip(rejection_rates))
    return int(np.clip(rounds, min_rounds, max_rounds))


class EvidenceEstimate(NamedTuple):
    """A stepping-stone estimate of ``log Z = log ∫ p(x) p(y | x) dx``."""

    log_evidence: float
    standard_error: float
    n_batches: int
    """Batches of the batch-means standard error."""


def stepping_stone(
    betas: np.ndarray, log_likelihoods: np.ndarray, n_batches: int | None = None
) -> EvidenceEstimate:
    """The stepping-stone estimate of the log evidence and its standard error.

    ``log Z = Σ_k log E_{π_{β_k}}[exp((β_{k+1} − β_k) ℓ(x))]``, each expectation estimated by the
    mean over the draws of rung ``k`` (Xie et al. 2011; Syed et al. 2022, Sec. 6.1). The
    standard error is the delta method on the batch means of the ``K − 1`` ratio estimates:
    batches absorb the autocorrelation along the draws, and their joint covariance the
    correlation between rungs that swaps create.

    Parameters
    ----------
    betas : ndarray, shape (K,)
        The schedule, increasing from 0 to 1.
    log_likelihoods : ndarray, shape (draws, K)
        ``ℓ(x)`` of the state at each rung after each draw (``−inf`` allowed at the first rung,
        the prior, where the likelihood is 0).
    n_batches : int, optional
        Default ``floor(draws^½)``, at least 2.
    """
    betas = check_schedule(betas)
    ell = np.asarray(log_likelihoods, dtype=float)
    if ell.ndim != 2 or ell.shape[1] != len(betas) or ell.shape[0] < 4:
        raise ValueError(
            f"log_likelihoods must have shape (draws >= 4, {len(betas)}), got {ell.shape}"
        )
    # −inf is a likelihood of 0 (a prior draw outside a hard constraint): a weight of 0.
    if np.any(np.isnan(ell) | (ell == np.inf)) or not np.all(np.isfinite(ell[:, 1:])):
        raise ValueError(
            "log_likelihoods must be finite (or −inf at the first rung, the prior, for draws "
            "where the likelihood is 0)"
        )
    if not np.any(np.isfinite(ell[:, 0])):
        raise ValueError("no draw of the first rung has a positive likelihood")
    draws = ell.shape[0]
    n_batches = max(2, int(np.sqrt(draws))) if n_batches is None else int(n_batches)
    if not 2 <= n_batches <= draws:
        raise ValueError(f"n_batches must be in [2, {draws}], got {n_batches}")
    log_w = np.diff(betas)[None, :] * ell[:, :-1]
    shift = log_w.max(axis=0)
    weights = np.exp(log_w - shift)  # in (0, 1]: no overflow
    means = weights.mean(axis=0)
    log_evidence = float(np.sum(np.log(means) + shift))
    used = draws - draws % n_batches
    batch_means = weights[:used].reshape(n_batches, -1, weights.shape[1]).mean(axis=1)
    gradient = 1.0 / means
    covariance = np.atleast_2d(np.cov(batch_means, rowvar=False))
    variance = float(gradient @ covariance @ gradient) / n_batches
    return EvidenceEstimate(log_evidence, float(np.sqrt(max(variance, 0.0))), n_batches)
