"""Latent Dirichlet allocation by collapsed Gibbs sampling, standard and collapsed
variational Bayes, and their hybrids (Welling, Teh & Kappen 2008).

Model ([HYB] section 2)::

    pi_j ~ Dir(alpha),  phi_k ~ Dir(eta),  z_ji ~ Cat(pi_j),  x_ji ~ Cat(phi_{z_ji})

All algorithms work on the collapsed joint p(z, x) (pi and phi integrated
out) through the counts n_jk (document-topic), n_kw (topic-word) and n_k. The
states below (``BatchState``) own these counts and run one kernel call of
``bnpcore.kernels._lda`` per sweep; the batch loop of
``bnpcore.inference.batch.BatchEstimator`` runs the sweeps; the estimators at
the bottom are the public classes of ``bnpcore.lda``.
"""
import warnings
from copy import deepcopy

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from bnpcore._threads import map_rows, row_blocks
from bnpcore._validation import (PRODUCT_RANGE, check_dirichlet, check_inner, check_int, check_memory, check_positive,
                                 check_prior, effective_n_threads)
from bnpcore.base import TopicMixin
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, Items, Number, OneOf, RandomGenerator,
                                     block_bounds, same_counts)
from bnpcore.inference.stats import RECOUNT_EVERY, SuffStats, random_responsibilities
from bnpcore.kernels import _lda
from bnpcore.kernels.special import digamma, dpsi

__all__ = ["CollapsedGibbs", "StandardVB", "CollapsedVB", "Hybrid", "svb_bound", "minka_update"]

_ALL_SAMPLED = np.iinfo(np.int32).max   # threshold that samples every pair
_NONE_SAMPLED = -1                      # threshold that samples no pair


# ---------------------------------------------------------------------------
# priors
# ---------------------------------------------------------------------------

# why priors are limited to PRODUCT_RANGE (docs/numerics.md)
_PRODUCTS = ("the updates multiply and square priors plus counts ((N + eta)(N + alpha), and (N + prior)^2 in "
             "second-order CVB), which under- or overflow beyond it (NaN topics)")


def minka_update(prior, counts, totals, symmetric, n_iter=20, rtol=1e-8):
    """Maximum-likelihood Dirichlet prior of Dirichlet-multinomial groups by
    Minka's fixed point (Minka 2000, eq 55)::

        prior_k <- prior_k sum_g [psi(n_gk + prior_k) - psi(prior_k)]
                           / sum_g [psi(N_g + P) - psi(P)],    P = sum_k prior_k

    The symmetric version ties all prior_k to one value (sums over k in the
    numerator, K times the denominator).

    Parameters
    ----------
    prior : ndarray of shape (n_dims,)
        Current prior, the starting point.
    counts : ndarray of shape (n_groups, n_dims)
        Counts per group (expected counts for variational algorithms).
    totals : ndarray of shape (n_groups,)
        ``counts.sum(1)``.
    symmetric : bool
    n_iter : int
        Maximum fixed-point steps; stops earlier at relative change ``rtol``.

    Returns
    -------
    ndarray of shape (n_dims,)
    """
    prior = np.array(prior, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.float64)
    for _ in range(n_iter):
        num = dpsi(prior[None, :], counts).sum(axis=0)
        den = dpsi(prior.sum(), totals).sum()
        if den <= 0:
            return prior    # no data: the likelihood does not depend on the prior
        if symmetric:
            new = prior * num.sum() / (len(prior) * den)
        else:
            new = prior * num / den
        # a topic or word without counts drives its prior to 0; the cap keeps it in the accepted range
        new = np.clip(new, 1e-10, PRODUCT_RANGE[1])
        done = np.all(np.abs(new - prior) <= rtol * prior)
        prior = new
        if done:
            break
    return prior


def svb_bound(alpha, eta, doc_lengths, ndk, nwk, entropy, n_threads=1):
    """The standard VB evidence lower bound B_SVB (Welling, Teh & Kappen 2008,
    section 3), as a dict of its three named terms::

        "documents": sum_j [lgamma(A) - lgamma(N_j + A) + sum_k lgamma(N_jk + alpha_k) - lgamma(alpha_k)]
        "topics":    sum_k [lgamma(E) - lgamma(N_k + E) + sum_w lgamma(N_kw + eta_w) - lgamma(eta_w)]
        "entropy":   -sum c_jw r log r,              A = sum(alpha), E = sum(eta)

    The sum equals the usual LDA ELBO at the optimal Dirichlet factors
    xi = eta + N_kw, zeta = alpha + N_jk.

    Parameters
    ----------
    ndk : ndarray of shape (n_docs, n_topics)
    nwk : ndarray of shape (n_words, n_topics)
        Expected counts (word-major).
    n_threads : int
        Threads of the log-gammas (row blocks; the same value on any number).
    """
    A, E = alpha.sum(), eta.sum()
    nk = nwk.sum(axis=0)
    docs = (len(doc_lengths) * gammaln(A) - gammaln(doc_lengths + A).sum()
            + map_rows(lambda n: gammaln(n + alpha) - gammaln(alpha), (ndk,), n_threads).sum())
    words = (len(nk) * gammaln(E) - gammaln(nk + E).sum()
             + map_rows(lambda n, e: gammaln(n + e[:, None]) - gammaln(e)[:, None], (nwk, eta), n_threads).sum())
    return {"documents": float(docs), "topics": float(words), "entropy": float(entropy)}


def svb_log_word(nwk, nk, eta, eta_tot, n_threads=1):
    """``log_word`` of ``_lda.svb_parallel_step``: psi(N_kw + eta_w) - psi(N_k + eta_tot),
    each row shifted so that its maximum is 0 (row blocks on ``n_threads`` threads)."""
    norm = digamma(nk + eta_tot)

    def rows(n, e):
        x = digamma(n + e[:, None]) - norm
        return x - x.max(axis=1, keepdims=True)

    return map_rows(rows, (nwk, eta), n_threads)


def svb_log_doc(ndk, alpha, n_threads=1):
    """``log_doc`` of ``_lda.svb_parallel_step``: psi(N_jk + alpha_k), each row
    shifted so that its maximum is 0 (row blocks on ``n_threads`` threads)."""
    def rows(n):
        x = digamma(n + alpha)
        return x - x.max(axis=1, keepdims=True)

    return map_rows(rows, (ndk,), n_threads)


# ---------------------------------------------------------------------------
# states: counts plus one kernel call per sweep (the BatchState protocol)
# ---------------------------------------------------------------------------

# Pairs per block of random rows at the start of a parallel-schedule SVB fit (at least W, so that
# adding a block's W x K word counts costs less than drawing its rows): one draw of all rows is
# slow on pages new to the process, blocks of 2^16 pairs reuse theirs and cost as little as a draw
# on reused pages (benchmarks/results/design_choices.txt).
_START_PAIRS = 1 << 16


