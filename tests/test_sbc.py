"""Simulation-based calibration (Talts et al. 2018) with a fake sampler that draws the conjugate
normal posterior exactly: ranks uniform when it is exact, the check fails when it is not.

Thresholds: an exact sampler's p-value is uniform on (0, 1), so ``p > 0.001`` fails one seed in a
thousand; a posterior half as wide as the truth puts most ranks in the outer bins (chi-square in
the hundreds with 200 simulations), so ``p < 1e-3`` holds by a wide margin.
"""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pymc_sfp import sbc, simulation_based_calibration

N_OBSERVATIONS = 5


def conjugate_model():
    """mu ~ N(0, 1), y_i ~ N(mu, 1): the posterior is N(sum(y) / (n + 1), 1 / (n + 1))."""
    with pm.Model() as model:
        y = pm.Data("y", np.zeros(N_OBSERVATIONS))
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y_obs", mu, 1.0, observed=y)
    return model


def exact_sampler(sd_factor=1.0, shift=0.0, draws=19):
    """A fake sampler: independent draws of mu from the exact posterior given the model's data,
    with the sd multiplied by ``sd_factor`` and the mean moved by ``shift`` posterior sds."""

    def sample(model, random_seed):
        y = model["y"].get_value()
        precision = 1.0 + y.size
        sd = precision**-0.5
        mean = y.sum() / precision + shift * sd
        rng = np.random.default_rng(random_seed)
        return {"mu": rng.normal(mean, sd_factor * sd, size=draws)}

    return sample


def run(sampler, **kwargs):
    options = dict(n_simulations=200, n_posterior_draws=19, n_bins=10, random_seed=12)
    options.update(kwargs)
    return simulation_based_calibration(conjugate_model(), sampler, ["mu"], **options)


def test_exact_posterior_gives_uniform_ranks():
    result = run(exact_sampler())
    assert result.quantities == ("mu",)
    assert result.ranks.shape == (200, 1)
    assert result.ranks.min() >= 0 and result.ranks.max() <= 19
    assert result.counts.shape == (10, 1) and result.counts.sum() == 200
    assert result.p_values["mu"] > 1e-3
    assert result.n_simulations == 200 and result.n_bins == 10
    assert not result.divergences.any()


@pytest.mark.parametrize(("sd_factor", "shift"), [(0.5, 0.0), (2.0, 0.0), (1.0, 1.0)])
def test_wrong_posterior_is_detected(sd_factor, shift):
    """Too narrow (ranks pile up at both ends), too wide (in the middle), biased (at one end)."""
    result = run(exact_sampler(sd_factor, shift))
    assert result.p_values["mu"] < 1e-3


def test_posterior_of_stale_data_is_detected():
    """The data must really be set for each simulation: a sampler that keeps drawing the exact
    posterior of the first data set it saw has its ranks far from uniform. (A sampler that
    ignores the data and draws from the prior would pass: SBC cannot see that.)"""
    first = []

    def stale(model, random_seed):
        if not first:
            first.append(model["y"].get_value().copy())
        with pm.Model() as frozen:
            pm.Data("y", first[0])
        return exact_sampler()(frozen, random_seed)

    assert run(stale).p_values["mu"] < 1e-3


def test_data_are_put_back_and_draws_thinned():
    model = conjugate_model()
    seen = []

    def sampler(model, random_seed):
        seen.append(model["y"].get_value().copy())
        return exact_sampler(draws=100)(model, random_seed)

    result = simulation_based_calibration(
        model, sampler, ["mu"], n_simulations=10, n_posterior_draws=9, n_bins=2, random_seed=3
    )
    np.testing.assert_array_equal(model["y"].get_value(), np.zeros(N_OBSERVATIONS))
    assert len(seen) == 10 and len({tuple(y) for y in seen}) == 10
    assert result.ranks.max() <= 9 and result.n_posterior_draws == 9


def test_same_seed_same_result():
    first, second = run(exact_sampler()), run(exact_sampler())
    np.testing.assert_array_equal(first.ranks, second.ranks)
    np.testing.assert_array_equal(first.prior, second.prior)


