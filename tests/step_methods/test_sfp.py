"""SFPStep inside PyMC: statistical correctness against known answers, and PyMC citizenship.

Tolerances come from the Monte Carlo error: binomial standard errors for mode weights (draws of a
1-D target are independent), ArviZ's MCSE (which accounts for autocorrelation) elsewhere.
"""

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.blocking import DictToArrayBijection
from pymc.exceptions import SamplingError
from scipy import stats

import pymc_sfp
from pymc_sfp import SFPStep
from tests.helpers import sample

MIX_WEIGHTS = np.array([0.2, 0.2, 0.6])
MIX_MEANS = np.array([5.0, 20.0, 40.0])


def mixture_model():
    with pm.Model() as model:
        x = pm.Flat("x")
        pm.Potential(
            "mixture",
            pm.math.logsumexp(pt.log(MIX_WEIGHTS) + pm.logp(pm.Normal.dist(MIX_MEANS, 2), x)),
        )
    return model


def sweeps(step, model, n, start=None, seed=0):
    """Run ``n`` sweeps of ``step`` directly (no pm.sample overhead); returns draws and stats."""
    step.rng = np.random.default_rng(seed)
    q = DictToArrayBijection.map(start or model.initial_point())
    draws, all_stats = [], []
    for _ in range(n):
        q, step_stats = step.astep(q)
        draws.append(q.data.copy())
        all_stats.append(step_stats[0])
    return np.array(draws), all_stats


@pytest.fixture(scope="module")
def mixture_idata():
    model = mixture_model()
    with model:
        return pm.sample(
            draws=3000,
            tune=100,
            chains=2,
            cores=1,
            step=SFPStep(bounds=(-10, 60)),
            random_seed=11,
            progressbar=False,
            compute_convergence_checks=False,
        )


def test_mixture_mode_weights_per_chain(mixture_idata):
    x = mixture_idata.posterior["x"].values
    n = x.shape[1]
    for chain in x:
        weights = [
            np.mean(chain < 12.5),
            np.mean((chain > 12.5) & (chain < 30)),
            np.mean(chain > 30),
        ]
        for w, true in zip(weights, MIX_WEIGHTS, strict=True):
            se = np.sqrt(true * (1 - true) / n)
            assert abs(w - true) < 0.03  # the requirement ...
            assert abs(w - true) < 4 * se  # ... which is about 3.4 binomial standard errors here
    pooled = x.ravel()
    se_mean = 14.42 / np.sqrt(pooled.size)
    assert abs(pooled.mean() - 29.0) < 4 * se_mean
    assert abs(pooled.std() - 14.42) < 4 * 14.42 / np.sqrt(2 * pooled.size) * 1.5


def test_mixture_stats_declared_and_clean(mixture_idata):
    st = mixture_idata.sample_stats
    assert float(st["accept"].mean()) > 0.99
    assert int(st["n_invalid"].sum()) == 0
    assert int(st["n_nonfinite"].sum()) == 0
    # The start, the L = 50 grid points, what refinement adds (at most 4 L), the proposal.
    evaluations = st["n_logp_evals"].values
    assert evaluations.min() >= 52
    assert evaluations.max() <= 2 + 5 * 50
    assert np.isfinite(st["lp"].values).all()


def test_sfp_marginal_of_mixture(mixture_idata):
    marginal = pymc_sfp.sfp_marginals(mixture_idata)["x"]
    grid = np.linspace(-5, 55, 121)
    true_pdf = np.sum(MIX_WEIGHTS * stats.norm.pdf(grid[:, None], MIX_MEANS, 2), axis=1)
    assert np.abs(marginal.pdf(grid) - true_pdf).max() < 0.01 * true_pdf.max() * 5
    assert marginal.cdf(12.5) == pytest.approx(0.2, abs=2e-3)
    # Mode resolution is limited by the recording grid (100 points over 70 units, 0.7 apart).
    assert marginal.mode() == pytest.approx(40.0, abs=0.25)
    assert marginal.mean() == pytest.approx(29.0, abs=0.05)