def random_counts(rng, corpus, K):
    """``(ndk, nwk, nk)``: the expected counts of one random responsibility row
    per pair (``random_responsibilities``, the same draws in the same order),
    drawn for a block of documents at a time, so that the rows are never all in
    memory."""
    ndk, nwk, nk = np.zeros((corpus.n_docs, K)), np.zeros((corpus.n_words, K)), np.zeros(K)
    block_wk, block_k = np.empty_like(nwk), np.empty_like(nk)
    per_block = max(1, max(_START_PAIRS, corpus.n_words) * corpus.n_docs // max(corpus.nnz, 1))
    for start, chunk in zip(range(0, corpus.n_docs, per_block), corpus.iter_chunks(per_block)):
        r = random_responsibilities(rng, chunk.nnz, K)
        _lda.count_expected(chunk.indptr, chunk.indices, chunk.counts, _NONE_SAMPLED, r,
                            ndk[start:start + chunk.n_docs], block_wk, block_k)
        nwk += block_wk
        nk += block_k
    return ndk, nwk, nk


def gather_labels(state, parts, bounds):
    """``gather`` of the samplers' states on partitions: each partition's labels
    ``z`` and, past burn-in with ``doc_topic``, its rows of the running n_jk sum,
    back into the state."""
    tp = state.tok_ptr
    for p, part in enumerate(parts):
        state.z[tp[bounds[p]]:tp[bounds[p + 1]]] = part["z"]
    if state.n_collected and state.doc_topic:
        if np.ndim(state.sum_dk) == 0:
            state.sum_dk = np.zeros((state.corpus.n_docs, state.n_components))
        for p, part in enumerate(parts):
            state.sum_dk[bounds[p]:bounds[p + 1]] = part["sum_dk"]


class _State(BatchState):
    """Priors, corpus and the predictive shared by all states."""

    _transient = ("corpus", "lengths")
    doc_topic = True        # the samplers' states may keep no document-topic counts (store_doc_topic=False)

    def __init__(self, corpus, alpha, eta, optimize):
        self.corpus = corpus
        self.alpha = alpha
        self.eta = eta
        self.optimize = optimize    # None, or (alpha symmetric, eta symmetric)
        self.lengths = corpus.doc_lengths.astype(np.float64)
        self.sum_dk = 0.0
        self.sum_wk = 0.0
        self.n_collected = 0

    @property
    def eta_tot(self):
        return float(self.eta.sum())

    @property
    def n_components(self):
        return len(self.alpha)

    def restore(self, corpus):
        super().restore(corpus)
        self.lengths = corpus.doc_lengths.astype(np.float64)

    def invariants(self, corpus):
        D, W = corpus.n_docs, corpus.n_words
        yield "alpha", Array("float64", (None,), low=np.finfo(float).tiny)
        K = len(self.alpha)
        if K < 1:
            raise ValueError("the checkpoint's state has no topics")
        yield "eta", Array("float64", (W,), low=np.finfo(float).tiny)
        yield "optimize", (OneOf(None) if self.optimize is None else Items(OneOf(True, False), OneOf(True, False)))
        yield "n_collected", Number(0, integer=True)
        for name, rows in (("sum_dk", D), ("sum_wk", W)):
            value = self.__dict__.get(name)
            yield name, Array("float64", (rows, K), low=0.0, optional=True) if isinstance(value, np.ndarray) \
                else OneOf(0.0)

    def counts(self):
        """Current (doc-topic, word-topic) counts used for prediction."""
        raise NotImplementedError

    def predictive(self):
        ndk, nwk = self.counts()
        doc_topic = (ndk + self.alpha) / (self.lengths + self.alpha.sum())[:, None]
        topic_word = (nwk + self.eta[:, None]) / (nwk.sum(axis=0) + self.eta_tot)
        return doc_topic, np.ascontiguousarray(topic_word.T)

    def collect(self):
        ndk, nwk = self.counts()
        self.sum_dk = self.sum_dk + ndk
        self.sum_wk = self.sum_wk + nwk
        self.n_collected += 1

    def estimate(self):
        """(doc-topic, word-topic) counts: the average of collected samples, else
        current; the samplers' states without ``doc_topic`` keep no document-topic
        counts (None)."""
        if not self.doc_topic:
            return None, (self.sum_wk / self.n_collected if self.n_collected else self.nwk.astype(np.float64))
        if self.n_collected:
            return self.sum_dk / self.n_collected, self.sum_wk / self.n_collected
        return tuple(np.asarray(c, dtype=np.float64) for c in self.counts())

    def optimize_priors(self):
        if self.optimize is None:
            return
        ndk, nwk = self.counts()
        self.alpha[:] = minka_update(self.alpha, ndk, self.lengths, self.optimize[0])
        self.eta[:] = minka_update(self.eta, nwk.T, nwk.sum(axis=0), self.optimize[1])


class GibbsState(_State):
    """Collapsed Gibbs sampler ([HYB] section 4, eq 12) with the exact sparse bucket
    sampler of ``_lda.cgs_sweep``; topics start uniformly at random.

    The state is the topic of every token (int32, CSR token order), n_kw, n_k
    and the word lists; no counts per document (the sweep rebuilds a
    document's n_jk from its tokens' topics; ``counts()`` builds them when
    asked). ``doc_topic``: keep the running sum of n_jk after burn-in (D x K
    doubles) for ``doc_topic_``."""

    _transient = _State._transient + ("tok_ptr",)
    layout = 2          # 1 kept dense per-document counts n_jk; 2 rebuilds them from the labels
    sequential_sweep = True     # each token's draw reads the counts after the previous token's

    def __init__(self, corpus, n_topics, alpha, eta, rng, optimize=None, doc_topic=True):
        super().__init__(corpus, alpha, eta, optimize)
        K, c = n_topics, corpus
        self.rng, self.doc_topic = rng, doc_topic
        self.z = rng.integers(0, K, size=c.n_tokens, dtype=np.int32)
        self.nwk = np.zeros((c.n_words, K), dtype=np.int32)
        self.nk = np.zeros(K, dtype=np.int64)
        self.restore(corpus)
        for _, chunk, z in self._blocks():
            _lda.count_word_topics(chunk.indptr, chunk.indices, chunk.counts, z, self.nwk, self.nk)
        self.wtopics = np.empty((c.n_words, K), dtype=np.int32)
        self.wlen = np.empty(c.n_words, dtype=np.int32)
        _lda.word_topic_lists(self.nwk, self.wtopics, self.wlen)
        self.scratch = np.empty(3 * K)
        self.iscratch = np.empty(3 * K, dtype=np.int32)

    def restore(self, corpus):
        super().restore(corpus)
        self.tok_ptr = np.concatenate([[0], np.cumsum(corpus.doc_lengths)])
        if len(self.__dict__.get("iscratch", ())) < 3 * self.n_components:    # older checkpoints (with ndk)
            self.iscratch = np.empty(3 * self.n_components, dtype=np.int32)
            self.__dict__.pop("ndk", None)

    def _blocks(self):
        """``(first document, chunk, its tokens' topics)`` over the corpus in blocks
        (``Corpus.blocks``: an on-disk corpus is not left resident)."""
        for start, chunk, tokens in self.corpus.blocks():
            yield start, chunk, self.z[tokens]

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        K, W = self.n_components, corpus.n_words
        yield "rng", RandomGenerator()
        yield "doc_topic", OneOf(True, False)
        yield "z", Array("int32", (corpus.n_tokens,), 0, K - 1)
        yield "nwk", Array("int32", (W, K), 0)
        yield "nk", Array("int64", (K,), 0)
        yield "wtopics", Array("int32", (W, K), finite=False)     # the first wlen[w] of row w: checked below
        yield "wlen", Array("int32", (W,), 0, K)
        yield "scratch", Array("float64", (3 * K,), finite=False)
        if "iscratch" in self.__dict__:     # rebuilt by restore when missing or short
            yield "iscratch", Array("int32", (None,), finite=False)

    def check_counts(self, corpus):
        nwk, nk = np.zeros_like(self.nwk), np.zeros_like(self.nk)
        self.corpus, self.tok_ptr = corpus, np.concatenate([[0], np.cumsum(corpus.doc_lengths)])
        for _, chunk, z in self._blocks():
            _lda.count_word_topics(chunk.indptr, chunk.indices, chunk.counts, z, nwk, nk)
        same_counts("nwk", self.nwk, nwk)
        same_counts("nk", self.nk, nk)
        # the word lists: each word's topics with tokens, each once
        nonzero = nwk > 0
        listed = np.zeros_like(nonzero)
        used = np.arange(self.n_components) < self.wlen[:, None]
        topics = self.wtopics[used]
        if topics.size and (topics.min() < 0 or topics.max() >= self.n_components):
            raise ValueError("wtopics lists topics outside 0..K-1")
        listed[np.nonzero(used)[0], topics] = True
        if not np.array_equal(listed, nonzero) or int(self.wlen.sum()) != int(nonzero.sum()):
            raise ValueError("wtopics and wlen disagree with the word-topic counts nwk")

    def sweep(self):
        for _, chunk, z in self._blocks():
            _lda.cgs_sweep(chunk.indptr, chunk.indices, chunk.counts, self.alpha, self.eta, self.eta_tot, z,
                           self.nwk, self.nk, self.wtopics, self.wlen, self.scratch, self.iscratch, self.rng)
        self.optimize_priors()
        return {}

    def doc_counts(self, out=None):
        """n_jk of the current sample, D x K doubles built from the topics (added to ``out`` if given)."""
        if out is None:
            out = np.zeros((len(self.tok_ptr) - 1, self.n_components))
        _lda.doc_topic_counts(self.tok_ptr, self.z, np.arange(self.n_components), out)
        return out

    def counts(self):
        return self.doc_counts(), self.nwk

    def collect(self):
        self.sum_wk = self.sum_wk + self.nwk
        if self.doc_topic:          # in place: no second D x K array
            self.sum_dk = self.doc_counts(None if self.n_collected == 0 else self.sum_dk)
        self.n_collected += 1

    # -- on partitions (bnpcore.inference.batch): AD-LDA ---------------------------------
    # The sweep is sequential; on P partitions each samples its documents against
    # its own copy of the counts and word lists, the copies' moves are added after
    # the sweep and the lists rebuilt: the delayed updates of AD-LDA (Newman,
    # Asuncion, Smyth & Welling 2009), as DelayedGibbsState on P blocks, but with
    # the partitions' blocks and streams. One partition is the sweep itself.
    def partition(self, start, stop):
        """The block's topics z, its token pointers from 0, its first document
        and, past burn-in with ``doc_topic``, its rows of the running sum of n_jk."""
        tp = self.tok_ptr
        collected = self.n_collected and self.doc_topic
        return {"first_doc": int(start), "tok_ptr": tp[start:stop + 1] - tp[start], "z": self.z[tp[start]:tp[stop]],
                "sum_dk": self.sum_dk[start:stop] if collected else None}

    @staticmethod
    def local_step(part, alpha, eta, shared, rng, collect):
        """``cgs_sweep`` of a block against its copy of ``shared`` (n_kw, n_k and
        the word lists), drawing from ``rng`` (a Generator, copied and returned:
        one partition) or from the stream of (``rng``, first document) (an int
        key); ``collect``: add the block's n_jk to its running sum. Returns (the
        new partition, (the moves of n_kw and n_k, the copies of the word lists
        and the advanced generator, or None for a key))."""
        nwk, nk, wtopics, wlen = (a.copy() for a in shared)
        single = isinstance(rng, np.random.Generator)
        rng = deepcopy(rng) if single else np.random.default_rng([rng, part["first_doc"]])
        K, z = len(alpha), part["z"].copy()
        _lda.cgs_sweep(part["indptr"], part["indices"], part["counts"], alpha, eta, float(eta.sum()), z, nwk, nk,
                       wtopics, wlen, np.empty(3 * K), np.empty(3 * K, dtype=np.int32), rng)
        new = dict(part, z=z)
        if collect:
            n_docs = len(part["tok_ptr"]) - 1
            new["sum_dk"] = np.zeros((n_docs, K)) if part["sum_dk"] is None else part["sum_dk"].copy()
            _lda.doc_topic_counts(part["tok_ptr"], z, np.arange(K), new["sum_dk"])
        moves = nwk - shared[0], nk - shared[1]
        return new, moves + ((wtopics, wlen, rng) if single else (None, None, None))

    def iterate(self, parts, sampling=False):
        """One sweep on ``parts`` (AD-LDA; above), and ``collect`` past burn-in."""
        single = len(parts.bounds) == 2
        rng = self.rng if single else int(self.rng.integers(0, 1 << 63))
        shared = self.nwk, self.nk, self.wtopics, self.wlen
        outs = parts.map(GibbsState.local_step, self.alpha, self.eta, shared, rng, sampling and self.doc_topic)
        for nwk_moves, nk_moves, *_ in outs:       # integer sums: exact in any order
            self.nwk += nwk_moves
            self.nk += nk_moves
        if single:
            self.wtopics[:], self.wlen[:] = outs[0][2], outs[0][3]
            self.rng.bit_generator.state = outs[0][4].bit_generator.state
        else:
            _lda.word_topic_lists(self.nwk, self.wtopics, self.wlen)
        if sampling:
            self.sum_wk = self.sum_wk + self.nwk
            self.n_collected += 1
        return {}

    gather = gather_labels


class DelayedBlocks:
    """Mixin (before the state class) of the delayed Gibbs schedules (AD-LDA,
    AD-HDP): ``n_threads`` blocks of about equal numbers of tokens
    (``token_blocks``) as ``blocks = (first documents, first tokens)``, and the
    blocks' copies (``copies``, rebuilt by the sweep)."""

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        yield "n_threads", Number(1, integer=True)

    def restore(self, corpus):
        super().restore(corpus)
        starts = token_blocks(self.tok_ptr, self.n_threads)
        self.blocks = starts, self.tok_ptr[starts].astype(np.int64)
        self.copies = None


class DelayedGibbsState(DelayedBlocks, GibbsState):
    """Collapsed Gibbs with delayed updates (AD-LDA; Newman, Asuncion, Smyth &
    Welling 2009, section 3.1): the documents in ``n_threads`` blocks of
    about equal numbers of tokens (``token_blocks``), each block sampling against its own copy of n_kw, n_k
    and the word lists, the copies merged after every sweep
    (``_lda.cgs_delayed_sweep``). Block t draws from the keyed stream
    ``(key, t, 0)``, ``key`` drawn from the state's generator once a sweep; one
    block is ``GibbsState``'s sweep, draw for draw. The blocks cover the
    corpus as one CSR array (an on-disk corpus is read into memory). ``copies``
    is the room for the blocks' copies, which every sweep fills afresh."""

    _transient = GibbsState._transient + ("blocks", "copies")

    def __init__(self, corpus, n_topics, alpha, eta, rng, n_threads, optimize=None, doc_topic=True):
        self.n_threads = int(n_threads)
        super().__init__(corpus, n_topics, alpha, eta, rng, optimize, doc_topic)

    def sweep(self):
        c, T, K = self.corpus, self.n_threads, self.n_components
        if self.copies is None:
            shape = (T, c.n_words, K) if T > 1 else (1, 0, 0)
            self.copies = (np.empty(shape, dtype=np.int32), np.empty(shape, dtype=np.int32),
                           np.empty((T, c.n_words if T > 1 else 0), dtype=np.int32),
                           np.empty((T, 3 * K + 16)), np.empty((T, 3 * K + 16), dtype=np.int32))
        key = int(self.rng.integers(0, 1 << 63)) if T > 1 else 0
        _lda.cgs_delayed_sweep(c.indptr, c.indices, c.counts, self.blocks, self.alpha, self.eta, self.eta_tot,
                               self.z, (self.nwk, self.nk, self.wtopics, self.wlen), self.copies, key, self.rng, T)
        self.optimize_priors()
        return {}


class SequentialState(_State):
    """Sequential sweeps over pairs: standard VB (sequential schedule), CVB, CVB0
    and the hybrids SVB/CGS and CVB/CGS ([HYB] sections 3, 5, 5.1).

    Pairs with count > ``threshold`` keep a responsibility row in ``r``; the
    tokens of the others are sampled (topics in ``z``). With one sample per
    sweep the two kinds of update interleave in corpus order; with
    ``n_samples > 1`` each sweep first runs that many Gibbs sweeps over the
    sampled tokens, keeping their counts, then updates every variational pair
    with psi (or the CVB log terms) averaged over those samples.
    """

    sequential_sweep = True     # each pair's update reads the counts after the previous pair's

    def __init__(self, corpus, n_topics, alpha, eta, rng, mode, threshold, n_samples=1, optimize=None):
        super().__init__(corpus, alpha, eta, optimize)
        K, c = n_topics, corpus
        self.rng, self.mode, self.threshold, self.n_samples = rng, mode, threshold, n_samples
        sampled = c.counts <= threshold
        self.n_vb_tokens = int(c.counts[~sampled].sum(dtype=np.int64))
        self.z = rng.integers(0, K, size=int(c.counts[sampled].sum(dtype=np.int64)), dtype=np.int32)
        self.r = random_responsibilities(rng, int((~sampled).sum()), K)
        self.vb_dk = np.zeros((c.n_docs, K))
        self.vb_wk = np.zeros((c.n_words, K))
        self.vb_k = np.zeros(K)
        shape = (c.n_docs, K), (c.n_words, K), (K,)
        self.var = tuple(np.zeros(s) for s in shape) if mode == _lda.MODE_CVB else (None, None, None)
        self.cg_dk = np.zeros((c.n_docs, K), dtype=np.int32)
        self.cg_wk = np.zeros((c.n_words, K), dtype=np.int32)
        self.cg_k = np.zeros(K, dtype=np.int64)
        _lda.count_samples(c.indptr, c.indices, c.counts, threshold, self.z, self.cg_dk, self.cg_wk, self.cg_k)
        self._recount()
        self._scratch()
        self.n_sweeps = 0

    _transient = _State._transient + ("stack", "work")

    def _scratch(self):
        """The per-sweep sample stack (overwritten by every sweep) and work space."""
        K, c = self.n_components, self.corpus
        if len(self.z) and self.n_samples == 1:     # the live counts are the one sample (interleaved)
            self.stack = self.cg_dk[None], self.cg_wk[None], self.cg_k[None]
        else:
            S = self.n_samples if len(self.z) else 0
            self.stack = (np.zeros((S, c.n_docs, K), dtype=np.int32), np.zeros((S, c.n_words, K), dtype=np.int32),
                          np.zeros((S, K), dtype=np.int64))
        self.work = np.empty(2 * K)

    def restore(self, corpus):
        super().restore(corpus)
        self._scratch()

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        K, D, W = self.n_components, corpus.n_docs, corpus.n_words
        yield "rng", RandomGenerator()
        yield "mode", OneOf(_lda.MODE_SVB, _lda.MODE_CVB0, _lda.MODE_CVB)
        yield "threshold", Number(_NONE_SAMPLED, integer=True)
        yield "n_samples", Number(1, integer=True)
        yield "n_sweeps", Number(0, integer=True)
        sampled = corpus.counts <= self.threshold
        n_sampled = int(corpus.counts[sampled].sum(dtype=np.int64))
        yield "n_vb_tokens", OneOf(corpus.n_tokens - n_sampled)
        yield "z", Array("int32", (n_sampled,), 0, K - 1)
        yield "r", Array("float64", (int((~sampled).sum()), K), 0.0, 1.0)
        for name, rows in (("vb_dk", D), ("vb_wk", W), ("vb_k", None)):
            yield name, Array("float64", (K,) if rows is None else (rows, K))
        var = Array("float64", (D, K)), Array("float64", (W, K)), Array("float64", (K,))
        yield "var", Items(*var) if self.mode == _lda.MODE_CVB else Items(*[OneOf(None)] * 3)
        yield "cg_dk", Array("int32", (D, K), 0)
        yield "cg_wk", Array("int32", (W, K), 0)
        yield "cg_k", Array("int64", (K,), 0)
        if isinstance(self, DelayedCVBState):
            yield "n_threads", Number(1, integer=True)

    def check_counts(self, corpus):
        c, K = corpus, self.n_components
        if not np.allclose(self.r.sum(axis=1), 1.0, rtol=0.0, atol=1e-6):
            raise ValueError("rows of r are not distributions over topics")
        cg = np.zeros_like(self.cg_dk), np.zeros_like(self.cg_wk), np.zeros_like(self.cg_k)
        _lda.count_samples(c.indptr, c.indices, c.counts, self.threshold, self.z, *cg)
        for name, counted in zip(("cg_dk", "cg_wk", "cg_k"), cg):
            same_counts(name, getattr(self, name), counted)
        vb = [np.zeros_like(self.vb_dk), np.zeros_like(self.vb_wk), np.zeros(K)]
        var = [np.zeros_like(v) if v is not None else None for v in self.var]
        _lda.count_expected(c.indptr, c.indices, c.counts, self.threshold, self.r, *vb, *var)
        for name, saved, counted in zip(("vb_dk", "vb_wk", "vb_k", "var[0]", "var[1]", "var[2]"),
                                        (self.vb_dk, self.vb_wk, self.vb_k, *self.var), vb + var):
            if saved is not None:
                same_counts(name, saved, counted, rtol=1e-6)

    def _recount(self):
        c = self.corpus
        _lda.count_expected(c.indptr, c.indices, c.counts, self.threshold, self.r,
                            self.vb_dk, self.vb_wk, self.vb_k, *self.var)

    def _run(self, do_cg, do_vb, stack):
        c = self.corpus
        settings = {"mode": self.mode, "threshold": self.threshold, "do_cg": do_cg, "do_vb": do_vb}
        return _lda.sequential_sweep(
            c.indptr, c.indices, c.counts, self.alpha, self.eta, self.eta_tot, settings, self.r, self.z,
            (self.vb_dk, self.vb_wk, self.vb_k), self.var, (self.cg_dk, self.cg_wk, self.cg_k), stack,
            self.work, self.rng)

    def sweep(self):
        if len(self.z) and self.n_samples > 1:
            for s in range(self.n_samples):
                self._run(True, False, self.stack)
                for dst, src in zip(self.stack, (self.cg_dk, self.cg_wk, self.cg_k)):
                    dst[s] = src
            delta, entropy = self._run(False, True, self.stack)
        else:
            delta, entropy = self._run(True, True, self.stack)
        self.n_sweeps += 1
        if self.n_sweeps % RECOUNT_EVERY == 0:
            self._recount()
        record = {"delta": delta / max(self.n_vb_tokens, 1)}
        if self.mode == _lda.MODE_SVB and len(self.z) == 0:
            record["bound"] = svb_bound(self.alpha, self.eta, self.lengths, self.vb_dk, self.vb_wk, entropy)
        self.optimize_priors()
        return record

    def for_partitions(self, n_partitions):
        """CVB and CVB0 (no sampled pairs) on ``n_partitions`` blocks: the
        ``DelayedCVBState`` of ``n_threads = n_partitions`` holding these values
        (what a local fit with that many threads continues with), counted in
        those blocks if no sweep has run."""
        if self.mode == _lda.MODE_SVB or len(self.z):
            raise ValueError("only CVB and CVB0 without sampled pairs have a delayed schedule")
        state = object.__new__(DelayedCVBState)
        state.__dict__.update(self.__dict__)
        state.n_threads = int(n_partitions)
        if state.n_sweeps == 0:
            state._recount()
        return state

    def counts(self):
        # incremental updates leave counts that should be 0 at about -1e-12 (see
        # RECOUNT_EVERY): clamped, else small priors give negative proportions
        if len(self.z) == 0:
            return np.maximum(self.vb_dk, 0.0), np.maximum(self.vb_wk, 0.0)
        return np.maximum(self.vb_dk + self.cg_dk, 0.0), np.maximum(self.vb_wk + self.cg_wk, 0.0)


def thread_blocks(n_docs, n_threads):
    """First document of each thread's block and the end: OpenMP's static
    schedule (the first ``n_docs % n_threads`` blocks one document longer), the
    blocks of the delayed schedule (``cvb_parallel_sweep``), on which its fit
    depends."""
    return block_bounds(n_docs, n_threads)


def token_blocks(tok_ptr, n_threads):
    """First document of each of ``n_threads`` blocks of about equal numbers of
    tokens, and the end (``tok_ptr`` the documents' token offsets): the blocks
    of the delayed Gibbs schedules, on which their fits depend."""
    tok_ptr = np.asarray(tok_ptr)
    D = len(tok_ptr) - 1
    targets = tok_ptr[-1] * np.arange(n_threads + 1) / n_threads
    above = np.minimum(np.searchsorted(tok_ptr, targets, side="left"), D)
    below = np.maximum(above - 1, 0)
    starts = np.where(targets - tok_ptr[below] <= tok_ptr[above] - targets, below, above)   # the nearer boundary
    starts[0], starts[-1] = 0, D
    return np.maximum.accumulate(starts).astype(np.int64)


def word_index(indptr, indices, n_words):
    """``(word_ptr, word_pairs, word_docs)``: the pairs (CSR positions) of word w
    in corpus order are ``word_pairs[word_ptr[w]:word_ptr[w + 1]]``, and their
    documents the same slice of ``word_docs`` (``_lda.svb_parallel_step``).
    SciPy's CSR-to-CSC conversion: one counting pass that keeps each column's
    rows in order (faster than a stable argsort)."""
    pairs = np.arange(len(indices), dtype=np.int64)
    by_word = sp.csr_matrix((pairs, indices, indptr), shape=(len(indptr) - 1, n_words)).tocsc()
    return (by_word.indptr.astype(np.int64, copy=False), by_word.data,
            by_word.indices.astype(np.int64, copy=False))


def delayed_cvb_sweep(indptr, indices, counts, alpha, eta, mode, r, vb_dk, var_dk, shared, n_threads):
    """One delayed-update CVB / CVB0 sweep (``_lda.cvb_parallel_sweep``) of the
    documents in ``n_threads`` blocks, each against its own copy of the
    ``shared`` counts (``DelayedCVBState.shared``); updates ``r``, ``vb_dk``
    (and ``var_dk``) in place. Returns (the copies after the sweep, one array
    per shared array stacked in block order, (delta, entropy))."""
    copies = [np.empty((n_threads,) + a.shape) for a in shared]
    for copy, a in zip(copies, shared):
        def fill(rows, copy=copy, a=a):
            copy[:, rows] = a[rows]
        row_blocks(fill, len(a), n_threads, copy[:, :1].size)
    no_var = [np.empty((0,) + a.shape) for a in shared] if mode == _lda.MODE_CVB0 else []
    result = _lda.cvb_parallel_sweep(indptr, indices, counts, alpha, eta, float(eta.sum()), mode, r, vb_dk, var_dk,
                                     *copies, *no_var, n_threads)
    return copies, result


def block_counts(indptr, indices, counts, r, vb_dk, var_dk, n_words):
    """The expected counts of a block of documents (``indptr`` from 0) from
    its rows of ``r``: writes the block's ``vb_dk`` (and ``var_dk``) rows;
    returns its word-topic and topic counts (and their variances with
    ``var_dk``), in the order of ``DelayedCVBState.shared``."""
    K = r.shape[1]
    out = [np.empty((n_words, K)), np.empty(K)]
    var = [np.empty((n_words, K)), np.empty(K)] if var_dk is not None else [None, None]
    _lda.count_expected(indptr, indices, counts, _NONE_SAMPLED, r, vb_dk, *out, var_dk, *var)
    return out + var if var_dk is not None else out


class DelayedCVBState(SequentialState):
    """CVB / CVB0 with the delayed schedule: documents in ``n_threads`` blocks
    (``thread_blocks``), each thread updating its own copy of the word-topic
    and topic counts (and variances), the copies' changes merged after every
    sweep (``delayed_cvb_sweep``; Asuncion et al. 2009, section 5). The
    periodic recount from r also counts block by block and sums the blocks'
    counts in block order, so that ``bnpcore.distributed``, which keeps each
    block on a worker, repeats the fit bit for bit."""

    def __init__(self, corpus, n_topics, alpha, eta, rng, mode, n_threads, optimize=None):
        self.n_threads = n_threads
        super().__init__(corpus, n_topics, alpha, eta, rng, mode, _NONE_SAMPLED, optimize=optimize)

    def shared(self):
        """The counts every block copies: word-topic and topic counts (and for CVB their variances)."""
        return (self.vb_wk, self.vb_k) + (self.var[1:] if self.mode == _lda.MODE_CVB else ())

    def merge(self, copies):
        """Add the changes of the blocks' copies (``delayed_cvb_sweep``) to the
        shared counts; one block: its copy (the sequential schedule, exactly)."""
        for copy, counts in zip(copies, self.shared()):
            if len(copy) == 1:
                counts[:] = copy[0]
            else:       # counts += (copy - counts).sum(axis=0), by blocks of words on the threads
                def block(rows, copy=copy, counts=counts):
                    counts[rows] += (copy[:, rows] - counts[rows]).sum(axis=0)
                row_blocks(block, len(counts), self.n_threads, copy[:, :1].size)

    def set_counts(self, blocks):
        """The shared counts as the sums, in block order, of the blocks' counts (``block_counts``)."""
        for counts, parts in zip(self.shared(), zip(*blocks)):
            np.sum(parts, axis=0, out=counts)

    def _recount(self):
        # the blocks' counts summed in block order: against one count over the whole corpus
        # (SequentialState._recount) they differ by rounding only (the document counts not at all;
        # benchmarks/results/design_choices.txt)
        c, b, var_dk = self.corpus, thread_blocks(self.corpus.n_docs, self.n_threads), self.var[0]
        blocks = []
        for start, stop in zip(b[:-1], b[1:]):
            lo, hi = c.indptr[start], c.indptr[stop]
            blocks.append(block_counts(c.indptr[start:stop + 1] - lo, c.indices[lo:hi], c.counts[lo:hi],
                                       self.r[lo:hi], self.vb_dk[start:stop],
                                       None if var_dk is None else var_dk[start:stop], c.n_words))
        self.set_counts(blocks)

    def _run(self, do_cg, do_vb, stack):
        c = self.corpus
        copies, result = delayed_cvb_sweep(c.indptr, c.indices, c.counts, self.alpha, self.eta, self.mode, self.r,
                                           self.vb_dk, self.var[0], self.shared(), self.n_threads)
        self.merge(copies)
        return result

    # -- on partitions (bnpcore.inference.batch): one block each ---------------------------
    sequential_sweep = False

    def partition(self, start, stop):
        """The block's rows of r and of the expected document counts (and their variances for CVB)."""
        lo, hi = self.corpus.indptr[start], self.corpus.indptr[stop]
        var_dk = self.var[0]
        return {"alpha": self.alpha, "eta": self.eta, "mode": self.mode, "r": self.r[lo:hi],
                "vb_dk": self.vb_dk[start:stop], "var_dk": None if var_dk is None else var_dk[start:stop]}

    @staticmethod
    def local_step(part, recount, *shared):
        """One block's sweep against its copy of the ``shared`` counts
        (``delayed_cvb_sweep`` on one thread), then, with ``recount``, its
        expected counts from r (``block_counts``): (the new partition, (its
        copies after the sweep, or its counts, and its delta))."""
        r, vb_dk = part["r"].copy(), part["vb_dk"].copy()
        var_dk = None if part["var_dk"] is None else part["var_dk"].copy()
        docs = part["indptr"], part["indices"], part["counts"]
        copies, (delta, _) = delayed_cvb_sweep(*docs, part["alpha"], part["eta"], part["mode"], r, vb_dk, var_dk,
                                               shared, 1)
        out = block_counts(*docs, r, vb_dk, var_dk, len(part["eta"])) if recount else [c[0] for c in copies]
        return dict(part, r=r, vb_dk=vb_dk, var_dk=var_dk), (out, delta)

    def iterate(self, parts, sampling=False):
        """``sweep`` with the blocks on ``parts``: the blocks' copies merged by
        ``merge`` (not summed: each is the shared counts plus the block's
        changes), every tenth sweep their recounts added by ``set_counts``, in
        block order, as the threaded sweep does; so the fit equals the local
        one with ``n_threads`` = the number of partitions, bit for bit."""
        recount = (self.n_sweeps + 1) % RECOUNT_EVERY == 0
        outs = parts.map(DelayedCVBState.local_step, recount, *self.shared())
        if recount:     # the recount overwrites every shared count: the sweep's merge is not needed
            self.set_counts([out[0] for out in outs])
        else:
            self.merge([np.stack(copies) for copies in zip(*(out[0] for out in outs))])
        self.n_sweeps += 1
        delta = 0.0
        for out in outs:     # cvb_parallel_sweep's sum over its threads
            delta += out[1]
        return {"delta": delta / max(self.n_vb_tokens, 1)}

    def gather(self, parts, bounds):
        indptr, var_dk = self.corpus.indptr, self.var[0]
        for p, part in enumerate(parts):
            start, stop = bounds[p], bounds[p + 1]
            self.r[indptr[start]:indptr[stop]] = part["r"]
            self.vb_dk[start:stop] = part["vb_dk"]
            if var_dk is not None:
                var_dk[start:stop] = part["var_dk"]


class ParallelSVBState(_State):
    """Standard VB with the parallel schedule ([HYB] eq 11 for all pairs at once:
    the E-step and M-step of Blei et al. 2003): the documents' rows in parallel
    threads, then the word counts word by word (``word_index``), the same bits
    on any number of threads. The state is the expected counts: each
    iteration's rows are a function of the previous counts, so no
    responsibility rows are kept (O((D + W) K) memory, not O(nnz K), and a
    sweep without the rows' reads and writes is faster:
    benchmarks/results/bench_threads_nips_synth.txt)."""

    def __init__(self, corpus, n_topics, alpha, eta, rng, n_threads=1, optimize=None):
        super().__init__(corpus, alpha, eta, optimize)
        self.n_threads = n_threads
        self.ndk, self.nwk, self.nk = random_counts(rng, corpus, n_topics)
        self.restore(corpus)

    _transient = _State._transient + ("word_index",)

    def restore(self, corpus):
        super().restore(corpus)
        vars(self).pop("r", None)           # checkpoints written when the state kept the rows
        self.word_index = word_index(corpus.indptr, corpus.indices, corpus.n_words)

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        K = self.n_components
        yield "n_threads", Number(1, integer=True)
        yield "ndk", Array("float64", (corpus.n_docs, K), 0.0)
        yield "nwk", Array("float64", (corpus.n_words, K), 0.0)
        yield "nk", Array("float64", (K,), 0.0)

    def check_counts(self, corpus):
        same_counts("ndk row sums", self.ndk.sum(axis=1), corpus.doc_lengths, rtol=1e-6)
        words = np.bincount(corpus.indices, weights=corpus.counts, minlength=corpus.n_words)
        same_counts("nwk row sums", self.nwk.sum(axis=1), words, rtol=1e-6)
        same_counts("nk", self.nk, self.nwk.sum(axis=0), rtol=1e-6)

    def sweep(self):
        c, T = self.corpus, self.n_threads
        log_word = svb_log_word(self.nwk, self.nk, self.eta, self.eta_tot, T)
        log_doc = svb_log_doc(self.ndk, self.alpha, T)
        delta, entropy = _lda.svb_parallel_step(c.indptr, c.indices, c.counts, self.word_index, log_word, log_doc,
                                                self.ndk, self.nwk, T)
        self.nk = self.nwk.sum(axis=0)
        record = {"delta": delta / c.n_tokens,
                  "bound": svb_bound(self.alpha, self.eta, self.lengths, self.ndk, self.nwk, entropy, T)}
        self.optimize_priors()
        return record

    # -- local and global steps (bnpcore.inference.batch; ``sweep`` is both on threads) --------
    def partition(self, start, stop):
        """The block's rows of the document-topic counts (no responsibilities: they follow from the counts)."""
        return {"alpha": self.alpha, "ndk": self.ndk[start:stop]}

    def broadcast(self):
        """The word factor psi(N_kw + eta_w) - psi(N_k + sum(eta)), (W, K)."""
        return (svb_log_word(self.nwk, self.nk, self.eta, self.eta_tot),)

    @staticmethod
    def local_step(part, log_word):
        """The E-step of a block (``_lda.svb_parallel_step`` on one thread): its
        new document-topic counts, and as statistics its word-topic counts
        ``nwk``, delta, the entropy and the documents term of the bound."""
        alpha, ndk = part["alpha"], part["ndk"].copy()
        log_doc = svb_log_doc(ndk, alpha)
        nwk = np.empty_like(log_word)
        # built at the first step and kept with the partition (as the state keeps its own)
        index = part["word_index"] if "word_index" in part else word_index(part["indptr"], part["indices"],
                                                                             len(log_word))
        delta, entropy = _lda.svb_parallel_step(part["indptr"], part["indices"], part["counts"], index, log_word,
                                                log_doc, ndk, nwk, 1)
        documents = (gammaln(ndk + alpha) - gammaln(alpha)).sum()
        stats = SuffStats({"nwk": nwk, "delta": delta, "entropy": entropy, "documents": documents}, axes={"nwk": 1})
        return dict(part, ndk=ndk, word_index=index), stats

    def global_step(self, stats, rho=1.0):
        """The M-step: the summed word-topic counts (rho 1: batch VB); the
        bound's terms as ``svb_bound`` (the documents term from the blocks' sums)."""
        self.nwk[...] = stats["nwk"]
        self.nk = self.nwk.sum(axis=0)
        A, lengths = self.alpha.sum(), self.lengths
        bound = svb_bound(self.alpha, self.eta, lengths[:0], self.ndk[:0], self.nwk, float(stats["entropy"]))
        bound["documents"] = float(len(lengths) * gammaln(A) - gammaln(lengths + A).sum() + stats["documents"])
        return {"delta": float(stats["delta"]) / self.corpus.n_tokens, "bound": bound}

    def gather(self, parts, bounds):
        for p, part in enumerate(parts):
            self.ndk[bounds[p]:bounds[p + 1]] = part["ndk"]

    def counts(self):
        return self.ndk, self.nwk


# ---------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------

class _LDA(TopicMixin, BatchEstimator):
    """fit / transform / score shared by the LDA estimators (the batch loop and
    its options are ``BatchEstimator.fit``'s)."""

    # -- subclass hooks ------------------------------------------------------
    def _make_state(self, corpus, alpha, eta, rng, optimize):
        raise NotImplementedError

    def _fold_in_setup(self):
        """(mode, threshold, vb_log_word (W, K)) of the per-document inference."""
        raise NotImplementedError

    # -- the batch protocol ------------------------------------------------------
    def _check_common(self):
        check_int(self.n_components, "n_components", minimum=1)
        self._n_threads = effective_n_threads(self.n_threads)
        for name in ("alpha", "eta"):
            if np.ndim(getattr(self, name)) == 0:
                check_prior(getattr(self, name), name, bounds=PRODUCT_RANGE, reason=_PRODUCTS)
        if not isinstance(self.optimize_hyperparameters, (bool, np.bool_)):
            raise TypeError("optimize_hyperparameters must be True or False")

    def check_partitioned(self):
        if getattr(self, "optimize_hyperparameters", False):
            raise ValueError(f"bnpcore.distributed runs {type(self).__name__} with optimize_hyperparameters=False "
                             "only (the updates need every document's counts on the client)")

    def _bytes_per(self):
        """(bytes per token, per (document, word) pair and topic) of the fit's
        state (sampled topics, rows of responsibilities), for ``check_memory``."""
        return 4, 0

    def _init_state(self, X, rng):
        # tokens' topics; rows of the pairs (all, or a block of the first counts); counts by document and word
        K, block = int(self.n_components), min(X.nnz, max(_START_PAIRS, X.n_words))
        per_token, per_pair = self._bytes_per()
        check_memory(per_token * X.n_tokens + K * (per_pair * X.nnz + 8 * block + 24 * (X.n_docs + X.n_words)),
                     f"n_components={K}", X)
        # a number (symmetric) or one entry per topic / word, in [1e-100, 1e100]
        alpha = check_dirichlet(self.alpha, (int(self.n_components),), "alpha", PRODUCT_RANGE, _PRODUCTS)
        eta = check_dirichlet(self.eta, (X.n_words,), "eta", PRODUCT_RANGE, _PRODUCTS)
        optimize = (np.ndim(self.alpha) == 0, np.ndim(self.eta) == 0) if self.optimize_hyperparameters else None
        return self._make_state(X, alpha, eta, rng, optimize)

    def _set_fitted(self, state, corpus):
        """Fitted attributes from the final (or averaged) counts, topics ordered by
        decreasing size."""
        ndk, nwk = state.estimate()
        order = np.argsort(-nwk.sum(axis=0), kind="stable")
        self.alpha_ = state.alpha[order]
        self.eta_ = state.eta.copy()
        self.components_ = np.ascontiguousarray((nwk[:, order] + self.eta_[:, None]).T)
        self.topics_ = self.components_ / self.components_.sum(axis=1, keepdims=True)
        if ndk is not None:         # None: no per-document averages (store_doc_topic=False)
            self.doc_topic_ = (ndk[:, order] + self.alpha_) / (state.lengths + self.alpha_.sum())[:, None]
        self.n_components_ = int(self.components_.shape[0])
        self.n_features_in_ = int(corpus.n_words)
        self.vocabulary_ = corpus.vocabulary
        var_wk = getattr(state, "var", (None, None, None))[1]
        if var_wk is not None:
            self._var_wk = var_wk[:, order]

    # -- inference on new documents -------------------------------------------
    def transform(self, X, *, max_iter=100, burn_in=10, tol=1e-6):
        """Document-topic proportions of (new) documents, topics fixed.

        Runs the algorithm's own per-document inference with the fitted topics
        held fixed: variational pairs iterate until the mean absolute change
        of the expected counts per token is below ``tol`` (at most
        ``max_iter`` sweeps; standard VB sweeps every pair from the previous
        sweep's counts, the E-step of Blei, Ng & Jordan 2003, whatever the
        fit's schedule: the same fixed point, a sweep much cheaper than pair
        by pair); sampled tokens run ``max_iter`` sweeps and the proportions are
        averaged after ``burn_in``. Documents run in parallel
        (``n_threads``); each samples from its own random stream, keyed by
        the scoring seed and its words, so the result is the same for any
        number of threads and for a document in any batch.

        Returns
        -------
        ndarray of shape (n_docs, n_components)
            Posterior mean proportions ``(alpha + N_jk) / (sum(alpha) + N_j)``.
        """
        corpus = self._check_input(X)
        max_iter = check_int(max_iter, "max_iter", minimum=1)
        burn_in = check_int(burn_in, "burn_in", minimum=0)
        tol = check_positive(tol, "tol", allow_zero=True)
        mode, threshold, vb_log_word = self._fold_in_setup()
        theta = np.empty((corpus.n_docs, self.n_components_))
        cg_word = np.ascontiguousarray(self.topics_.T)
        _lda.fold_in(corpus.indptr, corpus.indices, corpus.counts, self.alpha_, mode, threshold,
                     np.ascontiguousarray(vb_log_word), cg_word, max_iter, burn_in, tol,
                     *self._document_keys(corpus), theta, effective_n_threads(self.n_threads))
        return theta

    def perplexity(self, X):
        """``exp(-score(X))``: the document-completion perplexity of ``X``."""
        return float(np.exp(-self.score(X)))

    # -- helpers ---------------------------------------------------------------
    def _word_counts(self):
        """Fitted expected/averaged topic-word counts, word-major (W, K)."""
        return self.components_.T - self.eta_[:, None]

    def _log_word_svb(self):
        """psi(eta_w + N_kw) - psi(eta_tot + N_k): the word factor of standard VB."""
        return digamma(self.components_.T) - digamma(self.components_.sum(axis=1))

    def _log_word_cvb(self):
        """log((N_kw + eta_w) / (N_k + eta_tot)) with the second-order corrections of
        the word and topic counts (their variances from training): the word factor
        of collapsed VB for a new document."""
        nwk = self._word_counts()
        ekw = nwk + self.eta_[:, None]
        ek = nwk.sum(axis=0) + self.eta_.sum()
        return np.log(ekw / ek) - self._var_wk / (2 * ekw ** 2) + self._var_wk.sum(axis=0) / (2 * ek ** 2)

    _persist = BatchEstimator._persist + ("_var_wk",)  # second-order word variances, for transform after load


_DOC = """
    Parameters
    ----------
    n_components : int, default 10
        Number of topics K.
    alpha : float or array-like of shape (n_components,), default 0.1
        Dirichlet prior of the document proportions (symmetric if a number).
    eta : float or array-like of shape (n_words,), default 0.1
        Dirichlet prior of the topics (symmetric if a number); [HYB] beta.
        Entries of both lie in [1e-100, 1e100]: the updates multiply and
        square priors plus counts, which leaves double precision beyond
        (docs/numerics.md).
    optimize_hyperparameters : bool, default False
        Update alpha and eta after every iteration by Minka's fixed point on
        the current counts (expected counts for variational algorithms),
        keeping each symmetric if it was given as a number.
    random_state : int, Generator or None
        Seeds the initialisation and every draw.
"""

_THREADS = """    n_threads : int or None, default None
        OpenMP threads: None uses OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1 k threads (0, below -1 or not an integer:
        ValueError). {what}
        ``transform``, ``score`` and the held-out evaluation during ``fit``
        run documents in parallel, with the same result for any number of
        threads. BLAS runs on one thread during ``fit`` (threadpoolctl, when
        installed), so the two thread pools do not oversubscribe the cpus.
"""

_ATTRS = """
    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_words)
        Dirichlet parameters of the topics, eta + (expected or averaged) counts.
    topics_ : ndarray of shape (n_components, n_words)
        Topic-word distributions (rows of ``components_`` normalised).
    doc_topic_ : ndarray of shape (n_docs, n_components)
        Posterior mean proportions of the training documents.
    alpha_, eta_ : ndarray
        Final priors (changed only by ``optimize_hyperparameters``).
    history_ : list of dict
        One record per iteration: ``iteration``, ``n_documents`` (documents
        processed so far), ``fit_seconds`` (cumulative time in the algorithm,
        evaluation excluded), ``n_components`` and the algorithm's diagnostics
        (``delta``: mean absolute change of the responsibilities per token;
        ``bound``: the named terms of B_SVB), plus ``heldout_loglik`` and
        ``perplexity`` every ``eval_every`` iterations when ``fit`` got
        ``heldout``.
    n_components_, n_iter_, n_features_in_, vocabulary_
"""

_REFS = """
    References
    ----------
    [HYB] M. Welling, Y. W. Teh and H. J. Kappen (2008). Hybrid
    variational/Gibbs collapsed inference in topic models. Proceedings of
    the 24th Conference on Uncertainty in Artificial Intelligence (UAI).
"""


_SAMPLER_ITER = """
    max_iter : int, default 300
        Number of sweeps.
    burn_in : int, default 10
        Sweeps before samples are averaged (with ``max_iter <= burn_in`` the
        estimates are the final sample).
"""


def _warn_sequential(est, parallel):
    """Check ``est.schedule`` ("sequential" or the estimator's ``parallel``
    schedule); warn when a thread count is asked for a fit that the sequential
    schedule runs on one thread."""
    if est.schedule not in (parallel, "sequential"):
        raise ValueError(f"schedule must be '{parallel}' or 'sequential', got {est.schedule!r}")
    if est.schedule == "sequential" and est.n_threads not in (None, 1):
        warnings.warn(f"{type(est).__name__}(schedule='sequential') fits on one thread: n_threads={est.n_threads} "
                      f"only parallelises transform and score (use schedule='{parallel}' for a parallel fit)",
                      UserWarning, stacklevel=4)


def _check_tol(tol):
    return None if tol is None else check_positive(tol, "tol", allow_zero=True)


class _Sampler(_LDA):
    """Loop settings of the estimators with sampled tokens."""

    def _check_params(self):
        self._check_common()
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1),
                "burn_in": check_int(self.burn_in, "burn_in", minimum=0)}


