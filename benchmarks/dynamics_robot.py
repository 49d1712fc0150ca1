"""Dynamics benchmark ``robot``: Neal's robot arm (MacKay 1992; Neal 1993, §3), sampler by sampler.

200 training and 200 test cases from ``pymc_sfp.datasets.make_robot_arm`` (noise sd 0.05, seeds
1993 and 1994), a 2-16-2 tanh network with linear outputs, non-centred weights ``w = s · z``,
``z ~ N(0, 1)``, with three group scales (input→hidden weights ``s_in``, hidden biases ``s_b``,
hidden→output weights and output biases ``s_out``), each ``HalfNormal(5)``, and an unknown noise
sd ``sigma ~ HalfNormal(1)`` shared by both outputs; Gaussian likelihood; 86 unconstrained
parameters (``_problems.robot_network``: ``pymc_sfp.nn.mlp(..., prior="group")``, the scales
named ``net_sd_w0``, ``net_sd_b0``, ``net_sd_out`` there). Samplers: ``StochasticDynamics`` exact
(``correct=True``) and uncorrected (``correct=False``) at the same settings, NUTS, and
``pm.HamiltonianMC`` with ``path_length`` = the exact run's median tuned step size ×
``n_leapfrog`` × ``thin`` (the distance the persistent momentum could carry a draw); Neal's split
scheme (centred weights by the dynamics, scales by ``pm.Slice``), also run 20x longer; and
``ReplicaExchangeDynamics`` (12 tempered replicas) with 4x the draws. Then the same posterior
with the output layer integrated out analytically (``pymc_sfp.nn.mlp(...,
output_layer="integrated")``; 52 unconstrained parameters): the exact dynamics, with 2x the
tuning and 4x the draws, from three seeds, and NUTS at that budget.

Reported: the test error of the posterior-averaged outputs in Neal's convention (mean over test
cases of the squared error summed over both outputs; Neal's 0.00559; the noise floor of this
test set, the same error of the noiseless function, is printed), R-hat, bulk ESS and posterior
means of the three scales and of ``sigma``, gradient evaluations, wall time, ESS/s and ESS per
1000 gradient evaluations of the scales (the minimum over the three), divergences after tuning,
and for NUTS the fraction of draws at the maximum tree depth (``reached_max_treedepth``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import arviz as az
import numpy as np
import pymc as pm
from _common import Section, fmt_rhat, fmt_sig, md_table
from _problems import (
    HYPER,
    NOISE_PRIOR_SD,
    ROBOT_N_TEST,
    ROBOT_N_TRAIN,
    ROBOT_NOISE_SD,
    ROBOT_TEST_SEED,
    ROBOT_TRAIN_SEED,
    SCALE_PRIOR_SD,
    SCALES,
    RobotProblem,
    robot_problem,
    test_error,
)
from _runs import (
    Run,
    draws_of,
    jittered_starts,
    median_step_size,
    sample_run,
    sd_label,
    sd_step,
    stat_of,
    warm_up,
)

from pymc_sfp import ReplicaExchangeDynamics, StochasticDynamics

if TYPE_CHECKING:
    from dynamics_benchmarks import Settings

NEAL_TEST_ERROR = 0.00559
ANCHOR_NUTS = "0.00552, scale R-hat 1.35–1.67, 3960/4000 draws at max tree depth, 318 s"

# Settings of this benchmark, picked from the --quick scan of the explore benchmark (RESULTS.md).
ROBOT_SD = {"alpha": 0.95, "n_leapfrog": 10, "thin": 10}
# At the default 0.9 the split scheme's tuned step sits at the edge of stability: a third of its
# draws had a divergent transition (|ΔH| up to 6e5), with the same scale R-hat as at 0.97, where
# none diverge.
SPLIT_TARGET_ACCEPT = 0.97
LONG_DRAWS_FACTOR = 20  # the long split run: 20x the draws (and 2x the tuning) of the others
N_BLOCKS = 5  # consecutive blocks of a long chain whose means show whether chains agree
# Replica exchange on the robot arm: 12 temperatures, β from 1 to 0.1. With β down to 0.05 the two
# hottest replicas of a fixed geometric ladder swapped only 1-5 % of the time (a phase transition
# near β ≈ 0.07); the adapted ladder crowds there and swaps 13-33 %, with the same scale R-hat
# (1.18-1.27, 4 x 2000 draws, scratch run).
TEMPERED = {"n_temperatures": 12, "min_beta": 0.1}
TEMPERED_DRAWS_FACTOR = 4
# The integrated-output-layer rows: 2x the tuning and 4x the draws of the others, repeated over
# seeds. Settings from a scratch scan on that model (4 x (1000 + 1000) draws, three seeds): at
# ROBOT_SD 3-5 % of the draws diverged and the largest scale R-hat was 1.007-1.015 (smallest ESS
# 372-605); alpha 0.98 with target_accept 0.95 cut the divergences to 0.4-1.4 % (R-hat
# 1.006-1.014, smallest ESS 403-727); alpha 0.98 alone, target_accept 0.95 alone, alpha 0.99, HMC
# with L=100 and alpha 0.99 with L=1 did no better (one seed each; alpha 0.98 alone on three).
INTEGRATED_SD = {"alpha": 0.98, "n_leapfrog": 10, "thin": 10}
INTEGRATED_TARGET_ACCEPT = 0.95
INTEGRATED_TUNE_FACTOR, INTEGRATED_DRAWS_FACTOR = 2, 4
INTEGRATED_SEEDS = 3


def robot_metrics(run: Run, problem: RobotProblem) -> dict:
    """Test error, convergence and cost of a robot-arm run (see the module docstring)."""
    idata = run.idata
    outputs = problem.outputs(idata, problem.X_test)
    per_chain = outputs.mean(axis=1)
    chain_errors = [test_error(p, problem.Y_test) for p in per_chain]
    # Function-space convergence: R-hat of each test output (Izmailov et al. 2021 judge network
    # posteriors this way, since the weights and scales themselves rarely converge).
    rhat_outputs = np.asarray(az.rhat(outputs.reshape(*outputs.shape[:2], -1)), dtype=float)
    hyper = {name: draws_of(idata, problem.hyper[name]) for name in HYPER}
    rhat = {name: float(az.rhat(draws)) for name, draws in hyper.items()}
    ess = {name: float(az.ess(draws, method="bulk")) for name, draws in hyper.items()}
    min_ess = min(ess[name] for name in SCALES)
    diverging = stat_of(idata, "diverging")
    out = {
        "test_error": test_error(per_chain.mean(axis=0), problem.Y_test),
        "rhat_outputs": (float(np.median(rhat_outputs)), float(rhat_outputs.max())),
        "chain_errors": (min(chain_errors), max(chain_errors)),
        "rhat": rhat,
        "ess": ess,
        "max_rhat_scales": max(rhat[name] for name in SCALES),
        "min_ess_scales": min_ess,
        "ess_per_s": min_ess / run.seconds,
        "ess_per_kgrad": 1000 * min_ess / run.grads,
        "grads_per_draw": run.grads / run.iterations,
        "divergences": int(diverging.sum()),
        "step_size": median_step_size(idata),
        "means": {name: float(draws.mean()) for name, draws in hyper.items()},
    }
    names = set(idata["sample_stats"].data_vars)
    if "reached_max_treedepth" in names:
        out["max_depth"] = float(stat_of(idata, "reached_max_treedepth").mean())
    for accept in ("accept", "acceptance_rate"):
        if accept in names:
            out["accept"] = float(stat_of(idata, accept).mean())
    return out


def robot_row(name: str, settings: str, run: Run, m: dict) -> list[str]:
    lo, hi = m["chain_errors"]
    return [
        name,
        settings,
        f"{m['test_error']:.5f}",
        f"{lo:.5f}–{hi:.5f}",
        f"{m['rhat_outputs'][0]:.3f} / {m['rhat_outputs'][1]:.3f}",
        fmt_rhat(m["max_rhat_scales"]),
        f"{m['min_ess_scales']:.0f}",
        f"{run.grads / 1e6:.2f}",
        f"{m['grads_per_draw']:.0f}",
        f"{run.seconds:.0f}",
        fmt_sig(m["ess_per_s"]),
        fmt_sig(m["ess_per_kgrad"]),
        str(m["divergences"]),
        f"{m['max_depth']:.2f}" if "max_depth" in m else "–",
        fmt_sig(m["step_size"]),
        f"{m['accept']:.2f}",
    ]


def neal_split_step(problem: RobotProblem) -> list:
    """Neal's split: dynamics for the (centred) weights, a separate update for the hyperparameters
    (Neal used Gibbs sampling from their conjugate conditionals; PyMC's Slice stands in)."""
    network, model = problem.network, problem.model
    return [
        StochasticDynamics(
            [*network.weights, *network.biases],
            correct=True,
            target_accept=SPLIT_TARGET_ACCEPT,
            **ROBOT_SD,
        ),
        pm.Slice([model[name] for name in problem.hyper.values()]),
    ]


def benchmark(s: Settings) -> Section:
    """Every sampler on the robot-arm posterior, with the tables and their reading."""
    problem = robot_problem()
    print(f"  warm-up compile: {warm_up(problem.model):.1f} s (untimed)", flush=True)
    starts = jittered_starts(problem.model, s.chains, s.seed)
    common = {
        "chains": s.chains,
        "cores": s.cores,
        "tune": s.robot_tune,
        "draws": s.robot_draws,
        "starts": starts,
        "seed": s.seed,
    }
    runs: list[tuple[str, str, Run]] = []
    exact = sample_run(
        "SD exact",
        problem.model,
        sd_step(ROBOT_SD, True),
        grad_stat="n_grad_evals",
        **common,
    )
    runs.append(("StochasticDynamics exact", sd_label(ROBOT_SD), exact))
    centred = robot_problem(centred=True)
    split_label = f"{sd_label(ROBOT_SD)}, target_accept {SPLIT_TARGET_ACCEPT}"
    began = time.perf_counter()
    with centred.model:
        neal_split_step(centred)  # compiles both sub-steps' functions (warm cache)
    print(f"  warm-up compile (centred): {time.perf_counter() - began:.1f} s (untimed)", flush=True)
    split = sample_run(
        "SD exact + Slice, centred",
        centred.model,
        lambda: neal_split_step(centred),
        grad_stat="n_grad_evals",
        **(common | {"starts": jittered_starts(centred.model, s.chains, s.seed)}),
    )
    split.extra["problem"] = centred
    runs.append(
        (
            "StochasticDynamics exact on weights + Slice on scales (centred)",
            split_label,
            split,
        )
    )
    long_split = sample_run(
        "SD exact + Slice, centred, long",
        centred.model,
        lambda: neal_split_step(centred),
        grad_stat="n_grad_evals",
        **(
            common
            | {
                "starts": jittered_starts(centred.model, s.chains, s.seed),
                "tune": 2 * s.robot_tune,
                "draws": LONG_DRAWS_FACTOR * s.robot_draws,
            }
        ),
    )
    long_split.extra["problem"] = centred
    runs.append(
        (
            "StochasticDynamics exact on weights + Slice on scales (centred), long",
            f"{split_label}; tune={2 * s.robot_tune}, draws={LONG_DRAWS_FACTOR * s.robot_draws}",
            long_split,
        )
    )
    tempered = sample_run(
        "Replica exchange",
        problem.model,
        lambda: ReplicaExchangeDynamics(**TEMPERED, **ROBOT_SD),
        grad_stat="n_grad_evals",
        **(common | {"draws": TEMPERED_DRAWS_FACTOR * s.robot_draws}),
    )
    runs.append(
        (
            "ReplicaExchangeDynamics",
            f"{sd_label(ROBOT_SD)}; {TEMPERED['n_temperatures']} temperatures, β from 1 to "
            f"{TEMPERED['min_beta']:g}, adapted; draws={TEMPERED_DRAWS_FACTOR * s.robot_draws}",
            tempered,
        )
    )
    uncorrected = sample_run(
        "SD uncorrected",
        problem.model,
        sd_step(ROBOT_SD, False),
        grad_stat="n_grad_evals",
        **common,
    )
    runs.append(("StochasticDynamics uncorrected", sd_label(ROBOT_SD, False), uncorrected))
    nuts = sample_run("NUTS", problem.model, None, grad_stat="n_steps", **common)
    runs.append(("NUTS", "PyMC defaults (target_accept 0.8, max_treedepth 10)", nuts))
    eps = median_step_size(exact.idata)
    path_length = eps * ROBOT_SD["n_leapfrog"] * ROBOT_SD["thin"]
    hmc = sample_run(
        "HMC",
        problem.model,
        lambda: pm.HamiltonianMC(path_length=path_length),
        grad_stat="n_steps",
        **common,
    )
    runs.append(("HamiltonianMC", f"path_length={path_length:.3g}, target_accept 0.65", hmc))
    integrated = robot_problem(output_layer="integrated")
    print(
        f"  warm-up compile (integrated): {warm_up(integrated.model):.1f} s (untimed)", flush=True
    )
    integrated_budget = common | {
        "tune": INTEGRATED_TUNE_FACTOR * s.robot_tune,
        "draws": INTEGRATED_DRAWS_FACTOR * s.robot_draws,
    }
    budget_label = f"tune={integrated_budget['tune']}, draws={integrated_budget['draws']}"
    integrated_seeds = []
    for k in range(INTEGRATED_SEEDS):
        run = sample_run(
            f"SD exact, output layer integrated, seed {s.seed + k}",
            integrated.model,
            lambda: StochasticDynamics(target_accept=INTEGRATED_TARGET_ACCEPT, **INTEGRATED_SD),
            grad_stat="n_grad_evals",
            **(
                integrated_budget
                | {
                    "starts": jittered_starts(integrated.model, s.chains, s.seed + k),
                    "seed": s.seed + k,
                }
            ),
        )
        run.extra["problem"] = integrated
        integrated_seeds.append(run)
    runs.append(
        (
            "StochasticDynamics exact, output layer integrated",
            f"{sd_label(INTEGRATED_SD)}, target_accept {INTEGRATED_TARGET_ACCEPT}; {budget_label}",
            integrated_seeds[0],
        )
    )
    integrated_nuts = sample_run(
        "NUTS, output layer integrated",
        integrated.model,
        None,
        grad_stat="n_steps",
        **(integrated_budget | {"starts": jittered_starts(integrated.model, s.chains, s.seed)}),
    )
    integrated_nuts.extra["problem"] = integrated
    runs.append(
        ("NUTS, output layer integrated", f"PyMC defaults; {budget_label}", integrated_nuts)
    )

    metrics = {}
    rows, hyper_rows = [], []
    for name, settings, run in runs:
        m = robot_metrics(run, run.extra.get("problem", problem))
        metrics[name] = (run, m)
        rows.append(robot_row(name, settings, run, m))
        hyper_rows.append(
            [name]
            + [f"{m['rhat'][v]:.3f} / {m['ess'][v]:.0f}" for v in HYPER]
            + [" / ".join(f"{m['means'][v]:.3g}" for v in HYPER)]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "test error",
            "per-chain test error",
            "R-hat outputs (median / max)",
            "max R-hat scales",
            "min ESS scales",
            "grads (M)",
            "grads/draw",
            "wall s",
            "ESS/s",
            "ESS/1k grads",
            "div.",
            "max depth",
            "step size",
            "accept",
        ],
        rows,
    )
    hyper_table = md_table(
        ["sampler", *(f"{v}: R-hat / ESS" for v in HYPER), "means " + " / ".join(HYPER)],
        hyper_rows,
    )
    block_table = md_table(
        ["run", "scale", *(f"chain {c}" for c in range(s.chains))],
        [
            [label, name]
            + [
                " / ".join(f"{b:.2f}" for b in chain)
                for chain in block_means(draws_of(run.idata, problem.hyper[name]), N_BLOCKS)
            ]
            for label, run in (("split, long", long_split), ("replica exchange", tempered))
            for name in SCALES
        ],
    )
    seed_summary = "; ".join(
        f"seed {s.seed + k}: max R-hat {m['max_rhat_scales']:.3f}, min ESS "
        f"{m['min_ess_scales']:.0f}, {m['divergences']} divergent draws, {run.seconds:.0f} s"
        for k, run in enumerate(integrated_seeds)
        for m in [robot_metrics(run, integrated)]
    )
    swap_rates = np.nanmean(stat_of(tempered.idata, "swap_accept"), axis=(0, 1))
    ladders = stat_of(tempered.idata, "betas")[:, -1]
    replica_divergences = stat_of(tempered.idata, "replica_diverging").sum(axis=(0, 1))
    body = "\n".join(
        [
            "## 2. Robot arm: 2-16-2 network with group scales (Neal 1993, §3)",
            "",
            f"{ROBOT_N_TRAIN} training / {ROBOT_N_TEST} test cases from `make_robot_arm` (noise sd "
            f"{ROBOT_NOISE_SD}, seeds {ROBOT_TRAIN_SEED} / {ROBOT_TEST_SEED}); tanh hidden units, "
            "linear outputs, "
            "`w = s · z`, `z ~ N(0, 1)`; scales `s_in` (input→hidden weights), `s_b` (hidden "
            f"biases), `s_out` (hidden→output weights and output biases) ~ HalfNormal"
            f"({SCALE_PRIOR_SD:g}); noise sd σ ~ HalfNormal({NOISE_PRIOR_SD:g}); Gaussian "
            f"likelihood. {s.chains} chains, cores={s.cores}, tune={s.robot_tune}, "
            f"draws={s.robot_draws} for every sampler (the anchor NUTS run used 4 × 1000 "
            "draws), the same jittered starts. Test error: mean over the test cases of the "
            "squared error of the posterior-averaged outputs, summed over both outputs "
            f"(Neal's 0.00559); the noiseless function scores **{problem.floor:.5f}** on this "
            "test set (the floor; 2 · 0.05² = 0.005 in expectation). Per-chain test error: "
            "the same with each chain's average alone (min–max). Wall time includes "
            "compilation and tuning; grads include tuning; 'max depth': fraction of NUTS "
            "draws at the maximum tree depth; div.: divergent draws after tuning; ESS/s and "
            "ESS/1k grads use the smallest bulk ESS of the three scales. HamiltonianMC's "
            "path length is the exact run's median step size × L × thin. The split run "
            "follows Neal: "
            "centred weights `w ~ N(0, s²)` moved by the exact dynamics (target_accept "
            f"{SPLIT_TARGET_ACCEPT}: at the default 0.9 a third of the draws had a divergent "
            "transition, with the same scale R-hat), the scales and σ by "
            "PyMC's Slice sampler in a CompoundStep (Neal used Gibbs updates from conjugate "
            "gamma conditionals); its gradient count omits Slice's log-density evaluations. "
            "ReplicaExchangeDynamics runs the exact dynamics of the first row in each of "
            f"{TEMPERED['n_temperatures']} replicas tempering the likelihood by β (from 1 to "
            f"{TEMPERED['min_beta']:g}, geometric at first, adapted during tuning to equal swap "
            "rates) with neighbour swaps after every draw; its gradient count includes every "
            "replica. "
            "The rows 'output layer integrated' sample the same posterior with the "
            "hidden→output weights and output biases integrated out analytically "
            "(`nn.mlp(..., prior='group', output_layer='integrated')`: given the hidden layer "
            "the targets are Gaussian, so the sampler moves the 48 input-side weights, the "
            "three scales and σ); their outputs are each draw's conditional-mean network, and "
            f"they run {INTEGRATED_TUNE_FACTOR}× the tuning and {INTEGRATED_DRAWS_FACTOR}× the "
            "draws of the other rows. The dynamics there use α = "
            f"{INTEGRATED_SD['alpha']:g} and target_accept {INTEGRATED_TARGET_ACCEPT} (from a "
            "scratch scan of seven settings on that model; with the first row's settings 3–5 % "
            "of the draws diverged, against 0.4–1.4 %, at a similar smallest scale ESS). "
            "Anchor (PYMC_NOTES, "
            f"NUTS, 4 × 1000 draws, similar machine, possibly another prior): {ANCHOR_NUTS}.",
            "",
            table,
            "",
            f"The integrated-output-layer dynamics with {INTEGRATED_SEEDS} seeds (each its "
            f"own starts): {seed_summary}.",
            "",
            "R-hat / bulk ESS of each hyperparameter, and its posterior mean over all chains:",
            "",
            hyper_table,
            "",
            f"Means of the scales over {N_BLOCKS} consecutive blocks of each chain of the long "
            "split run and of the replica-exchange run:",
            "",
            block_table,
            "",
            "Mean swap acceptance of neighbouring replicas (hottest pair first): "
            + ", ".join(f"{r:.2f}" for r in swap_rates)
            + ". Adapted ladders: "
            + "; ".join(
                f"chain {c}: " + ", ".join(f"{b:.3g}" for b in ladder)
                for c, ladder in enumerate(ladders)
            )
            + ". Divergent draws after tuning per replica (hottest first): "
            + ", ".join(str(int(n)) for n in replica_divergences)
            + ".",
            "",
            "**Reading.** "
            + robot_reading(metrics, problem.floor, long_split.idata, centred.hyper),
        ]
    )
    return Section("robot", body)


