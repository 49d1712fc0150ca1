"""The local line (``pymc_sfp._local_line``): the terms that read a coordinate, one element of
each where the rewrites show that is all it reads; the log-density up to a constant of the line;
exact sampling with it."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_sfp import SFPStep
from pymc_sfp.compile import LineEvaluator, coordinate_layout, step_graph
from tests.helpers import assert_moments, sample

Y = np.array([1.2, -0.4, 2.0, 0.3, -1.5])


def evaluator(model: pm.Model) -> LineEvaluator:
    graph = step_graph(model, model.value_vars)
    layout = coordinate_layout(model, model.value_vars, graph.initial_point)
    return LineEvaluator(graph, layout, gradient=False, batched=True)


def test_a_separable_model_reads_one_element_per_coordinate():
    """Each coordinate of 0.5 N(-2, 1) + 0.5 N(2, 1) per coordinate (a potential summing them)
    reads its own element: the compiled line does not read the other coordinates at all, so
    its cost does not grow with N."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=200)
        per_coordinate = pt.logaddexp(
            pm.logp(pm.Normal.dist(-2.0, 1.0), x), pm.logp(pm.Normal.dist(2.0, 1.0), x)
        )
        pm.Potential("target", pt.sum(per_coordinate))
    line = evaluator(model)
    assert line.relative
    assert "2 (term, variable) pairs one element each, 0 in full" in line.line_note
    graph = line._local.maker.fgraph
    assert not graph.clients[graph.inputs[0]]  # the coordinates x
    start = np.linspace(-3.0, 3.0, 200)
    values = np.array([-1.0, 0.5, 4.0])
    for i in (0, 117, 199):
        logp, _ = line.along(start, i, values)
        moved = [line.logp(np.where(np.arange(200) == i, v, start)) for v in values]
        np.testing.assert_allclose(logp, moved, rtol=1e-12)


def test_a_hierarchical_model_is_the_log_density_up_to_a_constant():
    """Parameter checks (σ > 0), a log-transformed scale, interval coordinates of a matrix, and
    a potential whose element k reads elements k and N-1-k (summed in full, not mistaken for
    one element): along every coordinate the line changes as the log-density does."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        v = pm.Normal("v", mu, sigma, shape=5)
        pm.Normal("y", v, 0.5, observed=Y)
        pm.Potential("pairs", -0.1 * pt.sum((v - v[::-1]) ** 2))
        u = pm.Uniform("u", -1.0, 2.0, shape=(2, 3))
        pm.Potential("pu", pt.sum(u**2) + pt.sum(pt.log1p(u**2)))
    line = evaluator(model)
    assert line.relative
    # v: its own term and y's, one element each, the pairs in full; u: its term and both
    # potentials one element each; mu and sigma: their own terms and v's in full.
    assert "5 (term, variable) pairs one element each, 6 in full" in line.line_note
    rng = np.random.default_rng(3)
    start = np.concatenate([[0.3, -0.2], rng.normal(size=5), rng.uniform(-0.9, 1.9, size=6)])
    for i in range(start.size):
        interval = i >= 7
        values = rng.uniform(-0.95, 1.95, size=4) if interval else rng.normal(size=4)
        logp, _ = line.along(start, i, values)
        moved = []
        for value in values:
            point = start.copy()
            point[i] = value
            moved.append(line.logp(point))
        np.testing.assert_allclose(logp, moved, rtol=1e-10, err_msg=f"coordinate {i}")


@pytest.mark.parametrize("compiled", [True, False])
def test_sfp_with_local_lines_samples_a_conjugate_model(compiled):
    """v_i ~ N(0, 1), y_i ~ N(v_i, 0.5²): v_i | y ~ N(0.8 y_i, 0.2), independent; u ~ U(0, 1)³
    with a potential Σ log u: u_i ~ Beta(2, 1), E u = 2/3, E u² = 1/2. Moments within 4 MCSE,
    with the compiled sweep and with the NumPy sweep, both on the local line."""
    with pm.Model() as model:
        v = pm.Normal("v", 0.0, 1.0, shape=5)
        pm.Normal("y", v, 0.5, observed=Y)
        u = pm.Uniform("u", 0.0, 1.0, shape=3)
        pm.Potential("beta", pt.sum(pt.log(u)))
    steps = []
    idata = sample(
        model,
        lambda: steps.append(SFPStep(L=30, compiled=compiled)) or steps[-1],
        draws=1500,
        tune=300,
        random_seed=11,
    )
    assert steps[0].evaluator.relative
    mean = 0.8 * Y[:3]
    assert_moments(idata, "v", mean, np.outer(mean, mean) + 0.2 * np.eye(3))
    assert_moments(idata, "u", np.full(2, 2 / 3), np.full((2, 2), 4 / 9) + np.diag([1 / 18] * 2))


@pytest.mark.parametrize("hole", [np.nan, -np.inf])
def test_a_hole_without_density_keeps_the_local_line(hole):
    """A region where the log-density is NaN (read as zero density, as -inf) is no
    disagreement: the check moves x[0] into it and must still keep the local line."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=20)
        pm.Potential("hole", pt.sum(pt.switch(pt.abs(x - 0.3) < 0.2, hole, 0.0)))
    assert evaluator(model).relative
