"""SFP benchmark ``batched``: vectorised against looped evaluation of a coordinate's grid.

``SFPStep(batched=True)``, one vectorised call per coordinate, against ``batched=False``, a loop
of single-point calls, on the 1-D mixture, 1-8-1 networks with 10 and 50 data points and a 2-16-2
network on Neal's 200 robot-arm training cases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from _common import Section, fmt_time, md_table
from _problems import (
    MIX1_BOX,
    ROBOT_N_TRAIN,
    ROBOT_TRAIN_SEED,
    mixture_1d_model,
    n_params,
    robot_arm,
    sine_data,
    tanh_network,
)
from _runs import built, time_steps
from pymc.blocking import DictToArrayBijection

if TYPE_CHECKING:
    from sfp_benchmarks import Settings


def benchmark(s: Settings) -> Section:
    """Batched and looped sweeps, interleaved, on each target."""
    cases = []
    cases.append(("1-D mixture", mixture_1d_model(), 100, MIX1_BOX, None))
    for n_points in (10, 50):
        x, y = sine_data(n_points)
        cases.append(
            (
                f"1-8-1 tanh net, {n_points} points",
                tanh_network(x, y, 8, 0.1),
                100,
                (-5.0, 5.0),
                None,
            )
        )
    xr, yr, _ = robot_arm(ROBOT_N_TRAIN, ROBOT_TRAIN_SEED)
    robot = tanh_network(xr, yr, 16, 0.05)
    cases.append(
        ("2-16-2 robot-arm net, 200 points", robot, s.robot_L, (-5.0, 5.0), s.robot_sweeps)
    )
    cases.append(
        (
            "2-16-2 robot-arm net, 200 points",
            robot,
            s.robot_L_large,
            (-5.0, 5.0),
            s.robot_sweeps_large,
        )
    )
    rows, pairs = [], []
    for label, model, L, box, n_sweeps in cases:
        print(f"  batched: {label}, L={L}, batched vs loop ...", flush=True)
        with model:
            variants = [
                built(L=L, bounds=box, batched=batched, marginal_points=0)
                for batched in (True, False)
            ]
        for step, _ in variants:
            step.stop_tuning()
        timed = time_steps(
            [step for step, _ in variants],
            DictToArrayBijection.map(model.initial_point()),
            warmup=1 if n_sweeps else s.warmup_sweeps,
            budget_s=0.0 if n_sweeps else s.batch_budget_s,
            min_sweeps=n_sweeps or s.min_sweeps,
            max_sweeps=n_sweeps or s.max_sweeps,
        )
        pair = {}
        for batched, (_, build_s), (times, st, _) in zip(
            (True, False), variants, timed, strict=True
        ):
            median = float(np.median(times))
            evals = int(np.median([d["n_logp_evals"] for d in st]))
            pair[batched] = median
            rows.append(
                [
                    label,
                    n_params(model),
                    L,
                    "batched" if batched else "loop",
                    fmt_time(median),
                    fmt_time(float(np.min(times))),
                    len(times),
                    evals,
                    fmt_time(median / evals),
                    f"{np.mean([d['n_edge_hits'] for d in st]):.2f}",
                    f"{build_s:.1f}",
                ]
            )
        pairs.append((f"{label} (L={L})", pair[False] / pair[True]))
    table = md_table(
        [
            "target",
            "params",
            "L",
            "evaluation",
            "time / sweep (median)",
            "fastest sweep",
            "sweeps timed",
            "logp evals / sweep",
            "time / eval",
            "edge hits / sweep",
            "build s",
        ],
        rows,
    )
    wins = [f"{name}: loop/batched = {ratio:.2f}" for name, ratio in pairs]
    batched_wins = [name for name, ratio in pairs if ratio > 1.1]
    loop_wins = [name for name, ratio in pairs if ratio < 1 / 1.1]
    ties = [name for name, ratio in pairs if 1 / 1.1 <= ratio <= 1.1]
    body = [
        "## 4. Batched against loop evaluation",
        "",
        "`SFPStep(L=L, bounds=box, batched=True|False, marginal_points=0)`, quadrature, "
        "correct=True. batched=True evaluates the L grid points of a coordinate in one call of a "
        "vectorised graph over an (L, N) matrix; batched=False calls the single-point function "
        "L times. Boxes: (−10, 60) for the mixture, (−5, 5) for the networks (the evaluation cost "
        "does not depend on the box). Networks: N(0, 1) weights, tanh hidden units; 1-8-1 on y = "
        "sin(3x) + N(0, 0.1²) with likelihood sd 0.1; 2-16-2 on Neal's robot-arm training cases "
        f"(`make_robot_arm({ROBOT_N_TRAIN}, rng={ROBOT_TRAIN_SEED})`: x1 ∈ ±[0.453, 1.932], x2 ∈ "
        "[0.534, 3.142], y = (2 cos x1 + 1.3 cos(x1 + x2), 2 sin x1 + 1.3 sin(x1 + x2)) + N(0, "
        "0.05²)) with likelihood sd 0.05 — 2·16 + 16 + 16·2 + 2 = 82 weights (the noise sd "
        "is fixed, not a parameter). Sweeps from the zero initial point, timed with "
        "`step.astep` after warm-up, batched and loop sweeps interleaved (so both see the same "
        f"background load): ≥ {s.batch_budget_s:g} s each for the small targets, exactly "
        f"{s.robot_sweeps} (L={s.robot_L}) and {s.robot_sweeps_large} (L={s.robot_L_large}) "
        "sweeps for the robot arm; median reported. 'build s' includes compiling the vectorised "
        "graph (batched) or only the point function (loop). 'edge hits': conditionals with mass "
        "piling up at a box edge — the fixed (−5, 5) boxes truncate some network conditionals, "
        "which does not change the cost of a sweep.",
        "",
        table,
        "",
        "Ratios (> 1: batched faster): " + "; ".join(wins) + ".",
        "",
        "**Reading.** "
        + (f"Batched wins on {', '.join(batched_wins)}. " if batched_wins else "")
        + (f"The loop wins on {', '.join(loop_wins)}. " if loop_wins else "")
        + (f"Within ±10 % on {', '.join(ties)}. " if ties else "")
        + "Batching removes per-call overhead (a compiled-function call costs a few µs), which "
        "dominates when one evaluation is cheap (few parameters and data points). "
        + _expensive_case(pairs)
        + _recommend(pairs),
    ]
    return Section("batched", "\n".join(body))


def _expensive_case(pairs: list) -> str:
    """What this run says of the most expensive evaluation (the last case) against the
    cheapest (the first)."""
    (cheap, cheap_ratio), (costly, costly_ratio) = pairs[0], pairs[-1]
    if costly_ratio < cheap_ratio / 1.5:
        return (
            f"When one evaluation is itself expensive ({costly}) the overhead is a small share "
            "and the vectorised graph does the same arithmetic on L-times larger temporaries: "
            f"the advantage shrinks, from {cheap_ratio:.2f}× on the {cheap} to "
            f"{costly_ratio:.2f}× here. "
        )
    return (
        f"In this run the advantage held on the most expensive evaluation too ({costly}: "
        f"{costly_ratio:.2f}×, against {cheap_ratio:.2f}× on the {cheap}). "
    )


def _recommend(pairs: list) -> str:
    ratios = [r for _, r in pairs]
    expensive_loses = [name for name, r in pairs if "robot" in name and r < 1 / 1.1]
    if expensive_loses:
        return (
            "Recommendation: keep `batched=True` as the default (it wins where sweeps are cheap "
            "and overhead-bound) and pass `batched=False` for models with expensive evaluations "
            f"— here {', '.join(expensive_loses)}."
        )
    if min(ratios) >= 1 / 1.1:
        return (
            "Recommendation: keep `batched=True` as the default: it is faster or within ±10 % "
            "on every case measured here, and `batched=False` buys nothing even for the "
            "expensive network."
        )
    return (
        "Recommendation: the winner depends on the model; keep `batched=True` as the default "
        "and measure expensive models both ways."
    )
