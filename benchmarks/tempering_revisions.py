"""The cost of ``ParallelTempering``'s draws, this tree against an earlier revision.

Run from the repository root::

    python benchmarks/tempering_revisions.py      # 3 rounds against 008944b (~3 min on 2 cores)
    python benchmarks/tempering_revisions.py --quick --output /tmp/revisions.md   # smoke run

Both revisions run in the same session, alternately, each case in a fresh process per revision
and round (``_revisions.py`` says why and how). A child process builds the target's model
(:func:`pymc_sfp.datasets.multimodal_targets`), makes one short untimed ``pm.sample`` (what the
tempering suite's warm-up does: it loads the machinery both revisions compile lazily), then
times ``ParallelTempering(...)`` and one ``pm.sample`` of it with the tempering suite's chains,
draws and tuning steps, from the modes' centres: the wall time of construction plus sampling
(what that suite's ESS per second divides by), and of one chain alone the time of the tuning
draws (from the first) and of each draw after tuning (``rounds_per_draw`` rounds), read at
``stop_tuning``. The
same seed makes the revisions' chains alike in law, not draw for draw (their arithmetic may
differ in the last bits), so the rounds per draw, set from the tuned swap rates, may differ a
little; the table gives them.

Results go to ``benchmarks/RESULTS.md`` between ``<!-- tempering-revisions:start -->`` and
``<!-- tempering-revisions:end -->``.
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
        The earlier revision (any ``git rev-parse`` name): by default the last one before the
        compiled rounds carried each replica's density parts through the swaps.
    rounds : int
        Rounds; each runs every case once per revision, in a fresh process each.
    cases : tuple of (str, str | int, int)
        The target, ``rounds_per_draw`` and the number of chains (two cores share them).
    draws, tune : int
        As in the tempering suite.
    """

    mode: str = "full"
    baseline: str = "008944b"
    rounds: int = 3
    cases: tuple[tuple[str, str | int, int], ...] = (
        ("mixture-2d", "auto", 1),
        ("mixture-2d", 1, 1),
        ("mixture-10d", "auto", 1),
        ("mixture-2d", "auto", 4),
    )
    draws: int = 2000
    tune: int = 1000


QUICK = Settings(mode="quick", rounds=1, cases=(("mixture-2d", "auto", 1),), draws=200, tune=100)


# ------------------------------------------------------------------------- one revision, one case
def time_case(target: str, rounds_per_draw: str | int, chains: int, draws: int, tune: int) -> dict:
    """Build ``target``'s model and time one ``pm.sample`` of ``ParallelTempering`` on it."""
    import pymc as pm

    import pymc_sfp
    from pymc_sfp import ParallelTempering
    from pymc_sfp.datasets import multimodal_targets

    spec = multimodal_targets()[target]
    first: list[float] = []
    tuned: list[float] = []
    options = dict(cores=min(chains, 2), progressbar=False, compute_convergence_checks=False)
    starts = [{"x": spec.mode_centres[c % spec.n_modes]} for c in range(chains)]
    with spec.model():
        warm = dict(draws=5, tune=5, chains=1, cores=1, progressbar=False, random_seed=0)
        pm.sample(step=ParallelTempering(n_chains=2, adapt_schedule=False), **warm)
        began = time.perf_counter()
        step = ParallelTempering(rounds_per_draw=rounds_per_draw)
        built = time.perf_counter()
        stop_tuning, astep = step.stop_tuning, step.astep

        def stop() -> None:
            tuned.append(time.perf_counter())
            stop_tuning()

        def first_astep(q):  # marks the first tuning draw, after PyMC's own set-up
            first.append(time.perf_counter())
            step.astep = astep
            return astep(q)

        step.stop_tuning, step.astep = stop, first_astep
        pm.sample(
            step=step,
            draws=draws,
            tune=tune,
            chains=chains,
            initvals=starts,
            random_seed=20261124,
            return_inferencedata=False,
            **options,
        )
        ended = time.perf_counter()
    one_chain = chains == 1 and tuned
    return {
        "package": str(Path(pymc_sfp.__file__).resolve().parent),
        "construct_s": built - began,
        "wall_s": ended - began,
        "tune_s": tuned[0] - first[0] if one_chain else None,
        "draw_s": (ended - tuned[0]) / draws if one_chain else None,
        "rounds_per_draw": step.rounds_per_draw if one_chain else None,
    }


