"""Learning benchmark ``laser``: Berrones (2009) Tables 4-5 on a stand-in for the NMR laser.

A 2-20-1 network on Santa Fe A (``load_laser``), windows of 2, 200 train / 200 test windows,
``D = 0.005``: SFP-S, SFP-MLE and NUTS MSE; then SFP-S with 20, 40, 80 and 140 hidden units.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from _common import Section, md_table
from _problems import (
    LASER_TEST,
    LASER_TRAIN,
    LASER_WINDOW,
    SERIES_D,
    laser_windows,
    n_weights,
    paper_network,
)
from _runs import DISCARDED_SWEEPS, sample_sfp, timed
from learning_santafe import mse, regression_rows, with_paper_column

if TYPE_CHECKING:
    from sfp_learning import Settings


def benchmark(settings: Settings) -> Section:
    """Paper Tables 4-5: the laser stand-in, 2-20-1 network and the hidden-size sweep."""
    data = laser_windows()
    X_train, y_train, X_test, y_test = data
    layers = (LASER_WINDOW, 20, 1)
    rows = regression_rows("laser 2-20-1", data, layers, settings, with_map=False)
    paper = {"SFP-S": "0.0660 (NMR)", "SFP-MLE": "0.0490 (NMR)", "NUTS": "0.0668 (NMR, HMC)"}
    table = md_table(["method", "test MSE", "paper", "wall s"], with_paper_column(rows, paper))

    hidden_rows = []
    for hidden in settings.hidden_sizes:
        hidden_layers = (LASER_WINDOW, hidden, 1)
        model, network = paper_network(X_train, y_train, hidden_layers, SERIES_D, "linear")
        idata, wall = timed(
            partial(sample_sfp, model, settings.hidden_L, settings.hidden_sweeps, settings.seed)
        )
        error = mse(y_test, network.predict_mean(idata, X_test).values)
        hidden_rows.append([hidden, n_weights(hidden_layers), f"{error:.4f}", f"{wall:.0f}"])
        print(f"laser 2-{hidden}-1: SFP-S MSE {error:.4f}, {wall:.0f} s")
    hidden_table = md_table(["hidden units", "weights", "SFP-S test MSE", "wall s"], hidden_rows)
    return Section(
        "laser",
        f"""## 3. Laser stand-in, 2-H-1 networks (paper Tables 4–5)

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

{hidden_table}""",
    )
