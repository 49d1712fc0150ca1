"""The structured line of a ``pymc_sfp.nn`` network (``pymc_sfp._network_line``): the same
log-density as the model's along every coordinate it serves, the general line for the others,
and a visible fallback when its split of the log-density is wrong."""

import logging

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

from pymc_sfp import _network_line, nn
from pymc_sfp.compile import LineEvaluator, coordinate_layout, step_graph
from pymc_sfp.learning import marginal_prior
from pymc_sfp.learning.tabulated_prior import static_shape
from pymc_sfp.marginals import Marginal

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3))
LABELS = RNG.integers(0, 3, 40)
TARGETS = RNG.normal(size=(40, 1))


def network_model(prior, output, hidden, centred=False):
    with pm.Model() as model:
        net = nn.mlp(
            X, (3, *hidden, 3 if output == "softmax" else 1), output=output, prior=prior,
            centred=centred,
        )  # fmt: skip
        if output == "softmax":
            nn.categorical_likelihood(net, LABELS)
        else:
            nn.gaussian_likelihood(net, TARGETS)  # unknown noise sd: a coordinate outside
    return model


def assert_line_is_the_log_density(line, x, i, values, rtol):
    moved = np.repeat(x[None], len(values), axis=0)
    moved[:, i] = values
    expected = [line.logp(row) for row in moved]
    np.testing.assert_allclose(line.along(x, i, values)[0], expected, rtol=rtol, err_msg=str(i))


def assert_advanced_network_is_the_network(line, x, i, value):
    """The network's cache advanced by moving coordinate ``i`` to ``value``, as the compiled
    sweep does after an accepted move, is the network computed at the moved point."""
    moved = x.copy()
    moved[i] = value
    advanced, fresh = line.advanced_network(x, i, value), line._network[0](moved)
    for k, (new, expected) in enumerate(zip(advanced, fresh, strict=True)):
        np.testing.assert_allclose(new, expected, rtol=1e-12, atol=1e-12, err_msg=f"{i}, cache {k}")


def general_variables(line, layout):
    """The variables whose coordinates take the general line."""
    return {layout.describe(i).split("[")[0] for i in np.flatnonzero(~line.structured)}


def evaluator(model, value_vars=None):
    value_vars = value_vars or model.value_vars
    graph = step_graph(model, value_vars)
    layout = coordinate_layout(model, value_vars, model.initial_point())
    return LineEvaluator(graph, layout, gradient=False, batched=True), layout, graph


def test_each_kind_of_coordinate_has_a_line_of_its_own():
    """A network with two layers of weights and a noise sd outside it: one function per kind
    (each layer's weights and biases, the noise sd), each coordinate served by its kind's, which
    is its log-density along it (one graph for all ran every kind's branch at every call)."""
    model = network_model("gaussian", "linear", (4,))
    line, layout, _ = evaluator(model)
    names = [layout.describe(i).split("[")[0] for i in range(layout.size)]
    kinds = line._along.kinds
    assert len(line._along.functions) == 3
    by_name = {name: set(kinds[[n == name for n in names]].tolist()) for name in set(names)}
    assert by_name["net_w0"] == by_name["net_b0"] and by_name["net_w1"] == by_name["net_b1"]
    outside = [name for name in by_name if name not in {"net_w0", "net_b0", "net_w1", "net_b1"}]
    assert len(outside) == 1
    assert sorted(min(v) for v in (by_name["net_w0"], by_name["net_w1"], by_name[outside[0]])) == [
        0,
        1,
        2,
    ]
    assert all(len(v) == 1 for v in by_name.values())
    x = layout.from_value(step_graph(model, model.value_vars).start) + 0.1
    for i in range(layout.size):
        assert_line_is_the_log_density(line, x, i, np.array([-0.3, 0.2]), rtol=1e-10)


