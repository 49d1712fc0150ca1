"""The weight priors of :func:`pymc_sfp.nn.mlp`: uniform, Gaussian, and Neal's hierarchical ones.

* ``"uniform"`` — every weight and bias ``U(-b, b)``; Berrones (2009) uses ``b = 1``, so the
  prior's support is the box that :class:`pymc_sfp.SFPStep` samples on.
* ``"gaussian"`` — every weight and bias ``N(0, s²)`` with a fixed ``s`` (Neal 1993, Eq. 7).
* ``"group"`` — Neal's / MacKay's hierarchical prior: one scale hyperparameter per weight group,
  sampled with the weights (Neal 1993, §3.1–3.2).
* ``"ard"`` — as ``"group"``, with one scale per input unit for the input→hidden weights
  (automatic relevance determination).

The groups, the scales' prior and the centred and non-centred forms are described in the Notes
of :func:`pymc_sfp.nn.mlp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pymc as pm
from pytensor.tensor.variable import TensorVariable

from pymc_sfp.nn._data import floatx

__all__ = ["PRIORS"]

#: Weight priors accepted by :func:`pymc_sfp.nn.mlp`.
PRIORS = ("uniform", "gaussian", "group", "ard")


def scaled_normal(
    var_name: str, scale: TensorVariable, dims: tuple[str, ...], centred: bool
) -> TensorVariable:
    """``w ~ N(0, scale²)``: non-centred as ``w = scale · z``, ``z ~ N(0, 1)`` (Neal's 1993, §3.2
    unscaled weights), or centred, ``w`` itself a free variable."""
    if centred:
        return pm.Normal(var_name, 0.0, scale, dims=dims)
    z = pm.Normal(f"{var_name}_z", 0.0, 1.0, dims=dims)
    return pm.Deterministic(var_name, scale * z, dims=dims)


def layer_parameters(
    prior: str,
    name: str,
    unit_dims: Sequence[str],
    prior_scale: float,
    centred: bool,
    integrate_output: bool,
) -> tuple[list[TensorVariable], list[TensorVariable], dict[str, TensorVariable], Any]:
    """The weights, biases and group scales of every layer under ``prior``, in the current model.

    Parameters
    ----------
    prior : {"uniform", "gaussian", "group", "ard"}
    name : str
        The network's name, prefix of every variable.
    unit_dims : sequence of str
        The dim of each layer's units, inputs first.
    prior_scale : float
        See :func:`pymc_sfp.nn.mlp`.
    centred : bool
        Hierarchical priors only: the weights themselves are the free variables.
    integrate_output : bool
        The output layer gets its scale but no weights or biases (they are integrated out).

    Returns
    -------
    weights, biases : list of TensorVariable
        Per layer (without the output layer when ``integrate_output``).
    scales : dict of str to TensorVariable
        Group name (``"w0"``, ``"b0"``, …, ``"out"``) → scale variable; empty for the fixed
        priors.
    output_sd : TensorVariable or ndarray or None
        The prior sd of the output layer's weights and biases; ``None`` for the uniform prior.
    """
    n_layers = len(unit_dims) - 1
    scale = floatx(prior_scale)
    weights, biases, scales = [], [], {}
    output_sd = None if prior == "uniform" else scale
    for layer in range(n_layers):
        w_name, b_name = f"{name}_w{layer}", f"{name}_b{layer}"
        w_dims, b_dims = (unit_dims[layer], unit_dims[layer + 1]), (unit_dims[layer + 1],)
        is_output = layer == n_layers - 1
        if prior in ("group", "ard") and is_output:
            output_sd = pm.HalfNormal(f"{name}_sd_out", scale)
            scales["out"] = output_sd
        if is_output and integrate_output:
            break
        if prior == "uniform":
            weights.append(pm.Uniform(w_name, -scale, scale, dims=w_dims))
            biases.append(pm.Uniform(b_name, -scale, scale, dims=b_dims))
        elif prior == "gaussian":
            weights.append(pm.Normal(w_name, 0.0, scale, dims=w_dims))
            biases.append(pm.Normal(b_name, 0.0, scale, dims=b_dims))
        elif is_output:
            weights.append(scaled_normal(w_name, output_sd, w_dims, centred))
            biases.append(scaled_normal(b_name, output_sd, b_dims, centred))
        else:
            ard = prior == "ard" and layer == 0
            w_scale = pm.HalfNormal(
                f"{name}_sd_w{layer}", scale, dims=(unit_dims[0],) if ard else None
            )
            b_scale = pm.HalfNormal(f"{name}_sd_b{layer}", scale)
            scales[f"w{layer}"], scales[f"b{layer}"] = w_scale, b_scale
            w_sd = w_scale[:, None] if ard else w_scale
            weights.append(scaled_normal(w_name, w_sd, w_dims, centred))
            biases.append(scaled_normal(b_name, b_scale, b_dims, centred))
    return weights, biases, scales, output_sd
