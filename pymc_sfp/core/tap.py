"""TAP mean-field Bayes learning for generalised linear models (Opper & Winther 1996), in NumPy.

Model: a Gaussian prior ``w ~ N(0, diag(v₀))`` on ``N`` weights (``v₀`` a scalar or one variance
per weight) and a likelihood that factorises over examples through the fields
``h_μ = c · w·s_μ`` with ``c = 1/√N`` by default (the paper's ``Δ_μ = w·s_μ/√N``):

``"perceptron"``
    The perceptron with output noise (paper Eq. 4): the label ``σ = sign(h)`` is flipped with
    probability ``e^(−β)/(1 + e^(−β))``, ``P(σ | h) = e^(−β Θ(−σh)) / (1 + e^(−β))``;
    ``β = inf`` is the noise-free perceptron.
``"probit"``
    ``P(σ | h) = Φ(σh)``.
``"logistic"``
    ``P(σ | h) = 1 / (1 + e^(−σh))``. Its Gaussian average has no closed form; it is computed
    by the trapezoidal rule in the standardised field ``t = (h − M)/√V`` on
    :data:`N_QUADRATURE` equally spaced nodes over ``|t| ≤ 13``. For an integrand analytic in a
    strip the rule converges exponentially; the sigmoid's poles at ``h = ±iπ`` sit at distance
    ``π/√V`` in ``t``, which bounds the relative error by about ``exp(−2π²/(0.05√V))``: below
    ``1e−8`` for cavity variances up to ``V ≈ 300``. (Gauss–Hermite with 64 nodes is off by
    ``1e−5`` already at ``V = 20``.)
``"gaussian"``
    Regression, ``y | h ~ N(h, noise_var)``. The method is then exact (one fixed point, the
    conjugate posterior), which the tests use as a check.

Every likelihood enters only through the Gaussian average of one example's likelihood over a
Gaussian field, ``Z(M, V) = ∫ P(y | h) N(h; M, V) dh``, and the first two derivatives of
``ln Z`` in ``M`` (for the perceptron ``Z`` and ``F = ∂ ln Z/∂x`` are the paper's Eqs. 7–9,
restated in ``NOTES.md`` §3). ``N(h; M, V)`` is the *cavity* distribution of the field: the
field of example ``μ`` under the posterior without example ``μ`` (paper Eq. 6).

Two ways to get the cavity variance ``V_μ``:

``variant="naive"``
    The paper's mean-field theory (Eqs. 7–9): ``⟨w⟩ = Σ_μ v₀ c s_μ ∂ln Z_μ/∂M_μ`` (Eq. 5 with
    Eq. 2), cavity mean ``M_μ = c ⟨w⟩·s_μ − Λ ∂ln Z_μ/∂M_μ`` (the Onsager term) and one cavity
    variance for all examples, ``Λ = c² s̄² Σ_i (v₀ᵢ − ⟨wᵢ⟩²)`` with ``s̄²`` the mean squared input
    component; for the paper's unit prior and unit inputs that is ``Λ = 1 − q``,
    ``q = |⟨w⟩|²/N``. Exact only for i.i.d. inputs in the thermodynamic limit. Solved by damped
    iteration with the data added a few examples at a time, as the paper does.
``variant="adaptive"``
    Adaptive TAP (Opper & Winther 2000/2001), whose fixed points are those of expectation
    propagation: each example carries a Gaussian site ``exp(−τ_μ h²/2 + ν_μ h)``; the Gaussian
    ``q(w) ∝ p(w) Π_μ site_μ`` gives each field a marginal ``N(m_μ, v_μ)``, the cavity removes
    the example's own site (``1/V_μ = 1/v_μ − τ_μ``), and matching the moments of
    ``P(y_μ | h) N(h; M_μ, V_μ)`` gives the site's new parameters. ``V_μ = s_μᵀ Σ s_μ c²``-based
    cavities are per example and correct for correlated inputs. Parallel (all sites at once)
    damped updates, ``O(m N² + N³)`` per iteration.

Outputs (:class:`TAPResult`): posterior mean and covariance of ``w``; Bayes predictive
probabilities for new inputs (:func:`predict`); the leave-one-out error estimate
``(1/m) Σ_μ Θ(−x_μ)``, ``x_μ = σ_μ M_μ`` (paper §6) and the leave-one-out predictive
probabilities ``Z_μ(M_μ, V_μ)``; an approximate log evidence (the EP / TAP free energy), which
:func:`select_hyperparameters` maximises over the prior variance and the noise level.

:func:`bayes_optimal_learning_curve` is the large-``N`` theory that the paper's Fig. 1 compares
with: the replica-symmetric generalisation error of Bayes-optimal learning of a noisy teacher.
"""

from __future__ import annotations

import contextlib
import warnings
from itertools import product
from typing import Any, NamedTuple

import numpy as np
from scipy import linalg, special

from pymc_sfp._validation import (
    as_matrix,
    check_positive_finite,
    check_positive_int,
    check_real,
)

__all__ = [
    "GROWTH_FACTOR",
    "GROWTH_WINDOW",
    "LIKELIHOODS",
    "N_QUADRATURE",
    "LearningCurve",
    "Predictive",
    "Selection",
    "TAPConvergenceWarning",
    "TAPResult",
    "TAPState",
    "bayes_optimal_learning_curve",
    "log_partition",
    "predict",
    "select_hyperparameters",
    "tap_fit",
]

