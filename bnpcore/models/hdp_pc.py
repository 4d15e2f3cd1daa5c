"""The HDP topic model by the doubly sparse partially collapsed Gibbs sampler of
Terenin, Magnusson, Jonsson & Draper (2020).

The state keeps the topics Phi and the global stick Psi explicitly and integrates
the document proportions out; one sweep is a few kernel calls of
``bnpcore.kernels._pchdp`` (table counts, the candidate tail topics, Phi | z,
alias tables of a dense Phi, z | Phi, Psi), all parallel over documents,
topics or words, and a few serial O(K) draws (the stick, the concentrations). The estimator shares transform / score and the
fitted attributes of ``bnpcore.hdp.DirectAssignmentGibbs``.
"""
import time
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from bnpcore._defaults import check_burn_in, warn_capacity
from bnpcore._validation import PRIOR_RANGE, check_inner, check_int, check_memory, check_prior, effective_n_threads
from bnpcore.inference.batch import Array, BatchState, Number, OneOf, RandomGenerator, same_counts
from bnpcore.kernels import _pchdp, _pclda
from bnpcore.models.hdp_gibbs import (DirectAssignmentGibbs, check_gamma_prior, in_prior_range, resample_alpha,
                                      settings_invariants)
from bnpcore.models.lda_pc import count_labels, draw_labels, label_dtype, token_blocks

__all__ = ["PartiallyCollapsedGibbs", "resample_gamma_sticks"]


# Largest max_topics (see the max_topics parameter: the serial steps of a sweep are O(max_topics)).
MAX_TOPICS = 100_000


def resample_gamma_sticks(gamma, tables, prior, rng, n_rounds=1):
    """Slice-sampling update of the top-level concentration given the table
    counts ``tables`` (l_k of the labelled topics 0..K-1, Psi integrated out).

    Under Psi ~ GEM(gamma), ``p(l | gamma) ∝ prod_k B(1 + l_k, gamma + L_{>k}) / B(1, gamma)``
    with ``L_{>k} = sum_{i>k} l_i``; topics past the last one with tables give
    factor 1. The Gamma(a, b) prior (shape, rate) times this density is sampled
    by univariate slice sampling (Neal 2003, stepping out) on log gamma, within
    PRIOR_RANGE (with a tiny shape the density is flat towards gamma = 0, and an
    unbounded stepping out would not end)."""
    a, b = prior
    l = np.asarray(tables, dtype=np.float64)
    above = np.cumsum(l[::-1])[::-1]                   # L_{>=k}
    below = above - l                                   # L_{>k}
    n = len(l)

    def log_density(x):                                 # x = log gamma, with the Jacobian
        g = np.exp(x)
        return (a * x - b * g + n * x + (gammaln(g + below) - gammaln(1.0 + g + above)).sum())

    low, high = np.log(PRIOR_RANGE)
    x = np.log(gamma)
    for _ in range(n_rounds):
        level = log_density(x) + np.log(rng.random())
        if not np.isfinite(level):                      # the density overflows at extreme priors: keep gamma
            continue
        lo = x - rng.random()
        hi = lo + 1.0
        while lo > low and log_density(lo) > level:
            lo -= 1.0
        while hi < high and log_density(hi) > level:
            hi += 1.0
        lo, hi = max(lo, low), min(hi, high)
        while hi - lo > 1e-12:                          # shrinks towards x, which is in the slice
            y = lo + rng.random() * (hi - lo)
            if log_density(y) > level:
                x = y
                break
            if y < x:
                lo = y
            else:
                hi = y
    return in_prior_range(np.exp(x))


# The keyed streams of sweep t are numbered STREAMS t + one of these: the
# documents' z-step, the topics' Dirichlet draws, the tokens' candidate tail
# topics, the documents' table counts, the words' urn draws, the completions of
# the tail topics' rows.
STREAMS = 6
Z, PHI, CANDIDATES, TABLES, URN, REST = range(STREAMS)

# The z-step's explicit topics are those before the first from which the
# stick's remaining mass is at most TAIL_MASS: a function of Psi, not of the
# labels the z-step moves (a split at one past the highest topic with tokens
# biased the chain toward fewer topics, against enumeration on a five-token
# corpus). With any such split the Dirichlet form is exact; a tail topic is
# reached only through the candidates, so a smaller mass mixes better: on KOS
# the urn scored better held-out with 1e-4 than with 0.01 in the same time
# (benchmarks/results/bench_pchdp_kos_fixed.txt). The dense form gains less and
# takes more time: it keeps more topics, and its Phi step, a gamma draw per word
# and slot, is most of its time (benchmarks/results/design_choices.txt).
TAIL_MASS = 1e-4


class UrnPhi(NamedTuple):
    """The urn's Phi of a sweep (``z_step``): the explicit topics' word-major
    CSR rows (``_pclda.sample_phi_urn``), the tail topics' rows (those of the
    urn's topics, whole, then the candidates' prior rows drawn at the
    ``marks`` of ``candidate_marks``, ``_pchdp.sample_prior``), each row's
    ``rest`` mass, and eta, with which the z-step completes a row whose topic
    a token takes."""
    rows: np.ndarray
    topics: np.ndarray
    vals: np.ndarray
    tail_rows: np.ndarray
    marks: np.ndarray
    rest: np.ndarray
    eta: float


