"""
TAP learning curve of the noisy perceptron
==========================================

Opper & Winther (1996) learn a perceptron from examples labelled by a *teacher* perceptron whose
outputs are flipped with probability ``1/(1 + e^β)`` (their Eq. 4). The TAP mean-field equations
give the Bayes posterior mean ``⟨w⟩`` — the Bayes prediction is ``sign(⟨w⟩·s)`` — and a
leave-one-out (LOO) error estimate for free, with no sampling. Their Fig. 1 shows, for ``N = 50``
weights and ``β = 0.5``, the prediction and training errors against ``α = m/N`` next to the
large-``N`` theory of Bayes-optimal learning.

This example redraws that figure with :func:`pymc_sfp.core.tap.tap_fit` (adaptive TAP) and the
replica-symmetric theory :func:`pymc_sfp.core.tap.bayes_optimal_learning_curve`, on a small
budget (a few runs per ``α``; the paper averages 200, the benchmark
``benchmarks/tap_benchmarks.py --only curve`` as many), then fits one training set through PyMC
with :func:`pymc_sfp.fit_tap` and the :class:`pymc_sfp.nn.NoisyPerceptron` likelihood.
"""

# %%
# The learning curve
# ------------------
# For each ``α`` and run: a fresh teacher and training set
# (:func:`pymc_sfp.datasets.synthetic.make_teacher_perceptron`), TAP with the matched prior
# ``w ~ N(0, I)`` and likelihood, and three errors. For Gaussian inputs the prediction error
# of ``sign(⟨w⟩·s)`` against the teacher's clean label is exactly ``arccos(R)/π`` (``R`` the
# cosine between ``⟨w⟩`` and the teacher); against the noisy labels it is
# ``ε_f + (1 − 2ε_f)·arccos(R)/π`` with the flip rate ``ε_f``. The LOO estimate measures the
# latter.

import matplotlib.pyplot as plt
import numpy as np

import pymc_sfp
from pymc_sfp.core.tap import bayes_optimal_learning_curve, tap_fit
from pymc_sfp.datasets.synthetic import make_teacher_perceptron

N, BETA, RUNS = 50, 0.5, 10
ALPHAS = np.arange(0.5, 6.01, 0.5)
FLIP = 1.0 / (1.0 + np.exp(BETA))

errors = {key: np.empty((len(ALPHAS), RUNS)) for key in ("prediction", "training", "loo")}
for i, alpha in enumerate(ALPHAS):
    for run in range(RUNS):
        S, sigma, teacher = make_teacher_perceptron(round(alpha * N), N, rng=run, beta=BETA)
        fit = tap_fit(S, sigma, "perceptron", beta=BETA)
        cosine = fit.mean @ teacher / (np.linalg.norm(fit.mean) * np.linalg.norm(teacher))
        errors["prediction"][i, run] = FLIP + (1 - 2 * FLIP) * np.arccos(cosine) / np.pi
        errors["training"][i, run] = np.mean(np.sign(S @ fit.mean) != sigma)
        errors["loo"][i, run] = fit.loo_error

# %%
# The figure: means over the runs with standard errors, and the ``N → ∞`` theory.

fine = np.linspace(0.0, ALPHAS[-1], 121)
theory = bayes_optimal_learning_curve(fine, BETA)
fig, ax = plt.subplots(figsize=(6, 4))
for key, label, style in [
    ("prediction", "prediction error", {"marker": "o"}),
    ("training", "training error", {"marker": "s"}),
    ("loo", "leave-one-out estimate", {"marker": "^", "ls": ":"}),
]:
    mean = errors[key].mean(axis=1)
    se = errors[key].std(axis=1, ddof=1) / np.sqrt(RUNS)
    ax.errorbar(ALPHAS, mean, yerr=se, capsize=2, ms=3, label=label, **style)
ax.plot(fine, theory.error_noisy, "k--", lw=1, label="N → ∞ theory (Bayes-optimal)")
ax.set(xlabel="α = m/N", ylabel="error (noisy labels)", ylim=(0.0, 0.55))
ax.set_title(f"Noisy perceptron, N = {N}, β = {BETA}, {RUNS} runs per α")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# The noise is heavy (``β = 0.5`` flips 38 % of the labels), so the error against noisy labels
# stays near 0.5; against the teacher's clean label the Bayes prediction improves from 0.46 to
# about 0.36 over the plotted range, as the theory says:

clean = bayes_optimal_learning_curve(ALPHAS[::3], BETA).error
print("α      theory (clean)")
for alpha, error in zip(ALPHAS[::3], clean, strict=True):
    print(f"{alpha:<6g} {error:.3f}")

# %%
# The same fit through PyMC
# -------------------------
# ``fit_tap`` takes the arrays and builds the PyMC model (``tap_model``): weights
# ``w ~ N(0, 1/N)`` and the field ``X @ w``, the paper's ``w·s/√N`` with a unit prior. The
# result is a PyMC approximation: draws with the model's names, predictions for new inputs and
# the leave-one-out estimate.

S, sigma, teacher = make_teacher_perceptron(4 * N, N, rng=0, beta=BETA)
approx = pymc_sfp.fit_tap(X=S, y=sigma, likelihood="perceptron", beta=BETA, prior_var=1.0 / N)
idata = approx.sample(500, random_seed=1)
print(idata.posterior["w"].dims, f"LOO error {approx.loo_error:.3f}")
print("P(+1 | s) for three new inputs:", approx.predict(np.eye(N)[:3]).prob.round(3))
