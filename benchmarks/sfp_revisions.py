"""The cost of an SFP sweep on the paper's networks, this tree against an earlier revision.

Run from the repository root::

    python benchmarks/sfp_revisions.py            # 5 rounds against 2783cae (~3 min on 2 cores)
    python benchmarks/sfp_revisions.py --quick --output /tmp/revisions.md   # 1 round, smoke run

A speed-up measured against numbers recorded on another day, or by two processes that ran one
after the other, reads the machine's drift as much as the code: on this project's shared hosts
one configuration's sweep time moved by tens of percent between runs on one day. This suite runs
both revisions in the same session, alternately: the earlier revision is checked out into a
temporary detached ``git worktree`` (removed at the end), and every round times each network in
one fresh process per revision, the revisions in turn, the order swapped from round to round.
A child process imports ``pymc_sfp`` from its revision's tree (``PYTHONPATH``) and the
benchmarks' own helpers (``_problems``, ``_runs``) from this tree, so both build the same model
with the same public API: Berrones' network (``U(-1, 1)`` weights, the cold quadratic loss of
Eq. 23) on the data of ``sfp_learning.py``'s cost section (glass split 0; the laser training
windows), at the ``L`` of that section (30) and of the network's own experiment (glass 100, laser
50). It constructs ``SFPStep(L=L, marginal_points=0)`` (timed), and times ``step.astep``
sweeps from the all-zero initial point after one warm-up sweep that absorbs the lazy
compilation. The table gives, per network and revision, the median over rounds of each round's
median sweep and the fastest sweep seen; the ratio is of the medians over rounds, and its range
is that of the rounds' own ratios.

Results go to ``benchmarks/RESULTS.md`` between ``<!-- sfp-revisions:start -->`` and
``<!-- sfp-revisions:end -->``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _common import BENCHMARKS_DIR, Section, Suite, fmt_time, main, md_table

REPOSITORY = BENCHMARKS_DIR.parent


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
    cases : tuple of (str, int)
        The networks ("glass 9-6-4", "laser 2-20-1") and ``SFPStep``'s grid size ``L`` for
        each: that of ``sfp_learning.py``'s cost section (30) and of the network's experiment
        in that suite (``glass_L``, ``series_L``).
    budget_s : float
        Seconds of timed sweeps per network, revision and round (at least ``min_sweeps``, at
        most ``max_sweeps`` sweeps).
    min_sweeps, max_sweeps : int
        Bounds on the timed sweeps of one process.
    """

    mode: str = "full"
    baseline: str = "2783cae"
    rounds: int = 5
    cases: tuple[tuple[str, int], ...] = (
        ("glass 9-6-4", 30),
        ("glass 9-6-4", 100),
        ("laser 2-20-1", 30),
        ("laser 2-20-1", 50),
    )
    budget_s: float = 4.0
    min_sweeps: int = 10
    max_sweeps: int = 2000


QUICK = Settings(
    mode="quick",
    rounds=1,
    cases=(("glass 9-6-4", 30), ("laser 2-20-1", 30)),
    budget_s=0.5,
    min_sweeps=3,
)


# --------------------------------------------------------------------------- one revision, one net
def time_network(network: str, L: int, budget_s: float, min_sweeps: int, max_sweeps: int) -> dict:
    """Build ``network``, construct its ``SFPStep`` and time its sweeps, in this process."""
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
    with model:
        step, construct_s = timed(lambda: SFPStep(L=L, marginal_points=0))
    seconds, _, _ = time_sweeps(
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
    }


