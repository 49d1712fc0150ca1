"""Learning benchmark ``cost``: Berrones (2009) Fig. 10, the cost of a sweep against the weights.

Seconds per SFP sweep (``SFPStep.astep`` timed directly after a warm-up sweep that compiles) of
the 2-H-1 laser networks, the glass and the Santa Fe networks, and the log-log slope over the
laser networks; beside each, the same sweep compiled without the polynomial ``exp``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from _common import Section, md_table
from _problems import (
    GLASS_D,
    GLASS_LAYERS,
    LASER_TRAIN,
    LASER_WINDOW,
    SANTAFE_LAYERS,
    SERIES_D,
    laser_windows,
    n_weights,
    paper_network,
    santafe_b_windows,
)
from _runs import grid_floor, time_steps
from pymc.blocking import DictToArrayBijection
from pytensor.compile.mode import get_mode

from pymc_sfp import SFPStep
from pymc_sfp._vectorised_exp import POLYNOMIAL_EXP
from pymc_sfp.datasets import glass_split

if TYPE_CHECKING:
    import pymc as pm
    from sfp_learning import Settings


def seconds_per_sweep(model: pm.Model, L: int, timed_sweeps: int) -> dict[str, float]:
    """Median wall time of ``SFPStep.astep`` sweeps, with the package's default compilation and
    with PyTensor's own ``exp`` throughout (the polynomial ``exp`` of softmaxes excluded), the
    log-density evaluations per sweep, and the floor.

    The two steps' sweeps are interleaved (at least ``timed_sweeps`` each and one second of
    sweeps each), after one warm-up sweep that absorbs the lazy compilation; both chains start
    from the model's initial point (all weights 0). The floor is the time of the N·L grid
    evaluations alone: the default step's compiled line function, called from machine code as
    the sweep calls it, at the chain's last point, on ``L`` values spread over (−1, 1) (the
    weights' prior range) for every coordinate.
    """
    libm_exp = {"mode": get_mode(None).excluding(POLYNOMIAL_EXP)}
    with model:
        steps = [
            SFPStep(L=L, marginal_points=0),
            SFPStep(L=L, marginal_points=0, compile_kwargs=libm_exp),
        ]
    timed = time_steps(
        steps,
        DictToArrayBijection.map(model.initial_point()),
        warmup=1,
        budget_s=1.0,
        min_sweeps=timed_sweeps,
        max_sweeps=1000,
    )
    (times, sweep_stats, q_end), (libm_times, _, _) = timed
    grid = np.linspace(-1.0, 1.0, L + 2)[1:-1]
    return {
        "sweep": float(np.median(times)),
        "libm": float(np.median(libm_times)),
        "floor": grid_floor(steps[0], q_end, grid, 0.2),
        "evals": float(np.median([st["n_logp_evals"] for st in sweep_stats])),
    }


def benchmark(settings: Settings) -> Section:
    """Paper Fig. 10: seconds per SFP sweep against the number of weights."""
    X_laser, y_laser, _, _ = laser_windows()
    X_breath, y_breath, _, _ = santafe_b_windows()
    X_glass, y_glass, _, _ = glass_split(np.random.default_rng(0))
    cases = [
        (f"laser 2-{h}-1", X_laser, y_laser, (LASER_WINDOW, h, 1), SERIES_D, "linear")
        for h in settings.hidden_sizes
    ]
    cases += [
        ("glass 9-6-4", X_glass, np.eye(4)[y_glass], GLASS_LAYERS, GLASS_D, "softmax"),
        ("Santa Fe B 10-20-1", X_breath, y_breath, SANTAFE_LAYERS, SERIES_D, "linear"),
    ]
    rows, laser_weights, laser_seconds, over_floor = [], [], [], {}
    for label, X, y, layers, D, output in cases:
        model, _ = paper_network(X, y, layers, D, output)
        t = seconds_per_sweep(model, settings.hidden_L, settings.timed_sweeps)
        per_sweep = t["sweep"]
        if label.startswith("laser"):
            laser_weights.append(n_weights(layers))
            laser_seconds.append(per_sweep)
        ms = [f"{1e3 * per_sweep:.1f}", f"{1e3 * t['libm']:.1f}", f"{t['libm'] / per_sweep:.2f}"]
        floor = [f"{t['evals']:.0f}", f"{1e3 * t['floor']:.1f}", f"{per_sweep / t['floor']:.1f}"]
        rows.append([label, n_weights(layers), len(X), *ms, *floor])
        over_floor[label] = per_sweep / t["floor"]
        print(f"{label}: {per_sweep:.4f} s / sweep ({t['libm']:.4f} with the C library's exp)")
    slope_text = "Too few hidden sizes for a fit"
    if len(laser_weights) >= 2:
        slope = np.polyfit(np.log(laser_weights), np.log(laser_seconds), 1)[0]
        slope_text = f"Fitted log-log slope over the 2-H-1 laser networks: **{slope:.2f}**"
    ratios = sorted(over_floor.values())
    # The floor is timed apart from the sweep, on its own grid: where the two timings' noise
    # exceeds the sweep's overhead a ratio falls below 1, and the overhead is then reported as
    # "at most" rather than as a negative share.
    overhead = (
        f"{ratios[0] - 1:.0%}–{ratios[-1] - 1:.0%}"
        if ratios[0] >= 1
        else f"at most {ratios[-1] - 1:.0%} (a ratio below 1 is the two timings' noise)"
    )
    floor_text = (
        f"Against the floor, a sweep takes {ratios[0]:.1f}–{ratios[-1]:.1f}× the N·L grid "
        f"evaluations alone ({', '.join(f'{k} {v:.1f}×' for k, v in over_floor.items())}): "
        "the conditionals, their refinement, the draws and the Metropolis corrections cost "
        f"{overhead} of the floor on top of it. Where the ratio "
        "is near 1, the sweep's time is the evaluation of the network along each coordinate, "
        "and only a faster evaluation makes it faster. The large networks' rows vary most "
        "between runs on this shared machine (their caches are hundreds of kB)."
    )
    columns = [
        "network",
        "weights",
        "data points",
        "ms / sweep",
        "ms, libm exp",
        "ratio",
        "logp evals / sweep",
        f"floor, ms (N·{settings.hidden_L} evals)",
        "sweep / floor",
    ]
    table = md_table(columns, rows)
    return Section(
        "cost",
        f"""## 4. Cost of one SFP sweep against the number of weights (paper Fig. 10)

