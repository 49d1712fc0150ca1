"""Benchmarks of ``pymc_sfp.MixtureADVI`` against PyMC's mean-field and full-rank ADVI (and NUTS).

Three benchmarks, run by ``mixture_benchmarks.py``:

1. ``vi-cost`` — seconds per optimisation step against the dimension ``d`` and the number of
   components ``Nc`` on ``separable_model(d)`` (each coordinate 0.5 N(-2, 1) + 0.5 N(2, 1)), one
   Monte Carlo draw per step (per component for the mixture), Adam updates, the loss computed: the
   compiled step function of each method (PyMC's ``ObjectiveFunction.step_function``) timed by
   ``_runs.time_call`` (median over repeated calls), compilation excluded. The target of issue 15
   is a cost at most ``Nc`` × ADVI's; the table gives the ratio to ADVI and that ratio over
   ``Nc``.
2. ``vi-targets`` — the SFP mixtures of ``_problems``: the 1-D 0.2 N(5, 2) + 0.2 N(20, 2) +
   0.6 N(40, 2) and the 2-D 0.5 N((6, -5), I) + 0.5 N((-2, 3), I). ADVI, FullRank ADVI, MixtureADVI
   with the true number of components (``init_scale`` wide enough to reach the modes from the
   start at 0) and MixtureADVI with growth from one component; last, the grown mixture's
   components with their weights made equal, fitted on through PyMC's plain ``pm.KLqp``, whose
   draws pick a component at random, so that its weights get no gradient in expectation (the
   reason for the stratified ELBO). Per method: the ELBO (PyMC's own
   estimate from 4000 draws for ADVI / FullRank / KLqp, ``MixtureADVI.elbo`` for the mixtures; the
   targets are normalised, so the ELBO is −KL(q‖p) and 0 is perfect), the largest error of the
   mode weights (each draw assigned to the nearest true mode), and the errors of the mean and
   standard deviation of the draws (4000) against the exact ones, per coordinate, the largest.
3. ``vi-network`` — Neal's robot arm (200 training, 200 test cases; ``_problems.robot_network`` with
   N(0, 1) weights and an unknown noise sd, 83 parameters): ADVI, MixtureADVI(2), MixtureADVI(4)
   and NUTS. Test error (Neal's: mean over cases of the squared error summed over both outputs,
   of the posterior-mean prediction), the noise floor, and predictive calibration: the share of
   test targets inside the central 50 % and 90 % intervals of the posterior predictive (network
   output plus N(0, σ²) noise, per draw). Seconds are wall time including compilation.

Nothing asserts on timings: wall-clock on a possibly shared machine.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pymc as pm
import pytensor
from _common import Section, fmt_number, md_table  # benchmarks/ on sys.path
from _problems import (
    MIX1_MEANS,
    MIX1_SD,
    MIX1_WEIGHTS,
    MIX2_MEANS,
    MIX2_WEIGHTS,
    ROBOT_N_TEST,
    ROBOT_N_TRAIN,
    ROBOT_TEST_SEED,
    ROBOT_TRAIN_SEED,
    chain_outputs,
    mixture_1d_model,
    mixture_2d_model,
    robot_arm,
    robot_network,
    separable_model,
    test_error,
)
from _runs import time_call

import pymc_sfp
from pymc_sfp import nn

# ---------------------------------------------------------------------------------------- cost


def _step_function(model: pm.Model, method: str, nc: int, seed: int):
    with model:
        if method == "ADVI":
            inference = pm.ADVI(random_seed=seed)
        elif method == "FullRank":
            inference = pm.FullRankADVI(random_seed=seed)
        else:
            inference = pymc_sfp.MixtureADVI(nc, random_seed=seed)
        return inference.objective.step_function(
            score=True, obj_optimizer=pm.adam(learning_rate=0.01)
        )


def bench_cost(settings: Any) -> Section:
    rows = []
    for d in settings.cost_dims:
        model = separable_model(d)
        advi = time_call(_step_function(model, "ADVI", 1, settings.seed), settings.time_budget)
        full = time_call(_step_function(model, "FullRank", 1, settings.seed), settings.time_budget)
        rows.append([d, "ADVI", "", f"{advi * 1e6:.0f}", "1", ""])
        rows.append([d, "FullRank ADVI", "", f"{full * 1e6:.0f}", f"{full / advi:.2f}", ""])
        for nc in settings.cost_components:
            mix = time_call(
                _step_function(model, "Mixture", nc, settings.seed), settings.time_budget
            )
            ratio = mix / advi
            rows.append(
                [d, "MixtureADVI", nc, f"{mix * 1e6:.0f}", f"{ratio:.2f}", f"{ratio / nc:.2f}"]
            )
    table = md_table(["d", "method", "Nc", "µs / step", "× ADVI", "× ADVI / Nc"], rows)
    note = (
        "One draw per step (per component for the mixture), Adam, loss computed; compilation "
        "excluded. Issue 15's target is × ADVI / Nc ≤ 1."
    )
    return Section("vi-cost", "\n\n".join(["## Cost per step against Nc and d", table, note]))


# ------------------------------------------------------------------------------------- targets


#: The grown mixture's components with equal weights, fitted on through PyMC's plain ``KLqp``.
KLQP = "the grown components, equal weights, `pm.KLqp`"


def _fit(
    model: pm.Model, method: str, settings: Any, n_modes: int, grown: Any = None
) -> tuple[Any, float, float]:
    """Fit one method; returns the approximation, its ELBO and the seconds. ``KLQP`` starts
    from the components of ``grown`` (a fitted mixture) with their weights made equal."""
    began = time.perf_counter()
    optimizer = pm.adam(learning_rate=settings.learning_rate)
    with model:
        if method in ("ADVI", "FullRank ADVI", KLQP):
            if method == KLQP:
                fitted = grown.group.user_params or grown.group.shared_params
                params = {
                    "a": pytensor.shared(np.zeros_like(fitted["a"].get_value())),
                    "mu": pytensor.shared(fitted["mu"].get_value()),
                    "zeta": pytensor.shared(fitted["zeta"].get_value()),
                }
                inference = pm.KLqp(
                    pymc_sfp.MixtureApproximation(
                        n_components=len(params["a"].get_value()),
                        params=params,
                        random_seed=settings.seed,
                    )
                )
            elif method == "ADVI":
                inference = pm.ADVI(random_seed=settings.seed)
            else:
                inference = pm.FullRankADVI(random_seed=settings.seed)
            approx = inference.fit(settings.steps, obj_optimizer=optimizer, progressbar=False)
            elbo = -float(inference.objective.score_function(sc_n_mc=4000)())
        else:
            if method == "MixtureADVI, grown":
                inference = pymc_sfp.MixtureADVI(
                    grow=True, random_seed=settings.seed, plateau_window=settings.window
                )
                budget = settings.grow_steps
            else:
                inference = pymc_sfp.MixtureADVI(
                    n_modes, random_seed=settings.seed, init_scale=settings.init_scale
                )
                budget = settings.steps
            approx = inference.fit(budget, obj_optimizer=optimizer, progressbar=False)
            elbo = inference.elbo(2000)[0]
    return approx, elbo, time.perf_counter() - began


def _target_rows(name, model, weights, means, sd, settings) -> list[list]:
    means = np.atleast_2d(np.asarray(means, dtype=float).T).T  # (modes, d)
    true_mean = weights @ means
    true_sd = np.sqrt(weights @ (means**2 + sd**2) - true_mean**2)
    rows = []
    grown = None
    for method in ("ADVI", "FullRank ADVI", "MixtureADVI", "MixtureADVI, grown", KLQP):
        approx, elbo, seconds = _fit(model, method, settings, len(weights), grown)
        if method == "MixtureADVI, grown":
            grown = approx
        draws = approx.sample(4000, random_seed=settings.seed).posterior["x"].values
        draws = draws.reshape(-1, means.shape[1])
        nearest = np.argmin(((draws[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
        share = np.bincount(nearest, minlength=len(weights)) / len(draws)
        nc = getattr(approx, "n_components", 1)
        rows.append(
            [
                name,
                method,
                nc,
                fmt_number(elbo),
                fmt_number(np.abs(share - weights).max()),
                fmt_number(np.abs(draws.mean(0) - true_mean).max()),
                fmt_number(np.abs(draws.std(0) - true_sd).max()),
                f"{seconds:.0f}",
            ]
        )
    return rows


def bench_targets(settings: Any) -> Section:
    rows = _target_rows(
        "1-D, 3 modes", mixture_1d_model(), MIX1_WEIGHTS, MIX1_MEANS, MIX1_SD, settings
    )
    rows += _target_rows(
        "2-D, 2 modes", mixture_2d_model(), MIX2_WEIGHTS, MIX2_MEANS, 1.0, settings
    )
    headers = [
        "target",
        "method",
        "Nc",
        "ELBO (0 is exact)",
        "max mode-weight error",
        "max mean error",
        "max sd error",
        "seconds",
    ]
    note = (
        f"{settings.steps} Adam steps (rate {settings.learning_rate}) per fixed fit; growth "
        f"within {settings.grow_steps} steps, plateau window {settings.window}. The fixed "
        f"mixture starts its components among draws from N(0, {settings.init_scale}²); growth "
        "starts from one component at 0. The last row takes the grown mixture's components, "
        f"makes their weights equal, and fits on for {settings.steps} steps through PyMC's plain "
        "`pm.KLqp` (a `MixtureApproximation`): its draws pick a component at random, a choice "
        "without a gradient, so the weights random-walk instead of returning to the exact ones "
        "that the stratified ELBO found."
    )
    return Section(
        "vi-targets",
        "\n\n".join(
            ["## Mixture targets: ELBO, mode weights, moments", md_table(headers, rows), note]
        ),
    )


# ------------------------------------------------------------------------------------- network


def _calibration(
    network: nn.Network, idata, X_test: np.ndarray, Y_test: np.ndarray, seed: int
) -> tuple[float, ...]:
    outputs = chain_outputs(network, idata, X_test)  # (chain, draw, case, output)
    outputs = outputs.reshape(-1, *outputs.shape[2:])
    sigma = np.asarray(idata["posterior"]["sigma"].values, dtype=float).reshape(-1)
    rng = np.random.default_rng(seed)
    predictive = outputs + sigma[:, None, None] * rng.standard_normal(outputs.shape)
    error = test_error(outputs.mean(0), Y_test)
    coverage = []
    for level in (0.5, 0.9):
        low, high = np.quantile(predictive, [(1 - level) / 2, (1 + level) / 2], axis=0)
        coverage.append(float(np.mean((low <= Y_test) & (Y_test <= high))))
    return error, *coverage


def bench_network(settings: Any) -> Section:
    X, Y, _ = robot_arm(ROBOT_N_TRAIN, ROBOT_TRAIN_SEED)
    X_test, Y_test, Y_clean = robot_arm(ROBOT_N_TEST, ROBOT_TEST_SEED)
    floor = test_error(Y_clean, Y_test)
    model, network = robot_network(X, Y, "gaussian")
    rows = []
    for label, nc in (("ADVI", 0), ("MixtureADVI(2)", 2), ("MixtureADVI(4)", 4), ("NUTS", -1)):
        began = time.perf_counter()
        with model:
            if nc < 0:
                idata = pm.sample(
                    tune=settings.nuts_tune,
                    draws=settings.nuts_draws,
                    chains=2,
                    cores=1,
                    random_seed=settings.seed,
                    progressbar=False,
                    compute_convergence_checks=False,
                )
            else:
                method = (
                    pm.ADVI(random_seed=settings.seed)
                    if nc == 0
                    else pymc_sfp.MixtureADVI(nc, random_seed=settings.seed)
                )
                approx = pm.fit(
                    settings.net_steps,
                    method=method,
                    obj_optimizer=pm.adam(learning_rate=0.01),
                    progressbar=False,
                )
                idata = approx.sample(1000, random_seed=settings.seed)
        seconds = time.perf_counter() - began
        error, c50, c90 = _calibration(network, idata, X_test, Y_test, settings.seed)
        rows.append([label, fmt_number(error), f"{c50:.2f}", f"{c90:.2f}", f"{seconds:.0f}"])
    headers = ["method", "test error", "50 % coverage", "90 % coverage", "seconds"]
    note = (
        f"Noise floor of this test set: {floor:.5f}. {settings.net_steps} Adam steps (rate 0.01) "
        f"per fit, 1000 draws; NUTS 2 chains × {settings.nuts_draws} draws after "
        f"{settings.nuts_tune} tuning steps."
    )
    return Section(
        "vi-network",
        "\n\n".join(
            [
                "## Robot arm (2-16-2, N(0, 1) weights): test error and calibration",
                md_table(headers, rows),
                note,
            ]
        ),
    )
