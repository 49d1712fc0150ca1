"""SFP benchmark ``conditionals``: the conditional builders, quadrature against collocation.

The NumPy cores ``quadrature_conditional`` and ``collocation_conditional`` on the 1-D mixture
over [-10, 60] at L = 50 ... 400: time per call (the log-density or its derivative on the nodes
is precomputed; only the builder is timed) and the maximum CDF error against the exact mixture
CDF normalised to the box, on a fine grid; then the per-sweep time of
``SFPStep(solver="quadrature")`` against ``"collocation"`` (L=100) on the 1-D mixture and on a
1-8-1 tanh network posterior (25 weights) whose automatic boxes were tuned first. A last table
gives both builders' mode weights on two-mode conditionals with barriers of 10 to 50 nats, where
collocation's solve loses precision (no timing).

The suite pins BLAS to one thread: on a small shared machine, multi-threaded OpenBLAS made the
L × L collocation solve erratically up to hundreds of times slower. To show the effect, the
collocation builder is also timed with the library's default threading, in a subprocess that
runs this module as a script::

    python benchmarks/sfp_conditionals.py --probe 50,100 --budget 0.5   # prints PROBE {json}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _common import BLAS_THREAD_VARS, Section, fmt_number, fmt_time, md_table
from _problems import (
    MIX1_BOX,
    MIX1_SPLITS,
    MIX1_WEIGHTS,
    mixture_1d_box_cdf,
    mixture_1d_model,
    mixture_1d_numpy,
    n_params,
    sine_data,
    tanh_network,
)
from _runs import built, time_call, time_steps
from pymc.blocking import DictToArrayBijection
from scipy import stats

from pymc_sfp.core.fokker_planck import (
    CollocationBasis,
    collocation_conditional,
    quadrature_conditional,
)

if TYPE_CHECKING:
    from sfp_benchmarks import Settings


def builder_cases(Ls, budget_s: float) -> list[dict]:
    """Time and error of both NumPy builders on the 1-D mixture at every ``L`` in ``Ls``."""
    lower, upper = MIX1_BOX
    fine = np.linspace(lower, upper, 20_001)
    exact = mixture_1d_box_cdf(fine)
    edges = np.array([lower, *MIX1_SPLITS, upper])
    cases = []
    for L in Ls:
        nodes = np.linspace(lower, upper, L)
        logp, _ = mixture_1d_numpy(nodes)
        conditional = quadrature_conditional(nodes, logp)
        cases.append(
            dict(
                builder="quadrature",
                L=L,
                seconds=time_call(lambda: quadrature_conditional(nodes, logp), budget_s),  # noqa: B023
                basis_s=np.nan,
                valid=True,
                error=float(np.max(np.abs(conditional.cdf_at(fine) - exact))),
                raw_error=np.nan,
                weights=np.diff(conditional.cdf_at(edges)),
            )
        )
    for L in Ls:
        t0 = time.perf_counter()
        basis = CollocationBasis(L)
        basis_s = time.perf_counter() - t0
        nodes = lower + basis.collocation_points * (upper - lower)
        _, dlogp = mixture_1d_numpy(nodes)
        conditional, coefficients = collocation_conditional(basis, lower, upper, dlogp)
        table = lower + basis.table_points * (upper - lower)
        raw = basis.evaluate(coefficients)
        seconds = time_call(
            lambda: collocation_conditional(basis, lower, upper, dlogp),  # noqa: B023
            budget_s,
        )
        cases.append(
            dict(
                builder="collocation",
                L=L,
                seconds=seconds,
                basis_s=basis_s,
                valid=conditional is not None,
                raw_range=(float(raw.min()), float(raw.max())),
                error=(
                    float(np.max(np.abs(conditional.cdf_at(fine) - exact)))
                    if conditional is not None
                    else np.nan
                ),
                raw_error=float(np.max(np.abs(raw - mixture_1d_box_cdf(table)))),
                weights=np.diff(np.interp(edges, table, raw)),
            )
        )
    return cases


BARRIER_WEIGHT = 0.3  # the weight of the left mode of the two-mode barrier conditionals
BARRIER_DEPTHS = (10, 20, 25, 30, 32, 35, 40, 50)  # m = sqrt(2 d): barriers of about d - 1 nats


def two_mode_numpy(x: np.ndarray, m: float) -> tuple[np.ndarray, np.ndarray]:
    """Log-density of 0.3 N(-m, 1) + 0.7 N(m, 1) and its derivative, in NumPy."""
    comp = np.log([BARRIER_WEIGHT, 1 - BARRIER_WEIGHT]) + stats.norm.logpdf(x[:, None], [-m, m])
    logp = np.logaddexp.reduce(comp, axis=1)
    resp = np.exp(comp - logp[:, None])
    return logp, np.sum(resp * -(x[:, None] - [-m, m]), axis=1)


def barrier_cases(Ls) -> list[dict]:
    """Both builders' weight of the left mode, below 0, on two-mode conditionals whose barrier
    deepens: 0.3 N(-m, 1) + 0.7 N(m, 1) on [-m - 8, m + 8] (the box holds the modes' mass up to
    1e-14, so the exact weight is 0.3)."""
    cases = []
    for L in Ls:
        basis = CollocationBasis(L)
        for depth in BARRIER_DEPTHS:
            m = np.sqrt(2.0 * depth)
            lower, upper = -m - 8.0, m + 8.0
            between, _ = two_mode_numpy(np.linspace(-m, m, 10_001), m)
            _, dlogp = two_mode_numpy(lower + basis.collocation_points * (upper - lower), m)
            collocation, _ = collocation_conditional(basis, lower, upper, dlogp)
            nodes = np.linspace(lower, upper, L)
            quadrature = quadrature_conditional(nodes, two_mode_numpy(nodes, m)[0])
            cases.append(
                dict(
                    L=L,
                    barrier=float(between[0] - between.min()),
                    valid=collocation is not None,
                    collocation=(
                        abs(collocation.cdf_at(np.zeros(1))[0] - BARRIER_WEIGHT)
                        if collocation is not None
                        else np.nan
                    ),
                    quadrature=abs(quadrature.cdf_at(np.zeros(1))[0] - BARRIER_WEIGHT),
                )
            )
    return cases


def blas_default_probe(Ls, budget_s: float) -> dict[int, float] | None:
    """Collocation builder times with OpenBLAS's default thread count, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", ",".join(map(str, Ls))]
    command += ["--budget", str(budget_s)]
    try:
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        line = [x for x in out.stdout.splitlines() if x.startswith("PROBE ")][-1]
        return {int(k): v for k, v in json.loads(line[len("PROBE ") :]).items()}
    except (IndexError, subprocess.SubprocessError, ValueError, OSError) as err:
        print(f"  BLAS probe failed: {err!r}", flush=True)
        return None