class CollapsedGibbs(_Sampler):
    __doc__ = """Collapsed Gibbs sampling for LDA ([HYB] section 4, eq 12).

    Every sweep draws each token's topic from
    ``p(z = k | rest) ∝ (n_kw + eta_w)(n_jk + alpha_k) / (n_k + sum(eta))``
    with the counts of all other tokens. The draw uses the sparse bucket
    decomposition of SparseLDA (Yao, Mimno & McCallum 2009), which samples
    this conditional exactly in time proportional to the number of topics
    present in the token's word and document. Topics start uniformly at
    random. After ``burn_in`` sweeps every sample enters the online averages
    behind ``components_``, ``doc_topic_`` and the held-out score (eq 31).

    Memory: the state is the topic of every token (int32, 4 bytes), an
    offset and a length per document (16 bytes) and the W x K counts and
    word lists; no counts per document (the sweep rebuilds each document's
    n_jk from its tokens' topics when it reaches it), and an on-disk corpus
    (``Corpus.open``) is read block by block without staying resident.
    The averages of n_jk behind ``doc_topic_`` cost D x K doubles during
    the fit (1.6 GB for 10^6 documents and 200 topics; a few times that
    while ``doc_topic_`` is built at the end): ``store_doc_topic=False``
    skips them. docs/scaling.md gives the bytes per token on
    generated corpora of up to 10^8 tokens.
""" + _DOC + _SAMPLER_ITER + """    schedule : {"sequential", "delayed"}, default "sequential"
        "sequential": token by token in corpus order, every draw conditioned
        on all other tokens (the exact sampler), on one thread. "delayed":
        AD-LDA (Newman, Asuncion, Smyth & Welling 2009, section 3.1), an
        approximation of the sequential sampler: the documents are split
        into ``n_threads`` contiguous blocks of about equal numbers of
        tokens, each thread samples its block
        against its own copy of the word-topic counts (and word lists), and
        the copies' changes are merged after every sweep,
        ``n_kw <- n_kw + sum_t (n_kw^t - n_kw)``. A draw then sees the other
        blocks' moves of the current sweep only after it; Newman et al.
        found held-out perplexity equal to the sequential sampler's up
        to ~1000 blocks. The fit is repeatable for a given seed and number
        of threads and depends on both (not on how many threads OpenMP
        actually gives); with one thread it is the sequential sampler, draw
        for draw. The copies cost ``n_threads`` x W x K x 8 bytes, and the
        corpus is held in memory.
""" + _THREADS.format(
        what="The sequential schedule's sweeps run on one thread; the\n        delayed schedule's run "
             "document blocks in parallel.") + """    store_doc_topic : bool, default True
        Average the document-topic counts after burn-in into ``doc_topic_``
        (a D x K float64 sum during the fit). False keeps nothing per
        document: ``doc_topic_`` is not set (call ``transform`` on the
        documents that need proportions); the topics are the same.
""" + _ATTRS + _REFS

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, max_iter=300, burn_in=10,
                 optimize_hyperparameters=False, random_state=None, n_threads=None, store_doc_topic=True,
                 schedule="sequential"):
        self._store_params(locals())

    partitioned = True      # AD-LDA on the partitions (GibbsState.iterate)

    def _check_params(self):
        if not isinstance(self.store_doc_topic, (bool, np.bool_)):
            raise TypeError(f"store_doc_topic must be True or False, got {self.store_doc_topic!r}")
        if self.schedule not in ("sequential", "delayed"):
            raise ValueError(f"schedule must be 'sequential' or 'delayed', got {self.schedule!r}")
        return super()._check_params()

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        if self.schedule == "delayed":
            return DelayedGibbsState(corpus, len(alpha), alpha, eta, rng, self._n_threads, optimize,
                                     self.store_doc_topic)
        return GibbsState(corpus, len(alpha), alpha, eta, rng, optimize, self.store_doc_topic)

    def _fold_in_setup(self):
        return _lda.MODE_SVB, _ALL_SAMPLED, np.zeros((self.n_features_in_, self.n_components_))


