"""The one bridge from a model to compiled functions, tested on its own against PyMC's own
compiled log-density."""

import gc
import pickle
from collections.abc import Callable

import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.mode import get_mode
from pytensor.graph.destroyhandler import DestroyHandler
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.traversal import apply_ancestors
from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS
from pytensor.link.numba.linker import NumbaLinker
from pytensor.tensor.blockwise import Blockwise
from scipy import special

import pymc_sfp
import pymc_sfp.compile as compile_module
from pymc_sfp._local_line import unlooped_blockwise
from pymc_sfp._vectorised_exp import POLYNOMIAL_EXP
from pymc_sfp.compile import (
    LineEvaluator,
    _compile,
    _narrows_to_float32,
    compile_batched_local_lines,
    compile_batched_prior_likelihood,
    compile_batched_tempered_density,
    compile_log_likelihood,
    compile_logp_dlogp,
    compile_prior_sampler,
    coordinate_layout,
    float64_internals,
    random_generators,
    reseed,
    step_graph,
    tempered_model,
)
from pymc_sfp.step_methods import dynamics, sfp, tempering
from tests.helpers import counted_compilations


@pytest.fixture(scope="module")
def model():
    with pm.Model() as model:
        u = pm.Uniform("u", -1.0, 2.0)
        s = pm.HalfNormal("s", 1.0)
        w = pm.Normal("w", u, s, shape=(2, 3))
        pm.Normal("y", w.sum(axis=1), 1.0, observed=[0.5, -0.3])
        pm.Potential("p", -0.5 * u**2)
    return model


def raveled(model, point):
    return np.concatenate([np.ravel(point[v.name]) for v in model.value_vars])


def test_layout_interval_support_slices_and_names(model):
    graph = step_graph(model, model.value_vars)
    layout = coordinate_layout(model, model.value_vars, graph.initial_point)
    assert layout.size == 1 + 1 + 6
    np.testing.assert_array_equal(layout.interval, [True] + [False] * 7)
    assert (layout.lower[0], layout.upper[0]) == (-1.0, 2.0)
    assert layout.describe(0) == "u" and layout.describe(1) == "s"
    assert layout.describe(2 + 4) == "w[1, 1]"
    q = np.random.default_rng(0).normal(size=layout.size)
    np.testing.assert_allclose(layout.to_value(layout.from_value(q)), q, atol=1e-12)


def test_logp_dlogp_matches_pymc(model):
    graph = step_graph(model, model.value_vars)
    logp_dlogp = compile_logp_dlogp(graph)
    point = model.initial_point() | {"w": np.arange(6.0).reshape(2, 3) / 3, "s_log__": 0.3}
    logp, grad = logp_dlogp(raveled(model, point))
    assert logp == pytest.approx(float(model.compile_logp()(point)), rel=1e-12)
    np.testing.assert_allclose(grad, model.compile_dlogp()(point), rtol=1e-10)


def test_prior_and_likelihood_add_up_to_the_model(model):
    graph = step_graph(model, model.value_vars)
    x = raveled(model, model.initial_point()) + 0.1
    prior, likelihood = compile_log_likelihood(graph)(x)
    logp, _ = compile_logp_dlogp(graph)(x)
    assert prior + likelihood == pytest.approx(logp, rel=1e-12)
    # The likelihood is the observed variable and the potential.
    point = model.initial_point() | {
        "u_interval__": x[0],
        "s_log__": x[1],
        "w": x[2:].reshape(2, 3),
    }
    observed = model.compile_logp(vars=[model["y"]], jacobian=False)(point)
    u = -1.0 + 3.0 / (1.0 + np.exp(-x[0]))
    assert likelihood == pytest.approx(float(observed) - 0.5 * u**2, rel=1e-10)


