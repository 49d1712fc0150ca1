"""TAP mean-field learning of a PyMC model through PyMC's approximation API.

The numerics are :mod:`pymc_sfp.core.tap`; this module reads the supported structure from a
``pm.Model`` and hands back a full-rank Gaussian :class:`pymc.FullRank` approximation whose
parameters are fixed at TAP's mean and covariance, so that ``.sample(draws, random_seed=)``
gives a DataTree with the model's names and dims.

Supported models: one free variable, a vector ``w ~ Normal(0, sigma)`` (``sigma`` a constant
scalar or vector), and one observed variable whose parameter is a supported link of ``X @ w``
with ``X`` a ``pm.Data`` matrix:

- ``Bernoulli(p=invprobit(X @ w))`` → probit,
- ``Bernoulli(logit_p=X @ w)`` or ``Bernoulli(p=sigmoid(X @ w))`` → logistic,
- ``Normal(mu=X @ w, sigma=s)`` with a constant ``s`` → Gaussian regression.

The link is recognised numerically: the observed variable's parameter is evaluated at random
weights and compared with each link applied to ``X @ w``; anything else is refused with an error
saying what did not match.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, NormalRV
from scipy import special

from pymc_sfp.core.tap import TAPResult, tap_fit

__all__ = ["TAPApproximation", "fit_tap"]


class TAPApproximation(pm.FullRank):
    """A full-rank Gaussian approximation fixed at a TAP / EP solution.

    Attributes
    ----------
    tap : TAPResult
        The core result (sites, cavities, residual history).
    loo_error : float
        Leave-one-out error estimate (paper §6).
    loo_predictive : ndarray
        Leave-one-out predictive probability of each observed label.
    log_evidence : float
        Approximate log evidence (EP free energy).
    """

    tap: TAPResult

    @property
    def loo_error(self) -> float:
        return self.tap.loo_error

    @property
    def loo_predictive(self) -> np.ndarray:
        return self.tap.loo_predictive

    @property
    def log_evidence(self) -> float:
        return self.tap.log_evidence

    def sample(self, draws: int = 500, *, random_seed: Any = None, **kwargs: Any) -> Any:
        """Draws from the Gaussian as :meth:`pymc.variational.opvi.Approximation.sample`, with
        ``loo_error``, ``log_evidence``, ``tap_variant`` and ``tap_converged`` in the attrs."""
        out = super().sample(draws, random_seed=random_seed, **kwargs)
        if hasattr(out, "attrs"):
            out.attrs.update(
                loo_error=self.loo_error,
                log_evidence=self.log_evidence,
                tap_variant=self.tap.variant,
                tap_converged=int(self.tap.converged),
            )
        return out


def _constant(value: Any, what: str, model: pm.Model) -> np.ndarray:
    """The value of a graph that must not depend on any model variable."""
    leaves = list(graph_inputs([value]))
    if any(v in model.value_vars or v in model.free_RVs for v in leaves):
        raise ValueError(f"fit_tap: {what} must be a constant, not depend on model variables")
    return np.asarray(value.eval(), dtype=float)


def _read_model(model: pm.Model) -> dict:
    """The TAP problem in ``model``, or a ValueError naming what does not match."""
    if len(model.free_RVs) != 1:
        names = [v.name for v in model.free_RVs]
        raise ValueError(f"fit_tap needs exactly one free variable (the weights), got {names}")
    w = model.free_RVs[0]
    if not isinstance(w.owner.op, NormalRV) or w.ndim != 1:
        raise ValueError(f"fit_tap: the free variable {w.name!r} must be a Normal vector")
    if model.rvs_to_transforms.get(w) is not None:
        raise ValueError(f"fit_tap: {w.name!r} must have no transform")
    mu, sigma = w.owner.inputs[-2:]
    if np.any(_constant(mu, f"the prior mean of {w.name!r}", model) != 0):
        raise ValueError(f"fit_tap: the prior of {w.name!r} must have mean 0")
    prior_var = _constant(sigma, f"the prior sigma of {w.name!r}", model) ** 2
    if len(model.observed_RVs) != 1:
        names = [v.name for v in model.observed_RVs]
        raise ValueError(f"fit_tap needs exactly one observed variable, got {names}")
    obs = model.observed_RVs[0]
    y = np.asarray(model.rvs_to_values[obs].eval(), dtype=float)
    X = _design(model, obs, y)
    rng = np.random.default_rng(0)
    probe = [rng.normal(size=X.shape[1]) for _ in range(3)]
    if isinstance(obs.owner.op, BernoulliRV):
        p = _evaluate(model, w, obs.owner.inputs[-1], probe)
        for name, link in (("probit", special.ndtr), ("logistic", special.expit)):
            if all(
                np.allclose(pv, link(X @ wv), atol=1e-10) for pv, wv in zip(p, probe, strict=True)
            ):
                return {"likelihood": name, "X": X, "y": y, "prior_var": prior_var, "w": w}
        raise ValueError(
            f"fit_tap: the Bernoulli {obs.name!r} must have p = invprobit(X @ {w.name}) or "
            f"logit_p = X @ {w.name}; its p is neither link of X @ {w.name}"
        )
    if isinstance(obs.owner.op, NormalRV):
        mu_obs, sd_obs = obs.owner.inputs[-2:]
        noise = _constant(sd_obs, f"the sigma of {obs.name!r}", model)
        if noise.size != 1:
            raise ValueError(f"fit_tap: the sigma of {obs.name!r} must be a scalar")
        mean = _evaluate(model, w, mu_obs, probe)
        if all(np.allclose(mv, X @ wv, atol=1e-10) for mv, wv in zip(mean, probe, strict=True)):
            return {
                "likelihood": "gaussian",
                "X": X,
                "y": y,
                "prior_var": prior_var,
                "noise_var": float(noise.reshape(())) ** 2,
                "w": w,
            }
        raise ValueError(f"fit_tap: the Normal {obs.name!r} must have mu = X @ {w.name}")
    raise ValueError(
        f"fit_tap: the observed {obs.name!r} is a {type(obs.owner.op).__name__}; "
        "supported: Bernoulli (probit or logit link) and Normal"
    )


def _design(model: pm.Model, obs: Any, y: np.ndarray) -> np.ndarray:
    """The ``pm.Data`` matrix with one row per observation among the inputs of ``obs``."""
    inputs = set(graph_inputs(obs.owner.inputs))
    found = [
        d
        for d in model.data_vars
        if d in inputs and d.ndim == 2 and d.get_value().shape[0] == y.size
    ]
    if len(found) != 1:
        raise ValueError(
            f"fit_tap: {obs.name!r} must depend on exactly one pm.Data matrix X with {y.size} "
            f"rows (through X @ w); found {len(found)}"
        )
    return np.asarray(found[0].get_value(), dtype=float)


def _evaluate(model: pm.Model, w: Any, param: Any, probe: list) -> list:
    """``param`` as a function of ``w``, at each weight vector of ``probe``."""
    fn = pytensor.function([w], param, givens=None, on_unused_input="ignore")
    return [np.asarray(fn(wv), dtype=float) for wv in probe]


def fit_tap(
    model: pm.Model | None = None,
    *,
    variant: str = "adaptive",
    random_seed: Any = None,
    **kwargs: Any,
) -> TAPApproximation:
    """TAP mean-field Bayes learning (Opper & Winther 1996; adaptive TAP / EP) of a PyMC model.

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: the one in context); see the module docstring for the supported
        structure.
    variant : {"adaptive", "naive"}
        Adaptive TAP (per-example cavity variances, correct for correlated inputs) or the paper's
        naive ``Λ = 1 − q``.
    random_seed : int or Generator, optional
        Seeds the approximation's own random stream (``pm.fit`` with an instance ignores seeds).
    **kwargs
        Passed to :func:`pymc_sfp.core.tap.tap_fit` (``damping``, ``tol``, ``max_iter``,
        ``batch``).

    Returns
    -------
    TAPApproximation
        With ``.sample(draws, random_seed=)``, ``loo_error``, ``loo_predictive``,
        ``log_evidence`` and ``tap`` (the core result).
    """
    model = pm.modelcontext(model)
    problem = _read_model(model)
    result = tap_fit(
        problem["X"],
        problem["y"],
        problem["likelihood"],
        variant=variant,
        prior_var=problem["prior_var"],
        noise_var=problem.get("noise_var", np.nan),
        field_scale=1.0,
        **kwargs,
    )
    approx = TAPApproximation(model=model, random_seed=random_seed)
    group = approx.groups[0]
    group.shared_params["mu"].set_value(result.mean.astype(pytensor.config.floatX))
    chol = np.linalg.cholesky(result.cov)
    # FullRank stores the Cholesky diagonal through softplus (sigma = log1p(exp(rho))): invert it.
    diag = np.diag(chol)
    chol[np.diag_indices_from(chol)] = diag + np.log(-np.expm1(-diag))
    group.shared_params["L_tril"].set_value(
        chol[np.tril_indices(len(result.mean))].astype(pytensor.config.floatX)
    )
    approx.tap = result
    return approx
