"""Direct-assignment Gibbs sampler for the HDP topic model (G-HDP).

Teh, Jordan, Beal & Blei (2006), section 5.3 and appendix A; used as G-HDP1 /
G-HDP100 by Teh, Kurihara & Welling (2007).
"""
import functools
from copy import deepcopy

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from bnpcore._defaults import check_burn_in
from bnpcore._validation import PRIOR_RANGE, check_inner, check_int, check_memory, check_prior, effective_n_threads
from bnpcore.base import TopicMixin
from bnpcore.corpus import as_corpus
from bnpcore.evaluation import token_log_likelihood
from bnpcore.inference import moves
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, Items, Number, OneOf, RandomGenerator,
                                     same_counts)
from bnpcore.kernels import _hdp_gibbs, _lda, _pchdp
from bnpcore.kernels.rng import dirichlet as _log_dirichlet_draw
from bnpcore.kernels.stirling import StirlingTable, MAX_N as _STIRLING_MAX_N
from bnpcore.models.lda import DelayedBlocks
from bnpcore.results import ResultsMixin

__all__ = ["DirectAssignmentGibbs", "resample_gamma", "resample_alpha", "in_prior_range"]


def check_gamma_prior(value, name, bounds=PRIOR_RANGE, reason=None):
    """A (shape, rate) pair of priors whose mean, the concentration the
    sampler starts from, lies in ``bounds`` (docs/numerics.md)."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (shape, rate) pair, got {value!r}") from None
    a, b = check_prior(a, f"{name}[0] (shape)"), check_prior(b, f"{name}[1] (rate)")
    check_prior(a / b, f"the mean of {name} (shape / rate)", bounds=bounds, reason=reason)
    return a, b


def in_prior_range(concentration):
    """A resampled concentration kept in PRIOR_RANGE, where every formula of the
    samplers is finite: a Gamma draw of a tiny shape underflows to 0 (an alpha
    of 0 makes an empty document's proportions 0/0)."""
    return float(np.clip(concentration, *PRIOR_RANGE))


def resample_gamma(gamma, n_topics, n_tables, prior, rng, n_rounds=1):
    """Escobar & West (1995) auxiliary-variable update of the top-level concentration.

    Given K topics and m.. tables (p(K | gamma, m..) ∝ gamma^K Gamma(gamma) /
    Gamma(gamma + m..)) and a Gamma(a, b) prior (shape, rate), each round draws
    ``xi ~ Beta(gamma + 1, m..)`` and then gamma from the two-component Gamma
    mixture ``odds = (a + K - 1) / (m.. (b - log xi))``:
    Gamma(a + K, b - log xi) with probability odds / (1 + odds), else
    Gamma(a + K - 1, b - log xi).
    """
    a, b = prior
    for _ in range(n_rounds):
        if n_tables == 0:
            return in_prior_range(rng.gamma(a, 1.0 / b))
        log_xi = np.log(rng.beta(gamma + 1.0, n_tables))
        rate = b - log_xi
        odds = (a + n_topics - 1.0) / (n_tables * rate)
        shape = a + n_topics if rng.random() * (1.0 + odds) < odds else a + n_topics - 1.0
        gamma = in_prior_range(rng.gamma(shape, 1.0 / rate))
    return gamma


def resample_alpha(alpha, n_tables, doc_lengths, prior, rng, n_rounds=1):
    """Teh et al. (2006) appendix A update of the document concentration shared by
    all documents: ``w_j ~ Beta(alpha + 1, N_j)``, ``s_j ~ Bernoulli(N_j / (N_j + alpha))``,
    ``alpha ~ Gamma(a + m.. - sum s_j, b - sum log w_j)`` (empty documents carry no
    information and are skipped)."""
    a, b = prior
    n = np.asarray(doc_lengths, dtype=np.float64)
    n = n[n > 0]
    for _ in range(n_rounds):
        log_w = np.log(rng.beta(alpha + 1.0, n))
        s = rng.random(n.shape[0]) * (n + alpha) < n
        alpha = in_prior_range(rng.gamma(a + n_tables - s.sum(), 1.0 / (b - log_w.sum())))
    return alpha


class TrainingPredictive:
    """``heldout_log_likelihood`` of the collapsed HDPs: on the training documents
    the model's own predictive of them ([CVHDP] eqs 16-17: ``doc_topic_`` with
    ``topics_``, or for a sampler fitted with ``heldout`` the average over the
    samples after burn-in, ``heldout_loglik_``); on other documents, and on the
    training documents of a model saved without ``doc_topic_`` (the default of
    ``save``), the proportions ``transform`` infers (``TopicMixin``)."""

    def heldout_log_likelihood(self, observed, heldout):
        """Per-word log-likelihood of ``heldout`` given ``observed`` tokens of the
        same documents (see the class docstring)."""
        self._check_fitted()
        observed = as_corpus(observed)
        if observed.fingerprint() != getattr(self, "_train_fingerprint", None):
            return super().heldout_log_likelihood(observed, heldout)
        heldout = self._check_input(heldout)
        if heldout.n_docs != observed.n_docs:
            raise ValueError(f"heldout has {heldout.n_docs} documents, observed has {observed.n_docs}")
        averaged = getattr(self, "heldout_loglik_", None)
        if averaged is not None and heldout.fingerprint() == self._heldout_fingerprint:
            return averaged
        if not hasattr(self, "doc_topic_"):                     # store_doc_topic=False
            return super().heldout_log_likelihood(observed, heldout)
        return token_log_likelihood(self.doc_topic_, self.topics_, heldout, getattr(self, "n_threads", None))


# rows of doc_topic_ reordered at a time
_ROW_BLOCK = 1 << 16
# labels handled per block of this many tokens (drawn, relabelled): no temporary per token
_LABEL_BLOCK = 1 << 22


def settings_invariants(settings):
    """The specs of the samplers' ``settings`` (hyperpriors and rounds of the concentrations)."""
    if not isinstance(settings, dict) or not {"alpha_prior", "gamma_prior", "rounds"} <= set(settings):
        raise ValueError("the settings must be a dict of alpha_prior, gamma_prior and rounds")
    prior = Items(Number(PRIOR_RANGE[0], PRIOR_RANGE[1]), Number(PRIOR_RANGE[0], PRIOR_RANGE[1]))
    for name in ("alpha_prior", "gamma_prior"):
        yield f"settings[{name!r}]", OneOf(None) if settings[name] is None else prior, settings[name]
    yield "settings['rounds']", Number(0, integer=True), settings["rounds"]


def relabel(z, mapping):
    """``z[:] = mapping[z]`` in place, a block of labels at a time (no second array of labels)."""
    mapping = np.asarray(mapping).astype(np.int32)
    for start in range(0, len(z), _LABEL_BLOCK):
        block = z[start:start + _LABEL_BLOCK]
        block[:] = mapping[block]


class _GibbsState(BatchState):
    """The direct-assignment sampler's state: topic indicators z of the tokens
    (int32, in the corpus's CSR token order), the counts n_wk, n_k, the table
    counts m_k and the weights beta_k of the instantiated topics (a
    moves.Components table in the direct layout: the kernel creates topics in
    place and ``moves.compact`` drops empty ones and sorts by size after every
    sweep), beta_new and the concentrations. No counts per document: the kernels
    rebuild a document's n_jk from its labels when they reach it, so the state
    is 4 bytes per token, 8 per document (offsets) and W x (topic slots)."""

    _transient = ("corpus", "tok_ptr", "table", "lists")
    layout = 2          # 1 kept dense per-document counts n_jk; 2 rebuilds them from the labels
    n_threads = 1       # the sequential sweep's; the delayed schedule's blocks run in parallel
    sequential_sweep = True     # each token's draw reads the counts after the previous token's

    def __init__(self, corpus, k0, eta_tot, alpha, gamma, settings, rng):
        self.eta, self.eta_tot = eta_tot / corpus.n_words, eta_tot
        self.alpha, self.gamma, self.settings, self.rng = alpha, gamma, settings, rng
        self.steps = 0                 # sum over sweeps of the number of topics ([CVHDP] Figure 2)
        self.restore(corpus)
        n_tok = int(self.tok_ptr[-1])
        z = np.zeros(n_tok, dtype=np.int32)
        if k0 > 1:                     # the draws of rng.integers(0, k0, n_tok), block by block
            for start in range(0, n_tok, _LABEL_BLOCK):
                stop = min(start + _LABEL_BLOCK, n_tok)
                z[start:stop] = rng.integers(0, k0, size=stop - start, dtype=np.int32)
        self.assign(z, np.full(k0, 1.0 / (k0 + 1)), 1.0 / (k0 + 1))

    def assign(self, z, beta, beta_new):
        """Set the sample to topic indicators ``z`` (in the corpus's token order)
        with weights ``beta`` of topics 0..K-1 and ``beta_new``: the counts are
        recomputed, and topics without tokens give their weight to beta_new."""
        K = len(beta)
        kcap = max(16, 2 * K)
        self.z = np.asarray(z, dtype=np.int32)
        n_wk, n_k = np.zeros((self.corpus.n_words, kcap), dtype=np.int32), np.zeros(kcap, dtype=np.int64)
        for _, chunk, z in self._blocks():
            _lda.count_word_topics(chunk.indptr, chunk.indices, chunk.counts, z, n_wk, n_k)
        self.topics = moves.Components({"n_wk": n_wk, "n_k": n_k, "beta": np.zeros(kcap),
                                        "m_k": np.zeros(kcap, dtype=np.int64)}, axes={"n_wk": 1}, n=K)
        weights = self.topics.arrays["beta"]
        weights[:K] = beta
        empty = self.topics["n_k"] == 0
        self.beta_new = beta_new + weights[:K][empty].sum()
        weights[:K][empty] = 0.0
        self._compact()

    def restore(self, corpus):
        super().restore(corpus)
        lengths = corpus.doc_lengths
        self.tok_ptr = np.concatenate([[0], np.cumsum(lengths)])
        self.table = StirlingTable(int(min(lengths.max(), _STIRLING_MAX_N)))
        self.lists = None
        self.__dict__.setdefault("steps", 0)     # checkpoints older than max_steps count from here
        saved = getattr(self, "topics", None)
        if isinstance(saved, dict):              # from a checkpoint
            n = saved.pop("n")
            saved.pop("n_jk", None)              # older checkpoints also stored the document counts
            self.topics = moves.Components(saved, axes={"n_wk": 1}, n=n)

    def _blocks(self):
        """``(first document, chunk, its labels)`` over the corpus in blocks
        (``Corpus.blocks``: an on-disk corpus is not left resident)."""
        for start, chunk, tokens in self.corpus.blocks():
            yield start, chunk, self.z[tokens]

    def state_dict(self):
        saved = super().state_dict()
        saved["topics"] = {"n": self.topics.n, **self.topics.arrays}
        return saved

    def invariants(self, corpus):
        positive = Number(np.finfo(float).tiny)
        for name in ("eta", "eta_tot", "alpha", "gamma"):
            yield name, positive
        yield "rng", RandomGenerator()
        yield "steps", Number(0, integer=True), self.__dict__.get("steps", 0)    # older checkpoints: none
        yield "beta_new", Number(0.0, 1.0)
        yield from settings_invariants(self.settings)
        t = self.topics
        if not isinstance(t, dict) or not {"n", "n_wk", "n_k", "beta", "m_k"} <= set(t):
            raise ValueError("the topics must be a dict of n, n_wk, n_k, beta and m_k")
        yield "topics['n_k']", Array("int64", (None,), 0), t["n_k"]
        cap = len(t["n_k"])
        yield "topics['n']", Number(0, cap, integer=True), t["n"]
        yield "topics['n_wk']", Array("int32", (corpus.n_words, cap), 0), t["n_wk"]
        yield "topics['beta']", Array("float64", (cap,), 0.0, 1.0), t["beta"]
        yield "topics['m_k']", Array("int64", (cap,), 0), t["m_k"]
        yield "z", Array("int32", (corpus.n_tokens,), 0, t["n"] - 1)

    def check_counts(self, corpus):
        t = self.topics
        n_wk, n_k = np.zeros_like(t["n_wk"]), np.zeros_like(t["n_k"])
        self.corpus, self.tok_ptr = corpus, np.concatenate([[0], np.cumsum(corpus.doc_lengths)])
        for _, chunk, z in self._blocks():
            _lda.count_word_topics(chunk.indptr, chunk.indices, chunk.counts, z, n_wk, n_k)
        same_counts("topics['n_wk']", t["n_wk"], n_wk)
        same_counts("topics['n_k']", t["n_k"], n_k)

    @property
    def n_components(self):
        return self.topics.n

    def _word_lists(self):
        """``_hdp_gibbs.word_lists`` of the current counts, in the buffers of the last
        sweep when the capacity is the same (fresh memory every sweep costs page faults)."""
        n_wk = self.topics.arrays["n_wk"]
        if self.lists is not None and self.lists[0].shape[2] != n_wk.shape[1]:
            self.lists = None
        self.lists = _hdp_gibbs.word_lists(n_wk, self.topics.n, self.n_threads, self.lists)
        return self.lists

    def priors(self):
        """The hyperparameters as the kernels take them."""
        return {"alpha": self.alpha, "gamma": self.gamma, "eta": self.eta}

    def _compact(self):
        relabel(self.z, moves.compact(self.topics, self.topics["n_k"]))

    def sweep(self):
        self._sample_topics()
        return self._sample_globals()

    def _sample_topics(self):
        rng, a, comp = self.rng, self.topics.arrays, self.topics
        # 1. topic indicators, block by block (growing the table when the kernel runs
        # out of slots; the word lists are kept from block to block)
        beta_new, lists = self.beta_new, None
        for _, chunk, z in self._blocks():
            next_tok = 0
            while True:
                if lists is None:
                    lists = self._word_lists()
                next_tok, comp.n, beta_new = _hdp_gibbs.gibbs_sweep(
                    chunk.indptr, chunk.indices, chunk.counts, z, (a["n_wk"], a["n_k"], a["beta"]), beta_new,
                    comp.n, dict(self.priors(), reuse_holes=True), next_tok, lists, rng)
                if next_tok == len(z):
                    break
                comp.reserve(2 * comp.capacity)
                a, lists = comp.arrays, None
        self.beta_new = beta_new
        self._compact()

    def _sample_globals(self, m_k=None):
        """Steps 2-5 of the sweep on the current labels: tables, global weights,
        concentrations (``m_k``: the table counts, drawn where the labels are)."""
        rng, a, comp = self.rng, self.topics.arrays, self.topics
        K = comp.n
        self.steps += K
        # 2. tables, 3. global weights
        if m_k is None:
            self._draw_tables(a, K)
        else:
            a["m_k"][:K], a["m_k"][K:] = m_k, 0
        shape = np.append(a["m_k"][:K].astype(np.float64), self.gamma)
        beta = np.exp(_log_dirichlet_draw(shape, 1, rng, log=True)[0])
        a["beta"][:K], self.beta_new = beta[:K], beta[K]
        n_tables = int(a["m_k"][:K].sum())
        # 4. gamma, 5. alpha
        s = self.settings
        if s["gamma_prior"] is not None:
            self.gamma = resample_gamma(self.gamma, K, n_tables, s["gamma_prior"], rng, s["rounds"])
        if s["alpha_prior"] is not None:
            self.alpha = resample_alpha(self.alpha, n_tables, np.diff(self.tok_ptr), s["alpha_prior"], rng,
                                        s["rounds"])
        return {"alpha": self.alpha, "gamma": self.gamma, "n_tables": n_tables, "steps": self.steps,
                "log_lik": self.log_likelihood()}

    def _draw_tables(self, a, K):
        """m_k of the current labels (Antoniak draws, ``_hdp_gibbs.draw_tables``)."""
        _hdp_gibbs.draw_tables(self.tok_ptr, self.z, self.alpha * a["beta"], K, self.table, self.rng, a["m_k"])

    def doc_topic(self):
        """theta^s (n_docs x K) of the current sample ([CVHDP] eq 17), counted from
        the labels into the one D x K array returned."""
        K = self.topics.n
        theta = np.zeros((len(self.tok_ptr) - 1, K))
        _lda.doc_topic_counts(self.tok_ptr, self.z, np.arange(K), theta)
        theta += self.alpha * self.topics["beta"]
        theta /= (np.diff(self.tok_ptr) + self.alpha)[:, None]
        return theta

    def topic_word(self):
        """phi^s (K x n_words) of the current sample ([CVHDP] eq 17)."""
        t = self.topics
        return (t["n_wk"].T + self.eta) / (t["n_k"] + self.eta_tot)[:, None]

    def predictive(self):
        """theta^s (n_docs x K) and phi^s (K x n_words) of the current sample ([CVHDP] eq 17)."""
        return self.doc_topic(), self.topic_word()

    def log_likelihood(self):
        """Collapsed log p(x | z) = sum_k [log DM(n_k. | eta)] of the current sample."""
        t = self.topics
        per_word = np.empty(self.corpus.n_words)
        _pchdp.word_log_likelihood(t.arrays["n_wk"], t.n, self.eta, per_word, self.n_threads)
        return float(per_word.sum() + (gammaln(self.eta_tot) - gammaln(t["n_k"] + self.eta_tot)).sum())


# the "match" rule merges two blocks' new topics whose word counts have at least this cosine similarity
_MATCH_MIN = 0.5


def _norms(counts):
    """Euclidean norms of the columns of a sparse integer matrix (exact sums of squares)."""
    return np.sqrt(np.asarray(counts.multiply(counts).sum(axis=0), dtype=np.float64).ravel())


class _DelayedGibbsState(DelayedBlocks, _GibbsState):
    """G-HDP with the delayed schedule (AD-HDP; Newman, Asuncion, Smyth & Welling
    2009, section 4): step 1 of the sweep runs the documents in ``n_threads``
    blocks of about equal numbers of tokens (``token_blocks``), each against its own copy of the topic table
    (``_hdp_gibbs.delayed_sweep``); the copies' changes are then merged into
    the shared table (``_merge``), and steps 2-5 run on the merged state as in
    the sequential sampler. The blocks' tables (counts and word lists of
    capacity at least the shared one's) are kept between sweeps, not in
    checkpoints. One block: the sequential sweep, draw for draw."""

    _transient = _GibbsState._transient + ("blocks", "copies")

    def __init__(self, corpus, k0, eta_tot, alpha, gamma, settings, rng, n_threads, new_topics):
        self.n_threads, self.new_topics = int(n_threads), new_topics
        super().__init__(corpus, k0, eta_tot, alpha, gamma, settings, rng)

    def invariants(self, corpus):
        yield from super().invariants(corpus)
        yield "new_topics", OneOf("match", "separate")

    def sweep(self):
        record = super().sweep()
        record["new_topics"], record["matched_topics"] = getattr(self, "_births", (0, 0))
        return record

    def _tables(self, kcap):
        """Zero tables of the blocks (empty word lists) with ``kcap`` slots."""
        T, W = self.n_threads, self.corpus.n_words
        return {"n_wk": np.zeros((T, W, kcap), np.int32), "n_k": np.zeros((T, kcap), np.int64),
                "beta": np.zeros((T, kcap)), "lists": np.zeros((T, 2, W, kcap), np.int32),
                "wlen": np.zeros((T, W), np.int32), "beta_new": np.zeros(T), "k_used": np.zeros(T, np.int64),
                "next_tok": np.zeros(T, np.int64), "streams": np.zeros((T, _hdp_gibbs.STREAM_ROW), np.uint8)}

    def _grow(self, old):
        """The blocks' tables with twice the slots, their state kept (lists rebuilt)."""
        kcap = old["n_wk"].shape[2]
        new = self._tables(2 * kcap)
        for name in ("n_wk", "n_k", "beta"):
            new[name][..., :kcap] = old[name]
        for name in ("beta_new", "k_used", "next_tok"):
            new[name][:] = old[name]
        new["streams"] = old["streams"]        # the same memory: a stream's state points into itself
        for t in range(self.n_threads):
            new["lists"][t], new["wlen"][t] = _hdp_gibbs.word_lists(new["n_wk"][t], int(new["k_used"][t]))
        return new

    def _sweep_args(self, copies):
        return (copies["n_wk"], copies["n_k"], copies["beta"], copies["lists"], copies["wlen"], copies["beta_new"],
                copies["k_used"], copies["next_tok"], copies["streams"])

    def _sample_topics(self):
        c, comp, T = self.corpus, self.topics, self.n_threads
        K, n_tok = comp.n, np.diff(self.blocks[1])
        lists = self._word_lists()
        if T == 1:          # the block's table is the shared one, grown in place
            run = {"beta_new": np.array([self.beta_new]), "k_used": np.array([K], dtype=np.int64),
                   "next_tok": np.zeros(1, np.int64), "streams": np.zeros((1, _hdp_gibbs.STREAM_ROW), np.uint8)}
            while True:
                a = comp.arrays
                run.update(n_wk=a["n_wk"][None], n_k=a["n_k"][None], beta=a["beta"][None], lists=lists[0][None],
                           wlen=lists[1][None])
                _hdp_gibbs.delayed_sweep(c.indptr, c.indices, c.counts, self.blocks, self.z,
                                         (a["n_wk"], a["n_k"], a["beta"], *lists, self.beta_new, comp.n),
                                         self._sweep_args(run), self.priors(), False, 0, self.rng, 1)
                comp.n = int(run["k_used"][0])
                if run["next_tok"][0] == n_tok[0]:
                    break
                comp.reserve(2 * comp.capacity)
                lists = self._word_lists()
            self.beta_new = float(run["beta_new"][0])
            self._compact()
            return
        copies = self.copies
        if copies is None or copies["n_wk"].shape[2] < comp.capacity:
            copies = self._tables(comp.capacity)
        a = comp.arrays
        key, fresh = int(self.rng.integers(0, 1 << 63)), True
        while True:
            _hdp_gibbs.delayed_sweep(c.indptr, c.indices, c.counts, self.blocks, self.z,
                                     (a["n_wk"], a["n_k"], a["beta"], *lists, self.beta_new, K),
                                     self._sweep_args(copies), self.priors(), fresh, key, self.rng, T)
            fresh = False
            if np.array_equal(copies["next_tok"], n_tok):
                break
            copies = self._grow(copies)
        self.copies = copies
        self._merge(copies, lists, K)
        self._compact()

    def _draw_tables(self, a, K):
        """Blocks of documents drawn in parallel from keyed streams (one block: the sequential draws)."""
        if self.n_threads == 1:
            return super()._draw_tables(a, K)
        m_k = np.zeros((self.n_threads, K), dtype=np.int64)
        _hdp_gibbs.draw_tables_blocks(self.tok_ptr, self.z, self.alpha * a["beta"], K, self.table, self.blocks[0],
                                      int(self.rng.integers(0, 1 << 63)), m_k, self.n_threads)
        a["m_k"][:K] = m_k.sum(axis=0)
        a["m_k"][K:] = 0

    def _place_births(self, births, K):
        """Shared slot of every block's new topics (``births[t]``: block t's new
        topics' word counts, W x its number of new topics): after the K shared
        topics, block by block ("separate"), or, "match" (Newman et al.'s rule),
        each block's new topics first matched greedily to the earlier blocks' by
        the cosine similarity of their word counts (pairs in decreasing
        similarity, at least _MATCH_MIN, each topic in one pair), the unmatched
        ones appended. Only pairs that share a word are scored (the others have
        similarity 0), on sparse counts, and only once two blocks' new topics
        share a word: a new topic holds a few words, so matching costs about the
        number of the new topics' counts, not W x their number squared."""
        targets, n = [], K
        having = [t for t, counts in enumerate(births) if counts.shape[1]]
        match = self.new_topics == "match" and len(having) > 1
        # match: the new shared topics' slots, their word counts (W x P: the first block's dense,
        # then sparse) and the words they hold
        slots_of, placed, seen = [], None, np.zeros(births[0].shape[0] if births else 0, dtype=bool)
        for t, counts in enumerate(births):
            m = counts.shape[1]
            slots = np.full(m, -1, dtype=np.int64)
            into = np.full(m, -1, dtype=np.int64)       # match: the column of ``placed`` each topic joins
            mine = None
            if match and m:
                words = np.nonzero(counts)[0]              # (repeated for a word of several topics)
                if seen[words].any():                   # a pair shares a word: score the pairs that do
                    mine = sp.csc_matrix(counts, dtype=np.int64)
                    placed = sp.csc_matrix(placed, dtype=np.int64)
                    self._match(mine, placed, slots_of, slots, into)
                seen[words] = True
            fresh = np.flatnonzero(into < 0)
            slots[fresh] = n + np.arange(len(fresh))
            n += len(fresh)
            targets.append(slots)
            if match and m and t < having[-1]:          # the later blocks' topics are matched to these too
                into[fresh] = len(slots_of) + np.arange(len(fresh))
                slots_of.extend(slots[fresh].tolist())
                if placed is None:
                    placed = counts
                    continue
                mine = sp.csc_matrix(counts, dtype=np.int64) if mine is None else mine
                assign = sp.csc_matrix((np.ones(m, dtype=np.int64), (np.arange(m), into)), shape=(m, len(slots_of)))
                placed = sp.hstack([sp.csc_matrix(placed, dtype=np.int64),
                                    sp.csc_matrix((counts.shape[0], len(fresh)), dtype=np.int64)],
                                   format="csc") + mine @ assign
        return targets, n

    @staticmethod
    def _match(mine, placed, slots_of, slots, into):
        """The "match" pairs of one block's new topics (``mine``, W x m) and the
        earlier blocks' (``placed``, W x P, slots ``slots_of``): ``into[i]`` and
        ``slots[i]`` set to the column and slot that topic i joins."""
        P = placed.shape[1]
        dots = (mine.T @ placed).tocoo()                # integer sums: the dense formula's values exactly
        dots.sum_duplicates()
        i, j = dots.row.astype(np.int64), dots.col.astype(np.int64)
        sim = dots.data.astype(np.float64) / (_norms(mine)[i] * _norms(placed)[j])
        keep = sim >= _MATCH_MIN
        i, j, sim = i[keep], j[keep], sim[keep]
        used = np.zeros(P, dtype=bool)
        for p in np.lexsort((i * P + j, -sim)):         # decreasing similarity, ties in row-major order
            if into[i[p]] < 0 and not used[j[p]]:
                into[i[p]], used[j[p]] = j[p], True
                slots[i[p]] = slots_of[j[p]]

    def _merge(self, copies, lists, K):
        """The shared table and labels after the blocks' sweeps: n_wk and n_k plus
        every block's change, each block's new topics placed by ``_place_births``
        and its tokens relabelled; the weights are the shared ones, a new topic's
        its block's (summed over matched blocks), those of topics left without
        tokens given to beta_new, all renormalised to sum to 1 (only the table
        draws use them before they are resampled)."""
        comp, T = self.topics, self.n_threads
        used = copies["k_used"]
        births = [np.arange(K, k)[copies["n_k"][t, K:k] > 0] for t, k in enumerate(used)]
        targets, G = self._place_births([copies["n_wk"][t][:, b] for t, b in enumerate(births)], K)
        n_births = sum(len(b) for b in births)
        self._births = n_births, n_births - (G - K)
        comp.n = K
        comp.reserve(G)
        a = comp.arrays
        slot_map = np.full((T, copies["n_wk"].shape[2]), -1, dtype=np.int64)
        slot_map[:, :K] = np.arange(K)
        for t in range(T):
            slot_map[t, births[t]] = targets[t]
        _hdp_gibbs.delayed_merge(a["n_wk"], *lists, copies["n_wk"], copies["lists"], copies["wlen"], slot_map,
                                 self.n_threads)
        n_k, beta = a["n_k"], a["beta"]
        n_k[:K] = (1 - T) * n_k[:K] + copies["n_k"][:, :K].sum(axis=0)
        for t in range(T):
            np.add.at(n_k, targets[t], copies["n_k"][t, births[t]])
            np.add.at(beta, targets[t], copies["beta"][t, births[t]])
            z = self.z[self.blocks[1][t]:self.blocks[1][t + 1]]
            new = z >= K
            z[new] = slot_map[t, z[new]]
        comp.n = G
        self._settle_weights()

    def _settle_weights(self):
        """After a merge: the weights of topics left without tokens given to
        beta_new, all renormalised to sum to 1."""
        G, a = self.topics.n, self.topics.arrays
        n_k, beta = a["n_k"], a["beta"]
        dead = n_k[:G] == 0
        beta_new = self.beta_new + beta[:G][dead].sum()
        beta[:G][dead] = 0.0
        total = beta[:G].sum() + beta_new
        beta[:G] /= total
        self.beta_new = beta_new / total

    # -- on partitions (bnpcore.inference.batch; bnpcore.distributed): AD-HDP on Dask workers --
    # A sweep is two rounds. 1: every partition sweeps its documents against its own copy of the
    # shared table (``local_step``: n_wk, n_k, the weights, beta_new; a Dask worker's copy) and
    # returns the moves of the shared topics' counts and its new topics; the client merges them by
    # the threaded blocks' rule (``_place_births``, ``_settle_weights``), compacts the table and
    # sends each partition the map of its slots to the merged ones. 2: every partition relabels its
    # tokens and draws its documents' table counts (``table_step``); the client sums them and
    # resamples the weights and concentrations (``_sample_globals``). One partition is the
    # one-block schedule, i.e. the sequential sweep draw for draw: the state's generator travels
    # there and back, and the copy becomes the table as it is (holes reused).
    def partition(self, start, stop):
        """The block's topic labels, its first document (its streams' key) and its token pointers from 0."""
        tp = self.tok_ptr
        return {"first_doc": int(start), "tok_ptr": tp[start:stop + 1] - tp[start],
                "z": self.z[tp[start]:tp[stop]]}

    @staticmethod
    def local_step(part, n_wk, n_k, beta, beta_new, capacity, priors, rng):
        """``gibbs_sweep`` of a block against its copy of the shared table (the
        K shared topics' ``n_wk`` (W x K), ``n_k`` and weights, in a table of
        ``capacity`` slots), drawing from ``rng`` (a Generator, copied and
        returned: one partition) or from the generator seeded with (``rng``,
        first document) (an int key). Returns (the new partition, output): one
        partition, (the copy's n_wk, n_k and weights over its slots in use, its
        capacity, its beta_new and the advanced generator); several, (the moves
        of the shared topics' n_wk (W x K int32) and n_k, the block's slots that
        hold new topics, their n_wk columns, n_k and weights). One partition
        reuses holes as the sequential sweep does; of several, each appends its
        new topics after the K shared slots (``reuse_holes`` false, as the
        threaded blocks do), so that slot k < K is shared topic k (a shared
        topic the block emptied: its move is minus its counts)."""
        single = isinstance(rng, np.random.Generator)
        rng = deepcopy(rng) if single else np.random.default_rng([rng, part["first_doc"]])
        settings = dict(priors, reuse_holes=single)
        z = part["z"].copy()
        (W, K), cap = n_wk.shape, capacity
        table = [np.zeros((W, cap), np.int32), np.zeros(cap, np.int64), np.zeros(cap)]
        table[0][:, :K], table[1][:K], table[2][:K] = n_wk, n_k, beta
        lists, k_used, mass, tok = _hdp_gibbs.word_lists(table[0], K), K, beta_new, 0
        while True:
            tok, k_used, mass = _hdp_gibbs.gibbs_sweep(part["indptr"], part["indices"], part["counts"], z, tuple(table),
                                                       mass, k_used, settings, tok, lists, rng)
            if tok == len(z):
                break
            cap *= 2                        # out of slots: twice as many, as the sequential sweep grows its table
            grown = [np.zeros((W, cap), np.int32), np.zeros(cap, np.int64), np.zeros(cap)]
            grown[0][:, :cap // 2], grown[1][:cap // 2], grown[2][:cap // 2] = table
            table, lists = grown, _hdp_gibbs.word_lists(grown[0], k_used)
        new = dict(part, z=z)
        n_wk_t, n_k_t, beta_t = table
        if single:
            return new, ((n_wk_t[:, :k_used], n_k_t[:k_used], beta_t[:k_used]), cap, mass, rng)
        births = K + np.flatnonzero(n_k_t[K:k_used] > 0)
        return new, (n_wk_t[:, :K] - n_wk, n_k_t[:K] - n_k, births, n_wk_t[:, births], n_k_t[births], beta_t[births])

    @staticmethod
    def table_step(part, ab, K, rng, mapping):
        """Relabel a block's tokens by ``mapping`` (its slots -> the merged,
        compacted table's) and draw its documents' table counts (``draw_tables``
        given ``ab`` = alpha beta), from ``rng`` as in ``local_step``. Returns
        (the new partition, (m_k of the block, the advanced generator or None))."""
        single = isinstance(rng, np.random.Generator)
        rng = deepcopy(rng) if single else np.random.default_rng([rng, part["first_doc"]])
        z, tp = part["z"].copy(), part["tok_ptr"]
        relabel(z, mapping)
        m_k = np.zeros(K, dtype=np.int64)
        longest = int(np.diff(tp).max(initial=0))
        _hdp_gibbs.draw_tables(tp, z, ab, K, _stirling_table(min(longest, _STIRLING_MAX_N)), rng, m_k)
        return dict(part, z=z), (m_k, rng if single else None)

    def iterate(self, parts, sampling=False):
        """One sweep on ``parts`` in the two rounds above; its record, as ``sweep``'s."""
        comp, K = self.topics, self.topics.n
        single = len(parts.bounds) == 2
        a = comp.arrays
        key = self.rng if single else int(self.rng.integers(0, 1 << 63))
        # the shared topics only (the slots above them are empty): W x K counts out
        outs = parts.map(type(self).local_step, np.ascontiguousarray(a["n_wk"][:, :K]), a["n_k"][:K], a["beta"][:K],
                         self.beta_new, comp.capacity, self.priors(), key)
        if single:      # the copy becomes the table (its slots above k_used are empty, as the table's are)
            (n_wk, n_k, beta), capacity, self.beta_new, rng = outs[0]
            self.rng.bit_generator.state = rng.bit_generator.state
            comp.reserve(capacity)
            a, k_used = comp.arrays, len(n_k)
            a["n_wk"][:, :k_used], a["n_k"][:k_used], a["beta"][:k_used] = n_wk, n_k, beta
            comp.n, self._births = k_used, (0, 0)
            maps = {0: (moves.compact(comp, comp["n_k"]),)}
        else:
            maps = self._merge_partitions(outs, K)
        key = self.rng if single else int(self.rng.integers(0, 1 << 63))
        found = parts.map(type(self).table_step, self.alpha * comp.arrays["beta"], comp.n, key, each=maps,
                          documents=False)
        if single:
            self.rng.bit_generator.state = found[0][1].bit_generator.state
        record = self._sample_globals(np.sum([m_k for m_k, _ in found], axis=0))
        record["new_topics"], record["matched_topics"] = self._births
        if sampling:
            self.collect()
        return record

    def _merge_partitions(self, outs, K):
        """``_merge`` of the partitions' outputs (``local_step``), then the table
        compacted; returns each partition's map of its slots to the new table's."""
        comp = self.topics
        births = [out[3] for out in outs]
        targets, G = self._place_births(births, K)
        n_births = sum(b.shape[1] for b in births)
        self._births = n_births, n_births - (G - K)
        comp.reserve(G)
        a = comp.arrays
        for t, (moves_wk, moves_k, _, n_wk, n_k, beta) in enumerate(outs):     # integer sums: exact in any order
            a["n_wk"][:, :K] += moves_wk
            a["n_k"][:K] += moves_k
            a["n_wk"][:, targets[t]] += n_wk        # a block's new topics have distinct slots
            np.add.at(a["n_k"], targets[t], n_k)
            np.add.at(a["beta"], targets[t], beta)
        comp.n = G
        self._settle_weights()
        merged = moves.compact(comp, comp["n_k"])
        maps = {}
        for t, out in enumerate(outs):
            slots = out[2]
            mapping = np.full(max(K, int(slots.max(initial=-1)) + 1), -1, dtype=np.int64)
            mapping[:K], mapping[slots] = merged[:K], merged[targets[t]]
            maps[t] = (mapping,)
        return maps

    def gather(self, parts, bounds):
        tp = self.tok_ptr
        for p, part in enumerate(parts):
            self.z[tp[bounds[p]]:tp[bounds[p + 1]]] = part["z"]


@functools.lru_cache(maxsize=4)
def _stirling_table(n_max):
    """This process's Stirling table of ``n_max`` rows, built once for the
    partitions' table draws (read by any thread; nothing grows it)."""
    return StirlingTable(n_max)


class DirectAssignmentGibbs(ResultsMixin, TrainingPredictive, TopicMixin, BatchEstimator):
    """HDP topic model by the direct-assignment Gibbs sampler (G-HDP).

    Collapses the topic-word distributions and the document proportions and
    samples, per sweep: every token's topic (with the option of a new topic;
    topics are created and deleted as the sampler runs), the table counts m_jk
    from the Antoniak distribution, the global weights
    ``(beta_1..beta_K, beta_new) ~ Dir(m.1, ..., m.K, gamma)``, and the
    concentrations gamma (Escobar & West) and alpha (Teh et al., appendix A).
    Held-out scores during ``fit`` average the per-token predictive
    probabilities of the samples after ``burn_in`` ([CVHDP] eq 17).

    Memory: the state is the topic of every token (int32, 4 bytes), one
    offset per document (8 bytes) and W x (topic slots) counts and word
    lists; no counts per document (the sweep and the table draws rebuild
    each document's n_jk from its tokens' topics when they reach it), and an
    on-disk corpus (``Corpus.open``) is read block by block without staying
    resident. At the end of the fit ``doc_topic_`` (D x K doubles) and the
    final topic of every token (4 bytes, for ``CollapsedVB(init_from=...)``)
    are added unless ``store_doc_topic=False``, which about halves the
    peak; a held-out evaluation during ``fit`` adds D x K doubles while it
    runs. docs/scaling.md gives the bytes per token on generated
    corpora of up to 10^8 tokens.

    Parameters
    ----------
    n_components : int, default 100
        Initial number of topics: 1, every token starts in one topic (G-HDP1);
        K > 1, tokens assigned uniformly at random to K topics (G-HDP100, the
        default). The sampler creates and deletes topics either way; from 100
        it mixes faster: on KOS after 200 sweeps it scores better held-out
        and holds more topics than from one topic
        (``benchmarks/results/bench_defaults_kos.txt``).
    max_iter : int, default 500
        Number of sweeps. The time
        of a sweep grows with the tokens and the topics; docs/choosing.md
        gives the time and held-out score of the default on KOS.
    burn_in : int or "auto", default "auto"
        Sweeps before samples enter the predictive average (an integer must be
        < max_iter); "auto": half of ``max_iter``, so any ``max_iter`` works.
    eta_tot : float, default 100.0
        Total strength of the symmetric topic-word prior; each word gets
        ``eta_tot / n_words`` ([CVHDP] beta = 100, tau_w = 1/W).
    alpha : float or None, default None
        Document concentration; None resamples it under ``alpha_prior``.
    gamma : float or None, default None
        Top-level concentration; None resamples it under ``gamma_prior``.
    alpha_prior, gamma_prior : (shape, rate), default (4.0, 4.0) and (7.5, 7.5)
        Gamma priors; a resampled concentration starts at the prior mean.
        ``eta_tot``, ``alpha``, ``gamma``, the shapes and rates and their means
        (shape / rate) lie in [1e-300, 1e300], the range of every prior
        (docs/numerics.md).
    n_concentration_rounds : int in [1, 1000], default 5
        Auxiliary-variable rounds per sweep for each resampled concentration.
    max_steps : int or None, default None
        Also stop once the steps, the number of topics summed over the sweeps
        run (the cost measure "iterations multiplied by K" of Teh, Kurihara &
        Welling 2007, Figure 2), reach ``max_steps``; the fit stays resumable,
        like one stopped by ``max_seconds``. None: ``max_iter`` sweeps. Set it
        with a ``burn_in`` that the budget outlasts, or there are no samples
        to average (``heldout_loglik_`` None).
    random_state : int, numpy.random.Generator or None
    n_threads : int or None, default None
        OpenMP threads: None uses OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1 k threads (0, below -1 or not an integer:
        ValueError). The sequential schedule's sweeps run on one thread (every
        draw conditions on all other tokens and on the global weights); the
        delayed schedule's run document blocks in parallel. ``transform``,
        ``score`` and the held-out evaluation during ``fit`` run documents in
        parallel, with the same result for any number of threads.
    schedule : {"sequential", "delayed"}, default "sequential"
        "sequential": the exact sampler above. "delayed": AD-HDP (Newman,
        Asuncion, Smyth & Welling, "Distributed algorithms for topic models",
        JMLR 2009, section 4), an approximation of the sequential sampler:
        the documents are split into ``n_threads`` contiguous blocks; each
        thread draws its block's topic indicators against its own copy of
        the topic table (word-topic counts, topic sizes, weights), creating
        and deleting topics in it; after the sweep the copies' changes are
        merged (``n_kw <- n_kw + sum_t (n_kw^t - n_kw)``, new topics placed
        by ``new_topics``), and the tables, global weights and
        concentrations are resampled on the merged state exactly as the
        sequential sampler does. A draw sees the other blocks' moves of the
        same sweep only after it. The fit is repeatable for a given seed and
        number of threads and depends on both; with one thread it is the
        sequential sampler, draw for draw. The copies cost ``n_threads``
        x W x (topic slots) x 12 bytes, and the corpus is held in memory.
        ``bnpcore.distributed.fit`` runs this schedule on Dask workers, one
        block per partition (contiguous blocks of documents): each worker
        sweeps its documents against a copy of the broadcast table and
        returns the moves of its counts and its new topics, which the client
        merges by the same ``new_topics`` rule before resampling the rest;
        then each worker draws its documents' table counts. Repeatable for a
        seed and number of partitions (the partitions' draws come from
        generators seeded by the seed and their first document, so the chain
        is not the threaded one); one partition is the sequential sampler,
        draw for draw. The sequential schedule does not run there
        (ValueError).
    new_topics : {"match", "separate"}, default "match"
        Delayed schedule: how the blocks' new topics enter the merged table.
        "match" (Newman et al.'s rule): each block's new topics are matched
        greedily, in decreasing cosine similarity of their word counts, to
        the new topics of the blocks before it, and a pair with similarity
        at least 0.5 becomes one topic; the rest stay apart. "separate":
        every block's new topics stay apart (topics that explain the same
        words are then left for the sampler to empty and prune).
    store_doc_topic : bool, default True
        Set ``doc_topic_`` and keep the final sample's topic of every token
        at the end of the fit (D x K doubles and 4 bytes per token; see
        Memory). False keeps nothing per document or token in the fitted
        model: ``doc_topic_`` is not set (call ``transform``), and the model
        cannot start ``CollapsedVB(init_from=...)``; the topics are the same.

    Attributes
    ----------
    topics_ : ndarray of shape (n_components_, n_words)
        Posterior mean topic-word distributions ``(n_kw + eta) / (n_k + eta_tot)``
        of the final sample, topics in decreasing ``weights_``.
    weights_ : ndarray of shape (n_components_,)
        Global topic weights beta_k of the final sample (they sum to
        ``1 - beta_new_``).
    beta_new_ : float
        Mass of the uninstantiated topics.
    n_components_ : int
        Number of topics with at least one token.
    alpha_, gamma_ : float
        Concentrations of the final sample.
    doc_topic_ : ndarray of shape (n_docs, n_components_)
        ``(alpha beta_k + n_jk) / (alpha + N_j)`` of the training documents, final
        sample (not set with ``store_doc_topic=False``).
    heldout_loglik_ : float or None
        Per-word held-out log-likelihood averaged over the samples after burn-in
        (eq 17), when ``fit`` was given ``heldout``.
    history_ : list of dict
        Per sweep: ``iteration``, ``n_documents``, ``fit_seconds``,
        ``n_components``, ``alpha``, ``gamma``, ``n_tables``, ``steps`` (see
        ``max_steps``), ``log_lik``
        (collapsed log p(x | z)) and, with ``heldout``, ``heldout_loglik``
        (running eq 17 average after burn-in, single sample before) and
        ``perplexity``.
    vocabulary_ : list of str or None

    Notes
    -----
    The number of topics is not stationary for hundreds of sweeps, and its
    level depends on the rate of ``gamma_prior`` (gamma's posterior rate is
    that rate plus about log(m.. / gamma), ~8 on KOS). On KOS the defaults
    keep adding topics after 600 sweeps, from 1 as from 100 topics; Teh,
    Kurihara & Welling (2007) report 113.2 ± 11.4 (from 1) and 168.3 ± 3.9
    (from 100), which the defaults reach after about the same number of
    steps (topics summed over the sweeps), while other priors match one of
    the two and miss the other. :meth:`paper_preset` stops there; longer
    runs predict held-out tokens better (docs/choosing.md;
    ``benchmarks/results/repro_001_ghdp_presets.txt``).

    References
    ----------
    Teh, Jordan, Beal & Blei, "Hierarchical Dirichlet processes", JASA 2006, 5.3 and App. A.
    Escobar & West, "Bayesian density estimation and inference using mixtures", JASA 1995.
    Teh, Kurihara & Welling, "Collapsed variational inference for HDP", NIPS 2007 (G-HDP, eq 17).
    """

    _persist = BatchEstimator._persist + ("_z", "_sizes", "_beta", "_beta_new", "_train_fingerprint",
                                          "_heldout_fingerprint")

    def __init__(self, n_components=100, max_iter=500, burn_in="auto", eta_tot=100.0, alpha=None, gamma=None,
                 alpha_prior=(4.0, 4.0), gamma_prior=(7.5, 7.5), n_concentration_rounds=5, max_steps=None,
                 random_state=None, n_threads=None, store_doc_topic=True, schedule="sequential",
                 new_topics="match"):
        self._store_params(locals())

    partitioned = True      # the delayed schedule on partitions (_DelayedGibbsState.iterate; bnpcore.distributed)

    def check_partitioned(self):
        super().check_partitioned()
        # (a subclass without schedules, hdp.PartiallyCollapsedGibbs, runs as it is)
        if "schedule" in self.get_params() and self.schedule != "delayed":
            raise ValueError(f"bnpcore.distributed runs DirectAssignmentGibbs with schedule='delayed' only (AD-HDP: "
                             f"each partition samples against its own copy of the topic table), got "
                             f"schedule={self.schedule!r}: the sequential sampler conditions every draw on all "
                             "other tokens, on one machine")

    _PAPER_PRESET = {"eta_tot": 100.0, "alpha_prior": (4.0, 4.0), "gamma_prior": (7.5, 7.5),
                     "max_steps": 17_500, "max_iter": 10_000, "burn_in": 50}

    @classmethod
    def paper_preset(cls, n_components=1, **params):
        """G-HDP as Teh, Kurihara & Welling (2007), section 4, ran it on KOS:
        ``n_components=1`` (G-HDP1) or ``n_components=100`` (G-HDP100), and

        * ``eta_tot=100.0``: their beta = 100 with tau_w = 1/W, fixed (stated);
        * ``alpha_prior=(4.0, 4.0)``, ``gamma_prior=(7.5, 7.5)``: the middle of
          the ranges they state for CV-HDP (shapes and rates in [2, 6] and
          [5, 10]; the priors of their G-HDP runs are not stated), also the
          defaults;
        * ``max_steps=17500``: they report the topic counts of runs whose cost
          Figure 2 measures in steps (iterations x topics), without giving the
          budget or the number of sweeps; on KOS the defaults' counts reach
          their 113.2 ± 11.4 (from 1) and 168.3 ± 3.9 (from 100) after about
          the same number of steps (calibrated on one seed; 117 ± 2 and
          165 ± 4 over four: benchmarks/results/repro_001_ghdp_presets.txt). The
          counts are not stationary there: longer runs keep adding topics
          (see Notes); ``max_iter=10000`` only bounds the run;
        * ``burn_in=50``: samples after the first 50 sweeps enter the held-out
          average (the paper: "after an initial burn-in period").

        ``params`` override any of these (or set others, e.g. ``random_state``).

        Examples
        --------
        >>> from bnpcore.hdp import DirectAssignmentGibbs
        >>> DirectAssignmentGibbs.paper_preset(100).max_steps
        17500
        """
        return cls(**{**cls._PAPER_PRESET, "n_components": n_components, **params})

    # -- the batch protocol --------------------------------------------------------
    def _check_params(self):
        self._k0 = check_int(self.n_components, "n_components", 1)
        max_iter = check_int(self.max_iter, "max_iter", 1)
        burn_in = check_burn_in(self.burn_in, max_iter)
        check_prior(self.eta_tot, "eta_tot")
        for name in ("alpha", "gamma"):
            if getattr(self, name) is not None:
                check_prior(getattr(self, name), name)
        check_gamma_prior(self.alpha_prior, "alpha_prior")
        check_gamma_prior(self.gamma_prior, "gamma_prior")
        check_inner(self.n_concentration_rounds, "n_concentration_rounds", 1)
        if not isinstance(self.store_doc_topic, (bool, np.bool_)):
            raise TypeError(f"store_doc_topic must be True or False, got {self.store_doc_topic!r}")
        if self.max_steps is not None:
            check_int(self.max_steps, "max_steps", 1)
        effective_n_threads(self.n_threads)
        if self.schedule not in ("sequential", "delayed"):
            raise ValueError(f"schedule must be 'sequential' or 'delayed', got {self.schedule!r}")
        if self.new_topics not in ("match", "separate"):
            raise ValueError(f"new_topics must be 'match' or 'separate', got {self.new_topics!r}")
        return {"max_iter": max_iter, "burn_in": burn_in}

    def _init_state(self, X, rng):
        a_alpha, b_alpha = check_gamma_prior(self.alpha_prior, "alpha_prior")
        a_gamma, b_gamma = check_gamma_prior(self.gamma_prior, "gamma_prior")
        settings = {"alpha_prior": None if self.alpha is not None else (a_alpha, b_alpha),
                    "gamma_prior": None if self.gamma is not None else (a_gamma, b_gamma),
                    "rounds": int(self.n_concentration_rounds)}
        alpha = float(self.alpha) if self.alpha is not None else a_alpha / b_alpha
        gamma = float(self.gamma) if self.gamma is not None else a_gamma / b_gamma
        # the tokens' topics; word counts of 2 K topic slots (and their copy), document averages
        check_memory(8 * X.n_tokens + 32 * self._k0 * (X.n_words + X.n_docs), f"n_components={self._k0}", X)
        if self.schedule == "delayed":
            return _DelayedGibbsState(X, self._k0, float(self.eta_tot), alpha, gamma, settings, rng,
                                      effective_n_threads(self.n_threads), self.new_topics)
        return _GibbsState(X, self._k0, float(self.eta_tot), alpha, gamma, settings, rng)

    def _report(self, iteration, **metrics):
        stop = super()._report(iteration, **metrics)
        return stop or (self.max_steps is not None and metrics["steps"] >= self.max_steps)

    def _set_fitted(self, state, X):
        beta = state.topics["beta"]
        order = np.argsort(-state.topics["n_k"], kind="stable")     # largest first (ResultsMixin)
        store = self.store_doc_topic
        if store:
            theta, phi = state.predictive()
            for start in range(0, len(theta), _ROW_BLOCK):     # columns in order, in place
                theta[start:start + _ROW_BLOCK] = theta[start:start + _ROW_BLOCK, order]
            self.doc_topic_ = theta
        else:
            phi = state.topic_word()
            self.__dict__.pop("doc_topic_", None)
        self.topics_ = phi[order]
        self.weights_ = beta[order].copy()
        self.beta_new_ = float(state.beta_new)
        self.n_components_ = int(state.n_components)
        self.alpha_ = float(state.alpha)
        self.gamma_ = float(state.gamma)
        self.vocabulary_ = X.vocabulary
        self._train_fingerprint = X.fingerprint()
        average = self.__dict__.get("_average")
        self.heldout_loglik_ = average.log_likelihood() if average is not None and average.n_samples else None
        self._heldout_fingerprint = average.heldout.fingerprint() if self.heldout_loglik_ is not None else None
        # the final sample, in the order of topics_ (CollapsedVB(init_from=...) starts from it)
        self._beta = self.weights_.copy()
        self._beta_new = self.beta_new_
        if store:
            relabel = np.empty(len(order), dtype=np.int32)
            relabel[order] = np.arange(len(order), dtype=np.int32)
            self._z, self._sizes = relabel[state.z], None
        else:
            self._z, self._sizes = None, state.topics["n_k"][:len(order)][order]

    # -- using a fitted model ----------------------------------------------------
    _component_axes = {"topics_": 0, "weights_": 0, "doc_topic_": 1, "_beta": 0, "_sizes": 0}
    _remainder = "beta_new_"

    def _component_sizes(self):
        """Tokens per topic of the final sample."""
        z = self._z
        if z is None:                                          # store_doc_topic=False
            return self._sizes
        return np.bincount(z[z >= 0], minlength=self.n_components_)

    def _prune_fitted(self, keep):
        super()._prune_fitted(keep)
        if self._z is not None:
            relabel = np.full(len(keep), -1, dtype=np.int32)      # tokens of removed topics: -1
            relabel[keep] = np.arange(int(keep.sum()), dtype=np.int32)
            self._z = relabel[self._z]
        self._beta_new = self.beta_new_
        self.heldout_loglik_ = self._heldout_fingerprint = None     # averaged samples of the unpruned model

    def transform(self, X, *, max_iter=50, burn_in=20):
        """Topic proportions of new documents with the topics held fixed.

        Per-document Gibbs sampling of the tokens' topics under
        ``p(z_i = k) ∝ (n_jk + alpha beta_k) topics_[k, w_i]``, ``max_iter`` sweeps;
        the posterior means ``(n_jk + alpha beta_k) / (N_j + alpha sum_l beta_l)``
        of the sweeps after ``burn_in`` are averaged (proportions over the instantiated topics: rows sum
        to 1; an empty document gets the normalised ``weights_``). Documents run
        in parallel (``n_threads``); each document's draws come from its own
        stream, keyed by the model's scoring seed and the document's words:
        repeatable, and the same for a document whatever the batch it comes in
        and whatever the number of threads.

        Returns
        -------
        ndarray of shape (n_docs, n_components_)
        """
        X = self._check_input(X)
        check_int(max_iter, "max_iter", 1)
        check_int(burn_in, "burn_in", 0)
        if burn_in >= max_iter:
            raise ValueError(f"burn_in={burn_in} must be smaller than max_iter={max_iter}")
        words, tok_ptr = X.tokens()
        prior = self.alpha_ * np.asarray(self.weights_, dtype=np.float64)
        theta = np.zeros((X.n_docs, self.n_components_))
        phi_wk = np.ascontiguousarray(np.asarray(self.topics_).T)
        _hdp_gibbs.fold_in(words, tok_ptr, phi_wk, prior, max_iter, burn_in, *self._document_keys(X), theta,
                           effective_n_threads(self.n_threads))
        return theta
