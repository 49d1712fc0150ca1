"""Tempering benchmarks ``targets`` and ``kernel``: ``ParallelTempering`` and ``pm.sample_smc``
on multimodal targets with exact mode weights and evidence (``pymc_sfp.datasets.targets``).

``targets``: on every target of ``multimodal_targets()``, ``ParallelTempering`` (default
explorer, vectorised over the rungs: its defaults, compiled rounds and automatic rounds per
draw, then one round per draw, then the NumPy rounds with ``rounds_per_draw=pt_rounds``
(``"auto"``, as the defaults); rung by rung; and
``SFPStep`` as the explorer on the boxed targets of dimension ≤ 5), ``pm.sample_smc``
with its default (IMH) and MH kernels, and NUTS, all with the same chains / cores / seed. MCMC
chain ``c`` starts at the centre of mode ``c mod K`` (dispersed starts; NUTS with
``init="adapt_diag"`` so that the starts are not jittered). Reported: the worst per-chain
mode-weight error (max over chains and modes of |chain weight − exact|), the pooled weight error,
the log-evidence error (stepping stones for tempering, the final ``log_marginal_likelihood`` of
SMC averaged over chains), ArviZ ESS of the indicator of the heaviest mode (pooled over chains)
and per second, the minimum bulk ESS over coordinates per second, the maximum R-hat, wall seconds
(``time.perf_counter`` around step construction + sampling, so compilation and worker start-up
are included) and, for tempering, the final number of replicas, the barrier Λ and the round
trips. SMC's particles are nearly independent draws, so ArviZ's ESS of its output is reported as
for the chains, as ``sfp_samplers.py`` does.

``kernel``: ``pm.sample_smc`` with ``pymc_sfp.SFPKernel`` against the IMH and MH kernels on
targets where SFP sweeps should pay: a step-function likelihood on a bounded prior (1-D and 5-D),
a hard constraint (a −inf potential), the 110-nat two-mode target, and an egg-box of 3^d modes
on the coordinate grid (d = 5 and 10), whose every conditional is a three-mode mixture. Reported:
the error of a known quantity (pooled and worst chain), the log-evidence error, wall seconds.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr
from _common import Section, fmt_number, fmt_rhat, fmt_sig, md_table
from scipy import stats
from sfp_samplers import weight_tolerance

from pymc_sfp import ParallelTempering, SFPKernel, SFPStep, tempering_log_evidence
from pymc_sfp.datasets import GaussianMixtureTarget, RingTarget, multimodal_targets

if TYPE_CHECKING:
    from tempering_benchmarks import Settings

Target = GaussianMixtureTarget | RingTarget


# ------------------------------------------------------------------------------------- shared
def common_kwargs(s: Settings) -> dict[str, Any]:
    """The arguments every ``pm.sample`` / ``pm.sample_smc`` call of the suite shares."""
    return dict(
        chains=s.chains,
        cores=s.cores,
        random_seed=s.seed,
        progressbar=False,
        compute_convergence_checks=False,
    )


def smc_log_evidence(idata: Any) -> float:
    """Mean over chains of the final ``log_marginal_likelihood`` of a ``pm.sample_smc`` run
    (stored per stage as an object array, NaN before the last stage and as padding)."""
    finals = []
    for row in idata["sample_stats"]["log_marginal_likelihood"].values:
        values = np.array([np.nan if v is None else float(v) for v in np.ravel(row)])
        finals.append(values[np.isfinite(values)][-1])
    return float(np.mean(finals))


def smc_stages(idata: Any) -> int:
    """The most tempering stages of any chain of a ``pm.sample_smc`` run."""
    beta = idata["sample_stats"]["beta"].values
    return max(sum(v is not None and np.isfinite(float(v)) for v in row) for row in beta)


def stages_note(idata: Any) -> str:
    """``"N stages"`` of a ``pm.sample_smc`` run, for a table's notes."""
    n = smc_stages(idata)
    return f"{n} stage{'' if n == 1 else 's'}"


