"""``SFPKernel``: SFP sweeps as the mutation kernel of PyMC's tempered SMC (``pm.sample_smc``).

After each reweighting and resampling stage of ``pm.sample_smc``, every particle makes
``n_sweeps`` SFP sweeps (Berrones 2009) on the stage's tempered posterior
``p(x) p(y | x)^β``: for each coordinate in turn, the log-density along the coordinate on an
``L``-point grid over the box, the conditional CDF from the stationary Fokker–Planck equation
(Eq. 4, :func:`pymc_sfp.core.fokker_planck.quadrature_cdfs`), a draw from it (mixed with a
uniform on the box, the defensive proposal of :mod:`pymc_sfp.core.sfp`) and a Metropolis test.
The grid of one coordinate of *all* particles is one compiled call of the terms that read the
coordinate (particles × ``L`` values of each, :func:`pymc_sfp.compile.compile_batched_local_lines`;
the whole log-density at every particle and value where the model has no such split,
:func:`pymc_sfp.compile.compile_batched_prior_likelihood`), and so are the proposals' tests; the
particles' conditionals and draws are computed together, as arrays with a row per particle
(:func:`pymc_sfp.core.sfp.propose_on_grid`).

It needs no gradient and no tuned scale, so it suits boxed, non-smooth or discontinuous targets
and conditionals with several modes, where a random walk or the independent proposal of PyMC's
kernels struggles.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pymc.model import modelcontext
from pymc.smc.kernels import SMC_KERNEL

from pymc_sfp._validation import check_int_at_least, check_positive_finite
from pymc_sfp.compile import (
    compile_batched_local_lines,
    compile_batched_prior_likelihood,
    step_graph,
)
from pymc_sfp.core.fokker_planck import quadrature_cdfs
from pymc_sfp.core.sfp import draw_uniforms, propose_on_grid

__all__ = ["SFPKernel"]


class SFPKernel(SMC_KERNEL):
    """SFP mutation kernel for ``pm.sample_smc(kernel=pymc_sfp.SFPKernel, ...)``.

    Parameters
    ----------
    L : int, default 50
        Grid points per coordinate (Berrones' ``L``); each stage costs, per particle and for
        ``N`` coordinates, ``n_sweeps · N · L`` evaluations of the terms that read a coordinate
        (of the whole log-density where the model has no such split: see ``line_note``) and
        ``n_sweeps · N`` of the whole log-density.
    n_sweeps : int, default 1
        SFP sweeps per stage.
    box_margin : float, default 0.5
        Each coordinate's box is the range of the particles at the stage, extended on each side
        by ``box_margin`` times that range (PyMC's unconstrained scale); finite and > 0.
    **kwargs
        The arguments of :class:`pymc.smc.kernels.SMC_KERNEL` (``draws``, ``threshold``, …),
        which ``pm.sample_smc`` passes.

    Notes
    -----
    The Metropolis test makes each sweep exact for the stage's tempered posterior *restricted
    to the box*: the box follows the population from stage to stage, and mass beyond
    ``box_margin`` times the population's range on either side is not proposed at that stage.
    Non-finite log-densities (hard constraints) are proposed with zero probability apart from
    the defensive uniform, and rejected; they are counted in ``n_nonfinite`` (on the grid,
    those of the terms that read the coordinate).

    Along a coordinate, only the terms of the prior and of the likelihood that read it are
    evaluated (:func:`pymc_sfp.compile.compile_batched_local_lines`), each particle's line
    known up to a constant, which neither its conditional nor the Metropolis ratio sees: a
    sweep of a model whose terms each read few coordinates costs ``O(N)`` per particle, not
    ``O(N²)``, and a coordinate whose terms read no other coordinate is evaluated once for all
    particles. The lines are checked against the whole log-density when the kernel is built;
    ``line_note`` says what they evaluate, or that the whole log-density is evaluated at every
    point (a model of one coordinate or with a discrete variable, a model whose initial point
    is outside the support, or a disagreement, which is logged).
    """

    stats_dtypes_shapes: dict[str, tuple[type, list]] = {
        "log_marginal_likelihood": (float, []),
        "beta": (float, []),
        "mean_accept_rate": (float, []),
        "n_nonfinite": (int, []),
    }

    def __init__(
        self, *args: Any, L: int = 50, n_sweeps: int = 1, box_margin: float = 0.5, **kwargs: Any
    ):
        self.L = check_int_at_least(L, 3, "L")
        self.n_sweeps = check_int_at_least(n_sweeps, 1, "n_sweeps")
        self.box_margin = check_positive_finite(box_margin, "box_margin")
        super().__init__(*args, **kwargs)
        model = modelcontext(kwargs.get("model"))
        graph = step_graph(model, model.value_vars)
        self._prior_likelihood = compile_batched_prior_likelihood(
            graph, kwargs.get("compile_kwargs")
        )
        local = compile_batched_local_lines(
            graph, self._prior_likelihood, kwargs.get("compile_kwargs")
        )
        self._local_lines = None if local is None else local[0]
        #: What the grid of a coordinate evaluates (the local line's terms, or why not).
        self.line_note = "the whole log-density at every point" if local is None else local[1]
        self._unit = np.linspace(0.0, 1.0, self.L)
        self.accept_rate = np.nan
        self.n_nonfinite = 0

    def _boxes(self) -> tuple[np.ndarray, np.ndarray]:
        low = self.tempered_posterior.min(axis=0)
        high = self.tempered_posterior.max(axis=0)
        # A coordinate the population has collapsed on still gets a box of width 2.
        width = np.where(high > low, high - low, 1.0 / self.box_margin)
        return low - self.box_margin * width, high + self.box_margin * width

    def _coordinate_proposals(
        self, i: int, lower: float, upper: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Proposals for coordinate ``i`` of every particle and ``log q(current) − log q(new)``."""
        x = self.tempered_posterior
        n = len(x)
        nodes = lower + self._unit * (upper - lower)
        if self._local_lines is not None:
            prior, likelihood = self._local_lines(x, i, nodes)
        else:
            rows = np.repeat(x, self.L, axis=0)
            rows[:, i] = np.tile(nodes, n)
            prior, likelihood = self._prior_likelihood(rows)
        with np.errstate(invalid="ignore"):
            tempered = (prior + self.beta * likelihood).reshape(n, self.L)
        self.n_nonfinite += int(np.count_nonzero(~np.isfinite(tempered)))
        proposals = x[:, i].copy()
        log_q_ratio = np.full(n, -np.inf)  # no conditional: the particle stays
        uniforms = draw_uniforms(self.rng, n)
        # All particles' conditionals at once: one grid, a row each.
        cdf, slopes, valid = quadrature_cdfs(nodes, tempered)
        proposals[valid], log_q_ratio[valid] = propose_on_grid(
            nodes, cdf, slopes, lower, upper, x[valid, i], uniforms[valid]
        )
        return proposals, log_q_ratio

    def mutate(self) -> None:
        """``n_sweeps`` SFP sweeps of every particle on the current tempered posterior."""
        lower, upper = self._boxes()
        n, d = self.tempered_posterior.shape
        accepted = 0
        for _ in range(self.n_sweeps):
            for i in range(d):
                proposals, log_q_ratio = self._coordinate_proposals(i, lower[i], upper[i])
                candidates = self.tempered_posterior.copy()
                candidates[:, i] = proposals
                prior, likelihood = self._prior_likelihood(candidates)
                with np.errstate(invalid="ignore"):
                    candidate_logp = prior + self.beta * likelihood
                    log_ratio = candidate_logp - self.tempered_posterior_logp + log_q_ratio
                # NaN ratios (non-finite candidates) compare False: rejected.
                accept = np.log(self.rng.random(n)) < log_ratio
                self.tempered_posterior[accept] = candidates[accept]
                self.prior_logp[accept] = prior[accept]
                self.likelihood_logp[accept] = likelihood[accept]
                self.tempered_posterior_logp[accept] = candidate_logp[accept]
                accepted += int(accept.sum())
        self.accept_rate = accepted / (self.n_sweeps * d * n)

    def sample_stats(self) -> dict[str, Any]:
        return {
            "log_marginal_likelihood": self.log_marginal_likelihood if self.beta == 1 else np.nan,
            "beta": self.beta,
            "mean_accept_rate": self.accept_rate,
            "n_nonfinite": self.n_nonfinite,
        }

    def sample_settings(self) -> dict[str, Any]:
        return {
            "_n_draws": self.draws,
            "threshold": self.threshold,
            "L": self.L,
            "n_sweeps": self.n_sweeps,
            "box_margin": self.box_margin,
        }
