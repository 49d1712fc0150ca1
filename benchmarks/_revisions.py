"""Timing this tree against an earlier revision, in one session (``sfp_revisions.py``,
``tempering_revisions.py``).

A speed-up measured against numbers recorded on another day, or by two processes that ran one
after the other, reads the machine's drift as much as the code: on this project's shared hosts
one configuration's time moved by tens of percent between runs on one day. So both revisions
run in the same session, alternately: the earlier revision is checked out into a temporary
detached ``git worktree`` (removed at the end), and every round runs each case in one fresh
process per revision, the revisions in turn, the order swapped from round to round. A child
process imports ``pymc_sfp`` from its revision's tree (``PYTHONPATH``) and the benchmarks' own
helpers from this tree, so both build the same model with the same public API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import BENCHMARKS_DIR

REPOSITORY = BENCHMARKS_DIR.parent
#: The two revisions' names, in the order of a round that does not swap them.
REVISIONS = ("baseline", "this tree")


@contextmanager
def baseline_tree(baseline: str) -> Iterator[tuple[str, dict[str, Path]]]:
    """``baseline``'s short hash and the trees of :data:`REVISIONS`: ``baseline`` checked out
    into a temporary detached worktree (removed on exit), and this repository."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", baseline],
        capture_output=True, text=True, check=True, cwd=REPOSITORY,
    ).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pymc-sfp-revision-") as scratch:
        old_tree = Path(scratch) / "tree"
        git_worktree = ["git", "-C", REPOSITORY, "worktree"]
        subprocess.run([*git_worktree, "add", "-q", "--detach", old_tree, short], check=True)
        try:
            yield short, dict(zip(REVISIONS, (old_tree, REPOSITORY), strict=True))
        finally:
            subprocess.run([*git_worktree, "remove", "--force", old_tree], check=False)


def run_child(script: str, tree: Path, arguments: Sequence[Any], label: str) -> dict:
    """``script --child ARGUMENTS`` (JSON) in a new process that imports ``pymc_sfp`` from
    ``tree``; the JSON dict its last line of output holds. Checks where the child imported the
    package from (its ``"package"`` entry)."""
    command = [sys.executable, str(BENCHMARKS_DIR / script), "--child", json.dumps(arguments)]
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"{label} on {tree} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["package"]) != (tree / "pymc_sfp").resolve():
        raise RuntimeError(f"the child for {tree} imported pymc_sfp from {result['package']}")
    return result


def alternate(
    trees: dict[str, Path],
    cases: Sequence[Any],
    rounds: int,
    run: Callable[[Path, Any], dict],
    report: Callable[[int, Any, str, dict], None],
) -> dict[tuple[Any, str], list[dict]]:
    """``run(tree, case)`` for every case and revision in each of ``rounds`` rounds, the
    revisions' order swapped from round to round; ``report(round, case, revision, result)``
    after each. Returns each ``(case, revision)``'s results, by round."""
    runs: dict[tuple[Any, str], list[dict]] = {(c, r): [] for c in cases for r in trees}
    for round_ in range(rounds):
        order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
        for case in cases:
            for revision in order:
                result = run(trees[revision], case)
                runs[case, revision].append(result)
                report(round_, case, revision, result)
    return runs


def child_main(argv: Sequence[str], measure: Callable[..., dict]) -> int:
    """A child process of :func:`run_child`: ``measure(*ARGUMENTS)`` of ``--child ARGUMENTS``
    (JSON) in ``argv``, with PyMC's messages and warnings silenced, printed as JSON."""
    import argparse
    import logging
    import warnings

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", required=True)
    arguments = json.loads(parser.parse_args(argv).child)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    print(json.dumps(measure(*arguments)), flush=True)
    return 0
