"""Rao–Blackwellised marginals (Berrones Eq. 7): :class:`Marginal`, :func:`average_conditionals`
on plain arrays, and :func:`sfp_marginals` on the DataTree of an ``SFPStep`` run."""

import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection
from pymc.step_methods import CompoundStep
from scipy import stats

import pymc_sfp
from pymc_sfp import SFPStep
from pymc_sfp.marginals import (
    STAT_PREFIX_BOX,
    STAT_PREFIX_CDF,
    Marginal,
    average_conditionals,
    average_recorded_conditionals,
    recorded_grid,
)
from tests.helpers import sample


def recorded_conditionals(step, model, sweeps: int, seed: int) -> dict:
    """``sweeps`` sweeps of ``step`` from the model's initial point: per recorded variable, the
    points and the conditional CDFs, each of shape ``(sweeps, *shape, K)``."""
    step.rng = np.random.default_rng(seed)
    q = DictToArrayBijection.map(model.initial_point())
    recorded = []
    for _ in range(sweeps):
        q, step_stats = step.astep(q)
        recorded.append(step_stats[0])
    names = [k[len(STAT_PREFIX_CDF) :] for k in recorded[0] if k.startswith(STAT_PREFIX_CDF)]
    out = {}
    for name in names:
        # Each sweep's stats have a leading draw axis of length 1.
        cdfs = np.concatenate([s[STAT_PREFIX_CDF + name] for s in recorded])
        boxes = np.concatenate([s[STAT_PREFIX_BOX + name] for s in recorded])
        out[name] = recorded_grid(boxes, cdfs.shape[-1]), cdfs
    return out


def test_marginal_of_exact_beta_cdf():
    points = np.linspace(0.0, 1.0, 201)
    target = stats.beta(3.0, 5.0)
    marginal = Marginal(points, target.cdf(points))
    grid = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(marginal.cdf(grid), target.cdf(grid), atol=1e-5)
    np.testing.assert_allclose(marginal.pdf(grid), target.pdf(grid), atol=5e-3)
    assert marginal.mode() == pytest.approx(2.0 / 6.0, abs=1e-4)  # (a - 1) / (a + b - 2)
    assert marginal.mean() == pytest.approx(target.mean(), abs=1e-4)
    assert marginal.quantile(0.5) == pytest.approx(target.median(), abs=1e-3)
    assert marginal.cdf(-1.0) == 0.0 and marginal.cdf(2.0) == 1.0 and marginal.pdf(2.0) == 0.0


def test_mode_of_unevenly_spaced_points_is_where_the_density_is():
    """Points spread evenly in log scale (as SFP records a log-transformed variable): the
    cubic spline through the CDF overshoots between the wide far cells, and its derivative's
    maximum lay at 7391, where the density is 6e-8, against 3.0 at the data's peak."""
    marginal = Marginal(np.exp(np.linspace(-10, 10, 5)), np.array([0.0, 0.02, 0.7, 0.999, 1.0]))
    dense = np.linspace(marginal.points[0], marginal.points[-1], 200_001)
    assert marginal.pdf(marginal.mode()) >= 0.5 * marginal.pdf(dense).max()
    assert marginal.mode() < marginal.points[1]


def test_marginal_refuses_what_is_not_a_cdf_and_answers_nan_with_nan():
    points = np.linspace(0.0, 1.0, 5)
    for values, match in [
        ([0.0, 0.5, 0.4, 0.8, 1.0], "non-decreasing"),
        ([0.0, 0.5, 0.7, 0.9, 1.2], r"in \[0, 1\]"),
        ([0.3] * 5, "increase"),
        ([0.0, np.nan, 0.5, 0.7, 1.0], "finite"),
        ([0.0, 1.0], "one per point"),
    ]:
        with pytest.raises(ValueError, match=match):
            Marginal(points, np.array(values))
    # Float32 rounding noise is not an error.
    Marginal(points, np.array([0.0, 0.5, 0.5 - 3e-8, 0.8, 1.0 + 6e-8]))
    marginal = Marginal(points, points**2)
    assert np.isnan(marginal.cdf(np.nan)) and np.isnan(marginal.pdf(np.nan))
    np.testing.assert_array_equal(np.isnan(marginal.quantile([-0.5, 0.0, 1.0, 1.5])), [1, 0, 0, 1])


