"""The log-density along one coordinate of a network's weights, without the whole network per point.

SFP evaluates the log-density at ``G`` points along each coordinate (Berrones 2009, §1). For a
network built with :func:`pymc_sfp.nn.mlp`, the general way (the model's log-density vectorised
over ``G`` rows) runs the whole network on every data point ``G`` times per coordinate, so a sweep
costs ``O(G · n · W²)`` for ``W`` weights and ``n`` data points (the slope 2 against the
paper's Fig. 10). A weight into unit ``j`` of layer ``l`` changes only that unit's summed input,
by ``δ · u`` for a fixed input column ``u``, so along the line:

* the network at the current point is read from a cache (:attr:`NetworkLine.cache`: each
  layer's summed input and output, the prior's log-density, and the derivative of each
  coordinate's weight in it);
* for each of the ``G`` values, column ``j`` of layer ``l`` is updated (``O(n)``), passed through
  ``tanh``, and its change is carried into the next layer along row ``j`` of that layer's weights
  (``O(n · units)``); for the last hidden layer that gives the logits (``O(n · outputs)``);
* the terms of the log-density that read the network (its likelihood) are evaluated on those
  ``G`` logits; the prior is the cached one plus the change of the weight's own terms, the only
  prior terms that read it, evaluated for that one element (``O(G)``): its distribution's, and
  its term of each potential that is a sum of one term per element (marked so by
  :func:`mark_elementwise`, e.g. the tabulated prior of SFP-I, or recognised from its graph by
  :func:`_derived_elementwise_terms`, e.g. an L1 penalty).

The cache is computed once per sweep (``O(n · W)``) and, after an accepted move, advanced by
the same one-unit update (:attr:`NetworkLine.advance`, :class:`CacheUpdate`), which the
Metropolis correction's evaluation of the proposal has already computed. For a network with
one hidden layer a coordinate therefore costs ``O(G · n · outputs)`` instead of
``O(G · n · W)``, nothing in it grows with the number ``N`` of coordinates, and a sweep is
linear in the number of weights. Each layer's coordinates are a branch of their own, so that a
coordinate of the output layer computes no hidden unit.
Coordinates that do not reach the logits (a noise sd, a centred group scale) are evaluated at the
``G`` moved points with the logits held fixed; coordinates that move many weights at once (a
group's scale in the non-centred form) or that another term reads take the general evaluation.
Each kind of coordinate has a line of its own, compiled as a function of its own and called for
its coordinates only (one graph with a branch per kind would compute every branch at each call:
Numba evaluates them all). This
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
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.graph.traversal import ancestors, io_toposort
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.math import Sum
from pytensor.tensor.random.basic import NormalRV, UniformRV

from pymc_sfp.nn.network import Network, networks_of

if TYPE_CHECKING:
    from pymc_sfp.compile import CoordinateLayout

__all__ = [
    "GENERAL",
    "OUTSIDE",
    "CacheUpdate",
    "ElementwiseTerms",
    "NetworkLine",
    "mark_elementwise",
    "network_line",
    "rows_along",
]

#: ``layer`` of a coordinate that does not reach the network's logits.
OUTSIDE = -1
#: ``layer`` of a coordinate that moves several weights at once (the general evaluation).
GENERAL = -2


@dataclass(frozen=True)
class ElementwiseTerms:
    """A potential that is a sum of terms of one free variable's elements, one per element.

    Attributes
    ----------
    var : TensorVariable
        The free variable.
    terms : callable
        ``terms(value)``: the terms at ``value`` (shaped like ``var``), elementwise; the
        potential is their sum.
    element : callable
        ``element(values, i)``: the term of element ``i`` (a 0-d int64 flat index, C order)
        at each of ``values`` (a vector), a vector. It may read constants and data
        (``pm.Data``), but no model variable.
    """

    var: pt.TensorVariable
    terms: Callable[[pt.TensorVariable], pt.TensorVariable]
    element: Callable[[pt.TensorVariable, pt.TensorVariable], pt.TensorVariable]


def mark_elementwise(
    potential: pt.TensorVariable,
    var: pt.TensorVariable,
    terms: Callable[[pt.TensorVariable], pt.TensorVariable],
    element: Callable[[pt.TensorVariable, pt.TensorVariable], pt.TensorVariable],
) -> None:
    """Declare ``potential`` (of the model) to be ``Σ terms(var)``, :class:`ElementwiseTerms`.

    The structured line then evaluates the change of one element's term instead of the whole
    potential. The declaration is checked like the rest of the line: at construction the line
    is compared with the model's log-density, and a line that disagrees is not used.
    """
    potential.tag.elementwise_terms = ElementwiseTerms(var, terms, element)


@dataclass(frozen=True)
class NetworkLine:
    """The structured line of one network.

    Attributes
    ----------
    alongs : tuple of TensorVariable
        One line per kind of coordinate (the weights and biases of one layer, the coordinates
        that do not reach the logits, those of the general evaluation), numbered as in
        :attr:`kinds`: the log-density of the sampling coordinates at the ``G`` rows ``x``
        with ``x[index] = values``, shape ``(G,)``, for a coordinate of that kind, given the
        network at ``x`` as :attr:`cache`. Each is compiled as a function of its own, so that
        a coordinate's call computes its own kind's line and no other.
    kinds : ndarray of int64, shape (N,)
        Which of :attr:`alongs` serves each coordinate.
    structured : ndarray of bool, shape (N,)
        The coordinates whose line evaluates by the structure; the others take the general
        evaluation, and a move of one of them changes many units at once.
    network : str
        The network's name.
    cache : tuple of TensorVariable
        Float64 inputs of :attr:`alongs` and :attr:`advances`: the network at ``x``, each layer's
        summed input (``(n, units)``, the last one the logits), then each hidden layer's output;
        then the prior's log-density at ``x`` (``(1, 1)``: every term but the likelihood, the
        log-Jacobians included), with the ``-inf`` terms of elementwise potentials left out and
        counted in the next entry (``(1, 1)``; so that a weight whose own term is ``-inf`` at
        ``x`` still gets its line), and, per coordinate, the derivative of the weight or bias it
        moves (``(1, N)``; a weight is linear in its coordinate, so it changes only when a
        coordinate without a layer moves).
    forward : tuple of TensorVariable
        The cache at ``x`` (``O(n · W)``).
    advances : tuple of tuple of TensorVariable
        Per kind, what changes in the cache when ``x[index]`` moves to ``values[0]``, computed
        from the cache at ``x`` with the kind's line (further outputs of the same function), for
        a layer's kind; empty for the others. :attr:`update` writes it.
    update : CacheUpdate
    """

    alongs: tuple[pt.TensorVariable, ...]
    kinds: np.ndarray
    structured: np.ndarray
    network: str
    cache: tuple[pt.TensorVariable, ...]
    forward: tuple[pt.TensorVariable, ...]
    advances: tuple[tuple[pt.TensorVariable, ...], ...]
    update: CacheUpdate


@dataclass(frozen=True)
class CacheUpdate:
    """How the outputs of :attr:`NetworkLine.advances` update the cache in place.

    Attributes
    ----------
    layer : ndarray of int64, shape (N,)
        Per coordinate, the layer of the weight or bias it moves; ``-1`` if it does not reach
        the logits, ``-2`` if it moves many weights (for either, a move needs the cache
        afresh).
    column : ndarray of int64, shape (N,)
        The unit the coordinate feeds.
    writes : dict
        Per layer, the writes ``(output, cache array, whole)``, ``output`` numbering that
        layer's advance; ``whole=False`` writes the coordinate's column.
    """

    layer: np.ndarray
    column: np.ndarray
    writes: dict[int, tuple[tuple[int, int, bool], ...]]

    def apply(self, cache: list[np.ndarray], new: list[np.ndarray], index: int) -> None:
        """Write ``new``, the outputs of the layer's :attr:`NetworkLine.advances` (each of one
        row) for a move of coordinate ``index`` (one with a layer), into ``cache``."""
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
        others, likelihood, placeholder = split
        coordinates = _coordinates(model, network, layout, value_vars, likelihood)
        if coordinates is None:
            continue
        n_layers = len(network.weights)
        sources = list(coordinates.sources.items())
        params = [source.owner.op.dist_params(source.owner) for _, (source, _, _) in sources]
        marked = {p: terms for _, (_, _, ms) in sources for p, terms in ms}
        # The marked potentials' terms are cached apart: their finite part and a count of the
        # -inf ones (``model.logp`` would only give their sum).
        prior = model.logp(vars=[*model.free_RVs, *(t for t in others if t not in marked)])
        terms = [m.terms(m.var) for m in marked.values()]
        graphs, log_jacobian = join(
            [
                prior,
                likelihood,
                *model.replace_rvs_by_values(
                    [
                        *terms,
                        *network.weights,
                        *network.biases,
                        *(p for ps in params for p in ps),
                    ]
                ),
            ]
        )
        prior_x, likelihood_x = graphs[0] - log_jacobian, graphs[1]
        rest = graphs[2:]
        terms_x, rest = rest[: len(terms)], rest[len(terms) :]
        weights_x, biases_x = rest[:n_layers], rest[n_layers : 2 * n_layers]
        params_x = iter(rest[2 * n_layers :])
        own = {
            key: (source, [next(params_x) for _ in ps], shape, [m for _, m in marks])
            for (key, (source, shape, marks)), ps in zip(sources, params, strict=True)
        }
        finite_x = pt.add(0.0, *(pt.sum(_finite(t)) for t in terms_x))
        infinite_x = pt.add(0.0, *(pt.sum(_infinite(t)) for t in terms_x))
        full_prior_x = prior_x + pt.add(0.0, *(pt.sum(t) for t in terms_x))
        inputs_x, summed_x = _forward(network, weights_x, biases_x)
        # Each weight or bias with a layer is a function of its own coordinate alone, so the
        # derivative of their sum in its coordinate is its own; the others' (a group scale's)
        # would change with every move, and are not read.
        derivative_x = pt.where(
            pt.constant(coordinates.layer >= 0),
            pt.grad(
                pt.add(*(p.sum() for p in [*weights_x, *biases_x])),
                x,
                disconnected_inputs="ignore",
            ),
            0.0,
        )
        forward = (
            *summed_x,
            *inputs_x[1:n_layers],
            pt.reshape(prior_x + finite_x, (1, 1)),
            pt.reshape(infinite_x, (1, 1)),
            derivative_x[None, :],
        )
        names = [
            *(f"summed{k}" for k in range(n_layers)),
            *(f"hidden{k}" for k in range(n_layers - 1)),
            "prior",
            "infinite",
            "derivative",
        ]
        cache = tuple(pt.matrix(f"{network.name}_{name}", dtype=float) for name in names)
        dtype = summed_x[0].dtype
        net = _NetworkAt(
            weights_x,
            biases_x,
            [network.X, *(c.astype(dtype) for c in cache[n_layers : 2 * n_layers - 1])],
            [c.astype(dtype) for c in cache[:n_layers]],
            cache[-1][0].astype(dtype),
            index,
            coordinates,
            own,
        )
        kind = coordinates.layer
        # One line per kind of coordinate, each a function of its own: Numba evaluates every
        # branch of a graph, so one graph for all would compute every kind's line at each call.
        parts, kinds, moves = [], np.zeros(len(kind), dtype=np.int64), {}
        for lay in np.unique(kind[kind >= 0]):  # one weight or bias of layer ``lay``
            logits, unit, later = net.logits_along(int(lay), values - x[index])
            # The prior at x (float64 in the cache, so that advancing it loses nothing) and
            # the change of the weight's own terms, the only prior terms that read it.
            change, infinite_change = net.own_change(int(lay), values, x[index])
            finite_rows = cache[-3][0, 0] + change
            infinite_rows = cache[-2][0, 0] + infinite_change
            prior_rows = pt.switch(pt.gt(infinite_rows, 0.0), -np.inf, finite_rows)
            likelihood_rows = vectorize_graph(likelihood_x, {placeholder: logits})
            moves[len(parts)] = int(lay), (unit, later, (finite_rows, infinite_rows))
            kinds[kind == lay] = len(parts)
            parts.append((prior_rows + likelihood_rows).astype(logp.dtype))
        if np.any(kind == OUTSIDE):  # the logits stay as they are
            rows = rows_along(x, index, values)
            logits = pt.repeat(net.summed[-1][None], rows.shape[0], axis=0)
            kinds[kind == OUTSIDE] = len(parts)
            parts.append(
                vectorize_graph(full_prior_x + likelihood_x, {x: rows, placeholder: logits})
            )
        if np.any(kind == GENERAL):
            kinds[kind == GENERAL] = len(parts)
            parts.append(vectorize_graph(logp, {x: rows_along(x, index, values)}))
        advances, plan = _advance(moves, len(parts), n_layers)
        update = CacheUpdate(kind, coordinates.column, plan)
        return NetworkLine(
            tuple(parts), kinds, kind != GENERAL, network.name, cache, forward, advances, update
        )
    return None


def rows_along(
    x: pt.TensorVariable, index: pt.TensorVariable, values: pt.TensorVariable
) -> pt.TensorVariable:
    """``x`` repeated once per value, with ``x[index]`` set to the value: ``(G, N)``."""
    return pt.set_subtensor(pt.repeat(x[None, :], values.shape[0], axis=0)[:, index], values)


def _split_log_density(
    model: pm.Model, network: Network
) -> tuple[list, pt.TensorVariable, pt.TensorVariable] | None:
    """``model.logp()`` as ``prior + likelihood(logits)`` with the logits a placeholder input.

    The likelihood is every observed variable and potential that reads the network's logits,
    rebuilt on the placeholder; the prior is the free variables' terms and the other observed
    variables and potentials, returned as the list of those. ``None`` if no term reads them.
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
    return [term for term in terms if term not in reads], likelihood, placeholder


