"""The local line (``pymc_sfp._local_line``): the terms that read a coordinate, one element of
each where the rewrites show that is all it reads; the log-density up to a constant of the line;
exact sampling with it."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.graph.traversal import ancestors

from pymc_sfp import SFPStep, _local_line
from pymc_sfp.compile import LineEvaluator, coordinate_layout, step_graph
from tests.helpers import assert_moments, sample

Y = np.array([1.2, -0.4, 2.0, 0.3, -1.5])


def assert_line_is_the_log_density(
    line: LineEvaluator, start: np.ndarray, seed: int, values_at=None
) -> None:
    """Along every coordinate the line changes as the log-density does, at four points
    (``values_at(i, rng)``; by default N(start[i], 1))."""
    rng = np.random.default_rng(seed)
    for i in range(start.size):
        values = start[i] + rng.normal(size=4) if values_at is None else values_at(i, rng)
        logp, _ = line.along(start, i, values)
        moved = []
        for value in values:
            point = start.copy()
            point[i] = value
            moved.append(line.logp(point))
        change, exact = np.diff(logp), np.diff(moved)
        np.testing.assert_allclose(change, exact, rtol=1e-10, atol=1e-10, err_msg=f"coordinate {i}")


def evaluator(model: pm.Model) -> LineEvaluator:
    graph = step_graph(model, model.value_vars)
    layout = coordinate_layout(model, model.value_vars, graph.initial_point)
    return LineEvaluator(graph, layout, gradient=False, batched=True)


#: Parametrises a test over the two ways of compiling a variable's line: the small variables
#: (the test models' are all small) in one shared graph, and every variable in a graph of its
#: own (as a large one is).
LINE_GRAPHS = pytest.mark.parametrize(
    "own_line_from", [_local_line.OWN_LINE_FROM, 1], ids=["small-shared", "per-variable"]
)


@pytest.fixture
def own_line_from(request, monkeypatch):
    monkeypatch.setattr(_local_line, "OWN_LINE_FROM", request.param)
    return request.param


def sample_sfp(model: pm.Model, seed: int, **options) -> tuple:
    """1500 draws (after 300 tuning) of ``SFPStep(L=30, **options)``, and the step."""
    steps = []
    idata = sample(
        model,
        lambda: steps.append(SFPStep(L=30, **options)) or steps[-1],
        draws=1500,
        tune=300,
        random_seed=seed,
    )
    return idata, steps[0]


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
    assert (
        "2 (term, variable) pairs one element each, 0 the elements that index it, 0 in full"
        in line.line_note
    )
    [function] = line._local.functions
    graph = function.maker.fgraph
    assert not graph.clients[graph.inputs[0]]  # the coordinates x
    start = np.linspace(-3.0, 3.0, 200)
    values = np.array([-1.0, 0.5, 4.0])
    for i in (0, 117, 199):
        logp, _ = line.along(start, i, values)
        moved = [line.logp(np.where(np.arange(200) == i, v, start)) for v in values]
        np.testing.assert_allclose(logp, moved, rtol=1e-12)


@LINE_GRAPHS
def test_a_hierarchical_model_is_the_log_density_up_to_a_constant(own_line_from):
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
    assert (
        "5 (term, variable) pairs one element each, 0 the elements that index it, 6 in full"
        in line.line_note
    )
    rng = np.random.default_rng(3)
    start = np.concatenate([[0.3, -0.2], rng.normal(size=5), rng.uniform(-0.9, 1.9, size=6)])

    def values_at(i: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-0.95, 1.95, size=4) if i >= 7 else rng.normal(size=4)

    assert_line_is_the_log_density(line, start, seed=3, values_at=values_at)


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
    idata, step = sample_sfp(model, 11, compiled=compiled)
    assert step.evaluator.relative
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


# Groups of a hierarchical regression: group 3 has no rows; -1 reads the last group (4).
GROUP = np.array([0, 2, 2, 1, -1, 0, 4, 2, 1, 0, 0, 4])
X = np.linspace(-1.0, 1.0, GROUP.size)
Y_GROUPS = np.array([0.5, -0.2, 1.1, 0.4, -0.9, 0.8, -1.3, 1.5, 0.1, 0.6, 0.3, -1.0])


def hierarchical_regression(data: bool) -> pm.Model:
    """y_j ~ N(mu + tau z[group_j] + w[j % 3] + b x_j, sigma), non-centred: the likelihood reads
    z through ``(mu + tau z)[group]``, and w through a second, crossed grouping; the groups, x
    and y constants or all ``pm.Data`` (PyMC then broadcasts the observed term to the data's
    symbolic shape)."""
    with pm.Model() as model:
        group = pm.Data("group", GROUP) if data else GROUP
        x = pm.Data("x", X) if data else X
        observed = pm.Data("y_data", Y_GROUPS) if data else Y_GROUPS
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        w = pm.Normal("w", 0.0, 1.0, shape=3)
        b = pm.Normal("b", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        mean = (mu + tau * z)[group] + w[np.arange(GROUP.size) % 3] + b * x
        pm.Normal("y", mean, sigma, observed=observed)
    return model


@LINE_GRAPHS
@pytest.mark.parametrize("data", [False, True], ids=["constant", "pm.Data"])
def test_an_indexed_likelihood_reads_the_rows_of_its_group(data, own_line_from):
    """A group's coordinate reads the likelihood's rows of that group alone ((term, variable)
    pairs found "through the index": z's and w's), including a group with no rows and one
    reached by a negative index, and the crossed grouping's effect only at those rows; the
    scalars read every row. Along every coordinate the line is the log-density up to a
    constant, with a constant index (grouped once) and with a ``pm.Data`` index (searched at
    each call), also after ``pm.set_data`` regroups the rows."""
    model = hierarchical_regression(data)
    line = evaluator(model)
    assert line.relative
    assert "2 the elements that index it" in line.line_note
    start = np.random.default_rng(5).normal(size=12)
    assert_line_is_the_log_density(line, start, seed=1)
    if data:
        with model:
            pm.set_data({"group": GROUP[::-1].copy()})
        assert_line_is_the_log_density(line, start, seed=2)


@pytest.mark.parametrize(
    "likelihood",
    [
        lambda z, group: (z[group] + z[0], 1.0),  # reads z[0] besides the index
        lambda z, group: (pt.cumsum(z[group]), 1.0),  # not elementwise after the index
        lambda z, group: (z[group], pt.exp(z[group % 2])),  # two different indices
    ],
    ids=["read-besides", "cumsum", "two-indices"],
)
def test_what_is_not_an_indexed_read_is_summed_in_full(likelihood):
    """Where element j of the likelihood may read more than ``z[group_j]``, the likelihood is
    summed in full at every coordinate of z (none "through the index"), and the line stays the
    log-density up to a constant."""
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        mu, sigma = likelihood(z, GROUP)
        pm.Normal("y", mu, sigma, observed=Y_GROUPS)
    line = evaluator(model)
    assert line.relative
    assert "0 the elements that index it, 1 in full" in line.line_note
    assert_line_is_the_log_density(line, np.random.default_rng(6).normal(size=5), seed=3)


def test_sfp_samples_a_grouped_conjugate_model_through_the_index():
    """z_k ~ N(0, 1), y_j ~ N(z[group_j], 0.5²): z_k | y ~ N(m_k, 1 / p_k) with p_k = 1 + 4 n_k
    and m_k = 4 Σ_{group_j = k} y_j / p_k, independent (group 3 has no rows: the prior). Means
    and second moments within 4 MCSE, sampled on the line through the index."""
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        pm.Normal("y", z[GROUP], 0.5, observed=Y_GROUPS)
    groups = np.where(GROUP < 0, GROUP + 5, GROUP)
    precision = 1.0 + 4.0 * np.bincount(groups, minlength=5)
    mean = 4.0 * np.bincount(groups, weights=Y_GROUPS, minlength=5) / precision
    idata, step = sample_sfp(model, 12)
    assert "1 the elements that index it" in step.evaluator.line_note
    assert_moments(idata, "z", mean, np.outer(mean, mean) + np.diag(1.0 / precision))


# Two covariates per row, for slopes that vary by group (beta of shape (5, 2)).
XS = np.column_stack([X, np.cos(3.0 * X)])


@LINE_GRAPHS
def test_varying_slopes_read_the_rows_of_their_group(own_line_from):
    """Non-centred slopes beta = mu_b + sigma_b z of shape (5, 2), read through the index on
    their first axis by three likelihoods: ``(X * beta[group]).sum(-1)``, column by column
    (``beta[group, 0]``, ``beta[group][:, 1]``), and as the mean of a (12, 2) y. Coordinate
    (k, p) of z reads each likelihood's rows of group k alone (z's three pairs counted "through
    the index", with alpha's), including a group with no rows and one reached by a negative
    index; along every coordinate the line is the log-density up to a constant."""
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0, shape=5)
        mu_b = pm.Normal("mu_b", 0.0, 1.0, shape=2)
        sigma_b = pm.HalfNormal("sigma_b", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=(5, 2))
        beta = mu_b + sigma_b * z
        pm.Normal("y_sum", alpha[GROUP] + (XS * beta[GROUP]).sum(-1), 0.7, observed=Y_GROUPS)
        columns = alpha[GROUP] + beta[GROUP, 0] * XS[:, 0] + beta[GROUP][:, 1] * XS[:, 1]
        pm.Normal("y_columns", columns, 0.7, observed=-Y_GROUPS)
        matrix = alpha[GROUP][:, None] + beta[GROUP]
        pm.Normal("y_matrix", matrix, 0.7, observed=np.outer(Y_GROUPS, [1.0, -1.0]))
    line = evaluator(model)
    assert line.relative
    assert "6 the elements that index it" in line.line_note
    assert_line_is_the_log_density(line, np.random.default_rng(10).normal(size=18), seed=6)


def test_another_variables_rows_are_taken_at_the_groups_positions():
    """On alpha's lines, beta's ``(X * (sigma_b * z)[group]).sum(-1)`` is a term of the rows of
    alpha's group: it is computed for those rows, not for all of them at every call of every
    line (which made a sweep grow like K² on varying slopes). No operation of the compiled line
    that reads the point has an output as long as the data."""
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0, shape=5)
        sigma_b = pm.HalfNormal("sigma_b", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=(5, 2))
        beta = sigma_b * z
        pm.Normal("y", alpha[GROUP] + (XS * beta[GROUP]).sum(-1), 0.7, observed=Y_GROUPS)
    line = evaluator(model)
    assert "2 the elements that index it" in line.line_note
    for function in line._local.functions:
        fgraph = function.maker.fgraph
        point = fgraph.inputs[0]
        whole_data = [
            node
            for node in fgraph.apply_nodes
            if any(o.type.ndim and o.type.shape[0] == GROUP.size for o in node.outputs)
            and point in ancestors(node.inputs)
        ]
        assert not whole_data
    assert_line_is_the_log_density(line, np.random.default_rng(3).normal(size=16), seed=4)


def test_a_large_variable_has_a_line_of_its_own_and_small_ones_share_one():
    """A variable of OWN_LINE_FROM coordinates or more has a compiled function of its own, the
    smaller ones share one: a's line does not read b's likelihood's data, the shared one (b's
    and c's) does, and every line is the log-density up to a constant, also with the data
    changed (``pm.set_data``)."""
    rows = 200
    size = _local_line.OWN_LINE_FROM
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0, shape=size)
        b = pm.Normal("b", 0.0, 1.0)
        pm.Normal("c", 0.0, 1.0, shape=size - 1)
        data = pm.Data("data", np.random.default_rng(0).normal(1.0, 1.0, size=rows))
        pm.Normal("y", b, 1.0, observed=data)
    line = evaluator(model)
    assert len(line._local.functions) == 2
    np.testing.assert_array_equal(line._local.starts, [0, size, size + 1])
    assert line._local.line_of == (0, 1, 1)

    def reads_the_data(function):
        # The shared variables are explicit inputs, after x, index and values.
        fgraph = function.maker.fgraph
        [data_input] = fgraph.inputs[3:]
        return bool(fgraph.clients[data_input])

    a_line, shared_line = line._local.functions
    assert not reads_the_data(a_line)
    assert reads_the_data(shared_line)
    start = np.random.default_rng(1).normal(size=2 * size)
    assert_line_is_the_log_density(line, start, seed=2)
    with model:
        pm.set_data({"data": np.full(rows, -3.0)})
    assert_line_is_the_log_density(line, start, seed=2)


def test_a_matrix_read_across_its_rows_is_summed_in_full():
    """Where row j of a likelihood may read other rows of beta than beta[group_j] (the groups
    on beta's second axis, rows reversed after the index, a sum over the rows), that likelihood
    is summed in full at every coordinate of beta (only alpha's pairs "through the index"), and
    the line stays the log-density up to a constant."""
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0, shape=5)
        beta = pm.Normal("beta", 0.0, 1.0, shape=(5, 2))
        means = [
            (XS.T * beta.T[:, GROUP]).sum(0),
            (XS * beta[GROUP][::-1]).sum(-1),
            (XS * beta[GROUP]).sum(-1) + beta[GROUP].sum(0)[0],
        ]
        for i, mean in enumerate(means):
            pm.Normal(f"y{i}", alpha[GROUP] + mean, 0.7, observed=Y_GROUPS)
    line = evaluator(model)
    assert line.relative
    assert "3 the elements that index it, 3 in full" in line.line_note
    assert_line_is_the_log_density(line, np.random.default_rng(11).normal(size=15), seed=7)


def test_sfp_samples_conjugate_varying_slopes_through_the_index():
    """beta_k ~ N(0, I_2), y_j ~ N(x_j · beta[group_j], 0.5²): beta_k | y ~ N(m_k, S_k) with
    S_k = (I + 4 X_kᵀ X_k)⁻¹ and m_k = 4 S_k X_kᵀ y_k, independent across groups (group 3 has
    no rows: the prior). Means and second moments of the ten coordinates within 4 MCSE,
    sampled on the line through the index."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=(5, 2))
        pm.Normal("y", (XS * beta[GROUP]).sum(-1), 0.5, observed=Y_GROUPS)
        pm.Deterministic("flat", beta.flatten())
    groups = np.where(GROUP < 0, GROUP + 5, GROUP)
    mean, cov = np.zeros((5, 2)), np.zeros((10, 10))
    for k in range(5):
        rows = groups == k
        cov_k = np.linalg.inv(np.eye(2) + 4.0 * XS[rows].T @ XS[rows])
        mean[k] = 4.0 * cov_k @ XS[rows].T @ Y_GROUPS[rows]
        cov[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = cov_k
    idata, step = sample_sfp(model, 13)
    assert "1 the elements that index it, 0 in full" in step.evaluator.line_note
    flat = mean.ravel()
    assert_moments(idata, "flat", flat, np.outer(flat, flat) + cov)


@pytest.mark.parametrize(
    ("mean", "rows", "element_pairs"),
    [
        (lambda theta: theta[:, None], 1, 2),  # row k reads theta[k]: one row each
        (lambda theta: (theta + pt.roll(theta, 1))[:, None], 1, 1),  # row k: theta[k], [k-1]
        (lambda theta: theta[None, :], 0, 2),  # column k reads theta[k]: one column each
        (lambda theta: (theta + pt.roll(theta, 1))[None, :], 0, 1),  # column k: also k-1
    ],
    ids=["row", "row-and-neighbour", "column", "column-and-neighbour"],
)
def test_a_likelihood_broadcast_along_other_axes_reads_one_row(mean, rows, element_pairs):
    """y of shape (6, 3) (or (3, 6)) with a mean broadcast from theta (6,): where row k (or
    column k) reads theta[k] alone, theta's coordinate k reads row (column) k of the likelihood,
    summed (one "element"); a row or column that also reads a neighbour is summed in full. Along
    every coordinate the line is the log-density up to a constant."""
    observed = np.linspace(-1.0, 1.0, 18).reshape((6, 3) if rows else (3, 6))
    with pm.Model() as model:
        tau = pm.HalfNormal("tau", 1.0)
        theta = pm.Normal("theta", 0.0, tau, shape=6)
        pm.Normal("y", mean(theta), 0.5, observed=observed)
    line = evaluator(model)
    assert line.relative
    assert f"{element_pairs} (term, variable) pairs one element each" in line.line_note
    assert_line_is_the_log_density(line, np.random.default_rng(8).normal(size=7), seed=4)


def test_everything_in_pm_data_keeps_the_local_line():
    """The usual "everything in pm.Data" model, y ~ N(mu + z[g] + x, s) with g, x and y data:
    PyMC broadcasts the observed term to the data's symbolic shape, which the scalars' lines
    must not batch (it failed at every call, and every line was evaluated in full)."""
    with pm.Model() as model:
        group, x = pm.Data("group", GROUP), pm.Data("x", X)
        observed = pm.Data("y_data", Y_GROUPS)
        mu, s = pm.Normal("mu", 0.0, 1.0), pm.HalfNormal("s", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        pm.Normal("y", mu + z[group] + x, s, observed=observed)
    line = evaluator(model)
    assert line.relative
    assert "1 the elements that index it" in line.line_note
    assert_line_is_the_log_density(line, np.random.default_rng(9).normal(size=7), seed=5)


@pytest.mark.parametrize(
    "likelihood",
    [
        lambda z, group: pm.Poisson("y", z[group], observed=np.arange(GROUP.size) % 4),
        lambda z, group: pm.Poisson("y", pt.exp(z[group]), observed=np.arange(GROUP.size) % 4),
        lambda z, group: pm.Bernoulli("y", logit_p=z[group], observed=Y_GROUPS > 0),
        lambda z, group: pm.Censored(
            "y",
            pm.Normal.dist(z[group], 1.0),
            lower=-0.5,
            upper=0.8,
            observed=Y_GROUPS.clip(-0.5, 0.8),
        ),
    ],
    ids=["Poisson(z)", "Poisson(exp z)", "Bernoulli(logit z)", "Censored"],
)
def test_a_glm_through_an_index_checks_its_parameters_per_point(likelihood):
    """PyMC's parameter checks (mu >= 0, 0 <= p <= 1) read the group's variable; they are
    checked on the group's rows at each point of the line, so a rate z < 0 (Poisson(z)) gives
    -inf at those points alone, as the log-density does, and the line goes through the index."""
    with pm.Model() as model:
        z = pm.Normal("z", 1.0, 1.0, shape=5)
        likelihood(z, GROUP)
    line = evaluator(model)
    assert line.relative
    assert "1 the elements that index it, 0 in full" in line.line_note
    start = np.array([1.0, 1.5, 2.0, 0.5, 0.8])
    values = np.array([-1.0, -0.1, 0.5, 1.0, 2.5])
    for i in range(5):
        along, _ = line.along(start, i, values)
        exact = []
        for value in values:
            point = start.copy()
            point[i] = value
            exact.append(line.logp(point))
        np.testing.assert_allclose(along - along[3], np.array(exact) - exact[3], rtol=1e-10)


def test_a_local_line_that_fails_to_build_falls_back_to_the_general_line(monkeypatch, caplog):
    """Whatever goes wrong while the local line is built or compiled, the step evaluates every
    line in full and says why, as when the built line disagrees with the log-density."""

    def fails(*args, **kwargs):
        raise RuntimeError("no local line here")

    monkeypatch.setattr("pymc_sfp.compile.local_line", fails)
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=3)
    line = evaluator(model)
    assert not line.relative
    assert "building the local line raised RuntimeError('no local line here')" in caplog.text
    start = np.array([0.1, -0.2, 0.3])
    logp, _ = line.along(start, 1, np.array([0.5]))
    np.testing.assert_allclose(logp, [line.logp(np.array([0.1, 0.5, 0.3]))], rtol=1e-12)
