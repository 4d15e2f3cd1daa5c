"""Latent Dirichlet allocation by the exact data-parallel partially collapsed
Gibbs sampler of Magnusson, Jonsson, Villani & Broman (2018).

The state keeps the topics Phi explicitly and integrates the document
proportions out; one sweep is three kernel calls of
``bnpcore.kernels._pclda`` (Phi | z per topic, alias tables per word, z | Phi
per document), all parallel. The estimator shares fit / transform / score and
the fitted attributes of ``bnpcore.lda.CollapsedGibbs``.
"""
import numpy as np

from bnpcore._validation import check_int, effective_n_threads
from bnpcore.kernels import _lda, _pclda
from bnpcore.models.lda import _ALL_SAMPLED, _ATTRS, _DOC, _LDA, CollapsedGibbs, _State

__all__ = ["PartiallyCollapsedGibbs"]


class PartiallyCollapsedState(_State):
    """Topics z, counts n_jk, n_kw, n_k, and the keyed streams' key and sweep
    number; Phi and the alias tables are rebuilt from the counts every sweep."""

    def __init__(self, corpus, n_topics, alpha, eta, rng, n_threads, optimize=None):
        super().__init__(corpus, alpha, eta, optimize)
        K, c = n_topics, corpus
        self.n_threads = n_threads
        self.z = rng.integers(0, K, size=c.n_tokens, dtype=np.int32)
        self.key = int(rng.integers(0, 2 ** 63))
        self.n_sweeps = 0
        self.ndk = np.zeros((c.n_docs, K), dtype=np.int32)
        self.nwk = np.zeros((c.n_words, K), dtype=np.int32)
        self.nk = np.zeros(K, dtype=np.int64)
        _lda.count_samples(c.indptr, c.indices, c.counts, _ALL_SAMPLED, self.z, self.ndk, self.nwk, self.nk)
        self.restore(corpus)

    _transient = _State._transient + ("tok_ptr", "z_prev", "phi", "prob", "alias", "mass")

    def restore(self, corpus):
        super().restore(corpus)
        W, K = corpus.n_words, self.n_components
        self.tok_ptr = np.concatenate([[0], np.cumsum(corpus.doc_lengths, dtype=np.int64)])
        self.z_prev = np.empty_like(self.z)
        self.phi = np.empty((W, K))
        self.prob = np.empty((W, K))
        self.alias = np.empty((W, K), dtype=np.int32)
        self.mass = np.empty(W)

    def sweep(self):
        c, T = self.corpus, self.n_threads
        _pclda.sample_phi(self.nwk, self.eta, self.key, self.n_sweeps, self.phi, T)
        _pclda.build_alias(self.phi, self.alpha, self.prob, self.alias, self.mass, T)
        _pclda.z_step(c.indptr, c.indices, c.counts, self.tok_ptr, self.phi, self.prob, self.alias, self.mass,
                      self.key, self.n_sweeps, self.z, self.z_prev, self.ndk, self.nwk, self.nk, T)
        self.n_sweeps += 1
        self.optimize_priors()
        return {}

    def counts(self):
        return self.ndk, self.nwk


class PartiallyCollapsedGibbs(_LDA):
    __doc__ = """Exact data-parallel partially collapsed Gibbs sampling for LDA
    (Magnusson, Jonsson, Villani & Broman 2018).

    The sampler keeps the topics Phi explicitly and integrates the document
    proportions theta out. Each sweep alternates two exact full conditionals
    of the joint posterior p(z, Phi | w):

    * Phi | z: ``phi_k ~ Dirichlet(eta + n_k.)`` for every topic, topics in
      parallel;
    * z | Phi: given Phi, the documents are conditionally independent, so
      each runs an ordinary Gibbs pass over its tokens with
      ``p(z_i = k | rest) ∝ phi_{k,w_i} (n_jk^{-i} + alpha_k)``,
      documents in parallel. The draw splits the weight into
      ``phi_kw n_jk`` (a sum over the topics present in the document) and
      ``alpha_k phi_kw``, drawn in O(1) from a Walker alias table per word
      built once per sweep.

    Why it is exact: every step draws from a full conditional of p(z, Phi | w)
    (theta integrated out in both), so the chain leaves that posterior
    invariant whatever the number of threads -- unlike the approximate
    distributed collapsed samplers (AD-LDA), which sample from stale counts.
    The alias tables are exact because Phi does not change during the z-step.
    Phi is drawn dense, W x K gamma variates per sweep whatever the corpus
    size (those of zero counts with eta < 1 by Ahrens & Dieter's GS sampler);
    after the z-step the counts n_kw move by the tokens whose topic changed.

    Every draw comes from a keyed random stream: topic k of sweep t from
    (seed, 2t + 1, k), document j from (seed, 2t, j), so a fit is
    bit-identical for any ``n_threads`` with the same ``random_state``.
    Topics start uniformly at random; after ``burn_in`` sweeps the samples of
    the counts are averaged into ``components_``, ``doc_topic_`` and the
    held-out score, as for ``CollapsedGibbs``.

    When to use it: a sweep costs, per token, the number of topics in its
    document, plus the W x K Phi step; it pays off on corpora with many more
    tokens than W x K entries, on several cores. On KOS (W x K = 0.8 times the
    tokens at K = 50) sequential ``CollapsedGibbs`` is faster and mixes
    faster per sweep (it also integrates Phi out): docs/choosing.md.
""" + _DOC + """
    max_iter : int, default 300
        Number of sweeps.
    burn_in : int, default 10
        Sweeps before samples are averaged (with ``max_iter <= burn_in`` the
        estimates are the final sample).
    n_threads : int or None, default None
        Threads of the three parallel steps (None: OMP_NUM_THREADS or all
        cpus; -1: all cpus). The result does not depend on it.
""" + _ATTRS + """
    References
    ----------
    M. Magnusson, L. Jonsson, M. Villani and D. Broman (2018). Sparse
    partially collapsed MCMC for parallel inference in topic models. Journal
    of Computational and Graphical Statistics 27(2), 449-463.
"""

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, max_iter=300, burn_in=10, n_threads=None,
                 optimize_hyperparameters=False, random_state=None):
        self._store_params(locals())

    def _check_params(self):
        self._check_common()
        self._n_threads = effective_n_threads(self.n_threads)
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1),
                "burn_in": check_int(self.burn_in, "burn_in", minimum=0)}

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        return PartiallyCollapsedState(corpus, len(alpha), alpha, eta, rng, self._n_threads, optimize)

    _fold_in_setup = CollapsedGibbs._fold_in_setup
