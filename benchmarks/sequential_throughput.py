"""Sequential benchmark ``throughput``: particle-steps per second against the number of particles.

SIR on the 2-5-1 network of experiment 1 (``_problems.sequential_network``), ``throughput_steps``
steps of its stream timed after one warm-up step that compiles: wall seconds per step and
particles × steps per second, for each particle count. A step is one compiled call for the whole
cloud (the network, the likelihood and the reported weights) plus the NumPy work of the filter:
resampling, the weighted moments and the predictive interval (a bisection of the mixture CDF);
the share of the compiled call is measured by timing it alone on the same cloud. The issue's
target: ≥ 10⁴ particle-steps per second on the 2 cores.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from _common import Section, fmt_number, md_table
from _problems import sequential_network, sequential_stream

import pymc_sfp

if TYPE_CHECKING:
    from sequential_benchmarks import Settings


def measure(settings: Settings, particles: int) -> dict[str, float]:
    X, y = sequential_stream(settings.throughput_steps + 1, settings.seed)
    model = sequential_network(settings.filter_noise_sd)
    filt = pymc_sfp.SequentialFilter(
        model,
        method="sir",
        particles=particles,
        process_sd=settings.process_sd,
        random_seed=settings.seed,
    )
    filt.update({"net_X": X[0], "net_y_data": y[0]})  # compiles
    began = time.perf_counter()
    for k in range(1, settings.throughput_steps + 1):
        filt.update({"net_X": X[k], "net_y_data": y[k]})
    per_step = (time.perf_counter() - began) / settings.throughput_steps
    cloud, row = filt.state.particles, [X[:1], y[:1, None]]
    began = time.perf_counter()
    for _ in range(settings.throughput_steps):
        filt.evaluator.observe(cloud, row)
    per_call = (time.perf_counter() - began) / settings.throughput_steps
    return {"per_step": per_step, "per_call": per_call}


def benchmark(settings: Settings) -> Section:
    rows = []
    for particles in settings.particle_counts:
        print(f"  {particles} particles …", flush=True)
        m = measure(settings, particles)
        rows.append(
            [
                particles,
                f"{m['per_step'] * 1e3:.2f}",
                fmt_number(particles / m["per_step"]),
                f"{m['per_call'] * 1e3:.2f}",
                f"{m['per_call'] / m['per_step']:.1%}",
            ]
        )
    headers = [
        "particles",
        "ms per step",
        "particle-steps / s",
        "ms per compiled call",
        "compiled call's share",
    ]
    body = "\n\n".join(
        [
            "## Particle-steps per second (SIR, 2-5-1 network)",
            f"{settings.throughput_steps} timed steps per particle count after a compiling "
            "warm-up step; PyTensor's default (Numba) backend. The JAX backend was not measured.",
            md_table(headers, rows),
        ]
    )
    return Section("throughput", body)
