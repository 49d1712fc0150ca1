"""Tests for pymc_sfp.smc.sequential: sequential training of a PyMC model's weights.

On a linear-Gaussian model the EKF through PyTensor's Jacobian must equal the Kalman filter, and
the particle filters must be exactly the core's SIR / SIPR steps (whose agreement with the Kalman
filter within Monte Carlo error is tested in tests/core/test_particles.py). On de Freitas et al.'s
(1998) experiment 2, a student network with one hidden unit learns from a teacher of the same
shape: the filtered means converge to the teacher's weights (stationary) and follow a weight
that changes (non-stationary).
"""

from __future__ import annotations

import copy

import numpy as np
import pymc as pm
import pytensor
import pytest

import pymc_sfp as ps
from pymc_sfp.core.particles import KalmanState, init_particles, kalman_filter, particle_step

D, T, Q_SD, R_SD = 2, 20, 0.05, 0.5


@pytest.fixture(scope="module")
def linear():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(T, D))
    w = rng.normal(size=D) + np.cumsum(Q_SD * rng.normal(size=(T, D)), axis=0)
    y = np.sum(X * w, axis=1) + R_SD * rng.normal(size=T)
    with pm.Model() as model:
        X_data = pm.Data("X", X[:1])
        y_data = pm.Data("y", y[:1])
        weights = pm.Normal("w", 0.0, 1.0, shape=D)
        pm.Normal("obs", X_data @ weights, R_SD, observed=y_data)
    return model, X, y


@pytest.mark.parametrize("ekf_start", ["mode", "draw"])
def test_ekf_equals_the_kalman_filter(linear, ekf_start):
    """From the prior's mode the EKF of a linear model is the Kalman filter of the prior; from a
    draw of the prior, the Kalman filter started there with the prior's covariance."""
    model, X, y = linear
    kwargs = {"method": "ekf", "process_sd": Q_SD, "random_seed": 4, "ekf_start": ekf_start}
    start = ps.SequentialFilter(model, **kwargs).state.mean
    if ekf_start == "mode":
        np.testing.assert_array_equal(start, np.zeros(D))
    else:
        assert np.all(start != 0)
    idata = ps.sample_sequential(model, {"X": X, "y": y}, progressbar=False, **kwargs)
    assert idata.attrs["ekf_start"] == ekf_start
    means, covs, log_evidence = kalman_filter(y, X, KalmanState(start, np.eye(D)), Q_SD**2, R_SD**2)
    np.testing.assert_allclose(idata["filtered_mean"]["w"], means, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        idata["filtered_sd"]["w"], np.sqrt(np.diagonal(covs, axis1=1, axis2=2)), rtol=1e-8
    )
    np.testing.assert_allclose(idata["filter_stats"]["log_evidence"], log_evidence, rtol=1e-9)
    assert idata.attrs["log_evidence"] == pytest.approx(log_evidence.sum(), rel=1e-10)
    # The predictive of step k is made from the filtered state of step k - 1.
    previous = np.vstack([start, means[:-1]])
    predictive = idata["predictive"]
    np.testing.assert_allclose(predictive["mean"], np.sum(X * previous, axis=1), atol=1e-12)
    assert np.all(predictive["lower"] < predictive["mean"])
    assert idata["posterior"]["w"].shape == (1, 1000, D)
    assert np.isnan(idata["filter_stats"]["distinct"].values).all()  # no particles