@pytest.mark.parametrize("batched", [True, False])
def test_line_evaluator_along_a_coordinate(model, batched):
    """Along coordinate i the evaluator matches point evaluations; interval coordinates are on
    their own scale, without the log-odds Jacobian."""
    graph = step_graph(model, model.value_vars)
    layout = coordinate_layout(model, model.value_vars, graph.initial_point)
    evaluator = LineEvaluator(graph, layout, gradient=True, batched=batched)
    x = layout.from_value(graph.start + 0.2)
    values = np.linspace(-0.5, 1.5, 5)
    for index in (0, 3):
        logp, dlogp = evaluator.along(x, index, values)
        for value, lp in zip(values, logp, strict=True):
            point = x.copy()
            point[index] = value
            assert lp == pytest.approx(evaluator.logp(point), rel=1e-12)
        step = 1e-6
        shifted, _ = evaluator.along(x, index, values + step)
        np.testing.assert_allclose(dlogp, (shifted - logp) / step, rtol=1e-4, atol=1e-4)
    # On its own scale the uniform's coordinate has PyMC's density at its log-odds, less the
    # log-odds Jacobian log |dx/dq|.
    logp, _ = evaluator.along(x, 0, values)
    pymc_logp = model.compile_logp()
    point = model.initial_point() | {"s_log__": layout.to_value(x)[1], "w": x[2:].reshape(2, 3)}
    for value, lp in zip(values, logp, strict=True):
        log_odds = np.log(value + 1.0) - np.log(2.0 - value)
        log_jacobian = np.log(value + 1.0) + np.log(2.0 - value) - np.log(3.0)
        expected = float(pymc_logp(point | {"u_interval__": log_odds})) - log_jacobian
        assert lp == pytest.approx(expected, rel=1e-10)


def test_float32_model_compiles_to_float64_functions():
    """With ``floatX="float32"`` the model evaluates in float32, but every compiled function
    takes and returns float64 (the cores' dtype), agreeing with the float64 model to float32
    precision."""
    x = np.array([0.4, -0.3, 0.7])

    def build():
        with pm.Model() as model:
            u = pm.Uniform("u", -1.0, 2.0)
            s = pm.HalfNormal("s", 1.0)
            pm.Normal("y", u, s, observed=[0.5, -0.3])
            pm.Normal("v", u, 1.0)
        graph = step_graph(model, model.value_vars)
        layout = coordinate_layout(model, model.value_vars, graph.initial_point)
        evaluator = LineEvaluator(graph, layout, gradient=True, batched=True)
        logp, grad = compile_logp_dlogp(graph)(x)
        along = evaluator.along(layout.from_value(x), 2, np.array([0.0, 1.0]))
        return (logp, grad, *compile_log_likelihood(graph)(x), *along)

    reference = build()
    with pytensor.config.change_flags(floatX="float32"):
        single = build()
    for ref, value in zip(reference, single, strict=True):
        assert np.asarray(value).dtype == np.float64
        np.testing.assert_allclose(value, ref, rtol=1e-5)


def test_float32_model_compiles_under_warn_float64_raise():
    """``warn_float64="raise"`` protects a float32 model from float64, but the functions built
    here are float64 by design (coordinates, casts, tempering's β) and building any of them
    raised. Each is built, the flag is set aside only meanwhile (also when the scopes nest), and
    a float64 variable made afterwards still raises."""
    x = np.array([0.4, -0.3, 0.7])
    with pytensor.config.change_flags(floatX="float32", warn_float64="raise"):
        with pm.Model() as model:
            u = pm.Uniform("u", -1.0, 2.0)
            s = pm.HalfNormal("s", 1.0)
            pm.Normal("y", u, s, observed=np.array([0.5, -0.3], dtype="float32"))
            pm.Normal("v", u, 1.0)
        graph = step_graph(model, model.value_vars)
        layout = coordinate_layout(model, model.value_vars, graph.initial_point)
        # PyTensor's Python VM: the graphs are the point (the steps' tests compile with Numba).
        fast = {"mode": "FAST_COMPILE"}
        evaluator = LineEvaluator(graph, layout, gradient=False, batched=True, compile_kwargs=fast)
        assert np.isfinite(evaluator.logp(layout.from_value(x)))
        assert np.isfinite(compile_logp_dlogp(graph, fast)(x)[0])
        assert np.isfinite(compile_log_likelihood(graph, fast)(x)).all()
        tempered = compile_batched_tempered_density(graph, fast)
        assert np.isfinite(tempered(x[None, :], np.array([0.5]))[0]).all()
        draw, _ = compile_prior_sampler(graph, fast)
        assert draw().dtype == np.float64
        beta = pytensor.shared(np.float32(0.5))
        assert tempered_model(model, beta).logp().dtype == "float32"
        with float64_internals():
            with float64_internals():
                pass
            pt.vector("ours", dtype="float64")
        assert pytensor.config.warn_float64 == "raise"
        with pytest.raises(Exception, match="float64"):
            pt.vector("theirs", dtype="float64")


