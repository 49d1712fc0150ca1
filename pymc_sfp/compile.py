"""Model → compiled functions: the one bridge between a PyMC model and the numerical cores.

Every step method compiles the model here and nowhere else, once, when it is built. A step's
:class:`StepGraph` joins its value variables into one raveled vector (the other free variables of
the model become shared variables, which PyMC's ``ArrayStepShared`` sets before each step); the
functions compiled from it are

* :func:`compile_logp_dlogp`: log-density and gradient (the dynamics);
* :func:`compile_log_likelihood`: prior and likelihood at a point, apart (tempering's swaps);
* :func:`compile_prior_sampler`: exact joint draws of the prior, raveled (tempering's reference);
* :func:`tempered_model`: a view of the model whose log-density is ``prior + β · likelihood`` with a
  shared ``β``, for any step method to be built on (parallel tempering's explorers);
* :func:`compile_batched_logp`: the log-density at each row of a matrix of points (ELBOs);
* :class:`LineEvaluator`: the log-density at a point and along one coordinate (SFP), and the
  Numba machine code of both (:class:`JittedLine`) for the compiled sweep. For a model with a
  ``pymc_sfp.nn`` network the line along a weight updates only the unit the weight feeds
  (``pymc_sfp._network_line``), checked against the full log-density when the step is built;
* :class:`ParticleEvaluator`: a model's Gaussian observation of streamed data for a whole
  particle cloud in one call, its Jacobian, and its prior (sequential Monte Carlo, the EKF).

They take and return float64 whatever PyTensor's ``floatX``: a float32 model evaluates in
float32 between casts (:meth:`StepGraph.join`).

Each compiled function is called once at the starting point as soon as it is built
(:func:`warm_up`): PyTensor's Numba backend generates machine code on a function's first call, and
doing it in the process that builds the step lets forked chain processes inherit it. Random
generators in the graph (``pm.Minibatch``) are found by :func:`random_generators` and re-seeded
per chain by :func:`reseed`.

A graph of the same structure as one compiled before in the process (a model built again, a
cross-validation split with other data in ``pm.Data``) is not rewritten again: its function is a
copy of the first one's, linked to its own shared variables (``_Template``). Rewriting was most
of a step's construction.

SFP works on *sampling coordinates*. A coordinate is PyMC's
unconstrained value, except for variables with an interval transform and constant finite bounds
(e.g. ``pm.Uniform(-1, 1)``): those are sampled on their own scale, so that the box is exactly the
support and nothing is truncated. The log-density here is the density of the sampling
coordinates: PyMC's ``model.logp()`` (Jacobian included) minus the interval Jacobians.

"""

from __future__ import annotations

import contextlib
import copy
import copyreg
import dataclasses
import functools
import gc
import hashlib
import inspect
import logging
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import cloudpickle
import numba
import numpy as np
import pymc as pm
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from numba.core.dispatcher import Dispatcher
from pymc.distributions.continuous import FlatRV, HalfFlatRV
from pymc.logprob.transforms import IntervalTransform
from pymc.pytensorf import compile as pm_compile
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pymc.vartypes import discrete_types
from pytensor.compile.executor import Function
from pytensor.compile.mode import get_mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.gradient import jacobian
from pytensor.graph.basic import equal_computations
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.traversal import ancestors, apply_ancestors, graph_inputs
from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS, compile_numba_function_src
from pytensor.link.numba.linker import NumbaLinker
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.random.type import RandomGeneratorType
from pytensor.tensor.type import TensorType, float_dtypes

from pymc_sfp._local_line import LocalLine, local_line, unlooped_blockwise
from pymc_sfp._network_line import CacheUpdate, NetworkLine, network_line, rows_along
from pymc_sfp._vectorised_exp import POLYNOMIAL_EXP, UNFUSED_EXP_REDUCTION
from pymc_sfp.core.sfp import open_interval
from pymc_sfp.nn.network import networks_of

__all__ = [
    "CoordinateLayout",
    "JittedLine",
    "LineEvaluator",
    "ParticleEvaluator",
    "StepGraph",
    "compile_batched_local_lines",
    "compile_batched_logp",
    "compile_batched_prior_likelihood",
    "compile_log_likelihood",
    "compile_logp_dlogp",
    "compile_nonfinite_values",
    "compile_prior_sampler",
    "constant_value",
    "coordinate_layout",
    "float64_internals",
    "garbage_collector_paused",
    "likelihood_terms",
    "log_density_eps",
    "random_generators",
    "reseed",
    "step_graph",
    "tempered_model",
    "warm_up",
]


_log = logging.getLogger("pymc_sfp")


@contextlib.contextmanager
def float64_internals() -> Iterator[None]:
    """PyTensor's ``warn_float64`` off while the package builds and compiles its own graphs.

    The numerical cores are float64 by design, whatever ``floatX``: the sampling coordinates,
    the casts of a float32 model's outputs, tempering's β, the dynamics' mass matrix. A user's
    ``warn_float64="raise"`` (or ``"warn"``, ``"pdb"``) is meant for their model, so it is set
    aside only here, and holds again once a step is built: the model itself is built under it,
    and a float64 variable the user makes later still raises. A fresh context each call, so it
    nests, and decorates a function (``@float64_internals()``).
    """
    with pytensor.config.change_flags(warn_float64="ignore"):
        yield


@contextlib.contextmanager
def garbage_collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a step builds and compiles its graphs.

    A construction makes some 10^5 PyTensor objects in reference cycles (a node and its
    outputs point at each other), most of them garbage within the construction. Enough of them
    live long enough to set off the collector's full collections, each a scan of the whole
    process heap: 0.13-0.19 s of a 0.92 s construction of the glass network's step in a process
    that had built a few before, 0.5-0.8 s of its first construction (3.6 s). Paused, the collector
    runs its one next collection after the construction instead. The collector's state is
    restored on exit, also when the construction raises, and a collector the user disabled
    stays disabled. A fresh context each call (``@garbage_collector_paused()``).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class StepGraph:
    """A model seen from one step: its value variables joined into one raveled vector.

    Attributes
    ----------
    model : pm.Model
    value_vars : list
        The step's value variables, in raveling order.
    initial_point : dict
        The model's initial point (gives shapes, and the start used by :func:`warm_up`).
    shared : dict
        Shared replacements of the free variables *not* in the step (for ``ArrayStepShared``).
    start : ndarray
        The step's variables at ``initial_point``, raveled (float64).
    """

    model: pm.Model
    value_vars: list
    initial_point: dict
    shared: dict
    start: np.ndarray

    @functools.cached_property
    def logp(self) -> pt.TensorVariable:
        """The model's ``model.logp()`` (Jacobians included), built once per step: PyMC builds
        the graph afresh at each call (~0.05 s for the glass network), and a step's
        construction reads it several times (its random generators, its compiled functions).
        Not to be changed in place."""
        return self.model.logp()

    @float64_internals()
    def join(self, outputs: Sequence) -> tuple[list, pt.TensorVariable]:
        """``outputs`` as graphs of one raveled float64 vector of the step's variables.

        The numerical cores compute in float64 whatever PyTensor's ``floatX``. A float32 model
        (``floatX="float32"``) still evaluates in float32: its joined vector is cast down on
        entry (and the compiled functions cast their outputs up on exit, see :func:`_compile`).
        """
        outputs, inputs = list(outputs), list(self.value_vars)
        # A discrete variable is read from the vector as PyMC's SMC reads its particles, rounded
        # to the nearest integer (a cast alone would truncate: a particle at -0.7 would be
        # evaluated as 0 and reported by PyMC as -1).
        rounded = {}
        for i, var in enumerate(inputs):
            if var.dtype in discrete_types:
                inputs[i] = pt.tensor(name=var.name, dtype="float64", shape=var.type.shape)
                rounded[var] = pt.round(inputs[i]).astype(var.dtype)
        if rounded:
            outputs = clone_replace(outputs, rounded, rebuild_strict=False)
        outputs, flat = join_nonshared_inputs(
            point=self.initial_point,
            outputs=outputs,
            inputs=inputs,
            shared_inputs=self.shared,
        )
        if flat.dtype != "float64":
            x = pt.tensor(name=flat.name, dtype="float64", shape=flat.type.shape)
            outputs = clone_replace(outputs, {flat: x.astype(flat.dtype)})
            flat = x
        return outputs, flat


def step_graph(model: pm.Model, value_vars: list, initial_point: dict | None = None) -> StepGraph:
    """The :class:`StepGraph` of ``value_vars`` (``initial_point`` defaults to the model's)."""
    if initial_point is None:
        initial_point = model.initial_point()
    if not isinstance(initial_point, Mapping):
        raise TypeError(
            f"initial_point must be a dict of value variables' values, got {initial_point!r}"
        )
    missing = [v.name for v in model.value_vars if v.name not in initial_point]
    if missing:
        raise ValueError(
            f"initial_point lacks the value variables {missing}: it must hold every value "
            "variable of the model, by name (model.initial_point() gives one to start from)"
        )
    start = np.concatenate([np.ravel(initial_point[v.name]) for v in value_vars]).astype(float)
    shared = make_shared_replacements(initial_point, value_vars, model)
    return StepGraph(model, list(value_vars), initial_point, shared, start)


def warm_up(function: Callable, *args: Any) -> None:
    """Call a compiled function once, so that its machine code exists before chains fork."""
    function(*args)


@float64_internals()
def _compile(inputs: list, outputs: list, compile_kwargs: dict | None) -> Function:
    # float64 out whatever floatX (a no-op for a float64 model).
    outputs = [pt.cast(output, "float64") for output in outputs]
    function = _pm_compile(inputs, outputs, compile_kwargs)
    function.trust_input = True
    return function


@float64_internals()
def _pm_compile(inputs: list, outputs: list, compile_kwargs: dict | None) -> Function:
    """PyMC's ``compile``, without PyTensor's disk cache of Numba code for a graph that narrows
    float64 to float32 (a float32 model evaluated at float64 coordinates), with the vectorised
    ``exp`` of log-sum-exps under the Numba linker (:mod:`pymc_sfp._vectorised_exp`), and
    pickled as :class:`_PackageFunction`.

    PyTensor's cache key of a fused elementwise operation does not hold its outputs' dtypes, so
    the code of such a graph, cached, would be loaded for a float64 graph with the same
    operations and inputs: float64 sums accumulated in float32. Not caching it keeps every
    other graph's cache correct; the price is that a float32 model is compiled afresh each time
    (at every step's construction).

    A graph of the same structure as one compiled before in this process (a model built again,
    other data in its ``pm.Data``) is not rewritten again: its function is a copy of the first
    compilation's, reading its own shared variables (:class:`_Template`).
    """
    if compile_kwargs is not None and not isinstance(compile_kwargs, Mapping):
        raise TypeError(
            f"compile_kwargs must be a dict of pytensor.function arguments, got {compile_kwargs!r}"
        )
    kwargs = dict(compile_kwargs or {})
    shared = tuple(v for v in graph_inputs(outputs) if isinstance(v, SharedVariable))
    reusable = all(isinstance(v.type, TensorType) for v in shared)
    flags = tuple(getattr(pytensor.config, flag) for flag in _COMPILATION_FLAGS)
    template = _template_for(flags, kwargs, inputs, outputs, shared) if reusable else None
    if template is None:
        function = _compiled_afresh(inputs, outputs, kwargs)
        if not reusable:
            return function
        held = sum(np.asarray(v.get_value(borrow=True)).nbytes for v in shared)
        if held > _MOST_TEMPLATE_BYTES:
            return function
        template = _Template(flags, kwargs, tuple(inputs), tuple(outputs), shared, function, held)
        _TEMPLATES.append(template)
        while (
            len(_TEMPLATES) > _MOST_TEMPLATES
            or sum(t.held for t in _TEMPLATES) > _MOST_TEMPLATE_BYTES
        ):
            del _TEMPLATES[0]
    return template.copy_for(shared)


def _compiled_afresh(inputs: list, outputs: list, kwargs: dict) -> Function:
    """The compilation :func:`_pm_compile` describes, with the rewrites of the graph."""
    kwargs = dict(kwargs)
    mode = get_mode(kwargs.get("mode"))
    if isinstance(mode.linker, NumbaLinker):
        kwargs["mode"] = mode.including(POLYNOMIAL_EXP, UNFUSED_EXP_REDUCTION)
    outputs = unlooped_blockwise(outputs)
    cached = pytensor.config.numba__cache and not _narrows_to_float32(outputs)
    with pytensor.config.change_flags(numba__cache=cached):
        function = pm_compile(inputs, outputs, **kwargs)
    function.__class__ = _PackageFunction if cached else _UncachedFunction
    return function


