"""Time for TAP and for MCMC to reach the same test error.

Problems (one per ``N`` and likelihood, seed fixed): a teacher ``w* ~ N(0, I_N)``, ``m = α N``
Gaussian training inputs and a test set of Gaussian inputs; labels from the noisy teacher
perceptron (Eq. 4, ``β``; ``pymc_sfp.datasets.make_teacher_perceptron``) or from a probit
teacher (``P(+1) = Φ(w*·s/√N)``). The model is
``pymc_sfp.tap_model(X, y, likelihood, prior_var=1/N)`` (the paper's prior and fields), so TAP
and MCMC see the same posterior.

* TAP: ``pymc_sfp.fit_tap(model)`` (adaptive), wall time including reading the model; the
  core's ``tap_fit`` on the arrays is timed too. Its test error is that of ``sign(⟨w⟩·s)``.
* MCMC: ``pm.Slice`` for the step likelihood (no gradient; the package's ``SFPStep`` costs
  about 10× ``Slice`` per draw, see PYMC_NOTES), NUTS for probit; one chain with
  ``tune = draws``, draws doubling from 25. The Bayes prediction averages the likelihood's
  ``P(+1 | s, w)`` over the draws. The run "reaches TAP's error" when its test error is at most
  TAP's plus a slack; its time is that run's ``pm.sample`` wall time, compilation included
  (the shorter runs before it are not added, which favours MCMC); the sampling time alone
  (PyMC's ``sampling_time``, tuning included) is shown beside it.

Errors are against the teacher's noise-free label ``sign(w*·s)``, which both Bayes predictions
estimate.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
from _common import Section, fmt_time, md_table
from scipy import special

import pymc_sfp
from pymc_sfp.core.tap import tap_fit
from pymc_sfp.datasets import make_teacher_perceptron

if TYPE_CHECKING:
    from tap_benchmarks import Settings

SAMPLERS = {"perceptron": "Slice", "probit": "NUTS"}


def problem(likelihood: str, n: int, settings: Settings, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    m = round(settings.mcmc_alpha * n)
    rows = m + settings.mcmc_test
    if likelihood == "perceptron":
        S, y, teacher = make_teacher_perceptron(rows, n, rng=rng, beta=settings.mcmc_beta)
    else:
        # The probit teacher draws in the same order: weights, inputs, then the labels' noise.
        teacher = rng.standard_normal(n)
        S = rng.standard_normal((rows, n))
        y = np.where(rng.random(rows) < special.ndtr(S @ teacher / np.sqrt(n)), 1.0, -1.0)
    field = S @ teacher
    return {
        "X": S[:m],
        "y": y[:m],
        "X_test": S[m:],
        "clean_test": np.where(field[m:] >= 0, 1.0, -1.0),
    }


def mcmc_error(likelihood: str, draws: np.ndarray, data: dict, beta: float) -> float:
    fields = draws @ data["X_test"].T
    if likelihood == "perceptron":
        flip = 1.0 / (1.0 + np.exp(beta))
        p_plus = np.where(fields >= 0, 1.0 - flip, flip).mean(axis=0)
    else:
        p_plus = special.ndtr(fields).mean(axis=0)
    return float(np.mean(np.where(p_plus >= 0.5, 1.0, -1.0) != data["clean_test"]))


def compare(likelihood: str, n: int, settings: Settings) -> list:
    data = problem(likelihood, n, settings, settings.seed + n)
    extra = {"beta": settings.mcmc_beta} if likelihood == "perceptron" else {}
    model = pymc_sfp.tap_model(data["X"], data["y"], likelihood, prior_var=1.0 / n, **extra)
    began = time.perf_counter()
    approx = pymc_sfp.fit_tap(model)
    tap_seconds = time.perf_counter() - began
    began = time.perf_counter()
    tap_fit(data["X"], data["y"], likelihood, prior_var=1.0 / n, field_scale=1.0, **extra)
    core_seconds = time.perf_counter() - began
    tap_error = float(np.mean(np.sign(data["X_test"] @ approx.tap.mean) != data["clean_test"]))
    target = tap_error + settings.mcmc_error_slack
    draws, reached, seconds, sampling, error = 25, False, np.nan, np.nan, np.nan
    while draws <= settings.mcmc_max_draws:
        began = time.perf_counter()
        with model:
            step = pm.Slice() if likelihood == "perceptron" else pm.NUTS()
            idata = pm.sample(
                draws,
                tune=draws,
                chains=1,
                cores=1,
                step=step,
                random_seed=settings.seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
        seconds = time.perf_counter() - began
        sampling = float(idata["sample_stats"].attrs.get("sampling_time", np.nan))
        w = idata.posterior["w"].values.reshape(-1, n)
        error = mcmc_error(likelihood, w, data, settings.mcmc_beta)
        print(f"    {likelihood} N={n}: {draws} draws, error {error:.4f} in {seconds:.1f} s")
        if error <= target:
            reached = True
            break
        draws *= 2
    ratio = seconds / tap_seconds
    return [
        likelihood if likelihood == "probit" else f"perceptron, β = {settings.mcmc_beta:g}",
        n,
        len(data["y"]),
        f"{tap_error:.4f}",
        fmt_time(tap_seconds),
        fmt_time(core_seconds),
        SAMPLERS[likelihood],
        f"{error:.4f}",
        f"{min(draws, settings.mcmc_max_draws)}" + ("" if reached else " (not reached)"),
        fmt_time(seconds),
        fmt_time(sampling),
        f"{ratio:.0f}×" if reached else f"> {ratio:.0f}×",
    ]


def benchmark(settings: Settings) -> Section:
    rows = [
        compare(likelihood, n, settings)
        for n in settings.mcmc_sizes
        for likelihood in ("perceptron", "probit")
    ]
    headers = [
        "likelihood",
        "N",
        "m",
        "TAP test error",
        "TAP (fit_tap on the model)",
        "TAP core (arrays)",
        "MCMC",
        "MCMC test error",
        "draws (tune = draws)",
        "MCMC wall",
        "of which sampling",
        "MCMC wall / TAP",
    ]
    note = (
        f"Test errors on {settings.mcmc_test} Gaussian inputs against the teacher's clean label; "
        f"MCMC reaches TAP's error when it is at most TAP's + {settings.mcmc_error_slack}. The "
        "MCMC time is that one run's `pm.sample` wall time with its compilation (earlier, "
        f"shorter runs not added); draws double from 25 up to {settings.mcmc_max_draws}; "
        "'not reached' gives the longest run and a lower bound of the ratio. TAP: adaptive, "
        "`fit_tap(model)` wall time, model reading included."
    )
    return Section(
        "mcmc",
        "\n\n".join(["## Time to the same test error: TAP vs MCMC", md_table(headers, rows), note]),
    )
