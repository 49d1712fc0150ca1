"""Checks of user arguments shared by :mod:`pymc_sfp.nn`, :mod:`pymc_sfp.learning`,
:mod:`pymc_sfp.datasets` and the step methods (private).

Each check raises an error that names the argument and, for bad rows, the offending row
indices, so that a bad row of a large data set can be found from the message alone: a
``TypeError`` for a value of the wrong kind (a string where a number belongs), a ``ValueError``
for a value out of range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: How many offending row indices an error message lists.
ROWS_SHOWN = 5


def describe_rows(rows: np.ndarray) -> str:
    """``"<count> row(s): [i, j, ...]"`` for the indices ``rows``, the first few listed."""
    shown = ", ".join(str(int(r)) for r in rows[:ROWS_SHOWN])
    more = ", ..." if len(rows) > ROWS_SHOWN else ""
    return f"{len(rows)} row(s): [{shown}{more}]"


def check_finite_rows(values: np.ndarray, arg: str) -> None:
    """Raise a ValueError naming ``arg`` and the rows of ``values`` with NaN or infinite values."""
    bad = ~np.isfinite(values).all(axis=tuple(range(1, values.ndim)))
    if bad.any():
        raise ValueError(
            f"{arg} has NaN or infinite values in {describe_rows(np.flatnonzero(bad))}"
        )


def as_matrix(values: Any, arg: str) -> np.ndarray:
    """``values`` as a finite float matrix with at least one row, or a ValueError naming
    ``arg``."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{arg} must be a numeric array: {error}") from None
    if array.ndim != 2:
        raise ValueError(f"{arg} must be 2-D (rows × columns), got shape {array.shape}")
    if len(array) == 0:
        raise ValueError(f"{arg} has no rows")
    check_finite_rows(array, arg)
    return array


def as_rows(values: Any, width: int, arg: str) -> np.ndarray:
    """``values`` as finite rows of ``width`` columns; a 1-D array is one row, or, for
    ``width == 1``, one column; a scalar is one row of one column."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim == 1:
        array = array[None, :] if width > 1 or array.size == 1 else array[:, None]
    array = as_matrix(array, arg)
    if array.shape[1] != width:
        raise ValueError(f"{arg} must have {width} column(s), got {array.shape[1]}")
    return array


def is_integer(value: Any) -> bool:
    """Whether ``value`` is a Python or NumPy integer, or a 0-d array of one (as
    :func:`check_real` takes 0-d arrays of numbers); ``bool`` is not (``True`` as a count is a
    bug)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` as a ``bool``; raise ``TypeError`` unless it is ``True`` or ``False``
    (``bool("no")`` is ``True``)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _is_number(value: Any) -> bool:
    """Whether ``value`` is a real number of Python or NumPy (or a 0-d array of one), ``bool``
    excepted."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def check_positive_int(value: int, name: str) -> int:
    """Return ``value`` as an ``int``; raise ``TypeError`` unless it is a number and
    ``ValueError`` unless it is an integer ``> 0`` (:func:`is_integer`)."""
    return check_int_at_least(value, 1, name, f"{name} must be a positive integer")


def check_int_at_least(value: Any, minimum: int, name: str, requirement: str = "") -> int:
    """Return ``value`` as an ``int``; raise ``TypeError`` unless it is a number and
    ``ValueError`` unless it is an integer (see :func:`is_integer`) ``>= minimum``. ``2.5`` is
    refused, not rounded."""
    message = f"{requirement or f'{name} must be an integer >= {minimum}'}, got {value!r}"
    if not _is_number(value):
        raise TypeError(message)
    if not is_integer(value) or value < minimum:
        raise ValueError(message)
    return int(value)


def check_real(value: Any, name: str) -> float:
    """Return ``value`` as a ``float``; raise ``TypeError`` unless it is a real number.

    Python and NumPy integers and floats, and 0-d arrays of them, are real numbers; ``bool``,
    strings (``"2"``), sequences and complex numbers are not. The range is the caller's to check
    (NaN and infinities pass here).
    """
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # e.g. a ragged sequence
        array = None
    if (
        array is None
        or array.ndim != 0
        or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))
    ):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(array)


def check_positive_finite(value: Any, name: str) -> float:
    """Return ``value`` as a ``float``; raise ``TypeError`` unless it is a real number
    (:func:`check_real`) and ``ValueError`` unless it is finite and ``> 0``."""
    number = check_real(value, name)
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def as_generator(seed: Any, name: str) -> np.random.Generator:
    """:func:`numpy.random.default_rng` of ``seed``, or an error naming ``name`` and what it
    accepts."""
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as error:
        raise type(error)(
            f"{name} must be a numpy.random.Generator, a non-negative integer seed or None, "
            f"got {seed!r}"
        ) from None


def check_layer_sizes(layer_sizes: Any) -> tuple[int, ...]:
    """``layer_sizes`` as a tuple of ints; raise ``ValueError`` unless they are at least three
    positive integers (inputs, hidden layers, outputs)."""
    try:
        sizes = tuple(layer_sizes)
    except TypeError:
        sizes = ()
    if len(sizes) < 3 or not all(is_integer(s) and s > 0 for s in sizes):
        raise ValueError(
            "layer_sizes must be at least three positive integers (inputs, hidden layers, "
            f"outputs), got {layer_sizes!r}"
        )
    return tuple(int(s) for s in sizes)
