"""PyMC step methods of pymc_sfp."""

from pymc_sfp.step_methods.dynamics import StochasticDynamics
from pymc_sfp.step_methods.replica import ReplicaExchangeDynamics
from pymc_sfp.step_methods.sfp import SFPStep

__all__ = ["ReplicaExchangeDynamics", "SFPStep", "StochasticDynamics"]
