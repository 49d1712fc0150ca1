"""Benchmarks of ``pymc_sfp.StochasticDynamics`` (persistent-momentum dynamics, Neal 1993).

Run from the repository root::

    python benchmarks/dynamics_benchmarks.py            # full run, about 20 minutes on 2 cores
    python benchmarks/dynamics_benchmarks.py --quick    # smoke run, every budget about 10x smaller
    python benchmarks/dynamics_benchmarks.py --only robot   # one benchmark (see --help)

Every benchmark prints markdown tables and writes them into the dynamics section of
``benchmarks/RESULTS.md``: the block between ``<!-- dynamics:start -->`` and
``<!-- dynamics:end -->`` is replaced (appended if absent); the rest of the file (the SFP section
that ``benchmarks/sfp_benchmarks.py`` writes) is kept, and the file is re-read right before it is
written. With ``--only`` only that benchmark's subsection of the block is replaced. Nothing here
asserts on timings: they are wall-clock measurements on a possibly shared machine.

What is measured, and how
-------------------------
Common to all: PyMC's ``pm.sample`` with ``cores=2``, a fixed ``random_seed`` and the same
per-chain starting points for every sampler (PyMC's own jitter recipe, applied once: the model's
initial point plus U(-1, 1) in the unconstrained space, so the chains start apart and R-hat
means something; NUTS gets ``init="adapt_diag"`` so that it starts from the same points instead
of jittering them a second time — otherwise it runs with PyMC's defaults). Wall time is
``time.perf_counter`` around step construction + ``pm.sample``, so compilation, worker start-up
and tuning are included. ESS is ArviZ's bulk ESS (``az.ess``), R-hat ArviZ's rank-normalised
split R-hat (``az.rhat``), both over the post-tuning draws of all chains. Gradient evaluations
include the tuning phase: the sum of the ``n_grad_evals`` stat for ``StochasticDynamics``, of
``n_steps`` (leapfrog steps; PyMC 6's name for NUTS's ``tree_size``) for NUTS and
``pm.HamiltonianMC``. ESS per second and per 1000 gradient evaluations therefore charge each
sampler its whole cost.

1. ``explore`` — a scan of ``StochasticDynamics`` settings (alpha, n_leapfrog, thin; exact and
   uncorrected) on the robot-arm posterior of benchmark 2, at the explore budget. The settings
   of benchmark 2 were picked from the ``--quick`` scan; the scan is kept in the results so the
   choice can be checked.
2. ``robot`` — the robot-arm problem (MacKay 1992; Neal 1993, §3): 200 training and 200 test
   cases from ``pymc_sfp.datasets.make_robot_arm`` (noise sd 0.05, seeds 1993 and 1994), a 2-16-2
   tanh network with linear outputs written directly in PyMC, non-centred weights ``w = s · z``,
   ``z ~ N(0, 1)``, with three group scales (input→hidden weights ``s_in``, hidden biases
   ``s_b``, hidden→output weights and output biases ``s_out``), each ``HalfNormal(5)``, and an
   unknown noise sd ``sigma ~ HalfNormal(1)`` shared by both outputs; Gaussian likelihood.
   86 unconstrained parameters. Samplers: ``StochasticDynamics`` exact (``correct=True``) and
   uncorrected (``correct=False``) at the same settings, NUTS, and ``pm.HamiltonianMC`` with
   ``path_length`` = the exact run's median tuned step size × ``n_leapfrog`` × ``thin`` (the
   distance the persistent momentum could carry a draw); Neal's split scheme (centred weights
   by the dynamics, scales by ``pm.Slice``), also run 20x longer; and
   ``ReplicaExchangeDynamics`` (12 tempered replicas) with 4x the draws. Then the same
   posterior with the output layer integrated out analytically (``pymc_sfp.nn.mlp(...,
   output_layer="integrated")``; 52 unconstrained parameters): the exact dynamics, with 2x the
   tuning and 4x the draws, from three seeds, and NUTS at that budget. Reported: the test
   error of the posterior-averaged outputs in Neal's convention (mean over test cases of the
   squared error summed over both outputs; Neal's 0.00559; the noise floor of this test set,
   the same error of the noiseless function, is printed), R-hat, bulk ESS and posterior means
   of the three scales and of ``sigma``, gradient evaluations, wall time, ESS/s and ESS per
   1000 gradient evaluations of the scales (the minimum over the three), divergences after
   tuning, and for NUTS the fraction of draws at the maximum tree depth
   (``reached_max_treedepth``).
3. ``minibatch`` — Bayesian linear regression, 100,000 rows, 10 correlated features
   (Toeplitz correlation 0.5^|i-j|), known noise sd 1, prior N(0, 10²) on the weights: the
   exact posterior is Gaussian and known. ``StochasticDynamics(correct=False)`` on
   ``pm.Minibatch(X, y, batch_size=b)`` with ``total_size=100000`` for two batch sizes against
   full-batch ``StochasticDynamics`` (exact) and NUTS. Reported: posterior-mean error in units
   of the exact posterior sd (max and RMS over the 10 weights), the ratio of sampled to exact
   posterior sd (min and max over the weights), wall time, minimum bulk ESS over the weights and
   seconds per effective sample (wall time / that ESS).
4. ``network`` — minibatches where a full gradient is expensive: the 2-16-2 network of
   benchmark 2 (N(0, 1) weights, unknown noise sd) on 200,000 robot-arm rows, where a gradient
   of all rows costs about 200x one of a 1000-row batch. Every run starts from per-chain MAPs on
   2000-row subsets. Uncorrected minibatch dynamics on all rows against exact dynamics on a
   2000-row subset and exact full-batch dynamics on all rows (a few minutes' budget). Reported:
   test error of the posterior-averaged outputs and its excess over the noise floor, the median
   predictive sd, posterior mean noise sd, wall time, gradient evaluations and data passes.

BLAS threads: the script re-executes itself with ``OPENBLAS_NUM_THREADS`` (and the OpenMP / MKL
equivalents) set to 1, since two chains already run in parallel on the two cores.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from _report import (  # benchmarks/ on sys.path
    Section,
    environment_table,
    md_table,
    pin_blas_threads,
    run_sections,
    write_block,
)

from pymc_sfp import ReplicaExchangeDynamics, StochasticDynamics, nn
from pymc_sfp.datasets import make_robot_arm

RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS.md"
START_MARK = "<!-- dynamics:start -->"
END_MARK = "<!-- dynamics:end -->"

SEED = 20_240_612
TRAIN_SEED, TEST_SEED = 1993, 1994
N_TRAIN = N_TEST = 200
N_HIDDEN = 16
NOISE_SD = 0.05
SCALE_PRIOR_SD = 5.0
NOISE_PRIOR_SD = 1.0
SCALES = ("s_in", "s_b", "s_out")
HYPER = (*SCALES, "sigma")
NEAL_TEST_ERROR = 0.00559
ANCHOR_NUTS = "0.00552, scale R-hat 1.35–1.67, 3960/4000 draws at max tree depth, 318 s"

# Settings of benchmark 2, picked from the --quick scan of benchmark 1 (see RESULTS.md).
ROBOT_SD = {"alpha": 0.95, "n_leapfrog": 10, "thin": 10}
# At the default 0.9 the split scheme's tuned step sits at the edge of stability: a third of its
# draws had a divergent transition (|ΔH| up to 6e5), with the same scale R-hat as at 0.97, where
# none diverge.
SPLIT_TARGET_ACCEPT = 0.97
LONG_DRAWS_FACTOR = 20  # the long split run: 20x the draws (and 2x the tuning) of the others
N_BLOCKS = 5  # consecutive blocks of a long chain whose means show whether chains agree
# Replica exchange on the robot arm: 12 temperatures, β from 1 to 0.1. With β down to 0.05 the two
# hottest replicas of a fixed geometric ladder swapped only 1-5 % of the time (a phase transition
# near β ≈ 0.07); the adapted ladder crowds there and swaps 13-33 %, with the same scale R-hat
# (1.18-1.27, 4 x 2000 draws, scratch run).
TEMPERED = {"n_temperatures": 12, "min_beta": 0.1}
TEMPERED_DRAWS_FACTOR = 4
# The integrated-output-layer rows: 2x the tuning and 4x the draws of the others, repeated over
# seeds. Settings from a scratch scan on that model (4 x (1000 + 1000) draws, three seeds): at
# ROBOT_SD 3-5 % of the draws diverged and the largest scale R-hat was 1.007-1.015 (smallest ESS
# 372-605); alpha 0.98 with target_accept 0.95 cut the divergences to 0.4-1.4 % (R-hat
# 1.006-1.014, smallest ESS 403-727); alpha 0.98 alone, target_accept 0.95 alone, alpha 0.99, HMC
# with L=100 and alpha 0.99 with L=1 did no better (one seed each; alpha 0.98 alone on three).
INTEGRATED_SD = {"alpha": 0.98, "n_leapfrog": 10, "thin": 10}
INTEGRATED_TARGET_ACCEPT = 0.95
INTEGRATED_TUNE_FACTOR, INTEGRATED_DRAWS_FACTOR = 2, 4
INTEGRATED_SEEDS = 3
# The scan of benchmark 1: (alpha, n_leapfrog, thin, correct).
EXPLORE_GRID = (
    (0.9, 10, 10, True),
    (0.95, 10, 10, True),
    (0.99, 10, 10, True),
    (0.99, 1, 100, True),
    (0.0, 100, 1, True),
    (0.95, 10, 40, True),
    (0.95, 10, 10, False),
)

LIN_ROWS = 100_000
LIN_FEATURES = 10
LIN_NOISE_SD = 1.0
LIN_PRIOR_SD = 10.0
LIN_RHO = 0.5
OLS_SUBSET = 2000
MINIBATCH_SD = {"alpha": 0.9, "n_leapfrog": 5, "thin": 1}
NET_ROWS = 200_000
NET_TEST_ROWS = 2000
NET_SUBSET = 2000
NET_BATCH = 1000
NET_TRAIN_SEED, NET_TEST_SEED = 2001, 2002
FULL_SD = {"alpha": 0.9, "n_leapfrog": 10, "thin": 1}


# ---------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    """Every budget of the suite; ``quick()`` shrinks them about tenfold."""

    mode: str = "full"
    chains: int = 4
    cores: int = 2
    explore_tune: int = 500
    explore_draws: int = 500
    robot_tune: int = 500
    robot_draws: int = 500
    lin_chains: int = 2
    lin_tune: int = 500
    lin_draws: int = 1000
    batch_sizes: tuple[int, ...] = (100, 1000)
    net_tune: int = 1000
    net_draws: int = 2000
    net_full_tune: int = 100
    net_full_draws: int = 100

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            mode="quick",
            explore_tune=50,
            explore_draws=50,
            robot_tune=50,
            robot_draws=50,
            lin_tune=50,
            lin_draws=100,
            net_tune=100,
            net_draws=200,
            net_full_tune=10,
            net_full_draws=10,
        )


@dataclass
class Run:
    """One ``pm.sample`` call and what was measured on it."""

    name: str
    seconds: float
    idata: object
    grads: int = 0
    iterations: int = 0
    """Draws of all chains, tuning included."""
    extra: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------- helpers
def jittered_starts(model: pm.Model, chains: int, seed: int) -> list[dict]:
    """Per-chain starts: the initial point + U(-1, 1) in the unconstrained space (PyMC's jitter),
    returned in the constrained space keyed by variable name, for ``pm.sample(initvals=...)``."""
    rng = np.random.default_rng(seed)
    point = model.initial_point()
    starts = []
    for _ in range(chains):
        start = {}
        for rv in model.free_RVs:
            value_var = model.rvs_to_values[rv]
            value = point[value_var.name] + rng.uniform(-1, 1, np.shape(point[value_var.name]))
            transform = model.rvs_to_transforms.get(rv)
            if transform is not None:
                value = transform.backward(pt.as_tensor(value), *rv.owner.inputs).eval()
            start[rv.name] = np.asarray(value, dtype=float)
        starts.append(start)
    return starts


def sample(
    name: str,
    model: pm.Model,
    make_step: Callable[[], object] | None,
    *,
    chains: int,
    cores: int,
    tune: int,
    draws: int,
    starts: list[dict],
    grad_stat: str,
    seed: int = SEED,
) -> Run:
    """Build the step (``None``: NUTS) and sample, timing both; count gradient evaluations."""
    began = time.perf_counter()
    with model:
        step = make_step() if make_step is not None else None
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=cores,
            step=step,
            init="adapt_diag",
            initvals=starts,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    seconds = time.perf_counter() - began
    grads = int(idata["sample_stats"][grad_stat].values.sum())
    if tune > 0:
        grads += int(idata["warmup_sample_stats"][grad_stat].values.sum())
    print(f"  {name}: {seconds:.1f} s, {grads} gradient evaluations", flush=True)
    return Run(name, seconds, idata, grads, chains * (tune + draws))


def warm_up(model: pm.Model) -> float:
    """Compile the model's log-density and gradient once, untimed, and return the seconds it took.

    PyTensor's default linker (Numba) caches compiled code on disk: a cold compile of a new graph
    can take tens of seconds, a warm one 1–2 s. Warming up first keeps the order in which the
    samplers run from deciding which of them pays the cold compile; every timed run still
    compiles its own function (from the warm cache)."""
    began = time.perf_counter()
    with model:
        step = StochasticDynamics(n_leapfrog=1, correct=False)
    point = model.initial_point()
    step._logp_grad(np.zeros(sum(np.size(point[v.name]) for v in step.vars)))
    return time.perf_counter() - began


def draws_of(idata, name: str) -> np.ndarray:
    """A variable's post-tuning draws as ``(chain, draw, *shape)``."""
    return np.asarray(idata["posterior"][name].values, dtype=float)


def stat_of(idata, name: str) -> np.ndarray:
    return np.asarray(idata["sample_stats"][name].values)


def fmt(value: float, digits: int = 3) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    return f"{value:.{digits}g}"


def fmt_rhat(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else "–"


def sd_label(settings: dict, correct: bool = True) -> str:
    return f"α={settings['alpha']:g}, L={settings['n_leapfrog']}, thin={settings['thin']}" + (
        "" if correct else ", uncorrected"
    )


# --------------------------------------------------------------------------------------- robot arm
def robot_arm_clean(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return np.column_stack(
        [2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2), 2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2)]
    )


@dataclass(frozen=True)
class RobotProblem:
    model: pm.Model
    X_test: np.ndarray
    Y_test: np.ndarray
    floor: float
    hyper: dict[str, str]
    """Model variable of each hyperparameter of ``HYPER``."""
    outputs: Callable[[object, np.ndarray], np.ndarray]
    """Network outputs per draw, ``(chain, draw, case, output)``, from a run's DataTree."""


def robot_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Training and test cases, and the test error of the noiseless function (the floor)."""
    X, Y = make_robot_arm(N_TRAIN, rng=TRAIN_SEED, noise_sd=NOISE_SD)
    X_test, Y_test = make_robot_arm(N_TEST, rng=TEST_SEED, noise_sd=NOISE_SD)
    floor = float(np.mean(np.sum((Y_test - robot_arm_clean(X_test)) ** 2, axis=1)))
    return X, Y, X_test, Y_test, floor


def robot_problem(*, centred: bool = False) -> RobotProblem:
    """The robot-arm network; ``centred`` samples the weights ``w ~ N(0, s²)`` themselves (Neal's
    parametrisation) instead of ``z ~ N(0, 1)`` with ``w = s · z``."""
    X, Y, X_test, Y_test, floor = robot_data()
    with pm.Model() as model:
        s_in = pm.HalfNormal("s_in", SCALE_PRIOR_SD)
        s_b = pm.HalfNormal("s_b", SCALE_PRIOR_SD)
        s_out = pm.HalfNormal("s_out", SCALE_PRIOR_SD)
        sigma = pm.HalfNormal("sigma", NOISE_PRIOR_SD)
        shapes = {"in": (2, N_HIDDEN), "b": N_HIDDEN, "out": (N_HIDDEN, 2), "ob": 2}
        scales = {"in": s_in, "b": s_b, "out": s_out, "ob": s_out}
        if centred:
            w = {k: pm.Normal(f"w_{k}", 0.0, scales[k], shape=shapes[k]) for k in shapes}
        else:
            w = {k: scales[k] * pm.Normal(f"z_{k}", 0.0, 1.0, shape=shapes[k]) for k in shapes}
        hidden = pt.tanh(pt.as_tensor(X) @ w["in"] + w["b"])
        pm.Normal("y", hidden @ w["out"] + w["ob"], sigma, observed=Y)
    return RobotProblem(model, X_test, Y_test, floor, {h: h for h in HYPER}, chain_outputs)


def robot_integrated_problem() -> RobotProblem:
    """The same posterior with the output layer integrated out: ``pymc_sfp.nn.mlp`` with
    ``output_layer="integrated"`` (the same priors; the sampler moves the 48 input-side weights
    and biases, the three scales and σ). Outputs are each draw's conditional-mean network."""
    X, Y, X_test, Y_test, floor = robot_data()
    with pm.Model() as model:
        net = nn.mlp(
            X,
            (2, N_HIDDEN, 2),
            prior="group",
            prior_scale=SCALE_PRIOR_SD,
            output_layer="integrated",
        )
        nn.gaussian_likelihood(net, Y, sigma=pm.HalfNormal("sigma", NOISE_PRIOR_SD))
    hyper = dict(zip(HYPER, ("net_sd_w0", "net_sd_b0", "net_sd_out", "sigma"), strict=True))

    def outputs(idata, X_new: np.ndarray) -> np.ndarray:
        return np.asarray(net.predict(idata, X_new).values)

    return RobotProblem(model, X_test, Y_test, floor, hyper, outputs)


def robot_weights(idata) -> dict[str, np.ndarray]:
    """The network's weights per draw, ``(chain, draw, *shape)``, whichever parametrisation."""
    names = set(idata["posterior"].data_vars)
    if "w_in" in names:
        return {k: draws_of(idata, f"w_{k}") for k in ("in", "b", "out", "ob")}
    s_in, s_b, s_out = (draws_of(idata, name) for name in SCALES)
    return {
        "in": s_in[..., None, None] * draws_of(idata, "z_in"),
        "b": s_b[..., None] * draws_of(idata, "z_b"),
        "out": s_out[..., None, None] * draws_of(idata, "z_out"),
        "ob": s_out[..., None] * draws_of(idata, "z_ob"),
    }


def network_outputs(w: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """Outputs of the 2-16-2 network for every draw, ``(draw, case, output)``, for one chain's
    weights ``w[k]`` of shape ``(draw, *shape)``."""
    hidden = np.tanh(np.einsum("ni,dih->dnh", X, w["in"]) + w["b"][:, None, :])
    return np.einsum("dnh,dho->dno", hidden, w["out"]) + w["ob"][:, None, :]


def chain_outputs(idata, X: np.ndarray) -> np.ndarray:
    """Network outputs per draw, ``(chain, draw, case, output)``, one chain at a time (the hidden
    layer of all draws at once would take gigabytes on long runs)."""
    w = robot_weights(idata)
    n_chains = next(iter(w.values())).shape[0]
    return np.stack([network_outputs({k: v[c] for k, v in w.items()}, X) for c in range(n_chains)])


def test_error(prediction: np.ndarray, Y: np.ndarray) -> float:
    return float(np.mean(np.sum((prediction - Y) ** 2, axis=1)))


def robot_metrics(run: Run, problem: RobotProblem) -> dict:
    idata = run.idata
    outputs = problem.outputs(idata, problem.X_test)
    per_chain = outputs.mean(axis=1)
    chain_errors = [test_error(p, problem.Y_test) for p in per_chain]
    # Function-space convergence: R-hat of each test output (Izmailov et al. 2021 judge network
    # posteriors this way, since the weights and scales themselves rarely converge).
    rhat_outputs = np.asarray(az.rhat(outputs.reshape(*outputs.shape[:2], -1)), dtype=float)
    hyper = {name: draws_of(idata, problem.hyper[name]) for name in HYPER}
    rhat = {name: float(az.rhat(draws)) for name, draws in hyper.items()}
    ess = {name: float(az.ess(draws, method="bulk")) for name, draws in hyper.items()}
    min_ess = min(ess[name] for name in SCALES)
    diverging = stat_of(idata, "diverging")
    out = {
        "test_error": test_error(per_chain.mean(axis=0), problem.Y_test),
        "rhat_outputs": (float(np.median(rhat_outputs)), float(rhat_outputs.max())),
        "chain_errors": (min(chain_errors), max(chain_errors)),
        "rhat": rhat,
        "ess": ess,
        "max_rhat_scales": max(rhat[name] for name in SCALES),
        "min_ess_scales": min_ess,
        "ess_per_s": min_ess / run.seconds,
        "ess_per_kgrad": 1000 * min_ess / run.grads,
        "grads_per_draw": run.grads / run.iterations,
        "divergences": int(diverging.sum()),
        "step_size": float(np.median(stat_of(idata, "step_size"))),
        "means": {name: float(draws.mean()) for name, draws in hyper.items()},
    }
    names = set(idata["sample_stats"].data_vars)
    if "reached_max_treedepth" in names:
        out["max_depth"] = float(stat_of(idata, "reached_max_treedepth").mean())
    for accept in ("accept", "acceptance_rate"):
        if accept in names:
            out["accept"] = float(stat_of(idata, accept).mean())
    return out


def sd_step(settings: dict, correct: bool = True) -> Callable[[], StochasticDynamics]:
    return lambda: StochasticDynamics(correct=correct, **settings)


def bench_explore(s: Settings) -> Section:
    problem = robot_problem()
    print(f"  warm-up compile: {warm_up(problem.model):.1f} s (untimed)", flush=True)
    starts = jittered_starts(problem.model, s.chains, SEED)
    rows = []
    for alpha, n_leapfrog, thin, correct in EXPLORE_GRID:
        settings = {"alpha": alpha, "n_leapfrog": n_leapfrog, "thin": thin}
        label = sd_label(settings, correct)
        run = sample(
            label,
            problem.model,
            sd_step(settings, correct),
            chains=s.chains,
            cores=s.cores,
            tune=s.explore_tune,
            draws=s.explore_draws,
            starts=starts,
            grad_stat="n_grad_evals",
        )
        m = robot_metrics(run, problem)
        rows.append(
            [
                label + (" ← chosen" if settings == ROBOT_SD and correct else ""),
                f"{m['grads_per_draw']:.0f}",
                f"{run.seconds:.1f}",
                f"{m['test_error']:.5f}",
                fmt_rhat(m["max_rhat_scales"]),
                fmt_rhat(m["rhat"]["sigma"]),
                f"{m['min_ess_scales']:.0f}",
                fmt(m["ess_per_kgrad"]),
                fmt(m["step_size"]),
                f"{m['accept']:.2f}",
                str(m["divergences"]),
            ]
        )
    table = md_table(
        [
            "StochasticDynamics settings",
            "grads/draw",
            "wall s",
            "test error",
            "max R-hat scales",
            "R-hat σ",
            "min ESS scales",
            "ESS/1k grads",
            "step size",
            "accept",
            "div.",
        ],
        rows,
    )
    body = "\n".join(
        [
            "## 1. Settings scan of `StochasticDynamics` on the robot arm",
            "",
            f"Model, data and starts as in section 2; {s.chains} chains, cores={s.cores}, "
            f"tune={s.explore_tune}, draws={s.explore_draws} (each draw = `thin` transitions of "
            "`L` leapfrog steps). L = n_leapfrog; grads/draw counts the tuning phase too (total "
            "gradient evaluations / (tune + draws) per chain). Step size: median of the tuned "
            "(post-tuning) values, in units of the adapted diagonal mass matrix; accept: mean "
            "Metropolis acceptance probability min(1, exp(−ΔH)) (computed but not applied for "
            "the uncorrected run). The settings of section 2 were chosen from this scan run "
            "with `--quick` (50 tune + 50 draws): among the cheap (~100 gradients per draw) "
            "exact settings the one with the best scale ESS per gradient and no divergences.",
            "",
            table,
        ]
    )
    return Section("explore", body)


def robot_row(name: str, settings: str, run: Run, m: dict) -> list[str]:
    lo, hi = m["chain_errors"]
    return [
        name,
        settings,
        f"{m['test_error']:.5f}",
        f"{lo:.5f}–{hi:.5f}",
        f"{m['rhat_outputs'][0]:.3f} / {m['rhat_outputs'][1]:.3f}",
        fmt_rhat(m["max_rhat_scales"]),
        f"{m['min_ess_scales']:.0f}",
        f"{run.grads / 1e6:.2f}",
        f"{m['grads_per_draw']:.0f}",
        f"{run.seconds:.0f}",
        fmt(m["ess_per_s"]),
        fmt(m["ess_per_kgrad"]),
        str(m["divergences"]),
        f"{m['max_depth']:.2f}" if "max_depth" in m else "–",
        fmt(m["step_size"]),
        f"{m['accept']:.2f}",
    ]


def neal_split_step(model: pm.Model) -> list:
    """Neal's split: dynamics for the (centred) weights, a separate update for the hyperparameters
    (Neal used Gibbs sampling from their conjugate conditionals; PyMC's Slice stands in)."""
    weights = [model[f"w_{k}"] for k in ("in", "b", "out", "ob")]
    return [
        StochasticDynamics(weights, correct=True, target_accept=SPLIT_TARGET_ACCEPT, **ROBOT_SD),
        pm.Slice([model[name] for name in HYPER]),
    ]


def bench_robot(s: Settings) -> Section:
    problem = robot_problem()
    print(f"  warm-up compile: {warm_up(problem.model):.1f} s (untimed)", flush=True)
    starts = jittered_starts(problem.model, s.chains, SEED)
    common = {
        "chains": s.chains,
        "cores": s.cores,
        "tune": s.robot_tune,
        "draws": s.robot_draws,
        "starts": starts,
    }
    runs: list[tuple[str, str, Run]] = []
    exact = sample(
        "SD exact",
        problem.model,
        sd_step(ROBOT_SD, True),
        grad_stat="n_grad_evals",
        **common,
    )
    runs.append(("StochasticDynamics exact", sd_label(ROBOT_SD), exact))
    centred = robot_problem(centred=True)
    split_label = f"{sd_label(ROBOT_SD)}, target_accept {SPLIT_TARGET_ACCEPT}"
    began = time.perf_counter()
    with centred.model:
        neal_split_step(centred.model)  # compiles both sub-steps' functions (warm cache)
    print(f"  warm-up compile (centred): {time.perf_counter() - began:.1f} s (untimed)", flush=True)
    split = sample(
        "SD exact + Slice, centred",
        centred.model,
        lambda: neal_split_step(centred.model),
        grad_stat="n_grad_evals",
        **(common | {"starts": jittered_starts(centred.model, s.chains, SEED)}),
    )
    runs.append(
        (
            "StochasticDynamics exact on weights + Slice on scales (centred)",
            split_label,
            split,
        )
    )
    long_split = sample(
        "SD exact + Slice, centred, long",
        centred.model,
        lambda: neal_split_step(centred.model),
        grad_stat="n_grad_evals",
        **(
            common
            | {
                "starts": jittered_starts(centred.model, s.chains, SEED),
                "tune": 2 * s.robot_tune,
                "draws": LONG_DRAWS_FACTOR * s.robot_draws,
            }
        ),
    )
    runs.append(
        (
            "StochasticDynamics exact on weights + Slice on scales (centred), long",
            f"{split_label}; tune={2 * s.robot_tune}, draws={LONG_DRAWS_FACTOR * s.robot_draws}",
            long_split,
        )
    )
    tempered = sample(
        "Replica exchange",
        problem.model,
        lambda: ReplicaExchangeDynamics(**TEMPERED, **ROBOT_SD),
        grad_stat="n_grad_evals",
        **(common | {"draws": TEMPERED_DRAWS_FACTOR * s.robot_draws}),
    )
    runs.append(
        (
            "ReplicaExchangeDynamics",
            f"{sd_label(ROBOT_SD)}; {TEMPERED['n_temperatures']} temperatures, β from 1 to "
            f"{TEMPERED['min_beta']:g}, adapted; draws={TEMPERED_DRAWS_FACTOR * s.robot_draws}",
            tempered,
        )
    )
    uncorrected = sample(
        "SD uncorrected",
        problem.model,
        sd_step(ROBOT_SD, False),
        grad_stat="n_grad_evals",
        **common,
    )
    runs.append(("StochasticDynamics uncorrected", sd_label(ROBOT_SD, False), uncorrected))
    nuts = sample("NUTS", problem.model, None, grad_stat="n_steps", **common)
    runs.append(("NUTS", "PyMC defaults (target_accept 0.8, max_treedepth 10)", nuts))
    eps = float(np.median(stat_of(exact.idata, "step_size")))
    path_length = eps * ROBOT_SD["n_leapfrog"] * ROBOT_SD["thin"]
    hmc = sample(
        "HMC",
        problem.model,
        lambda: pm.HamiltonianMC(path_length=path_length),
        grad_stat="n_steps",
        **common,
    )
    runs.append(("HamiltonianMC", f"path_length={path_length:.3g}, target_accept 0.65", hmc))
    integrated = robot_integrated_problem()
    print(
        f"  warm-up compile (integrated): {warm_up(integrated.model):.1f} s (untimed)", flush=True
    )
    integrated_budget = common | {
        "tune": INTEGRATED_TUNE_FACTOR * s.robot_tune,
        "draws": INTEGRATED_DRAWS_FACTOR * s.robot_draws,
    }
    budget_label = f"tune={integrated_budget['tune']}, draws={integrated_budget['draws']}"
    integrated_seeds = []
    for k in range(INTEGRATED_SEEDS):
        run = sample(
            f"SD exact, output layer integrated, seed {SEED + k}",
            integrated.model,
            lambda: StochasticDynamics(target_accept=INTEGRATED_TARGET_ACCEPT, **INTEGRATED_SD),
            grad_stat="n_grad_evals",
            seed=SEED + k,
            **(
                integrated_budget
                | {"starts": jittered_starts(integrated.model, s.chains, SEED + k)}
            ),
        )
        run.extra["problem"] = integrated
        integrated_seeds.append(run)
    runs.append(
        (
            "StochasticDynamics exact, output layer integrated",
            f"{sd_label(INTEGRATED_SD)}, target_accept {INTEGRATED_TARGET_ACCEPT}; {budget_label}",
            integrated_seeds[0],
        )
    )
    integrated_nuts = sample(
        "NUTS, output layer integrated",
        integrated.model,
        None,
        grad_stat="n_steps",
        **(integrated_budget | {"starts": jittered_starts(integrated.model, s.chains, SEED)}),
    )
    integrated_nuts.extra["problem"] = integrated
    runs.append(
        ("NUTS, output layer integrated", f"PyMC defaults; {budget_label}", integrated_nuts)
    )

    metrics = {}
    rows, hyper_rows = [], []
    for name, settings, run in runs:
        m = robot_metrics(run, run.extra.get("problem", problem))
        metrics[name] = (run, m)
        rows.append(robot_row(name, settings, run, m))
        hyper_rows.append(
            [name]
            + [f"{m['rhat'][v]:.3f} / {m['ess'][v]:.0f}" for v in HYPER]
            + [" / ".join(f"{m['means'][v]:.3g}" for v in HYPER)]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "test error",
            "per-chain test error",
            "R-hat outputs (median / max)",
            "max R-hat scales",
            "min ESS scales",
            "grads (M)",
            "grads/draw",
            "wall s",
            "ESS/s",
            "ESS/1k grads",
            "div.",
            "max depth",
            "step size",
            "accept",
        ],
        rows,
    )
    hyper_table = md_table(
        ["sampler", *(f"{v}: R-hat / ESS" for v in HYPER), "means " + " / ".join(HYPER)],
        hyper_rows,
    )
    block_table = md_table(
        ["run", "scale", *(f"chain {c}" for c in range(s.chains))],
        [
            [label, name]
            + [
                " / ".join(f"{b:.2f}" for b in chain)
                for chain in block_means(draws_of(run.idata, name), N_BLOCKS)
            ]
            for label, run in (("split, long", long_split), ("replica exchange", tempered))
            for name in SCALES
        ],
    )
    seed_summary = "; ".join(
        f"seed {SEED + k}: max R-hat {m['max_rhat_scales']:.3f}, min ESS "
        f"{m['min_ess_scales']:.0f}, {m['divergences']} divergent draws, {run.seconds:.0f} s"
        for k, run in enumerate(integrated_seeds)
        for m in [robot_metrics(run, integrated)]
    )
    swap_rates = np.nanmean(stat_of(tempered.idata, "swap_accept"), axis=(0, 1))
    ladders = stat_of(tempered.idata, "betas")[:, -1]
    replica_divergences = stat_of(tempered.idata, "replica_diverging").sum(axis=(0, 1))
    body = "\n".join(
        [
            "## 2. Robot arm: 2-16-2 network with group scales (Neal 1993, §3)",
            "",
            f"{N_TRAIN} training / {N_TEST} test cases from `make_robot_arm` (noise sd "
            f"{NOISE_SD}, seeds {TRAIN_SEED} / {TEST_SEED}); tanh hidden units, linear outputs, "
            "`w = s · z`, `z ~ N(0, 1)`; scales `s_in` (input→hidden weights), `s_b` (hidden "
            f"biases), `s_out` (hidden→output weights and output biases) ~ HalfNormal"
            f"({SCALE_PRIOR_SD:g}); noise sd σ ~ HalfNormal({NOISE_PRIOR_SD:g}); Gaussian "
            f"likelihood. {s.chains} chains, cores={s.cores}, tune={s.robot_tune}, "
            f"draws={s.robot_draws} for every sampler (the anchor NUTS run used 4 × 1000 "
            "draws), the same jittered starts. Test error: mean over the test cases of the "
            "squared error of the posterior-averaged outputs, summed over both outputs "
            f"(Neal's 0.00559); the noiseless function scores **{problem.floor:.5f}** on this "
            "test set (the floor; 2 · 0.05² = 0.005 in expectation). Per-chain test error: "
            "the same with each chain's average alone (min–max). Wall time includes "
            "compilation and tuning; grads include tuning; 'max depth': fraction of NUTS "
            "draws at the maximum tree depth; div.: divergent draws after tuning; ESS/s and "
            "ESS/1k grads use the smallest bulk ESS of the three scales. HamiltonianMC's "
            "path length is the exact run's median step size × L × thin. The split run "
            "follows Neal: "
            "centred weights `w ~ N(0, s²)` moved by the exact dynamics (target_accept "
            f"{SPLIT_TARGET_ACCEPT}: at the default 0.9 a third of the draws had a divergent "
            "transition, with the same scale R-hat), the scales and σ by "
            "PyMC's Slice sampler in a CompoundStep (Neal used Gibbs updates from conjugate "
            "gamma conditionals); its gradient count omits Slice's log-density evaluations. "
            "ReplicaExchangeDynamics runs the exact dynamics of the first row in each of "
            f"{TEMPERED['n_temperatures']} replicas tempering the likelihood by β (from 1 to "
            f"{TEMPERED['min_beta']:g}, geometric at first, adapted during tuning to equal swap "
            "rates) with neighbour swaps after every draw; its gradient count includes every "
            "replica. "
            "The rows 'output layer integrated' sample the same posterior with the "
            "hidden→output weights and output biases integrated out analytically "
            "(`nn.mlp(..., prior='group', output_layer='integrated')`: given the hidden layer "
            "the targets are Gaussian, so the sampler moves the 48 input-side weights, the "
            "three scales and σ); their outputs are each draw's conditional-mean network, and "
            f"they run {INTEGRATED_TUNE_FACTOR}× the tuning and {INTEGRATED_DRAWS_FACTOR}× the "
            "draws of the other rows. The dynamics there use α = "
            f"{INTEGRATED_SD['alpha']:g} and target_accept {INTEGRATED_TARGET_ACCEPT} (from a "
            "scratch scan of seven settings on that model; with the first row's settings 3–5 % "
            "of the draws diverged, against 0.4–1.4 %, at a similar smallest scale ESS). "
            "Anchor (PYMC_NOTES, "
            f"NUTS, 4 × 1000 draws, similar machine, possibly another prior): {ANCHOR_NUTS}.",
            "",
            table,
            "",
            f"The integrated-output-layer dynamics with {INTEGRATED_SEEDS} seeds (each its "
            f"own starts): {seed_summary}.",
            "",
            "R-hat / bulk ESS of each hyperparameter, and its posterior mean over all chains:",
            "",
            hyper_table,
            "",
            f"Means of the scales over {N_BLOCKS} consecutive blocks of each chain of the long "
            "split run and of the replica-exchange run:",
            "",
            block_table,
            "",
            "Mean swap acceptance of neighbouring replicas (coldest pair first): "
            + ", ".join(f"{r:.2f}" for r in swap_rates)
            + ". Adapted ladders: "
            + "; ".join(
                f"chain {c}: " + ", ".join(f"{b:.3g}" for b in ladder)
                for c, ladder in enumerate(ladders)
            )
            + ". Divergent draws after tuning per replica (coldest first): "
            + ", ".join(str(int(n)) for n in replica_divergences)
            + ".",
            "",
            "**Reading.** " + robot_reading(metrics, problem.floor, long_split.idata),
        ]
    )
    return Section("robot", body)


def block_means(draws: np.ndarray, n_blocks: int) -> np.ndarray:
    """Means of ``(chain, draw)`` draws over ``n_blocks`` consecutive blocks per chain (a trailing
    remainder is dropped)."""
    n_chains, n_draws = draws.shape
    size = n_draws // n_blocks
    return draws[:, : size * n_blocks].reshape(n_chains, n_blocks, size).mean(axis=2)


def robot_reading(metrics: dict, floor: float, long_idata) -> str:
    nuts_run, nuts = metrics["NUTS"]
    converged = {name: m["max_rhat_scales"] <= 1.01 for name, (_, m) in metrics.items()}
    loose = {name: m["max_rhat_scales"] <= 1.05 for name, (_, m) in metrics.items()}
    parts = []
    verdicts = []
    for name, (run, m) in metrics.items():
        if not name.startswith(("StochasticDynamics", "ReplicaExchangeDynamics")):
            continue
        ratio = m["test_error"] / nuts["test_error"]
        time_ratio = run.seconds / nuts_run.seconds
        parts.append(
            f"{name}: test error {m['test_error']:.5f} against NUTS's {nuts['test_error']:.5f} "
            f"({ratio:.2f}×; floor {floor:.5f}) in {time_ratio:.2f}× NUTS's wall time "
            f"({run.seconds:.0f} s vs {nuts_run.seconds:.0f} s), {run.grads / nuts_run.grads:.2f}× "
            f"its gradient evaluations, scale ESS per 1000 gradients {m['ess_per_kgrad']:.3g} "
            f"(NUTS {nuts['ess_per_kgrad']:.3g})."
        )
        if "uncorrected" in name:
            continue
        failures = [
            reason
            for reason, failed in (
                ("test error more than 5 % above NUTS's", ratio > 1.05),
                ("scale R-hat above 1.01", not converged[name]),
                ("not faster than NUTS", time_ratio >= 1),
            )
            if failed
        ]
        verdicts.append(
            f"{name}: " + ("met" if not failures else "not met (" + "; ".join(failures) + ")")
        )
    rh = ", ".join(f"{name} {m['max_rhat_scales']:.2f}" for name, (_, m) in metrics.items())
    parts.append(
        f"Largest scale R-hat: {rh} — "
        + (
            "all ≤ 1.01."
            if all(converged.values())
            else "≤ 1.01 for "
            + (", ".join(n for n, ok in converged.items() if ok) or "none")
            + ", ≤ 1.05 for "
            + (", ".join(n for n, ok in loose.items() if ok) or "none")
            + "; the scales are not converged where R-hat exceeds these."
        )
    )
    spreads = []
    for name in SCALES:
        blocks = block_means(draws_of(long_idata, name), N_BLOCKS)
        between = float(np.std(blocks.mean(axis=1), ddof=1))
        within = float(np.mean(np.std(blocks, axis=1, ddof=1)))
        spreads.append(f"{name} {between:.2f} vs {within:.2f}")
    parts.append(
        "Long split run, sd of the chain means vs mean sd of a chain's block means: "
        + ", ".join(spreads)
        + " (a between-chain spread well above the within-chain one means the chains sat in "
        "different regions for the whole run; block means that move steadily in one direction "
        "mean a chain is still drifting)."
    )
    fr = ", ".join(
        f"{name} {m['rhat_outputs'][0]:.3f} / {m['rhat_outputs'][1]:.3f}"
        for name, (_, m) in metrics.items()
    )
    parts.append(f"R-hat of the 400 test outputs (median / max): {fr}.")
    parts.append(
        f"NUTS spent {nuts.get('max_depth', 0):.0%} of its draws at the maximum tree depth."
    )
    sd_key, nuts_key = (
        "StochasticDynamics exact, output layer integrated",
        "NUTS, output layer integrated",
    )
    if sd_key in metrics and nuts_key in metrics:
        (sd_run, sd), (peer_run, peer) = metrics[sd_key], metrics[nuts_key]
        parts.append(
            "Output layer integrated out, the same posterior: the exact dynamics take "
            f"{sd_run.seconds:.0f} s against NUTS's {peer_run.seconds:.0f} s on that model "
            f"({sd_run.seconds / peer_run.seconds:.2f}×), smallest scale ESS per second "
            f"{sd['ess_per_s']:.3g} against {peer['ess_per_s']:.3g}, largest scale R-hat "
            f"{sd['max_rhat_scales']:.3f} against {peer['max_rhat_scales']:.3f}; NUTS reached "
            f"the maximum tree depth on {peer.get('max_depth', 0):.0%} of its draws there. "
            "The posterior means of the scales, on which the full-model runs never agreed, are "
            "in the hyperparameter table (means over all chains)."
        )
    parts.append(
        "Goal of the issue (NUTS's test error, or better, within 5 %; scales converged at "
        "R-hat ≤ 1.01; in a fraction of NUTS's time): " + "; ".join(verdicts) + "."
    )
    return " ".join(parts)


# --------------------------------------------------------------------------------------- minibatch
@dataclass(frozen=True)
class LinearProblem:
    X: np.ndarray
    y: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def linear_problem() -> LinearProblem:
    rng = np.random.default_rng(SEED + 1)
    lags = np.abs(np.subtract.outer(np.arange(LIN_FEATURES), np.arange(LIN_FEATURES)))
    chol = np.linalg.cholesky(LIN_RHO**lags)
    X = rng.standard_normal((LIN_ROWS, LIN_FEATURES)) @ chol.T
    w_true = rng.standard_normal(LIN_FEATURES)
    y = X @ w_true + LIN_NOISE_SD * rng.standard_normal(LIN_ROWS)
    precision = X.T @ X / LIN_NOISE_SD**2 + np.eye(LIN_FEATURES) / LIN_PRIOR_SD**2
    cov = np.linalg.inv(precision)
    mean = cov @ (X.T @ y) / LIN_NOISE_SD**2
    return LinearProblem(X, y, mean, np.sqrt(np.diag(cov)))


def linear_model(problem: LinearProblem, batch_size: int | None) -> pm.Model:
    with pm.Model() as model:
        if batch_size is None:
            X, y, total = problem.X, problem.y, None
        else:
            X, y = pm.Minibatch(problem.X, problem.y, batch_size=batch_size)
            total = LIN_ROWS
        w = pm.Normal("w", 0.0, LIN_PRIOR_SD, shape=LIN_FEATURES)
        pm.Normal("y", X @ w, LIN_NOISE_SD, observed=y, total_size=total)
    return model


def subset_ols_starts(problem: LinearProblem, chains: int) -> list[dict]:
    """Per-chain starts from least squares on a random subset of rows (one per chain): the cheap
    initialisation a practitioner would use before stochastic-gradient sampling."""
    rng = np.random.default_rng(SEED + 2)
    starts = []
    for _ in range(chains):
        rows = rng.choice(LIN_ROWS, size=OLS_SUBSET, replace=False)
        w, *_ = np.linalg.lstsq(problem.X[rows], problem.y[rows], rcond=None)
        starts.append({"w": w})
    return starts


def bench_minibatch(s: Settings) -> Section:
    problem = linear_problem()
    full = linear_model(problem, None)
    starts = jittered_starts(full, s.lin_chains, SEED)
    common = {
        "chains": s.lin_chains,
        "cores": s.cores,
        "tune": s.lin_tune,
        "draws": s.lin_draws,
        "starts": starts,
    }
    near_starts = subset_ols_starts(problem, s.lin_chains)
    models = {batch: linear_model(problem, batch) for batch in s.batch_sizes}
    for model in (full, *models.values()):
        print(f"  warm-up compile: {warm_up(model):.1f} s (untimed)", flush=True)
    cases: list[tuple[str, str, Run]] = []
    for start_label, chain_starts in (
        ("jittered start", starts),
        ("subset-OLS start", near_starts),
    ):
        for batch in s.batch_sizes:
            run = sample(
                f"SD minibatch {batch}, {start_label}",
                models[batch],
                sd_step(MINIBATCH_SD, False),
                grad_stat="n_grad_evals",
                **(common | {"starts": chain_starts}),
            )
            cases.append(
                (
                    f"StochasticDynamics uncorrected, batch {batch}, {start_label}",
                    sd_label(MINIBATCH_SD),
                    run,
                )
            )
    run = sample("SD full", full, sd_step(FULL_SD, True), grad_stat="n_grad_evals", **common)
    cases.append(("StochasticDynamics exact, full batch", sd_label(FULL_SD), run))
    run = sample("NUTS full", full, None, grad_stat="n_steps", **common)
    cases.append(("NUTS, full batch", "PyMC defaults", run))

    rows, summary = [], {}
    for name, settings, run in cases:
        w = draws_of(run.idata, "w")
        flat = w.reshape(-1, LIN_FEATURES)
        z = (flat.mean(axis=0) - problem.mean) / problem.sd
        ratio = flat.std(axis=0) / problem.sd
        ess = np.array([az.ess(w[..., k], method="bulk") for k in range(LIN_FEATURES)])
        rhat = max(float(az.rhat(w[..., k])) for k in range(LIN_FEATURES))
        names = set(run.idata["sample_stats"].data_vars)
        share = (
            f"{stat_of(run.idata, 'gradient_noise_share').mean():.2f}"
            if "gradient_noise_share" in names and run.name.startswith("SD minibatch")
            else "–"
        )
        summary[name] = {
            "minibatch": run.name.startswith("SD minibatch"),
            "max_z": float(np.max(np.abs(z))),
            "ratio": (float(ratio.min()), float(ratio.max())),
            "s_per_ess": run.seconds / float(ess.min()),
            "min_ess": float(ess.min()),
            "seconds": run.seconds,
        }
        rows.append(
            [
                name,
                settings,
                f"{np.max(np.abs(z)):.2f}",
                f"{np.sqrt(np.mean(z**2)):.2f}",
                f"{ratio.min():.2f}–{ratio.max():.2f}",
                fmt_rhat(rhat),
                f"{ess.min():.0f}",
                f"{run.seconds:.1f}",
                fmt(run.seconds / ess.min()),
                f"{run.grads / 1e3:.0f}",
                fmt(float(np.median(stat_of(run.idata, "step_size")))),
                share,
            ]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "max |mean err| / sd",
            "RMS mean err / sd",
            "sd ratio (min–max)",
            "max R-hat",
            "min ESS",
            "wall s",
            "s per ESS",
            "grads (k)",
            "step size",
            "noise share",
        ],
        rows,
    )
    body = "\n".join(
        [
            "## 3. Minibatch against full batch: Bayesian linear regression",
            "",
            f"{LIN_ROWS:,} rows, {LIN_FEATURES} Gaussian features with correlation "
            f"{LIN_RHO:g}^|i−j|, true weights N(0, 1), known noise sd {LIN_NOISE_SD:g}, prior "
            f"N(0, {LIN_PRIOR_SD:g}²): the exact posterior is Gaussian (posterior sds "
            f"{problem.sd.min():.2g}–{problem.sd.max():.2g}). Minibatch runs: `X_b, y_b = "
            "pm.Minibatch(X, y, batch_size=b)`, likelihood with `total_size=100000`, "
            "`StochasticDynamics(correct=False)`; full-batch runs see all rows in every "
            f"gradient. {s.lin_chains} chains, cores={s.cores}, tune={s.lin_tune}, "
            f"draws={s.lin_draws}. Starts: the same jittered starts for every sampler "
            "(U(−1, 1) around zero, hundreds of posterior sds away), and for the minibatch runs "
            f"also starts from least squares on {OLS_SUBSET} random rows per chain (a few "
            "posterior sds away, the cheap initialisation usual before stochastic-gradient "
            "sampling), which separates reaching the posterior from sampling it. "
            "Mean error: |sample mean − exact mean| / exact sd per weight (max "
            "and RMS over the weights; with ESS n the Monte Carlo error alone is about "
            "1/√n); sd ratio: sample sd / exact sd. s per ESS: wall time (compile and tuning "
            "included) / smallest bulk ESS over the weights. Noise share: mean of the "
            "`gradient_noise_share` stat (tuned towards 0.5). Grads include the tuning "
            "phase; a minibatch gradient costs far less than a full one.",
            "",
            table,
            "",
            "**Reading.** " + minibatch_reading(summary),
        ]
    )
    return Section("minibatch", body)


