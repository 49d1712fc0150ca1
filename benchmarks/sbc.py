"""Simulation-based calibration (Talts et al. 2018) of the package's exact samplers.

Run from the repository root::

    python benchmarks/sbc.py                 # full run, about 4 minutes on 2 cores
    python benchmarks/sbc.py --quick --output /tmp/sbc.md   # smoke run, about 2 minutes
    python benchmarks/sbc.py --only centring # one benchmark (see --help)

The script prints markdown tables and writes them into the block between ``<!-- sbc:start -->``
and ``<!-- sbc:end -->`` of ``benchmarks/RESULTS.md`` (or ``--output``; appended if absent, the
rest of the file kept, re-read right before it is written); with ``--only`` only that
benchmark's subsection is replaced. The rank histograms are saved as PNG files in
``benchmarks/figures/`` (a ``--quick`` run writes them to the temporary folder), one figure per
benchmark.

What is measured, and how
-------------------------
The model is ``pymc_sfp.sbc.hierarchical_normal_model``: mu ~ N(0, 1), tau ~ HalfNormal(1),
theta_j ~ N(mu, tau), y_j ~ N(theta_j, 1), J = 4 groups, non-centred (z_j ~ N(0, 1),
theta = mu + tau z) unless said otherwise. ``pymc_sfp.simulation_based_calibration`` draws
(mu, tau, y) from the prior predictive distribution 200 times; for each, one chain (``tune=200``,
``draws=400``, ``random_seed`` from the run's seed) with one step method built once for all
simulations; the 400 draws are thinned to 99 evenly spaced ones, and the rank of the prior draw
of mu and of tau (tau's ranks are log tau's) among them is taken. Ranks of an exact sampler are
uniform on 0 … 99; they are grouped into 10 bins of 10 ranks and tested with Pearson's
chi-square (9 degrees of freedom). Seconds are wall-clock for the whole calibration, the step's
compilation included. Divergences are the ``diverging`` draws after tuning, summed over the
simulations.

1. ``exact`` — the exact samplers on the non-centred model: ``SFPStep()`` (corrected, automatic
   boxes; ``marginal_points=0``, as the recorded conditionals are not used),
   ``StochasticDynamics()`` (generalised HMC) and ``ReplicaExchangeDynamics()`` (8 tempered
   replicas, adapted ladder).
2. ``centring`` — ``StochasticDynamics()`` on the centred model, where few groups and small tau
   make a funnel that short chains explore badly (divergent transitions flag it); same sampler,
   settings and seed as the non-centred ``StochasticDynamics`` rows of ``exact``.

The figures show, per sampler and quantity, the counts per rank bin against the expected count
and the band that holds 99 % of a bin's counts under uniformity (Binomial(N, 1/bins)).

BLAS threads: the script re-executes itself with ``OPENBLAS_NUM_THREADS`` (and the OpenMP / MKL
equivalents) set to 1; chains run one at a time.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib
from _common import BENCHMARKS_DIR, Section, Suite, main, md_table  # benchmarks/ on sys.path
from scipy import stats

import pymc_sfp
from pymc_sfp.sbc import (
    SBCResult,
    hierarchical_normal_model,
    simulation_based_calibration,
    step_sampler,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

QUANTITIES = ("mu", "tau")


@dataclass(frozen=True)
class Settings:
    mode: str = "full"
    n_simulations: int = 200
    tune: int = 200
    draws: int = 400
    n_posterior_draws: int = 99
    n_bins: int = 10
    n_groups: int = 4
    seed: int = 2018
    #: Where the rank histograms go (a smoke run keeps them out of the repository).
    figures: Path = BENCHMARKS_DIR / "figures"


FULL = Settings()
QUICK = replace(
    FULL,
    mode="quick",
    n_simulations=20,
    tune=50,
    draws=40,
    n_posterior_draws=9,
    n_bins=2,
    figures=Path(tempfile.gettempdir()) / "pymc_sfp_sbc_figures",
)


@dataclass(frozen=True)
class Run:
    sampler: str
    centred: bool
    seconds: float
    result: SBCResult


STEPS: dict[str, Callable] = {
    "SFPStep": lambda: pymc_sfp.SFPStep(marginal_points=0),
    "StochasticDynamics": pymc_sfp.StochasticDynamics,
    "ReplicaExchangeDynamics": pymc_sfp.ReplicaExchangeDynamics,
}


def calibrate(settings: Settings, sampler: str, centred: bool) -> Run:
    print(f"  {sampler}, {'centred' if centred else 'non-centred'} …", flush=True)
    began = time.perf_counter()
    result = simulation_based_calibration(
        hierarchical_normal_model(settings.n_groups, centred=centred),
        step_sampler(STEPS[sampler], tune=settings.tune, draws=settings.draws),
        QUANTITIES,
        n_simulations=settings.n_simulations,
        n_posterior_draws=settings.n_posterior_draws,
        n_bins=settings.n_bins,
        random_seed=settings.seed,
    )
    return Run(sampler, centred, time.perf_counter() - began, result)


def table(runs: list[Run]) -> str:
    rows = []
    for run in runs:
        result = run.result
        for quantity in result.quantities:
            rows.append(
                [
                    f"`{run.sampler}`",
                    "centred" if run.centred else "non-centred",
                    "tau (= log tau)" if quantity == "tau" else quantity,
                    f"{result.p_values[quantity]:.3g}",
                    f"{int(result.divergences.sum())} in {int((result.divergences > 0).sum())}",
                    f"{run.seconds:.0f}",
                ]
            )
    headers = ["sampler", "model", "quantity", "chi-square p", "divergences (in sims)", "seconds"]
    return md_table(headers, rows)


def histograms(runs: list[Run], path: Path) -> None:
    """One row of rank histograms per run, one column per quantity, with the expected count and
    the central 99 % band of a bin's count under uniformity."""
    fig, axes = plt.subplots(
        len(runs), len(QUANTITIES), figsize=(7, 1.8 * len(runs)), squeeze=False, sharey=True
    )
    for row, run in zip(axes, runs, strict=True):
        result = run.result
        n_bins, n = result.n_bins, result.n_simulations
        low, high = stats.binom.ppf([0.005, 0.995], n, 1 / n_bins)
        for ax, (j, quantity) in zip(row, enumerate(result.quantities), strict=True):
            ax.axhspan(low, high, color="0.88")
            ax.axhline(n / n_bins, color="0.5", lw=0.8)
            ax.bar(range(n_bins), result.counts[:, j], width=0.9, color="C0")
            model = " (centred)" if run.centred else ""
            ax.set_title(
                f"{run.sampler}{model}: {quantity}, p = {result.p_values[quantity]:.2g}",
                fontsize=8,
            )
            ax.set_xticks([])
            ax.tick_params(labelsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("count", fontsize=7)
    last = runs[-1].result
    for ax in axes[-1]:
        ax.set_xlabel(f"rank bin ({last.n_posterior_draws + 1} ranks in {last.n_bins})", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def section(key: str, title: str, runs: list[Run], figures: Path, note: str) -> Section:
    figure = figures / f"sbc_{key}.png"
    histograms(runs, figure)
    body = "\n\n".join(
        [
            f"## {title}",
            table(runs),
            note,
            f"![rank histograms]({figure.parent.name}/{figure.name})",
        ]
    )
    return Section(key, body)


def bench_exact(settings: Settings) -> Section:
    runs = [calibrate(settings, sampler, centred=False) for sampler in STEPS]
    return section(
        "exact",
        "Exact samplers, non-centred model",
        runs,
        settings.figures,
        "An exact sampler's p-values are uniform on (0, 1): a single small p is expected now "
        "and then (6 tests here), a run of them on one sampler is not.",
    )


def bench_centring(settings: Settings) -> Section:
    runs = [calibrate(settings, "StochasticDynamics", centred=True)]
    return section(
        "centring",
        "Centred model (funnel), `StochasticDynamics`",
        runs,
        settings.figures,
        "Same sampler, settings and seed as the non-centred `StochasticDynamics` rows of the "
        "previous table; only the parametrisation differs.",
    )


SUITE = Suite(
    script="sbc.py",
    title="# Simulation-based calibration (`pymc_sfp.simulation_based_calibration`)",
    note=(
        f"{FULL.n_simulations} simulations of the hierarchical normal model with "
        f"J = {FULL.n_groups} (full settings); per simulation one chain, tune {FULL.tune}, draws "
        f"{FULL.draws} thinned to {FULL.n_posterior_draws}; ranks in {FULL.n_bins} bins, "
        "chi-square test of uniformity (Talts et al. 2018). How it is measured is in the "
        "script's docstring."
    ),
    prefix="sbc",
    begin="<!-- sbc:start -->",
    end="<!-- sbc:end -->",
    benchmarks={"exact": bench_exact, "centring": bench_centring},
    full=FULL,
    quick=QUICK,
    ignore_warnings=(UserWarning,),
)


if __name__ == "__main__":
    sys.exit(main(SUITE))
