"""Likelihoods that attach data to a :class:`~pymc_sfp.nn.Network`'s outputs.

:func:`gaussian_likelihood` for regression: known noise, unknown noise, Neal's (1993) noise
integrated out (Eq. 3), Berrones' (2009) cold quadratic loss (Eq. 23), or, for a network whose
output layer is integrated out, the marginal likelihood of :mod:`pymc_sfp.nn.integrated`.
:func:`categorical_likelihood` for classification with softmax outputs.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from pytensor.tensor.variable import TensorVariable

from pymc_sfp._validation import (
    check_finite_rows,
    check_positive_finite,
    check_positive_int,
    describe_rows,
)
from pymc_sfp.nn._data import floatx, observed_data
from pymc_sfp.nn.integrated import integrated_likelihood
from pymc_sfp.nn.network import Network

__all__ = ["NEAL_M0", "NEAL_S0", "categorical_likelihood", "gaussian_likelihood"]

#: Neal's (1993, §3.1) parameters of the vague prior of the noise level that Eq. 3 integrates out.
NEAL_S0 = 0.1
NEAL_M0 = 0.1


def gaussian_likelihood(
    network: Network,
    y: Any,
    *,
    sigma: float | TensorVariable | Literal["integrated"] | None = None,
    D: float | None = None,
    name: str | None = None,
    batch_size: int | None = None,
) -> TensorVariable:
    """Attach regression targets ``y`` to a network's outputs.

    Four forms, chosen by ``sigma`` and ``D``:

    * ``sigma`` a number or a model variable: ``y ~ N(F(x, w), sigma²)`` independently (Neal
      1993, Eq. 2).
    * ``sigma=None`` (default): unknown noise, ``sigma ~ HalfNormal(1)`` named
      ``f"{name}_sigma"``, shared by all outputs (vague for standardised outputs; pass your own
      variable as ``sigma`` otherwise).
    * ``sigma="integrated"``: Neal's (1993) Eq. 3, the noise level integrated out under a vague
      prior, ``log p(y | w) = -(m0 + n·K)/2 · log(s0 + Σ_c ‖y_c − F(x_c, w)‖²)`` with
      ``s0 = m0 = 0.1`` (:data:`NEAL_S0`, :data:`NEAL_M0`), ``n`` rows and ``K`` outputs,
      added as a ``pm.Potential``.
    * ``D`` given: Berrones' (2009) Eq. 23 cold quadratic loss,
      ``log p(y | w) = -(1/D)(1/n) Σ_c ‖y_c − F(x_c, w)‖²``, added as a ``pm.Potential``. It
      equals a Gaussian with ``sigma² = D·n/2`` up to a constant; ``D`` is a temperature of the
      likelihood alone: a small ``D`` sharpens it while the sampler runs at temperature 1 (the
      paper uses 5e-4 and 5e-3). It is not the diffusion constant ``D`` of
      :class:`~pymc_sfp.SFPStep` (Eq. 4), which tempers the whole posterior; the paper names
      both ``D``.

    For a network built with ``output_layer="integrated"`` only Gaussian noise with one sd
    (``sigma`` a number, a scalar variable, or ``None``) is possible: the output layer's weights
    and biases are integrated out, and the likelihood is the marginal density of ``y`` given
    the hidden layers, added as a ``pm.Potential``
    (:func:`pymc_sfp.nn.integrated.marginal_loglik`). ``pm.sample_posterior_predictive`` has
    then nothing to draw (PyMC ignores potentials, with a warning, and returns no ``y``); a
    posterior-predictive draw needs each draw's output layer from its conditional first, which
    :meth:`Network.sample_output_layer` gives (see the Notes of :func:`~pymc_sfp.nn.mlp`)::

        layer = net.sample_output_layer(idata, random_seed=1)
        posterior = idata["posterior"].to_dataset().merge(layer)
        outputs = net.predict(posterior, X_new)  # F(X_new, w) per draw
        noise = outputs.copy(data=rng.standard_normal(outputs.shape))
        y_new = outputs + posterior[f"{name}_sigma"] * noise  # or sigma, if a number

    Parameters
    ----------
    network : Network
    y : array_like, shape (n, outputs), or (n,) for one output
        The targets, one row per row of ``X``. Stored as ``pm.Data(f"{name}_data")``.
    sigma : float, array_like, TensorVariable, "integrated" or None, default None
        The noise standard deviation (see above); an array broadcasts against the outputs,
        e.g. one sd per output.
    D : float, optional
        The likelihood temperature ``D`` of Berrones' Eq. 23; exclusive with ``sigma``.
    name : str, optional
        Name of the observed variable or potential; ``f"{network.name}_y"`` by default.
    batch_size : int, optional
        Evaluate the likelihood on ``batch_size`` random rows of ``X`` and ``y`` at every
        evaluation (``pm.Minibatch``, rows drawn with replacement), scaled up to all the rows
        of the data containers (``total_size``, which follows ``pm.set_data``; with ``D``, the
        batch's mean loss): an unbiased estimate of the log-likelihood, for the
        stochastic-gradient form of :class:`~pymc_sfp.StochasticDynamics` (``correct=False``;
        see its Notes) on data too large for a full gradient per step. Only that sampler, or
        variational inference (``pm.fit``), takes such a model: a Metropolis test or NUTS's
        tree on a random log-density samples a wrong posterior, and PyMC's ``pm.sample`` with
        its default NUTS does so without a warning (the package's other steps refuse it). Only
        for ``sigma`` a number, a variable or ``None`` (one sd, or one per output), or ``D``:
        Neal's integrated noise and an integrated output layer couple all the rows (a log of a
        sum, a Cholesky factor of all of them), so a batch would not estimate them without
        bias. The observed variable then has the batch's shape and no dims: it has no
        posterior-predictive draws of the data's rows; predict with :meth:`Network.predict`.

    Returns
    -------
    TensorVariable
        The observed variable (dims ``(obs, out)``; without ``batch_size`` it has
        posterior-predictive draws after ``pm.set_data`` of new inputs), or the potential for
        ``"integrated"``, ``D`` and an integrated output layer, which has none: predict those
        with :meth:`Network.predict` and :meth:`Network.predict_mean` (for an integrated output
        layer, draws as above).

    Raises
    ------
    TypeError
        If ``D`` or ``sigma`` (given as a value) is not a number, or ``batch_size`` not a
        number (``2.5`` is a ``ValueError``).
    ValueError
        If ``y`` has NaN rows (named), a different number of rows than ``X`` or columns than
        outputs, ``sigma`` is not finite and > 0, does not broadcast against ``y`` or is an
        unknown string, ``D`` is not finite and
        > 0, or both ``sigma`` and ``D`` are given; for an integrated output layer, if
        ``sigma`` is ``"integrated"``, not a scalar, or ``D`` is given, or the network already
        has targets; if ``batch_size`` is not in ``1 … n`` or is given with
        ``sigma="integrated"`` or an integrated output layer.
    """
    name = name or f"{network.name}_y"
    n_outputs = network.layer_sizes[-1]
    values = np.asarray(y, dtype=float)
    if values.ndim == 1 and n_outputs == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[1] != n_outputs:
        raise ValueError(f"y must have shape (n, {n_outputs}), got {values.shape}")
    if D is not None:
        if sigma is not None:
            raise ValueError("pass either sigma or D (Berrones' Eq. 23 loss), not both")
        D = check_positive_finite(D, "D")
    if isinstance(sigma, str):
        if sigma != "integrated":
            raise ValueError(f"sigma must be a number, a variable, None or 'integrated': {sigma!r}")
    elif sigma is not None and not isinstance(sigma, TensorVariable):
        if not np.issubdtype(np.asarray(sigma).dtype, np.number):  # refuses True, too
            raise TypeError(f"sigma must be a number, an array of numbers or a variable: {sigma!r}")
        sigma = floatx(sigma)
        if not np.all(np.isfinite(sigma) & (sigma > 0)):
            raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
        try:
            fits = np.broadcast_shapes(sigma.shape, values.shape) == values.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"sigma of shape {sigma.shape} does not broadcast against the targets' shape "
                f"{values.shape}: give one sd, or one per output ({n_outputs})"
            )

    if batch_size is not None:
        batch_size = _check_batch_size(batch_size, len(values))
        if isinstance(sigma, str) or network.output_layer == "integrated":
            raise ValueError(
                "batch_size needs a likelihood that is a sum over the rows: not Neal's "
                "integrated noise (sigma='integrated') or an integrated output layer"
            )
        sd_type = pt.as_tensor(sigma).type if sigma is not None else None
        if sd_type is not None and sd_type.ndim == 2 and sd_type.shape[0] != 1:
            raise ValueError(
                "batch_size slices the rows of X and y, not those of sigma: give one sd, or one "
                "per output"
            )

    if network.output_layer == "integrated":
        return integrated_likelihood(network, values, sigma, D, name)
    y_data, size = observed_data(
        network, values, name, network.unit_dims[-1:], network.output.shape
    )
    output, targets = network.output, y_data
    if batch_size is not None:
        output, targets, size = _on_a_batch(network, network.output, y_data, batch_size)
    squares = pt.sum(pt.square(targets - output))
    # The row count in floatX: an int64 shape would turn a float32 graph into float64.
    n_rows = pt.cast(targets.shape[0], squares.dtype)
    if D is not None:
        return pm.Potential(name, -squares / (floatx(D) * n_rows))
    if isinstance(sigma, str):
        exponent = (floatx(NEAL_M0) + n_rows * n_outputs) / 2
        return pm.Potential(name, -exponent * pt.log(floatx(NEAL_S0) + squares))
    if sigma is None:
        sigma = pm.HalfNormal(f"{name}_sigma", 1.0)
    return pm.Normal(name, mu=output, sigma=sigma, observed=targets, **size)


def categorical_likelihood(
    network: Network, y: Any, *, name: str | None = None, batch_size: int | None = None
) -> TensorVariable:
    """Attach class labels ``y`` to a softmax network: ``y ~ Categorical(softmax(logits))``.

    The likelihood of classification in Berrones (2009, §4.1) with softmax outputs, evaluated
    from the logits for numerical stability. (The paper's runs use the quadratic loss of Eq. 23
    on one-hot targets instead: :func:`gaussian_likelihood` with ``D`` and ``y`` one-hot.)

    Parameters
    ----------
    network : Network
        Built with ``output="softmax"``.
    y : array_like of int, shape (n,)
        Labels in ``0 .. layer_sizes[-1] - 1``, one per row of ``X``; stored as
        ``pm.Data(f"{name}_data")``.
    name : str, optional
        Name of the observed variable; ``f"{network.name}_y"`` by default.
    batch_size : int, optional
        Evaluate the likelihood on ``batch_size`` random rows of ``X`` and ``y`` at every
        evaluation, scaled up to all the rows, as :func:`gaussian_likelihood`'s ``batch_size``
        does (and with its restrictions: only for the stochastic-gradient form of
        :class:`~pymc_sfp.StochasticDynamics` or for ``pm.fit``).

    Returns
    -------
    TensorVariable
        The observed variable, dims ``(obs,)`` (the batch's shape and no dims with
        ``batch_size``).

    Raises
    ------
    TypeError
        If ``batch_size`` is not a number.
    ValueError
        If the network's outputs are not softmax, or ``y`` is not 1-D, has a different number
        of rows than ``X``, or has NaN, non-integer or out-of-range labels (the rows are named);
        if ``batch_size`` is not in ``1 … n``.
    """
    if network.output_type != "softmax":
        raise ValueError(
            f"categorical_likelihood needs a network with output='softmax', not "
            f"{network.output_type!r}"
        )
    name = name or f"{network.name}_y"
    n_classes = network.layer_sizes[-1]
    values = np.asarray(y)
    if values.ndim != 1:
        raise ValueError(f"y must be 1-D class labels, got shape {values.shape}")
    labels = values.astype(float)
    check_finite_rows(labels, "y")
    bad = (labels != np.round(labels)) | (labels < 0) | (labels >= n_classes)
    if bad.any():
        raise ValueError(
            f"y must hold integer labels in 0..{n_classes - 1}; bad labels in "
            f"{describe_rows(np.flatnonzero(bad))}"
        )
    if batch_size is not None:
        batch_size = _check_batch_size(batch_size, len(labels))
    y_data, size = observed_data(
        network, labels.astype(np.int64), name, (), network.logits.shape[:1]
    )
    logits, targets = network.logits, y_data
    if batch_size is not None:
        logits, targets, size = _on_a_batch(network, network.logits, y_data, batch_size)
    return pm.Categorical(name, logit_p=logits, observed=targets, **size)


def _check_batch_size(batch_size: Any, n_rows: int) -> int:
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > n_rows:
        raise ValueError(f"batch_size must be at most the {n_rows} rows, got {batch_size}")
    return batch_size


def _on_a_batch(
    network: Network, rows: TensorVariable, y_data: Any, batch_size: int
) -> tuple[TensorVariable, TensorVariable, dict[str, Any]]:
    """``rows`` (a graph of ``X``, one row per row of it) and the targets on one random batch of
    ``batch_size`` rows (``pm.Minibatch``), with the ``total_size`` that scales the batch's
    log-likelihood up to all the rows."""
    # One random index slices X and y alike; the graph is rebuilt on the batch.
    X_batch, targets = pm.Minibatch(network.X, y_data, batch_size=batch_size)
    on_batch = graph_replace(rows, {network.X: X_batch}, strict=True)
    # The data's current rows, so that pm.set_data of another training set keeps the scale.
    total_size = [y_data.shape[0]] + [None] * (targets.ndim - 1)
    return on_batch, targets, {"total_size": total_size}
