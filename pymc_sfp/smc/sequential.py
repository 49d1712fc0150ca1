"""Sequential training of a PyMC model's network: SIR, SIPR and the EKF (de Freitas et al. 1998).

The weights ``w`` (every free variable of the model, on PyMC's unconstrained scale) follow a
random walk and each observation is the model's Gaussian likelihood of one data row (Eqs. 1–2)::

    w_k = w_k-1 + d_k,   d_k ~ N(0, Q),   Q = diag(process_sd²)
    y_k ~ N(g(w_k, x_k), R)              (the model's observed pm.Normal)

with ``w_0`` from the model's prior. The noise sd ``R^½`` is whatever the model says: a number,
or a free variable, which is then filtered with the weights (particle methods only).
:class:`SequentialFilter` feeds one observation at a time (:meth:`SequentialFilter.update`);
:func:`sample_sequential` runs it over a whole stream and returns a DataTree. The numerics are
in :mod:`pymc_sfp.core.particles`; the model is compiled once, by
:class:`pymc_sfp.compile.ParticleEvaluator`, into one call per step for the whole cloud.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import numpy as np
import pymc as pm
import xarray as xr
from pymc.progress_bar import create_simple_progress
from scipy.special import ndtr, ndtri

from pymc_sfp._validation import (
    as_generator,
    check_bool,
    check_positive_int,
    check_real,
    describe_rows,
)
from pymc_sfp.compile import ParticleEvaluator
from pymc_sfp.core.particles import (
    RESAMPLING_SCHEMES,
    DegenerateWeightsError,
    KalmanState,
    KalmanUpdate,
    ParticleState,
    ekf_predict,
    ekf_update,
    hamiltonian_move,
    init_particles,
    particle_step,
    propagate,
    systematic_resample,
)

__all__ = ["METHODS", "MOVES", "SequentialFilter", "StepResult", "sample_sequential"]

#: :meth:`SequentialFilter.run` warns when a step's ESS falls below this share of the particles
#: (or below 2): the weights have collapsed onto a handful of them.
COLLAPSE_SHARE = 0.01

#: Filters accepted by :func:`sample_sequential`.
METHODS = ("sir", "sipr", "ekf")
#: Where the EKF's Gaussian starts (``ekf_start=``): its mean at a draw of the prior, or at the
#: prior's mode; its covariance is the prior's Laplace covariance either way.
EKF_STARTS = ("draw", "mode")
#: Rejuvenation moves accepted by :func:`sample_sequential` (``move=``).
MOVES = ("metropolis", "dynamics")
#: The dynamics move: leapfrog steps per transition, momentum persistence (Neal's α) and the
#: acceptance rate its step size is adapted toward between moves.
MOVE_LEAPFROG, MOVE_ALPHA, MOVE_TARGET_ACCEPT = 10, 0.8, 0.65


class StepResult(NamedTuple):
    """What one :meth:`SequentialFilter.update` learnt.

    Attributes
    ----------
    step : int
        The step's index (0 for the first observation).
    predictive_mean, predictive_sd, predictive_lower, predictive_upper : ndarray
        The one-step-ahead predictive density of the step's target, made from the filter's state
        *before* the target was seen: its mean, sd and central ``interval`` bounds, shape of one
        target row (NaN where the inputs are missing).
    log_evidence : float
        ``log p(y_k | y_1..k-1)`` (0 for a skipped step).
    ess : float
        Effective sample size after the update, before resampling (NaN for the EKF).
    resampled : bool
    distinct : float
        Distinct particles after the step (after resampling and any move): resampling copies
        particles, and without process noise or a move the copies stay identical, so this
        counts what the cloud still explores (NaN for the EKF).
    skipped : bool
        The observation had missing values and only the dynamics were applied.
    acceptance : float
        Mean acceptance rate of the resample-move step (NaN when no move was made).
    move_divergences : int
        Trajectories of the dynamics move that diverged (rejected; 0 without that move).
    """

    step: int
    predictive_mean: np.ndarray
    predictive_sd: np.ndarray
    predictive_lower: np.ndarray
    predictive_upper: np.ndarray
    log_evidence: float
    ess: float
    resampled: bool
    distinct: float
    skipped: bool
    acceptance: float
    move_divergences: int


class SequentialFilter:
    """Sequential training of a model's weights, one observation at a time.

    SIR and SIPR (de Freitas et al. 1998): a cloud of ``particles`` weight vectors drawn from the
    prior (Eq. 6), moved by the random walk (Eq. 1), weighted by their likelihood (Eqs. 3–5) and
    resampled at every step (``"sir"``) or when the effective sample size falls below
    ``ess_threshold · particles`` (``"sipr"``). The EKF (``"ekf"``) keeps a Gaussian instead,
    with the prior's Laplace covariance (exact for a Gaussian prior), its mean at one draw of the
    prior (``ekf_start``), updated with the network's Jacobian from PyTensor.

    Parameters
    ----------
    model : pm.Model, optional
        The model (from the context by default). Its inputs and targets must be ``pm.Data``
        containers and its one observed variable a ``pm.Normal`` (see
        :class:`~pymc_sfp.compile.ParticleEvaluator`), e.g. :func:`pymc_sfp.nn.mlp` with
        :func:`pymc_sfp.nn.gaussian_likelihood`.
    data_names : str or sequence of str, optional
        The data containers streamed by :meth:`update` (one name as a string); all of the
        model's by default.
    method : {"sir", "sipr", "ekf"}, default "sir"
    particles : int, default 1000
        Particles of SIR / SIPR; for the EKF, the number of draws of its final Gaussian that form
        the posterior group.
    process_sd : float or mapping of str to float or array, default 0.0
        The random walk's sd ``Q^½`` on PyMC's unconstrained scale: one number for every
        coordinate, or a mapping from variable names to numbers or arrays of the variable's
        shape (unnamed variables stay static). ``0`` means static weights: the filter is then
        Bayes' rule applied one observation at a time, and SIR's cloud can only lose distinct
        particles (use ``move`` to rejuvenate it).
    ess_threshold : float, optional
        SIPR resamples when the ESS falls below ``ess_threshold · particles``; default 0.5.
        Only for ``"sipr"``.
    ekf_start : {"draw", "mode"}, optional
        Where the EKF's mean starts; only for ``"ekf"``. ``"draw"`` (the default): one draw of
        the prior from ``random_seed``, as the particle filters draw their initial weights
        (de Freitas et al.'s Eq. 6; the paper does not say how its EKF was started). ``"mode"``:
        the prior's mode, the exact Bayesian start of a linear-Gaussian model (the Kalman
        filter), but a network's fixed point: with every weight's prior centred on 0 the output
        weights are 0 and the hidden units output ``tanh(0) = 0``, so the output's Jacobian in
        every weight but the output bias is 0 and the linearised update never moves them (the
        filter predicts the running mean of the targets). Either way the covariance starts at
        the prior's Laplace covariance; a ``"draw"`` start shifts the belief by one prior sd or
        so, which the data then outweigh. A warning after :meth:`run` names weights the
        linearisation never reached.
    resampling : {"multinomial", "systematic", "residual"}, default "systematic"
    move : {"metropolis", "dynamics"} or None, default None
        Resample-move: after each resampling, ``move_steps`` MCMC transitions for every
        particle on ``p(w) · p(y_1..k | w)``, the prior times the likelihood of every
        observation so far (one compiled call per step for the whole cloud).
        ``"metropolis"``: a Gaussian random walk with ``2.38² / d`` times the cloud's
        covariance. ``"dynamics"``: :class:`~pymc_sfp.StochasticDynamics`' exact transition
        (Neal 1993; :func:`pymc_sfp.core.particles.hamiltonian_move`), 10 leapfrog steps with
        momentum persistence α = 0.8 and the cloud's covariance as the inverse mass, its step
        size adapted between moves toward an acceptance rate of 0.65 (at most 1); it pays where the
        posterior is correlated or high-dimensional, at ~10 gradient calls per transition.
        Either leaves the filtering density of *static* weights invariant (Gilks and
        Berzuini's resample-move); with ``process_sd > 0`` it pulls the cloud toward the
        static posterior of the accumulated data, which counters drift tracking.
    move_steps : int, default 5
    missing : {"skip", "raise"}, default "skip"
        An observation with NaN inputs or targets: apply the dynamics only and flag the step as
        skipped, or raise a ``ValueError``.
    interval : float, default 0.95
        Probability of the central one-step-ahead predictive interval.
    random_seed : int, numpy Generator or None
        Seeds the prior draws (the particles, or the EKF's start), the random walk, resampling,
        the moves and the posterior group's draws.
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile`.

    Raises
    ------
    ValueError
        For an unknown ``method``, ``resampling``, ``move`` or ``missing``, a ``particles`` or
        ``move_steps`` that is not a positive integer, a ``process_sd`` that is negative, not
        finite or names an unknown variable, an ``ess_threshold`` outside ``(0, 1]`` or given
        for another method than ``"sipr"``, an ``interval`` outside ``(0, 1)``, a move with the
        EKF, an ``ekf_start`` that is not ``"draw"`` or ``"mode"`` or is given for another
        method than ``"ekf"``, the EKF with a learned noise sd, or a model the evaluator refuses
        (among them: a container the observation reads with a row per observation that is not
        in ``data_names``, improper priors, no free variables).
    TypeError
        If ``model`` is not a ``pm.Model``, ``random_seed`` is not a seed, or a setting is not a
        number of the right kind (``particles="10"``, ``move_steps=True``).

    Examples
    --------
    >>> filt = SequentialFilter(model, method="sipr", process_sd=0.01)  # doctest: +SKIP
    >>> for x, y in stream:  # doctest: +SKIP
    ...     result = filt.update({"net_X": x, "net_y_data": y})
    >>> idata = filt.to_datatree()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: pm.Model | None = None,
        *,
        data_names: Any = None,
        method: Literal["sir", "sipr", "ekf"] = "sir",
        particles: int = 1000,
        process_sd: float | Mapping[str, Any] = 0.0,
        ess_threshold: float | None = None,
        resampling: Literal["multinomial", "systematic", "residual"] = "systematic",
        move: Literal["metropolis", "dynamics"] | None = None,
        move_steps: int = 5,
        missing: Literal["skip", "raise"] = "skip",
        interval: float = 0.95,
        random_seed: Any = None,
        compile_kwargs: dict | None = None,
        ekf_start: Literal["draw", "mode"] | None = None,
    ):
        if model is not None and not isinstance(model, pm.Model):
            raise TypeError(f"model must be a pm.Model or None, got {type(model).__name__}")
        model = pm.modelcontext(model)
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if resampling not in RESAMPLING_SCHEMES:
            raise ValueError(f"resampling must be one of {RESAMPLING_SCHEMES}, got {resampling!r}")
        if move is not None and move not in MOVES:
            raise ValueError(f"move must be one of {MOVES} or None, got {move!r}")
        if move is not None and method == "ekf":
            raise ValueError("move (resample-move) needs a particle method, 'sir' or 'sipr'")
        if missing not in ("skip", "raise"):
            raise ValueError(f"missing must be 'skip' or 'raise', got {missing!r}")
        self.particles = check_positive_int(particles, "particles")
        self.move_steps = check_positive_int(move_steps, "move_steps")
        interval = check_real(interval, "interval")
        if not 0 < interval < 1:
            raise ValueError(f"interval must be in (0, 1), got {interval!r}")
        if ess_threshold is not None and method != "sipr":
            raise ValueError(
                f"ess_threshold applies to method='sipr' only (SIR always resamples), got "
                f"method={method!r}"
            )
        if ekf_start is not None and method != "ekf":
            raise ValueError(
                f"ekf_start applies to method='ekf' only (the particle filters draw their "
                f"particles from the prior), got method={method!r}"
            )
        if method == "ekf":
            ekf_start = "draw" if ekf_start is None else ekf_start
            if ekf_start not in EKF_STARTS:
                raise ValueError(f"ekf_start must be one of {EKF_STARTS}, got {ekf_start!r}")
        self.ekf_start = ekf_start
        if method == "sipr":
            ess_threshold = (
                0.5 if ess_threshold is None else check_real(ess_threshold, "ess_threshold")
            )
            if not 0 < ess_threshold <= 1:
                raise ValueError(f"ess_threshold must be in (0, 1], got {ess_threshold!r}")
        if data_names is None:
            data_names = [var.name for var in model.data_vars]
        elif isinstance(data_names, str):
            data_names = [data_names]
        self.evaluator = ParticleEvaluator(model, list(data_names), compile_kwargs)
        if method == "ekf" and not self.evaluator.fixed_noise:
            raise ValueError(
                "the EKF needs a fixed observation noise sd, but the model's noise sd depends on "
                "a free variable: use method='sir' or 'sipr', which filter it with the weights"
            )
        self.model = model
        self.method = method
        self.resampling = resampling
        self.move = move
        self.missing = missing
        self.interval = interval
        self.ess_threshold = 1.0 if method == "sir" else ess_threshold
        self.process_sd = self._process_sd(process_sd)
        # The posterior group's resampling has its own stream, so that looking at the result
        # midway does not change the filter's draws.
        self._rng, posterior_rng = as_generator(random_seed, "random_seed").spawn(2)
        self._posterior_seed = int(posterior_rng.integers(2**63))
        self._accumulated: list[list[np.ndarray]] = []
        self._move_step_size = 0.5 / self.evaluator.size**0.25
        self._records: list[dict[str, Any]] = []
        if method == "ekf":
            mode, covariance = self.evaluator.prior_laplace()
            if ekf_start == "draw":
                mode = self.evaluator.draw_prior(1, self._rng)[0]
            self.state: ParticleState | KalmanState = KalmanState(mode, covariance)
            # The weights whose Jacobian was nonzero at some observed step.
            self._linearised = np.zeros(len(mode), dtype=bool)
        else:
            self.state = init_particles(self.evaluator.draw_prior(self.particles, self._rng))

    @property
    def steps(self) -> int:
        """The number of observations seen (including skipped ones)."""
        return len(self._records)

    def _process_sd(self, process_sd: Any) -> np.ndarray:
        layout = self.evaluator.layout
        if not isinstance(process_sd, Mapping):
            value = check_real(process_sd, "process_sd")
            process_sd = {name: value for name in layout.rv_names}
        sd = np.zeros(layout.size)
        known = {*layout.rv_names, *layout.names}
        unknown = sorted(set(process_sd) - known)
        if unknown:
            raise ValueError(
                f"process_sd names unknown variables {unknown}; the model's free variables are "
                f"{list(layout.rv_names)}"
            )
        for name, value_name, shape, slc in zip(
            layout.rv_names, layout.names, layout.shapes, layout.slices, strict=True
        ):
            value = process_sd.get(name, process_sd.get(value_name, 0.0))
            try:
                sd[slc] = np.broadcast_to(np.asarray(value, dtype=float), shape).ravel()
            except ValueError:
                raise ValueError(
                    f"process_sd for {name!r} must broadcast to its shape {shape}, got {value!r}"
                ) from None
        if not np.all(np.isfinite(sd) & (sd >= 0)):
            raise ValueError(f"process_sd must be finite and >= 0, got {process_sd!r}")
        return sd

    def _row(self, observation: Mapping[str, Any]) -> list[np.ndarray]:
        names = self.evaluator.data_names
        if not isinstance(observation, Mapping):
            raise TypeError(
                f"an observation must be a mapping of the data containers {list(names)} to one "
                f"row each, got {type(observation).__name__}"
            )
        missing_names = [name for name in names if name not in observation]
        if missing_names or set(observation) - set(names):
            raise ValueError(
                f"an observation must give exactly the data containers {list(names)}; got "
                f"{sorted(observation)}"
            )
        row = []
        for name in names:
            container = self.model[name].get_value()
            value = _as_float_array(observation[name], name)
            row_shape = container.shape[1:]
            # One row, with or without its leading axis (a scalar for a one-element row).
            if value.size != int(np.prod(row_shape)) or value.ndim > container.ndim:
                raise ValueError(
                    f"{name} must be one row of shape {row_shape} (or (1, ...)), got shape "
                    f"{value.shape}"
                )
            value = value.reshape(1, *row_shape)
            row.append(value)
        return row

    def update(self, observation: Mapping[str, Any]) -> StepResult:
        """Feed one observation: predict it, then update the weights' filtering density.

        Parameters
        ----------
        observation : mapping of str to array_like
            One row of each streamed data container (``data_names``), e.g.
            ``{"net_X": x, "net_y_data": y}``.

        Returns
        -------
        StepResult

        Raises
        ------
        ValueError
            If the observation does not give one row of every container, or has missing values
            and ``missing="raise"``.
        DegenerateWeightsError
            If every particle has zero likelihood for this observation, or the EKF's update of
            it is not finite (a far outlier overflows it). The filter is left as it was before
            the call: skip the observation or change the model and go on.
        ValueError
            Also if the observation has infinite values, or the model's fixed observation noise
            sd is not finite and > 0.
        """
        row = self._row(observation)
        for name, value in zip(self.evaluator.data_names, row, strict=True):
            if np.isinf(value).any():
                raise ValueError(
                    f"observation {self.steps} has infinite values in {name}: only NaN marks a "
                    "missing value"
                )
        target = self.evaluator.data_names.index(self.evaluator.target_name)
        inputs_ok = all(np.isfinite(v).all() for i, v in enumerate(row) if i != target)
        skipped = not (inputs_ok and np.isfinite(row[target]).all())
        if skipped and self.missing == "raise":
            raise ValueError(
                f"observation {self.steps} has missing (NaN) values; pass missing='skip' to "
                "apply only the dynamics at such steps"
            )
        if self.method == "ekf":
            record = self._ekf_update(row, inputs_ok, skipped)
        else:
            record = self._particle_update(row, inputs_ok, skipped)
        record["observed"] = row[target][0]
        record["skipped"] = skipped
        if not skipped:
            self._accumulated.append(row)
        self._records.append(record)
        return StepResult(
            step=self.steps - 1,
            predictive_mean=record["predictive_mean"],
            predictive_sd=record["predictive_sd"],
            predictive_lower=record["predictive_lower"],
            predictive_upper=record["predictive_upper"],
            log_evidence=record["log_evidence"],
            ess=record["ess"],
            resampled=record["resampled"],
            distinct=record["distinct"],
            skipped=skipped,
            acceptance=record["acceptance"],
            move_divergences=record["move_divergences"],
        )

    def _particle_update(self, row: list, inputs_ok: bool, skipped: bool) -> dict[str, Any]:
        state = self.state
        seen: dict[str, Any] = {}

        def log_likelihood(particles: np.ndarray) -> np.ndarray:
            log_lik, mean, sd, reported = self.evaluator.observe(particles, row)
            if self.evaluator.fixed_noise:
                self._check_noise_sd(sd)
            seen.update(mean=mean, sd=sd, reported=reported)
            return log_lik

        record: dict[str, Any] = {"acceptance": np.nan, "move_divergences": 0}
        if skipped:
            particles = propagate(state.particles, self.process_sd, self._rng)
            if inputs_ok:
                log_likelihood(particles)
            else:
                seen["reported"] = self.evaluator.constrained(particles)
            new_state = ParticleState(particles, state.log_weights)
            record.update(log_evidence=0.0, ess=np.nan, resampled=False)
            reported = seen["reported"]
        else:
            new_state, info = particle_step(
                state,
                log_likelihood,
                self._rng,
                process_sd=self.process_sd,
                ess_threshold=self.ess_threshold,
                scheme=self.resampling,
            )
            record.update(log_evidence=info.log_evidence, ess=info.ess, resampled=info.resampled)
            reported = {name: value[info.ancestors] for name, value in seen["reported"].items()}
            if info.resampled and self.move is not None:
                data = [np.concatenate(c) for c in zip(*self._accumulated, row, strict=True)]
                if self.move == "metropolis":
                    particles, record["acceptance"] = self._metropolis_move(
                        new_state.particles, data
                    )
                else:
                    particles, record["acceptance"], record["move_divergences"] = (
                        self._dynamics_move(new_state.particles, data)
                    )
                new_state = ParticleState(particles, new_state.log_weights)
                reported = self.evaluator.constrained(particles)
        record.update(self._mixture_predictive(state.log_weights, seen, inputs_ok))
        record["distinct"] = float(_distinct_rows(new_state.particles))
        weights = np.exp(new_state.log_weights)
        record["filtered_mean"] = {n: np.tensordot(weights, v, 1) for n, v in reported.items()}
        record["filtered_sd"] = {
            n: np.sqrt(np.maximum(np.tensordot(weights, np.square(v - m), 1), 0.0))
            for (n, v), m in zip(reported.items(), record["filtered_mean"].values(), strict=True)
        }
        self.state = new_state
        return record

    def _metropolis_move(self, particles: np.ndarray, data: list) -> tuple[np.ndarray, float]:
        d = particles.shape[1]
        cholesky = np.linalg.cholesky(_cloud_covariance(particles) * 2.38**2 / d)
        current = self.evaluator.log_posterior(particles, data)
        accepted = 0
        for _ in range(self.move_steps):
            proposal = particles + self._rng.standard_normal(particles.shape) @ cholesky.T
            proposed = self.evaluator.log_posterior(proposal, data)
            log_u = np.log(self._rng.random(len(particles)))
            # NaN log-densities compare False: rejected.
            accept = log_u < proposed - current
            particles = np.where(accept[:, None], proposal, particles)
            current = np.where(accept, proposed, current)
            accepted += int(accept.sum())
        return particles, accepted / (self.move_steps * len(particles))

    def _dynamics_move(self, particles: np.ndarray, data: list) -> tuple[np.ndarray, float, int]:
        particles, info = hamiltonian_move(
            particles,
            lambda cloud: self.evaluator.log_posterior_grad(cloud, data),
            self._rng,
            step_size=self._move_step_size,
            n_leapfrog=MOVE_LEAPFROG,
            n_transitions=self.move_steps,
            alpha=MOVE_ALPHA,
            inverse_mass=_cloud_covariance(particles),
        )
        # Adapted between moves only, so each move is a fixed kernel given the past; a
        # divergence means the step size is past the leapfrog's stability limit: halve it.
        # The cap: with the cloud's covariance as inverse mass a Gaussian posterior has unit
        # scales, and the leapfrog is unstable at step sizes above 2.
        self._move_step_size = min(
            1.0,
            self._move_step_size
            * (0.5 if info.n_divergent else np.exp(info.acceptance - MOVE_TARGET_ACCEPT)),
        )
        return particles, info.acceptance, info.n_divergent

    def _mixture_predictive(
        self, log_weights: np.ndarray, seen: dict[str, Any], inputs_ok: bool
    ) -> dict[str, np.ndarray]:
        shape = self.model[self.evaluator.target_name].get_value().shape[1:]
        if not inputs_ok:
            nan = np.full(shape, np.nan)
            return dict.fromkeys(
                ("predictive_mean", "predictive_sd", "predictive_lower", "predictive_upper"), nan
            )
        weights = np.exp(log_weights)
        # One target row: (S, 1, ...) → (S, m).
        mean = seen["mean"].reshape(len(weights), -1)
        sd = seen["sd"].reshape(len(weights), -1)
        mixture_mean = weights @ mean
        mixture_sd = np.sqrt(np.maximum(weights @ (sd**2 + mean**2) - mixture_mean**2, 0.0))
        tail = (1.0 - self.interval) / 2
        lower, upper = _mixture_quantiles(weights, mean, sd, np.array([tail, 1.0 - tail]))
        return {
            "predictive_mean": mixture_mean.reshape(shape),
            "predictive_sd": mixture_sd.reshape(shape),
            "predictive_lower": lower.reshape(shape),
            "predictive_upper": upper.reshape(shape),
        }

    def _ekf_update(self, row: list, inputs_ok: bool, skipped: bool) -> dict[str, Any]:
        shape = self.model[self.evaluator.target_name].get_value().shape[1:]
        predicted = ekf_predict(self.state, self.process_sd**2)
        record: dict[str, Any] = {
            "ess": np.nan,
            "resampled": False,
            "distinct": np.nan,
            "acceptance": np.nan,
            "move_divergences": 0,
        }
        nan = np.full(shape, np.nan)
        record.update(predictive_mean=nan, predictive_sd=nan, predictive_lower=nan)
        record.update(predictive_upper=nan, log_evidence=0.0)
        new_state = predicted
        if inputs_ok:
            output, jacobian, noise_sd = self.evaluator.linearise(predicted.mean, row)
            self._check_noise_sd(noise_sd)
            if not skipped:
                self._linearised |= np.any(jacobian != 0, axis=0)
            target = self.evaluator.data_names.index(self.evaluator.target_name)
            y = row[target].ravel()
            if skipped:
                covariance = jacobian @ predicted.cov @ jacobian.T + np.diag(noise_sd**2)
            else:
                new_state, update = self._finite_ekf_update(
                    predicted, y, output, jacobian, noise_sd
                )
                covariance = update.predictive_cov
                record["log_evidence"] = update.log_evidence
            sd = np.sqrt(np.diag(covariance))
            z = ndtri(1.0 - (1.0 - self.interval) / 2)
            record.update(
                predictive_mean=output.reshape(shape),
                predictive_sd=sd.reshape(shape),
                predictive_lower=(output - z * sd).reshape(shape),
                predictive_upper=(output + z * sd).reshape(shape),
            )
        self.state = new_state
        record["filtered_mean"], record["filtered_sd"] = self._gaussian_summaries(new_state)
        return record

    def _check_noise_sd(self, sd: np.ndarray) -> None:
        # The model's own log-density is -inf for sd <= 0: every particle would get zero
        # weight, and the EKF would square the sign away.
        if not np.all(np.isfinite(sd) & (sd > 0)):
            raise ValueError(
                f"the observation noise sd of {self.evaluator.observed_name!r} must be finite "
                f"and > 0, got {np.min(sd)!r} at observation {self.steps}"
            )

    def _finite_ekf_update(
        self,
        predicted: KalmanState,
        y: np.ndarray,
        output: np.ndarray,
        jacobian: np.ndarray,
        noise_sd: np.ndarray,
    ) -> tuple[KalmanState, KalmanUpdate]:
        """:func:`ekf_update`, or a :class:`DegenerateWeightsError` (the filter unchanged) when
        the update is not finite: a far outlier or an extreme noise overflows it."""
        failure = ""
        with np.errstate(all="ignore"):
            finite_inputs = np.isfinite(output).all() and np.isfinite(jacobian).all()
            try:
                if not finite_inputs:
                    raise FloatingPointError("the network's output or Jacobian is not finite")
                state, update = ekf_update(predicted, y, output, jacobian, noise_sd**2)
            except (np.linalg.LinAlgError, FloatingPointError) as error:
                failure = str(error)
            else:
                values = (state.mean, state.cov, update.log_evidence, update.predictive_cov)
                if not all(np.isfinite(v).all() for v in values):
                    failure = "the updated mean, covariance or log evidence is not finite"
        if failure:
            raise DegenerateWeightsError(
                f"the EKF cannot absorb this observation ({failure}): skip it (NaN), or check "
                "its scale against the observation noise",
                self.state,
            )
        return state, update

    def _gaussian_summaries(
        self, state: KalmanState
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        # The unscented transform with the 2d points m ± √d L e_j, equally weighted: exact mean
        # and variance for untransformed variables, a second-order approximation otherwise.
        d = len(state.mean)
        cholesky = np.linalg.cholesky(state.cov + 1e-300 * np.eye(d))
        offsets = np.sqrt(d) * cholesky.T
        points = np.concatenate([state.mean + offsets, state.mean - offsets])
        reported = self.evaluator.constrained(points)
        means = {n: v.mean(axis=0) for n, v in reported.items()}
        sds = {n: np.sqrt(np.maximum(v.var(axis=0), 0.0)) for n, v in reported.items()}
        return means, sds

    def _posterior_particles(self) -> np.ndarray:
        rng = np.random.default_rng(self._posterior_seed)
        if isinstance(self.state, KalmanState):
            return rng.multivariate_normal(self.state.mean, self.state.cov, self.particles)
        log_weights = self.state.log_weights
        if np.allclose(log_weights, log_weights[0]):
            return self.state.particles
        # Equally weighted draws for the posterior group.
        return self.state.particles[systematic_resample(log_weights, rng)]

    def run(self, data: Mapping[str, Any], *, progressbar: bool = True) -> SequentialFilter:
        """Feed a stream: row ``k`` of every array in ``data`` is observation ``k``.

        Raises
        ------
        ValueError
            If the arrays in ``data`` have different numbers of rows (or none).
        DegenerateWeightsError
            As :meth:`update`, with the step in the message and this filter as its ``filter``
            attribute (its state is that before the failed step).
        """
        if not isinstance(data, Mapping):
            raise TypeError(
                "data must be a mapping of pm.Data container names to arrays, got "
                f"{type(data).__name__}"
            )
        progressbar = check_bool(progressbar, "progressbar")
        arrays = {name: _as_float_array(value, name) for name, value in data.items()}
        lengths = {name: len(value) if value.ndim else 0 for name, value in arrays.items()}
        if len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ValueError(
                f"every array in data must have the same number (> 0) of rows: {lengths}"
            )
        for name, value in arrays.items():
            infinite = np.flatnonzero(np.isinf(value).reshape(len(value), -1).any(axis=1))
            if len(infinite):
                raise ValueError(
                    f"data[{name!r}] has infinite values in {describe_rows(infinite)}: only NaN "
                    "marks a missing value"
                )
        n_steps = next(iter(lengths.values()))
        progress = create_simple_progress(progressbar)
        # PyMC's null progress bar enters as None: keep the object itself.
        with progress:
            task = progress.add_task("Filtering", completed=0, total=n_steps)
            for k in range(n_steps):
                try:
                    self.update({name: value[k] for name, value in arrays.items()})
                except DegenerateWeightsError as error:
                    failure = DegenerateWeightsError(
                        f"observation {k} of the stream (step {self.steps}): {error}", error.state
                    )
                    failure.filter = self
                    raise failure from error
                progress.advance(task)
        self._warn_if_collapsed()
        self._warn_if_never_linearised()
        return self

    def _warn_if_never_linearised(self) -> None:
        if self.method != "ekf" or all(r["skipped"] for r in self._records):
            return
        blind = np.flatnonzero(~self._linearised)
        if blind.size:
            layout = self.evaluator.layout
            names = [
                name
                for name, slc in zip(layout.rv_names, layout.slices, strict=True)
                if np.any(~self._linearised[slc])
            ]
            warnings.warn(
                f"The EKF's linearised network had a zero derivative in {blind.size} of "
                f"{self._linearised.size} weights (of {names}) at every observed step, so their "
                f"means never moved from the start (ekf_start={self.ekf_start!r}). "
                + (
                    "At the prior's mode of a network whose weights are centred on 0 only the "
                    "output bias moves: start from a prior draw (ekf_start='draw'), or use "
                    "method='sir'."
                    if self.ekf_start == "mode"
                    else "Another random_seed, or method='sir', may reach them."
                ),
                UserWarning,
                stacklevel=3,
            )

    def _warn_if_collapsed(self) -> None:
        ess = np.array([r["ess"] for r in self._records if not r["skipped"]], dtype=float)
        if self.method == "ekf" or not len(ess):
            return
        floor = max(2.0, COLLAPSE_SHARE * self.particles)
        collapsed = np.flatnonzero(ess < floor)
        if collapsed.size:
            warnings.warn(
                f"The weights collapsed onto a handful of particles (ESS < {floor:.3g}) at "
                f"{collapsed.size} of {len(ess)} observed steps (the first: observed step "
                f"{collapsed[0]}, ESS {ess[collapsed[0]]:.3g}): from there the filtered densities "
                "and the log evidence rest on those few particles, and without process noise "
                "their copies stay identical. More particles, a larger observation noise sd or "
                "process_sd, or move='metropolis' help.",
                UserWarning,
                stacklevel=3,
            )

    def to_datatree(self) -> xr.DataTree:
        """The filter's history and its current cloud as a DataTree.

        Returns
        -------
        xarray.DataTree
            The root's attributes hold the method, the number of particles, the resampling
            scheme, the move, the total ``log_evidence`` and, for the EKF, ``ekf_start``. Its
            groups:

            * ``posterior``: the current cloud as ``(chain=1, draw=particles)`` draws of the
              model's variables (systematically resampled to equal weights if needed; for the
              EKF, draws of its Gaussian);
            * ``filtered_mean``, ``filtered_sd``: the filtered mean and sd of each variable after
              each step, dims ``("step", ...)``;
            * ``predictive``: ``mean``, ``sd``, ``lower``, ``upper`` of the one-step-ahead
              predictive of each step's target (made before it was seen), and the ``observed``
              target;
            * ``filter_stats``: ``ess``, ``resampled``, ``distinct``, ``log_evidence`` (the
              increments), ``skipped``, ``acceptance`` and ``move_divergences`` per step.

            The filter computes in float64; the variables of the first four groups carry the
            model's dtypes (float32 in a model built with ``floatX="float32"``).

        Raises
        ------
        ValueError
            If the filter has seen no observation yet.
        """
        if not self._records:
            raise ValueError("the filter has seen no observation yet: call update() or run()")
        steps = np.arange(self.steps)
        draws = self.evaluator.constrained(self._posterior_particles())
        # The filter computes in float64; results carry the model's dtypes (a float32 model's
        # variables stay float32, as PyMC's samplers return them).
        dtypes = self.evaluator.reported_dtypes
        draws = {name: value.astype(dtypes[name], copy=False) for name, value in draws.items()}
        labels = {name: self._dims(name, value.shape[1:]) for name, value in draws.items()}
        # The model's labels of every variable's dims, as the datasets' coordinates.
        var_coords = {
            dim: values for _, coords in labels.values() for dim, values in coords.items()
        }
        n_draws = next(iter(draws.values())).shape[0]
        posterior = xr.Dataset(
            {
                name: (("chain", "draw", *labels[name][0]), value[None])
                for name, value in draws.items()
            },
            coords={"chain": [0], "draw": np.arange(n_draws), **var_coords},
        )
        filtered = {}
        for key in ("filtered_mean", "filtered_sd"):
            filtered[key] = xr.Dataset(
                {
                    name: (
                        ("step", *labels[name][0]),
                        np.stack([r[key][name] for r in self._records]).astype(
                            dtypes[name], copy=False
                        ),
                    )
                    for name in draws
                },
                coords={"step": steps, **var_coords},
            )
        out_dims, out_coords = self._target_dims()
        out_dtype = self.evaluator.observed_dtype
        predictive = xr.Dataset(
            {
                short: (
                    ("step", *out_dims),
                    np.stack([r[key] for r in self._records]).astype(out_dtype, copy=False),
                )
                for short, key in [
                    ("mean", "predictive_mean"),
                    ("sd", "predictive_sd"),
                    ("lower", "predictive_lower"),
                    ("upper", "predictive_upper"),
                    ("observed", "observed"),
                ]
            },
            coords={"step": steps, **out_coords},
            attrs={"interval": self.interval},
        )
        stats = xr.Dataset(
            {
                key: ("step", np.array([r[key] for r in self._records]))
                for key in (
                    "ess",
                    "resampled",
                    "distinct",
                    "log_evidence",
                    "skipped",
                    "acceptance",
                    "move_divergences",
                )
            },
            coords={"step": steps},
        )
        attrs = {
            "method": self.method,
            "particles": self.particles,
            "log_evidence": float(stats["log_evidence"].sum()),
            "resampling": self.resampling,
            "move": str(self.move),
        }
        if self.method == "ekf":
            attrs["ekf_start"] = self.ekf_start
        return xr.DataTree.from_dict(
            {
                "/": xr.Dataset(attrs=attrs),
                "posterior": posterior,
                "filtered_mean": filtered["filtered_mean"],
                "filtered_sd": filtered["filtered_sd"],
                "predictive": predictive,
                "filter_stats": stats,
            }
        )

    def _dims(self, name: str, shape: tuple[int, ...]) -> tuple[tuple[str, ...], dict]:
        dims = self.model.named_vars_to_dims.get(name) or tuple(
            f"{name}_dim_{i}" for i in range(len(shape))
        )
        coords = {
            dim: np.asarray(self.model.coords[dim])
            for dim in dims
            if self.model.coords.get(dim) is not None
        }
        return tuple(dims), coords

    def _target_dims(self) -> tuple[tuple[str, ...], dict]:
        name = self.evaluator.observed_name
        shape = self.model[self.evaluator.target_name].get_value().shape[1:]
        dims = self.model.named_vars_to_dims.get(name)
        if dims is None:
            return tuple(f"{name}_dim_{i + 1}" for i in range(len(shape))), {}
        dims = tuple(dims[1:])
        coords = {d: np.asarray(self.model.coords[d]) for d in dims if self.model.coords.get(d)}
        return dims, coords


def _distinct_rows(values: np.ndarray) -> int:
    """The number of distinct rows, by their bytes: resampled copies are bitwise equal. A set of
    ``P`` byte strings, where ``np.unique(axis=0)`` sorts the rows column by column (4000
    particles of 2201 weights: 30 ms against 0.4 s, more than the filter step itself)."""
    return len({row.tobytes() for row in np.ascontiguousarray(values)})


def _mixture_quantiles(
    weights: np.ndarray, mean: np.ndarray, sd: np.ndarray, q: np.ndarray
) -> np.ndarray:
    """The ``q``-quantiles of each column of the mixture ``Σ_i W_i N(mean_i, sd_i²)``, shape
    ``(len(q), m)``, by bisection of its increasing CDF in the bracket ``[min(mean - 8 sd),
    max(mean + 8 sd)]``, halved until it is below 1e-6 of the smallest component sd."""
    lower = np.broadcast_to(np.min(mean - 8 * sd, axis=0), (len(q), mean.shape[1])).copy()
    upper = np.broadcast_to(np.max(mean + 8 * sd, axis=0), lower.shape).copy()
    tolerance = 1e-6 * np.min(sd)
    iterations = int(np.ceil(np.log2(max(np.max(upper - lower) / tolerance, 2.0))))
    for _ in range(min(iterations, 60)):
        middle = 0.5 * (lower + upper)
        cdf = np.einsum("i,qim->qm", weights, ndtr((middle[:, None, :] - mean) / sd))
        below = cdf < q[:, None]
        lower = np.where(below, middle, lower)
        upper = np.where(below, upper, middle)
    return 0.5 * (lower + upper)


def _cloud_covariance(particles: np.ndarray) -> np.ndarray:
    """The cloud's covariance, ``(d, d)``, with a small ridge that keeps it positive definite.

    A cloud collapsed onto few distinct points has a singular covariance.
    """
    covariance = np.atleast_2d(np.cov(particles, rowvar=False))
    ridge = 1e-10 + 1e-6 * np.mean(np.diag(covariance))
    return covariance + ridge * np.eye(len(covariance))


def _as_float_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float array, or an error naming the data container ``name``."""
    if np.iscomplexobj(value):
        raise TypeError(f"{name} must be real numbers, got complex values")
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be numbers: {error}") from None


def sample_sequential(
    model: pm.Model | None = None,
    data: Mapping[str, Any] | None = None,
    *,
    method: Literal["sir", "sipr", "ekf"] = "sir",
    particles: int = 1000,
    process_sd: float | Mapping[str, Any] = 0.0,
    ess_threshold: float | None = None,
    resampling: Literal["multinomial", "systematic", "residual"] = "systematic",
    move: Literal["metropolis", "dynamics"] | None = None,
    move_steps: int = 5,
    missing: Literal["skip", "raise"] = "skip",
    interval: float = 0.95,
    progressbar: bool = True,
    random_seed: Any = None,
    compile_kwargs: dict | None = None,
    ekf_start: Literal["draw", "mode"] | None = None,
) -> xr.DataTree:
    """Train a model's network sequentially on a stream of data (de Freitas et al. 1998).

    Builds a :class:`SequentialFilter` on the containers named in ``data``, feeds it row ``k``
    of every array as observation ``k`` (:meth:`SequentialFilter.run`) and returns
    :meth:`SequentialFilter.to_datatree`. The arguments other than ``data`` and
    ``progressbar`` are those of :class:`SequentialFilter`.

    Parameters
    ----------
    model : pm.Model, optional
    data : mapping of str to array_like
        ``pm.Data`` container name → array whose first axis is time, one row per observation,
        e.g. ``{"net_X": X, "net_y_data": y}`` for :func:`pymc_sfp.nn.mlp` with
        :func:`pymc_sfp.nn.gaussian_likelihood`; the observed variable's container is the
        target. NaN rows are skipped (``missing="skip"``).
    progressbar : bool, default True
        PyMC's progress bar over the stream.

    Returns
    -------
    xarray.DataTree
        Groups ``posterior``, ``filtered_mean``, ``filtered_sd``, ``predictive``,
        ``filter_stats`` (see :meth:`SequentialFilter.to_datatree`).

    Raises
    ------
    ValueError
        For bad arguments (see :class:`SequentialFilter`) or data.
    DegenerateWeightsError
        If every particle has zero likelihood at some step; its ``filter`` attribute is the
        filter in its state before that step, to inspect (``to_datatree``) or continue.
    """
    if data is None or not isinstance(data, Mapping) or not data:
        raise ValueError("data must be a non-empty mapping of pm.Data names to arrays")
    sequential_filter = SequentialFilter(
        model,
        data_names=list(data),
        method=method,
        particles=particles,
        process_sd=process_sd,
        ess_threshold=ess_threshold,
        resampling=resampling,
        move=move,
        move_steps=move_steps,
        missing=missing,
        interval=interval,
        random_seed=random_seed,
        compile_kwargs=compile_kwargs,
        ekf_start=ekf_start,
    )
    return sequential_filter.run(data, progressbar=progressbar).to_datatree()