def failure_note(error: Exception) -> str:
    """A table cell for a run that raised: the exception's type and first line."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"failed: {type(error).__name__}: {first_line[:80]}"


# -------------------------------------------------------------------------------------- targets
@dataclass
class TargetRun:
    """What was measured on one sampler's run of one target."""

    sampler: str
    seconds: float = np.nan
    chain_err: float = np.nan
    pooled_err: float = np.nan
    log_z_err: float | None = None
    mode_ess: float = np.nan
    min_ess: float = np.nan
    rhat: float = np.nan
    tempering: str = "–"
    note: str = ""


def samplers_for(target: Target, s: Settings) -> list[str]:
    """The samplers run on ``target``: SFPStep as explorer only on boxed targets of dimension
    at most ``s.sfp_max_dim``, where its box is the prior's support."""
    names = ["PT", "PT (1 round per draw)", "PT (NumPy rounds)", "PT (rung by rung)"]
    if target.prior == "uniform" and target.dim <= s.sfp_max_dim:
        names.append("PT (SFPStep explorer)")
    return [*names, "SMC (IMH)", "SMC (MH)", "NUTS"]


def sample_target(name: str, target: Target, s: Settings) -> tuple[Any, float]:
    """Run sampler ``name`` on ``target``; the DataTree and the seconds of the timed call."""
    starts = [{"x": target.mode_centres[c % target.n_modes]} for c in range(s.chains)]
    mcmc = dict(draws=s.draws, tune=s.tune, initvals=starts, **common_kwargs(s))
    with target.model():
        began = time.perf_counter()
        if name == "PT":
            idata = pm.sample(step=ParallelTempering(**s.pt_kwargs), **mcmc)
        elif name == "PT (1 round per draw)":
            step = ParallelTempering(rounds_per_draw=1, **s.pt_kwargs)
            idata = pm.sample(step=step, **mcmc)
        elif name == "PT (NumPy rounds)":
            step = ParallelTempering(compiled=False, rounds_per_draw=s.pt_rounds, **s.pt_kwargs)
            idata = pm.sample(step=step, **mcmc)
        elif name == "PT (rung by rung)":
            step = ParallelTempering(vectorized=False, **s.pt_kwargs)
            idata = pm.sample(step=step, **mcmc)
        elif name == "PT (SFPStep explorer)":
            step = ParallelTempering(
                explorer=SFPStep, explorer_kwargs={"L": s.sfp_L}, **s.pt_kwargs
            )
            idata = pm.sample(step=step, **mcmc)
        elif name == "SMC (IMH)":
            idata = pm.sample_smc(draws=s.smc_draws, **common_kwargs(s))
        elif name == "SMC (MH)":
            idata = pm.sample_smc(draws=s.smc_draws, kernel=pm.smc.kernels.MH, **common_kwargs(s))
        else:
            idata = pm.sample(init="adapt_diag", **mcmc)
        return idata, time.perf_counter() - began


def measure_target(name: str, target: Target, s: Settings) -> TargetRun:
    """Sample ``target`` with ``name`` and compute the table's metrics."""
    try:
        idata, seconds = sample_target(name, target, s)
    except Exception as error:  # a sampler that breaks on a target is a result, not a crash
        traceback.print_exc()
        return TargetRun(name, note=failure_note(error))
    exact = target.posterior_weights
    labels = target.mode_labels(np.asarray(idata["posterior"]["x"].values, dtype=float))
    per_chain = np.array([np.bincount(c, minlength=target.n_modes) / c.size for c in labels])
    pooled = np.bincount(labels.ravel(), minlength=target.n_modes) / labels.size
    indicator = xr.Dataset({"m": (("chain", "draw"), (labels == np.argmax(exact)).astype(float))})
    run = TargetRun(
        name,
        seconds=seconds,
        chain_err=float(np.max(np.abs(per_chain - exact))),
        pooled_err=float(np.max(np.abs(pooled - exact))),
        mode_ess=float(az.ess(indicator)["m"]),
        min_ess=float(np.min(az.ess(idata, var_names=["x"], method="bulk")["x"].values)),
        rhat=float(np.max(az.rhat(idata, var_names=["x"])["x"].values)),
    )
    sample_stats = idata["sample_stats"]
    if name.startswith("PT"):
        evidence = tempering_log_evidence(idata)
        run.log_z_err = evidence.log_evidence - target.log_evidence
        n_chains = sample_stats["n_chains"].values[:, -1]
        barrier = sample_stats["barrier"].values[:, -1]
        trips = sample_stats["round_trips"].values[:, -1]
        rounds = sample_stats["rounds_per_draw"].values[:, -1]
        run.tempering = (
            f"K {'/'.join(str(k) for k in n_chains)}, Λ {np.mean(barrier):.1f}, "
            f"trips {'/'.join(str(t) for t in trips)}, "
            f"rounds {'/'.join(str(r) for r in rounds)}"
        )
        run.note = f"log Z ± {evidence.standard_error:.2g}"
    elif name.startswith("SMC"):
        run.log_z_err = smc_log_evidence(idata) - target.log_evidence
        run.note = stages_note(idata)
    else:
        run.note = f"{int(sample_stats['diverging'].values.sum())} divergences"
    return run