def run_child(tree: Path, network: str, L: int, settings: Settings) -> dict:
    """:func:`time_network` in a new process that imports ``pymc_sfp`` from ``tree``."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        json.dumps([network, L, settings.budget_s, settings.min_sweeps,
                    settings.max_sweeps]),
    ]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"{network} on {tree} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["package"]) != (tree / "pymc_sfp").resolve():
        raise RuntimeError(f"the child for {tree} imported pymc_sfp from {result['package']}")
    return result


# ------------------------------------------------------------------------------------- the rounds
def revision_rounds(settings: Settings) -> Section:
    """Alternate the two revisions over ``settings.rounds`` rounds and tabulate the sweeps."""
    baseline = subprocess.run(
        ["git", "rev-parse", "--short", settings.baseline],
        capture_output=True, text=True, check=True, cwd=REPOSITORY,
    ).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sfp-revision-") as scratch:
        old_tree = Path(scratch) / "tree"
        git_worktree = ["git", "-C", REPOSITORY, "worktree"]
        subprocess.run([*git_worktree, "add", "-q", "--detach", old_tree, baseline], check=True)
        try:
            trees = {"baseline": old_tree, "this tree": REPOSITORY}
            runs = {(case, rev): [] for case in settings.cases for rev in trees}
            for round_ in range(settings.rounds):
                order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
                for network, L in settings.cases:
                    for revision in order:
                        t0 = time.perf_counter()
                        result = run_child(trees[revision], network, L, settings)
                        runs[(network, L), revision].append(result)
                        sweep = np.median(result["sweeps_s"])
                        print(
                            f"round {round_ + 1}: {network}, L = {L}, {revision}: "
                            f"{fmt_time(sweep)} / "
                            f"sweep ({len(result['sweeps_s'])} sweeps, process "
                            f"{time.perf_counter() - t0:.0f} s)",
                            flush=True,
                        )
        finally:
            subprocess.run([*git_worktree, "remove", "--force", old_tree], check=False)
    rows = []
    for case in settings.cases:
        medians = {rev: np.array([np.median(r["sweeps_s"]) for r in runs[case, rev]])
                   for rev in trees}  # fmt: skip
        fastest = {rev: min(min(r["sweeps_s"]) for r in runs[case, rev]) for rev in trees}
        build = {rev: np.median([r["construct_s"] for r in runs[case, rev]]) for rev in trees}
        per_round = medians["baseline"] / medians["this tree"]
        rows.append(
            [
                case[0],
                case[1],
                fmt_time(float(np.median(medians["baseline"]))),
                fmt_time(fastest["baseline"]),
                fmt_time(float(np.median(medians["this tree"]))),
                fmt_time(fastest["this tree"]),
                f"**{np.median(medians['baseline']) / np.median(medians['this tree']):.1f}×**",
                f"{per_round.min():.1f}–{per_round.max():.1f}×",
                f"{build['baseline']:.1f} → {build['this tree']:.1f} s",
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
    ]
    return Section(
        "sweeps",
        f"""## Sweep cost on the paper's networks: this tree against {baseline}

`SFPStep(L=L, marginal_points=0)`, `step.astep` from the all-zero initial point after one
warm-up sweep, at `L` = 30 (as in `sfp_learning.py`'s cost section) and at the network's `L` in
its experiment there (glass 100, the laser network 50); {settings.rounds} rounds, each timing
every network once per revision in a fresh process (at least {settings.min_sweeps} sweeps and
{settings.budget_s:g} s of them), the revisions alternating and their order swapped from round
to round. 'median sweep' is the median over rounds of each round's median; 'fastest' the
fastest single sweep of any round; 'per-round ratios' the range of the rounds' own ratios of
medians; 'construction' the median time of `SFPStep(...)` in a new process (both revisions
compile part of their functions lazily, in the warm-up sweep, which is not timed).

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


def child_main(argv: list[str]) -> int:
    """The child process: time one network with the ``pymc_sfp`` on ``PYTHONPATH``; print JSON."""
    import logging
    import warnings

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", required=True)
    network, L, budget_s, min_sweeps, max_sweeps = json.loads(parser.parse_args(argv).child)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    result = time_network(network, L, budget_s, min_sweeps, max_sweeps)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:]))
    sys.exit(main(SUITE))