# ------------------------------------------------------------------------------------- the rounds
def revision_rounds(settings: Settings) -> Section:
    """Alternate the two revisions over ``settings.rounds`` rounds and tabulate the runs."""

    def run(tree: Path, case: tuple[str, str | int, int]) -> dict:
        arguments = [*case, settings.draws, settings.tune]
        return run_child("tempering_revisions.py", tree, arguments, case[0])

    def report(round_: int, case: tuple, revision: str, result: dict) -> None:
        print(f"round {round_ + 1}: {case}, {revision}: {result}", flush=True)

    with baseline_tree(settings.baseline) as (baseline, trees):
        runs = alternate(trees, settings.cases, settings.rounds, run, report)

    def median(case: tuple, revision: str, key: str) -> float:
        return float(np.median([r[key] for r in runs[case, revision]]))

    rows = []
    for case in settings.cases:
        target, rounds_per_draw, chains = case
        one_chain = chains == 1
        old, new = (median(case, rev, "wall_s") for rev in trees)
        ratios = np.array(
            [
                a["wall_s"] / b["wall_s"]
                for a, b in zip(*(runs[case, r] for r in trees), strict=True)
            ]
        )
        row = [
            f"`{target}`",
            rounds_per_draw,
            chains,
            f"{old:.2f} → {new:.2f} s",
            f"**{old / new:.2f}×**",
            f"{ratios.min():.2f}–{ratios.max():.2f}×",
        ]
        if one_chain:
            draw = [median(case, rev, "draw_s") for rev in trees]
            tune = [median(case, rev, "tune_s") for rev in trees]
            rounds = ["/".join(str(r["rounds_per_draw"]) for r in runs[case, rev]) for rev in trees]
            row += [
                f"{fmt_time(draw[0])} → {fmt_time(draw[1])} ({draw[0] / draw[1]:.2f}×)",
                f"{fmt_time(tune[0] / settings.tune)} → {fmt_time(tune[1] / settings.tune)}",
                f"{rounds[0]} → {rounds[1]}",
            ]
        else:
            row += ["–", "–", "–"]
        build = [median(case, rev, "construct_s") for rev in trees]
        row.append(f"{build[0]:.2f} → {build[1]:.2f} s")
        rows.append(row)
    columns = [
        "target",
        "`rounds_per_draw`",
        "chains",
        "wall (construction + `pm.sample`)",
        "ratio of medians",
        "per-round ratios",
        "per draw after tuning",
        "per tuning draw",
        "rounds per draw",
        "construction",
    ]
    return Section(
        "draws",
        f"""## `ParallelTempering` draws: this tree against {baseline}

`ParallelTempering(rounds_per_draw=...)` with its default explorer,
`pm.sample(draws={settings.draws}, tune={settings.tune}, random_seed=20261124)` from the modes'
centres, `cores` = min(chains, 2), after an untimed warm-up run in the same process;
{settings.rounds} rounds, each running every case once per revision in a fresh process, the
revisions alternating and their order swapped from round to round. Medians over rounds
({baseline} → this tree); 'per-round ratios' the range of the rounds' own ratios of wall
times; with one chain, the time of each draw after tuning and of each tuning draw (read at
`stop_tuning`), and the rounds per draw that `"auto"` chose in each round.

{md_table(columns, rows)}""",
    )


SUITE = Suite(
    script="tempering_revisions.py",
    title="# Parallel tempering against an earlier revision: `benchmarks/tempering_revisions.py`",
    note="Both revisions run in the same session, alternately, each in fresh processes; see the "
    "module's docstring.",
    prefix="tempering-revisions",
    begin="<!-- tempering-revisions:start -->",
    end="<!-- tempering-revisions:end -->",
    benchmarks={"draws": revision_rounds},
    full=Settings(),
    quick=QUICK,
    ignore_warnings=(UserWarning, RuntimeWarning, FutureWarning),
)


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:], time_case))
    sys.exit(main(SUITE))
