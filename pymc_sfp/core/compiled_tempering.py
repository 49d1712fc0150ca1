"""The rounds of a parallel-tempering draw compiled with Numba: the ladder's stochastic dynamics,
the even/odd swaps, the index process and the swap record in one call of machine code.

A round of :class:`pymc_sfp.ParallelTempering` with its default explorer is a few
dozen NumPy calls on arrays of a handful of rungs (:func:`pymc_sfp.core.dynamics.transition`
and :func:`~pymc_sfp.core.dynamics.leapfrog` on the batch of rungs,
:func:`~pymc_sfp.core.dynamics.swap_neighbours`,
:func:`~pymc_sfp.core.tempering.record_swaps`,
:func:`~pymc_sfp.core.tempering.update_index_process`): for a small model their overhead, not the
model, is the cost of a round. :func:`ladder_kernel` makes every round of a draw in one call,
with the same arithmetic in the same order, so the NumPy functions stay the tested specification:

* the random numbers come from the same generators, in the same order and amounts (Numba's
  ``numpy.random.Generator`` shares the state of the generator it is given and draws as NumPy
  does): for each transition the step-size jitter, the momentum noise, the Metropolis uniforms
  where some trajectory ended finite, the fresh momenta of uncorrected dynamics after a
  rejection; the uniforms of the swaps, one per proposed pair whatever happens, are drawn
  beforehand from the swap generator;
* the log-density is the same machine code (the batched tempered density, called through its
  address as :mod:`pymc_sfp.core.compiled_sweep` calls the model's), on the whole batch of
  rungs at each leapfrog step, failed trajectories included, as the reference does;
* sums over coordinates are NumPy's pairwise summation, step for step.

The draws and stats are then the reference's up to the last bits of ``exp`` (NumPy's vectorised
``exp`` and the C library's, which Numba calls, may round differently). A dense mass matrix's
products are added in the same order by both, without a fused multiply-add
(:meth:`pymc_sfp.core.dynamics.RowMassMatrix._times`; with NumPy's ``matmul`` a 10-D test's
chains drifted apart by 1e-4 over 80 rounds, and a 2-D test's on a CPU with FMA). The
prior rung's draws are made beforehand (one per round, from
the prior sampler's own generator) and passed in with their prior and log-likelihood.

A tuning draw is one call of one round, after which the adaptations (in Python) read what the
round did: :class:`LastRound` holds the fields of each transition that the step-size
adaptation reads, the states and gradients the mass matrices adapt to, and the log ratios of
the swaps, from which the caller recomputes the swap record with NumPy's ``exp``: the schedule
adapts to that record, and a difference in its last bit would carry into every later draw.

Nothing here imports PyMC.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np

from pymc_sfp.core.compiled_sweep import ModelCallError, _address, _entry_point, _failed

__all__ = [
    "LadderKernelResult",
    "LadderSettings",
    "LastRound",
    "compiled_rounds",
    "ladder_kernel",
    "prior_draws",
]

_jit = numba.njit(cache=True, nogil=True)
#: For the small helpers of the round: inlined in Numba's IR, their arguments' reference
#: counts, which a call would raise and lower each time, can be pruned.
_inline = numba.njit(cache=True, nogil=True, inline="always")

#: :func:`ladder_kernel`'s status codes.
OK, MODEL_FAILED, START_NOT_FINITE, TERMS_NOT_FINITE = 0, 1, 2, 3


class LadderSettings(NamedTuple):
    """The fixed settings of the ladder's dynamics (those of the explorer,
    :class:`~pymc_sfp.core.dynamics.DynamicsSettings` and its ``thin`` and jitter)."""

    n_steps: int
    alpha: float
    correct: bool
    max_energy_error: float
    thin: int
    jitter: float


class LadderMass(NamedTuple):
    """The rungs' mass matrices as :class:`~pymc_sfp.core.dynamics.RowMassMatrix` holds them:
    for a diagonal one ``inverse`` and ``colour`` of shape ``(K, d)`` (``dense`` false, the
    matrices empty); for a dense one the matrices ``M⁻¹``, ``L⁻¹`` and ``L`` of shape
    ``(K, d, d)``."""

    dense: bool
    inverse: np.ndarray
    colour: np.ndarray
    inverse_matrix: np.ndarray
    colour_matrix: np.ndarray
    whiten_matrix: np.ndarray


class LastRound(NamedTuple):
    """The explored rungs' dynamics in the last round, before its swaps: what
    :class:`~pymc_sfp.step_methods.dynamics.LadderDynamics` adapts to while tuning (a tuning
    draw is one round). One row per explored rung (the prior rung, drawn, has none)."""

    position: np.ndarray
    """``(S, d)``: the state after the dynamics."""
    grad: np.ndarray
    """``(S, d)``: its gradient."""
    start_logp: np.ndarray
    """``(S,)``: the log-density at the start of the dynamics."""
    transitions: np.ndarray
    """``(thin, S, 5)``: of each transition, the fields of
    :class:`~pymc_sfp.core.dynamics.TransitionInfo` a step-size adaptation reads:
    ``energy_error``, ``diverging``, ``hit_constraint``, ``energy_error_before_constraint``,
    ``share_before_constraint`` (the flags as 0/1, the last two NaN where no constraint was
    hit)."""
    swap_log_ratio: np.ndarray
    """``(K - 1,)``: the log acceptance ratio of each pair proposed in the round's swaps (after
    the dynamics), NaN for the others."""


class LadderKernelResult(NamedTuple):
    """What :func:`compiled_rounds` returns; arrays are new (the inputs are not changed)."""

    replicas: np.ndarray
    terms: np.ndarray
    """Each rung's ``(prior, log-likelihood)`` after the last round's swaps."""
    noise: np.ndarray
    """The rungs' persistent momenta, whitened."""
    divergences: np.ndarray
    swap_accepted: np.ndarray
    """Summed acceptance probability of each pair over the rounds that proposed it."""
    swap_proposed: np.ndarray
    rejections: np.ndarray
    proposals: np.ndarray
    rung: np.ndarray
    last_end: np.ndarray
    round_trips: int
    cold: tuple[float, bool, float, float]
    """The cold rung's ``accept``, ``diverging``, ``energy`` and ``energy_error`` of the last
    round."""
    counts: tuple[int, int, int]
    """``n_accepted``, ``n_constraint_hits``, ``n_grad_evals`` summed over rungs and rounds."""
    diverging: np.ndarray
    """Per rung, whether its dynamics diverged in any round."""
    last_round: LastRound
    """What the step-size and mass adaptations of tuning read from the last round."""


