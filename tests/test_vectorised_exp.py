"""The vectorised ``exp`` of log-sum-exps: as accurate as NumPy's, swapped in only where it is
meant to be, and a model's log-density unchanged by it."""

import numba
import numpy as np
import pymc as pm
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from pytensor import function as pytensor_function
from pytensor.compile.mode import Mode, get_mode
from pytensor.tensor.elemwise import Elemwise

from pymc_sfp._vectorised_exp import POLYNOMIAL_EXP, PolynomialExp, polynomial_exp
from pymc_sfp.compile import _compile, compile_batched_logp, step_graph

EPS = np.finfo(np.float64).eps


@numba.njit
def _exp_of_each(x):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = polynomial_exp(x[i])
    return out


def test_within_one_unit_in_the_last_place_of_numpy_over_the_whole_range():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-745.2, 709.78, 2_000_001), rng.uniform(-2.0, 2.0, 1_000_000)])
    got, exact = _exp_of_each(x), np.exp(x)
    assert np.all(np.abs(got - exact) <= np.spacing(exact))
    normal = exact > np.finfo(np.float64).tiny
    assert np.max(np.abs(got - exact)[normal] / exact[normal]) <= 1.01 * EPS


def test_equal_to_numpy_at_the_edges():
    overflow = [709.78, 709.782712893384, 709.7828, 710.0, 1e300, np.inf]
    underflow = [-708.4, -745.13, -745.14, -746.0, -1e300, -np.inf]
    edges = np.array([0.0, -0.0, 1e-300, -1e-300, np.nan, *overflow, *underflow])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_exp_of_each(edges), np.exp(edges))


def _scalar_ops(fgraph) -> list[type]:
    """The scalar operations of a compiled graph, inside fused loops and composites too."""
    found = []
    for node in fgraph.apply_nodes:
        if isinstance(node.op, Elemwise):
            scalar = node.op.scalar_op
            if isinstance(scalar, ps.Composite):
                found += _scalar_ops(scalar.fgraph)
            else:
                found.append(type(scalar))
        elif hasattr(node.op, "fgraph"):
            found += _scalar_ops(node.op.fgraph)
        elif isinstance(node.op, ps.Composite):
            found += _scalar_ops(node.op.fgraph)
        elif isinstance(node.op, ps.ScalarOp):
            found.append(type(node.op))
    return found


def _graph(dtype: str):
    X = pt.matrix("X", dtype=dtype)
    out = [pt.logsumexp(X, axis=1), pt.special.softmax(X, axis=1), pt.sigmoid(X), pt.exp(X)]
    return X, out


def test_only_the_exp_of_a_difference_is_swapped_under_numba():
    X, out = _graph("float64")
    function = _compile([X], out, None)
    ops = _scalar_ops(function.maker.fgraph)
    assert PolynomialExp in ops
    # exp(X) of the last output is not a difference; the sigmoid keeps its own lowering.
    assert ps.Exp in ops and ps.Sigmoid in ops
    values = np.random.default_rng(1).normal(scale=30.0, size=(40, 7))
    expected = [
        np.log(np.exp(values - values.max(1, keepdims=True)).sum(1)) + values.max(1),
        np.exp(values - values.max(1, keepdims=True)),
        1 / (1 + np.exp(-values)),
        np.exp(values),
    ]
    expected[1] /= expected[1].sum(1, keepdims=True)
    for got, exact in zip(function(values), expected, strict=True):
        np.testing.assert_allclose(got, exact, rtol=4 * EPS, atol=0)


@pytest.mark.parametrize(
    "dtype, mode",
    [
        ("float32", None),
        ("float64", Mode(linker="py", optimizer="fast_run")),
        ("float64", get_mode(None).excluding(POLYNOMIAL_EXP)),
    ],
    ids=["float32", "python linker", "excluded"],
)
def test_float32_graphs_other_linkers_and_an_excluding_mode_keep_exp(dtype, mode):
    X, out = _graph(dtype)
    function = _compile([X], out, None if mode is None else {"mode": mode})
    ops = _scalar_ops(function.maker.fgraph)
    assert ps.Exp in ops and PolynomialExp not in ops


def test_a_softmax_model_has_pymcs_log_density():
    """A categorical regression (softmax likelihood) and a normal mixture (log-sum-exp), batched
    through the package's compilation, against PyMC's own compiled log-density."""
    rng = np.random.default_rng(2)
    features = rng.normal(size=(60, 3))
    with pm.Model() as model:
        weights = pm.Normal("weights", 0, 1, shape=(3, 4))
        pm.Categorical("y", logit_p=pt.dot(features, weights), observed=rng.integers(0, 4, 60))
        mu = pm.Normal("mu", 0, 5, shape=2)
        pm.NormalMixture("z", w=[0.3, 0.7], mu=mu, sigma=1.0, observed=rng.normal(size=50))
    graph = step_graph(model, model.value_vars)
    points = rng.normal(scale=2.0, size=(20, graph.start.size))
    batched = compile_batched_logp(graph)(points)
    pymc_logp = model.compile_logp()
    shapes = {name: np.shape(value) for name, value in graph.initial_point.items()}
    names = [v.name for v in graph.value_vars]
    ends = np.cumsum([np.prod(shapes[name], dtype=int) for name in names])[:-1]

    def point(row):
        return {n: p.reshape(shapes[n]) for n, p in zip(names, np.split(row, ends), strict=True)}

    expected = [pymc_logp(point(row)) for row in points]
    np.testing.assert_allclose(batched, expected, rtol=1e-13)


def _fused_reductions(fgraph) -> list:
    """The fused loops of a compiled graph, each as (its scalar operations, its reductions)."""
    return [
        (_scalar_ops(node.op.fgraph), node.op.reduced_outputs)
        for node in fgraph.apply_nodes
        if type(node.op).__name__ == "FusedElemwise"
    ]


def test_a_reduction_of_the_polynomial_exp_is_kept_out_of_its_loop():
    """The sum of a softmax's exp runs in a loop of its own (a loop with a reduction in it is not
    vectorised); the values are those of the fused graph."""
    X = pt.tensor3("X", dtype="float64")
    out = [pt.special.softmax(X, axis=-1), pt.logsumexp(X, axis=-1)]
    function = _compile([X], out, None)
    fused = _fused_reductions(function.maker.fgraph)
    assert fused, "no fused loop: the rewrite had nothing to act on"
    for ops, reductions in fused:
        if any(r is not None for r in reductions):
            assert PolynomialExp not in ops
    assert PolynomialExp in _scalar_ops(function.maker.fgraph)
    fused_mode = get_mode(None).including(POLYNOMIAL_EXP)
    reference = pytensor_function([X], out, mode=fused_mode)
    assert any(
        PolynomialExp in ops and any(r is not None for r in reductions)
        for ops, reductions in _fused_reductions(reference.maker.fgraph)
    ), "without the rewrite PyTensor no longer fuses the sum into the exp's loop"
    values = np.random.default_rng(3).normal(scale=30.0, size=(5, 9, 4))
    for got, exact in zip(function(values), reference(values), strict=True):
        np.testing.assert_allclose(got, exact, rtol=2 * EPS, atol=0)