@pytest.mark.parametrize(
    ("prior", "output", "hidden", "centred"),
    [
        ("uniform", "softmax", (4,), False),
        ("gaussian", "linear", (4, 3), False),
        ("group", "linear", (4,), False),
        ("group", "softmax", (4,), True),
        ("ard", "softmax", (4, 3), False),
        ("ard", "linear", (4,), True),  # the weights' prior sd broadcast from one per input
    ],
)
def test_structured_line_is_the_log_density_along_every_coordinate(prior, output, hidden, centred):
    model = network_model(prior, output, hidden, centred)
    line, layout, graph = evaluator(model)
    assert line.structure_note == "network 'net'"
    # Exactly the coordinates that move many weights at once (the group scales of the
    # non-centred form) take the general line; every weight, bias and the noise sd take the
    # structured one, and so do centred scales, which reach the weights' prior, not the logits.
    scales = {name for name in layout.rv_names if name.startswith("net_sd_")}
    assert general_variables(line, layout) == (set() if centred else scales)
    served = f"one unit per value, for {line.structured.sum()} of {layout.size} coordinates"
    assert served in line.line_note
    x = layout.from_value(graph.start) + RNG.normal(0.0, 0.3, layout.size)
    x = np.clip(x, layout.lower + 1e-3, layout.upper - 1e-3)
    for i in range(layout.size):
        if layout.interval[i]:
            values = np.linspace(layout.lower[i] + 0.01, layout.upper[i] - 0.01, 5)
        else:
            values = x[i] + np.linspace(-1.0, 1.0, 5)
        assert_line_is_the_log_density(line, x, i, values, rtol=1e-12)
        if line.structured[i]:
            assert_advanced_network_is_the_network(line, x, i, values[1])


def test_a_step_over_some_variables_serves_its_own_coordinates():
    """A step over the output layer only (the rest shared): its coordinates are structured."""
    model = network_model("gaussian", "linear", (4,))
    value_vars = [model.rvs_to_values[model[name]] for name in ("net_w1", "net_b1")]
    line, _, graph = evaluator(model, value_vars)
    assert line.structured.all()
    x = graph.start + 0.1
    for i in range(len(x)):
        assert_line_is_the_log_density(line, x, i, np.array([-0.5, 0.5]), rtol=1e-12)
        assert_advanced_network_is_the_network(line, x, i, 0.5)


def test_models_without_a_usable_network_use_the_general_line():
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0)
    line, _, _ = evaluator(model)
    assert line.structured is None and "no network" in line.structure_note
    with pm.Model() as model:
        nn.mlp(X, (3, 2, 1), prior="gaussian")  # no likelihood reads it
    line, _, _ = evaluator(model)
    assert line.structured is None and "no network's single weights" in line.structure_note


def test_a_wrong_split_is_caught_and_falls_back(monkeypatch, caplog):
    split = _network_line._split_log_density

    def off_by_one(model, network):
        prior, likelihood, placeholder = split(model, network)
        return prior, likelihood + 1.0, placeholder

    monkeypatch.setattr(_network_line, "_split_log_density", off_by_one)
    model = network_model("uniform", "softmax", (2,))
    with caplog.at_level(logging.WARNING, logger="pymc_sfp"):
        line, _, _ = evaluator(model)
    assert line.structured is None
    assert "disagrees with the log-density at net_w0[0, 0]" in line.structure_note
    assert "lines evaluated in full" in caplog.text


@pytest.mark.parametrize("tabulated", [False, True])
def test_float32_network_uses_its_structure(tabulated):
    """A float32 model sums the same terms in another order: the check at construction allows
    for float32 rounding, and the line agrees with the log-density to it, also under SFP-I's
    tabulated prior (float32 tables, whose interpolation the line reads at float64 points)."""
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model() as model:
            prior = "uniform" if tabulated else "group"
            net = nn.mlp(X.astype("float32"), (3, 2, 3), output="softmax", prior=prior)
            nn.categorical_likelihood(net, LABELS)
            for var in [*net.weights, *net.biases] if tabulated else []:
                marginals = np.empty(static_shape(var, model), dtype=object)
                for idx in np.ndindex(marginals.shape):
                    marginals[idx] = Marginal(np.linspace(-1, 1, 30), np.linspace(0, 1, 30))
                marginal_prior(var, marginals)
        line, layout, graph = evaluator(model)
    assert line.structure_note == "network 'net'"
    assert tabulated == layout.interval.all()
    x = layout.from_value(graph.start) + 0.2
    for i in range(layout.size):
        if layout.interval[i]:  # within the box, where the log-density is defined
            values = np.linspace(layout.lower[i] + 0.01, layout.upper[i] - 0.01, 4)
        else:
            values = x[i] + np.linspace(-1.0, 1.0, 4)
        assert_line_is_the_log_density(line, x, i, values, rtol=1e-5)


