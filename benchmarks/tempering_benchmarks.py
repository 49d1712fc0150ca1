"""Benchmarks of ``pymc_sfp.ParallelTempering`` and ``pymc_sfp.SFPKernel`` on multimodal
targets with exact answers (``pymc_sfp.datasets.multimodal_targets``).

Run from the repository root::

    python benchmarks/tempering_benchmarks.py            # full run
    python benchmarks/tempering_benchmarks.py --quick    # smoke run, budgets about 10x smaller
    python benchmarks/tempering_benchmarks.py --only kernel   # one benchmark (see --help)

The tables go into the block between ``<!-- tempering:start -->`` and ``<!-- tempering:end -->``
of ``benchmarks/RESULTS.md`` (or ``--output``); with ``--only`` only that benchmark's subsection
is replaced. What each benchmark measures is in ``tempering_targets.py``'s docstring: mode
weights, evidence and ESS of tempering, SMC and NUTS on every target (``targets``), and the SMC
kernels on boxed, discontinuous and constrained targets (``kernel``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import tempering_targets
from _common import Suite, main  # benchmarks/ on sys.path


@dataclass(frozen=True)
class Settings:
    """Every budget of the suite; ``QUICK`` shrinks them about tenfold."""

    mode: str = "full"
    seed: int = 20_261_124
    chains: int = 4
    cores: int = 2
    draws: int = 2000
    tune: int = 1000
    smc_draws: int = 2000
    pt_kwargs: Mapping[str, Any] = field(default_factory=dict)
    pt_rounds: int | str = "auto"
    sfp_L: int = 30
    sfp_max_dim: int = 5


FULL = Settings()
QUICK = replace(FULL, mode="quick", draws=200, tune=100, smc_draws=200)

SUITE = Suite(
    script="tempering_benchmarks.py",
    title="# Parallel tempering and SMC on multimodal targets",
    note=(
        "Timings are wall-clock on the machine below, which may have been shared; nothing "
        "asserts on them. How each benchmark measures is in `tempering_targets.py`'s docstring."
    ),
    prefix="tempering",
    begin="<!-- tempering:start -->",
    end="<!-- tempering:end -->",
    benchmarks={
        "targets": tempering_targets.bench_targets,
        "kernel": tempering_targets.bench_kernel,
    },
    full=FULL,
    quick=QUICK,
    ignore_warnings=(UserWarning, FutureWarning),
)


if __name__ == "__main__":
    sys.exit(main(SUITE))
