"""The paper's Fig. 1 (Opper & Winther 1996): learning curve of TAP Bayes learning.

A teacher perceptron with ``N = 50`` weights ``w* ~ N(0, I)`` labels Gaussian inputs; each label
is flipped with probability ``1/(1 + e^β)``, ``β = 0.5``
(``pymc_sfp.datasets.synthetic.make_teacher_perceptron``). For each ``α = m/N`` on the grid and
each run (a fresh teacher and training set, seed = run index), TAP is solved with the matched
prior and likelihood (``pymc_sfp.core.tap.tap_fit(..., "perceptron", beta=β)``, fields
``w·s/√N``), adaptive and naive (the paper's ``Λ = 1 − q``, data added 5 at a time).

Measured per fit:

* prediction error of the Bayes label ``sign(⟨w⟩·s)``: for Gaussian inputs it is exactly
  ``ε = arccos(R)/π`` against the teacher's clean label (``R`` the cosine between ``⟨w⟩`` and
  ``w*``), and ``ε_f + (1 − 2ε_f) ε`` against the noisy labels — no test set needed;
* training error: the share of training labels that ``sign(⟨w⟩·s_μ)`` gets wrong;
* the leave-one-out estimate ``(1/m) Σ Θ(−σ_μ M_μ)`` (paper §6), which estimates the error
  against noisy labels.

Means over runs with standard errors; the large-``N`` replica-symmetric curve is
``pymc_sfp.core.tap.bayes_optimal_learning_curve``. The figure is
``figures/tap_learning_curve.png``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
from _common import Section, md_table

from pymc_sfp.core.tap import bayes_optimal_learning_curve, tap_fit
from pymc_sfp.datasets.synthetic import make_teacher_perceptron

matplotlib.use("Agg")
import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from tap_benchmarks import Settings

VARIANTS = ("adaptive", "naive")
METRICS = ("prediction", "prediction_clean", "training", "loo")


def one_fit(alpha: float, run: int, variant: str, n: int, beta: float) -> dict[str, float]:
    """The four errors of one fit, its seconds and whether it converged."""
    S, sigma, teacher = make_teacher_perceptron(round(alpha * n), n, rng=run, beta=beta)
    began = time.perf_counter()
    fit = tap_fit(S, sigma, "perceptron", variant=variant, beta=beta, max_iter=2000)
    seconds = time.perf_counter() - began
    cosine = fit.mean @ teacher / (np.linalg.norm(fit.mean) * np.linalg.norm(teacher))
    clean = float(np.arccos(np.clip(cosine, -1.0, 1.0)) / np.pi)
    flip = 1.0 / (1.0 + np.exp(beta))
    return {
        "prediction": flip + (1.0 - 2.0 * flip) * clean,
        "prediction_clean": clean,
        "training": float(np.mean(np.sign(S @ fit.mean) != sigma)),
        "loo": fit.loo_error,
        "seconds": seconds,
        "converged": float(fit.converged),
    }


def curves(settings: Settings) -> dict[str, dict[str, np.ndarray]]:
    """``{variant: {metric: array (len(alphas), runs)}}``."""
    out = {}
    for variant in VARIANTS:
        table = {
            k: np.empty((len(settings.alphas), settings.curve_runs))
            for k in (*METRICS, "seconds", "converged")
        }
        for i, alpha in enumerate(settings.alphas):
            for run in range(settings.curve_runs):
                for key, value in one_fit(
                    alpha, run, variant, settings.curve_n, settings.curve_beta
                ).items():
                    table[key][i, run] = value
        out[variant] = table
    return out


def figure(settings: Settings, data: dict, path) -> None:
    alphas = np.asarray(settings.alphas)
    fine = np.linspace(0.0, max(alphas), 121)
    theory = bayes_optimal_learning_curve(fine, settings.curve_beta)
    runs = settings.curve_runs
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))

    def band(ax, values, label, **style):
        mean, se = values.mean(axis=1), values.std(axis=1, ddof=1) / np.sqrt(runs)
        ax.errorbar(alphas, mean, yerr=se, capsize=2, label=label, **style)

    adaptive, naive = data["adaptive"], data["naive"]
    band(left, adaptive["prediction"], "prediction (adaptive TAP)", color="C0", marker="o", ms=3)
    band(left, naive["prediction"], "prediction (naive TAP)", color="C2", marker="s", ms=3, ls="--")
    band(left, adaptive["training"], "training", color="C1", marker="o", ms=3)
    band(left, adaptive["loo"], "leave-one-out estimate", color="C3", marker="^", ms=3, ls=":")
    left.plot(fine, theory.error_noisy, "k--", lw=1, label="N → ∞ theory (Bayes-optimal)")
    left.set(xlabel="α = m/N", ylabel="error (noisy labels)", ylim=(0.0, 0.55))
    left.set_title(f"N = {settings.curve_n}, β = {settings.curve_beta}, {runs} runs", fontsize=9)
    band(right, adaptive["prediction_clean"], "adaptive TAP", color="C0", marker="o", ms=3)
    band(right, naive["prediction_clean"], "naive TAP", color="C2", marker="s", ms=3, ls="--")
    right.plot(fine, theory.error, "k--", lw=1, label="N → ∞ theory")
    right.set(xlabel="α = m/N", ylabel="error against the teacher's clean label", ylim=(0.0, 0.55))
    right.set_title("Bayes prediction sign(⟨w⟩·s) vs the noise-free teacher", fontsize=9)
    for ax in (left, right):
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def benchmark(settings: Settings) -> Section:
    data = curves(settings)
    path = settings.figures / "tap_learning_curve.png"
    figure(settings, data, path)
    theory = bayes_optimal_learning_curve(settings.alphas, settings.curve_beta)
    runs = settings.curve_runs

    def cell(values: np.ndarray) -> str:
        return f"{values.mean():.3f} ± {values.std(ddof=1) / np.sqrt(runs):.3f}"

    rows = []
    for i, alpha in enumerate(settings.alphas):
        a, nv = data["adaptive"], data["naive"]
        rows.append(
            [
                f"{alpha:g}",
                f"{theory.error_noisy[i]:.3f}",
                cell(a["prediction"][i]),
                cell(nv["prediction"][i]),
                cell(a["training"][i]),
                cell(a["loo"][i]),
                cell(nv["loo"][i]),
                f"{theory.error[i]:.3f}",
                cell(a["prediction_clean"][i]),
                f"{1e3 * a['seconds'][i].mean():.1f} / {1e3 * nv['seconds'][i].mean():.1f}",
            ]
        )
    headers = [
        "α",
        "theory (noisy)",
        "prediction, adaptive",
        "prediction, naive",
        "training, adaptive",
        "LOO, adaptive",
        "LOO, naive",
        "theory (clean)",
        "prediction vs clean, adaptive",
        "ms per fit (adaptive / naive)",
    ]
    unconverged = {
        v: int(runs * len(settings.alphas) - data[v]["converged"].sum()) for v in VARIANTS
    }
    note = (
        f"Errors are means ± standard errors over {runs} runs (a fresh teacher and training set "
        f"per run), N = {settings.curve_n}, β = {settings.curve_beta} (flip rate "
        f"{1 / (1 + np.exp(settings.curve_beta)):.3f}): against the noisy labels (what the "
        "leave-one-out estimate measures, the paper's Fig. 1) and against the teacher's clean "
        "label. Theory: the large-N replica-symmetric Bayes-optimal curve "
        "(`pymc_sfp.core.tap.bayes_optimal_learning_curve`). Fits that did not reach the "
        f"tolerance (2000 iterations per stage): adaptive {unconverged['adaptive']}, naive "
        f"{unconverged['naive']} of {runs * len(settings.alphas)}; they are kept in the means."
    )
    body = "\n\n".join(
        [
            "## Learning curve of the noisy perceptron (paper Fig. 1)",
            md_table(headers, rows),
            note,
            f"![learning curve]({path.parent.name}/{path.name})",
        ]
    )
    return Section("curve", body)
