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
  contributes that element alone (``O(G)``); a summand that reads ``v`` only through an index
  on the first axis, ``x[idx]`` with element ``k`` of ``x`` reading only element ``k`` of
  ``v``, and keeps its rows apart from there on (elementwise, or reduced along other axes:
  ``(X * beta[group]).sum(-1)``), contributes its rows ``j`` with ``idx[j]`` the coordinate's
  row of ``v`` (``O(G · J)``, :func:`_indexed_elements`); any other summand that reads ``v``
  contributes its sum, vectorised over the ``G`` values of ``v`` alone (``O(G · size)``);
* each variable's contributions, less the coordinate's log-Jacobian, are a graph of their
  own, so that a call computes only what the variable that holds the coordinate reads (one
  graph with a branch per variable ran every branch's fixed part at every call: on a model of
  seven variables that tripled the time of a small variable's line); variables of fewer than
  ``OWN_LINE_FROM`` coordinates share one graph with a branch each, which Numba compiles once
  instead of once per variable (about a second each), for a few µs more per call.

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
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Apply, Constant, Variable, equal_computations
from pytensor.graph.replace import clone_replace, graph_replace, vectorize_graph
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.graph.traversal import ancestors, apply_ancestors, graph_inputs, io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.basic import Alloc, MakeVector, ScalarFromTensor, TensorFromScalar
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Sum
from pytensor.tensor.shape import Shape, Shape_i
from pytensor.tensor.subtensor import AdvancedSubtensor, Subtensor, indices_from_subtensor
from pytensor.tensor.type import TensorType, integer_dtypes

if TYPE_CHECKING:
    import pymc as pm

    from pymc_sfp.compile import CoordinateLayout

__all__ = ["OWN_LINE_FROM", "LocalLine", "local_line", "unlooped_blockwise"]

#: Variables of fewer coordinates share one graph of the local line (:class:`LocalLine`). A
#: graph of its own saves each call of a small variable's line the shared graph's fixed cost
#: (about 3 µs with five scalars sharing, on the varying-slopes regression), but Numba compiles
#: each graph in 1.5–2 s when a model is new: for a variable of 15 coordinates that saving
#: catches up after some 40,000 sweeps, for a scalar after some 600,000.
OWN_LINE_FROM = 16


@dataclass(frozen=True)
class LocalLine:
    """The log-density along one coordinate, up to a constant of the line.

    Attributes
    ----------
    along : tuple of TensorVariable
        Graphs of shape ``(G,)``: for coordinate ``index`` of a variable they serve, the
        summands that read it with it at each of ``values`` (sampling coordinates), minus its
        log-Jacobian there; graphs of the joined coordinates, ``index`` and ``values``. Each
        differs from the log-density along the line by a constant of the line. A variable of
        ``OWN_LINE_FROM`` coordinates or more has a graph of its own; the smaller ones share one,
        whose part for each variable computes nothing per value where the coordinate is
        another's.
    starts : tuple of int
        The first coordinate of each variable of size > 0, in the order of the layout: variable
        ``k`` holds the coordinates from ``starts[k]`` up to ``starts[k + 1]`` (the last, up to
        the end).
    line_of : tuple of int
        Per variable (as ``starts``), the position in ``along`` of its graph.
    n_elements : int
        How many (summand, variable) pairs contribute one element per coordinate.
    n_indexed : int
        How many contribute the elements that read the coordinate through an index
        (``theta[idx]``).
    n_summed : int
        How many contribute their whole sum.
    """

    along: tuple[pt.TensorVariable, ...]
    starts: tuple[int, ...]
    line_of: tuple[int, ...]
    n_elements: int
    n_indexed: int
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
    n_small = sum(0 < where.stop - where.start < OWN_LINE_FROM for where in layout.slices)
    alongs: list = []
    starts, line_of = [], []
    # Where the small variables' shared graph goes in ``alongs`` (made after the loop), and
    # their contributions to it: (count, contributions).
    shared_at: int | None = None
    shared: list[tuple[pt.TensorVariable, pt.TensorVariable]] = []
    n_elements = n_indexed = n_summed = skipped = 0
    for v, where, shape in zip(value_vars, layout.slices, layout.shapes, strict=True):
        if where.stop == where.start:
            continue  # a variable of size 0 has no coordinate
        starts.append(where.start)
        on = None
        if n_small > 1 and where.stop - where.start < OWN_LINE_FROM:
            if shared_at is None:
                shared_at = len(alongs)
                alongs.append(None)
            line_of.append(shared_at)
            on = (index >= where.start) & (index < where.stop)
        else:
            line_of.append(len(alongs))
        count = values.shape[0] if on is None else pt.switch(on, values.shape[0], 0)
        reading = [(sign, s) for sign, s in summands if v in ancestors([s])]
        skipped += len(summands) - len(reading)
        if not reading:
            if on is None:
                alongs.append(-own_jacobian)
            continue
        k = pt.clip(index - where.start, 0, where.stop - where.start - 1)
        element = _unravelled(k, shape)
        own = value_scale.astype(v.dtype) if on is None else value_scale[:count].astype(v.dtype)
        if shape:
            rows = pt.repeat(v[None], count, axis=0)
            rows = pt.set_subtensor(rows[(slice(None), *element)], own)
        else:
            rows = own
        contributions = []
        for sign, s in reading:
            unchecked, checks = _unchecked(s, v)
            batched = vectorize_graph(unchecked, replace={v: rows})
            one = _one_element(batched, s, v, element, extra_axes=True)
            if one is None:
                one = _indexed_elements(unchecked, v, rows, element, own, count, on)
                n_indexed += one is not None
            else:
                n_elements += 1
            if one is not None:
                for check in checks:
                    one = check.op(one, *check.inputs[1:])
                contributions.append(sign * one.astype("float64"))
            else:
                n_summed += 1
                contributions.append(sign * _summed_along(s, v, rows, on))
        if on is None:
            alongs.append(pt.add(*contributions) - own_jacobian)
        else:
            shared.append((count, pt.add(*contributions)))
    if n_elements == 0 and n_indexed == 0 and skipped == 0:
        return None
    if shared_at is not None:
        along = -own_jacobian
        for count, contribution in shared:
            along = pt.inc_subtensor(along[:count], contribution)
        alongs[shared_at] = along
    joined, _ = join(alongs)
    return LocalLine(tuple(joined), tuple(starts), tuple(line_of), n_elements, n_indexed, n_summed)


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


def _summed_along(
    summand: pt.TensorVariable,
    v: pt.TensorVariable,
    rows: pt.TensorVariable,
    on: pt.TensorVariable | None,
) -> pt.TensorVariable:
    """The sum of ``summand`` at each row of ``rows`` (values of ``v``), shape ``(G,)``.

    The other variables it reads get two leading axes of length 1, which broadcast against the
    rows (which get one): what reads only them is computed once a call, not once a row (a
    Cholesky factor of another variable). Shapes read from them (PyMC broadcasts an observed
    term to its value's shape) stay unbatched; data (``pm.Data``) is left as it is. In a graph
    shared by several variables, the first axis has length 0 where ``on`` is false (the
    coordinate is another variable's; ``rows`` is then empty too), so that nothing is computed
    there: what reads only the others (``theta[idx]`` of the whole data set) would otherwise be
    computed at every call of the graph."""
    others = [
        other
        for other in graph_inputs([summand])
        if other is not v
        and isinstance(other.type, TensorType)
        and not isinstance(other, Constant | SharedVariable)
    ]
    # Each shape read from another variable is set aside as a placeholder while the rest is
    # batched, and put back after.
    shapes = {
        node.outputs[0]: node.outputs[0].type()
        for node in apply_ancestors([summand])
        if isinstance(node.op, Shape | Shape_i) and node.inputs[0] in others
    }
    [cut] = graph_replace([summand], shapes) if shapes else [summand]
    first = slice(None) if on is None else slice(pt.switch(on, 1, 0))
    replace = {v: rows[None][first]} | {other: other[None, None][first] for other in others}
    try:
        batched = vectorize_graph(cut, replace=replace)
    except NotImplementedError:  # an operation of only the others that cannot be batched
        return (
            vectorize_graph(summand, replace={v: rows})
            .astype("float64")
            .sum(axis=tuple(range(1, summand.ndim + 1)))
        )
    if shapes:
        [batched] = graph_replace([batched], {new: old for old, new in shapes.items()})
    batched = batched.astype("float64")
    return batched.sum(axis=(0, *range(2, batched.ndim)))


def _indexed_elements(
    summand: pt.TensorVariable,
    v: pt.TensorVariable,
    rows: pt.TensorVariable,
    element: tuple,
    own: pt.TensorVariable,
    count: pt.TensorVariable,
    on: pt.TensorVariable | None,
) -> pt.TensorVariable | None:
    """Per row of ``rows``, the sum of the elements of ``summand`` that read element
    ``element`` of ``v``, where ``summand`` reads ``v`` only through gathers ``x[idx]`` by one
    index vector on the first axis (the likelihood of a hierarchical model, ``a[group]``, or of
    varying slopes, ``(X * beta[group]).sum(-1)``); else ``None``.

    The conditions, each shown on the graph: ``v`` and ``summand`` are not scalars; every path
    from ``v`` to ``summand`` passes through a gather ``x[idx, ...]`` (:func:`_gather_indices`)
    whose ``idx`` (the same for all) and further indices do not read ``v``; element ``e`` of
    each ``x`` reads only element ``e`` of ``v`` (:func:`_one_element`); and from the gathered
    arrays to ``summand`` there are only operations that keep row ``j`` (the first axis) a
    function of row ``j`` of their inputs: elementwise operations, reductions and basic indices
    over the other axes, broadcasts to the same shape, transpositions that keep the first axis
    first, and parameter checks (:func:`_rebuilt_in_region`). Then row ``j`` of ``summand``
    reads only row ``idx[j]`` of each ``x``, so of ``v``, and the rows with ``idx[j] ==
    element[0]`` are computed alone: the graph from the gathers on, with each gathered array
    replaced by row ``element[0]`` of ``x`` along the line (:func:`_row_along`) and each other
    input by its rows at those positions (``O(G · J)`` for ``J`` of them, against
    ``O(G · size)`` summed in full; finding them, see :func:`_positions_of`). The other
    elements of those rows do not read the coordinate; they add a constant of the line."""
    if v.ndim == 0 or summand.ndim == 0:
        return None
    gathers = [
        node
        for node in apply_ancestors([summand])
        if isinstance(node.op, AdvancedSubtensor) and v in ancestors([node.inputs[0]])
    ]
    if not gathers:
        return None
    indices = [_gather_index(node, v) for node in gathers]
    index = indices[0]
    if any(i is None or not (i is index or equal_computations([i], [index])) for i in indices):
        return None
    gathered = [node.outputs[0] for node in gathers]
    if v in ancestors([summand], blockers=gathered) or any(
        other in apply_ancestors([node.inputs[0]]) for node in gathers for other in gathers
    ):
        return None  # read besides the gathers, or a gather of a gather
    replaced = {}
    for node in gathers:
        row = _row_along(node.inputs[0], v, rows, element, own)
        if row is None:
            return None
        _, *rest = _gather_indices(node)
        # The further indices (``beta[group, 0]``) taken of the row: the advanced axis of a
        # gather whose first index is the vector comes first, as the row's point axis does.
        replaced[node.outputs[0]] = row[(slice(None), *rest)][:, None]
    positions = _positions_of(index, gathers[0].inputs[0], element[0], on)
    outside: dict = {}
    # What each rebuilt variable is: "rows" (the array's rows at the positions, along the line)
    # or "check" (a parameter check's condition over them, which feeds only a check).
    kinds = dict.fromkeys(replaced, "rows")
    for node in io_toposort(gathered, [summand]):
        if not any(i in replaced for i in node.inputs):
            continue
        rebuilt = _rebuilt_in_region(node, replaced, kinds, positions, count, outside)
        if rebuilt is None:
            return None
        outputs, kind = rebuilt
        replaced |= dict(zip(node.outputs, outputs, strict=True))
        kinds |= dict.fromkeys(node.outputs, kind)
    if kinds[summand] != "rows":
        return None
    along = replaced[summand]
    along = pt.broadcast_to(along, (count, positions.shape[0], *along.shape[2:]))
    return along.sum(axis=tuple(range(1, along.ndim)))


def _rebuilt_in_region(
    node: Apply,
    replaced: dict,
    kinds: dict,
    positions: pt.TensorVariable,
    count: pt.TensorVariable,
    outside: dict,
) -> tuple[list, str] | None:
    """``node`` of the graph from the gathers to the summand, rebuilt on the rows at the
    positions (:func:`_indexed_elements`), with the kind of its outputs; ``None`` where it is
    not one of: an elementwise operation of rows (and of what does not read the gathers, taken
    at the positions); a reduction, a basic index (``[:, 0]``) or a transposition of rows that
    keeps their first axis; a broadcast of rows to their own shape; a parameter check of rows
    (PyMC's ``mu >= 0``), whose conditions are elementwise comparisons of rows reduced by
    ``all``/``any``, and the vectors, scalar conversions and elementwise operations that
    combine them. Rows rebuilt have a first axis more, the points of the line. A condition is
    rebuilt per point of the line (shape ``(count,)``, over the rows at the positions), and a
    check PyMC may replace by ``-inf`` gives ``-inf`` at the points where it fails, as the
    model's log-density does there."""
    op, first = node.op, node.inputs[0]
    read = {kinds[i] for i in node.inputs if i in replaced}
    if isinstance(op, Elemwise) and len(read) == 1:
        [kind] = read
        if (node.outputs[0].ndim == 0) == (kind == "rows"):
            return None
        inputs = [
            replaced[i] if i in replaced else _at_positions(i, positions, outside)
            for i in node.inputs
        ]
        return node.op.make_node(*inputs).outputs, kind
    if read == {"rows"} and first in replaced and not any(i in replaced for i in node.inputs[1:]):
        row_wise = _row_wise(node, replaced[first])
        if row_wise is not None:
            return [row_wise], "rows"
    if isinstance(op, CheckAndRaise):
        return _rebuilt_check(node, replaced, kinds, positions, outside)
    if isinstance(op, CAReduce) and first in replaced and len(read) == 1:
        if op.axis is not None and len(op.axis) != first.ndim:
            return None
        reduce = {ps.AND: pt.all, ps.OR: pt.any}.get(type(op.scalar_op))
        if reduce is None:
            return None
        # Rows (count, J, ...) or a vector of conditions (count, n): reduced over all but the
        # points of the line; a scalar condition (count,) is one already.
        condition = replaced[first]
        if first.ndim:
            condition = reduce(condition, axis=tuple(range(1, condition.ndim)))
        return [condition], "check"
    if read != {"check"}:
        return None
    if isinstance(op, MakeVector):
        conditions = [
            replaced[i] if i in replaced else pt.broadcast_to(i, (count,)) for i in node.inputs
        ]
        return [pt.stack(conditions, axis=1)], "check"
    if isinstance(op, ScalarFromTensor | TensorFromScalar):
        return [replaced[first]], "check"
    return None


def _row_wise(node: Apply, rows: pt.TensorVariable) -> pt.TensorVariable | None:
    """``node``, whose first input ``x`` is rows (:func:`_rebuilt_in_region`), applied to
    ``rows`` (``x`` at the positions along the line, one axis more in front), where row ``j`` of
    its output is a function of row ``j`` of ``x`` alone and of inputs that are not rows: a
    reduction over other axes than the first, a basic index whose first entry is ``:``, a
    transposition or broadcast that keeps the first axis first, and an allocation to ``x``'s own
    number of axes (PyMC's broadcast of a term to its value's shape, which cannot change the
    length of a first axis that may not broadcast). ``None`` for any other."""
    op, x = node.op, node.inputs[0]
    shifted = [a + 1 for a in range(x.ndim)]
    if isinstance(op, CAReduce) and op.axis is not None and 0 not in op.axis:
        return op.clone(axis=[shifted[a] for a in op.axis])(rows)
    if isinstance(op, Subtensor):
        first, *rest = indices_from_subtensor(node.inputs[1:], op.idx_list)
        whole = isinstance(first, slice) and (first.start, first.stop, first.step) == (None,) * 3
        return rows[(slice(None), slice(None), *rest)] if whole else None
    if isinstance(op, DimShuffle) and op.new_order[:1] == (0,):
        if rows.type.broadcastable[2:] != x.type.broadcastable[1:]:
            return None  # a dropped axis not known to be 1 in the rows
        return rows.dimshuffle(0, *("x" if a == "x" else shifted[a] for a in op.new_order))
    if isinstance(op, Alloc) and node.outputs[0].ndim == x.ndim and not x.broadcastable[0]:
        return pt.alloc(rows, rows.shape[0], rows.shape[1], *node.inputs[2:])
    return None


def _rebuilt_check(
    node: Apply, replaced: dict, kinds: dict, positions: pt.TensorVariable, outside: dict
) -> tuple[list, str] | None:
    """A check (:class:`CheckAndRaise`) of rows in the region of :func:`_rebuilt_in_region`."""
    first, *conditions = node.inputs
    if kinds.get(first, "rows") != "rows" or any(
        kinds.get(c, "check") != "check" for c in conditions
    ):
        return None
    data = replaced[first] if first in replaced else _at_positions(first, positions, outside)
    per_point = [replaced[c] for c in conditions if c in replaced]
    fixed = [c for c in conditions if c not in replaced]
    if per_point and getattr(node.op, "can_be_replaced_by_ninf", False):
        holds = pt.and_(*per_point) if len(per_point) > 1 else per_point[0]
        holds = pt.shape_padright(holds, data.ndim - 1)
        data = pt.switch(holds, data, -np.inf).astype(data.dtype)
        return [node.op(data, *fixed) if fixed else data], "rows"
    return [node.op(data, *fixed, *(pt.all(c) for c in per_point))], "rows"


def _positions_of(
    index: pt.TensorVariable,
    x: pt.TensorVariable,
    k: pt.TensorVariable,
    on: pt.TensorVariable | None,
) -> pt.TensorVariable:
    """The positions ``j`` where ``index[j]`` (into the vector ``x``, negative from the end) is
    ``k``; none where ``on`` is false (in a graph shared by several variables, the coordinate
    is another variable's).

    A constant index into a vector of static size is grouped once, here, and a coordinate's
    positions are a slice of the grouping (``O(J)``). Any other (``pm.Data``, which
    ``pm.set_data`` may change) is searched at each call (``O(len(index))``, so a sweep grows
    like the number of coordinates times that)."""
    size = x.type.shape[0]
    if size is not None and all(isinstance(a, Constant) for a in graph_inputs([index])):
        wrapped = np.asarray(index.eval(), dtype=np.int64)
        wrapped = np.where(wrapped < 0, wrapped + size, wrapped)
        order = np.argsort(wrapped, kind="stable")
        starts = pt.constant(np.searchsorted(wrapped[order], np.arange(size + 1)))
        stop = starts[k + 1] if on is None else pt.switch(on, starts[k + 1], starts[k])
        return pt.constant(order)[starts[k] : stop]
    wrapped = pt.switch(index < 0, index + x.shape[0], index)
    if on is not None:
        wrapped = wrapped[: pt.switch(on, wrapped.shape[0], 0)]
    return pt.nonzero(pt.eq(wrapped, k))[0]


def _gather_indices(node: Apply) -> list | None:
    """The indices of ``node`` if it is ``x[index, ...]``: an array indexed on its first axis by
    one integer vector, and on the others (if at all) by integers and slices, giving an array
    whose first axis has no static length 1 (row ``j`` is ``x[index[j]][...]``); else
    ``None``."""
    x, *rest = node.inputs
    indices = indices_from_subtensor(rest, node.op.idx_list)
    if x.ndim == 0 or not indices or node.outputs[0].type.broadcastable[:1] != (False,):
        return None
    index, *further = indices
    if not (_integer(index) and index.ndim == 1):
        return None
    for i in further:
        parts = (i.start, i.stop, i.step) if isinstance(i, slice) else (i,)
        if not all(p is None or (_integer(p) and p.ndim == 0) for p in parts):
            return None  # another vector would pair rows with its entries, not take a row
    return indices


def _integer(x: Any) -> bool:
    """Whether ``x`` is a symbolic integer (tensor or scalar)."""
    return isinstance(x, Variable) and getattr(x, "dtype", None) in integer_dtypes


def _gather_index(node: Apply, v: pt.TensorVariable) -> pt.TensorVariable | None:
    """The index vector of ``node`` if it is a gather (:func:`_gather_indices`) whose indices
    do not read ``v``; else ``None``."""
    indices = _gather_indices(node)
    if indices is None or v in ancestors(node.inputs[1:]):
        return None
    return indices[0]


def _row_along(
    x: pt.TensorVariable,
    v: pt.TensorVariable,
    rows: pt.TensorVariable,
    element: tuple,
    own: pt.TensorVariable,
) -> pt.TensorVariable | None:
    """Row ``element[0]`` of ``x`` along the line (``own``: the values of ``v`` there), shape
    ``(G, *x.shape[1:])``, if element ``e`` of ``x`` reads only element ``e`` of ``v``
    (:func:`_one_element`, shown for a symbolic ``e``, so for every one); else ``None``.

    Its element ``element[1:]`` is the element of ``x`` along the line; the others read other
    elements of ``v``, not the coordinate, so they are the row at the current point."""
    unchecked, checks = _unchecked(x, v)
    if x is v:
        line = own
    else:
        line = _one_element(vectorize_graph(unchecked, replace={v: rows}), x, v, element)
        if line is None:
            return None
        for check in checks:
            line = check.op(line, *check.inputs[1:])
        line = line.astype(x.dtype)
    if x.ndim == 1:
        return line
    row = pt.repeat(unchecked[element[0]][None], line.shape[0], axis=0)
    return pt.set_subtensor(row[(slice(None), *element[1:])], line)


def _at_positions(
    x: pt.TensorVariable, positions: pt.TensorVariable, memo: dict
) -> pt.TensorVariable:
    """The rows of ``x`` at ``positions`` (its first axis), or ``x`` as it is where it is a
    scalar or broadcast along that axis.

    An elementwise operation is taken at the positions of its inputs (``b * x[positions]``,
    not ``(b * x)[positions]``, which would compute the whole array at every call)."""
    if x.ndim == 0 or x.type.broadcastable[0]:
        return x
    if x not in memo:
        node = x.owner
        if node is not None and isinstance(node.op, Elemwise):
            inputs = [_at_positions(i, positions, memo) for i in node.inputs]
            memo |= dict(zip(node.outputs, node.op.make_node(*inputs).outputs, strict=True))
        elif isinstance(getattr(node, "op", None), AdvancedSubtensor) and (
            indices := _gather_indices(node)
        ):
            # Another variable's array through its own index (a second grouping).
            index, *further = indices
            memo[x] = node.inputs[0][(_at_positions(index, positions, memo), *further)]
        elif node is not None and isinstance(node.op, CAReduce | Subtensor | DimShuffle | Alloc):
            # A reduction over other axes (another variable's ``(X * beta[group]).sum(-1)``),
            # a basic index or a transposition keeps rows apart: taken at the positions of its
            # input, not computed for every row at every call.
            taken = _at_positions(node.inputs[0], positions, memo)
            row_wise = None if taken is node.inputs[0] else _row_wise(node, taken[None])
            memo[x] = x[positions] if row_wise is None else row_wise[0]
        else:
            memo[x] = x[positions]
    return memo[x]


#: Rewrites that lift an index through the operations of a log-density (and fold what is left).
_LIFT = ("canonicalize", "stabilize", "specialize")


def _one_element(
    batched: pt.TensorVariable,
    summand: pt.TensorVariable,
    v: pt.TensorVariable,
    element: tuple,
    *,
    extra_axes: bool = False,
) -> pt.TensorVariable | None:
    """Element ``element`` of each row of ``batched`` (``summand`` vectorised over rows of
    ``v``), if ``summand`` is shaped like ``v`` and PyTensor's rewrites reduce that element to a
    graph that reads no value of ``v`` (see the module docstring); else ``None``.

    With ``extra_axes``, ``summand`` may also have axes after those shaped like ``v`` (``y`` of
    shape ``(N, T)`` with mean ``theta[:, None]``) or before them (``y`` of shape ``(T, N)``
    with mean ``theta[None, :]``): its sub-array at ``element`` is taken, and summed over
    them."""
    extra = summand.ndim - v.ndim
    if v.ndim == 0 or extra < 0 or (extra and not extra_axes):
        return None
    places = [(slice(None), *element)] if _same_shape(summand, v) else []
    if extra and _same_shape(summand, v, last=True):
        places.append((slice(None), Ellipsis, *element))
    for place in places:
        [one] = unlooped_blockwise([batched[place]])
        # A second pass lifts the indices that the first merged into one (an index is lifted
        # only through an operation whose result nothing else reads).
        for _ in range(2):
            [one] = rewrite_graph([one], include=_LIFT)
        if not any(
            v in node.inputs and not isinstance(node.op, Shape | Shape_i)
            for node in apply_ancestors([one])
        ):
            return one.sum(axis=tuple(range(1, one.ndim))) if extra else one
    return None


def _same_shape(a: pt.TensorVariable, b: pt.TensorVariable, *, last: bool = False) -> bool:
    """Whether the leading (or, with ``last``, the last) axes of ``a`` have the shape of ``b``,
    statically or by PyTensor's shape rewrites."""
    axes = slice(a.ndim - b.ndim, None) if last else slice(None, b.ndim)
    static = a.type.shape[axes]
    if None not in static and static == b.type.shape:
        return True
    [same] = rewrite_graph([pt.all(pt.eq(a.shape[axes], b.shape))], include=("canonicalize",))
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
