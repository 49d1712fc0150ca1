"""``StochasticDynamics`` inside PyMC: exactness against known answers, the uncorrected method's
bias, divergences, minibatches, reproducibility and bad input.

Tolerances come from the Monte Carlo error (ArviZ's MCSE, which accounts for autocorrelation).
"""

import arviz as az
import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection
from pymc.exceptions import SamplingError

from pymc_sfp import StochasticDynamics
from tests.helpers import assert_moments, sample


@pytest.fixture(scope="module")
def correlated_gaussian():
    cov = np.array([[1.0, 1.8], [1.8, 4.0]])  # correlation 0.9
    with pm.Model() as model:
        pm.MvNormal("v", mu=np.array([1.0, -2.0]), cov=cov)
    return model, np.array([1.0, -2.0]), cov


@pytest.mark.parametrize("alpha", [0.0, 0.95])
def test_exact_on_correlated_gaussian(correlated_gaussian, alpha):
    model, mean, cov = correlated_gaussian
    idata = sample(model, lambda: StochasticDynamics(alpha=alpha, n_leapfrog=5))
    assert_moments(idata, "v", mean, cov + np.outer(mean, mean))
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert 0.8 < float(idata.sample_stats["accept"].mean()) <= 1.0


def test_momentum_follows_the_adapted_mass_matrix_while_tuning():
    # Scales 1, 1e-3 and 1e3 with the default adapted diagonal mass matrix: the persistent
    # momentum must be carried to each new matrix. Kept as drawn under the old one, it made
    # absurd jumps at small energy errors, dual averaging shrank the step size, and chains froze
    # (seed 1: one chain's sd of x[2] was 0, R-hat 1.6). Every chain's second moment of every
    # coordinate within 4 of its MCSE, the exact sd of a squared standard normal (√2) over the
    # root of the chain's ESS: with the chain's own sd instead, low exactly when the chain has
    # under-covered the tails, the deviations were skewed (-4.1 at this seed on one CPU, -3.3
    # so; over seeds 2-10 at most 3.5 against 2.8).
    scales = np.array([1.0, 1e-3, 1e3])
    with pm.Model() as model:
        pm.Normal("x", 0.0, scales)
    idata = sample(model, StochasticDynamics, draws=1000, chains=4, random_seed=1)
    x = idata.posterior["x"]
    for chain in range(4):
        for j, scale in enumerate(scales):
            square = (x.isel(chain=[chain], x_dim_0=j) / scale) ** 2
            mcse = np.sqrt(2.0 / float(az.ess(square.rename("v").to_dataset())["v"]))
            assert abs(float(square.mean()) - 1.0) < 4 * mcse, (chain, j)


def test_exact_on_hierarchical_model():
    # mu ~ N(0, 5²), theta_j ~ N(mu, 2²), y_j ~ N(theta_j, s_j²): a Gaussian posterior.
    y = np.array([2.8, 0.8, -0.3, 0.7, -0.1, 0.1, 1.8, 1.2])
    s = np.array([1.5, 1.0, 1.6, 1.1, 0.9, 1.1, 1.0, 1.8])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        theta = pm.Normal("theta", mu, 2.0, shape=8)
        pm.Normal("y", theta, s, observed=y)
    # Joint precision of (mu, theta).
    precision = np.zeros((9, 9))
    precision[0, 0] = 1 / 25 + 8 / 4
    precision[0, 1:] = precision[1:, 0] = -1 / 4
    precision[1:, 1:] = np.diag(1 / 4 + 1 / s**2)
    cov = np.linalg.inv(precision)
    mean = cov @ np.concatenate([[0.0], y / s**2])
    idata = sample(model, lambda: StochasticDynamics(alpha=0.8, n_leapfrog=4), draws=1500)
    assert_moments(idata, "theta", mean[1:4], (cov + np.outer(mean, mean))[1:4, 1:4])
    mu_draws = idata.posterior["mu"]
    mcse = float(az.mcse(mu_draws.to_dataset()).to_array().squeeze())
    assert abs(float(mu_draws.mean()) - mean[0]) < 4 * mcse


@pytest.mark.parametrize("alpha", [0.0, 0.9])
def test_exact_at_a_hard_wall(alpha):
    # N(0, 2²) restricted to x > 1 by a -inf potential (a truncated normal, α = 0.5). Trajectories
    # that cross the wall must be rejected with the momentum reversed: redrawing the momentum
    # after them biased the mean low by about 10 MCSE with persistent momentum. And step-size
    # tuning must not count them as plain rejections: with alpha = 0 that drove ε to about 1e-4
    # and left the chains at the wall (mean 1.05).
    from scipy import stats

    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 2.0)
        pm.Potential("bound", pm.math.switch(x > 1.0, 0.0, -np.inf))
    idata = sample(
        model,
        lambda: StochasticDynamics(alpha=alpha, n_leapfrog=5),
        draws=3000,
        chains=4,
        initvals={"x": 2.0},
    )
    draws = idata.posterior["x"]
    assert float(draws.min()) > 1.0
    hazard = stats.norm.pdf(0.5) / stats.norm.sf(0.5)
    mcse = float(az.mcse(draws.rename("x").to_dataset())["x"])
    for chain in range(4):  # every chain, not only the pool
        assert abs(float(draws.isel(chain=chain).mean()) - 2.0 * hazard) < 8 * mcse
    assert abs(float(draws.mean()) - 2.0 * hazard) < 4 * mcse, (float(draws.mean()), mcse)
    stats_ = idata.sample_stats
    assert int(stats_["n_constraint_hits"].sum()) > 0 and int(stats_["diverging"].sum()) == 0
    assert float(stats_["step_size"].min()) > 0.03