class StandardVB(_LDA):
    __doc__ = """Standard variational Bayes for LDA in collapsed form ([HYB] section 3, eq 11).

    One responsibility row per unique (document, word) pair:
    ``r_jwk ∝ exp(psi(N_kw + eta_w) - psi(N_k + sum(eta)) + psi(N_jk + alpha_k))``
    with N the expected counts. Both schedules increase the exact bound
    B_SVB ([HYB] section 3), recorded as ``bound`` in ``history_``. The
    parallel schedule keeps only the counts (O((D + W) K) memory: each
    iteration's rows follow from the previous counts); the sequential one
    keeps the rows (O(nnz K)).
""" + _DOC + """
    max_iter : int, default 300
    tol : float or None, default 1e-6
        Stop when ``delta`` in ``history_`` falls below ``tol``; None runs
        ``max_iter``. ``delta`` is the mean absolute change per token of the
        document-topic counts N_jk (parallel schedule: the change of the
        Dirichlet parameters alpha + N_j, the criterion of Hoffman et al.'s
        and gensim's E-steps) or of the responsibilities (sequential).
    schedule : {"parallel", "sequential"}, default "parallel"
        "parallel": all pairs from the counts of the previous iteration (the
        usual E-step/M-step), documents in ``n_threads`` threads, then the
        word-topic counts word by word, each word's pairs added in corpus
        order (so the fit is the same bit for bit on any number of threads;
        ``bnpcore.distributed`` adds its partitions' counts, which agrees to
        rounding);
        "sequential": pair by pair, counts updated after each, on one thread
        (``n_threads`` other than None or 1 then warns that only
        ``transform`` and ``score`` use it).
""" + _THREADS.format(what="The parallel schedule's sweeps run documents\n        in parallel.") + _ATTRS + _REFS

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, max_iter=300, tol=1e-6, schedule="parallel",
                 n_threads=None, optimize_hyperparameters=False, random_state=None):
        self._store_params(locals())

    def _bytes_per(self):
        return 0, 8 if self.schedule == "sequential" else 0

    def _check_params(self):
        self._check_common()
        _warn_sequential(self, "parallel")
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1), "tol": _check_tol(self.tol)}

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        if self.schedule == "parallel":
            return ParallelSVBState(corpus, len(alpha), alpha, eta, rng, self._n_threads, optimize)
        return SequentialState(corpus, len(alpha), alpha, eta, rng, _lda.MODE_SVB, _NONE_SAMPLED,
                               optimize=optimize)

    def _fold_in_setup(self):
        return _lda.MODE_SVB, _NONE_SAMPLED, self._log_word_svb()

    partitioned = True

    def check_partitioned(self):
        super().check_partitioned()
        if self.schedule != "parallel":
            raise ValueError(f"bnpcore.distributed runs StandardVB with schedule='parallel' only, "
                             f"got schedule={self.schedule!r}")