def target_description(target: Target) -> str:
    """The target's prior and exact answers, for the targets table."""
    if isinstance(target, RingTarget):
        return f"ring r = {target.radius:g}, s = {target.sd:g}, U{target.bounds}³"
    prior = (
        f"U({target.bounds[0]:g}, {target.bounds[1]:g})^{target.dim}"
        if target.prior == "uniform"
        else f"N(0, {target.prior_sd:g}²)^{target.dim}"
    )
    sds = "/".join(f"{sd:g}" for sd in target.sds)
    return f"weights {'/'.join(f'{w:g}' for w in target.weights)}, sd {sds}, prior {prior}"


def bench_targets(s: Settings) -> Section:
    """Every sampler on every target of ``multimodal_targets()``."""
    targets = multimodal_targets()
    print("  targets: untimed warm-up (loads PyTensor/Numba machinery once) ...", flush=True)
    with targets["mixture-2d"].model():
        warm = dict(draws=5, tune=5, chains=1, cores=1, progressbar=False, random_seed=0)
        pm.sample(step=ParallelTempering(n_chains=2, adapt_schedule=False), **warm)
        pm.sample(**warm)
        pm.sample_smc(draws=20, chains=1, cores=1, progressbar=False, random_seed=0)
    target_rows, rows, runs = [], [], {}
    for target in targets.values():
        target_rows.append(
            [
                f"`{target.name}`",
                target.dim,
                target.n_modes,
                target_description(target),
                " / ".join(f"{w:.3f}" for w in target.posterior_weights),
                f"{target.log_evidence:.3f}",
            ]
        )
        for name in samplers_for(target, s):
            print(f"  targets/{target.name}: {name} ...", flush=True)
            run = measure_target(name, target, s)
            runs[target.name, name] = run
            rows.append(
                [
                    f"`{target.name}`",
                    name,
                    fmt_sig(run.chain_err, 2),
                    fmt_sig(run.pooled_err, 2),
                    fmt_sig(run.log_z_err, 2) if run.log_z_err is not None else "n/a",
                    fmt_number(run.mode_ess),
                    fmt_number(run.mode_ess / run.seconds),
                    fmt_number(run.min_ess / run.seconds),
                    fmt_rhat(run.rhat),
                    fmt_sig(run.seconds, 3),
                    run.tempering,
                    run.note,
                ]
            )
    tol = weight_tolerance(s.draws)
    parts = [
        "## 1. Samplers on multimodal targets with exact answers",
        "",
        f"Settings: {s.chains} chains, `cores={s.cores}`, `random_seed={s.seed}`; MCMC "
        f"{s.draws} draws after {s.tune} tuning steps, chain c starting at the centre of mode "
        "c mod K (NUTS with `init='adapt_diag'`, so without jitter); SMC "
        f"`pm.sample_smc(draws={s.smc_draws})` per chain. PT: "
        f"`ParallelTempering({_call_arguments(s.pt_kwargs)})` (explorer `StochasticDynamics`, "
        "all rungs moved by one vectorised computation; after tuning the rounds of a draw run as "
        "one call of machine code, with 2 leapfrog steps per round and, by default, as many "
        "explore-and-swap rounds per draw as five round trips take at the tuned swap rates "
        "(Theorem 1), within 10–100); PT (1 round per draw): the same with "
        "`rounds_per_draw=1`; PT (NumPy rounds): the same with `compiled=False, "
        f"rounds_per_draw={s.pt_rounds!r}`, the rounds after tuning in NumPy (the same chains "
        "as PT when `pt_rounds` is 'auto', so the same errors, at their cost); PT "
        "(rung by rung): the same as PT with `vectorized=False`, each rung's explorer called in "
        "turn (the rounds are then not compiled, and a draw is one round by default); PT "
        f"(SFPStep explorer): `explorer=SFPStep, explorer_kwargs={{'L': {s.sfp_L}}}` on the "
        f"boxed targets of dimension ≤ {s.sfp_max_dim}. The targets are "
        "`pymc_sfp.datasets.multimodal_targets()`: a proper prior on `x` and a normalised "
        "likelihood, so the mode weights and log Z are exact:",
        "",
        md_table(
            ["target", "d", "K", "likelihood and prior", "exact weights", "exact log Z"],
            target_rows,
        ),
        "",
        "**Chain err**: the largest |weight of a mode in one chain − exact| over chains and "
        "modes (SMC: one population per chain); **pooled err** the same for all chains "
        "together; **log Z err**: estimate − exact (PT: stepping stones; SMC: final "
        "`log_marginal_likelihood`, averaged over chains); **mode ESS**: ArviZ ESS of the "
        "indicator of the heaviest mode, all chains (a chain stuck in a mode makes it small "
        "or undefined); **min ESS/s**: smallest bulk ESS over the coordinates per wall "
        "second; **wall s**: step construction + sampling, compilation included. PT column: "
        "final replicas K per chain, mean barrier Λ, round trips after tuning per chain, "
        "rounds per draw after tuning per chain.",
        "",
        md_table(
            [
                "target",
                "sampler",
                "chain err",
                "pooled err",
                "log Z err",
                "mode ESS",
                "mode ESS/s",
                "min ESS/s",
                "R-hat",
                "wall s",
                "PT: K, Λ, round trips",
                "notes",
            ],
            rows,
        ),
        "",
        interpret_targets(runs, tol),
    ]
    return Section("targets", "\n".join(parts))


