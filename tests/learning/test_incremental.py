"""Tests for pymc_sfp.learning.incremental: SFP-I (Berrones 2009, Eq. 20–22).

One learner is fitted to an initial sine sample (module-scoped fixture: a compilation and 30 SFP
sweeps) and then fed the rest of the data one datum at a time.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytest
import xarray as xr

from pymc_sfp import SFPStep, sfp_marginals
from pymc_sfp.learning import IncrementalSFP, log_density_table
from pymc_sfp.marginals import STAT_PREFIX_BOX, STAT_PREFIX_CDF


def sine_data(n, rng):
    X = rng.uniform(-2, 2, size=(n, 1))
    return X, np.sin(1.5 * X[:, 0]) + 0.1 * rng.normal(size=n)


@pytest.fixture(scope="module")
def incremental():
    rng = np.random.default_rng(7)
    X, y = sine_data(70, rng)
    X_test = np.linspace(-2, 2, 41)[:, None]
    learner = IncrementalSFP((1, 5, 1), D=0.01, L=40, window=10, random_seed=1)
    # The stats of every sweep of the initial fit, as SFPStep returns them.
    fit_stats = []
    astep = SFPStep.astep

    def recording_astep(step, q):
        q, stats = astep(step, q)
        fit_stats.append(stats[0])
        return q, stats

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SFPStep, "astep", recording_astep)
        learner.fit(X[:10], y[:10], sweeps=30, discard=10)
    mse_initial = np.mean((learner.predict(X_test)[:, 0] - np.sin(1.5 * X_test[:, 0])) ** 2)
    return learner, X, y, X_test, mse_initial, fit_stats


@pytest.mark.slow
def test_incremental_learner_runs_without_recompiling(incremental, monkeypatch):
    learner, X, y, X_test, mse_initial, _ = incremental
    compiled = []
    original = pytensor.function

    def counting(*args, **kwargs):
        compiled.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(pytensor, "function", counting)
    step = learner.step
    n_draws = len(learner.draws)
    learner.partial_fit(X[10:], y[10:])
    assert compiled == []
    assert learner.step is step
    assert learner.n_data == 70 and len(learner.draws) == n_draws + 60
    assert len(learner.sweep_seconds) == 60

    mse_final = np.mean((learner.predict(X_test)[:, 0] - np.sin(1.5 * X_test[:, 0])) ** 2)
    # Measured with random_seed 1, 2, 3: final / initial = 0.74, 0.83, 0.80. The gain is modest
    # because the prior learned from the first 10 points stays fixed (Eq. 22).
    assert mse_final < 0.9 * mse_initial


@pytest.mark.slow
def test_incremental_prior_is_the_learned_marginals(incremental):
    learner = incremental[0]
    marginals = learner.prior_marginals["net_w0"]
    assert marginals.shape == (1, 5)
    lower, upper, table = log_density_table(marginals, points=learner.prior_points)
    prior = "net_w0_marginal_prior"
    np.testing.assert_allclose(learner.model[f"{prior}_logpdf"].get_value(), table)
    np.testing.assert_allclose(learner.model[f"{prior}_lower"].get_value(), lower)
    np.testing.assert_allclose(learner.model[f"{prior}_upper"].get_value(), upper)
    stored = table
    assert np.ptp(stored) > 1.0  # no longer the flat U(-1, 1) of the initial fit


@pytest.mark.slow
def test_incremental_prior_marginals_are_sfp_marginals_of_the_kept_sweeps(incremental):
    """Eq. 7 on the sweeps after ``discard``: the same marginals as :func:`sfp_marginals` of a
    DataTree holding those sweeps' stats, as ``pm.sample`` would record them."""
    learner, *_, fit_stats = incremental
    kept = fit_stats[10:]
    data = {}
    for key in kept[0]:
        if key.startswith((STAT_PREFIX_CDF, STAT_PREFIX_BOX)):
            # Each sweep's stat has a leading axis of length 1: stacked, (draws, *shape, points).
            values = np.concatenate([stats[key] for stats in kept])
            dims = tuple(f"{key}_dim_{j}" for j in range(values.ndim - 1))
            data[key] = (("chain", "draw", *dims), values[None])
    expected = sfp_marginals(xr.DataTree.from_dict({"sample_stats": xr.Dataset(data)}))
    learned = learner.prior_marginals
    assert list(learned) == ["net_w0", "net_w1", "net_b0", "net_b1"]
    assert set(expected) == set(learned)
    for name, marginals in expected.items():
        assert learned[name].shape == marginals.shape
        for index, marginal in np.ndenumerate(marginals):
            np.testing.assert_array_equal(learned[name][index].points, marginal.points)
            np.testing.assert_array_equal(learned[name][index].cdf_values, marginal.cdf_values)