# -- small pieces, as NumPy computes them ---------------------------------------------------------


@_jit
def _block_sum(a: np.ndarray, start: int, n: int) -> float:
    """NumPy's pairwise summation of ``a[start:start + n]`` for ``n <= 128`` (one block: eight
    running sums, combined pairwise, then the rest)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[start + i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[start + i]
        r1 += a[start + i + 1]
        r2 += a[start + i + 2]
        r3 += a[start + i + 3]
        r4 += a[start + i + 4]
        r5 += a[start + i + 5]
        r6 += a[start + i + 6]
        r7 += a[start + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@_jit
def _pairwise_sum(a: np.ndarray) -> float:
    """NumPy's pairwise summation of a contiguous float64 row (``np.add.reduce``), operation
    for operation: blocks of at most 128, halves (multiples of 8) added above them. NumPy
    recurses; this walks the same tree with a stack (Numba's disk cache cannot load a
    recursive function)."""
    n = len(a)
    if n <= 128:
        return _block_sum(a, 0, n)
    starts = np.empty(192, dtype=np.int64)
    sizes = np.empty(192, dtype=np.int64)
    expanded = np.zeros(192, dtype=np.bool_)
    values = np.empty(96)
    top = n_values = 0
    starts[0], sizes[0] = 0, n
    top = 1
    while top:
        top -= 1
        start, size, done = starts[top], sizes[top], expanded[top]
        if size <= 128:
            values[n_values] = _block_sum(a, start, size)
            n_values += 1
        elif done:
            n_values -= 1
            values[n_values - 1] = values[n_values - 1] + values[n_values]
        else:
            half = size // 2
            half -= half % 8
            starts[top], sizes[top], expanded[top] = start, size, True
            starts[top + 1], sizes[top + 1], expanded[top + 1] = start + half, size - half, False
            starts[top + 2], sizes[top + 2], expanded[top + 2] = start, half, False
            top += 3
    return values[0]


# The helpers of a round read row ``i`` of an array and write row ``o`` of another, rather than
# take row views: each view would raise and lower its parent's reference count.


@_inline
def _row_times(a, i, matrix, rung, out, o) -> None:
    """``out[o] = a[i] @ matrix[rung]`` (a row vector on the left)."""
    d = a.shape[1]
    for j in range(d):
        total = 0.0
        for m in range(d):
            total += a[i, m] * matrix[rung, m, j]
        out[o, j] = total


@_inline
def _velocity(p, i, rung, mass, out, o) -> None:
    """``out[o] = M⁻¹ p[i]`` for rung ``rung``."""
    if mass[0]:
        _row_times(p, i, mass[3], rung, out, o)
    else:
        inverse = mass[1]
        for j in range(p.shape[1]):
            out[o, j] = p[i, j] * inverse[rung, j]


@_inline
def _kinetic(p, i, rung, mass, work) -> float:
    """``½ pᵀ M⁻¹ p`` of row ``i`` (``work`` a scratch array of one row)."""
    _velocity(p, i, rung, mass, work, 0)
    for j in range(p.shape[1]):
        work[0, j] = p[i, j] * work[0, j]
    return 0.5 * _pairwise_sum(work[0])


@_inline
def _colour(z, i, rung, mass, out, o) -> None:
    """Standard-normal ``z[i]`` to a momentum of ``N(0, M)``, into ``out[o]``."""
    if mass[0]:
        _row_times(z, i, mass[4], rung, out, o)
    else:
        colour = mass[2]
        for j in range(z.shape[1]):
            out[o, j] = z[i, j] * colour[rung, j]


@_inline
def _whiten(p, i, rung, mass, out, o) -> None:
    """The inverse of :func:`_colour`."""
    if mass[0]:
        _row_times(p, i, mass[5], rung, out, o)
    else:
        colour = mass[2]
        for j in range(p.shape[1]):
            out[o, j] = p[i, j] / colour[rung, j]


@_inline
def _draw_momenta(rng, rungs: np.ndarray, mass: tuple, out: np.ndarray, z: np.ndarray) -> None:
    """``metric.draw_momentum()`` of the batch: ``standard_normal((S, d))``, row by row (into
    the scratch ``z``), then coloured."""
    n, d = out.shape
    for i in range(n):
        for j in range(d):
            z[i, j] = rng.standard_normal()
    for i in range(n):
        _colour(z, i, rungs[i], mass, out, i)


@_inline
def _tempered_row(parts, i, beta, logp, grad, o) -> None:
    """``log π_β`` and its gradient from row ``i`` of ``parts`` (``[prior, likelihood,
    ∇ prior, ∇ likelihood]``) into ``logp[o]`` and ``grad[o]``:
    :func:`pymc_sfp.compile.tempered_parts`, element by element in the same order."""
    d = grad.shape[1]
    logp[o] = parts[i, 0] + (0.0 if beta == 0.0 else beta * parts[i, 1])
    for j in range(d):
        grad[o, j] = parts[i, 2 + j] + (0.0 if beta == 0.0 else beta * parts[i, 2 + d + j])


@numba.njit(cache=True, nogil=True, inline="always")
def _evaluate(density, extras, x, betas, logp, grad, parts) -> bool:
    """The batched tempered density at the rows ``x`` and their ``betas``: the model's parts
    (``(X, *extras) ↦ (parts,)``, one row ``[prior, likelihood, ∇ prior, ∇ likelihood]`` per
    row of ``X``, or one for every row) into ``parts``, ``log π_β`` and its gradient into
    ``logp`` and ``grad``. Returns whether the model's call failed."""
    (out,) = density((x,) + extras)  # noqa: RUF005
    if _failed(out):
        return True
    for i in range(x.shape[0]):
        a = i if out.shape[0] == x.shape[0] else 0
        for j in range(parts.shape[1]):
            parts[i, j] = out[a, j]
        _tempered_row(parts, i, betas[i], logp, grad, i)
    return False


