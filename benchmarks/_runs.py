"""How the benchmarks run and time the package's samplers.

* SFP sweeps timed directly (:func:`time_steps`, :func:`time_sweeps`), builder calls
  (:func:`time_call`) and step construction (:func:`built`);
* the paper's SFP, SFP-MLE and NUTS protocol of the network-learning suite (:func:`sample_sfp`,
  :func:`mle_prediction`, :func:`sample_nuts`);
* ``pm.sample`` runs from given per-chain starts, timed, with their gradient evaluations counted
  (:func:`sample_run`, :func:`jittered_starts`, :func:`warm_up`), as the dynamics suite compares
  samplers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from pymc_sfp import SFPStep, StochasticDynamics, sfp_mle
from pymc_sfp.nn import Network

#: Sweeps PyMC discards as tuning in the network-learning runs: the paper's "first 15 sweeps".
DISCARDED_SWEEPS = 15


# -------------------------------------------------------------------------------------- timing
def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    """Call ``function`` and return its result and the wall time in seconds."""
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def time_call(fn: Callable[[], object], budget_s: float, min_reps: int = 5) -> float:
    """Median seconds per call of ``fn`` over at least ``min_reps`` calls / ``budget_s``."""
    fn()
    times = []
    began = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - began < budget_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 100_000:
            break
    return float(np.median(times))


def grid_floor(step: SFPStep, q, grid: np.ndarray, budget_s: float) -> float:
    """The floor of a sweep of ``step`` at the chain state ``q``: median seconds of the N·L
    grid evaluations alone, the step's compiled line function on ``grid`` for every coordinate,
    called from machine code as the compiled sweep calls it (no conditional, refinement, draw or
    correction)."""
    x = step.layout.from_value(q.data)
    jitted = step.evaluator.jitted()
    lines = (jitted.along, jitted.along_starts, jitted.extras(x)[1])
    return time_call(lambda: _grid_lines(*lines, x, grid), budget_s)


def _grid_lines(alongs, starts, extra, x, grid) -> float:
    """Every coordinate's line on ``grid`` (``alongs[k]`` the line of the coordinates from
    ``starts[k]`` on, with ``extra`` its further arguments at ``x``)."""
    stops = [*starts[1:], len(x)]
    return sum(
        _lines_of(along, extra, x, grid, start, stop)
        for along, start, stop in zip(alongs, starts, stops, strict=True)
    )


@numba.njit
def _lines_of(along, extra, x, grid, start, stop):
    """The lines of coordinates ``start`` to ``stop - 1`` on ``grid``, by one function, called
    from machine code as the compiled sweep calls it."""
    total = 0.0
    for i in range(start, stop):
        (logp,) = along(x, np.array(i, dtype=np.int64), grid, *extra)
        total += logp[0]
    return total


def built(**kwargs: Any) -> tuple[SFPStep, float]:
    """Construct ``SFPStep(**kwargs)`` in the current model (compiling its functions); return
    it and the seconds it took."""
    return timed(lambda: SFPStep(**kwargs))


def time_steps(
    steps: Sequence[SFPStep],
    q,
    *,
    warmup: int,
    budget_s: float,
    min_sweeps: int,
    max_sweeps: int,
    seed: int = 0,
) -> list[tuple[np.ndarray, list, object]]:
    """Time ``step.astep`` sweeps of several steps, interleaved, after ``warmup`` untimed ones.

    Each step runs its own chain from ``q``. Rounds of one sweep per step continue until every
    step has ``min_sweeps`` and ``budget_s`` (per step) is spent, or ``max_sweeps`` is reached;
    interleaving exposes the variants being compared to the same background load. Returns, per
    step, its per-sweep seconds, stats dicts and last state.
    """
    states = []
    for step in steps:
        step.rng = np.random.default_rng(seed)
        state = q
        for _ in range(warmup):
            state, _ = step.astep(state)
        states.append(state)
    times = [[] for _ in steps]
    stats_ = [[] for _ in steps]
    began = time.perf_counter()
    while len(times[0]) < max_sweeps and (
        len(times[0]) < min_sweeps or time.perf_counter() - began < budget_s * len(steps)
    ):
        for k, step in enumerate(steps):
            t0 = time.perf_counter()
            states[k], sweep_stats = step.astep(states[k])
            times[k].append(time.perf_counter() - t0)
            stats_[k].append(sweep_stats[0])
    return [(np.array(t), st, q_) for t, st, q_ in zip(times, stats_, states, strict=True)]


def time_sweeps(step: SFPStep, q, **kwargs: Any) -> tuple[np.ndarray, list, object]:
    """:func:`time_steps` for one step: per-sweep seconds, stats dicts, last state."""
    return time_steps([step], q, **kwargs)[0]


# ----------------------------------------------------------------------- network-learning protocol
def sample_sfp(
    model: pm.Model, L: int, sweeps: int, seed: int, step: SFPStep | None = None
) -> xr.DataTree:
    """SFP-S: one chain of ``sweeps`` sweeps of ``SFPStep(L=L)``, the first
    :data:`DISCARDED_SWEEPS` discarded as tuning; ``step``, a step of ``model`` built before
    (e.g. for other data of the model's ``pm.Data``), instead of a new one."""
    with model:
        return pm.sample(
            step=SFPStep(L=L) if step is None else step,
            tune=DISCARDED_SWEEPS,
            draws=sweeps - DISCARDED_SWEEPS,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


def sample_nuts(model: pm.Model, settings: Any, seed: int) -> tuple[xr.DataTree, int]:
    """NUTS on the same model (``target_accept=0.9``, ``cores=1``) with the budget
    ``settings.nuts_tune``, ``settings.nuts_draws``, ``settings.nuts_chains``; returns the
    DataTree and the number of divergences."""
    with model:
        idata = pm.sample(
            tune=settings.nuts_tune,
            draws=settings.nuts_draws,
            chains=settings.nuts_chains,
            cores=1,
            target_accept=0.9,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata, int(idata["sample_stats"]["diverging"].sum())


def mle_prediction(idata: xr.DataTree, network: Network, X_new: np.ndarray) -> np.ndarray:
    """SFP-MLE: maximise each weight's marginal, predict with the expansion of Eq. 18."""
    return sfp_mle(idata, network).predict(X_new)


# ------------------------------------------------------------------------------- sampler comparison
@dataclass
class Run:
    """One ``pm.sample`` call and what was measured on it."""

    name: str
    seconds: float
    idata: Any
    grads: int = 0
    iterations: int = 0
    """Draws of all chains, tuning included."""
    extra: dict = field(default_factory=dict)


def jittered_starts(model: pm.Model, chains: int, seed: int) -> list[dict]:
    """Per-chain starts: the initial point + U(-1, 1) in the unconstrained space (PyMC's jitter),
    returned in the constrained space keyed by variable name, for ``pm.sample(initvals=...)``."""
    rng = np.random.default_rng(seed)
    point = model.initial_point()
    starts = []
    for _ in range(chains):
        start = {}
        for rv in model.free_RVs:
            value_var = model.rvs_to_values[rv]
            value = point[value_var.name] + rng.uniform(-1, 1, np.shape(point[value_var.name]))
            transform = model.rvs_to_transforms.get(rv)
            if transform is not None:
                value = transform.backward(pt.as_tensor(value), *rv.owner.inputs).eval()
            start[rv.name] = np.asarray(value, dtype=float)
        starts.append(start)
    return starts


def sample_run(
    name: str,
    model: pm.Model,
    make_step: Callable[[], object] | None,
    *,
    chains: int,
    cores: int,
    tune: int,
    draws: int,
    starts: list[dict],
    grad_stat: str,
    seed: int,
) -> Run:
    """Build the step (``None``: NUTS) and sample, timing both; count gradient evaluations.

    The tuning draws are kept (``discard_tuned_samples=False``) so that ``grad_stat`` is summed
    over them too; NUTS gets ``init="adapt_diag"`` so that it starts from ``starts`` instead of
    jittering them a second time.
    """
    began = time.perf_counter()
    with model:
        step = make_step() if make_step is not None else None
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=cores,
            step=step,
            init="adapt_diag",
            initvals=starts,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    seconds = time.perf_counter() - began
    grads = int(idata["sample_stats"][grad_stat].values.sum())
    if tune > 0:
        grads += int(idata["warmup_sample_stats"][grad_stat].values.sum())
    print(f"  {name}: {seconds:.1f} s, {grads} gradient evaluations", flush=True)
    return Run(name, seconds, idata, grads, chains * (tune + draws))


def warm_up(model: pm.Model) -> float:
    """Compile the model's log-density and gradient once, untimed, and return the seconds it took.

    PyTensor's default linker (Numba) caches compiled code on disk: a cold compile of a new graph
    can take tens of seconds, a warm one 1–2 s. Warming up first keeps the order in which the
    samplers run from deciding which of them pays the cold compile; every timed run still
    compiles its own function (from the warm cache). Constructing ``StochasticDynamics``
    compiles its function and calls it once (generating the machine code)."""
    return timed(lambda: StochasticDynamics(n_leapfrog=1, correct=False, model=model))[1]


def draws_of(idata, name: str) -> np.ndarray:
    """A variable's post-tuning draws as ``(chain, draw, *shape)``."""
    return np.asarray(idata["posterior"][name].values, dtype=float)


def stat_of(idata, name: str) -> np.ndarray:
    """A sample stat's post-tuning values as ``(chain, draw, ...)``."""
    return np.asarray(idata["sample_stats"][name].values)


def median_step_size(idata) -> float:
    """Median of the post-tuning ``step_size`` stat over chains and draws."""
    return float(np.median(stat_of(idata, "step_size")))


def noise_share(idata) -> str:
    """Mean ``gradient_noise_share`` stat of a minibatch run (the share of the dynamics' heat
    that the gradient noise supplies) for a table, ``"–"`` where the stat is absent."""
    if "gradient_noise_share" not in idata["sample_stats"].data_vars:
        return "–"
    return f"{stat_of(idata, 'gradient_noise_share').mean():.2f}"


def sd_label(settings: dict, correct: bool = True) -> str:
    """``StochasticDynamics`` settings (alpha, n_leapfrog, thin) as a table label."""
    return f"α={settings['alpha']:g}, L={settings['n_leapfrog']}, thin={settings['thin']}" + (
        "" if correct else ", uncorrected"
    )


def sd_step(settings: dict, correct: bool = True) -> Callable[[], StochasticDynamics]:
    """A factory of ``StochasticDynamics(correct=correct, **settings)`` for :func:`sample_run`."""
    return lambda: StochasticDynamics(correct=correct, **settings)