def test_step_graph_shares_the_variables_of_other_steps(model):
    graph = step_graph(model, [model.rvs_to_values[model["w"]]])
    assert {v.name for v in graph.shared} == {"u_interval__", "s_log__"}
    assert graph.start.shape == (6,)


def test_minibatch_generators_are_found_and_reseeded():
    data = np.arange(100.0)
    with pm.Model() as model:
        batch = pm.Minibatch(data, batch_size=5)
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=batch, total_size=100)
    graph = step_graph(model, model.value_vars)
    generators = random_generators(graph)
    assert len(generators) == 1
    logp_dlogp = compile_logp_dlogp(graph)
    x = np.zeros(1)

    def draws(seed):
        reseed(generators, np.random.default_rng(seed))
        return [logp_dlogp(x)[0] for _ in range(4)]

    first = draws(1)
    assert len(set(first)) > 1  # each call draws a new minibatch
    assert draws(1) == first and draws(2) != first
    with pm.Model() as plain:
        pm.Normal("mu", 0.0, 1.0)
    assert random_generators(step_graph(plain, plain.value_vars)) == []


def test_tempered_view_scales_the_likelihood_by_a_shared_beta(model):
    graph = step_graph(model, model.value_vars)
    prior, likelihood = compile_log_likelihood(graph)(graph.start + 0.1)
    beta = pytensor.shared(np.float64(0.3))
    view = tempered_model(model, beta)
    # PyMC's own compilation of the view's log-density (as pm.Slice or pm.Metropolis build it).
    logp = view.compile_logp()
    point = {name: value + 0.1 for name, value in model.initial_point().items()}
    assert logp(point) == pytest.approx(prior + 0.3 * likelihood)
    beta.set_value(np.float64(0.0))
    assert logp(point) == pytest.approx(prior)
    assert model.compile_logp()(point) == pytest.approx(prior + likelihood)  # untouched


def test_batched_tempered_density_is_the_tempered_view_row_by_row(model):
    graph = step_graph(model, model.value_vars)
    beta = pytensor.shared(np.float64(1.0))
    view = step_graph(tempered_model(model, beta), model.value_vars)
    single = compile_logp_dlogp(view)
    terms = compile_log_likelihood(graph)
    rows = graph.start + np.random.default_rng(1).normal(scale=0.3, size=(4, graph.start.size))
    betas = np.array([0.0, 0.2, 0.7, 1.0])
    logp, grad, split = compile_batched_tempered_density(graph)(rows, betas)
    for k in range(4):
        beta.set_value(betas[k])
        row_logp, row_grad = single(rows[k])
        assert logp[k] == pytest.approx(row_logp, rel=1e-12)
        np.testing.assert_allclose(grad[k], row_grad, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(split[k], terms(rows[k]), rtol=1e-12)


def test_batched_tempered_density_is_the_prior_at_beta_zero_where_the_likelihood_is_zero():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 2.0)
        pm.Potential("bound", pm.math.switch(x > 1.0, 0.0, -np.inf))
    logp, grad, split = compile_batched_tempered_density(step_graph(model, model.value_vars))(
        np.array([[0.5], [0.5], [2.0]]), np.array([0.0, 0.5, 0.5])
    )
    prior = -0.5 * 0.5**2 / 4 - np.log(2.0 * np.sqrt(2.0 * np.pi))
    assert logp[0] == pytest.approx(prior) and grad[0, 0] == pytest.approx(-0.5 / 4)
    assert logp[1] == -np.inf and split[1, 1] == -np.inf
    assert np.isfinite(logp[2])


