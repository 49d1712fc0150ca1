"""PyMC step methods of pymc_sfp."""

from pymc_sfp.step_methods.dynamics import StochasticDynamics
from pymc_sfp.step_methods.replica import ReplicaExchangeDynamics
from pymc_sfp.step_methods.sfp import SFPStep
from pymc_sfp.step_methods.tempering import (
    LogEvidence,
    ParallelTempering,
    RoundTripWarning,
    tempering_log_evidence,
)

__all__ = [
    "LogEvidence",
    "ParallelTempering",
    "ReplicaExchangeDynamics",
    "RoundTripWarning",
    "SFPStep",
    "StochasticDynamics",
    "tempering_log_evidence",
]