def test_separable_target_converges_in_one_sweep():
    # Each coordinate is a two-mode mixture; after ONE sweep from a fixed start the draws already
    # follow the target (paper, Sec. 2). 1000 independent single sweeps, KS test per coordinate.
    with pm.Model():
        z = pm.Flat("z", shape=3)
        pm.Potential(
            "separable",
            pm.math.logsumexp(
                pt.stack(
                    [
                        np.log(0.3) + pm.logp(pm.Normal.dist(-4, 1), z),
                        np.log(0.7) + pm.logp(pm.Normal.dist(3, 1.5), z),
                    ]
                ),
                axis=0,
            ).sum(),
        )
        step = SFPStep(bounds=(-15, 15), marginal_points=0)
    start = {"z": np.full(3, 10.0)}
    q0 = DictToArrayBijection.map(start)
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(1000):
        step.rng = np.random.default_rng(rng.integers(2**32))
        draws.append(step.astep(q0)[0].data)
    draws = np.array(draws)

    def target_cdf(v):
        return 0.3 * stats.norm.cdf(v, -4, 1) + 0.7 * stats.norm.cdf(v, 3, 1.5)

    for j in range(3):
        assert stats.kstest(draws[:, j], target_cdf).pvalue > 1e-3


@pytest.mark.slow
def test_correlated_gaussian_exact_covariance():
    cov = np.array([[1.0, 1.2], [1.2, 4.0]])  # correlation 0.6
    with pm.Model():
        pm.MvNormal("v", mu=np.zeros(2), cov=cov)
        step = SFPStep(L=40, bounds=(-12, 12), marginal_points=0)
        idata = pm.sample(
            draws=2500,
            tune=100,
            chains=2,
            cores=1,
            step=step,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    v = idata.posterior["v"]
    products = {
        "v0v0": (v.isel(v_dim_0=0) ** 2, cov[0, 0]),
        "v1v1": (v.isel(v_dim_0=1) ** 2, cov[1, 1]),
        "v0v1": (v.isel(v_dim_0=0) * v.isel(v_dim_0=1), cov[0, 1]),
    }
    for name, (values, truth) in products.items():
        mcse = float(az.mcse(values.rename(name).to_dataset()).to_array().squeeze())
        assert abs(float(values.mean()) - truth) < 4 * mcse, name


@pytest.mark.slow
def test_uncorrected_sampler_depends_on_L_and_correction_fixes_it():
    model = mixture_model()
    with model:
        rough = SFPStep(L=50, solver="collocation", bounds=(-10, 60), correct=False)
        exact = SFPStep(L=50, solver="collocation", bounds=(-10, 60), correct=True)
    # L = 50 gives a monotone but wrong collocation CDF for this mixture (barrier effect).
    wrong, _ = sweeps(rough, model, 2000)
    right, right_stats = sweeps(exact, model, 2000)
    se = np.sqrt(0.6 * 0.4 / 2000)
    assert abs(np.mean(wrong > 30) - 0.6) > 6 * se
    assert abs(np.mean(right > 30) - 0.6) < 4 * se * np.sqrt(1 / 0.5)  # acceptance ≥ 0.5
    assert np.mean([s["accept"] for s in right_stats]) > 0.5


@pytest.mark.slow
def test_ring_3d_moments():
    # Eq. 12 (Neal's ring), box [-20, 20]^3; exact moments by quadrature on a grid.
    with pm.Model():
        r = pm.Flat("r", shape=3)
        sq = pt.sum(r**2)
        pm.Potential("ring", -(0.5 * sq + pt.sum(r) ** 2 + 10000 / (1 + sq)))
        step = SFPStep(L=150, bounds=(-20, 20), marginal_points=0)
        idata = pm.sample(
            draws=1500,
            tune=100,
            chains=4,
            cores=1,
            step=step,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    g = np.linspace(-20, 20, 241)
    X, Y, Z = np.meshgrid(g, g, g, indexing="ij")
    s2 = X**2 + Y**2 + Z**2
    logp = -(0.5 * s2 + (X + Y + Z) ** 2 + 10000 / (1 + s2))
    p = np.exp(logp - logp.max())
    p /= p.sum()
    true_sd = np.sqrt(np.sum(p * X**2))
    assert true_sd == pytest.approx(6.88, abs=0.02)
    r_draws = idata.posterior["r"]
    for j in range(3):
        values = r_draws.isel(r_dim_0=j).rename("x").to_dataset()
        mcse = float(az.mcse(values).to_array().squeeze())
        assert abs(float(values["x"].mean())) < 4 * mcse
        sq_values = (r_draws.isel(r_dim_0=j) ** 2).rename("x2").to_dataset()
        mcse_sq = float(az.mcse(sq_values).to_array().squeeze())
        assert abs(float(sq_values["x2"].mean()) - true_sd**2) < 4 * mcse_sq


def test_interval_variable_sampled_on_its_support():
    # Uniform(-1, 1) prior times a normal likelihood: exact posterior on [-1, 1] by quadrature.
    data = np.array([0.9, 1.3, 0.7, 1.1])
    with pm.Model() as model:
        w = pm.Uniform("w", -1, 1)
        pm.Normal("y", w, 0.5, observed=data)
        step = SFPStep(L=60)
    draws, step_stats = sweeps(step, model, 4000)
    w_draws = draws[:, 0]  # PyMC's unconstrained (log-odds) value
    w_draws = -1 + 2 / (1 + np.exp(-w_draws))
    grid = np.linspace(-1, 1, 20001)
    post = np.exp(stats.norm.logpdf(data[:, None], grid, 0.5).sum(0))
    post /= np.trapezoid(post, grid)
    mean = np.trapezoid(grid * post, grid)
    sd = np.sqrt(np.trapezoid((grid - mean) ** 2 * post, grid))
    assert abs(w_draws.mean() - mean) < 4 * sd / np.sqrt(len(w_draws))
    assert np.isfinite(draws).all()
    box_stat = step_stats[-1]["sfp_box__w"][0]  # one draw: shape (1, 4)
    np.testing.assert_array_equal(box_stat, [-1, 1, 0, 0])  # the box is the support


def test_interval_of_data_bounds_follows_set_data():
    # A pm.Data bound may change under a reused step: the variable is sampled on PyMC's
    # unconstrained scale, so its draws and marginals follow the new support (with the support
    # frozen when the step was built, the marginal stayed on [0, 1] with mean 0.5).
    with pm.Model():
        upper = pm.Data("upper", 1.0)
        pm.Uniform("u", 0.0, upper)
        step = SFPStep(L=30)
        assert not step.layout.interval.any()
        pm.set_data({"upper": 10.0})
        idata = pm.sample(
            draws=2000,
            tune=200,
            chains=1,
            step=step,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["u"].values.ravel()
    assert draws.max() > 9.0
    # The prior U(0, 10): on the log-odds scale a standard logistic, mean 0 and sd π/√3 (the
    # Rao–Blackwellised mean has a smaller error than the draws' own).
    marginal = pymc_sfp.sfp_marginals(idata)["u_interval__"]
    assert abs(marginal.mean()) < 4 * (np.pi / np.sqrt(3)) / np.sqrt(2000)
    assert abs(draws.mean() - 5.0) < 4 * 10 / np.sqrt(12 * 2000)


def test_step_function_likelihood_with_quadrature():
    # Zero gradient almost everywhere: a normal truncated to x > 0.5 via a step potential.
    with pm.Model() as model:
        x = pm.Normal("x", 0, 1)
        pm.Potential("cut", pt.switch(x > 0.5, 0.0, -np.inf))
        step = SFPStep(bounds=(-6, 6), marginal_points=0)
    draws, step_stats = sweeps(step, model, 3000, start={"x": np.array(1.0)})
    truncated = stats.truncnorm(0.5, np.inf)
    assert draws.min() > 0.5
    assert abs(draws.mean() - truncated.mean()) < 4 * truncated.std() / np.sqrt(3000)
    assert sum(s["n_nonfinite"] for s in step_stats) > 0  # counted, never written


@pytest.mark.parametrize(("L", "points"), [(50, 99), (20, 39), (100, 100), (150, 150)])
def test_marginals_are_recorded_at_the_nodes_and_middles_by_default(L, points):
    """About 100 points or more, each a node of the grid or a cell's middle: ``2 L − 1`` below
    ``L = 100``, the ``L`` nodes from there on."""
    with pm.Model():
        pm.Normal("a", 0.0, 1.0, shape=2)
        step = SFPStep(L=L)
    assert step.marginal_points == points
    assert step.stats_dtypes_shapes["sfp_cdf__a"] == (object, [2, points])
    fractions = np.linspace(0.0, 1.0, points)
    nodes = np.linspace(0.0, 1.0, L)
    middles = 0.5 * (nodes[1:] + nodes[:-1])
    gap = np.abs(fractions[:, None] - np.concatenate([nodes, middles])[None, :]).min(axis=1)
    assert gap.max() < 1e-15


def test_automatic_box_adapts_during_tuning():
    with pm.Model():
        pm.Normal("a", 300.0, 50.0)
        step = SFPStep(marginal_points=20)
        idata = pm.sample(
            draws=1500,
            tune=200,
            chains=2,
            cores=1,
            step=step,
            random_seed=4,
            progressbar=False,
            compute_convergence_checks=False,
        )
    box = idata.sample_stats["sfp_box__a"].values
    lower, upper = box[..., 0], box[..., 1]
    # Frozen after tuning, covering the posterior with margin, and not absurdly wide.
    assert np.all(lower == lower[:, :1]) and np.all(upper == upper[:, :1])
    assert np.all(lower < 300 - 5 * 50) and np.all(upper > 300 + 5 * 50)
    assert np.all(upper - lower < 40 * 50)
    a = idata.posterior["a"].values.ravel()
    assert abs(a.mean() - 300) < 4 * 50 / np.sqrt(a.size)
    assert int(idata.sample_stats["n_edge_hits"].sum()) == 0


def test_invalid_collocation_detected_counted_and_replaced():
    with pm.Model() as model:
        pm.Normal("n", 0.0, 0.05)
        step = SFPStep(L=8, solver="collocation", bounds=(-5, 5), marginal_points=0)
    draws, step_stats = sweeps(step, model, 300)
    assert sum(s["n_invalid"] for s in step_stats) > 0
    warnings_ = [s["warning"] for s in step_stats if s["warning"] is not None]
    assert len(warnings_) == 1  # once per chain, naming the solver in use
    assert "not valid CDFs (solver='collocation', L=8" in warnings_[0].message
    assert np.isfinite(draws).all() and np.all(np.abs(draws) <= 5)
    assert abs(draws.mean()) < 4 * 0.05 / np.sqrt(300) * 3


@pytest.mark.parametrize("correct", [True, False])
def test_collocation_does_not_propose_where_the_density_is_zero(correct):
    """Collocation solves with gradients, which a hard constraint does not show: a line with
    -inf log-densities takes the quadrature conditional. Uncorrected, the collocation ŷ put
    mass below 0 and the chain stepped there; corrected, a start below 0 could not be left."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("positive", pt.switch(x < 0, -np.inf, 0.0))
    idata = sample(
        model,
        lambda: SFPStep(solver="collocation", L=50, correct=correct),
        draws=1000,
        tune=100,
        initvals={"x": -1.0 if correct else 1.0},
        random_seed=2,
    )
    draws = idata.posterior["x"]
    assert float(draws.min()) > 0.0
    if correct:  # the half-normal's mean
        mcse = float(az.mcse(draws.rename("x").to_dataset())["x"])
        assert abs(float(draws.mean()) - np.sqrt(2 / np.pi)) < 4 * mcse


@pytest.mark.parametrize("prior", [pm.Flat, pm.HalfFlat])
def test_an_improper_posterior_stops_tuning_with_a_named_error(prior):
    """With no data the automatic box tripled on every edge hit until the sweep's arithmetic
    overflowed (a bare ZeroDivisionError from the compiled sweep, inf draws before it)."""
    with pm.Model() as model:
        prior("x")
    with pytest.raises(SamplingError, match=r"automatic box of x.*looks improper"):
        sample(model, SFPStep, draws=10, tune=1000, chains=1)


def test_reproducible_across_cores_and_compound_with_metropolis():
    with pm.Model():
        pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        kwargs = dict(
            draws=30,
            tune=10,
            chains=2,
            random_seed=123,
            progressbar=False,
            compute_convergence_checks=False,
        )

        def steps():
            return [SFPStep(["a"], L=20, bounds=(-8, 8), marginal_points=0), pm.Metropolis([b])]

        one = pm.sample(cores=1, step=steps(), **kwargs)
        two = pm.sample(cores=2, step=steps(), **kwargs)
        again = pm.sample(cores=1, step=steps(), **kwargs)
        reversed_order = pm.sample(cores=1, step=steps()[::-1], **kwargs)
    for name in ("a", "b"):
        np.testing.assert_array_equal(one.posterior[name].values, two.posterior[name].values)
        np.testing.assert_array_equal(one.posterior[name].values, again.posterior[name].values)
    assert not np.array_equal(one.posterior["a"].values[0], one.posterior["a"].values[1])
    assert np.isfinite(reversed_order.posterior["a"].values).all()
    assert "accept" in one.sample_stats and "n_invalid" in one.sample_stats


def test_reused_step_starts_afresh_in_parallel_sampling():
    """PyMC's parallel sampling sends the step as it is, without ``reset_tuning``: a step that
    ran before (its automatic boxes tuned) must start as a fresh one does. (Two coordinates:
    the box of a lone one does not depend on the chain.)"""
    with pm.Model() as model:
        a = pm.Normal("a", 0, 1)
        pm.Normal("y", a, pm.HalfNormal("s", 1), observed=[0.1, -0.3, 0.5, 1.2])
    with model:
        reused = SFPStep(L=20, marginal_points=0)
    runs = dict(draws=20, tune=50, cores=2)  # tune past the boxes' first refit
    fresh = sample(model, lambda: SFPStep(L=20, marginal_points=0), **runs)
    sample(model, lambda: reused, **{**runs, "cores": 1, "random_seed": 8})
    again = sample(model, lambda: reused, **runs)
    np.testing.assert_array_equal(fresh.posterior["a"].values, again.posterior["a"].values)


def test_a_step_reused_on_new_data_draws_what_a_new_step_does():
    """One network model and step for several data sets of one shape (``pm.set_data`` between
    runs, nothing rebuilt): a run draws what a step built for that data draws. A softmax
    network on Berrones' quadratic loss, whose coordinates take the network's cached line."""
    rng = np.random.default_rng(4)
    data = [(rng.normal(size=(30, 3)), np.eye(3)[rng.integers(0, 3, 30)]) for _ in range(2)]

    def network_model(X, onehot):
        with pm.Model() as model:
            net = pymc_sfp.nn.mlp(X, (3, 2, 3), output="softmax", prior="uniform")
            pymc_sfp.nn.gaussian_likelihood(net, onehot, D=0.05)
        return model

    runs = dict(draws=15, tune=10, chains=1, random_seed=11)
    fresh_model = network_model(*data[1])
    with fresh_model:
        fresh_step = SFPStep(L=15, marginal_points=0)
    assert fresh_step.evaluator.structured.all()
    fresh = sample(fresh_model, lambda: fresh_step, **runs)
    model = network_model(*data[0])
    with model:
        reused = SFPStep(L=15, marginal_points=0)
    sample(model, lambda: reused, **{**runs, "random_seed": 12})
    pm.set_data({"net_X": data[1][0], "net_y_data": data[1][1]}, model=model)
    again = sample(model, lambda: reused, **runs)
    for name in ("net_w0", "net_w1", "net_b0", "net_b1"):
        np.testing.assert_array_equal(again.posterior[name].values, fresh.posterior[name].values)


@pytest.mark.slow
def test_spawn_multiprocessing_matches_fork():
    with pm.Model():
        pm.Normal("a", 0, 1)
        kwargs = dict(
            draws=20,
            tune=5,
            chains=2,
            cores=2,
            random_seed=9,
            progressbar=False,
            compute_convergence_checks=False,
        )
        fork = pm.sample(step=SFPStep(L=20, bounds=(-8, 8)), **kwargs)
        spawn = pm.sample(step=SFPStep(L=20, bounds=(-8, 8)), mp_ctx="spawn", **kwargs)
    np.testing.assert_array_equal(fork.posterior["a"].values, spawn.posterior["a"].values)
    marginal = pymc_sfp.sfp_marginals(spawn)["a"]
    assert marginal.cdf(0.0) == pytest.approx(0.5, abs=1e-3)


def test_progressbar_runs():
    with pm.Model():
        pm.Normal("a", 0, 1)
        idata = pm.sample(
            draws=5,
            tune=5,
            chains=1,
            step=SFPStep(L=10, bounds=(-8, 8)),
            progressbar=True,
            random_seed=1,
            compute_convergence_checks=False,
        )
    assert idata.posterior["a"].shape == (1, 5)


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"L": 2}, "L must be"),
            ({"D": 0.0}, "D must be"),
            ({"D": -1.0}, "D must be"),
            ({"solver": "spline"}, "solver must be"),
            ({"order": "backwards"}, "order must be"),
            ({"bounds": (3.0, 1.0)}, r"a\[0\].*lower < upper"),
            ({"bounds": {"a": ([0, 1, 2], [1, 2, 3])}}, "broadcastable to its shape"),
            ({"bounds": {"nope": (0, 1)}}, "unknown variables"),
            ({"bounds": (2.0, 3.0)}, r"initial value of a\[0\].*outside its box"),
            ({"marginal_points": 1}, "marginal_points"),
        ],
    )
    def test_invalid_arguments(self, kwargs, match):
        with pm.Model():
            pm.Normal("a", 0, 1, shape=2)
            with pytest.raises(ValueError, match=match):
                SFPStep(**kwargs)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"D": "2"}, "D must be a real number, got '2'"),
            ({"D": None}, "D must be a real number"),
            ({"D": True}, "D must be a real number"),
            ({"L": "100"}, "L must be an integer >= 3, got '100'"),
            ({"marginal_points": False}, "marginal_points must be"),
            ({"correct": "no"}, "correct must be True or False, got 'no'"),
            ({"batched": None}, "batched must be True or False, got None"),
        ],
    )
    def test_arguments_of_the_wrong_type(self, kwargs, match):
        with pm.Model():
            pm.Normal("a", 0, 1, shape=2)
            with pytest.raises(TypeError, match=match):
                SFPStep(**kwargs)

    @pytest.mark.parametrize(
        ("make", "bounds", "match"),
        [
            (
                lambda: pm.Beta("b", 2, 2),
                {"b": (0.2, 0.8)},
                r"initial value of b \(sampled as b_logodds__, on PyMC's transformed scale",
            ),
            (
                lambda: pm.Dirichlet("w", np.ones(3)),
                {"w": (np.zeros(3), np.ones(3))},
                r"shape \(2,\) \(sampled as w_simplex__",
            ),
        ],
        ids=["Beta", "Dirichlet"],
    )
    def test_bounds_on_a_transformed_scale_name_it(self, make, bounds, match):
        with pm.Model():
            make()
            with pytest.raises(ValueError, match=match):
                SFPStep(bounds=bounds)

    def test_bounds_outside_interval_support(self):
        with pm.Model():
            pm.Uniform("u", 0, 1)
            with pytest.raises(ValueError, match=r"u.*leave its support"):
                SFPStep(bounds={"u": (-1, 0.5)})