def interpret_targets(runs: dict[tuple[str, str], TargetRun], tol: float) -> str:
    """Data-driven reading of the targets table: where each sampler got the weights."""
    samplers = list(dict.fromkeys(name for _, name in runs))
    lines = [
        f"**Reading.** Targets on which every chain's weights are within ±{tol:.2f} of the "
        f"exact ones (pooled within ±{tol:.2f} in brackets), out of those the sampler ran on:"
    ]
    for name in samplers:
        mine = {t: r for (t, n), r in runs.items() if n == name}
        per_chain = [t for t, r in mine.items() if r.chain_err < tol]
        pooled = [t for t, r in mine.items() if r.pooled_err < tol]
        failed = [t for t, r in mine.items() if r.note.startswith("failed")]
        lines.append(
            f"{name}: {len(per_chain)} / {len(mine)} ({len(pooled)})"
            + (f", failed on {', '.join(failed)}" if failed else "")
            + (
                f"; missed per chain: {', '.join(t for t in mine if t not in per_chain)}"
                if len(per_chain) < len(mine)
                else ""
            )
            + "."
        )
    return " ".join(lines)


# --------------------------------------------------------------------------------------- kernel
@dataclass(frozen=True)
class KernelProblem:
    """A target for the SMC kernels with a known quantity and log evidence."""

    name: str
    description: str
    quantity: str
    exact: float
    log_evidence: float
    build: Callable[[], pm.Model]
    estimate: Callable[[np.ndarray], np.ndarray]
    """Draws ``(chain, draw, ...)`` to the per-chain estimate of the quantity."""


