"""A network's data containers, their dims, and numbers as graph constants (private)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pymc as pm
import pytensor
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable

from pymc_sfp._validation import as_matrix, check_finite_rows

if TYPE_CHECKING:
    from pymc_sfp.nn.network import Network


def floatx(value: Any) -> np.ndarray:
    """A number or array as a floatX array: PyTensor stores a Python float such as 0.5 in the
    smallest dtype that holds it exactly (2.0 even in an integer one), and log-densities of
    float32 parameters lose precision."""
    return np.asarray(value, dtype=pytensor.config.floatX)


def ensure_coord(model: pm.Model, dim: str, size: int, add: bool = True) -> None:
    """Check the length of ``dim`` if the model has it (with values or a length alone);
    otherwise, with ``add``, add it with values ``0 .. size - 1``."""
    if dim not in model.coords:
        if add:
            model.add_coord(dim, np.arange(size))
        return
    values = model.coords[dim]
    length = len(values) if values is not None else int(model.dim_lengths[dim].eval())
    if length != size:
        raise ValueError(f"the model's coords give dim {dim!r} length {length}, not {size}")


def input_data(
    model: pm.Model, X: Any, name: str, n_inputs: int
) -> tuple[SharedVariable, str | None, str]:
    """The input data container with its row dim and column dim; validates its values."""
    if isinstance(X, Variable) and not isinstance(X, SharedVariable):
        raise TypeError(
            f"X must be an array or a pm.Data container of the model, not a tensor ({X}): a "
            "network's inputs are data"
        )
    if isinstance(X, SharedVariable):
        if model.named_vars.get(X.name) is not X:
            raise ValueError("X is a shared variable not registered in this model: use pm.Data")
        values = as_matrix(X.get_value(), "X")
        obs_dim, in_dim = model.named_vars_to_dims.get(X.name) or (None, None)
        in_dim = in_dim or f"{name}_in"
    else:
        values = as_matrix(X, "X")
        obs_dim, in_dim = f"{name}_obs", f"{name}_in"
    if values.shape[1] != n_inputs:
        raise ValueError(
            f"layer_sizes[0] = {n_inputs} must equal the number of columns of X, {values.shape[1]}"
        )
    ensure_coord(model, in_dim, n_inputs)
    if not isinstance(X, SharedVariable):
        # The rows' dim gets no values: pm.set_data may change its length later.
        ensure_coord(model, obs_dim, len(values), add=False)
        X = pm.Data(f"{name}_X", values, dims=(obs_dim, in_dim))
    return X, obs_dim, in_dim


def observed_data(
    network: Network, values: np.ndarray, name: str, dims: tuple[str, ...], shape: Any
) -> tuple[SharedVariable, dict[str, Any]]:
    """Check the rows of ``values`` against ``X`` and wrap them in ``pm.Data(f"{name}_data")``.

    Also returns the size arguments of the observed variable: its dims ``(obs_dim, *dims)``, or,
    for a data container without a row dim, ``shape`` (tied to ``X``'s rows), so that its length
    follows ``pm.set_data`` of new inputs.
    """
    check_finite_rows(values, "y")
    n_rows = network.X.get_value().shape[0]
    if len(values) != n_rows:
        raise ValueError(f"y has {len(values)} rows but X has {n_rows}")
    if network.obs_dim is None:
        return pm.Data(f"{name}_data", values), {"shape": shape}
    dims = (network.obs_dim, *dims)
    return pm.Data(f"{name}_data", values, dims=dims), {"dims": dims}
