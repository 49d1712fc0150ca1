"""Network-learning experiments of Berrones (2009, §4) with the package's public API.

Run from the repository root::

    python benchmarks/sfp_learning.py          # full settings (~35 min on 2 shared cores)
    python benchmarks/sfp_learning.py --quick --output /tmp/sfp_learning.md   # smoke run
    python benchmarks/sfp_learning.py --only glass   # one experiment (see --help)

One module per experiment: ``learning_glass.py`` (paper Table 2), ``learning_santafe.py``
(Table 3), ``learning_laser.py`` (Tables 4-5, on a stand-in series), ``learning_cost.py``
(Fig. 10). Every number is one run with fixed seeds; wall times include compilation. SFP runs
use ``pm.sample(step=SFPStep(L=L), tune=15, draws=sweeps - 15, chains=1, cores=1)``: PyMC
discards the 15 tuning sweeps, as the paper discards the first 15 of ``M`` sweeps. BLAS is pinned
to one thread. Results go to ``benchmarks/RESULTS.md`` between ``<!-- sfp-learning:start -->``
and ``<!-- sfp-learning:end -->``; the rest of the file is left byte-for-byte as it was.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import learning_cost
import learning_glass
import learning_laser
import learning_santafe
from _common import Suite, main


@dataclass(frozen=True)
class Settings:
    """Budgets of one run; ``QUICK`` shrinks them to a smoke run.

    Attributes
    ----------
    mode : str
        "full" or "quick".
    seed : int
        Seed of every sampler (glass: ``seed + split``).
    glass_splits : int
        Random glass splits (the paper: 10).
    glass_L, glass_sweeps : int
        SFP resolution and sweeps for glass (SFP-S, SFP-MLE and the initial fit of SFP-I).
    series_L, series_sweeps : int
        The same for Santa Fe B and the 2-20-1 laser network.
    hidden_sizes : tuple of int
        Hidden units of the laser hidden-size sweep.
    hidden_L, hidden_sweeps : int
        SFP resolution and sweeps per network of the hidden-size sweep; ``hidden_L`` is also
        the resolution at which the cost of a sweep is timed.
    timed_sweeps : int
        Sweeps timed per network for the cost section (after one warm-up sweep).
    nuts_tune, nuts_draws, nuts_chains : int
        NUTS budget (``target_accept=0.9``, ``cores=1``).
    """

    mode: str = "full"
    seed: int = 20090601
    glass_splits: int = 10
    glass_L: int = 100
    glass_sweeps: int = 100
    series_L: int = 50
    series_sweeps: int = 100
    hidden_sizes: tuple[int, ...] = (20, 40, 80, 140)
    hidden_L: int = 30
    hidden_sweeps: int = 50
    timed_sweeps: int = 9
    nuts_tune: int = 150
    nuts_draws: int = 150
    nuts_chains: int = 2


QUICK = Settings(
    mode="quick",
    glass_splits=2,
    glass_L=20,
    glass_sweeps=20,
    series_L=20,
    series_sweeps=18,
    hidden_sizes=(20, 40),
    hidden_L=20,
    hidden_sweeps=17,
    timed_sweeps=1,
    nuts_tune=50,
    nuts_draws=50,
    nuts_chains=1,
)

SUITE = Suite(
    script="sfp_learning.py",
    title="# Network learning (Berrones 2009, §4): `benchmarks/sfp_learning.py`",
    note="One run per experiment, fixed seeds; wall times include compilation and may have "
    "been taken while another benchmark shared the 2 cores. How each experiment measures is "
    "described in its section and in its module's docstring.",
    prefix="sfp-learning",
    begin="<!-- sfp-learning:start -->",
    end="<!-- sfp-learning:end -->",
    benchmarks={
        "glass": learning_glass.benchmark,
        "santafe": learning_santafe.benchmark,
        "laser": learning_laser.benchmark,
        "cost": learning_cost.benchmark,
    },
    full=Settings(),
    quick=QUICK,
    ignore_warnings=(UserWarning, RuntimeWarning, FutureWarning),
)

if __name__ == "__main__":
    sys.exit(main(SUITE))