@pytest.mark.parametrize("method", ["sir", "sipr"])
def test_particle_filters_are_the_core_steps(linear, method):
    """The compiled, batched likelihood and the plumbing reproduce the core's SIR / SIPR run
    with a NumPy likelihood, draw for draw, from the same cloud and random stream."""
    model, X, y = linear
    filt = ps.SequentialFilter(model, method=method, particles=300, process_sd=Q_SD, random_seed=9)
    state = init_particles(filt.state.particles.copy())
    rng = copy.deepcopy(filt._rng)
    threshold = 1.0 if method == "sir" else 0.5
    for x_k, y_k in zip(X, y, strict=True):
        result = filt.update({"X": x_k, "y": [y_k]})

        def log_likelihood(w, x_k=x_k, y_k=y_k):
            return -0.5 * ((y_k - w @ x_k) / R_SD) ** 2 - np.log(R_SD * np.sqrt(2 * np.pi))

        state, info = particle_step(
            state, log_likelihood, rng, process_sd=Q_SD, ess_threshold=threshold
        )
        # Equal up to the rounding of PyTensor's fused constants (≈ 1e-9 relative).
        assert result.log_evidence == pytest.approx(info.log_evidence, rel=1e-8)
        assert result.resampled == info.resampled
        assert result.ess == pytest.approx(info.ess, rel=1e-8)
    np.testing.assert_allclose(filt.state.particles, state.particles, rtol=1e-12)
    idata = filt.to_datatree()
    mean = np.exp(state.log_weights) @ state.particles
    np.testing.assert_allclose(idata["filtered_mean"]["w"][-1], mean, rtol=1e-8)
    resampled = idata["filter_stats"]["resampled"].values
    assert resampled.all() if method == "sir" else 0 < resampled.sum() < T


def test_incremental_updates_equal_a_batch_run(linear):
    model, X, y = linear
    batch = ps.sample_sequential(
        model,
        {"X": X, "y": y},
        method="sipr",
        particles=200,
        process_sd=Q_SD,
        random_seed=3,
        progressbar=False,
    )
    filt = ps.SequentialFilter(model, method="sipr", particles=200, process_sd=Q_SD, random_seed=3)
    for x_k, y_k in zip(X, y, strict=True):
        filt.update({"X": x_k, "y": [y_k]})
    np.testing.assert_array_equal(
        filt.to_datatree()["filtered_mean"]["w"], batch["filtered_mean"]["w"]
    )


def test_the_model_labels_are_coordinates(linear):
    """The model's coords label the weights as ``pm.sample`` labels them: coordinates to select
    by, not attributes (which also made the tree unwritable to netCDF)."""
    _, X, y = linear
    with pm.Model(coords={"feature": ["a", "b"], "row": [0]}) as model:
        X_data = pm.Data("X", X[:1])
        y_data = pm.Data("y", y[:1], dims="row")
        weights = pm.Normal("w", 0.0, 1.0, dims="feature")
        pm.Normal("obs", X_data @ weights, R_SD, observed=y_data, dims="row")
    tree = ps.sample_sequential(
        model, {"X": X, "y": y}, particles=50, process_sd=Q_SD, random_seed=1, progressbar=False
    )
    for group in ("posterior", "filtered_mean", "filtered_sd"):
        w = tree[group]["w"]
        assert w.attrs == {} and list(w["feature"].values) == ["a", "b"]
        assert w.sel(feature="b").shape == w.shape[:-1]
    posterior = tree["posterior"]
    np.testing.assert_array_equal(posterior["draw"], np.arange(50))
    np.testing.assert_array_equal(posterior["chain"], [0])
    assert tree["predictive"]["mean"].attrs == {}


def test_missing_observations_are_skipped_or_refused(linear):
    model, X, y = linear
    y_missing = y.copy()
    y_missing[[3, 7]] = np.nan
    idata = ps.sample_sequential(
        model,
        {"X": X, "y": y_missing},
        method="ekf",
        process_sd=Q_SD,
        progressbar=False,
    )
    stats = idata["filter_stats"]
    np.testing.assert_array_equal(np.flatnonzero(stats["skipped"]), [3, 7])
    assert stats["log_evidence"][3] == 0 and np.isfinite(idata.attrs["log_evidence"])
    # A skipped step still predicts (the inputs are there) and lets the weights drift.
    assert np.isfinite(idata["predictive"]["mean"][3])
    sd = idata["filtered_sd"]["w"].values
    assert np.all(sd[3] > sd[2])
    with pytest.raises(ValueError, match="observation 3 has missing"):
        ps.sample_sequential(
            model, {"X": X, "y": y_missing}, method="ekf", missing="raise", progressbar=False
        )


def test_all_particles_impossible_is_a_recoverable_error(linear):
    model, X, y = linear
    y_bad = y.copy()
    y_bad[4] = 1e200  # ((y - g) / R)² overflows: every log-likelihood is -inf.
    with pytest.raises(ps.DegenerateWeightsError, match="observation 4 of the stream") as error:
        ps.sample_sequential(
            model, {"X": X, "y": y_bad}, particles=100, random_seed=1, progressbar=False
        )
    filt = error.value.filter
    assert filt.steps == 4
    # Recover: skip the bad observation and go on.
    for k in range(5, T):
        filt.update({"X": X[k], "y": [y[k]]})
    assert filt.to_datatree()["filter_stats"].sizes["step"] == T - 1


