"""Dynamics benchmark ``network``: minibatches where a full gradient is expensive.

The 2-16-2 network of the ``robot`` benchmark (N(0, 1) weights, unknown noise sd) on 200,000
robot-arm rows, where a gradient of all rows costs about 200x one of a 1000-row batch. Every run
starts from per-chain MAPs on 2000-row subsets. Uncorrected minibatch dynamics on all rows
against exact dynamics on a 2000-row subset and exact full-batch dynamics on all rows (a few
minutes' budget). Reported: test error of the posterior-averaged outputs and its excess over the
noise floor, the median predictive sd, posterior mean noise sd, wall time, gradient evaluations
and data passes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
import xarray as xr
from _common import Section, fmt_sig, md_table
from _problems import (
    NOISE_PRIOR_SD,
    chain_outputs,
    robot_arm,
    robot_network,
    test_error,
)
from _runs import (
    draws_of,
    jittered_starts,
    median_step_size,
    noise_share,
    sample_run,
    sd_label,
    sd_step,
    warm_up,
)
from dynamics_minibatch import FULL_SD, MINIBATCH_SD

from pymc_sfp import nn

if TYPE_CHECKING:
    from dynamics_benchmarks import Settings

NET_ROWS = 200_000
NET_TEST_ROWS = 2000
NET_SUBSET = 2000
NET_BATCH = 1000
NET_TRAIN_SEED, NET_TEST_SEED = 2001, 2002


def subset_map_starts(
    X: np.ndarray, Y: np.ndarray, chains: int, seed: int
) -> tuple[list[dict], float]:
    """Per-chain starts: the MAP of the network on ``NET_SUBSET`` random rows (one subset per
    chain, drawn with ``seed + 3``), found from a point jittered with ``seed + chain``; and the
    seconds it took."""
    rng = np.random.default_rng(seed + 3)
    began = time.perf_counter()
    starts = []
    for chain in range(chains):
        rows = rng.choice(len(X), size=NET_SUBSET, replace=False)
        subset, _ = robot_network(X[rows], Y[rows], "gaussian")
        with subset:
            point = pm.find_MAP(
                start=jittered_starts(subset, 1, seed + chain)[0], progressbar=False
            )
        starts.append({rv.name: point[rv.name] for rv in subset.free_RVs})
    return starts, time.perf_counter() - began


def gauss_newton_predictive_sd(
    network: nn.Network, point: dict, X: np.ndarray, X_test: np.ndarray, chunk: int = 5000
) -> float:
    """Median over ``X_test``'s outputs of the predictive sd of a linearised (Gauss–Newton /
    Laplace) posterior of the weights at ``point``: precision ``Jᵀ J / σ² + I`` with ``J`` the
    Jacobian of the outputs on all training rows ``X`` (central differences), ``I`` the N(0, 1)
    prior's. With 200,000 rows one mode of the posterior is close to Gaussian
    (Bernstein–von Mises), so this is the reference for the samplers' within-chain spread."""
    units = network.unit_dims
    params = [*network.weights, *network.biases]
    dims = {W.name: (units[i], units[i + 1]) for i, W in enumerate(network.weights)}
    dims |= {b.name: (units[i + 1],) for i, b in enumerate(network.biases)}
    flat = np.concatenate([np.ravel(point[p.name]) for p in params])
    sizes = [np.size(point[p.name]) for p in params]
    h = 1e-6
    # Every perturbed weight vector is one "draw": one predict call gives all the columns.
    perturbed = np.concatenate([flat + h * np.eye(flat.size), flat - h * np.eye(flat.size)])
    parts = np.split(perturbed, np.cumsum(sizes)[:-1], axis=1)
    draws = xr.Dataset(
        {
            p.name: (
                ("draw", *dims[p.name]),
                part.reshape(len(perturbed), *np.shape(point[p.name])),
            )
            for p, part in zip(params, parts, strict=True)
        }
    )

    def jacobian(rows: np.ndarray) -> np.ndarray:
        outputs = np.asarray(network.predict(draws, rows).values).reshape(len(perturbed), -1)
        return ((outputs[: flat.size] - outputs[flat.size :]) / (2 * h)).T

    precision = np.eye(flat.size)
    for first in range(0, len(X), chunk):
        j = jacobian(X[first : first + chunk])
        precision += j.T @ j / float(point["sigma"]) ** 2
    j_test = jacobian(X_test)
    variance = np.einsum("ij,jk,ik->i", j_test, np.linalg.inv(precision), j_test)
    return float(np.median(np.sqrt(variance)))