def _local_and_whole_lines(model: pm.Model, rows: np.ndarray, values: np.ndarray):
    """The local lines of ``model`` along each coordinate ``i`` of each row, and the whole
    prior and likelihood at the same points, each ``(2, rows, values)``, by ``i``."""
    graph = step_graph(model, model.value_vars)
    whole = compile_batched_prior_likelihood(graph)
    lines, note = compile_batched_local_lines(graph, whole)
    for i in range(rows.shape[1]):
        local = np.array(lines(rows, i, values))
        points = np.repeat(rows, len(values), axis=0)
        points[:, i] = np.tile(values, len(rows))
        yield local, np.array(whole(points)).reshape(local.shape), note


def test_batched_local_lines_differ_from_the_whole_log_density_by_a_constant_per_row():
    """Along every coordinate of every row, the prior's and the likelihood's local lines minus
    the whole parts are one constant per row: terms one element each (the normal's of ``a``),
    terms that read several coordinates (the observation of ``a[0] · a[1] + b``, the
    half-normal's scale), and a hard constraint of one coordinate (``-inf`` in both)."""
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 2.0, shape=3)
        b = pm.Uniform("b", -1.0, 2.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a[0] * a[1] + b, s, observed=[0.3, -0.2, 0.5])
        pm.Potential("each", (-0.5 * (a - 1.0) ** 2).sum())
        pm.Potential("bound", pm.math.switch(a[2] > -1.5, 0.0, -np.inf))
    rows = np.random.default_rng(0).normal(0.0, 0.7, size=(6, 5))
    rows[:, 2] = np.abs(rows[:, 2])  # inside the constraint
    values = np.linspace(-3.0, 3.0, 13)
    lines = list(_local_and_whole_lines(model, rows, values))
    for i, (local, whole, _) in enumerate(lines):
        assert local.shape == whole.shape == (2, 6, 13)
        assert np.array_equal(np.isneginf(local), np.isneginf(whole)), i
        finite = np.isfinite(whole)
        assert finite.sum(axis=2).min() >= 2  # each row's line is compared somewhere
        with np.errstate(invalid="ignore"):  # -inf - -inf, masked
            offset = np.where(finite, local - whole, np.nan)
        spread = np.nanmax(offset, axis=2) - np.nanmin(offset, axis=2)
        assert np.all(spread < 1e-9 * np.abs(whole[finite]).max()), (i, spread)
    assert "2 (term, variable) pairs one element each" in lines[0][2]  # a's prior, "each"


def test_a_coordinate_line_reading_no_other_coordinate_is_computed_once_for_all_rows():
    """Independent coordinates: each line is one element per value, whatever the rows, and
    equals the whole log-density's change along it."""
    with pm.Model() as model:
        x = pm.Uniform("x", -10.0, 10.0, shape=4)
        per_mode = pm.logp(pm.Normal.dist([-6.0, 0.0, 6.0], 0.5), x[:, None])
        pm.Potential("mixture", pm.math.logsumexp(per_mode, axis=1).sum())
    rows = np.random.default_rng(1).normal(0.0, 1.0, size=(3, 4))
    for local, whole, _ in _local_and_whole_lines(model, rows, np.linspace(-4.0, 4.0, 9)):
        assert np.all(local == local[:, :1])  # the same line for every row
        np.testing.assert_allclose(
            local - local[:, :, :1], whole - whole[:, :, :1], rtol=1e-12, atol=1e-9
        )


