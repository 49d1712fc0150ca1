"""Non-reversible parallel tempering numerics against known answers: round trips of the index
process, the communication barrier of a Gaussian path, the barrier-equalising schedule and the
stepping-stone evidence of a conjugate normal model."""

import numpy as np
import pytest
from scipy import stats

from pymc_sfp.core.dynamics import swap_neighbours
from pymc_sfp.core.tempering import (
    SwapRecord,
    barrier_total,
    check_schedule,
    communication_barrier,
    init_index_process,
    init_swap_record,
    optimal_schedule,
    recommended_n_chains,
    recommended_rounds_per_draw,
    record_swaps,
    rounds_per_round_trip,
    stepping_stone,
    uniform_schedule,
    update_index_process,
)

SIGMA2 = 0.01  # the Gaussian path below: prior N(0, 1), log-likelihood -x² / (2 σ²)


def gaussian_path_barrier(beta):
    """Λ(β) of the Gaussian path, in closed form.

    π_β = N(0, v_β), v_β = σ² / (σ² + β), and V = -ℓ = x² / (2σ²) = (v_β / 2σ²) χ²₁. For iid
    a, b ~ N(0, 1), a² − b² = 2 u w with u, w iid N(0, 1), so E|χ²₁ − χ²₁'| = 4 / π and the local
    barrier (Eq. 17) is λ(β) = ½ E|V − V'| = 1 / (π (σ² + β)); Λ(β) = log(1 + β / σ²) / π.
    """
    return np.log1p(np.asarray(beta) / SIGMA2) / np.pi


def test_round_trips_counted_along_a_known_sequence_of_swaps():
    process = init_index_process(3)
    swaps = {(0, 1): [1, 0, 2], (1, 2): [0, 2, 1]}
    # state 0 climbs to the target and comes back; state 2 leaves the target and returns.
    for pair in [(0, 1), (1, 2), (1, 2), (0, 1)]:
        process = update_index_process(process, np.array(swaps[pair]))
    assert process.round_trips == 1
    np.testing.assert_array_equal(process.rung, [0, 1, 2])
    np.testing.assert_array_equal(process.last_end, [0, 0, 1])


def test_deo_without_rejections_makes_half_a_round_trip_per_swap_round():
    # Theorem 1 of Syed et al.: the round-trip rate is (2 + 2 Σ r/(1 − r))⁻¹ = ½ when r = 0.
    # Without rejections the index process is deterministic: each state takes 2(K − 1) rounds
    # per trip, after the first trip of the states that start away from the target.
    n_chains, rounds = 5, 400
    process = init_index_process(n_chains)
    betas = uniform_schedule(n_chains)
    for n in range(rounds):
        order, accept = swap_neighbours(np.zeros(n_chains), betas, n % 2, lambda: 0.0)
        assert np.all(accept[~np.isnan(accept)] == 1.0)
        process = update_index_process(process, order)
    assert abs(process.round_trips - rounds / 2) <= n_chains


def test_round_trip_rate_of_independent_swaps_is_theorem_1s():
    # Under efficient local exploration a swap of pair k is accepted with probability 1 − r_k
    # whatever the states: the index process then makes 1 / rounds_per_round_trip(r) round trips
    # per round (Theorem 1 of Syed et al.). Batches of rounds give the Monte Carlo error.
    rates = np.array([0.2, 0.4, 0.3, 0.5])
    rng = np.random.default_rng(20261127)
    n_batches, per_batch = 20, 5000
    process = init_index_process(len(rates) + 1)
    trips = np.empty(n_batches)
    for batch in range(n_batches):
        before = process.round_trips
        for n in range(per_batch):
            order = np.arange(len(rates) + 1)
            for k in range(n % 2, len(rates), 2):
                if rng.uniform() < 1.0 - rates[k]:
                    order[k], order[k + 1] = k + 1, k
            process = update_index_process(process, order)
        trips[batch] = (process.round_trips - before) / per_batch
    expected = 1.0 / rounds_per_round_trip(rates)
    error = trips.std(ddof=1) / np.sqrt(n_batches)
    assert error < 0.02 * expected  # a test that can tell a few per cent apart
    assert abs(trips.mean() - expected) < 4.0 * error


def test_recommended_rounds_per_draw_scales_the_rounds_of_a_round_trip():
    rates = np.array([0.5, 0.5, 0.5])  # 2 + 2 · 3 = 8 rounds per round trip
    assert rounds_per_round_trip(rates) == 8.0
    assert rounds_per_round_trip(np.zeros(4)) == 2.0
    assert recommended_rounds_per_draw(rates, 5.0, 10, 100) == 40
    assert recommended_rounds_per_draw(rates, 1.1, 10, 100) == 10  # ceil(8.8) = 9, raised
    assert recommended_rounds_per_draw(rates, 20.0, 10, 100) == 100
    assert recommended_rounds_per_draw(np.array([1.0]), 5.0, 10, 100) == 100  # never swaps


