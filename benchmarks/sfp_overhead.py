"""SFP benchmark ``overhead``: what an ``SFPStep`` costs outside its sweeps.

* **Construction.** ``SFPStep()`` on a 10-coordinate N(0, I) (``pm.Normal('x', 0, 1,
  shape=10)``, automatic boxes) and ``SFPStep(bounds=(-10, 60))`` on the 1-D mixture, with the
  compiled sweep (the default) and with ``compiled=False``. Each case runs in a fresh Python
  process that has imported pymc_sfp and built nothing yet: 'first in a process' times the first
  construction, 'again' a second one on the model built afresh in the same process (its graphs
  are those of the first, so their compilations are copied, not rewritten: ``compile._Template``),
  'again, rewritten' a third one with the templates forgotten first, so that every graph is
  rewritten and compiled as in the first. The 'cold'
  run does the same with an empty Numba cache directory (``NUMBA_CACHE_DIR``), as after
  installing or upgrading pymc_sfp: the compiled sweep's kernel is compiled rather than loaded.
  PyTensor's own disk caches are warm in every run (each case is run once untimed first), so
  the models' code is loaded from them. Each process prints its times as a line::

      python benchmarks/sfp_overhead.py --probe-build gaussian --compiled 1   # PROBE {json}

* **A batch of points along a line.** The 1-D mixture's log-density (a ``pm.math.logsumexp``
  over its components) at 100 points in one compiled call: as pymc_sfp compiles it
  (``compile_batched_logp``, whose graph-defined operations such as the log-sum-exp are
  vectorised into one reduction) against the same ``vectorize_graph`` graph compiled by
  ``pm.compile`` as it comes (a ``Blockwise`` that calls the log-sum-exp once per point).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
from _common import Section, fmt_time, md_table
from _problems import MIX1_BOX, mixture_1d_model
from _runs import time_call
from pytensor.graph.replace import vectorize_graph

import pymc_sfp.compile as compile_module
from pymc_sfp import SFPStep
from pymc_sfp.compile import compile_batched_logp, step_graph

if TYPE_CHECKING:
    from sfp_benchmarks import Settings

MODELS = ("gaussian", "mixture")
LINE_POINTS = 100


def _model(name: str) -> tuple[pm.Model, dict]:
    """A fresh copy of a benchmark model and the ``SFPStep`` settings it is built with."""
    if name == "gaussian":
        with pm.Model() as model:
            pm.Normal("x", 0.0, 1.0, shape=10)
        return model, {}
    return mixture_1d_model(), {"bounds": MIX1_BOX}


def probe_build(name: str, compiled: bool) -> dict[str, float]:
    """Seconds of a first, a second and a third ``SFPStep`` construction in this process, the
    third with every graph rewritten again."""
    times = {}
    for label in ("first", "again", "rewritten"):
        if label == "rewritten":
            compile_module._TEMPLATES.clear()
        model, settings = _model(name)
        with model:
            start = time.perf_counter()
            SFPStep(compiled=compiled, **settings)
            times[label] = time.perf_counter() - start
    return times


def _run_probe(name: str, compiled: bool, env: dict[str, str]) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--probe-build", name]
    command += ["--compiled", str(int(compiled))]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("PROBE ")][-1]
    return json.loads(line[len("PROBE ") :])


def construction_cases() -> list[dict]:
    """Every model × sweep, first and again in a fresh process; the compiled sweep also cold."""
    cases = []
    for name in MODELS:
        for compiled in (True, False):
            _run_probe(name, compiled, dict(os.environ))  # fills PyTensor's caches, untimed
            warm = _run_probe(name, compiled, dict(os.environ))
            cold = np.nan
            if compiled:
                with tempfile.TemporaryDirectory() as empty:
                    env = {**os.environ, "NUMBA_CACHE_DIR": empty}
                    cold = _run_probe(name, compiled, env)["first"]
            cases.append(dict(model=name, compiled=compiled, cold=cold, **warm))
    return cases


def construction_cells(case: dict) -> list:
    return [
        "10-coordinate N(0, I)" if case["model"] == "gaussian" else "1-D mixture",
        "compiled (default)" if case["compiled"] else "`compiled=False`",
        f"{case['first']:.2f}",
        f"{case['again']:.2f}",
        f"{case['rewritten']:.2f}",
        "—" if np.isnan(case["cold"]) else f"{case['cold']:.1f}",
    ]


def line_rows(budget_s: float) -> tuple[list[list], float]:
    """The 1-D mixture at ``LINE_POINTS`` points per call, both compilations; their ratio."""
    model = mixture_1d_model()
    graph = step_graph(model, model.value_vars)
    points = np.linspace(*MIX1_BOX, LINE_POINTS)[:, None]
    ours = compile_batched_logp(graph)
    [logp], flat = graph.join([model.logp()])
    rows_var = flat.type.clone(shape=(None, flat.type.shape[0]))()
    # PyTensor's vectorisation of the same graph, compiled as PyMC compiles it.
    looped = pm.compile([rows_var], vectorize_graph(logp, replace={flat: rows_var}))
    if not np.allclose(looped(points), ours(points)):
        raise AssertionError("the two compilations of the mixture's log-density differ")
    t_ours = time_call(lambda: ours(points), budget_s)
    t_looped = time_call(lambda: looped(points), budget_s)
    return [
        ["pymc_sfp (`compile_batched_logp`)", fmt_time(t_ours), _ns(t_ours / LINE_POINTS)],
        ["`pm.compile` of `vectorize_graph`", fmt_time(t_looped), _ns(t_looped / LINE_POINTS)],
    ], t_looped / t_ours


def _ns(seconds: float) -> str:
    return f"{seconds * 1e9:.0f} ns"


def benchmark(s: Settings) -> Section:
    """Construction times in fresh processes, then a batch of points along a line."""
    print("  overhead: constructions in fresh processes ...", flush=True)
    cases = construction_cases()
    build_table = md_table(
        [
            "model",
            "sweep",
            "first in a process (s)",
            "again (s)",
            "again, rewritten (s)",
            "cold Numba cache (s)",
        ],
        [construction_cells(c) for c in cases],
    )
    print("  overhead: a batch of points along a line ...", flush=True)
    rows, ratio = line_rows(s.cond_budget_s)
    line_table = md_table(["compiled by", f"{LINE_POINTS} points / call", "per point"], rows)
    body = [
        "## 6. Overhead outside the sweeps: construction and batched evaluation",
        "",
        "**Construction.** `SFPStep()` on `pm.Normal('x', 0, 1, shape=10)` (automatic boxes) and "
        "`SFPStep(bounds=(-10, 60))` on the 1-D mixture, with the compiled sweep and with "
        "`compiled=False`, each in a fresh Python process that has imported pymc_sfp: the "
        "first construction of the process, then a second one on the model built afresh (its "
        "graphs are the first one's, so their compilations are copied rather than rewritten), "
        "then a third with those copies forgotten, every graph rewritten and compiled again. "
        "'cold Numba cache' repeats the first with an empty `NUMBA_CACHE_DIR`, as after "
        "installing or upgrading pymc_sfp (the sweep's kernel is compiled rather than loaded). "
        "PyTensor's disk caches are warm (every case runs once untimed first).",
        "",
        build_table,
        "",
        f"**A batch of points along a line.** The 1-D mixture's log-density at {LINE_POINTS} "
        "points in one compiled call (median over ≥ "
        f"{s.cond_budget_s:g} s of calls). pymc_sfp vectorises graph-defined operations such as "
        "the mixture's log-sum-exp into one reduction over the batch; PyTensor's "
        "`vectorize_graph`, compiled as it comes, calls them once per point (a `Blockwise`).",
        "",
        line_table,
        "",
        "**Reading.** " + _interpret(cases, ratio),
    ]
    return Section("overhead", "\n".join(body))


def _interpret(cases: list[dict], ratio: float) -> str:
    def span(values) -> str:
        return f"{min(values):.2f}–{max(values):.2f} s"

    cold = [c["cold"] for c in cases if c["compiled"]]
    return (
        f"A first construction in a process took {span([c['first'] for c in cases])}, a later "
        f"one on the model built afresh {span([c['again'] for c in cases])} with the "
        f"compilations copied, {span([c['rewritten'] for c in cases])} with every graph "
        "rewritten again: rewriting the graphs is what a copy saves, the rest is building the "
        "graphs and the step (and, in the first, loading cached code into the process). With "
        f"an empty Numba cache the first construction took {min(cold):.1f}–{max(cold):.1f} s: "
        "the compiled sweep's kernel is compiled once per installation, then loaded from "
        "Numba's disk cache. Along a line, the same arithmetic took "
        f"{ratio:.1f}× longer with the log-sum-exp called once per point."
    )


def probe_main(argv: list[str] | None = None) -> int:
    """Print ``PROBE {"first": s, "again": s}`` for one model and sweep (module docstring)."""
    parser = argparse.ArgumentParser(description="time SFPStep constructions in this process")
    parser.add_argument("--probe-build", required=True, choices=MODELS)
    parser.add_argument("--compiled", type=int, choices=(0, 1), default=1)
    args = parser.parse_args(argv)
    print("PROBE " + json.dumps(probe_build(args.probe_build, bool(args.compiled))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(probe_main())
