"""Learning benchmark ``glass``: Berrones (2009) Table 2, a 9-6-4 softmax network on glass.

88 weights with a ``U(-1, 1)`` prior, the cold quadratic loss of Eq. 23 on one-hot targets,
``D = 5e-4``, on 10 random splits ``glass_split(np.random.default_rng(split))`` (89 train / 96
test rows). Test error rate of SFP-S (posterior-mean class probabilities, Eq. 17), SFP-MLE
(first-order expansion around the marginal modes, Eq. 18), SFP-I (the first half of the training
rows as the initial sample ``A``, the second half arriving one row at a time, one sweep per row,
Eq. 22) and NUTS on the same model, plus the base rate (always predict the majority class of the
training set). One model, one ``SFPStep`` and one ``IncrementalSFP`` serve the ten splits, each
split's rows put in with ``pm.set_data``: only split 0 builds and compiles them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pymc as pm
from _common import Section, md_table
from _problems import GLASS_D, GLASS_LAYERS, n_weights, paper_network
from _runs import DISCARDED_SWEEPS, built, mle_prediction, sample_nuts, sample_sfp, timed

from pymc_sfp import IncrementalSFP
from pymc_sfp.datasets import glass_split

if TYPE_CHECKING:
    from sfp_learning import Settings


def mean_sd(values: Sequence[float]) -> str:
    """``mean ± sd`` (sample sd, ``ddof=1``) with three decimals."""
    array = np.asarray(values, dtype=float)
    sd = array.std(ddof=1) if len(array) > 1 else float("nan")
    return f"{array.mean():.3f} ± {sd:.3f}"


def incremental_glass_prediction(
    learner: IncrementalSFP,
    X_train: np.ndarray,
    onehot_train: np.ndarray,
    X_test: np.ndarray,
    settings: Settings,
    seed: int,
) -> np.ndarray:
    """SFP-I class probabilities: ``fit`` on the first half of the rows (a refit of a fitted
    ``learner``: its model and step reused), then one row at a time."""
    n_initial = len(X_train) // 2
    learner.random_seed = seed
    learner.fit(X_train[:n_initial], onehot_train[:n_initial], sweeps=settings.glass_sweeps)
    learner.partial_fit(X_train[n_initial:], onehot_train[n_initial:])
    return learner.predict(X_test)


def benchmark(settings: Settings) -> Section:
    """Paper Table 2: test error rates on random glass splits."""
    methods = ("SFP-S", "SFP-MLE", "SFP-I", "NUTS", "base rate")
    errors: dict[str, list[float]] = {method: [] for method in methods}
    seconds: dict[str, list[float]] = {method: [] for method in methods}
    per_split_rows = []
    n_train = 89
    # One model, SFP step and SFP-I learner for all splits (all have n_train rows): each split's
    # data replace the last with pm.set_data, so only the first split builds and compiles them
    # (its times include that).
    learner = IncrementalSFP(GLASS_LAYERS, D=GLASS_D, output="softmax", L=settings.glass_L)
    for split in range(settings.glass_splits):
        X_train, y_train, X_test, y_test = glass_split(np.random.default_rng(split))
        onehot_train = np.eye(GLASS_LAYERS[-1])[y_train]
        n_train = len(X_train)
        seed = settings.seed + split

        if split == 0:
            model, network = paper_network(X_train, onehot_train, GLASS_LAYERS, GLASS_D, "softmax")
            with model:
                step, build_s = built(L=settings.glass_L)
        else:
            pm.set_data({"net_X": X_train, "net_y_data": onehot_train}, model=model)
            build_s = 0.0
        idata, sfp_s = timed(
            partial(sample_sfp, model, settings.glass_L, settings.glass_sweeps, seed, step)
        )
        sfp_s += build_s
        probabilities = {"SFP-S": network.predict_mean(idata, X_test).values}
        seconds["SFP-S"].append(sfp_s)
        probabilities["SFP-MLE"], mle_s = timed(partial(mle_prediction, idata, network, X_test))
        seconds["SFP-MLE"].append(mle_s)
        probabilities["SFP-I"], incremental_s = timed(
            partial(
                incremental_glass_prediction,
                learner,
                X_train,
                onehot_train,
                X_test,
                settings,
                seed,
            )
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
    return Section(
        "glass",
        f"""## 1. Glass, 9-6-4 softmax network (paper Table 2)

Settings: {n_weights(GLASS_LAYERS)} weights U(−1, 1), Eq. 23 loss on one-hot targets,
D = {GLASS_D:g}; splits `glass_split(np.random.default_rng(s))`, s = 0..{settings.glass_splits - 1}
({n_train} train / 96 test). SFP-S and SFP-MLE: one chain, `SFPStep(L={settings.glass_L})`,
{settings.glass_sweeps} sweeps, first {DISCARDED_SWEEPS} discarded (paper: L = 100, M = 100).
SFP-I: `IncrementalSFP(L={settings.glass_L}, window=15)`, `fit` on the first {n_train // 2} training
rows ({settings.glass_sweeps} sweeps, {DISCARDED_SWEEPS} discarded), then `partial_fit` of the
other {n_train - n_train // 2} rows, one sweep each; it predicts with the last 15 sweeps. NUTS:
{settings.nuts_chains} chains × {settings.nuts_draws} draws after {settings.nuts_tune} tuning steps,
`target_accept=0.9`. Base rate: always predict the majority class of the training set. Error
rate = share of the 96 test rows whose argmax class is wrong. Seeds {settings.seed} + split.
One model serves every split: a split's rows replace the last split's in its `pm.Data`
(`pm.set_data`; every split has {n_train} training rows). SFP-S's step and SFP-I's learner are
built once, in split 0, and reused (a step's tuning starts over in each run; `fit` again starts
the learner over on the new rows, its model and step reused: both draw what a new one draws,
tests/step_methods/test_sfp.py and tests/learning/test_incremental.py); NUTS runs `pm.sample`
as usual, which builds and compiles its step in every split. Wall times include compilation
(SFP-S's and SFP-I's in split 0 only); SFP-MLE time is only the marginal maximisation and the
prediction (it reuses the SFP-S run); SFP-I samples a model of its own (its prior of Eq. 21).

{summary}

<details><summary>Per split</summary>

{per_split}

</details>""",
    )