def stream(sweep, which):
    """The number of stream ``which`` of sweep ``sweep``."""
    return STREAMS * sweep + which


def z_tables(phi, ab, K, n_threads, out=None):
    """Step 5 of the sweep: the Phi arguments of ``z_step``. A dense Phi gets the
    Walker alias tables of ``ab_k phi_wk`` over the K active topics, ``(phi,
    prob, alias, mass)`` (into ``out`` = (prob, alias, mass) if given); the
    urn's ``(rows, topics, vals, phi)`` needs none."""
    if isinstance(phi, UrnPhi):
        return phi
    W, C = phi.shape
    prob, alias, mass = out if out is not None else (np.empty((W, C)), np.zeros((W, C), dtype=np.int32), np.empty(W))
    _pclda.build_alias(phi, ab, prob, alias, mass, n_threads, n_topics=K)
    return phi, prob, alias, mass


def z_step(documents, K, phi, ab, alpha, tail, key, sweep, z, nwk, nk, n_threads=1, first_doc=0):
    """Step 6 of sweep ``sweep``, z | Phi, Psi, on ``documents`` = (indptr,
    indices, counts, tok_ptr), documents ``first_doc, ...`` of the corpus:
    ``_pchdp.z_step`` or, with the urn's Phi, ``_pchdp.z_step_rows``. ``phi``
    from ``z_tables``, ``tail`` the cumulative Psi of the tail topics."""
    R = float(tail[-1]) if tail.size else 0.0
    prior, streams = (ab, alpha * R, tail), (key, stream(sweep, Z), stream(sweep, CANDIDATES))
    if not isinstance(phi, UrnPhi):
        _pchdp.z_step(*documents, K, phi, prior, streams, z, nwk, nk, n_threads, first_doc)
        return
    # the z-step completes the rows of the tail topics taken, in place (a
    # Dask worker's copy: its arguments are read-only)
    rows = phi.tail_rows if phi.tail_rows.flags.writeable else phi.tail_rows.copy()
    _pchdp.z_step_rows(*documents, K, (phi.rows, phi.topics, phi.vals), rows, prior, streams, z, nwk, nk, n_threads,
                       first_doc, (phi.marks, phi.rest, phi.eta, stream(sweep, REST)))


def candidate_marks(blocks, tail, key, sweep, n_words, n_threads=1):
    """Step 3 with the urn: the words at which each candidate tail topic's row
    is read, (n, n_words) uint8 (``_pchdp.candidate_words``), over ``blocks``
    of (first document, indptr, indices, counts), their marks or-ed."""
    parts = [_pchdp.candidate_words(indptr, indices, counts, tail, key, stream(sweep, CANDIDATES), n_words,
                                    n_threads, start) for start, indptr, indices, counts in blocks]
    return merge_marks(parts, n_words)


def merge_marks(parts, n_words):
    """The union of ``candidate_words`` marks of several blocks of documents."""
    marks = np.zeros((max((len(m) for m in parts), default=0), n_words), dtype=np.uint8)
    for m in parts:
        marks[:len(m)] |= m
    return marks


