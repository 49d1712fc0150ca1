"""The perceptron with output noise (Opper & Winther 1996, Eq. 4) as a PyMC distribution.

PyMC has no distribution for a label produced by a step function whose output is flipped at
random. :class:`NoisyPerceptron` is one: the label ``σ ∈ {−1, +1}`` of an example with field
``h`` (the perceptron's internal field, e.g. ``X @ w``) is ``sign(h)``, flipped with probability
``e^(−β) / (1 + e^(−β))``:

``P(σ | h) = e^(−β Θ(−σh)) / (1 + e^(−β))``

with ``Θ(x) = 1`` for ``x > 0`` and 0 otherwise, except that at ``h = 0`` the label ``+1`` is
the right one (the paper's ``Θ`` would make both right there: a density spike at ``w = 0``
that traps samplers started there); ``β = inf`` is the noise-free perceptron.
It has a ``logp`` (for samplers that need no gradient: :class:`pymc_sfp.SFPStep`,
``pm.Slice``; its gradient in ``w`` is zero almost everywhere, so NUTS and ADVI cannot learn from
it) and a random generator (for ``pm.sample_prior_predictive`` and
``pm.sample_posterior_predictive``). :func:`pymc_sfp.fit_tap` recognises it in a model
(``NoisyPerceptron("y", field=X @ w, beta=β, observed=σ)``) and applies the paper's TAP
mean-field theory to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorVariable

__all__ = ["NoisyPerceptron", "NoisyPerceptronRV"]


class NoisyPerceptronRV(RandomVariable):
    """Random labels of the perceptron with output noise (the op behind :class:`NoisyPerceptron`).

    ``rng_fn(rng, field, beta, size)`` draws ``sign(field)`` (``+1`` at ``field = 0``) flipped with
    probability ``1 / (1 + e^β)``.
    """

    name = "noisy_perceptron"
    signature = "(),()->()"
    dtype = "int64"
    _print_name = ("NoisyPerceptron", "\\operatorname{NoisyPerceptron}")

    @classmethod
    def rng_fn(
        cls, rng: np.random.Generator, field: np.ndarray, beta: np.ndarray, size: Any
    ) -> np.ndarray:
        field, beta = np.broadcast_arrays(field, beta)
        if size is not None:
            field, beta = np.broadcast_to(field, size), np.broadcast_to(beta, size)
        clean = np.where(field >= 0, 1, -1)
        # 1 / (1 + e^β) written as e^(−β) / (1 + e^(−β)): finite for β = inf.
        flip = rng.random(clean.shape) < np.exp(-beta) / (1.0 + np.exp(-beta))
        return np.where(flip, -clean, clean).astype(np.int64)


noisy_perceptron = NoisyPerceptronRV()


@numba_core_rv_funcify.register(NoisyPerceptronRV)
def _numba_noisy_perceptron(op: NoisyPerceptronRV, node: Any) -> Any:
    """One draw in Numba, PyTensor's default linker (without it the op runs in object mode)."""

    @numba_basic.numba_njit
    def random(rng: Any, field: float, beta: float) -> int:
        clean = 1 if field >= 0 else -1
        return -clean if rng.uniform() < np.exp(-beta) / (1.0 + np.exp(-beta)) else clean

    return random


class NoisyPerceptron(pm.Discrete):
    r"""Labels ``σ ∈ {−1, +1}`` of a perceptron with output noise (Opper & Winther 1996, Eq. 4).

    .. math:: P(σ \mid h) = \frac{e^{-β\,Θ(-σh)}}{1 + e^{-β}}

    The label is ``sign(h)`` flipped with probability ``e^(−β) / (1 + e^(−β))``.

    Parameters
    ----------
    field : tensor_like of float
        The internal field ``h`` of each example, e.g. ``X @ w`` (the paper's
        ``Δ = w·s/√N`` is ``X @ w`` with prior variance ``1/N`` on ``w``).
    beta : tensor_like of float
        The noise parameter, ``> 0``; ``numpy.inf`` for noise-free labels.

    Examples
    --------
    .. code-block:: python

        with pm.Model() as model:
            X_data = pm.Data("X", X)
            w = pm.Normal("w", 0.0, 1.0 / np.sqrt(N), shape=N)
            NoisyPerceptron("y", field=X_data @ w, beta=0.5, observed=y,
                            shape=X_data.shape[0])
        approx = pymc_sfp.fit_tap(model)
    """

    rv_op = noisy_perceptron

    @classmethod
    def dist(cls, field: Any, beta: Any, **kwargs: Any) -> TensorVariable:
        return super().dist([pt.as_tensor_variable(field), pt.as_tensor_variable(beta)], **kwargs)

    def support_point(rv: TensorVariable, size: Any, field: Any, beta: Any) -> TensorVariable:
        point = pt.switch(pt.ge(field, 0), 1, -1)
        if not rv_size_is_none(size):
            point = pt.full(size, point)
        return point

    def logp(value: TensorVariable, field: Any, beta: Any) -> TensorVariable:
        # The label sign(h) with sign(0) = +1, as drawn: the paper's Θ(−σh) would call both labels
        # right at h = 0, a spike of measure zero at w = 0 (where samplers start) that traps a
        # slice sampler. A switch, not −β·Θ: with β = inf, 0·inf would be nan.
        wrong = pt.switch(pt.neq(value, pt.switch(pt.ge(field, 0), 1, -1)), -beta, 0.0)
        res = pt.switch(pt.eq(pt.abs(value), 1), wrong - pt.log1p(pt.exp(-beta)), -np.inf)
        return check_parameters(res, pt.gt(beta, 0), msg="beta > 0")
