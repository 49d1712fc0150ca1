"""Model → compiled functions: the one bridge between a PyMC model and the numerical cores.

Every step method compiles the model here and nowhere else, once, when it is built. A step's
:class:`StepGraph` joins its value variables into one raveled vector (the other free variables of
the model become shared variables, which PyMC's ``ArrayStepShared`` sets before each step); the
functions compiled from it are

* :func:`compile_logp_dlogp`: log-density and gradient (the dynamics);
* :func:`compile_prior_likelihood`: prior and likelihood with their gradients, apart (tempering);
* :func:`compile_batched_logp`: the log-density at each row of a matrix of points (ELBOs);
* :class:`LineEvaluator`: the log-density at a point and along one coordinate (SFP).

They take and return float64 whatever PyTensor's ``floatX``: a float32 model evaluates in
float32 between casts (:meth:`StepGraph.join`).

Each compiled function is called once at the starting point as soon as it is built
(:func:`warm_up`): PyTensor's Numba backend generates machine code on a function's first call, and
doing it in the process that builds the step lets forked chain processes inherit it. Random
generators in the graph (``pm.Minibatch``) are found by :func:`random_generators` and re-seeded
per chain by :func:`reseed`.

SFP works on *sampling coordinates*. A coordinate is PyMC's
unconstrained value, except for variables with an interval transform and constant finite bounds
(e.g. ``pm.Uniform(-1, 1)``): those are sampled on their own scale, so that the box is exactly the
support and nothing is truncated. The log-density here is the density of the sampling
coordinates: PyMC's ``model.logp()`` (Jacobian included) minus the interval Jacobians.

"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.logprob.transforms import IntervalTransform
from pymc.pytensorf import compile as pm_compile
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pytensor.compile.executor import Function
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.type import RandomGeneratorType

__all__ = [
    "CoordinateLayout",
    "LineEvaluator",
    "StepGraph",
    "compile_batched_logp",
    "compile_logp_dlogp",
    "compile_prior_likelihood",
    "constant_value",
    "coordinate_layout",
    "likelihood_terms",
    "random_generators",
    "reseed",
    "step_graph",
    "warm_up",
]


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

    def join(self, outputs: Sequence) -> tuple[list, pt.TensorVariable]:
        """``outputs`` as graphs of one raveled float64 vector of the step's variables.

        The numerical cores compute in float64 whatever PyTensor's ``floatX``. A float32 model
        (``floatX="float32"``) still evaluates in float32: its joined vector is cast down on
        entry (and the compiled functions cast their outputs up on exit, see :func:`_compile`).
        """
        outputs, flat = join_nonshared_inputs(
            point=self.initial_point,
            outputs=list(outputs),
            inputs=self.value_vars,
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
    start = np.concatenate([np.ravel(initial_point[v.name]) for v in value_vars]).astype(float)
    shared = make_shared_replacements(initial_point, value_vars, model)
    return StepGraph(model, list(value_vars), initial_point, shared, start)


def warm_up(function: Callable, *args: Any) -> None:
    """Call a compiled function once, so that its machine code exists before chains fork."""
    function(*args)


def _compile(inputs: list, outputs: list, compile_kwargs: dict | None) -> Function:
    # float64 out whatever floatX (a no-op for a float64 model).
    outputs = [pt.cast(output, "float64") for output in outputs]
    function = pm_compile(inputs, outputs, **dict(compile_kwargs or {}))
    function.trust_input = True
    return function


def compile_logp_dlogp(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """``x ↦ (log p(x), ∇ log p(x))`` of the model (PyMC's ``model.logp()``, Jacobians included).

    ``x`` must be a contiguous float64 vector. Warmed up at ``graph.start``.
    """
    [logp], flat = graph.join([graph.model.logp()])
    function = _compile([flat], [logp, pt.grad(logp, flat)], compile_kwargs)
    warm_up(function, graph.start)

    def logp_dlogp(x: np.ndarray) -> tuple[float, np.ndarray]:
        logp, grad = function(x)
        return float(logp), grad

    return logp_dlogp


def compile_batched_logp(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """``X ↦ log p(X[k])`` for each row ``X[k]`` of a float64 matrix of raveled points.

    One vectorised evaluation of the model's log-density (Jacobians included) over the rows, for
    Monte Carlo estimates that need many points at once (variational ELBOs). Warmed up at
    ``graph.start``.
    """
    [logp], flat = graph.join([graph.model.logp()])
    rows = pt.matrix("rows", dtype="float64", shape=(None, flat.type.shape[0]))
    function = _compile([rows], [vectorize_graph(logp, replace={flat: rows})], compile_kwargs)
    warm_up(function, graph.start[None, :])

    def batched_logp(x: np.ndarray) -> np.ndarray:
        (logp,) = function(np.ascontiguousarray(x, dtype=np.float64))
        return logp

    return batched_logp


def likelihood_terms(model: pm.Model) -> list:
    """The terms of the model's likelihood: its observed variables and ``pm.Potential`` terms."""
    return [*model.observed_RVs, *model.potentials]


def compile_prior_likelihood(
    graph: StepGraph, compile_kwargs: dict | None = None
) -> Callable[[np.ndarray], tuple[float, float, np.ndarray, np.ndarray]]:
    """``x ↦ (prior, likelihood, ∇ prior, ∇ likelihood)``, for tempering the likelihood.

    The prior is the log-density of the free variables (Jacobians included), the likelihood that
    of the observed variables and ``pm.Potential`` terms (:func:`likelihood_terms`); their sum is
    ``model.logp()``. Warmed up at ``graph.start``.
    """
    model = graph.model
    (prior, likelihood), flat = graph.join(
        [model.logp(vars=model.free_RVs), model.logp(vars=likelihood_terms(model))]
    )
    function = _compile(
        [flat],
        [prior, likelihood, pt.grad(prior, flat), pt.grad(likelihood, flat)],
        compile_kwargs,
    )
    warm_up(function, graph.start)

    def prior_likelihood(x: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
        prior, likelihood, d_prior, d_likelihood = function(x)
        return float(prior), float(likelihood), d_prior, d_likelihood

    return prior_likelihood


def random_generators(graph: StepGraph) -> list[SharedVariable]:
    """The random generators the model's log-density draws from (``pm.Minibatch`` indices).

    A log-density that depends on them is a random estimate: each call draws a new minibatch.
    """
    return [
        var
        for var in ancestors([graph.model.logp()])
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

    def describe(self, index: int) -> str:
        """Human-readable name of coordinate ``index``, e.g. ``w[2, 1]``."""
        for name, shape, slc in zip(self.rv_names, self.shapes, self.slices, strict=True):
            if slc.start <= index < slc.stop:
                if not shape:
                    return name
                position = np.unravel_index(index - slc.start, shape)
                return f"{name}[{', '.join(str(int(p)) for p in position)}]"
        raise IndexError(index)

    def to_value(self, x: np.ndarray) -> np.ndarray:
        """Sampling coordinates → PyMC's unconstrained values (log-odds for intervals)."""
        q = np.array(x, dtype=float, copy=True)
        m = self.interval
        q[m] = np.log(x[m] - self.lower[m]) - np.log(self.upper[m] - x[m])
        return q

    def from_value(self, q: np.ndarray) -> np.ndarray:
        """PyMC's unconstrained values → sampling coordinates."""
        x = np.array(q, dtype=float, copy=True)
        m = self.interval
        x[m] = self.lower[m] + (self.upper[m] - self.lower[m]) / (1.0 + np.exp(-q[m]))
        # Keep interval coordinates strictly inside the support, where the density is defined.
        x[m] = np.clip(x[m], *_open_interval(self.lower[m], self.upper[m]))
        return x

    def log_jacobian(self, x: np.ndarray) -> float:
        """``log |dx/dq|`` summed over interval coordinates (to report PyMC's ``model_logp``)."""
        m = self.interval
        lo, hi = self.lower[m], self.upper[m]
        return float(np.sum(np.log(x[m] - lo) + np.log(hi - x[m]) - np.log(hi - lo)))


def _open_interval(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    margin = 1e-12 * (upper - lower)
    return lower + margin, upper - margin


def constant_value(var, model: pm.Model) -> np.ndarray | None:
    """The value of ``var`` if it does not depend on any model variable, else ``None``."""
    if var is None:
        return None
    model_vars = set(model.free_RVs) | set(model.value_vars) | set(model.observed_RVs)
    if any(a in model_vars for a in ancestors([var])):
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


class LineEvaluator:
    """Compiled log-density of the sampling coordinates, at a point or along one coordinate.

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
        [logp_q], q = graph.join([graph.model.logp()])
        x = pt.vector("sampling_coordinates", dtype="float64")
        logp_x = self._sampling_space_logp(logp_q, q, x, layout)
        point_outputs = [logp_x]
        if gradient:
            point_outputs.append(pt.grad(logp_x, x))
        self._point = _compile([x], point_outputs, compile_kwargs)
        x0 = layout.from_value(graph.start)
        warm_up(self._point, x0)

        if batched:
            index = pt.scalar("index", dtype="int64")
            values = pt.vector("values", dtype="float64")
            rows = pt.set_subtensor(
                pt.repeat(x[None, :], values.shape[0], axis=0)[:, index], values
            )
            batched_outputs = vectorize_graph(point_outputs, replace={x: rows})
            if gradient:
                batched_outputs = [batched_outputs[0], batched_outputs[1][:, index]]
            self._along = _compile([x, index, values], batched_outputs, compile_kwargs)
            warm_up(self._along, x0, np.asarray(0, dtype=np.int64), np.full(2, x0[0]))

    @staticmethod
    def _sampling_space_logp(logp_q, q, x, layout: CoordinateLayout):
        m = layout.interval
        if not m.any():
            return clone_replace(logp_q, {q: x})
        lo = pt.constant(np.where(m, layout.lower, 0.0))
        hi = pt.constant(np.where(m, layout.upper, 1.0))
        mask = pt.constant(m)
        log_lower, log_upper = pt.log(x - lo), pt.log(hi - x)
        q_of_x = pt.where(mask, log_lower - log_upper, x)
        log_jac = pt.sum(pt.where(mask, log_lower + log_upper - pt.log(hi - lo), 0.0))
        return clone_replace(logp_q, {q: q_of_x}) - log_jac

    def logp(self, x: np.ndarray) -> float:
        """Log-density at one point of sampling coordinates."""
        return float(self._point(x)[0])

    def along(
        self, x: np.ndarray, index: int, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Log-density (and its derivative in coordinate ``index``) with ``x[index] = values``.

        Returns
        -------
        logp : ndarray, shape (G,)
        dlogp : ndarray, shape (G,) or None
            ``None`` unless ``gradient=True``.
        """
        if self.batched:
            out = self._along(x, np.asarray(index, dtype=np.int64), values)
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