class PartiallyCollapsedHDPState(BatchState):
    """Topic labels of the tokens (uint16 up to 65536 topics, else int32), the
    counts n_wk, n_k over the topic slots (none per document: the kernels rebuild
    a document's counts from its labels), the stick fractions s_k of all
    ``max_topics`` topics (Psi_k = s_k prod_{i<k}(1 - s_i)), the concentrations,
    the numpy Generator of the serial draws and the keyed streams' key and sweep
    number. Phi and the alias tables are rebuilt every sweep."""

    _transient = ("corpus", "tok_ptr", "doc_lengths", "phi", "prob", "alias", "mass")
    layout = 2          # 1 kept dense per-document counts n_jk; 2 rebuilds them from the labels

    def __init__(self, corpus, k0, eta, alpha, gamma, max_topics, ppu, settings, rng, n_threads):
        self.eta, self.alpha, self.gamma, self.max_topics, self.ppu = eta, alpha, gamma, max_topics, ppu
        self.settings, self.rng, self.n_threads = settings, rng, n_threads
        self.key = int(rng.integers(0, 2 ** 63))
        self.n_sweeps = 0
        labels = draw_labels(rng, k0, corpus.n_tokens, label_dtype(max_topics))
        # Psi_k = 1 / (k0 + 1) for the starting topics; the tail from the prior
        sticks = rng.beta(1.0, gamma, size=max_topics)
        sticks[:k0] = 1.0 / (k0 + 1.0 - np.arange(k0))
        self.nwk = np.zeros((corpus.n_words, 0), dtype=np.int32)
        self.nk = np.zeros(0, dtype=np.int64)
        self.restore(corpus)
        self._reserve(max(16, 2 * k0))
        self.assign(labels, sticks)

    def assign(self, labels, sticks):
        """Set the tokens' topic labels and the stick fractions of the
        ``max_topics`` topics (the last is set to 1); the counts follow."""
        self.labels = np.asarray(labels, dtype=label_dtype(self.max_topics))
        self.sticks = np.array(sticks, dtype=np.float64)
        self.sticks[-1] = 1.0
        self.nwk[:] = 0
        self.nk[:] = 0
        self._reserve(max(16, 2 * (int(self.labels.max(initial=0)) + 1)))
        count_labels(self.corpus, self.tok_ptr, self.labels, self.nwk, self.nk)

    def restore(self, corpus):
        super().restore(corpus)
        self.doc_lengths = np.asarray(corpus.doc_lengths, dtype=np.int64)
        self.tok_ptr = np.concatenate([[0], np.cumsum(self.doc_lengths)]).astype(np.int64)
        self._allocate()

    def invariants(self, corpus):
        positive = Number(np.finfo(float).tiny)
        for name in ("eta", "alpha", "gamma"):
            yield name, positive
        yield "max_topics", Number(1, integer=True)
        yield "ppu", OneOf(True, False)
        yield from settings_invariants(self.settings)
        yield "rng", RandomGenerator()
        yield "n_threads", Number(1, integer=True)
        yield "key", Number(0, 2 ** 63 - 1, integer=True)
        yield "n_sweeps", Number(0, integer=True)
        yield "nk", Array("int64", (None,), 0)
        slots = len(self.nk)
        if not 1 <= slots <= self.max_topics:
            raise ValueError(f"nk has {slots} topic slots, outside 1..max_topics = {self.max_topics}")
        yield "nwk", Array("int32", (corpus.n_words, slots), 0)
        yield "labels", Array(label_dtype(self.max_topics), (corpus.n_tokens,), 0, slots - 1)
        yield "sticks", Array("float64", (self.max_topics,), 0.0, 1.0)

    def check_counts(self, corpus):
        nwk, nk = np.zeros_like(self.nwk), np.zeros_like(self.nk)
        count_labels(corpus, np.concatenate([[0], np.cumsum(corpus.doc_lengths)]).astype(np.int64), self.labels,
                     nwk, nk)
        same_counts("nwk", self.nwk, nwk)
        same_counts("nk", self.nk, nk)

    def _allocate(self):
        """The dense Phi and alias tables (the urn's Phi is drawn sparse each sweep)."""
        if self.ppu:
            self.phi = self.prob = self.alias = self.mass = None
            return
        W, C = self.nwk.shape
        self.phi = np.zeros((W, C))
        self.prob = np.empty((W, C))
        self.alias = np.zeros((W, C), dtype=np.int32)
        self.mass = np.empty(W)

    def _reserve(self, n):
        """At least n topic slots (doubling, at most max_topics)."""
        C = self.nk.shape[0]
        if n <= C:
            return
        C = min(self.max_topics, max(n, 2 * C))
        self.nwk = np.pad(self.nwk, ((0, 0), (0, C - self.nk.shape[0])))
        self.nk = np.pad(self.nk, (0, C - self.nk.shape[0]))
        self._allocate()

    @property
    def n_active(self):
        """K*: one past the highest topic with tokens."""
        return int(np.flatnonzero(self.nk)[-1]) + 1

    def psi(self):
        s = self.sticks
        with np.errstate(divide="ignore"):      # a fraction of 1 (Beta(1, tiny gamma)) leaves 0 to the later topics
            return s * np.exp(np.concatenate([[0.0], np.cumsum(np.log1p(-s[:-1]))]))

    def sweep(self):
        c, T, t = self.corpus, self.n_threads, self.n_sweeps
        K = self.n_active
        # 1. tables l | z, Psi
        l_k = np.zeros(K, dtype=np.int64)
        _pchdp.sample_tables(self.tok_ptr, self.labels, self.alpha * self.psi(), K, self.key, stream(t, TABLES), l_k,
                             T)
        K, tail = self.draw_sticks(l_k)
        # 3. the candidate tail topics of the sweep (each token's candidate c ~
        # Psi_c / R over the tail c >= K is drawn in the z-step): the largest, and with
        # the urn the words at which their rows are read
        candidates = -1
        if tail.size and self.ppu:
            blocks = ((start, chunk.indptr, chunk.indices, chunk.counts) for start, chunk, _, _ in
                      token_blocks(c, self.tok_ptr))
            candidates = candidate_marks(blocks, tail, self.key, t, c.n_words, T)
        elif tail.size:
            candidates = _pchdp.max_candidate(self.tok_ptr, tail, self.key, stream(t, CANDIDATES), T)
        ab, phi = self.draw_phi(K, tail, candidates)
        # 5. alias tables (dense Phi), 6. z | Phi, Psi, block by block
        phi = z_tables(phi, ab, K, T, out=None if self.ppu else (self.prob, self.alias, self.mass))
        for start, chunk, tp, tokens in token_blocks(c, self.tok_ptr):
            z_step((chunk.indptr, chunk.indices, chunk.counts, tp), K, phi, ab, self.alpha, tail, self.key, t,
                   self.labels[tokens], self.nwk, self.nk, T, start)
        return self.end_sweep(l_k)

    def draw_sticks(self, l_k):
        """Step 2 of the sweep (serial), given the table counts l_k of the K*
        active topics: alpha | z, l; gamma | l (Psi integrated out); Psi | l,
        gamma. Returns the split K of the z-step's explicit topics and the tail
        (the first topic from which the stick's remaining mass is at most
        TAIL_MASS, at least 1) and the cumulative Psi of the tail topics K, K +
        1, ... (none, and K at least K*, if that mass is 0)."""
        K, rng, st = len(l_k), self.rng, self.settings
        n_tables = int(l_k.sum())
        if st["alpha_prior"] is not None:
            self.alpha = resample_alpha(self.alpha, n_tables, self.doc_lengths, st["alpha_prior"], rng, st["rounds"])
        if st["gamma_prior"] is not None:
            self.gamma = resample_gamma_sticks(self.gamma, l_k[:self.max_topics - 1], st["gamma_prior"], rng,
                                               st["rounds"])
        later = np.zeros(self.max_topics, dtype=np.int64)
        later[:K] = np.cumsum(l_k[::-1])[::-1] - l_k
        full = np.zeros(self.max_topics, dtype=np.int64)
        full[:K] = l_k
        self.sticks = rng.beta(1.0 + full, self.gamma + later)
        self.sticks[-1] = 1.0
        # the candidates' proposal is Psi_c / R: proposing the first tail topics more often (g_c, for fewer
        # prior rows per sweep) with the flag weighing alpha Psi_c phi_cw / g_c failed the enumeration test
        # (test_exact_posterior_over_partitions at 3 seeds: p = 0 for g_c ∝ Psi_c 2^-c and Psi_c 2^c,
        # p = 0, 0.02, 0.0007 for Psi_c 0.9^c; 0.002, 0.14, 0.69 for Psi_c)
        psi = self.psi()
        rest = np.cumsum(psi[::-1])[::-1]               # rest[k] = sum_{i >= k} Psi_i
        K = max(1, int(np.argmax(rest <= TAIL_MASS)) if rest[-1] <= TAIL_MASS else self.max_topics)
        if not rest[K:].any():
            # no stick left past K (a fraction drawn as 1 with a tiny gamma): the flag has no weight, every
            # candidate would be the last topic, so no tail; the topics with tokens past K become explicit
            # with weight alpha Psi_k = 0, the same law as in the tail
            return max(K, len(l_k)), np.empty(0)
        return K, np.cumsum(psi[K:])

    def draw_phi(self, K, tail, candidates):
        """Step 4 of the sweep: Phi | z for the topics up to the split K and
        those with tokens, and the tail topics up to the largest candidate
        (from the prior), the topic slots grown to hold them; ``candidates``:
        the largest's tail index (dense Phi; -1: none), or with the urn the
        marks of ``candidate_marks``, at which the prior rows are drawn.
        Returns ab = alpha Psi over the slots (0 past the drawn topics) and
        the Phi of ``z_tables``: the dense (W, slots) array, or an
        ``UrnPhi``."""
        t, T, W, eta = self.n_sweeps, self.n_threads, self.nwk.shape[0], np.full(self.nwk.shape[0], self.eta)
        if self.ppu and not tail.size:
            candidates = np.zeros((0, W), dtype=np.uint8)
        n_phi = max(K + (len(candidates) if self.ppu else candidates + 1), self.n_active)
        self._reserve(n_phi)
        ab = np.zeros(self.nk.shape[0])
        ab[:n_phi] = self.alpha * self.psi()[:n_phi]
        if not self.ppu:
            _pclda.sample_phi(self.nwk, eta, self.key, stream(t, PHI), self.phi, T, n_topics=n_phi)
            return ab, self.phi
        # the urn draws the topics up to n_urn (those with tokens among them); the rows of
        # the tail topics among these are moved to tail_rows, the others drawn from the prior
        n_urn = max(K, self.n_active)
        n_tail = n_phi - K if tail.size else 0
        marks = np.ones((n_tail, W), dtype=np.uint8)
        marks[n_urn - K:len(candidates)] = candidates[n_urn - K:]
        tail_rows, rest = np.zeros((n_tail, W)), np.zeros(n_tail)
        _pchdp.sample_prior(n_urn, self.eta, self.key, stream(t, PHI), tail_rows[n_urn - K:], T,
                            marks[n_urn - K:], rest[n_urn - K:])
        rows, topics, vals = _pclda.sample_phi_urn(self.nwk, eta, self.key, stream(t, URN), T, n_topics=n_urn)
        if n_urn > K:
            words = np.repeat(np.arange(W), np.diff(rows))
            late = topics >= K
            tail_rows[topics[late] - K, words[late]] = vals[late]
            rows = np.concatenate([[0], np.cumsum(np.bincount(words[~late], minlength=W))]).astype(np.int64)
            topics, vals = topics[~late], vals[~late]
        return ab, UrnPhi(rows, topics, vals, tail_rows, marks, rest, self.eta)

    # -- on partitions (bnpcore.inference.batch): the sweep in three rounds ------------------
    def partition(self, start, stop):
        """The block's topic labels, the number of its first document (whose
        keyed streams it uses) and its token pointers from 0."""
        tp = self.tok_ptr
        return {"first_doc": int(start), "tok_ptr": tp[start:stop + 1] - tp[start],
                "z": self.labels[tp[start]:tp[stop]]}

    @staticmethod
    def table_step(part, ab, K, key, stream_):
        """Step 1 on a block: (the block, its table counts l_k given alpha Psi)."""
        l_k = np.zeros(K, dtype=np.int64)
        _pchdp.sample_tables(part["tok_ptr"], part["z"], ab, K, key, stream_, l_k, 1, part["first_doc"])
        return part, l_k

    @staticmethod
    def candidate_step(part, tail, key, sweep, n_words, ppu):
        """Step 3 on a block: (the block, its largest candidate tail index, or
        with the urn its marks of ``candidate_marks``)."""
        if ppu:
            found = candidate_marks([(part["first_doc"], part["indptr"], part["indices"], part["counts"])], tail,
                                    key, sweep, n_words)
        else:
            found = _pchdp.max_candidate(part["tok_ptr"], tail, key, stream(sweep, CANDIDATES), 1, part["first_doc"])
        return part, found

    @staticmethod
    def local_step(part, phi, ab, K, alpha, tail, key, sweep):
        """Steps 5 and 6 on a block (alias tables of a dense Phi, z | Phi,
        Psi): (the new block, the moves of n_wk and of n_k)."""
        W, C = len(phi.rows) - 1 if isinstance(phi, UrnPhi) else phi.shape[0], len(ab)
        z = part["z"].copy()
        moves, nk_moves = np.zeros((W, C), dtype=np.int32), np.zeros(C, dtype=np.int64)
        z_step((part["indptr"], part["indices"], part["counts"], part["tok_ptr"]), K, z_tables(phi, ab, K, 1), ab,
               alpha, tail, key, sweep, z, moves, nk_moves, 1, part["first_doc"])
        return dict(part, z=z), (moves, nk_moves)

    def iterate(self, parts, sampling=False):
        """``sweep`` with the labels on ``parts``, in three rounds: the blocks'
        table counts (summed), their candidate tail topics (the largest, or
        the union of the urn's marks), their z-step (the count moves summed);
        the serial draws between the rounds (concentrations, sticks, the topic
        slots, Phi) here, by ``draw_sticks`` and ``draw_phi``. Every kernel
        draws from the threaded sampler's stream, the serial draws come from
        the same generator in the same order, and the reductions are integer
        sums, a maximum and a union of marks, so the fit equals the local one
        bit for bit."""
        t, K, key = self.n_sweeps, self.n_active, self.key
        # the table counts and the candidates need the labels only, not the documents
        l_k = np.sum(parts.map(type(self).table_step, self.alpha * self.psi(), K, key, stream(t, TABLES),
                               documents=False, updates=False), axis=0)
        tick = time.perf_counter()
        K, tail = self.draw_sticks(l_k)
        client = time.perf_counter() - tick
        candidates = -1
        if tail.size:       # with the urn, the candidates' words: the documents too
            found = parts.map(type(self).candidate_step, tail, key, t, self.nwk.shape[0], self.ppu,
                              documents=self.ppu, updates=False)
            candidates = merge_marks(found, self.nwk.shape[0]) if self.ppu else max(found)
        tick = time.perf_counter()
        ab, phi = self.draw_phi(K, tail, candidates)
        client += time.perf_counter() - tick
        for moves, nk_moves in parts.map(type(self).local_step, phi, ab, K, self.alpha, tail, key, t):
            self.nwk += moves
            self.nk += nk_moves
        tick = time.perf_counter()
        record = self.end_sweep(l_k)
        record["client_seconds"] = client + time.perf_counter() - tick
        return record

    def gather(self, parts, bounds):
        tp = self.tok_ptr
        for p, part in enumerate(parts):
            self.labels[tp[bounds[p]]:tp[bounds[p + 1]]] = part["z"]

    def end_sweep(self, l_k):
        """Count the sweep (after the z-step); its diagnostics."""
        self.n_sweeps += 1
        return {"alpha": self.alpha, "gamma": self.gamma, "n_tables": int(l_k.sum()), "n_active": self.n_active,
                "log_lik": self.log_likelihood()}

    # -- the view of DirectAssignmentGibbs: occupied topics only, in label order ----
    def _occupied(self):
        return np.flatnonzero(self.nk)

    @property
    def n_components(self):
        return int(np.count_nonzero(self.nk))

    @property
    def topics(self):
        occ = self._occupied()
        return {"beta": self.psi()[occ], "n_k": self.nk[occ]}

    @property
    def beta_new(self):
        return float(1.0 - self.topics["beta"].sum())

    @property
    def z(self):
        relabel = np.full(self.nk.shape[0], -1, dtype=np.int32)
        occ = self._occupied()
        relabel[occ] = np.arange(len(occ), dtype=np.int32)
        return relabel[self.labels]

    def doc_counts(self):
        """n_jk of the current sample over the topic slots (D x C int32, built from the labels)."""
        ndk = np.empty((len(self.doc_lengths), self.nk.shape[0]), dtype=np.int32)
        _pclda.doc_counts(self.tok_ptr, self.labels, ndk, self.n_threads)
        return ndk

    def topic_word(self):
        """phi^s (K x n_words) of the current sample over the occupied topics."""
        occ = self._occupied()
        W = self.nwk.shape[0]
        return (self.nwk[:, occ].T + self.eta) / (self.nk[occ] + W * self.eta)[:, None]

    def predictive(self):
        """theta^s (n_docs x K) and phi^s (K x n_words) of the current sample over the occupied topics."""
        occ = self._occupied()
        theta = (self.doc_counts()[:, occ] + self.alpha * self.psi()[occ]) / (self.doc_lengths + self.alpha)[:, None]
        return theta, self.topic_word()

    def log_likelihood(self):
        """Collapsed log p(x | z) = sum_k log DM(n_k. | eta) of the current sample."""
        occ, W = self._occupied(), self.nwk.shape[0]
        per_word = np.empty(W)
        _pchdp.word_log_likelihood(self.nwk, self.n_active, self.eta, per_word, self.n_threads)
        return float(per_word.sum() + (gammaln(W * self.eta) - gammaln(self.nk[occ] + W * self.eta)).sum())


