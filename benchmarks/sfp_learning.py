"""Network-learning experiments of Berrones (2009, §4) with the package's public API.

What is measured (every number is one run with fixed seeds; wall times include compilation):

1. **Glass** (paper Table 2): a 9-6-4 softmax network (88 weights, ``U(-1, 1)`` prior) with the
   cold quadratic loss of Eq. 23 on one-hot targets, ``D = 5e-4``, on 10 random splits
   ``glass_split(np.random.default_rng(split))`` (89 train / 96 test rows). Test error rate of
   SFP-S (posterior-mean class probabilities, Eq. 17), SFP-MLE (first-order expansion around the
   marginal modes, Eq. 18), SFP-I (the first half of the training rows as the initial sample
   ``A``, the second half arriving one row at a time, one sweep per row, Eq. 22) and NUTS on the
   same model, plus the base rate (always predict the majority class of the training set).
2. **Santa Fe B** (paper Table 3): a 10-20-1 network (241 weights) on the breath-rate segment
   (``load_breath_rate``: 1000 values, standardised over the segment), one-step-ahead windows of
   10 past values, ``D = 0.005``. Out-of-sample MSE of SFP-S, SFP-MLE, NUTS and a MAP network
   (``pm.find_MAP``, L-BFGS-B), beside two trivial predictors.
3. **Laser stand-in** (paper Tables 4-5): a 2-20-1 network on Santa Fe A (``load_laser``),
   windows of 2, 200 train / 200 test windows, ``D = 0.005``: SFP-S, SFP-MLE and NUTS MSE; then
   SFP-S with 20, 40, 80 and 140 hidden units.
4. **Cost of a sweep against the number of weights** (paper Fig. 10): seconds per SFP sweep
   (``SFPStep.astep`` timed directly after a warm-up sweep that compiles) of the 2-H-1 laser
   networks, the glass and the Santa Fe networks, and the log-log slope over the laser networks.

The MSE is ``mean((y - ŷ)²)`` over the test windows, on the standardised series. SFP runs use
``pm.sample(step=SFPStep(L=L), tune=15, draws=sweeps - 15, chains=1, cores=1)``: PyMC discards the
15 tuning sweeps, as the paper discards the first 15 of ``M`` sweeps. BLAS is pinned to one thread.
Results go to ``benchmarks/RESULTS.md`` between ``<!-- sfp-learning:start -->`` and
``<!-- sfp-learning:end -->``; the rest of the file is left byte-for-byte as it was.

Usage::

    python benchmarks/sfp_learning.py          # full settings (~15 min on 2 shared cores)
    python benchmarks/sfp_learning.py --quick --output /tmp/sfp_learning.md   # smoke run
"""

from __future__ import annotations

import os

for _blas_variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_blas_variable] = "1"

import argparse  # noqa: E402
import itertools  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402
from _report import environment_table, md_table, run_sections, write_block  # noqa: E402  (benchmarks/ is on sys.path)
from pymc.blocking import DictToArrayBijection  # noqa: E402

from pymc_sfp import IncrementalSFP, SFPStep, sfp_mle  # noqa: E402
from pymc_sfp.datasets import embed, glass_split, load_breath_rate, load_laser  # noqa: E402
from pymc_sfp.nn import Network, gaussian_likelihood, mlp  # noqa: E402

START_MARK = "<!-- sfp-learning:start -->"
END_MARK = "<!-- sfp-learning:end -->"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "RESULTS.md"
#: Sweeps PyMC discards as tuning, the paper's "first 15 sweeps".
DISCARDED_SWEEPS = 15
SEED = 20090601

GLASS_LAYERS = (9, 6, 4)
GLASS_D = 5e-4
SANTAFE_WINDOW = 10
SANTAFE_LAYERS = (SANTAFE_WINDOW, 20, 1)
SANTAFE_TRAIN = 500
LASER_WINDOW = 2
LASER_TRAIN = 200
LASER_TEST = 200
SERIES_D = 0.005
PAPER_SANTAFE_SFP_MSE = 0.0708


