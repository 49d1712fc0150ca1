"""Learning modes built on SFP's analytic marginals (Berrones 2009, §3).

* **SFP-S** (Eq. 16–17), predicting with the average of ``F(x, w)`` over the sampled weights,
  needs nothing new: ``pm.sample(step=SFPStep(...))`` and :meth:`pymc_sfp.nn.Network.predict_mean`.
* **SFP-MLE** (Eq. 18–19, :mod:`~pymc_sfp.learning.mle`): :func:`sfp_mle` takes the mode
  ``w_o`` and the mean ``⟨w⟩`` of each weight's marginal (:func:`pymc_sfp.sfp_marginals`) and
  returns an :class:`MLEPredictor`, the first-order expansion
  ``F(x, w_o) + ∇_w F(x, w_o) · (⟨w⟩ − w_o)`` evaluated exactly in NumPy.
* **SFP-I** (Eq. 20–22): :func:`marginal_prior` (:mod:`~pymc_sfp.learning.tabulated_prior`)
  turns learned marginals into the prior ``Π_i p(w_i | A)`` of a new model (Eq. 21);
  :class:`IncrementalSFP` (:mod:`~pymc_sfp.learning.incremental`) learns from data that arrive
  one at a time, one SFP sweep per datum over the whole accumulated sample (Eq. 22).
"""

from pymc_sfp.learning.incremental import IncrementalSFP
from pymc_sfp.learning.mle import MLEPredictor, sfp_mle
from pymc_sfp.learning.tabulated_prior import (
    interpolated_log_density,
    log_density_table,
    marginal_prior,
)

__all__ = [
    "IncrementalSFP",
    "MLEPredictor",
    "interpolated_log_density",
    "log_density_table",
    "marginal_prior",
    "sfp_mle",
]