def minibatch_reading(summary: dict) -> str:
    nuts = summary["NUTS, full batch"]
    exact = summary["StochasticDynamics exact, full batch"]
    parts = [
        f"Full batch, the exact StochasticDynamics run is within {exact['max_z']:.2f} sd of the "
        f"exact means with sd ratios {exact['ratio'][0]:.2f}–{exact['ratio'][1]:.2f} "
        f"({exact['s_per_ess']:.3g} s per effective sample; NUTS {nuts['max_z']:.2f} sd, "
        f"{nuts['ratio'][0]:.2f}–{nuts['ratio'][1]:.2f}, {nuts['s_per_ess']:.3g} s)."
    ]
    for name, m in summary.items():
        if not m["minibatch"]:
            continue
        biased = m["max_z"] > 1 or m["ratio"][0] < 0.8 or m["ratio"][1] > 1.25
        if not biased:
            verdict = "within 1 sd of the exact means and 20–25 % of the sds."
        elif m["min_ess"] < 50:
            verdict = (
                f"off, but with a minimum ESS of {m['min_ess']:.0f} the chain has not mixed: "
                "this is slow mixing (or not yet reaching the posterior), not a measured bias."
            )
        else:
            verdict = "visibly biased (mean off by more than 1 sd or sd by more than 20–25 %)."
        parts.append(
            f"{', '.join(name.split(', ')[1:]).capitalize()}: mean error up to "
            f"{m['max_z']:.2f} sd, sd ratio {m['ratio'][0]:.2f}–{m['ratio'][1]:.2f}, "
            f"{m['s_per_ess']:.3g} s per effective sample — {verdict}"
        )
    fastest = min(summary, key=lambda n: summary[n]["s_per_ess"])
    parts.append(f"Cheapest per effective sample here: {fastest}.")
    return " ".join(parts)


