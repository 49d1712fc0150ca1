"""The log-density along one coordinate of a network's weights, without the whole network per point.

SFP evaluates the log-density at ``G`` points along each coordinate (Berrones 2009, §1). For a
network built with :func:`pymc_sfp.nn.mlp`, the general way (the model's log-density vectorised
over ``G`` rows) runs the whole network on every data point ``G`` times per coordinate, so a sweep
costs ``O(G · n · W²)`` for ``W`` weights and ``n`` data points (the slope 2 against the
paper's Fig. 10). A weight into unit ``j`` of layer ``l`` changes only that unit's summed input,
by ``δ · u`` for a fixed input column ``u``, so along the line:

* the network at the current point is read from a cache (:attr:`NetworkLine.cache`: each
  layer's summed input and output);
* for each of the ``G`` values, column ``j`` of layer ``l`` is updated (``O(n)``), passed through
  ``tanh``, and its change is carried into the next layer along row ``j`` of that layer's weights
  (``O(n · units)``); for the last hidden layer that gives the logits (``O(n · outputs)``);
* the terms of the log-density that read the network (its likelihood) are evaluated on those
  ``G`` logits; the weight's own prior term, the only other term that reads it and quadratic in
  it, by its second-order expansion at the current point (exact; ``O(N)`` once for ``N``
  coordinates).

The cache is computed once per sweep (``O(n · W)``) and, after an accepted move, advanced by
the same one-unit update (:attr:`NetworkLine.advance`, :class:`CacheUpdate`). For a network with
one hidden layer a coordinate therefore costs ``O(N + G · n · outputs)`` instead of
``O(G · n · W)``, and a sweep is linear in the number of weights but for the ``O(N)`` terms.
Coordinates that do not reach the logits (a noise sd, a centred group scale) are evaluated at the
``G`` moved points with the logits held fixed; coordinates that move many weights at once (a
group's scale in the non-centred form) or that another term reads take the general evaluation.
Each kind of coordinate is a branch of one graph that gets the values only for its own kind. This
module builds the graphs; :mod:`pymc_sfp.compile` compiles them, checks them against the model's
log-density before using them, and keeps the cache in the compiled sweep. It returns ``None``
(the general evaluation) for anything it does not recognise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import NormalRV, UniformRV

from pymc_sfp.nn.network import Network, networks_of

if TYPE_CHECKING:
    from pymc_sfp.compile import CoordinateLayout

__all__ = ["GENERAL", "OUTSIDE", "CacheUpdate", "NetworkLine", "network_line", "rows_along"]

#: ``layer`` of a coordinate that does not reach the network's logits.
OUTSIDE = -1
#: ``layer`` of a coordinate that moves several weights at once (the general evaluation).
GENERAL = -2


@dataclass(frozen=True)
class NetworkLine:
    """The structured line of one network.

    Attributes
    ----------
    along : TensorVariable
        The log-density of the sampling coordinates at the ``G`` rows ``x`` with
        ``x[index] = values``, shape ``(G,)``, given the network at ``x`` as :attr:`cache`.
    structured : ndarray of bool, shape (N,)
        The coordinates whose line :attr:`along` evaluates by the structure; the others take
        the general evaluation in it, and a move of one of them changes many units at once.
    network : str
        The network's name.
    cache : tuple of TensorVariable
        Float64 inputs of :attr:`along` and :attr:`advance`: the network at ``x``, each layer's
        summed input (``(n, units)``, the last one the logits), then each hidden layer's output.
    forward : tuple of TensorVariable
        The cache at ``x`` (``O(n · W)``).
    advance : tuple of TensorVariable
        What changes in the cache when ``x[index]`` moves to ``values[0]``, computed from the
        cache at ``x`` with :attr:`along` (further outputs of the same function), for a
        coordinate with a layer; :attr:`update` writes it.
    update : CacheUpdate
    """

    along: pt.TensorVariable
    structured: np.ndarray
    network: str
    cache: tuple[pt.TensorVariable, ...]
    forward: tuple[pt.TensorVariable, ...]
    advance: tuple[pt.TensorVariable, ...]
    update: CacheUpdate


@dataclass(frozen=True)
class CacheUpdate:
    """How the outputs of :attr:`NetworkLine.advance` update the cache in place.

    Attributes
    ----------
    layer : ndarray of int64, shape (N,)
        Per coordinate, the layer of the weight or bias it moves; ``-1`` if it does not reach
        the logits (the cache stays), ``-2`` if it moves many weights (the cache afresh).
    column : ndarray of int64, shape (N,)
        The unit the coordinate feeds.
    writes : dict
        Per layer, the writes ``(output, cache array, whole)``; ``whole=False`` writes the
        coordinate's column.
    """

    layer: np.ndarray
    column: np.ndarray
    writes: dict[int, tuple[tuple[int, int, bool], ...]]

    def apply(self, cache: list[np.ndarray], new: list[np.ndarray], index: int) -> None:
        """Write ``new``, the outputs of :attr:`NetworkLine.advance` (each of one row) for a
        move of coordinate ``index`` (one with a layer), into ``cache``."""
        j = self.column[index]
        for output, target, whole in self.writes[int(self.layer[index])]:
            if whole:
                cache[target][...] = new[output][0]
            else:
                cache[target][:, j] = new[output][0]


def network_line(
    model: pm.Model,
    join: Callable[[list], tuple[list, pt.TensorVariable]],
    layout: CoordinateLayout,
    value_vars: list,
    logp: pt.TensorVariable,
    x: pt.TensorVariable,
    index: pt.TensorVariable,
    values: pt.TensorVariable,
) -> NetworkLine | None:
    """The structured line of the first network of ``model`` it applies to, or ``None``.

    Parameters
    ----------
    model : pm.Model
    join : callable
        Maps graphs of the model's value variables to graphs of the sampling coordinates ``x``
        (the step's variables joined and mapped to their sampling scale); returns the graphs and
        the log-Jacobian term to subtract, as ``([graphs], log_jacobian)``.
    layout : CoordinateLayout
        Where each coordinate of ``x`` comes from.
    value_vars : list
        The step's value variables, in ``layout``'s order.
    logp : TensorVariable
        The log-density of the sampling coordinates at ``x``: the general line, vectorised over
        the rows, serves the coordinates the structure does not.
    x, index, values : TensorVariable
        The sampling coordinates, the coordinate that moves (0-d int64) and its ``G`` values.
    """
    for network in networks_of(model):
        if network.logits is None:  # integrated output layer: the likelihood reads the features
            continue
        split = _split_log_density(model, network)
        if split is None:
            continue
        prior, likelihood, placeholder = split
        layers = _coordinate_layers(model, network, layout, value_vars, likelihood)
        if layers is None:
            continue
        n_layers = len(network.weights)
        graphs, log_jacobian = join(
            [prior, likelihood, *model.replace_rvs_by_values([*network.weights, *network.biases])]
        )
        prior_x, likelihood_x = graphs[0] - log_jacobian, graphs[1]
        weights_x, biases_x = graphs[2 : 2 + n_layers], graphs[2 + n_layers :]
        inputs_x, summed_x = _forward(network, weights_x, biases_x)
        forward = (*summed_x, *inputs_x[1:n_layers])
        cache = tuple(
            pt.matrix(f"{network.name}_{'summed' if k < n_layers else 'hidden'}{k}", dtype=float)
            for k in range(len(forward))
        )
        cached = [c.astype(summed_x[0].dtype) for c in cache]
        summed, inputs = cached[:n_layers], [network.X, *cached[n_layers:]]
        kind = layers[0]
        parts = []

        def served(mask: np.ndarray) -> pt.TensorVariable:
            # Numba evaluates every branch, so a branch gets the values only for the
            # coordinates it serves, and none otherwise: one compiled function for all.
            return values[: values.shape[0] * pt.constant(mask)[index].astype("int64")]

        if np.any(kind >= 0):  # one weight or bias: its own prior term is quadratic in it
            step = served(kind >= 0) - x[index]
            slope = pt.grad(prior_x, x)[index]
            curvature = pt.grad(slope, x)[index]
            logits, moves = _logits_along(
                weights_x, biases_x, layers, x, step, index, inputs, summed
            )
            likelihood_rows = vectorize_graph(likelihood_x, {placeholder: logits})
            parts.append(prior_x + slope * step + 0.5 * curvature * step**2 + likelihood_rows)
        if np.any(kind == OUTSIDE):  # the logits stay as they are
            rows = rows_along(x, index, served(kind == OUTSIDE))
            logits = pt.repeat(summed[-1][None], rows.shape[0], axis=0)
            parts.append(vectorize_graph(prior_x + likelihood_x, {x: rows, placeholder: logits}))
        if np.any(kind == GENERAL):
            parts.append(vectorize_graph(logp, {x: rows_along(x, index, served(kind == GENERAL))}))
        along = parts[0] if len(parts) == 1 else pt.concatenate(parts)
        advance, plan = _advance(moves, n_layers)
        update = CacheUpdate(kind, layers[3], plan)
        return NetworkLine(
            along, kind != GENERAL, network.name, cache, forward, tuple(advance), update
        )
    return None


def rows_along(
    x: pt.TensorVariable, index: pt.TensorVariable, values: pt.TensorVariable
) -> pt.TensorVariable:
    """``x`` repeated once per value, with ``x[index]`` set to the value: ``(G, N)``."""
    return pt.set_subtensor(pt.repeat(x[None, :], values.shape[0], axis=0)[:, index], values)


def _split_log_density(
    model: pm.Model, network: Network
) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable] | None:
    """``model.logp()`` as ``prior + likelihood(logits)`` with the logits a placeholder input.

    The likelihood is every observed variable and potential that reads the network's logits,
    rebuilt on the placeholder; the prior is every other term. ``None`` if no term reads them.
    """
    logits = network.logits
    terms = [*model.observed_RVs, *model.potentials]
    reads = [term for term in terms if logits in ancestors([term])]
    if not reads:
        return None
    placeholder = logits.type(name=f"{network.name}_logits")
    pieces = []
    for term in reads:
        # graph_replace keeps the nodes the logits do not feed (the free variables themselves,
        # not clones), so that their values replace them below.
        rebuilt = graph_replace(term, {logits: placeholder})
        if term in model.potentials:
            pieces.append(pt.sum(rebuilt))
        else:
            pieces.append(pt.sum(pm.logp(rebuilt, model.rvs_to_values[term])))
    [likelihood] = model.replace_rvs_by_values([pt.add(*pieces)])
    others = [term for term in terms if term not in reads]
    prior = model.logp(vars=[*model.free_RVs, *others])
    return prior, likelihood, placeholder


def _coordinate_layers(
    model: pm.Model,
    network: Network,
    layout: CoordinateLayout,
    value_vars: list,
    likelihood: pt.TensorVariable,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per coordinate: the layer whose weight or bias it moves (or ``OUTSIDE``/``GENERAL``),
    whether it is a bias, and the weight's row ``k`` and column ``j`` (the unit it feeds).

    A weight's coordinate gets its layer only if :func:`_own_quadratic_term` holds for it;
    otherwise it is ``GENERAL``. ``None`` when no coordinate gets a layer.
    """
    layer = np.full(layout.size, OUTSIDE, dtype=np.int64)
    is_bias = np.zeros(layout.size, dtype=bool)
    row = np.zeros(layout.size, dtype=np.int64)
    column = np.zeros(layout.size, dtype=np.int64)
    [logits_values] = model.replace_rvs_by_values([network.logits])
    reach = set(ancestors([logits_values]))
    where = {}
    for value, name, shape, slc in zip(
        value_vars, layout.names, layout.shapes, layout.slices, strict=True
    ):
        where[name] = (slc, shape)
        if value in reach:
            layer[slc] = GENERAL
    read_by_likelihood = set(ancestors([likelihood]))
    found = False
    for lay, (W, b) in enumerate(zip(network.weights, network.biases, strict=True)):
        for param, bias in ((W, False), (b, True)):
            source = _elementwise_source(model, param)
            value = model.rvs_to_values.get(source) if source is not None else None
            if value is None or value.name not in where or value in read_by_likelihood:
                continue
            slc, shape = where[value.name]
            if not _own_quadratic_term(model, network, source, bool(layout.interval[slc].all())):
                continue
            positions = np.arange(slc.stop - slc.start)
            layer[slc], is_bias[slc] = lay, bias
            if bias:
                column[slc] = positions
            else:
                row[slc], column[slc] = np.unravel_index(positions, shape)
            found = True
    return (layer, is_bias, row, column) if found else None


def _own_quadratic_term(
    model: pm.Model, network: Network, source: pt.TensorVariable, interval: bool
) -> bool:
    """Whether the prior reads ``source`` only through its own term, and that term is quadratic
    in its sampling coordinates: a ``Normal`` without a transform, or a ``Uniform`` sampled on
    its own scale (``interval``), whose density there is constant. Then a second-order Taylor
    expansion in one coordinate is exact. (The terms that read the logits reach ``source``
    through the network; the caller checks that the likelihood rebuilt on them does not.)"""
    op = source.owner.op
    own = (isinstance(op, NormalRV) and model.rvs_to_transforms.get(source) is None) or (
        isinstance(op, UniformRV) and interval
    )
    other_free = [rv for rv in model.free_RVs if rv is not source]
    prior_terms = [
        term
        for term in [*model.observed_RVs, *model.potentials]
        if network.logits not in ancestors([term])
    ]
    return (
        own
        and not any(source in ancestors(rv.owner.inputs) for rv in other_free)
        and not any(source in ancestors([term]) for term in prior_terms)
    )


def _elementwise_source(model: pm.Model, param: pt.TensorVariable) -> pt.TensorVariable | None:
    """The free variable each element of ``param`` is a function of alone: ``param`` itself, or
    the unscaled ``z`` of the non-centred ``param = scale · z`` that :func:`pymc_sfp.nn.mlp`
    builds; ``None`` if neither."""
    if param in model.free_RVs:
        return param
    z = model.named_vars.get(f"{param.name}_z")
    if z is not None and z in model.free_RVs and param in model.deterministics:
        return z
    return None


def _forward(network: Network, weights: list, biases: list) -> tuple[list, list]:
    """The network at the current point: each layer's input (``X``, then the hidden units) and
    summed input (the last one is the logits)."""
    inputs, summed = [network.X], []
    for W, b in zip(weights, biases, strict=True):
        summed.append(pt.dot(inputs[-1], W) + b)
        inputs.append(pt.tanh(summed[-1]))
    return inputs, summed


def _coordinate_units(
    layers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], index: pt.TensorVariable
) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
    """The layer, bias flag, row and column of coordinate ``index`` (graphs)."""
    layer_of, is_bias_of, row_of, column_of = (pt.constant(a) for a in layers)
    return layer_of[index], is_bias_of[index], row_of[index], column_of[index]


