"""Quickstart: SFPStep against NUTS on a three-mode 1-D mixture.

The target is the first example of Berrones (2009),

.. math:: p(x) = 0.2\\,N(x; 5, 2) + 0.2\\,N(x; 20, 2) + 0.6\\,N(x; 40, 2)

(standard deviations 2; mean 29, standard deviation 14.42 — the paper quotes 14.35), written in
PyMC as a ``pm.Flat`` variable plus a ``pm.Potential`` holding the mixture's log-density. The
modes are separated by low-density regions of about 7 nats (between 5 and 20) and 12.5 nats
(between 20 and 40), which gradient-based samplers such as NUTS cross rarely: each chain's mode
weights depend on where it started, and R-hat flags the disagreement. :class:`pymc_sfp.SFPStep`
solves, at every sweep, the stationary Fokker–Planck equation for the whole conditional on the
box ``[-10, 60]`` (Eq. 4) and draws from it, so each draw can land in any mode.

The script samples the target with both samplers (same number of chains, draws and seed) and
prints, per sampler and per chain, the fraction of draws in each mode (split at 12.5 and 30), the
mean and standard deviation, ArviZ's R-hat and bulk / tail ESS, and the sampling wall time, next
to the true values. It then rebuilds the analytic (Rao–Blackwellised, Eq. 7) marginal of ``x``
with :func:`pymc_sfp.sfp_marginals` and saves a figure comparing it, the true density and
histograms of both samplers' draws.

Run it as ``python examples/quickstart.py`` (or ``make quickstart``); ``--help`` lists the
options. The figure goes to ``examples/output/quickstart.png`` unless ``--output`` says otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import arviz as az
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
from scipy import stats

import pymc_sfp

# No display needed: render to files only (switching is allowed until a figure is made).
matplotlib.use("Agg")

#: Mixture weights, means and the common standard deviation of the target.
WEIGHTS = np.array([0.2, 0.2, 0.6])
MEANS = np.array([5.0, 20.0, 40.0])
SIGMA = 2.0
#: Points separating the modes when counting draws.
SPLITS = (12.5, 30.0)
#: SFPStep's box for x.
BOUNDS = (-10.0, 60.0)
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "output" / "quickstart.png"


def true_density(x: np.ndarray) -> np.ndarray:
    """Density of the target mixture at ``x``."""
    x = np.asarray(x, dtype=float)[..., None]
    return np.sum(WEIGHTS * stats.norm.pdf(x, MEANS, SIGMA), axis=-1)


def true_summary() -> tuple[np.ndarray, float, float]:
    """Exact mode fractions (for ``SPLITS``), mean and standard deviation of the target."""
    cdf = np.sum(WEIGHTS * stats.norm.cdf(np.array(SPLITS)[:, None], MEANS, SIGMA), axis=1)
    fractions = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    mean = float(WEIGHTS @ MEANS)
    sd = float(np.sqrt(WEIGHTS @ (SIGMA**2 + MEANS**2) - mean**2))
    return fractions, mean, sd


def build_model() -> pm.Model:
    """The mixture as a ``pm.Flat`` variable plus a ``pm.Potential``."""
    with pm.Model() as model:
        x = pm.Flat("x")
        components = (
            np.log(WEIGHTS)
            - 0.5 * ((x - MEANS) / SIGMA) ** 2
            - np.log(SIGMA * np.sqrt(2.0 * np.pi))
        )
        pm.Potential("mixture", pm.math.logsumexp(components))
    return model


def sample(model: pm.Model, step_factory, args: argparse.Namespace) -> tuple[object, float]:
    """Run ``pm.sample`` (step from ``step_factory``, NUTS if ``None``); return it and its time."""
    with model:
        step = step_factory() if step_factory is not None else None
        start = time.perf_counter()
        idata = pm.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=2,
            step=step,
            random_seed=args.seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        elapsed = time.perf_counter() - start
    return idata, elapsed


def mode_fractions(draws: np.ndarray) -> np.ndarray:
    """Fractions of ``draws`` below, between and above the split points."""
    bins = np.digitize(draws, SPLITS)
    return np.bincount(bins.ravel(), minlength=3) / bins.size


def scalar(value) -> float:
    """The single number in an ArviZ diagnostic result (DataTree, Dataset or array)."""
    if hasattr(value, "children") and "posterior" in value.children:
        value = value["posterior"]
    if hasattr(value, "data_vars"):
        value = value["x"]
    return float(np.asarray(value).squeeze())


def print_table(results: dict, marginal) -> None:
    """Per-chain and pooled mode fractions, mean and sd; diagnostics; the true values."""
    header = (
        f"{'sampler':<9}{'chain':>7}  {'x<12.5':>7}{'12.5-30':>9}{'x>=30':>7}{'mean':>9}{'sd':>8}"
    )
    rule = "-" * len(header)
    print("\nMode fractions (split at 12.5 and 30), mean and sd of x")
    print(rule)
    print(header)
    print(rule)
    for name, (idata, _) in results.items():
        draws = np.asarray(idata["posterior"]["x"].values)
        for chain, chain_draws in enumerate(draws):
            f = mode_fractions(chain_draws)
            print(
                f"{name:<9}{chain:>7}  {f[0]:>7.3f}{f[1]:>9.3f}{f[2]:>7.3f}"
                f"{chain_draws.mean():>9.2f}{chain_draws.std():>8.2f}"
            )
        f = mode_fractions(draws)
        print(
            f"{name:<9}{'pooled':>7}  {f[0]:>7.3f}{f[1]:>9.3f}{f[2]:>7.3f}"
            f"{draws.mean():>9.2f}{draws.std():>8.2f}"
        )
        print(rule)
    f, mean, sd = marginal_summary(marginal)
    print(
        f"{'SFP Eq.7':<9}{'marg.':>7}  {f[0]:>7.3f}{f[1]:>9.3f}{f[2]:>7.3f}{mean:>9.2f}{sd:>8.2f}"
    )
    f, mean, sd = true_summary()
    print(f"{'true':<9}{'':>7}  {f[0]:>7.3f}{f[1]:>9.3f}{f[2]:>7.3f}{mean:>9.2f}{sd:>8.2f}")
    print(rule)

    print("\nDiagnostics of x (ArviZ) and sampling wall time (pm.sample, incl. compilation)")
    print(f"{'sampler':<9}{'R-hat':>8}{'ESS bulk':>10}{'ESS tail':>10}{'time [s]':>10}")
    for name, (idata, elapsed) in results.items():
        rhat = scalar(az.rhat(idata, var_names=["x"]))
        ess_bulk = scalar(az.ess(idata, var_names=["x"], method="bulk"))
        ess_tail = scalar(az.ess(idata, var_names=["x"], method="tail"))
        print(f"{name:<9}{rhat:>8.3f}{ess_bulk:>10.0f}{ess_tail:>10.0f}{elapsed:>10.1f}")

    sfp_stats = results["SFPStep"][0]["sample_stats"]
    print(
        f"\nSFPStep sample stats: mean acceptance {float(sfp_stats['accept'].mean()):.4f}, "
        f"log-density evaluations per sweep {float(sfp_stats['n_logp_evals'].mean()):.0f}, "
        f"invalid conditionals {int(sfp_stats['n_invalid'].sum())}, "
        f"edge hits {int(sfp_stats['n_edge_hits'].sum())}"
    )


def marginal_summary(marginal) -> tuple[np.ndarray, float, float]:
    """Mode fractions, mean and sd of an analytic marginal (midpoint rule on its CDF)."""
    fractions = np.diff(np.concatenate([[0.0], marginal.cdf(np.array(SPLITS)), [1.0]]))
    mid = 0.5 * (marginal.points[1:] + marginal.points[:-1])
    mass = np.diff(marginal.cdf_values)
    mass = mass / mass.sum()
    mean = float(mass @ mid)
    sd = float(np.sqrt(mass @ (mid - mean) ** 2))
    return fractions, mean, sd


def plot(results: dict, marginal, output: Path) -> None:
    """True density, SFP analytic marginal and histograms of both samplers' draws."""
    grid = np.linspace(*BOUNDS, 1000)
    bins = np.linspace(*BOUNDS, 141)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True, layout="constrained")
    colours = {"SFPStep": "tab:blue", "NUTS": "tab:orange"}
    for ax, (name, (idata, _)) in zip(axes, results.items(), strict=True):
        draws = np.asarray(idata["posterior"]["x"].values)
        ax.hist(
            draws.ravel(),
            bins=bins,
            density=True,
            color=colours.get(name, "tab:gray"),
            alpha=0.45,
            label=f"{name} draws ({draws.shape[0]} chains x {draws.shape[1]})",
        )
        for chain, chain_draws in enumerate(draws):
            f = mode_fractions(chain_draws)
            ax.plot([], [], " ", label=f"chain {chain}: " + " / ".join(f"{v:.2f}" for v in f))
        ax.plot(grid, true_density(grid), color="black", lw=1.5, label="true density")
        if name == "SFPStep":
            ax.plot(
                grid,
                marginal.pdf(grid),
                color="tab:red",
                lw=1.5,
                ls="--",
                label="SFP analytic marginal (Eq. 7)",
            )
        ax.set_title(f"{name}: mode fractions per chain vs true 0.20 / 0.20 / 0.60")
        ax.set_xlabel("x")
        ax.set_xlim(*BOUNDS)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("density")
    fig.suptitle("0.2 N(5, 2) + 0.2 N(20, 2) + 0.6 N(40, 2)")
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain")
    parser.add_argument("--tune", type=int, default=500, help="tuning draws per chain")
    parser.add_argument("--chains", type=int, default=4, help="chains per sampler")
    parser.add_argument("--seed", type=int, default=2009, help="random seed of both samplers")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="figure path")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Sample with both samplers, print the comparison and save the figure."""
    args = parse_args(argv)
    print(
        f"Target 0.2 N(5, 2) + 0.2 N(20, 2) + 0.6 N(40, 2); {args.chains} chains x {args.draws} "
        f"draws ({args.tune} tuning) per sampler, random_seed={args.seed}"
    )
    model = build_model()
    results = {
        "SFPStep": sample(model, lambda: pymc_sfp.SFPStep(bounds=BOUNDS), args),
        "NUTS": sample(model, None, args),
    }
    marginal = pymc_sfp.sfp_marginals(results["SFPStep"][0])["x"]
    print_table(results, marginal)
    plot(results, marginal, args.output)
    print(f"\nFigure saved to {args.output}")


if __name__ == "__main__":
    main()