@_inline
def _row_finite(logp: float, grad: np.ndarray, i: int) -> tuple[bool, bool]:
    """Whether the log-density and row ``i`` of the gradient are finite."""
    finite_grad = True
    for j in range(grad.shape[1]):
        if not math.isfinite(grad[i, j]):
            finite_grad = False
    return math.isfinite(logp) and finite_grad, finite_grad


# -- the kernel --------------------------------------------------------------------------------


@_jit
def ladder_kernel(
    density,
    extras,
    replicas,
    betas,
    first_rung,
    prior_states,
    prior_parts,
    noise,
    divergences,
    mass,
    step_size,
    settings,
    n_rounds_before,
    n_rounds,
    rejections,
    proposals,
    rung_of,
    last_end,
    round_trips,
    ladder_rng,
    swap_uniforms,
):
    """``n_rounds`` rounds of :meth:`pymc_sfp.ParallelTempering._round` with the
    :class:`~pymc_sfp.step_methods.dynamics.LadderDynamics` explorer after tuning.

    ``density`` is the :class:`~pymc_sfp.core.compiled_sweep.FunctionAddress` of the batched
    tempered density's parts (``(X, *extras) ↦ (parts,)``, one row ``[prior, likelihood,
    ∇ prior, ∇ likelihood]`` per row of ``X``,
    :func:`pymc_sfp.compile.compile_batched_tempered_density`); each replica carries its parts
    (one row of ``[prior, likelihood, ∇ prior, ∇ likelihood]``) through the swaps, so that
    after the first round a rung forms the density at its start from them, where the NumPy
    rounds evaluate it again (the same numbers, one call of the model fewer per round).
    ``first_rung`` is 1 where rung 0 takes ``prior_states[r]`` (with ``prior_parts[r]``) in
    round ``r``, else 0; ``mass`` a :class:`LadderMass` tuple, ``settings`` a
    :class:`LadderSettings` tuple; the rounds are numbered on from ``n_rounds_before`` (even
    rounds swap the even pairs). The arrays ``replicas``, ``noise``, ``divergences``,
    ``rejections``, ``proposals``, ``rung_of`` and ``last_end`` are updated in place.

    Returns ``(status, round, terms, swap_accepted, swap_proposed, round_trips, cold, counts,
    diverging, bad, last_round)``: ``status`` :data:`OK`, or :data:`MODEL_FAILED` (a call of
    the model raised), :data:`START_NOT_FINITE` (the density or gradient at the start of the
    dynamics, ``bad`` the rows), :data:`TERMS_NOT_FINITE` (a rung's prior or likelihood,
    ``terms`` those of the round); ``round`` the round it stopped in; ``last_round`` the
    fields of :class:`LastRound`.
    """
    n_steps, alpha, correct, max_error, thin, jitter = settings
    K, d = replicas.shape
    S = K - first_rung
    parts = np.empty((K, 2 + 2 * d))
    swap_accepted = np.zeros(K - 1)
    swap_proposed = np.zeros(K - 1)
    diverging_any = np.zeros(K, dtype=np.bool_)
    bad = np.zeros(S, dtype=np.bool_)
    cold = (np.nan, False, np.nan, np.nan)
    n_accepted_total = n_hits_total = n_grad_total = 0
    rungs = np.arange(first_rung, K)
    row_betas = betas[first_rung:].copy()
    scale = math.sqrt(1.0 - alpha * alpha)
    # The batch's arrays: the state, the trajectory's, its last point before it stopped.
    q0 = np.empty((S, d))
    p0 = np.empty((S, d))
    logp0 = np.empty(S)
    grad0 = np.empty((S, d))
    aux0 = np.empty((S, 2 + 2 * d))
    fresh = np.empty((S, d))
    work = np.empty((1, d))
    velocity = np.empty((1, d))
    start_logp = np.empty(S)
    transitions = np.empty((thin, S, 5))
    swap_log_ratio = np.empty(K - 1)
    scratch = _transition_scratch(S, d)
    accept_total = np.empty(S)
    n_accepted = np.empty(S, dtype=np.int64)
    n_hits = np.empty(S, dtype=np.int64)
    diverging = np.empty(S, dtype=np.bool_)
    accept_stat = np.empty(S)
    energy = np.empty(S)
    energy_error = np.empty(S)
    epsilon = np.empty(S)
    order = np.empty(K, dtype=np.int64)
    at_rung = np.empty(K, dtype=np.int64)
    n_uniforms = 0
    status, stopped = OK, n_rounds
    for r in range(n_rounds):
        if first_rung:
            for j in range(d):
                replicas[0, j] = prior_states[r, j]
            parts[0, :] = prior_parts[r, :]
        # LadderDynamics.step: the state at the start, its momentum from the whitened noise.
        for i in range(S):
            for j in range(d):
                q0[i, j] = replicas[first_rung + i, j]
        if r == 0:
            if _evaluate(density, extras, q0, row_betas, logp0, grad0, aux0):
                status, stopped = MODEL_FAILED, r
                break
        else:
            for i in range(S):
                aux0[i, :] = parts[first_rung + i, :]
                _tempered_row(aux0, i, row_betas[i], logp0, grad0, i)
        any_bad = False
        for i in range(S):
            bad[i] = not _row_finite(logp0[i], grad0, i)[0]
            any_bad |= bad[i]
        if any_bad:
            status, stopped = START_NOT_FINITE, r
            break
        for i in range(S):
            _colour(noise, rungs[i], rungs[i], mass, p0, i)
            start_logp[i] = logp0[i]
        # StochasticDynamics._draw: `thin` transitions.
        accept_total[:] = 0.0
        n_accepted[:] = 0
        n_hits[:] = 0
        diverging[:] = False
        n_grad = 1 if r == 0 else 0
        for t in range(thin):
            for i in range(S):
                epsilon[i] = step_size[first_rung + i]
                if jitter:
                    epsilon[i] *= ladder_rng.uniform(1.0 - jitter, 1.0 + jitter)
            n_grad += _transition(
                density,
                extras,
                q0,
                p0,
                logp0,
                grad0,
                aux0,
                epsilon,
                row_betas,
                rungs,
                mass,
                n_steps,
                alpha,
                scale,
                correct,
                max_error,
                ladder_rng,
                fresh,
                work,
                velocity,
                accept_stat,
                energy,
                energy_error,
                n_accepted,
                n_hits,
                diverging,
                transitions[t],
                scratch,
            )
            if n_grad < 0:
                status, stopped = MODEL_FAILED, r
                break
            for i in range(S):
                accept_total[i] += accept_stat[i]
        if status != OK:
            break
        for i in range(S):
            k = rungs[i]
            divergences[k] += diverging[i]
            _whiten(p0, i, k, mass, noise, k)
            for j in range(d):
                replicas[k, j] = q0[i, j]
            parts[k, :] = aux0[i, :]
            diverging_any[k] |= diverging[i]
            n_accepted_total += n_accepted[i]
            n_hits_total += n_hits[i]
            n_grad_total += n_grad
        cold = (
            accept_total[S - 1] / thin,
            diverging[S - 1],
            energy[S - 1],
            energy_error[S - 1],
        )
        # ParallelTempering._round: the terms' check, then the swaps.
        valid = True
        for k in range(K):
            if math.isnan(parts[k, 1]):
                parts[k, 1] = -np.inf
            ok = math.isfinite(parts[k, 0]) and (
                math.isfinite(parts[k, 1]) or (betas[k] == 0.0 and parts[k, 1] == -np.inf)
            )
            valid &= ok
        if not valid:
            status, stopped = TERMS_NOT_FINITE, r
            break
        for k in range(K):
            order[k] = k
        swap_log_ratio[:] = np.nan
        for k in range((n_rounds_before + r) % 2, K - 1, 2):
            log_ratio = (betas[k] - betas[k + 1]) * (parts[k + 1, 1] - parts[k, 1])
            swap_log_ratio[k] = log_ratio
            # Python's min(log_ratio, 0.0), NaN included.
            accept = math.exp(0.0 if 0.0 < log_ratio else log_ratio)
            uniform = swap_uniforms[n_uniforms]
            n_uniforms += 1
            if uniform < accept:
                order[k], order[k + 1] = order[k + 1], order[k]
            if not math.isnan(accept):  # a NaN counts as not proposed, as in record_swaps
                swap_accepted[k] += accept
                swap_proposed[k] += 1.0
                rejections[k] += 1.0 - accept
                proposals[k] += 1
        for k in range((n_rounds_before + r) % 2, K - 1, 2):
            if order[k] != k:
                for j in range(d):
                    replicas[k, j], replicas[k + 1, j] = replicas[k + 1, j], replicas[k, j]
                for j in range(2 + 2 * d):
                    parts[k, j], parts[k + 1, j] = parts[k + 1, j], parts[k, j]
        # update_index_process.
        for m in range(K):
            at_rung[rung_of[m]] = m
        for k in range(K):
            rung_of[at_rung[order[k]]] = k
        reference, target = at_rung[order[0]], at_rung[order[K - 1]]
        if last_end[reference] == 1:
            round_trips += 1
        last_end[reference], last_end[target] = 0, 1
    return (
        status,
        stopped,
        parts[:, :2].copy(),
        swap_accepted,
        swap_proposed,
        round_trips,
        cold,
        (
            n_accepted_total,
            n_hits_total,
            n_grad_total,
        ),
        diverging_any,
        bad,
        (q0, grad0, start_logp, transitions, swap_log_ratio),
    )