def step_model(dim: int) -> pm.Model:
    """``x ~ U(−1, 3)^dim`` and a likelihood that is 1 where ``x_i > 1`` and e⁻² elsewhere, per
    coordinate (independent coordinates)."""
    with pm.Model() as model:
        x = pm.Uniform("x", np.float64(-1.0), np.float64(3.0), shape=dim)
        pm.Potential("step", pm.math.sum(pm.math.switch(x > 1.0, 0.0, -2.0)))
    return model


def constrained_model() -> pm.Model:
    """``x ~ N(0, 2²)`` restricted to ``x > 1`` by a −inf potential."""
    with pm.Model() as model:
        x = pm.Normal("x", np.float64(0.0), np.float64(2.0))
        pm.Potential("bound", pm.math.switch(x > 1.0, 0.0, -np.inf))
    return model


#: The egg-box: each coordinate's likelihood is this three-mode mixture, modes 12 sd apart.
EGGBOX_WEIGHTS = np.array([0.2, 0.2, 0.6])
EGGBOX_MEANS = np.array([-6.0, 0.0, 6.0])
EGGBOX_SD = 0.5
EGGBOX_BOX = 10.0


def eggbox_model(dim: int) -> pm.Model:
    """``x ~ U(−10, 10)^dim`` and, per coordinate, the likelihood 0.2 N(−6, 0.5²) +
    0.2 N(0, 0.5²) + 0.6 N(6, 0.5²): 3^dim modes, all on the coordinate grid."""
    with pm.Model() as model:
        x = pm.Uniform("x", -EGGBOX_BOX, EGGBOX_BOX, shape=dim)
        per_mode = np.log(EGGBOX_WEIGHTS) + pm.logp(
            pm.Normal.dist(EGGBOX_MEANS, EGGBOX_SD), x[:, None]
        )
        pm.Potential("mixture", pm.math.logsumexp(per_mode, axis=1).sum())
    return model


def eggbox_problem(dim: int) -> KernelProblem:
    """The egg-box in ``dim`` coordinates, with the weight of the upper mode (x_i > 3) and the
    log evidence (the box truncates a share of the mass below 1e-20)."""
    inside = stats.norm.cdf(EGGBOX_BOX, EGGBOX_MEANS, EGGBOX_SD) - stats.norm.cdf(
        -EGGBOX_BOX, EGGBOX_MEANS, EGGBOX_SD
    )
    upper = stats.norm.cdf(EGGBOX_BOX, EGGBOX_MEANS, EGGBOX_SD) - stats.norm.cdf(
        3.0, EGGBOX_MEANS, EGGBOX_SD
    )
    mass = float(EGGBOX_WEIGHTS @ inside)
    return KernelProblem(
        f"eggbox-{dim}d",
        f"x ~ U(−10, 10)^{dim}, per coordinate 0.2 N(−6, ½²) + 0.2 N(0, ½²) + 0.6 N(6, ½²) "
        f"({3**dim} modes)",
        "P(x_i > 3), mean over i",
        float(EGGBOX_WEIGHTS @ upper) / mass,
        dim * float(np.log(mass / (2 * EGGBOX_BOX))),
        lambda: eggbox_model(dim),
        lambda x: (x > 3.0).mean(axis=(1, 2)),
    )


def kernel_problems() -> list[KernelProblem]:
    """The targets of the ``kernel`` benchmark with their exact answers."""
    upper = 1.0 / (1.0 + np.exp(-2.0))
    log_z_step = float(np.log(0.5 * (1.0 + np.exp(-2.0))))
    hazard = stats.norm.pdf(0.5) / stats.norm.sf(0.5)
    two_modes = multimodal_targets()["two-modes-110-nat"]
    return [
        KernelProblem(
            "step-1d",
            "x ~ U(−1, 3), likelihood 1 on x > 1, e⁻² below",
            "P(x > 1)",
            upper,
            log_z_step,
            lambda: step_model(1),
            lambda x: (x > 1.0).mean(axis=(1, 2)),
        ),
        KernelProblem(
            "step-5d",
            "the same in each of 5 independent coordinates",
            "P(x_i > 1), mean over i",
            upper,
            5 * log_z_step,
            lambda: step_model(5),
            lambda x: (x > 1.0).mean(axis=(1, 2)),
        ),
        KernelProblem(
            "hard-constraint",
            "x ~ N(0, 2²), potential −inf where x ≤ 1",
            "E[x]",
            float(2.0 * hazard),
            float(stats.norm.logsf(0.5)),
            constrained_model,
            lambda x: x.mean(axis=1),
        ),
        KernelProblem(
            two_modes.name,
            "0.3 N(−15, 1) + 0.7 N(15, 1) under N(0, 20²)",
            "weight of x > 0",
            float(two_modes.posterior_weights[1]),
            two_modes.log_evidence,
            two_modes.model,
            lambda x: (x > 0).mean(axis=(1, 2)),
        ),
        eggbox_problem(5),
        eggbox_problem(10),
    ]


