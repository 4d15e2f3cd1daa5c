"""NGGP mixtures of multinomials: streaming ADF-NRM, EP-NRM and the collapsed
Gibbs sampler ([NRM] Tank, Foti & Fox 2015).

Model ([NRM] (3)-(4)): mixture weights from a normalised generalised gamma
process with mass ``a``, discount ``sigma`` and tilting ``tau`` (sigma = 0: the
Dirichlet process DP(a); sigma = 0.5: the normalised inverse Gaussian), cluster
word distributions phi_k ~ Dirichlet(eta 1_W), documents x_d ~ Mult(N_d, phi_{z_d}).

The kernels are in ``pyx/_nrm.pyx``; this module owns the cluster state (arrays
with spare capacity), the merge step, the EP sites and the estimators.

Posterior of the auxiliary variable U: bnpcore uses the derived
``p(U | z) ∝ U^(n-1) (U + tau)^(sigma K - n) exp(-lap(U))``
(``u_posterior="corrected"``); the exponent printed in [NRM] (6), (21) and supp
(17), (34), ``n - a K``, is available as ``u_posterior="paper"``.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from bnpcore._validation import check_int, check_positive, check_prior, check_random_state, effective_n_threads
from bnpcore.base import BaseEstimator, TopicMixin, exclusive
from bnpcore.corpus import as_corpus
from bnpcore.evaluation import mixture_log_predictive
from bnpcore.inference import moves
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, Number, OneOf, RandomGenerator,
                                     run_iterations, same_counts)
from bnpcore.inference.moves import Components
from bnpcore.kernels import _nrm
from bnpcore.results import ResultsMixin

__all__ = ["ADF", "EP", "CollapsedGibbs", "grid_search"]

_Q_ONE = 1.0 - 1e-15     # clamp of q in log(1 - q), as in the kernels


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------

def _check_hyperparameters(est):
    """Validated NGGP / Dirichlet hyperparameters of an estimator, as a dict."""
    a = check_prior(est.a, "a")
    sigma = check_positive(est.sigma, "sigma", allow_zero=True)
    if sigma >= 1.0:
        raise ValueError(f"sigma must be in [0, 1), got {sigma}")
    tau = check_prior(est.tau, "tau", allow_zero=True)
    eta = check_prior(est.eta, "eta")
    effective_n_threads(est.n_threads)
    return {"a": a, "sigma": sigma, "tau": tau, "eta": eta}


def _check_streaming(est, p):
    """Adds the ADF/EP options (threshold, E[K], U posterior, merges) to ``p``."""
    eps = max(p["sigma"], 0.5) if est.epsilon is None else check_positive(est.epsilon, "epsilon")
    if not p["sigma"] <= eps < 1.0:
        raise ValueError(f"epsilon must satisfy sigma <= epsilon < 1 ([NRM] section 3.3: a cluster born "
                         f"with mass below sigma has prior weight 0), got epsilon={eps}, sigma={p['sigma']}")
    if est.expected_k not in ("exact", "K"):
        raise ValueError(f"expected_k must be 'exact' or 'K', got {est.expected_k!r}")
    if est.u_posterior not in ("corrected", "paper"):
        raise ValueError(f"u_posterior must be 'corrected' or 'paper', got {est.u_posterior!r}")
    if not isinstance(est.merge, (bool, np.bool_)):
        raise TypeError(f"merge must be True or False, got {est.merge!r}")
    thr = check_positive(est.merge_threshold, "merge_threshold")
    if thr > 1.0:
        raise ValueError(f"merge_threshold must be in (0, 1], got {thr}")
    q_min = check_positive(est.min_responsibility, "min_responsibility", allow_zero=True)
    if q_min >= min(eps, 0.01):
        raise ValueError(f"min_responsibility must be below min(epsilon, 0.01), got {q_min}")
    p.update(epsilon=eps, expected_k=est.expected_k, u_posterior=est.u_posterior, merge=bool(est.merge),
             merge_every=check_int(est.merge_every, "merge_every", minimum=1), merge_threshold=thr,
             min_responsibility=q_min)
    return p


# ---------------------------------------------------------------------------
# Cluster state shared by ADF and EP
# ---------------------------------------------------------------------------

class _Clusters:
    """The ADF/EP cluster state: lambda_k, Lambda_k, S_k, log P_k and an alive
    flag per slot in a :class:`~bnpcore.inference.moves.Components` table (the
    kernels add clusters in place; merges and compaction are its moves), plus
    the scalars the kernels carry (``scalars``, one record of
    ``_nrm.nggp_state_t``: slots used, alive clusters, observations m, site
    entries written, the warm start of log U, the last Uhat, EP's change sum)."""

    _FIELDS = ("lam", "lam_tot", "S", "logP", "alive")

    def __init__(self, n_words, eta, cap=16):
        self.n_words = n_words
        self.eta = eta
        self.table = Components({"lam": ((n_words,), np.float64), "lam_tot": ((), np.float64),
                                 "S": ((), np.float64), "logP": ((), np.float64), "alive": ((), np.uint8)},
                                capacity=cap, offsets={"lam": eta, "lam_tot": eta * n_words}, flags=("alive",))
        self.scalars = _nrm.new_state()
        self.scratch = np.empty(cap + 1)

    def __getattr__(self, name):       # the kernels' view: lam, lam_tot, S, logP, alive over all slots
        if name in _Clusters._FIELDS:
            return self.table.arrays[name]
        raise AttributeError(name)

    @property
    def cap(self):
        return self.table.capacity

    @property
    def n_slots(self):
        return int(self.scalars["n_slots"][0])

    @property
    def m(self):
        return int(self.scalars["n_obs"][0])

    @property
    def n_sites(self):
        return int(self.scalars["n_sites"][0])

    def grow(self):
        """Double the number of slots."""
        self.table.n = self.n_slots
        self.table.reserve(2 * self.cap)
        self.scratch = np.empty(self.cap + 1)

    def _resized(self):
        self.scalars["n_slots"] = self.scalars["n_alive"] = self.table.n

    def compact(self):
        """Drop dead slots; returns the old -> new slot map (-1 for dropped)."""
        self.table.n = self.n_slots
        mapping = self.table.remove(self.alive[:self.n_slots].astype(bool))
        self._resized()
        return mapping

    def merge(self, p):
        """Merge step (section 6.6) on a compacted state; returns the old -> new slot map.

        Similarity: cosine of the posterior mean word distributions
        phibar_k = lambda_k / Lambda_k. Pairs above ``merge_threshold`` are merged
        greedily, most similar first, each cluster at most once per round:
        lambda_k + lambda_l - eta (the prior counted once), S_k + S_l,
        log P_k + log P_l.
        """
        K = self.n_slots
        self.table.n = K
        if K < 2:
            return np.arange(K)
        phi = self.lam[:K] / self.lam_tot[:K, None]
        phi /= np.linalg.norm(phi, axis=1)[:, None]
        cos = phi @ phi.T
        rows, cols = np.nonzero(np.triu(cos > p["merge_threshold"], 1))
        order = np.argsort(-cos[rows, cols], kind="stable")
        used = np.zeros(K, dtype=bool)
        pairs = []
        for k, l in zip(rows[order], cols[order]):
            if not (used[k] or used[l]):
                used[k] = used[l] = True
                pairs.append((k, l))
        mapping = moves.merge_pairs(self.table, pairs)
        self._resized()
        return mapping

    def expected_k(self, p):
        alive = self.alive[:self.n_slots].astype(bool)
        if p["expected_k"] == "exact":
            return float(alive.sum() - np.exp(self.logP[:self.n_slots][alive]).sum())
        return float(alive.sum())

    def predictive(self, p, m):
        """(slots, log weights) of the predictive rule (23) after m observations; the
        last weight is the new cluster's. Weights are normalised."""
        n = self.n_slots
        slots = np.flatnonzero(self.alive[:n].astype(bool) & (self.S[:n] > p["sigma"]))
        lw = np.log(self.S[slots] - p["sigma"])
        if p["sigma"] == 0.0:
            lw_new = np.log(p["a"])
        else:
            u = _nrm.mode_u(m, self.expected_k(p), p["a"], p["sigma"], p["tau"], p["u_posterior"])
            lw_new = np.log(p["a"]) + p["sigma"] * np.log(u + p["tau"]) if m > 0 else 0.0
        lw = np.append(lw, lw_new)
        return slots, lw - logsumexp(lw)

    def to_dict(self):
        n = self.n_slots
        d = {name: self.table.arrays[name][:n] for name in self._FIELDS}
        d["scalars"] = self.scalars
        return d

    @classmethod
    def from_dict(cls, d, n_words, eta):
        n = int(d["scalars"]["n_slots"][0])
        self = cls(n_words, eta, cap=max(16, n + 1))
        for name in cls._FIELDS:
            self.table.arrays[name][:n] = np.asarray(d[name])
        self.table.n = n
        self.scalars[:] = d["scalars"]
        return self


class _Sites:
    """EP local contributions, sparse: for document i the clusters k and
    responsibilities qbar_ik > min_responsibility it last added (a CSR over
    documents: int64 pointers, int32 cluster ids, float64 responsibilities;
    12 bytes per stored entry plus 8 per document)."""

    def __init__(self, n_docs, cap):
        self.ptr = np.zeros(n_docs + 1, dtype=np.int64)
        self.k = np.zeros(cap, dtype=np.int32)
        self.q = np.zeros(cap)

    @property
    def n_docs(self):
        return len(self.ptr) - 1

    @property
    def nnz(self):
        return int(self.ptr[-1])

    @property
    def nbytes(self):
        return self.ptr.nbytes + 12 * self.nnz

    def grow(self, need):
        cap = max(need, 2 * len(self.k))
        k, q = np.zeros(cap, dtype=np.int32), np.zeros(cap)
        k[:len(self.k)] = self.k
        q[:len(self.q)] = self.q
        self.k, self.q = k, q

    def matrix(self, n_clusters):
        """Sites as a scipy CSR matrix (n_docs x n_clusters) of qbar_ik."""
        n = self.nnz
        return sp.csr_matrix((self.q[:n], self.k[:n], self.ptr), shape=(self.n_docs, n_clusters))

    def remap(self, mapping, upto=None):
        """Relabel clusters by ``mapping`` (-1: drop the entry) in documents [0, upto);
        entries that land on the same cluster of a document are summed."""
        upto = self.n_docs if upto is None else upto
        n = int(self.ptr[upto])
        doc = np.repeat(np.arange(upto), np.diff(self.ptr[:upto + 1]))
        k = mapping[self.k[:n]]
        keep = k >= 0
        m = sp.coo_matrix((self.q[:n][keep], (doc[keep], k[keep])),
                          shape=(upto, max(int(mapping.max()) + 1, 1))).tocsr()
        m.sum_duplicates()
        m.sort_indices()
        self.ptr[:upto + 1] = m.indptr
        self.ptr[upto + 1:] = m.indptr[-1]
        self.k[:m.nnz] = m.indices
        self.q[:m.nnz] = m.data


def _adf_pass(state, corpus, p, sites=None, on_block=None, start=0):
    """ADF-NRM over the documents of ``corpus`` from ``start`` (kernel calls with capacity growth).

    The stream is cut into blocks that end where the number of observations
    reaches a multiple of ``merge_every`` (or at the end of ``corpus``), so the
    cut points do not depend on how a stream is split into calls. After each
    block: the merge step (when a multiple is reached and merging is on), then
    ``on_block(merged)`` (clusters merged in that block); a true return value
    stops the pass. Returns (documents processed, clusters merged).
    """
    n_docs = corpus.n_docs
    n_merged = 0
    i = start
    while i < n_docs:
        stop = min(n_docs, i + p["merge_every"] - state.m % p["merge_every"])
        while i < stop:
            if state.n_slots >= state.cap:
                state.grow()
            if sites is not None and state.n_sites + state.n_slots + 1 > len(sites.k):
                sites.grow(state.n_sites + state.n_slots + 1)
            i = _nrm.adf_run(corpus.indptr, corpus.indices, corpus.counts, i, stop, p,
                             (state.lam, state.lam_tot, state.S, state.logP, state.alive),
                             state.scalars, state.scratch,
                             (sites.ptr, sites.k, sites.q) if sites is not None else None)
        merged = 0
        if p["merge"] and state.m % p["merge_every"] == 0:
            before = state.n_slots
            mapping = state.merge(p)
            merged = before - state.n_slots
            if merged and sites is not None:
                sites.remap(mapping, upto=i)
                state.scalars["n_sites"] = sites.ptr[i]
        n_merged += merged
        if on_block is not None and on_block(merged):
            break
    return i, n_merged


def _recompute_from_sites(state, sites, corpus, p):
    """lambda_k = eta + sum_i qbar_ik x_i, Lambda_k, S_k and log P_k from the stored
    sites (once per EP epoch, against rounding drift)."""
    K = state.n_slots
    Q = sites.matrix(K)
    state.lam[:K] = p["eta"] + np.asarray((Q.T @ corpus.matrix.astype(np.float64)).todense())
    state.lam_tot[:K] = p["eta"] * corpus.n_words + Q.T @ corpus.doc_lengths.astype(np.float64)
    state.S[:K] = np.asarray(Q.sum(axis=0)).ravel()
    logq = Q.copy()
    logq.data = np.log1p(-np.minimum(logq.data, _Q_ONE))
    state.logP[:K] = np.asarray(logq.sum(axis=0)).ravel()


# ---------------------------------------------------------------------------
# Estimators
# ---------------------------------------------------------------------------

class _NRMMixin(ResultsMixin, TopicMixin):
    """Prediction shared by the three estimators: responsibilities, predictive
    log-likelihood ([NRM] section 4, the predictive of eq. 23)."""

    _requires_tokens = False     # a corpus of empty documents is a valid (degenerate) dataset
    _size_unit = "documents"

    def transform(self, X):
        """Cluster responsibilities of documents under the fitted model (nothing is updated).

        q_dk ∝ w_k DM(x_d | lambda_k) over the ``n_components_`` instantiated
        clusters, in the order of ``topics_``: the new-cluster term is left out
        and the rows renormalised, so they sum to 1 (an empty document gets the
        weights ``weights_`` renormalised). Returns ndarray of shape
        (n_docs, n_components_).
        """
        docs = self._check_input(X)
        lw = np.log(np.maximum(self.weights_, 1e-300))
        lam = self.components_
        out = np.empty((docs.n_docs, lam.shape[0]))
        _nrm.dm_matrix(docs.indptr, docs.indices, docs.counts, lam, lam.sum(axis=1), 0.0, out,
                       effective_n_threads(self.n_threads))
        out += lw
        out -= logsumexp(out, axis=1, keepdims=True)
        return np.exp(out)

    def score_samples(self, X):
        """log p(x_d | training data) of each held-out document: the probability of
        its count vector (multinomial coefficient included), new-cluster term
        included. ``score_samples(X).sum()`` is the total predictive
        log-likelihood that [NRM] Table 1 reports (the paper does not define it;
        this reading matches the scale of its totals)."""
        return self._log_predictive(self._check_input(X), multinomial_coef=True)

    def score(self, X, y=None):
        """Held-out per-word log-likelihood of the documents of X (the library's
        ``score``): sum_d log p(tokens of x_d | training data) / (tokens in X).

        It is the token-sequence probability, without the multinomial
        coefficient, so that it compares with the other estimators' per-word
        scores: ``score(X) = (score_samples(X).sum() - sum_d log MultCoef(x_d))
        / n_tokens``. [NRM] Table 1's total is ``score_samples(X).sum()``.
        Raises ``ValueError`` when X has no tokens.
        """
        docs = self._check_input(X)
        if docs.n_tokens == 0:
            raise ValueError("the documents to score have no tokens")
        return float(np.sum(self._log_predictive(docs, multinomial_coef=False)) / docs.n_tokens)


_STREAM_DOC = """
    a : float, default 1.0
        NGGP mass parameter (the DP concentration when sigma = 0).
    sigma : float in [0, 1), default 0.5
        Discount: 0 gives the Dirichlet process, 0.5 the normalised inverse Gaussian.
    tau : float >= 0, default 1.0
        Tilting parameter (irrelevant when sigma = 0).
    eta : float, default 0.1
        Symmetric Dirichlet prior of the cluster word distributions ([NRM]'s alpha).
        ``a``, ``eta`` and a positive ``tau`` lie in [1e-300, 1e300], the range
        of every prior (docs/numerics.md).
    epsilon : float or None, default None
        New-cluster threshold: a cluster is instantiated when the new-cluster
        responsibility exceeds epsilon ([NRM] section 3.3). Must satisfy
        sigma <= epsilon < 1; None means max(sigma, 0.5) (the paper does not
        give its value).
    expected_k : {"exact", "K"}, default "exact"
        E[K] in q(U) by the recursion of supp (18) (log prod_i (1 - q_ik) kept
        per cluster) or the number of clusters K.
    u_posterior : {"corrected", "paper"}, default "corrected"
        Exponent of (U + tau) in q(U): the derived n - sigma E[K] or the printed
        n - a E[K] (E28).
    merge : bool, default True
        Merge near-duplicate clusters ([NRM] section 3.3): every ``merge_every``
        observations, clusters whose posterior mean word distributions have
        cosine similarity above ``merge_threshold`` are merged, most similar
        pair first, each cluster at most once per round.
    merge_every : int, default 1000
        The stream is processed in blocks ending at every multiple of
        ``merge_every`` observations: merges (when enabled) run and ADF reports
        progress (``history_``) at the end of each block.
    merge_threshold : float, default 0.95
        Deliberately conservative ([NRM]: merging often removes the small
        clusters that make the NGGP better than the DP): after one ADF pass
        over KOS, and on the 8 x 8 bars data, even the most similar pair of
        clusters stays below it, so only near-copies merge
        (``benchmarks/results/design_choices.txt``).
    min_responsibility : float, default 1e-10
        Responsibilities at or below this are set to 0 (not renormalised) so that
        updates, and EP's stored sites, are sparse. 0 keeps every one.
    shuffle : bool, default False
        ``fit`` processes the documents in a random order (``random_state``)
        instead of corpus order.
    random_state : int, Generator or None
        Only used for ``shuffle``; the algorithm is deterministic.
    n_threads : int or None, default None
        OpenMP threads: None uses OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1 k threads (0, below -1 or not an integer:
        ValueError). The updates are sequential: each document's responsibilities use
        the clusters as updated by all documents before it (ADF), and EP's
        per-site updates likewise use the cavity of all other current sites,
        so they are not exactly parallel and run on one thread;
        ``transform``, ``score``, ``score_samples`` and the held-out scores
        during ``fit`` run documents in parallel, with the same result for
        any number of threads."""

_STREAM_ATTRS = """
    topics_ : ndarray of shape (n_components_, n_words)
        Posterior mean word distributions E[phi_k] = lambda_k / Lambda_k, in
        decreasing order of cluster mass.
    components_ : ndarray of shape (n_components_, n_words)
        Dirichlet parameters lambda_k of q(phi_k), same order.
    cluster_mass_ : ndarray of shape (n_components_,)
        Soft sizes S_k = sum_i q_ik.
    weights_ : ndarray of shape (n_components_,)
        Predictive probabilities (23) of the clusters for the next document,
        w_k ∝ max(S_k - sigma, 0); ``weight_new_`` is the new cluster's (they sum to 1).
    n_components_ : int
    expected_n_components_ : float
        E[K] (supp (18)).
    u_ : float
        Uhat, the mode of q(U) given all training observations (NaN for sigma = 0).
    n_features_in_ : int
    vocabulary_ : list of str or None
    history_ : list of dict"""


class _StreamingBase(_NRMMixin, BaseEstimator):
    """Parameters, fitted attributes and persistence of the cluster state
    (``_state``, a :class:`_Clusters`) shared by ADF and EP."""

    _persist = ("_clusters",)

    def _prior(self):
        return _check_streaming(self, _check_hyperparameters(self))

    def _n_observations(self):
        return self._state.m

    def _component_sizes(self):
        return self.cluster_mass_

    def _prune_state(self, keep):
        """``prune``: the removed clusters die in the streaming state, which
        ``partial_fit`` continues."""
        st = self._state
        alive = np.flatnonzero(st.alive[:st.n_slots])
        order = alive[np.argsort(-st.S[alive], kind="stable")]     # the order of topics_ (_refresh)
        st.alive[order[~keep]] = 0
        st.compact()
        self._refresh(self._prior())

    def _refresh(self, p):
        st = self._state
        n = st.n_slots
        alive = np.flatnonzero(st.alive[:n])
        order = alive[np.argsort(-st.S[alive], kind="stable")]
        self.components_ = st.lam[order].copy()
        self.topics_ = self.components_ / st.lam_tot[order][:, None]
        self.cluster_mass_ = st.S[order].copy()
        m = self._n_observations()
        slots, lw = st.predictive(p, m)
        w = np.zeros(n)
        w[slots] = np.exp(lw[:-1])
        self.weights_ = w[order]
        self.weight_new_ = float(np.exp(lw[-1]))
        self.n_components_ = len(order)
        self.expected_n_components_ = st.expected_k(p)
        self.u_ = (float("nan") if p["sigma"] == 0 or m == 0 else
                   _nrm.mode_u(m, self.expected_n_components_, p["a"], p["sigma"], p["tau"], p["u_posterior"]))

    def _log_predictive(self, docs, multinomial_coef):
        """Per-document log p(x_d) under the predictive mixture (23): the clusters
        with their weights plus the prior-only new cluster."""
        with np.errstate(divide="ignore"):
            lw = np.log(np.append(self.weights_, self.weight_new_))
        lam = np.vstack([self.components_, np.full((1, self.n_features_in_), float(self.eta))])
        keep = np.isfinite(lw)
        return mixture_log_predictive(lw[keep], lam[keep], docs, multinomial_coef=multinomial_coef,
                                      n_threads=self.n_threads)

    def save(self, path, *, doc_topic=False):
        """Save parameters, fitted attributes and the streaming state (``bnpcore.load``
        restores a model that ``partial_fit`` continues exactly)."""
        if hasattr(self, "_state"):
            self._clusters = self._state.to_dict()
        try:
            return super().save(path, doc_topic=doc_topic)
        finally:
            self.__dict__.pop("_clusters", None)

    def _after_load(self):
        saved = self.__dict__.pop("_clusters", None)
        if saved is not None:
            self._state = _Clusters.from_dict(saved, int(self.n_features_in_), float(self.eta))

    def _start(self, docs):
        for name in self._fitted_names():     # refitting forgets the previous fit
            delattr(self, name)
        self.__dict__.pop("_fit_seconds", None)
        self._state = _Clusters(docs.n_words, float(self.eta))
        self.n_features_in_ = docs.n_words
        self.vocabulary_ = docs.vocabulary
        self.history_ = []


class ADF(_StreamingBase):
    _persist = _StreamingBase._persist + ("_fit_seconds",)

    __doc__ = """Streaming ADF-NRM for NGGP mixtures of multinomials ([NRM] Alg. 1).

    Each document is seen once: its cluster responsibilities follow the
    predictive rule (23) with Uhat the mode of q(U) (21) (safeguarded Newton on
    log U, warm-started), a new cluster is instantiated when the new-cluster
    responsibility exceeds ``epsilon``, and the responsibilities are added to the
    clusters' Dirichlet parameters ([NRM] (18)). Nothing is stored per past
    document: the state is lambda_k, S_k and log prod_i (1 - q_ik) per cluster.
    With sigma = 0 it is the DP algorithm of Lin (2013).

    Clusters are never removed by ADF: a cluster is born with mass above
    epsilon >= sigma and its mass only grows, so the removal rule of [NRM]
    section 3.3 (mass below epsilon) never fires here (EP applies it).

    Parameters
    ----------""" + _STREAM_DOC + """

    Attributes
    ----------""" + _STREAM_ATTRS + """
        One entry per block of the stream (``iteration`` counts blocks from the
        start of the stream): a block ends when the number of documents seen
        reaches a multiple of ``merge_every`` or at the end of the data of a
        ``fit``/``partial_fit`` call, so a fit on N documents reports
        ceil(N / merge_every) times. Keys: iteration, n_documents (documents
        seen), fit_seconds (cumulative), n_components, expected_k, u (Uhat),
        merged (clusters merged at the end of the block).

    References
    ----------
    A. Tank, N. Foti, E. Fox. Streaming variational inference for Bayesian
    nonparametric mixture models. AISTATS 2015.
    D. Lin. Online learning of nonparametric mixture models via sequential
    variational approximation. NIPS 2013.

    Examples
    --------
    >>> from bnpcore.mixture import ADF
    >>> model = ADF(a=10, sigma=0.5, tau=100, eta=0.1).fit(train)     # doctest: +SKIP
    >>> model.score(test), model.n_components_                         # doctest: +SKIP
    """

    def __init__(self, a=1.0, sigma=0.5, tau=1.0, eta=0.1, epsilon=None, expected_k="exact",
                 u_posterior="corrected", merge=True, merge_every=1000, merge_threshold=0.95,
                 min_responsibility=1e-10, shuffle=False, random_state=None, n_threads=None):
        self._store_params(locals())

    @exclusive
    def fit(self, X, y=None):
        """One pass over the documents of X from an empty model (in corpus order,
        or shuffled with ``shuffle=True``)."""
        docs = as_corpus(X)
        self._prior()
        if self.shuffle:
            docs = docs[check_random_state(self.random_state).permutation(docs.n_docs)]
        self._start(docs)
        return self.partial_fit(docs)

    @exclusive
    def partial_fit(self, X, y=None):
        """Absorb the documents of X, in order, into the current model (the stream
        continues where the previous call stopped).

        Reports once per block of the stream (see ``history_``); a reporting
        callback that returns True stops the call after that block, leaving the
        model fitted on the documents absorbed so far.
        """
        fitted = hasattr(self, "_state")
        docs = self._check_input(X) if fitted else as_corpus(X)     # _check_input: the model's words, also from text
        p = self._prior()
        if not fitted:
            self._start(docs)
        p["n_words"] = docs.n_words
        stream = _ADFStream(self._state, docs, p)

        def record(it, seconds):
            self._fit_seconds = seconds
            self._refresh(p)
            return {"n_documents": self._state.m, "fit_seconds": seconds, "n_components": self.n_components_,
                    "expected_k": self.expected_n_components_, "u": self.u_}

        # the batch loop of every estimator, one iteration per block of the stream
        start = len(self.history_)
        run_iterations(self, stream, start, start + stream.n_blocks(), self.__dict__.get("_fit_seconds", 0.0),
                       record=record)
        if not hasattr(self, "components_"):    # no document yet (X empty): the empty model
            self._refresh(p)
        return self


class _ADFStream(BatchState):
    """The documents of one ``ADF.fit``/``partial_fit`` call absorbed into the
    clusters block by block ([NRM] Alg. 1): one sequential sweep per block of
    the stream (``_adf_pass``: a block ends where the documents seen reach a
    multiple of ``merge_every``, or at the end), then the merge step."""

    sequential_sweep = True     # each document's responsibilities read the clusters after the previous one's
    checkpointed = False        # one call's stream; the estimator saves its clusters, not this

    def __init__(self, clusters, corpus, p):
        self.clusters, self.corpus, self.p, self.position = clusters, corpus, p, 0

    @property
    def n_components(self):
        return int(self.clusters.alive[:self.clusters.n_slots].sum())

    def n_blocks(self):
        """Blocks left in the stream."""
        every, m, i, n = self.p["merge_every"], self.clusters.m, self.position, 0
        while i < self.corpus.n_docs:
            stop = min(self.corpus.n_docs, i + every - m % every)
            m, i, n = m + stop - i, stop, n + 1
        return n

    def sweep(self):
        self.position, merged = _adf_pass(self.clusters, self.corpus, self.p, on_block=lambda merged: True,
                                          start=self.position)
        return {"merged": merged}


class EP(_StreamingBase, BatchEstimator):
    __doc__ = """EP-NRM for NGGP mixtures of multinomials ([NRM] section 3.4, supp Alg. 2).

    Initialised by one ADF-NRM pass that stores each document's local
    contribution; every further epoch revisits the documents in order: remove
    the document's site (cavity), recompute its responsibilities with the
    predictive rule given all other documents (m = N - 1, E[K] over the
    others), add them back, and remove clusters whose mass S_k falls below
    epsilon. Passes continue until the mean total-variation change of the
    sites in an epoch is below ``tol`` or ``max_iter`` epochs (including the
    ADF pass) have run.

    Stored per document (the sites): the clusters k and responsibilities
    qbar_ik > ``min_responsibility``, as a CSR (8 bytes per document plus 12
    per entry; ``sites_nbytes_`` gives the total). The
    cluster parameters implied by the sites, lambda_k = eta + sum_i qbar_ik x_i
    and S_k = sum_i qbar_ik, are recomputed from them at the start of every
    epoch. Merges (if enabled) run during the ADF pass as in ``ADF`` and once
    at the end of every EP epoch.

    Parameters
    ----------""" + _STREAM_DOC + """
    max_iter : int, default 50
        Epochs in total, the initial ADF pass included ([NRM]: 50).
    tol : float, default 1e-4
        Stop when sum_i TV(qbar_i^new, qbar_i^old) / N (``delta`` in
        ``history_``) falls below tol.

    Attributes
    ----------""" + _STREAM_ATTRS + """
        One entry per epoch (``iteration`` = epoch, 1 being the ADF pass):
        n_documents, fit_seconds, n_components, expected_k, u (Uhat), delta
        (mean site change, NaN for the ADF pass), merged, and with held-out
        documents given to ``fit`` ``heldout_loglik`` (``score``) and
        ``heldout_total`` (``score_samples(heldout).sum()``, [NRM] Table 1's
        metric).
    n_iter_ : int
        Epochs run (the ADF pass included).
    sites_nbytes_ : int
        Memory held by the stored sites.

    References
    ----------
    A. Tank, N. Foti, E. Fox. Streaming variational inference for Bayesian
    nonparametric mixture models. AISTATS 2015 (and its supplement).
    T. Minka. Expectation propagation for approximate Bayesian inference. UAI 2001.
    """

    def __init__(self, a=1.0, sigma=0.5, tau=1.0, eta=0.1, epsilon=None, expected_k="exact",
                 u_posterior="corrected", merge=True, merge_every=1000, merge_threshold=0.95,
                 min_responsibility=1e-10, max_iter=50, tol=1e-4, shuffle=False, random_state=None,
                 n_threads=None):
        self._store_params(locals())

    _persist = BatchEstimator._persist + _StreamingBase._persist

    # -- the batch protocol (BatchEstimator.fit: one ADF pass, then EP epochs) ------
    def _check_params(self):
        self._p = self._prior()
        return {"max_iter": check_int(self.max_iter, "max_iter", minimum=1),
                "tol": check_positive(self.tol, "tol", allow_zero=True)}

    def _init_state(self, X, rng):
        order = rng.permutation(X.n_docs) if self.shuffle else None
        self._start(X)
        return _EPState(X, dict(self._p, n_words=X.n_words), self._state, order)

    def _set_fitted(self, state, X):
        self._state = state.clusters
        self._n_docs = X.n_docs
        self._refresh(state.p)
        self._sites = state.sites          # the stored local contributions (not saved)
        self.sites_nbytes_ = state.sites.nbytes

    def _check_heldout(self, heldout, X):
        """Held-out documents (new documents, any number)."""
        return as_corpus(heldout, n_words=X.n_words)

    def _evaluate(self, state, heldout, sampling):
        self._set_fitted(state, state.corpus)
        total = float(np.sum(self.score_samples(heldout)))
        return {"heldout_loglik": self.score(heldout), "heldout_total": total}

    def _n_observations(self):
        return self._n_docs


def _restored_settings(p, corpus, ep):
    """The specs of a restored NGGP state's settings ``p`` (``_EPState`` with ``ep``)."""
    if not isinstance(p, dict):
        raise ValueError("p must be a dict")
    tiny = np.finfo(float).tiny
    specs = {"a": Number(tiny), "sigma": Number(0.0, 1.0), "tau": Number(0.0), "eta": Number(tiny),
             "n_words": OneOf(corpus.n_words)}
    if ep:
        specs.update(epsilon=Number(tiny), expected_k=OneOf("exact", "K"), u_posterior=OneOf("corrected", "paper"),
                     merge=OneOf(True, False), merge_every=Number(1, integer=True), merge_threshold=Number(),
                     min_responsibility=Number(0.0, 1.0))
    for key, spec in specs.items():
        if key not in p:
            raise ValueError(f"p has no {key!r}")
        yield f"p[{key!r}]", spec, p[key]


def _restored_scalars(scalars, capacity, site_capacity=None):
    """The specs of a restored NGGP scalar record (``_nrm.new_state``) for ``capacity``
    slots (and ``site_capacity`` stored sites: the kernels write from ``n_sites`` on)."""
    yield "scalars", Array(_nrm.new_state().dtype, (1,)), scalars
    n_slots = int(scalars["n_slots"][0])
    yield "scalars['n_slots']", Number(0, capacity, integer=True), n_slots
    yield "scalars['n_alive']", Number(0, n_slots, integer=True), int(scalars["n_alive"][0])
    yield "scalars['n_sites']", Number(0, site_capacity, integer=True), int(scalars["n_sites"][0])
    for name in ("n_obs", "position"):
        yield f"scalars[{name!r}]", Number(0, integer=True), int(scalars[name][0])


class _EPState(BatchState):
    """EP-NRM: the clusters, the stored sites, and one epoch per sweep (the first
    is the ADF pass that creates the sites)."""

    sequential_sweep = True     # each document's site update reads the clusters after the previous one's

    def __init__(self, corpus, p, clusters, order=None):
        self.p, self.clusters, self.order = p, clusters, order
        self.corpus = corpus if order is None else corpus[order]
        self.sites = _Sites(corpus.n_docs, max(16, 2 * corpus.n_docs))
        self.epoch = 0

    @property
    def n_components(self):
        return int(self.clusters.scalars["n_alive"][0])

    def state_dict(self):
        return {"p": self.p, "epoch": self.epoch, "order": self.order, "clusters": self.clusters.to_dict(),
                "sites": {"ptr": self.sites.ptr, "k": self.sites.k, "q": self.sites.q}}

    def invariants(self, corpus):
        D, W = corpus.n_docs, corpus.n_words
        yield from _restored_settings(self.p, corpus, ep=True)
        yield "epoch", Number(0, integer=True)
        yield "order", Array("int64", (D,), 0, D - 1, optional=True)
        c, sites = self.clusters, self.sites
        if not isinstance(c, dict) or not {"scalars", *_Clusters._FIELDS} <= set(c):
            raise ValueError(f"clusters must be a dict of scalars and {', '.join(_Clusters._FIELDS)}")
        if not isinstance(sites, dict) or not {"ptr", "k", "q"} <= set(sites):
            raise ValueError("sites must be a dict of ptr, k and q")
        yield "clusters['lam']", Array("float64", (None, W), 0.0), c["lam"]
        n = len(c["lam"])
        yield "sites['k']", Array("int32", (None,), 0, max(n - 1, 0)), sites["k"]
        yield from _restored_scalars(c["scalars"], n, len(sites["k"]))
        if int(c["scalars"]["n_slots"][0]) != n:
            raise ValueError(f"clusters hold {n} slots, their scalars say {int(c['scalars']['n_slots'][0])}")
        for name in ("lam_tot", "S", "logP"):
            yield f"clusters[{name!r}]", Array("float64", (n,)), c[name]
        yield "clusters['alive']", Array("uint8", (n,), 0, 1), c["alive"]
        yield "sites['ptr']", Array("int64", (D + 1,), 0), sites["ptr"]
        yield "sites['q']", Array("float64", (len(sites["k"]),), 0.0, 1.0), sites["q"]

    def check_counts(self, corpus):
        ptr = self.sites["ptr"]
        if ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] > len(self.sites["k"]):
            raise ValueError("sites['ptr'] must rise from 0 to at most the number of stored sites")
        if self.order is not None and len(np.unique(self.order)) != corpus.n_docs:
            raise ValueError("order is not a permutation of the documents")

    def restore(self, corpus):
        super().restore(corpus if self.order is None else corpus[self.order])
        self.clusters = _Clusters.from_dict(self.clusters, corpus.n_words, self.p["eta"])
        sites = _Sites(corpus.n_docs, len(self.sites["k"]))
        sites.ptr[:], sites.k[:], sites.q[:] = self.sites["ptr"], self.sites["k"], self.sites["q"]
        self.sites = sites

    def sweep(self):
        self.epoch += 1
        if self.epoch == 1:
            change, merged = float("nan"), _adf_pass(self.clusters, self.corpus, self.p, sites=self.sites)[1]
        else:
            change, merged = self._ep_epoch()
        return {"delta": change, "merged": merged, "expected_k": self.clusters.expected_k(self.p)}

    def _ep_epoch(self):
        """One EP epoch; returns (mean site change, clusters merged)."""
        st, old, docs, p = self.clusters, self.sites, self.corpus, self.p
        _recompute_from_sites(st, old, docs, p)
        new = _Sites(docs.n_docs, max(len(old.k), 16))
        st.scalars["n_sites"] = 0
        st.scalars["change"] = 0.0
        i = 0
        while i < docs.n_docs:
            if st.n_slots >= st.cap:
                st.grow()
            if st.n_sites + st.n_slots + 1 > len(new.k):
                new.grow(st.n_sites + st.n_slots + 1)
            i = _nrm.ep_run(docs.indptr, docs.indices, docs.counts, i, docs.n_docs, p,
                            (st.lam, st.lam_tot, st.S, st.logP, st.alive), st.scalars, st.scratch,
                            (old.ptr, old.k, old.q), (new.ptr, new.k, new.q))
        change = float(st.scalars["change"][0]) / docs.n_docs
        new.remap(st.compact())
        merged = 0
        if p["merge"]:
            before = st.n_slots
            new.remap(st.merge(p))
            merged = before - st.n_slots
        st.scalars["n_sites"] = new.nnz
        self.sites = new
        return change, merged