@pytest.mark.slow
def test_incremental_learner_rejects_bad_input(incremental):
    learner = incremental[0]
    n = learner.n_data
    with pytest.raises(ValueError, match="1 column"):
        learner.partial_fit(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        learner.partial_fit(np.array([[0.1], [np.nan]]), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        learner.partial_fit(np.array([[0.1]]), np.array([np.inf]))
    with pytest.raises(ValueError, match="rows"):
        learner.partial_fit(np.zeros((3, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="rows"):
        learner.fit(np.zeros((3, 1)), np.zeros(2))
    assert learner.n_data == n and learner.prior_marginals
    # One datum of a one-input, one-output network may be given as two numbers.
    learner.partial_fit(0.3, np.sin(0.45))
    assert learner.n_data == n + 1
    fresh = IncrementalSFP((1, 5, 1), D=0.01)
    with pytest.raises(RuntimeError, match="fit"):
        fresh.partial_fit(np.zeros((1, 1)), np.zeros(1))
    with pytest.raises(RuntimeError, match="fit"):
        fresh.predict(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="discard"):
        fresh.fit(np.zeros((3, 1)), np.zeros(3), sweeps=10, discard=10)


@pytest.mark.slow
def test_a_refit_starts_over_on_the_same_model_with_the_draws_of_a_new_learner(monkeypatch):
    """``fit`` on a fitted learner (after ``partial_fit`` changed its rows): nothing recompiled,
    and with an integer seed the draws, prior and predictions of a new learner on that data."""
    rng = np.random.default_rng(3)
    (X1, y1), (X2, y2) = sine_data(8, rng), sine_data(12, rng)
    settings = dict(D=0.01, L=12, window=3, random_seed=5)
    fresh = IncrementalSFP((1, 3, 1), **settings).fit(X2, y2, sweeps=8, discard=3)
    fresh.partial_fit(X1[:2], y1[:2])
    reused = IncrementalSFP((1, 3, 1), **settings).fit(X1, y1, sweeps=8, discard=3)
    reused.partial_fit(X2[:3], y2[:3])
    model, step = reused.model, reused.step
    compiled = []
    original = pytensor.function

    def counting(*args, **kwargs):
        compiled.append(args)
        return original(*args, **kwargs)

    tuning = []
    astep = SFPStep.astep

    def recording_astep(step, q):
        tuning.append(step.tune)
        return astep(step, q)

    monkeypatch.setattr(pytensor, "function", counting)
    monkeypatch.setattr(SFPStep, "astep", recording_astep)
    reused.fit(X2, y2, sweeps=8, discard=3)
    reused.partial_fit(X1[:2], y1[:2])
    assert compiled == [] and reused.model is model and reused.step is step
    # The sampler's tuning starts over too (the U(-1, 1) boxes themselves are fixed).
    assert tuning == [True] * 3 + [False] * 7
    assert reused.n_data == fresh.n_data == 14
    assert len(reused.draws) == len(fresh.draws) == 10 and len(reused.sweep_seconds) == 2
    for reused_draw, fresh_draw in zip(reused.draws, fresh.draws, strict=True):
        assert reused_draw.keys() == fresh_draw.keys()
        for name, values in fresh_draw.items():
            np.testing.assert_array_equal(reused_draw[name], values)
    for name, marginals in fresh.prior_marginals.items():
        for index, marginal in np.ndenumerate(marginals):
            np.testing.assert_array_equal(
                reused.prior_marginals[name][index].cdf_values, marginal.cdf_values
            )
    X_test = np.linspace(-2, 2, 5)[:, None]
    np.testing.assert_array_equal(reused.predict(X_test), fresh.predict(X_test))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(layer_sizes=()), ValueError, "layer_sizes must be at least three"),
        (dict(layer_sizes=(1, 2.5, 1)), ValueError, "layer_sizes must be at least three"),
        (dict(D=0.0), ValueError, "D must be a finite number > 0"),
        (dict(D="0.01"), TypeError, "D must be a real number"),
        (dict(L=2), ValueError, "L must be"),
        (dict(output="tanh"), ValueError, "output must be 'linear' or 'softmax'"),
        (dict(prior_points=1), ValueError, "prior_points must be"),
        (dict(floor=1.0), ValueError, r"floor must be in \[0, 1\)"),
        (dict(random_seed="x"), TypeError, "random_seed must be a numpy.random.Generator"),
    ],
)
def test_incremental_learner_checks_its_settings_when_made(kwargs, error, match):
    settings = dict(layer_sizes=(1, 2, 1), D=0.01) | kwargs
    with pytest.raises(error, match=match):
        IncrementalSFP(settings.pop("layer_sizes"), **settings)


def test_a_failed_fit_leaves_the_learner_unfitted(monkeypatch):
    learner = IncrementalSFP((1, 2, 1), D=0.01, L=10, random_seed=0)
    X, y = np.linspace(-1, 1, 6)[:, None], np.linspace(-1, 1, 6)
    for sweeps, discard, match in [(2.5, 0, "sweeps"), (True, 0, "sweeps"), (6, 1.5, "discard")]:
        with pytest.raises((TypeError, ValueError), match=match):
            learner.fit(X, y, sweeps=sweeps, discard=discard)
        assert learner.model is None
    # A failure while sweeping: the learner must not pass for fitted (it has no prior of Eq. 21).
    calls = []

    def failing_astep(step, q):
        calls.append(q)
        raise FloatingPointError("a sweep failed")

    monkeypatch.setattr(SFPStep, "astep", failing_astep)
    with pytest.raises(FloatingPointError):
        learner.fit(X, y, sweeps=3, discard=1)
    assert calls and learner.model is None and learner.draws == []
    with pytest.raises(RuntimeError, match="call fit"):
        learner.partial_fit(0.1, 0.1)
