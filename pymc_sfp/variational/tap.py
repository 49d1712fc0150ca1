"""TAP mean-field learning of a PyMC model through PyMC's approximation API.

The numerics are :mod:`pymc_sfp.core.tap`; this module reads the supported structure from a
``pm.Model`` and hands back a full-rank Gaussian :class:`pymc.FullRank` approximation whose
parameters are fixed at TAP's mean and covariance, so that ``.sample(draws, random_seed=)``
gives a DataTree with the model's names and dims.

Three ways in, one result (:class:`TAPApproximation`):

- ``fit_tap(model)`` (or inside ``with model:``);
- ``pm.fit(method=TAP(...))``, the PyMC ``Inference`` interface;
- ``fit_tap(X=X, y=y, likelihood=...)`` with arrays: the model is built by :func:`tap_model`
  and kept as ``approx.model``.

Supported models: one free variable, a vector ``w ~ Normal(0, sigma)`` (``sigma`` a constant
scalar or vector), and one observed variable whose parameter is a supported link of ``X @ w``
with ``X`` a ``pm.Data`` matrix:

- ``Bernoulli(p=invprobit(X @ w))`` → probit,
- ``Bernoulli(logit_p=X @ w)`` or ``Bernoulli(p=sigmoid(X @ w))`` → logistic,
- ``Normal(mu=X @ w, sigma=s)`` with a constant ``s`` → Gaussian regression,
- :class:`pymc_sfp.nn.NoisyPerceptron` ``(field=X @ w, beta=β)`` with a constant ``β`` → the
  perceptron with output noise (paper Eq. 4).

The link is recognised numerically: the observed variable's parameter is evaluated at random
weights and compared with each link applied to ``X @ w``; anything else is refused with an error
saying what did not match.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor
from pymc.variational.inference import Inference
from pytensor.compile.mode import Mode
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, NormalRV
from scipy import special

from pymc_sfp._validation import as_generator, check_positive_int, is_integer
from pymc_sfp.core.tap import (
    Predictive,
    TAPResult,
    check_problem,
    predict,
    tap_fit,
)
from pymc_sfp.nn.perceptron import NoisyPerceptron, NoisyPerceptronRV

__all__ = ["TAP", "TAPApproximation", "fit_tap", "tap_model"]


class TAPApproximation(pm.FullRank):
    """A full-rank Gaussian approximation fixed at a TAP / EP solution.

    The posterior mean and covariance are PyMC's ``approx.mean.eval()`` and
    ``approx.cov.eval()`` (flattened weights), or the arrays ``approx.tap.mean`` and
    ``approx.tap.cov``; :meth:`predict` gives predictive probabilities for new inputs.

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
    hist : ndarray
        The residual history of the iteration (where ``pm.fit``'s approximations keep their loss
        history).
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

    def predict(self, X_new: Any) -> Predictive:
        """Bayes predictions for new inputs ``X_new`` (rows like the model's ``X``): the field
        ``X_new @ w``'s mean and variance under the approximation and ``P(y = +1 | x)``
        (:func:`pymc_sfp.core.tap.predict`).

        Raises
        ------
        FloatingPointError
            If the fit diverged and left no finite Gaussian.
        """
        self._check_finite()
        return predict(self.tap, X_new)

    def sample(self, draws: int = 500, *, random_seed: Any = None, **kwargs: Any) -> Any:
        """Draws from the Gaussian as :meth:`pymc.variational.opvi.Approximation.sample`, with
        ``loo_error``, ``log_evidence``, ``tap_variant`` and ``tap_converged`` in the attrs.

        Raises
        ------
        FloatingPointError
            If the fit diverged and left no finite Gaussian (its draws would all be NaN).
        """
        self._check_finite()
        out = super().sample(draws, random_seed=random_seed, **kwargs)
        if hasattr(out, "attrs"):
            out.attrs.update(
                loo_error=self.loo_error,
                log_evidence=self.log_evidence,
                tap_variant=self.tap.variant,
                tap_converged=int(self.tap.converged),
            )
        return out

    def _check_finite(self) -> None:
        if not (np.all(np.isfinite(self.tap.mean)) and np.all(np.isfinite(self.tap.cov))):
            raise FloatingPointError(
                f"the {self.tap.variant} TAP fit diverged after {self.tap.n_iter} iterations and "
                "left no finite Gaussian to draw from or predict with (see its "
                "TAPConvergenceWarning): lower damping, raise max_iter, or lower prior_var"
            )


#: Reading the model evaluates a few small graphs a few times: Python ops, no compilation.
_PROBE_MODE = Mode(linker="py", optimizer="fast_compile")


