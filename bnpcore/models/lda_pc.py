"""Latent Dirichlet allocation by the exact data-parallel partially collapsed
Gibbs sampler of Magnusson, Jonsson, Villani & Broman (2018), with the
doubly sparse Poisson Polya urn of Terenin et al. (2019) as an option.

The state keeps the topics Phi explicitly and integrates the document
proportions out; one sweep is three kernel calls of
``bnpcore.kernels._pclda`` (Phi | z per topic, alias tables per word, z | Phi
per document), all parallel, or with the urn two (Phi | z per word, z | Phi). The estimator shares fit / transform / score and
the fitted attributes of ``bnpcore.lda.CollapsedGibbs``. The state keeps one
label per token and nothing per document.
"""
import time

import numpy as np

from bnpcore._validation import check_int, effective_n_threads
from bnpcore.inference.batch import Array, Number, OneOf, same_counts
from bnpcore.kernels import _pclda
from bnpcore.models.lda import _ATTRS, _DOC, _LDA, CollapsedGibbs, _State, gather_labels

__all__ = ["PartiallyCollapsedGibbs"]


# Labels drawn per block of tokens (the same numbers as one draw of them all): the
# initial state costs no temporary per token.
_LABEL_BLOCK = 1 << 22


def draw_labels(rng, n_topics, n_tokens, dtype):
    """``n_tokens`` topics uniform on 0..n_topics-1 as ``dtype``: the int32 draws of
    ``rng.integers(0, n_topics, n_tokens, dtype=np.int32)``, drawn in blocks."""
    z = np.empty(n_tokens, dtype=dtype)
    for start in range(0, n_tokens, _LABEL_BLOCK):
        stop = min(start + _LABEL_BLOCK, n_tokens)
        z[start:stop] = rng.integers(0, n_topics, size=stop - start, dtype=np.int32)
    return z


def label_dtype(n_topics):
    """uint16 labels (2 bytes per token) for up to 65536 topics, else int32."""
    return np.uint16 if n_topics <= 1 << 16 else np.int32


def token_blocks(corpus, tok_ptr):
    """``(first document, block, its token pointers from 0, its token slice)`` over
    blocks of about a million entries (``Corpus.blocks``: the pages of an
    on-disk corpus are released after each block, so a sweep does not leave
    the corpus resident)."""
    for start, chunk, tokens in corpus.blocks():
        yield start, chunk, tok_ptr[start:start + chunk.n_docs + 1] - tokens.start, tokens


def count_labels(corpus, tok_ptr, z, nwk, nk):
    """The topic-word counts of the labels, block by block (``_pclda.count_topics``)."""
    for _, chunk, _, tokens in token_blocks(corpus, tok_ptr):
        _pclda.count_topics(chunk.indptr, chunk.indices, chunk.counts, z[tokens], nwk, nk)