def benchmark(s: Settings) -> Section:
    """The NumPy builders on the 1-D mixture, then both solvers inside SFPStep."""
    print("  conditionals: NumPy cores ...", flush=True)
    cases = builder_cases(s.cond_Ls, s.cond_budget_s)
    blas_threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    probe = None
    if blas_threads != "default":
        print("  conditionals: collocation with OpenBLAS default threads (subprocess) ...")
        probe = blas_default_probe(s.cond_Ls, s.cond_budget_s)
    rows = []
    for c in cases:
        if c["builder"] == "quadrature":
            valid = "yes (by construction)"
        elif c["valid"]:
            valid = "yes"
        else:
            valid = f"**no** (ŷ ∈ [{c['raw_range'][0]:.3g}, {c['raw_range'][1]:.3g}])"
        rows.append(
            [
                c["builder"],
                c["L"],
                fmt_time(c["seconds"]),
                (
                    fmt_time(probe[c["L"]])
                    if probe and c["builder"] == "collocation" and c["L"] in probe
                    else "—"
                ),
                "—" if np.isnan(c["basis_s"]) else fmt_time(c["basis_s"]),
                valid,
                fmt_number(c["error"]) if c["valid"] else "n/a",
                fmt_number(c["raw_error"]),
                " / ".join(f"{w:.3f}" for w in c["weights"]),
            ]
        )
    cond_table = md_table(
        [
            "builder",
            "L",
            f"time / call (BLAS threads: {blas_threads})",
            "time / call, OpenBLAS default threads",
            "basis set-up (once per step)",
            "valid CDF",
            "max CDF error (what is sampled)",
            "max error of raw ŷ at table points",
            "mode weights (0.2 / 0.2 / 0.6)",
        ],
        rows,
    )

    barriers = barrier_cases(s.cond_Ls[1:])
    barrier_table = md_table(
        [
            "L",
            "barrier (nats)",
            "collocation valid",
            "collocation: error of the weight 0.3",
            "quadrature: error of the weight 0.3",
        ],
        [
            [
                c["L"],
                f"{c['barrier']:.1f}",
                "yes" if c["valid"] else "no (quadrature used)",
                fmt_number(c["collocation"]) if c["valid"] else "n/a",
                fmt_number(c["quadrature"]),
            ]
            for c in barriers
        ],
    )

    # --- per-sweep, quadrature vs collocation in SFPStep (interleaved sweeps)
    solvers = ("quadrature", "collocation")
    sweep_rows = []
    mix = mixture_1d_model()
    print("  conditionals: 1-D mixture, SFPStep quadrature vs collocation ...", flush=True)
    with mix:
        pairs = [
            built(L=s.solver_L, solver=solver, bounds=MIX1_BOX, marginal_points=0)
            for solver in solvers
        ]
    for step, _ in pairs:
        step.stop_tuning()
    timed = time_steps(
        [step for step, _ in pairs],
        DictToArrayBijection.map(mix.initial_point()),
        warmup=s.warmup_sweeps,
        budget_s=s.solver_budget_s,
        min_sweeps=s.min_sweeps,
        max_sweeps=s.max_sweeps,
    )
    for solver, (_, build_s), (times, st, _) in zip(solvers, pairs, timed, strict=True):
        sweep_rows.append(sweep_row("1-D mixture (1 coordinate)", solver, build_s, times, st))

    x, y = sine_data(50)
    net = tanh_network(x, y, 8, 0.1)
    print("  conditionals: 1-8-1 network, tuning automatic boxes ...", flush=True)
    with net:
        tuner, _ = built(L=s.solver_L, marginal_points=0)
    tuner.rng = np.random.default_rng(s.seed)
    q = DictToArrayBijection.map(net.initial_point())
    for _ in range(s.net_tune_sweeps):
        q, _ = tuner.astep(q)
    tuner.stop_tuning()
    widths = tuner.box_upper - tuner.box_lower
    layout = tuner.layout
    boxes = {
        name: (tuner.box_lower[slc].reshape(shape), tuner.box_upper[slc].reshape(shape))
        for name, shape, slc in zip(layout.rv_names, layout.shapes, layout.slices, strict=True)
    }
    # The tuned boxes need not contain the zero initial point: build from the tuned state.
    tuned_point = DictToArrayBijection.rmap(q)
    print("  conditionals: 1-8-1 network, SFPStep quadrature vs collocation ...", flush=True)
    # A finer quadrature grid as a third variant: what the acceptance gains, at what cost.
    variants = [(solver, s.solver_L) for solver in solvers] + [("quadrature", s.fine_L)]
    with net:
        pairs = [
            built(
                L=L,
                solver=solver,
                bounds=boxes,
                marginal_points=0,
                initial_point=tuned_point,
            )
            for solver, L in variants
        ]
    for step, _ in pairs:
        step.stop_tuning()
    timed = time_steps(
        [step for step, _ in pairs],
        q,
        warmup=s.warmup_sweeps,
        budget_s=s.solver_budget_s,
        min_sweeps=s.min_sweeps,
        max_sweeps=s.max_sweeps,
    )
    label = f"1-8-1 tanh net, 50 points ({n_params(net)} weights)"
    for (solver, L), (_, build_s), (times, st, _) in zip(variants, pairs, timed, strict=True):
        name = solver if L == s.solver_L else f"{solver}, L={L}"
        sweep_rows.append(sweep_row(label, name, build_s, times, st))
    sweep_table = md_table(
        [
            "target",
            "solver",
            "time / sweep",
            "sweeps timed",
            "logp evals / sweep",
            "invalid conditionals / sweep",
            "accept",
            "edge hits / sweep",
            "build s",
        ],
        [sweep_cells(r) for r in sweep_rows],
    )
    mix_q, mix_c, net_q, net_c = (r["build_s"] for r in sweep_rows[:4])
    body = [
        "## 3. Conditional builders: quadrature against collocation",
        "",
        "NumPy cores on the 1-D mixture over the box [−10, 60]. Quadrature: the log-density on L "
        "equally spaced nodes, `quadrature_conditional(nodes, logp)`. Collocation: the "
        "derivative of the log-density at the L − 1 interior collocation points of "
        "`CollocationBasis(L)`, `collocation_conditional(basis, -10, 60, dlogp)`. Only the "
        f"builder call is timed (median over ≥ {s.cond_budget_s:g} s of calls); the basis "
        "(tables of sines) is built once per step and timed separately. Error: maximum absolute "
        "difference to the exact mixture CDF normalised to the box, on 20,001 points, of what "
        "SFPStep samples from (quadrature: the piecewise-exponential density; collocation: the "
        "piecewise-linear lookup table of ŷ on 4L + 1 points); for collocation also the error of "
        "the raw expansion ŷ at the table points. Mode weights: the conditional's mass below "
        "12.5, between 12.5 and 30, and above 30. The OpenBLAS-default column re-times the "
        "collocation builder in a subprocess without the one-thread pin (see the docstring).",
        "",
        cond_table,
        "",
        "**Reading.** "
        + _interpret_builders(cases, probe)
        + " With `correct=True` (the default) the error of either builder only lowers the "
        "acceptance rate: the chain's target is exact.",
        "",
        "### Per-sweep cost inside SFPStep",
        "",
        f"`SFPStep(L={s.solver_L}, solver=..., marginal_points=0)`, correct=True, batched; "
        f"sweeps timed with `step.astep` after {s.warmup_sweeps} warm-up sweeps, the two "
        f"solvers' sweeps interleaved, for ≥ {s.solver_budget_s:g} s each (median). "
        "1-D mixture: bounds (−10, 60), from x = 0. "
        "Network: 1-8-1 tanh, N(0, 1) weights, 50 points of y = sin(3x) + N(0, 0.1²), x ~ "
        "U(−1, 1), Gaussian likelihood sd 0.1. Its boxes are the automatic boxes of a "
        f"quadrature SFPStep after {s.net_tune_sweeps} tuning sweeps from the zero point (widths "
        f"{widths.min():.2g} – {widths.max():.2g}), passed as `bounds` to both steps, which start "
        "from that tuned state. 'invalid' counts collocation conditionals that were not valid "
        "CDFs and were replaced by the quadrature conditional at the same points; 'edge hits' "
        "counts conditionals with more than 0.1 % of their mass within 1 % of a box edge (the "
        "box then truncates the posterior; this matters for correctness, not for timing).",
        "",
        sweep_table,
        "",
        "**Reading.** "
        + _interpret_solvers(sweep_rows, s.solver_L)
        + f" (Build times: {mix_q:.1f} / {mix_c:.1f} s on the mixture, {net_q:.1f} / "
        f"{net_c:.1f} s on the network; collocation also compiles the gradient.)",
        "",
        "### Mode weights behind a deep barrier",
        "",
        "NumPy cores on 0.3 N(−m, 1) + 0.7 N(m, 1) over [−m − 8, m + 8], with m = √(2d) for "
        f"d = {', '.join(map(str, BARRIER_DEPTHS))}; 'barrier' is the drop of the log-density "
        "from the left mode to the minimum between the modes. Error: the absolute error of the "
        "conditional's mass below 0 (exact: 0.3). 'valid' is the validity check "
        "SFPStep applies (`n_invalid` counts failures, which fall back to the quadrature).",
        "",
        barrier_table,
        "",
        "**Reading.** " + _interpret_barriers(barriers),
    ]
    return Section("conditionals", "\n".join(body))


