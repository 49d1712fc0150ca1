"""``ReplicaExchangeDynamics``: separated modes, divergences of every replica, the adaptive ladder,
reproducibility and bad input."""

import arviz as az
import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection
from scipy import stats

from pymc_sfp import ReplicaExchangeDynamics, StochasticDynamics
from tests.helpers import sample


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


@pytest.mark.slow
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


@pytest.mark.slow
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
            tune=2100,
        )
        rates[adapt] = np.nanmean(idata.sample_stats["swap_accept"].values, axis=(0, 1))
        ladders[adapt] = idata.sample_stats["betas"].values
    # Each rate averages about 2000 proposals (standard error < 0.015). The adapted ladder comes
    # from the last tuning round's 512 proposals per pair and chain (rates within about 0.022 per
    # chain), so each gap's rate is off its common value by about 0.025 in all: the range of 4
    # such rates exceeds 0.15 at about 6 standard deviations. (A tuning of 800 draws ends on a
    # round of 128: its ranges reach 0.16 at some seeds.)
    assert rates[False].max() - rates[False].min() > 0.5
    assert rates[True].max() - rates[True].min() < 0.15
    # The stats order the rungs hottest first, as ParallelTempering does.
    np.testing.assert_array_equal(
        ladders[False], np.broadcast_to(crowded[::-1], ladders[False].shape)
    )
    adapted = ladders[True]
    assert np.all(adapted[..., -1] == 1.0) and np.all(adapted[..., 0] == 0.003)
    assert np.all(np.diff(adapted, axis=-1) > 0)
    assert np.all(adapted == adapted[:, :1])  # frozen after tuning
    assert np.all(adapted[:, 0, -2] < 0.6)


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


def test_replica_exchange_with_an_improper_prior():
    # The hottest replica is at β = 0.05, not the prior, so a flat prior is fine: every rung's
    # target, N(1, 1/(2β)) here, is proper.
    with pm.Model() as model:
        x = pm.Flat("x")
        pm.Normal("y", x, 1.0, observed=[0.5, 1.5])
    idata = sample(
        model,
        lambda: ReplicaExchangeDynamics(n_temperatures=3, min_beta=0.05, n_leapfrog=5),
        draws=1000,
        tune=500,
    )
    x = idata.posterior["x"]
    mcse = float(az.mcse(x.rename("x").to_dataset())["x"])
    assert abs(float(x.mean()) - 1.0) < 4 * mcse
    assert idata.sample_stats["betas"].values[0, 0, 0] == pytest.approx(0.05)


def test_replica_exchange_bad_input(separated_modes):
    with pm.Model():
        a = pm.Normal("a", 0.0, 1.0)
        pm.Normal("b", 0.0, 1.0)
        pm.Normal("y", a, 1.0, observed=[0.1, 0.3])
        with pytest.raises(ValueError, match=r"every free variable .* not sample \['b'\]"):
            ReplicaExchangeDynamics([a])
        with pytest.raises(ValueError, match="n_temperatures must be an integer >= 2"):
            ReplicaExchangeDynamics(n_temperatures=1)
        for not_an_integer in (2.5, 3.0):
            with pytest.raises(ValueError, match="n_temperatures must be an integer >= 2"):
                ReplicaExchangeDynamics(n_temperatures=not_an_integer)
        for wrong_kind in ("3", True):
            with pytest.raises(TypeError, match="n_temperatures must be an integer >= 2"):
                ReplicaExchangeDynamics(n_temperatures=wrong_kind)
        with pytest.raises(TypeError, match="min_beta must be a real number"):
            ReplicaExchangeDynamics(min_beta="0.1")
        with pytest.raises(ValueError, match=r"min_beta must be in \(0, 1\)"):
            ReplicaExchangeDynamics(min_beta=1.0)
        with pytest.raises(ValueError, match="betas must be a strictly decreasing"):
            ReplicaExchangeDynamics(betas=[1.0, 0.5, 0.7])
        with pytest.raises(ValueError, match=r"betas must be a strictly decreasing.*got 'abc'"):
            ReplicaExchangeDynamics(betas="abc")
        with pytest.raises(
            TypeError,
            match=r"ReplicaExchangeDynamics got unexpected keyword arguments: \['foo'\]; ",
        ):
            ReplicaExchangeDynamics(foo=1)
        for ladder_size in ({"n_temperatures": 4}, {"min_beta": 0.2}):
            with pytest.raises(ValueError, match=r"either betas .* or n_temperatures/min_beta"):
                ReplicaExchangeDynamics(betas=[1.0, 0.5], **ladder_size)
    with pm.Model(), pytest.raises(ValueError, match="no likelihood to temper"):
        pm.Normal("c", 0.0, 1.0)
        ReplicaExchangeDynamics()
