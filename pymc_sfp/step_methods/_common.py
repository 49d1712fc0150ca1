"""Pieces shared by the step methods: variable selection and PyMC progress-bar columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pymc as pm
from pymc.exceptions import SamplingError
from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import discrete_types
from pytensor.graph.basic import Variable
from rich.progress import TextColumn
from rich.table import Column

from pymc_sfp.compile import StepGraph, compile_nonfinite_values

#: A progress-bar column: (sample-stat name, column header, format spec, initial value).
ProgressField = tuple[str, str, str, Any]


def user_value_vars(model: pm.Model, vars: Any, step_name: str) -> list:
    """The value variables of ``vars``: random variables, value variables or their names, or
    one of them alone; ``ValueError`` naming an unknown name or a variable given twice."""
    if isinstance(vars, str | Variable):
        vars = [vars]
    by_value_name = {v.name: v for v in model.value_vars}
    unknown = [v for v in vars if isinstance(v, str) and v not in model and v not in by_value_name]
    if unknown:
        raise ValueError(
            f"{step_name}: vars names {unknown}, which are not variables of the model; its free "
            f"variables are {[rv.name for rv in model.free_RVs]}"
        )
    value_vars = get_value_vars_from_user_vars(
        [
            (by_value_name[v] if v in by_value_name else model[v]) if isinstance(v, str) else v
            for v in vars
        ],
        model,
    )
    names = [v.name for v in value_vars]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"{step_name}: vars gives {twice} more than once")
    return value_vars


def continuous_value_vars(model: pm.Model, vars: Sequence | None, step_name: str) -> list:
    """The value variables a step samples; ``TypeError`` naming any discrete one.

    ``vars`` may hold random variables, value variables or their names (see
    :func:`user_value_vars`); ``None`` means every free variable of the model (so that discrete
    ones are reported, not silently skipped).
    """
    if vars is None:
        value_vars = model.continuous_value_vars + model.discrete_value_vars
    else:
        value_vars = user_value_vars(model, vars, step_name)
    discrete = [v.name for v in value_vars if v.dtype in discrete_types]
    if discrete:
        raise TypeError(
            f"{step_name} samples continuous variables only; discrete: {discrete}. "
            "Assign them to another step, e.g. pm.Metropolis, in a CompoundStep."
        )
    return value_vars


def check_not_empty(graph: StepGraph, step_name: str) -> None:
    """``ValueError`` if the step's variables have no elements at all (e.g. a lone variable of
    shape ``(0,)``): there is no coordinate to move. A size-0 variable among others is carried
    along unchanged."""
    if graph.start.size == 0:
        names = [graph.model.values_to_rvs[v].name for v in graph.value_vars]
        raise ValueError(
            f"{step_name} has nothing to sample: its variables {names} have no elements "
            "(size 0); give it variables with at least one element"
        )


def progressbar_config(
    fields: Sequence[ProgressField], n_chains: int
) -> tuple[list[TextColumn], dict[str, list]]:
    """PyMC's ``_progressbar_config``: one column per sample stat in ``fields``."""
    columns = [
        TextColumn(f"{{task.fields[{key}]:{spec}}}", table_column=Column(header, ratio=1))
        for key, header, spec, _ in fields
    ]
    return columns, {key: [initial] * n_chains for key, _, _, initial in fields}


def progressbar_updates(fields: Sequence[ProgressField]) -> tuple[Callable[[dict], dict]]:
    """PyMC's ``_make_progressbar_update_functions`` for the stats in ``fields``."""
    keys = [key for key, *_ in fields]

    def update_stats(step_stats: dict) -> dict:
        return {key: step_stats[key] for key in keys}

    return (update_stats,)


class FiniteValueCheck:
    """Refuses a draw whose value of a transformed variable is not a number on the variable's
    own scale (``exp`` of a log-scale coordinate beyond 709, say), which PyMC's trace would
    record as ``inf``. A step that accepted a move to a coordinate that large found the
    log-density flat out there: the posterior is improper along it (a proper one falls off long
    before, and the move would have been rejected)."""

    def __init__(self, graph: StepGraph, compile_kwargs: dict | None, step_name: str):
        self._count = compile_nonfinite_values(graph, compile_kwargs)
        self._names = [graph.model.values_to_rvs[v].name for v in graph.value_vars]
        self._step_name = step_name

    def __call__(self, position: np.ndarray) -> None:
        """Raise a ``SamplingError`` naming the variable if ``position`` (raveled sampling
        coordinates) is such a draw."""
        if self._count is None:
            return
        counts = self._count(position)
        if counts.any():
            name = self._names[int(np.flatnonzero(counts)[0])]
            raise SamplingError(
                f"{self._step_name}: the chain moved to where {name} is not a finite number on "
                f"its own scale (largest sampling coordinate {np.max(np.abs(position)):.3g}), "
                "and the step accepted the move: the log-density is flat out there, so the "
                f"posterior looks improper along {name} (e.g. a pm.HalfFlat or pm.Flat the data "
                "do not pin down). Give it a proper prior."
            )
