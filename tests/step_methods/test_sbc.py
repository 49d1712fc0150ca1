"""Simulation-based calibration (Talts et al. 2018) of the exact samplers on the non-centred
hierarchical normal model, J = 4: mu ~ N(0, 1), tau ~ HalfNormal(1), z_j ~ N(0, 1),
theta = mu + tau z, y_j ~ N(theta_j, 1).

The calibration reuses one step (compiled once) for every simulation, so it is first checked
that a reused step samples exactly as a fresh one: ``pm.sample`` restarts its tuning and reseeds
it, and nothing of the previous run (adapted step size, mass matrix, ladder, boxes) leaks.

Each sampler's ranks of mu and tau (tau's ranks are log tau's) among posterior draws thinned to
about one per autocorrelation time (effective sample sizes measured on this model are 0.14–0.8
per draw, so every 10th–11th draw is kept) must pass a chi-square test of uniformity with
p > 0.001. The threshold: for exact samplers the p-values are uniform, so with 3 samplers × 2
quantities the chance that any of these tests fails is 1 − 0.999⁶ ≈ 0.6 %, while a sampler that
is wrong in the ways the check can see (too narrow, too wide, biased, stuck: see
``tests/test_sbc.py``) gives p far below it. Bins are chosen so that each expects at least 10
ranks.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_sfp
from pymc_sfp.sbc import hierarchical_normal_model, simulation_based_calibration, step_sampler

SETTINGS = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)

# SFPStep records its conditionals for sfp_marginals by default; the calibration does not read
# them, and recording them is a sizeable share of a sweep on this small model.
STEPS = {
    "sfp": lambda: pymc_sfp.SFPStep(marginal_points=0),
    "ghmc": pymc_sfp.StochasticDynamics,
    # ReplicaExchangeDynamics is this step with a dynamics explorer and a hottest β above 0.
    "tempering": pymc_sfp.ParallelTempering,
}


@pytest.mark.parametrize("name", STEPS)
@pytest.mark.filterwarnings("ignore::pymc_sfp.RoundTripWarning")  # 20 draws are too few
def test_reused_step_samples_as_a_fresh_one(name):
    """A step that has tuned and sampled on one data set, then gets another data set through
    ``pm.set_data``, gives draw for draw what a step built on the second data set gives."""
    model = hierarchical_normal_model(4, y=[3.0, -2.0, 4.0, 0.5])
    with model:
        reused = STEPS[name]()
        pm.sample(step=reused, tune=60, draws=20, random_seed=1, **SETTINGS)
        pm.set_data({"y": np.array([0.5, 0.1, -0.5, 0.1])})
        again = pm.sample(step=reused, tune=30, draws=20, random_seed=2, **SETTINGS)
        fresh = pm.sample(step=STEPS[name](), tune=30, draws=20, random_seed=2, **SETTINGS)
    for var in ("mu", "tau", "z"):
        np.testing.assert_array_equal(again.posterior[var].values, fresh.posterior[var].values)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "n_simulations", "tune", "draws", "n_posterior_draws", "n_bins"),
    [
        # 20–45 s each on two shared cores: the budgets are what fits.
        ("sfp", 50, 50, 100, 9, 5),
        ("ghmc", 100, 100, 200, 19, 10),
        ("tempering", 60, 100, 200, 19, 5),
    ],
)
def test_exact_samplers_are_calibrated(name, n_simulations, tune, draws, n_posterior_draws, n_bins):
    if name == "sfp":  # what is calibrated is the compiled sweep, SFPStep's default
        with hierarchical_normal_model(4):
            assert STEPS[name]().kernel == "numba"
    result = simulation_based_calibration(
        hierarchical_normal_model(4),
        step_sampler(STEPS[name], tune=tune, draws=draws),
        ["mu", "tau"],
        n_simulations=n_simulations,
        n_posterior_draws=n_posterior_draws,
        n_bins=n_bins,
        random_seed=2018,
    )
    assert n_simulations / n_bins >= 10
    for quantity, p in result.p_values.items():
        assert p > 1e-3, (name, quantity, p, result.counts.T)