class PartiallyCollapsedState(_State):
    """Topic labels z (uint16 up to 65536 topics, else int32), counts n_kw and n_k,
    and the keyed streams' key and sweep number; no per-document counts (the
    z-step rebuilds a document's from its labels; ``counts()`` builds n_jk on
    demand). ``doc_topic``: keep the running sum of n_jk after burn-in (D x K
    doubles) for ``doc_topic_``. Phi and the alias tables are rebuilt from the
    counts every sweep."""

    layout = 2          # 1 kept dense per-document counts n_jk; 2 rebuilds them from the labels

    def __init__(self, corpus, n_topics, alpha, eta, rng, n_threads, optimize=None, doc_topic=True, ppu=False):
        super().__init__(corpus, alpha, eta, optimize)
        K, c = n_topics, corpus
        self.n_threads, self.doc_topic, self.ppu = n_threads, doc_topic, ppu
        self.z = draw_labels(rng, K, c.n_tokens, label_dtype(K))
        self.key = int(rng.integers(0, 2 ** 63))
        self.n_sweeps = 0
        self.nwk = np.zeros((c.n_words, K), dtype=np.int32)
        self.nk = np.zeros(K, dtype=np.int64)
        self.restore(corpus)
        count_labels(c, self.tok_ptr, self.z, self.nwk, self.nk)

    _transient = _State._transient + ("tok_ptr", "phi", "prob", "alias", "mass")

    def restore(self, corpus):
        super().restore(corpus)
        vars(self).setdefault("ppu", False)           # checkpoints written before the urn existed
        W, K = corpus.n_words, self.n_components
        self.tok_ptr = np.concatenate([[0], np.cumsum(corpus.doc_lengths, dtype=np.int64)])
        if self.ppu:                                  # sparse, drawn each sweep, no alias tables
            self.phi = self.prob = self.alias = self.mass = None
            return
        self.phi = np.empty((W, K))
        self.prob = np.empty((W, K))
        self.alias = np.empty((W, K), dtype=np.int32)
        self.mass = np.empty(W)

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        K, W = self.n_components, corpus.n_words
        yield "n_threads", Number(1, integer=True)
        yield "doc_topic", OneOf(True, False)
        yield "ppu", OneOf(True, False), self.__dict__.get("ppu", False)    # older checkpoints: none
        yield "key", Number(0, 2 ** 63 - 1, integer=True)
        yield "n_sweeps", Number(0, integer=True)
        yield "z", Array(label_dtype(K), (corpus.n_tokens,), 0, K - 1)
        yield "nwk", Array("int32", (W, K), 0)
        yield "nk", Array("int64", (K,), 0)

    def check_counts(self, corpus):
        nwk, nk = np.zeros_like(self.nwk), np.zeros_like(self.nk)
        count_labels(corpus, np.concatenate([[0], np.cumsum(corpus.doc_lengths, dtype=np.int64)]), self.z, nwk, nk)
        same_counts("nwk", self.nwk, nwk)
        same_counts("nk", self.nk, nk)

    def draw_phi(self):
        """Phi | z: dense (W, K) with the alias tables of alpha_k phi_kw, or with
        the urn word-major CSR ``phi = (rows, topics, values)``."""
        T = self.n_threads
        if self.ppu:
            self.phi = _pclda.sample_phi_urn(self.nwk, self.eta, self.key, 2 * self.n_sweeps + 1, T)
            return
        _pclda.sample_phi(self.nwk, self.eta, self.key, 2 * self.n_sweeps + 1, self.phi, T)
        _pclda.build_alias(self.phi, self.alpha, self.prob, self.alias, self.mass, T)

    def z_step(self):
        """z | Phi over the corpus, block by block, with ``draw_phi``'s Phi."""
        for start, chunk, tp, tokens in token_blocks(self.corpus, self.tok_ptr):
            corpus = (chunk.indptr, chunk.indices, chunk.counts, tp)
            tail = (self.key, self.n_sweeps, self.z[tokens], self.nwk, self.nk, self.n_threads, start)
            if self.ppu:
                _pclda.z_step_rows(*corpus, *self.phi, self.alpha, *tail)
            else:
                _pclda.z_step(*corpus, self.phi, self.prob, self.alias, self.mass, *tail)

    def sweep(self):
        self.draw_phi()
        self.z_step()
        self.n_sweeps += 1
        self.optimize_priors()
        return {}

    def doc_counts(self):
        """n_jk of the current sample (D x K int32, built from the labels)."""
        ndk = np.empty((self.corpus.n_docs, self.n_components), dtype=np.int32)
        _pclda.doc_counts(self.tok_ptr, self.z, ndk, self.n_threads)
        return ndk

    def counts(self):
        return self.doc_counts(), self.nwk

    def collect(self):
        self.sum_wk = self.sum_wk + self.nwk
        if self.doc_topic:
            self.sum_dk = self.sum_dk + self.doc_counts()
        self.n_collected += 1

    # -- on partitions (bnpcore.inference.batch) -------------------------------------------
    def partition(self, start, stop):
        """The block's labels z, the number of its first document (whose keyed
        streams it uses), its token pointers from 0, and past burn-in with
        ``doc_topic`` its rows of the running sum of n_jk."""
        tp = self.tok_ptr
        collected = self.n_collected and self.doc_topic
        return {"first_doc": int(start), "tok_ptr": tp[start:stop + 1] - tp[start], "z": self.z[tp[start]:tp[stop]],
                "alpha": self.alpha, "sum_dk": self.sum_dk[start:stop] if collected else 0.0}

    @staticmethod
    def local_step(part, phi, key, sweep, collect):
        """z | Phi on a block (the alias tables of a dense Phi built here, one
        thread): (the new partition, the moves of its word-topic counts, W x K
        int32). ``collect``: add the block's n_jk to its running sum."""
        K = len(part["alpha"])
        if isinstance(phi, tuple):          # the urn's word-major CSR (rows, topics, values): no tables
            W, tables = len(phi[0]) - 1, (part["alpha"],)
            step = _pclda.z_step_rows
        else:
            W, step = phi.shape[0], _pclda.z_step
            tables = (np.empty((W, K)), np.empty((W, K), dtype=np.int32), np.empty(W))
            _pclda.build_alias(phi, part["alpha"], *tables, 1)
            phi = (phi,)
        z = part["z"].copy()
        moves = np.zeros((W, K), dtype=np.int32)
        step(part["indptr"], part["indices"], part["counts"], part["tok_ptr"], *phi, *tables, key,
             sweep, z, moves, np.zeros(K, dtype=np.int64), 1, part["first_doc"])
        new = dict(part, z=z)
        if collect:
            ndk = np.empty((len(part["tok_ptr"]) - 1, K), dtype=np.int32)
            _pclda.doc_counts(part["tok_ptr"], z, ndk)
            new["sum_dk"] = part["sum_dk"] + ndk        # collect's sum, row by row
        return new, moves

    def iterate(self, parts, sampling=False):
        """``sweep`` and ``collect`` with the z-step on ``parts``: Phi drawn
        here (keyed streams), the blocks' count moves added (integers: exact in
        any order). Every draw comes from the threaded sampler's stream, so the
        fit equals the local one for any number of threads and partitions,
        bit for bit."""
        tick = time.perf_counter()
        if self.ppu:
            phi = _pclda.sample_phi_urn(self.nwk, self.eta, self.key, 2 * self.n_sweeps + 1, self.n_threads)
        else:
            phi = self.phi
            _pclda.sample_phi(self.nwk, self.eta, self.key, 2 * self.n_sweeps + 1, phi, self.n_threads)
        client = time.perf_counter() - tick
        for moves in parts.map(PartiallyCollapsedState.local_step, phi, self.key, self.n_sweeps,
                               sampling and self.doc_topic):
            self.nwk += moves
        self.nk = self.nwk.sum(axis=0, dtype=np.int64)
        self.n_sweeps += 1
        if sampling:                    # collect; the blocks add their n_jk
            self.sum_wk = self.sum_wk + self.nwk
            self.n_collected += 1
        return {"client_seconds": client}

    gather = gather_labels


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

    ``phi="ppu"`` replaces the Dirichlet draw by the Poisson Polya urn of
    Terenin, Magnusson, Jonsson & Draper (2019), ``phi_kw ∝ Poisson(eta_w +
    n_kw)`` (rounded normal above a mean of 30): an approximation of the
    posterior (exact as the counts grow), which makes Phi sparse in both
    directions. With eta < 1 a topic has weight only on the words it holds
    plus about ``W eta`` random others, so a sweep draws O(entries with counts
    + K W eta) Poisson variates instead of W x K gammas, and a token's draw
    ``p(k) ∝ phi_kw (n_jk + alpha_k)`` runs over the topics in which its word
    has weight (no alias tables; a token whose word has weight in no topic
    keeps its topic). Its per-sweep cost is sublinear in K. On KOS at K = 1000
    (``benchmarks/bench_pclda.py``) a sweep costs a fraction of the Dirichlet
    form's, and on two threads a fixed number of sweeps runs faster than
    ``CollapsedGibbs`` (and tomotopy) but ends behind it in held-out score:
    per sweep the urn mixes more slowly, so at equal held-out score it is
    faster than ``CollapsedGibbs`` early and slower later
    (``benchmarks/results/bench_pclda_kos.txt``).

    Every draw comes from a keyed random stream: topic k of sweep t from
    (seed, 2t + 1, k) (the urn: word w from (seed, 2t + 1, 2w) and
    (seed, 2t + 1, 2w + 1)), document j from (seed, 2t, j), so a fit is
    bit-identical for any ``n_threads`` with the same ``random_state``.
    Topics start uniformly at random; after ``burn_in`` sweeps the samples of
    the counts are averaged into ``components_``, ``doc_topic_`` and the
    held-out score, as for ``CollapsedGibbs``.

    Memory: the state is one label per token (uint16 for up to 65536 topics,
    else int32) and the W x K arrays of Phi, the alias tables and the counts
    (the urn: the counts and Phi's positive entries);
    nothing per document but two offsets (16 bytes). The z-step rebuilds a
    document's counts n_jk from its labels, and reads an on-disk corpus
    (``Corpus.open``) block by block without keeping it resident, so the peak
    memory of a fit stays below the size of the corpus's own files
    (docs/scaling.md gives the bytes per token found by
    ``benchmarks/bench_memory.py``). The averages of n_jk behind ``doc_topic_`` cost D x K doubles (1.6 GB for 10^6
    documents and 200 topics): ``store_doc_topic=False`` skips them.

    When to use it: a sweep costs, per token, the number of topics in its
    document, plus the W x K Phi step; it pays off on corpora with many more
    tokens than W x K entries, on several cores. On KOS (W x K = 0.8 times the
    tokens at K = 50) sequential ``CollapsedGibbs`` is faster and mixes
    faster per sweep (it also integrates Phi out): docs/choosing.md. The urn
    trades exactness for sweeps that no longer grow with W x K; it needs a
    small eta (a topic has weight on about W eta words without counts: with
    eta = 0.1 on a NIPS-sized corpus at K = 200 a token's word has weight in
    more topics than its document holds, and the urn gains little over the
    Dirichlet form on two threads: benchmarks/results/bench_threads_nips_synth.txt).
""" + _DOC + """
    max_iter : int, default 300
        Number of sweeps.
    burn_in : int, default 10
        Sweeps before samples are averaged (with ``max_iter <= burn_in`` the
        estimates are the final sample).
    n_threads : int or None, default None
        Threads of the three parallel steps (None: OMP_NUM_THREADS or all
        cpus; -1: all cpus). The result does not depend on it.
    store_doc_topic : bool, default True
        Average the document-topic counts after burn-in into ``doc_topic_``
        (a D x K float64 sum during the fit). False keeps nothing per
        document: ``doc_topic_`` is not set (call ``transform`` on the
        documents that need proportions); the topics are the same.
    phi : {"dirichlet", "ppu"}, default "dirichlet"
        Exact Dirichlet topics, or the sparse Poisson Polya urn
        (approximate, faster for large K; see above).
""" + _ATTRS + """
    References
    ----------
    M. Magnusson, L. Jonsson, M. Villani and D. Broman (2018). Sparse
    partially collapsed MCMC for parallel inference in topic models. Journal
    of Computational and Graphical Statistics 27(2), 449-463.

    A. Terenin, M. Magnusson, L. Jonsson and D. Draper (2019). Polya urn
    latent Dirichlet allocation: a doubly sparse massively parallel sampler.
    IEEE Transactions on Pattern Analysis and Machine Intelligence 41(7),
    1709-1719.
"""

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, max_iter=300, burn_in=10, n_threads=None,
                 optimize_hyperparameters=False, store_doc_topic=True, phi="dirichlet", random_state=None):
        self._store_params(locals())

    partitioned = True

    def _check_params(self):
        self._check_common()
        if not isinstance(self.store_doc_topic, (bool, np.bool_)):
            raise TypeError(f"store_doc_topic must be True or False, got {self.store_doc_topic!r}")
        if self.phi not in ("dirichlet", "ppu"):
            raise ValueError(f"phi must be 'dirichlet' or 'ppu', got {self.phi!r}")
        self._n_threads = effective_n_threads(self.n_threads)
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1),
                "burn_in": check_int(self.burn_in, "burn_in", minimum=0)}

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        return PartiallyCollapsedState(corpus, len(alpha), alpha, eta, rng, self._n_threads, optimize,
                                       bool(self.store_doc_topic), self.phi == "ppu")

    _fold_in_setup = CollapsedGibbs._fold_in_setup