def test_a_marginal_of_part_of_the_mass_is_that_of_its_range():
    """CDF values from 0.2 to 0.6: cdf, mean and quantile describe one distribution, the
    restriction to the recorded range."""
    points = np.linspace(0.0, 1.0, 201)
    partial = Marginal(points, 0.2 + 0.4 * points**2)
    whole = Marginal(points, points**2)
    for method in ("cdf", "pdf"):
        np.testing.assert_allclose(
            getattr(partial, method)(points), getattr(whole, method)(points), atol=1e-12
        )
    assert partial.cdf(-1.0) == 0.0 and partial.cdf(2.0) == 1.0
    assert partial.mean() == pytest.approx(2.0 / 3.0, abs=1e-4)
    assert partial.quantile(0.25) == pytest.approx(0.5, abs=1e-4)


def test_average_conditionals_of_arrays():
    """Two point masses recorded as step CDFs on different grids average to their mixture."""
    grids = np.array([np.linspace(-1.0, 1.0, 5), np.linspace(0.0, 2.0, 5)])
    cdfs = np.array([(grids[0] >= 0.0), (grids[1] >= 1.5)]).astype(float)
    marginal = average_conditionals(grids, cdfs)
    np.testing.assert_array_equal(marginal.points, np.unique(grids))
    assert marginal.cdf(-0.75) == 0.0
    assert marginal.cdf(0.25) == pytest.approx(0.5)  # the first conditional's mass only
    assert marginal.cdf(1.75) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same shape"):
        average_conditionals(grids, cdfs[:, :3])


def test_marginal_of_normal_matches_pdf():
    """In 1-D the conditional is the marginal: a few sweeps' conditionals give N(1, 2)."""
    with pm.Model() as model:
        pm.Normal("y", 1.0, 2.0)
        # At L = 100 the grid's interpolation error (h² / 8σ² = 3e-3 nats) keeps the CDF's
        # within the tolerance below.
        step = SFPStep(L=100, bounds=(-15, 17))
    grids, cdfs = recorded_conditionals(step, model, 5, seed=0)["y"]
    marginal = average_conditionals(grids, cdfs)
    grid = np.linspace(-7, 9, 200)
    assert np.abs(marginal.pdf(grid) - stats.norm.pdf(grid, 1, 2)).max() < 2e-3
    assert np.abs(marginal.cdf(grid) - stats.norm.cdf(grid, 1, 2)).max() < 1e-4
    assert marginal.mode() == pytest.approx(1.0, abs=0.02)


