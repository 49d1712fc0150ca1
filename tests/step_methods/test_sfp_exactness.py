"""SFPStep's exactness claim where it is hard: hard constraints, NaN holes, posteriors far
narrower than their box, starts outside the support, a centred hierarchical funnel, distant modes
from dispersed starts; and the diagnostics when a conditional stays poor.

"Exact" means: with ``correct=True`` the chain targets the posterior restricted to the box, for
every ``L``, wherever the density is positive on the box. Tolerances are 4 Monte Carlo standard
errors (ArviZ's MCSE, which accounts for autocorrelation).
"""

import logging

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.blocking import DictToArrayBijection
from pymc.exceptions import SamplingError
from scipy import stats

from pymc_sfp import SFPStep
from pymc_sfp.core import sfp
from pymc_sfp.step_methods.sfp import STUCK_SWEEPS

SETTINGS = dict(progressbar=False, compute_convergence_checks=False)


def assert_within_mcse(draws, expected):
    """``draws`` of shape (chain, draw): their mean within 4 MCSE of ``expected``."""
    error = abs(draws.mean() - expected)
    assert error < 4 * float(az.mcse(draws)), (draws.mean(), expected)


@pytest.mark.slow
@pytest.mark.parametrize("bounds", [(-10.0, 10.0), None])
def test_hard_constraint_is_sampled_up_to_its_edge(bounds):
    """N(0, 1) with a −inf region x > 0: the mass right next to the edge is visited as often as
    it should be (it was not, when a cell with a −inf end got no proposal mass)."""
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("constraint", pt.switch(x > 0, -np.inf, 0.0))
        idata = pm.sample(
            step=SFPStep(bounds=bounds) if bounds else SFPStep(),
            tune=200,
            draws=2000,
            chains=2,
            cores=1,
            initvals={"x": -1.0},
            random_seed=1,
            **SETTINGS,
        )
    x = idata.posterior["x"].values
    assert_within_mcse(x, -np.sqrt(2 / np.pi))
    near_edge = ((x > -0.2) & (x < 0.0)).astype(float)
    assert_within_mcse(near_edge, 2 * (stats.norm.cdf(0.0) - stats.norm.cdf(-0.2)))
    assert x.max() <= 0.0


@pytest.mark.slow
def test_nan_hole_is_sampled_around():
    """A NaN log-density on (0.5, 1) counts as zero density; the mass beyond it is reached."""
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("hole", pt.switch((x > 0.5) & (x < 1.0), np.nan, 0.0))
        idata = pm.sample(
            step=SFPStep(bounds=(-8.0, 8.0)), tune=200, draws=2000, chains=2, cores=1,
            random_seed=2, **SETTINGS,
        )  # fmt: skip
    x = idata.posterior["x"].values
    hole = stats.norm.cdf(1.0) - stats.norm.cdf(0.5)
    assert_within_mcse((x > 1.0).astype(float), stats.norm.sf(1.0) / (1 - hole))
    assert not ((x > 0.5) & (x < 1.0)).any()
    assert int(idata.sample_stats["n_empty"].sum()) == 0


@pytest.fixture(scope="module")
def narrow_model():
    """mu ~ N(0, 1000²), 100 observations with sd 0.1: posterior sd 0.01, in a box 2e8 sds wide."""
    y = np.random.default_rng(0).normal(3.0, 0.1, 100)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1e3)
        pm.Normal("y", mu, 0.1, observed=y)
    precision = 1 / 1e3**2 + 100 / 0.1**2
    return model, y.sum() / 0.1**2 / precision, precision**-0.5


@pytest.mark.slow
@pytest.mark.parametrize("correct", [True, False])
def test_narrow_posterior_in_a_huge_box(narrow_model, correct):
    model, mean, sd = narrow_model
    with model:
        idata = pm.sample(
            step=SFPStep(bounds=(-1e6, 1e6), correct=correct), tune=100, draws=600, chains=2,
            cores=1, random_seed=3, **SETTINGS,
        )  # fmt: skip
    mu = idata.posterior["mu"].values
    assert_within_mcse(mu, mean)
    assert mu.std() == pytest.approx(sd, rel=0.15)
    st = idata.sample_stats
    assert float(st["accept"].mean()) > 0.9 and int(st["n_unresolved"].sum()) == 0


