"""Models built with ``floatX="float32"``: every step samples them, returns float32 draws as
PyMC's steps do, and targets the posterior (means within Monte Carlo error)."""

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytest
from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt
from pytensor.compile.maker import FunctionMaker

from pymc_sfp import ParallelTempering, ReplicaExchangeDynamics, SFPStep, StochasticDynamics

Y = np.array([0.9, 1.6, 0.4, 1.3, 1.1])
PRIOR_SD = 3.0
# mu ~ N(0, 3²), y_i ~ N(mu, 1): a Gaussian posterior; w ~ U(-1, 1) is not observed.
POSTERIOR_MEAN_MU = Y.sum() / (len(Y) + PRIOR_SD**-2)

STEPS = {
    "SFPStep": lambda: SFPStep(L=30),
    "StochasticDynamics": lambda: StochasticDynamics(n_leapfrog=5),
    "ReplicaExchangeDynamics": lambda: ReplicaExchangeDynamics(n_temperatures=2, n_leapfrog=5),
    "ParallelTempering": lambda: ParallelTempering(n_chains=3, adapt_n_chains=False),
    "ParallelTempering, SFPStep explorer": lambda: ParallelTempering(
        n_chains=3, adapt_n_chains=False, explorer=SFPStep, explorer_kwargs={"L": 30}
    ),
    "ParallelTempering, adapted dense mass": lambda: ParallelTempering(
        n_chains=3,
        adapt_n_chains=False,
        explorer_kwargs={"potential": QuadPotentialFullAdapt(2, np.zeros(2))},
    ),
}


def sample_float32_model(make_step, **kwargs):
    """mu ~ N(0, PRIOR_SD²), w ~ U(-1, 1), y ~ N(mu, 1) observed Y, sampled by ``make_step()``
    in one chain (build it under ``floatX="float32"``)."""
    with pm.Model():
        mu = pm.Normal("mu", 0.0, PRIOR_SD)
        pm.Uniform("w", -1.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=Y)
        return pm.sample(
            step=make_step(),
            chains=1,
            progressbar=False,
            compute_convergence_checks=False,
            **kwargs,
        )


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.filterwarnings("ignore:QuadPotentialFullAdapt is an experimental feature")
def test_float32_model(step, caplog):
    with pytensor.config.change_flags(floatX="float32"):
        idata = sample_float32_model(STEPS[step], tune=300, draws=600, random_seed=17)
    posterior = idata.posterior
    assert posterior["mu"].dtype == np.float32 and posterior["w"].dtype == np.float32
    for name, mean in (("mu", POSTERIOR_MEAN_MU), ("w", 0.0)):
        draws = posterior[name]
        mcse = float(az.mcse(draws.to_dataset()).to_array().squeeze())
        assert abs(float(draws.mean()) - mean) < 4 * mcse, name
    assert np.isfinite(idata.sample_stats["lp"].values).all()
    # SFP's local line is checked to float32's precision, also on the tempered log-density
    # (float64 through its β): float32 rounding is no reason to evaluate lines in full.
    assert "lines evaluated in full" not in caplog.text


@pytest.mark.parametrize("correct", [True, False])
def test_float32_rounding_does_not_freeze_the_dynamics(correct):
    """Far from the posterior a float32 log-density of -6e7 nats is known to ±4 nats: energy
    errors no step size reduces. Tuned on them the step size fell to 1e-9 and the chain froze
    at mu ≈ 11 (correct) or 0.4 (uncorrected), with its acceptance looking healthy; the exact
    posterior is N(49.996, 0.0045²)."""
    y = np.random.default_rng(0).normal(50.0, 1.0, size=50_000)
    posterior_mean = y.sum() / (len(y) + 100.0**-2)
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model():
            mu = pm.Normal("mu", 0.0, 100.0)
            pm.Normal("y", mu, 1.0, observed=y)
            idata = pm.sample(
                step=StochasticDynamics(correct=correct),
                tune=500,
                draws=300,
                chains=1,
                random_seed=1,
                progressbar=False,
                compute_convergence_checks=False,
            )
    draws = idata.posterior["mu"]
    mcse = float(az.mcse(draws.to_dataset()).to_array().squeeze())
    assert abs(float(draws.mean()) - posterior_mean) < 4 * mcse


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.filterwarnings("ignore:QuadPotentialFullAdapt is an experimental feature")
@pytest.mark.filterwarnings("ignore::pymc_sfp.RoundTripWarning")
def test_steps_build_under_warn_float64_raise(step):
    """``warn_float64="raise"`` guards a float32 model against float64 creeping in; the steps'
    own graphs are float64 by design (the sampling coordinates, the casts of the model's
    outputs, tempering's β, the mass matrix), and building any step raised. The flag is set
    aside only while the package builds its graphs: the model samples, its draws are float32,
    and a float64 variable made afterwards still raises."""
    with pytensor.config.change_flags(floatX="float32", warn_float64="raise"):
        idata = sample_float32_model(STEPS[step], tune=10, draws=10, random_seed=3)
        assert pytensor.config.warn_float64 == "raise"
        with pytest.raises(Exception, match="float64"):
            pytensor.tensor.vector("user_vector", dtype="float64")
    assert idata.posterior["mu"].dtype == np.float32
    assert np.isfinite(idata.posterior["mu"].values).all()


@pytest.mark.parametrize("step", ["SFPStep", "StochasticDynamics", "ParallelTempering"])
def test_a_step_travels_to_a_spawned_process_without_caching_float32_code(step, monkeypatch):
    """With ``mp_ctx="spawn"`` or ``"forkserver"`` ``pm.sample`` pickles each step, and its
    compiled functions are compiled again where it is unpickled. They must be compiled there as
    they were first: a float32 model's graphs that narrow float64 to float32 out of PyTensor's
    disk cache, whose code for them would later be loaded for a float64 graph of the same
    operations (float64 sums in float32). The travelled step samples."""
    made = []
    create = FunctionMaker.create

    def recording(maker, *args, **kwargs):
        graph = pytensor.dprint(maker.fgraph, file="str")
        made.append((graph, pytensor.config.numba__cache))
        return create(maker, *args, **kwargs)

    monkeypatch.setattr(FunctionMaker, "create", recording)
    with pytensor.config.change_flags(floatX="float32", numba__cache=True):
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, PRIOR_SD)
            pm.Normal("y", mu, 1.0, observed=Y)
            original = STEPS[step]()
        first = dict(made)
        made.clear()
        travelled = cloudpickle.loads(cloudpickle.dumps(original))
        monkeypatch.undo()
        with model:
            point, _ = travelled.step(model.initial_point())
    assert made and all(cached == first[graph] for graph, cached in made)
    assert not all(cached for _, cached in made)  # some narrow float64 to float32
    assert np.isfinite(point["mu"])