def _moved_unit(
    lay: int,
    weights: list,
    biases: list,
    layers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    x: pt.TensorVariable,
    step: pt.TensorVariable,
    index: pt.TensorVariable,
    inputs: list,
    summed: list,
) -> tuple[pt.TensorVariable, list]:
    """Unit ``j`` of layer ``lay`` when coordinate ``index`` (a weight or bias of that layer)
    moves by each of ``step``: its column ``j`` and its summed input, ``(G, n)``, and the summed
    inputs of every later layer, ``(G, n, units)``.

    A weight is linear in its coordinate (the weight itself, or ``scale · z``), so it moves by
    ``step`` times its derivative in the coordinate; the change of unit ``j``'s output is carried
    into the next layer along row ``j`` of that layer's weights, and deeper layers are
    recomputed."""
    _, bias, row, column = _coordinate_units(layers, index)
    W, b = weights[lay], biases[lay]
    units_in, units_out = W.shape
    k = pt.minimum(row, units_in - 1)
    j = pt.minimum(column, units_out - 1)

    def derivative(param: pt.TensorVariable, *element: pt.TensorVariable) -> pt.TensorVariable:
        return pt.grad(param[element], x, disconnected_inputs="ignore")[index]

    moved = pt.switch(bias, derivative(b, j), derivative(W, k, j)) * step
    feed = pt.switch(bias, pt.ones_like(inputs[lay][:, 0]), inputs[lay][:, k])
    unit = summed[lay][:, j][None, :] + moved[:, None] * feed[None, :]
    later = []
    if lay < len(weights) - 1:
        change = pt.tanh(unit) - inputs[lay + 1][:, j][None, :]
        carried = change[:, :, None] * weights[lay + 1][j][None, None, :]
        later.append(summed[lay + 1][None] + carried)
        for deeper in range(lay + 1, len(weights) - 1):
            later.append(pt.matmul(pt.tanh(later[-1]), weights[deeper + 1]) + biases[deeper + 1])
    return j, unit, later


