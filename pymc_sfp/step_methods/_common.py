"""Pieces shared by the step methods: variable selection and PyMC progress-bar columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pymc as pm
from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import discrete_types
from pytensor.graph.basic import Variable
from rich.progress import TextColumn
from rich.table import Column

from pymc_sfp.compile import StepGraph

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
