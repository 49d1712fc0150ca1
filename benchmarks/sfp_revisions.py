"""The cost of an SFP sweep on the paper's networks, this tree against an earlier revision.

Run from the repository root::

    python benchmarks/sfp_revisions.py            # 5 rounds against 2783cae (~3 min on 2 cores)
    python benchmarks/sfp_revisions.py --quick --output /tmp/revisions.md   # 1 round, smoke run

Both revisions run in the same session, alternately, each network in a fresh process per
revision and round (``_revisions.py`` says why and how); both build Berrones' network
(``U(-1, 1)`` weights, the cold quadratic loss of Eq. 23) on the data of ``sfp_learning.py``'s
cost section (glass split 0; the laser training windows), at the ``L`` of that section (30), of
the network's own experiment (glass 100, laser 50), and at each revision's default ``L`` (what
``SFPStep()`` gives a user: 100 at 2783cae, 50 now). A child process constructs
``SFPStep(L=L, marginal_points=0)`` (timed), and times ``step.astep`` sweeps from the all-zero
initial point after one warm-up sweep that absorbs the lazy compilation. The table gives, per
network and revision, the median over rounds of each round's median sweep and the fastest sweep
seen; the ratio is of the medians over rounds, and its range is that of the rounds' own ratios;
and the mean acceptance of the timed sweeps' Metropolis corrections, which says how well each
revision's conditionals fit at that ``L``.

Results go to ``benchmarks/RESULTS.md`` between ``<!-- sfp-revisions:start -->`` and
``<!-- sfp-revisions:end -->``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _common import Section, Suite, fmt_time, main, md_table
from _revisions import alternate, baseline_tree, child_main, run_child


@dataclass(frozen=True)
class Settings:
    """Budgets of one run; ``QUICK`` shrinks them to a smoke run.

    Attributes
    ----------
    mode : str
        "full" or "quick".
    baseline : str
        The earlier revision (any ``git rev-parse`` name): by default the code of the day the
        issue that asked for compiled sweeps (#13) was filed.
    rounds : int
        Rounds; each times every network once per revision, in a fresh process each.
    cases : tuple of (str, int or None)
        The networks ("glass 9-6-4", "laser 2-20-1") and ``SFPStep``'s grid size ``L`` for
        each: that of ``sfp_learning.py``'s cost section (30), of the network's experiment
        in that suite (``glass_L``, ``series_L``), and ``None`` for each revision's default.
    budget_s : float
        Seconds of timed sweeps per network, revision and round (at least ``min_sweeps``, at
        most ``max_sweeps`` sweeps).
    min_sweeps, max_sweeps : int
        Bounds on the timed sweeps of one process.
    """

    mode: str = "full"
    baseline: str = "2783cae"
    rounds: int = 5
    cases: tuple[tuple[str, int | None], ...] = (
        ("glass 9-6-4", 30),
        ("glass 9-6-4", 100),
        ("glass 9-6-4", None),
        ("laser 2-20-1", 30),
        ("laser 2-20-1", 50),
        ("laser 2-20-1", None),
    )
    budget_s: float = 4.0
    min_sweeps: int = 10
    max_sweeps: int = 2000


QUICK = Settings(
    mode="quick",
    rounds=1,
    cases=(("glass 9-6-4", 30), ("laser 2-20-1", None)),
    budget_s=0.5,
    min_sweeps=3,
)


# --------------------------------------------------------------------------- one revision, one net
def time_network(
    network: str, L: int | None, budget_s: float, min_sweeps: int, max_sweeps: int
) -> dict:
    """Build ``network``, construct its ``SFPStep`` (``L=None``: at the revision's default
    ``L``) and time its sweeps, in this process."""
    import inspect

    from _problems import (
        GLASS_D,
        GLASS_LAYERS,
        LASER_WINDOW,
        SERIES_D,
        laser_windows,
        paper_network,
    )
    from _runs import time_sweeps, timed
    from pymc.blocking import DictToArrayBijection

    import pymc_sfp
    from pymc_sfp import SFPStep
    from pymc_sfp.datasets import glass_split

    if network == "glass 9-6-4":
        X, y, _, _ = glass_split(np.random.default_rng(0))
        model, _ = paper_network(X, np.eye(4)[y], GLASS_LAYERS, GLASS_D, "softmax")
    elif network == "laser 2-20-1":
        X, y, _, _ = laser_windows()
        model, _ = paper_network(X, y, (LASER_WINDOW, 20, 1), SERIES_D, "linear")
    else:
        raise ValueError(f"network must be 'glass 9-6-4' or 'laser 2-20-1', not {network!r}")
    if L is None:
        L = inspect.signature(SFPStep).parameters["L"].default
    with model:
        step, construct_s = timed(lambda: SFPStep(L=L, marginal_points=0))
    seconds, stats, _ = time_sweeps(
        step,
        DictToArrayBijection.map(model.initial_point()),
        warmup=1,
        budget_s=budget_s,
        min_sweeps=min_sweeps,
        max_sweeps=max_sweeps,
    )
    return {
        "package": str(Path(pymc_sfp.__file__).resolve().parent),
        "construct_s": construct_s,
        "sweeps_s": seconds.tolist(),
        "L": L,
        "accept": float(np.mean([st["accept"] for st in stats])),
    }


# ------------------------------------------------------------------------------------- the rounds
def revision_rounds(settings: Settings) -> Section:
    """Alternate the two revisions over ``settings.rounds`` rounds and tabulate the sweeps."""
    budgets = [settings.budget_s, settings.min_sweeps, settings.max_sweeps]
    began: dict[str, float] = {}

    def run(tree: Path, case: tuple[str, int | None]) -> dict:
        began["t"] = time.perf_counter()
        return run_child("sfp_revisions.py", tree, [*case, *budgets], case[0])

    def report(round_: int, case: tuple[str, int | None], revision: str, result: dict) -> None:
        print(
            f"round {round_ + 1}: {case[0]}, L = {result['L']}, {revision}: "
            f"{fmt_time(np.median(result['sweeps_s']))} / sweep "
            f"({len(result['sweeps_s'])} sweeps, process {time.perf_counter() - began['t']:.0f} s)",
            flush=True,
        )

    with baseline_tree(settings.baseline) as (baseline, trees):
        runs = alternate(trees, settings.cases, settings.rounds, run, report)
    rows = []
    for case in settings.cases:
        medians = {rev: np.array([np.median(r["sweeps_s"]) for r in runs[case, rev]])
                   for rev in trees}  # fmt: skip
        fastest = {rev: min(min(r["sweeps_s"]) for r in runs[case, rev]) for rev in trees}
        build = {rev: np.median([r["construct_s"] for r in runs[case, rev]]) for rev in trees}
        per_round = medians["baseline"] / medians["this tree"]
        accept = {rev: np.mean([r["accept"] for r in runs[case, rev]]) for rev in trees}
        grid = {rev: runs[case, rev][0]["L"] for rev in trees}
        rows.append(
            [
                case[0],
                case[1]
                if case[1] is not None
                else f"default: {grid['baseline']} → {grid['this tree']}",
                fmt_time(float(np.median(medians["baseline"]))),
                fmt_time(fastest["baseline"]),
                fmt_time(float(np.median(medians["this tree"]))),
                fmt_time(fastest["this tree"]),
                f"**{np.median(medians['baseline']) / np.median(medians['this tree']):.1f}×**",
                f"{per_round.min():.1f}–{per_round.max():.1f}×",
                f"{build['baseline']:.1f} → {build['this tree']:.1f} s",
                f"{accept['baseline']:.4f} → {accept['this tree']:.4f}",
            ]
        )
    columns = [
        "network",
        "L",
        f"{baseline}: median sweep",
        f"{baseline}: fastest",
        "this tree: median sweep",
        "this tree: fastest",
        "ratio of medians",
        "per-round ratios",
        "`SFPStep` construction",
        "mean acceptance",
    ]
    return Section(
        "sweeps",
        f"""## Sweep cost on the paper's networks: this tree against {baseline}

`SFPStep(L=L, marginal_points=0)`, `step.astep` from the all-zero initial point after one
warm-up sweep, at `L` = 30 (as in `sfp_learning.py`'s cost section), at the network's `L` in
its experiment there (glass 100, the laser network 50), and at each revision's default `L` (what
`SFPStep()` uses; the current default refines the grid where a conditional needs it, which
{baseline} did not do); {settings.rounds} rounds, each timing
every network once per revision in a fresh process (at least {settings.min_sweeps} sweeps and
{settings.budget_s:g} s of them), the revisions alternating and their order swapped from round
to round. 'median sweep' is the median over rounds of each round's median; 'fastest' the
fastest single sweep of any round; 'per-round ratios' the range of the rounds' own ratios of
medians; 'construction' the median time of `SFPStep(...)` in a new process (both revisions
compile part of their functions lazily, in the warm-up sweep, which is not timed); 'mean
acceptance' that of the Metropolis corrections over the timed sweeps, averaged over rounds (how
close each revision's conditionals are to the exact ones at that `L`).

{md_table(columns, rows)}""",
    )


SUITE = Suite(
    script="sfp_revisions.py",
    title="# SFP sweeps against an earlier revision: `benchmarks/sfp_revisions.py`",
    note="Both revisions run in the same session, alternately, each in fresh processes; see the "
    "module's docstring.",
    prefix="sfp-revisions",
    begin="<!-- sfp-revisions:start -->",
    end="<!-- sfp-revisions:end -->",
    benchmarks={"sweeps": revision_rounds},
    full=Settings(),
    quick=QUICK,
    ignore_warnings=(UserWarning, RuntimeWarning, FutureWarning),
)


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:], time_network))
    sys.exit(main(SUITE))
