"""SFP-I: incremental Bayesian learning of a network (Berrones 2009, §3.3, Eq. 20–22).

:class:`IncrementalSFP` learns the marginals ``p(w_i | A)`` of an initial sample, makes them the
prior of Eq. 21 (:func:`~pymc_sfp.learning.marginal_prior`), and then runs one SFP sweep per new
datum over the whole accumulated sample (Eq. 22), without recompiling.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, Self

import numpy as np
import pymc as pm
import xarray as xr
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.stats.convergence import log_warning_stats

from pymc_sfp._validation import (
    as_generator,
    as_rows,
    check_int_at_least,
    check_layer_sizes,
    check_positive_finite,
    check_positive_int,
    check_real,
)
from pymc_sfp.learning.mle import sampled_parameters
from pymc_sfp.learning.tabulated_prior import log_density_table, marginal_prior, static_shape
from pymc_sfp.marginals import (
    STAT_PREFIX_BOX,
    STAT_PREFIX_CDF,
    Marginal,
    average_recorded_conditionals,
)
from pymc_sfp.nn import gaussian_likelihood, mlp
from pymc_sfp.step_methods.sfp import SFPStep

__all__ = ["IncrementalSFP"]


class IncrementalSFP:
    """SFP-I: incremental Bayesian learning of a network (Berrones 2009, §3.3, Eq. 20–22).

    :meth:`fit` learns from an initial sample ``A`` under the paper's ``U(-1, 1)`` prior and
    turns the weights' analytic marginals into the new prior ``Π_i p(w_i | A)`` (Eq. 21). Each
    datum then passed to :meth:`partial_fit` is appended to the accumulated sample and followed
    by one SFP sweep with the potential of Eq. 22,

    .. math:: V(w | A + 1) = -\\Big[\\sum_i \\ln p(w_i | A) + \\ln p(A + 1 | w)\\Big],

    whose likelihood is Berrones' cold quadratic loss (Eq. 23) over the whole accumulated sample.
    The prior stays ``Π_i p(w_i | A)`` from the initial fit (so the initial data enter twice,
    through the prior and the likelihood, as in the paper). :meth:`predict` averages the network
    over the most recent ``window`` sweeps (Eq. 17); the paper does not say how its SFP-I
    predicts.

    The model and the sampler are built once, in the first :meth:`fit`: new data go into the
    model's ``pm.Data`` containers with ``pm.set_data``, which changes their number of rows
    without recompiling the sampler's functions (they take the containers as shared inputs),
    and the prior is installed the same way (:func:`marginal_prior`). Sweeps call
    :meth:`SFPStep.astep` directly. Calling :meth:`fit` again starts over on its new initial
    sample with the same model and sampler, nothing recompiled (e.g. one learner for many
    splits of a data set): with an integer ``random_seed`` a refit makes the draws of a new
    learner fitted to the same data.

    Parameters
    ----------
    layer_sizes : sequence of int
        Units per layer, inputs first (see :func:`pymc_sfp.nn.mlp`).
    D : float
        The likelihood temperature ``D`` of Berrones' Eq. 23 (the paper: 5e-4 for glass, 5e-3
        for time series); not the diffusion constant ``D`` of :class:`~pymc_sfp.SFPStep`,
        which stays 1 here.
    output : {"linear", "softmax"}, default "linear"
        Regression, or classification on one-hot targets with the quadratic loss, as in the
        paper.
    L : int, default 100
        The resolution ``L`` of :class:`~pymc_sfp.SFPStep` (Eq. 11).
    window : int, default 15
        Sweeps averaged by :meth:`predict`.
    prior_points, floor
        Tabulation of the marginal prior (:func:`log_density_table`).
    random_seed : int or numpy.random.Generator, optional
        Each :meth:`fit` seeds its sweeps from it (as scikit-learn's ``random_state``): an
        integer makes every fit on the same data draw the same sweeps, a Generator goes on
        with its stream. Set the attribute between fits to change it.
    name : str, default "net"
        Name of the network in the model.

    Raises
    ------
    ValueError
        If an argument is out of range (``layer_sizes`` not at least three positive integers,
        ``D`` not a finite number > 0, ``L < 3``, ...), naming it.
    TypeError
        If a number is given as something else (a string, say).

    Attributes
    ----------
    model : pm.Model
    network : Network
    step : SFPStep
    prior_marginals : dict
        Variable name → object array of :class:`~pymc_sfp.Marginal`: ``p(w_i | A)`` after
        :meth:`fit`.
    draws : list of dict
        The weights and biases (name → array) after each sweep.
    sweep_seconds : list of float
        Wall time of each :meth:`partial_fit` datum (``pm.set_data`` plus the sweep).
    n_data : int
        Size of the accumulated sample.
    """

    def __init__(
        self,
        layer_sizes: Sequence[int],
        *,
        D: float,
        output: Literal["linear", "softmax"] = "linear",
        L: int = 100,
        window: int = 15,
        prior_points: int = 257,
        floor: float = 1e-6,
        random_seed: int | np.random.Generator | None = None,
        name: str = "net",
    ):
        if output not in ("linear", "softmax"):
            raise ValueError(f"output must be 'linear' or 'softmax', got {output!r}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.layer_sizes = check_layer_sizes(layer_sizes)
        self.D = check_positive_finite(D, "D")
        self.output = output
        self.L = check_int_at_least(L, 3, "L")
        self.window = check_positive_int(window, "window")
        self.prior_points = check_int_at_least(prior_points, 2, "prior_points")
        self.floor = check_real(floor, "floor")
        if not 0 <= self.floor < 1:
            raise ValueError(f"floor must be in [0, 1), got {floor!r}")
        self.random_seed = random_seed
        as_generator(random_seed, "random_seed")  # checked when made; each fit seeds from it
        self.name = name
        self.model: pm.Model | None = None
        self.draws: list[dict[str, np.ndarray]] = []
        self.sweep_seconds: list[float] = []
        self.prior_marginals: dict[str, np.ndarray] = {}

    @property
    def n_data(self) -> int:
        return 0 if self.model is None else len(self._X)

    def fit(self, X: Any, y: Any, *, sweeps: int = 100, discard: int = 15) -> Self:
        """Learn from the initial sample ``A`` and make the marginal prior of Eq. 21.

        Builds the model (the ``U(-1, 1)`` prior, the data, the quadratic loss) and the
        :class:`~pymc_sfp.SFPStep`, runs ``sweeps`` sweeps from the all-zero weights, and
        averages the conditional CDFs of the sweeps after the first ``discard`` into the
        marginals ``p(w_i | A)``, which replace the prior. On a fitted learner it starts over:
        the data become ``X`` and ``y``, the prior ``U(-1, 1)`` again, the draws and the
        sampler's tuning are reset, and the model and sampler are reused.

        Parameters
        ----------
        X : array_like, shape (n, layer_sizes[0])
        y : array_like, shape (n, layer_sizes[-1]), or (n,) for one output
        sweeps : int, default 100
            The paper's ``M``.
        discard : int, default 15
            Initial sweeps left out of the marginals (the paper discards 15).

        Returns
        -------
        IncrementalSFP
            ``self``.

        Raises
        ------
        ValueError
            For bad data (wrong widths, NaN, mismatched rows), ``sweeps`` or ``discard`` that
            are not integers, or ``discard >= sweeps``; a fitted learner is left as it was.
            A fit that fails while sweeping leaves the learner unfitted.
        """
        sweeps = check_positive_int(sweeps, "sweeps")
        discard = check_int_at_least(discard, 0, "discard")
        if discard >= sweeps:
            raise ValueError(f"need 0 <= discard < sweeps, got discard={discard}, sweeps={sweeps}")
        X = as_rows(X, self.layer_sizes[0], "X")
        Y = as_rows(y, self.layer_sizes[-1], "y")
        if len(X) != len(Y):
            raise ValueError(f"X has {len(X)} rows but y has {len(Y)}")

        if self.model is None:
            self._build(X, Y)
        else:
            self._start_over(X, Y)
        step = self.step
        step.rng = as_generator(self.random_seed, "random_seed")
        self._q = RaveledVars(self._start.data.copy(), self._start.point_map_info)

        try:
            kept = []
            for sweep in range(sweeps):
                if sweep == discard:
                    step.stop_tuning()
                stats = self._sweep()
                if sweep >= discard:
                    kept.append(stats)
            self._install_prior(kept)
        except BaseException:
            # Half a fit (no prior of Eq. 21) must not be taken for a fitted learner.
            self.model = None
            self.draws.clear()
            raise
        return self

    def partial_fit(self, X_new: Any, y_new: Any) -> Self:
        """Add data one datum at a time, with one SFP sweep after each (Eq. 22).

        Parameters
        ----------
        X_new : array_like, shape (m, layer_sizes[0]), or one row (a number for one input)
        y_new : array_like, shape (m, layer_sizes[-1]), or (m,) for one output (a number for
            one datum)

        Returns
        -------
        IncrementalSFP
            ``self``.

        Raises
        ------
        RuntimeError
            Before :meth:`fit`.
        ValueError
            If the rows have the wrong width, NaN or infinite values, or ``X_new`` and ``y_new``
            have different numbers of rows; nothing is added then.
        """
        if self.model is None:
            raise RuntimeError("call fit on an initial sample before partial_fit")
        X_new = as_rows(X_new, self.layer_sizes[0], "X_new")
        Y_new = as_rows(y_new, self.layer_sizes[-1], "y_new")
        if len(X_new) != len(Y_new):
            raise ValueError(f"X_new has {len(X_new)} rows but y_new has {len(Y_new)}")
        for x_row, y_row in zip(X_new, Y_new, strict=True):
            start = time.perf_counter()
            self._X = np.vstack([self._X, x_row])
            self._Y = np.vstack([self._Y, y_row])
            pm.set_data(
                {f"{self.name}_X": self._X, self._y_name: self._Y},
                model=self.model,
            )
            self._sweep()
            self.sweep_seconds.append(time.perf_counter() - start)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The network averaged over the last ``window`` sweeps (Eq. 17).

        Parameters
        ----------
        X : array_like, shape (n, layer_sizes[0]), or one row (a number for one input)

        Returns
        -------
        ndarray, shape (n, outputs)

        Raises
        ------
        RuntimeError
            Before :meth:`fit`.
        ValueError
            If ``X`` does not have ``layer_sizes[0]`` columns or has NaN or infinite values.
        """
        if self.model is None:
            raise RuntimeError("call fit before predict")
        X = as_rows(X, self.layer_sizes[0], "X")
        recent = self.draws[-self.window :]
        samples = xr.Dataset(
            {
                var.name: (
                    ("chain", "draw", *self.model.named_vars_to_dims[var.name]),
                    np.stack([d[var.name] for d in recent])[None],
                )
                for var in sampled_parameters(self.network)
            }
        )
        return self.network.predict_mean(samples, X).values

    def _build(self, X: np.ndarray, Y: np.ndarray) -> None:
        """The model (``U(-1, 1)`` weights, the data, the loss, a flat Eq. 21 prior) and step."""
        with pm.Model() as model:
            X_data = pm.Data(f"{self.name}_X", X)
            network = mlp(X_data, self.layer_sizes, output=self.output, name=self.name)
            likelihood = gaussian_likelihood(network, Y, D=self.D)
            for var in sampled_parameters(network):
                marginal_prior(
                    var, _flat_marginals(var, model), points=self.prior_points, floor=self.floor
                )
            step = SFPStep(L=self.L, model=model)
        self.model, self.network, self.step = model, network, step
        self._y_name = f"{likelihood.name}_data"
        self._X, self._Y = X, Y
        # Kept: model.initial_point() compiles a function at every call.
        self._start = DictToArrayBijection.map(model.initial_point())

    def _start_over(self, X: np.ndarray, Y: np.ndarray) -> None:
        """A fitted learner back to the state :meth:`_build` leaves, on new data."""
        self.draws.clear()
        self.sweep_seconds.clear()
        self.prior_marginals = {}
        self._X, self._Y = X, Y
        pm.set_data({f"{self.name}_X": X, self._y_name: Y}, model=self.model)
        self._set_prior(
            {var.name: _flat_marginals(var, self.model) for var in sampled_parameters(self.network)}
        )
        self.step.reset_tuning()

    def _sweep(self) -> dict[str, Any]:
        """One SFP sweep from the current state; records the draw and returns the stats."""
        self._q, stats = self.step.astep(self._q)
        # Outside pm.sample nobody logs the step's warning stat: do what pm.sample does.
        log_warning_stats(stats)
        x = self.step.layout.from_value(self._q.data)
        self.draws.append(
            {
                name: x[slc].reshape(shape)
                for name, shape, slc in zip(
                    self.step.layout.rv_names,
                    self.step.layout.shapes,
                    self.step.layout.slices,
                    strict=True,
                )
            }
        )
        return stats[0]

    def _install_prior(self, kept: list[dict[str, Any]]) -> None:
        """Marginals of the kept sweeps (Eq. 7) → the prior tables of Eq. 21."""
        prior_marginals = {}
        for var in sampled_parameters(self.network):
            # Each sweep's stat has a leading draw axis of length 1 (see SFPStep); stacked, the
            # sweeps give (draws, *shape, points).
            cdfs, boxes = (
                np.concatenate([stats[prefix + var.name] for stats in kept])
                for prefix in (STAT_PREFIX_CDF, STAT_PREFIX_BOX)
            )
            marginals = np.empty(cdfs.shape[1:-1], dtype=object)
            for index in np.ndindex(marginals.shape):
                marginals[index] = average_recorded_conditionals(boxes[:, *index], cdfs[:, *index])
            prior_marginals[var.name] = marginals
        self._set_prior(prior_marginals)
        self.prior_marginals = prior_marginals

    def _set_prior(self, marginals: dict[str, np.ndarray]) -> None:
        """Tabulate ``marginals`` (variable name → object array) into the Eq. 21 prior's data."""
        new_tables = {}
        for name, var_marginals in marginals.items():
            lower, upper, table = log_density_table(
                var_marginals, points=self.prior_points, floor=self.floor
            )
            prefix = f"{name}_marginal_prior"
            new_tables |= {
                f"{prefix}_lower": lower,
                f"{prefix}_upper": upper,
                f"{prefix}_logpdf": table,
            }
        pm.set_data(new_tables, model=self.model)


def _flat_marginals(var: Any, model: pm.Model) -> np.ndarray:
    """The ``U(-1, 1)`` marginal for every element of ``var``: the prior before any data."""
    flat = Marginal(np.array([-1.0, 1.0]), np.array([0.0, 1.0]))
    return np.full(static_shape(var, model), flat, dtype=object)
