"""Helpers of the network tests: the network by hand and a random point of a model."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from pymc.logprob.transforms import IntervalTransform, LogTransform
from scipy import special


def _forward(X, weights, biases, softmax=False):
    """The network by hand, for one set of weights."""
    h = X
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        h = h @ W + b
        if layer < len(weights) - 1:
            h = np.tanh(h)
    return special.softmax(h, axis=-1) if softmax else h


def _random_point(model, rng):
    """Random constrained values of every free variable, and the matching value-variable point.

    Interval-transformed variables must be ``U(-1, 1)``; log-transformed ones get values in
    ``[0.2, 1.5]``.
    """
    point, values = {}, {}
    for rv in model.free_RVs:
        shape = model.shape_from_dims(model.named_vars_to_dims.get(rv.name, ()))
        transform = model.rvs_to_transforms[rv]
        if isinstance(transform, LogTransform):
            x = rng.uniform(0.2, 1.5, size=shape)
            value = np.log(x)
        else:
            x = rng.uniform(-0.9, 0.9, size=shape)
            value = np.log1p(x) - np.log1p(-x) if isinstance(transform, IntervalTransform) else x
        point[rv.name] = x
        values[model.rvs_to_values[rv].name] = value
    return point, values


@pytest.fixture(scope="session")
def forward() -> Callable:
    """``forward(X, weights, biases, softmax=False)``: the network by hand, for one draw."""
    return _forward


@pytest.fixture(scope="session")
def random_point() -> Callable:
    """``random_point(model, rng) -> (point, values)``: see :func:`_random_point`."""
    return _random_point
