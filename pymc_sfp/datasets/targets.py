"""Multimodal test targets whose answers are known exactly: mode weights and the log evidence.

Each target is a PyMC model with a proper prior on ``x`` and a normalised density as the
likelihood (``pm.Potential("likelihood", ...)``), so that samplers which need a proper prior
(``pm.sample_smc``, :class:`~pymc_sfp.ParallelTempering`) and those which do not run on the same
posterior, and so that ``log p(y) = log ∫ p(x) L(x) dx`` has a closed form.

* :class:`GaussianMixtureTarget` — a mixture of isotropic Gaussians as the likelihood, under a
  uniform prior on a box or a centred normal prior.
* :class:`RingTarget` — a ring of radius ``r`` and width ``s`` in the ``(x1, x2)`` plane, width
  ``s`` along ``x3``, under a uniform prior on a box; its four "modes" are the quadrants.
* :func:`multimodal_targets` — the named set that the tests and the tempering benchmarks use.

The free variable always has shape ``(d,)``, also for ``d = 1``, so that every target is handled
by the same code (draws of shape ``(chain, draw, d)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import special, stats

from pymc_sfp._validation import check_positive_finite

__all__ = ["GaussianMixtureTarget", "RingTarget", "multimodal_targets"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _check_bounds(bounds: tuple[float, float] | None) -> tuple[float, float]:
    if bounds is None or np.shape(bounds) != (2,):
        raise ValueError(f"bounds must be a pair (lo, hi), got {bounds!r}")
    lo, hi = (float(b) for b in bounds)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with lo < hi, got {bounds!r}")
    return lo, hi


def _log_interval_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Φ(b) − Φ(a))`` for ``a < b``, computed in the lower tail, where it keeps its
    precision when the interval is far from 0 on either side."""
    flip = a > 0
    a, b = np.where(flip, -b, a), np.where(flip, -a, b)
    log_b = special.log_ndtr(b)
    return log_b + np.log1p(-np.exp(special.log_ndtr(a) - log_b))


def _frozen(values: np.ndarray) -> np.ndarray:
    values = np.array(values, dtype=float)
    values.setflags(write=False)
    return values