def test_float32_networks_are_not_cached_on_disk():
    """PyTensor's cache key of a fused elementwise operation lacks its outputs' dtypes: the
    code of a float32 network's line (float64 coordinates narrowed to float32), cached, would be
    loaded for a float64 network with the same operations, its sums accumulated in float32. So
    the functions of a graph that narrows to float32 are compiled without the disk cache; those
    of the float64 network keep it."""
    cached = {}
    for floatx in ("float64", "float32"):
        with pytensor.config.change_flags(floatX=floatx):
            with pm.Model() as model:
                net = nn.mlp(X.astype(floatx), (3, 2, 3), output="softmax", prior="uniform")
                nn.categorical_likelihood(net, LABELS)
            line, _, _ = evaluator(model)
        functions = (line._point, *line._along.functions, line._network[0])
        cached[floatx] = [CACHED_SRC_FUNCTIONS.get(f.vm.jit_fn.py_func) for f in functions]
    assert all(key is not None for key in cached["float64"])
    assert all(key is None for key in cached["float32"])


def test_weights_another_term_reads_take_the_general_line():
    """A penalty on the first layer's weights besides their prior that is not a sum of one
    term per weight: their coordinates take the general line; the rest stays structured, and
    every line is still the log-density."""
    with pm.Model() as model:
        net = nn.mlp(X, (3, 3, 1), prior="gaussian")
        nn.gaussian_likelihood(net, TARGETS)
        pm.Potential("squared_sum", -(pt.sum(net.weights[0]) ** 2))
    line, layout, graph = evaluator(model)
    assert general_variables(line, layout) == {"net_w0"}
    x = graph.start + RNG.normal(0.0, 0.3, layout.size)
    for i in range(layout.size):
        assert_line_is_the_log_density(line, x, i, x[i] + np.linspace(-1.0, 1.0, 3), rtol=1e-12)


def test_a_hard_constraint_on_the_outputs_is_minus_infinity_on_the_structured_line():
    """A potential that forbids large outputs is a likelihood term of the logits: the structured
    line serves every weight and gives -inf exactly where the log-density does."""
    with pm.Model() as model:
        net = nn.mlp(X, (3, 3, 1), prior="uniform")
        nn.gaussian_likelihood(net, TARGETS, sigma=1.0)
        pm.Potential("cap", pt.switch(pt.any(net.logits > 0.5), -np.inf, 0.0))
    line, layout, _ = evaluator(model)
    assert line.structure_note == "network 'net'" and line.structured.all()
    x = np.zeros(layout.size)  # every output is 0: inside the constraint
    forbidden = 0
    for i in range(layout.size):
        values = np.linspace(layout.lower[i] + 0.01, layout.upper[i] - 0.01, 9)
        along = line.along(x, i, values)[0]
        forbidden += np.isneginf(along).sum()
        assert_line_is_the_log_density(line, x, i, values, rtol=1e-12)
    assert forbidden > 0  # the constraint is hit, so the comparison covers -inf


def test_cached_functions_follow_the_point_they_are_called_at():
    """The compiled sweep's cached ``point`` and ``along`` (``compile._cached_line``) after each
    kind of change of the point: none, one weight (the cache advances by one unit), the noise
    sd, a group scale, two weights at once (for these three the cache afresh). ``point``
    is called before ``along`` each time, one coordinate away from the cache or more."""
    model = network_model("group", "linear", (3, 2))
    line, layout, graph = evaluator(model)
    jitted = line.jitted()
    [along] = jitted.along  # a network's line is one function
    x = layout.from_value(graph.start) + RNG.normal(0.0, 0.3, layout.size)
    point_extra, along_extra = jitted.extras(x)
    name = [layout.describe(i).split("[")[0] for i in range(layout.size)]
    weights = [i for i in range(layout.size) if name[i] in ("net_w0_z", "net_w1_z")]
    moves = [
        [],
        [weights[0]],
        [weights[-1]],
        [name.index("net_y_sigma")],
        [name.index("net_sd_w0")],
        weights[1:3],
    ]
    for moved in moves:
        x = x.copy()
        x[moved] += 0.4
        np.testing.assert_allclose(jitted.point(x, *point_extra)[0], line.logp(x), rtol=1e-12)
        for i in range(0, layout.size, 3):
            values = x[i] + np.linspace(-0.5, 0.5, 3)
            got = along(x, np.asarray(i, dtype=np.int64), values, *along_extra)[0]
            np.testing.assert_allclose(got, line.along(x, i, values)[0], rtol=1e-12, err_msg=str(i))