def test_swap_record_averages_acceptance_probabilities():
    record = init_swap_record(3)
    record = record_swaps(record, np.array([0.2, np.nan, 1.0]))
    record = record_swaps(record, np.array([np.nan, 0.5, np.nan]))
    record = record_swaps(record, np.array([0.6, np.nan, 0.0]))
    np.testing.assert_allclose(record.rejection_rates, [0.6, 0.5, 0.5])
    np.testing.assert_array_equal(record.proposals, [2, 1, 2])


def test_barrier_of_equal_rates_keeps_a_uniform_schedule():
    betas = uniform_schedule(6)
    barrier = communication_barrier(betas, np.full(5, 0.3))
    assert barrier.total == pytest.approx(1.5)
    np.testing.assert_allclose(barrier.local, 0.3 / 0.2)
    np.testing.assert_allclose(optimal_schedule(barrier, 6), betas, atol=1e-12)
    assert recommended_n_chains(barrier.total, 4, 30) == 4
    assert recommended_n_chains(10.2, 4, 30) == 22
    assert recommended_n_chains(100.0, 4, 30) == 30


def test_barrier_estimated_from_swap_rejections_of_a_gaussian_path():
    # Exact draws of each π_β, the rejection rate of each pair estimated from n independent
    # pairs: a rate r has standard deviation ≤ (r / n)^½ (the rejection probability lies in
    # [0, 1], so its variance is at most its mean), so the sum over 99 pairs of about
    # Λ / 99 = 0.015 each has sd ≤ (Λ / n)^½ = 0.004 for n = 10⁵. Theorem 3 makes the rate equal
    # to the increment of Λ up to O(Δβ³) terms, negligible at this spacing; 0.02 is 5 sd.
    rng = np.random.default_rng(1)
    n_chains, n = 100, 100_000
    total = float(gaussian_path_barrier(1.0))
    betas = SIGMA2 * np.expm1(np.log1p(1.0 / SIGMA2) * np.linspace(0, 1, n_chains))
    betas[-1] = 1.0
    ell = [-(rng.normal(0, np.sqrt(SIGMA2 / (SIGMA2 + b)), n) ** 2) / (2 * SIGMA2) for b in betas]
    rates = [
        np.mean(1 - np.exp(np.minimum((b1 - b0) * (l0 - l1), 0.0)))
        for b0, b1, l0, l1 in zip(betas[:-1], betas[1:], ell[:-1], ell[1:], strict=True)
    ]
    barrier = communication_barrier(betas, np.array(rates))
    assert barrier.total == pytest.approx(total, abs=0.02)
    # What a sampler reports per draw, from its swap record.
    proposals = np.arange(1, len(rates) + 1)
    record = SwapRecord(np.array(rates) * proposals, proposals)
    assert barrier_total(record) == pytest.approx(barrier.total, rel=1e-14)
    assert barrier_total(SwapRecord(np.array(rates), np.ones(len(rates), dtype=int))) == (
        barrier.total
    )
    proposals[3] = 0  # a pair never proposed
    assert np.isnan(barrier_total(record._replace(proposals=proposals)))
    middle = n_chains // 2
    assert barrier.cumulative[middle] == pytest.approx(
        gaussian_path_barrier(betas[middle]), abs=0.02
    )


def test_optimal_schedule_inverts_the_cumulative_barrier():
    # From the exact increments of Λ on a uniform schedule of 401 rungs: the new rungs solve
    # Λ(β_k) = k Λ / 9, β_k = σ² ((1 + 1/σ²)^{k/9} − 1). The error is PCHIP's interpolation
    # error of log1p(β/σ²) on a grid of spacing σ²/4, below 1e-3 relative.
    fine = uniform_schedule(401)
    barrier = communication_barrier(fine, np.diff(gaussian_path_barrier(fine)))
    expected = SIGMA2 * np.expm1(np.log1p(1.0 / SIGMA2) * np.linspace(0, 1, 10))
    np.testing.assert_allclose(optimal_schedule(barrier, 10), expected, rtol=1e-3, atol=1e-6)


