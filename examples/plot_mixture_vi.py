"""
Mixture variational inference where ADVI misses a mode
======================================================

A sign-ambiguous measurement: ten noisy readings of :math:`\\theta^2` (true
:math:`\\theta = 2`) with the prior :math:`\\theta \\sim N(0.5, 2^2)`. The posterior has two
modes, near :math:`+2` and :math:`-2`, with weights set by the prior (about 0.62 / 0.38).
Mean-field ADVI fits one Gaussian and so one mode; :class:`pymc_sfp.MixtureADVI` with two
components finds both, with their weights, and a higher ELBO. The exact posterior is computed on a
grid for comparison.

A second part fits a small Bayesian neural network (1-4-1 tanh, 20 points) with ADVI and a
three-component mixture and draws both predictive bands.

The budgets are small (a few thousand steps; with ``PYMC_SFP_DOCS_QUICK=1``, the documentation's
quick build, half as many).
"""

# %%
# The bimodal posterior
# ---------------------
import os

import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
from scipy import special, stats

import pymc_sfp
from pymc_sfp.nn import gaussian_likelihood, mlp

QUICK = os.environ.get("PYMC_SFP_DOCS_QUICK", "") not in ("", "0")
STEPS = 1500 if QUICK else 3000
rng = np.random.default_rng(1)
y = 2.0**2 + 0.5 * rng.normal(size=10)

with pm.Model() as model:
    theta = pm.Normal("theta", 0.5, 2.0)
    pm.Normal("y", theta**2, 0.5, observed=y)

with model:
    mixture = pymc_sfp.MixtureADVI(2, random_seed=1)
    approx = pm.fit(STEPS, method=mixture, obj_optimizer=pm.adam(learning_rate=0.05))
    advi = pm.ADVI(random_seed=1)
    approx_advi = pm.fit(STEPS, method=advi, obj_optimizer=pm.adam(learning_rate=0.05))

grid = np.linspace(-4, 4, 4001)
log_post = stats.norm.logpdf(grid, 0.5, 2.0) + stats.norm.logpdf(y[:, None], grid**2, 0.5).sum(
    axis=0
)
log_z = special.logsumexp(log_post) + np.log(grid[1] - grid[0])
exact = np.exp(log_post - log_z)
exact_weight = np.trapezoid(np.where(grid > 0, exact, 0.0), grid)

weights = approx.weights.eval()
means = approx.component_means.eval()[:, 0]
stds = approx.component_stds.eval()[:, 0]
elbo, elbo_se = mixture.elbo(2000)
advi_elbo = -float(advi.objective.score_function(sc_n_mc=4000)())
print(f"exact weight of the positive mode: {exact_weight:.3f}, log evidence {log_z:.3f}")
print(f"mixture: weights {np.round(weights, 3)}, means {np.round(means, 3)}")
print(f"ELBO: mixture {elbo:.3f} ± {elbo_se:.3f}, ADVI {advi_elbo:.3f}")

mixture_density = (weights[:, None] * stats.norm.pdf(grid, means[:, None], stds[:, None])).sum(0)
advi_density = stats.norm.pdf(grid, approx_advi.mean.eval()[0], approx_advi.std.eval()[0])

# %%
# A small Bayesian network
# ------------------------
# Twenty points of a sine with noise 0.1, a 1-4-1 tanh network with N(0, 1) weights. The
# posterior of a network has many modes (sign flips and permutations of the hidden units, and
# different fits); a mixture can hold several of them.
x_train = np.sort(rng.uniform(-3, 3, size=20))[:, None]
y_train = np.sin(x_train) + 0.1 * rng.normal(size=x_train.shape)
x_test = np.linspace(-4, 4, 200)[:, None]

with pm.Model() as net_model:
    network = mlp(x_train, (1, 4, 1), prior="gaussian", prior_scale=1.0)
    gaussian_likelihood(network, y_train, sigma=0.1)

bands = {}
with net_model:
    for label, method in (
        ("ADVI", pm.ADVI(random_seed=2)),
        ("mixture, 3 components", pymc_sfp.MixtureADVI(3, random_seed=2)),
    ):
        fitted = pm.fit(2 * STEPS, method=method, obj_optimizer=pm.adam(learning_rate=0.05))
        draws = network.predict(fitted.sample(500, random_seed=3), x_test)
        values = draws.values.reshape(-1, len(x_test))
        bands[label] = np.percentile(values, [5, 50, 95], axis=0)

# %%
# The figure
# ----------
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
left.plot(grid, exact, "k", lw=2, label="exact posterior")
left.plot(grid, mixture_density, "C0--", label=f"MixtureADVI(2), ELBO {elbo:.2f}")
left.plot(grid, advi_density, "C3:", label=f"ADVI, ELBO {advi_elbo:.2f}")
left.set(xlabel="θ", ylabel="density", title="Sign-ambiguous measurement")
left.legend(fontsize=8)
right.plot(x_train, y_train, "k.", label="data")
for colour, (label, (low, mid, high)) in zip(("C3", "C0"), bands.items(), strict=True):
    right.plot(x_test[:, 0], mid, color=colour, label=label)
    right.fill_between(x_test[:, 0], low, high, color=colour, alpha=0.2)
right.set(xlabel="x", ylabel="y", title="1-4-1 network: 90 % predictive bands of F(x)")
right.legend(fontsize=8)
fig.tight_layout()
plt.show()
