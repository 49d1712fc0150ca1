"""A multilayer perceptron inside a ``pm.Model``: the :class:`Network` record and :func:`mlp`.

:func:`mlp` builds the weights, biases (:mod:`pymc_sfp.nn.priors`) and output ``F(X, w)`` of a
network as a PyTensor graph in the current model and returns them in a :class:`Network`, whose
methods evaluate the network over posterior draws in NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.tensor.variable import TensorVariable

from pymc_sfp._validation import check_bool, check_layer_sizes, check_positive_finite
from pymc_sfp.nn import _prediction
from pymc_sfp.nn._data import ensure_coord, input_data
from pymc_sfp.nn.integrated import OutputTargets
from pymc_sfp.nn.priors import PRIORS, layer_parameters

__all__ = ["OUTPUTS", "OUTPUT_LAYERS", "Network", "mlp", "networks_of"]

#: Output units accepted by :func:`mlp`.
OUTPUTS = ("linear", "softmax")
#: Treatments of the output layer accepted by :func:`mlp`.
OUTPUT_LAYERS = ("sampled", "integrated")

# The model's attribute listing the networks :func:`mlp` built in it, so that a step can exploit
# their structure (see :func:`networks_of`). On the model, so that it travels with a pickled
# model; the cycle with each network's ``model`` is garbage like any other.
_NETWORKS_ATTRIBUTE = "_pymc_sfp_networks"


def networks_of(model: pm.Model) -> tuple[Network, ...]:
    """The networks :func:`mlp` built in ``model``, in the order they were built."""
    return tuple(vars(model).get(_NETWORKS_ATTRIBUTE, ()))


@dataclass(frozen=True)
class Network:
    """A multilayer perceptron built by :func:`mlp` inside a ``pm.Model``.

    Attributes
    ----------
    name : str
        Prefix of every variable, dim and data container of the network.
    layer_sizes : tuple of int
        Units per layer, inputs first, outputs last.
    output_type : {"linear", "softmax"}
        The output units.
    prior : {"uniform", "gaussian", "group", "ard"}
        The weight prior.
    X : SharedVariable
        The input data container, shape ``(n, layer_sizes[0])``; change it with
        ``pm.set_data``.
    weights, biases : tuple of TensorVariable
        Per layer, the weights (``(units in, units out)``) and biases (``(units out,)``) on their
        own scale: random variables for the ``"uniform"`` and ``"gaussian"`` priors,
        ``pm.Deterministic`` ``scale · z`` for ``"group"`` and ``"ard"`` (random variables with
        ``centred=True``).
    scales : dict of str to TensorVariable
        The scale hyperparameter of each weight group (empty for the fixed priors): group name
        (``"w0"``, ``"b0"``, …, ``"out"``) → random variable.
    logits : TensorVariable or None
        The output units' summed input, ``(n, layer_sizes[-1])``; ``None`` when the output layer
        is integrated out.
    output : TensorVariable or None
        ``F(X, w)``: ``logits`` for linear outputs, their softmax otherwise; a
        ``pm.Deterministic`` named ``f"{name}_output"`` if :func:`mlp` was asked to keep it;
        ``None`` when the output layer is integrated out.
    obs_dim : str or None
        The dim of the data rows (``None`` for a user's data container without dims).
    unit_dims : tuple of str
        The dim of each layer's units, inputs first.
    out_coords : tuple
        Coordinate values of the output units.
    output_layer : {"sampled", "integrated"}
        Whether the output layer's weights and biases are variables of the model or integrated
        out (then :attr:`weights` and :attr:`biases` hold only the hidden layers).
    features : TensorVariable
        The last hidden layer's output, ``(n, layer_sizes[-2])``.
    output_sd : TensorVariable or float or None
        The prior sd of the output layer's weights and biases (the ``"out"`` scale, or the fixed
        ``prior_scale``); ``None`` for the uniform prior.
    targets : OutputTargets or None
        For an integrated output layer, the targets and noise sd that
        :func:`~pymc_sfp.nn.gaussian_likelihood` attaches (the one mutable part of a network,
        filled once; see :class:`~pymc_sfp.nn.integrated.OutputTargets`); ``None`` when the
        output layer is sampled.
    model : pymc.Model
        The model the network was built in; its coords label the rows and units of
        :meth:`predict` and :meth:`sample_output_layer`.
    """

    name: str
    layer_sizes: tuple[int, ...]
    output_type: str
    prior: str
    X: SharedVariable
    weights: tuple[TensorVariable, ...]
    biases: tuple[TensorVariable, ...]
    scales: dict[str, TensorVariable]
    logits: TensorVariable | None
    output: TensorVariable | None
    obs_dim: str | None
    unit_dims: tuple[str, ...]
    out_coords: tuple
    output_layer: str = "sampled"
    features: TensorVariable | None = None
    output_sd: TensorVariable | float | None = None
    targets: OutputTargets | None = field(default=None, compare=False, repr=False)
    model: pm.Model | None = field(default=None, compare=False, repr=False)

    def predict(self, idata: Any, X_new: Any = None, *, group: str = "posterior") -> xr.DataArray:
        """The network's outputs for every draw, evaluated at once in NumPy.

        No PyMC sampling and no compilation: the weights and biases of each draw are read from
        ``idata`` (their constrained values, which the DataTree stores) and the layers are
        batched matrix products over the draws.

        Parameters
        ----------
        idata : xarray.DataTree or xarray.Dataset
            The result of ``pm.sample`` (or ``pm.sample_prior_predictive`` with
            ``group="prior"``), or one group of it as a Dataset. It must hold every variable in
            :attr:`weights` and :attr:`biases`. With an integrated output layer, each draw's
            output layer is its conditional mean given the data (a Rao–Blackwellised
            prediction, see :meth:`sample_output_layer`), unless ``idata`` holds the output
            layer's weights and biases (those of :meth:`sample_output_layer`), which are then
            used. The conditional is rebuilt from the training data that the DataTree of
            ``pm.sample`` records (``constant_data``), so ``pm.set_data`` of new inputs does not
            change it; given a Dataset, from the model's current data, which must then be the
            training data. Predict at new inputs with ``X_new``: PyMC's
            ``sample_posterior_predictive(..., extend_inferencedata=True)`` after
            ``pm.set_data`` overwrites the recorded data with the new inputs (refused here only
            where that changes the number of rows).
        X_new : array_like, shape (m, layer_sizes[0]), optional
            Inputs to predict at; the model's current ``X`` by default.
        group : str, default "posterior"
            The group of a DataTree to read.

        Returns
        -------
        xarray.DataArray
            ``F(X_new, w)`` with the draws' dims (``chain``, ``draw``) followed by
            ``(obs_dim, out dim)``; class probabilities for softmax outputs.

        Raises
        ------
        ValueError
            If ``X_new`` is not a 2-D array of ``layer_sizes[0]`` columns without NaN rows, or
            ``idata`` lacks a weight or bias.
        """
        return _prediction.predict(self, idata, X_new, group)

    def predict_mean(
        self, idata: Any, X_new: Any = None, *, group: str = "posterior"
    ) -> xr.DataArray:
        """The posterior-mean prediction ``⟨F(x)⟩``, the average of ``F`` over the draws.

        Berrones (2009) Eq. 17 (SFP-S); Neal (1993) Eq. 9, the best prediction under squared
        loss. For softmax outputs, the predictive class probabilities. Arguments as in
        :meth:`predict`.

        Returns
        -------
        xarray.DataArray
            Dims ``(obs_dim, out dim)``.
        """
        draws = self.predict(idata, X_new, group=group)
        return draws.mean(dim=list(draws.dims[:-2]))

    def sample_output_layer(
        self, idata: Any, *, random_seed: Any = None, group: str = "posterior"
    ) -> xr.Dataset:
        """Draws of an integrated output layer's weights and biases, one per posterior draw.

        With ``output_layer="integrated"`` the sampler moves everything but the output layer;
        given a draw of the rest, the layer's weights and biases are Gaussian
        (:mod:`pymc_sfp.core.linear_gaussian`), and one exact draw from that conditional
        completes a draw of the joint posterior. Merge the result into the posterior to use it, e.g.
        ``posterior = idata["posterior"].to_dataset().merge(net.sample_output_layer(idata))``;
        :meth:`predict` then uses these weights instead of the conditional mean. This is the
        route to posterior-predictive draws (``pm.sample_posterior_predictive`` has none for an
        integrated output layer; see the Notes of :func:`mlp`).

        Parameters
        ----------
        idata : xarray.DataTree or xarray.Dataset
            The result of ``pm.sample`` on the model, or its posterior group as a Dataset.
        random_seed : int, numpy Generator or None
            Seed of the draws.
        group : str, default "posterior"

        Returns
        -------
        xarray.Dataset
            ``f"{name}_w{J}"`` with dims ``(chain, draw, last hidden dim, out dim)`` and
            ``f"{name}_b{J}"`` with dims ``(chain, draw, out dim)``, ``J = len(layer_sizes) - 2``
            the output layer's index.

        Raises
        ------
        ValueError
            If the network's output layer is not integrated out, no targets are attached
            (:func:`~pymc_sfp.nn.gaussian_likelihood`), or ``idata`` lacks a variable of the
            network.
        """
        return _prediction.sample_output_layer(self, idata, random_seed, group)


def mlp(
    X: Any,
    layer_sizes: Sequence[int],
    *,
    output: Literal["linear", "softmax"] = "linear",
    prior: Literal["uniform", "gaussian", "group", "ard"] = "uniform",
    prior_scale: float = 1.0,
    name: str = "net",
    centred: bool = False,
    deterministic: bool = False,
    output_layer: Literal["sampled", "integrated"] = "sampled",
) -> Network:
    """Build a multilayer perceptron with tanh hidden units in the current ``pm.Model``.

    For a row ``x`` of inputs, ``F(x, w) = g(tanh(… tanh(x W_0 + b_0) …) W_J + b_J)`` with
    ``g`` the identity (regression) or the softmax (classification), as in Berrones (2009,
    §3–4) and Neal (1993, §3); ``W_l`` has shape ``(units in, units out)`` and
    ``J = len(layer_sizes) - 2`` is the output layer's index.

    Parameters
    ----------
    X : array_like or SharedVariable, shape (n, layer_sizes[0])
        The inputs. An array is wrapped in ``pm.Data(f"{name}_X", X, dims=(f"{name}_obs",
        f"{name}_in"))``; a ``pm.Data`` of the model is used as it is, with its own dims if it
        has any.
    layer_sizes : sequence of int
        Units per layer: inputs, one or more hidden layers, outputs, e.g. ``(2, 16, 2)``.
    output : {"linear", "softmax"}, default "linear"
        The output units.
    prior : {"uniform", "gaussian", "group", "ard"}, default "uniform"
        The prior of the weights and biases (:mod:`pymc_sfp.nn.priors`; see Notes).
    prior_scale : float, default 1.0
        ``"uniform"``: the bound ``b`` of ``U(-b, b)`` (Berrones: 1). ``"gaussian"``: the
        standard deviation. ``"group"``, ``"ard"``: the scale of the half-normal prior of each
        group's standard deviation.
    name : str, default "net"
        Prefix of the network's variables, dims and data.
    centred : bool, default False
        ``"group"`` and ``"ard"`` only: sample the weights themselves, ``w ~ N(0, scale²)``,
        instead of the unscaled ``z`` with ``w = scale · z`` (see Notes).
    deterministic : bool, default False
        Keep the output in the trace as ``pm.Deterministic(f"{name}_output")`` (memory
        ``n × outputs`` per draw), so that ``pm.sample_posterior_predictive`` can return it after
        ``pm.set_data``. :meth:`Network.predict` does not need it.
    output_layer : {"sampled", "integrated"}, default "sampled"
        ``"integrated"``: the output layer's weights and biases are not variables of the model;
        :func:`gaussian_likelihood` integrates them out analytically (see Notes). Needs linear
        outputs and a Gaussian prior (``"gaussian"``, ``"group"`` or ``"ard"``).

    Returns
    -------
    Network

    Raises
    ------
    TypeError
        If ``prior_scale`` is not a real number, ``centred`` or ``deterministic`` not a bool, or
        ``X`` a tensor rather than data.
    ValueError
        For an unknown ``output`` or ``prior``, a ``prior_scale`` that is not finite and > 0,
        ``centred=True`` with a prior other than ``"group"`` or ``"ard"``, an unknown
        ``output_layer``, ``"integrated"`` with softmax outputs, the uniform prior or
        ``deterministic=True``, ``layer_sizes``
        that are not at least three positive integers, ``layer_sizes[0]`` not
        equal to the columns of ``X``, fewer than two softmax outputs, ``X`` with NaN or
        infinite values (the rows are named), or a dim of the network (rows, units) that the
        model's coords give another length.

    Notes
    -----
    Weight groups of the hierarchical priors (Neal 1993, §3.1: "input to hidden, bias to hidden,
    and hidden/bias to output", after MacKay): for each hidden layer ``l`` its incoming weights
    (group ``"w{l}"``, scale ``f"{name}_sd_w{l}"``) and its biases (``"b{l}"``); the weights and
    biases of the output layer form one group (``"out"``). Neal fixes the prior width to one and
    multiplies each weight by its group's scale factor, sampling the unscaled weights and the
    scale factors: here ``w = scale · z``, ``z ~ N(0, 1)`` (variables ``f"{name}_w{l}_z"``), which
    is also the non-centred form that gradient samplers need. ``"ard"`` gives the first layer's
    weights one scale per input unit (dims ``(f"{name}_in",)``, or the input dim of a
    ``pm.Data`` ``X``).

    ``centred=True`` makes the weights and biases the free variables (same names, no ``_z``).
    This is the form for Neal's split scheme, where the dynamics move the weights and another
    step moves the scales given the weights (``pm.Slice`` in a ``CompoundStep``; see the
    stochastic-dynamics guide): on the robot arm it mixes the scales better than any sampler of
    the full non-centred posterior, though far worse than integrating the output layer out
    (below), the better choice for regression. With one gradient sampler for every variable keep
    the non-centred default, since a centred scale and its weights form a funnel.

    Scale prior: Neal (1993) does not state it. His later work (Neal 1996, *Bayesian Learning
    for Neural Networks*) puts Gamma priors on the precisions ``1 / scale²``; MacKay's evidence
    framework optimises them under a flat prior on their logarithm. Made vague, these approach
    the improper ``1 / scale``, under which the posterior is improper (the likelihood tends to a
    constant as a scale → 0). Here each scale is ``HalfNormal(prior_scale)``: proper, weakly
    informative for standardised inputs and outputs, and with a finite density at zero, so that
    a group can be switched off without a funnel in the non-centred coordinates. Pass
    ``prior_scale`` for data on other scales. The scales are not divided by the square root of
    the number of units feeding in (Neal 1996's rule for wide networks).

    *Integrated output layer.* A linear output layer with a Gaussian prior under Gaussian noise
    is conjugate: given the hidden layers, the targets are Gaussian with the layer's weights
    integrated out (:mod:`pymc_sfp.nn.integrated`), and the weights given the data are
    Gaussian too. The posterior of everything else is unchanged, but the sampler no longer has to
    move the output weights together with the hidden ones: on the robot arm, where no sampler
    of the full posterior converged the group scales, the exact dynamics then converge them in
    a few thousand draws (see the stochastic-dynamics guide). The cost per gradient grows by a
    ``(h + 1) × (h + 1)`` Cholesky factorisation, ``h`` the last hidden layer's width.
    :meth:`Network.predict` then uses each draw's conditional-mean output layer, and
    :meth:`Network.sample_output_layer` draws the weights themselves.

    *Posterior predictive of an integrated output layer.* ``pm.sample_posterior_predictive``
    returns no draws of the targets: their likelihood is a ``pm.Potential``, which PyMC ignores
    there (with a generic warning). Drawing them from the marginal given the hidden layers would
    be wrong (that is the prior predictive of the output layer); each draw's output layer must
    come from its conditional given the data first. So predict with :meth:`Network.predict`::

        layer = net.sample_output_layer(idata, random_seed=1)  # one draw per posterior draw
        posterior = idata["posterior"].to_dataset().merge(layer)
        outputs = net.predict(posterior, X_new)  # F(X_new, w), dims (chain, draw, obs, out)
        noise = outputs.copy(data=rng.standard_normal(outputs.shape))
        y_new = outputs + posterior[f"{name}_y_sigma"] * noise  # gaussian_likelihood's sigma
    """
    model = pm.modelcontext(None)
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
    prior_scale = check_positive_finite(prior_scale, "prior_scale")
    centred = check_bool(centred, "centred")
    deterministic = check_bool(deterministic, "deterministic")
    if centred and prior not in ("group", "ard"):
        raise ValueError(
            f"centred=True applies to the hierarchical priors 'group' and 'ard', not {prior!r}"
        )
    if output_layer not in OUTPUT_LAYERS:
        raise ValueError(f"output_layer must be one of {OUTPUT_LAYERS}, got {output_layer!r}")
    integrate_output = output_layer == "integrated"
    if integrate_output and (output != "linear" or prior == "uniform" or deterministic):
        raise ValueError(
            "output_layer='integrated' needs linear outputs, a Gaussian prior ('gaussian', "
            "'group' or 'ard') and deterministic=False (there is no output graph to keep); got "
            f"output={output!r}, prior={prior!r}, deterministic={deterministic!r}"
        )
    sizes = check_layer_sizes(layer_sizes)
    if output == "softmax" and sizes[-1] < 2:
        raise ValueError(f"softmax outputs need layer_sizes[-1] >= 2, got {sizes[-1]}")

    X_data, obs_dim, in_dim = input_data(model, X, name, sizes[0])
    hidden_dims = [f"{name}_hidden{i}" for i in range(len(sizes) - 2)]
    out_dim = f"{name}_out"
    unit_dims = (in_dim, *hidden_dims, out_dim)
    for dim, size in zip(unit_dims[1:], sizes[1:], strict=True):
        ensure_coord(model, dim, size)
    weights, biases, scales, output_sd = layer_parameters(
        prior, name, unit_dims, prior_scale, centred, integrate_output
    )

    n_hidden = len(sizes) - 2
    features = X_data
    for W, b in zip(weights[:n_hidden], biases[:n_hidden], strict=True):
        features = pt.tanh(pt.dot(features, W) + b)
    if integrate_output:
        logits = F = None
    else:
        logits = pt.dot(features, weights[-1]) + biases[-1]
        F = pt.special.softmax(logits, axis=-1) if output == "softmax" else logits
    if deterministic:
        F = pm.Deterministic(
            f"{name}_output", F, dims=(obs_dim, out_dim) if obs_dim is not None else None
        )
    network = Network(
        name=name,
        layer_sizes=sizes,
        output_type=output,
        prior=prior,
        X=X_data,
        weights=tuple(weights),
        biases=tuple(biases),
        scales=scales,
        logits=logits,
        output=F,
        obs_dim=obs_dim,
        unit_dims=unit_dims,
        out_coords=tuple(model.coords[out_dim] or range(sizes[-1])),
        output_layer=output_layer,
        features=features,
        output_sd=output_sd,
        targets=OutputTargets() if integrate_output else None,
        model=model,
    )
    vars(model).setdefault(_NETWORKS_ATTRIBUTE, []).append(network)
    return network