# ------------------------------------------------------------------------------ network minibatch
def network_model(X: np.ndarray, Y: np.ndarray, batch_size: int | None) -> pm.Model:
    """2-16-2 tanh network with N(0, 1) weights and an unknown noise sd; with ``batch_size`` the
    likelihood sees ``pm.Minibatch`` rows scaled up to all of them."""
    with pm.Model() as model:
        if batch_size is None:
            X_b, Y_b, total = X, Y, None
        else:
            X_b, Y_b = pm.Minibatch(X, Y, batch_size=batch_size)
            total = len(X)
        w = {
            "in": pm.Normal("w_in", 0.0, 1.0, shape=(2, N_HIDDEN)),
            "b": pm.Normal("w_b", 0.0, 1.0, shape=N_HIDDEN),
            "out": pm.Normal("w_out", 0.0, 1.0, shape=(N_HIDDEN, 2)),
            "ob": pm.Normal("w_ob", 0.0, 1.0, shape=2),
        }
        sigma = pm.HalfNormal("sigma", NOISE_PRIOR_SD)
        hidden = pt.tanh(pt.as_tensor(X_b) @ w["in"] + w["b"])
        pm.Normal("y", hidden @ w["out"] + w["ob"], sigma, observed=Y_b, total_size=total)
    return model