@dataclass(frozen=True)
class Settings:
    """Budgets of one run.

    Attributes
    ----------
    label : str
        "full" or "quick".
    glass_splits : int
        Random glass splits (the paper: 10).
    glass_L, glass_sweeps : int
        SFP resolution and sweeps for glass (SFP-S, SFP-MLE and the initial fit of SFP-I).
    series_L, series_sweeps : int
        The same for Santa Fe B and the 2-20-1 laser network.
    hidden_sizes : tuple of int
        Hidden units of the laser hidden-size sweep.
    hidden_L, hidden_sweeps : int
        SFP resolution and sweeps per network of the hidden-size sweep; ``hidden_L`` is also
        the resolution at which the cost of a sweep is timed.
    timed_sweeps : int
        Sweeps timed per network for the cost section (after one warm-up sweep).
    nuts_tune, nuts_draws, nuts_chains : int
        NUTS budget (``target_accept=0.9``, ``cores=1``).
    """

    label: str
    glass_splits: int
    glass_L: int
    glass_sweeps: int
    series_L: int
    series_sweeps: int
    hidden_sizes: tuple[int, ...]
    hidden_L: int
    hidden_sweeps: int
    timed_sweeps: int
    nuts_tune: int
    nuts_draws: int
    nuts_chains: int = 2


FULL = Settings(
    label="full",
    glass_splits=10,
    glass_L=100,
    glass_sweeps=100,
    series_L=50,
    series_sweeps=100,
    hidden_sizes=(20, 40, 80, 140),
    hidden_L=30,
    hidden_sweeps=50,
    timed_sweeps=2,
    nuts_tune=150,
    nuts_draws=150,
)
QUICK = Settings(
    label="quick",
    glass_splits=2,
    glass_L=20,
    glass_sweeps=20,
    series_L=20,
    series_sweeps=18,
    hidden_sizes=(20, 40),
    hidden_L=20,
    hidden_sweeps=17,
    timed_sweeps=1,
    nuts_tune=50,
    nuts_draws=50,
    nuts_chains=1,
)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def n_weights(layer_sizes: Sequence[int]) -> int:
    """Weights and biases of a fully connected network with these layer sizes."""
    return sum((n_in + 1) * n_out for n_in, n_out in itertools.pairwise(layer_sizes))


def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    """Call ``function`` and return its result and the wall time in seconds."""
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def build_network(
    X: np.ndarray, y: np.ndarray, layer_sizes: Sequence[int], D: float, output: str
) -> tuple[pm.Model, Network]:
    """The paper's network: ``U(-1, 1)`` weights and the cold quadratic loss of Eq. 23."""
    with pm.Model() as model:
        network = mlp(X, layer_sizes, output=output, prior="uniform")
        gaussian_likelihood(network, y, D=D)
    return model, network


