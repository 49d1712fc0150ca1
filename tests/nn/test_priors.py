"""Tests for pymc_sfp.nn.priors: the prior densities of every weight prior against scipy.stats at
a random point, and the centred form of the hierarchical priors.

One model holds a network per prior, compiled once (module-scoped fixture), in PyTensor's Python
VM: these tests check graphs, not backends.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy import stats

from pymc_sfp.nn import PRIORS, mlp

RNG = np.random.default_rng(20260101)
X6 = RNG.normal(size=(6, 2))
X9 = RNG.normal(size=(9, 2))
FAST = {"mode": "FAST_COMPILE"}
# Prior scale of each network in the prior-density model.
PRIOR_SCALES = {"uniform": 1.0, "gaussian": 0.7, "group": 0.5, "ard": 1.3}


@pytest.fixture(scope="module")
def prior_logps(random_point):
    """Prior log-density terms of four tiny 2-2-1 networks, one per prior, at a random point."""
    with pm.Model() as model:
        for prior, scale in PRIOR_SCALES.items():
            mlp(X6, (2, 2, 1), prior=prior, prior_scale=scale, name=prior)
    point, values = random_point(model, np.random.default_rng(1))
    terms = model.compile_logp(vars=model.free_RVs, jacobian=False, sum=False, **FAST)(values)
    logps = {rv.name: np.sum(term) for rv, term in zip(model.free_RVs, terms, strict=True)}
    return point, logps


@pytest.mark.parametrize("prior", PRIORS)
def test_prior_logp_matches_scipy(prior_logps, prior):
    point, logps = prior_logps
    scale = PRIOR_SCALES[prior]
    names = [n for n in logps if n.startswith(f"{prior}_")]
    if prior == "uniform":
        expected = sum(stats.uniform(-scale, 2 * scale).logpdf(point[n]).sum() for n in names)
        assert len(names) == 4
    elif prior == "gaussian":
        expected = sum(stats.norm(0, scale).logpdf(point[n]).sum() for n in names)
        assert len(names) == 4
    else:
        sds = [n for n in names if "_sd_" in n]
        zs = [n for n in names if n.endswith("_z")]
        assert len(sds) == 3 and len(zs) == 4 and len(names) == 7
        assert point[f"{prior}_sd_w0"].shape == ((2,) if prior == "ard" else ())
        expected = sum(stats.halfnorm(scale=scale).logpdf(point[n]).sum() for n in sds) + sum(
            stats.norm().logpdf(point[n]).sum() for n in zs
        )
    assert sum(logps[n] for n in names) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("prior", ["group", "ard"])
def test_centred_hierarchical_prior_samples_the_weights_themselves(prior, forward, random_point):
    with pm.Model() as model:
        net = mlp(X6, (2, 3, 1), prior=prior, prior_scale=0.8, centred=True)
    free = {rv.name for rv in model.free_RVs}
    params = {f"net_{kind}{layer}" for layer in range(2) for kind in "wb"}
    assert free == params | {"net_sd_w0", "net_sd_b0", "net_sd_out"}
    assert not model.deterministics
    assert all(w is model[w.name] for w in (*net.weights, *net.biases))
    point, values = random_point(model, np.random.default_rng(2))
    logp = model.compile_logp(jacobian=False, **FAST)(values)
    sd_w0 = np.atleast_1d(point["net_sd_w0"])[:, None]  # ARD: one scale per input row
    expected = (
        sum(stats.halfnorm(scale=0.8).logpdf(point[f"net_sd_{g}"]).sum() for g in ("w0", "b0"))
        + stats.halfnorm(scale=0.8).logpdf(point["net_sd_out"])
        + stats.norm(0, sd_w0).logpdf(point["net_w0"]).sum()
        + stats.norm(0, point["net_sd_b0"]).logpdf(point["net_b0"]).sum()
        + stats.norm(0, point["net_sd_out"]).logpdf(point["net_w1"]).sum()
        + stats.norm(0, point["net_sd_out"]).logpdf(point["net_b1"]).sum()
    )
    assert logp == pytest.approx(expected, rel=1e-12)
    posterior = xr.Dataset(
        {
            name: (("chain", "draw", *(model.named_vars_to_dims.get(name) or ())), v[None, None])
            for name, v in point.items()
        }
    )
    weights = [point["net_w0"], point["net_w1"]]
    biases = [point["net_b0"], point["net_b1"]]
    np.testing.assert_allclose(
        net.predict(posterior, X9).values[0, 0], forward(X9, weights, biases), rtol=1e-12
    )
