"""The package's steps in a ``CompoundStep`` with each of PyMC's continuous steps, in both orders.

PyMC refuses a compound whose sub-steps declare a stat of the same name with different dtypes
("Sampler statistic divergences appears with different types"), so every stat shared by name
with a PyMC step must compare equal to PyMC's declaration. ``ReplicaExchangeDynamics`` cannot be
part of a compound (it must own every variable) and is not tried here.
"""

import numpy as np
import pymc as pm
import pytest

from pymc_sfp import SFPStep, StochasticDynamics

OURS = {
    "SFPStep": lambda var: SFPStep([var], L=20, bounds=(-8, 8), marginal_points=0),
    "StochasticDynamics": lambda var: StochasticDynamics([var], n_leapfrog=3),
}
PYMC = {
    "NUTS": pm.NUTS,
    "HamiltonianMC": pm.HamiltonianMC,
    "Metropolis": pm.Metropolis,
    "Slice": pm.Slice,
    # PyMC sizes DEMetropolisZ's default proposal by all the model's variables: give it one.
    "DEMetropolisZ": lambda vars: pm.DEMetropolisZ(vars, S=np.ones(1)),
}


@pytest.fixture(scope="module")
def model():
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0)
        b = pm.Normal("b", a, 1.0)
        pm.Normal("y", a + b, 1.0, observed=[0.4, 1.1])
    return model


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours_first", "ours_last"])
@pytest.mark.parametrize("pymc_step", sorted(PYMC))
@pytest.mark.parametrize("our_step", sorted(OURS))
def test_compound_with_pymc_step(model, our_step, pymc_step, ours_first):
    with model:
        ours, theirs = OURS[our_step](model["a"]), PYMC[pymc_step]([model["b"]])
        steps = [ours, theirs] if ours_first else [theirs, ours]
        idata = pm.sample(
            step=steps,
            tune=10,
            draws=20,
            chains=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    posterior = idata.posterior
    assert np.isfinite(posterior["a"].values).all() and np.isfinite(posterior["b"].values).all()
    stats = idata.sample_stats
    for name in ours.stats_dtypes_shapes:
        if name == "warning":
            continue  # PyMC logs the warning stat and drops it unless keep_warning_stat=True
        assert ("lp" if name == "model_logp" else name) in stats, name
    assert "accept" in stats
    # PyMC keeps only the last sub-step's `model_logp` (the others are zeros in `lp`): where the
    # last step is ours or NUTS, `lp` is the model's log-density at each draw. (HamiltonianMC
    # reports its proposal's on a rejection; Metropolis, Slice and DEMetropolisZ report none.)
    last = steps[-1]
    if last is ours or isinstance(last, pm.NUTS):
        lp = stats["lp"].values
        if lp.ndim == 3:  # one column per sub-step that declares model_logp
            lp = lp[..., -1]
        logp = model.compile_logp()
        expected = [
            logp({"a": a, "b": b})
            for a, b in zip(posterior["a"].values[0], posterior["b"].values[0], strict=True)
        ]
        np.testing.assert_allclose(lp[0], expected, rtol=1e-10)