class PartiallyCollapsedGibbs(DirectAssignmentGibbs):
    """HDP topic model by the doubly sparse, data-parallel partially collapsed
    Gibbs sampler (PC-HDP) of Terenin, Magnusson, Jonsson & Draper (2020).

    The model is Teh et al.'s HDP: Psi ~ GEM(gamma) over labelled topics,
    theta_j ~ DP(alpha, Psi), phi_k ~ Dirichlet(eta), truncated at
    ``max_topics`` topics (the last stick fraction is 1). The sampler keeps the
    topics Phi and the global weights Psi explicitly and integrates theta out;
    each sweep draws, from full conditionals of p(z, Phi, Psi | w):

    * the table counts l_jk | z, Psi, each a sum of Bernoulli(alpha Psi_k /
      (alpha Psi_k + i)), i < n_jk (documents in parallel), then alpha | z, l
      (Teh et al. appendix A) and gamma | l (slice sampling, Psi integrated
      out), and the stick Psi_k = s_k prod_{i<k} (1 - s_i),
      s_k ~ Beta(1 + l_k, gamma + sum_{i>k} l_i);
    * Phi | z for the topics up to K* (one past the highest topic with
      tokens) or the split K below, whichever is larger (topics among them
      without tokens are kept, drawn from the prior, with the urn from its
      draw of no counts), and for the tail candidates (from the prior);
    * z | Phi, Psi: ``p(z_i = k) ∝ phi_{k,w_i} (alpha Psi_k + n_jk^{-i})``,
      documents in parallel (given Phi and Psi they are independent), split
      into the document's topics, a Walker alias table per word over the
      explicit topics 0..K-1, and one flag topic carrying the tail mass
      R = sum_{k >= K} Psi_k.

    The flag topic is a data augmentation: each token gets a candidate tail
    topic c, and the flag's weight is alpha R phi_{c,w}, phi_c a draw from
    Phi's conditional (the prior Dirichlet(eta) for a topic without tokens).
    The candidate's law given the token's topic s makes each token's move
    exact for any split K that does not depend on the labels the sweep moves:
    Psi_c / R if s < K; if s is a tail topic, s itself with probability alpha
    Psi_s / (n_js + alpha Psi_s) (n_js without the token), else Psi_c / R.
    K is the first topic from which the stick's remaining mass is at most
    ``TAIL_MASS`` = 1e-4 (a function of Psi), so topics with tokens may be in
    the tail. Splitting at K* instead (this sampler's earlier rule) biases the
    chain toward fewer topics: on two documents of 2 and 3 tokens (alpha = 1,
    gamma = 1.5, eta = 0.5, 400,000 sweeps, ``phi="dirichlet"``) it put 0.188
    of its samples on one topic and 0.306 on three, against the exact
    posterior's 0.181 and 0.315 (the split by Psi: 0.181 and 0.316). A token
    landing on the flag opens topic c, so K* grows as needed, up to
    ``max_topics``. Only the candidates drawn in a sweep get a
    topic (about 90 on KOS). With the urn, a candidate's row is drawn only at
    the m words where the z-step reads it (its tokens' words: 14 % of the
    entries on KOS), plus one Gamma((W - m) eta) for the mass of the others
    (the Dirichlet's aggregation property); when a token takes the topic, the
    rest of the row is drawn, that mass times a Dirichlet(eta) over the other
    words, once, by the first thread that needs it (the document's later
    tokens read the row at any word). Both steps are exact;
    ``phi="dirichlet"`` draws whole rows. The urn's rows of the tail topics
    with tokens are kept whole (W doubles each).

    ``phi="ppu"`` (the default, the paper's choice) draws the topics up to K*
    or K by the Poisson Polya urn: ``phi_kw ∝ Poisson(eta + n_kw)`` (normal,
    rounded, above a mean of 30). This is the paper's approximation of
    Dirichlet(eta + n_k.) (exact as the counts grow; with eta < 1 most entries
    are exactly 0, which makes Phi sparse: on KOS about 6 topics per word at
    eta = 0.01); the chain then targets an approximate posterior, which also depends on
    the split (an explicit topic without tokens gets an urn row, a tail
    candidate a Dirichlet(eta) row). At the small counts of the five-token
    corpus above (200,000 sweeps) the urn's error dominates: 0.229 of the
    samples on one topic and 0.295 on three (0.173 and 0.347 with the split
    at a mass of 0.01; 0.227 and 0.305 at K*), against the exact 0.181 and
    0.315. Phi is kept as each
    word's positive entries, so a token costs the topics in which its word has
    weight (no alias tables, no dense W x K arrays), and each word's row is
    drawn from its own streams, words in parallel. ``phi="dirichlet"`` draws
    exact Dirichlets, densely, and a token costs its document's topics plus an
    alias-table draw: the chain's stationary distribution is then the exact
    posterior (tested against enumeration, up to 400,000 sweeps, and with
    the concentrations resampled by Geweke's successive-conditional test).

    Mixing: a topic is born when a token takes a topic without tokens, an
    explicit one (between K* and K) or the flag's candidate, whose weight uses
    phi_c, one draw from the prior; with a small eta that draw puts almost
    all its mass on a few random words, so births are much rarer than in
    ``DirectAssignmentGibbs`` (whose new-topic weight uses the prior mean 1/W).
    On KOS (``benchmarks/bench_pchdp.py``, from 100 topics, the same prior)
    it ends with far fewer topics than G-HDP and a lower held-out score; a
    sweep costs less than G-HDP's and runs on several threads, but G-HDP
    passes PC-HDP's final held-out score in less time
    (``benchmarks/results/bench_pchdp_kos.txt``, docs/choosing.md). Since
    births are rare, start from more topics than the corpus needs and let the
    sampler empty the extra ones (``bench_pchdp_kos_init400.txt``). Fixing the
    concentrations does not close the gap, for either form of Phi
    (``bench_pchdp_kos_fixed.txt``).
    The urn's topics grow more slowly still: a token can move only to a topic
    whose urn row holds its word, and a word without counts in a topic is
    positive there with probability 1 - exp(-eta) a sweep. Given exact
    Dirichlet rows for every explicit topic, the urn's own z-step grew the
    topics as the exact form does; given them only for the topics without
    tokens, or exact draws only for the entries with counts (a topic's only
    token of word w otherwise keeps weight there with probability
    1 - exp(-(1 + eta)), about 0.64 a sweep), it did not
    (``bench_pchdp_kos_fixed.txt``).
    On a corpus of this size, and 2 cores, G-HDP is more accurate for the time. Topics
    that lose their tokens keep their label (relabelling would change the
    stick's prior) and are redrawn every sweep until tokens return.

    Every draw of the parallel steps comes from a keyed stream (document j,
    topic k or word w of sweep t; a token's candidate tail topic from its
    document's stream 6t + 2, the rest of a candidate's row from its topic's
    stream 6t + 5), and the serial O(K) draws from one numpy Generator, so a fit
    is bit-identical for any ``n_threads`` with the same ``random_state``.

    Memory: the state is one label per token (uint16 while ``max_topics`` <=
    65536, else int32), two offsets per document (16 bytes), the W x (topics
    used) counts and, with ``phi="dirichlet"``, W x (topics used) arrays of
    Phi and the alias tables; the table counts and
    the z-step rebuild each document's counts from its labels; with the urn,
    the tail topics' rows (W doubles each: those with tokens, the candidates)
    and the words they are read at (W bytes each). An on-disk corpus (``Corpus.open``) is read block by
    block, not kept resident (with the urn twice a sweep: the candidates'
    words, then the z-step).
    The peak memory of a fit stays below the size of the corpus's own files
    (docs/scaling.md gives the bytes per token found by
    ``benchmarks/bench_memory.py``). ``doc_topic_``
    (the final sample's proportions, D x K doubles) and the final labels kept
    for ``CollapsedVB(init_from=...)`` (4 bytes per token) are built at the end
    of the fit unless ``store_doc_topic=False``.

    Parameters
    ----------
    n_components : int, default 100
        Number of topics the tokens start in, uniformly at random (more than
        the corpus needs mixes faster: see Mixing above; on KOS after 200
        sweeps from 100 topics it scores better held-out than from one,
        ``benchmarks/results/bench_defaults_kos.txt``).
    max_topics : int in [2, 100000], default 1000
        Truncation of the stick: topics 0..max_topics-1 (the cap of K; the
        sampler allocates only the topics it uses). The serial steps of a
        sweep draw every stick, O(max_topics): at 10**6 a sweep of 30
        documents took seconds, hence the limit (``max_seconds`` is checked
        between sweeps).
    max_iter : int, default 500
    burn_in : int or "auto", default "auto"
        Sweeps before samples enter the predictive average (an integer must be
        < max_iter); "auto": half of ``max_iter``, so any ``max_iter`` works.
    eta : float, default 0.1
        Symmetric topic-word prior per word (the paper's beta is 0.01). With
        0.01 the sampler keeps many topics of about equal size, each mixing
        the corpus's common words with its theme; on the docstrings of
        Python's standard library (2,566 words) it ended with 141-145 topics,
        the largest 3% of the tokens, and c_npmi 0.079 (mean of seeds 0-2,
        ``benchmarks/results/bench_defaults_text.txt``) against 0.117 with 0.1 (101-106
        topics: a few larger ones take the common words and the others are
        sharper); exact Dirichlet topics (``phi="dirichlet"``) at 0.01 gave
        0.095, so the prior, more than the urn's slower moves, made the
        difference. 0.03, 0.05, 0.2 and 0.5 gave 0.097, 0.108, 0.114 and
        0.102; from 0.2 on the urn's rows are dense and a fit took three to
        four times as long. On KOS (6,906 words) 0.1 scores -7.343 held-out
        against 0.01's -7.386 (seed 0, ``benchmarks/results/bench_defaults_kos.txt``), with 103
        topics instead of 122 and about 1.8 times the CPU time. (Griffiths &
        Steyvers 2004 used 0.1 for LDA.)
    alpha, gamma : float or None, default None
        Document and top-level concentrations; None resamples them under
        ``alpha_prior`` / ``gamma_prior``.
    alpha_prior, gamma_prior : (shape, rate), default (4.0, 4.0) and (7.5, 7.5)
        Gamma priors; a resampled concentration starts at the prior mean.
    phi : {"ppu", "dirichlet"}, default "ppu"
        Poisson Polya urn (approximate, sparse) or
        exact Dirichlet topics.
    n_concentration_rounds : int in [1, 1000], default 5
        Auxiliary-variable / slice rounds per sweep for each resampled concentration.
    random_state : int, numpy.random.Generator or None
    n_threads : int or None, default None
        OpenMP threads (None: OMP_NUM_THREADS if set, else every cpu; -1:
        every cpu; 0, below -1 or not an integer: ValueError). The result does
        not depend on it.
    store_doc_topic : bool, default True
        Set ``doc_topic_`` and keep the final labels at the end of the fit.
        False keeps nothing per document or token in the fitted model (for
        corpora too large for them): ``doc_topic_`` is not set (call
        ``transform``), ``topic_sizes_`` come from the topic totals, and the
        model cannot start ``CollapsedVB(init_from=...)``.

    Attributes
    ----------
    As ``DirectAssignmentGibbs``: ``topics_``, ``weights_`` (Psi_k of the
    occupied topics), ``beta_new_`` (the rest of the stick), ``n_components_``,
    ``alpha_``, ``gamma_``, ``doc_topic_``, ``heldout_loglik_``,
    ``vocabulary_``; ``history_`` records per sweep ``n_components``,
    ``n_active`` (K*), ``alpha``, ``gamma``, ``n_tables``, ``log_lik``.

    References
    ----------
    A. Terenin, M. Magnusson, L. Jonsson and D. Draper (2020). Sparse parallel
    training of hierarchical Dirichlet process topic models. EMNLP 2020
    (arXiv:1906.02416).
    Teh, Jordan, Beal & Blei, "Hierarchical Dirichlet processes", JASA 2006.
    """

    max_steps = None            # DirectAssignmentGibbs's step budget and paper preset do not apply here
    paper_preset = None

    def __init__(self, n_components=100, max_topics=1000, max_iter=500, burn_in="auto", eta=0.1, alpha=None,
                 gamma=None, alpha_prior=(4.0, 4.0), gamma_prior=(7.5, 7.5), phi="ppu", n_concentration_rounds=5,
                 random_state=None, n_threads=None, store_doc_topic=True):
        self._store_params(locals())

    partitioned = True

    def _check_params(self):
        self._k0 = check_int(self.n_components, "n_components", 1)
        max_topics = check_int(self.max_topics, "max_topics", 2, maximum=MAX_TOPICS,
                               reason="the serial steps of a sweep draw every stick, O(max_topics)")
        if self._k0 >= max_topics:
            raise ValueError(f"n_components={self._k0} must be smaller than max_topics={max_topics}")
        max_iter = check_int(self.max_iter, "max_iter", 1)
        burn_in = check_burn_in(self.burn_in, max_iter)
        check_prior(self.eta, "eta")
        for name in ("alpha", "gamma"):
            if getattr(self, name) is not None:
                check_prior(getattr(self, name), name)
        check_gamma_prior(self.alpha_prior, "alpha_prior")
        check_gamma_prior(self.gamma_prior, "gamma_prior")
        if self.phi not in ("ppu", "dirichlet"):
            raise ValueError(f"phi must be 'ppu' or 'dirichlet', got {self.phi!r}")
        check_inner(self.n_concentration_rounds, "n_concentration_rounds", 1)
        if not isinstance(self.store_doc_topic, (bool, np.bool_)):
            raise TypeError(f"store_doc_topic must be True or False, got {self.store_doc_topic!r}")
        self._n_threads = effective_n_threads(self.n_threads)
        return {"max_iter": max_iter, "burn_in": burn_in}

    def _init_state(self, X, rng):
        settings, start = {"rounds": int(self.n_concentration_rounds)}, {}
        for name in ("alpha", "gamma"):
            shape, rate = check_gamma_prior(getattr(self, name + "_prior"), name + "_prior")
            fixed = getattr(self, name)
            settings[name + "_prior"] = (shape, rate) if fixed is None else None
            start[name] = shape / rate if fixed is None else float(fixed)
        # labels and their document offsets; the stick arrays; word counts of 2 K topic slots, Phi and alias tables
        check_memory(8 * X.n_tokens + 16 * X.n_docs + 48 * int(self.max_topics) + 48 * self._k0 * X.n_words,
                     f"n_components={self._k0}, max_topics={self.max_topics}", X)
        return PartiallyCollapsedHDPState(X, self._k0, float(self.eta), start["alpha"], start["gamma"],
                                          int(self.max_topics), self.phi == "ppu", settings, rng, self._n_threads)

    def _set_fitted(self, state, X):
        super()._set_fitted(state, X)
        warn_capacity(self, self.n_components_, int(self.max_topics), "max_topics")
