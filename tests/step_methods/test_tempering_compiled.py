"""The compiled rounds of ParallelTempering (pymc_sfp.core.compiled_tempering) against the
NumPy rounds, their specification: the same draws and stats from the same seed."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt

import pymc_sfp
from pymc_sfp.core.compiled_tempering import _pairwise_sum
from pymc_sfp.datasets import multimodal_targets

_FACTOR = np.random.default_rng(0).normal(size=(10, 10))
#: A well-conditioned dense 10 × 10 mass matrix.
DENSE_10D = _FACTOR @ _FACTOR.T / 10 + np.eye(10)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # PyMC calls it experimental
    #: A dense mass matrix adapted while tuning (from the states and their gradients).
    DENSE_ADAPTED_2D = QuadPotentialFullAdapt(2, np.zeros(2))


def _run(model, compiled, tune=60, draws=40, **kwargs):
    """``tune + draws`` steps from the model's initial point; the step (with
    ``numpy_rounds_run``, the rounds it ran in NumPy, tuning ones included) and every draw."""
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = pymc_sfp.ParallelTempering(compiled=compiled, **kwargs)
        numpy_round, step.numpy_rounds_run = step._round, []

        def counted(*args):
            step.numpy_rounds_run.append(step.tune)
            return numpy_round(*args)

        step._round = counted
        step.setup_chain(np.random.default_rng(7), tune, draws)
        point = model.initial_point()
        out = []
        for i in range(tune + draws):
            if i == tune:
                step.stop_tuning()
            point, stats = step.step(point)
            out.append((point, stats[0]))
    return step, out


def _assert_same(reference, compiled, step):
    """The same draws and stats, but for the gradients spent: after a draw's first round the
    compiled rounds form each explored rung's density at its start from the parts its replica
    carries (``step``'s ladder: one evaluation fewer per explored rung and round), where the
    NumPy rounds evaluate it again."""
    explored = len(step.betas) - (step._prior_sampler is not None)
    for (point_a, stats_a), (point_b, stats_b) in zip(reference, compiled, strict=True):
        for name in point_a:
            np.testing.assert_array_equal(point_a[name], point_b[name])
        assert stats_a.keys() == stats_b.keys()
        saved = (stats_a["rounds_per_draw"] - 1) * explored
        assert stats_b["n_grad_evals"] == stats_a["n_grad_evals"] - saved
        for name, value in stats_a.items():
            if name == "n_grad_evals":
                continue
            assert type(value) is type(stats_b[name]), name
            # Up to the last bits of exp (NumPy's and the C library's may round differently).
            np.testing.assert_allclose(
                np.asarray(value, dtype=float),
                np.asarray(stats_b[name], dtype=float),
                rtol=1e-12,
                atol=1e-300,
                err_msg=name,
            )


@pytest.mark.parametrize(
    ("name", "rounds_per_draw", "explorer_kwargs"),
    [
        ("mixture-2d", 3, None),
        ("mixture-10d", 1, None),
        ("mixture-2d", 2, {"n_leapfrog": 3, "thin": 2, "correct": False}),
        ("mixture-2d", 2, {"step_size_jitter": 0.0, "alpha": 0.0}),
        # A dense mass matrix: the NumPy rounds add the row-times-matrix products in the
        # compiled rounds' order, without the fused multiply-add NumPy's matmul uses on some
        # CPUs (with matmul the chains drifted apart by rounding: in 2-D on such a CPU, in
        # 10-D everywhere).
        ("mixture-2d", 2, {"scaling": np.array([[1.0, 0.3], [0.3, 2.0]])}),
        ("mixture-10d", 1, {"scaling": DENSE_10D}),
        ("mixture-2d", 2, {"potential": DENSE_ADAPTED_2D}),
    ],
)
def test_compiled_rounds_make_the_numpy_draws(name, rounds_per_draw, explorer_kwargs):
    model = multimodal_targets()[name].model()
    kwargs = {"rounds_per_draw": rounds_per_draw}
    if explorer_kwargs is not None:
        kwargs["explorer"] = pymc_sfp.StochasticDynamics
        kwargs["explorer_kwargs"] = explorer_kwargs
    step_ref, reference = _run(model, False, **kwargs)
    step, compiled = _run(model, None, **kwargs)
    assert step_ref.fallback_reason == "compiled=False"
    assert step.fallback_reason is None
    _assert_same(reference, compiled, step)
    assert step.n_rounds == step_ref.n_rounds
    # Every round of the compiled run, tuning's too, ran as machine code.
    assert step.numpy_rounds_run == [] and len(step_ref.numpy_rounds_run) == step_ref.n_rounds
    assert step_ref.numpy_rounds_run.count(True) == 60
    assert step.index_process.round_trips == step_ref.index_process.round_trips


def test_automatic_rounds_per_draw_follow_the_tuned_swap_rates():
    # The default: after tuning a draw is AUTO_ROUNDS_PER_ROUND_TRIP times the rounds of a round
    # trip at the swap rates of tuning's last adaptation round (Theorem 1); the NumPy rounds
    # given "auto" make the same chain.
    from pymc_sfp.core.tempering import recommended_rounds_per_draw
    from pymc_sfp.step_methods import tempering

    model = multimodal_targets()["mixture-2d"].model()
    with model:
        step = pymc_sfp.ParallelTempering()
    tune, draws = 200, 10
    step.setup_chain(np.random.default_rng(3), tune, draws)
    point = model.initial_point()
    for _ in range(tune):
        point, stats = step.step(point)
        assert stats[0]["rounds_per_draw"] == 1
    expected = recommended_rounds_per_draw(
        step.swap_record.rejection_rates,
        tempering.AUTO_ROUNDS_PER_ROUND_TRIP,
        *tempering.AUTO_ROUNDS_RANGE,
    )
    assert tempering.AUTO_ROUNDS_RANGE[0] < expected < tempering.AUTO_ROUNDS_RANGE[1]
    step.stop_tuning()
    point, stats = step.step(point)
    assert step.rounds_per_draw == stats[0]["rounds_per_draw"] == expected
    _, reference = _run(model, False, tune=tune, draws=draws, rounds_per_draw="auto")
    step, compiled = _run(model, None, tune=tune, draws=draws)
    _assert_same(reference, compiled, step)
    assert reference[-1][1]["rounds_per_draw"] == compiled[-1][1]["rounds_per_draw"] > 1
    # Without tuning there are no swap rates to go by.
    step.setup_chain(np.random.default_rng(3), 0, draws)
    assert step.rounds_per_draw == tempering.AUTO_ROUNDS_WITHOUT_TUNING
    with model, pytest.raises(TypeError, match="rounds_per_draw must be an integer >= 1 or"):
        pymc_sfp.ParallelTempering(rounds_per_draw="many")


def _walled_model():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 3.0, shape=2)
        pm.Normal("y", x.sum(), 1.0, observed=1.0)
        # A hard constraint of the likelihood with a finite gradient: constraint hits.
        pm.Potential("wall", pt.switch(x[0] > 1.5, -np.inf, 0.0))
    return model


@pytest.mark.parametrize(
    ("explorer_kwargs", "tune", "draws", "checked"),
    [
        # A step size far too large for the posterior, kept: divergences as well as wall hits
        # after tuning.
        ({"step_size": 2.5, "adapt_step_size": False, "n_leapfrog": 4}, 10, 80, "draws"),
        # Adapted while tuning, energy errors above 0.3 counting as divergences: the
        # dual-averaging statistic credits a trajectory that hit the wall by its share before
        # it and counts a divergence as 0, so the compiled tuning rounds must hand it the NumPy
        # rounds' transitions.
        ({"step_size": 2.5, "n_leapfrog": 4, "max_energy_error": 0.3}, 80, 10, "tuning"),
    ],
)
def test_compiled_rounds_with_divergences_and_a_hard_constraint(
    explorer_kwargs, tune, draws, checked
):
    model = _walled_model()
    kwargs = {
        "n_chains": 4,
        "adapt_schedule": False,
        "rounds_per_draw": 2,
        "explorer": pymc_sfp.StochasticDynamics,
        "explorer_kwargs": explorer_kwargs,
    }
    _, reference = _run(model, False, tune=tune, draws=draws, **kwargs)
    step, compiled = _run(model, None, tune=tune, draws=draws, **kwargs)
    assert step.fallback_reason is None and step.numpy_rounds_run == []
    _assert_same(reference, compiled, step)
    stats = [s for _, s in (compiled[tune:] if checked == "draws" else compiled[:tune])]
    assert sum(s["n_constraint_hits"] for s in stats) > 0
    assert any(np.any(s["replica_diverging"] == True) for s in stats)  # noqa: E712
    if checked == "tuning":  # the step sizes adapted: the cold rung's ended far below 2.5
        assert stats[-1]["step_size"] < 1.0


def test_compiled_rounds_without_prior_draws():
    # Every rung explored, the hottest too (the ladder of ReplicaExchangeDynamics).
    model = multimodal_targets()["mixture-2d"].model()
    kwargs = {"betas": [0.05, 0.3, 1.0], "prior_draws": False, "rounds_per_draw": 2}
    _, reference = _run(model, False, **kwargs)
    step, compiled = _run(model, None, **kwargs)
    assert step.fallback_reason is None and step._prior_sampler is None
    _assert_same(reference, compiled, step)


def test_compiled_needs_the_ladder():
    model = multimodal_targets()["mixture-2d"].model()
    with model:
        step = pymc_sfp.ParallelTempering(vectorized=False)
        assert step.fallback_reason is not None
        with pytest.raises(ValueError, match="compiled=True"):
            pymc_sfp.ParallelTempering(vectorized=False, compiled=True)


@pytest.mark.parametrize("size", [1, 2, 7, 8, 10, 17, 128, 129, 300, 5000])
def test_pairwise_sum_is_numpys(size):
    values = np.random.default_rng(size).standard_normal(size) * 1e3
    assert _pairwise_sum(values) == np.add.reduce(values)
