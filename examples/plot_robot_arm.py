"""
Robot arm: predictive uncertainty with the integrated output layer
==================================================================

Neal's (1993, §3) robot arm: two joint angles ``(x1, x2)`` map to the arm's end point
``y = (2 cos x1 + 1.3 cos(x1 + x2), 2 sin x1 + 1.3 sin(x1 + x2))``, observed with noise of sd
0.05 at 200 training inputs with ``|x1|`` in ``[0.453, 1.932]`` and ``x2`` in ``[0.534, 3.142]``.
A 2-16-2 tanh network with one scale per weight group (``prior="group"``) learns it.

For Gaussian noise the linear output layer is conjugate, so ``nn.mlp(...,
output_layer="integrated")`` integrates it out analytically: the sampler moves only the
input-side weights, the three group scales and the noise sd, and the output layer comes back as
exact draws from its Gaussian conditional. It is the same posterior, but it is what makes the
group scales converge: in ``benchmarks/RESULTS.md`` (stochastic dynamics, section 2) every
sampler of the full posterior, NUTS included, ends with scale R-hat between 1.22 and 3.50, while
:class:`pymc_sfp.StochasticDynamics` on the integrated model reaches R-hat 1.001–1.004, with the
smallest scale ESS between 1001 and 1641 over three seeds, in 48–56 s, against 125 s for NUTS
on the same model (see :doc:`/dynamics`).

The figure shows what a Bayesian network adds to a fit: along a line of inputs that leaves the
training region, the posterior's spread of functions widens where there are no data.
"""

# %%
# Data and model
# --------------
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_sfp

QUICK = os.environ.get("PYMC_SFP_DOCS_QUICK", "") not in ("", "0")
DRAWS, TUNE, CHAINS, THIN = (100, 200, 2, 5) if QUICK else (1000, 1000, 4, 10)

X, Y = pymc_sfp.datasets.make_robot_arm(200, rng=1993)
X_test, Y_test = pymc_sfp.datasets.make_robot_arm(200, rng=1994)

with pm.Model() as model:
    net = pymc_sfp.nn.mlp(X, (2, 16, 2), prior="group", prior_scale=5.0, output_layer="integrated")
    sigma = pm.HalfNormal("sigma", 1.0)
    pymc_sfp.nn.gaussian_likelihood(net, Y, sigma=sigma)

# %%
# Sampling with stochastic dynamics
# ---------------------------------
# Persistent momentum (``alpha`` close to 1) and ``thin`` transitions of ``n_leapfrog`` steps
# per draw; the settings of the benchmark (``thin=10``; 5 in the quick build). The step size
# and a diagonal mass matrix are tuned.
with model:
    idata = pm.sample(
        draws=DRAWS,
        tune=TUNE,
        chains=CHAINS,
        cores=1,
        step=pymc_sfp.StochasticDynamics(alpha=0.98, thin=THIN, target_accept=0.95),
        random_seed=1993,
        progressbar=False,
        compute_convergence_checks=False,
    )

scales = [*net.scales.values(), sigma]
summary = az.summary(idata, var_names=[v.name for v in scales], kind="diagnostics")
print(summary)
print(f"divergent draws: {int(idata['sample_stats']['diverging'].sum())}")

# %%
# Test error
# ----------
# :meth:`~pymc_sfp.nn.Network.predict_mean` averages each draw's network, with the output layer
# at its conditional mean (a Rao–Blackwellised prediction). Neal's test error sums the squared
# error over both outputs; the noise alone contributes 2 · 0.05² = 0.005.
mean_prediction = net.predict_mean(idata, X_test).values
test_error = np.mean(np.sum((mean_prediction - Y_test) ** 2, axis=1))
print(f"test error {test_error:.5f} (Neal 1993: 0.00559; noise floor ≈ 0.005)")

# %%
# Predictive uncertainty along a line of inputs
# ---------------------------------------------
# ``x2`` fixed at 1.8, ``x1`` from −3 to 3: the training inputs cover ``0.453 ≤ |x1| ≤ 1.932``
# only. One draw of the output layer per posterior draw (``sample_output_layer``) makes each
# draw a complete network; the band is the central 90 % of the networks' outputs (the
# uncertainty about the function), widened by the noise for the predictive interval.
x1 = np.linspace(-3.0, 3.0, 241)
line = np.column_stack([x1, np.full_like(x1, 1.8)])
layer = net.sample_output_layer(idata, random_seed=1)
posterior = idata["posterior"].to_dataset().merge(layer)
functions = net.predict(posterior, line).values.reshape(-1, len(x1), 2)
rng = np.random.default_rng(2)
noise_sd = posterior["sigma"].values.reshape(-1, 1, 1)
predictive = functions + noise_sd * rng.standard_normal(functions.shape)
true_y = np.column_stack(
    [2.0 * np.cos(x1) + 1.3 * np.cos(x1 + 1.8), 2.0 * np.sin(x1) + 1.3 * np.sin(x1 + 1.8)]
)

fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True, layout="constrained")
for k, ax in enumerate(axes):
    for gap in ((-3.0, -1.932), (-0.453, 0.453), (1.932, 3.0)):
        ax.axvspan(*gap, color="0.92", lw=0)
    ax.fill_between(
        x1,
        *np.quantile(predictive[..., k], [0.05, 0.95], axis=0),
        alpha=0.25,
        color="tab:blue",
        label="90 % predictive interval",
    )
    ax.fill_between(
        x1,
        *np.quantile(functions[..., k], [0.05, 0.95], axis=0),
        alpha=0.5,
        color="tab:blue",
        label="90 % interval of the function",
    )
    ax.plot(x1, functions[..., k].mean(axis=0), color="tab:blue", label="posterior mean")
    ax.plot(x1, true_y[:, k], color="black", ls="--", label="true function")
    near = np.abs(X[:, 1] - 1.8) < 0.15
    ax.plot(X[near, 0], Y[near, k], "k.", ms=4, label="training data with |x2 − 1.8| < 0.15")
    ax.set(xlabel="x1 (x2 = 1.8; grey: no training inputs)", ylabel=f"y{k + 1}")
    ax.set_ylim(-5, 5)
axes[0].legend(fontsize=8, loc="lower left")
plt.show()

# %%
# Inside the training region the band is a few hundredths wide; in the grey gaps it widens,
# since the data no longer pin the networks down. The width of the band there depends on the
# prior (here ``HalfNormal(5)`` scales): read it as "the data say nothing here", not as a
# calibrated extrapolation.