@_jit
def _transition_scratch(S: int, d: int) -> tuple:
    """The arrays :func:`_transition` works in, allocated once per kernel call: a round then
    allocates nothing but the model's outputs."""
    return (
        np.empty((S, d)),  # z: standard-normal draws
        np.empty(S),  # energy_start
        np.empty(S),  # half: half steps
        np.empty((S, d)),  # q, p, grad: the trajectory
        np.empty((S, d)),
        np.empty(S),  # logp
        np.empty((S, d)),
        np.empty((S, 2 + 2 * d)),  # aux: the parts of the density
        np.empty(S, dtype=np.bool_),  # failed
        np.empty(S),  # stop_logp
        np.empty(S, dtype=np.int64),  # n_finite
        np.empty((S, d)),  # last_q, last_p, last_logp: the last point before it stopped
        np.empty((S, d)),
        np.empty(S),
        np.empty((S, d)),  # prev_q, prev_p, prev_logp, prev_grad: the step before
        np.empty((S, d)),
        np.empty(S),
        np.empty((S, d)),
        np.empty(S),  # energy_end
        np.empty(S, dtype=np.bool_),  # finite_end
        np.empty(S, dtype=np.bool_),  # accepted
    )


@numba.njit(cache=True, nogil=True, inline="always")
def _transition(
    density,
    extras,
    q0,
    p0,
    logp0,
    grad0,
    aux0,
    epsilon,
    betas,
    rungs,
    mass,
    n_steps,
    alpha,
    scale,
    correct,
    max_error,
    rng,
    fresh,
    work,
    velocity,
    accept_stat,
    energy,
    energy_error,
    n_accepted,
    n_hits,
    diverging,
    info,
    scratch,
):
    """:func:`pymc_sfp.core.dynamics.transition` of the batch (state ``q0, p0, logp0, grad0,
    aux0``, updated in place), with the counts added and ``info`` (one row per chain) set to
    :attr:`LastRound.transitions`' fields; ``scratch`` is :func:`_transition_scratch`'s. Returns
    the gradients spent (``-1`` where a call of the model failed)."""
    (
        z,
        energy_start,
        half,
        q,
        p,
        logp,
        grad,
        aux,
        failed,
        stop_logp,
        n_finite,
        last_q,
        last_p,
        last_logp,
        prev_q,
        prev_p,
        prev_logp,
        prev_grad,
        energy_end,
        finite_end,
        accepted,
    ) = scratch
    S, d = q0.shape
    # Partial refreshment, p ← α p + (1 − α²)^½ n.
    _draw_momenta(rng, rungs, mass, fresh, z)
    for i in range(S):
        for j in range(d):
            p0[i, j] = alpha * p0[i, j] + scale * fresh[i, j]
    for i in range(S):
        energy_start[i] = -logp0[i] + _kinetic(p0, i, rungs[i], mass, work)
        half[i] = 0.5 * epsilon[i]
    # leapfrog.
    q[:] = q0
    for i in range(S):
        for j in range(d):
            p[i, j] = p0[i, j] + half[i] * grad0[i, j]
    logp[:] = logp0
    grad[:] = grad0
    aux[:] = aux0
    failed[:] = False
    stop_logp[:] = 0.0
    n_finite[:] = n_steps
    last_q[:] = q0
    last_p[:] = p0
    last_logp[:] = logp0
    n_grad = n_steps
    for step in range(n_steps):
        prev_q[:] = q
        prev_p[:] = p
        prev_logp[:] = logp
        prev_grad[:] = grad
        for i in range(S):
            _velocity(p, i, rungs[i], mass, velocity, 0)
            for j in range(d):
                q[i, j] = q[i, j] + epsilon[i] * velocity[0, j]
        if _evaluate(density, extras, q, betas, logp, grad, aux):
            return -1
        all_failed = True
        for i in range(S):
            finite, finite_grad = _row_finite(logp[i], grad, i)
            if not failed[i] and not finite:
                stop_logp[i] = -np.inf if (logp[i] == -np.inf and finite_grad) else np.nan
                for j in range(d):
                    last_q[i, j] = prev_q[i, j]
                    last_p[i, j] = prev_p[i, j] - half[i] * prev_grad[i, j]
                last_logp[i] = prev_logp[i]
                n_finite[i] = step
                failed[i] = True
            all_failed &= failed[i]
        if all_failed:
            n_grad = step + 1
            break
        kick = half if step == n_steps - 1 else epsilon
        for i in range(S):
            for j in range(d):
                p[i, j] = p[i, j] + kick[i] * grad[i, j]
    for i in range(S):
        if failed[i]:
            logp[i] = stop_logp[i]
    # The Metropolis test.
    any_finite = False
    all_finite = True
    for i in range(S):
        kinetic_end = _kinetic(p, i, rungs[i], mass, work)
        energy_end[i] = -logp[i] + kinetic_end
        energy_error[i] = energy_end[i] - energy_start[i]
        finite_end[i] = math.isfinite(energy_error[i]) and abs(energy_error[i]) <= max_error
        accept_stat[i] = math.exp(-max(energy_error[i], 0.0)) if finite_end[i] else 0.0
        any_finite |= finite_end[i]
        all_finite &= finite_end[i]
    accepted[:] = finite_end
    if correct and any_finite:
        for i in range(S):
            u = rng.uniform()
            accepted[i] = finite_end[i] and u < accept_stat[i]
    # Constraint hits: trajectories that stopped at a -inf log-density with no blow-up before.
    for i in range(S):
        hit = False
        error = np.nan
        if not finite_end[i] and logp[i] == -np.inf:
            kinetic = _kinetic(last_p, i, rungs[i], mass, work)
            error = 0.0 if n_finite[i] == 0 else -last_logp[i] + kinetic - energy_start[i]
            hit = math.isfinite(error) and abs(error) <= max_error
        n_hits[i] += hit
        diverged = not finite_end[i] and not hit
        diverging[i] |= diverged
        info[i, 0], info[i, 1], info[i, 2] = energy_error[i], diverged, hit
        info[i, 3] = error if hit else np.nan
        info[i, 4] = n_finite[i] / n_steps if hit else np.nan
        n_accepted[i] += accepted[i]
        energy[i] = energy_end[i] if accepted[i] else energy_start[i]
    # Exact dynamics reverse the momentum on rejection; uncorrected ones redraw it.
    redraw = not correct and not all_finite
    if redraw:
        _draw_momenta(rng, rungs, mass, fresh, z)
    for i in range(S):
        if accepted[i]:
            for j in range(d):
                q0[i, j] = q[i, j]
                p0[i, j] = p[i, j]
                grad0[i, j] = grad[i, j]
            logp0[i] = logp[i]
            aux0[i, :] = aux[i, :]
        else:
            for j in range(d):
                p0[i, j] = fresh[i, j] if redraw else -p0[i, j]
    return n_grad


