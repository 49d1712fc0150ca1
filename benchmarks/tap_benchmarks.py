"""TAP mean-field Bayes learning (Opper & Winther 1996) with the package's public API.

Run from the repository root::

    python benchmarks/tap_benchmarks.py            # full settings
    python benchmarks/tap_benchmarks.py --quick --output /tmp/tap.md   # smoke run
    python benchmarks/tap_benchmarks.py --only curve   # one benchmark (see --help)

One module per benchmark: ``tap_learning_curve.py`` (the paper's Fig. 1 with the large-N
theory), ``tap_mcmc.py`` (time to the same test error as MCMC) and ``tap_glass.py`` (leave-one-out
estimates against the measured test error on a real, correlated data set). Every number is from
fixed seeds; BLAS is pinned to one thread. Results go to ``benchmarks/RESULTS.md`` between
``<!-- tap:start -->`` and ``<!-- tap:end -->``; the figure to ``benchmarks/figures/`` (a
``--quick`` run writes it to the temporary folder).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import tap_glass
import tap_learning_curve
import tap_mcmc
from _common import BENCHMARKS_DIR, Suite, main

from pymc_sfp.core.tap import TAPConvergenceWarning


@dataclass(frozen=True)
class Settings:
    """Budgets of one run; ``QUICK`` shrinks them to a smoke run.

    Attributes
    ----------
    mode : str
        "full" or "quick".
    curve_n, curve_beta : int, float
        ``N`` and ``β`` of the learning curve (the paper: 50 and 0.5).
    alphas : tuple of float
        The ``α = m/N`` grid of the learning curve.
    curve_runs : int
        Runs per ``α`` (the paper: 200).
    mcmc_sizes : tuple of int
        ``N`` of the TAP-vs-MCMC timing (``m = mcmc_alpha · N`` training examples).
    mcmc_alpha, mcmc_beta : float
        ``α`` and the perceptron's ``β`` of the timing problems.
    mcmc_test : int
        Test inputs on which the errors are measured.
    mcmc_max_draws : int
        The MCMC runs double their draws (tune = draws, one chain) from 25 up to this.
    mcmc_error_slack : float
        MCMC has reached "the same test error" when its error is at most TAP's plus this.
    glass_splits : int
        Random glass splits (train 89 / test 96, the sizes of Berrones 2009).
    prior_vars : tuple of float
        The prior-variance grid of the evidence maximisation on glass.
    seed : int
        Seed of the problems and samplers.
    figures : Path
        Where the figure goes.
    """

    mode: str = "full"
    curve_n: int = 50
    curve_beta: float = 0.5
    alphas: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0)
    curve_runs: int = 200
    mcmc_sizes: tuple[int, ...] = (50, 200)
    mcmc_alpha: float = 2.0
    mcmc_beta: float = 2.0
    mcmc_test: int = 5000
    mcmc_max_draws: int = 800
    mcmc_error_slack: float = 0.01
    glass_splits: int = 10
    prior_vars: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    seed: int = 1996
    figures: Path = BENCHMARKS_DIR / "figures"


FULL = Settings()
QUICK = replace(
    FULL,
    mode="quick",
    alphas=(0.5, 2.0, 4.0, 6.0),
    curve_runs=8,
    mcmc_sizes=(20, 50),
    mcmc_test=2000,
    mcmc_max_draws=200,
    glass_splits=2,
    figures=Path(tempfile.gettempdir()) / "pymc_sfp_tap_figures",
)

SUITE = Suite(
    script="tap_benchmarks.py",
    title="# TAP mean-field learning (Opper & Winther 1996): `benchmarks/tap_benchmarks.py`",
    note="Fixed seeds; wall times may have been taken while another benchmark shared the 2 "
    "cores. How each benchmark measures is described in its section and its module's docstring.",
    prefix="tap",
    begin="<!-- tap:start -->",
    end="<!-- tap:end -->",
    benchmarks={
        "curve": tap_learning_curve.benchmark,
        "mcmc": tap_mcmc.benchmark,
        "glass": tap_glass.benchmark,
    },
    full=FULL,
    quick=QUICK,
    ignore_warnings=(TAPConvergenceWarning, UserWarning),
)


if __name__ == "__main__":
    sys.exit(main(SUITE))
