"""Multilayer perceptrons inside a ``pm.Model``: priors, likelihoods and fast prediction.

The networks of the papers: tanh hidden units, linear outputs for regression and softmax outputs
for classification (Berrones 2009, §3–4; Neal 1993, §3). :func:`mlp` builds the weights, biases
and output ``F(X, w)`` of a network as a PyTensor graph in the current model, with one of four
priors:

* ``"uniform"`` — every weight and bias ``U(-b, b)``; Berrones uses ``b = 1``, so the prior's
  support is the box that :class:`pymc_sfp.SFPStep` samples on.
* ``"gaussian"`` — every weight and bias ``N(0, s²)`` with a fixed ``s`` (Neal 1993, Eq. 7).
* ``"group"`` — Neal's / MacKay's hierarchical prior: one scale hyperparameter per weight group,
  sampled with the weights (Neal 1993, §3.1–3.2).
* ``"ard"`` — as ``"group"``, with one scale per input unit for the input→hidden weights
  (automatic relevance determination).

:func:`gaussian_likelihood` (known noise, unknown noise, Neal's noise integrated out, or
Berrones' cold quadratic loss, Eq. 23) and :func:`categorical_likelihood` attach the data.
With ``output_layer="integrated"`` a regression network's linear output layer is integrated
out analytically (:mod:`pymc_sfp.nn.integrated`) and :meth:`Network.sample_output_layer`
draws it back.
:meth:`Network.predict` evaluates the network for every posterior draw at once in NumPy, and
:meth:`Network.predict_mean` averages it over the draws (Berrones Eq. 17; Neal Eq. 9).
:class:`NoisyPerceptron` is the single-layer perceptron with output noise (Opper & Winther 1996,
Eq. 4) as a distribution of ``±1`` labels given the field ``X @ w``
(:mod:`~pymc_sfp.nn.perceptron`); :func:`pymc_sfp.fit_tap` reads it from a model.

Every array gets named dims, so the DataTree that ``pm.sample`` returns is readable: with
``name="net"`` and ``layer_sizes=(2, 16, 2)`` the data are ``net_X`` with dims
``("net_obs", "net_in")``, the weights ``net_w0`` ``("net_in", "net_hidden0")`` and ``net_w1``
``("net_hidden0", "net_out")``, the biases ``net_b0`` ``("net_hidden0",)`` and ``net_b1``
``("net_out",)``.

Import the public names from here (``from pymc_sfp.nn import mlp``). The modules:
:mod:`~pymc_sfp.nn.network` (the :class:`Network` record and :func:`mlp`),
:mod:`~pymc_sfp.nn.priors`, :mod:`~pymc_sfp.nn.likelihoods` and
:mod:`~pymc_sfp.nn.integrated` (the integrated output layer's marginal likelihood); prediction
in NumPy lives in the private ``_prediction``.
"""

from pymc_sfp.nn.likelihoods import (
    NEAL_M0,
    NEAL_S0,
    categorical_likelihood,
    gaussian_likelihood,
)
from pymc_sfp.nn.network import OUTPUT_LAYERS, OUTPUTS, Network, mlp
from pymc_sfp.nn.perceptron import NoisyPerceptron
from pymc_sfp.nn.priors import PRIORS

__all__ = [
    "NEAL_M0",
    "NEAL_S0",
    "OUTPUTS",
    "OUTPUT_LAYERS",
    "PRIORS",
    "Network",
    "NoisyPerceptron",
    "categorical_likelihood",
    "gaussian_likelihood",
    "mlp",
]
