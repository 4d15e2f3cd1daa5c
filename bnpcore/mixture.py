"""Mixtures of multinomials with DP and NGGP priors: truncation-free SVI, its
truncated baseline, streaming ADF, EP and the collapsed Gibbs sampler."""

from bnpcore.models.nrm import ADF, EP, CollapsedGibbs, grid_search  # noqa: E402,F401  ([NRM] 002)