KERNELS: dict[str, Any] = {
    "IMH (default)": pm.smc.kernels.IMH,
    "MH": pm.smc.kernels.MH,
    "SFPKernel": SFPKernel,
}


def bench_kernel(s: Settings) -> Section:
    """SFPKernel against PyMC's SMC kernels on targets with known answers."""
    print("  kernel: untimed warm-up (loads PyTensor/Numba machinery once) ...", flush=True)
    with step_model(1):
        for kernel in KERNELS.values():
            pm.sample_smc(draws=20, kernel=kernel, chains=1, progressbar=False, random_seed=0)
    rows = []
    for problem in kernel_problems():
        for label, kernel in KERNELS.items():
            print(f"  kernel/{problem.name}: {label} ...", flush=True)
            with problem.build():
                began = time.perf_counter()
                try:
                    idata = pm.sample_smc(draws=s.smc_draws, kernel=kernel, **common_kwargs(s))
                except Exception as error:  # reported in the table
                    traceback.print_exc()
                    rows.append([problem.name, label, "–", "–", "–", "–", failure_note(error)])
                    continue
                seconds = time.perf_counter() - began
            per_chain = problem.estimate(np.asarray(idata["posterior"]["x"].values, dtype=float))
            error = float(np.mean(per_chain) - problem.exact)
            worst = float(np.max(np.abs(per_chain - problem.exact)))
            log_z_err = smc_log_evidence(idata) - problem.log_evidence
            rows.append(
                [
                    problem.name,
                    label,
                    fmt_sig(error, 2),
                    fmt_sig(worst, 2),
                    fmt_sig(log_z_err, 2),
                    f"{seconds:.1f}",
                    stages_note(idata),
                ]
            )
    problem_rows = [
        [p.name, p.description, p.quantity, f"{p.exact:.4f}", f"{p.log_evidence:.4f}"]
        for p in kernel_problems()
    ]
    parts = [
        "## 2. SMC kernels: SFPKernel against IMH and MH",
        "",
        f"`pm.sample_smc(draws={s.smc_draws}, chains={s.chains}, cores={s.cores}, "
        f"random_seed={s.seed}, kernel=...)`, each kernel with its defaults (SFPKernel: L = 50, "
        "one sweep per stage). Targets with a known quantity and log evidence:",
        "",
        md_table(["target", "model", "quantity", "exact", "exact log Z"], problem_rows),
        "",
        "**Error**: pooled estimate (mean of the chains' estimates) − exact; **worst chain**: "
        "the largest |chain's estimate − exact|; **log Z err**: the final "
        "`log_marginal_likelihood` averaged over chains − exact; **wall s**: the "
        "`pm.sample_smc` call, compilation included. With "
        f"{s.smc_draws} particles the standard error of a probability near 0.8 is about "
        f"{np.sqrt(2 * 0.16 / s.smc_draws):.3f} per chain (resampling's duplicates doubling "
        "the variance).",
        "",
        md_table(
            ["target", "kernel", "error", "worst chain", "log Z err", "wall s", "notes"], rows
        ),
    ]
    return Section("kernel", "\n".join(parts))


def _call_arguments(kwargs: Mapping[str, Any]) -> str:
    """``a=1, b='x'``: keyword arguments as they would be written in the call."""
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