class CollapsedVB(_LDA):
    __doc__ = """Collapsed variational Bayes for LDA (Teh, Newman & Welling 2006; [HYB]
    section 5.1), second order, or zero order (CVB0, Asuncion et al. 2009).

    Pair by pair, with N^- the expected counts without one copy of the pair
    and V^- their variances::

        r_jwk ∝ (N^-_kw + eta_w)(N^-_jk + alpha_k) / (N^-_k + sum(eta))
                * exp(-V^-_jk / (2 (N^-_jk + alpha_k)^2) - V^-_kw / (2 (N^-_kw + eta_w)^2)
                      + V^-_k / (2 (N^-_k + sum(eta))^2))

    (the exponential factor only for ``order=2``). All copies of a pair share
    one row (per-pair storage, O(nnz K) memory); fixed points equal those of
    the per-token updates.
""" + _DOC + """
    order : {2, 0}, default 2
        2: Gaussian (second-order) corrections; 0: CVB0.
    max_iter : int, default 300
    tol : float or None, default 1e-6
        Stop when the mean absolute change of the responsibilities per token
        falls below ``tol``; None runs ``max_iter``.
    schedule : {"sequential", "delayed"}, default "sequential"
        "sequential": pair by pair in corpus order, every count updated at
        once (the exact schedule of Teh et al. 2006), on one thread;
        "delayed": the standard delayed-update approximation (Asuncion,
        Welling, Smyth & Teh 2009, section 5): the documents are split into
        ``n_threads`` blocks, each thread updates its own copy of the
        word-topic counts (and variances) and sees the other threads'
        updates only after the sweep, when the copies' changes are merged
        (document counts stay exact). The result then depends on the number
        of threads (with one thread it is the sequential schedule), not on
        how many OpenMP gives (``OMP_THREAD_LIMIT``, a build without OpenMP);
        ``bnpcore.distributed.fit`` runs the same fit with the blocks on a
        Dask cluster. Default
        "sequential": exact and the same on every machine, and the delayed
        schedule gains little at KOS size, more on larger corpora, for about
        the same held-out score (docs/choosing.md, "On several cores";
        benchmarks/bench_threads.py measures both).
""" + _THREADS.format(what="The delayed schedule's sweeps run document\n        blocks in parallel.") + _ATTRS + """
    References
    ----------
    Y. W. Teh, D. Newman and M. Welling (2006). A collapsed variational
    Bayesian inference algorithm for latent Dirichlet allocation. NIPS.
    A. Asuncion, M. Welling, P. Smyth and Y. W. Teh (2009). On smoothing and
    inference for topic models. UAI.
"""

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, order=2, max_iter=300, tol=1e-6,
                 schedule="sequential", n_threads=None, optimize_hyperparameters=False, random_state=None):
        self._store_params(locals())

    def _bytes_per(self):
        return 0, 8

    def _mode(self):
        if isinstance(self.order, bool) or self.order not in (0, 2):
            raise ValueError(f"order must be 0 (CVB0) or 2, got {self.order!r}")
        return _lda.MODE_CVB if self.order == 2 else _lda.MODE_CVB0

    def _check_params(self):
        self._check_common()
        self._mode()
        _warn_sequential(self, "delayed")
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1), "tol": _check_tol(self.tol)}

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        if self.schedule == "delayed" and self._n_threads > 1:
            return DelayedCVBState(corpus, len(alpha), alpha, eta, rng, self._mode(), self._n_threads, optimize)
        return SequentialState(corpus, len(alpha), alpha, eta, rng, self._mode(), _NONE_SAMPLED, optimize=optimize)

    def _fold_in_setup(self):
        log_word = self._log_word_cvb() if self.order == 2 else np.log(self.topics_.T)
        return self._mode(), _NONE_SAMPLED, log_word

    partitioned = True

    def check_partitioned(self):
        super().check_partitioned()
        if self.schedule != "delayed":
            raise ValueError(f"bnpcore.distributed runs CollapsedVB with schedule='delayed' only (the sequential "
                             f"schedule updates the counts after every pair), got schedule={self.schedule!r}")


