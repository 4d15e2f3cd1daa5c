"""Collapsed inference in discrete Bayesian networks with Dirichlet priors on the
conditional probability tables (Welling, Teh & Kappen 2008, section 6).

Declare the network with :class:`Node` and :class:`Network`, then fit one of

* :class:`StandardVB`: standard VB in collapsed form, belief propagation on the
  junction tree of the hidden nodes per distinct observed configuration;
* :class:`CollapsedGibbs`: collapsed Gibbs sampling, all hidden nodes of a
  data case drawn jointly by forward filtering / backward sampling;
* :class:`Hybrid`: configurations seen at most ``threshold`` times sampled, the
  others by belief propagation.

to a table of observed configurations and their counts.
"""
from bnpcore.bayesnet.inference import CollapsedGibbs, Hybrid, StandardVB
from bnpcore.bayesnet.network import Network, Node

__all__ = ["Node", "Network", "StandardVB", "CollapsedGibbs", "Hybrid"]
