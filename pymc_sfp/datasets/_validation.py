"""Argument checks shared by the loaders and the generators."""

from __future__ import annotations

import numpy as np


def check_positive_int(value: int, name: str) -> int:
    """Return ``value`` as an ``int``; raise ``ValueError`` unless it is an integer ``> 0``.

    ``bool`` is refused although it is an ``int`` subclass: ``True`` as a count is a bug.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
