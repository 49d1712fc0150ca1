"""Stochastic dynamics (Neal 1993): the core without PyMC, and the StochasticDynamics step.

Tolerances come from the Monte Carlo error (ArviZ's MCSE, which accounts for autocorrelation).
"""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection
from scipy import stats

from pymc_sfp import ReplicaExchangeDynamics, StochasticDynamics
from pymc_sfp.core.dynamics import (
    PhaseState,
    equal_rejection_ladder,
    geometric_ladder,
    leapfrog,
    swap_neighbours,
    transition,
)


def gaussian_logp_grad(precision):
    def logp_grad(q):
        g = -precision @ q
        return 0.5 * float(q @ g), g

    return logp_grad


def identity(p):
    return p


def half_square(p):
    return 0.5 * float(p @ p)


def test_leapfrog_is_reversible_and_second_order():
    precision = np.array([[2.0, 0.5], [0.5, 1.0]])
    logp_grad = gaussian_logp_grad(precision)
    q0, p0 = np.array([1.0, -0.5]), np.array([0.3, 0.8])
    state = PhaseState(q0, p0, *logp_grad(q0))
    errors = []
    for eps in (0.1, 0.05):
        end, n_grad = leapfrog(state, eps, round(1.0 / eps), logp_grad, identity)
        assert n_grad == round(1.0 / eps)
        back, _ = leapfrog(end._replace(momentum=-end.momentum), eps, n_grad, logp_grad, identity)
        np.testing.assert_allclose(back.position, q0, atol=1e-12)
        errors.append(abs(-end.logp + half_square(end.momentum) + state.logp - half_square(p0)))
    assert 3.0 < errors[0] / errors[1] < 5.0  # energy error O(ε²) at fixed trajectory length


def test_alpha_zero_is_plain_hmc():
    # alpha = 0 with correct=True must be exactly Hamiltonian Monte Carlo: reference HMC below,
    # driven by the same random streams.
    precision = np.array([[4.0, 1.0], [1.0, 1.0]])
    logp_grad = gaussian_logp_grad(precision)
    eps, n_steps = 0.3, 7
    momentum_rng, accept_rng = np.random.default_rng(1), np.random.default_rng(2)
    state = PhaseState(np.array([1.0, 1.0]), np.zeros(2), *logp_grad(np.array([1.0, 1.0])))
    ours = []
    for _ in range(200):
        state, _ = transition(
            state,
            step_size=eps,
            n_steps=n_steps,
            alpha=0.0,
            correct=True,
            logp_grad=logp_grad,
            velocity=identity,
            kinetic_energy=half_square,
            draw_momentum=lambda: momentum_rng.normal(size=2),
            uniform=accept_rng.uniform,
        )
        ours.append(state.position)

    momentum_rng, accept_rng = np.random.default_rng(1), np.random.default_rng(2)
    q = np.array([1.0, 1.0])
    reference = []
    for _ in range(200):
        p = momentum_rng.normal(size=2)
        q_new, p_new = q.copy(), p.copy()
        for _ in range(n_steps):
            p_new = p_new + 0.5 * eps * logp_grad(q_new)[1]
            q_new = q_new + eps * p_new
            p_new = p_new + 0.5 * eps * logp_grad(q_new)[1]
        h0 = -logp_grad(q)[0] + 0.5 * p @ p
        h1 = -logp_grad(q_new)[0] + 0.5 * p_new @ p_new
        if accept_rng.uniform() < min(1.0, np.exp(h0 - h1)):
            q = q_new
        reference.append(q)
    np.testing.assert_allclose(np.array(ours), np.array(reference), atol=1e-10)


def test_divergent_trajectory_is_flagged_and_restored():
    logp_grad = gaussian_logp_grad(np.array([[100.0]]))
    start = PhaseState(np.array([0.5]), np.array([0.0]), *logp_grad(np.array([0.5])))
    rng = np.random.default_rng(0)
    # 200 steps overflow float64; the blow-up is flagged, not warned about.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        end, info = transition(
            start,
            step_size=1.0,
            n_steps=200,
            alpha=0.5,
            correct=False,
            logp_grad=logp_grad,
            velocity=identity,
            kinetic_energy=half_square,
            draw_momentum=lambda: rng.normal(size=1),
            uniform=rng.uniform,
        )
    assert info.diverging and info.accept_stat == 0.0 and not info.accepted
    np.testing.assert_array_equal(end.position, start.position)
    assert np.isfinite(end.momentum).all() and end.logp == start.logp


def sample(model, step, **kwargs):
    options = dict(
        draws=2000,
        tune=1000,
        chains=2,
        cores=1,
        random_seed=7,
        progressbar=False,
        compute_convergence_checks=False,
    )
    options.update(kwargs)
    with model:
        return pm.sample(step=step(), **options)


