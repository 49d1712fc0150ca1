"""
Tracking drifting network weights with sequential Monte Carlo
=============================================================

The non-stationary experiment of de Freitas et al. (1998, experiment 2, their Figure 6): data
come from a *teacher* network with two inputs, one tanh hidden unit and a linear output,

.. math:: y_k = c + v \\tanh(w_1 x_{k1} + w_2 x_{k2} + b) + \\epsilon_k,
   \\qquad \\epsilon_k \\sim N(0, 0.1^2),

and one of its weights, :math:`w_1`, drifts from 1 to -1 during the stream. A *student* network
of the same shape learns from one observation at a time with :func:`pymc_sfp.sample_sequential`:
its weights follow a random walk (Eq. 1 of the paper) whose step sd ``process_sd`` says how fast
they may change, and each observation reweights (SIR, SIPR) or updates (EKF) the weights'
filtering density. The figure shows the filtered mean and a one-sd band of each input weight
against the teacher's, and the one-step-ahead predictions made before each target was seen.

The student is written by hand, with its inputs and targets as ``pm.Data`` containers, so that
its output weight ``v`` can have a half-normal prior: with a symmetric prior the posterior would
have two mirror modes, ``(w, b, v)`` and ``(-w, -b, -v)``, and the filtered means would average
them. The budget is small (200 steps, 500 particles; a few seconds after compilation).
"""

import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_sfp

STEPS, PARTICLES, SEED = 200, 500, 1998

# %%
# The teacher and its stream
# --------------------------
# :math:`w_1` moves linearly from 1 to -1 between steps 60 and 140; the other weights stay.
rng = np.random.default_rng(SEED)
X = rng.normal(size=(STEPS, 2))
w_true = np.tile([1.0, -0.5], (STEPS, 1))
w_true[:, 0] = np.interp(np.arange(STEPS), [60, 140], [1.0, -1.0])
y = -0.5 + 2.0 * np.tanh(np.sum(X * w_true, axis=1) + 0.3) + 0.1 * rng.normal(size=STEPS)

# %%
# The student
# -----------
# The data containers start with one row; :func:`~pymc_sfp.sample_sequential` feeds the stream
# one row at a time without touching them.
with pm.Model() as student:
    X_data = pm.Data("X", X[:1])
    y_data = pm.Data("y", y[:1])
    w = pm.Normal("w", 0.0, 1.0, shape=2)
    b = pm.Normal("b", 0.0, 1.0)
    v = pm.HalfNormal("v", 2.0)
    c = pm.Normal("c", 0.0, 1.0)
    pm.Normal("obs", c + v * pm.math.tanh(X_data @ w + b), 0.1, observed=y_data)

# %%
# Filtering
# ---------
# The input weights may drift (``process_sd`` 0.05 per step), the others only slowly.
process_sd = {"w": 0.05, "b": 0.01, "v": 0.01, "c": 0.01}
results = {
    method: pymc_sfp.sample_sequential(
        student,
        {"X": X, "y": y},
        method=method,
        particles=PARTICLES,
        process_sd=process_sd,
        random_seed=SEED,
        progressbar=False,
    )
    for method in ("sir", "sipr", "ekf")
}
for method, idata in results.items():
    predictive = idata["predictive"]
    error = np.sqrt(np.mean((predictive["mean"] - predictive["observed"]).values[20:] ** 2))
    resampled = int(idata["filter_stats"]["resampled"].sum())
    print(
        f"{method:>4}: one-step-ahead RMS error {error:.3f}, log evidence "
        f"{idata.attrs['log_evidence']:.1f}, resampled at {resampled} of {STEPS} steps"
    )

# %%
# Weights and predictions
# -----------------------
steps = np.arange(STEPS)
fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
colours = {"sir": "C0", "sipr": "C2", "ekf": "C1"}
for i, ax in enumerate(axes[:2]):
    for method in ("sir", "ekf"):
        mean = results[method]["filtered_mean"]["w"].values[:, i]
        sd = results[method]["filtered_sd"]["w"].values[:, i]
        ax.plot(steps, mean, color=colours[method], label=method.upper())
        ax.fill_between(steps, mean - sd, mean + sd, color=colours[method], alpha=0.25)
    ax.plot(steps, w_true[:, i], "k--", label="teacher")
    ax.set_ylabel(f"$w_{i + 1}$")
    ax.set_ylim(-2.5, 2.5)
axes[0].legend(loc="upper right")
predictive = results["sir"]["predictive"]
axes[2].fill_between(
    steps, predictive["lower"], predictive["upper"], color="C0", alpha=0.25, label="SIR 95%"
)
axes[2].plot(steps, predictive["mean"], color="C0", label="SIR one-step-ahead mean")
axes[2].plot(steps, y, "k.", markersize=3, label="observed")
axes[2].set_ylabel("$y_k$")
axes[2].set_xlabel("step $k$")
axes[2].set_ylim(-4, 3)
axes[2].legend(loc="lower left", fontsize="small")
fig.suptitle("Sequential training of a drifting one-hidden-unit network")
fig.tight_layout()
plt.show()