def _logits_along(
    weights: list,
    biases: list,
    layers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    x: pt.TensorVariable,
    step: pt.TensorVariable,
    index: pt.TensorVariable,
    inputs: list,
    summed: list,
) -> tuple[pt.TensorVariable, dict[int, tuple[pt.TensorVariable, list]]]:
    """The network's logits with ``x[index]`` moved by each of ``step``, ``(G, n, outputs)``,
    from the network at ``x`` (``inputs``, ``summed``), by updating the one unit that the
    coordinate feeds (where ``layers`` gives it a layer; the logits at ``x`` elsewhere); and,
    per layer, the moved unit and later layers of :func:`_moved_unit`."""
    layer = _coordinate_units(layers, index)[0]
    along = pt.repeat(summed[-1][None], step.shape[0], axis=0)
    moves = {}
    for lay in range(len(weights)):
        if not np.any(layers[0] == lay):
            continue
        j, unit, later = _moved_unit(lay, weights, biases, layers, x, step, index, inputs, summed)
        moves[lay] = (unit, later)
        candidate = later[-1] if later else pt.set_subtensor(along[:, :, j], unit)
        along = pt.switch(pt.eq(layer, lay), candidate, along)
    return along, moves


def _advance(
    moves: dict[int, tuple[pt.TensorVariable, list]], n_layers: int
) -> tuple[list, dict[int, tuple[tuple[int, int, bool], ...]]]:
    """What changes in the cache (:attr:`NetworkLine.cache`) when a weight or bias of some layer
    moves to the first of the line's values: the outputs, and per layer where they go.

    For a coordinate of layer ``l`` feeding unit ``j``: column ``j`` of layer ``l``'s summed
    input and of its output, and every later layer whole, each taken from the line's first row
    (``moves`` of :func:`_logits_along`), so that they cost next to nothing besides the line.
    A write is ``(output, cache array, whole)``, of the output's first row; ``whole=False``
    writes column ``j``. Only the coordinate's own layer is written, so that a move costs
    ``O(n · outputs)`` for a network with one hidden layer."""
    outputs: list = []
    plan = {}
    for lay, (unit, later) in moves.items():
        writes = []

        def put(value: pt.TensorVariable, target: int, whole: bool) -> None:
            writes.append((len(outputs), target, whole))  # noqa: B023
            outputs.append(value)

        put(unit[:1], lay, False)
        if lay < n_layers - 1:
            put(pt.tanh(unit[:1]), n_layers + lay, False)
        for deeper, moved in enumerate(later, start=lay + 1):
            put(moved[:1], deeper, True)
            if deeper < n_layers - 1:
                put(pt.tanh(moved[:1]), n_layers + deeper, True)
        plan[lay] = tuple(writes)
    return outputs, plan