def subset_map_starts(X: np.ndarray, Y: np.ndarray, chains: int) -> tuple[list[dict], float]:
    """Per-chain starts: the MAP of the network on ``NET_SUBSET`` random rows (one subset per
    chain), found from a jittered point; and the seconds it took."""
    rng = np.random.default_rng(SEED + 3)
    began = time.perf_counter()
    starts = []
    for chain in range(chains):
        rows = rng.choice(len(X), size=NET_SUBSET, replace=False)
        subset = network_model(X[rows], Y[rows], None)
        with subset:
            point = pm.find_MAP(
                start=jittered_starts(subset, 1, SEED + chain)[0], progressbar=False
            )
        starts.append({rv.name: point[rv.name] for rv in subset.free_RVs})
    return starts, time.perf_counter() - began


def gauss_newton_predictive_sd(
    point: dict, X: np.ndarray, X_test: np.ndarray, chunk: int = 20_000
) -> float:
    """Median over ``X_test``'s outputs of the predictive sd of a linearised (Gauss–Newton /
    Laplace) posterior of the weights at ``point``: precision ``Jᵀ J / σ² + I`` with ``J`` the
    Jacobian of the outputs on all training rows ``X`` (central differences), ``I`` the N(0, 1)
    prior's. With 200,000 rows one mode of the posterior is close to Gaussian
    (Bernstein–von Mises), so this is the reference for the samplers' within-chain spread."""
    names = ("in", "b", "out", "ob")
    shapes = [np.shape(point[f"w_{k}"]) for k in names]
    flat = np.concatenate([np.ravel(point[f"w_{k}"]) for k in names])
    splits = np.cumsum([int(np.prod(shape)) for shape in shapes])[:-1]

    def jacobian(rows: np.ndarray, h: float = 1e-6) -> np.ndarray:
        def outputs(vector: np.ndarray) -> np.ndarray:
            parts = np.split(vector, splits)
            w = {k: p.reshape(1, *shape) for k, p, shape in zip(names, parts, shapes, strict=True)}
            return network_outputs(w, rows)[0].ravel()

        steps = h * np.eye(flat.size)
        return np.column_stack([(outputs(flat + e) - outputs(flat - e)) / (2 * h) for e in steps])

    precision = np.eye(flat.size)
    for first in range(0, len(X), chunk):
        j = jacobian(X[first : first + chunk])
        precision += j.T @ j / float(point["sigma"]) ** 2
    j_test = jacobian(X_test)
    variance = np.einsum("ij,jk,ik->i", j_test, np.linalg.inv(precision), j_test)
    return float(np.median(np.sqrt(variance)))


