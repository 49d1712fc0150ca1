"""Sequential benchmark ``throughput``: particle-steps per second against the number of particles.

SIR on the 2-5-1 network of experiment 1 (``_problems.sequential_network``), ``throughput_steps``
steps of its stream timed after one warm-up step that compiles: wall seconds per step and
particles × steps per second, for each particle count. A step is one compiled call for the whole
cloud (the network, the likelihood and the reported weights) plus the NumPy work of the filter:
resampling, the weighted moments and the predictive interval (a bisection of the mixture CDF);
the share of the compiled call is measured by timing it alone on the same cloud (its outputs
converted to NumPy arrays, so that JAX's asynchronous dispatch is not mistaken for speed). Each
particle count runs on PyTensor's default backend (Numba here) and, when ``jax`` is installed, on
its JAX backend (``compile_kwargs={"mode": "JAX"}``), in the same run. The issue's target:
≥ 10⁴ particle-steps per second on the 2 cores.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from typing import TYPE_CHECKING

import numpy as np
from _common import Section, fmt_number, md_table
from _problems import sequential_network, sequential_stream

import pymc_sfp

if TYPE_CHECKING:
    from sequential_benchmarks import Settings


#: PyTensor backends measured: label → ``compile_kwargs`` (``None``: the default).
BACKENDS = {"default (Numba)": None, "JAX": {"mode": "JAX"}}


def measure(settings: Settings, particles: int, compile_kwargs: dict | None) -> dict[str, float]:
    X, y = sequential_stream(settings.throughput_steps + 1, settings.seed)
    model = sequential_network(settings.filter_noise_sd)
    filt = pymc_sfp.SequentialFilter(
        model,
        method="sir",
        particles=particles,
        process_sd=settings.process_sd,
        random_seed=settings.seed,
        compile_kwargs=compile_kwargs,
    )
    began = time.perf_counter()
    filt.update({"net_X": X[0], "net_y_data": y[0]})
    compile_seconds = time.perf_counter() - began
    began = time.perf_counter()
    for k in range(1, settings.throughput_steps + 1):
        filt.update({"net_X": X[k], "net_y_data": y[k]})
    per_step = (time.perf_counter() - began) / settings.throughput_steps
    cloud, row = filt.state.particles, [X[:1], y[:1, None]]
    began = time.perf_counter()
    for _ in range(settings.throughput_steps):
        log_likelihood, mean, _, _ = filt.evaluator.observe(cloud, row)
        np.asarray(log_likelihood), np.asarray(mean)
    per_call = (time.perf_counter() - began) / settings.throughput_steps
    return {"per_step": per_step, "per_call": per_call, "compile": compile_seconds}


def benchmark(settings: Settings) -> Section:
    rows = []
    backends = {
        label: kwargs
        for label, kwargs in BACKENDS.items()
        if kwargs is None or importlib.util.find_spec("jax") is not None
    }
    for label, compile_kwargs in backends.items():
        for particles in settings.particle_counts:
            print(f"  {label}, {particles} particles …", flush=True)
            m = measure(settings, particles, compile_kwargs)
            rows.append(
                [
                    label,
                    particles,
                    f"{m['per_step'] * 1e3:.2f}",
                    fmt_number(particles / m["per_step"]),
                    f"{m['per_call'] * 1e3:.2f}",
                    f"{m['per_call'] / m['per_step']:.1%}",
                    f"{m['compile']:.1f}",
                ]
            )
    headers = [
        "backend",
        "particles",
        "ms per step",
        "particle-steps / s",
        "ms per compiled call",
        "compiled call's share",
        "first step s (compiles)",
    ]
    jax_note = (
        "PyTensor's JAX backend in the same run (jax "
        f"{importlib.import_module('jax').__version__}, CPU)."
        if "JAX" in backends
        else "The JAX backend was not measured: `jax` is not installed."
    )
    body = "\n\n".join(
        [
            "## Particle-steps per second (SIR, 2-5-1 network)",
            f"{settings.throughput_steps} timed steps per particle count after a compiling "
            f"warm-up step; PyTensor's default (Numba) backend. {jax_note}",
            md_table(headers, rows),
        ]
    )
    return Section("throughput", body)
