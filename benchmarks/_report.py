"""Shared plumbing of the benchmark scripts: markdown tables and their block in ``RESULTS.md``.

Each script owns one block of ``RESULTS.md``, delimited by its own begin/end markers, and inside
it one sub-block per benchmark (``<!-- {prefix}:{key} -->`` … ``<!-- /{prefix}:{key} -->``), so
that ``--only KEY`` replaces a single benchmark's text. The file is re-read right before it is
written, because the scripts may run at the same time.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def environment_table(
    load: Sequence[float] | None = None, extra_rows: Sequence[Sequence[str]] = ()
) -> str:
    """Markdown table of the run's environment: date, machine, load average (``load``, or now),
    git HEAD, library versions, PyTensor mode and BLAS threads, then ``extra_rows``."""
    import arviz as az
    import numba
    import numpy as np
    import pymc as pm
    import pytensor
    import scipy

    import pymc_sfp

    def proc_field(path: str, pattern: str) -> str | None:
        try:
            match = re.search(pattern, Path(path).read_text(), re.MULTILINE)
        except OSError:
            return None
        return match.group(1).strip() if match else None

    cpu = proc_field("/proc/cpuinfo", r"^model name\s*:\s*(.+)$") or "unknown"
    kib = proc_field("/proc/meminfo", r"^MemTotal:\s*(\d+) kB")
    ram = f"{int(kib) / 1024**2:.1f} GiB" if kib else "unknown"
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    rows = [
        ["date", dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")],
        ["machine", f"{platform.node()} — `nproc` = {nproc}, CPU {cpu}, RAM {ram}"],
        [
            "load average at start (1/5/15 min)",
            ", ".join(f"{v:.2f}" for v in (os.getloadavg() if load is None else load)),
        ],
        ["git HEAD (working tree may be dirty)", commit],
        ["Python", platform.python_version()],
        [
            "PyMC / PyTensor / NumPy",
            f"{pm.__version__} / {pytensor.__version__} / {np.__version__}",
        ],
        ["ArviZ / SciPy / Numba", f"{az.__version__} / {scipy.__version__} / {numba.__version__}"],
        ["pymc_sfp", pymc_sfp.__version__],
        ["PyTensor mode / linker", f"{pytensor.config.mode} / {pytensor.config.linker}"],
        ["BLAS threads", os.environ.get("OPENBLAS_NUM_THREADS", "library default")],
        *[list(row) for row in extra_rows],
    ]
    return md_table(["", ""], rows)


@dataclass
class Section:
    """One benchmark's markdown (its heading included) and how long it took."""

    key: str
    body: str
    seconds: float = 0.0


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def pin_blas_threads(threads: int, argv: Sequence[str], script: str) -> None:
    """Re-execute ``script`` with OpenBLAS/OpenMP/MKL pinned to ``threads`` (no-op if they are).

    NumPy reads these variables when it loads, so they cannot be changed in a running process.
    ``threads <= 0`` leaves the environment alone.
    """
    if threads > 0 and any(os.environ.get(var) != str(threads) for var in BLAS_THREAD_VARS):
        os.environ.update(dict.fromkeys(BLAS_THREAD_VARS, str(threads)))
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, str(Path(script).resolve()), *argv])


def run_sections(
    benchmarks: Mapping[str, Callable[[object], Section | str]],
    keys: Sequence[str],
    settings: object,
    mode: str,
) -> tuple[list[Section], float]:
    """Run ``benchmarks[key](settings)`` for each key, stamping each section with the date, the
    settings' name and its duration; returns the sections and the total seconds."""
    sections = []
    began = time.perf_counter()
    for key in keys:
        print(f"[{key}]", flush=True)
        t0 = time.perf_counter()
        result = benchmarks[key](settings)
        section = result if isinstance(result, Section) else Section(key, result)
        section.seconds = time.perf_counter() - t0
        stamp = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        section.body += (
            f"\n\n_Run {stamp}, {mode} settings, this benchmark took {section.seconds:.0f} s._"
        )
        print("\n" + section.body + "\n", flush=True)
        sections.append(section)
    return sections, time.perf_counter() - began


def write_block(
    path: Path,
    *,
    prefix: str,
    begin: str,
    end: str,
    keys: Sequence[str],
    header: str,
    sections: Sequence[Section],
) -> None:
    """Replace this script's block of ``path``, keeping the rest of the file.

    Sub-blocks of benchmarks not in ``sections`` keep their previous text, so a run with
    ``--only`` updates only its own benchmark. ``keys`` fixes the order of the sub-blocks.
    """
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in text and end in text.split(begin, 1)[1]:
        before, rest = text.split(begin, 1)
        inner, after = rest.split(end, 1)
    else:
        before, inner, after = (text.rstrip() + "\n\n" if text.strip() else ""), "", "\n"

    def marks(key: str) -> tuple[str, str]:
        return f"<!-- {prefix}:{key} -->", f"<!-- /{prefix}:{key} -->"

    bodies = {}
    for key in keys:
        start, stop = marks(key)
        if start in inner and stop in inner:
            bodies[key] = inner.split(start, 1)[1].split(stop, 1)[0].strip("\n")
    bodies |= {section.key: section.body for section in sections}
    blocks = [begin, header]
    for key in keys:
        if key in bodies:
            start, stop = marks(key)
            blocks += [start, bodies[key], stop]
    blocks.append(end)
    path.write_text(before + "\n\n".join(blocks) + after, encoding="utf-8")
