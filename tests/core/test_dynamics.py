"""The stochastic-dynamics core (Neal 1993) without PyMC: leapfrog, transitions, replica swaps."""

import warnings

import numpy as np
import pytest

from pymc_sfp.core.dynamics import (
    DynamicsSettings,
    Metric,
    PhaseState,
    RowMassMatrix,
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
        end, n_grad, _, _ = leapfrog(state, eps, round(1.0 / eps), logp_grad, identity)
        assert n_grad == round(1.0 / eps)
        back = leapfrog(end._replace(momentum=-end.momentum), eps, n_grad, logp_grad, identity).end
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
    end, n_grad, _, _ = leapfrog(PhaseState(q, p, logp, grad), 0.1, 8, batched, identity)
    assert n_grad == 8
    for i in range(4):
        row = leapfrog(PhaseState(q[i], p[i], logp[i], grad[i]), 0.1, 8, single, identity).end
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


def wall_logp_grad(q):
    # N(0, 1) in each coordinate, cut at q_0 > 1 by a -inf region (a hard constraint); a NaN
    # log-density at q_0 > 10 stands for any other numerical failure.
    logp = -0.5 * float(q @ q) if q[0] > 1.0 else -np.inf
    return (np.nan if q[0] > 10.0 else logp), -q, None


def test_leapfrog_tells_a_hard_constraint_from_a_numerical_failure():
    start = np.array([1.5, 0.0])
    state = PhaseState(start, np.array([-1.0, 1.0]), *wall_logp_grad(start)[:2])
    trajectory = leapfrog(state, 0.2, 10, wall_logp_grad, identity)
    # q_0 = 1.5, 1.27, 0.99: the wall comes at the second step, after one finite one.
    assert trajectory.end.logp == -np.inf and trajectory.n_grad == 2
    assert trajectory.n_finite_steps == 1
    reference = leapfrog(state, 0.2, 1, wall_logp_grad, identity).end
    np.testing.assert_allclose(trajectory.last_finite.position, reference.position)
    np.testing.assert_allclose(trajectory.last_finite.momentum, reference.momentum)
    assert trajectory.last_finite.logp == reference.logp
    away = leapfrog(
        state._replace(momentum=np.array([60.0, 0.0])), 0.2, 10, wall_logp_grad, identity
    )
    assert np.isnan(away.end.logp) and away.n_finite_steps == 0
    # A batch: each row stops on its own.
    batch = PhaseState(
        np.stack([start, start, start]),
        np.array([[-1.0, 1.0], [60.0, 0.0], [3.0, 0.0]]),
        np.full(3, state.logp),
        np.stack([state.grad] * 3),
    )

    def batched(q):
        rows = [wall_logp_grad(row) for row in q]
        return np.array([r[0] for r in rows]), -q, None

    trajectories = leapfrog(batch, 0.2, 10, batched, identity)
    assert trajectories.end.logp[0] == -np.inf and np.isnan(trajectories.end.logp[1])
    assert np.isfinite(trajectories.end.logp[2])
    np.testing.assert_array_equal(trajectories.n_finite_steps, [1, 0, 10])
    np.testing.assert_allclose(trajectories.last_finite.position[0], reference.position)
    np.testing.assert_array_equal(
        trajectories.last_finite.position[2], trajectories.end.position[2]
    )


@pytest.mark.parametrize("correct", [True, False])
def test_a_constraint_hit_is_a_rejection_not_a_divergence(correct):
    start = np.array([1.5, 0.0])
    state = PhaseState(start, np.array([-1.0, 1.0]), *wall_logp_grad(start)[:2])
    end, info = transition(
        state,
        0.2,
        DynamicsSettings(n_steps=10, alpha=0.0, correct=correct),
        wall_logp_grad,
        Metric(identity, half_square, lambda: np.array([-1.0, 1.0])),
        lambda: 0.0,
    )
    assert info.hit_constraint and not info.diverging and not info.accepted
    assert info.accept_stat == 0.0 and info.share_before_constraint == pytest.approx(0.1)
    assert abs(info.energy_error_before_constraint) < 0.1  # an accurate step before the wall
    np.testing.assert_array_equal(end.position, start)
    if correct:
        np.testing.assert_array_equal(end.momentum, [1.0, -1.0])
    # Running into the NaN region instead is a divergence.
    _, info = transition(
        state,
        0.2,
        DynamicsSettings(n_steps=10, alpha=0.0, correct=correct),
        wall_logp_grad,
        Metric(identity, half_square, lambda: np.array([60.0, 0.0])),
        lambda: 0.0,
    )
    assert info.diverging and not info.hit_constraint
    assert np.isnan(info.share_before_constraint)


@pytest.mark.parametrize("correct", [True, False])
def test_batched_transition_is_the_transition_of_each_row(correct):
    # Rows: two ordinary ones, one into the wall, one into the NaN region, and one whose
    # uniform is above its acceptance (a rejection); each with its own step size and randomness.
    q = np.array([[5.0, 0.0], [5.0, 0.0], [1.5, 0.0], [5.0, 0.0], [5.0, 0.0]])
    momentum = np.random.default_rng(5).normal(size=(5, 2))
    noise = np.array([[0.3, 0.2], [1.0, -0.5], [-3.0, 1.0], [200.0, 0.0], [2.0, 1.0]]) / 0.6
    uniforms = np.array([0.3, 0.5, 0.5, 0.5, 1.0 - 1e-9])
    step_sizes = np.array([0.05, 0.03, 0.05, 0.05, 0.1])
    settings = DynamicsSettings(n_steps=10, alpha=0.8, correct=correct)

    def batched(x):
        rows = [wall_logp_grad(row) for row in x]
        logp = np.array([r[0] for r in rows])
        return logp, -x, np.stack([logp, -logp], axis=1)  # aux per row

    logp, grad, aux = batched(q)
    new, info = transition(
        PhaseState(q, momentum, logp, grad, aux),
        step_sizes,
        settings,
        batched,
        Metric(identity, lambda p: 0.5 * np.sum(p * p, axis=1), lambda: noise),
        lambda: uniforms,
    )
    assert info.hit_constraint[2] and info.diverging[3] and not info.diverging[[0, 1, 2]].any()
    np.testing.assert_array_equal(info.accepted, [True, True, False, False, not correct])
    for i in range(5):

        def single(x):
            logp, grad, aux = batched(x[None])
            return float(logp[0]), grad[0], aux[0]

        row, row_info = transition(
            PhaseState(q[i], momentum[i], logp[i], grad[i], aux[i]),
            step_sizes[i],
            settings,
            single,
            Metric(identity, half_square, lambda i=i: noise[i]),
            lambda i=i: uniforms[i],
        )
        np.testing.assert_array_equal(new.position[i], row.position)
        np.testing.assert_array_equal(new.aux[i], row.aux)
        if correct or not info.diverging[i]:  # uncorrected divergences draw a fresh momentum
            np.testing.assert_array_equal(new.momentum[i], row.momentum)
        for field in ("accept_stat", "accepted", "energy", "diverging", "hit_constraint"):
            assert getattr(info, field)[i] == getattr(row_info, field), (i, field)
        np.testing.assert_equal(info.share_before_constraint[i], row_info.share_before_constraint)


def test_row_mass_matrices_draw_n0m_momenta_and_measure_them_by_m_inverse():
    # Per row: a dense M⁻¹, and the diagonal of another. Colouring is linear, p = z C, so the
    # momenta's covariance is exactly CᵀC, which must be M; whiten must undo colour; velocity
    # and kinetic energy must be M⁻¹ p and ½ pᵀ M⁻¹ p; one matrix (n = 1) must serve any batch.
    rng = np.random.default_rng(3)
    factors = rng.normal(size=(3, 4, 4))
    dense = factors @ factors.transpose(0, 2, 1) + 0.5 * np.eye(4)
    diagonal = rng.uniform(0.1, 10.0, size=(3, 4))
    momenta = rng.normal(size=(3, 4))
    diagonal_matrices = np.array([np.diag(row) for row in diagonal])
    for inverse_mass, matrices in ((dense, dense), (diagonal, diagonal_matrices)):
        mass = RowMassMatrix(inverse_mass)
        for k in range(3):
            colouring = mass.rows(np.full(4, k)).colour(np.eye(4))  # C, row by row
            np.testing.assert_allclose(
                colouring.T @ colouring, np.linalg.inv(matrices[k]), rtol=1e-10
            )
            shared = RowMassMatrix(inverse_mass[[k]])
            np.testing.assert_allclose(shared.velocity(momenta), momenta @ matrices[k], rtol=1e-12)
        np.testing.assert_allclose(mass.whiten(mass.colour(momenta)), momenta, rtol=1e-10)
        expected = np.einsum("nd,nde->ne", momenta, matrices)
        np.testing.assert_allclose(mass.velocity(momenta), expected, rtol=1e-12)
        np.testing.assert_allclose(
            mass.kinetic_energy(momenta), 0.5 * np.sum(momenta * expected, axis=1), rtol=1e-12
        )
        subset = mass.rows(np.array([2, 0]))
        np.testing.assert_allclose(
            subset.velocity(momenta[:2]),
            np.einsum("nd,nde->ne", momenta[:2], matrices[[2, 0]]),
            rtol=1e-12,
        )
        metric = mass.metric(lambda: momenta)
        np.testing.assert_array_equal(metric.draw_momentum(), mass.colour(momenta))
        # Every row in order is the batch itself, not a copy of its matrices.
        assert mass.rows(np.arange(3)) is mass
        assert mass.rows(np.array([0, 2, 1])) is not mass
    with pytest.raises(ValueError, match=r"inverse_mass must have shape \(n, d\)"):
        RowMassMatrix(np.ones(3))


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
