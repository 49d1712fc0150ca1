"""Tests for pymc_sfp.datasets.synthetic: the robot arm and the teacher perceptron."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pymc_sfp.datasets import make_robot_arm, make_teacher_perceptron

# Draws of the generators as they were when the data sets were one module (pymc_sfp/datasets.py):
# make_robot_arm(2, rng=1993) and make_teacher_perceptron(2, 2, rng=5, beta=1.0).
ROBOT_X_1993 = [[-0.7181303157445923, 1.33513218200775], [0.8383611761567913, 2.261737957214244]]
ROBOT_Y_1993 = [[2.5707114796581907, -0.6295679175650137], [0.0602473233123315, 1.564309559508008]]
TEACHER_S_5 = [
    [-0.24836162209524854, 0.4204452380655215],
    [1.1360465324896427, 0.10970639932180819],
]
TEACHER_SIGMA_5 = [-1.0, 1.0]
TEACHER_W_5 = [-0.8019314252534474, -1.324358995628145]


def test_robot_arm():
    X, Y = make_robot_arm(4000, rng=0, noise_sd=0.0)
    assert X.shape == (4000, 2) and Y.shape == (4000, 2)
    x1, x2 = X.T
    assert np.all((np.abs(x1) >= 0.453) & (np.abs(x1) <= 1.932))
    assert (x1 < 0).mean() == pytest.approx(0.5, abs=0.05)
    assert np.all((x2 >= 0.534) & (x2 <= 3.142))
    np.testing.assert_allclose(Y[:, 0], 2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2))
    np.testing.assert_allclose(Y[:, 1], 2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2))

    X_noisy, Y_noisy = make_robot_arm(4000, rng=0)
    np.testing.assert_array_equal(X_noisy, X)
    assert (Y_noisy - Y).std() == pytest.approx(0.05, rel=0.04)
    np.testing.assert_array_equal(make_robot_arm(5, rng=1)[1], make_robot_arm(5, rng=1)[1])


def test_teacher_perceptron():
    m, n_features, beta = 20000, 20, 1.0
    S, sigma, w = make_teacher_perceptron(m, n_features, rng=np.random.default_rng(5), beta=beta)
    assert S.shape == (m, n_features) and sigma.shape == (m,) and w.shape == (n_features,)
    assert set(np.unique(sigma)) == {-1.0, 1.0}
    clean = np.sign(S @ w / np.sqrt(n_features))
    flip_rate = np.mean(sigma != clean)
    expected = np.exp(-beta) / (1 + np.exp(-beta))
    assert abs(flip_rate - expected) < 4 * np.sqrt(expected * (1 - expected) / m)

    S, sigma, w = make_teacher_perceptron(500, 10, rng=1, beta=np.inf)
    np.testing.assert_array_equal(sigma, np.sign(S @ w))


def test_same_seed_same_data():
    """The draws for a seed are pinned: benchmarks and papers' settings rely on them."""
    X, Y = make_robot_arm(2, rng=1993)
    np.testing.assert_allclose(X, ROBOT_X_1993, rtol=1e-12)
    np.testing.assert_allclose(Y, ROBOT_Y_1993, rtol=1e-12)
    S, sigma, w = make_teacher_perceptron(2, 2, rng=5, beta=1.0)
    np.testing.assert_allclose(S, TEACHER_S_5, rtol=1e-12)
    np.testing.assert_array_equal(sigma, TEACHER_SIGMA_5)
    np.testing.assert_allclose(w, TEACHER_W_5, rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_robot_arm(0, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(-3, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(2.5, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(10, rng=0, noise_sd=-0.1), "noise_sd must be"),
        (lambda: make_robot_arm(10, rng=0, noise_sd=np.nan), "noise_sd must be"),
        (lambda: make_teacher_perceptron(0, 5, rng=0, beta=1.0), "m must be"),
        (lambda: make_teacher_perceptron(5, 0, rng=0, beta=1.0), "n_features must be"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=0.0), "beta must be > 0"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=-1.0), "beta must be > 0"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=np.nan), "beta must be > 0"),
    ],
)
def test_generator_argument_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: make_robot_arm(3, rng=0, noise_sd="0.1"), TypeError, "noise_sd must be a real"),
        (lambda: make_robot_arm(3, rng=-1), ValueError, "rng must be a numpy.random.Generator"),
        (lambda: make_robot_arm(3, rng="x"), TypeError, "rng must be a numpy.random.Generator"),
        (lambda: make_teacher_perceptron(3, 2, rng=0, beta="1"), TypeError, "beta must be a real"),
    ],
)
def test_generator_arguments_of_the_wrong_kind_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_large_beta_gives_clean_labels_without_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S, sigma, w = make_teacher_perceptron(50, 4, rng=1, beta=1000.0)
    np.testing.assert_array_equal(sigma, np.where(S @ w >= 0, 1.0, -1.0))
