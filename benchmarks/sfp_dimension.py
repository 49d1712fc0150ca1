"""SFP benchmark ``dimension``: the cost of one SFP sweep against the dimension N of a target.

A separable target (a two-mode mixture 0.5 N(-2, 1) + 0.5 N(2, 1) in every coordinate),
N = 10 ... 1000, ``SFPStep(L=50, bounds=(-8, 8), marginal_points=0)`` with the compiled sweep
(the default) and with the NumPy sweep (``compiled=False``), timed interleaved by calling
``step.astep`` directly after a warm-up sweep; the log-log slope of time against N is fitted. The
log-density evaluations per sweep are read from the ``n_logp_evals`` stat.

The *floor* is the time of the N·L grid evaluations alone: the model's compiled line function
(the one the sweep calls) on the L grid points of every coordinate, called from machine code, with
no conditional, draw or correction. PyMC's ``Slice`` on the same model gives the time per draw of
a peer that also updates every coordinate once per draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
from _common import Section, fmt_time, md_table
from _problems import separable_model
from _runs import built, grid_floor, time_steps, time_sweeps
from pymc.blocking import DictToArrayBijection

if TYPE_CHECKING:
    from sfp_benchmarks import Settings


def _slope(dims: list[int], times: list[float]) -> float:
    return float(np.polyfit(np.log(dims), np.log(times), 1)[0])


def benchmark(s: Settings) -> Section:
    """Time per sweep on the separable target at every N of ``s.dims``."""
    rows, compiled_t, numpy_t, dims = [], [], [], []
    grid = np.linspace(-8.0, 8.0, s.dim_L)
    for n in s.dims:
        print(f"  dimension: N = {n} ...", flush=True)
        model = separable_model(n)
        with model:
            step, build_s = built(L=s.dim_L, bounds=(-8.0, 8.0), marginal_points=0)
            reference, _ = built(L=s.dim_L, bounds=(-8.0, 8.0), marginal_points=0, compiled=False)
            slice_step = pm.Slice()
        for sfp_step in (step, reference):
            sfp_step.stop_tuning()
        slice_step.stop_tuning()
        q = DictToArrayBijection.map(model.initial_point())
        timing = {
            "warmup": 1,
            "budget_s": s.dim_budget_s,
            "min_sweeps": 1 if n >= 300 else s.min_sweeps,
            "max_sweeps": s.dim_max_sweeps,
        }
        (times, sweep_stats, q_end), (ref_times, _, _) = time_steps([step, reference], q, **timing)
        slice_times, _, _ = time_sweeps(slice_step, q, **timing)
        line_note = step.evaluator.line_note
        floor = grid_floor(step, q_end, grid, 0.05)
        evals = int(np.median([st["n_logp_evals"] for st in sweep_stats]))
        median, ref_median = float(np.median(times)), float(np.median(ref_times))
        slice_median = float(np.median(slice_times))
        compiled_t.append(median)
        numpy_t.append(ref_median)
        dims.append(n)
        rows.append(
            [
                n,
                len(times),
                fmt_time(median),
                fmt_time(ref_median),
                f"{ref_median / median:.1f}×",
                evals,
                fmt_time(floor),
                f"{median / floor:.1f}",
                fmt_time(slice_median),
                f"{median / slice_median:.2f}",
                f"{np.mean([st['accept'] for st in sweep_stats]):.3f}",
                f"{build_s:.1f}",
            ]
        )
    slope, ref_slope = _slope(dims, compiled_t), _slope(dims, numpy_t)
    slope_hi = _slope(dims[-2:], compiled_t[-2:]) if len(dims) >= 2 else np.nan
    body = [
        "## 2. Cost per sweep against dimension",
        "",
        "Target: N independent coordinates, each 0.5 N(−2, 1) + 0.5 N(2, 1) (`pm.Flat(shape=N)` + "
        f"`pm.Potential`). `SFPStep(L={s.dim_L}, bounds=(-8, 8), marginal_points=0)`, "
        "quadrature, batched, correct=True, with the compiled sweep (the default, 'numba') and "
        "with the NumPy sweep (`compiled=False`), timed interleaved by calling `step.astep` "
        f"directly (after 1 warm-up sweep) until {s.dim_budget_s:g} s each are spent (at most "
        f"{s.dim_max_sweeps} sweeps, at least 1 for N ≥ 300); medians reported. 'floor' is the "
        f"time of the N·{s.dim_L} grid evaluations alone (the compiled line function on the grid "
        "of every coordinate, called from machine code); 'sweep / floor' what the conditionals, "
        "refinement, draws and corrections add. 'Slice' is `pm.Slice` per draw on the same "
        "model (one update of every coordinate, as one SFP sweep). 'build s' is the compiled "
        "step's construction (compilation of the model and of the sweep).",
        "",
        md_table(
            [
                "N",
                "sweeps timed",
                "time / sweep (numba)",
                "time / sweep (numpy)",
                "speed-up",
                "logp evals / sweep",
                f"floor (N·{s.dim_L} evals)",
                "sweep / floor",
                "Slice / draw",
                "SFP / Slice",
                "accept",
                "build s",
            ],
            rows,
        ),
        "",
        f"Log-log slope of time per sweep against N: **{slope:.2f}** compiled "
        f"({slope_hi:.2f} between the two largest N), {ref_slope:.2f} with the NumPy sweep.",
        "",
        "**Reading.** Each coordinate's line evaluates only the terms that read it (the local "
        f"line: {line_note}), so an evaluation costs the same at every N and a sweep is "
        "O(L·N). The NumPy sweep pays a Python overhead per coordinate (a compiled call, the "
        "conditional, the proposal and the accept step, and one evaluation of the whole "
        "log-density per line to place the local line, O(N)); the compiled sweep removes it, "
        "so its cost is the line's evaluations plus the conditionals' arithmetic "
        "('sweep / floor').",
    ]
    return Section("dimension", "\n".join(body))