def test_marginals_of_vector_and_matrix_variables_across_processes():
    """Marginal stats of non-scalar variables keep one row per draw through PyMC's trace."""
    x_means = np.array([0.0, 3.0])
    w_means = np.arange(6.0).reshape(2, 3) - 2.0
    with pm.Model():
        pm.Normal("x", x_means, 1.0)
        pm.Normal("W", w_means, 0.5)
        idata = pm.sample(
            draws=40,
            tune=5,
            chains=2,
            cores=2,
            step=SFPStep(L=60, bounds=(-8, 11)),
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    stats_ = idata["sample_stats"]
    assert stats_.sizes["draw"] == idata["posterior"].sizes["draw"] == 40
    assert not np.isnan(stats_["accept"].values).any()
    assert stats_["sfp_cdf__W"].shape == (2, 40, 2, 3, 2 * 60 - 1)
    marginals = pymc_sfp.sfp_marginals(idata)
    assert marginals["x"].shape == (2,) and marginals["W"].shape == (2, 3)
    # The target is separable, so every conditional is the exact marginal: only the recording
    # grid's resolution (19 / 99 apart) limits the Rao–Blackwellised means and sds.
    means = np.vectorize(lambda m: m.mean())
    np.testing.assert_allclose(means(marginals["x"]), x_means, atol=0.02)
    np.testing.assert_allclose(means(marginals["W"]), w_means, atol=0.02)
    sd = marginals["W"][1, 2].quantile(stats.norm.cdf(1.0)) - w_means[1, 2]
    assert sd == pytest.approx(0.5, abs=0.03)


def test_marginals_need_sfp_stats():
    with pm.Model():
        pm.Normal("a", 0, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(
                draws=5,
                tune=5,
                chains=1,
                step=pm.Metropolis(),
                progressbar=False,
                compute_convergence_checks=False,
            )
    with pytest.raises(ValueError, match="SFPStep"):
        pymc_sfp.sfp_marginals(idata)


def _tree(boxes: np.ndarray, cdfs: np.ndarray):
    import xarray as xr

    return xr.DataTree.from_dict(
        {
            "sample_stats": xr.Dataset(
                {
                    STAT_PREFIX_CDF + "x": (("chain", "draw", "k"), cdfs),
                    STAT_PREFIX_BOX + "x": (("chain", "draw", "box"), boxes),
                }
            )
        }
    )


def test_conditionals_recorded_with_their_boxes_average_as_on_their_grids():
    """``average_recorded_conditionals`` groups the draws by box (runs of equal boxes, and a
    box that comes back later joining its group): the marginal of
    ``average_conditionals`` on each draw's own grid, from float32 CDFs as recorded, on a
    log-scale box too."""
    rng = np.random.default_rng(3)
    boxes = np.array(
        [[-2.0, 2.0, 0.0, 0.0]] * 3
        + [[-3.0, 1.0, 0.0, 0.0]] * 2
        + [[-2.0, 2.0, 0.0, 0.0]]
        + [[-1.0, 1.5, 0.5, 1.0]] * 4
    )
    cdfs = np.sort(rng.uniform(size=(len(boxes), 7)), axis=1)
    cdfs[:, 0], cdfs[:, -1] = 0.0, 1.0
    cdfs = cdfs.astype(np.float32)
    marginal = average_recorded_conditionals(boxes, cdfs)
    reference = average_conditionals(recorded_grid(boxes, 7), cdfs)
    np.testing.assert_array_equal(marginal.points, reference.points)
    np.testing.assert_allclose(marginal.cdf_values, reference.cdf_values, rtol=1e-14, atol=0)
    # Three distinct boxes: the union of three grids of 7 points (one shared end).
    assert len(marginal.points) == len(np.unique(recorded_grid(boxes[[0, 3, 6]], 7)))
    with pytest.raises(ValueError, match="at least one draw"):
        average_recorded_conditionals(boxes[:0], cdfs[:0])
    with pytest.raises(ValueError, match=r"\(draws, 4\)"):
        average_recorded_conditionals(boxes[:, :3], cdfs)


def test_marginals_of_a_run_whose_boxes_move_are_those_of_every_draws_grid():
    """Tuning draws kept in a MultiTrace, while automatic boxes move and are refitted, and
    chains with boxes of their own: ``sfp_marginals`` equals the average of every draw's
    conditional on its own grid (``average_conditionals``), for a vector and a
    log-transformed variable."""
    with pm.Model():
        pm.Normal("x", [0.0, 3.0], 1.0)
        pm.HalfNormal("s", 1.0)
        with pytest.warns(FutureWarning, match="return_inferencedata=False"):
            trace = pm.sample(
                step=SFPStep(L=20),
                draws=10,
                tune=60,
                chains=2,
                cores=1,
                random_seed=4,
                initvals=[{"x": np.array([-1.0, 1.0])}, {"x": np.array([1.0, 4.0])}],
                discard_tuned_samples=False,
                return_inferencedata=False,
                progressbar=False,
                compute_convergence_checks=False,
            )
    marginals = pymc_sfp.sfp_marginals(trace)
    for name in ("x", "s"):
        boxes, cdfs = (
            np.concatenate(trace.get_sampler_stats(prefix + name, combine=False, squeeze=False))
            for prefix in (STAT_PREFIX_BOX, STAT_PREFIX_CDF)
        )
        # The boxes moved (x0 ± 10, then refitted at tuning draws 25 and 50).
        assert len(np.unique(boxes.reshape(len(boxes), -1), axis=0)) >= 3
        grids = recorded_grid(boxes, cdfs.shape[-1])
        for index in np.ndindex(*boxes.shape[1:-1]):
            reference = average_conditionals(grids[:, *index], cdfs[:, *index])
            marginal = np.asarray(marginals[name], dtype=object)[index]
            np.testing.assert_array_equal(marginal.points, reference.points)
            np.testing.assert_allclose(marginal.cdf_values, reference.cdf_values, rtol=1e-13)


def test_chains_whose_boxes_hold_different_modes_are_warned_about():
    """Chain 0's box holds both modes, chain 1's only the upper one: warned, naming both."""
    boxes = np.stack([np.tile([-20.0, 20.0, 0, 0], (3, 1)), np.tile([10.0, 20.0, 0, 0], (3, 1))])
    grids = recorded_grid(boxes, 21)
    cdfs = np.stack(
        [np.tile(0.3 * (grids[0, 0] > -15) + 0.7 * (grids[0, 0] > 15), (3, 1)),
         np.tile((grids[1, 0] > 15).astype(float), (3, 1))]
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"boxes of x disagree.*chain 0 puts 0\.3"):
        pymc_sfp.sfp_marginals(_tree(boxes, cdfs))
    # Boxes that both hold all the mass: no warning (but that of these step-function CDFs,
    # which put 70 % of the mass in one recorded cell).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*in one cell of the 21 recorded points")
        pymc_sfp.sfp_marginals(_tree(boxes[[0, 0]], cdfs[[0, 0]]))


def test_marginals_from_multitrace_match_the_datatree():
    """``return_inferencedata=False`` gives a MultiTrace: the same marginals are read from its
    sampler stats (the same seed gives the same draws either way)."""
    kwargs = dict(
        draws=15,
        tune=5,
        chains=2,
        cores=1,
        random_seed=21,
        progressbar=False,
        compute_convergence_checks=False,
    )
    with pm.Model():
        pm.Normal("x", [0.0, 2.0], 1.0)
        pm.HalfNormal("s", 1.0)
        idata = pm.sample(step=SFPStep(L=30, bounds=(-6, 8)), **kwargs)
        with pytest.warns(FutureWarning, match="return_inferencedata=False"):
            trace = pm.sample(
                step=SFPStep(L=30, bounds=(-6, 8)), return_inferencedata=False, **kwargs
            )
    assert isinstance(trace, pm.backends.base.MultiTrace)
    from_idata = pymc_sfp.sfp_marginals(idata)
    from_trace = pymc_sfp.sfp_marginals(trace)
    assert from_trace.keys() == from_idata.keys() == {"x", "s"}
    assert from_trace["x"].shape == (2,)
    for a, b in [
        *zip(from_trace["x"], from_idata["x"], strict=True),
        (from_trace["s"], from_idata["s"]),
    ]:
        np.testing.assert_array_equal(a.points, b.points)
        np.testing.assert_allclose(a.cdf_values, b.cdf_values, rtol=1e-12)
    assert pymc_sfp.sfp_marginals(trace, var_names=["s"]).keys() == {"s"}
    assert pymc_sfp.sfp_marginals(idata, var_names="s").keys() == {"s"}  # one name, as ArviZ


def test_marginals_of_something_else_is_a_clear_error():
    with pytest.raises(TypeError, match=r"DataTree.*MultiTrace"):
        pymc_sfp.sfp_marginals({"posterior": None})


def test_a_variable_of_size_zero_has_an_empty_array_of_marginals():
    with pm.Model() as model:
        pm.Normal("empty", 0.0, 1.0, shape=(0,))
        pm.Normal("a", 0.0, 1.0, shape=2)
    idata = sample(model, lambda: SFPStep(L=20, bounds=(-6, 6)), draws=10, tune=5)
    marginals = pymc_sfp.sfp_marginals(idata)
    assert marginals["empty"].shape == (0,) and marginals["a"].shape == (2,)
    with pytest.raises(TypeError, match="var_names must be a name or a list of names"):
        pymc_sfp.sfp_marginals(idata, var_names=3)


def test_marginals_on_each_scale_are_the_exact_marginals():
    """Independent coordinates, so each conditional is its marginal: a log-transformed variable
    (grid exp(u)), a lower-bounded one with per-element bounds (grid a + exp(u)) and an
    interval variable sampled on its support (grid on its own scale), each read back from
    the recorded boxes onto its own scale."""
    lower = np.array([1.0, 2.5])
    with pm.Model() as model:
        pm.HalfNormal("s", 1.0)
        pm.TruncatedNormal("t", mu=2.0, sigma=1.0, lower=lower)
        b = pm.Uniform("b", -1.0, 3.0)
        pm.Potential("tilt", -(b**2))  # b: N(0, 1/2) truncated to [-1, 3]
        step = SFPStep(L=200)
    recorded = recorded_conditionals(step, model, 3, seed=5)
    assert recorded.keys() == {"s", "t", "b"}
    b_exact = stats.truncnorm(-np.sqrt(2), 3 * np.sqrt(2), scale=np.sqrt(0.5))
    exact = {
        "s": (lambda x, _: stats.halfnorm.cdf(x), np.linspace(0.05, 3.0, 30)),
        "t": (
            lambda x, i: stats.truncnorm.cdf(x, lower[i] - 2.0, np.inf, loc=2.0),
            np.linspace(1.0, 5.0, 30),
        ),
        "b": (lambda x, _: b_exact.cdf(x), np.linspace(-1, 3, 30)),
    }
    for name, (exact_cdf, x) in exact.items():
        grids, cdfs = recorded[name]
        for index in np.ndindex(cdfs.shape[1:-1]):
            marginal = average_conditionals(grids[:, *index], cdfs[:, *index])
            truth = exact_cdf(x, index)
            # The conditional at L = 200, recorded at 100 points and interpolated linearly
            # between them: errors of order 1e-3; a wrong map of the grid is off by O(0.1).
            assert np.abs(marginal.cdf(x) - truth).max() < 5e-3, (name, index)


@pytest.mark.parametrize("L, refined", [(12, False), (8, True), (30, True)])
def test_the_acceptance_bounds_the_marginals_error_and_warns(L, refined, monkeypatch):
    """A coarse grid left unrefined mis-weights two modes 30 nats apart in each tabulated
    conditional: the draws stay exact, the marginals do not. ``1 −`` the mean acceptance bounds
    their error in total variation (an independence proposal's acceptance is at most
    ``1 − TV``), and sfp_marginals warns below 0.98. Refined, the same coarse grid resolves
    them."""
    if not refined:
        monkeypatch.setattr(pymc_sfp.core.sfp, "REFINEMENT_BUDGET", 0)
    target = pymc_sfp.datasets.multimodal_targets()["two-modes-110-nat"]
    idata = sample(
        target.model(), lambda: SFPStep(L=L), draws=300, tune=200, chains=2, random_seed=5
    )
    mean_accept = float(idata.sample_stats["accept"].mean())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [marginal] = pymc_sfp.sfp_marginals(idata)["x"]
    warned = [w for w in caught if "SFP acceptance averaged" in str(w.message)]
    assert bool(warned) == (mean_accept < 0.98), mean_accept
    error = abs(float(marginal.cdf(0.0)) - target.posterior_weights[0])
    assert error <= 1.0 - mean_accept + 1e-6  # the CDFs are recorded in float32
    if not refined:  # the case the warning is for: off by far more than the draws' error
        assert error > 0.05 and warned


def test_marginals_of_a_compound_explorer_of_parallel_tempering():
    """ParallelTempering records a CompoundStep explorer's stats as ``sampler_<i>__…``."""
    with pm.Model() as model:  # independent: mu | y ~ N(0.25, 0.5), nu ~ its prior
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=[0.5])
        pm.Normal("nu", 1.0, 2.0)

    def explorer(vars=None, model=None, **kwargs):
        return CompoundStep(
            [
                SFPStep([model["mu"]], model=model, L=50, **kwargs),
                SFPStep([model["nu"]], model=model, L=50, **kwargs),
            ]
        )

    idata = sample(
        model,
        lambda: pymc_sfp.ParallelTempering(explorer=explorer),
        draws=40,
        tune=40,
        chains=1,
    )
    marginals = pymc_sfp.sfp_marginals(idata)
    assert set(marginals) == {"mu", "nu"}
    assert marginals["mu"].cdf(0.0) == pytest.approx(stats.norm.cdf(0, 0.25, 0.5**0.5), abs=0.01)
    assert marginals["nu"].cdf(0.0) == pytest.approx(stats.norm.cdf(0, 1, 2), abs=0.01)


@pytest.mark.parametrize("trials", [10, 100_000])
def test_a_posterior_narrower_than_the_recorded_grid_is_warned_about(trials):
    """p ~ U(0, 1) after 0 successes in ``trials``: Beta(1, trials + 1). At 100,000 trials the
    posterior (mean 1e-5) lies inside the first of 98 recorded cells on [0, 1], and the
    marginal's mean came out at the cell's middle, 5e-3; at 10 it is resolved."""
    with pm.Model() as model:
        p = pm.Uniform("p", 0.0, 1.0)
        pm.Binomial("k", n=trials, p=p, observed=0)
    idata = sample(model, SFPStep, draws=100, tune=100, chains=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        marginal = pymc_sfp.sfp_marginals(idata)["p"]
    warned = [w for w in caught if "in one cell of the 99 recorded points" in str(w.message)]
    assert bool(warned) == (trials == 100_000)
    if trials == 10:
        assert marginal.mean() == pytest.approx(1 / 12, rel=0.02)
