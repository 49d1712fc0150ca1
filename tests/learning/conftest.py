"""Known marginals for the learning tests: Beta distributions stretched to the box [-1, 1], whose
modes and means have closed forms, recorded on SFPStep's default grid."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats


@pytest.fixture(scope="session")
def grid() -> np.ndarray:
    """SFPStep's default recording grid of a ``U(-1, 1)`` weight (100 points)."""
    return np.linspace(-1.0, 1.0, 100)


@pytest.fixture(scope="session")
def beta_on_box() -> Callable:
    """``beta_on_box(a, b)``: the frozen ``Beta(a, b)`` stretched to ``[-1, 1]``."""
    return lambda a, b: stats.beta(a, b, loc=-1.0, scale=2.0)