@pytest.mark.parametrize("move", ["metropolis", "dynamics"])
def test_resample_move_rejuvenates_a_static_cloud(linear, move):
    model, X, y = linear
    kwargs = dict(particles=300, random_seed=4, progressbar=False)
    plain = ps.sample_sequential(model, {"X": X, "y": y}, **kwargs)
    moved = ps.sample_sequential(model, {"X": X, "y": y}, move=move, **kwargs)
    acceptance = moved["filter_stats"]["acceptance"].values
    assert np.all((acceptance > 0.05) & (acceptance < (0.95 if move == "metropolis" else 1.0)))
    assert moved["filter_stats"]["move_divergences"].sum() == 0
    # Static weights (process_sd = 0): SIR alone can only lose distinct particles; the moves
    # restore them.
    distinct = [len(np.unique(i["posterior"]["w"].values[0], axis=0)) for i in (plain, moved)]
    assert distinct[0] < 100 and distinct[1] > 200
    # The distinct stat counts them: without noise or moves it can only fall, and it ends at
    # the cloud's count.
    counts = plain["filter_stats"]["distinct"].values
    assert np.all(np.diff(counts) <= 0) and counts[0] > counts[-1] == distinct[0]
    assert moved["filter_stats"]["distinct"].values[-1] == distinct[1]
    # The static posterior is the Kalman filter's with Q = 0; the moved cloud's mean lies within
    # 4 Monte Carlo standard errors of it, taking 300 / 5 effective draws (autocorrelated
    # Metropolis moves) as a conservative effective sample size.
    means, covs, _ = kalman_filter(y, X, KalmanState(np.zeros(D), np.eye(D)), 0.0, R_SD**2)
    se = np.sqrt(np.diag(covs[-1]) / (300 / 5))
    assert np.all(np.abs(moved["filtered_mean"]["w"].values[-1] - means[-1]) < 4 * se)