def sweep_row(target: str, variant: str, build_s: float, times: np.ndarray, st: list) -> dict:
    return dict(
        target=target,
        variant=variant,
        median=float(np.median(times)),
        n=len(times),
        evals=int(np.median([d["n_logp_evals"] for d in st])),
        invalid=float(np.mean([d["n_invalid"] for d in st])),
        accept=float(np.mean([d["accept"] for d in st])),
        edge=float(np.mean([d["n_edge_hits"] for d in st])),
        build_s=build_s,
    )


def sweep_cells(r: dict) -> list:
    return [
        r["target"],
        r["variant"],
        fmt_time(r["median"]),
        r["n"],
        r["evals"],
        f"{r['invalid']:.2f}",
        f"{r['accept']:.3f}",
        f"{r['edge']:.2f}",
        f"{r['build_s']:.1f}",
    ]


def _interpret_builders(cases: list[dict], probe: dict | None) -> str:
    quad = [c for c in cases if c["builder"] == "quadrature"]
    coll = [c for c in cases if c["builder"] == "collocation"]
    invalid = [str(c["L"]) for c in coll if not c["valid"]]
    fooled = [c for c in coll if c["valid"] and np.max(np.abs(c["weights"] - MIX1_WEIGHTS)) > 0.05]
    ratios = [c["seconds"] / q["seconds"] for q, c in zip(quad, coll, strict=True)]
    # The observed order of convergence: error ∝ L^(−order) between the first and last L.
    order = -np.log(quad[-1]["error"] / quad[0]["error"]) / np.log(quad[-1]["L"] / quad[0]["L"])
    text = (
        f"Quadrature is valid at every L, with error {fmt_number(quad[0]['error'])} at L = "
        f"{quad[0]['L']} falling to {fmt_number(quad[-1]['error'])} at L = {quad[-1]['L']} (order "
        f"{order:.1f} in L). Collocation is "
        + (f"invalid at L = {', '.join(invalid)}" if invalid else "flagged valid at every L")
        + ". "
    )
    if fooled:
        c = fooled[0]
        text += (
            f"At L = {c['L']} the collocation ŷ passes the validity check (monotone within the "
            "1e-6 tolerance, inside [0, 1]) yet puts weights "
            f"{' / '.join(f'{w:.2f}' for w in c['weights'])} on the modes: the paper's validity "
            "criterion does not detect this under-resolution. "
        )
    good = [c for c in coll if c["valid"] and c["raw_error"] < 1e-8]
    if good:
        text += (
            f"From L = {good[0]['L']} the raw expansion is spectrally accurate "
            f"({fmt_number(good[0]['raw_error'])}), but what SFPStep samples is its "
            "piecewise-linear lookup table on 4L + 1 points, whose error "
            f"({fmt_number(good[0]['error'])}) is of the "
            "same order as the quadrature's at equal L. "
        )
    text += (
        f"Per call, collocation costs {min(ratios):.1f}–{max(ratios):.0f}× the quadrature "
        "(a dense L × L solve, growing like L³)"
    )
    if probe:
        by_L = {c["L"]: c["seconds"] for c in coll}
        worst = max(probe, key=lambda L: probe[L] / by_L[L])
        if probe[worst] > 2 * by_L[worst]:
            text += (
                f"; with OpenBLAS's default threading on this shared 2-core machine the L = "
                f"{worst} call took {fmt_time(probe[worst])} instead of {fmt_time(by_L[worst])} "
                "single-threaded, so pin BLAS to one thread when using collocation"
            )
        else:
            text += (
                "; OpenBLAS's default threading made no clear difference in this run (the "
                "penalty is load-dependent: under heavier background load in development runs "
                "it made single solves up to hundreds of times slower, hence the one-thread pin)"
            )
    return text + "."