def test_batched_local_lines_are_refused_for_a_discrete_variable():
    """PyMC's SMC reads a discrete variable's particles rounded, which the line does not."""
    with pm.Model() as model:
        pm.Poisson("k", 3.0)
        pm.Normal("mu", 0.0, 1.0, shape=2)
    graph = step_graph(model, model.value_vars)
    assert compile_batched_local_lines(graph, compile_batched_prior_likelihood(graph)) is None


def test_batched_functions_travel_to_a_chain_process_under_warn_float64_raise():
    """pm.sample_smc pickles its kernel for each chain process; a float32 model's local lines
    hold float64 constants, which unpickling rebuilds, and a user's warn_float64="raise" must
    not refuse them there. The unpickled functions give the same values (compiled again as
    they were first, without the disk cache, whose code for another graph differed in the
    last bit)."""
    with pytensor.config.change_flags(floatX="float32", warn_float64="raise"):
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 3.0, shape=2)
            s = pm.HalfNormal("s", 1.0)
            pm.Normal("y", mu[0] + mu[1], s, observed=[0.9, 1.6, 0.4])
        graph = step_graph(model, model.value_vars)
        whole = compile_batched_prior_likelihood(graph)
        lines, _ = compile_batched_local_lines(graph, whole)
        travelled_lines, travelled_whole = cloudpickle.loads(cloudpickle.dumps((lines, whole)))
        rows, values = np.zeros((3, 3)), np.linspace(-1.0, 1.0, 5)
        for i in range(3):
            np.testing.assert_array_equal(travelled_lines(rows, i, values), lines(rows, i, values))
        rows = np.random.default_rng(0).normal(size=(20, 3))
        np.testing.assert_array_equal(travelled_whole(rows), whole(rows))


def test_prior_sampler_draws_the_joint_prior_in_value_space(model):
    graph = step_graph(model, model.value_vars)
    draw, generators = compile_prior_sampler(graph)
    reseed(generators, np.random.default_rng(3))
    draws = np.array([draw() for _ in range(4000)])
    names = [v.name for v in graph.value_vars]
    # u ~ U(−1, 2) on its log-odds scale, log s with s ~ HalfNormal(1): means of
    # E[logit((u + 1) / 3)] = 0 and E[log s] = −(γ + log 2) / 2 ≈ −0.635; sd of the means ≤ 0.03.
    assert names[:2] == ["u_interval__", "s_log__"]
    assert abs(draws[:, 0].mean()) < 0.1
    assert abs(draws[:, 1].mean() + (np.euler_gamma + np.log(2)) / 2) < 0.1
    reseed(generators, np.random.default_rng(3))
    np.testing.assert_array_equal(draw(), draws[0])


def test_a_vectorised_logsumexp_is_one_reduction():
    """``vectorize_graph`` makes a log-sum-exp, and its derivative, a ``Blockwise`` that loops
    over the batch; every function the package compiles evaluates them as one computation over
    the batch instead, nested ones included, with the values of the row-by-row graph."""
    x = pt.vector("x", dtype="float64")
    shifts = np.array([0.0, 1.5, -2.0])
    inner = pt.logsumexp(-0.5 * (x[:, None] - shifts[None, :]) ** 2, axis=1)
    outer = pt.logsumexp(inner)
    point = [outer, inner, pt.grad(outer, x)]
    rows = pt.matrix("rows", dtype="float64")
    batched = vectorize_graph(point, replace={x: rows})

    def blockwise(outputs):
        return [
            node
            for node in apply_ancestors(outputs)
            if isinstance(node.op, Blockwise) and isinstance(node.op.core_op, OpFromGraph)
        ]

    assert blockwise(batched)
    assert not blockwise(unlooped_blockwise(batched))
    function = _compile([rows], batched, None)
    # Compiled, a Blockwise is a BlockwiseWithCoreShape.
    assert not any("Blockwise" in str(node.op) for node in function.maker.fgraph.toposort())
    values = np.random.default_rng(0).normal(size=(4, 5))
    row_by_row = pytensor.function([x], point)
    per_row = [row_by_row(row) for row in values]
    for k, got in enumerate(function(values)):
        expected = np.array([outputs[k] for outputs in per_row])
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)
    exact_inner = special.logsumexp(-0.5 * (values[..., None] - shifts) ** 2, axis=-1)
    np.testing.assert_allclose(function(values)[1], exact_inner, rtol=1e-14)


