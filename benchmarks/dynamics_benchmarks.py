"""Benchmarks of ``pymc_sfp.StochasticDynamics`` (persistent-momentum dynamics, Neal 1993).

Run from the repository root::

    python benchmarks/dynamics_benchmarks.py            # full run, about 27 minutes on 2 cores
    python benchmarks/dynamics_benchmarks.py --quick    # smoke run, every budget about 10x smaller
    python benchmarks/dynamics_benchmarks.py --only robot   # one benchmark (see --help)

Every benchmark prints markdown tables and writes them into the dynamics section of
``benchmarks/RESULTS.md``: the block between ``<!-- dynamics:start -->`` and
``<!-- dynamics:end -->`` is replaced (appended if absent); the rest of the file is kept, and the
file is re-read right before it is written. With ``--only`` only that benchmark's subsection of
the block is replaced. Nothing here asserts on timings: they are wall-clock measurements on a
possibly shared machine.

One module per benchmark: ``dynamics_explore.py`` (a settings scan on the robot arm),
``dynamics_robot.py`` (Neal's robot arm, sampler by sampler), ``dynamics_minibatch.py``
(minibatch against full batch on linear regression), ``dynamics_network.py`` (minibatches where a
full gradient is expensive).

Common to all: PyMC's ``pm.sample`` with ``cores=2``, a fixed ``random_seed`` and the same
per-chain starting points for every sampler (PyMC's own jitter recipe, applied once: the model's
initial point plus U(-1, 1) in the unconstrained space, so the chains start apart and R-hat
means something; NUTS gets ``init="adapt_diag"`` so that it starts from the same points instead
of jittering them a second time — otherwise it runs with PyMC's defaults). Wall time is
``time.perf_counter`` around step construction + ``pm.sample``, so compilation, worker start-up
and tuning are included. ESS is ArviZ's bulk ESS (``az.ess``), R-hat ArviZ's rank-normalised
split R-hat (``az.rhat``), both over the post-tuning draws of all chains. Gradient evaluations
include the tuning phase: the sum of the ``n_grad_evals`` stat for ``StochasticDynamics``, of
``n_steps`` (leapfrog steps; PyMC 6's name for NUTS's ``tree_size``) for NUTS and
``pm.HamiltonianMC``. ESS per second and per 1000 gradient evaluations therefore charge each
sampler its whole cost. BLAS is pinned to one thread (``--blas-threads``, default 1), since two
chains already run in parallel on the two cores.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import dynamics_explore
import dynamics_minibatch
import dynamics_network
import dynamics_robot
from _common import Suite, main


@dataclass(frozen=True)
class Settings:
    """Every budget of the suite; ``QUICK`` shrinks them about tenfold."""

    mode: str = "full"
    seed: int = 20_240_612
    chains: int = 4
    cores: int = 2
    explore_tune: int = 500
    explore_draws: int = 500
    robot_tune: int = 500
    robot_draws: int = 500
    lin_chains: int = 2
    lin_tune: int = 500
    lin_draws: int = 1000
    batch_sizes: tuple[int, ...] = (100, 1000)
    net_tune: int = 1000
    net_draws: int = 2000
    net_full_tune: int = 100
    net_full_draws: int = 100


QUICK = Settings(
    mode="quick",
    explore_tune=50,
    explore_draws=50,
    robot_tune=50,
    robot_draws=50,
    lin_tune=50,
    lin_draws=100,
    net_tune=100,
    net_draws=200,
    net_full_tune=10,
    net_full_draws=10,
)

SUITE = Suite(
    script="dynamics_benchmarks.py",
    title="# Stochastic-dynamics benchmarks (`pymc_sfp.StochasticDynamics`)",
    note="Timings are wall-clock on the machine below, which may have been shared; nothing "
    "asserts on them. How each benchmark measures is described in its section and in its "
    "module's docstring. BLAS is pinned to one thread (two chains run in parallel on two cores).",
    prefix="dynamics",
    begin="<!-- dynamics:start -->",
    end="<!-- dynamics:end -->",
    benchmarks={
        "explore": dynamics_explore.benchmark,
        "robot": dynamics_robot.benchmark,
        "minibatch": dynamics_minibatch.benchmark,
        "network": dynamics_network.benchmark,
    },
    full=Settings(),
    quick=QUICK,
    ignore_warnings=(UserWarning, FutureWarning),
)

if __name__ == "__main__":
    sys.exit(main(SUITE))