@_jit
def _prior_draws(prior, rng, n_rounds, size):
    """``n_rounds`` draws of the prior sampler's machine code ``prior`` (``(rng,) ↦ (draw,
    rng)``, advancing ``rng`` in place), one row each; ``failed`` where a call raised."""
    out = np.empty((n_rounds, size))
    for r in range(n_rounds):
        x, _ = prior((rng,))
        if _failed(x):
            return out, True
        for j in range(size):
            out[r, j] = x[j]
    return out, False


def prior_draws(
    function: Callable, rng: np.random.Generator, n_rounds: int, size: int
) -> np.ndarray:
    """``n_rounds`` draws of size ``size`` of the prior sampler's Numba function ``function``
    (``rng ↦ (draw, rng)``, with its random generator updated in place, as PyTensor compiles a
    sampler), in one call: the draws that many calls of the sampler would make.

    Raises
    ------
    ModelCallError
        If a call raised.
    """
    address = _address(function, (), lambda: (_copied_generator(rng),))
    arguments = (address, rng, int(n_rounds), int(size))
    out, failed = _entry_point(_prior_draws, (address,), arguments)(*arguments)
    if failed:
        raise ModelCallError(None)
    return out


def _copied_generator(rng: np.random.Generator) -> np.random.Generator:
    return copy.deepcopy(rng)


