"""``SFPStep``: Stationary Fokker–Planck sampling (Berrones 2009) as a PyMC step method.

A Gibbs-like sweep: for each scalar coordinate, the others fixed, the 1-D conditional is obtained
by solving the stationary Fokker–Planck equation on a box (:mod:`pymc_sfp.core.fokker_planck`)
and a new value is drawn from it. With ``correct=True`` (default) the draw is an independence
proposal for that coordinate, accepted or rejected with the exact log-density ratio
(Metropolis-within-Gibbs), so the chain targets the posterior exactly whatever the resolution
``L``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numba
import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars, StatsType
from pymc.exceptions import SamplingError
from pymc.logprob.transforms import IntervalTransform, LogTransform
from pymc.stats.convergence import SamplerWarning, WarningType
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.vartypes import continuous_types

from pymc_sfp._validation import (
    check_bool,
    check_int_at_least,
    check_positive_finite,
)
from pymc_sfp.compile import (
    JittedLine,
    LineEvaluator,
    constant_value,
    coordinate_layout,
    garbage_collector_paused,
    random_generators,
    step_graph,
)
from pymc_sfp.core.compiled_sweep import CompiledSweep, ModelCallError
from pymc_sfp.core.fokker_planck import CollocationBasis
from pymc_sfp.core.sfp import (
    BoxTuning,
    SweepInfo,
    SweepSettings,
    SweepState,
    draw_uniforms,
    probe_line,
    refit_boxes,
    sweep,
    track_boxes,
)
from pymc_sfp.marginals import conditional_stats, declare_conditional_stats
from pymc_sfp.step_methods._common import (
    ProgressField,
    check_not_empty,
    continuous_value_vars,
    progressbar_config,
    progressbar_updates,
)

__all__ = ["SFPStep"]

_PROGRESS_FIELDS: tuple[ProgressField, ...] = (
    ("accept", "Accept", ".3f", 1.0),
    ("n_invalid", "Invalid", "d", 0),
    ("n_edge_hits", "Edge hits", "d", 0),
)

_log = logging.getLogger("pymc_sfp")

#: Half-width of an automatic box around the chain's starting value (unconstrained units).
AUTO_HALFWIDTH = 10.0
#: An automatic box wider than this while tuning: the mass never stopped at an edge, however far
#: the box moved out (it triples on each edge hit), so the posterior is taken to be improper
#: along that coordinate; left to grow, the box overflows the arithmetic of the sweep.
IMPROPER_BOX_WIDTH = 1e50
#: Sweeps after tuning without any accepted coordinate after which the chain counts as stuck.
STUCK_SWEEPS = 50
#: Tuning draws at which automatic boxes are refitted to the envelope (then every doubling).
FIRST_CHECKPOINT = 25


@dataclass_state
class SFPStepState(StepMethodState):
    tune: bool
    box_lower: np.ndarray
    box_upper: np.ndarray
    envelope_lower: np.ndarray
    envelope_upper: np.ndarray
    tuning_draws: int
    next_checkpoint: int
    warned: set
    sweeps_without_acceptance: int


def _marginal_map(transform: Any, is_interval: bool) -> tuple[str, bool | None]:
    """How a variable's sampling coordinate maps to its constrained scale for marginals.

    Returns the name under which its marginal is stored, and whether the map is ``exp``
    (``False``: the identity), or ``None`` when the marginal stays on the sampling
    (unconstrained) scale.
    """
    if transform is None or is_interval:
        return "rv", False
    if isinstance(transform, LogTransform):
        return "rv", True
    return "value", None


class SFPStep(ArrayStepShared):
    r"""Stationary Fokker–Planck sampler (Berrones 2009, §1), a PyMC step method.

    Each sweep visits every scalar coordinate of the step's variables. With the other coordinates
    fixed, the conditional CDF on a box ``[a, b]`` solves (Eq. 4)

    .. math:: y'' + \frac{1}{D} \frac{\partial V}{\partial x_n} y' = 0,\quad y(a)=0,\ y(b)=1,

    with ``V = -logp`` (PyMC's log-density including the transform Jacobians). A new value is drawn
    by inverting the CDF (a lookup table) before moving to the next coordinate.

    Parameters
    ----------
    vars : list, optional
        Variables to sample: random variables, value variables or their names (default: every
        free variable of the model; a discrete one is an error, to be assigned to another step
        in a ``CompoundStep``); together they need at least one element (a lone
        shape-``(0,)`` variable is refused).
    L : int, default 50
        Resolution: the number of sine basis functions (``solver="collocation"``, Eq. 11) or of
        grid points (``solver="quadrature"``). The quadrature grid is then refined where the
        conditional has mass and the grid does not resolve it, so ``L`` is its coarsest
        resolution; cost per coordinate is about ``L`` log-density evaluations, plus what
        refinement adds (at the default about 52 in all on Gaussian-like conditionals and 60 on
        network weights; the paper used ``L = 100``).
    D : float, default 1.0
        Diffusion constant: the chain targets ``exp(logp / D)``; ``D = 1`` is the posterior and
        ``D > 1`` flattens it.
    solver : {"quadrature", "collocation"}, default "quadrature"
        How Eq. 4 is solved. ``"collocation"`` is the paper's method (Eq. 4, 5, 11): derivatives of
        the log-density at ``L - 1`` interior points and an ``L × L`` solve. ``"quadrature"`` solves
        the same equation through its integrating factor ``y' ∝ exp(-V / D)``: log-densities (no
        gradient) on ``L`` grid points, interpolated piecewise-exponentially and integrated exactly.
        It is cheaper, always a valid CDF, not fooled by deep barriers between modes, and works
        when the gradient is zero almost everywhere (step-function likelihoods).
    bounds : pair, or dict of pairs, optional
        The box of each coordinate. A pair ``(lower, upper)`` of scalars or arrays broadcastable to
        a variable's shape applies to every variable; a dict maps variable names to such pairs.
        Bounds are on the scale the coordinate is sampled on: the variable's own scale for
        untransformed variables and for interval-transformed ones with constant finite bounds
        (``pm.Uniform``, whose box is its support unless narrowed here; a ``pm.Data`` bound is not
        constant), PyMC's unconstrained scale otherwise (e.g. ``log σ`` for a ``pm.HalfNormal``,
        the log-odds for a ``pm.Beta``). Coordinates without a given box get an automatic one
        (see Notes).
    order : {"sequential", "random"}, default "sequential"
        Coordinate order of each sweep: fixed, or a fresh random permutation.
    correct : bool, default True
        Accept or reject each coordinate's draw with the exact log-density ratio, treating the
        SFP conditional as an independence proposal, so that the chain targets the posterior
        (restricted to the box) exactly for any ``L``. ``False`` is the paper's uncorrected sampler,
        whose accuracy depends on ``L``.
    batched : bool, default True
        Evaluate the points along a coordinate in one call of a vectorised compiled function
        (``True``) or in a loop over points. Batching was 13–19× faster per sweep on every model
        measured, up to a 2-16-2 network on 200 points (``benchmarks/RESULTS.md``).
    compiled : bool, optional
        Run each sweep as one call of Numba machine code
        (:func:`pymc_sfp.core.compiled_sweep.compiled_sweep`: the same draws as the NumPy sweep,
        without its Python overhead per coordinate). Default: wherever it is supported (see
        Notes); ``True`` raises where it is not, ``False`` always uses the NumPy sweep.
    marginal_points : int, optional
        Number of points, spread evenly over each box, at which each coordinate's conditional
        CDF is recorded per draw, in the sample stats ``sfp_cdf__<name>`` (with the grid's box in
        ``sfp_box__<name>``), for :func:`pymc_sfp.sfp_marginals`. Default: ``2 L − 1`` (99 at
        ``L = 50``), the grid's nodes and its cells' middles, for ``L < 100``; ``L``, its nodes,
        from ``L = 100`` on: at least 100 points, each recorded at the cost of one ``exp`` per
        cell at most. Other numbers cost two ``expm1`` per point (at 100 points and ``L = 50``,
        about 2 µs per coordinate per draw). ``0`` records nothing (memory is
        ``4 × marginal_points + 32`` bytes per coordinate per draw).
    model : pm.Model, optional
    rng : RandomGenerator, optional
    initial_point : dict, optional
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile`.
    blocked : bool, default True

    Notes
    -----
    *Boxes.* Untransformed and interval-bounded variables sample on their own scale; the latter's
    box is their support, so nothing is truncated. Other coordinates without a given box start on
    ``x0 ± 10`` around the chain's starting value (unconstrained units). During tuning, an edge at
    which the conditional mass piles up (more than 0.1 % of it within 1 % of the width from the
    edge) moves out by one box width, and at tuning draws 25, 50, 100, … the box is refitted to
    the envelope of the conditionals' ``[1e-6, 1 - 1e-6]`` quantiles seen since the last refit,
    widened by half its width on each side. An automatic box that grows past ``1e50`` wide while
    tuning (the mass never stops at an edge: an improper posterior) stops the run with a
    ``SamplingError`` naming the coordinate. At the end of tuning the box is never narrowed; it is
    then frozen, logged, and readable from the ``sfp_box__*`` stats. The chain targets the
    posterior restricted to the box; edge hits after tuning are counted and warned about.

    Before each refit during tuning, an automatic box's line is probed on a grid nine times as
    wide (:func:`pymc_sfp.core.sfp.probe_line`), so that it grows toward mass it has not seen.

    *Resolution.* A quadrature grid is refined where the conditional has mass but the grid does
    not resolve it, at the edges of hard constraints, and, on a line the grid resolves poorly
    (a box much wider than the conditional), where the conditional has mass and is curved
    enough for the interpolation to be off by more than 0.03 nats
    (:func:`pymc_sfp.core.sfp.resolve_line`); what stays under-resolved is counted in
    ``n_unresolved``. A collocation ``ŷ`` that is not monotone or leaves ``[0, 1]`` (``L`` too
    small for ``D``) is counted in ``n_invalid`` and replaced, for that draw, by the refined
    quadrature conditional from the log-densities at the same points; so is, without being
    counted, the ``ŷ`` of a line on which a log-density is not finite (a hard constraint or a NaN
    hole), which the gradients that collocation solves with cannot see. Non-finite log-densities
    count as zero density (``n_nonfinite``); non-finite proposals are rejected; a line with no
    finite log-density leaves its coordinate in place (``n_empty``).

    *Exactness.* With ``correct=True`` the chain converges to the posterior restricted to the box
    for every ``L``, wherever the density is positive somewhere on each coordinate's box (hard
    constraints and NaN holes included); poor resolution costs mixing, not correctness.

    *Diagnostics.* The first warning of each kind per chain travels as PyMC's ``warning`` stat
    and is logged by the main process. A start outside a variable's support raises
    ``SamplingError``.

    *Cost.* One sweep costs ``N (L + 1)`` log-density evaluations with ``correct=True`` (grid plus
    the proposal), plus one for the starting point, plus refinement where it is needed.

    *Compiled sweep.* By default a sweep runs in machine code: the model's log-density as
    PyTensor's Numba backend compiled it, called from a Numba kernel that does the grid, the
    refinement, the quadrature conditional, the draw and the correction. It makes the same draws
    as the NumPy sweep from the same random numbers (up to the last bits of floating point). It
    falls back to the NumPy sweep, with the reason in :attr:`fallback_reason` (logged at INFO),
    for ``solver="collocation"``, ``batched=False``, a model not compiled by the Numba backend
    (``compile_kwargs`` with another mode), or a model the kernel cannot be compiled for.
    :attr:`kernel` says which runs (``"numba"`` or ``"numpy"``).

    *Models.* Models built with ``floatX="float32"`` are sampled as PyMC's steps sample them:
    the model evaluates in float32, the sweep runs in float64, the draws come back float32. In a
    ``CompoundStep`` the step goes with any of PyMC's steps, in any position.

    Raises
    ------
    TypeError
        For an unknown keyword, a discrete variable, or an argument of the wrong kind (``D``
        given as a string or a ``bool``).
    ValueError
        For an argument out of its range (named in the message), bad ``bounds``, a start
        outside a given box, variables with no elements, or ``pm.Minibatch`` data (a random
        log-density).

    References
    ----------
    .. [1] Berrones, A. (2009). Bayesian inference based on stationary Fokker–Planck sampling.
       Neural Computation 22(6), 1573–1596.
    """

    name = "sfp"
    default_blocked = True
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "n_invalid": (np.int64, []),
        "n_empty": (np.int64, []),
        "n_unresolved": (np.int64, []),
        "n_nonfinite": (np.int64, []),
        "n_logp_evals": (np.int64, []),
        "n_edge_hits": (np.int64, []),
        "model_logp": (np.float64, []),
        "warning": (SamplerWarning, None),
    }
    _state_class = SFPStepState

    @garbage_collector_paused()
    def __init__(
        self,
        vars: Sequence | None = None,
        *,
        L: int = 50,
        D: float = 1.0,
        solver: Literal["quadrature", "collocation"] = "quadrature",
        bounds: Any = None,
        order: Literal["sequential", "random"] = "sequential",
        correct: bool = True,
        batched: bool = True,
        compiled: bool | None = None,
        marginal_points: int | None = None,
        model: pm.Model | None = None,
        rng: Any = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        **kwargs: Any,
    ):
        model = pm.modelcontext(model)
        L = check_int_at_least(L, 3, "L")
        D = check_positive_finite(D, "D")
        if solver not in ("quadrature", "collocation"):
            raise ValueError(f"solver must be 'quadrature' or 'collocation', got {solver!r}")
        if order not in ("sequential", "random"):
            raise ValueError(f"order must be 'sequential' or 'random', got {order!r}")
        requirement = "marginal_points must be None, 0 or an integer >= 2"
        if marginal_points is None:
            marginal_points = L if L >= 100 else 2 * L - 1
        marginal_points = check_int_at_least(marginal_points, 0, "marginal_points", requirement)
        if marginal_points == 1:
            raise ValueError(f"{requirement}, got 1")
        if compiled is not None:
            compiled = check_bool(compiled, "compiled")
        if kwargs:
            raise TypeError(f"SFPStep got unexpected keyword arguments: {sorted(kwargs)}")

        value_vars = continuous_value_vars(model, vars, "SFPStep")
        graph = step_graph(model, value_vars, initial_point)
        check_not_empty(graph, "SFPStep")
        if random_generators(graph):
            raise ValueError(
                "SFPStep does not take pm.Minibatch data: its conditionals and their Metropolis "
                "correction need the log-density of all the data, not a random one; for "
                "minibatches use StochasticDynamics(correct=False)"
            )
        initial_point = graph.initial_point

        self.L = int(L)
        self.D = float(D)
        self.solver = solver
        self.order = order
        self.correct = check_bool(correct, "correct")
        self.marginal_points = int(marginal_points)
        self.layout = coordinate_layout(model, value_vars, initial_point)
        self._user_box = self._parse_bounds(bounds)
        self._auto = ~self.layout.interval & ~self._user_box
        #: Whether a given box is narrower than the support: the step then samples the target
        #: restricted to it, and a state outside it (e.g. a prior draw) is an error.
        self.restricts_support = bool(
            np.any(
                self._user_box
                & (
                    (self._initial_lower > self.layout.lower)
                    | (self._initial_upper < self.layout.upper)
                )
            )
        )
        x0 = self.layout.from_value(graph.start)
        self._check_inside(x0, self._initial_lower, self._initial_upper, ~self._auto)
        self.evaluator = LineEvaluator(
            graph,
            self.layout,
            gradient=solver == "collocation",
            batched=check_bool(batched, "batched"),
            compile_kwargs=compile_kwargs,
        )
        basis = CollocationBasis(self.L) if solver == "collocation" else None
        self._settings = SweepSettings(
            unit_nodes=np.linspace(0.0, 1.0, self.L) if basis is None else basis.collocation_points,
            basis=basis,
            D=self.D,
            correct=self.correct,
            interval=self.layout.interval,
            watch_edges=self._user_box | self._auto,
            report_points=np.linspace(0.0, 1.0, self.marginal_points),
        )
        self._marginal_stats = self._declare_marginal_stats(model, value_vars)
        self._compiled: tuple[CompiledSweep, JittedLine] | None = None
        #: Why the NumPy sweep runs instead of the compiled one (``None`` when compiled).
        self.fallback_reason = self._compiled_sweep_unavailable(compiled, x0)
        #: The sweep that runs: ``"numba"`` (compiled) or ``"numpy"`` (the reference).
        self.kernel = "numpy" if self.fallback_reason else "numba"
        if compiled and self.fallback_reason:
            raise ValueError(
                f"compiled=True, but the sweep cannot be compiled: {self.fallback_reason}"
            )
        if self.fallback_reason:
            _log.info("SFPStep runs the NumPy sweep: %s", self.fallback_reason)
        self.reset_tuning()
        super().__init__(value_vars, graph.shared, blocked=blocked, rng=rng)

    # ------------------------------------------------------------------ set-up helpers
    def _parse_bounds(self, bounds: Any) -> np.ndarray:
        """Fill ``self._initial_lower/upper`` from ``bounds``; return which coordinates it set."""
        layout = self.layout
        lower, upper = layout.lower.copy(), layout.upper.copy()
        given = np.zeros(layout.size, dtype=bool)
        if bounds is None:
            per_var: Mapping[str, Any] = {}
        elif isinstance(bounds, Mapping):
            known = set(layout.rv_names) | set(layout.names)
            unknown = sorted(set(bounds) - known)
            if unknown:
                raise ValueError(
                    f"bounds names unknown variables {unknown}; the step's variables are "
                    f"{list(layout.rv_names)}"
                )
            per_var = bounds
        else:
            per_var = dict.fromkeys(layout.rv_names, bounds)
        for name, rv_name, shape, slc in zip(
            layout.names, layout.rv_names, layout.shapes, layout.slices, strict=True
        ):
            pair = per_var.get(rv_name, per_var.get(name))
            if pair is None:
                continue
            try:
                lo_given, hi_given = pair
                lo = np.broadcast_to(np.asarray(lo_given, dtype=float), shape).ravel()
                hi = np.broadcast_to(np.asarray(hi_given, dtype=float), shape).ravel()
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"bounds for {rv_name!r} must be a pair (lower, upper) of scalars or arrays "
                    f"broadcastable to its shape {shape}{layout.scale(slc.start)}; got {pair!r}"
                ) from err
            for j in range(len(lo)):
                label = layout.describe(slc.start + j)
                if not (np.isfinite(lo[j]) and np.isfinite(hi[j]) and lo[j] < hi[j]):
                    raise ValueError(
                        f"bounds for {label}: need finite lower < upper, got ({lo[j]}, {hi[j]})"
                    )
                if layout.interval[slc.start + j] and (
                    lo[j] < layout.lower[slc.start + j] or hi[j] > layout.upper[slc.start + j]
                ):
                    raise ValueError(
                        f"bounds for {label} ({lo[j]}, {hi[j]}) leave its support "
                        f"[{layout.lower[slc.start + j]}, {layout.upper[slc.start + j]}]"
                    )
            lower[slc], upper[slc], given[slc] = lo, hi, True
        self._initial_lower, self._initial_upper = lower, upper
        return given

    def _check_inside(self, x: np.ndarray, lower: np.ndarray, upper: np.ndarray, mask) -> None:
        outside = np.flatnonzero(mask & ((x < lower) | (x > upper)))
        if outside.size:
            j = int(outside[0])
            raise ValueError(
                f"the initial value of {self.layout.describe(j)}{self.layout.scale(j)} is "
                f"{x[j]:.6g}, outside its box [{lower[j]:.6g}, {upper[j]:.6g}]; widen `bounds` or "
                "pass an initial point inside it"
            )

    def _declare_marginal_stats(self, model: pm.Model, value_vars: list) -> list:
        """Per-variable stats carrying conditional CDFs, so marginals survive multiprocessing."""
        if not self.marginal_points:
            return []
        entries = []
        stats = dict(self.stats_dtypes_shapes)
        for value_var, shape, slc in zip(
            value_vars, self.layout.shapes, self.layout.slices, strict=True
        ):
            rv = model.values_to_rvs[value_var]
            transform = model.rvs_to_transforms.get(rv)
            shift = None
            if isinstance(transform, IntervalTransform) and not self.layout.interval[slc].all():
                a, _, lower_bounded, upper_bounded = transform.get_a_and_b(rv.owner.inputs)
                shift = constant_value(a, model)
                if lower_bounded and not upper_bounded and shift is not None:
                    label, on_log_scale = "rv", True
                else:
                    label, on_log_scale = "value", None
            else:
                label, on_log_scale = _marginal_map(
                    transform, bool(self.layout.interval[slc].all())
                )
            # Each coordinate's recorded box (marginals.STAT_PREFIX_BOX), with its (shift, log);
            # each draw fills in (lower, upper).
            box_template = np.zeros((slc.stop - slc.start, 4))
            if label == "rv":
                box_template[:, 2] = np.broadcast_to(
                    shift if shift is not None else 0.0, shape
                ).ravel()
                box_template[:, 3] = on_log_scale
            name = rv.name if label == "rv" else value_var.name
            stats |= declare_conditional_stats(name, shape, self.marginal_points)
            entries.append((name, shape, slc, box_template))
        self.stats_dtypes_shapes = stats
        self.stats_dtypes = [{k: dtype for k, (dtype, _) in stats.items()}]
        return entries

    def _compiled_sweep_unavailable(self, compiled: bool | None, x0: np.ndarray) -> str | None:
        """Why the compiled sweep cannot run (``None`` when it can); compiles it otherwise, with
        a sweep over no coordinate, so that forked chains inherit the machine code."""
        if compiled is False:
            return "compiled=False"
        if self.solver == "collocation":
            return "solver='collocation' (only the quadrature solver is compiled)"
        try:
            kernel, jitted = self._compiled_sweep()
            point_extra, along_extra = jitted.extras(x0)
            kernel.sweep(
                SweepState(x0, 0.0),
                x0 - 1.0,
                x0 + 1.0,
                point_extra,
                along_extra,
                draw_uniforms(np.random.default_rng(0), self.layout.size),
                order=np.empty(0, dtype=np.int64),
            )
        except NotImplementedError as err:
            return str(err)
        except numba.core.errors.NumbaError as err:
            return f"Numba cannot compile the sweep for this model: {str(err).splitlines()[0]}"
        return None

    def _compiled_sweep(self) -> tuple[CompiledSweep, JittedLine]:
        """The compiled sweep of this step's model and settings, made once per compilation of
        the model's line (:meth:`LineEvaluator.jitted`, made again in a worker process), and
        that line."""
        jitted = self.evaluator.jitted()
        if self._compiled is None or self._compiled[1] is not jitted:
            kernel = CompiledSweep(
                self._settings,
                jitted.point,
                jitted.along,
                relative=jitted.relative,
                line_starts=jitted.along_starts,
            )
            self._compiled = (kernel, jitted)
        return self._compiled

    def __getstate__(self) -> dict:
        # Machine code does not travel to worker processes; the line is compiled again there.
        return self.__dict__ | {"_compiled": None}

    # ------------------------------------------------------------------ PyMC hooks
    def setup_chain(self, rng, tune: int, draws: int) -> None:
        super().setup_chain(rng, tune, draws)
        # PyMC's parallel sampling sends the step as it is, without ``reset_tuning``: a step
        # reused after another run would start from that run's boxes.
        self.reset_tuning()

    def reset_tuning(self) -> None:
        n = self.layout.size
        # Automatic boxes are NaN until the chain's first draw centres them on its start.
        self.box_lower = np.where(self._auto, np.nan, self._initial_lower)
        self.box_upper = np.where(self._auto, np.nan, self._initial_upper)
        self.envelope_lower = np.full(n, np.inf)
        self.envelope_upper = np.full(n, -np.inf)
        self.tuning_draws = 0
        self.next_checkpoint = FIRST_CHECKPOINT
        self.warned = set()
        self.sweeps_without_acceptance = 0
        self.tune = True

    def stop_tuning(self) -> None:
        if self.tune and self._auto.any():
            self._set_boxes(refit_boxes(self._boxes(), self._auto, allow_shrink=False))
            auto = np.flatnonzero(self._auto)
            _log.info(
                "SFPStep boxes after tuning: %s",
                ", ".join(
                    f"{self.layout.describe(j)} [{self.box_lower[j]:.4g}, {self.box_upper[j]:.4g}]"
                    for j in auto[:20]
                )
                + (" …" if auto.size > 20 else ""),
            )
        self.tune = False

    @staticmethod
    def competence(var, has_grad):
        if var.dtype in continuous_types:
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        return progressbar_config(_PROGRESS_FIELDS, n_chains)

    @staticmethod
    def _make_progressbar_update_functions():
        return progressbar_updates(_PROGRESS_FIELDS)

    # ------------------------------------------------------------------ sampling
    def _boxes(self) -> BoxTuning:
        return BoxTuning(self.box_lower, self.box_upper, self.envelope_lower, self.envelope_upper)

    def _set_boxes(self, boxes: BoxTuning) -> None:
        self.box_lower, self.box_upper, self.envelope_lower, self.envelope_upper = boxes

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, StatsType]:
        layout = self.layout
        x = layout.from_value(q0.data)
        # A finite start inside every box passes this one test (NaN fails it: a non-finite
        # start, and an automatic box that no draw has centred yet).
        admitted = not ((x >= self.box_lower) & (x <= self.box_upper)).all()
        if admitted:
            self._admit_start(x)
        # NaN: the sweep evaluates the log-density at the start itself (in the compiled sweep
        # that costs no call from Python).
        state = SweepState(x, np.nan)
        order = self.rng.permutation(layout.size) if self.order == "random" else None
        track = self._auto if self.tune else None
        compiled = self.kernel == "numba"
        # Drawn here, so that a sweep the NumPy kernel makes again after the compiled one failed
        # makes the same draws as a step with compiled=False.
        uniforms = draw_uniforms(self.rng, layout.size)
        if compiled:
            kernel, jitted = self._compiled_sweep()
            point_extra, along_extra = jitted.extras(state.position)
            try:
                state, info = kernel.sweep(
                    state,
                    self.box_lower,
                    self.box_upper,
                    point_extra,
                    along_extra,
                    uniforms,
                    order=order,
                    track_quantiles=track,
                )
            except ModelCallError:
                # Numba printed the model's exception; the NumPy sweep calls the model from
                # Python, so it raises it to the user, or makes this sweep if it does not recur.
                compiled = False
        if not compiled:
            state, info = sweep(
                state,
                self.box_lower,
                self.box_upper,
                self._settings,
                self.evaluator.along,
                self.evaluator.logp,
                self.rng,
                order=order,
                track_quantiles=track,
                relative=self.evaluator.relative,
                uniforms=uniforms,
            )
        x = state.position
        evaluations = info.n_logp_evals
        logp_current = state.logp
        if not self.correct:
            logp_current = self.evaluator.logp(x)
            evaluations += 1
        if not math.isfinite(logp_current):
            raise SamplingError(
                "SFPStep: the log-density is not finite at the chain's point, and no coordinate's "
                f"box holds a point where it is: {self._describe_point(x)}. Pass an initial point "
                "inside the support (e.g. pm.sample(initvals=...)), or boxes (`bounds`) that "
                "reach it."
            )
        n_edge_hits = int(np.count_nonzero(info.edge_low) + np.count_nonzero(info.edge_high))
        n_empty = int(np.count_nonzero(info.empty))
        n_unresolved = int(np.count_nonzero(info.unresolved))
        self.sweeps_without_acceptance = (
            0 if info.n_accepted else self.sweeps_without_acceptance + 1
        )
        stats = {
            "accept": info.n_accepted / layout.size,
            "n_invalid": info.n_invalid,
            "n_empty": n_empty,
            "n_unresolved": n_unresolved,
            "n_nonfinite": info.n_nonfinite,
            "n_logp_evals": evaluations,
            "n_edge_hits": n_edge_hits,
            "model_logp": float(logp_current + layout.log_jacobian(x)),
            "warning": self._warning(
                info,
                n_invalid=info.n_invalid,
                n_unresolved=n_unresolved,
                n_empty=n_empty,
                n_edge_hits=n_edge_hits,
            ),
        }
        # Before tuning moves the boxes: the CDFs were taken on this sweep's.
        for name, shape, slc, box_template in self._marginal_stats:
            box = box_template.copy()
            box[:, 0], box[:, 1] = self.box_lower[slc], self.box_upper[slc]
            stats |= conditional_stats(name, shape, box, info.report_cdf[slc])
        if self.tune:
            boxes = track_boxes(self._boxes(), self._auto, info)
            self.tuning_draws += 1
            refit = self._auto.any() and self.tuning_draws >= self.next_checkpoint
            if refit:
                boxes = refit_boxes(self._probe(x, boxes), self._auto, allow_shrink=True)
                self.next_checkpoint *= 2
            self._set_boxes(boxes)
            # Only an edge hit, a refit or a start outside them widens the boxes.
            if n_edge_hits or refit or admitted:
                self._check_proper()
        return RaveledVars(layout.to_value(x), q0.point_map_info), [stats]

    def _check_proper(self) -> None:
        improper = np.flatnonzero(
            self._auto & (self.box_upper - self.box_lower > IMPROPER_BOX_WIDTH)
        )
        if improper.size:
            j = int(improper[0])
            raise SamplingError(
                f"SFPStep: the automatic box of {self.layout.describe(j)}{self.layout.scale(j)} "
                f"grew to [{self.box_lower[j]:.3g}, {self.box_upper[j]:.3g}] while tuning: its "
                "conditional's mass never stopped at an edge, so the posterior looks improper "
                "along it (e.g. a pm.Flat or pm.HalfFlat the data do not pin down). Give it a "
                "proper prior, or `bounds`."
            )

    def _admit_start(self, x: np.ndarray) -> None:
        """The start of a sweep that is not inside every box: raise if it is not a number or
        leaves a fixed box; centre the automatic boxes no draw has placed yet on it, and widen
        the others to reach it."""
        self._check_start(x)
        start = np.isnan(self.box_lower)
        self.box_lower[start] = x[start] - AUTO_HALFWIDTH
        self.box_upper[start] = x[start] + AUTO_HALFWIDTH
        self._check_inside(x, self.box_lower, self.box_upper, ~self._auto)
        outside = self._auto & ((x < self.box_lower) | (x > self.box_upper))
        self.box_lower[outside] = np.minimum(self.box_lower[outside], x[outside])
        self.box_upper[outside] = np.maximum(self.box_upper[outside], x[outside])

    def _check_start(self, x: np.ndarray) -> None:
        """A chain point that is not a number: PyMC's transform of a value outside the support."""
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            names = ", ".join(self.layout.describe(int(j)) for j in bad[:10])
            raise SamplingError(
                f"SFPStep: the chain's value of {names} is not a finite number on the sampling "
                "scale: the initial value is outside the variable's support (e.g. a negative "
                "start for a positive variable, or a start outside pm.Uniform's bounds). Pass "
                "initial values inside the support (pm.sample(initvals=...))."
            )

    def _describe_point(self, x: np.ndarray) -> str:
        shown = ", ".join(f"{self.layout.describe(j)}={x[j]:.6g}" for j in range(min(x.size, 10)))
        return shown + (", …" if x.size > 10 else "")

    def _probe(self, x: np.ndarray, boxes: BoxTuning) -> BoxTuning:
        """Widen the automatic boxes' envelopes to mass found on wider lines (see `probe_line`):
        every line in one call of the compiled kernel where the sweep is compiled (a line
        probed from Python costs milliseconds: at N = 100 the probes took more time than all
        the sweeps of a 1500-draw run)."""
        found = self._probe_compiled(x, boxes) if self.kernel == "numba" else None
        if found is None:
            found = np.full((2, self.layout.size), np.nan)
            for i in np.flatnonzero(self._auto):
                quantiles = probe_line(
                    x, int(i), boxes.lower[i], boxes.upper[i], self.evaluator.along, self.D, self.L
                )
                if quantiles is not None:
                    found[:, i] = quantiles
        # fmin/fmax keep the envelope where nothing was found (NaN).
        return boxes._replace(
            envelope_lower=np.fmin(boxes.envelope_lower, found[0]),
            envelope_upper=np.fmax(boxes.envelope_upper, found[1]),
        )

    def _probe_compiled(self, x: np.ndarray, boxes: BoxTuning) -> np.ndarray | None:
        """The automatic boxes' probed quantiles (rows low, high; NaN where nothing was found)
        from the compiled kernel, or ``None`` where a call of the model failed in it: the
        NumPy probe then raises the model's error, or probes without it."""
        kernel, jitted = self._compiled_sweep()
        point_extra, along_extra = jitted.extras(x)
        try:
            probed = kernel.probe(
                x, boxes.lower, boxes.upper, point_extra, along_extra, np.flatnonzero(self._auto)
            )
            return np.array(probed)
        except ModelCallError:
            return None

    def _warning(
        self,
        info: SweepInfo,
        *,
        n_invalid: int,
        n_unresolved: int,
        n_empty: int,
        n_edge_hits: int,
    ) -> SamplerWarning | None:
        """The first warning of each kind in this chain, as PyMC's ``warning`` stat (PyMC logs
        it in the main process, whatever the number of cores; the counts are in the stats)."""
        stuck = self.sweeps_without_acceptance >= STUCK_SWEEPS
        if not (n_invalid or n_unresolved or n_empty or n_edge_hits or stuck):
            return None  # the usual sweep, at every draw: no dictionary to build
        happened = {
            "invalid": n_invalid,
            "unresolved": n_unresolved,
            "empty": n_empty,
            "edge": n_edge_hits and not self.tune,
            "stuck": stuck and not self.tune,
        }
        kind = next((k for k, due in happened.items() if due and k not in self.warned), None)
        if kind is None:
            return None
        self.warned.add(kind)
        settings = f"solver={self.solver!r}, L={self.L}, D={self.D}"
        if kind == "invalid":
            message = (
                f"{n_invalid} collocation conditional(s) were not valid CDFs ({settings}) "
                "and were replaced by the quadrature conditional for that draw. Raise L (or D), "
                "or use solver='quadrature'. Counts are in the 'n_invalid' stat."
            )
        elif kind == "unresolved":
            message = (
                f"the conditional of {self._names(info.unresolved)} stays under-resolved after "
                f"refinement ({settings}): its mass sits in a region far narrower than the box, "
                "so proposals are poor and the chain mixes slowly there (it stays exact). Narrow "
                "`bounds` for it or raise L. Counts are in the 'n_unresolved' stat."
            )
        elif kind == "empty":
            message = (
                f"the log-density is not finite anywhere on the box of "
                f"{self._names(info.empty)} ({settings}), so it stays where it is. Another "
                "variable may have moved to the edge of its support, e.g. a scale collapsing to "
                "zero in a centred hierarchical model (reparametrise, non-centred), or one "
                "growing without bound in an improper posterior (give it a proper prior); or "
                "bound it. Counts are in the 'n_empty' stat."
            )
        elif kind == "edge":
            message = (
                "conditional mass piles up at a box edge after tuning, so the box truncates the "
                "posterior. Pass wider `bounds` or tune longer. Counts are in the 'n_edge_hits' "
                "stat."
            )
        else:
            message = (
                f"no coordinate accepted a draw in {self.sweeps_without_acceptance} sweeps "
                f"({settings}): the chain is stuck. Its conditionals are poor proposals here; "
                "narrow `bounds`, raise L, or reparametrise. See the 'accept' stat."
            )
        return SamplerWarning(WarningType.BAD_PARAMS, f"SFPStep: {message}", "warn")

    def _names(self, mask: np.ndarray) -> str:
        indices = np.flatnonzero(mask)
        names = ", ".join(self.layout.describe(int(j)) for j in indices[:5])
        return names + (f" and {indices.size - 5} more" if indices.size > 5 else "")