def _constant(value: Any, what: str, model: pm.Model) -> np.ndarray:
    """The value of a graph that must not depend on any model variable."""
    leaves = list(graph_inputs([value]))
    if any(v in model.value_vars or v in model.free_RVs for v in leaves):
        raise ValueError(f"fit_tap: {what} must be a constant, not depend on model variables")
    return np.asarray(value.eval(mode=_PROBE_MODE), dtype=float)


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
    y = np.asarray(model.rvs_to_values[obs].eval(mode=_PROBE_MODE), dtype=float)
    X = _design(model, obs, y)
    rng = np.random.default_rng(0)
    probe = [rng.normal(size=X.shape[1]) for _ in range(3)]
    if isinstance(obs.owner.op, BernoulliRV):
        # The arrays' ±1 coding would be recoded, but in a model it is impossible data.
        odd = sorted(set(np.unique(y).tolist()) - {0.0, 1.0})[:5]
        if odd:
            raise ValueError(
                f"fit_tap: the Bernoulli {obs.name!r} observes values other than 0 and 1 "
                f"({odd}), where its log-density is -inf"
            )
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
    if isinstance(obs.owner.op, NoisyPerceptronRV):
        field, beta = obs.owner.inputs[-2:]
        beta = _constant(beta, f"the beta of {obs.name!r}", model)
        if beta.size != 1:
            raise ValueError(f"fit_tap: the beta of {obs.name!r} must be a scalar")
        values = _evaluate(model, w, field, probe)
        if all(np.allclose(hv, X @ wv, atol=1e-10) for hv, wv in zip(values, probe, strict=True)):
            return {
                "likelihood": "perceptron",
                "X": X,
                "y": y,
                "prior_var": prior_var,
                "beta": float(beta.reshape(())),
                "w": w,
            }
        raise ValueError(
            f"fit_tap: the NoisyPerceptron {obs.name!r} must have field = X @ {w.name}"
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
        "supported: Bernoulli (probit or logit link), Normal and pymc_sfp.nn.NoisyPerceptron"
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
    fn = pytensor.function([w], param, on_unused_input="ignore", mode=_PROBE_MODE)
    return [np.asarray(fn(np.asarray(wv, dtype=w.dtype)), dtype=float) for wv in probe]


def _labels(y: np.ndarray, likelihood: str) -> np.ndarray:
    """Labels in the coding the model's likelihood takes: ``{0, 1}`` for Bernoulli, ``±1`` for
    the perceptron; either coding accepted."""
    values = set(np.unique(y).tolist())
    if not (values <= {0.0, 1.0} or values <= {-1.0, 1.0}):
        odd = sorted(values - {-1.0, 0.0, 1.0})[:5]
        raise ValueError(
            f"y: labels for the {likelihood} likelihood must be in {{-1, +1}} or {{0, 1}}; "
            f"found {odd}"
        )
    plus = y > 0
    return np.where(plus, 1, -1 if likelihood == "perceptron" else 0).astype(np.int64)


def tap_model(
    X: Any,
    y: Any,
    likelihood: str,
    *,
    prior_var: Any = 1.0,
    beta: float = np.nan,
    noise_var: float = np.nan,
) -> pm.Model:
    """The PyMC model of a TAP problem given as arrays, in the form :func:`fit_tap` reads.

    ``X`` becomes ``pm.Data("X", X)``, the weights ``w ~ Normal(0, √prior_var)`` with dim
    ``"feature"``, and the observed ``y`` has one entry per row of ``X`` (``shape=X.shape[0]``),
    so that ``pm.set_data({"X": X_new})`` followed by ``pm.sample_posterior_predictive`` predicts
    for new inputs. The field is ``h = X @ w``; the paper's ``Δ = w·s/√N`` with a unit prior is
    ``prior_var=1/N``.

    Parameters
    ----------
    X : array_like, shape (m, N)
        Inputs.
    y : array_like, shape (m,)
        Labels in ``{−1, +1}`` or ``{0, 1}`` (converted to the likelihood's coding: ``{0, 1}``
        for Bernoulli, ``±1`` for the perceptron), or real targets for ``"gaussian"``.
    likelihood : {"perceptron", "probit", "logistic", "gaussian"}
        :class:`pymc_sfp.nn.NoisyPerceptron` ``(field=X @ w, beta)``,
        ``Bernoulli(p=invprobit(X @ w))``, ``Bernoulli(logit_p=X @ w)`` or
        ``Normal(X @ w, √noise_var)``.
    prior_var : float or array_like, shape (N,)
        Prior variance of the weights.
    beta : float
        The perceptron's noise parameter, ``> 0`` (``inf``: no noise); perceptron only.
    noise_var : float
        The regression noise variance, ``> 0``; gaussian only.

    Returns
    -------
    pm.Model
    """
    X, y, v0 = check_problem(X, y, likelihood, prior_var, beta, noise_var)
    with pm.Model(coords={"feature": np.arange(X.shape[1])}) as model:
        X_data = pm.Data("X", X)
        w = pm.Normal("w", 0.0, np.sqrt(v0), dims="feature")
        field, rows = X_data @ w, X_data.shape[0]
        if likelihood == "gaussian":
            pm.Normal("y", mu=field, sigma=np.sqrt(noise_var), observed=y, shape=rows)
            return model
        labels = _labels(y, likelihood)
        if likelihood == "perceptron":
            NoisyPerceptron("y", field=field, beta=beta, observed=labels, shape=rows)
        else:
            p = {"p": pm.math.invprobit(field)} if likelihood == "probit" else {"logit_p": field}
            pm.Bernoulli("y", **p, observed=labels, shape=rows)
    return model


#: Settings of :func:`pymc_sfp.core.tap.tap_fit` that :func:`fit_tap` passes on.
_SOLVER_SETTINGS = ("damping", "tol", "max_iter", "batch")


def _approximation_seed(random_seed: Any) -> int | None:
    """The integer seed PyMC's approximation takes (a ``RandomState`` seed): an integer as
    given, one drawn from a Generator; anything else refused, naming ``random_seed``."""
    generator = as_generator(random_seed, "random_seed")
    if random_seed is None or is_integer(random_seed):
        return random_seed
    return int(generator.integers(2**31))


def fit_tap(
    model: pm.Model | None = None,
    *,
    X: Any = None,
    y: Any = None,
    likelihood: str | None = None,
    prior_var: Any = None,
    beta: float | None = None,
    noise_var: float | None = None,
    variant: str = "adaptive",
    random_seed: Any = None,
    **kwargs: Any,
) -> TAPApproximation:
    """TAP mean-field Bayes learning (Opper & Winther 1996; adaptive TAP / EP) of a PyMC model.

    Either a model (the argument, or the one in context) or arrays ``X``, ``y`` and
    ``likelihood`` (the model is then built by :func:`tap_model` and kept as ``approx.model``).

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: the one in context); see the module docstring for the supported
        structure.
    X, y, likelihood, prior_var, beta, noise_var : optional
        The array form, as in :func:`tap_model` (``prior_var`` defaults to 1); not with a model,
        whose prior and noise are read from its graph.
    variant : {"adaptive", "naive"}
        Adaptive TAP (per-example cavity variances, correct for correlated inputs) or the paper's
        naive ``Λ = 1 − q``.
    random_seed : int or Generator, optional
        Seeds PyMC's approximation object. The fit itself is deterministic and PyMC's
        ``.sample`` draws afresh unless given its own seed: reproducible draws need
        ``.sample(draws, random_seed=)``.
    **kwargs
        Passed to :func:`pymc_sfp.core.tap.tap_fit` (``damping``, ``tol``, ``max_iter``,
        ``batch``).

    Returns
    -------
    TAPApproximation
        With ``.sample(draws, random_seed=)``, :meth:`~TAPApproximation.predict`, ``loo_error``,
        ``loo_predictive``, ``log_evidence``, ``hist`` (residuals) and ``tap`` (the core
        result).
    """
    unknown = sorted(set(kwargs) - set(_SOLVER_SETTINGS))
    if unknown:
        raise TypeError(
            f"fit_tap got unknown keyword arguments {unknown}; the solver's settings are "
            f"{list(_SOLVER_SETTINGS)}"
        )
    arrays = {"X": X, "y": y, "likelihood": likelihood}
    settings = {"prior_var": prior_var, "beta": beta, "noise_var": noise_var}
    given = [k for k, v in {**arrays, **settings}.items() if v is not None]
    if any(v is not None for v in arrays.values()):
        missing = [k for k, v in arrays.items() if v is None]
        if model is not None or missing:
            raise ValueError(
                "fit_tap takes either a model or the arrays X, y and likelihood together"
                + (f"; missing {missing}" if missing else ", not both")
            )
        model = tap_model(
            X,
            y,
            likelihood,
            prior_var=1.0 if prior_var is None else prior_var,
            beta=np.nan if beta is None else beta,
            noise_var=np.nan if noise_var is None else noise_var,
        )
    elif given:
        raise ValueError(
            f"fit_tap: {given} go with the arrays X, y and likelihood; a model's prior and "
            "noise are read from its graph"
        )
    model = pm.modelcontext(model)
    problem = _read_model(model)
    result = tap_fit(
        problem["X"],
        problem["y"],
        problem["likelihood"],
        variant=variant,
        prior_var=problem["prior_var"],
        beta=problem.get("beta", np.nan),
        noise_var=problem.get("noise_var", np.nan),
        field_scale=1.0,
        **kwargs,
    )
    approx = TAPApproximation(model=model, random_seed=_approximation_seed(random_seed))
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
    approx.hist = result.residuals
    return approx


class TAP(Inference):
    """TAP mean-field learning as a PyMC ``Inference``: ``pm.fit(method=TAP(...))``.

    ``pm.fit(n, method=TAP())`` returns the same :class:`TAPApproximation` as :func:`fit_tap`.
    There is no stochastic optimisation: ``n`` caps the fixed-point iterations per stage (the
    core's ``max_iter``), the iteration stops earlier at ``tol``; ``approx.hist`` holds the
    residuals. ``pm.fit`` does not pass its ``model`` or ``random_seed`` to an instance, so the
    model is bound here (as PyMC's own ``ADVI(model=...)`` does) and the seed given here.

    Parameters
    ----------
    variant : {"adaptive", "naive"}
        As in :func:`fit_tap`.
    model : pm.Model, optional
        Default: the model in context.
    random_seed : int or Generator, optional
        As in :func:`fit_tap`.
    **tap_kwargs
        ``damping``, ``tol``, ``batch`` of :func:`pymc_sfp.core.tap.tap_fit`.

    Examples
    --------
    .. code-block:: python

        with model:
            approx = pm.fit(method=pymc_sfp.TAP(random_seed=1))
        idata = approx.sample(1000)
    """

    def __init__(
        self,
        variant: str = "adaptive",
        *,
        model: pm.Model | None = None,
        random_seed: Any = None,
        **tap_kwargs: Any,
    ) -> None:
        # Inference.__init__ builds a stochastic objective (operator, test function) that a
        # fixed-point method has no use for; only the attributes pm.fit reads are set.
        if "max_iter" in tap_kwargs:
            raise ValueError("TAP: the iteration cap is pm.fit's n (or TAP.fit's n), not max_iter")
        unknown = sorted(set(tap_kwargs) - set(_SOLVER_SETTINGS) - {"max_iter"})
        if unknown:
            raise TypeError(
                f"TAP got unknown keyword arguments {unknown}; it takes variant, model, "
                "random_seed, damping, tol and batch"
            )
        if variant not in ("adaptive", "naive"):
            raise ValueError(f"variant must be 'adaptive' or 'naive', got {variant!r}")
        self.model = pm.modelcontext(model)
        self.variant = variant
        _approximation_seed(random_seed)  # refused here rather than at pm.fit
        self.random_seed = random_seed
        self.tap_kwargs = tap_kwargs
        self.hist = np.asarray(())
        self.state = None
        self._approx: TAPApproximation | None = None

    @property
    def approx(self) -> TAPApproximation:
        """The result of the last :meth:`fit`."""
        if self._approx is None:
            raise AttributeError("TAP has no approximation before fit() is called")
        return self._approx

    def fit(
        self,
        n: int = 10000,
        score: bool | None = None,
        callbacks: list | None = None,
        progressbar: bool = True,
        progressbar_theme: Any = None,
        *,
        backend: str | None = None,
        include_transformed: bool = False,
        **kwargs: Any,
    ) -> TAPApproximation:
        """Solve the TAP equations for the bound model; the signature is ``Inference.fit``'s.

        ``n`` caps the iterations per stage; ``score``, ``progressbar``, ``progressbar_theme``
        and ``backend`` have nothing to act on (NumPy numerics, no loss) and are ignored.
        Callbacks and the stochastic optimiser's options (``obj_n_mc``, ``obj_optimizer``, ...)
        are refused.
        """
        if callbacks:
            raise ValueError("TAP takes no callbacks: it runs no optimisation steps")
        if kwargs:
            raise TypeError(
                f"TAP.fit got options of the stochastic optimisers {sorted(kwargs)}; TAP takes "
                "n (the iteration cap) and, at construction, variant, damping, tol and batch"
            )
        n = check_positive_int(n, "n")  # the iteration cap of pm.fit(n)
        approx = fit_tap(
            self.model,
            variant=self.variant,
            random_seed=self.random_seed,
            max_iter=n,
            **self.tap_kwargs,
        )
        for group in approx.groups:
            group.include_transformed = include_transformed
        self.hist = approx.hist
        self._approx = approx
        return approx

    def refine(self, n: int, progressbar: bool = True, progressbar_theme: Any = None) -> None:
        """Not available: a TAP fit is a converged fixed point, call :meth:`fit` again."""
        raise NotImplementedError("TAP cannot refine a fit; call fit() again with a larger n")

    def run_profiling(self, n: int = 1000, score: bool | None = None, **kwargs: Any) -> None:
        """Not available: there is no compiled step function to profile."""
        raise NotImplementedError("TAP has no compiled step function to profile")
