"""Bad input that every step method of the package must refuse the same way."""

import numpy as np
import pymc as pm
import pytest
from pymc.exceptions import SamplingError
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiag, QuadPotentialFull

from pymc_sfp import ParallelTempering, ReplicaExchangeDynamics, SFPStep, StochasticDynamics
from pymc_sfp.compile import step_graph
from pymc_sfp.step_methods._common import FiniteValueCheck

STEPS = [SFPStep, StochasticDynamics, ReplicaExchangeDynamics]


@pytest.mark.parametrize("step", STEPS)
def test_discrete_variable_is_named(step):
    with pm.Model():
        pm.Poisson("count", 3.0)
        a = pm.Normal("a", 0, 1)
        pm.Normal("y", a, 1.0, observed=[0.2])
        with pytest.raises(TypeError, match=r"discrete: \['count'\].*CompoundStep"):
            step()


@pytest.mark.parametrize("step", STEPS)
def test_unknown_keyword_is_named(step):
    with pm.Model():
        a = pm.Normal("a", 0, 1)
        pm.Normal("y", a, 1.0, observed=[0.2])
        with pytest.raises(TypeError, match="unexpected keyword arguments: \\['stepsize'\\]"):
            step(stepsize=0.1)


@pytest.mark.parametrize("step", [*STEPS, ParallelTempering])
def test_vars_given_twice_or_unknown_are_named_and_one_name_is_one_variable(step):
    with pm.Model():
        a = pm.Normal("a", 0, 1)
        pm.Normal("y", a, 1.0, observed=[0.2])
        with pytest.raises(ValueError, match=r"vars gives \['a'\] more than once"):
            step([a, "a"])
        with pytest.raises(ValueError, match=r"vars names \['b'\], which are not variables"):
            step(["b"])
        assert [v.name for v in step("a").vars] == ["a"]  # not ["a"] read as a list of letters


@pytest.mark.parametrize("step", STEPS)
def test_initial_point_and_compile_kwargs_of_the_wrong_form_are_named(step):
    with pm.Model():
        a = pm.HalfNormal("a", 1.0)
        pm.Normal("y", a, 1.0, observed=[0.2])
        with pytest.raises(
            ValueError, match=r"initial_point lacks the value variables \['a_log__'\]"
        ):
            step(initial_point={"a": 1.0})
        with pytest.raises(TypeError, match="compile_kwargs must be a dict"):
            step(compile_kwargs=5)


def test_sfp_refuses_minibatch_data():
    """A random log-density: SFPStep sampled it, with a wrong posterior that no seed
    reproduced."""
    data = np.linspace(-1.0, 1.0, 40)
    with pm.Model():
        batch = pm.Minibatch(data, batch_size=5)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=batch, total_size=len(data))
        with pytest.raises(ValueError, match=r"SFPStep does not take pm\.Minibatch data"):
            SFPStep()


def test_vars_by_value_variable_name():
    with pm.Model():
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", 0.0, s, observed=[0.2])
        assert [v.name for v in SFPStep(["s_log__"]).vars] == ["s_log__"]


@pytest.mark.parametrize("step", STEPS)
def test_nothing_to_sample_is_refused(step):
    """A step whose variables have no elements (shape (0,)) has no coordinate to move."""
    with pm.Model():
        empty = pm.Normal("empty", 0, 1, shape=(0,))
        pm.Normal("y", empty.sum(), 1.0, observed=[0.2])
        with pytest.raises(ValueError, match=r"nothing to sample.*\['empty'\].*no elements"):
            step()


def test_empty_variable_next_to_others_is_sampled():
    """A shape-(0,) variable among others is carried along (it has no coordinate to move)."""
    with pm.Model():
        a = pm.Normal("a", 0, 1)
        empty = pm.Normal("empty", 0, 1, shape=(0,))
        pm.Normal("y", a + empty.sum(), 1.0, observed=[0.2])
        for step in (SFPStep(L=10, bounds=(-5, 5)), StochasticDynamics()):
            idata = pm.sample(
                step=step,
                tune=5,
                draws=5,
                chains=1,
                random_seed=1,
                progressbar=False,
                compute_convergence_checks=False,
            )
            assert idata.posterior["empty"].shape == (1, 5, 0)
            assert np.isfinite(idata.posterior["a"].values).all()