#: PyTensor's flags that change what a compilation makes of a graph: a template
#: (:class:`_Template`) serves only a compilation under the same.
_COMPILATION_FLAGS = (
    "floatX",
    "mode",
    "linker",
    "optimizer",
    "optimizer_excluding",
    "optimizer_including",
    "optimizer_requiring",
    "cast_policy",
    "numba__cache",
    "numba__fastmath",
)
#: The templates, the most recently used last; the oldest is dropped first, beyond
#: ``_MOST_TEMPLATES`` of them or ``_MOST_TEMPLATE_BYTES`` of the data their shared variables held
#: when they were made (a template keeps its model's graph, and with it that model's data).
_TEMPLATES: list[_Template] = []
_MOST_TEMPLATES = 32
_MOST_TEMPLATE_BYTES = 2**28


@dataclass(frozen=True, eq=False)
class _Template:
    """A compiled function whose copies are the compilations of its graph and of every graph of
    the same structure: the same operations on the same constants, with inputs and other shared
    variables of the same types in the places of its own (a model built again; other data, of
    any length, in its ``pm.Data``), under the same flags and ``compile_kwargs``.

    Rewriting the graph is most of a compilation (about a second of a step's construction for a
    network), and a copy skips it: the rewritten graph is copied and linked to the other shared
    variables' storage. That is sound because rewrites read types, never a shared variable's
    value. Under PyTensor's Numba backend every copy also runs the template's Numba function
    (:class:`_LinkedBefore`), so its code is compiled, or loaded from PyTensor's disk cache,
    once per process. The template itself is never called. Graphs with a shared variable that
    is not a tensor (a random generator, ``pm.Minibatch``) are compiled afresh each time.

    Attributes
    ----------
    flags : tuple
        The values of ``_COMPILATION_FLAGS`` it was compiled under.
    kwargs : dict
        Its ``compile_kwargs``: equal plain values, or the same objects, serve.
    inputs, outputs, shared : tuple
        Its graph as it was given (before the rewrites), and the graph's shared variables.
    function : Function
        The compilation.
    held : int
        Bytes of data the shared variables held when it was made.
    """

    flags: tuple
    kwargs: dict
    inputs: tuple
    outputs: tuple
    shared: tuple
    function: Function
    held: int

    def serves(
        self, flags: tuple, kwargs: dict, inputs: list, outputs: list, shared: tuple
    ) -> bool:
        """Whether the graph of ``outputs`` is this template's up to the inputs and shared
        variables in its places, compiled under the same flags and arguments."""
        ours = (*self.inputs, *self.shared)
        theirs = (*inputs, *shared)
        return (
            flags == self.flags
            and kwargs.keys() == self.kwargs.keys()
            and all(_same_argument(kwargs[k], self.kwargs[k]) for k in kwargs)
            and len(outputs) == len(self.outputs)
            and len(ours) == len(theirs)
            and all(a.type == b.type for a, b in zip(ours, theirs, strict=True))
            and equal_computations(list(outputs), list(self.outputs), list(theirs), list(ours))
        )

    def copy_for(self, shared: tuple) -> Function:
        """A copy of the template that reads ``shared`` where the template reads its own.

        ``Function.copy``, but with the graph's features: its copy drops the ``DestroyHandler``,
        whose orderings keep an in-place operation after every other reader of what it
        overwrites, so nothing would hold its order of operations to that. Under the template's
        disk-cache setting: a float32 graph's code must not be loaded from the cache
        (:func:`_pm_compile`). Under the Numba backend the copy is linked to the template's Numba
        function (:class:`_LinkedBefore`), whose order of operations is the template's graph's;
        under another linker, the cloned graph is linked anew.
        """
        template = self.function
        maker = template.maker
        swap = dict(zip(self.shared, shared, strict=True))
        fgraph = maker.fgraph.clone(check_integrity=False)
        inputs = []
        for k, spec in enumerate(maker.inputs):
            spec = copy.copy(spec)
            theirs = swap.get(spec.variable, spec.variable)
            if theirs is not spec.variable:
                spec.variable, spec.value = theirs, theirs.container
                replacement = theirs.clone()
                replaced = fgraph.inputs[k]
                fgraph.inputs[k] = replacement
                fgraph.replace(replaced, replacement, reason="_Template.copy_for")
            inputs.append(spec)
        outputs = [copy.copy(spec) for spec in maker.outputs]
        for spec, variable in zip(outputs, fgraph.outputs, strict=True):
            spec.variable = variable
        cached = type(template).disk_cached and pytensor.config.numba__cache
        with pytensor.config.change_flags(numba__cache=cached):
            copied = type(maker)(
                inputs=inputs,
                outputs=outputs,
                fgraph=fgraph,
                mode=maker.mode,
                on_unused_input="ignore",
                function_class=maker.function_class,
                accept_inplace=True,
                no_fgraph_prep=True,
            )
            jit_fn = getattr(template.vm, "jit_fn", None)
            if jit_fn is not None and type(copied.linker) is NumbaLinker:
                copied.linker.__class__ = _LinkedBefore
                copied.linker.jit_fn = jit_fn
            function = copied.create([spec.value for spec in inputs])
        function.__class__ = type(template)
        return function


class _LinkedBefore(NumbaLinker):
    """The Numba linker of a template's copy (:meth:`_Template.copy_for`): it links the
    template's Numba function to the copy's storage instead of generating that function again.

    Generating it is most of what linking costs (a Numba dispatcher per operation, then a load
    from PyTensor's disk cache), and gives nothing new: the function takes every input, shared
    variables included, as an argument, and freezes in only the graph's constants and order of
    operations, which are the template's. One function for all copies also means that Numba
    compiles or loads its code once per process, and that the jitted callers of
    :func:`_first_of_its_kind` see one function.

    Attributes
    ----------
    jit_fn : Callable
        The template's Numba function.
    """

    jit_fn: Callable

    def fgraph_convert(self, fgraph: Any, **kwargs: Any) -> None:
        return None

    def jit_compile(self, fn_and_cache: None) -> Callable:
        return self.jit_fn

    def __reduce__(self) -> tuple:
        # Pickled with its function (pm.sample with mp_ctx="spawn" pickles each step), it is the
        # plain linker: a Numba function made from generated source does not survive pickling
        # (its globals are lost), so the unpickled function generates its code again.
        return NumbaLinker, (), {k: v for k, v in self.__dict__.items() if k != "jit_fn"}


def _same_argument(a: Any, b: Any) -> bool:
    """Whether two values of a compilation argument are the same: equal plain values, or one
    object (a ``Mode``, whose equality PyTensor does not define)."""
    plain = (str, int, float, bool, type(None))
    return a is b or (type(a) is type(b) and isinstance(a, plain) and a == b)


def _template_for(
    flags: tuple, kwargs: dict, inputs: list, outputs: list, shared: tuple
) -> _Template | None:
    """The template (:class:`_Template`) that serves the graph, made the most recently used."""
    for k in range(len(_TEMPLATES) - 1, -1, -1):
        template = _TEMPLATES[k]
        if template.serves(flags, kwargs, inputs, outputs, shared):
            _TEMPLATES.append(_TEMPLATES.pop(k))
            return template
    return None


class _PackageFunction(Function):
    """A function compiled by :func:`_pm_compile`, pickled so that where it is unpickled
    (``pm.sample`` with ``mp_ctx="spawn"`` or ``"forkserver"`` pickles each step,
    ``pm.sample_smc`` its kernel) it is compiled again as it was first: under
    :func:`float64_internals` (its graph holds float64 constants, which a user's
    ``warn_float64="raise"`` would refuse to rebuild) and, as :class:`_UncachedFunction`,
    without PyTensor's disk cache."""

    __slots__ = ()
    #: Whether PyTensor's disk cache may hold its Numba code.
    disk_cached: ClassVar[bool] = True

    def __reduce__(self) -> tuple:
        # PyTensor's own reduction (registered with copyreg), pickled apart: its arguments (the
        # graph) must be unpickled under the flags too, not before _compiled_again is called.
        reduction = copyreg.dispatch_table[Function](self)
        return _compiled_again, (type(self), cloudpickle.dumps(reduction))


class _UncachedFunction(_PackageFunction):
    """A :class:`_PackageFunction` of a graph that narrows float64 to float32."""

    __slots__ = ()
    disk_cached = False


def _compiled_again(cls: type[_PackageFunction], reduction: bytes) -> _PackageFunction:
    """An unpickled :class:`_PackageFunction`."""
    cached = cls.disk_cached and pytensor.config.numba__cache
    with float64_internals(), pytensor.config.change_flags(numba__cache=cached):
        constructor, arguments = pickle.loads(reduction)
        function = constructor(*arguments)
    function.__class__ = cls
    return function


#: What a warning says when the lines are evaluated as the whole log-density, not local lines.
_IN_FULL = "lines evaluated in full"


def _narrows_to_float32(outputs: list) -> bool:
    """Whether an operation in the graph of ``outputs`` takes float64 and gives float32.

    A fill (``Second``) reads only the shape of its first input: a float32 value broadcast to
    a float64 tensor's shape narrows nothing. PyMC's graphs hold such fills wherever a Python
    float became a float32 constant (``pm.Uniform("x", -1.0, 1.0)``'s log-density), and
    counting them kept every such model out of the disk cache, compiled afresh at each step's
    construction.
    """
    for node in apply_ancestors(outputs):
        inputs = node.inputs
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Second):
            inputs = inputs[1:]
        if any(getattr(o.type, "dtype", None) == "float32" for o in node.outputs) and any(
            getattr(i.type, "dtype", None) == "float64" for i in inputs
        ):
            return True
    return False


def log_density_eps(graph: StepGraph) -> float:
    """Machine epsilon of the coarsest of the model's log-density terms: how finely the compiled
    log-density is known (relative ``2⁻²³`` for a float32 model, whose log-density is a float32
    number whatever type it is cast to afterwards). The terms' types, not their inputs': PyMC
    writes constants such as ``-0.5`` as float32 in float64 models too."""
    return max(np.finfo(term.dtype).eps for term in graph.model.logp(sum=False))


@float64_internals()
def compile_logp_dlogp(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """``x ↦ (log p(x), ∇ log p(x))`` of the model (PyMC's ``model.logp()``, Jacobians included).

    ``x`` must be a contiguous float64 vector. Warmed up at ``graph.start``.
    """
    [logp], flat = graph.join([graph.logp])
    function = _compile([flat], [logp, pt.grad(logp, flat)], compile_kwargs)
    warm_up(function, graph.start)

    def logp_dlogp(x: np.ndarray) -> tuple[float, np.ndarray]:
        logp, grad = function(x)
        return float(logp), grad

    return logp_dlogp


@float64_internals()
def compile_nonfinite_values(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], np.ndarray] | None:
    """``x ↦`` the number of elements of each of the step's variables that are not finite on the
    variable's own scale (the back-transformed values PyMC's trace records), in raveling order.

    ``None`` when no variable is transformed: the values are the sampling coordinates, finite
    wherever the step can be. Warmed up at ``graph.start``.
    """
    model = graph.model
    rvs = [model.values_to_rvs[value_var] for value_var in graph.value_vars]
    if all(model.rvs_to_transforms.get(rv) is None for rv in rvs):
        return None
    counts = [pt.sum(~pt.isfinite(value)) for value in model.replace_rvs_by_values(rvs)]
    [joined], flat = graph.join([pt.stack(counts)])
    function = _compile([flat], [joined], compile_kwargs)
    warm_up(function, graph.start)
    direct = _DirectCall(function, 1)  # called after every draw
    return lambda x: direct(x)[0]