def teacher_data(steps, seed, change_at=None):
    """The teacher of experiment 2: y = c + v tanh(x · w + b) + noise, one hidden unit."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(steps, 2))
    w = np.tile([1.0, -0.5], (steps, 1))
    if change_at is not None:
        w[change_at:, 0] = -1.0
    y = -0.5 + 2.0 * np.tanh(np.sum(X * w, axis=1) + 0.3) + 0.1 * rng.normal(size=steps)
    return X, y, w


@pytest.fixture(scope="module")
def student():
    """The student network, by hand with inputs as pm.Data; a positive output weight removes the
    tanh sign symmetry (w, b, v) ↔ (-w, -b, -v) that would make the posterior two-moded."""
    with pm.Model() as model:
        X = pm.Data("X", np.zeros((1, 2)))
        y = pm.Data("y", np.zeros(1))
        w = pm.Normal("w", 0.0, 1.0, shape=2)
        b = pm.Normal("b", 0.0, 1.0)
        v = pm.HalfNormal("v", 2.0)
        c = pm.Normal("c", 0.0, 1.0)
        pm.Normal("obs", c + v * pm.math.tanh(X @ w + b), 0.1, observed=y)
    return model


def test_ekf_learns_a_tanh_network_from_a_prior_draw():
    """At the prior's mode of a network with N(0, 1) weights the output weights are 0 and the
    hidden units output tanh(0) = 0, so the output's Jacobian is 0 in every weight but the
    output bias: started there the EKF never moves them and predicts the running mean of the
    targets. Started from a prior draw (the default) it learns y = sin(2x): its one-step-ahead
    error over the second half of the stream is below half of the error of predicting the
    targets' mean (sd(y) ≈ 0.71), i.e. the predictions explain more than 3/4 of the targets'
    variance (the noise alone, sd 0.1, is 2 % of it)."""
    rng = np.random.default_rng(0)
    steps = 200
    X = rng.normal(size=(steps, 1))
    y = np.sin(2.0 * X[:, 0]) + 0.1 * rng.normal(size=steps)
    with pm.Model() as model:
        net = ps.nn.mlp(np.zeros((1, 1)), (1, 5, 1), prior="gaussian")
        ps.nn.gaussian_likelihood(net, np.zeros(1), sigma=0.1)
    data = {"net_X": X, "net_y_data": y}
    late = slice(steps // 2, None)
    baseline = np.std(y[late])  # the best constant prediction, with hindsight

    def late_rms(idata):
        return np.sqrt(np.mean((idata["predictive"]["mean"].values.ravel() - y)[late] ** 2))

    runs = [
        ps.sample_sequential(model, data, method="ekf", random_seed=seed, progressbar=False)
        for seed in (0, 0, 1)
    ]
    assert late_rms(runs[0]) < 0.5 * baseline
    # The start is drawn from random_seed: the same seed gives the same run, another another.
    same = [run["filtered_mean"].equals(runs[0]["filtered_mean"]) for run in runs]
    assert same == [True, True, False]

    with pytest.warns(UserWarning, match=r"zero derivative in 15 of 16 weights.*'mode'"):
        stuck = ps.sample_sequential(
            model, data, method="ekf", ekf_start="mode", random_seed=0, progressbar=False
        )
    assert late_rms(stuck) > 0.9 * baseline
    np.testing.assert_array_equal(stuck["filtered_mean"]["net_w0"].values[-1], 0.0)


def test_teacher_network_stationary_convergence(student):
    X, y, _ = teacher_data(150, seed=1)
    idata = ps.sample_sequential(
        student,
        {"X": X, "y": y},
        method="sir",
        particles=1000,
        process_sd=0.01,
        random_seed=2,
        progressbar=False,
    )
    mean, sd = idata["filtered_mean"], idata["filtered_sd"]
    truth = {"w": [1.0, -0.5], "b": 0.3, "v": 2.0, "c": -0.5}
    for name, value in truth.items():
        # The filtered density concentrates (prior sds 1-2) and covers the teacher's weights.
        assert np.all(sd[name].values[-1] < 0.1), name
        assert np.all(np.abs(mean[name].values[-1] - value) < 4 * sd[name].values[-1]), name
    assert np.all(sd["w"].values[-1] < 0.2 * sd["w"].values[0])


def test_teacher_network_non_stationary_tracking(student):
    X, y, w = teacher_data(200, seed=2, change_at=100)
    errors = {}
    for process_sd in (0.0, 0.05):
        idata = ps.sample_sequential(
            student,
            {"X": X, "y": y},
            method="sir",
            particles=500,
            process_sd={"w": process_sd, "b": 0.01, "v": 0.01, "c": 0.01},
            random_seed=3,
            progressbar=False,
        )
        tracked = idata["filtered_mean"]["w"].values[150:, 0]
        errors[process_sd] = np.sqrt(np.mean((tracked - w[150:, 0]) ** 2))
    # With a random walk on w the filter follows the jump from 1 to -1 at step 100; with static
    # weights the cloud has collapsed before the jump and cannot.
    assert errors[0.05] < 0.25
    assert errors[0.05] < 0.5 * errors[0.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "pf"}, "method must be one of"),
        ({"method": "sir", "ess_threshold": 0.5}, "ess_threshold applies to method='sipr'"),
        ({"method": "sipr", "ess_threshold": 1.5}, r"ess_threshold must be in \(0, 1\]"),
        ({"method": "ekf", "move": "metropolis"}, "needs a particle method"),
        ({"method": "sir", "ekf_start": "mode"}, "ekf_start applies to method='ekf' only"),
        ({"method": "ekf", "ekf_start": "zero"}, "ekf_start must be one of"),
        ({"resampling": "stratified"}, "resampling must be one of"),
        ({"particles": 0}, "particles must be a positive integer"),
        ({"process_sd": {"u": 0.1}}, r"process_sd names unknown variables \['u'\]"),
        ({"process_sd": -0.1}, "process_sd must be finite and >= 0"),
        ({"interval": 1.0}, r"interval must be in \(0, 1\)"),
        ({"data_names": ["X"]}, "must observe a pm.Data container that is streamed"),
    ],
)
def test_bad_arguments_are_named(linear, kwargs, match):
    model, _, _ = linear
    with pytest.raises(ValueError, match=match):
        ps.SequentialFilter(model, **kwargs)


def test_learned_noise_is_filtered_with_the_weights(linear):
    _, X, y = linear
    with pm.Model() as model:
        X_data = pm.Data("X", X[:1])
        y_data = pm.Data("y", y[:1])
        weights = pm.Normal("w", 0.0, 1.0, shape=D)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("obs", X_data @ weights, sigma, observed=y_data)
    with pytest.raises(ValueError, match="the EKF needs a fixed observation noise sd"):
        ps.SequentialFilter(model, method="ekf")
    y_missing = y.copy()
    y_missing[5] = np.nan
    idata = ps.sample_sequential(
        model,
        {"X": X, "y": y_missing},
        method="sipr",
        particles=500,
        random_seed=2,
        progressbar=False,
    )
    sd = idata["filtered_sd"]["sigma"].values
    assert sd[-1] < 0.5 * sd[0]
    assert idata["posterior"]["sigma"].shape == (1, 500)
    assert idata["filter_stats"]["skipped"].values.sum() == 1
    # A skipped step of a particle filter: no evidence, no resampling, a prediction all the same.
    assert idata["filter_stats"]["log_evidence"][5] == 0
    assert not idata["filter_stats"]["resampled"][5]
    assert np.isfinite(idata["predictive"]["mean"][5])


def linear_model(X, y, sigma=R_SD, prior=None, streamed_rows=1):
    """The linear model of the ``linear`` fixture with another noise sd or prior."""
    with pm.Model() as model:
        X_data = pm.Data("X", X[:streamed_rows])
        y_data = pm.Data("y", y[:streamed_rows])
        weights = prior("w") if prior else pm.Normal("w", 0.0, 1.0, shape=D)
        pm.Normal("obs", X_data @ weights, sigma, observed=y_data)
    return model


def test_a_far_outlier_is_a_recoverable_error_of_the_ekf(linear):
    model, X, y = linear
    y_bad = y.copy()
    y_bad[5] = 1e160  # The residual's square overflows the Gaussian update.
    with pytest.raises(
        ps.DegenerateWeightsError, match=r"observation 5.*EKF cannot absorb"
    ) as error:
        ps.sample_sequential(
            model, {"X": X, "y": y_bad}, method="ekf", process_sd=Q_SD, progressbar=False
        )
    filt = error.value.filter
    assert filt.steps == 5 and isinstance(error.value.state, KalmanState)
    for k in range(6, T):
        filt.update({"X": X[k], "y": [y[k]]})
    stats = filt.to_datatree()["filter_stats"]
    assert np.isfinite(stats["log_evidence"]).all()
    assert np.isfinite(filt.to_datatree()["filtered_sd"]["w"]).all()


@pytest.mark.parametrize("method", ["ekf", "sir"])
@pytest.mark.parametrize("sigma", [-0.3, 0.0])
def test_a_fixed_noise_sd_that_is_not_positive_is_named(linear, method, sigma):
    _, X, y = linear
    model = linear_model(X, y, sigma=sigma)
    with pytest.raises(ValueError, match=r"noise sd of 'obs' must be finite and > 0"):
        ps.sample_sequential(
            model, {"X": X, "y": y}, method=method, particles=50, progressbar=False
        )


def test_a_per_observation_container_that_is_not_streamed_is_refused(linear):
    _, X, y = linear
    for rows in (1, T):  # built on one row, or on all of them
        model = linear_model(X, y, streamed_rows=rows)
        with pytest.raises(ValueError, match=r"data containers \['X'\].*not streamed"):
            ps.sample_sequential(model, {"y": y}, method="ekf", progressbar=False)


def test_priors_and_models_the_filter_cannot_start_from(linear):
    _, X, y = linear
    flat = linear_model(X, y, prior=lambda name: pm.Flat(name, shape=D))
    with pytest.raises(ValueError, match=r"\['w'\] have improper priors"):
        ps.SequentialFilter(flat)
    with pm.Model() as fixed:
        y_data = pm.Data("y", y[:1])
        pm.Normal("obs", 0.0, 1.0, observed=y_data)
    with pytest.raises(ValueError, match="needs free variables"):
        ps.SequentialFilter(fixed)


def test_data_of_the_wrong_kind_are_named(linear):
    model, X, y = linear
    with pytest.raises(TypeError, match=r"model must be a pm\.Model or None, got str"):
        ps.SequentialFilter("model")
    with pytest.raises(TypeError, match=r"random_seed must be a numpy\.random\.Generator"):
        ps.SequentialFilter(model, random_seed="abc")
    filt = ps.SequentialFilter(model, method="ekf")
    with pytest.raises(TypeError, match="data must be a mapping"):
        filt.run([X, y])
    with pytest.raises(TypeError, match="an observation must be a mapping"):
        filt.update([X[0], y[0]])
    with pytest.raises(TypeError, match="y must be numbers"):
        filt.update({"X": X[0], "y": ["a"]})
    with pytest.raises(TypeError, match="X must be real numbers"):
        filt.update({"X": X[0] + 1j, "y": [y[0]]})
    with pytest.raises(TypeError, match="progressbar must be True or False"):
        filt.run({"X": X, "y": y}, progressbar="no")
    X_inf = X.copy()
    X_inf[[2, 9], 1] = np.inf
    with pytest.raises(
        ValueError, match=r"data\['X'\] has infinite values in 2 row\(s\): \[2, 9\]"
    ):
        filt.run({"X": X_inf, "y": y})
    with pytest.raises(ValueError, match="observation 0 has infinite values in y"):
        filt.update({"X": X[0], "y": [np.inf]})
    assert filt.steps == 0
    # One name as a string is a list of one name, not of its characters.
    with pytest.raises(ValueError, match=r"data containers \['X'\].*not streamed"):
        ps.SequentialFilter(model, data_names="y")


def test_weights_collapsed_at_most_steps_are_warned_about(linear):
    _, X, y = linear
    model = linear_model(X, y, sigma=1e-3)  # each observation picks about one particle
    with pytest.warns(UserWarning, match=r"collapsed onto a handful of particles \(ESS < 2\)"):
        idata = ps.sample_sequential(
            model,
            {"X": X, "y": y},
            particles=50,
            process_sd=Q_SD,
            random_seed=0,
            progressbar=False,
        )
    assert np.mean(idata["filter_stats"]["ess"] < 2) > 0.5


def test_one_collapse_is_warned_about_though_the_ess_recovers(linear):
    """A gross outlier leaves one or two particles; copied, with static weights, they have
    equal weights (ESS = particles) from then on, so only the step itself shows it."""
    model, X, y = linear
    y_outlier = y.copy()
    y_outlier[10] = 1e3
    with pytest.warns(UserWarning, match=r"\(ESS < 3\) at 1 of 20 observed steps.*step 10"):
        idata = ps.sample_sequential(
            model, {"X": X, "y": y_outlier}, particles=300, random_seed=0, progressbar=False
        )
    assert float(idata["filter_stats"]["ess"][-1]) == pytest.approx(300)


@pytest.mark.parametrize("method", ["sir", "ekf"])
def test_float32_model_results_are_float32(linear, method):
    """A float32 model's results carry its dtype, as PyMC's samplers return draws: the filter
    computes in float64, and the posterior, the filtered summaries and the predictive were
    float64. Its ``warn_float64="raise"`` does not stop the filter's own float64 graphs."""
    _, X, y = linear
    with pytensor.config.change_flags(floatX="float32", warn_float64="raise"):
        with pm.Model(coords={"feature": ["a", "b"]}) as model:
            X_data = pm.Data("X", X[:1].astype("float32"))
            y_data = pm.Data("y", y[:1].astype("float32"))
            weights = pm.Normal("w", 0.0, 1.0, dims="feature")
            pm.Deterministic("w_sum", weights.sum())
            pm.Normal("obs", X_data @ weights, R_SD, observed=y_data)
        idata = ps.sample_sequential(
            model,
            {"X": X[:5], "y": y[:5]},
            method=method,
            particles=50,
            process_sd=Q_SD,
            random_seed=1,
            progressbar=False,
        )
    for group in ("posterior", "filtered_mean", "filtered_sd", "predictive"):
        for name, values in idata[group].data_vars.items():
            assert values.dtype == np.float32, (group, name)
            assert np.isfinite(values.values).all(), (group, name)
    assert idata["posterior"]["w"].shape == (1, 50, D)