def test_a_graph_operation_that_is_not_elementwise_stays_looped():
    """Only graph-defined operations of elementwise arithmetic and reductions are unlooped: the
    others' graphs (indexing, padding, the pieces of pm.LKJCorr's log-density), nested and
    vectorised, multiplied a model's graph six-fold and took gigabytes to compile."""
    v = pt.vector("v", dtype="float64")
    neighbours = OpFromGraph([v], [pt.sum(v[1:] * v[:-1])])
    x = pt.vector("x", dtype="float64")
    rows = pt.matrix("rows", dtype="float64")
    batched = vectorize_graph([neighbours(x)], replace={x: rows})
    assert unlooped_blockwise(batched) == batched
    values = np.random.default_rng(1).normal(size=(3, 4))
    np.testing.assert_allclose(
        _compile([rows], batched, None)(values)[0],
        np.sum(values[:, 1:] * values[:, :-1], axis=1),
        rtol=1e-14,
    )


def test_a_float32_constant_filled_into_a_float64_shape_keeps_the_disk_cache():
    # pm.Uniform(-1.0, 2.0)'s log-density fills a float32 constant (its Python-float bounds)
    # into the float64 value's shape: no float64 number becomes float32, so the function goes
    # to PyTensor's disk cache of Numba code; a cast of float64 to float32 still does not.
    value = pt.dvector("value")
    assert not _narrows_to_float32([pt.fill(value, np.float32(-1.5)) + value])
    assert _narrows_to_float32([pt.cast(value, "float32")])
    assert _narrows_to_float32([pt.fill(pt.cast(value, "float32"), value)])
    with pm.Model() as model:
        pm.Uniform("u", -1.0, 2.0, shape=3)
    [logp], flat = step_graph(model, model.value_vars).join([model.logp()])
    function = _compile([flat], [logp], None)
    assert CACHED_SRC_FUNCTIONS.get(function.vm.jit_fn.py_func) is not None


# ------------------------------------------------------------ compilations of equal structure
def _regression(
    X: np.ndarray, y: np.ndarray, prior_sd: float = 1.0, data_y: bool = False
) -> pm.Model:
    """Linear regression on ``pm.Data("X")``; ``y`` observed as a constant, or as
    ``pm.Data("y_data")`` (``data_y``)."""
    with pm.Model() as model:
        data = pm.Data("X", X)
        b = pm.Normal("b", 0.0, prior_sd, shape=X.shape[1])
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", data @ b, s, observed=pm.Data("y_data", y) if data_y else y)
    return model


def _logp(model: pm.Model, compile_kwargs: dict | None = None) -> Callable:
    return compile_logp_dlogp(step_graph(model, model.value_vars), compile_kwargs)


def _pymc_logp(model: pm.Model, point: np.ndarray) -> float:
    """PyMC's own compiled log-density (value space, Jacobian included) at ``point`` =
    ``(b_0, b_1, log s)``."""
    return float(model.compile_logp(jacobian=True)({"b": point[:2], "s_log__": point[2]}))


POINT = np.array([0.3, -0.7, 0.2])


def test_a_model_built_again_is_compiled_without_rewriting_and_computes_the_same(monkeypatch):
    X, y = np.random.default_rng(0).normal(size=(6, 2)), np.linspace(-1.0, 1.0, 6)
    _logp(_regression(X, y))  # the template, if no earlier test made it
    compiled = counted_compilations(monkeypatch)
    again = _regression(X, y)
    logp, grad = _logp(again)(POINT)
    assert compiled == []
    first_logp, first_grad = _logp(_regression(X, y))(POINT)
    assert (logp, list(grad)) == (first_logp, list(first_grad))
    np.testing.assert_allclose(logp, _pymc_logp(again, POINT), rtol=1e-12)