@dataclass(frozen=True, eq=False)
class GaussianMixtureTarget:
    r"""Likelihood ``L(x) = Σ_k w_k N(x; μ_k, s_k² I)`` under a uniform or a normal prior.

    Parameters
    ----------
    name : str
        The target's name in tables.
    weights : array, shape (K,)
        Mixture weights ``w_k``, positive, summing to 1.
    means : array, shape (K, d)
        Mode means ``μ_k``.
    sds : array, shape (K,)
        Isotropic standard deviation ``s_k`` of each mode, positive.
    prior : {"uniform", "normal"}, default "uniform"
        ``"uniform"``: ``x ~ U(lo, hi)^d`` with ``bounds=(lo, hi)``; ``"normal"``:
        ``x ~ N(0, prior_sd²)^d``.
    bounds : tuple of float, optional
        ``(lo, hi)`` of the uniform prior's box, the same for every coordinate.
    prior_sd : float, optional
        Standard deviation of the normal prior.

    Notes
    -----
    The posterior is the mixture of the ``K`` components, each multiplied by the prior. Under
    the uniform prior the weight of component ``k`` is ``w_k`` times its mass inside the box, and
    ``p(y) = Σ_k w_k mass_k / (hi − lo)^d``. Under the normal prior each component convolves with
    the prior: the weight is proportional to ``w_k N(μ_k; 0, (prior_sd² + s_k²) I)``, and
    ``p(y)`` is the sum of those terms. The mode *weights* are the posterior masses of the
    components, which are what a mode indicator estimates when the modes are well separated.
    """

    name: str
    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray
    prior: Literal["uniform", "normal"] = "uniform"
    bounds: tuple[float, float] | None = None
    prior_sd: float | None = None

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, dtype=float)
        means = np.asarray(self.means, dtype=float)
        sds = np.asarray(self.sds, dtype=float)
        if weights.ndim != 1 or weights.size == 0 or not np.all(weights > 0):
            raise ValueError(
                f"weights must be a non-empty vector of positive values, got {weights}"
            )
        if abs(weights.sum() - 1.0) > 1e-9:
            raise ValueError(f"weights must sum to 1, got a sum of {weights.sum()!r}")
        if means.ndim != 2 or means.shape[0] != weights.size or means.shape[1] == 0:
            raise ValueError(
                f"means must have shape (K, d) with K = len(weights) = {weights.size}, got shape "
                f"{means.shape}"
            )
        if not np.all(np.isfinite(means)):
            raise ValueError("means must be finite")
        if sds.shape != weights.shape or not np.all((sds > 0) & np.isfinite(sds)):
            raise ValueError(
                f"sds must have shape ({weights.size},) with positive finite values, got {sds}"
            )
        if self.prior == "uniform":
            object.__setattr__(self, "bounds", _check_bounds(self.bounds))
            if self.prior_sd is not None:
                raise ValueError("prior_sd is for prior='normal'; the uniform prior takes bounds")
        elif self.prior == "normal":
            if self.prior_sd is None:
                raise ValueError("prior_sd must be a finite number > 0, got None")
            check_positive_finite(self.prior_sd, "prior_sd")
            if self.bounds is not None:
                raise ValueError("bounds are for prior='uniform'; the normal prior takes prior_sd")
            object.__setattr__(self, "prior_sd", float(self.prior_sd))
        else:
            raise ValueError(f"prior must be 'uniform' or 'normal', got {self.prior!r}")
        object.__setattr__(self, "weights", _frozen(weights))
        object.__setattr__(self, "means", _frozen(means))
        object.__setattr__(self, "sds", _frozen(sds))

    @property
    def dim(self) -> int:
        """The dimension ``d``."""
        return int(self.means.shape[1])

    @property
    def n_modes(self) -> int:
        """The number of modes ``K``."""
        return int(self.weights.size)

    @property
    def mode_centres(self) -> np.ndarray:
        """A point in each mode, shape ``(K, d)``: the means (e.g. for dispersed chain starts)."""
        return self.means

    def model(self, name: str = "x") -> pm.Model:
        """A model with the free variable ``name`` of shape ``(d,)``, its prior, and the mixture
        density as ``pm.Potential("likelihood", ...)``."""
        with pm.Model() as model:
            # Float64 arrays: PyTensor would store Python floats such as 10.0 as float32
            # constants, and the prior's log-density would be off by ~1e-7.
            if self.prior == "uniform":
                x = pm.Uniform(name, *np.array(self.bounds), shape=self.dim)
            else:
                x = pm.Normal(name, np.float64(0.0), np.float64(self.prior_sd), shape=self.dim)
            squared = pt.sum((x[None, :] - self.means) ** 2, axis=1)
            per_mode = (
                np.log(self.weights)
                - 0.5 * squared / self.sds**2
                - self.dim * (np.log(self.sds) + 0.5 * _LOG_2PI)
            )
            pm.Potential("likelihood", pm.math.logsumexp(per_mode))
        return model

    def _log_masses(self) -> np.ndarray:
        """``log w_k + log ∫ prior(x) N(x; μ_k, s_k² I) dx`` for each component."""
        if self.prior == "uniform":
            lo, hi = self.bounds
            inside = _log_interval_mass(
                (lo - self.means) / self.sds[:, None], (hi - self.means) / self.sds[:, None]
            )
            return np.log(self.weights) + inside.sum(axis=1) - self.dim * np.log(hi - lo)
        variance = self.prior_sd**2 + self.sds**2
        log_density = -0.5 * (
            np.sum(self.means**2, axis=1) / variance + self.dim * (np.log(variance) + _LOG_2PI)
        )
        return np.log(self.weights) + log_density

    @property
    def posterior_weights(self) -> np.ndarray:
        """The exact posterior mass of each component, shape ``(K,)``."""
        log_masses = self._log_masses()
        return np.exp(log_masses - special.logsumexp(log_masses))

    @property
    def log_evidence(self) -> float:
        """The exact ``log ∫ prior(x) L(x) dx``."""
        return float(special.logsumexp(self._log_masses()))

    def mode_labels(self, draws: np.ndarray) -> np.ndarray:
        """The mode of each draw: the index of the nearest mean, the distance measured in units
        of that mode's sd.

        Parameters
        ----------
        draws : array, shape (..., d)

        Returns
        -------
        ndarray of int, shape (...)

        Notes
        -----
        This identifies the component a draw came from only when the modes are well separated
        (every draw far closer to its own mean, in its own sd, than to any other), as in the
        targets of :func:`multimodal_targets`.
        """
        draws = np.asarray(draws, dtype=float)
        if draws.shape[-1:] != (self.dim,):
            raise ValueError(f"draws must have shape (..., {self.dim}), got {draws.shape}")
        scaled = np.linalg.norm(draws[..., None, :] - self.means, axis=-1) / self.sds
        return np.argmin(scaled, axis=-1)


