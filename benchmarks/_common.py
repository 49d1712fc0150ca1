"""What every benchmark suite shares: number formatting, the environment table, the suite's block
of ``RESULTS.md``, BLAS pinning and the command line (:func:`main`).

A suite (``sfp_benchmarks.py``, ``dynamics_benchmarks.py``, ``sfp_learning.py``) owns one block
of ``RESULTS.md``, delimited by its own begin/end markers, and inside it one sub-block per
benchmark (``<!-- {prefix}:{key} -->`` … ``<!-- /{prefix}:{key} -->``), so that ``--only KEY``
replaces a single benchmark's text. The file is re-read right before it is written, because the
suites may run at the same time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BENCHMARKS_DIR = Path(__file__).resolve().parent
RESULTS_PATH = BENCHMARKS_DIR / "RESULTS.md"
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# -------------------------------------------------------------------------------------- formatting
def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_number(value: float | None, digits: int = 3) -> str:
    """A number for a table: thousands without decimals, small values in exponent form,
    ``"n/a"`` when missing or not finite."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a"
    value = float(value)
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1e-3:
        return f"{value:.{digits}g}"
    return f"{value:.2e}"


def fmt_sig(value: float | None, digits: int = 3) -> str:
    """``digits`` significant digits, ``"–"`` when missing or not finite."""
    if value is None or not np.isfinite(value):
        return "–"
    return f"{value:.{digits}g}"


def fmt_rhat(value: float) -> str:
    """R-hat with three decimals, ``"–"`` when not finite."""
    return f"{value:.3f}" if np.isfinite(value) else "–"


def fmt_time(seconds: float) -> str:
    """Seconds as µs / ms / s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


# ------------------------------------------------------------------------------------- environment
def environment_table(extra_rows: Sequence[Sequence[str]] = ()) -> str:
    """Markdown table of the run's environment: date, machine, load average now, git HEAD,
    library versions, PyTensor mode and BLAS threads, then ``extra_rows``."""
    import arviz as az
    import numba
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
            cwd=BENCHMARKS_DIR,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    rows = [
        ["date", now()],
        ["machine", f"{platform.node()} — `nproc` = {nproc}, CPU {cpu}, RAM {ram}"],
        ["load average at start (1/5/15 min)", ", ".join(f"{v:.2f}" for v in os.getloadavg())],
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


def now() -> str:
    """The local date and time, to the minute, with the time zone."""
    return dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def pin_blas_threads(threads: int, argv: Sequence[str], script: Path) -> None:
    """Re-execute ``script`` with OpenBLAS/OpenMP/MKL pinned to ``threads`` (no-op if they are).

    NumPy reads these variables when it loads, so they cannot be changed in a running process.
    ``threads <= 0`` leaves the environment alone.
    """
    if threads > 0 and any(os.environ.get(var) != str(threads) for var in BLAS_THREAD_VARS):
        os.environ.update(dict.fromkeys(BLAS_THREAD_VARS, str(threads)))
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, str(script), *argv])


# ----------------------------------------------------------------------------- the RESULTS.md block
@dataclass
class Section:
    """One benchmark's markdown (its heading included) and how long it took."""

    key: str
    body: str
    seconds: float = 0.0


def run_sections(
    benchmarks: Mapping[str, Callable[[Any], Section]],
    keys: Sequence[str],
    settings: Any,
) -> tuple[list[Section], float]:
    """Run ``benchmarks[key](settings)`` for each key, stamping each section with the date, the
    settings' mode and its duration; returns the sections and the total seconds."""
    sections = []
    began = time.perf_counter()
    for key in keys:
        print(f"[{key}]", flush=True)
        t0 = time.perf_counter()
        section = benchmarks[key](settings)
        section.seconds = time.perf_counter() - t0
        section.body += (
            f"\n\n_Run {now()}, {settings.mode} settings, this benchmark took "
            f"{section.seconds:.0f} s._"
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
    """Replace this suite's block of ``path``, keeping the rest of the file.

    Sub-blocks of benchmarks not in ``sections`` keep their previous text, so a run with
    ``--only`` updates only its own benchmark. ``keys`` fixes the order of the sub-blocks. A
    file without the block gets it appended.
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


# -------------------------------------------------------------------------------- the command line
@dataclass(frozen=True)
class Suite:
    """A benchmark script and the block of ``RESULTS.md`` it owns.

    Attributes
    ----------
    script : str
        File name of the script in ``benchmarks/``; re-executed to pin BLAS, named in the header.
    title : str
        The block's heading (markdown, with its ``#``).
    note : str
        What the header says after the command line that produced the block.
    prefix, begin, end : str
        Marker prefix of the sub-blocks, and the block's begin and end markers.
    benchmarks : mapping of str to callable
        Key (``--only`` choice and sub-block name) to the function that runs the benchmark with
        the settings and returns its :class:`Section`; in the order of the block.
    full, quick
        The settings of a full and of a ``--quick`` run; frozen dataclasses with a ``mode``
        field ("full" / "quick"). Their ``repr`` is recorded in the environment table.
    ignore_warnings : tuple of Warning subclasses
        Categories silenced on the console besides PyTensor's "object mode" notices and
        ArviZ's RuntimeWarnings (degenerate draws in R-hat and ESS).
    """

    script: str
    title: str
    note: str
    prefix: str
    begin: str
    end: str
    benchmarks: Mapping[str, Callable[[Any], Section]]
    full: Any
    quick: Any
    ignore_warnings: tuple[type[Warning], ...] = ()


def main(suite: Suite, argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run the chosen benchmarks and write the suite's block."""
    parser = argparse.ArgumentParser(description=suite.title.lstrip("# "))
    parser.add_argument("--quick", action="store_true", help="~10× smaller budgets (smoke run)")
    parser.add_argument("--only", choices=list(suite.benchmarks), help="run one benchmark")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help="markdown file to update")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="pin OpenBLAS/OpenMP/MKL to this many threads by re-executing the script with the "
        "environment variables set (default 1; 0 leaves the environment alone)",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    pin_blas_threads(args.blas_threads, argv, BENCHMARKS_DIR / suite.script)
    settings = suite.quick if args.quick else suite.full

    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("pymc_sfp").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*object mode.*")
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="arviz.*")
    for category in suite.ignore_warnings:
        warnings.filterwarnings("ignore", category=category)

    env = environment_table([["settings", f"`{settings}`"]])
    keys = [args.only] if args.only else list(suite.benchmarks)
    sections, total = run_sections(suite.benchmarks, keys, settings)
    command = (
        f"python benchmarks/{suite.script}"
        + (" --quick" if args.quick else "")
        + (f" --only {args.only}" if args.only else "")
        + (f" --blas-threads {args.blas_threads}" if args.blas_threads != 1 else "")
    )
    header = "\n".join(
        [
            suite.title,
            "",
            f"Last updated by `{command}` ({settings.mode} settings; the run took {total:.0f} s). "
            + suite.note,
            "",
            "Environment of the latest run:",
            "",
            env,
        ]
    )
    write_block(
        args.output,
        prefix=suite.prefix,
        begin=suite.begin,
        end=suite.end,
        keys=list(suite.benchmarks),
        header=header,
        sections=sections,
    )
    print(f"wrote {args.output} ({total:.0f} s)", flush=True)
    return 0