def assert_moments(idata, name, means, second_moments):
    """Mean and raw second moments of the first ``len(means)`` elements within 4 MCSE."""
    values = idata.posterior[name]
    flat = values.stack(sample=("chain", "draw"))
    dim = next(d for d in values.dims if d not in ("chain", "draw"))
    n = len(means)
    for i in range(n):
        xi = values.isel({dim: i})
        mcse = float(az.mcse(xi.rename("x").to_dataset()).to_array().squeeze())
        assert abs(float(xi.mean()) - means[i]) < 4 * mcse, (name, i)
        for j in range(i, n):
            prod = (xi * values.isel({dim: j})).rename("xy")
            mcse = float(az.mcse(prod.to_dataset()).to_array().squeeze())
            assert abs(float(prod.mean()) - second_moments[i, j]) < 4 * mcse, (name, i, j)
    assert flat.sizes["sample"] > 0


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
    def test_discrete(self):
        with pm.Model():
            pm.Poisson("count", 2.0)
            pm.Normal("a", 0, 1)
            with pytest.raises(TypeError, match="count"):
                StochasticDynamics()

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
        ],
    )
    def test_invalid_arguments(self, kwargs, match):
        with pm.Model():
            pm.Normal("a", 0, 1)
            with pytest.raises(ValueError, match=match):
                StochasticDynamics(**kwargs)


# --- replica exchange ---------------------------------------------------------------------------


def test_geometric_ladder_and_swap_rule():
    np.testing.assert_allclose(geometric_ladder(3, 0.25), [1.0, 0.5, 0.25])
    betas = np.array([1.0, 0.5, 0.25])
    log_likelihoods = np.array([-10.0, -2.0, -50.0])
    # Pair (0, 1): log ratio (1 - 0.5)(-2 + 10) = 4 > 0, always swapped; pair (1, 2) not proposed.
    order, accept = swap_neighbours(log_likelihoods, betas, 0, lambda: 0.999)
    np.testing.assert_array_equal(order, [1, 0, 2])
    assert accept[0] == 1.0 and np.isnan(accept[1])
    # Pair (1, 2): log ratio (0.5 - 0.25)(-50 + 2) = -12.
    order, accept = swap_neighbours(log_likelihoods, betas, 1, lambda: 0.5)
    np.testing.assert_array_equal(order, [0, 1, 2])
    assert np.isnan(accept[0]) and accept[1] == pytest.approx(np.exp(-12.0))
    order, _ = swap_neighbours(log_likelihoods, betas, 1, lambda: 0.0)
    np.testing.assert_array_equal(order, [0, 2, 1])


def test_equal_rejection_ladder():
    ladder = np.array([1.0, 0.5, 0.25, 0.125])
    np.testing.assert_allclose(equal_rejection_ladder(ladder, np.full(3, 0.3)), ladder)
    # Barriers 0.6, 0.001, 0.001 (floored): cumulative 0, 0.6, 0.601, 0.602, inverted at
    # thirds of 0.602 by linear interpolation in log β.
    fractions = np.array([1.0, 2.0]) * 0.602 / 3 / 0.6
    expected = [1.0, *(0.5**fractions), 0.125]
    np.testing.assert_allclose(equal_rejection_ladder(ladder, [0.6, 0.0, 0.0]), expected)