def test_uncorrected_bias_shrinks_with_step_size():
    # N(0, 1) target, fixed step sizes, no tuning: the uncorrected variance is biased upwards
    # (leapfrog's shadow Hamiltonian), visibly at ε = 1 and within MC error at ε = 0.2. One
    # leapfrog step per transition: at ε = 1 three steps are half an oscillation (q → -q), a
    # resonance that would make the chain stand still at its start 0.
    with pm.Model() as model:
        pm.Normal("z", 0.0, 1.0)

    def variance(eps):
        idata = sample(
            model,
            lambda: StochasticDynamics(
                step_size=eps,
                adapt_step_size=False,
                alpha=0.5,
                n_leapfrog=1,
                correct=False,
                scaling=np.ones(1),
            ),
            draws=4000,
            tune=100,
        )
        sq = (idata.posterior["z"] ** 2).rename("z2")
        return float(sq.mean()), float(az.mcse(sq.to_dataset()).to_array().squeeze())

    var_big, mcse_big = variance(1.0)
    var_small, mcse_small = variance(0.2)
    assert var_big - 1.0 > 4 * mcse_big
    assert abs(var_small - 1.0) < 4 * mcse_small
    assert abs(var_small - 1.0) < abs(var_big - 1.0)


def test_instability_flagged_recovered_and_tuned_away():
    with pm.Model() as model:
        pm.Normal("w", 0.0, 0.01, shape=3)
    idata = sample(
        model,
        lambda: StochasticDynamics(step_size=5.0, n_leapfrog=20, scaling=np.ones(3)),
        draws=300,
        tune=300,
        chains=1,
    )
    posterior = idata.posterior["w"].values
    assert np.isfinite(posterior).all()
    warmup = idata.sample_stats["step_size"].values
    assert float(warmup[0, -1]) < 0.1  # tuned down from 5 after the divergences
    assert int(idata.sample_stats["diverging"].sum()) == 0
    with pm.Model() as model:
        pm.Normal("w", 0.0, 0.01, shape=3)
        step = StochasticDynamics(
            step_size=5.0, n_leapfrog=20, adapt_step_size=False, scaling=np.ones(3)
        )
    step.tune = False
    q = DictToArrayBijection.map(model.initial_point())
    new_q, stats = step.astep(q)
    assert stats[0]["diverging"] and stats[0]["divergences"] == 1
    np.testing.assert_array_equal(new_q.data, q.data)


def test_reproducible_across_cores_and_compound():
    with pm.Model():
        pm.Normal("a", 0, 1, shape=2)
        b = pm.Normal("b", 0, 1)
        options = dict(
            draws=30,
            tune=20,
            chains=2,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )

        def steps():
            return [pm.Metropolis([b]), StochasticDynamics(["a"], n_leapfrog=3)]

        one = pm.sample(cores=1, step=steps(), **options)
        two = pm.sample(cores=2, step=steps(), **options)
    for name in ("a", "b"):
        np.testing.assert_array_equal(one.posterior[name].values, two.posterior[name].values)
    assert not np.array_equal(one.posterior["a"].values[0], one.posterior["a"].values[1])
    assert np.isfinite(one.sample_stats["lp"].values).all()
    assert (one.sample_stats["n_grad_evals"].values == 3 + 1).all()  # trajectory + start


def test_reused_step_starts_afresh_in_parallel_sampling():
    """PyMC's parallel sampling sends the step as it is, without ``reset_tuning``: a step that
    ran before (its step size and mass matrix adapted) must start as a fresh one does."""
    with pm.Model() as model:
        pm.Normal("a", 0, 1, shape=2)
    with model:
        reused = StochasticDynamics(n_leapfrog=3)
    runs = dict(draws=20, tune=20, cores=2)
    fresh = sample(model, lambda: StochasticDynamics(n_leapfrog=3), **runs)
    sample(model, lambda: reused, **{**runs, "cores": 1, "random_seed": 8})
    again = sample(model, lambda: reused, **runs)
    np.testing.assert_array_equal(fresh.posterior["a"].values, again.posterior["a"].values)