DYNAMICS = [StochasticDynamics, ReplicaExchangeDynamics]
SCALING_SHAPES = r"scaling must have shape \(2,\) .* or \(2, 2\) .* got shape"


@pytest.mark.parametrize("step", DYNAMICS)
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_energy_error": -1.0}, ValueError, "max_energy_error must be a number > 0"),
        ({"max_energy_error": 0.0}, ValueError, "max_energy_error must be a number > 0"),
        ({"max_energy_error": np.nan}, ValueError, "max_energy_error must be a number > 0"),
        ({"max_energy_error": "100"}, TypeError, "max_energy_error must be a real number"),
        ({"alpha": "0.9"}, TypeError, "alpha must be a real number"),
        ({"step_size": [0.1]}, TypeError, "step_size must be a real number"),
        ({"target_accept": True}, TypeError, "target_accept must be a real number"),
        ({"n_leapfrog": 2.5}, ValueError, "n_leapfrog must be an integer >= 1"),
        ({"scaling": np.ones(3)}, ValueError, SCALING_SHAPES + r" \(3,\)"),
        ({"scaling": np.eye(3)}, ValueError, SCALING_SHAPES + r" \(3, 3\)"),
        ({"scaling": np.ones((2, 3))}, ValueError, SCALING_SHAPES + r" \(2, 3\)"),
        ({"scaling": 2.0}, ValueError, SCALING_SHAPES + r" \(\)"),
        ({"scaling": [1.0, np.inf]}, ValueError, "scaling must be finite"),
        ({"scaling": ["a", "b"]}, TypeError, "scaling must be a numeric array"),
        ({"potential": np.ones(2)}, TypeError, "potential must be one of PyMC's mass-matrix"),
        (
            {"potential": QuadPotentialDiag(np.ones(1))},
            ValueError,
            r"potential draws momenta of shape \(1,\), but the step has 2 coordinate",
        ),
        (
            {"potential": QuadPotentialFull(np.eye(3))},
            ValueError,
            r"potential draws momenta of shape \(3,\), but the step has 2 coordinate",
        ),
    ],
)
def test_bad_dynamics_arguments(step, kwargs, error, match):
    with pm.Model():
        a = pm.Normal("a", 0, 1, shape=2)
        pm.Normal("y", a.sum(), 1.0, observed=[0.2])
        with pytest.raises(error, match=match):
            step(**kwargs)


def test_infinite_max_energy_error_is_accepted():
    """``inf`` leaves only non-finite energy errors divergent (a deliberate choice)."""
    with pm.Model():
        pm.Normal("a", 0, 1)
        assert StochasticDynamics(max_energy_error=np.inf).max_energy_error == np.inf


def test_a_draw_that_overflows_its_variables_scale_is_refused_by_name():
    """The check StochasticDynamics and ParallelTempering make on every draw: log s = 800 is
    s = inf on its own scale, where PyMC's trace would record inf; log s = 1 passes, and so
    does everything where no variable is transformed."""
    with pm.Model() as model:
        pm.Normal("mu", 0.0, 1.0)
        pm.HalfFlat("s")
    graph = step_graph(model, model.value_vars)
    check = FiniteValueCheck(graph, None, "StochasticDynamics")
    check(np.array([0.0, 1.0]))
    with pytest.raises(SamplingError, match=r"StochasticDynamics: .* improper along s\b"):
        check(np.array([0.0, 800.0]))
    with pm.Model() as untransformed:
        pm.Flat("x")
    graph = step_graph(untransformed, untransformed.value_vars)
    FiniteValueCheck(graph, None, "StochasticDynamics")(np.array([1e300]))