def test_vector_quantities_and_datatree_results():
    """Each element of a vector is a quantity; a sampler may return a DataTree (chains pooled)
    whose ``diverging`` stats are counted."""
    model = sbc.hierarchical_normal_model(n_groups=2)

    def fake(model, random_seed):
        rng = np.random.default_rng(random_seed)
        diverging = np.zeros((2, 10), dtype=bool)
        diverging[0, :3] = True
        posterior = xr.Dataset(
            {
                "mu": (("chain", "draw"), rng.normal(size=(2, 10))),
                "theta": (("chain", "draw", "group"), rng.normal(size=(2, 10, 2))),
            }
        )
        stats = xr.Dataset({"diverging": (("chain", "draw"), diverging)})
        return xr.DataTree.from_dict({"posterior": posterior, "sample_stats": stats})

    result = simulation_based_calibration(
        model, fake, ["mu", "theta"], n_simulations=10, n_posterior_draws=19, n_bins=2,
        random_seed=1,
    )  # fmt: skip
    assert result.quantities == ("mu", "theta[0]", "theta[1]")
    assert result.prior.shape == result.ranks.shape == (10, 3)
    np.testing.assert_array_equal(result.divergences, 3)


def test_ranks_and_uniformity_test():
    prior = np.array([0.5, -3.0, 3.0])
    posterior = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(sbc.rank_statistics(prior, posterior), [1, 0, 3])
    counts, p = sbc.uniformity_test(np.repeat(np.arange(20), 5), 20, 10)
    np.testing.assert_array_equal(counts, 10)
    assert p == pytest.approx(1.0)
    counts, p = sbc.uniformity_test(np.zeros(100, dtype=int), 20, 10)
    assert counts[0] == 100 and p < 1e-12


def test_bad_arguments():
    with pytest.raises(ValueError, match="divide"):
        sbc.uniformity_test(np.arange(20), 20, 3)
    with pytest.raises(ValueError, match="lie in"):
        sbc.uniformity_test(np.array([0, 20]), 20, 2)
    with pytest.warns(UserWarning, match="fewer than 5"):
        sbc.uniformity_test(np.arange(20), 20, 10)
    with pytest.raises(ValueError, match="divide the number of ranks 20"):
        run(exact_sampler(), n_bins=3)
    with pytest.raises(ValueError, match="at least one quantity"):
        simulation_based_calibration(conjugate_model(), exact_sampler(), [])
    with pytest.raises(ValueError, match="fewer than n_posterior_draws"):
        run(exact_sampler(draws=5), n_simulations=2, n_bins=2)
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pm.Normal("y_obs", mu, observed=np.zeros(3))
    with pytest.raises(ValueError, match=r"not a pm\.Data"):
        simulation_based_calibration(model, exact_sampler(), ["mu"])
    with pytest.raises(ValueError, match=r"quantities \['nu', 'y_obs'\] are not free or "):
        simulation_based_calibration(conjugate_model(), exact_sampler(), ["mu", "nu", "y_obs"])
    for argument, value in [("n_simulations", 2.7), ("n_posterior_draws", 0)]:
        with pytest.raises(ValueError, match=f"{argument} must be an integer >= 1"):
            run(exact_sampler(), **{argument: value})
    with pytest.raises(ValueError, match="n_bins must be >= 2 and divide"):
        run(exact_sampler(), n_bins=5.0)
    with pytest.raises(
        ValueError, match=r"y must be n_groups = 4 finite numbers, got shape \(6,\)"
    ):
        sbc.hierarchical_normal_model(4, y=np.zeros(6))
    with pytest.raises(ValueError, match="n_groups must be a positive integer"):
        sbc.hierarchical_normal_model(0)


@pytest.mark.filterwarnings("ignore:`return_inferencedata=False` is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:2 ranks in 2 bins expect 1 per bin:UserWarning")
def test_one_quantity_by_name_and_multitrace_results():
    # A name alone is one quantity (not its letters); the MultiTrace of
    # pm.sample(return_inferencedata=False) is pooled over chains and its divergences counted.
    model = conjugate_model()

    def trace(model, random_seed):
        with model:
            return pm.sample(
                draws=10,
                tune=10,
                chains=2,
                cores=1,
                random_seed=random_seed,
                return_inferencedata=False,
                progressbar=False,
                compute_convergence_checks=False,
            )

    result = simulation_based_calibration(
        model, trace, "mu", n_simulations=2, n_posterior_draws=19, n_bins=2, random_seed=1
    )
    assert result.quantities == ("mu",) and result.ranks.shape == (2, 1)
    assert result.divergences.shape == (2,) and result.divergences.min() >= 0


def test_step_sampler_builds_once_and_refuses_another_model():
    built = []

    def metropolis():
        built.append(pm.Metropolis())
        return built[-1]

    sampler = sbc.step_sampler(metropolis, tune=5, draws=5, chains=2)
    model = conjugate_model()
    first, second = sampler(model, 1), sampler(model, 2)
    assert len(built) == 1
    assert first.posterior.sizes["chain"] == 2 and second.posterior.sizes["draw"] == 5
    with pytest.raises(ValueError, match="another model"):
        sampler(conjugate_model(), 1)