def test_an_accepted_proposal_takes_the_advance_that_point_staged():
    """``point`` at a proposal one weight away from the cache stages the advance to it, and
    ``along`` at that proposal (the move accepted) copies it into the cache instead of
    evaluating the line once more: with the staged entries spoilt after ``point``, ``along``
    reads the spoilt network. A proposal not taken (another value of the coordinate) is
    advanced to by the line, and is the log-density."""
    model = network_model("gaussian", "softmax", (3,))
    line, layout, graph = evaluator(model)
    jitted = line.jitted()
    [along] = jitted.along  # a network's line is one function
    n_cache = len(line._network[0].maker.fgraph.outputs)
    x = layout.from_value(graph.start) + RNG.normal(0.0, 0.3, layout.size)
    name = [layout.describe(i).split("[")[0] for i in range(layout.size)]
    for i in (name.index("net_w0"), name.index("net_b0"), name.index("net_w1")):
        index, values = np.asarray(i, dtype=np.int64), x[i] + np.linspace(-0.5, 0.5, 3)
        for taken in (True, False):
            point_extra, along_extra = jitted.extras(x)
            *staging, staged = along_extra[1 + n_cache : 2 + 2 * n_cache]
            proposal = x.copy()
            proposal[i] += 0.4
            np.testing.assert_allclose(
                jitted.point(proposal, *point_extra)[0], line.logp(proposal), rtol=1e-12
            )
            assert staged[0] == i and staged[1] == proposal[i]
            for array in staging:
                array[...] = np.nan
            if not taken:
                proposal[i] -= 0.1
            got = along(proposal, index, values, *along_extra)[0]
            if taken:
                assert np.isnan(got).all()
            else:
                expected = line.along(proposal, i, values)[0]
                np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=str(i))


@pytest.mark.parametrize("floatx", ["float64", "float32"])
def test_elementwise_penalties_keep_the_weights_structured(floatx):
    """Potentials that are a sum of one term per weight, written as users write them (a scaled
    L1 penalty, a quartic one divided by a constant, a hard sign constraint, a penalty with
    per-input data broadcast over the units): every coordinate keeps the structured line, and
    every line is the log-density, ``-inf`` included; in a float32 model to float32 rounding."""
    rtol = 1e-12 if floatx == "float64" else 1e-5
    with pytensor.config.change_flags(floatX=floatx):
        scales = pm.math.constant(np.linspace(0.5, 2.0, 3).astype(floatx))
        with pm.Model() as model:
            net = nn.mlp(X.astype(floatx), (3, 3, 1), prior="gaussian")
            nn.gaussian_likelihood(net, TARGETS.astype(floatx), sigma=1.0)
            W0, W1 = net.weights
            per_input = np.linspace(1.0, 3.0, 3)[:, None].astype(floatx)
            per_input = pm.Data("per_input", per_input, shape=(3, 1))
            pm.Potential("l1", -0.7 * pt.abs(W0 * per_input).sum())
            pm.Potential("quartic", -pt.sum(W1**4) / 4.0)
            pm.Potential("positive", pt.switch(net.biases[0] > 0, 0.0, -np.inf).sum())
            pm.Potential("scaled", -pt.sum((net.biases[1] * scales[:1]) ** 2))
        line, layout, graph = evaluator(model)
    assert line.structure_note == "network 'net'" and line.structured.all()
    biases = layout.slices[layout.rv_names.index("net_b0")]
    for k in range(3):
        x = graph.start + RNG.normal(0.0, 0.5, layout.size)
        if k < 2:  # inside the sign constraint; the last point outside it
            x[biases] = np.abs(x[biases])
        for i in range(layout.size):
            values = x[i] + np.linspace(-1.0, 1.0, 5)
            assert_line_is_the_log_density(line, x, i, values, rtol=rtol)
            if floatx == "float64":
                assert_advanced_network_is_the_network(line, x, i, values[0])


