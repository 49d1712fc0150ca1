"""A mixture of diagonal Gaussians as a variational family in PyMC's approximation API (nn4post).

The family (nn4post §2.1, restated in the papers' NOTES §4) is

.. math::

    q(\\theta; a, \\mu, \\zeta) = \\sum_{i=1}^{N_c} w_i(a)
        \\prod_{j=1}^{d} \\mathcal N(\\theta_j; \\mu_{ij}, \\sigma(\\zeta_{ij})^2),
    \\qquad w = \\operatorname{softmax}(a), \\quad \\sigma(\\zeta) = \\ln(1 + e^{\\zeta}),

on PyMC's unconstrained space; :math:`N_c = 1` is mean-field ADVI (nn4post §2.2.2, with PyMC's
own ``rho`` parametrisation of the scale, ``rho2sigma`` being the same softplus).

The loss is the ELBO (nn4post §2.3). Fitted through PyMC's plain ``KLqp``, whose draws pick a
component at random, the logits :math:`a` get a gradient that is zero in expectation and random-walk
(``benchmarks/RESULTS.md``, "Mixture targets": from the right components with equal weights, the
weights drift away from the exact ones). :class:`MixtureADVI` maximises instead the
*stratified* form (NOTES §4)

.. math::

    \\mathrm{ELBO} = \\sum_i w_i(a)\\, \\mathbb E_{\\varepsilon \\sim \\mathcal N(0, I)}
        \\left[\\ln p(\\mu_i + \\sigma_i \\odot \\varepsilon; D)
        - \\ln q(\\mu_i + \\sigma_i \\odot \\varepsilon)\\right],

each expectation estimated with the same reparameterised standard-normal draws
:math:`\\varepsilon_s` for every component (common random numbers: every component's estimate is
unbiased, and differences between components, which drive the logits, are less noisy).
:math:`\\partial\\,\\mathrm{ELBO} / \\partial a_k = w_k (F_k - \\mathrm{ELBO})` with
:math:`F_k` component *k*'s expectation, so a component that explains the target better than
the mixture does gains weight. Inside :math:`\\ln q` the variational parameters are held fixed
("sticking the landing", Roeder et al. 2017): the dropped term is
:math:`-\\mathbb E_q[\\nabla_\\lambda \\ln q_\\lambda] = 0`, so the estimator stays unbiased and
loses the noise of that term.

Cost per iteration: :math:`N_c` evaluations of the model per Monte Carlo draw (one per
component, vectorised), plus :math:`\\Theta(N_c^2 d)` for the mixture density at the
:math:`N_c` points, which is small beside a model evaluation unless :math:`N_c` is large.

Component growth answers nn4post §4's open question ("add a new peak when the loss becomes
stable; with what initial *a*?"): start at :math:`N_c = 1`; when the loss plateaus, add a
component at the candidate point where :math:`\\ln p - \\ln q` is largest (high target density
the mixture covers poorly) with weight :math:`1/(N_c + 1)`; keep it if the ELBO gained more
than a tolerance and than three standard errors, else go back and stop. Components whose weight
falls below ``prune_weight`` are pruned after every fit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.variational.approximations import SingleGroupApproximation
from pymc.variational.inference import Inference
from pymc.variational.operators import KL
from pymc.variational.opvi import Group, node_property
from pytensor.gradient import zero_grad
from pytensor.graph.replace import vectorize_graph
from scipy import special

from pymc_sfp._validation import (
    check_bool,
    check_positive_finite,
    check_positive_int,
    check_real,
)
from pymc_sfp.compile import compile_batched_logp, float64_internals, step_graph

__all__ = [
    "GrowthStage",
    "MixtureADVI",
    "MixtureApproximation",
    "MixtureGroup",
    "StratifiedKL",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _mixture_logpdf(z, log_w, mu, sigma):
    """``ln q(z_r)`` for each row of ``z`` (R, d): a log-sum-exp over the (R, Nc) component
    log-densities, :math:`\\Theta(R N_c d)`."""
    quad = -0.5 * pt.sum(((z[:, None, :] - mu[None, :, :]) / sigma[None, :, :]) ** 2, axis=-1)
    # The dimension is an int64: as a float of z's dtype, it does not upcast a float32 model.
    dimension = z.shape[-1].astype(z.dtype)
    norm = -pt.sum(pt.log(sigma), axis=-1) - 0.5 * _LOG_2PI * dimension
    return pt.logsumexp(quad + norm[None, :] + log_w[None, :], axis=1)


def _shared_params(a: np.ndarray, mu: np.ndarray, zeta: np.ndarray) -> dict:
    """The family's parameters as shared variables of PyTensor's ``floatX``, as the model's
    (PyMC's own families do the same: a float64 parameter in a float32 model would not fit the
    model's graph)."""
    values = {"a": a, "mu": mu, "zeta": zeta}
    return {
        name: pytensor.shared(
            np.asarray(value, dtype=pytensor.config.floatX), name, shape=np.shape(value)
        )
        for name, value in values.items()
    }


@functools.cache
def _numeric_mixture_logpdf() -> Callable[..., np.ndarray]:
    """:func:`_mixture_logpdf` compiled for NumPy arrays (float64), for ELBO estimates and for
    scoring candidate points outside the optimisation graph."""
    with float64_internals():
        z, mu, sigma = (pt.matrix(name, dtype="float64") for name in ("z", "mu", "sigma"))
        log_w = pt.vector("log_w", dtype="float64")
        return pytensor.function([z, log_w, mu, sigma], _mixture_logpdf(z, log_w, mu, sigma))


def _best_new_mean(
    candidates: np.ndarray,
    logp: np.ndarray,
    log_w: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    logp_mu: np.ndarray,
) -> np.ndarray:
    """Where to centre a new component: the candidate of highest target density among those
    the mixture covers poorly.

    "Poorly" is :math:`\\ln p(c) - \\ln q(c)` above the mixture's typical value (its
    weighted mean at the component means, where the mixture does cover the target: the model's
    density is unnormalised, so only differences of this ratio mean anything) by more than
    :math:`\\ln 10`. The largest ratio alone would pick the farthest candidate whenever the
    target's tail outlasts the mixture's; the highest density alone, a mode already covered.
    With no such candidate, the largest ratio. ``logp_mu`` is the model's log-density at ``mu``.
    """
    finite = np.isfinite(logp)
    if not len(log_w):
        return candidates[np.argmax(np.where(finite, logp, -np.inf))]
    log_q = _numeric_mixture_logpdf()
    ratio = np.where(finite, logp - log_q(candidates, log_w, mu, sigma), -np.inf)
    typical = np.exp(log_w) @ (logp_mu - log_q(mu, log_w, mu, sigma))
    poorly = ratio > typical + np.log(10.0)
    if not poorly.any():
        return candidates[np.argmax(ratio)]
    return candidates[np.argmax(np.where(poorly, logp, -np.inf))]


def _softplus_inverse(sigma: np.ndarray) -> np.ndarray:
    return sigma + np.log(-np.expm1(-sigma))


@Group.register
class MixtureGroup(Group):
    """A softmax-weighted mixture of ``n_components`` diagonal Gaussians (nn4post §2.1).

    Parameters: logits ``a`` (Nc), means ``mu`` (Nc × d) and unconstrained scales ``zeta``
    (Nc × d), :math:`\\sigma = \\operatorname{softplus}(\\zeta)`.

    ``symbolic_random`` draws from the mixture (a component index from one extra standard-normal
    column of the noise through its CDF, then a Gaussian draw): it serves ``sample``,
    ``sample_node`` and PyMC's plain ``KLqp``. :class:`StratifiedKL` uses
    ``symbolic_stratified_random`` instead, the same noise pushed through every component.

    Parameters
    ----------
    n_components : int
        :math:`N_c \\ge 1`.
    init_scale : float
        With :math:`N_c > 1`, the initial means are chosen greedily among draws from
        :math:`\\mathcal N(\\text{start}, \\text{init\\_scale}^2 I)` (unconstrained space) as
        the points of high model density that the components chosen so far cover worst, so
        that the components start apart, on different modes where there are several.
    **kwargs
        ``start``, ``start_sigma``, ``random_seed``, ``model``, ``params`` as for PyMC's
        :class:`pymc.MeanField`.
    """

    __param_spec__ = {"a": ("nc",), "mu": ("nc", "d"), "zeta": ("nc", "d")}
    short_name = "mixture"
    alias_names = frozenset(["nn4post"])

    def __init__(
        self,
        group=None,
        vfam=None,
        params=None,
        *args: Any,
        n_components: int = 1,
        init_scale: float = 2.0,
        **kwargs: Any,
    ) -> None:
        self.n_components = check_positive_int(n_components, "n_components")
        self.init_scale = check_positive_finite(init_scale, "init_scale")
        super().__init__(group, vfam, params, *args, **kwargs)

    def __init_group__(self, group) -> None:
        super().__init_group__(group)
        if not self._check_user_params(spec_kw={"nc": self.n_components}):
            self.shared_params = self.create_shared_params(
                self._kwargs.get("start", None), self._kwargs.get("start_sigma", None)
            )
        self._finalize_init()

    # One extra noise column: its standard-normal CDF picks the component of a mixture draw.
    def _initial_type(self, name: str):
        return pt.matrix(name, shape=(None, self.ddim + 1))

    def _new_initial_shape(self, size, dim, more_replacements=None):
        return pt.stack([size, dim + 1])

    def create_shared_params(
        self, start: dict | None = None, start_sigma: dict | None = None
    ) -> dict:
        """Shared ``a``, ``mu``, ``zeta``: equal weights, scales ``start_sigma`` (else
        softplus(0) = ln 2, PyMC's mean-field default), means at ``start`` for one component
        and spread out from it (see ``init_scale``) for several."""
        flat = self._prepare_start(start)
        if not np.all(np.isfinite(flat)):
            bad = [
                name for name, slc, *_ in self.ordering.values() if not np.isfinite(flat[slc]).all()
            ]
            raise ValueError(
                f"start has NaN or infinite values (unconstrained) for {bad}: give finite values "
                "inside each variable's support"
            )
        zeta = np.zeros(self.ddim)
        for name, slc, *_ in self.ordering.values():
            if start_sigma is not None and name in start_sigma:
                zeta[slc] = _softplus_inverse(np.abs(np.ravel(start_sigma[name])))
        nc = self.n_components
        sigma = np.logaddexp(0.0, zeta)
        mu = flat[None, :] if nc == 1 else self._spread_means(flat, sigma)
        return _shared_params(np.zeros(nc), mu, np.tile(zeta, (nc, 1)))

    def _spread_means(self, start: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        # Identical components get identical stratified gradients and would never separate.
        batched_logp = self.batched_logp()
        candidates = start + self.init_scale * self.rng.standard_normal(
            (min(128 * self.n_components, 4096), self.ddim)
        )
        logp = batched_logp(candidates)
        means = np.empty((0, self.ddim))
        for k in range(self.n_components):
            log_w, scales = np.full(k, -np.log(max(k, 1))), np.tile(sigma, (k, 1))
            logp_mu = batched_logp(means) if k else np.empty(0)
            best = _best_new_mean(candidates, logp, log_w, means, scales, logp_mu)
            means = np.vstack([means, best])
        return means

    def batched_logp(self) -> Callable[[np.ndarray], np.ndarray]:
        """The model's log-density at each row of a matrix of flat unconstrained points (in this
        group's ordering), compiled once per group."""
        if not hasattr(self, "_batched_logp"):
            value_vars = [self.model.rvs_to_values[v] for v in self.group]
            self._batched_logp = compile_batched_logp(step_graph(self.model, value_vars))
        return self._batched_logp

    @node_property
    def weights(self):
        """Mixture weights :math:`w = \\operatorname{softmax}(a)`, shape (Nc,)."""
        return pt.special.softmax(self.params_dict["a"])

    @node_property
    def log_weights(self):
        return pt.special.log_softmax(self.params_dict["a"])

    @node_property
    def component_means(self):
        """Component means :math:`\\mu`, shape (Nc, d), unconstrained space."""
        return self.params_dict["mu"]

    @node_property
    def component_stds(self):
        """Component scales :math:`\\sigma = \\operatorname{softplus}(\\zeta)`, shape (Nc, d)."""
        return pt.softplus(self.params_dict["zeta"])

    @node_property
    def mean(self):
        return self.weights @ self.component_means

    @node_property
    def cov(self):
        w, mu = self.weights, self.component_means
        second = (mu * w[:, None]).T @ mu + pt.diag(w @ self.component_stds**2)
        return second - pt.outer(self.mean, self.mean)

    @node_property
    def std(self):
        second = self.weights @ (self.component_stds**2 + self.component_means**2)
        return pt.sqrt(pt.maximum(second - self.mean**2, 0.0))

    @node_property
    def symbolic_random(self):
        eps = self.symbolic_initial[:, :-1]
        u = 0.5 * pt.erfc(-self.symbolic_initial[:, -1] / np.sqrt(2.0))
        index = pt.sum(u[:, None] > pt.cumsum(self.weights)[None, :-1], axis=1)
        return self.component_means[index] + self.component_stds[index] * eps

    @node_property
    def symbolic_logq_not_scaled(self):
        return _mixture_logpdf(
            self.symbolic_random, self.log_weights, self.component_means, self.component_stds
        )

    @node_property
    def symbolic_stratified_random(self):
        """The noise's S draws pushed through every component: (S·Nc, d), row ``s·Nc + i`` from
        component ``i``."""
        eps = self.symbolic_initial[:, :-1]
        rows = self.component_means[None, :, :] + self.component_stds[None, :, :] * eps[:, None, :]
        return rows.reshape((-1, self.ddim))

    @node_property
    def symbolic_stratified_logq(self):
        """``ln q`` at the stratified rows, the parameters held fixed except through the rows."""
        return _mixture_logpdf(
            self.symbolic_stratified_random,
            zero_grad(self.log_weights),
            zero_grad(self.component_means),
            zero_grad(self.component_stds),
        )

    @node_property
    def symbolic_stratified_row_weights(self):
        """Weight of each stratified row in the ELBO, :math:`w_i / S`, shape (S·Nc,)."""
        n_draws = self.symbolic_initial.shape[0]
        return pt.tile(self.weights, n_draws) / n_draws.astype(self.weights.dtype)


class MixtureApproximation(SingleGroupApproximation):
    """Single-group mixture-of-diagonal-Gaussians approximation (see :class:`MixtureGroup`).

    Besides PyMC's ``sample``, ``mean``, ``std``, ``cov`` and ``state``, the fitted components
    are readable: ``weights`` (Nc,), ``component_means`` and ``component_stds`` (Nc × d) as
    PyTensor nodes on the unconstrained space (``.eval()`` them), :meth:`component_data` as an
    xarray Dataset with the model's names and dims, and ``n_components``.
    """

    _group_class = MixtureGroup

    @property
    def group(self) -> MixtureGroup:
        return self.groups[0]

    @node_property
    def stratified_terms(self):
        """``(row_weights, (varlogp_rows, datalogp_rows), logq_rows)`` at the group's
        stratified draws: the model's prior and data terms apart, for minibatch scaling."""
        group = self.group
        flat = self.to_flat_input([self.model.varlogp, self.model.datalogp])
        varlogp, datalogp = vectorize_graph(
            flat, replace={group.input: group.symbolic_stratified_random}
        )
        return (
            group.symbolic_stratified_row_weights,
            (varlogp, datalogp),
            group.symbolic_stratified_logq,
        )

    def component_data(self) -> Any:
        """Weights, means and scales of the components as an xarray Dataset (unconstrained
        space, the model's variable names and dims, a leading ``component`` dim)."""
        import xarray as xr

        group = self.group
        weights, means, stds = (
            np.asarray(v.eval())
            for v in (group.weights, group.component_means, group.component_stds)
        )
        parts = {"weight": xr.DataArray(weights, dims=["component"])}
        for label, values in (("mean", means), ("std", stds)):
            per = [group.var_to_data(pt.as_tensor(row)) for row in values]
            for name in per[0].data_vars:
                parts[f"{name}_{label}"] = xr.concat([ds[name] for ds in per], dim="component")
        return xr.Dataset(parts).assign_coords(component=np.arange(len(weights)))


class StratifiedKL(KL):
    """PyMC's KL operator (negative ELBO, :math:`\\beta`-weighted, minibatch-normalised) with the
    stratified mixture estimate of NOTES §4 in place of the categorical-draw one."""

    def apply(self, f):
        row_weights, (varlogp, datalogp), logq = self.approx.stratified_terms
        norm = self.approx.symbolic_normalizing_constant

        def expect(rows):
            return pt.sum(row_weights * rows)

        return (-expect(datalogp) + self.beta * (expect(logq) - expect(varlogp))) / norm


class GrowthStage(NamedTuple):
    """One stage of component growth.

    Attributes
    ----------
    n_components : int
        Components after the stage's fit and pruning.
    elbo, elbo_se : float
        Stratified ELBO estimate and its standard error at the end of the stage.
    iterations : int
        Optimisation steps of the stage.
    accepted : bool
        Whether the stage was kept (the last stage of a growth run is usually refused).
    """

    n_components: int
    elbo: float
    elbo_se: float
    iterations: int
    accepted: bool


class _Plateau:
    """Callback: StopIteration when the mean loss of the last ``window`` steps is not lower
    than that of the ``window`` before by more than two standard errors of the difference."""

    def __init__(self, window: int) -> None:
        self.window = window

    def __call__(self, approx, losses, i) -> None:
        w = self.window
        if losses is None or i % w or len(losses) < 2 * w:
            return
        last, before = losses[-w:], losses[-2 * w : -w]
        se = np.sqrt((np.var(last) + np.var(before)) / w)
        if np.mean(before) - np.mean(last) < 2.0 * se:
            raise StopIteration(f"Loss plateau at {i}")


#: The keyword arguments :class:`MixtureADVI` passes on to its :class:`MixtureGroup`.
_GROUP_KWARGS = ("model", "start", "start_sigma", "init_scale")


class MixtureADVI(Inference):
    """Variational inference with a mixture of diagonal Gaussians (nn4post) and the stratified
    ELBO gradient, for ``pm.fit(n, method=MixtureADVI(K))``.

    Parameters
    ----------
    n_components : int, default 1
        :math:`N_c \\ge 1` (the starting number with ``grow=True``).
    grow : bool, default False
        Component growth: fit, and when the loss plateaus add a component where
        :math:`\\ln p - \\ln q` is largest; stop when the ELBO gain falls below ``elbo_tol``
        (or three standard errors), at ``max_components``, or when the iteration budget ``n``
        of :meth:`fit` is spent. The stages are in :attr:`growth`.
    max_components : int, default 8
        The most components: with ``grow=True`` growth stops there, and ``n_components`` may
        not exceed it in either case.
    elbo_tol : float, default 0.1
        Least ELBO gain (nats) that keeps an added component.
    prune_weight : float or None, default 0.01
        Components whose weight ends a fit below this are removed (None: never).
    plateau_window : int, default 500
        Steps per window of the plateau test (growth only).
    elbo_draws : int, default 1000
        Draws per component of the ELBO estimates that decide growth.
    beta : float, default 1.0
        Weight of the KL term, as in :class:`pymc.KLqp`: finite and ≥ 0.
    random_seed : int or None
        Seeds the initial means, the optimisation noise and growth. ``pm.fit(random_seed=...)``
        does not reach an Inference instance: give the seed here.
    **kwargs
        ``model``, ``start``, ``start_sigma``, ``init_scale`` for :class:`MixtureGroup`.

    Raises
    ------
    TypeError
        For an argument of the wrong kind (named), or a keyword argument it does not take
        (a misspelt one would otherwise be dropped without a word).
    ValueError
        For a value out of its range (named).

    Attributes
    ----------
    growth : list of GrowthStage
        With ``grow=True``, one entry per stage; the chosen :math:`N_c` is
        ``approx.n_components``.
    """

    def __init__(
        self,
        n_components: int = 1,
        *,
        grow: bool = False,
        max_components: int = 8,
        elbo_tol: float = 0.1,
        prune_weight: float | None = 0.01,
        plateau_window: int = 500,
        elbo_draws: int = 1000,
        beta: float = 1.0,
        random_seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        n_components = check_positive_int(n_components, "n_components")
        self.max_components = check_positive_int(max_components, "max_components")
        if n_components > self.max_components:
            raise ValueError(
                f"n_components ({n_components}) must not exceed max_components "
                f"({self.max_components})"
            )
        self.grow = check_bool(grow, "grow")
        self.elbo_tol = check_real(elbo_tol, "elbo_tol")
        if not (np.isfinite(self.elbo_tol) and self.elbo_tol >= 0):
            raise ValueError(f"elbo_tol must be a finite number ≥ 0, got {elbo_tol}")
        if prune_weight is not None:
            prune_weight = check_real(prune_weight, "prune_weight")
            if not 0 <= prune_weight < 1:
                raise ValueError(f"prune_weight must be in [0, 1) or None, got {prune_weight}")
        self.prune_weight = prune_weight
        self.plateau_window = check_positive_int(plateau_window, "plateau_window")
        self.elbo_draws = check_positive_int(elbo_draws, "elbo_draws")
        beta = check_real(beta, "beta")
        if not (np.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta must be a finite number ≥ 0, got {beta!r}")
        unknown = sorted(set(kwargs) - set(_GROUP_KWARGS))
        if unknown:
            raise TypeError(
                f"MixtureADVI got unknown keyword arguments {unknown}; besides its own it takes "
                f"{list(_GROUP_KWARGS)} (for the MixtureGroup)"
            )
        self.beta = beta
        self.rng = np.random.default_rng(random_seed)
        self._group_kwargs = kwargs
        self.growth: list[GrowthStage] = []
        approx = MixtureApproximation(
            n_components=n_components, random_seed=self._child_seed(), **kwargs
        )
        super().__init__(StratifiedKL, approx, None, beta=beta)

    def _child_seed(self) -> int:
        return int(self.rng.integers(2**30))

    def _rebuild(self, a: np.ndarray, mu: np.ndarray, zeta: np.ndarray) -> None:
        """Point the inference at a new approximation with the given component parameters."""
        approx = MixtureApproximation(
            n_components=len(a),
            params=_shared_params(a, mu, zeta),
            random_seed=self._child_seed(),
            model=self.approx.model,
        )
        approx.hist = self.hist
        self.objective = StratifiedKL(approx, beta=self.beta)(None)
        self.state = None

    def _values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        group = self.approx.group
        shared = group.user_params or group.shared_params
        return tuple(np.array(shared[name].get_value()) for name in ("a", "mu", "zeta"))

    def prune(self, prune_weight: float) -> int:
        """Remove components with weight below ``prune_weight`` (always keeping the heaviest);
        returns how many were removed."""
        a, mu, zeta = self._values()
        w = special.softmax(a)
        keep = (w >= prune_weight) | (np.arange(len(w)) == np.argmax(w))
        if keep.all():
            return 0
        self._rebuild(a[keep], mu[keep], zeta[keep])
        return int((~keep).sum())

    def elbo(self, draws: int | None = None) -> tuple[float, float]:
        """Stratified Monte Carlo estimate of the ELBO (nats, whole data set as the model's
        log-density defines it) and its standard error.

        ``draws`` (default ``elbo_draws``) standard-normal draws are pushed through every
        component; the per-draw sums :math:`g_s = \\sum_i w_i (\\ln p - \\ln q)(z_{s,i})` are
        independent, so the standard error is their standard deviation over :math:`\\sqrt S`.
        Draws where the model's log-density is not finite are counted in the error raised.
        """
        draws = self.elbo_draws if draws is None else check_positive_int(draws, "draws")
        a, mu, zeta = self._values()
        log_w, sigma = special.log_softmax(a), np.logaddexp(0.0, zeta)
        eps = self.rng.standard_normal((draws, mu.shape[1]))
        rows = (mu[None] + sigma[None] * eps[:, None, :]).reshape(-1, mu.shape[1])
        logp = self.approx.group.batched_logp()(rows)
        bad = int(np.sum(~np.isfinite(logp)))
        if bad:
            raise FloatingPointError(
                f"the model's log-density is not finite at {bad} of {len(rows)} draws from the "
                "mixture: the approximation reaches outside the posterior's support"
            )
        logq = _numeric_mixture_logpdf()(rows, log_w, mu, np.broadcast_to(sigma, mu.shape))
        per_draw = ((logp - logq).reshape(draws, -1) * np.exp(log_w)).sum(axis=1)
        return float(per_draw.mean()), float(per_draw.std(ddof=1) / np.sqrt(draws))

    def _add_component(self) -> None:
        """Add a component (weight :math:`1/(N_c + 1)`, the components' geometric-mean scales)
        at :func:`_best_new_mean` of candidates drawn from the mixture with scales inflated 1, 3
        and 10 times."""
        a, mu, zeta = self._values()
        nc, d = mu.shape
        log_w, sigma = special.log_softmax(a), np.logaddexp(0.0, zeta)
        per = 256
        index = self.rng.choice(nc, size=3 * per, p=np.exp(log_w))
        inflate = np.repeat([1.0, 3.0, 10.0], per)[:, None]
        candidates = mu[index] + inflate * sigma[index] * self.rng.standard_normal((3 * per, d))
        batched_logp = self.approx.group.batched_logp()
        best = _best_new_mean(
            candidates, batched_logp(candidates), log_w, mu, sigma, batched_logp(mu)
        )
        new_sigma = np.exp(np.log(sigma).mean(axis=0))
        new_a = special.logsumexp(a) - np.log(nc)
        self._rebuild(
            np.append(a, new_a),
            np.vstack([mu, best]),
            np.vstack([zeta, _softplus_inverse(new_sigma)]),
        )

    def fit(
        self,
        n: int = 10000,
        score: bool | None = None,
        callbacks: Sequence[Callable] | None = None,
        progressbar: bool = True,
        **kwargs: Any,
    ) -> MixtureApproximation:
        """Fit as :meth:`pymc.variational.inference.Inference.fit`, then prune; with
        ``grow=True`` grow components within a total budget of ``n`` steps."""
        if not self.grow:
            approx = super().fit(n, score, callbacks, progressbar, **kwargs)
            if self.prune_weight is not None and self.prune(self.prune_weight):
                approx = self.approx
            return approx
        callbacks = [*(callbacks or []), _Plateau(self.plateau_window)]
        used = 0
        previous = None
        while True:
            start = len(self.hist)
            super().fit(n - used, True, callbacks, progressbar, **kwargs)
            steps = len(self.hist) - start
            used += steps
            if self.prune_weight is not None:
                self.prune(self.prune_weight)
            elbo, se = self.elbo()
            nc = self.approx.n_components
            better = previous is None or (
                nc > previous[0].n_components
                and elbo - previous[0].elbo
                > max(self.elbo_tol, 3.0 * np.hypot(se, previous[0].elbo_se))
            )
            self.growth.append(GrowthStage(nc, elbo, se, steps, better))
            if not better:
                self.objective = previous[1]
                self.state = None
                break
            previous = (self.growth[-1], self.objective)
            if nc >= self.max_components or used >= n:
                break
            self._add_component()
        self.approx.hist = self.hist
        return self.approx

    def refine(self, n: int, progressbar: bool = True) -> None:
        """Continue fitting the current approximation for ``n`` steps (a fresh optimiser state
        if pruning or growth replaced the approximation)."""
        if self.state is None:
            super().fit(n, progressbar=progressbar)
        else:
            super().refine(n, progressbar=progressbar)