def test_optimal_schedule_of_a_ladder_with_a_hottest_beta_above_zero():
    # A ladder from β_0 = 0.05 (explored, not the prior): the barrier is measured from β_0 and
    # the new rungs solve Λ(β_k) − Λ(β_0) = k (Λ(1) − Λ(β_0)) / 6, with β_0 and 1 kept.
    fine = np.linspace(0.05, 1.0, 401)
    barrier = communication_barrier(fine, np.diff(gaussian_path_barrier(fine)))
    assert barrier.total == pytest.approx(
        gaussian_path_barrier(1.0) - gaussian_path_barrier(0.05), rel=1e-12
    )
    levels = gaussian_path_barrier(0.05) + np.linspace(0, 1, 7) * barrier.total
    expected = SIGMA2 * np.expm1(levels * np.pi)
    schedule = optimal_schedule(barrier, 7)
    assert schedule[0] == 0.05 and schedule[-1] == 1.0
    np.testing.assert_allclose(schedule, expected, rtol=1e-3)
    with pytest.raises(ValueError, match=r"from β_0 >= 0 to 1"):
        check_schedule([-0.1, 1.0], from_prior=False)


def _conjugate_normal(n_data=20, tau=2.0, seed=3):
    """θ ~ N(0, τ²), y_i ~ N(θ, 1): the tempered posteriors are normal and log Z is analytic."""
    y = np.random.default_rng(seed).normal(1.0, 1.0, n_data)
    cov = np.eye(n_data) + tau**2
    log_z = stats.multivariate_normal(np.zeros(n_data), cov).logpdf(y)

    def draw_log_likelihoods(betas, draws, rng):
        precision = 1 / tau**2 + betas * n_data
        theta = rng.normal(betas * y.sum() / precision, 1 / np.sqrt(precision), (draws, len(betas)))
        return stats.norm.logpdf(y[None, None, :], theta[..., None], 1.0).sum(-1)

    return log_z, draw_log_likelihoods


def test_stepping_stone_recovers_the_evidence_of_a_conjugate_normal_model():
    log_z, draw = _conjugate_normal()
    betas = np.linspace(0, 1, 16) ** 4
    rng = np.random.default_rng(5)
    estimate = stepping_stone(betas, draw(betas, 2000, rng))
    assert 0 < estimate.standard_error < 0.1
    assert abs(estimate.log_evidence - log_z) < 4 * estimate.standard_error
    # The standard error is honest: over 200 independent runs, the spread of the estimates
    # matches the mean reported error. The sample sd of 200 draws is within ±10% of the true sd
    # with probability ≈ 0.95 (relative sd 1/√400 = 5%); [0.8, 1.25] leaves room for the
    # batch-means error's own noise.
    runs = [stepping_stone(betas, draw(betas, 400, rng)) for _ in range(200)]
    spread = np.std([r.log_evidence for r in runs], ddof=1)
    reported = np.mean([r.standard_error for r in runs])
    assert 0.8 < spread / reported < 1.25


@pytest.mark.parametrize(
    "betas",
    [[0.0], [0.0, 0.5], [0.1, 1.0], [0.0, 0.6, 0.5, 1.0], [[0.0, 1.0]]],
)
def test_bad_schedules_are_refused(betas):
    with pytest.raises(ValueError, match="betas must be a strictly increasing"):
        check_schedule(betas)


def test_bad_input_to_barrier_and_stepping_stone():
    with pytest.raises(ValueError, match="rejection_rates must be 2 finite"):
        communication_barrier([0.0, 0.5, 1.0], [0.1])
    with pytest.raises(ValueError, match="n_chains must be an integer >= 2"):
        uniform_schedule(1)
    with pytest.raises(ValueError, match="log_likelihoods must have shape"):
        stepping_stone([0.0, 1.0], np.zeros((10, 3)))
    with pytest.raises(ValueError, match="log_likelihoods must be finite"):
        stepping_stone([0.0, 1.0], np.full((10, 2), np.nan))
    with pytest.raises(ValueError, match="log_likelihoods must be finite"):
        stepping_stone([0.0, 1.0], np.array([[0.0, -np.inf]] * 10))
    with pytest.raises(ValueError, match="no draw of the first rung"):
        stepping_stone([0.0, 1.0], np.array([[-np.inf, 0.0]] * 10))


def test_stepping_stone_counts_prior_draws_of_likelihood_zero():
    # A likelihood that is 1 on half of the prior's draws and 0 (−inf) on the rest: Z = 1/2.
    ell = np.zeros((100, 2))
    ell[::2, 0] = -np.inf
    estimate = stepping_stone([0.0, 1.0], ell)
    assert estimate.log_evidence == pytest.approx(np.log(0.5), rel=1e-12)
