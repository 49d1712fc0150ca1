"""The stochastic-dynamics core (Neal 1993) without PyMC: leapfrog, transitions, replica swaps."""

import warnings

import numpy as np
import pytest

from pymc_sfp.core.dynamics import (
    DynamicsSettings,
    Metric,
    PhaseState,
    geometric_ladder,
    leapfrog,
    swap_neighbours,
    transition,
)


def gaussian_logp_grad(precision):
    def logp_grad(q):
        g = -precision @ q
        return 0.5 * float(q @ g), g, None

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


def test_batched_leapfrog_is_the_leapfrog_of_each_row():
    precision = np.array([[2.0, 0.5], [0.5, 1.0]])
    rng = np.random.default_rng(3)
    q, p = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    # Row 2 leaves the support after a few steps: it alone ends at -inf.
    q[2] = [3.0, 3.0]
    p[2] = [30.0, 30.0]

    def batched(x):
        g = -x @ precision
        logp = 0.5 * np.sum(x * g, axis=1)
        outside = x[:, 0] > 4.0
        return np.where(outside, -np.inf, logp), g, None

    def single(x):
        logp, g, _ = batched(x[None])
        return float(logp[0]), g[0], None

    logp, grad, _ = batched(q)
    end, n_grad = leapfrog(PhaseState(q, p, logp, grad), 0.1, 8, batched, identity)
    assert n_grad == 8
    for i in range(4):
        row, _ = leapfrog(PhaseState(q[i], p[i], logp[i], grad[i]), 0.1, 8, single, identity)
        if i == 2:
            assert row.logp == -np.inf and end.logp[i] == -np.inf
            continue
        np.testing.assert_array_equal(end.position[i], row.position)
        np.testing.assert_array_equal(end.momentum[i], row.momentum)
        assert end.logp[i] == row.logp


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
            eps,
            DynamicsSettings(n_steps=n_steps, alpha=0.0, correct=True),
            logp_grad,
            Metric(identity, half_square, lambda: momentum_rng.normal(size=2)),
            accept_rng.uniform,
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
            1.0,
            DynamicsSettings(n_steps=200, alpha=0.5, correct=False),
            logp_grad,
            Metric(identity, half_square, lambda: rng.normal(size=1)),
            rng.uniform,
        )
    assert info.diverging and info.accept_stat == 0.0 and not info.accepted
    np.testing.assert_array_equal(end.position, start.position)
    assert np.isfinite(end.momentum).all() and end.logp == start.logp


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
