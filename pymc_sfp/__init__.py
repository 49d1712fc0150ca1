"""pymc_sfp: classic Bayesian-learning algorithms for neural networks, as PyMC extensions.

Public API
----------
SFPStep
    Stationary Fokker–Planck sampling (Berrones 2009) as a ``pm.sample`` step method.
StochasticDynamics
    Neal's (1993) persistent-momentum dynamics, uncorrected or exact (generalised HMC).
ReplicaExchangeDynamics
    The same dynamics on a ladder of tempered likelihoods with replica exchange, for
    multimodal posteriors.
ParallelTempering, tempering_log_evidence, LogEvidence, RoundTripWarning
    Non-reversible parallel tempering from the prior to the posterior (Syed et al. 2022) with
    any step method as the explorer of each tempered replica, an adaptive schedule and number
    of chains; the stepping-stone log evidence of its run. Numerics in ``core.tempering``.
sfp_marginals
    Rao–Blackwellised marginals (Berrones Eq. 7) from the DataTree an ``SFPStep`` run returns.
simulation_based_calibration
    Simulation-based calibration (Talts et al. 2018) of a sampler on a model: ranks of prior
    draws among posterior draws and a chi-square test of their uniformity; more in ``sbc``.
IncrementalSFP, sfp_mle, marginal_prior
    SFP learning modes (Berrones §3): incremental learning (SFP-I, Eq. 20–22), the SFP-MLE
    predictor (Eq. 18) and marginals turned into a prior (Eq. 21); also in ``pymc_sfp.learning``.
fit_tap, TAP, tap_model, TAPApproximation
    TAP mean-field Bayes learning (Opper & Winther 1996) and adaptive TAP / EP for a Gaussian
    prior vector and a noisy-perceptron (``nn.NoisyPerceptron``), probit, logistic or Gaussian
    likelihood through ``X @ w``, as a PyMC approximation: from a model, from arrays, or as
    ``pm.fit(method=TAP())``; the numerics are in ``pymc_sfp.core.tap``.
MixtureADVI, MixtureApproximation
    A mixture of diagonal Gaussians (nn4post) as a variational family for ``pm.fit``: the
    stratified ELBO gradient for the weights, component growth and pruning.
sample_sequential, SequentialFilter, DegenerateWeightsError
    Sequential Monte Carlo (SIR, SIPR, resample-move) and extended Kalman filter training of a
    network on a stream of data (de Freitas et al. 1998): filtered weights, one-step-ahead
    predictions, log evidence; the numerics are in ``pymc_sfp.core.particles``.
SFPKernel
    SFP sweeps as the mutation kernel of ``pm.sample_smc`` (tempered SMC).
nn
    Multilayer perceptrons as PyTensor graphs inside a model: priors, likelihoods, prediction.
datasets
    The papers' data sets (downloaded, cached and checksummed) and synthetic generators.
"""

from pymc_sfp import datasets, learning, nn, sbc, smc
from pymc_sfp.learning import IncrementalSFP, marginal_prior, sfp_mle
from pymc_sfp.marginals import Marginal, sfp_marginals
from pymc_sfp.sbc import SBCResult, simulation_based_calibration
from pymc_sfp.smc import DegenerateWeightsError, SequentialFilter, SFPKernel, sample_sequential
from pymc_sfp.step_methods import (
    LogEvidence,
    ParallelTempering,
    ReplicaExchangeDynamics,
    RoundTripWarning,
    SFPStep,
    StochasticDynamics,
    tempering_log_evidence,
)
from pymc_sfp.variational import (
    TAP,
    MixtureADVI,
    MixtureApproximation,
    TAPApproximation,
    fit_tap,
    tap_model,
)

__all__ = [
    "TAP",
    "DegenerateWeightsError",
    "IncrementalSFP",
    "LogEvidence",
    "Marginal",
    "MixtureADVI",
    "MixtureApproximation",
    "ParallelTempering",
    "ReplicaExchangeDynamics",
    "RoundTripWarning",
    "SBCResult",
    "SFPKernel",
    "SFPStep",
    "SequentialFilter",
    "StochasticDynamics",
    "TAPApproximation",
    "datasets",
    "fit_tap",
    "learning",
    "marginal_prior",
    "nn",
    "sample_sequential",
    "sbc",
    "sfp_marginals",
    "sfp_mle",
    "simulation_based_calibration",
    "smc",
    "tap_model",
    "tempering_log_evidence",
]
__version__ = "0.1.0.dev0"
