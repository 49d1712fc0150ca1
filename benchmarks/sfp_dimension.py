"""SFP benchmark ``dimension``: the cost of one SFP sweep against the dimension N of a target.

A separable target (a two-mode mixture 0.5 N(-2, 1) + 0.5 N(2, 1) in every coordinate),
N = 10 ... 1000, ``SFPStep(L=50, bounds=(-8, 8), marginal_points=0)``. Sweeps are timed by
calling ``step.astep`` directly after a warm-up sweep; the log-log slope of time against N is
fitted. The log-density evaluations per sweep are read from the ``n_logp_evals`` stat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from _common import Section, fmt_time, md_table
from _problems import separable_model
from _runs import built, time_call, time_sweeps
from pymc.blocking import DictToArrayBijection

if TYPE_CHECKING:
    from sfp_benchmarks import Settings


def benchmark(s: Settings) -> Section:
    """Time per sweep on the separable target at every N of ``s.dims``."""
    rows, medians, dims, lines = [], [], [], []
    for n in s.dims:
        print(f"  dimension: N = {n} ...", flush=True)
        model = separable_model(n)
        with model:
            step, build_s = built(L=s.dim_L, bounds=(-8.0, 8.0), marginal_points=0)
        step.stop_tuning()
        q = DictToArrayBijection.map(model.initial_point())
        times, sweep_stats, q = time_sweeps(
            step,
            q,
            warmup=1,
            budget_s=s.dim_budget_s,
            min_sweeps=1 if n >= 300 else s.min_sweeps,
            max_sweeps=s.dim_max_sweeps,
        )
        x = q.data
        point_s = time_call(lambda: step.evaluator.logp(x), 0.05)  # noqa: B023
        line_s = time_call(
            lambda: step.evaluator.along(x, 0, np.linspace(-8, 8, s.dim_L)),  # noqa: B023
            0.05,
        )
        evals = int(np.median([st["n_logp_evals"] for st in sweep_stats]))
        median = float(np.median(times))
        medians.append(median)
        dims.append(n)
        lines.append(line_s)
        rows.append(
            [
                n,
                len(times),
                fmt_time(median),
                fmt_time(median / n),
                evals,
                fmt_time(median / evals),
                fmt_time(point_s),
                fmt_time(line_s),
                f"{np.mean([st['accept'] for st in sweep_stats]):.3f}",
                f"{build_s:.1f}",
            ]
        )
    log_n, log_t = np.log(dims), np.log(medians)
    slope = float(np.polyfit(log_n, log_t, 1)[0])
    slope_lo = float(np.polyfit(log_n[:3], log_t[:3], 1)[0]) if len(dims) >= 3 else np.nan
    slope_hi = float(np.polyfit(log_n[-2:], log_t[-2:], 1)[0]) if len(dims) >= 2 else np.nan
    evals_ratio = float(rows[-1][4]) / float(rows[0][4]) / (dims[-1] / dims[0])
    body = [
        "## 2. Cost per sweep against dimension",
        "",
        "Target: N independent coordinates, each 0.5 N(−2, 1) + 0.5 N(2, 1) (`pm.Flat(shape=N)` + "
        f"`pm.Potential`). `SFPStep(L={s.dim_L}, bounds=(-8, 8), marginal_points=0)`, "
        "quadrature, batched, correct=True. Sweeps timed by calling `step.astep` directly "
        f"(after 1 warm-up sweep) until {s.dim_budget_s:g} s are spent (at most "
        f"{s.dim_max_sweeps} sweeps, at least 1 for N ≥ 300); median reported. 'point logp' is "
        "one call of the compiled log-density at one point, 'line' one batched call over the "
        f"{s.dim_L} grid points of one coordinate. 'build s' is the step's construction "
        "(compilation).",
        "",
        md_table(
            [
                "N",
                "sweeps timed",
                "time / sweep",
                "time / coordinate",
                "logp evals / sweep",
                "time / eval",
                "point logp",
                f"line ({s.dim_L} pts)",
                "accept",
                "build s",
            ],
            rows,
        ),
        "",
        f"Log-log slope of time per sweep against N: **{slope:.2f}** over all N "
        f"({slope_lo:.2f} over the three smallest, {slope_hi:.2f} between the two largest). "
        f"Evaluations per sweep are exactly N·(L + 1) + 1, i.e. linear in N "
        f"(ratio to linear growth {evals_ratio:.2f}).",
        "",
        "**Reading.** The paper's linear-cost claim counts evaluations of ∂V/∂x_n, which for a "
        "separable target cost O(1) each; here the number of evaluations is indeed linear, but "
        "every evaluation is the *whole* model's log-density, O(N), so a sweep is O(L·N²) "
        "unless the graph exploits the structure. At small N the per-coordinate Python overhead "
        "(a compiled call, building the conditional, the proposal and accept step) dominates "
        f"and the slope is near 1 ({slope_lo:.2f} here); as N grows the O(N) evaluation takes "
        f"over and the local slope rises toward 2 ({slope_hi:.2f} between the two largest N). "
        f"At N = {dims[-1]} the batched line evaluation alone takes "
        f"{fmt_time(lines[-1])} of the {fmt_time(medians[-1] / dims[-1])} spent per coordinate, "
        f"against {fmt_time(lines[0])} of {fmt_time(medians[0] / dims[0])} at N = {dims[0]}. "
        "For a dense model (e.g. a network, where every weight touches all data) "
        "this quadratic growth is intrinsic to coordinate-wise sampling with full evaluations.",
    ]
    return Section("dimension", "\n".join(body))
