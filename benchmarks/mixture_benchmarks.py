"""Benchmarks of ``pymc_sfp.MixtureADVI`` (mixture-of-Gaussians variational inference, nn4post).

Run from the repository root::

    python benchmarks/mixture_benchmarks.py            # full run
    python benchmarks/mixture_benchmarks.py --quick    # smoke run, budgets about 10x smaller
    python benchmarks/mixture_benchmarks.py --only vi-cost   # one benchmark (see --help)

The tables go into the block between ``<!-- mixture:start -->`` and ``<!-- mixture:end -->`` of
``benchmarks/RESULTS.md`` (or ``--output``); with ``--only`` only that benchmark's subsection is
replaced. What each benchmark measures is in ``mixture_vi.py``'s docstring: cost per step against
Nc and d (``vi-cost``), ELBO and distances to the truth on the mixture targets (``vi-targets``),
and the robot-arm network against ADVI and NUTS (``vi-network``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import mixture_vi
from _common import Suite, main  # benchmarks/ on sys.path


@dataclass(frozen=True)
class Settings:
    """Every budget of the suite; ``QUICK`` shrinks them about tenfold."""

    mode: str = "full"
    seed: int = 2017
    cost_dims: tuple[int, ...] = (2, 20, 100)
    cost_components: tuple[int, ...] = (1, 2, 4, 8)
    time_budget: float = 2.0
    steps: int = 5000
    grow_steps: int = 20000
    window: int = 300
    learning_rate: float = 0.05
    init_scale: float = 20.0
    net_steps: int = 20000
    nuts_tune: int = 1000
    nuts_draws: int = 1000


FULL = Settings()
QUICK = replace(
    FULL,
    mode="quick",
    cost_dims=(2, 20),
    cost_components=(1, 4),
    time_budget=0.3,
    steps=1000,
    grow_steps=3000,
    window=200,
    net_steps=1000,
    nuts_tune=100,
    nuts_draws=100,
)

SUITE = Suite(
    script="mixture_benchmarks.py",
    title="# Mixture variational inference (`pymc_sfp.MixtureADVI`)",
    note=(
        "Timings are wall-clock on the machine below, which may have been shared; nothing "
        "asserts on them. How each benchmark measures is in `mixture_vi.py`'s docstring."
    ),
    prefix="mixture",
    begin="<!-- mixture:start -->",
    end="<!-- mixture:end -->",
    benchmarks={
        "vi-cost": mixture_vi.bench_cost,
        "vi-targets": mixture_vi.bench_targets,
        "vi-network": mixture_vi.bench_network,
    },
    full=FULL,
    quick=QUICK,
    ignore_warnings=(UserWarning, FutureWarning),
)


if __name__ == "__main__":
    sys.exit(main(SUITE))