class Hybrid(_Sampler):
    __doc__ = """Hybrid variational / collapsed Gibbs inference for LDA ([HYB] sections 5
    and 5.1): SVB/CGS (``variational="standard"``) and CVB/CGS
    (``variational="collapsed"``, second order).

    Pairs with count c_jw <= ``threshold`` are sampled token by token
    ([HYB] eq 25), the others updated variationally (eq 21 or the CVB update),
    all against the same counts: variational expectations plus the current
    sample (eqs 16-19). ``threshold=0`` is pure SVB (sequential schedule) or
    CVB; a threshold at or above the largest count is pure collapsed Gibbs
    (with a plain O(K) draw per token). Predictions average the samples after
    ``burn_in`` (eq 31).
""" + _DOC + """
    variational : {"standard", "collapsed"}, default "standard"
    threshold : int, default 1
        The r of [HYB] eq 14 (1 in the paper: only singleton pairs are sampled).
    n_samples : int in [1, 1000], default 1
        Gibbs sweeps per iteration. With 1, variational and sampled updates
        interleave in corpus order; with more, the variational update
        averages psi or the CVB log terms over the samples.
""" + _SAMPLER_ITER + _THREADS.format(
        what="The sweeps are sequential (sampled and variational updates\n        interleave) and run on "
             "one thread.") + _ATTRS + _REFS

    def __init__(self, n_components=10, alpha=0.1, eta=0.1, variational="standard", threshold=1, n_samples=1,
                 max_iter=300, burn_in=10, optimize_hyperparameters=False, random_state=None, n_threads=None):
        self._store_params(locals())

    def _bytes_per(self):
        return 4, 8

    def _mode(self):
        modes = {"standard": _lda.MODE_SVB, "collapsed": _lda.MODE_CVB}
        if self.variational not in modes:
            raise ValueError(f"variational must be 'standard' or 'collapsed', got {self.variational!r}")
        return modes[self.variational]

    def _threshold(self):
        return min(check_int(self.threshold, "threshold", minimum=0, maximum=None), _ALL_SAMPLED)

    def _check_params(self):
        self._mode()
        self._threshold()
        check_inner(self.n_samples, "n_samples", minimum=1)
        return super()._check_params()

    def _make_state(self, corpus, alpha, eta, rng, optimize):
        return SequentialState(corpus, len(alpha), alpha, eta, rng, self._mode(), self._threshold(),
                               self.n_samples, optimize)

    def _fold_in_setup(self):
        mode = self._mode()
        log_word = self._log_word_svb() if mode == _lda.MODE_SVB else self._log_word_cvb()
        return mode, self._threshold(), log_word