def benchmark(s: Settings) -> Section:
    """Minibatch, subset and full-batch dynamics on the 200,000-row network."""
    X, Y, _ = robot_arm(NET_ROWS, NET_TRAIN_SEED)
    X_test, Y_test, Y_clean = robot_arm(NET_TEST_ROWS, NET_TEST_SEED)
    floor = test_error(Y_clean, Y_test)
    starts, start_seconds = subset_map_starts(X, Y, s.lin_chains, s.seed)
    subset_rows = np.random.default_rng(s.seed + 4).choice(NET_ROWS, NET_SUBSET, replace=False)
    networks = {
        "subset": robot_network(X[subset_rows], Y[subset_rows], "gaussian"),
        "minibatch": robot_network(X, Y, "gaussian", batch_size=NET_BATCH),
        "full": robot_network(X, Y, "gaussian"),
    }
    models = {name: model for name, (model, _) in networks.items()}
    # Every model has the same variables: any of their networks predicts from any run.
    network = networks["full"][1]
    reference_sd = float(
        np.mean([gauss_newton_predictive_sd(network, p, X, X_test) for p in starts])
    )
    for model in models.values():
        print(f"  warm-up compile: {warm_up(model):.1f} s (untimed)", flush=True)
    common = {"chains": s.lin_chains, "cores": s.cores, "starts": starts, "seed": s.seed}

    def dynamics(name: str, model, sd_settings: dict, correct: bool, tune: int, draws: int):
        return sample_run(
            name,
            model,
            sd_step(sd_settings, correct),
            grad_stat="n_grad_evals",
            tune=tune,
            draws=draws,
            **common,
        )

    cases = [
        (
            f"StochasticDynamics exact, full batch on {NET_SUBSET:,} rows",
            sd_label(FULL_SD),
            NET_SUBSET,
            dynamics("SD subset", models["subset"], FULL_SD, True, s.net_tune, s.net_draws),
        ),
        (
            f"StochasticDynamics uncorrected, minibatch {NET_BATCH:,} of {NET_ROWS:,} rows",
            sd_label(MINIBATCH_SD),
            NET_BATCH,
            dynamics(
                "SD minibatch", models["minibatch"], MINIBATCH_SD, False, s.net_tune, s.net_draws
            ),
        ),
        (
            f"StochasticDynamics exact, full batch on {NET_ROWS:,} rows",
            f"{sd_label(FULL_SD)}; tune={s.net_full_tune}, draws={s.net_full_draws}",
            NET_ROWS,
            dynamics("SD full", models["full"], FULL_SD, True, s.net_full_tune, s.net_full_draws),
        ),
    ]
    rows, summary = [], {}
    for name, settings, rows_per_grad, run in cases:
        outputs = chain_outputs(network, run.idata, X_test)
        per_chain = [test_error(o.mean(axis=0), Y_test) for o in outputs]
        error = test_error(outputs.mean(axis=(0, 1)), Y_test)
        spread = float(np.median(outputs.std(axis=1).mean(axis=0)))
        passes = run.grads * rows_per_grad / NET_ROWS
        summary[name] = {"error": error, "seconds": run.seconds, "spread": spread}
        rows.append(
            [
                name,
                settings,
                f"{error:.5f}",
                f"{min(per_chain):.5f}–{max(per_chain):.5f}",
                f"{error - floor:.2e}",
                f"{spread:.4f}",
                f"{draws_of(run.idata, 'sigma').mean():.4f}",
                f"{run.seconds:.0f}",
                f"{run.grads / 1e3:.1f}",
                f"{passes:.0f}",
                fmt_sig(median_step_size(run.idata)),
                noise_share(run.idata) if rows_per_grad == NET_BATCH else "–",
            ]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "test error",
            "per-chain test error",
            "excess over floor",
            "predictive sd within chains (median)",
            "posterior mean σ",
            "wall s",
            "grads (k)",
            "data passes",
            "step size",
            "noise share",
        ],
        rows,
    )
    body = "\n".join(
        [
            f"## 4. Minibatch where full gradients are expensive: a network on {NET_ROWS:,} rows",
            "",
            f"Robot-arm data as in section 2 but {NET_ROWS:,} training rows (seed "
            f"{NET_TRAIN_SEED}) and {NET_TEST_ROWS:,} test rows (seed {NET_TEST_SEED}); the "
            "2-16-2 tanh network with N(0, 1) weights (no group scales: this section is about "
            f"data size) and σ ~ HalfNormal({NOISE_PRIOR_SD:g}). One gradient of all rows costs "
            "about 200× one of a 1000-row batch here (≈ 60 ms against 0.3 ms, measured on "
            f"this machine). {s.lin_chains} chains, cores={s.cores}. Every run starts from the "
            f"MAP of the network on {NET_SUBSET:,} random rows (one subset per chain, from a "
            f"jittered point; {start_seconds:.0f} s in all, not included below) — the "
            "initialisation stochastic-gradient samplers need: from a jittered start the "
            "minibatch dynamics do not reach the posterior (section 3). Runs: exact dynamics on "
            f"a {NET_SUBSET:,}-row subset (what one would do without minibatches), uncorrected "
            f"dynamics on `pm.Minibatch` batches of {NET_BATCH:,} (tune={s.net_tune}, "
            f"draws={s.net_draws}), and exact dynamics on all rows with a budget of a few "
            "minutes. Test error: Neal's convention of section 2 on the test rows; floor "
            f"(noiseless function) **{floor:.5f}**; excess = test error − floor. Predictive "
            "sd within chains: the sd of the network's output over a chain's draws, averaged "
            "over the chains, median over the test outputs (the epistemic uncertainty the "
            "sampler reports; the full-batch run on all rows estimates it without minibatch "
            "noise, from few draws). Reference for it: "
            f"**{reference_sd:.5f}**, the same median under a Gauss–Newton (linearised Laplace) "
            "approximation with all rows at each chain's start, averaged over the chains. "
            "Data passes: gradient evaluations × rows per "
            "gradient / rows (tuning included).",
            "",
            table,
            "",
            "**Reading.** " + network_reading(summary, floor, reference_sd),
        ]
    )
    return Section("network", body)


def network_reading(summary: dict, floor: float, reference_sd: float) -> str:
    subset, minibatch, full = summary.values()
    names = list(summary)
    return (
        f"{names[1]}: excess test error {minibatch['error'] - floor:.2e} in "
        f"{minibatch['seconds']:.0f} s, against {subset['error'] - floor:.2e} from the "
        f"{NET_SUBSET:,}-row subset ({subset['seconds']:.0f} s) and "
        f"{full['error'] - floor:.2e} from exact dynamics on all rows "
        f"({full['seconds']:.0f} s, {full['seconds'] / minibatch['seconds']:.1f}× the "
        f"minibatch run's time). Predictive sd within chains against the linearised reference "
        f"{reference_sd:.5f}: minibatch {minibatch['spread'] / reference_sd:.2f}×, full batch "
        f"{full['spread'] / reference_sd:.2f}×, subset {subset['spread'] / reference_sd:.2f}× "
        "(the subset posterior is wider because it sees 1 % of the rows; a full-batch ratio "
        "well below 1 means its short run has not yet spread over the posterior)."
    )
