"""LDA estimators: collapsed Gibbs, standard and collapsed variational Bayes and
their hybrids (Welling, Teh & Kappen 2008)."""