def test_other_data_in_pm_data_share_a_compilation_and_each_reads_its_own(monkeypatch):
    rng = np.random.default_rng(1)
    y = np.linspace(-1.0, 1.0, 6)
    _logp(_regression(rng.normal(size=(6, 2)), y))
    compiled = counted_compilations(monkeypatch)
    models = [_regression(rng.normal(size=(6, 2)), y) for _ in range(2)]
    functions = [_logp(model) for model in models]
    assert compiled == []
    values = [f(POINT)[0] for f in functions]
    assert values[0] != values[1]
    for model, value in zip(models, values, strict=True):
        np.testing.assert_allclose(value, _pymc_logp(model, POINT), rtol=1e-12)
    # Set afterwards (pm.set_data), a model's data reach its own function alone.
    with models[1]:
        pm.set_data({"X": np.zeros((6, 2))})
    np.testing.assert_allclose(functions[1](POINT)[0], _pymc_logp(models[1], POINT), rtol=1e-12)
    assert functions[0](POINT)[0] == values[0]


def test_copies_run_the_templates_numba_function_and_generate_no_code(monkeypatch):
    """A copy is linked to its template's Numba function (``compile._LinkedBefore``): linking
    generates no code, and every copy calls the one function, with its own data."""
    rng = np.random.default_rng(3)
    y = np.linspace(-1.0, 1.0, 6)
    _compile(*_value_logp(_regression(rng.normal(size=(6, 2)), y)), None)
    generated = []
    convert = NumbaLinker.fgraph_convert
    monkeypatch.setattr(
        NumbaLinker,
        "fgraph_convert",
        lambda self, *a, **k: generated.append(1) or convert(self, *a, **k),
    )
    models = [_regression(rng.normal(size=(6, 2)), y) for _ in range(2)]
    functions = [_compile(*_value_logp(model), None) for model in models]
    assert generated == []
    template = compile_module._TEMPLATES[-1].function
    assert functions[0].vm.jit_fn is functions[1].vm.jit_fn is template.vm.jit_fn
    point = [POINT[:2], np.array(POINT[2])]
    values = [float(f(*point)[0]) for f in functions]
    assert values[0] != values[1]
    for model, value in zip(models, values, strict=True):
        np.testing.assert_allclose(value, _pymc_logp(model, POINT), rtol=1e-12)
    # Pickled (as a spawned chain process receives it), a copy generates its code again.
    unpickled = pickle.loads(pickle.dumps(functions[1]))
    assert unpickled.vm.jit_fn is not template.vm.jit_fn
    assert float(unpickled(*point)[0]) == values[1]


def _value_logp(model: pm.Model) -> tuple[list, list]:
    """The model's value variables and its log-density (Jacobian included)."""
    return model.value_vars, [model.logp()]


def test_data_of_other_lengths_share_a_compilation(monkeypatch):
    """pm.Data has no static shape: rows of another length are the same graph, and the rewrites
    did not freeze the first length."""
    rng = np.random.default_rng(2)
    _logp(_regression(rng.normal(size=(6, 2)), rng.normal(size=6), data_y=True))
    compiled = counted_compilations(monkeypatch)
    model = _regression(rng.normal(size=(9, 2)), rng.normal(size=9), data_y=True)
    logp = _logp(model)(POINT)[0]
    assert compiled == []
    np.testing.assert_allclose(logp, _pymc_logp(model, POINT), rtol=1e-12)


