"""The log-density along one coordinate from the terms that read it, for any model.

SFP evaluates the log-density at ``G`` points along each coordinate (Berrones 2009, §1). The
general way, the whole log-density vectorised over ``G`` rows, costs ``O(G · N)`` per
coordinate of an ``N``-coordinate model whose terms each read few coordinates, so a sweep costs
``O(G · N²)``. Along coordinate ``i`` only the terms that read it change, and the conditional
(normalised) and the Metropolis correction (a difference along the line) need the log-density
only up to a constant of the line. This module builds that *local line*:

* the model's log-density is split into *summands*: each variable's and potential's term, and,
  inside a term that is a sum (``pt.sum(E)``) or a sum of scalars, the tensor ``E`` and the
  scalars, whose elements are summed;
* for coordinate ``i`` of value variable ``v``, a summand that does not read ``v`` is left out;
  a summand ``S`` shaped like ``v`` whose element ``k`` reads only element ``k`` of ``v``
  contributes that element alone (``O(G)``); any other summand that reads ``v`` contributes its
  sum, vectorised over the ``G`` values of ``v`` alone (``O(G · size)``);
* each variable's contributions are a branch of one graph that gets the values only for the
  variable that holds the coordinate (the others get none, and compute nothing per value).

Whether element ``k`` of ``S`` reads only element ``k`` of ``v`` is not assumed from the kind of
operation: ``S`` is vectorised over rows of ``v`` whose element ``k`` (a symbolic index) takes
the ``G`` values, element ``k`` of the result is taken, and PyTensor's rewrites (which lift an
index through elementwise operations, reductions over other axes, broadcasts, and an index of
the element just set) must leave a graph that no longer reads ``v``'s values. Since they hold for
every ``k``, element ``k`` of ``S`` then reads only element ``k`` of ``v``, so no other element
of ``S`` reads it. What the rewrites cannot show stays a summed summand: slower, never wrong.

:mod:`pymc_sfp.compile` compiles the line, checks it against the model's log-density before
using it, and the sweeps use it as a line known up to a constant
(:func:`pymc_sfp.core.compiled_sweep.compiled_sweep` with ``relative=True``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.builders import OpFromGraph
from pytensor.graph.basic import Apply
from pytensor.graph.replace import clone_replace, graph_replace, vectorize_graph
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.graph.traversal import ancestors, apply_ancestors
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Sum
from pytensor.tensor.shape import Shape, Shape_i

if TYPE_CHECKING:
    import pymc as pm

    from pymc_sfp.compile import CoordinateLayout

__all__ = ["LocalLine", "local_line", "unlooped_blockwise"]


@dataclass(frozen=True)
class LocalLine:
    """The log-density along one coordinate, up to a constant of the line.

    Attributes
    ----------
    along : TensorVariable
        Shape ``(G,)``: the summands that read coordinate ``index`` with it at each of
        ``values`` (sampling coordinates), minus its log-Jacobian there; a graph of the joined
        coordinates, ``index`` and ``values``. It differs from the log-density along the line by
        a constant of the line.
    n_elements : int
        How many (summand, variable) pairs contribute one element per coordinate.
    n_summed : int
        How many contribute their whole sum.
    """

    along: pt.TensorVariable
    n_elements: int
    n_summed: int


def local_line(
    model: pm.Model,
    value_vars: list,
    layout: CoordinateLayout,
    join: Callable[[list], tuple[list, pt.TensorVariable]],
    index: pt.TensorVariable,
    values: pt.TensorVariable,
) -> LocalLine | None:
    """The local line of ``model`` over the step's ``value_vars``, or ``None`` where it would
    evaluate every summand at every coordinate (the general line does that, with less code).

    Parameters
    ----------
    model : pm.Model
        The model (or a view of it, such as :func:`pymc_sfp.compile.tempered_model`), whose
        ``logp(sum=False)`` gives the terms.
    value_vars : list
        The step's value variables, in the order of ``layout``.
    layout : CoordinateLayout
    join : callable
        ``join(outputs)``: graphs of the value variables as graphs of the sampling coordinates
        (the first of the pair it returns is used).
    index, values : TensorVariable
        The coordinate (0-d int64) and the points along it (float64 vector).
    """
    summands = [part for term in model.logp(sum=False) for part in _summands(term, 1.0)]
    interval = layout.interval
    lower = pt.constant(np.where(interval, layout.lower, 0.0))
    upper = pt.constant(np.where(interval, layout.upper, 1.0))
    is_interval = pt.constant(interval)[index]
    a, b = lower[index], upper[index]
    log_lower, log_upper = pt.log(values - a), pt.log(b - values)
    value_scale = pt.switch(is_interval, log_lower - log_upper, values)
    own_jacobian = pt.switch(is_interval, log_lower + log_upper - pt.log(b - a), 0.0)
    along = -own_jacobian
    n_elements = n_summed = skipped = 0
    for v, where, shape in zip(value_vars, layout.slices, layout.shapes, strict=True):
        if where.stop == where.start:
            continue  # a variable of size 0 has no coordinate
        reading = [(sign, s) for sign, s in summands if v in ancestors([s])]
        skipped += len(summands) - len(reading)
        if not reading:
            continue
        count = pt.switch((index >= where.start) & (index < where.stop), values.shape[0], 0)
        k = pt.clip(index - where.start, 0, where.stop - where.start - 1)
        element = _unravelled(k, shape)
        own = value_scale[:count].astype(v.dtype)
        if shape:
            rows = pt.repeat(v[None], count, axis=0)
            rows = pt.set_subtensor(rows[(slice(None), *element)], own)
        else:
            rows = own
        contributions = []
        for sign, s in reading:
            unchecked, checks = _unchecked(s, v)
            one = _one_element(vectorize_graph(unchecked, replace={v: rows}), s, v, element)
            if one is not None:
                n_elements += 1
                for check in checks:
                    one = check.op(one, *check.inputs[1:])
                contributions.append(sign * one.astype("float64"))
            else:
                batched = vectorize_graph(s, replace={v: rows})
                n_summed += 1
                contributions.append(
                    sign * batched.astype("float64").sum(axis=tuple(range(1, batched.ndim)))
                )
        along = pt.inc_subtensor(along[:count], pt.add(*contributions))
    if n_elements == 0 and skipped == 0:
        return None
    [joined], _ = join([along])
    return LocalLine(joined, n_elements, n_summed)


def _unravelled(k: pt.TensorVariable, shape: tuple[int, ...]) -> tuple:
    """The index of flat (C order) element ``k`` of an array of ``shape``, one 0-d int per axis
    (arithmetic, where ``pt.unravel_index`` would leave Numba's compiled code)."""
    index, stride = [], 1
    for size in reversed(shape):
        index.append((k // stride) % size if stride > 1 else k % size)
        stride *= size
    return tuple(reversed(index))


def _unchecked(
    summand: pt.TensorVariable, v: pt.TensorVariable
) -> tuple[pt.TensorVariable, list[Apply]]:
    """``summand`` without its checks (``CheckAndRaise``: PyMC's parameter checks), and the
    check nodes, when no check's condition reads ``v``; else ``summand`` and no checks.

    A check returns its first input unchanged, so its index can be taken before it; PyTensor's
    rewrites do not lift an index through it, so the element is taken without it and checked
    after (the conditions, of the parameters, are not vectorised)."""
    checks = [node for node in apply_ancestors([summand]) if isinstance(node.op, CheckAndRaise)]
    if not checks or any(v in ancestors(node.inputs[1:]) for node in checks):
        return summand, []
    [unchecked] = graph_replace([summand], {node.outputs[0]: node.inputs[0] for node in checks})
    return unchecked, checks


def _summands(term: pt.TensorVariable, sign: float) -> list[tuple[float, pt.TensorVariable]]:
    """``term`` as signed tensors whose elements add up to it: through a sum over every axis,
    and through additions, subtractions and negations of scalars."""
    node = term.owner
    if node is None:
        return [(sign, term)]
    op = node.op
    if isinstance(op, Sum) and (op.axis is None or len(op.axis) == node.inputs[0].ndim):
        if term.dtype == node.inputs[0].dtype:
            return _summands(node.inputs[0], sign)
    if isinstance(op, Elemwise) and term.ndim == 0:
        scalar_op = op.scalar_op
        if isinstance(scalar_op, ps.Add):
            return [part for x in node.inputs for part in _summands(x, sign)]
        if isinstance(scalar_op, ps.Sub):
            return _summands(node.inputs[0], sign) + _summands(node.inputs[1], -sign)
        if isinstance(scalar_op, ps.Neg):
            return _summands(node.inputs[0], -sign)
    return [(sign, term)]


#: Rewrites that lift an index through the operations of a log-density (and fold what is left).
_LIFT = ("canonicalize", "stabilize", "specialize")


def _one_element(
    batched: pt.TensorVariable,
    summand: pt.TensorVariable,
    v: pt.TensorVariable,
    element: tuple,
) -> pt.TensorVariable | None:
    """Element ``element`` of each row of ``batched`` (``summand`` vectorised over rows of
    ``v``), if ``summand`` is shaped like ``v`` and PyTensor's rewrites reduce that element to a
    graph that reads no value of ``v`` (see the module docstring); else ``None``."""
    if summand.ndim != v.ndim or summand.ndim == 0:
        return None
    if not _same_shape(summand, v):
        return None
    [one] = unlooped_blockwise([batched[(slice(None), *element)]])
    # A second pass lifts the indices that the first merged into one (an index is lifted only
    # through an operation whose result nothing else reads).
    for _ in range(2):
        [one] = rewrite_graph([one], include=_LIFT)
    for node in apply_ancestors([one]):
        if v in node.inputs and not isinstance(node.op, Shape | Shape_i):
            return None
    return one


def _same_shape(a: pt.TensorVariable, b: pt.TensorVariable) -> bool:
    """Whether ``a`` and ``b`` have the same shape, statically or by PyTensor's shape rewrites."""
    if None not in a.type.shape and a.type.shape == b.type.shape:
        return True
    [same] = rewrite_graph([pt.all(pt.eq(a.shape, b.shape))], include=("canonicalize",))
    return isinstance(same, pt.TensorConstant) and bool(same.data)


def _elementwise_graph(op: Any) -> bool:
    """Whether ``op`` is an ``OpFromGraph`` of elementwise operations and reductions only (as
    ``LogSumExp`` and its derivative), whose graph vectorises into the same operations on
    larger arrays. Others (``AllocDiag``, ``Pad``, the pieces of ``pm.LKJCorr``'s log-density)
    stay looped: their graphs, nested and vectorised, multiplied a model's graph six-fold and
    took gigabytes to compile."""
    return isinstance(op, OpFromGraph) and all(
        isinstance(node.op, Elemwise | CAReduce | DimShuffle) for node in op.fgraph.apply_nodes
    )


def unlooped_blockwise(outputs: list) -> list:
    """``outputs`` with each ``Blockwise`` of a graph-defined operation (an ``OpFromGraph``,
    such as ``LogSumExp`` and its derivative) replaced by that operation's own graph,
    vectorised over the batch.

    ``vectorize_graph`` (PyTensor 3.3) turns such an operation, as the log-sum-exp of every
    mixture's log-density, into a ``Blockwise`` that calls it once per batch entry, allocating
    its temporaries each time: on the 1-D three-component mixture, 100 points along a line took
    22 µs this way and 4.8 µs as one reduction (``benchmarks/sfp_overhead.py``). The arithmetic
    is the same.
    """
    while True:
        looped = [
            node
            for node in apply_ancestors(outputs)
            if isinstance(node.op, Blockwise) and _elementwise_graph(node.op.core_op)
        ]
        if not looped:
            return outputs
        replace = {}
        for node in looped:
            graph = node.op.core_op.fgraph
            if hasattr(graph, "unfreeze"):  # an immutable inner graph
                graph = graph.unfreeze()
            inner = vectorize_graph(
                list(graph.outputs), replace=dict(zip(graph.inputs, node.inputs, strict=True))
            )
            replace |= {
                old: pt.cast(new, old.type.dtype)
                for old, new in zip(node.outputs, inner, strict=True)
            }
        # One nested in another's graph is replaced on a later pass: a replacement is not
        # searched again.
        outputs = clone_replace(outputs, replace)