@pytest.fixture(scope="module")
def separated_modes():
    """x ~ N(0, 3²) with a two-mode likelihood 0.3 N(−3, 0.3²) + 0.7 N(3, 0.3²): a barrier of
    about 50 nats, which no single-temperature chain crosses."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 3.0)
        components = pm.math.stack(
            [
                np.log(0.3) + pm.logp(pm.Normal.dist(-3.0, 0.3), x),
                np.log(0.7) + pm.logp(pm.Normal.dist(3.0, 0.3), x),
            ]
        )
        pm.Potential("likelihood", pm.math.logsumexp(components))
    grid = np.linspace(-12, 12, 200_001)
    density = stats.norm(0, 3).pdf(grid) * (
        0.3 * stats.norm(-3, 0.3).pdf(grid) + 0.7 * stats.norm(3, 0.3).pdf(grid)
    )
    density /= density.sum()
    return model, float(density[grid > 0].sum()), float((density * grid).sum())


def test_replica_exchange_recovers_the_weights_of_separated_modes(separated_modes):
    model, weight, mean = separated_modes
    stuck = sample(model, lambda: StochasticDynamics(n_leapfrog=5), draws=500, tune=300)
    per_chain = (stuck.posterior["x"] > 0).mean("draw").values
    assert set(per_chain) <= {0.0, 1.0}  # each chain stays in the mode it found
    idata = sample(
        model,
        lambda: ReplicaExchangeDynamics(n_temperatures=6, min_beta=0.01, n_leapfrog=5),
        draws=3000,
        tune=500,
    )
    x = idata.posterior["x"]
    for values, expected in (((x > 0).astype(float), weight), (x, mean)):
        mcse = float(az.mcse(values.rename("v").to_dataset()).to_array().squeeze())
        assert abs(float(values.mean()) - expected) < 4 * mcse
    swaps = idata.sample_stats["swap_accept"]
    assert swaps.shape[-1] == 5
    assert 0.1 < float(swaps.mean()) < 1.0
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert idata.sample_stats["replica_diverging"].shape[-1] == 6
    assert not idata.sample_stats["replica_diverging"].values.any()


def test_replica_exchange_flags_divergences_of_every_replica():
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.0, shape=3)
        pm.Normal("y", w, 0.01, observed=np.zeros(3))
        step = ReplicaExchangeDynamics(
            n_temperatures=3,
            min_beta=0.01,
            step_size=5.0,
            n_leapfrog=20,
            adapt_step_size=False,
            scaling=np.ones(3),
        )
    step.tune = False
    q = DictToArrayBijection.map(model.initial_point())
    new_q, stats = step.astep(q)
    np.testing.assert_array_equal(stats[0]["replica_diverging"], [[True, True, True]])
    assert stats[0]["diverging"] and stats[0]["divergences"] == 1
    np.testing.assert_array_equal(new_q.data, q.data)


def test_replica_exchange_ladder_adapts_to_equal_swap_rates(separated_modes):
    """A ladder crowded near β = 1 swaps freely there and hardly across its last gap; adapted
    during tuning, it spreads the temperatures until every pair swaps about equally often."""
    model, _, _ = separated_modes
    crowded = [1.0, 0.9, 0.8, 0.7, 0.003]
    rates, ladders = {}, {}
    for adapt in (False, True):
        idata = sample(
            model,
            lambda adapt=adapt: ReplicaExchangeDynamics(
                betas=crowded, n_leapfrog=5, adapt_ladder=adapt
            ),
            draws=1000,
            tune=800,
        )
        rates[adapt] = np.nanmean(idata.sample_stats["swap_accept"].values, axis=(0, 1))
        ladders[adapt] = idata.sample_stats["betas"].values
    # Each rate averages about 1000 proposals (standard error < 0.02).
    assert rates[False].max() - rates[False].min() > 0.5
    assert rates[True].max() - rates[True].min() < 0.15
    np.testing.assert_array_equal(ladders[False], np.broadcast_to(crowded, ladders[False].shape))
    adapted = ladders[True]
    assert np.all(adapted[..., 0] == 1.0) and np.all(adapted[..., -1] == 0.003)
    assert np.all(np.diff(adapted, axis=-1) < 0)
    assert np.all(adapted == adapted[:, :1])  # frozen after tuning
    assert np.all(adapted[:, 0, 1] < 0.6)


def test_replica_exchange_reproducible_across_cores(separated_modes):
    model, _, _ = separated_modes
    runs = [
        sample(
            model,
            lambda: ReplicaExchangeDynamics(n_temperatures=3, min_beta=0.1, n_leapfrog=3),
            draws=30,
            tune=20,
            cores=cores,
            random_seed=11,
        )
        for cores in (1, 2)
    ]
    np.testing.assert_array_equal(runs[0].posterior["x"].values, runs[1].posterior["x"].values)
    assert not np.array_equal(runs[0].posterior["x"].values[0], runs[0].posterior["x"].values[1])
    # `lp` is the untempered model log-density of the cold replica's draw.
    logp = model.compile_logp()
    x = runs[0].posterior["x"].values[0, :5]
    lp = runs[0].sample_stats["lp"].values[0, :5]
    np.testing.assert_allclose(lp, [logp({"x": value}) for value in x], rtol=1e-10)


def test_replica_exchange_bad_input(separated_modes):
    with pm.Model():
        a = pm.Normal("a", 0.0, 1.0)
        pm.Normal("b", 0.0, 1.0)
        pm.Normal("y", a, 1.0, observed=[0.1, 0.3])
        with pytest.raises(ValueError, match=r"every free variable .* not sample \['b'\]"):
            ReplicaExchangeDynamics([a])
        with pytest.raises(ValueError, match="n_temperatures must be >= 2"):
            ReplicaExchangeDynamics(n_temperatures=1)
        with pytest.raises(ValueError, match=r"min_beta must be in \(0, 1\)"):
            ReplicaExchangeDynamics(min_beta=1.0)
        with pytest.raises(ValueError, match="betas must be a strictly decreasing"):
            ReplicaExchangeDynamics(betas=[1.0, 0.5, 0.7])
    with pm.Model(), pytest.raises(ValueError, match="no likelihood to temper"):
        pm.Normal("c", 0.0, 1.0)
        ReplicaExchangeDynamics()