@float64_internals()
def compile_batched_logp(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """``X ↦ log p(X[k])`` for each row ``X[k]`` of a float64 matrix of raveled points.

    One vectorised evaluation of the model's log-density (Jacobians included) over the rows, for
    Monte Carlo estimates that need many points at once (variational ELBOs). Warmed up at
    ``graph.start``.
    """
    [logp], flat = graph.join([graph.logp])
    rows = pt.matrix("rows", dtype="float64", shape=(None, flat.type.shape[0]))
    function = _compile([rows], [vectorize_graph(logp, replace={flat: rows})], compile_kwargs)
    warm_up(function, graph.start[None, :])

    def batched_logp(x: np.ndarray) -> np.ndarray:
        (logp,) = function(np.ascontiguousarray(x, dtype=np.float64))
        return logp

    return batched_logp


@float64_internals()
def compile_batched_prior_likelihood(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``X ↦ (prior, likelihood)`` log-densities of each row of a matrix of raveled points.

    PyMC's own split for tempering, as ``pm.sample_smc`` makes it: ``model.varlogp`` (the free
    variables, Jacobians included) and ``model.datalogp`` (observed variables and potentials),
    each vectorised over the rows in one call.
    """
    model = graph.model
    [prior, likelihood], flat = graph.join([model.varlogp, model.datalogp])
    rows = pt.matrix("rows", dtype="float64", shape=(None, flat.type.shape[0]))
    outputs = vectorize_graph([prior, likelihood], replace={flat: rows})
    function = _compile([rows], outputs, {"on_unused_input": "ignore", **(compile_kwargs or {})})
    warm_up(function, graph.start[None, :])
    return _BatchedPriorLikelihood(function)


class _BatchedPriorLikelihood:
    """The function of :func:`compile_batched_prior_likelihood`."""

    def __init__(self, function: Function):
        self.function = function

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        prior, likelihood = self.function(np.ascontiguousarray(x, dtype=np.float64))
        return np.broadcast_to(prior, len(x)), np.broadcast_to(likelihood, len(x))


@float64_internals()
def compile_batched_local_lines(
    graph: StepGraph,
    whole: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    compile_kwargs: dict | None = None,
) -> tuple[Callable[[np.ndarray, int, np.ndarray], tuple[np.ndarray, np.ndarray]], str] | None:
    """``(X, i, values) ↦ (prior, likelihood)`` along coordinate ``i`` of every row of ``X``.

    The local line (:mod:`pymc_sfp._local_line`) of each part of PyMC's split for tempering
    (:func:`compile_batched_prior_likelihood`), on PyMC's raveled values: only the terms that
    read the coordinate, at each of ``values`` (the same for every row), vectorised over the
    rows. Each output is ``(rows, G)`` and differs from the part's log-density along the row's
    line by a constant of that row, which a conditional along the line (normalised) and a ratio
    of two points on it do not see. A model of independent coordinates evaluates one element
    per value, whatever the number of coordinates or rows, where the whole log-density at
    every row and value costs ``O(rows · G · N)``.

    ``whole`` is the function of :func:`compile_batched_prior_likelihood` for ``graph``, which
    the lines are checked against. Returns the function and a note of what each line
    evaluates, or ``None`` where no part has a local line, the model has one coordinate or a
    discrete variable (read rounded, which the line does not model), the log-density at
    ``graph.start`` is not finite, building the lines raises, or they disagree with the
    log-density at a moved point of a coordinate of each variable (and up to
    ``_STRUCTURE_CHECKS`` spread over all of them) at ``graph.start``, to ``√eps / 10``
    relative (``eps`` of the model's coarsest float).
    """
    model = graph.model
    x0 = graph.start
    at_start = np.array(whole(x0[None, :]))[:, 0]
    if (
        x0.size < 2  # one coordinate: every term reads it
        or any(v.dtype in discrete_types for v in graph.value_vars)
        or not np.all(np.isfinite(at_start))  # nothing to check the lines against
    ):
        return None
    layout = coordinate_layout(model, graph.value_vars, graph.initial_point)
    # PyMC's values, not SFPStep's sampling coordinates: no interval is sampled on its own scale.
    layout = dataclasses.replace(
        layout,
        interval=np.zeros(layout.size, dtype=bool),
        lower=np.full(layout.size, -np.inf),
        upper=np.full(layout.size, np.inf),
    )
    x = pt.vector("values_of_a_row", dtype="float64")
    index = pt.scalar("index", dtype="int64")
    values = pt.vector("values", dtype="float64")

    def join(outputs: list) -> tuple[list, pt.TensorVariable]:
        joined, flat = graph.join(outputs)
        return clone_replace(joined, {flat: x}), pt.constant(0.0)

    parts = [model.free_RVs, likelihood_terms(model)]
    [*part_graphs], _ = join([model.logp(vars=terms) for terms in parts])
    try:
        lines = [
            local_line(_terms_view(model, terms), graph.value_vars, layout, join, index, values)
            for terms in parts
        ]
    except Exception as err:  # any failure to build it: the whole log-density instead
        _log.warning(_IN_FULL + ": building the local line raised %r", err)
        return None
    if all(line is None for line in lines):
        return None
    local = next(line for line in lines if line is not None)
    along_rows = {x: rows_along(x, index, values)}
    general = [vectorize_graph(g, replace=along_rows) for g in part_graphs]
    rows = pt.matrix("rows", dtype="float64", shape=(None, layout.size))
    kwargs = {"on_unused_input": "ignore", **(compile_kwargs or {})}
    outputs = [
        vectorize_graph(
            [general[k] if line is None else line.along[j] for k, line in enumerate(lines)],
            replace={x: rows},
        )
        for j in range(len(local.along))
    ]
    functions = [_compile([rows, index, values], out, kwargs) for out in outputs]
    starts = np.asarray(local.starts, dtype=np.int64)
    local_lines = _BatchedLocalLines(functions, starts, local.line_of)
    eps = _coarsest_precision(part_graphs)
    for i in np.union1d(_spread(np.arange(layout.size), _STRUCTURE_CHECKS), starts):
        moved = x0.copy()
        moved[i] += 0.25
        try:
            ends = np.array(local_lines(x0[None, :], int(i), np.array([x0[i], moved[i]])))[:, 0]
        except Exception as err:  # any failure: the whole log-density instead
            _log.warning(_IN_FULL + ": the local line raised %r", err)
            return None
        exact = np.array(whole(moved[None, :]))[:, 0] - at_start
        if not all(map(_line_agrees, ends, exact, at_start, (eps, eps))):
            where = layout.describe(int(i))
            _log.warning(
                _IN_FULL + ": the local line disagrees at %s (%s != %s)",
                where,
                ends,
                exact,
            )
            return None
    n_elements = sum(line.n_elements for line in lines if line is not None)
    n_indexed = sum(line.n_indexed for line in lines if line is not None)
    n_summed = sum(line.n_summed for line in lines if line is not None)
    note = (
        f"the terms that read the coordinate: {n_elements} (term, variable) pairs one element "
        f"each, {n_indexed} the elements that index it, {n_summed} in full"
        + ("; the prior in full" if lines[0] is None else "")
        + ("; the likelihood in full" if lines[1] is None else "")
    )
    return local_lines, note


class _BatchedLocalLines:
    """The function of :func:`compile_batched_local_lines`: ``(X, i, values) ↦ (prior,
    likelihood)``, calling the compiled function of the variable that holds coordinate ``i``
    (``functions[line_of[k]]`` for the variable ``k`` that starts at or before ``starts[k]``)."""

    def __init__(
        self,
        functions: list[Function],
        starts: np.ndarray,
        line_of: tuple[int, ...],
    ):
        self.functions, self.starts, self.line_of = functions, starts, line_of

    def __call__(self, X: np.ndarray, i: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        rows = np.ascontiguousarray(X, dtype=np.float64)
        outputs = self.functions[self.line_of[k]](rows, np.asarray(i, dtype=np.int64), values)
        # A line that reads no other coordinate is the same for every row: computed once.
        return tuple(np.broadcast_to(o, (len(X), len(values))) for o in outputs)


def _model_view(model: pm.Model, logp: Callable) -> pm.Model:
    """A view of ``model``: every variable, value and transform shared, ``logp`` its own
    (``logp(vars=None, jacobian=True, sum=True)``, as ``pm.Model.logp``)."""
    view = object.__new__(type(model))
    view.__dict__.update(model.__dict__)
    view.logp = logp
    return view


def _terms_view(model: pm.Model, terms: list) -> pm.Model:
    """A view of ``model`` whose log-density is that of ``terms`` alone (free, observed
    variables or potentials)."""

    def logp(vars=None, jacobian: bool = True, sum: bool = True):
        return model.logp(list(terms) if vars is None else vars, jacobian=jacobian, sum=sum)

    return _model_view(model, logp)


def likelihood_terms(model: pm.Model) -> list:
    """The terms of the model's likelihood: its observed variables and ``pm.Potential`` terms."""
    return [*model.observed_RVs, *model.potentials]


def improper_prior_names(model: pm.Model) -> list[str]:
    """Names of the free variables of ``model`` whose priors cannot be drawn from (``pm.Flat``,
    ``pm.HalfFlat``): the samplers that start from prior draws refuse them."""
    return [rv.name for rv in model.free_RVs if isinstance(rv.owner.op, FlatRV | HalfFlatRV)]


@float64_internals()
def compile_log_likelihood(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], tuple[float, float]]:
    """``x ↦ (prior, likelihood)``, what a swap between tempered replicas needs.

    The prior is the log-density of the free variables (Jacobians included), the likelihood that
    of the observed variables and ``pm.Potential`` terms (:func:`likelihood_terms`); their sum is
    ``model.logp()``. Warmed up at ``graph.start``."""
    model = graph.model
    (prior, likelihood), flat = graph.join(
        [model.logp(vars=model.free_RVs), model.logp(vars=likelihood_terms(model))]
    )
    function = _compile([flat], [prior, likelihood], compile_kwargs)
    warm_up(function, graph.start)
    direct = _DirectCall(function, 1)

    def log_likelihood(x: np.ndarray) -> tuple[float, float]:
        prior, likelihood = direct(x)
        return float(prior), float(likelihood)

    return log_likelihood


@float64_internals()
def compile_batched_tempered_density(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(X, β) ↦ (log π_β, ∇ log π_β, [prior, likelihood])`` for each row ``X[k]`` at ``β[k]``.

    ``π_β ∝ prior · likelihood^β`` is the tempered density of :func:`tempered_model` (the prior
    alone at ``β = 0``, also where the likelihood is 0), evaluated for a whole ladder of
    replicas in one call: the model's graph vectorised over the rows
    (:func:`~pytensor.graph.replace.vectorize_graph`). The third output holds each row's prior
    and log-likelihood (as :func:`compile_log_likelihood` splits them), what the swaps compare.

    The compiled function computes each row's *parts*, ``[prior, likelihood, ∇ prior,
    ∇ likelihood]`` side by side, which do not depend on ``β``; ``log π_β`` and its gradient
    are formed from them by :func:`tempered_parts`. A replica that moves to another rung then
    needs no new evaluation: the compiled tempering rounds
    (:mod:`pymc_sfp.core.compiled_tempering`) form its density at the new ``β`` from the parts
    it carries, with the same arithmetic, so that both give the same numbers. Warmed up at
    ``graph.start``.

    The returned function has two attributes for the compiled rounds: ``parts``, ``X ↦`` the
    parts (shape ``(len(X), 2 + 2 d)``), and ``machine_code``, ``() ↦ (jit_fn, cells)`` of the
    same computation.
    """
    model = graph.model
    (prior, likelihood), flat = graph.join(
        [model.logp(vars=model.free_RVs), model.logp(vars=likelihood_terms(model))]
    )
    # Either part may not depend on the point (a flat prior, a model without data).
    row_parts = pt.concatenate(
        [
            pt.stack([prior, likelihood]),
            pt.grad(prior, flat, disconnected_inputs="ignore"),
            pt.grad(likelihood, flat, disconnected_inputs="ignore"),
        ]
    )
    rows = pt.matrix("rows", dtype="float64", shape=(None, flat.type.shape[0]))
    [batched] = vectorize_graph([row_parts], replace={flat: rows})
    function = _compile([rows], [batched], compile_kwargs)
    warm_up(function, graph.start[None, :])
    direct = _DirectCall(function, 1)
    width = 2 + 2 * flat.type.shape[0]

    def parts(x: np.ndarray) -> np.ndarray:
        (out,) = direct(x)
        if out.shape != (len(x), width):
            # A graph that does not depend on the point is not batched.
            out = np.broadcast_to(out.reshape(-1, width), (len(x), width))
        return out

    def tempered_density(
        x: np.ndarray, beta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows_parts = parts(x)
        return (*tempered_parts(rows_parts, beta), rows_parts[:, :2])

    tempered_density.parts = parts
    # For the compiled ladder rounds (pymc_sfp.core.compiled_tempering): ``(jit_fn, cells)``.
    tempered_density.machine_code = functools.partial(_machine_code, function, 1, 1)
    return tempered_density


def tempered_parts(parts: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log π_β = prior + β · likelihood`` and its gradient ``∇ prior + β ∇ likelihood`` of
    each row of ``parts`` (``[prior, likelihood, ∇ prior, ∇ likelihood]``) at its ``β``, with
    the likelihood's terms left out at ``β = 0`` (the prior alone, also where the likelihood or
    its gradient is not finite). The compiled tempering rounds compute these products and sums
    element by element, in the same order."""
    beta = np.asarray(beta, dtype=np.float64)
    d = (parts.shape[1] - 2) // 2
    on = beta != 0.0
    scaled = np.zeros(len(beta))
    np.multiply(beta, parts[:, 1], out=scaled, where=on)
    scaled_grad = np.zeros((len(beta), d))
    np.multiply(beta[:, None], parts[:, 2 + d :], out=scaled_grad, where=on[:, None])
    return parts[:, 0] + scaled, parts[:, 2 : 2 + d] + scaled_grad


@float64_internals()
def compile_prior_sampler(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> tuple[Callable[[], np.ndarray], list[SharedVariable]] | None:
    """Exact joint draws of the prior of the step's variables, raveled in the step's order.

    Each free variable is drawn from the model's generative graph (as ``pm.sample_smc`` draws its
    first population) and mapped to its value (unconstrained) space by its transform. ``None``
    where that would not be a draw of the prior density the model evaluates: a variable with no
    random method (``pm.Flat``, a ``CustomDist`` without ``random``), or with a transform other
    than its default (e.g. ``ordered``), which constrains the density beyond the support.

    Returns
    -------
    draw : callable
        ``() ↦`` a float64 vector.
    generators : list of SharedVariable
        Its random generators, to be re-seeded per chain with :func:`reseed`.
    """
    from pymc.distributions.transforms import _default_transform

    model = graph.model
    values = []
    for value_var in graph.value_vars:
        rv = model.values_to_rvs[value_var]
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            default = _default_transform(rv.owner.op, rv)
            if type(default) is not type(transform):
                return None
        value = rv if transform is None else transform.forward(rv, *rv.owner.inputs)
        values.append(pt.cast(pt.flatten(value), "float64"))
    try:
        function = _pm_compile([], [pt.concatenate(values)], compile_kwargs)
        warm_up(function)
    except NotImplementedError:
        return None
    generators = [var for var in function.get_shared() if isinstance(var.type, RandomGeneratorType)]

    def draw() -> np.ndarray:
        return function()[0]

    # For the compiled ladder rounds (pymc_sfp.core.compiled_tempering.prior_draws).
    draw.function = function
    return draw, generators


def tempered_model(model: pm.Model, beta: SharedVariable) -> pm.Model:
    """A view of ``model`` whose log-density is ``prior + β · likelihood``.

    The view shares every variable, value and transform with ``model``; only its ``logp``
    differs: the terms of :func:`likelihood_terms` are multiplied by the shared scalar ``beta``
    (and are 0 at ``beta = 0``, also where the likelihood is 0).
    Any step method built on the view (``Step(model=view)``; PyMC's steps compile
    ``model.logp()``, ours go through this module) samples the tempered density, and setting
    ``beta`` moves every function compiled from it along the path without recompiling.
    """
    tempered = set(likelihood_terms(model))

    def logp(vars=None, jacobian: bool = True, sum: bool = True):
        if vars is None:
            varlist = model.free_RVs + model.observed_RVs + model.potentials
        elif isinstance(vars, list | tuple):
            varlist = list(vars)
        else:
            varlist = [vars]
        factors = model.logp(varlist, jacobian=jacobian, sum=False)
        # At β = 0 the target is the prior, also where the likelihood is 0 (a hard constraint):
        # 0 · (−inf) would be NaN. A float64 β makes the tempered terms float64. (A `with`, not
        # the decorator: the view travels to chain processes, and a decorated closure would
        # carry the decorator's generator, which does not pickle.)
        with float64_internals():
            factors = [
                pt.switch(pt.eq(beta, 0.0), pt.zeros_like(factor), beta * factor)
                if model.values_to_rvs.get(var, var) in tempered
                else factor
                for var, factor in zip(varlist, factors, strict=True)
            ]
            if not sum:
                return factors
            return pt.stack([pt.sum(factor) for factor in factors]).sum()

    return _model_view(model, logp)


def random_generators(graph: StepGraph) -> list[SharedVariable]:
    """The random generators the model's log-density draws from (``pm.Minibatch`` indices).

    A log-density that depends on them is a random estimate: each call draws a new minibatch.
    """
    return [
        var
        for var in ancestors([graph.logp])
        if isinstance(var, SharedVariable) and isinstance(var.type, RandomGeneratorType)
    ]


def reseed(generators: Sequence[SharedVariable], rng: np.random.Generator) -> None:
    """Give each shared random generator a fresh stream spawned from ``rng`` (once per chain)."""
    for shared, seed in zip(generators, rng.spawn(len(generators)), strict=True):
        shared.set_value(np.random.default_rng(seed), borrow=True)


@dataclass(frozen=True)
class CoordinateLayout:
    """Where each raveled coordinate comes from, and its interval support if it has one.

    Attributes
    ----------
    names : tuple of str
        Value-variable name of each step variable, in raveling order.
    shapes : tuple of tuple
        Their shapes.
    slices : tuple of slice
        Their positions in the raveled vector.
    interval : ndarray of bool, shape (N,)
        Coordinates sampled on their constrained scale (finite constant bounds).
    lower, upper : ndarray, shape (N,)
        The support of interval coordinates (``-inf``/``inf`` elsewhere).
    """

    names: tuple[str, ...]
    rv_names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    slices: tuple[slice, ...]
    interval: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def size(self) -> int:
        return len(self.interval)

    @functools.cached_property
    def any_interval(self) -> bool:
        return bool(self.interval.any())

    def describe(self, index: int) -> str:
        """Human-readable name of coordinate ``index``, e.g. ``w[2, 1]``."""
        for name, shape, slc in zip(self.rv_names, self.shapes, self.slices, strict=True):
            if slc.start <= index < slc.stop:
                if not shape:
                    return name
                position = np.unravel_index(index - slc.start, shape)
                return f"{name}[{', '.join(str(int(p)) for p in position)}]"
        raise IndexError(index)

    def scale(self, index: int) -> str:
        """Where coordinate ``index`` is sampled, for messages about its box: ``""`` on its
        variable's own scale, else the name of PyMC's transformed value it is."""
        for name, rv_name, slc in zip(self.names, self.rv_names, self.slices, strict=True):
            if slc.start <= index < slc.stop:
                if name == rv_name or self.interval[index]:
                    return ""
                return f" (sampled as {name}, on PyMC's transformed scale, where bounds apply)"
        raise IndexError(index)

    def to_value(self, x: np.ndarray) -> np.ndarray:
        """Sampling coordinates → PyMC's unconstrained values (log-odds for intervals)."""
        q = np.array(x, dtype=float, copy=True)
        if not self.any_interval:
            return q
        m = self.interval
        q[m] = np.log(x[m] - self.lower[m]) - np.log(self.upper[m] - x[m])
        return q

    def from_value(self, q: np.ndarray) -> np.ndarray:
        """PyMC's unconstrained values → sampling coordinates."""
        x = np.array(q, dtype=float, copy=True)
        if not self.any_interval:
            return x
        m = self.interval
        x[m] = self.lower[m] + (self.upper[m] - self.lower[m]) / (1.0 + np.exp(-q[m]))
        # Keep interval coordinates strictly inside the support, where the density is defined.
        x[m] = np.clip(x[m], *open_interval(self.lower[m], self.upper[m]))
        return x

    def log_jacobian(self, x: np.ndarray) -> float:
        """``log |dx/dq|`` summed over interval coordinates (to report PyMC's ``model_logp``)."""
        if not self.any_interval:
            return 0.0
        m = self.interval
        lo, hi = self.lower[m], self.upper[m]
        return float(np.sum(np.log(x[m] - lo) + np.log(hi - x[m]) - np.log(hi - lo)))


def constant_value(var, model: pm.Model) -> np.ndarray | None:
    """The value of ``var`` if it depends on no model variable and no shared variable, else
    ``None``. A ``pm.Data`` is not constant: ``pm.set_data`` may change it after the step that
    read it was built (the step is reused across ``pm.sample`` calls)."""
    if var is None:
        return None
    model_vars = set(model.free_RVs) | set(model.value_vars) | set(model.observed_RVs)
    if any(a in model_vars or isinstance(a, SharedVariable) for a in ancestors([var])):
        return None
    try:
        return np.asarray(var.eval(), dtype=float)
    except Exception:
        return None


def coordinate_layout(model: pm.Model, value_vars: list, initial_point: dict) -> CoordinateLayout:
    """Describe the raveled coordinates of ``value_vars`` (see :class:`CoordinateLayout`)."""
    names, rv_names, shapes, slices = [], [], [], []
    interval, lower, upper = [], [], []
    start = 0
    for value_var in value_vars:
        shape = tuple(np.shape(initial_point[value_var.name]))
        size = int(np.prod(shape, dtype=int))
        rv = model.values_to_rvs[value_var]
        transform = model.rvs_to_transforms.get(rv)
        lo = np.full(size, -np.inf)
        hi = np.full(size, np.inf)
        is_interval = False
        if isinstance(transform, IntervalTransform):
            a, b, lower_bounded, upper_bounded = transform.get_a_and_b(rv.owner.inputs)
            a_val = constant_value(a, model) if lower_bounded else None
            b_val = constant_value(b, model) if upper_bounded else None
            if a_val is not None and b_val is not None:
                a_full = np.broadcast_to(a_val, shape).ravel()
                b_full = np.broadcast_to(b_val, shape).ravel()
                if np.isfinite(a_full).all() and np.isfinite(b_full).all():
                    lo, hi, is_interval = a_full.copy(), b_full.copy(), True
        names.append(value_var.name)
        rv_names.append(rv.name)
        shapes.append(shape)
        slices.append(slice(start, start + size))
        interval.append(np.full(size, is_interval))
        lower.append(lo)
        upper.append(hi)
        start += size
    return CoordinateLayout(
        tuple(names),
        tuple(rv_names),
        tuple(shapes),
        tuple(slices),
        np.concatenate(interval),
        np.concatenate(lower),
        np.concatenate(upper),
    )


@dataclass(frozen=True)
class JittedLine:
    """The Numba machine code of a :class:`LineEvaluator`, callable from ``@njit`` code.

    ``point(x, *point_extra) -> (logp,)`` and ``along(x, index, values, *along_extra) -> (logp,)``
    are the functions PyTensor's Numba backend generated for :meth:`LineEvaluator.logp` and
    :meth:`LineEvaluator.along` (the same code, so the same numbers); the extras are the values of
    the model's shared variables (``pm.Data``, the free variables of other steps), read at each
    call of :meth:`extras` because PyMC sets them between steps. For a structured network line
    both are the cached functions of :func:`_cached_line` and ``cache_at`` computes the cache.
    ``along`` is a tuple of such functions, of one signature, ``along[k]`` serving the
    coordinates from ``along_starts[k]`` up to the next start: the local line compiled per
    variable (:class:`_LineByVariable`, the small variables' shared function repeated); one
    function for the other lines.
    """

    point: Callable
    along: tuple[Callable, ...]
    point_cells: tuple
    along_cells: tuple
    cache_at: Callable[[np.ndarray], list] | None = None
    relative: bool = False
    along_starts: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(1, dtype=np.int64)
    )

    def extras(self, x: np.ndarray) -> tuple[tuple, tuple]:
        """The further inputs of ``point`` and ``along`` for a sweep starting at ``x``: the
        current values of the shared variables, after the network's cache at ``x`` (with ``x``
        itself, which the cached functions compare their ``x`` with, and the staging arrays of
        the advance to a proposal, with nothing staged) where there is one.

        The cache is computed afresh for each sweep, because other steps and ``pm.set_data``
        change the shared variables between sweeps; within the sweep the cached functions
        update it (:func:`_cached_line`)."""
        point_extra = tuple(cell[0] for cell in self.point_cells)
        along_extra = tuple(cell[0] for cell in self.along_cells)
        if self.cache_at is None:
            return point_extra, along_extra
        x = np.array(x, dtype=np.float64, copy=True)
        cache = tuple(np.array(a, dtype=np.float64, copy=True) for a in self.cache_at(x))
        staging = (*(np.empty_like(a) for a in cache), np.array([-1.0, np.nan]))
        return (x, *cache, *staging, *point_extra), (x, *cache, *staging, *along_extra)


def _machine_code(function: Function, n_inputs: int, n_outputs: int = 1) -> tuple[Callable, tuple]:
    """A compiled function's Numba callable and the storage cells of its shared inputs.

    Raises
    ------
    NotImplementedError
        With the reason, when the function was not compiled by the Numba backend, updates
        shared variables, or has a shared input that is not an array.
    """
    jit_fn = getattr(function.vm, "jit_fn", None)
    if jit_fn is None:
        raise NotImplementedError(
            "the model was not compiled by PyTensor's Numba backend (compile_kwargs or "
            "PyTensor's mode chose another linker)"
        )
    if function.maker.fgraph.update_mapping or len(function.maker.fgraph.outputs) != n_outputs:
        raise NotImplementedError(
            "the log-density updates shared variables (random generators, e.g. pm.Minibatch)"
        )
    cells = tuple(function.vm.inputs[n_inputs:])
    if not all(isinstance(cell[0], np.ndarray) for cell in cells):
        raise NotImplementedError(
            "the log-density has shared inputs that are not arrays (e.g. random generators)"
        )
    return jit_fn, cells


class _DirectCall:
    """A compiled function called through its Numba machine code (:func:`_machine_code`),
    without PyTensor's wrapper around each call: its storage cells, thunk and output list cost
    more than a small model's arithmetic, which matters where a sampler calls the function
    several times per draw (a tempering ladder's leapfrog steps). The same code, so the same
    numbers. Falls back to the function itself where it has no machine code to call.

    Returns the outputs (a tuple, or the fallback's list). Not pickled with the machine code
    (the generated Numba functions do not pickle): a spawned process resolves its own at the
    first call.
    """

    def __init__(self, function: Function, n_inputs: int):
        self.function = function
        self.n_inputs = n_inputs
        self._call: Callable | None = None

    def __call__(self, *inputs: np.ndarray) -> tuple:
        if self._call is None:
            self._call = self._resolve()
        return self._call(*inputs)

    def _resolve(self) -> Callable:
        n_outputs = len(self.function.maker.fgraph.outputs)
        try:
            jit_fn, cells = _machine_code(self.function, self.n_inputs, n_outputs)
        except NotImplementedError:
            return self.function
        if not cells:
            return jit_fn

        def call(*inputs: np.ndarray) -> tuple:
            # The shared values are read at each call: pm.set_data replaces them between draws.
            return jit_fn(*inputs, *[cell[0] for cell in cells])

        return call

    def __getstate__(self) -> dict:
        return self.__dict__ | {"_call": None}


#: Per process, the callable for jitted code of the first Numba function PyTensor gave for each
#: of its cache keys.
_FIRST_OF_KEY: dict[str, Callable] = {}


def _first_of_its_kind(jit_fn: Callable) -> Callable:
    """The callable for jitted code (:func:`_unwrapped`) of the first function this process saw
    with ``jit_fn``'s PyTensor cache key; for a function without a key, that of ``jit_fn``.

    PyTensor gives a new Numba function for every compilation, even of the same graph, and
    Numba compiles a jitted caller for the identity of the functions it calls, so the wrappers
    of :func:`_cached_line` around the model's functions would be compiled again for a model
    built again: another data split, a refit. PyTensor's cache key names the generated code with
    everything frozen into it (its disk cache relies on that), and the data reach it as
    arguments (the shared cells), so a function with the same key computes the same thing from
    them.

    The callable is chosen once per key: whether :func:`_unwrapped` can unwrap a function
    changes when the function is first called (from Python or from a wrapper), so choosing it
    again would give a model built again another callable, and its wrappers would be compiled
    again.
    """
    key = CACHED_SRC_FUNCTIONS.get(getattr(jit_fn, "py_func", None))
    if key is None:
        return _unwrapped(jit_fn)
    if key not in _FIRST_OF_KEY:
        _FIRST_OF_KEY[key] = _unwrapped(jit_fn)
    return _FIRST_OF_KEY[key]


def _unwrapped(jit_fn: Callable) -> Callable:
    """The Numba function for jitted code to call: the function PyTensor's disk-cache wrapper
    ``def f(*args): return jitable_func(*args)`` calls, if it already holds machine code, or
    ``jit_fn`` itself.

    Numba types the ``*args`` of a call from Python and of a call from jitted code differently
    (a tuple and a star-argument tuple), so a jitted caller of the wrapper compiles the model
    for the second kind; but the wrapper is cached on disk by PyTensor, and that compilation
    with it, so a later process loads it. The function inside is not cached: it holds machine
    code only when this process compiled the wrapper (the wrapper was not in the disk cache),
    and a jitted caller compiles it afresh in every process otherwise.
    """
    python_function = getattr(jit_fn, "py_func", None)
    inner = getattr(python_function, "__globals__", {}).get("jitable_func")
    takes_star_args = (
        python_function is not None and python_function.__code__.co_flags & inspect.CO_VARARGS
    )
    if takes_star_args and isinstance(inner, Dispatcher) and inner.signatures:
        return inner
    return jit_fn


# The pieces of the cached line that do not depend on the model, compiled once and cached on
# disk: the generated wrappers only call them (Numba's own array assignment and reshaping
# compile for seconds in every process).
_jit_cached = numba.njit(cache=True, nogil=True)


@_jit_cached
def _differing(x: np.ndarray, cached: np.ndarray) -> tuple[int, int]:
    """How many coordinates of ``x`` differ from ``cached``, and the last of them."""
    count = moved = 0
    for m in range(x.shape[0]):
        if x[m] != cached[m]:
            count += 1
            moved = m
    return count, moved


@_jit_cached
def _moved_to(x: np.ndarray, moved: int) -> tuple[np.ndarray, np.ndarray]:
    """The arguments ``index`` and ``values`` of a line through ``x[moved]`` alone."""
    value = np.empty(1)
    value[0] = x[moved]
    return np.array(moved, dtype=np.int64), value


@_jit_cached
def _write_column(target: np.ndarray, column: int, rows: np.ndarray) -> None:
    """``target[:, column] = rows[0]`` for ``rows`` of shape ``(1, n)``."""
    for r in range(target.shape[0]):
        target[r, column] = rows[0, r]


@_jit_cached
def _write_whole(target: np.ndarray, source: np.ndarray) -> None:
    """``target[...] = source``, of the same size: ``(n, units)`` and ``(1, n, units)``, or
    ``(1, 1)`` and ``(1,)``; any layout."""
    columns = target.shape[1]
    for m, value in enumerate(source.flat):
        target[m // columns, m % columns] = value


@_jit_cached
def _copy_column(target: np.ndarray, column: int, source: np.ndarray) -> None:
    """``target[:, column] = source[:, column]``."""
    for r in range(target.shape[0]):
        target[r, column] = source[r, column]


@_jit_cached
def _copy_point(target: np.ndarray, source: np.ndarray) -> None:
    for m in range(target.shape[0]):
        target[m] = source[m]


@_jit_cached
def _stage(staged: np.ndarray, moved: int, value: float) -> None:
    """Record in ``staged`` that the staged cache is the cache's after ``x[moved] = value``."""
    staged[0] = moved
    staged[1] = value


@_jit_cached
def _is_staged(staged: np.ndarray, moved: int, value: float) -> bool:
    """Whether ``staged`` records the move ``x[moved] = value`` (:func:`_stage`)."""
    return staged[0] == moved and staged[1] == value


@_jit_cached
def _first_as_scalar_array(values: np.ndarray) -> np.ndarray:
    """``values[0]`` as a 0-d array; any layout (the lines of several kinds unify to the
    general one)."""
    out = np.empty(())
    out[()] = values[0]
    return out


#: The jitted functions the wrappers of :func:`_cached_line` call, by the names they call.
_WRAPPER_HELPERS = {
    "differing": _differing,
    "moved_to": _moved_to,
    "write_column": _write_column,
    "write_whole": _write_whole,
    "copy_column": _copy_column,
    "copy_point": _copy_point,
    "stage": _stage,
    "is_staged": _is_staged,
    "first_as_scalar_array": _first_as_scalar_array,
}
#: Part of the disk-cache key of the wrappers (:func:`_wrapper`): raise it when what their
#: machine code holds changes in a way the key does not see.
_WRAPPER_CACHE_VERSION = 1

_CACHED_LINE = """
def along(*arguments):
    x, index, values, cx{C}{S}, staged{A}{F} = arguments
    count, moved = differing(x, cx)
    if count > 0:
        lay = layer[moved]
        if count == 1 and lay >= 0:
            j = column[moved]
            if is_staged(staged, moved, x[moved]):
{restore}
            else:
                moved_index, value = moved_to(x, moved)
{advance}
        else:
            new = forward(x{F})
{copy}
        copy_point(cx, x)
        staged[0] = -1.0
    kind = kinds[index[()]]
{line}

def point(*arguments):
    x, cx{C}{S}, staged{A}{P} = arguments
    count, moved = differing(x, cx)
    if count > 1:
        return full(x{P})
    index, value = moved_to(x, moved)
    kind = kinds[moved]
{evaluate}
"""


def _cached_line(
    inner: Sequence[tuple[Callable, tuple]],
    kinds: np.ndarray,
    forward: tuple[Callable, tuple],
    full: tuple[Callable, tuple],
    update: CacheUpdate,
    n_cache: int,
) -> tuple[Callable, Callable, tuple, tuple]:
    """``point`` and ``along`` of :class:`JittedLine` for a structured network line that reads
    the network at ``x`` from a cache (:class:`~pymc_sfp._network_line.NetworkLine`).

    Each takes, after its own arguments, the ``x`` the cache belongs to, the cache arrays, as
    many staging arrays shaped like them and ``staged`` (a float64 pair, ``staged[0] = -1`` for
    nothing staged), then the shared inputs of the functions it calls. ``along`` first brings
    the cache to its ``x``: nothing when ``x`` is the cached one, the cache advanced by one unit
    when one weight's or bias's coordinate differs (the sweep accepted a move), the cache afresh
    otherwise. ``point`` evaluates a point one coordinate away from the cache (the Metropolis
    correction's proposal) as the line through the cached point, and any other point in full.
    The cache arrays are updated in place (as
    :meth:`~pymc_sfp._network_line.CacheUpdate.apply` does), so the two share them within a
    sweep.

    ``point``'s call of the line through the cached point computes the advance to the proposal
    as well (the same call of ``inner`` that ``along`` would make); it writes it into the
    staging arrays where ``along`` would write it into the cache, and records the move in
    ``staged``. An accepted proposal is then advanced to by copying those entries, not by
    calling ``inner`` again: the same numbers, for one line evaluation less per accepted move.
    Any other change of the cache clears ``staged``, so a staged advance is always one from the
    cache as it is.

    ``inner`` holds the structured line of each kind of coordinate
    (:attr:`~pymc_sfp._network_line.NetworkLine.alongs`), whose outputs after the log-density
    are the advance's of a layer's kind; ``kinds[i]`` is the kind of coordinate ``i``;
    ``forward`` is the network at a point and ``full`` the log-density at a point. Each is a
    compiled function's Numba callable and its shared cells (:func:`_machine_code`); returns
    the two callables and their cells, in argument order (every line's cells, the same cell
    twice where two read one shared variable).
    The wrappers are generated as source, each taking its arguments as ``*arguments`` (the
    convention :class:`~pymc_sfp.core.compiled_sweep.FunctionAddress` calls) and unpacking them
    by name, because Numba compiles no call with ``*args`` of mixed types.
    """
    (forward_fn, f_cells), (full_fn, p_cells) = forward, full
    inner_fns = [fn for fn, _ in inner]
    disk_keys = [_pytensor_key(f) for f in (*inner_fns, forward_fn, full_fn)]
    inner_fns = [_first_of_its_kind(f) for f in inner_fns]
    forward_fn, full_fn = _first_of_its_kind(forward_fn), _first_of_its_kind(full_fn)
    # Each line's shared cells, named a{kind}_{m}.
    a_names = [[f"a{k}_{m}" for m in range(len(cells))] for k, (_, cells) in enumerate(inner)]
    a_cells = tuple(cell for _, cells in inner for cell in cells)
    kind_of_layer = {
        lay: int(kinds[np.flatnonzero(update.layer == lay)[0]]) for lay in update.writes
    }

    def names(prefix: str, count: int) -> str:
        return "".join(f", {prefix}{k}" for k in range(count))

    def call(kind: int, point: str, index: str, values: str) -> str:
        """The call of kind ``kind``'s line (``inner{kind}``) through ``point``."""
        arguments = [point, index, values, *(f"c{k}" for k in range(n_cache)), *a_names[kind]]
        return f"inner{kind}({', '.join(arguments)})"

    def branches(indent: int, variable: str, cases: list[tuple[int, list[str]]]) -> str:
        """``cases`` (value, lines) as an if/elif chain on ``variable``, the last one the
        ``else`` (one case: its lines alone)."""
        pad = " " * indent
        if len(cases) == 1:
            return "\n".join(pad + line for line in cases[0][1])
        out = []
        for n, (value, lines) in enumerate(cases):
            if n == len(cases) - 1:
                out.append(pad + "else:")
            else:
                out.append(pad + f"{'if' if n == 0 else 'elif'} {variable} == {value}:")
            out.extend(pad + "    " + line for line in lines)
        return "\n".join(out)

    def writes(write: Callable[[int, int, bool], str], lay: int) -> list[str]:
        """Layer ``lay``'s writes of the advance (:attr:`CacheUpdate.writes`) as ``write``
        spells each ``(output, target, whole)``."""
        return [write(*w) for w in update.writes[lay]]

    def from_line(prefix: str) -> Callable[[int, int, bool], str]:
        """A write of the advance's output into array ``{prefix}{target}``."""

        def write(output: int, target: int, whole: bool) -> str:
            if whole:
                return f"write_whole({prefix}{target}, new[{1 + output}])"
            return f"write_column({prefix}{target}, j, new[{1 + output}])"

        return write

    def restore(output: int, target: int, whole: bool) -> str:
        if whole:
            return f"write_whole(c{target}, s{target})"
        return f"copy_column(c{target}, j, s{target})"

    def evaluate(kind: int) -> list[str]:
        """``point``'s evaluation through the cached point by kind ``kind``'s line, staging
        the advance of a layer's kind."""
        lines = [f"new = {call(kind, 'cx', 'index', 'value')}"]
        for lay, of_layer in kind_of_layer.items():
            if of_layer == kind:
                lines += ["if count == 1:", "    j = column[moved]"]
                lines += ["    " + w for w in writes(from_line("s"), lay)]
                lines += ["    stage(staged, moved, x[moved])"]
        return [*lines, "return (first_as_scalar_array(new[0]),)"]

    layers = list(update.writes)
    source = _CACHED_LINE.format(
        C=names("c", n_cache),
        S=names("s", n_cache),
        A="".join(f", {name}" for group in a_names for name in group),
        F=names("f", len(f_cells)),
        P=names("p", len(p_cells)),
        restore=branches(16, "lay", [(lay, writes(restore, lay)) for lay in layers]),
        advance=branches(
            16,
            "lay",
            [
                (
                    lay,
                    [
                        f"new = {call(kind_of_layer[lay], 'cx', 'moved_index', 'value')}",
                        *writes(from_line("c"), lay),
                    ],
                )
                for lay in layers
            ],
        ),
        copy="\n".join(f"            write_whole(c{k}, new[{k}])" for k in range(n_cache)),
        line=branches(
            4,
            "kind",
            [(k, [f"return ({call(k, 'x', 'index', 'values')}[0],)"]) for k in range(len(inner))],
        ),
        evaluate=branches(4, "kind", [(k, evaluate(k)) for k in range(len(inner))]),
    )
    namespace = {
        "np": np,
        **{f"inner{k}": fn for k, fn in enumerate(inner_fns)},
        "forward": forward_fn,
        "full": full_fn,
        "layer": update.layer,
        "column": update.column,
        "kinds": kinds,
        **_WRAPPER_HELPERS,
    }
    # The same wrappers for the same functions and cache layout (a model built again), compiled
    # once (see _first_of_its_kind). The key holds the functions, so an identity is never that
    # of a function since freed.
    frozen = (update.layer.tobytes(), update.column.tobytes(), kinds.tobytes(), source)
    key = (*inner_fns, forward_fn, full_fn, *frozen)
    if key not in _WRAPPERS:
        _WRAPPERS[key] = tuple(
            _wrapper(source, name, namespace, disk_keys, frozen) for name in ("point", "along")
        )
        if len(_WRAPPERS) > _MOST_WRAPPERS:  # functions without a PyTensor key never recur
            del _WRAPPERS[next(iter(_WRAPPERS))]
    return (*_WRAPPERS[key], (*a_cells, *p_cells), (*a_cells, *f_cells))


class _LineByVariable:
    """The local line compiled per variable (:class:`~pymc_sfp._local_line.LocalLine`), called
    as one: ``line(x, index, values)`` calls the function of the variable that holds coordinate
    ``index``.

    Each function takes the model's shared variables (``pm.Data``, other steps' variables) as
    explicit inputs, all of them in one order, whether it reads them or not: so all have one
    signature, and the compiled sweep takes them as a tuple of addresses of one type
    (:func:`~pymc_sfp.core.compiled_sweep.compiled_sweep`), with no jitted caller around them
    that would be compiled afresh in every process. Their values are read at each call.
    """

    def __init__(self, local: LocalLine, inputs: list[pt.TensorVariable], compile_kwargs: dict):
        self.shared = [v for v in graph_inputs(local.along) if isinstance(v, SharedVariable)]
        explicit = [v.type() for v in self.shared]
        alongs = clone_replace(list(local.along), dict(zip(self.shared, explicit, strict=True)))
        self.functions = [
            _compile([*inputs, *explicit], [along], compile_kwargs) for along in alongs
        ]
        #: The first coordinate of each variable, and the position of its function.
        self.starts = np.asarray(local.starts, dtype=np.int64)
        self.line_of = local.line_of

    def __call__(self, x: np.ndarray, index: np.ndarray, values: np.ndarray) -> list:
        k = int(np.searchsorted(self.starts, index, side="right")) - 1
        shared = [v.get_value(borrow=True) for v in self.shared]
        return self.functions[self.line_of[k]](x, index, values, *shared)

    def machine_code(self) -> tuple[tuple[Callable, ...], tuple]:
        """The Numba callable of each variable's function (one per entry of :attr:`starts`,
        a shared function repeated) and the storage cells of the shared variables, their
        further inputs (:func:`_machine_code`).

        Raises
        ------
        NotImplementedError
            Where :func:`_machine_code` refuses a function.
        """
        n_inputs = 3 + len(self.shared)
        callables = [_machine_code(f, n_inputs)[0] for f in self.functions]
        per_variable = tuple(callables[j] for j in self.line_of)
        return per_variable, tuple(v.container.storage for v in self.shared)


class _LineByKind:
    """A network's structured line compiled per kind of coordinate
    (:attr:`~pymc_sfp._network_line.NetworkLine.alongs`), called as one:
    ``line(x, index, values, *cache)`` calls the function of coordinate ``index``'s kind and
    returns its outputs (the line, then the advance of a layer's kind)."""

    def __init__(self, functions: list[Function], kinds: np.ndarray):
        self.functions = functions
        self.kinds = np.asarray(kinds, dtype=np.int64)

    def __call__(
        self, x: np.ndarray, index: np.ndarray, values: np.ndarray, *cache: np.ndarray
    ) -> list:
        return self.functions[self.kinds[int(index)]](x, index, values, *cache)


#: The wrappers of :func:`_cached_line` per functions and cache layout, the oldest dropped first.
_WRAPPERS: dict[tuple, tuple[Callable, Callable]] = {}
_MOST_WRAPPERS = 32


def _pytensor_key(jit_fn: Callable) -> str | None:
    """PyTensor's disk-cache key of a Numba function it generated, or ``None``."""
    return CACHED_SRC_FUNCTIONS.get(getattr(jit_fn, "py_func", None))


def _wrapper(
    source: str, name: str, namespace: dict, disk_keys: list[str | None], frozen: tuple
) -> Callable:
    """The jitted function ``name`` of the generated ``source`` of :func:`_cached_line`.

    Numba's disk cache needs a source file, which generated code has not; without it each
    process compiled the two wrappers afresh (about 1.8 s each, most of an ``SFPStep``'s
    construction on a network model built again). When PyTensor keyed the three functions
    the wrappers call (its disk cache is on), the wrappers go into PyTensor's Numba cache
    under a key of what their machine code holds: those keys, the constants ``frozen`` into
    them (the layers, the columns, the source) and the source of the helpers they call.
    """
    # A module to name in the cached environment of the function's Python wrapper.
    function = compile_numba_function_src(source, name, {**namespace, "__name__": __name__})
    if all(disk_keys) and pytensor.config.numba__cache:
        helpers = [inspect.getsource(f.py_func) for f in _WRAPPER_HELPERS.values()]
        payload = repr((_WRAPPER_CACHE_VERSION, name, disk_keys, frozen, helpers))
        CACHED_SRC_FUNCTIONS[function] = hashlib.sha256(payload.encode()).hexdigest()
        return numba.njit(nogil=True, cache=True)(function)
    return numba.njit(nogil=True)(function)


#: Most coordinates at which a network's structured line is checked when a step is built.
_STRUCTURE_CHECKS = 256


def _coarsest_precision(outputs: list) -> float:
    """The machine epsilon of the coarsest float in the graphs of ``outputs``: the tolerance of
    a check of their values. A float64 output may be computed from float32 terms (a float32
    model's tempered log-density, whose β is float64)."""
    return max(
        np.finfo(v.dtype).eps
        for v in ancestors(outputs)
        if getattr(v, "dtype", None) in float_dtypes
    )


def _line_agrees(ends: np.ndarray, exact: float, at_start: float, eps: float) -> bool:
    """Whether a line known up to a constant, ``ends`` at a point and at a moved point, changes
    as the log-density does (by ``exact``, from ``at_start``): to ``√eps / 10`` relative to
    their size, or to no density at the moved point both ways (SFP reads NaN as ``-inf``)."""
    tolerance = 0.1 * np.sqrt(eps) * max(1.0, abs(at_start), abs(exact))
    if np.isfinite(exact) and abs(ends[1] - ends[0] - exact) <= tolerance:
        return True
    no_density = (np.isneginf(exact) or np.isnan(exact)) and (
        np.isneginf(ends[1]) or np.isnan(ends[1])
    )
    return bool(no_density and np.isfinite(ends[0]))


def _spread(items: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``items``, evenly spread, the first and the last included."""
    if len(items) <= most:
        return items
    return items[np.unique(np.linspace(0, len(items) - 1, most).round().astype(int))]


def _sampling_space(
    outputs: list, q: pt.TensorVariable, x: pt.TensorVariable, layout: CoordinateLayout
) -> tuple[list, pt.TensorVariable]:
    """``outputs``, graphs of PyMC's raveled values ``q``, as graphs of the sampling coordinates
    ``x``, and the log-Jacobian of the interval coordinates to subtract from a log-density."""
    m = layout.interval
    if not m.any():
        return clone_replace(outputs, {q: x}), pt.constant(0.0)
    lo = pt.constant(np.where(m, layout.lower, 0.0))
    hi = pt.constant(np.where(m, layout.upper, 1.0))
    mask = pt.constant(m)
    log_lower, log_upper = pt.log(x - lo), pt.log(hi - x)
    q_of_x = pt.where(mask, log_lower - log_upper, x)
    log_jac = pt.sum(pt.where(mask, log_lower + log_upper - pt.log(hi - lo), 0.0))
    return clone_replace(outputs, {q: q_of_x}), log_jac


class LineEvaluator:
    """Compiled log-density of the sampling coordinates, at a point or along one coordinate.

    Batched and without the gradient, a line is evaluated, in order of preference, as a
    network's structured line (:mod:`pymc_sfp._network_line`), as the local line of the terms
    that read the coordinate (:mod:`pymc_sfp._local_line`, known up to a constant of the
    line: :attr:`relative`), or as the whole log-density vectorised over the points; each of the
    first two is checked against the log-density when the evaluator is built, and not used
    if it disagrees.

    Parameters
    ----------
    graph : StepGraph
        The step's variables.
    layout : CoordinateLayout
    gradient : bool
        Also compile the derivative along the coordinate (needed by collocation).
    batched : bool
        Evaluate the points along a coordinate in one call of a vectorised graph over a
        ``(points, N)`` matrix (``True``), or one call per point (``False``).
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile`.
    """

    @float64_internals()
    def __init__(
        self,
        graph: StepGraph,
        layout: CoordinateLayout,
        *,
        gradient: bool,
        batched: bool,
        compile_kwargs: dict | None = None,
    ):
        self.gradient = gradient
        self.batched = batched
        x = pt.vector("sampling_coordinates", dtype="float64")

        def join(outputs: list) -> tuple[list, pt.TensorVariable]:
            joined, q = graph.join(outputs)
            return _sampling_space(joined, q, x, layout)

        [logp_q], log_jacobian = join([graph.logp])
        logp_x = logp_q - log_jacobian
        point_outputs = [logp_x]
        if gradient:
            point_outputs.append(pt.grad(logp_x, x))
        self._point = _compile([x], point_outputs, compile_kwargs)
        x0 = layout.from_value(graph.start)
        warm_up(self._point, x0)
        #: Coordinates whose line the network's structure evaluates (``None``: none).
        self.structured: np.ndarray | None = None
        #: The network whose structure :attr:`structured` uses, or why none is used.
        self.structure_note = "the model has no network of pymc_sfp.nn.mlp"
        # The structured line's network at a point and after a one-coordinate move, and the
        # coordinates whose move needs the network afresh (``None``: no structured line).
        self._network: tuple[Function, CacheUpdate] | None = None
        # The local line (:mod:`pymc_sfp._local_line`), known up to a constant of the line.
        self._local: _LineByVariable | None = None
        #: What the line of each coordinate evaluates (the local line's summands), for users.
        self.line_note = "the whole log-density at every point"
        self._jitted_line: JittedLine | None = None
        if not batched:
            return
        index = pt.scalar("index", dtype="int64")
        values = pt.vector("values", dtype="float64")
        if not gradient:
            line = network_line(
                graph.model, join, layout, graph.value_vars, logp_x, x, index, values
            )
            if line is not None:
                inputs = [x, index, values, *line.cache]
                # A layer none of the step's coordinates feed is read from no cache array.
                kwargs = {"on_unused_input": "ignore", **(compile_kwargs or {})}
                self._along = _LineByKind(
                    [
                        _compile(inputs, [along, *advance], kwargs)
                        for along, advance in zip(line.alongs, line.advances, strict=True)
                    ],
                    line.kinds,
                )
                self._network = (_compile([x], list(line.forward), kwargs), line.update)
                # Every kind's function before chains fork (the check below calls some only).
                at_start = [np.array(a, copy=True) for a in self._network[0](x0)]
                for kind in range(len(line.alongs)):
                    i = int(np.flatnonzero(line.kinds == kind)[0])
                    warm_up(
                        self._along, x0, np.asarray(i, dtype=np.int64), x0[i : i + 1], *at_start
                    )
                # The cache may be of a lower precision than the log-density (a float32 network
                # under float64 data).
                eps = _coarsest_precision([logp_x, *line.forward])
                if self._structure_agrees(line, layout, x0, eps):
                    return
                self._network = None
            elif networks_of(graph.model):
                self.structure_note = "no network's single weights are coordinates of this step"
            try:
                local = local_line(graph.model, graph.value_vars, layout, join, index, values)
                if local is not None:
                    kwargs = {"on_unused_input": "ignore", **(compile_kwargs or {})}
                    self._local = _LineByVariable(local, [x, index, values], kwargs)
            except Exception as err:  # any failure to build it: the general line instead
                _log.warning(_IN_FULL + ": building the local line raised %r", err)
                local = None
            if local is not None:
                if self._local_agrees(local, layout, x0, _coarsest_precision([logp_x])):
                    return
                self._local = None
        batched_outputs = vectorize_graph(point_outputs, replace={x: rows_along(x, index, values)})
        if gradient:
            batched_outputs = [batched_outputs[0], batched_outputs[1][:, index]]
        self._along = _compile([x, index, values], batched_outputs, compile_kwargs)
        warm_up(self._along, x0, np.asarray(0, dtype=np.int64), np.full(2, x0[0]))

    def _structure_agrees(
        self, line: NetworkLine, layout: CoordinateLayout, x0: np.ndarray, eps: float
    ) -> bool:
        """Check the structured line (:mod:`pymc_sfp._network_line`) against the log-density at
        a moved point of each coordinate it serves (one call each, which also warms it up; at
        most ``_STRUCTURE_CHECKS`` coordinates spread over them, the first and last included), and
        keep it if it agrees to ``√eps / 10`` relative (``eps`` of the model's float type: both
        sum the same terms in another order); log why not otherwise. The network advanced by the
        move is checked against the network computed at the moved point the same way."""
        forward, _ = self._network
        tolerance = 0.1 * np.sqrt(eps)
        cache = [np.array(a, copy=True) for a in forward(x0)]
        for i in _spread(np.flatnonzero(line.structured), _STRUCTURE_CHECKS):
            moved = x0.copy()
            moved[i] = 0.5 * (x0[i] + layout.upper[i]) if layout.interval[i] else x0[i] + 0.25
            index = np.asarray(i, dtype=np.int64)
            structured = self._along(x0, index, moved[i : i + 1], *cache)[0][0]
            exact = self._point(moved)[0]
            advanced = self.advanced_network(x0, int(i), moved[i])
            network_agrees = all(
                np.allclose(a, b, rtol=tolerance, atol=tolerance * np.abs(b).max(initial=1.0))
                for a, b in zip(advanced, forward(moved), strict=True)
            )
            if not (np.isclose(structured, exact, rtol=tolerance, atol=0.0) and network_agrees):
                what = "log-density" if network_agrees else "network's units"
                self.structure_note = (
                    f"the structured line of network {line.network!r} disagrees with the "
                    f"{what} at {layout.describe(int(i))} ({structured} != {exact})"
                )
                _log.warning(_IN_FULL + ": %s", self.structure_note)
                return False
        self.structured = line.structured
        self.structure_note = f"network {line.network!r}"
        self.line_note = (
            f"network {line.network!r} by its structure, one unit per value, for "
            f"{int(line.structured.sum())} of {line.structured.size} coordinates; the whole "
            "log-density at every point for the others"
        )
        return True

    def _local_agrees(
        self, local: LocalLine, layout: CoordinateLayout, x0: np.ndarray, eps: float
    ) -> bool:
        """Check the local line against the log-density: its change between ``x0`` and a moved
        point of each coordinate (at most ``_STRUCTURE_CHECKS``, spread over them, and the first
        of each variable, whose line is a function of its own) must be the log-density's to
        ``√eps / 10`` relative to the log-density's size; log why not otherwise. Not checked,
        and not used, where the log-density at ``x0`` is not finite."""
        logp0 = self._point(x0)[0]
        if not np.isfinite(logp0):
            return False
        checked = np.union1d(_spread(np.arange(layout.size), _STRUCTURE_CHECKS), local.starts)
        for i in checked:
            moved = x0.copy()
            moved[i] = 0.5 * (x0[i] + layout.upper[i]) if layout.interval[i] else x0[i] + 0.25
            index = np.asarray(i, dtype=np.int64)
            try:
                ends = self._local(x0, index, np.array([x0[i], moved[i]]))[0]
            except Exception as err:  # any failure: the general line instead
                _log.warning(_IN_FULL + ": the local line raised %r", err)
                return False
            exact = self._point(moved)[0] - logp0
            if not _line_agrees(ends, exact, logp0, eps):
                note = f"the local line disagrees at {layout.describe(int(i))}"
                _log.warning(_IN_FULL + ": %s (%s != %s)", note, ends, exact)
                return False
        self.line_note = (
            f"the terms that read the coordinate: {local.n_elements} (term, variable) pairs "
            f"one element each, {local.n_indexed} the elements that index it, "
            f"{local.n_summed} in full"
        )
        return True

    @property
    def relative(self) -> bool:
        """Whether :meth:`along` is the local line, known up to a constant of the line where
        the log-density at ``x`` is not finite (the sweeps' ``relative``)."""
        return self._local is not None

    def jitted(self) -> JittedLine:
        """The machine code of :meth:`logp` and :meth:`along` (:class:`JittedLine`).

        Made once and kept (not pickled: a step sent to a spawned process makes its own).

        Raises
        ------
        NotImplementedError
            With the reason, when there is none to give: the evaluator is not batched or also
            computes the gradient, or :func:`_machine_code` refuses a function.
        """
        if not self.batched:
            raise NotImplementedError("batched=False evaluates a line point by point")
        if self.gradient:
            raise NotImplementedError("the gradient is compiled (solver='collocation')")
        if self._jitted_line is not None:
            return self._jitted_line
        point, point_cells = _machine_code(self._point, 1)
        if self._local is not None:
            alongs, along_cells = self._local.machine_code()
            self._jitted_line = JittedLine(
                point,
                alongs,
                point_cells,
                along_cells,
                relative=True,
                along_starts=self._local.starts,
            )
        elif self._network is None:
            along, along_cells = _machine_code(self._along, 3)
            self._jitted_line = JittedLine(point, (along,), point_cells, along_cells)
        else:
            forward, update = self._network
            n_cache = len(forward.maker.fgraph.outputs)
            point, along, point_cells, along_cells = _cached_line(
                [
                    _machine_code(f, 3 + n_cache, len(f.maker.fgraph.outputs))
                    for f in self._along.functions
                ],
                self._along.kinds,
                _machine_code(forward, 1, n_cache),
                (point, point_cells),
                update,
                n_cache,
            )
            self._jitted_line = JittedLine(point, (along,), point_cells, along_cells, forward)
        return self._jitted_line

    def __getstate__(self) -> dict:
        # Generated Numba wrappers do not pickle; a spawned process makes its own.
        return self.__dict__ | {"_jitted_line": None}

    def advanced_network(self, x: np.ndarray, index: int, value: float) -> list[np.ndarray]:
        """The network's cache at ``x`` after the move ``x[index] = value``, as the compiled
        sweep brings it there (:class:`~pymc_sfp._network_line.CacheUpdate`): to check against
        the network computed at the moved point. Needs a structured line."""
        forward, update = self._network
        cache = [np.array(a, copy=True) for a in forward(x)]
        if update.layer[index] < 0:
            moved = x.copy()
            moved[index] = value
            return [np.array(a, copy=True) for a in forward(moved)]
        new = self._along(x, np.asarray(index, dtype=np.int64), np.array([value]), *cache)
        update.apply(cache, new[1:], index)
        return cache

    def logp(self, x: np.ndarray) -> float:
        """Log-density at one point of sampling coordinates."""
        return float(self._point(x)[0])

    def along(
        self, x: np.ndarray, index: int, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Log-density (and its derivative in coordinate ``index``) with ``x[index] = values``.

        With a local line (:attr:`line_note`), where the log-density at ``x`` is not finite, the
        log-density up to a constant of the line (all that the conditional needs).

        Returns
        -------
        logp : ndarray, shape (G,)
        dlogp : ndarray, shape (G,) or None
            ``None`` unless ``gradient=True``.
        """
        if self._local is not None:
            # The local line at the values and at the current value, whose log-density is known;
            # where it is not finite, the local line alone (right up to a constant of the line).
            ends = np.append(values, x[index])
            line = self._local(x, np.asarray(index, dtype=np.int64), ends)[0]
            offset = self._point(x)[0] - line[-1]
            return line[:-1] + (offset if np.isfinite(offset) else 0.0), None
        if self.batched:
            cache = [] if self._network is None else self._network[0](x)
            out = self._along(x, np.asarray(index, dtype=np.int64), values, *cache)
            return np.asarray(out[0]), (np.asarray(out[1]) if self.gradient else None)
        point = np.array(x, dtype=float, copy=True)
        logp = np.empty(len(values))
        dlogp = np.empty(len(values)) if self.gradient else None
        for j, value in enumerate(values):
            point[index] = value
            out = self._point(point)
            logp[j] = out[0]
            if dlogp is not None:
                dlogp[j] = out[1][index]
        return logp, dlogp


def _check_streamed(
    model: pm.Model, data_names: Sequence[str], target: SharedVariable, observation: list
) -> None:
    """Raise a ValueError if the observation's mean or sd reads a data container with one row
    per observation that is not streamed: each step would silently see its fixed rows."""
    data = {var: var.name for var in model.data_vars}
    rows = np.shape(target.get_value())[:1]
    unstreamed = [
        data[var]
        for var in ancestors(observation)
        if var in data and data[var] not in data_names and np.shape(var.get_value())[:1] == rows
    ]
    if unstreamed:
        raise ValueError(
            f"the observation depends on the data containers {sorted(set(unstreamed))}, which "
            f"have a row per observation like {target.name!r} but are not streamed: give them "
            "in data (one row per observation), or make a fixed array a constant instead of "
            "pm.Data"
        )


class ParticleEvaluator:
    """A model as the state-space model of sequential training, compiled for particle clouds.

    The state is the raveled vector of every free variable's unconstrained value (PyMC's value
    variables, :attr:`layout`); the observation is the model's one observed variable, a
    ``pm.Normal`` whose mean is the network output ``g(w, x)`` and whose sd is fixed or a free
    variable (de Freitas et al. 1998, Eq. 2). The data containers named in ``data_names`` become
    inputs of the compiled functions instead of shared variables, so that each call sees the rows
    it is given (one step's observation, or all of them so far) without touching the model.

    Functions compiled on first use, each vectorised over a leading particle axis with
    :func:`~pytensor.graph.replace.vectorize_graph` (particles × data rows in one call):

    * :meth:`observe`: log-likelihood, observation mean and sd for every particle;
    * :meth:`log_posterior`: prior plus likelihood of given rows (the resample-move target), and
      :meth:`log_posterior_grad` with its gradient (the dynamics move);
    * :meth:`constrained`: the free variables on their own scale and the deterministics that do
      not depend on data (what the filtered summaries and the posterior report);
    * :meth:`linearise`: the observation mean and its Jacobian at one point (the EKF);
    * :meth:`prior_laplace`: the prior's mode and inverse negative Hessian (the EKF's start).

    Parameters
    ----------
    model : pm.Model
    data_names : sequence of str
        The ``pm.Data`` containers that are streamed; they must include the observed variable's.
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile`.

    Raises
    ------
    ValueError
        If the model has not exactly one observed variable, it is not ``pm.Normal``, its data are
        not a ``pm.Data`` container in ``data_names``, the model has potentials, a name in
        ``data_names`` is not a data container of the model, or the model has discrete free
        variables.
    """

    def __init__(
        self, model: pm.Model, data_names: Sequence[str], compile_kwargs: dict | None = None
    ):
        if len(model.observed_RVs) != 1 or model.potentials:
            raise ValueError(
                "sequential training needs a model with exactly one observed variable and no "
                f"pm.Potential; got observed {[v.name for v in model.observed_RVs]} and "
                f"potentials {[v.name for v in model.potentials]}"
            )
        observed = model.observed_RVs[0]
        if not isinstance(observed.owner.op, NormalRV):
            raise ValueError(
                f"the observed variable {observed.name!r} must be pm.Normal (y = g(w, x) + v, "
                f"v ~ N(0, R)), not {observed.owner.op}"
            )
        data_vars = {var.name: var for var in model.data_vars}
        unknown = [name for name in data_names if name not in data_vars]
        if unknown:
            raise ValueError(
                f"data names {unknown} are not pm.Data containers of the model; its containers "
                f"are {sorted(data_vars)}"
            )
        target = model.rvs_to_values[observed]
        if target.name not in data_names or data_vars.get(target.name) is not target:
            raise ValueError(
                f"the observed variable {observed.name!r} must observe a pm.Data container "
                f"that is streamed (in data), got {target.name!r}; data names: {list(data_names)}"
            )
        if not model.value_vars:
            raise ValueError("sequential training needs free variables (weights) to filter")
        if any(v.type.dtype.startswith(("int", "uint")) for v in model.value_vars):
            raise ValueError("sequential training needs continuous free variables only")
        improper = improper_prior_names(model)
        if improper:
            raise ValueError(
                f"sequential training draws its start from the prior, but {improper} have "
                "improper priors (pm.Flat, pm.HalfFlat): give them proper ones"
            )
        mu, sigma = observed.owner.op.dist_params(observed.owner)
        _check_streamed(model, data_names, target, [mu, sigma])

        self.model = model
        self.observed_name = observed.name
        self.target_name = target.name
        self.data_names = tuple(data_names)
        self.graph = step_graph(model, model.value_vars)
        self.layout = coordinate_layout(model, model.value_vars, self.graph.initial_point)
        # Every function takes every streamed container; the Jacobian does not use the targets.
        self._unused_ok = {"on_unused_input": "ignore", **(compile_kwargs or {})}
        self._compile_kwargs = compile_kwargs
        self._data = [data_vars[name] for name in data_names]
        self._inputs = [
            pt.tensor(name=var.name, dtype=var.type.dtype, shape=(None,) * var.type.ndim)
            for var in self._data
        ]
        # The EKF needs the noise sd constant: not a function of a free variable.
        free = set(model.free_RVs)
        self.fixed_noise = not any(a in free for a in ancestors([sigma]))
        # The parameters are graphs of the random variables: make them graphs of the values.
        self._mean, self._sd = pt.broadcast_arrays(*model.replace_rvs_by_values([mu, sigma]))
        self._constrained_names, self._constrained_graphs = self._reported_variables()
        self._functions: dict[str, Function] = {}

    def _reported_variables(self) -> tuple[list[str], list]:
        model = self.model
        names, graphs = [], []
        data = set(model.data_vars)
        for rv in model.free_RVs:
            names.append(rv.name)
            graphs.append(model.replace_rvs_by_values([rv])[0])
        for det, graph in zip(
            model.deterministics, model.replace_rvs_by_values(model.deterministics), strict=True
        ):
            if not any(a in data for a in ancestors([graph])):
                names.append(det.name)
                graphs.append(graph)
        return names, graphs

    @property
    def size(self) -> int:
        """The number of state coordinates ``d``."""
        return self.layout.size

    @property
    def reported_names(self) -> list[str]:
        """Names of the variables :meth:`constrained` returns, in order."""
        return list(self._constrained_names)

    @property
    def reported_dtypes(self) -> dict[str, np.dtype]:
        """The model's dtype of each reported variable (:meth:`constrained` returns float64,
        whatever it is: results are cast back to it)."""
        return {
            name: np.dtype(graph.dtype)
            for name, graph in zip(self._constrained_names, self._constrained_graphs, strict=True)
        }

    @property
    def observed_dtype(self) -> np.dtype:
        """The model's dtype of the observed variable (predictions are cast back to it)."""
        return np.dtype(self.model[self.observed_name].dtype)

    def _with_data(self, outputs: list) -> tuple[list, pt.TensorVariable]:
        outputs, flat = self.graph.join(outputs)
        outputs = clone_replace(outputs, dict(zip(self._data, self._inputs, strict=True)))
        return outputs, flat

    @float64_internals()
    def _batched(
        self, key: str, build: Callable[[], list], data: bool = True, gradient: bool = False
    ) -> Function:
        # Graphs are built on the first call only: ``model.logp()`` alone takes ~0.1 s.
        if key not in self._functions:
            outputs = build()
            outputs, flat = self._with_data(outputs) if data else self.graph.join(outputs)
            if gradient:
                outputs = [*outputs, pt.grad(outputs[0], flat)]
            cloud = pt.matrix("particles", dtype="float64")
            outputs = vectorize_graph(outputs, replace={flat: cloud})
            inputs = [cloud, *self._inputs] if data else [cloud]
            self._functions[key] = _compile(inputs, outputs, self._unused_ok)
        return self._functions[key]

    @staticmethod
    def _cloud(particles: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(particles, dtype=np.float64)

    def _data_values(self, data: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [
            np.ascontiguousarray(value, dtype=var.type.dtype)
            for value, var in zip(data, self._data, strict=True)
        ]

    def observe(
        self, particles: np.ndarray, data: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The observation model for every particle at the rows ``data``, in one call.

        Parameters
        ----------
        particles : ndarray, shape (S, d)
        data : sequence of ndarray
            The values of the containers in ``data_names``, in that order.

        Returns
        -------
        log_likelihood : ndarray, shape (S,)
            ``log p(y | w^i)`` summed over the rows (NaN where a target is NaN).
        mean, sd : ndarray, shape (S, *observed shape)
            The observation's mean ``g(w^i, x)`` and sd for each particle.
        reported : dict of str to ndarray
            The reported variables of each particle, as :meth:`constrained` (they ride along in
            the same call).
        """
        function = self._batched(
            "observe",
            lambda: [
                self.model.logp(vars=self.model.observed_RVs),
                self._mean,
                self._sd,
                *self._constrained_graphs,
            ],
        )
        log_likelihood, mean, sd, *reported = function(
            self._cloud(particles), *self._data_values(data)
        )
        return log_likelihood, mean, sd, dict(zip(self._constrained_names, reported, strict=True))

    def log_posterior(self, particles: np.ndarray, data: Sequence[np.ndarray]) -> np.ndarray:
        """``log p(w) + log p(y | w)`` of every particle given the rows ``data``, shape ``(S,)``.

        PyMC's ``model.logp()`` with the containers set to ``data`` (Jacobians included).
        """
        function = self._batched("log_posterior", lambda: [self.model.logp()])
        return function(self._cloud(particles), *self._data_values(data))[0]

    def log_posterior_grad(
        self, particles: np.ndarray, data: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`log_posterior` and its gradient in the state coordinates: ``(S,)``, ``(S, d)``."""
        function = self._batched("log_posterior_grad", lambda: [self.model.logp()], gradient=True)
        logp, grad = function(self._cloud(particles), *self._data_values(data))
        return logp, grad

    def constrained(self, particles: np.ndarray) -> dict[str, np.ndarray]:
        """The reported variables (:attr:`reported_names`) of every particle, ``(S, *shape)``."""
        function = self._batched("constrained", lambda: self._constrained_graphs, data=False)
        values = function(self._cloud(particles))
        return dict(zip(self._constrained_names, values, strict=True))

    @float64_internals()
    def linearise(
        self, point: np.ndarray, data: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The observation mean ``g(w, x)``, its Jacobian ``∂g/∂w`` and the noise sd at ``point``.

        Returns
        -------
        mean : ndarray, shape (K,)
            The raveled observation mean over the rows ``data``.
        jacobian : ndarray, shape (K, d)
        sd : ndarray, shape (K,)
        """
        if "linearise" not in self._functions:
            (mean, sd), flat = self._with_data([self._mean.ravel(), self._sd.ravel()])
            self._functions["linearise"] = _compile(
                [flat, *self._inputs],
                [mean, jacobian(mean, flat, vectorize=True), sd],
                self._unused_ok,
            )
        function = self._functions["linearise"]
        return tuple(function(self._cloud(point), *self._data_values(data)))

    @float64_internals()
    def prior_laplace(
        self, max_iterations: int = 50, tolerance: float = 1e-8
    ) -> tuple[np.ndarray, np.ndarray]:
        """The prior's mode in the state coordinates and its inverse negative Hessian there.

        Newton's method on PyMC's prior log-density of the free variables (Jacobians included)
        from the model's initial point; exact, in one iteration, for a Gaussian prior.

        Raises
        ------
        FloatingPointError
            If the negative Hessian is not positive definite or Newton's method does not
            converge in ``max_iterations``.
        """
        if "prior" not in self._functions:
            [prior], flat = self.graph.join([self.model.logp(vars=self.model.free_RVs)])
            grad = pt.grad(prior, flat)
            # Vectorised, not PyTensor's scan: a scan takes minutes to compile with Numba.
            self._functions["prior"] = _compile(
                [flat], [grad, jacobian(grad, flat, vectorize=True)], self._compile_kwargs
            )
        function = self._functions["prior"]
        point = self.graph.start.copy()
        for _ in range(max_iterations):
            grad, hess = function(point)
            try:
                cholesky = np.linalg.cholesky(-hess)
            except np.linalg.LinAlgError:
                raise FloatingPointError(
                    "the prior's negative Hessian is not positive definite at "
                    f"{point}: the EKF needs a prior with a single mode"
                ) from None
            step = np.linalg.solve(cholesky.T, np.linalg.solve(cholesky, grad))
            point = point + step
            if np.max(np.abs(step)) < tolerance:
                covariance = np.linalg.inv(-function(point)[1])
                return point, 0.5 * (covariance + covariance.T)
        raise FloatingPointError(
            f"Newton's method did not find the prior's mode in {max_iterations} iterations"
        )

    def draw_prior(self, draws: int, rng: np.random.Generator) -> np.ndarray:
        """``draws`` independent draws of the prior in the state coordinates, ``(draws, d)``."""
        model = self.model
        values = []
        for value_var in self.graph.value_vars:
            rv = model.values_to_rvs[value_var]
            transform = model.rvs_to_transforms.get(rv)
            values.append(rv if transform is None else transform.forward(rv, *rv.owner.inputs))
        draws_list = pm.draw(values, draws=draws, random_seed=rng)
        if len(values) == 1:
            draws_list = [draws_list]
        return np.concatenate([np.reshape(d, (draws, -1)) for d in draws_list], axis=1).astype(
            np.float64
        )