@dataclass(frozen=True, eq=False)
class RingTarget:
    r"""A ring in 3-D: ``L(x) ∝ exp(−((√(x1² + x2²) − r)² + x3²) / (2 s²))``, normalised, under a
    uniform prior on the cube ``[−(r + 8s), r + 8s]³``.

    Parameters
    ----------
    name : str
        The target's name in tables.
    radius : float
        The ring's radius ``r``, positive.
    sd : float
        Its width ``s`` (radially and along ``x3``), positive.

    Notes
    -----
    The normaliser is ``2π [s² e^(−r²/2s²) + r s √(2π) Φ(r/s)] · √(2π) s`` (polar coordinates
    in the plane, a Gaussian along ``x3``). The box reaches 8 ``s`` beyond the ring, so the
    likelihood mass it truncates is below 1e-14 and :attr:`log_evidence`, ``−3 log(2 (r + 8s))``,
    is exact to that precision. The four "modes" are the quadrants of the angle
    ``atan2(x2, x1)``; by symmetry each has posterior weight 1/4.
    """

    name: str
    radius: float
    sd: float

    def __post_init__(self) -> None:
        for arg in ("radius", "sd"):
            object.__setattr__(self, arg, check_positive_finite(getattr(self, arg), arg))

    @property
    def dim(self) -> int:
        """The dimension, 3."""
        return 3

    @property
    def prior(self) -> Literal["uniform"]:
        """The kind of prior, as :attr:`GaussianMixtureTarget.prior`: always uniform."""
        return "uniform"

    @property
    def n_modes(self) -> int:
        """The number of quadrants, 4."""
        return 4

    @property
    def bounds(self) -> tuple[float, float]:
        """``(lo, hi)`` of the uniform prior in every coordinate: ``±(r + 8s)``."""
        half = self.radius + 8.0 * self.sd
        return -half, half

    @property
    def mode_centres(self) -> np.ndarray:
        """A point on the ring in the middle of each quadrant, shape ``(4, 3)``."""
        angles = np.pi / 4 + np.pi / 2 * np.arange(4)
        return np.column_stack(
            [self.radius * np.cos(angles), self.radius * np.sin(angles), np.zeros(4)]
        )

    @property
    def log_normaliser(self) -> float:
        """``log ∫ exp(−((ρ − r)² + x3²) / (2 s²)) dx`` over all of R³."""
        r, s = self.radius, self.sd
        planar = s**2 * np.exp(-(r**2) / (2 * s**2)) + r * s * np.sqrt(2 * np.pi) * stats.norm.cdf(
            r / s
        )
        return float(np.log(2 * np.pi * planar) + 0.5 * _LOG_2PI + np.log(s))

    def model(self, name: str = "x") -> pm.Model:
        """A model with the free variable ``name`` of shape ``(3,)``, uniform on the box, and
        the normalised ring density as ``pm.Potential("likelihood", ...)``."""
        with pm.Model() as model:
            x = pm.Uniform(name, *np.array(self.bounds), shape=3)
            rho = pt.sqrt(x[0] ** 2 + x[1] ** 2)
            pm.Potential(
                "likelihood",
                -((rho - self.radius) ** 2 + x[2] ** 2) / (2 * self.sd**2) - self.log_normaliser,
            )
        return model

    @property
    def posterior_weights(self) -> np.ndarray:
        """The posterior mass of each quadrant: 1/4 each."""
        return np.full(4, 0.25)

    @property
    def log_evidence(self) -> float:
        """``−3 log(2 (r + 8s))``: the prior's density, the likelihood integrating to 1 up to
        the truncated mass."""
        lo, hi = self.bounds
        return -3.0 * float(np.log(hi - lo))

    def mode_labels(self, draws: np.ndarray) -> np.ndarray:
        """The quadrant of ``atan2(x2, x1)`` of each draw, ``0`` … ``3`` counter-clockwise from
        the positive ``x1`` axis; ``draws`` has shape ``(..., 3)``."""
        draws = np.asarray(draws, dtype=float)
        if draws.shape[-1:] != (3,):
            raise ValueError(f"draws must have shape (..., 3), got {draws.shape}")
        angle = np.arctan2(draws[..., 1], draws[..., 0]) % (2 * np.pi)
        return np.minimum((angle // (np.pi / 2)).astype(int), 3)


def multimodal_targets() -> dict[str, GaussianMixtureTarget | RingTarget]:
    """The named multimodal targets of the tests and the tempering benchmarks.

    Returns
    -------
    dict
        Name to target:

        * ``"mixture-1d"``: 0.2 N(5, 2²) + 0.2 N(20, 2²) + 0.6 N(40, 2²), uniform on (−10, 60)
          (Berrones 2009, §4).
        * ``"mixture-2d"``: 0.5 N((6, −5), I) + 0.5 N((−2, 3), I), uniform on (−10, 10)²; the
          modes differ in both coordinates.
        * ``"mixture-2d-3modes"``: weights 0.2 / 0.3 / 0.5 at (−5, −5), (5, −4), (−4, 6), sd
          0.8, uniform on (−10, 10)². No two modes share a coordinate line, yet neither
          coordinate alone tells the three apart: the first and third nearly share ``x1``,
          the first and second nearly share ``x2``, so each marginal shows two bumps.
        * ``"mixture-5d"``: 0.3 / 0.7 at ∓(2.5, …, 2.5), sd 1, uniform on (−8, 8)⁵; unequal
          weights, so that a chain stuck in one mode shows.
        * ``"two-modes-110-nat"``: 0.3 N(−15, 1) + 0.7 N(15, 1) under a N(0, 20²) prior; the
          log-likelihood falls by 112.5 nats from a mode to x = 0.
        * ``"ring-3d"``: :class:`RingTarget` with r = 4, s = 0.3.
        * ``"mixture-10d"``, ``"mixture-40d"``: 0.3 / 0.7 at ∓(a, …, a), sd 1, uniform on
          (−6, 6)^d, with a = 3.2 in 10-D and a = 2 in 40-D: the log-density falls by
          ``d a² / 2`` nats, 51 and 80, from a mode to the midpoint between them.
        * ``"unequal-widths"``: 0.5 N((−4, −4), 0.5² I) + 0.5 N((4, 4), 2² I), uniform on
          (−10, 10)²: the narrow mode is the one SMC's default kernel tends to under-weight.
    """
    targets: list[GaussianMixtureTarget | RingTarget] = [
        GaussianMixtureTarget(
            "mixture-1d", [0.2, 0.2, 0.6], [[5.0], [20.0], [40.0]], [2.0] * 3, bounds=(-10, 60)
        ),
        GaussianMixtureTarget(
            "mixture-2d", [0.5, 0.5], [[6.0, -5.0], [-2.0, 3.0]], [1.0, 1.0], bounds=(-10, 10)
        ),
        GaussianMixtureTarget(
            "mixture-2d-3modes",
            [0.2, 0.3, 0.5],
            [[-5.0, -5.0], [5.0, -4.0], [-4.0, 6.0]],
            [0.8] * 3,
            bounds=(-10, 10),
        ),
        GaussianMixtureTarget(
            "mixture-5d", [0.3, 0.7], [[-2.5] * 5, [2.5] * 5], [1.0, 1.0], bounds=(-8, 8)
        ),
        GaussianMixtureTarget(
            "two-modes-110-nat",
            [0.3, 0.7],
            [[-15.0], [15.0]],
            [1.0, 1.0],
            prior="normal",
            prior_sd=20.0,
        ),
        RingTarget("ring-3d", radius=4.0, sd=0.3),
        GaussianMixtureTarget(
            "mixture-10d", [0.3, 0.7], [[-3.2] * 10, [3.2] * 10], [1.0, 1.0], bounds=(-6, 6)
        ),
        GaussianMixtureTarget(
            "mixture-40d", [0.3, 0.7], [[-2.0] * 40, [2.0] * 40], [1.0, 1.0], bounds=(-6, 6)
        ),
        GaussianMixtureTarget(
            "unequal-widths",
            [0.5, 0.5],
            [[-4.0, -4.0], [4.0, 4.0]],
            [0.5, 2.0],
            bounds=(-10, 10),
        ),
    ]
    return {target.name: target for target in targets}
