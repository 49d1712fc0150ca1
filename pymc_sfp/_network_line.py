"""The log-density along one coordinate of a network's weights, without the whole network per point.

SFP evaluates the log-density at ``G`` points along each coordinate (Berrones 2009, §1). For a
network built with :func:`pymc_sfp.nn.mlp`, the general way (the model's log-density vectorised
over ``G`` rows) runs the whole network on every data point ``G`` times per coordinate, so a sweep
costs ``O(G · n · W²)`` for ``W`` weights and ``n`` data points (the slope 2 against the
paper's Fig. 10). A weight into unit ``j`` of layer ``l`` changes only that unit's summed input,
by ``δ · u`` for a fixed input column ``u``, so along the line:

* the network runs once, at the current point (``O(n · W)``);
* for each of the ``G`` values, column ``j`` of layer ``l`` is updated (``O(n)``), passed through
  ``tanh``, and its change is carried into the next layer along row ``j`` of that layer's weights
  (``O(n · units)``); for the last hidden layer that gives the logits (``O(n · outputs)``);
* the terms of the log-density that read the network (its likelihood) are evaluated on those
  ``G`` logits; the weight's own prior term, the only other term that reads it and quadratic in
  it, by its second-order expansion at the current point (exact; ``O(N)`` once for ``N``
  coordinates).

A coordinate therefore costs ``O(n · W + N + G · n · outputs)`` instead of ``O(G · n · W)``.
Coordinates that do not reach the logits (a noise sd, a centred group scale) are evaluated at the
``G`` moved points with the logits held fixed; coordinates that move many weights at once (a
group's scale in the non-centred form) or that another term reads take the general evaluation.
Each kind of coordinate is a branch of one graph that gets the values only for its own kind. This
module builds the graph; :mod:`pymc_sfp.compile` compiles it and checks it against the model's
log-density before using it. It returns ``None`` (the general evaluation) for anything it does
not recognise.
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

__all__ = ["NetworkLine", "network_line", "rows_along"]

#: ``layer`` of a coordinate that does not reach the network's logits.
_OUTSIDE = -1
#: ``layer`` of a coordinate that moves several weights at once (the general evaluation).
_GENERAL = -2


@dataclass(frozen=True)
class NetworkLine:
    """The structured line of one network.

    Attributes
    ----------
    along : TensorVariable
        The log-density of the sampling coordinates at the ``G`` rows ``x`` with
        ``x[index] = values``, shape ``(G,)``.
    structured : ndarray of bool, shape (N,)
        The coordinates for which :attr:`along` is valid; the others need the general line.
    network : str
        The network's name.
    """

    along: pt.TensorVariable
    structured: np.ndarray
    network: str


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
            logits = _logits_along(network, weights_x, biases_x, layers, x, step, index)
            likelihood_rows = vectorize_graph(likelihood_x, {placeholder: logits})
            parts.append(prior_x + slope * step + 0.5 * curvature * step**2 + likelihood_rows)
        if np.any(kind == _OUTSIDE):  # the logits stay as they are
            rows = rows_along(x, index, served(kind == _OUTSIDE))
            current = _forward(network, weights_x, biases_x)[1][-1]
            logits = pt.repeat(current[None], rows.shape[0], axis=0)
            parts.append(vectorize_graph(prior_x + likelihood_x, {x: rows, placeholder: logits}))
        if np.any(kind == _GENERAL):
            parts.append(vectorize_graph(logp, {x: rows_along(x, index, served(kind == _GENERAL))}))
        along = parts[0] if len(parts) == 1 else pt.concatenate(parts)
        return NetworkLine(along, kind != _GENERAL, network.name)
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
    """Per coordinate: the layer whose weight or bias it moves (or ``_OUTSIDE``/``_GENERAL``),
    whether it is a bias, and the weight's row ``k`` and column ``j`` (the unit it feeds).

    A weight's coordinate gets its layer only if :func:`_own_quadratic_term` holds for it;
    otherwise it is ``_GENERAL``. ``None`` when no coordinate gets a layer.
    """
    layer = np.full(layout.size, _OUTSIDE, dtype=np.int64)
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
            layer[slc] = _GENERAL
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


def _logits_along(
    network: Network,
    weights: list,
    biases: list,
    layers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    x: pt.TensorVariable,
    step: pt.TensorVariable,
    index: pt.TensorVariable,
) -> pt.TensorVariable:
    """The network's logits with ``x[index]`` moved by each of ``step``, ``(G, n, outputs)``,
    by updating the one unit that the coordinate feeds (where ``layers`` gives it a layer).

    A weight is linear in its coordinate (the weight itself, or ``scale · z``), so it moves by
    ``step`` times its derivative in the coordinate."""
    layer_of, is_bias_of, row_of, column_of = (pt.constant(a) for a in layers)
    layer, bias = layer_of[index], is_bias_of[index]
    n_layers = len(weights)
    inputs, summed = _forward(network, weights, biases)
    along = pt.repeat(summed[-1][None], step.shape[0], axis=0)

    def derivative(param: pt.TensorVariable, *element: pt.TensorVariable) -> pt.TensorVariable:
        return pt.grad(param[element], x, disconnected_inputs="ignore")[index]

    for lay, (W, b) in enumerate(zip(weights, biases, strict=True)):
        if not np.any(layers[0] == lay):
            continue
        units_in, units_out = W.shape
        k = pt.minimum(row_of[index], units_in - 1)
        j = pt.minimum(column_of[index], units_out - 1)
        moved = pt.switch(bias, derivative(b, j), derivative(W, k, j)) * step
        feed = pt.switch(bias, pt.ones_like(inputs[lay][:, 0]), inputs[lay][:, k])
        unit = summed[lay][:, j][None, :] + moved[:, None] * feed[None, :]  # (G, n)
        if lay == n_layers - 1:
            candidate = pt.set_subtensor(along[:, :, j], unit)
        else:
            change = pt.tanh(unit) - inputs[lay + 1][:, j][None, :]
            nxt = summed[lay + 1][None] + change[:, :, None] * weights[lay + 1][j][None, None, :]
            for deeper in range(lay + 1, n_layers - 1):
                nxt = pt.matmul(pt.tanh(nxt), weights[deeper + 1]) + biases[deeper + 1]
            candidate = nxt
        along = pt.switch(pt.eq(layer, lay), candidate, along)
    return along
