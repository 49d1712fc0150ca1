"""Dynamics benchmark ``minibatch``: minibatch against full batch on Bayesian linear regression.

100,000 rows, 10 correlated features (Toeplitz correlation 0.5^|i-j|), known noise sd 1, prior
N(0, 10²) on the weights: the exact posterior is Gaussian and known (``_problems.linear_problem``).
``StochasticDynamics(correct=False)`` on ``pm.Minibatch(X, y, batch_size=b)`` with
``total_size=100000`` for two batch sizes against full-batch ``StochasticDynamics`` (exact) and
NUTS. Reported: posterior-mean error in units of the exact posterior sd (max and RMS over the 10
weights), the ratio of sampled to exact posterior sd (min and max over the weights), wall time,
minimum bulk ESS over the weights and seconds per effective sample (wall time / that ESS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import arviz as az
import numpy as np
from _common import Section, fmt_rhat, fmt_sig, md_table
from _problems import (
    LIN_FEATURES,
    LIN_NOISE_SD,
    LIN_PRIOR_SD,
    LIN_RHO,
    LIN_ROWS,
    LinearProblem,
    linear_model,
    linear_problem,
)
from _runs import (
    Run,
    draws_of,
    jittered_starts,
    median_step_size,
    noise_share,
    sample_run,
    sd_label,
    sd_step,
    warm_up,
)

if TYPE_CHECKING:
    from dynamics_benchmarks import Settings

OLS_SUBSET = 2000
MINIBATCH_SD = {"alpha": 0.9, "n_leapfrog": 5, "thin": 1}
FULL_SD = {"alpha": 0.9, "n_leapfrog": 10, "thin": 1}


def subset_ols_starts(problem: LinearProblem, chains: int, seed: int) -> list[dict]:
    """Per-chain starts from least squares on a random subset of rows (one per chain): the cheap
    initialisation a practitioner would use before stochastic-gradient sampling."""
    rng = np.random.default_rng(seed)
    starts = []
    for _ in range(chains):
        rows = rng.choice(LIN_ROWS, size=OLS_SUBSET, replace=False)
        w, *_ = np.linalg.lstsq(problem.X[rows], problem.y[rows], rcond=None)
        starts.append({"w": w})
    return starts


def benchmark(s: Settings) -> Section:
    """Minibatch and full-batch runs on the regression, scored against its exact posterior."""
    problem = linear_problem(s.seed + 1)
    full = linear_model(problem, None)
    starts = jittered_starts(full, s.lin_chains, s.seed)
    common = {
        "chains": s.lin_chains,
        "cores": s.cores,
        "tune": s.lin_tune,
        "draws": s.lin_draws,
        "starts": starts,
        "seed": s.seed,
    }
    near_starts = subset_ols_starts(problem, s.lin_chains, s.seed + 2)
    models = {batch: linear_model(problem, batch) for batch in s.batch_sizes}
    for model in (full, *models.values()):
        print(f"  warm-up compile: {warm_up(model):.1f} s (untimed)", flush=True)
    cases: list[tuple[str, str, Run]] = []
    for start_label, chain_starts in (
        ("jittered start", starts),
        ("subset-OLS start", near_starts),
    ):
        for batch in s.batch_sizes:
            run = sample_run(
                f"SD minibatch {batch}, {start_label}",
                models[batch],
                sd_step(MINIBATCH_SD, False),
                grad_stat="n_grad_evals",
                **(common | {"starts": chain_starts}),
            )
            cases.append(
                (
                    f"StochasticDynamics uncorrected, batch {batch}, {start_label}",
                    sd_label(MINIBATCH_SD),
                    run,
                )
            )
    run = sample_run("SD full", full, sd_step(FULL_SD, True), grad_stat="n_grad_evals", **common)
    cases.append(("StochasticDynamics exact, full batch", sd_label(FULL_SD), run))
    run = sample_run("NUTS full", full, None, grad_stat="n_steps", **common)
    cases.append(("NUTS, full batch", "PyMC defaults", run))

    rows, summary = [], {}
    for name, settings, run in cases:
        w = draws_of(run.idata, "w")
        flat = w.reshape(-1, LIN_FEATURES)
        z = (flat.mean(axis=0) - problem.mean) / problem.sd
        ratio = flat.std(axis=0) / problem.sd
        ess = np.array([az.ess(w[..., k], method="bulk") for k in range(LIN_FEATURES)])
        rhat = max(float(az.rhat(w[..., k])) for k in range(LIN_FEATURES))
        summary[name] = {
            "minibatch": run.name.startswith("SD minibatch"),
            "max_z": float(np.max(np.abs(z))),
            "ratio": (float(ratio.min()), float(ratio.max())),
            "s_per_ess": run.seconds / float(ess.min()),
            "min_ess": float(ess.min()),
            "seconds": run.seconds,
        }
        rows.append(
            [
                name,
                settings,
                f"{np.max(np.abs(z)):.2f}",
                f"{np.sqrt(np.mean(z**2)):.2f}",
                f"{ratio.min():.2f}–{ratio.max():.2f}",
                fmt_rhat(rhat),
                f"{ess.min():.0f}",
                f"{run.seconds:.1f}",
                fmt_sig(run.seconds / ess.min()),
                f"{run.grads / 1e3:.0f}",
                fmt_sig(median_step_size(run.idata)),
                noise_share(run.idata) if run.name.startswith("SD minibatch") else "–",
            ]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "max |mean err| / sd",
            "RMS mean err / sd",
            "sd ratio (min–max)",
            "max R-hat",
            "min ESS",
            "wall s",
            "s per ESS",
            "grads (k)",
            "step size",
            "noise share",
        ],
        rows,
    )
    body = "\n".join(
        [
            "## 3. Minibatch against full batch: Bayesian linear regression",
            "",
            f"{LIN_ROWS:,} rows, {LIN_FEATURES} Gaussian features with correlation "
            f"{LIN_RHO:g}^|i−j|, true weights N(0, 1), known noise sd {LIN_NOISE_SD:g}, prior "
            f"N(0, {LIN_PRIOR_SD:g}²): the exact posterior is Gaussian (posterior sds "
            f"{problem.sd.min():.2g}–{problem.sd.max():.2g}). Minibatch runs: `X_b, y_b = "
            "pm.Minibatch(X, y, batch_size=b)`, likelihood with `total_size=100000`, "
            "`StochasticDynamics(correct=False)`; full-batch runs see all rows in every "
            f"gradient. {s.lin_chains} chains, cores={s.cores}, tune={s.lin_tune}, "
            f"draws={s.lin_draws}. Starts: the same jittered starts for every sampler "
            "(U(−1, 1) around zero, hundreds of posterior sds away), and for the minibatch runs "
            f"also starts from least squares on {OLS_SUBSET} random rows per chain (a few "
            "posterior sds away, the cheap initialisation usual before stochastic-gradient "
            "sampling), which separates reaching the posterior from sampling it. "
            "Mean error: |sample mean − exact mean| / exact sd per weight (max "
            "and RMS over the weights; with ESS n the Monte Carlo error alone is about "
            "1/√n); sd ratio: sample sd / exact sd. s per ESS: wall time (compile and tuning "
            "included) / smallest bulk ESS over the weights. Noise share: mean of the "
            "`gradient_noise_share` stat (tuned towards 0.5). Grads include the tuning "
            "phase; a minibatch gradient costs far less than a full one.",
            "",
            table,
            "",
            "**Reading.** " + minibatch_reading(summary),
        ]
    )
    return Section("minibatch", body)


def minibatch_reading(summary: dict) -> str:
    nuts = summary["NUTS, full batch"]
    exact = summary["StochasticDynamics exact, full batch"]
    parts = [
        f"Full batch, the exact StochasticDynamics run is within {exact['max_z']:.2f} sd of the "
        f"exact means with sd ratios {exact['ratio'][0]:.2f}–{exact['ratio'][1]:.2f} "
        f"({exact['s_per_ess']:.3g} s per effective sample; NUTS {nuts['max_z']:.2f} sd, "
        f"{nuts['ratio'][0]:.2f}–{nuts['ratio'][1]:.2f}, {nuts['s_per_ess']:.3g} s)."
    ]
    for name, m in summary.items():
        if not m["minibatch"]:
            continue
        biased = m["max_z"] > 1 or m["ratio"][0] < 0.8 or m["ratio"][1] > 1.25
        if not biased:
            verdict = "within 1 sd of the exact means and 20–25 % of the sds."
        elif m["min_ess"] < 50:
            verdict = (
                f"off, but with a minimum ESS of {m['min_ess']:.0f} the chain has not mixed: "
                "this is slow mixing (or not yet reaching the posterior), not a measured bias."
            )
        else:
            verdict = "visibly biased (mean off by more than 1 sd or sd by more than 20–25 %)."
        parts.append(
            f"{', '.join(name.split(', ')[1:]).capitalize()}: mean error up to "
            f"{m['max_z']:.2f} sd, sd ratio {m['ratio'][0]:.2f}–{m['ratio'][1]:.2f}, "
            f"{m['s_per_ess']:.3g} s per effective sample — {verdict}"
        )
    fastest = min(summary, key=lambda n: summary[n]["s_per_ess"])
    parts.append(f"Cheapest per effective sample here: {fastest}.")
    return " ".join(parts)