class CollapsedGibbs(_NRMMixin, BatchEstimator):
    """Marginal (collapsed) Gibbs sampler for NGGP mixtures of multinomials
    ([NRM] section 4.3's gold standard; Favaro & Teh 2013).

    The cluster weights and word distributions are integrated out; the state is
    the assignment z_j of every document and the auxiliary variable U. Each
    sweep updates U by slice sampling on log U given the partition
    (p(U | z) ∝ U^(n-1) (U + tau)^(sigma K - n) exp(-lap(U)), the derived exponent), then
    reassigns every document with the partial urn scheme [NRM] (5):
    P(z_j = k) ∝ (n_k - sigma) DM(x_j | eta + C_k), P(new) ∝ a (U + tau)^sigma
    DM(x_j | eta). sigma = 0 is the CRP sampler (Neal 2000, algorithm 3) and U
    is not sampled. All documents start in one cluster ([NRM] supp 4.2).

    Parameters
    ----------
    a, sigma, tau, eta : float
        As for ``ADF`` (defaults 1.0, 0.5, 1.0, 0.1).
    max_iter : int, default 215
        Sweeps through the documents ([NRM]: 215).
    n_samples : int or "auto", default "auto"
        The states of the last ``n_samples`` sweeps are kept; ``score`` and
        ``score_samples`` average the predictive log-likelihood over them
        ("averaging the predictive log-likelihood for the last 50 samples").
        "auto": 50, or half of ``max_iter`` when that is fewer, so that any
        ``max_iter`` (and the command line's ``--iterations``) works.
        When a reporting callback stops the fit early, the states kept so far
        are used, or the last state alone if none was kept yet.
    random_state : int, Generator or None
    n_threads : int or None, default None
        OpenMP threads: None uses OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1 k threads (0, below -1 or not an integer:
        ValueError). The sweeps are strictly sequential (each document's
        reassignment conditions on all others) and run on one thread;
        ``transform``, ``score``, ``score_samples`` and the held-out scores
        during ``fit`` run documents in parallel, with the same result for
        any number of threads.

    Attributes
    ----------
    labels_ : ndarray of shape (n_docs,)
        Cluster of every training document in the final state (indices into ``topics_``).
    cluster_sizes_ : ndarray of shape (n_components_,)
        Documents per cluster, decreasing.
    topics_, components_ : ndarray of shape (n_components_, n_words)
        Posterior mean word distributions (eta + C_k) / (W eta + N_k) and the
        Dirichlet parameters eta + C_k of the final state.
    weights_ : ndarray of shape (n_components_,)
        Predictive weights (n_k - sigma) / Z of the final state; ``weight_new_`` =
        a (U + tau)^sigma / Z.
    u_ : float
        Final U (NaN for sigma = 0).
    n_components_, n_features_in_, vocabulary_
    history_ : list of dict
        One entry per sweep (``iteration`` = sweep): n_documents, fit_seconds,
        n_components, u, and with held-out documents given to ``fit``
        ``heldout_loglik`` (per word) and ``heldout_total`` (the total
        predictive log-likelihood, [NRM] Table 1's metric) of that sweep's
        state.

    Notes
    -----
    ``score`` and ``score_samples`` need the training documents (the kept
    states are partitions of them): the model keeps them, and ``save`` stores
    them.

    References
    ----------
    S. Favaro, Y. W. Teh. MCMC for normalized random measure mixture models.
    Statistical Science 28(3), 2013.
    A. Tank, N. Foti, E. Fox. Streaming variational inference for Bayesian
    nonparametric mixture models. AISTATS 2015.
    R. M. Neal. Slice sampling. Annals of Statistics 31(3), 2003.
    """

    # the kept states and the training documents they partition (score after load)
    _persist = BatchEstimator._persist + ("_samples_z", "_samples_u", "_train_indptr", "_train_indices",
                                          "_train_counts")

    def __init__(self, a=1.0, sigma=0.5, tau=1.0, eta=0.1, max_iter=215, n_samples="auto", random_state=None,
                 n_threads=None):
        self._store_params(locals())

    # -- the batch protocol: the kept samples are those "collected" after burn-in ----
    def _check_params(self):
        self._p = _check_hyperparameters(self)
        max_iter = check_int(self.max_iter, "max_iter", minimum=1)
        if isinstance(self.n_samples, str):
            if self.n_samples != "auto":
                raise ValueError(f"n_samples must be 'auto' or a positive integer, got {self.n_samples!r}")
            n_samples = min(50, max_iter - max_iter // 2)
        else:
            n_samples = check_int(self.n_samples, "n_samples", minimum=1)
        if n_samples > max_iter:
            raise ValueError(f"n_samples={n_samples} exceeds max_iter={max_iter}")
        return {"max_iter": max_iter, "burn_in": max_iter - n_samples}

    def _init_state(self, X, rng):
        self._train_indptr, self._train_indices, self._train_counts = X.indptr, X.indices, X.counts
        self.n_features_in_ = X.n_words
        return _NGGPGibbsState(X, dict(self._p, n_words=X.n_words), rng)

    def _check_heldout(self, heldout, X):
        """Held-out documents (new documents, any number)."""
        return as_corpus(heldout, n_words=X.n_words)

    def _evaluate(self, state, heldout, sampling):
        """Held-out scores of the current state (one sample of the chain)."""
        train = self._train_matrix()
        total = float(np.sum(self._sample_log_predictive(state.z, state.u, heldout, state.p, True, train)))
        tokens = self._sample_log_predictive(state.z, state.u, heldout, state.p, False, train)
        return {"heldout_loglik": float(np.sum(tokens)) / max(heldout.n_tokens, 1), "heldout_total": total}

    def _set_fitted(self, state, X):
        p, z, u = state.p, state.z, state.u
        kept = bool(state.samples_z)          # stopped before the kept sweeps: the last state
        self._samples_z = np.array(state.samples_z if kept else [z])
        self._samples_u = np.array(state.samples_u if kept else [u])
        sizes = np.bincount(z, minlength=state.clusters.capacity)
        order = np.argsort(-sizes, kind="stable")[:state.n_components]
        rank = np.empty(len(sizes), dtype=np.int64)
        rank[order] = np.arange(len(order))
        self.labels_ = rank[z]
        self.cluster_sizes_ = sizes[order]
        self.components_ = p["eta"] + state.clusters.arrays["C"][order]
        self.topics_ = self.components_ / self.components_.sum(axis=1, keepdims=True)
        lw = self._log_weights(self.cluster_sizes_, u, p)
        self.weights_ = np.exp(lw[:-1])
        self.weight_new_ = float(np.exp(lw[-1]))
        self.u_ = u
        self.n_components_ = len(order)
        self.vocabulary_ = X.vocabulary

    _component_axes = {"topics_": 0, "weights_": 0, "components_": 0, "cluster_sizes_": 0}
    _remainder = "weight_new_"

    def _component_sizes(self):
        return self.cluster_sizes_

    def _prune_fitted(self, keep):
        super()._prune_fitted(keep)
        relabel = np.full(len(keep), -1, dtype=np.int64)      # documents of removed clusters: -1
        relabel[keep] = np.arange(int(keep.sum()))
        self.labels_ = relabel[self.labels_]

    @staticmethod
    def _log_weights(sizes, u, p):
        lw = np.log(sizes - p["sigma"])
        lw_new = np.log(p["a"]) + (p["sigma"] * np.log(u + p["tau"]) if p["sigma"] > 0 else 0.0)
        lw = np.append(lw, lw_new)
        return lw - logsumexp(lw)

    def _train_matrix(self):
        """The training documents (which the kept states partition), float64 CSR."""
        shape = (len(self._train_indptr) - 1, int(self.n_features_in_))
        return sp.csr_matrix((self._train_counts.astype(np.float64), self._train_indices, self._train_indptr),
                             shape=shape)

    def _sample_log_predictive(self, z, u, docs, p, multinomial_coef, train):
        """Per-document log predictive under one state (z, U) of the chain (8.5);
        ``train`` is ``_train_matrix()``."""
        K = int(z.max()) + 1
        onehot = sp.csr_matrix((np.ones(len(z)), (z, np.arange(len(z)))), shape=(K, len(z)))
        sizes = np.asarray(onehot.sum(axis=1)).ravel()
        used = sizes > 0
        counts = np.asarray((onehot @ train).todense())[used]
        lw = self._log_weights(sizes[used], u, p)
        lam = np.vstack([p["eta"] + counts, np.full((1, train.shape[1]), p["eta"])])
        return mixture_log_predictive(lw, lam, docs, multinomial_coef=multinomial_coef, n_threads=self.n_threads)

    def _log_predictive(self, docs, multinomial_coef):
        """Per-document log predictive, averaged over the kept samples (the mean of
        the per-sample log-likelihoods, [NRM] section 4.3)."""
        p, train = _check_hyperparameters(self), self._train_matrix()
        return np.mean([self._sample_log_predictive(z, u, docs, p, multinomial_coef, train)
                        for z, u in zip(self._samples_z, self._samples_u)], axis=0)


class _NGGPGibbsState(BatchState):
    """The marginal sampler's state: z, U and the per-slot document and word
    counts (a moves.Components table the kernel fills in place; slots of empty
    clusters are reused by the kernel, so the table only grows)."""

    sequential_sweep = True     # each document's draw reads the counts after the previous document's

    def __init__(self, corpus, p, rng):
        self.corpus, self.p, self.rng = corpus, p, rng
        N, W = corpus.n_docs, corpus.n_words
        self.clusters = Components({"nk": ((), np.int64), "C": ((W,), np.float64), "Ctot": ((), np.float64)},
                                   capacity=16)
        self.clusters.add(1)                       # all documents start in one cluster
        self.clusters.arrays["nk"][0] = N
        self.clusters.arrays["C"][0] = np.asarray(corpus.matrix.sum(axis=0)).ravel()
        self.clusters.arrays["Ctot"][0] = self.clusters.arrays["C"][0].sum()
        self.z = np.zeros(N, dtype=np.int32)
        v0 = np.log(_nrm.mode_u(N, 1, p["a"], p["sigma"], p["tau"])) if p["sigma"] > 0 else np.nan
        self.scalars = _nrm.new_state(n_slots=1, n_alive=1, log_u=v0)
        self.samples_z, self.samples_u = [], []

    @property
    def n_components(self):
        return int(self.scalars["n_alive"][0])

    @property
    def u(self):
        return float(np.exp(self.scalars["log_u"][0])) if self.p["sigma"] > 0 else float("nan")

    def state_dict(self):
        saved = super().state_dict()
        saved["clusters"] = {name: self.clusters.arrays[name] for name in ("nk", "C", "Ctot")}
        return saved

    def invariants(self, corpus):
        D, W = corpus.n_docs, corpus.n_words
        yield from _restored_settings(self.p, corpus, ep=False)
        yield "rng", RandomGenerator()
        c = self.clusters
        if not isinstance(c, dict) or not {"nk", "C", "Ctot"} <= set(c):
            raise ValueError("clusters must be a dict of nk, C and Ctot")
        yield "clusters['nk']", Array("int64", (None,), 0), c["nk"]
        cap = len(c["nk"])
        yield "clusters['C']", Array("float64", (cap, W), 0.0), c["C"]
        yield "clusters['Ctot']", Array("float64", (cap,), 0.0), c["Ctot"]
        yield from _restored_scalars(self.scalars, cap)
        yield "z", Array("int32", (D,), 0, max(int(self.scalars["n_slots"][0]) - 1, 0))
        for name in ("samples_z", "samples_u"):
            if not isinstance(getattr(self, name), list):
                raise ValueError(f"{name} must be a list")
        for i, z in enumerate(self.samples_z):
            yield f"samples_z[{i}]", Array("int32", (D,), 0), z
        for i, u in enumerate(self.samples_u):
            if not isinstance(u, float):
                raise ValueError(f"samples_u[{i}] must be a number, got {u!r}")

    def check_counts(self, corpus):
        n, c = int(self.scalars["n_slots"][0]), self.clusters
        same_counts("clusters['nk']", c["nk"], np.bincount(self.z, minlength=len(c["nk"])))
        if int(self.scalars["n_alive"][0]) != int(np.count_nonzero(c["nk"][:n])):
            raise ValueError("scalars['n_alive'] disagrees with the cluster sizes")
        D = corpus.n_docs
        member = sp.csr_matrix((np.ones(D), (self.z, np.arange(D))), shape=(len(c["nk"]), D))
        same_counts("clusters['C']", c["C"], (member @ corpus.matrix).toarray(), rtol=1e-9)
        same_counts("clusters['Ctot']", c["Ctot"], c["C"].sum(axis=1), rtol=1e-9)

    def restore(self, corpus):
        super().restore(corpus)
        arrays = self.clusters
        self.clusters = Components(dict(arrays), n=int(self.scalars["n_slots"][0]))

    def sweep(self):
        c = self.corpus
        no_z, no_u = np.zeros((0, c.n_docs), dtype=np.int32), np.zeros(0)     # no traces
        while True:
            if self.n_components >= self.clusters.capacity:
                self.clusters.n = int(self.scalars["n_slots"][0])
                self.clusters.reserve(2 * self.clusters.capacity)
            a = self.clusters.arrays
            scratch = np.empty(self.clusters.capacity + 1)
            if _nrm.gibbs_run(c.indptr, c.indices, c.counts, self.p, 1, self.rng, self.z, a["nk"], a["C"],
                              a["Ctot"], self.scalars, scratch, no_z, no_u):
                break
        self.clusters.n = int(self.scalars["n_slots"][0])
        return {"u": self.u}

    def collect(self):
        self.samples_z.append(self.z.copy())
        self.samples_u.append(self.u)


def grid_search(X, sigma=0.5, a_grid=(1.0, 10.0, 100.0, 1000.0), tau_grid=(0.1, 1.0, 10.0, 100.0, 1000.0),
                eta=0.1, subset_fraction=0.1, test_fraction=0.2, random_state=None, **adf_params):
    """Choose (a, tau) of an NGGP mixture on a subset of the data ([NRM] supp 4.1).

    A random ``subset_fraction`` of the documents of X (pass the training
    documents: the subset then never touches a test set; the paper does not say) is split into
    ``1 - test_fraction`` / ``test_fraction``; ADF-NRM is run once on the first
    part for every a in ``a_grid`` and (sigma > 0 only) every tau in
    ``tau_grid``, and scored by the total predictive log-likelihood of the
    second part (``score_samples(test).sum()``).

    Parameters
    ----------
    X : Corpus or matrix
    sigma : float in [0, 1), default 0.5
    a_grid, tau_grid : sequences of float
        [NRM]: a in {1, 10, 100, 1000}, tau in {0.1, 1, 10, 100, 1000}.
    eta : float, default 0.1
    subset_fraction : float in (0, 1], default 0.1
        [NRM]: 10% (KOS, synthetic), 5% (NYT).
    test_fraction : float in (0, 1), default 0.2
        [NRM]: 20% (KOS, synthetic), 5% (NYT).
    random_state : int, Generator or None
    **adf_params
        Further ``ADF`` parameters (epsilon, u_posterior, merge, ...).

    Returns
    -------
    best : dict
        ``{"a": ..., "tau": ...}`` (no ``tau`` for sigma = 0), ready for ``ADF(**best, ...)``.
    results : list of dict
        One per grid point: a, tau, score (held-out total predictive
        log-likelihood), n_components; plus ``results[0]["subset"]``, the indices
        (into X) of the subset's training and held-out documents.
    """
    docs = as_corpus(X)
    rng = check_random_state(random_state)
    if not 0 < subset_fraction <= 1:
        raise ValueError(f"subset_fraction must be in (0, 1], got {subset_fraction!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    n_sub = int(round(subset_fraction * docs.n_docs))
    n_test = int(round(test_fraction * n_sub))
    if n_test < 1 or n_sub - n_test < 1:
        raise ValueError(f"a subset of {n_sub} documents cannot be split with test_fraction={test_fraction}")
    subset = rng.permutation(docs.n_docs)[:n_sub]
    train_idx, test_idx = subset[n_test:], subset[:n_test]
    train, test = docs[train_idx], docs[test_idx]
    taus = [1.0] if sigma == 0 else list(tau_grid)
    results = []
    for a in a_grid:
        for tau in taus:
            model = ADF(a=a, sigma=sigma, tau=tau, eta=eta, **adf_params).fit(train)
            results.append({"a": a, "tau": None if sigma == 0 else tau, "score": float(model.score_samples(test).sum()),
                            "n_components": model.n_components_})
    best = max(results, key=lambda r: r["score"])
    results[0]["subset"] = {"train": train_idx, "test": test_idx}
    return ({"a": best["a"]} if sigma == 0 else {"a": best["a"], "tau": best["tau"]}), results