#: The supported likelihoods (see the module docstring).
LIKELIHOODS = ("perceptron", "probit", "logistic", "gaussian")
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
#: Nodes of the trapezoidal rule for the logistic likelihood's Gaussian average (spacing 0.05).
N_QUADRATURE = 521
_T_NODES = np.linspace(-13.0, 13.0, N_QUADRATURE)
_LOG_T_WEIGHTS = -0.5 * _T_NODES**2 - _LOG_SQRT_2PI + np.log(_T_NODES[1] - _T_NODES[0])


#: Divergence by growth: from ``2 · GROWTH_WINDOW`` iterations of a stage on (looked at every
#: tenth), the median residual of the last ``GROWTH_WINDOW`` exceeding ``GROWTH_FACTOR`` times the
#: stage's start (the larger of its first residual and the median of its first window) stops the
#: fit. A converging iteration's
#: residuals fall: on 546 converging stages of naive and adaptive fits (perceptron, probit,
#: logistic, gaussian; damping 0.1–1) that median never rose above 0.16 times the start.
GROWTH_WINDOW, GROWTH_FACTOR = 50, 2.0


class TAPConvergenceWarning(UserWarning):
    """The TAP / EP iteration stopped at its iteration cap before reaching its tolerance, or
    diverged (overflowed, or its residuals grew) and was stopped early."""


class TAPState(NamedTuple):
    """The iteration's state: site parameters and cavity distributions of the fields.

    Attributes
    ----------
    site_prec, site_shift : ndarray, shape (m,)
        ``τ_μ`` and ``ν_μ`` of the Gaussian sites ``exp(−τ_μ h²/2 + ν_μ h)`` (zero for examples
        not yet added).
    cav_mean, cav_var : ndarray, shape (m,)
        Cavity mean ``M_μ`` and variance ``V_μ`` of each field (paper Eq. 6: ``⟨Δ_μ⟩_μ`` and
        ``Λ_μ``).
    """

    site_prec: np.ndarray
    site_shift: np.ndarray
    cav_mean: np.ndarray
    cav_var: np.ndarray


class TAPResult(NamedTuple):
    """A solved TAP / EP approximation.

    Attributes
    ----------
    mean : ndarray, shape (N,)
        Posterior mean ``⟨w⟩`` (paper Eq. 5).
    cov : ndarray, shape (N, N)
        Covariance of the Gaussian ``q(w) ∝ p(w) Π_μ site_μ``. For ``variant="naive"`` the sites
        are built from the naive fixed point (``τ_μ = γ_μ / (1 − γ_μ Λ)``).
    state : TAPState
        Sites and cavities at the end of the iteration.
    loo_error : float
        Leave-one-out estimate of the generalisation error, ``(1/m) Σ_μ Θ(−σ_μ M_μ)`` (paper §6);
        for ``"gaussian"`` the leave-one-out mean squared error ``(1/m) Σ_μ (y_μ − M_μ)²``.
    loo_predictive : ndarray, shape (m,)
        ``p(y_μ | data without μ) ≈ Z_μ(M_μ, V_μ)`` (a density for ``"gaussian"``).
    log_evidence : float
        Approximate ``ln p(y | X)``: the EP free energy at the solution (exact for
        ``"gaussian"``).
    converged : bool
        Whether the last residual is below ``tol``.
    n_iter : int
        Iterations done, all stages together.
    residuals : ndarray, shape (n_iter,)
        ``max_μ (|ΔM_μ| + |ΔV_μ|)`` per iteration: the history to read when it did not converge.
    variant, likelihood : str
        As passed to :func:`tap_fit`.
    beta, noise_var : float
        The perceptron's noise parameter and the regression noise variance (``nan`` where unused).
    prior_var : ndarray, shape (N,)
        The prior variances.
    field_scale : float
        ``c`` in ``h = c w·s``.
    diverged : str
        Why the iteration was stopped early, ``""`` if it was not: it overflowed, or its residuals
        grew (see :data:`GROWTH_FACTOR`); the stages after that one were not run.
    """

    mean: np.ndarray
    cov: np.ndarray
    state: TAPState
    loo_error: float
    loo_predictive: np.ndarray
    log_evidence: float
    converged: bool
    n_iter: int
    residuals: np.ndarray
    variant: str
    likelihood: str
    beta: float
    noise_var: float
    prior_var: np.ndarray
    field_scale: float
    diverged: str = ""

    @property
    def var(self) -> np.ndarray:
        """Posterior variances of ``w``, the diagonal of :attr:`cov`."""
        return np.diag(self.cov).copy()


class Predictive(NamedTuple):
    """Bayes predictions for new inputs.

    Attributes
    ----------
    field_mean, field_var : ndarray, shape (k,)
        Mean and variance of the field ``h = c w·s`` under the approximate posterior.
    prob : ndarray, shape (k,) or None
        ``P(y = +1 | s, data)``, the Gaussian average of the likelihood (``None`` for
        ``"gaussian"``, whose predictive of ``y`` is ``N(field_mean, field_var + noise_var)``).
    """

    field_mean: np.ndarray
    field_var: np.ndarray
    prob: np.ndarray | None


class Selection(NamedTuple):
    """Hyperparameters chosen by :func:`select_hyperparameters`.

    Attributes
    ----------
    prior_var : float
        The prior variance with the largest approximate log evidence.
    noise : float
        The chosen ``beta`` (perceptron) or ``noise_var`` (gaussian); ``nan`` for probit and
        logistic, which have no noise parameter.
    log_evidence : ndarray, shape (len(prior_vars), len(noises))
        The approximate log evidence on the grid.
    result : TAPResult
        The fit at the chosen values.
    """

    prior_var: float
    noise: float
    log_evidence: np.ndarray
    result: TAPResult