def test_rng_seeds_the_step_used_without_pm_sample():
    """``rng`` alone makes a step called directly reproducible, the mass matrix's momenta
    included (as PyMC's NUTS)."""

    def draws() -> np.ndarray:
        with pm.Model() as model:
            pm.Normal("a", 0, 1, shape=2)
            step = StochasticDynamics(rng=1)
            point, out = model.initial_point(), []
            for _ in range(10):
                point, _ = step.step(point)
                out.append(point["a"].copy())
        return np.array(out)

    np.testing.assert_array_equal(draws(), draws())


@pytest.mark.slow
def test_minibatch_linear_regression_matches_exact_posterior():
    # Conjugate regression: prior N(0, 10²), known noise sd 0.5, exact Gaussian posterior.
    # Documented tolerance for minibatch (SGHMC-style, uncorrected) sampling: posterior means
    # within 0.5 posterior sd and posterior sds within 25 % -- the remaining bias of the
    # discretisation and of the gradient-noise estimate (see StochasticDynamics' Notes).
    rng = np.random.default_rng(0)
    n_rows = 4000
    X = rng.normal(size=(n_rows, 2))
    y = X @ np.array([1.0, -2.0]) + rng.normal(size=n_rows) * 0.5
    precision = X.T @ X / 0.25 + np.eye(2) / 100
    cov = np.linalg.inv(precision)
    mean, sd = cov @ (X.T @ y / 0.25), np.sqrt(np.diag(cov))
    with pm.Model() as model:
        X_batch, y_batch = pm.Minibatch(X, y, batch_size=100)
        w = pm.Normal("w", 0, 10, shape=2)
        pm.Normal("y", X_batch @ w, 0.5, observed=y_batch, total_size=n_rows)
        with pytest.raises(ValueError, match="Minibatch"):
            StochasticDynamics()

    def run():
        return sample(
            model,
            lambda: StochasticDynamics(correct=False, alpha=0.9, n_leapfrog=5),
            draws=1500,
            tune=700,
        )

    idata = run()
    draws = idata.posterior["w"].values.reshape(-1, 2)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 0.5 * sd)
    assert np.all(np.abs(draws.std(axis=0) / sd - 1) < 0.25)
    share = idata.sample_stats["gradient_noise_share"].values
    assert 0.0 < share.mean() < 1.0
    np.testing.assert_array_equal(run().posterior["w"].values, idata.posterior["w"].values)


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"step_size": 0.0}, "step_size must be"),
            ({"step_size": -0.1}, "step_size must be"),
            ({"alpha": 1.0}, r"alpha must be in \[0, 1\)"),
            ({"alpha": -0.1}, r"alpha must be in \[0, 1\)"),
            ({"n_leapfrog": 0}, "n_leapfrog must be"),
            ({"thin": 0}, "thin must be"),
            ({"target_accept": 1.5}, "target_accept"),
            ({"step_size_jitter": 1.0}, "step_size_jitter"),
            ({"scaling": np.ones(1), "potential": object()}, "at most one"),
            ({"target_energy_error": np.inf}, "target_energy_error must be a finite number"),
            ({"target_noise_share": np.inf}, "target_noise_share must be a finite number"),
            ({"is_cov": True}, "is_cov=True says how to read scaling"),
        ],
    )
    def test_invalid_arguments(self, kwargs, match):
        with pm.Model():
            pm.Normal("a", 0, 1)
            with pytest.raises(ValueError, match=match):
                StochasticDynamics(**kwargs)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"correct": "no"}, "correct must be True or False, got 'no'"),
            ({"n_leapfrog": "10"}, "n_leapfrog must be an integer >= 1, got '10'"),
            ({"thin": True}, "thin must be an integer >= 1, got True"),
            ({"is_cov": "yes", "scaling": np.ones(1)}, "is_cov must be True or False"),
        ],
    )
    def test_arguments_of_the_wrong_kind(self, kwargs, match):
        with pm.Model():
            pm.Normal("a", 0, 1)
            with pytest.raises(TypeError, match=match):
                StochasticDynamics(**kwargs)


# --- replica exchange ---------------------------------------------------------------------------


def test_an_improper_scale_posterior_is_an_error_not_infinite_draws():
    """p(s | y) ∝ exp(−y² / 2s²) / s under a HalfFlat prior is flat in log s as s grows: the
    dynamics drift to log s ≈ 1e3 and beyond, where PyMC's trace recorded s = inf for every
    draw, without a divergence or a warning. The step now stops there with a named error; the
    same model with a proper prior samples."""
    with pm.Model() as improper:
        s = pm.HalfFlat("s")
        pm.Normal("y", 0.0, s, observed=[0.5])
    with pytest.raises(SamplingError, match=r"improper along s\b"):
        sample(improper, StochasticDynamics, draws=500, tune=500, chains=1)
    with pm.Model() as proper:
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", 0.0, s, observed=[0.5])
    idata = sample(proper, StochasticDynamics, draws=200, tune=200, chains=1)
    assert np.isfinite(idata.posterior["s"].values).all()
