"""Shared plumbing of the benchmark scripts: markdown tables and their block in ``RESULTS.md``.

Each script owns one block of ``RESULTS.md``, delimited by its own begin/end markers, and inside
it one sub-block per benchmark (``<!-- {prefix}:{key} -->`` … ``<!-- /{prefix}:{key} -->``), so
that ``--only KEY`` replaces a single benchmark's text. The file is re-read right before it is
written, because the scripts may run at the same time.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


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
