"""Sequential training of networks: SIR, SIPR and the extended Kalman filter.

sample_sequential
    Train a model's network on a stream of data, one observation at a time (de Freitas et al.
    1998), and return the filtered weights, one-step-ahead predictions and the final particle
    cloud as a DataTree (:mod:`pymc_sfp.smc.sequential`).
SequentialFilter
    The same filter fed incrementally: :meth:`~SequentialFilter.update` with one observation.
SFPKernel
    SFP sweeps as the mutation kernel of PyMC's tempered SMC, ``pm.sample_smc(kernel=...)``
    (:mod:`pymc_sfp.smc.sfp_kernel`).

The numerics (resampling, effective sample size, EKF update) are in
:mod:`pymc_sfp.core.particles`.
"""

from pymc_sfp.core.particles import DegenerateWeightsError
from pymc_sfp.smc.sequential import SequentialFilter, StepResult, sample_sequential
from pymc_sfp.smc.sfp_kernel import SFPKernel

__all__ = [
    "DegenerateWeightsError",
    "SFPKernel",
    "SequentialFilter",
    "StepResult",
    "sample_sequential",
]