def test_the_tabulated_prior_of_sfp_i_keeps_the_weights_structured():
    """``marginal_prior`` (Berrones Eq. 21) puts a potential on every weight and bias, marked
    elementwise: every coordinate keeps the structured line, which reads one row of the table.
    Some marginals cover only part of the box, and the point stands outside one or two of them
    (the prior there is ``-inf``): every line is still the log-density (along the one weight
    outside its range, finite where it moves back inside), and the cache advanced into and out
    of a marginal's range is the network computed afresh."""
    rng = np.random.default_rng(1)
    with pm.Model() as model:
        net = nn.mlp(X, (3, 3, 1), prior="uniform")
        nn.gaussian_likelihood(net, TARGETS, sigma=1.0)
        for var in [*net.weights, *net.biases]:
            shape = static_shape(var, model)
            marginals = np.empty(shape, dtype=object)
            for idx in np.ndindex(shape):
                low, high = np.sort(rng.uniform(-1.0, 1.0, 2)) if rng.random() < 0.5 else (-1, 1)
                points = np.linspace(low, high, 30)
                marginals[idx] = Marginal(points, np.linspace(0, 1, 30) ** rng.uniform(0.5, 2))
            marginal_prior(var, marginals)
    line, layout, _ = evaluator(model)
    assert line.structure_note == "network 'net'" and line.structured.all()
    ranges = np.empty((layout.size, 2))
    for name, slc in zip(layout.rv_names, layout.slices, strict=True):
        ranges[slc, 0] = model[f"{name}_marginal_prior_lower"].get_value()
        ranges[slc, 1] = model[f"{name}_marginal_prior_upper"].get_value()
    narrow = np.flatnonzero((ranges[:, 0] > -0.9) & (ranges[:, 1] < 0.9))
    assert len(narrow) >= 2
    inside = ranges.mean(axis=1)
    for outside in (narrow[:1], narrow[:2]):  # the prior at x is -inf for one or two weights
        x = inside.copy()
        x[outside] = 0.95
        for i in range(layout.size):
            values = np.linspace(layout.lower[i] + 0.01, layout.upper[i] - 0.01, 9)
            assert_line_is_the_log_density(line, x, i, values, rtol=1e-12)
            along = line.along(x, i, values)[0]
            if len(outside) == 1 and i == outside[0]:  # back inside its range
                assert np.isfinite(along).any() and np.isneginf(along).any()
            else:
                assert np.isneginf(along).all()
            for value in (inside[i], 0.99):  # into the marginal's range, and out of it
                assert_advanced_network_is_the_network(line, x, i, value)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_lines_tanh_is_tanh_to_the_last_places(dtype):
    # The line's tanh (one exp) against the C library's, over the range a unit's summed input
    # takes, the values where a formula through exp goes wrong (0, -0, subnormals, overflow of
    # exp(2|u|), ±inf) and NaN.
    u = np.concatenate(
        [
            RNG.normal(0.0, 3.0, 2000),
            np.geomspace(1e-300, 1e3, 400),
            -np.geomspace(1e-300, 1e3, 400),
            [0.0, -0.0, 5e-324, 19.0, 20.0, 400.0, np.inf, -np.inf],
        ]
    ).astype(dtype)
    value = pt.vector(dtype=dtype)
    fast = pytensor.function([value], _network_line._tanh(value), mode="NUMBA")(u)
    exact = np.tanh(u.astype("float64"))
    assert fast.dtype == dtype
    eps = np.finfo(dtype).eps
    # An absolute error: the line sums the units' outputs, so a relative one at tiny inputs
    # would buy nothing.
    np.testing.assert_allclose(fast, exact, rtol=0.0, atol=2 * eps)
    # Never of the wrong sign (inputs below about eps give 0).
    assert (np.sign(fast) * np.sign(exact) >= 0).all()
    nan = pytensor.function([value], _network_line._tanh(value), mode="NUMBA")([np.nan])
    assert np.isnan(nan).all()