def sample_sfp(model: pm.Model, L: int, sweeps: int, seed: int) -> xr.DataTree:
    """SFP-S: one chain of ``sweeps`` sweeps, the first 15 discarded as tuning."""
    with model:
        return pm.sample(
            step=SFPStep(L=L),
            tune=DISCARDED_SWEEPS,
            draws=sweeps - DISCARDED_SWEEPS,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


def sample_nuts(model: pm.Model, settings: Settings, seed: int) -> tuple[xr.DataTree, int]:
    """NUTS on the same model; returns the DataTree and the number of divergences."""
    with model:
        idata = pm.sample(
            tune=settings.nuts_tune,
            draws=settings.nuts_draws,
            chains=settings.nuts_chains,
            cores=1,
            target_accept=0.9,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata, int(idata["sample_stats"]["diverging"].sum())


def map_prediction(
    model: pm.Model, network: Network, X_new: np.ndarray, *, jitter: bool, seed: int
) -> np.ndarray:
    """The network at the MAP weights (``pm.find_MAP``, L-BFGS-B on the transformed space).

    ``jitter=False`` starts from PyMC's default initial point (every weight 0);
    ``jitter=True`` adds U(−1, 1) jitter to it on the transformed (log-odds) scale.
    """
    with model:
        point = pm.find_MAP(jitter=jitter, random_seed=seed, progressbar=False)
    one_draw = xr.Dataset(
        {
            var.name: (
                ("chain", "draw", *model.named_vars_to_dims[var.name]),
                np.asarray(point[var.name])[None, None],
            )
            for var in (*network.weights, *network.biases)
        }
    )
    return network.predict_mean(one_draw, X_new).values


def mle_prediction(idata: xr.DataTree, network: Network, X_new: np.ndarray) -> np.ndarray:
    """SFP-MLE: maximise each weight's marginal, predict with the expansion of Eq. 18."""
    return sfp_mle(idata, network).predict(X_new)


def seconds_per_sweep(model: pm.Model, L: int, timed_sweeps: int) -> float:
    """Median wall time of ``timed_sweeps`` calls of ``SFPStep.astep`` after one warm-up sweep.

    The warm-up sweep absorbs the lazy compilation of the step's functions; sweeps start from
    the model's initial point (all weights 0).
    """
    with model:
        step = SFPStep(L=L, marginal_points=0)
    point = DictToArrayBijection.map(model.initial_point())
    point, _ = step.astep(point)
    durations = []
    for _ in range(timed_sweeps):
        start = time.perf_counter()
        point, _ = step.astep(point)
        durations.append(time.perf_counter() - start)
    return float(np.median(durations))


def mse(y: np.ndarray, prediction: np.ndarray) -> float:
    """Mean squared error over the rows of a one-output prediction."""
    return float(np.mean((np.ravel(y) - np.ravel(prediction)) ** 2))


def mean_sd(values: Sequence[float]) -> str:
    """``mean ± sd`` (sample sd, ``ddof=1``) with three decimals."""
    array = np.asarray(values, dtype=float)
    sd = array.std(ddof=1) if len(array) > 1 else float("nan")
    return f"{array.mean():.3f} ± {sd:.3f}"


def series_windows(
    series: np.ndarray, window: int, n_train: int, n_test: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train windows ``0 .. n_train - 1`` and the next ``n_test`` (all remaining if ``None``)."""
    X, y = embed(series, window)
    stop = len(X) if n_test is None else n_train + n_test
    return X[:n_train], y[:n_train], X[n_train:stop], y[n_train:stop]


# --------------------------------------------------------------------------------------------
# Experiments
# --------------------------------------------------------------------------------------------


def incremental_glass_prediction(
    X_train: np.ndarray,
    onehot_train: np.ndarray,
    X_test: np.ndarray,
    settings: Settings,
    seed: int,
) -> np.ndarray:
    """SFP-I class probabilities: ``fit`` on the first half of the rows, then one row at a time."""
    n_initial = len(X_train) // 2
    learner = IncrementalSFP(
        GLASS_LAYERS, D=GLASS_D, output="softmax", L=settings.glass_L, random_seed=seed
    )
    learner.fit(X_train[:n_initial], onehot_train[:n_initial], sweeps=settings.glass_sweeps)
    learner.partial_fit(X_train[n_initial:], onehot_train[n_initial:])
    return learner.predict(X_test)


def glass_experiment(settings: Settings) -> str:
    """Paper Table 2: test error rates on random glass splits."""
    methods = ("SFP-S", "SFP-MLE", "SFP-I", "NUTS", "base rate")
    errors: dict[str, list[float]] = {method: [] for method in methods}
    seconds: dict[str, list[float]] = {method: [] for method in methods}
    per_split_rows = []
    n_train = 89
    for split in range(settings.glass_splits):
        X_train, y_train, X_test, y_test = glass_split(np.random.default_rng(split))
        onehot_train = np.eye(GLASS_LAYERS[-1])[y_train]
        n_train = len(X_train)
        seed = SEED + split

        model, network = build_network(X_train, onehot_train, GLASS_LAYERS, GLASS_D, "softmax")
        idata, sfp_s = timed(
            partial(sample_sfp, model, settings.glass_L, settings.glass_sweeps, seed)
        )
        probabilities = {"SFP-S": network.predict_mean(idata, X_test).values}
        seconds["SFP-S"].append(sfp_s)
        probabilities["SFP-MLE"], mle_s = timed(partial(mle_prediction, idata, network, X_test))
        seconds["SFP-MLE"].append(mle_s)
        probabilities["SFP-I"], incremental_s = timed(
            partial(incremental_glass_prediction, X_train, onehot_train, X_test, settings, seed)
        )
        seconds["SFP-I"].append(incremental_s)
        (nuts_idata, divergences), nuts_s = timed(partial(sample_nuts, model, settings, seed))
        probabilities["NUTS"] = network.predict_mean(nuts_idata, X_test).values
        seconds["NUTS"].append(nuts_s)
        for method, method_probabilities in probabilities.items():
            errors[method].append(float(np.mean(method_probabilities.argmax(axis=1) != y_test)))

        majority_class = np.bincount(y_train).argmax()
        errors["base rate"].append(float(np.mean(y_test != majority_class)))
        seconds["base rate"].append(0.0)
        per_split_rows.append(
            [split, *(f"{errors[m][-1]:.3f}" for m in methods), divergences, f"{sfp_s:.0f}"]
        )
        print(f"glass split {split}: " + ", ".join(f"{m} {errors[m][-1]:.3f}" for m in methods))

    paper = {"SFP-S": "0.32 ± 0.04", "base rate": "0.61"}
    summary = md_table(
        ["method", "error rate (mean ± sd)", "paper", "wall s per split (mean)"],
        [[m, mean_sd(errors[m]), paper.get(m, "—"), f"{np.mean(seconds[m]):.1f}"] for m in methods]
        + [["penalised-likelihood ANN (paper only)", "—", "0.38", "—"]],
    )
    per_split = md_table(["split", *methods, "NUTS divergences", "SFP-S s"], per_split_rows)
    return f"""## 1. Glass, 9-6-4 softmax network (paper Table 2)

Settings: {n_weights(GLASS_LAYERS)} weights U(−1, 1), Eq. 23 loss on one-hot targets,
D = {GLASS_D:g}; splits `glass_split(np.random.default_rng(s))`, s = 0..{settings.glass_splits - 1}
({n_train} train / 96 test). SFP-S and SFP-MLE: one chain, `SFPStep(L={settings.glass_L})`,
{settings.glass_sweeps} sweeps, first {DISCARDED_SWEEPS} discarded (paper: L = 100, M = 100).
SFP-I: `IncrementalSFP(L={settings.glass_L}, window=15)`, `fit` on the first {n_train // 2} training
rows ({settings.glass_sweeps} sweeps, {DISCARDED_SWEEPS} discarded), then `partial_fit` of the
other {n_train - n_train // 2} rows, one sweep each; it predicts with the last 15 sweeps. NUTS:
{settings.nuts_chains} chains × {settings.nuts_draws} draws after {settings.nuts_tune} tuning steps,
`target_accept=0.9`. Base rate: always predict the majority class of the training set. Error
rate = share of the 96 test rows whose argmax class is wrong. Seeds {SEED} + split. Wall times
include compilation; SFP-MLE time is only the marginal maximisation and the prediction (it reuses
the SFP-S run); SFP-I builds and samples its own model.

{summary}

<details><summary>Per split</summary>

{per_split}

</details>"""


def incremental_series_prediction(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    layer_sizes: tuple[int, ...],
    settings: Settings,
) -> np.ndarray:
    """SFP-I one-step-ahead predictions: ``fit`` on the first half of the training windows, then
    the other half one window at a time, in time order (one sweep each)."""
    n_initial = len(X_train) // 2
    learner = IncrementalSFP(layer_sizes, D=SERIES_D, L=settings.series_L, random_seed=SEED)
    learner.fit(X_train[:n_initial], y_train[:n_initial], sweeps=settings.series_sweeps)
    learner.partial_fit(X_train[n_initial:], y_train[n_initial:])
    return learner.predict(X_test)[:, 0]


def regression_rows(
    label: str,
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    layer_sizes: tuple[int, ...],
    settings: Settings,
    *,
    with_map: bool,
    with_incremental: bool = False,
) -> list[tuple[str, float, float]]:
    """Test MSE and wall time of SFP-S, SFP-MLE, optionally SFP-I, NUTS, optionally MAP, and
    trivial predictors.

    Returns
    -------
    list of (method, test MSE, wall seconds)
    """
    X_train, y_train, X_test, y_test = data
    model, network = build_network(X_train, y_train, layer_sizes, SERIES_D, "linear")
    idata, sfp_s = timed(
        partial(sample_sfp, model, settings.series_L, settings.series_sweeps, SEED)
    )
    rows = [("SFP-S", mse(y_test, network.predict_mean(idata, X_test).values), sfp_s)]
    mle_predictions, mle_s = timed(partial(mle_prediction, idata, network, X_test))
    rows.append(("SFP-MLE", mse(y_test, mle_predictions), mle_s))
    if with_incremental:
        predictions, sfp_i_s = timed(
            partial(incremental_series_prediction, X_train, y_train, X_test, layer_sizes, settings)
        )
        rows.append(("SFP-I", mse(y_test, predictions), sfp_i_s))
    (nuts_idata, divergences), nuts_s = timed(partial(sample_nuts, model, settings, SEED))
    nuts_mse = mse(y_test, network.predict_mean(nuts_idata, X_test).values)
    rows.append((f"NUTS ({divergences} divergences)", nuts_mse, nuts_s))
    if with_map:
        for jitter, start in ((False, "zero start"), (True, "jittered start")):
            predictions, map_s = timed(
                partial(map_prediction, model, network, X_test, jitter=jitter, seed=SEED)
            )
            rows.append((f"MAP network, L-BFGS-B, {start}", mse(y_test, predictions), map_s))
    rows.append(("predict the training mean", mse(y_test, np.full(len(y_test), y_train.mean())), 0))
    rows.append(("persistence: repeat the last value", mse(y_test, X_test[:, -1]), 0))
    for method, error, _ in rows:
        print(f"{label}: {method} MSE {error:.4f}")
    return rows


def with_paper_column(
    rows: list[tuple[str, float, float]], paper: dict[str, str]
) -> list[list[str]]:
    """Format rows ``(method, MSE, seconds)``, adding the paper's value of each method prefix."""
    return [
        [
            method,
            f"{error:.4f}",
            next((value for key, value in paper.items() if method.startswith(key)), "—"),
            f"{seconds:.1f}",
        ]
        for method, error, seconds in rows
    ]


def santafe_experiment(settings: Settings) -> str:
    """Paper Table 3: breath-rate one-step-ahead prediction with a 10-20-1 network."""
    series = load_breath_rate()
    data = series_windows(series, SANTAFE_WINDOW, SANTAFE_TRAIN, None)
    n_test = len(data[3])
    rows = regression_rows(
        "Santa Fe B 10-20-1", data, SANTAFE_LAYERS, settings, with_map=True, with_incremental=True
    )
    paper = {"SFP-S": "0.0708", "NUTS": "0.2379 (HMC)", "MAP": "0.4100 (BFGS)"}
    table = md_table(["method", "test MSE", "paper", "wall s"], with_paper_column(rows, paper))
    mse_of = {method.split(" (")[0]: error for method, error, _ in rows}
    sfp_mse = mse_of["SFP-S"]
    # The same predictions measured on the series scaled to [0, 1] instead of unit variance.
    raw = load_breath_rate(normalize=False)
    unit_interval_factor = (raw.std() / (raw.max() - raw.min())) ** 2
    zero_map = mse_of["MAP network, L-BFGS-B, zero start"]
    best_method, best_mse = min(mse_of.items(), key=lambda item: item[1])
    close = abs(sfp_mse / PAPER_SANTAFE_SFP_MSE - 1) <= 0.2
    verdict = "within 20 %, reproduced" if close else "not reproduced"
    return f"""## 2. Santa Fe B breath rate, 10-20-1 network (paper Table 3)

Data: `load_breath_rate()` — b1.txt column 2, rows 12750..13749, standardised over those 1000
values (ddof = 0). `embed(series, {SANTAFE_WINDOW})` gives {len(series) - SANTAFE_WINDOW}
windows; window t has inputs x[t..t+9] and target x[t+10]. Train: windows 0..{SANTAFE_TRAIN - 1}
(targets x[10..509]); test: windows {SANTAFE_TRAIN}..{SANTAFE_TRAIN + n_test - 1} (targets
x[510..999], {n_test} windows): the first {SANTAFE_WINDOW} values are only ever inputs, so the
test half has {SANTAFE_WINDOW} fewer targets than the paper's 500. Network:
{n_weights(SANTAFE_LAYERS)} weights U(−1, 1), Eq. 23 loss, D = {SERIES_D}. SFP: one chain,
`SFPStep(L={settings.series_L})`, {settings.series_sweeps} sweeps, first {DISCARDED_SWEEPS}
discarded (paper: L = 100, M = 100). NUTS: {settings.nuts_chains} chains ×
{settings.nuts_draws} draws after {settings.nuts_tune} tuning steps, `target_accept=0.9`. MAP:
`pm.find_MAP()` (L-BFGS-B on the log-odds-transformed weights) from PyMC's initial point (all
weights 0) and from that point with U(−1, 1) jitter (`jitter=True`). MSE = mean((y − ŷ)²) over
the test windows, in units of the segment's variance. SFP-I: `IncrementalSFP(L={settings.series_L},
window=15)`, `fit` on the first {SANTAFE_TRAIN // 2} training windows ({settings.series_sweeps}
sweeps, {DISCARDED_SWEEPS} discarded), then the other {SANTAFE_TRAIN - SANTAFE_TRAIN // 2} one at a
time in time order, one sweep each; it predicts with the last 15 sweeps.

{table}

**Reading.** Our SFP-S test MSE is {sfp_mse:.4f} against the paper's 0.0708
({sfp_mse / PAPER_SANTAFE_SFP_MSE:.1f}× the paper's value): {verdict}. For scale, predicting the
training mean gives {mse_of["predict the training mean"]:.4f} and persistence
{mse_of["persistence: repeat the last value"]:.4f} on these {n_test} test windows; the lowest
MSE of any method here is {best_mse:.4f} ({best_method}). MSE conventions change the number: the
same SFP-S predictions scored on the series min-max scaled to [0, 1] would have MSE
{sfp_mse * unit_interval_factor:.4f} (factor {unit_interval_factor:.4f}), and half the mean
squared error would be {sfp_mse / 2:.4f}; the paper says only that the series is normalised. The
MAP network from the zero start scores {zero_map:.4f}
(training mean: {mse_of["predict the training mean"]:.4f}): with every weight 0 the tanh units
output 0 and only the output bias has a gradient (a saddle point), so L-BFGS-B started there can
only fit a constant; from a jittered start it reaches
{mse_of["MAP network, L-BFGS-B, jittered start"]:.4f}. Our NUTS scores {mse_of["NUTS"]:.4f}
against the paper's HMC 0.2379."""


def laser_experiment(settings: Settings) -> str:
    """Paper Tables 4-5: the laser stand-in, 2-20-1 network and the hidden-size sweep."""
    series = load_laser()
    data = series_windows(series, LASER_WINDOW, LASER_TRAIN, LASER_TEST)
    X_train, y_train, X_test, y_test = data
    layers = (LASER_WINDOW, 20, 1)
    rows = regression_rows("laser 2-20-1", data, layers, settings, with_map=False)
    paper = {"SFP-S": "0.0660 (NMR)", "SFP-MLE": "0.0490 (NMR)", "NUTS": "0.0668 (NMR, HMC)"}
    table = md_table(["method", "test MSE", "paper", "wall s"], with_paper_column(rows, paper))

    hidden_rows = []
    for hidden in settings.hidden_sizes:
        hidden_layers = (LASER_WINDOW, hidden, 1)
        model, network = build_network(X_train, y_train, hidden_layers, SERIES_D, "linear")
        idata, wall = timed(
            partial(sample_sfp, model, settings.hidden_L, settings.hidden_sweeps, SEED)
        )
        error = mse(y_test, network.predict_mean(idata, X_test).values)
        hidden_rows.append([hidden, n_weights(hidden_layers), f"{error:.4f}", f"{wall:.0f}"])
        print(f"laser 2-{hidden}-1: SFP-S MSE {error:.4f}, {wall:.0f} s")
    hidden_table = md_table(["hidden units", "weights", "SFP-S test MSE", "wall s"], hidden_rows)
    return f"""## 3. Laser stand-in, 2-H-1 networks (paper Tables 4–5)

Data: `load_laser()` — Santa Fe A (far-infrared laser, 9093 values), a stand-in for the paper's
NMR laser series, which has no public copy; standardised over all 9093 values. `embed(series,
{LASER_WINDOW})`: window t has inputs x[t], x[t+1] and target x[t+2]. Train: windows
0..{LASER_TRAIN - 1}; test: windows {LASER_TRAIN}..{LASER_TRAIN + LASER_TEST - 1} (targets
x[202..401]). D = {SERIES_D}, U(−1, 1) weights. 2-20-1 network: `SFPStep(L={settings.series_L})`,
{settings.series_sweeps} sweeps, first {DISCARDED_SWEEPS} discarded; NUTS
{settings.nuts_chains} chains × {settings.nuts_draws} draws after {settings.nuts_tune} tuning
steps. The paper's numbers are for another series (the NMR laser), for orientation only.

{table}

Hidden-size sweep (paper Table 5: L = 300, D = 1e−4; here L = {settings.hidden_L},
D = {SERIES_D}, {settings.hidden_sweeps} sweeps each, first {DISCARDED_SWEEPS} discarded, so
{settings.hidden_sweeps - DISCARDED_SWEEPS} sweeps averaged). The paper's claim: the SFP-S test
error stays flat as the network grows.

{hidden_table}"""


def sweep_cost_experiment(settings: Settings) -> str:
    """Paper Fig. 10: seconds per SFP sweep against the number of weights."""
    X_laser, y_laser, _, _ = series_windows(load_laser(), LASER_WINDOW, LASER_TRAIN, LASER_TEST)
    X_breath, y_breath, _, _ = series_windows(
        load_breath_rate(), SANTAFE_WINDOW, SANTAFE_TRAIN, None
    )
    X_glass, y_glass, _, _ = glass_split(np.random.default_rng(0))
    cases = [
        (f"laser 2-{h}-1", X_laser, y_laser, (LASER_WINDOW, h, 1), SERIES_D, "linear")
        for h in settings.hidden_sizes
    ]
    cases += [
        ("glass 9-6-4", X_glass, np.eye(4)[y_glass], GLASS_LAYERS, GLASS_D, "softmax"),
        ("Santa Fe B 10-20-1", X_breath, y_breath, SANTAFE_LAYERS, SERIES_D, "linear"),
    ]
    rows, laser_weights, laser_seconds = [], [], []
    for label, X, y, layers, D, output in cases:
        model, _ = build_network(X, y, layers, D, output)
        per_sweep = seconds_per_sweep(model, settings.hidden_L, settings.timed_sweeps)
        if label.startswith("laser"):
            laser_weights.append(n_weights(layers))
            laser_seconds.append(per_sweep)
        rows.append([label, n_weights(layers), len(X), f"{per_sweep:.3f}"])
        print(f"{label}: {per_sweep:.3f} s / sweep")
    slope_text = "Too few hidden sizes for a fit"
    if len(laser_weights) >= 2:
        slope = np.polyfit(np.log(laser_weights), np.log(laser_seconds), 1)[0]
        slope_text = f"Fitted log-log slope over the 2-H-1 laser networks: **{slope:.2f}**"
    table = md_table(["network", "weights", "data points", "s / sweep"], rows)
    return f"""## 4. Cost of one SFP sweep against the number of weights (paper Fig. 10)

`SFPStep(L={settings.hidden_L}, marginal_points=0)`; `step.astep` called directly from the
all-zero initial point: one warm-up sweep (it compiles), then the median of
{settings.timed_sweeps} timed sweeps. Only the 2-H-1 laser networks (same {LASER_TRAIN} data points,
same L) enter the fit; the glass and Santa Fe rows have other data and are shown for scale.

{table}

{slope_text}. Each coordinate of a sweep evaluates the whole model on its L-point grid, so a
sweep costs about (number of weights) × L × (cost of one model evaluation), and the cost of one
evaluation of a 2-H-1 network on a fixed data set itself grows with H, i.e. with the number of
weights: the cost per sweep grows faster than linearly in the weights."""


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


EXPERIMENTS: dict[str, Callable[[Settings], str]] = {
    "glass": glass_experiment,
    "santafe": santafe_experiment,
    "laser": laser_experiment,
    "cost": sweep_cost_experiment,
}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the experiments, print the markdown and write it into the output file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny budgets (smoke run)")
    parser.add_argument(
        "--only", choices=list(EXPERIMENTS), help="run one experiment; replaces only its text"
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file to write the block to"
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL

    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    load = os.getloadavg()
    keys = [args.only] if args.only else list(EXPERIMENTS)
    sections, _ = run_sections(EXPERIMENTS, keys, settings, settings.label)

    header = "\n\n".join(
        [
            "# Network learning (Berrones 2009, §4): `benchmarks/sfp_learning.py`",
            f"Generated by `python benchmarks/sfp_learning.py` ({settings.label} settings"
            + (f", `--only {args.only}`" if args.only else "")
            + "). One run per experiment, fixed seeds; wall times include compilation and may "
            "have been taken while another benchmark shared the 2 cores. Environment of the "
            "latest run:",
            environment_table(load, [["settings", f"`{settings}`"]]),
        ]
    )
    write_block(
        args.output,
        prefix="sfp-learning",
        begin=START_MARK,
        end=END_MARK,
        keys=list(EXPERIMENTS),
        header=header,
        sections=sections,
    )
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