def bench_network(s: Settings) -> Section:
    X, Y = make_robot_arm(NET_ROWS, rng=NET_TRAIN_SEED, noise_sd=NOISE_SD)
    X_test, Y_test = make_robot_arm(NET_TEST_ROWS, rng=NET_TEST_SEED, noise_sd=NOISE_SD)
    floor = test_error(robot_arm_clean(X_test), Y_test)
    starts, start_seconds = subset_map_starts(X, Y, s.lin_chains)
    reference_sd = float(np.mean([gauss_newton_predictive_sd(p, X, X_test) for p in starts]))
    subset_rows = np.random.default_rng(SEED + 4).choice(NET_ROWS, NET_SUBSET, replace=False)
    models = {
        "subset": network_model(X[subset_rows], Y[subset_rows], None),
        "minibatch": network_model(X, Y, NET_BATCH),
        "full": network_model(X, Y, None),
    }
    for model in models.values():
        print(f"  warm-up compile: {warm_up(model):.1f} s (untimed)", flush=True)
    common = {"chains": s.lin_chains, "cores": s.cores, "starts": starts}
    cases = [
        (
            f"StochasticDynamics exact, full batch on {NET_SUBSET:,} rows",
            sd_label(FULL_SD),
            NET_SUBSET,
            sample(
                "SD subset",
                models["subset"],
                sd_step(FULL_SD, True),
                grad_stat="n_grad_evals",
                tune=s.net_tune,
                draws=s.net_draws,
                **common,
            ),
        ),
        (
            f"StochasticDynamics uncorrected, minibatch {NET_BATCH:,} of {NET_ROWS:,} rows",
            sd_label(MINIBATCH_SD),
            NET_BATCH,
            sample(
                "SD minibatch",
                models["minibatch"],
                sd_step(MINIBATCH_SD, False),
                grad_stat="n_grad_evals",
                tune=s.net_tune,
                draws=s.net_draws,
                **common,
            ),
        ),
        (
            f"StochasticDynamics exact, full batch on {NET_ROWS:,} rows",
            f"{sd_label(FULL_SD)}; tune={s.net_full_tune}, draws={s.net_full_draws}",
            NET_ROWS,
            sample(
                "SD full",
                models["full"],
                sd_step(FULL_SD, True),
                grad_stat="n_grad_evals",
                tune=s.net_full_tune,
                draws=s.net_full_draws,
                **common,
            ),
        ),
    ]
    rows, summary = [], {}
    for name, settings, rows_per_grad, run in cases:
        outputs = chain_outputs(run.idata, X_test)
        per_chain = [test_error(o.mean(axis=0), Y_test) for o in outputs]
        error = test_error(outputs.mean(axis=(0, 1)), Y_test)
        spread = float(np.median(outputs.std(axis=1).mean(axis=0)))
        passes = run.grads * rows_per_grad / NET_ROWS
        share = (
            f"{stat_of(run.idata, 'gradient_noise_share').mean():.2f}"
            if rows_per_grad == NET_BATCH
            else "–"
        )
        summary[name] = {"error": error, "seconds": run.seconds, "spread": spread}
        rows.append(
            [
                name,
                settings,
                f"{error:.5f}",
                f"{min(per_chain):.5f}–{max(per_chain):.5f}",
                f"{error - floor:.2e}",
                f"{spread:.4f}",
                f"{draws_of(run.idata, 'sigma').mean():.4f}",
                f"{run.seconds:.0f}",
                f"{run.grads / 1e3:.1f}",
                f"{passes:.0f}",
                fmt(float(np.median(stat_of(run.idata, "step_size")))),
                share,
            ]
        )
    table = md_table(
        [
            "sampler",
            "settings",
            "test error",
            "per-chain test error",
            "excess over floor",
            "predictive sd within chains (median)",
            "posterior mean σ",
            "wall s",
            "grads (k)",
            "data passes",
            "step size",
            "noise share",
        ],
        rows,
    )
    body = "\n".join(
        [
            f"## 4. Minibatch where full gradients are expensive: a network on {NET_ROWS:,} rows",
            "",
            f"Robot-arm data as in section 2 but {NET_ROWS:,} training rows (seed "
            f"{NET_TRAIN_SEED}) and {NET_TEST_ROWS:,} test rows (seed {NET_TEST_SEED}); the "
            "2-16-2 tanh network with N(0, 1) weights (no group scales: this section is about "
            f"data size) and σ ~ HalfNormal({NOISE_PRIOR_SD:g}). One gradient of all rows costs "
            "about 200× one of a 1000-row batch here (≈ 60 ms against 0.3 ms, measured on "
            f"this machine). {s.lin_chains} chains, cores={s.cores}. Every run starts from the "
            f"MAP of the network on {NET_SUBSET:,} random rows (one subset per chain, from a "
            f"jittered point; {start_seconds:.0f} s in all, not included below) — the "
            "initialisation stochastic-gradient samplers need: from a jittered start the "
            "minibatch dynamics do not reach the posterior (section 3). Runs: exact dynamics on "
            f"a {NET_SUBSET:,}-row subset (what one would do without minibatches), uncorrected "
            f"dynamics on `pm.Minibatch` batches of {NET_BATCH:,} (tune={s.net_tune}, "
            f"draws={s.net_draws}), and exact dynamics on all rows with a budget of a few "
            "minutes. Test error: Neal's convention of section 2 on the test rows; floor "
            f"(noiseless function) **{floor:.5f}**; excess = test error − floor. Predictive "
            "sd within chains: the sd of the network's output over a chain's draws, averaged "
            "over the chains, median over the test outputs (the epistemic uncertainty the "
            "sampler reports; the full-batch run on all rows estimates it without minibatch "
            "noise, from few draws). Reference for it: "
            f"**{reference_sd:.5f}**, the same median under a Gauss–Newton (linearised Laplace) "
            "approximation with all rows at each chain's start, averaged over the chains. "
            "Data passes: gradient evaluations × rows per "
            "gradient / rows (tuning included).",
            "",
            table,
            "",
            "**Reading.** " + network_reading(summary, floor, reference_sd),
        ]
    )
    return Section("network", body)