def block_means(draws: np.ndarray, n_blocks: int) -> np.ndarray:
    """Means of ``(chain, draw)`` draws over ``n_blocks`` consecutive blocks per chain (a trailing
    remainder is dropped)."""
    n_chains, n_draws = draws.shape
    size = n_draws // n_blocks
    return draws[:, : size * n_blocks].reshape(n_chains, n_blocks, size).mean(axis=2)


def robot_reading(metrics: dict, floor: float, long_idata, hyper: dict[str, str]) -> str:
    nuts_run, nuts = metrics["NUTS"]
    converged = {name: m["max_rhat_scales"] <= 1.01 for name, (_, m) in metrics.items()}
    loose = {name: m["max_rhat_scales"] <= 1.05 for name, (_, m) in metrics.items()}
    parts = []
    verdicts = []
    for name, (run, m) in metrics.items():
        if not name.startswith(("StochasticDynamics", "ReplicaExchangeDynamics")):
            continue
        ratio = m["test_error"] / nuts["test_error"]
        time_ratio = run.seconds / nuts_run.seconds
        parts.append(
            f"{name}: test error {m['test_error']:.5f} against NUTS's {nuts['test_error']:.5f} "
            f"({ratio:.2f}×; floor {floor:.5f}) in {time_ratio:.2f}× NUTS's wall time "
            f"({run.seconds:.0f} s vs {nuts_run.seconds:.0f} s), {run.grads / nuts_run.grads:.2f}× "
            f"its gradient evaluations, scale ESS per 1000 gradients {m['ess_per_kgrad']:.3g} "
            f"(NUTS {nuts['ess_per_kgrad']:.3g})."
        )
        if "uncorrected" in name:
            continue
        failures = [
            reason
            for reason, failed in (
                ("test error more than 5 % above NUTS's", ratio > 1.05),
                ("scale R-hat above 1.01", not converged[name]),
                ("not faster than NUTS", time_ratio >= 1),
            )
            if failed
        ]
        verdicts.append(
            f"{name}: " + ("met" if not failures else "not met (" + "; ".join(failures) + ")")
        )
    rh = ", ".join(f"{name} {m['max_rhat_scales']:.2f}" for name, (_, m) in metrics.items())
    parts.append(
        f"Largest scale R-hat: {rh} — "
        + (
            "all ≤ 1.01."
            if all(converged.values())
            else "≤ 1.01 for "
            + (", ".join(n for n, ok in converged.items() if ok) or "none")
            + ", ≤ 1.05 for "
            + (", ".join(n for n, ok in loose.items() if ok) or "none")
            + "; the scales are not converged where R-hat exceeds these."
        )
    )
    spreads = []
    for name in SCALES:
        blocks = block_means(draws_of(long_idata, hyper[name]), N_BLOCKS)
        between = float(np.std(blocks.mean(axis=1), ddof=1))
        within = float(np.mean(np.std(blocks, axis=1, ddof=1)))
        spreads.append(f"{name} {between:.2f} vs {within:.2f}")
    parts.append(
        "Long split run, sd of the chain means vs mean sd of a chain's block means: "
        + ", ".join(spreads)
        + " (a between-chain spread well above the within-chain one means the chains sat in "
        "different regions for the whole run; block means that move steadily in one direction "
        "mean a chain is still drifting)."
    )
    fr = ", ".join(
        f"{name} {m['rhat_outputs'][0]:.3f} / {m['rhat_outputs'][1]:.3f}"
        for name, (_, m) in metrics.items()
    )
    parts.append(f"R-hat of the 400 test outputs (median / max): {fr}.")
    parts.append(
        f"NUTS spent {nuts.get('max_depth', 0):.0%} of its draws at the maximum tree depth."
    )
    sd_key, nuts_key = (
        "StochasticDynamics exact, output layer integrated",
        "NUTS, output layer integrated",
    )
    if sd_key in metrics and nuts_key in metrics:
        (sd_run, sd), (peer_run, peer) = metrics[sd_key], metrics[nuts_key]
        parts.append(
            "Output layer integrated out, the same posterior: the exact dynamics take "
            f"{sd_run.seconds:.0f} s against NUTS's {peer_run.seconds:.0f} s on that model "
            f"({sd_run.seconds / peer_run.seconds:.2f}×), smallest scale ESS per second "
            f"{sd['ess_per_s']:.3g} against {peer['ess_per_s']:.3g}, largest scale R-hat "
            f"{sd['max_rhat_scales']:.3f} against {peer['max_rhat_scales']:.3f}; NUTS reached "
            f"the maximum tree depth on {peer.get('max_depth', 0):.0%} of its draws there. "
            "The posterior means of the scales, on which the full-model runs never agreed, are "
            "in the hyperparameter table (means over all chains)."
        )
    parts.append(
        "Goal of the issue (NUTS's test error, or better, within 5 %; scales converged at "
        "R-hat ≤ 1.01; in a fraction of NUTS's time): " + "; ".join(verdicts) + "."
    )
    return " ".join(parts)