# -- the Python side ----------------------------------------------------------------------------


class LadderError(RuntimeError):
    """A round's values were not finite (:data:`START_NOT_FINITE`, :data:`TERMS_NOT_FINITE`):
    ``status``, ``round``, ``terms`` of the round and ``bad`` rows of the batch. The caller
    raises its own error from these."""

    def __init__(self, status: int, round: int, terms: np.ndarray, bad: np.ndarray):
        super().__init__(f"ladder kernel status {status} in round {round}")
        self.status, self.round, self.terms, self.bad = status, round, terms, bad


def compiled_rounds(
    density: Callable,
    extras: tuple,
    replicas: np.ndarray,
    betas: np.ndarray,
    prior_states: np.ndarray | None,
    prior_parts: np.ndarray | None,
    noise: np.ndarray,
    divergences: np.ndarray,
    mass: LadderMass,
    step_size: np.ndarray,
    settings: LadderSettings,
    n_rounds_before: int,
    n_rounds: int,
    rejections: np.ndarray,
    proposals: np.ndarray,
    rung_of: np.ndarray,
    last_end: np.ndarray,
    round_trips: int,
    ladder_rng: np.random.Generator,
    swap_rng: np.random.Generator,
) -> LadderKernelResult:
    """``n_rounds`` rounds in one call of :func:`ladder_kernel`.

    ``density`` is the Numba function of the batched tempered density's parts (``(X, *extras)
    ↦ (parts,)``); ``prior_states`` (``(n_rounds, d)``) and
    ``prior_parts`` (``(n_rounds, 2 + 2 d)``, the parts side by side) the prior rung's draw of
    each round, ``None`` where rung 0 is explored as the others are. The arrays
    given are not changed; the generators advance as the reference rounds advance them.

    Raises
    ------
    ModelCallError
        If a call of the model raised (Numba printed its exception).
    LadderError
        If a rung's values were not finite (see there).
    """
    replicas = np.array(replicas, dtype=np.float64, order="C")
    K, d = replicas.shape
    first_rung = 0 if prior_states is None else 1
    if prior_states is None:
        prior_states, prior_parts = np.empty((n_rounds, d)), np.empty((n_rounds, 2 + 2 * d))
    noise = np.array(noise, dtype=np.float64, order="C")
    divergences = np.array(divergences, dtype=np.int64)
    rejections = np.array(rejections, dtype=np.float64)
    proposals = np.array(proposals, dtype=np.int64)
    rung_of = np.array(rung_of, dtype=np.int64)
    last_end = np.array(last_end, dtype=np.int64)
    # One uniform per proposed pair, whatever happens: drawn here, in the same order. A round
    # that swaps the even pairs proposes K // 2 of them, one that swaps the odd (K - 1) // 2.
    n_even = (n_rounds + 1 - n_rounds_before % 2) // 2
    n_pairs = n_even * (K // 2) + (n_rounds - n_even) * ((K - 1) // 2)
    swap_uniforms = swap_rng.uniform(size=n_pairs)
    address = _address(density, extras, lambda: (replicas[first_rung:].copy(),))
    arguments = (
        address,
        tuple(extras),
        replicas,
        np.ascontiguousarray(betas, dtype=np.float64),
        first_rung,
        np.ascontiguousarray(prior_states, dtype=np.float64),
        np.ascontiguousarray(prior_parts, dtype=np.float64),
        noise,
        divergences,
        (
            bool(mass.dense),
            np.ascontiguousarray(mass.inverse, dtype=np.float64),
            np.ascontiguousarray(mass.colour, dtype=np.float64),
            np.ascontiguousarray(mass.inverse_matrix, dtype=np.float64),
            np.ascontiguousarray(mass.colour_matrix, dtype=np.float64),
            np.ascontiguousarray(mass.whiten_matrix, dtype=np.float64),
        ),
        np.ascontiguousarray(step_size, dtype=np.float64),
        (
            int(settings.n_steps),
            float(settings.alpha),
            bool(settings.correct),
            float(settings.max_energy_error),
            int(settings.thin),
            float(settings.jitter),
        ),
        int(n_rounds_before),
        int(n_rounds),
        rejections,
        proposals,
        rung_of,
        last_end,
        int(round_trips),
        ladder_rng,
        swap_uniforms,
    )
    kernel = _entry_point(ladder_kernel, (arguments[0],), arguments)
    (
        status,
        at_round,
        terms,
        accepted,
        proposed,
        trips,
        cold,
        counts,
        diverging,
        bad,
        last_round,
    ) = kernel(*arguments)
    if status == MODEL_FAILED:
        raise ModelCallError(None)
    if status != OK:
        raise LadderError(int(status), int(at_round), terms, bad)
    return LadderKernelResult(
        replicas,
        terms,
        noise,
        divergences,
        accepted,
        proposed,
        rejections,
        proposals,
        rung_of,
        last_end,
        int(trips),
        (float(cold[0]), bool(cold[1]), float(cold[2]), float(cold[3])),
        (int(counts[0]), int(counts[1]), int(counts[2])),
        diverging,
        LastRound(*last_round),
    )