# --- one example's Gaussian average ------------------------------------------------------------


def _log_phi(z: np.ndarray) -> np.ndarray:
    return -0.5 * z**2 - _LOG_SQRT_2PI


def _erf_family(
    z: np.ndarray, sign: np.ndarray, scale: np.ndarray, log_floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ln Z`` and its ``M``-derivatives for ``Z = e^floor + (1 − e^floor) Φ(z)``,
    ``z = σ M / scale`` (probit: ``floor = −inf``; perceptron: ``floor = −β``)."""
    log_cdf = special.log_ndtr(z)
    log_gain = np.log1p(-np.exp(log_floor))
    log_z = np.logaddexp(log_floor, log_gain + log_cdf)
    # ρ = d ln Z / dz, computed in logs so that it stays finite far in the tails.
    rho = np.exp(log_gain + _log_phi(z) - log_z)
    return log_z, sign * rho / scale, -rho * (z + rho) / scale**2


def log_partition(
    likelihood: str,
    y: np.ndarray,
    cav_mean: np.ndarray,
    cav_var: np.ndarray,
    *,
    beta: float = np.nan,
    noise_var: float = np.nan,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ln Z_μ`` and its first two ``M_μ``-derivatives, ``Z_μ = ∫ P(y_μ|h) N(h; M_μ, V_μ) dh``.

    For the perceptron (paper Eq. 4) ``Z = [e^(−β) + (1 − e^(−β)) Φ(x/√Λ)] / (1 + e^(−β))`` with
    ``x = σM``; ``∂ ln Z/∂M = σ F(x)`` with the paper's ``F`` (Eqs. 7–9, NOTES §3); the
    normalising ``1/(1 + e^(−β))``, left out in the paper, is kept here for the evidence.

    Parameters
    ----------
    likelihood : {"perceptron", "probit", "logistic", "gaussian"}
    y : ndarray, shape (m,)
        Labels in ``{−1, +1}`` (classification) or targets (gaussian).
    cav_mean, cav_var : ndarray, shape (m,)
        ``M_μ`` and ``V_μ > 0``.
    beta : float
        The perceptron's noise parameter (``> 0``, ``inf`` for no noise).
    noise_var : float
        The regression noise variance (``> 0``).

    Returns
    -------
    log_z, dlog_z, d2log_z : ndarray, shape (m,)
    """
    M = np.asarray(cav_mean, dtype=float)
    V = np.asarray(cav_var, dtype=float)
    if likelihood == "gaussian":
        total = V + noise_var
        resid = y - M
        log_z = -0.5 * np.log(total) - _LOG_SQRT_2PI - 0.5 * resid**2 / total
        return log_z, resid / total, -1.0 / total
    if likelihood == "probit":
        scale = np.sqrt(1.0 + V)
        return _erf_family(y * M / scale, y, scale, -np.inf)
    if likelihood == "perceptron":
        scale = np.sqrt(V)
        log_z, d1, d2 = _erf_family(y * M / scale, y, scale, -beta)
        return log_z - np.log1p(np.exp(-beta)), d1, d2
    if likelihood == "logistic":
        # Trapezoid in t, h_k = M + √V t_k; the tilted distribution's mean and variance give the
        # derivatives (∂ ln Z/∂M = (E_t[h] − M)/V, ∂² ln Z/∂M² = (Var_t[h] − V)/V²).
        h = M[:, None] + np.sqrt(V)[:, None] * _T_NODES
        log_terms = _LOG_T_WEIGHTS - np.logaddexp(0.0, -y[:, None] * h)
        log_z = special.logsumexp(log_terms, axis=1)
        tilt = np.exp(log_terms - log_z[:, None])
        t_mean = np.sum(tilt * h, axis=1)
        t_var = np.sum(tilt * (h - t_mean[:, None]) ** 2, axis=1)
        return log_z, (t_mean - M) / V, (t_var - V) / V**2
    raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


# --- input checks ------------------------------------------------------------------------------


def check_problem(
    X: Any, y: Any, likelihood: str, prior_var: Any, beta: float, noise_var: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated ``(X, y, prior_var)`` of a TAP problem: ``X`` a finite matrix, ``y`` one finite
    value per row (labels recoded to ``±1`` except for ``"gaussian"``), ``prior_var`` one value
    > 0 per weight; ``beta > 0`` for the perceptron, ``noise_var > 0`` for ``"gaussian"``.
    Raises a ValueError naming what is wrong (a TypeError for a ``beta`` or ``noise_var`` that
    is not a real number)."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    beta, noise_var = check_real(beta, "beta"), check_real(noise_var, "noise_var")
    X = as_matrix(X, "X")
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError("y has NaN or infinite values")
    if likelihood == "gaussian":
        if not noise_var > 0 or not np.isfinite(noise_var):
            raise ValueError(f"the gaussian likelihood needs noise_var > 0, got {noise_var!r}")
    else:
        values = set(np.unique(y).tolist())
        if values <= {0.0, 1.0}:
            y = 2.0 * y - 1.0
        elif not values <= {-1.0, 1.0}:
            odd = sorted(values - {-1.0, 0.0, 1.0})[:5]
            raise ValueError(
                f"labels for the {likelihood} likelihood must be in {{-1, +1}} or {{0, 1}}; "
                f"found {odd}"
            )
    if likelihood != "perceptron" and not np.isnan(beta):
        raise ValueError(
            f"beta is the perceptron's noise parameter; the {likelihood} likelihood has none "
            f"(got beta={beta!r})"
        )
    if likelihood != "gaussian" and not np.isnan(noise_var):
        raise ValueError(
            f"noise_var is the gaussian likelihood's; the {likelihood} likelihood has none "
            f"(got noise_var={noise_var!r})"
        )
    if likelihood == "perceptron" and not beta > 0:
        raise ValueError(f"the perceptron likelihood needs beta > 0 (inf: no noise), got {beta!r}")
    prior_var = np.asarray(prior_var, dtype=float)
    if prior_var.ndim > 1 or prior_var.size not in (1, X.shape[1]):
        raise ValueError(
            f"prior_var must be a scalar or one value per weight ({X.shape[1]}), got shape "
            f"{prior_var.shape}"
        )
    v0 = np.broadcast_to(prior_var, (X.shape[1],)).copy()
    if not (np.isfinite(v0).all() and (v0 > 0).all()):
        raise ValueError("prior_var must be finite and > 0 (a scalar or one value per weight)")
    return X, y, v0


# --- the Gaussian q(w) from the sites -----------------------------------------------------------


def _gaussian(
    A: np.ndarray, v0: np.ndarray, tau: np.ndarray, nu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float] | None:
    """Mean, covariance, field means and variances of ``q(w) ∝ N(w; 0, diag v₀) Π sites``, and
    ``ln|Σ|``; ``None`` when the precision is not positive definite (negative sites) or the
    sites are not finite (a diverged iteration's last iterate)."""
    precision = np.diag(1.0 / v0) + (A.T * tau) @ A
    shift = A.T @ nu
    if not (np.isfinite(precision).all() and np.isfinite(shift).all()):
        return None
    try:
        chol = linalg.cholesky(precision, lower=True)
    except linalg.LinAlgError:
        return None
    mean = linalg.cho_solve((chol, True), shift)
    cov = linalg.cho_solve((chol, True), np.eye(len(v0)))
    log_det_cov = -2.0 * np.sum(np.log(np.diag(chol)))
    # diag(A Σ Aᵀ) through a matrix product: a triangular solve with OpenBLAS's threads was up to
    # 100× slower on a busy 2-core machine.
    return mean, cov, A @ mean, np.sum((A @ cov) * A, axis=1), log_det_cov


def _sites(
    d1: np.ndarray, d2: np.ndarray, M: np.ndarray, V: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Site parameters that match the tilted moments: with ``γ = −∂² ln Z``,
    ``τ = γ / (1 − γV)`` and ``ν = (∂ ln Z + γM) / (1 − γV)``."""
    gamma = -d2
    denom = 1.0 - gamma * V
    return gamma / denom, (d1 + gamma * M) / denom


def _log_evidence(
    A: np.ndarray,
    v0: np.ndarray,
    state: TAPState,
    log_z: np.ndarray,
    log_det_cov: float,
    mean_sites: np.ndarray,
) -> float:
    """The EP free energy, an approximation of ``ln p(y | X)``:
    ``ln Z_EP = ln ∫ p(w) Π site_μ dw + Σ_μ [ln Z_μ − ln ∫ site_μ N(M_μ, V_μ)]``.

    The first term is ``½ bᵀΣb + ½ ln|Σ| − ½ ln|diag v₀|`` with ``b = Aᵀν``; the second
    renormalises each site so that its product with the cavity integrates to ``Z_μ``.
    """
    tau, nu, M, V = state
    b = A.T @ nu
    gauss = 0.5 * b @ mean_sites + 0.5 * log_det_cov - 0.5 * np.sum(np.log(v0))
    prec = tau + 1.0 / V
    log_site_norm = -0.5 * np.log1p(tau * V) + 0.5 * (nu + M / V) ** 2 / prec - 0.5 * M**2 / V
    return float(gauss + np.sum(log_z - log_site_norm))


# --- the two iterations ---------------------------------------------------------------------


def _naive_step(
    A: np.ndarray,
    y: np.ndarray,
    v0: np.ndarray,
    M: np.ndarray,
    lam: float,
    damping: float,
    s2: float,
    lik: dict,
) -> tuple[np.ndarray, float]:
    """One damped sweep of the paper's Eqs. 7–9 on the active examples."""
    _, d1, _ = log_partition(lik["likelihood"], y, M, np.full_like(M, lam), **lik["params"])
    w = v0 * (A.T @ d1)
    lam_new = max(s2 * np.sum(v0 - w**2), 1e-12 * s2 * np.sum(v0))
    M_new = A @ w - lam * d1
    return (1.0 - damping) * M + damping * M_new, (1.0 - damping) * lam + damping * lam_new


def _adaptive_step(
    A: np.ndarray, y: np.ndarray, v0: np.ndarray, state: TAPState, damping: float, lik: dict
) -> TAPState | None:
    """One damped parallel EP update of every active site; ``None`` if ``q`` is not proper."""
    tau, nu, _, _ = state
    gauss = _gaussian(A, v0, tau, nu)
    if gauss is None:
        return None
    _, _, m, v, _ = gauss
    cav_prec = 1.0 / v - tau
    ok = cav_prec > 0  # a site whose cavity is improper keeps its old value this sweep
    V = np.where(ok, 1.0 / np.where(ok, cav_prec, 1.0), state.cav_var)
    M = np.where(ok, (m / v - nu) * V, state.cav_mean)
    _, d1, d2 = log_partition(lik["likelihood"], y, M, V, **lik["params"])
    tau_new, nu_new = _sites(d1, d2, M, V)
    tau_new = np.where(ok, tau_new, tau)
    nu_new = np.where(ok, nu_new, nu)
    return TAPState(
        (1.0 - damping) * tau + damping * tau_new, (1.0 - damping) * nu + damping * nu_new, M, V
    )


def _step(
    variant: str,
    A: np.ndarray,
    y: np.ndarray,
    v0: np.ndarray,
    tau: np.ndarray,
    nu: np.ndarray,
    M: np.ndarray,
    V: np.ndarray,
    lam: float,
    lik: dict,
) -> tuple[float, Any, float] | None:
    """One iteration of either variant: ``(residual, new M or new state, new Λ)``."""
    damping = lik["damping"]
    if variant == "naive":
        M_new, lam_new = _naive_step(A, y, v0, M, lam, damping, lik["s2"], lik)
        return float(np.max(np.abs(M_new - M))) + abs(lam_new - lam), M_new, lam_new
    new = _adaptive_step(A, y, v0, TAPState(tau, nu, M, V), damping, lik)
    if new is None:
        return None
    return float(np.max(np.abs(new.cav_mean - M) + np.abs(new.cav_var - V))), new, lam


def tap_fit(
    X: Any,
    y: Any,
    likelihood: str,
    *,
    variant: str = "adaptive",
    prior_var: Any = 1.0,
    beta: float = np.nan,
    noise_var: float = np.nan,
    field_scale: float | None = None,
    damping: float = 0.5,
    tol: float = 1e-8,
    max_iter: int = 1000,
    batch: int | None = None,
) -> TAPResult:
    """Solve the TAP mean-field equations (naive: paper Eqs. 7–9; adaptive: EP fixed point).

    Parameters
    ----------
    X : array_like, shape (m, N)
        Inputs ``s_μ`` (finite).
    y : array_like, shape (m,)
        Labels in ``{−1, +1}`` or ``{0, 1}`` (classification) or real targets (gaussian).
    likelihood : {"perceptron", "probit", "logistic", "gaussian"}
        See the module docstring.
    variant : {"adaptive", "naive"}
        Per-example cavity variances from the current Gaussian (adaptive TAP / EP), or the
        paper's single ``Λ = 1 − q`` (naive).
    prior_var : float or array_like, shape (N,)
        Prior variance of the weights, isotropic or one per weight.
    beta : float
        The perceptron's noise parameter (paper Eq. 4), ``> 0``; ``inf`` for no noise.
    noise_var : float
        The gaussian likelihood's noise variance, ``> 0``.
    field_scale : float, optional
        ``c`` in ``h = c w·s``; default ``1/√N`` (the paper's fields). ``1.0`` gives ``h = X w``.
    damping : float
        Step size in ``(0, 1]``: each update moves this fraction of the way to the new value.
        Lower it when the iteration oscillates.
    tol : float
        Stop when ``max_μ (|ΔM_μ| + |ΔV_μ|) < tol``.
    max_iter : int
        Iteration cap per stage (see ``batch``).
    batch : int, optional
        Add the examples this many at a time, iterating to convergence after each addition (the
        paper's "increase the number of data in steps of 1–10"). Default: 5 for ``"naive"``,
        all at once for ``"adaptive"``.

    Returns
    -------
    TAPResult

    Raises
    ------
    TypeError
        If a setting is not a number of the right kind (``max_iter`` and ``batch`` integers,
        ``damping``, ``tol``, ``beta``, ``noise_var``, ``field_scale`` real numbers), named.
    ValueError
        If a setting is out of its range (``damping`` in ``(0, 1]``, ``tol`` and
        ``field_scale`` finite and > 0, ``max_iter`` and ``batch`` ≥ 1) or the data are not
        as described, named.

    Warns
    -----
    TAPConvergenceWarning
        When a stage reaches ``max_iter`` without meeting ``tol``, or the iteration diverges: it
        overflows, or after ``2 · GROWTH_WINDOW`` (100) iterations of a stage the median of its
        last 50 residuals is more than twice the stage's start. A diverging fit stops there,
        without running the later stages (``result.diverged`` says why); the message says what to
        change and the residual history is ``result.residuals``.
    """
    if variant not in ("adaptive", "naive"):
        raise ValueError(f"variant must be 'adaptive' or 'naive', got {variant!r}")
    damping = check_real(damping, "damping")
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping must be in (0, 1], got {damping!r}")
    tol = check_positive_finite(tol, "tol")
    max_iter = check_positive_int(max_iter, "max_iter")
    if batch is not None:
        batch = check_positive_int(batch, "batch")
    X, y, v0 = check_problem(X, y, likelihood, prior_var, beta, noise_var)
    n = X.shape[1]
    c = (
        1.0 / np.sqrt(n)
        if field_scale is None
        else check_positive_finite(field_scale, "field_scale")
    )
    # EP's cavity of a row of zeros, whose field is 0 whatever w, is a point mass (variance 0,
    # a division by zero in the update); its likelihood is a constant that leaves q(w) alone.
    # The naive theory's cavity is the same Λ for every example, so it needs no exception.
    informative = np.any(X != 0.0, axis=1) if variant == "adaptive" else np.ones(len(y), bool)
    if not informative.any():
        raise ValueError("X: every row is zero, so the data say nothing about the weights")
    A, y_all, y = c * X[informative], y, y[informative]
    m = len(y)
    if batch is None:
        batch = 5 if variant == "naive" else m
    lik = {"likelihood": likelihood, "params": {"beta": beta, "noise_var": noise_var}}
    lik.update(damping=damping, s2=float(np.mean(A**2)))
    stops = [*range(batch, m, batch), m]

    residuals: list[float] = []
    tau, nu = np.zeros(m), np.zeros(m)
    M, V = np.zeros(m), np.full(m, float(np.sum(v0 * np.mean(A**2, axis=0))))
    lam = float(lik["s2"] * np.sum(v0))
    converged, diverged, prev = False, "", 0
    for stage, k in enumerate(stops, 1):
        if variant == "naive" and prev > 0:
            # A newly added example's cavity is the current posterior's prediction for it.
            M[prev:k] = A[prev:k] @ _naive_mean(A[:prev], y[:prev], v0, M[:prev], lam, lik)
        prev, converged, stage_start = k, False, len(residuals)
        where = f"in stage {stage} of {len(stops)} (the first {k} of {m} examples)"
        for _ in range(int(max_iter)):
            # A diverging iteration overflows; it is caught here, its step is dropped (the result
            # keeps the last finite iterate) and it is reported as not converged.
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                new = _step(variant, A[:k], y[:k], v0, tau[:k], nu[:k], M[:k], V[:k], lam, lik)
            if new is None or not np.isfinite(new[0]) or not np.isfinite(new[2]):
                diverged = f"it overflowed {where}"
                break
            resid, lam = new[0], new[2]
            if variant == "naive":
                M[:k] = new[1]
            else:
                tau[:k], nu[:k], M[:k], V[:k] = new[1]
            residuals.append(resid)
            if resid < tol:
                converged = True
                break
            growth = _growth(residuals[stage_start:])
            if growth:
                diverged = f"{growth} {where}"
                break
        if diverged:
            break
    result = _finish(
        A, y, v0, variant, lik, tau, nu, M, V, lam, converged, diverged, residuals, c, damping
    )
    return result if informative.all() else _with_rows_of_zeros(result, y_all, informative)


def _growth(stage: list[float]) -> str:
    """``""``, or how a stage's residuals grew (see :data:`GROWTH_FACTOR`); looked at every
    tenth iteration, which costs little next to the iteration's own."""
    if len(stage) < 2 * GROWTH_WINDOW or len(stage) % 10:
        return ""
    start = max(stage[0], float(np.median(stage[:GROWTH_WINDOW])))
    recent = float(np.median(stage[-GROWTH_WINDOW:]))
    if recent <= GROWTH_FACTOR * start:
        return ""
    return (
        f"its residuals grew from {start:.3g} to a median of {recent:.3g} over the last "
        f"{GROWTH_WINDOW} of {len(stage)} iterations"
    )


def _with_rows_of_zeros(result: TAPResult, y: np.ndarray, informative: np.ndarray) -> TAPResult:
    """``result``, fitted to the rows of ``X`` that are not zero, for all the examples ``y``.

    A row of zeros has the field ``h = 0`` whatever the weights: its site is flat (``τ = ν = 0``),
    its cavity the point mass at 0 (``M = V = 0``), and its likelihood ``P(y | h = 0)``, a
    factor of the evidence: ``N(y; 0, noise_var)`` for ``"gaussian"``, ½ for the classification
    likelihoods, which are symmetric in ``h`` (the perceptron's as the limit of ``Z`` as
    ``V → 0``).
    """

    def on_every_example(values: np.ndarray) -> np.ndarray:
        full = np.zeros(len(y))
        full[informative] = values
        return full

    state = TAPState(*map(on_every_example, result.state))
    if result.likelihood == "gaussian":
        log_z = -0.5 * np.log(result.noise_var) - _LOG_SQRT_2PI - 0.5 * y**2 / result.noise_var
        loo_error = float(np.mean((y - state.cav_mean) ** 2))
    else:
        log_z = np.full(len(y), -np.log(2.0))
        loo_error = float(np.mean(y * state.cav_mean <= 0))
    loo_predictive = np.exp(log_z)
    loo_predictive[informative] = result.loo_predictive
    return result._replace(
        state=state,
        loo_error=loo_error,
        loo_predictive=loo_predictive,
        log_evidence=result.log_evidence + float(np.sum(log_z[~informative])),
    )


def _naive_mean(
    A: np.ndarray, y: np.ndarray, v0: np.ndarray, M: np.ndarray, lam: float, lik: dict
) -> np.ndarray:
    """The paper's ``⟨w⟩ = Σ_μ v₀ c s_μ ∂ln Z_μ/∂M_μ`` (Eq. 5) at cavity means ``M``."""
    _, d1, _ = log_partition(lik["likelihood"], y, M, np.full_like(M, lam), **lik["params"])
    return v0 * (A.T @ d1)


def _finish(
    A: np.ndarray,
    y: np.ndarray,
    v0: np.ndarray,
    variant: str,
    lik: dict,
    tau: np.ndarray,
    nu: np.ndarray,
    M: np.ndarray,
    V: np.ndarray,
    lam: float,
    converged: bool,
    diverged: str,
    residuals: list[float],
    c: float,
    damping: float,
) -> TAPResult:
    """Assemble the result: Gaussian ``q``, leave-one-out figures, evidence; warn if needed."""
    # After a divergence the last finite iterate can be extreme; its figures are reported as
    # they come out (inf, nan) next to the warning rather than raising on the way.
    quiet = np.errstate(all="ignore") if diverged else contextlib.nullcontext()
    with quiet:
        name, params = lik["likelihood"], lik["params"]
        if variant == "naive":
            V = np.full(len(y), lam)
            log_z, d1, d2 = log_partition(name, y, M, V, **params)
            tau, nu = _sites(d1, d2, M, V)
            mean = v0 * (A.T @ d1)
        else:
            log_z, _, _ = log_partition(name, y, M, V, **params)
        gauss = _gaussian(A, v0, tau, nu)
        if gauss is None:
            converged = False
            n = len(v0)
            mean_sites, cov, log_det = np.full(n, np.nan), np.full((n, n), np.nan), np.nan
            if variant == "adaptive":
                mean = mean_sites
        else:
            mean_sites, cov, _, _, log_det = gauss
            if variant == "adaptive":
                mean = mean_sites
        state = TAPState(tau, nu, M, V)
        if name == "gaussian":
            loo_error = float(np.mean((y - M) ** 2))
        else:
            loo_error = float(np.mean(y * M <= 0))
        log_evidence = _log_evidence(A, v0, state, log_z, log_det, mean_sites)
    if not converged:
        last = residuals[-1] if residuals else np.nan
        if diverged:
            message = (
                f"{variant} TAP diverged: {diverged}, and was stopped there (last residual "
                f"{last:.3g}, {len(residuals)} iterations in all; later stages not run): lower "
                f"damping (now {damping}) or prior_var (or, for the perceptron, beta)"
                + (", or use variant='adaptive'" if variant == "naive" else "")
            )
        else:
            message = (
                f"{variant} TAP did not converge (last residual {last:.3g}, {len(residuals)} "
                f"iterations): lower damping (now {damping}), raise max_iter, or lower "
                "prior_var (or, for the perceptron, beta)"
            )
        warnings.warn(
            f"{message}; the residual history is result.residuals",
            TAPConvergenceWarning,
            stacklevel=3,
        )
    return TAPResult(
        mean=mean,
        cov=cov,
        state=state,
        loo_error=loo_error,
        loo_predictive=np.exp(log_z),
        log_evidence=log_evidence,
        converged=converged,
        n_iter=len(residuals),
        residuals=np.asarray(residuals),
        variant=variant,
        likelihood=name,
        beta=float(params["beta"]),
        noise_var=float(params["noise_var"]),
        prior_var=v0,
        field_scale=c,
        diverged=diverged,
    )


def predict(result: TAPResult, X_new: Any) -> Predictive:
    """Bayes predictions for new inputs (paper §6), with predictive probabilities.

    The field ``h = c w·s`` of a new input is Gaussian under ``q`` with mean ``c ⟨w⟩·s`` and
    variance ``c² sᵀΣs``; the predictive probability is the likelihood's Gaussian average over it,
    ``P(+1 | s) = Z(+1; mean, var)``. For the perceptron its sign is the paper's Bayes label
    ``sign(⟨w⟩·s)``.

    Parameters
    ----------
    result : TAPResult
    X_new : array_like, shape (k, N)

    Returns
    -------
    Predictive
    """
    X_new = as_matrix(X_new, "X_new")
    if X_new.shape[1] != len(result.mean):
        raise ValueError(f"X_new must have {len(result.mean)} columns, got {X_new.shape[1]}")
    A = result.field_scale * X_new
    f_mean = A @ result.mean
    if result.variant == "naive":
        # The naive theory's field variance of an input outside the training set (Eq. 6 ansatz).
        f_var = np.full(len(A), result.state.cav_var[0])
    else:
        f_var = np.einsum("ij,jk,ik->i", A, result.cov, A)
    if result.likelihood == "gaussian":
        return Predictive(f_mean, f_var, None)
    log_z, _, _ = log_partition(
        result.likelihood,
        np.ones(len(A)),
        f_mean,
        np.maximum(f_var, np.finfo(float).tiny),
        beta=result.beta,
        noise_var=result.noise_var,
    )
    return Predictive(f_mean, f_var, np.exp(log_z))


def select_hyperparameters(
    X: Any,
    y: Any,
    likelihood: str,
    *,
    prior_vars: Any,
    noises: Any = None,
    **fit_kwargs: Any,
) -> Selection:
    """Choose the prior variance and the noise level by maximising the approximate evidence.

    A grid search (the free energy of a non-log-concave likelihood such as the noisy perceptron
    can have several maxima, which a local optimiser would not see): :func:`tap_fit` at every
    pair, the pair with the largest ``log_evidence`` wins (the evidence framework that the paper's
    conclusion asks for).

    Parameters
    ----------
    X, y, likelihood
        As in :func:`tap_fit`.
    prior_vars : array_like
        Candidate isotropic prior variances.
    noises : array_like, optional
        Candidate ``beta`` (perceptron) or ``noise_var`` (gaussian); required for those two,
        refused for probit and logistic.
    **fit_kwargs
        Passed to :func:`tap_fit` (``variant``, ``damping``, ...).

    Returns
    -------
    Selection
    """
    prior_vars = np.atleast_1d(np.asarray(prior_vars, dtype=float))
    noise_key = {"perceptron": "beta", "gaussian": "noise_var"}.get(likelihood)
    if noise_key is None:
        if noises is not None:
            raise ValueError(f"the {likelihood} likelihood has no noise parameter; drop noises")
        noise_grid = np.array([np.nan])
    else:
        if noises is None:
            raise ValueError(f"the {likelihood} likelihood needs candidate noises ({noise_key})")
        noise_grid = np.atleast_1d(np.asarray(noises, dtype=float))
    table = np.empty((len(prior_vars), len(noise_grid)))
    for (i, v), (j, s) in product(enumerate(prior_vars), enumerate(noise_grid)):
        extra = {} if noise_key is None else {noise_key: s}
        table[i, j] = tap_fit(X, y, likelihood, prior_var=v, **extra, **fit_kwargs).log_evidence
    i, j = np.unravel_index(np.nanargmax(table), table.shape)
    extra = {} if noise_key is None else {noise_key: noise_grid[j]}
    best = tap_fit(X, y, likelihood, prior_var=prior_vars[i], **extra, **fit_kwargs)
    return Selection(float(prior_vars[i]), float(noise_grid[j]), table, best)


class LearningCurve(NamedTuple):
    """The large-``N`` replica-symmetric theory of Bayes-optimal learning (the dashed line of the
    paper's Fig. 1), from :func:`bayes_optimal_learning_curve`.

    Attributes
    ----------
    alpha : ndarray
        ``α = m/N``.
    overlap : ndarray
        ``q``: the overlap of the posterior mean with the teacher, ``⟨w⟩·w*/N`` (= ``|⟨w⟩|²/N``
        in the Bayes-optimal setting).
    error : ndarray
        Generalisation error of the Bayes prediction ``sign(⟨w⟩·s)`` against the teacher's
        noise-free label, ``arccos(√q)/π``.
    error_noisy : ndarray
        The same against the noisy labels, ``ε_f + (1 − 2ε_f) · error`` with the flip rate
        ``ε_f = 1/(1 + e^β)`` (what the leave-one-out estimate measures).
    """

    alpha: np.ndarray
    overlap: np.ndarray
    error: np.ndarray
    error_noisy: np.ndarray


def bayes_optimal_learning_curve(
    alpha: Any, beta: float, *, tol: float = 1e-12, max_iter: int = 10_000
) -> LearningCurve:
    """Generalisation error of Bayes-optimal learning of a noisy teacher perceptron as ``N → ∞``.

    Teacher and student share the prior ``w ~ N(0, I_N)`` and the likelihood of Eq. 4 (the
    setting of the paper's Fig. 1, whose dashed line is this result of Opper & Haussler 1991).
    In this matched setting the replica-symmetric saddle point has one order parameter ``q``,
    the solution of

    ``q = q̂ / (1 + q̂)``,  ``q̂ = α ∫ Dξ Σ_σ Z(σ; √q ξ, 1 − q) (∂_M ln Z(σ; √q ξ, 1 − q))²``

    with ``Z(σ; M, V)`` the Gaussian average of the likelihood of :func:`log_partition` and
    ``Dξ`` the standard normal measure (the trapezoidal rule on 2401 nodes whose spacing follows
    the integrand's scale).

    Parameters
    ----------
    alpha : float or array_like
        ``α = m/N ≥ 0``.
    beta : float
        The noise parameter, ``> 0`` (``inf``: noise-free).
    tol, max_iter
        The damped fixed-point iteration in ``q`` stops when ``|Δq| < tol``.

    Returns
    -------
    LearningCurve
    """
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    if not (np.isfinite(alpha).all() and (alpha >= 0).all()):
        raise ValueError("alpha must be finite and >= 0")
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (inf: no noise), got {beta!r}")
    t = np.linspace(-12.0, 12.0, 2401)
    ones = np.ones_like(t)

    def q_hat(q: float) -> float:
        # The integrand varies on the scale √((1 − q)/q) in ξ (through M/√V), which shrinks
        # as q → 1: the trapezoid nodes ξ = c t are scaled to resolve it.
        c = min(1.0, np.sqrt((1.0 - q) / q)) if q > 0 else 1.0
        xi = c * t
        M, V = np.sqrt(q) * xi, np.full_like(xi, 1.0 - q)
        total = np.zeros_like(xi)
        for sign in (1.0, -1.0):
            log_z, d1, _ = log_partition("perceptron", sign * ones, M, V, beta=beta)
            total += np.exp(log_z) * d1**2
        return float(np.sum(np.exp(_log_phi(xi)) * total) * c * (t[1] - t[0]))

    overlap = np.empty_like(alpha)
    for i, a in enumerate(alpha):
        # From q = 0 the iterates increase monotonically to the fixed point (the map is
        # increasing); a smaller α's solution lies below it and is a closer start.
        below = overlap[:i][alpha[:i] <= a]
        q = float(below.max()) if below.size else 0.0
        for _ in range(int(max_iter)):
            hat = a * q_hat(q)
            q_new = hat / (1.0 + hat)
            if abs(q_new - q) < tol:
                break
            q = q_new
        else:
            warnings.warn(
                f"the learning curve's fixed point at alpha={a} did not converge",
                TAPConvergenceWarning,
                stacklevel=2,
            )
        overlap[i] = q_new
    error = np.arccos(np.sqrt(overlap)) / np.pi
    flip = np.exp(-beta) / (1.0 + np.exp(-beta))
    return LearningCurve(alpha, overlap, error, flip + (1.0 - 2.0 * flip) * error)
