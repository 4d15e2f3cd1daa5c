"""Mixtures of multinomials with DP and NGGP priors: truncation-free SVI, its
truncated baseline, streaming ADF, EP and the collapsed Gibbs sampler."""
from bnpcore.models.dp_svi import StochasticVB, TruncationFreeSVI  # noqa: F401  ([TF])
from bnpcore.models.nrm import ADF, EP, CollapsedGibbs, grid_search  # noqa: F401  ([NRM])