@dataclass(frozen=True)
class _Coordinates:
    """Per coordinate: the layer whose weight or bias it moves (or ``OUTSIDE``/``GENERAL``),
    whether it is a bias, and the weight's row ``k`` and column ``j`` (the unit it feeds); and
    per ``(layer, is bias)`` whose coordinates have a layer, the free variable they are the
    elements of, its shape, and the potentials marked elementwise in it with their terms."""

    layer: np.ndarray
    is_bias: np.ndarray
    row: np.ndarray
    column: np.ndarray
    sources: dict[
        tuple[int, bool],
        tuple[pt.TensorVariable, tuple[int, ...], list[tuple[pt.TensorVariable, ElementwiseTerms]]],
    ]


def _coordinates(
    model: pm.Model,
    network: Network,
    layout: CoordinateLayout,
    value_vars: list,
    likelihood: pt.TensorVariable,
) -> _Coordinates | None:
    """Where each coordinate sits in ``network``.

    A weight's coordinate gets its layer only if :func:`_own_term` holds for it; otherwise it is
    ``GENERAL``. ``None`` when no coordinate gets a layer.
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
    sources = {}
    for lay, (W, b) in enumerate(zip(network.weights, network.biases, strict=True)):
        for param, bias in ((W, False), (b, True)):
            source = _elementwise_source(model, param)
            value = model.rvs_to_values.get(source) if source is not None else None
            if value is None or value.name not in where or value in read_by_likelihood:
                continue
            slc, shape = where[value.name]
            marks = _elementwise_potentials(model, source, tuple(shape))
            if not _own_term(model, network, source, bool(layout.interval[slc].all()), marks):
                continue
            positions = np.arange(slc.stop - slc.start)
            layer[slc], is_bias[slc] = lay, bias
            if bias:
                column[slc] = positions
            else:
                row[slc], column[slc] = np.unravel_index(positions, shape)
            sources[lay, bias] = (source, tuple(shape), marks)
    return _Coordinates(layer, is_bias, row, column, sources) if sources else None


def _own_term(
    model: pm.Model,
    network: Network,
    source: pt.TensorVariable,
    interval: bool,
    marks: list[tuple[pt.TensorVariable, ElementwiseTerms]],
) -> bool:
    """Whether the prior reads ``source`` only through its own elementwise terms, and its own
    term, in the sampling coordinates, is the distribution's log-density at the coordinate: a
    ``Normal`` without a transform, or a ``Uniform`` sampled on its own scale (``interval``,
    whose log-Jacobian cancels the transform's). Potentials that read it must be marked
    elementwise in it (``marks``). (The terms that read the logits reach ``source`` through
    the network; the caller checks that the likelihood rebuilt on them does not.)"""
    op = source.owner.op
    own = (isinstance(op, NormalRV) and model.rvs_to_transforms.get(source) is None) or (
        isinstance(op, UniformRV) and interval
    )
    other_free = [rv for rv in model.free_RVs if rv is not source]
    marked = {potential for potential, _ in marks}
    prior_terms = [
        term
        for term in [*model.observed_RVs, *model.potentials]
        if network.logits not in ancestors([term]) and term not in marked
    ]
    return (
        own
        and not any(source in ancestors(rv.owner.inputs) for rv in other_free)
        and not any(source in ancestors([term]) for term in prior_terms)
    )


def _elementwise_potentials(
    model: pm.Model, source: pt.TensorVariable, shape: tuple[int, ...]
) -> list[tuple[pt.TensorVariable, ElementwiseTerms]]:
    """The potentials of ``model`` elementwise in ``source`` (of shape ``shape``) whose element
    term reads no model variable, with their terms: those marked (:func:`mark_elementwise`),
    and those whose graph shows it (:func:`_derived_elementwise_terms`)."""
    model_vars = {*model.free_RVs, *model.value_vars}
    marks = []
    for potential in model.potentials:
        terms = getattr(potential.tag, "elementwise_terms", None)
        if terms is None:
            terms = _derived_elementwise_terms(potential, source, shape)
        if terms is None or terms.var is not source:
            continue
        probe = terms.element(pt.vector(dtype="float64"), pt.scalar(dtype="int64"))
        if not model_vars.intersection(ancestors([probe])):
            marks.append((potential, terms))
    return marks


#: Scalar operations ``g`` with ``g(Σ_i t_i) = Σ_i g(t_i)`` in the summed argument.
_LINEAR = (ps.Neg, ps.Mul, ps.TrueDiv)


def _derived_elementwise_terms(
    potential: pt.TensorVariable, var: pt.TensorVariable, shape: tuple[int, ...]
) -> ElementwiseTerms | None:
    """The terms of ``potential`` if its graph is ``g(sum(E))``: ``E`` built from ``var`` by
    elementwise operations alone, from inputs that do not read ``var`` and broadcast to its
    shape, and ``g`` a negation, a product with or a division by scalars; else ``None``.

    Such a potential, e.g. ``pm.Potential("l1", -lam * pt.abs(w).sum())`` or the hard
    constraint ``pt.switch(w > 0, 0, -np.inf).sum()``, is ``Σ_i g(E_i)``, and the term of
    element ``i`` reads element ``i`` of each input: ``O(1)``, not ``O(size)``.
    """
    nodes = io_toposort([var], [potential])
    reads = {var}
    for node in nodes:
        if reads.intersection(node.inputs):
            reads.update(node.outputs)
    if potential not in reads:
        return None
    total = potential
    while not isinstance(total.owner.op, Sum):
        op, inputs = total.owner.op, total.owner.inputs
        reading = [x for x in inputs if x in reads]
        if not (
            isinstance(op, Elemwise)
            and isinstance(op.scalar_op, _LINEAR)
            and len(reading) == 1
            and not (isinstance(op.scalar_op, ps.TrueDiv) and reading[0] is not inputs[0])
        ):
            return None
        total = reading[0]
    [summed] = total.owner.inputs
    feeding = set(ancestors([summed]))
    inner = [
        node for node in nodes if reads.intersection(node.inputs) and node.outputs[0] in feeding
    ]
    leaves = {x for node in inner for x in node.inputs if x not in reads}
    if (
        total.owner.op.axis not in (None, tuple(range(summed.type.ndim)))
        or summed.type.ndim != len(shape)
        or not all(isinstance(node.op, Elemwise) for node in inner)
        or any(leaf.type.ndim > len(shape) for leaf in leaves)
    ):
        return None

    def rebuilt(root: pt.TensorVariable, leaf: Callable) -> pt.TensorVariable:
        """``g(E)`` with ``var`` replaced by ``root`` and each input ``x`` of ``E`` by
        ``leaf(x)``, node by node: an elementwise operation takes inputs of any dimension."""
        memo: dict = {var: root}

        def build(v: pt.TensorVariable) -> pt.TensorVariable:
            if v not in memo:
                if v is total:
                    memo[v] = build(summed)
                elif v not in reads:
                    memo[v] = leaf(v)
                else:
                    node = v.owner
                    memo[v] = node.op.make_node(*map(build, node.inputs)).outputs[v.index]
            return memo[v]

        return build(potential)

    def element_of(x: pt.TensorVariable, i: pt.TensorVariable) -> pt.TensorVariable:
        # Broadcasting aligns trailing dimensions and repeats those of length 1.
        strides = np.cumprod((1, *shape[:0:-1]))[::-1]
        index = [(i // int(stride)) % size for stride, size in zip(strides, shape, strict=True)]
        own = index[len(shape) - x.type.ndim :]
        return x[tuple(k % x.shape[d] for d, k in enumerate(own))]

    return ElementwiseTerms(
        var,
        terms=lambda value: rebuilt(value, lambda x: x),
        element=lambda values, i: rebuilt(values, lambda x: element_of(x, i)),
    )


def _finite(terms: pt.TensorVariable) -> pt.TensorVariable:
    """``terms`` with their ``-inf`` entries set to zero, float64 (they are counted apart)."""
    return pt.switch(pt.eq(terms, -np.inf), 0.0, terms).astype("float64")


def _infinite(terms: pt.TensorVariable) -> pt.TensorVariable:
    """1 where ``terms`` is ``-inf``, else 0, float64."""
    return pt.eq(terms, -np.inf).astype("float64")


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


def _tanh(value: pt.TensorVariable) -> pt.TensorVariable:
    """``tanh`` as ``sign(u) (1 − e) / (1 + e)`` with ``e = exp(−2|u|)``.

    A hidden unit's ``tanh`` per data point and grid value is most of a line's arithmetic, and
    Numba's ``tanh`` (the C library's) costs about twice this (18 against 8 ns per value; a
    2-20-1 sweep is 1.6–1.7 times faster with this). PyTensor rewrites the division into a
    ``sigmoid``, so two ``exp`` calls run per value, not one (see docs/sfp.rst, "Networks: one
    unit per coordinate", for why the vectorised ``exp`` does not pay here). The absolute error
    is within ``2 ε`` (inputs below about ``ε`` give 0); ``e`` is in ``(0, 1]``, so nothing
    overflows. Not for gradients: ``sign`` makes the derivative 0 at 0.
    Every activation of the line (its cache, its grid values and its advance) goes through it,
    so that the cached and the moved units agree.
    """
    e = pt.exp(-2.0 * pt.abs(value))
    return pt.sign(value) * ((1.0 - e) / (1.0 + e))


def _forward(network: Network, weights: list, biases: list) -> tuple[list, list]:
    """The network at the current point: each layer's input (``X``, then the hidden units) and
    summed input (the last one is the logits)."""
    inputs, summed = [network.X], []
    for W, b in zip(weights, biases, strict=True):
        summed.append(pt.dot(inputs[-1], W) + b)
        inputs.append(_tanh(summed[-1]))
    return inputs, summed


@dataclass(frozen=True)
class _NetworkAt:
    """The network at the sampling coordinates ``x``, for the line along coordinate ``index``.

    ``weights`` and ``biases`` are graphs of ``x``; ``inputs`` (``X``, then each hidden layer's
    output), ``summed`` (each layer's summed input) and ``derivative`` (per coordinate, the
    derivative of the weight or bias it moves, ``(N,)``) are read from the cache; ``own`` maps
    ``(layer, is bias)`` to the free variable, its distribution's parameters as graphs of ``x``,
    its shape and its elementwise potentials' terms (:attr:`_Coordinates.sources`). Every
    graph here costs ``O(1)`` in the number of coordinates."""

    weights: list
    biases: list
    inputs: list
    summed: list
    derivative: pt.TensorVariable
    index: pt.TensorVariable
    coordinates: _Coordinates
    own: dict[
        tuple[int, bool], tuple[pt.TensorVariable, list, tuple[int, ...], list[ElementwiseTerms]]
    ]

    def unit(self, lay: int) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
        """Whether coordinate ``index`` is a bias, and the row ``k`` and column ``j`` of its
        weight in layer ``lay`` (clipped to the layer's shape, since the graph is evaluated for
        the coordinates of every layer)."""
        c = self.coordinates
        units_in, units_out = self.weights[lay].shape
        bias = pt.constant(c.is_bias)[self.index]
        k = pt.minimum(pt.constant(c.row)[self.index], units_in - 1)
        j = pt.minimum(pt.constant(c.column)[self.index], units_out - 1)
        return bias, k, j

    def moved(
        self, lay: int, step: pt.TensorVariable
    ) -> tuple[pt.TensorVariable, pt.TensorVariable, list]:
        """Unit ``j`` of layer ``lay`` when coordinate ``index`` (a weight or bias of that
        layer) moves by each of ``step``: ``j``, the unit's summed input, ``(G, n)``, and the
        summed inputs of every later layer, ``(G, n, units)``.

        A weight is linear in its coordinate (the weight itself, or ``scale · z``), so it moves
        by ``step`` times its derivative; the change of unit ``j``'s output is carried into the
        next layer along row ``j`` of that layer's weights, and deeper layers are recomputed."""
        bias, k, j = self.unit(lay)
        moved = self.derivative[self.index] * step
        feed = pt.switch(bias, pt.ones_like(self.inputs[lay][:, 0]), self.inputs[lay][:, k])
        unit = self.summed[lay][:, j][None, :] + moved[:, None] * feed[None, :]
        later = []
        if lay < len(self.weights) - 1:
            change = _tanh(unit) - self.inputs[lay + 1][:, j][None, :]
            carried = change[:, :, None] * self.weights[lay + 1][j][None, None, :]
            later.append(self.summed[lay + 1][None] + carried)
            for deeper in range(lay + 1, len(self.weights) - 1):
                later.append(
                    pt.matmul(_tanh(later[-1]), self.weights[deeper + 1]) + self.biases[deeper + 1]
                )
        return j, unit, later

    def logits_along(
        self, lay: int, step: pt.TensorVariable
    ) -> tuple[pt.TensorVariable, pt.TensorVariable, list]:
        """The logits with coordinate ``index`` (of layer ``lay``) moved by each of ``step``,
        ``(G, n, outputs)``, and the moved unit and later layers of :meth:`moved`."""
        j, unit, later = self.moved(lay, step)
        if later:
            return later[-1], unit, later
        logits = pt.repeat(self.summed[-1][None], step.shape[0], axis=0)
        return pt.set_subtensor(logits[:, :, j], unit), unit, later

    def own_change(
        self, lay: int, values: pt.TensorVariable, current: pt.TensorVariable
    ) -> tuple[pt.TensorVariable, pt.TensorVariable]:
        """The change of the prior when coordinate ``index`` (of layer ``lay``) moves from
        ``current`` to each of ``values``, float64, ``(G,)``, in two parts: the change of its own
        terms (:func:`_own_term`) but for the ``-inf`` terms of elementwise potentials, and the
        change of the number of those."""
        bias, k, j = self.unit(lay)
        changes = {}
        for is_bias, element in ((False, (k, j)), (True, (j,))):
            if (lay, is_bias) not in self.own:
                continue
            source, params, shape, marks = self.own[lay, is_bias]
            # The element's own distribution, so that its term costs O(1), not O(size).
            _, rv = source.owner.op(
                *(pt.broadcast_to(p, shape)[element] for p in params),
                rng=source.owner.inputs[0],
                return_next_rng=True,
            )
            change = (pm.logp(rv, values) - pm.logp(rv, current)).astype("float64")
            infinite = pt.zeros_like(change)
            flat = k * shape[1] + j if len(element) == 2 else j
            for terms in marks:
                new = terms.element(values, flat)
                old = terms.element(current[None], flat)[0]
                change = change + _finite(new) - _finite(old)
                infinite = infinite + _infinite(new) - _infinite(old)
            changes[is_bias] = (change, infinite)
        weight = changes.get(False, changes.get(True))
        bias_change = changes.get(True, weight)
        return tuple(
            pt.switch(bias, b, w).astype("float64")
            for w, b in zip(weight, bias_change, strict=True)
        )


def _advance(
    moves: dict[int, tuple[int, tuple[pt.TensorVariable, list, tuple[pt.TensorVariable, ...]]]],
    n_kinds: int,
    n_layers: int,
) -> tuple[tuple[tuple[pt.TensorVariable, ...], ...], dict[int, tuple[tuple[int, int, bool], ...]]]:
    """What changes in the cache (:attr:`NetworkLine.cache`) when a weight or bias of some layer
    moves to the first of the line's values: per kind of coordinate (:attr:`NetworkLine.kinds`;
    ``moves`` holds the kinds of the layers, with their layer), the outputs of its line's
    function after the line (none for a kind without a layer), and per layer where they go.

    For a coordinate of layer ``l`` feeding unit ``j``: column ``j`` of layer ``l``'s summed
    input and of its output, every later layer whole, and the prior, each taken from the line's
    first row (``moves``: per layer, the moved unit and later layers of
    :meth:`_NetworkAt.moved` and the prior's two parts along the line), so that they cost next
    to nothing besides the line. A write is ``(output, cache array, whole)``, of the output's
    first row; ``whole=False`` writes column ``j``. Only the coordinate's own layer is written,
    so that a move costs ``O(n · outputs)`` for a network with one hidden layer."""
    advances: list[tuple[pt.TensorVariable, ...]] = [() for _ in range(n_kinds)]
    plan = {}
    prior_at = 2 * n_layers - 1
    for kind_of_layer, (lay, (unit, later, prior_parts)) in moves.items():
        outputs: list = []
        writes = []

        def put(value: pt.TensorVariable, target: int, whole: bool) -> None:
            writes.append((len(outputs), target, whole))  # noqa: B023
            outputs.append(value)  # noqa: B023

        put(unit[:1], lay, False)
        if lay < n_layers - 1:
            put(_tanh(unit[:1]), n_layers + lay, False)
        for deeper, moved in enumerate(later, start=lay + 1):
            put(moved[:1], deeper, True)
            if deeper < n_layers - 1:
                put(_tanh(moved[:1]), n_layers + deeper, True)
        for offset, part in enumerate(prior_parts):
            put(part[:1], prior_at + offset, True)
        advances[kind_of_layer] = tuple(outputs)
        plan[lay] = tuple(writes)
    return tuple(advances), plan
