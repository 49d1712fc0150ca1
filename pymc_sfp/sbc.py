r"""Simulation-based calibration of a sampler on a PyMC model (Talts et al. 2018).

Draw parameters from the prior, :math:`\tilde\theta \sim p(\theta)`, and data from them,
:math:`\tilde y \sim p(y \mid \tilde\theta)`; then draw :math:`\theta_1, \dots, \theta_L`
from the posterior :math:`p(\theta \mid \tilde y)`. For any scalar quantity :math:`f`, the rank
of :math:`f(\tilde\theta)` among :math:`f(\theta_1), \dots, f(\theta_L)` is uniform on
:math:`\{0, \dots, L\}` (Talts et al. 2018, Theorem 1). A sampler that misses part of the
posterior, or is too narrow, too wide or biased, gives ranks that are not uniform; repeated over
many simulations, a chi-square test of the binned ranks says whether they are.

What it cannot see: the check averages over the prior, so a sampler that is wrong only for
rare data sets may pass, and one that ignores the data and returns prior draws passes exactly;
it assumes the kept draws are close to independent (thin to about one per autocorrelation time,
as Talts et al. 2018 do with the effective sample size), as correlated draws alone make ranks
non-uniform.

The steps compile once: the observations are ``pm.Data``, each simulation's data set is put in
with ``pm.set_data``, and a step method built once (:func:`step_sampler`) is reused by every
``pm.sample`` call, which restarts its tuning (``reset_tuning``) and reseeds it (``setup_chain``).

References
----------
Talts, S., Betancourt, M., Simpson, D., Vehtari, A. and Gelman, A. (2018). Validating Bayesian
inference algorithms with simulation-based calibration. arXiv:1804.06788.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
from pymc.backends.base import MultiTrace
from pytensor.compile.sharedvalue import SharedVariable
from scipy import stats

from pymc_sfp._validation import check_bool, check_int_at_least, check_positive_int, is_integer

__all__ = [
    "SBCResult",
    "Sampler",
    "hierarchical_normal_model",
    "rank_statistics",
    "simulation_based_calibration",
    "step_sampler",
    "uniformity_test",
]

#: A sampler for :func:`simulation_based_calibration`: ``(model, random_seed) -> draws``, where
#: the draws are what ``pm.sample`` returns (a DataTree with a ``posterior`` group) or a mapping
#: from variable names to arrays of shape ``(draws, *variable_shape)``.
Sampler = Callable[[pm.Model, int], Any]

#: Below this expected count per bin the chi-square approximation of the test is poor.
MIN_EXPECTED_PER_BIN = 5


@dataclass(frozen=True)
class SBCResult:
    r"""The outcome of :func:`simulation_based_calibration`.

    Attributes
    ----------
    quantities : tuple of str
        The scalar quantities ranked: a variable's name, or ``name[i, j]`` for one element of a
        non-scalar variable.
    prior : ndarray, shape (n_simulations, n_quantities)
        The prior draws :math:`f(\tilde\theta)` the data were simulated from.
    ranks : ndarray of int, shape (n_simulations, n_quantities)
        Rank of each prior draw among the thinned posterior draws, in ``0 … n_posterior_draws``.
    n_posterior_draws : int
        :math:`L`, the number of posterior draws each rank is taken among.
    counts : ndarray of int, shape (n_bins, n_quantities)
        The ranks binned into ``n_bins`` equal groups of consecutive ranks.
    p_values : dict of str to float
        Chi-square p-value of the uniformity of each quantity's binned ranks.
    divergences : ndarray of int, shape (n_simulations,)
        Divergent transitions in each simulation's draws after tuning, before thinning (0 when
        the sampler reports no ``diverging`` stat).
    """

    quantities: tuple[str, ...]
    prior: np.ndarray
    ranks: np.ndarray
    n_posterior_draws: int
    counts: np.ndarray
    p_values: dict[str, float]
    divergences: np.ndarray

    @property
    def n_simulations(self) -> int:
        return self.ranks.shape[0]

    @property
    def n_bins(self) -> int:
        return self.counts.shape[0]


def rank_statistics(prior: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    r"""Rank of each prior draw among posterior draws (Talts et al. 2018, Algorithm 1).

    Parameters
    ----------
    prior : array_like
        The draws :math:`f(\tilde\theta)` the data were simulated from, of any shape ``S``.
    posterior : array_like, shape (L, ``S``)
        Posterior draws :math:`f(\theta_l)` given those data.

    Returns
    -------
    ndarray of int, shape ``S``
        :math:`\#\{l : f(\theta_l) < f(\tilde\theta)\}`, in ``0 … L``. Ranks are the same
        for any increasing function of the quantity (those of ``τ`` are those of ``log τ``).
    """
    prior, posterior = np.asarray(prior), np.asarray(posterior)
    return np.sum(posterior < prior, axis=0)


def uniformity_test(ranks: np.ndarray, n_ranks: int, n_bins: int) -> tuple[np.ndarray, float]:
    """Chi-square test that ranks are uniform on ``0 … n_ranks - 1``.

    Talts et al. (2018) read the histogram of binned ranks by eye; this is the test that turns it
    into a number (as in the Stan User's Guide, "Simulation-based calibration: testing
    uniformity"): Pearson's statistic over equal bins, approximately chi-square with
    ``n_bins - 1`` degrees of freedom when every bin expects at least 5 ranks.

    Parameters
    ----------
    ranks : array_like of int, shape (n_simulations,)
    n_ranks : int
        :math:`L + 1`, the number of possible ranks (one more than the posterior draws).
    n_bins : int
        Number of bins of consecutive ranks; it must divide ``n_ranks`` so that every bin holds
        the same number of ranks and expects the same count.

    Returns
    -------
    counts : ndarray of int, shape (n_bins,)
    p_value : float
        From :func:`scipy.stats.chisquare` against equal expected counts.
    """
    ranks = np.asarray(ranks)
    _check_bins(n_ranks, n_bins)
    if ranks.size and (ranks.min() < 0 or ranks.max() >= n_ranks):
        raise ValueError(f"ranks must lie in 0 … {n_ranks - 1}")
    expected = ranks.size / n_bins
    if expected < MIN_EXPECTED_PER_BIN:
        warnings.warn(
            f"{ranks.size} ranks in {n_bins} bins expect {expected:.3g} per bin, fewer than "
            f"{MIN_EXPECTED_PER_BIN}: the chi-square p-value is unreliable; use fewer bins or "
            "more simulations",
            UserWarning,
            stacklevel=2,
        )
    counts = np.bincount(ranks // (n_ranks // n_bins), minlength=n_bins)
    return counts, float(stats.chisquare(counts).pvalue)


def step_sampler(
    step: Callable[[], Any], *, tune: int = 200, draws: int = 400, **sample_kwargs: Any
) -> Sampler:
    """A :data:`Sampler` that runs ``pm.sample`` with one step method, built (compiled) once.

    Parameters
    ----------
    step : callable
        Called without arguments inside the model's context, on the first call only, to build the
        step method, e.g. ``lambda: pymc_sfp.SFPStep()``. Its compiled functions read the
        ``pm.Data`` that :func:`simulation_based_calibration` sets, and every ``pm.sample`` call
        restarts its tuning and reseeds it, so one step serves all simulations.
    tune, draws : int
        Tuning and kept iterations per chain.
    **sample_kwargs
        More arguments of ``pm.sample``; the defaults are one chain, ``cores=1``, no progress bar
        and no convergence checks.

    Returns
    -------
    Sampler
        ``(model, random_seed) -> DataTree``. It refuses a model other than the one its step was
        built for.
    """
    options = {
        "chains": 1,
        "cores": 1,
        "progressbar": False,
        "compute_convergence_checks": False,
    } | sample_kwargs
    built: dict[str, Any] = {}

    def sample(model: pm.Model, random_seed: int) -> Any:
        if "step" not in built:
            with model:
                built.update(step=step(), model=model)
        elif built["model"] is not model:
            raise ValueError("this sampler's step was built for another model")
        with model:
            return pm.sample(
                step=built["step"], tune=tune, draws=draws, random_seed=random_seed, **options
            )

    return sample


def simulation_based_calibration(
    model: pm.Model,
    sampler: Sampler,
    quantities: str | Sequence[str],
    *,
    n_simulations: int = 100,
    n_posterior_draws: int = 99,
    n_bins: int = 10,
    random_seed: int | None = None,
) -> SBCResult:
    """Simulation-based calibration of ``sampler`` on ``model`` (Talts et al. 2018, Algorithm 1).

    For each of ``n_simulations`` draws of the parameters and data from the prior predictive
    distribution, the data are set into the model's ``pm.Data``, ``sampler`` draws from the
    posterior, its draws are thinned to ``n_posterior_draws`` evenly spaced ones, and the rank of
    the prior draw of each quantity among them is recorded. If the sampler draws from the
    posterior, each quantity's ranks are uniform on ``0 … n_posterior_draws``; the binned ranks
    are tested for that with a chi-square test (:func:`uniformity_test`).

    Parameters
    ----------
    model : pymc.Model
        Every observed variable's data must be a ``pm.Data`` (so they can be replaced without
        recompiling); their current values fix the simulated data's shapes and are put back at
        the end.
    sampler : Sampler
        ``(model, random_seed) -> draws``, e.g. from :func:`step_sampler`: a DataTree or a
        ``MultiTrace`` (what ``pm.sample`` or an approximation's ``.sample()`` returns), or a
        mapping of names to arrays of draws. It must return at least
        ``n_posterior_draws`` draws (chains are pooled). Thinning makes them close to
        independent, as the test assumes: keep the sampler's draws per kept draw above its
        integrated autocorrelation time.
    quantities : str or sequence of str
        Names of free or deterministic variables; each element of a non-scalar variable is a
        quantity of its own (``"theta[0]"`` …).
    n_simulations : int
    n_posterior_draws : int
        :math:`L`; ranks take the :math:`L + 1` values ``0 … n_posterior_draws``.
    n_bins : int
        Must divide :math:`L + 1`. Choose it so that ``n_simulations / n_bins >= 5``.
    random_seed : int, optional
        Seeds the prior predictive draws and, through independent streams, each simulation's
        sampler.

    Returns
    -------
    SBCResult

    Examples
    --------
    >>> import pymc_sfp
    >>> from pymc_sfp.sbc import hierarchical_normal_model, step_sampler
    >>> model = hierarchical_normal_model(n_groups=4)
    >>> result = pymc_sfp.simulation_based_calibration(  # doctest: +SKIP
    ...     model, step_sampler(pymc_sfp.StochasticDynamics, tune=200, draws=400),
    ...     ["mu", "tau"], n_simulations=200, n_posterior_draws=99, n_bins=10, random_seed=1)
    >>> result.p_values  # doctest: +SKIP
    """
    n_simulations = check_int_at_least(n_simulations, 1, "n_simulations")
    n_posterior_draws = check_int_at_least(n_posterior_draws, 1, "n_posterior_draws")
    _check_bins(n_posterior_draws + 1, n_bins)
    names = list(dict.fromkeys([quantities] if isinstance(quantities, str) else quantities))
    if not names:
        raise ValueError("name at least one quantity to rank")
    rankable = [v.name for v in (*model.free_RVs, *model.deterministics)]
    unknown = [name for name in names if name not in rankable]
    if unknown:
        raise ValueError(
            f"quantities {unknown} are not free or deterministic variables of the model; "
            f"those are {rankable}"
        )
    data = _observed_data(model)
    prior_seed, *chain_seeds = np.random.SeedSequence(random_seed).spawn(n_simulations + 1)
    simulated = pm.sample_prior_predictive(
        draws=n_simulations,
        model=model,
        var_names=[*names, *data],
        random_seed=np.random.default_rng(prior_seed),
    )
    labels, prior = _flatten(
        {name: simulated["prior"][name].values[0] for name in names}, n_simulations
    )
    datasets = {name: simulated["prior_predictive"][obs].values[0] for obs, name in data.items()}
    original = {name: model[name].get_value() for name in datasets}

    ranks = np.empty((n_simulations, len(labels)), dtype=int)
    divergences = np.zeros(n_simulations, dtype=int)
    try:
        for i, seed in enumerate(chain_seeds):
            pm.set_data(
                {name: values[i].astype(original[name].dtype) for name, values in datasets.items()},
                model=model,
            )
            result = sampler(model, int(seed.generate_state(1)[0]))
            draws = {name: _posterior_draws(result, name) for name in names}
            n_available = len(next(iter(draws.values())))
            if n_available < n_posterior_draws:
                raise ValueError(
                    f"the sampler returned {n_available} draws, fewer than "
                    f"n_posterior_draws={n_posterior_draws}"
                )
            kept = np.round(np.linspace(0, n_available - 1, n_posterior_draws)).astype(int)
            _, posterior = _flatten({k: v[kept] for k, v in draws.items()}, n_posterior_draws)
            ranks[i] = rank_statistics(prior[i], posterior)
            divergences[i] = _count_divergences(result)
    finally:
        pm.set_data(original, model=model)

    counts, p_values = [], {}
    for j, label in enumerate(labels):
        binned, p_values[label] = uniformity_test(ranks[:, j], n_posterior_draws + 1, n_bins)
        counts.append(binned)
    return SBCResult(
        quantities=tuple(labels),
        prior=prior,
        ranks=ranks,
        n_posterior_draws=n_posterior_draws,
        counts=np.stack(counts, axis=1),
        p_values=p_values,
        divergences=divergences,
    )


def hierarchical_normal_model(
    n_groups: int = 4, *, centred: bool = False, y: np.ndarray | None = None
) -> pm.Model:
    r"""The hierarchical normal model the package's samplers are calibrated on.

    :math:`\mu \sim N(0, 1)`, :math:`\tau \sim \text{HalfNormal}(1)`,
    :math:`\theta_j \sim N(\mu, \tau)`, :math:`y_j \sim N(\theta_j, 1)`,
    :math:`j = 1 \dots` ``n_groups``; with few groups and small :math:`\tau` the centred
    posterior is a funnel in :math:`(\log\tau, \theta)`.

    Parameters
    ----------
    n_groups : int
    centred : bool
        With ``True`` the model samples :math:`\theta` itself; with ``False`` (non-centred) it
        samples :math:`z_j \sim N(0, 1)` and :math:`\theta = \mu + \tau z` is a deterministic.
    y : array_like, optional
        The observations (``pm.Data`` named ``"y"``), ``n_groups`` finite numbers; zeros by
        default.

    Raises
    ------
    TypeError
        If ``n_groups`` is not an integer or ``centred`` not a bool.
    ValueError
        If ``n_groups`` is not ≥ 1 or ``y`` is not ``n_groups`` finite numbers.
    """
    n_groups = check_positive_int(n_groups, "n_groups")
    centred = check_bool(centred, "centred")
    y = np.zeros(n_groups) if y is None else np.asarray(y, dtype=float)
    if y.shape != (n_groups,) or not np.isfinite(y).all():
        raise ValueError(
            f"y must be n_groups = {n_groups} finite numbers, got shape {y.shape}"
            + ("" if y.shape != (n_groups,) else " with non-finite values")
        )
    with pm.Model() as model:
        data = pm.Data("y", y)
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        if centred:
            theta = pm.Normal("theta", mu, tau, shape=n_groups)
        else:
            z = pm.Normal("z", 0.0, 1.0, shape=n_groups)
            theta = pm.Deterministic("theta", mu + tau * z)
        pm.Normal("y_obs", theta, 1.0, observed=data)
    return model


def _check_bins(n_ranks: int, n_bins: int) -> None:
    if not is_integer(n_bins) or n_bins < 2 or n_ranks % n_bins:
        raise ValueError(
            f"n_bins must be >= 2 and divide the number of ranks {n_ranks}, got {n_bins}"
        )


def _observed_data(model: pm.Model) -> dict[str, str]:
    """``{observed variable: its pm.Data's name}``; every observation must be a ``pm.Data``."""
    data = {}
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        if not isinstance(value, SharedVariable) or value.name not in model.named_vars:
            raise ValueError(
                f"the observations of {rv.name!r} are not a pm.Data: simulation-based "
                "calibration replaces them for each simulation, so pass them as "
                f"pm.Data(...) (observed={rv.name!r} is {type(value).__name__})"
            )
        data[rv.name] = value.name
    if not data:
        raise ValueError("the model has no observed variables to simulate")
    return data


def _flatten(values: Mapping[str, np.ndarray], n: int) -> tuple[list[str], np.ndarray]:
    """Labels and an ``(n, n_quantities)`` array of the scalar elements of ``values``."""
    labels, columns = [], []
    for name, array in values.items():
        shape = np.shape(array)[1:]
        for index in itertools.product(*map(range, shape)):
            labels.append(f"{name}[{', '.join(map(str, index))}]" if index else name)
        columns.append(np.reshape(array, (n, -1)))
    return labels, np.concatenate(columns, axis=1)


def _posterior_draws(result: Any, name: str) -> np.ndarray:
    """Draws of ``name``, shape ``(draws, *shape)``, chains pooled, from a sampler's result."""
    if isinstance(result, MultiTrace):
        return np.asarray(result.get_values(name, combine=True))
    if isinstance(result, Mapping) and "posterior" not in result:
        return np.asarray(result[name])
    values = result["posterior"][name].values
    return values.reshape(-1, *values.shape[2:])


def _count_divergences(result: Any) -> int:
    """Divergent transitions after tuning, if the sampler reports them."""
    if isinstance(result, MultiTrace):
        if "diverging" not in result.stat_names:
            return 0
        return int(np.sum(result.get_sampler_stats("diverging", combine=True)))
    if isinstance(result, Mapping) and "posterior" not in result:
        return 0
    try:
        diverging = result["sample_stats"]["diverging"].values
    except KeyError:
        return 0
    return int(np.sum(diverging))
