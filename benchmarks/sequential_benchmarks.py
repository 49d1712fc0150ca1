"""Benchmarks of sequential training (``pymc_sfp.sample_sequential``, de Freitas et al. 1998).

Run from the repository root::

    python benchmarks/sequential_benchmarks.py           # full run
    python benchmarks/sequential_benchmarks.py --quick   # smoke run, budgets about 10x smaller
    python benchmarks/sequential_benchmarks.py --only throughput   # one benchmark (see --help)

The script prints markdown tables and writes them into the block between
``<!-- sequential:start -->`` and ``<!-- sequential:end -->`` of ``benchmarks/RESULTS.md`` (or
``--output``). One module per benchmark: ``sequential_experiment1.py`` (the paper's experiment
1: one-step-ahead RMS error and time of the EKF, SIPR, SIR and resample-move) and
``sequential_throughput.py`` (particle-steps per second against the number of particles).
Nothing asserts on timings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import sequential_experiment1
import sequential_throughput
from _common import Suite, main


@dataclass(frozen=True)
class Settings:
    """Every budget of the suite; ``QUICK`` shrinks them about tenfold."""

    mode: str = "full"
    seed: int = 1998
    # experiment 1 (the paper: 10 runs of 200 steps, 100 particles)
    runs: int = 10
    steps: int = 200
    particles: int = 100
    process_sd: float = 0.01
    filter_noise_sd: float = 0.1
    # throughput
    particle_counts: tuple[int, ...] = (100, 300, 1000, 3000, 10000)
    throughput_steps: int = 100


QUICK = Settings(mode="quick", runs=2, steps=50, particle_counts=(100, 1000), throughput_steps=20)

SUITE = Suite(
    script="sequential_benchmarks.py",
    title="# Sequential training (`pymc_sfp.sample_sequential`)",
    note=(
        "de Freitas et al.'s (1998) experiment 1 (EKF, SIPR, SIR, resample-move on a 2-5-1 "
        "network) and particle-steps per second; how it is measured is in each module's "
        "docstring."
    ),
    prefix="sequential",
    begin="<!-- sequential:start -->",
    end="<!-- sequential:end -->",
    benchmarks={
        "experiment1": sequential_experiment1.benchmark,
        "throughput": sequential_throughput.benchmark,
    },
    full=Settings(),
    quick=QUICK,
)


if __name__ == "__main__":
    sys.exit(main(SUITE))
