"""Helpers shared by the statistical tests of the step methods."""

import arviz as az
import pymc as pm

import pymc_sfp.compile as compile_module


def sample(model, step, **kwargs):
    options = dict(
        draws=2000,
        tune=1000,
        chains=2,
        cores=1,
        random_seed=7,
        progressbar=False,
        compute_convergence_checks=False,
    )
    options.update(kwargs)
    with model:
        return pm.sample(step=step(), **options)


def assert_moments(idata, name, means, second_moments):
    """Mean and raw second moments of the first ``len(means)`` elements within 4 MCSE."""
    values = idata.posterior[name]
    flat = values.stack(sample=("chain", "draw"))
    dim = next(d for d in values.dims if d not in ("chain", "draw"))
    n = len(means)
    for i in range(n):
        xi = values.isel({dim: i})
        mcse = float(az.mcse(xi.rename("x").to_dataset()).to_array().squeeze())
        assert abs(float(xi.mean()) - means[i]) < 4 * mcse, (name, i)
        for j in range(i, n):
            prod = (xi * values.isel({dim: j})).rename("xy")
            mcse = float(az.mcse(prod.to_dataset()).to_array().squeeze())
            assert abs(float(prod.mean()) - second_moments[i, j]) < 4 * mcse, (name, i, j)
    assert flat.sizes["sample"] > 0


def counted_compilations(monkeypatch) -> list:
    """The graphs compiled with their rewrites from now on, not copied from a template
    (``pymc_sfp.compile._Template``)."""
    compiled = []
    afresh = compile_module._compiled_afresh

    def counted(inputs, outputs, kwargs):
        compiled.append(outputs)
        return afresh(inputs, outputs, kwargs)

    monkeypatch.setattr(compile_module, "_compiled_afresh", counted)
    return compiled