def test_other_constants_and_other_compile_arguments_compile_afresh(monkeypatch):
    X, y = np.random.default_rng(3).normal(size=(6, 2)), np.linspace(-1.0, 1.0, 6)
    _logp(_regression(X, y))
    compiled = counted_compilations(monkeypatch)
    for model in (_regression(X, y + 1e-9), _regression(X, y, prior_sd=2.0)):
        np.testing.assert_allclose(_logp(model)(POINT)[0], _pymc_logp(model, POINT), rtol=1e-12)
    assert len(compiled) == 2
    mode = get_mode(None).excluding(POLYNOMIAL_EXP)
    _logp(_regression(X, y), {"mode": mode})
    _logp(_regression(X, y), {"mode": mode})  # the same Mode object: the same compilation
    _logp(_regression(X, y), {"mode": get_mode(None).excluding(POLYNOMIAL_EXP)})
    assert len(compiled) == 4
    with pytensor.config.change_flags(numba__fastmath=not pytensor.config.numba__fastmath):
        _logp(_regression(X, y))
    assert len(compiled) == 5


def test_a_copy_keeps_the_order_that_protects_what_an_in_place_operation_overwrites():
    """The rewritten graph sets an element of ``x * d`` in place while two other outputs read
    it; a copy of the compilation runs those readers first, as the template's orderings say
    (the copy keeps the graph's DestroyHandler, which PyTensor's ``Function.copy`` drops)."""
    x = pt.vector("x")
    functions = []
    for _ in range(2):
        product = x * pytensor.shared(np.array([3.0, 2.0, 1.0]), name="d")
        outputs = [pt.set_subtensor(product[0], 5.0), pt.sort(product), product.sum()]
        functions.append(_compile([x], outputs, None))
    template = compile_module._TEMPLATES[-1].function
    assert functions[0] is not template and functions[1] is not template
    for function in functions:
        graph = function.maker.fgraph
        assert any(node.op.destroy_map for node in graph.apply_nodes)
        assert any(isinstance(feature, DestroyHandler) for feature in graph._features)
        moved, ordered, total = function(np.array([1.0, -2.0, 0.5]))
        np.testing.assert_array_equal(moved, [5.0, -4.0, 0.5])
        np.testing.assert_array_equal(ordered, [-4.0, 0.5, 3.0])
        assert total == -0.5


def test_the_templates_are_bounded_in_number_and_in_the_data_they_hold(monkeypatch):
    x = pt.vector("x")
    for k in range(compile_module._MOST_TEMPLATES + 3):
        _compile([x], [x.sum() + float(k)], None)
    assert len(compile_module._TEMPLATES) == compile_module._MOST_TEMPLATES
    monkeypatch.setattr(compile_module, "_MOST_TEMPLATE_BYTES", 8000)
    held = []
    # Kept, kept, too large to keep, kept once the oldest holding data is dropped.
    for k, n in enumerate((400, 400, 1001, 250)):
        data = pytensor.shared(np.ones(n), name="data")
        function = _compile([x], [(x * data).sum() + float(k)], None)
        assert function(np.ones(n))[0] == n + k
        held.append([t.held for t in compile_module._TEMPLATES if t.held])
    assert held == [[3200], [3200, 3200], [3200, 3200], [3200, 2000]]


@pytest.mark.parametrize("step_name", ["SFPStep", "StochasticDynamics", "ParallelTempering"])
@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_step_builds_with_the_garbage_collector_paused_and_restores_it(
    monkeypatch, model, step_name, enabled_before
):
    module = {"SFPStep": sfp, "StochasticDynamics": dynamics, "ParallelTempering": tempering}
    seen = []

    def recording_step_graph(*args, **kwargs):
        seen.append(gc.isenabled())
        return step_graph(*args, **kwargs)

    monkeypatch.setattr(module[step_name], "step_graph", recording_step_graph)
    step_class = getattr(pymc_sfp, step_name)
    (gc.enable if enabled_before else gc.disable)()
    try:
        with model:
            step_class()
        assert seen and not any(seen)
        assert gc.isenabled() is enabled_before
        # A construction that raises restores the collector too.
        with model, pytest.raises(ValueError):
            step_class(vars=[])
        assert gc.isenabled() is enabled_before
    finally:
        gc.enable()
