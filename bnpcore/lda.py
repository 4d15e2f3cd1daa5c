"""LDA estimators: collapsed Gibbs, standard and collapsed variational Bayes and
their hybrids (Welling, Teh & Kappen 2008)."""
from bnpcore.models.lda import CollapsedGibbs, CollapsedVB, Hybrid, StandardVB
from bnpcore.models.lda_pc import PartiallyCollapsedGibbs

__all__ = ["CollapsedGibbs", "StandardVB", "CollapsedVB", "Hybrid", "PartiallyCollapsedGibbs"]