`SFPStep(L={settings.hidden_L}, marginal_points=0)`; `step.astep` called directly from the
all-zero initial point: one warm-up sweep (it compiles), then the median of at least
{settings.timed_sweeps} timed sweeps and one second of them. 'libm exp' is the same step
compiled with PyTensor's own `exp` throughout (`compile_kwargs=` a mode that excludes
`{POLYNOMIAL_EXP}`: without the polynomial `exp` of softmaxes and log-sum-exps, docs
"Networks: one unit per coordinate"), its sweeps interleaved with the default's; 'ratio' is its
time over the default's. 'logp evals / sweep' is the default's `n_logp_evals` stat (the grids,
their refinement and the Metropolis proposals; median). 'floor' is the time of the N·L grid
evaluations alone: the default step's compiled line function called from machine code as the
sweep calls it, once per coordinate on {settings.hidden_L} values in (−1, 1), at the chain's last
point, with no conditional, refinement, draw or correction; 'sweep / floor' is what those add.
Only the 2-H-1 laser networks (same {LASER_TRAIN} data points, same L) enter the fit; the glass and
Santa Fe rows have other data and are shown for scale.

{table}

{slope_text}. Each coordinate's grid is evaluated by the network's structure (docs: "Networks:
one unit per coordinate"): one unit's column per grid value from the network at the current
point, which the compiled sweep keeps in a cache with the prior (computed once per sweep,
advanced by one unit after each accepted move), and the change of the weight's own prior term.
Nothing in a coordinate's evaluation grows with the number of weights, so the cost per sweep is
linear in them but for a fixed cost per call, which flattens the slope at the small sizes.
Only glass has a softmax: the regression networks have no `exp` of a difference, so their two
columns differ by noise alone. {floor_text}""",
    )