def _interpret_barriers(cases: list[dict]) -> str:
    fooled = [c for c in cases if c["valid"] and c["collocation"] > 1e-3]
    worst = max(cases, key=lambda c: c["quadrature"])
    text = (
        "The quadrature's error does not grow with the barrier (at most "
        f"{fmt_number(worst['quadrature'])}, its discretisation error at L = {worst['L']}): it "
        "works with the log-density itself, normalised in log space. Collocation solves for the "
        "CDF from the derivative, so its error grows like machine precision times e^barrier"
    )
    if fooled:
        text += (
            ", and it passes the validity check while the weight is off by up to "
            f"{fmt_number(max(c['collocation'] for c in fooled))} (barriers from "
            f"{min(c['barrier'] for c in fooled):.0f} nats): the check does not catch it and no "
            "L fixes it. With `correct=True` the draws stay exact but the acceptance drops; the "
            "analytic marginals are wrong either way"
        )
    return text + "."


def _interpret_solvers(rows: list, solver_L: int) -> str:
    by = {(r["target"], r["variant"]): r for r in rows}
    parts = []
    for target in dict.fromkeys(r["target"] for r in rows):
        q, c = by[target, "quadrature"], by[target, "collocation"]
        parts.append(
            f"{target}: collocation takes {c['median'] / q['median']:.1f}× the quadrature's "
            f"time per sweep, with {c['invalid']:.2f} invalid conditionals per sweep"
        )
    text = (
        "; ".join(parts)
        + ". Collocation needs the gradient along the line and a dense L × L solve per "
        "coordinate, and where its conditional is invalid it falls back to the quadrature one, "
        "so on these targets it buys nothing."
    )
    fine = [r for r in rows if r["variant"].startswith("quadrature, L=")]
    for r in fine:
        coarse = by[r["target"], "quadrature"]
        text += (
            f" On the network, the quadrature's acceptance is {coarse['accept']:.3f} at L = "
            f"{solver_L} and {r['accept']:.3f} with "
            f"{r['variant'].split(', ')[1]} ({r['median'] / coarse['median']:.1f}× the time per "
            "sweep): some conditionals are much narrower than their box, so a coarse grid "
            "resolves them poorly and the Metropolis correction rejects more."
        )
    edge = [r for r in rows if r["edge"] > 0]
    if edge:
        text += (
            f" The tuned automatic boxes still see {edge[0]['edge']:.1f} edge hits per sweep "
            "(of 25 coordinates): the network chain is still drifting after its tuning sweeps, "
            "so the frozen boxes truncate some conditionals (SFPStep warns about this)."
        )
    return text


def probe_main(argv: list[str] | None = None) -> int:
    """Print ``PROBE {L: seconds}`` of the collocation builder, with the BLAS threading of the
    environment this process was started in (see the module docstring)."""
    parser = argparse.ArgumentParser(description="time collocation_conditional at each L")
    parser.add_argument("--probe", required=True, help="comma-separated L values")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of calls per L")
    args = parser.parse_args(argv)
    Ls = [int(v) for v in args.probe.split(",")]
    cases = builder_cases(Ls, args.budget)
    seconds = {c["L"]: c["seconds"] for c in cases if c["builder"] == "collocation"}
    print("PROBE " + json.dumps(seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(probe_main())