def network_reading(summary: dict, floor: float, reference_sd: float) -> str:
    subset, minibatch, full = summary.values()
    names = list(summary)
    return (
        f"{names[1]}: excess test error {minibatch['error'] - floor:.2e} in "
        f"{minibatch['seconds']:.0f} s, against {subset['error'] - floor:.2e} from the "
        f"{NET_SUBSET:,}-row subset ({subset['seconds']:.0f} s) and "
        f"{full['error'] - floor:.2e} from exact dynamics on all rows "
        f"({full['seconds']:.0f} s, {full['seconds'] / minibatch['seconds']:.1f}× the "
        f"minibatch run's time). Predictive sd within chains against the linearised reference "
        f"{reference_sd:.5f}: minibatch {minibatch['spread'] / reference_sd:.2f}×, full batch "
        f"{full['spread'] / reference_sd:.2f}×, subset {subset['spread'] / reference_sd:.2f}× "
        "(the subset posterior is wider because it sees 1 % of the rows; a full-batch ratio "
        "well below 1 means its short run has not yet spread over the posterior)."
    )


# ------------------------------------------------------------------------------------------ output
BENCHMARKS = {
    "explore": bench_explore,
    "robot": bench_robot,
    "minibatch": bench_minibatch,
    "network": bench_network,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="~10× smaller budgets (smoke run)")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), help="run one benchmark")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help="markdown file to update")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    pin_blas_threads(1, argv, __file__)
    s = Settings.quick() if args.quick else Settings()

    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("pymc_sfp").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="arviz.*")

    env = environment_table()
    keys = [args.only] if args.only else list(BENCHMARKS)
    sections, total = run_sections(BENCHMARKS, keys, s, s.mode)
    header = "\n".join(
        [
            "# Stochastic-dynamics benchmarks (`pymc_sfp.StochasticDynamics`)",
            "",
            "Generated by `python benchmarks/dynamics_benchmarks.py"
            + (" --quick" if args.quick else "")
            + (f" --only {args.only}" if args.only else "")
            + f"` ({s.mode} settings; the latest run took {total:.0f} s). Timings are "
            "wall-clock on the machine below, which may have been shared; nothing asserts on "
            "them. How each benchmark measures is described in its section and in the script's "
            "docstring. BLAS is pinned to one thread (two chains run in parallel on two cores).",
            "",
            "Environment of the latest run:",
            "",
            env,
        ]
    )
    write_block(
        args.output,
        prefix="dynamics",
        begin=START_MARK,
        end=END_MARK,
        keys=list(BENCHMARKS),
        header=header,
        sections=sections,
    )
    print(f"wrote {args.output} ({total:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
