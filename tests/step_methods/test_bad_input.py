"""Bad input that every step method of the package must refuse the same way."""

import pymc as pm
import pytest

from pymc_sfp import ReplicaExchangeDynamics, SFPStep, StochasticDynamics

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