def test_under_resolved_conditional_is_counted_and_warned(narrow_model, monkeypatch):
    """Without refinement the same conditional is a spike between two nodes: the chain accepts
    nothing; that is counted, and warned about once each, naming the variable and the remedy."""
    monkeypatch.setattr(sfp, "REFINEMENT_BUDGET", 0)
    model, _, _ = narrow_model
    with model:
        step = SFPStep(bounds=(-1e6, 1e6), marginal_points=0)
    step.rng = np.random.default_rng(0)
    step.stop_tuning()
    q = DictToArrayBijection.map(model.initial_point())
    recorded = []
    for _ in range(STUCK_SWEEPS + 5):
        q, step_stats = step.astep(q)
        recorded.append(step_stats[0])
    assert all(s["n_unresolved"] == 1 for s in recorded)
    assert sum(s["accept"] for s in recorded) == 0
    messages = [s["warning"].message for s in recorded if s["warning"] is not None]
    assert len(messages) == 2
    assert "conditional of mu stays under-resolved" in messages[0] and "bounds" in messages[0]
    assert "stuck" in messages[1]


@pytest.mark.parametrize(
    ("build", "initvals", "name"),
    [
        (lambda: pm.Uniform("u", 0.0, 1.0), {"u": 2.0}, "u"),
        (lambda: pm.HalfNormal("s", 1.0), {"s": -1.0}, "s"),
    ],
)
def test_start_outside_the_support_is_refused(build, initvals, name):
    with pm.Model():
        build()
        with pytest.raises(SamplingError, match=rf"value of {name} is not a finite number"):
            pm.sample(
                step=SFPStep(), tune=5, draws=5, chains=1, initvals=initvals, random_seed=1,
                **SETTINGS,
            )  # fmt: skip


def test_start_in_a_zero_density_region_recovers():
    """A start where a potential is −inf (but the value is valid) is left at the first sweep."""
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("constraint", pt.switch(x > 0, -np.inf, 0.0))
        idata = pm.sample(
            step=SFPStep(bounds=(-10.0, 10.0)), tune=5, draws=50, chains=1,
            initvals={"x": 1.0}, random_seed=1, **SETTINGS,
        )  # fmt: skip
    assert (idata.posterior["x"].values <= 0).all()
    assert np.isfinite(idata.sample_stats["lp"].values).all()


@pytest.mark.slow
def test_centred_hierarchical_model_does_not_collapse():
    """The centred eight-schools-like funnel that once sent log τ to −630 during tuning."""
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        theta = pm.Normal("theta", mu, tau, shape=4)
        pm.Normal("y", theta, 1.0, observed=[0.544, 0.110, -0.523, 0.122])
        idata = pm.sample(
            step=SFPStep(), tune=300, draws=300, chains=1, random_seed=1043,
            discard_tuned_samples=False, **SETTINGS,
        )  # fmt: skip
    for group in ("warmup_sample_stats", "sample_stats"):
        st = idata[group]
        assert float(st["accept"].mean()) > 0.9
        assert int(st["n_empty"].sum()) == 0 and int(st["n_nonfinite"].sum()) == 0
    log_tau = np.log(idata.warmup_posterior["tau"].values)
    assert log_tau.min() > -20


@pytest.mark.slow
def test_automatic_boxes_find_a_distant_mode_from_dispersed_starts():
    """0.3 N(−15, 1) + 0.7 N(15, 1), one chain started at each mode: each chain's automatic box
    grows to hold both modes (probed during tuning), so each chain gets the weights right."""
    with pm.Model():
        x = pm.Flat("x")
        components = pm.logp(pm.Normal.dist([-15.0, 15.0], 1.0), x)
        pm.Potential("mixture", pm.math.logsumexp(np.log([0.3, 0.7]) + components))
        idata = pm.sample(
            step=SFPStep(), tune=300, draws=1500, chains=2, cores=1,
            initvals=[{"x": -15.0}, {"x": 15.0}], random_seed=3, **SETTINGS,
        )  # fmt: skip
    upper_mode = (idata.posterior["x"].values > 0).astype(float)
    for chain in upper_mode:
        assert_within_mcse(chain[None], 0.7)
    box = idata.sample_stats["sfp_box__x"].values
    assert (box[..., 0] < -20).all() and (box[..., 1] > 20).all()


def test_warnings_reach_the_main_process(caplog):
    """Warnings raised in chain processes travel as PyMC's ``warning`` stat and are logged by
    the main process (cores=2), once per chain."""
    with pm.Model():
        pm.Normal("n", 0.0, 0.05)
        with caplog.at_level(logging.WARNING, logger="pymc"):
            pm.sample(
                step=SFPStep(L=8, solver="collocation", bounds=(-5, 5), marginal_points=0),
                tune=10, draws=30, chains=2, cores=2, random_seed=1, **SETTINGS,
            )  # fmt: skip
    messages = [r.getMessage() for r in caplog.records if "not valid CDFs" in r.getMessage()]
    assert len(messages) == 2
    assert "solver='collocation', L=8" in messages[0]
