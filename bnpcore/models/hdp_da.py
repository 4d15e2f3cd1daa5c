"""Direct-assignment mean-field HDP, batch and online, with split and merge
moves (M. Bryant and E. B. Sudderth, "Truly nonparametric online variational
inference for hierarchical Dirichlet processes", NIPS 2012, cited as [SM]).

Model and variational family ([SM] section 2.2)::

    beta ~ GEM(gamma),  phi_k ~ Dir(eta),  pi_j ~ DP(alpha beta),  z_jn ~ Cat(pi_j),  w_jn ~ Cat(phi_z)
    q = delta(beta*) prod_{k<=K} Dir(phi_k | lambda_k) prod_j Dir(pi_j | theta_j) prod_{j,w} Cat(r_jw)

with a nested truncation: tokens use the K instantiated topics only, and the
(K+1)-th cell of beta* and theta_j is the *rest*, the total weight of all other
topics (by the aggregation property of the DP, pi_j over {1..K, rest} is
Dir(alpha beta*)). K grows by splits and shrinks by merges and prunes.

The pieces, in the order of one iteration ([SM] Alg. 2):

* the E-step (eqs. 3-4) per document to convergence, one kernel call per
  minibatch (``bnpcore.kernels._dahdp.estep``), which also returns the
  minibatch statistics sum_j c r and the entropy of r per topic;
* merges of topic pairs whose proportions co-vary across the minibatch
  (section 3.2), accepted when the minibatch bound rises;
* the global step: lambda_hat = eta + (D/|B|) sum_j c r (eq. 8) and
  beta_hat = argmax f_B (L-BFGS-B on the logits), blended with
  rho_t = (tau0 + t)^-kappa (eqs. 6-7; batch mode: rho = 1, eq. 5);
* splits (section 3.1, Alg. 1): topic k is split into the part the global
  state had and the part this minibatch adds, refined by restricted
  iterations, accepted when the minibatch bound rises; two further
  proposals of our own (``split_inits``) divide the topic's words as the
  minibatch divides them, and gather a new topic from the shares of all the
  topics (judged on one half of the minibatch after fitting the other half);
* hyperparameters alpha, eta by Newton's method in log space, gamma in closed
  form, each accepted only when the bound rises.

The bound (the paper's eq. 2, written out in full because the paper's
supplement is not available) is kept as four named terms::

    tokens     = (D/|B|) sum_{j,w} c_jw sum_k r_jwk (E[log phi_kw] - log r_jwk)
    documents  = (D/|B|) sum_j [ lgamma(alpha) - sum_k lgamma(alpha b_k) + sum_k (n_jk + alpha b_k - theta_jk) E[log pi_jk]
                                 - lgamma(sum_k theta_jk) + sum_k lgamma(theta_jk) ]          (k over K + 1 cells)
    topics     = sum_k [ lgamma(W eta) - W lgamma(eta) - lgamma(Lambda_k) + sum_w (lgamma(lambda_kw) + (eta - lambda_kw) E[log phi_kw]) ]
    beta_prior = log p(beta* | gamma)

with n_jk = sum_w c_jw r_jwk, E[log pi_jk] = psi(theta_jk) - psi(sum_l theta_jl),
E[log phi_kw] = psi(lambda_kw) - psi(Lambda_k). ``tokens`` is kept per topic as
the entropy H_k = -sum c r_k log r_k plus sum_w stats_wk E[log phi_kw], so a
change of lambda or a move costs O(vocabulary) instead of a pass over the tokens.

The pieces live in three modules: this one holds the E-step, the minibatch's
local state (``_Minibatch``), the global state and its iteration (``DAState``)
and the estimator; ``hdp_da_bound`` the bound's terms and the optimisation of
beta* and the hyperparameters; ``hdp_da_moves`` the merges, splits, pruning
and ordering, which renumber the topics through ``bnpcore.inference.moves``
and ``SuffStats``.
"""
import math
import warnings

import numpy as np
from scipy.special import digamma

from bnpcore._validation import (MAX_DOCUMENTS, PRODUCT_RANGE, check_inner, check_int, check_memory, check_positive,
                                 check_prior, check_random_state, effective_n_threads, memory_limit)
from bnpcore.base import TopicMixin, exclusive
from bnpcore.corpus import as_corpus
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, InitFromMixin, Number, OneOf,
                                     RandomGenerator, run_iterations)
from bnpcore.inference.online import Minibatch, learning_rate
from bnpcore.inference.stats import SuffStats
from bnpcore.kernels import _dahdp
from bnpcore.models import hdp_da_moves as moves
from bnpcore.models.hdp_da_partitioned import PartitionedDA
from bnpcore.models.hdp_da_bound import (GEM_DENSITIES, _Documents, beta_objective, expected_log_phi,
                                         gem_log_density, learn_hyperparameters, optimize_beta, topic_terms)
from bnpcore.models.hdp_gibbs import DirectAssignmentGibbs
from bnpcore.results import ResultsMixin

__all__ = ["DirectAssignmentVB", "gem_log_density", "beta_objective"]

HYPERPARAMETERS = ("alpha", "gamma", "eta")
# n_components="auto" with a random start (init="random", or online): the number of random topics
RANDOM_TOPICS = 60
# init="gibbs": sweeps of the initial DirectAssignmentGibbs run; max_iter="auto": iterations after a start
# from a sample and after a random start (benchmarks/results/bench_defaults_text.txt)
INIT_GIBBS_ITER = 300
AUTO_ITER_FROM_SAMPLE, AUTO_ITER_RANDOM = 5, 10
_PRODUCT_REASON = "alpha multiplies beta* (down to ~1e-180) and eta enters psi(eta) ~ -1/eta times counts"


def estep_documents(batch, elogphi, alpha_beta, settings, theta=None, norms=False):
    """Eqs. 3-4 on the documents of ``batch`` (a ``Minibatch``) given the rows
    ``elogphi`` (len(batch.vocab), K) of E[log phi] and alpha beta*, warm-started
    from ``theta`` (S, K + 1; overwritten) if given: (theta, ndk, stats over
    ``batch.vocab``, entropy, the responsibilities when ``settings["split_merge"]``
    keeps them, else None). ``norms``: keep the responsibilities and also
    return the log normaliser of every pair and psi(theta') of every document,
    from which ``reduce_estep`` redoes stats and entropy bit for bit: documents
    are independent given the globals, so a minibatch may run in parts
    (``bnpcore.distributed``)."""
    S, K = batch.n_docs, elogphi.shape[1]
    warm = theta is not None
    theta = theta if warm else np.empty((S, K + 1))
    ndk = np.empty((S, K))
    stats = np.zeros((len(batch.vocab), K))
    entropy = np.zeros(K)
    keep = settings["split_merge"] or norms
    resp = np.empty((len(batch.words) if keep else 0, K))
    log_norm, psi_theta = (np.empty(len(batch.words)), np.empty((S, K))) if norms else (None, None)
    _dahdp.estep(batch.ptr, batch.words, batch.counts, elogphi, alpha_beta, settings["estep_tol"],
                 settings["estep_max_iter"], warm, theta, ndk, stats, entropy, resp, settings["n_threads"],
                 log_norm, psi_theta)
    entropy -= np.einsum("wk,wk->k", stats, elogphi)
    out = theta, ndk, stats, entropy, resp if keep else None
    return out + (log_norm, psi_theta) if norms else out


def reduce_estep(batch, elogphi, ndk, resp, log_norm, psi_theta):
    """(stats, entropy) of ``estep_documents`` from the per-document outputs
    of its ``norms``, summed in the kernel's order (``_dahdp.reduce_sums``), so bit for bit."""
    S, K = ndk.shape
    stats, entropy = np.zeros((len(batch.vocab), K)), np.zeros(K)
    _dahdp.reduce_sums(batch.ptr, batch.words, batch.counts, resp, log_norm, ndk, psi_theta, stats, entropy)
    entropy -= np.einsum("wk,wk->k", stats, elogphi)
    return stats, entropy


class _Minibatch:
    """The local state of one minibatch after the E-step: theta (S, K+1), n (S, K),
    statistics (Vb, K), entropy H (K,) and responsibilities (nnz, K) or None.
    The moves renumber its topics through ``SuffStats`` (theta's rest cell, the
    last column, stays where it is)."""

    _AXES = {"theta": 1, "ndk": 1, "stats": 1, "entropy": 0, "resp": 1}

    def __init__(self, batch, theta, ndk, stats, entropy, resp):
        self.batch, self.theta, self.ndk, self.stats, self.entropy, self.resp = \
            batch, theta, ndk, stats, entropy, resp

    @property
    def n_docs(self):
        return self.batch.n_docs

    def tokens(self, elogphi_rows):
        """H_k + sum_w stats_wk E[log phi_kw] per topic, for E[log phi] (K, Vb)."""
        return self.entropy + np.einsum("wk,kw->k", self.stats, elogphi_rows)

    def topics(self):
        """The per-topic quantities as ``SuffStats`` (theta without its rest cell)."""
        fields = {"theta": self.theta[:, :-1], "ndk": self.ndk, "stats": self.stats, "entropy": self.entropy}
        if self.resp is not None:
            fields["resp"] = self.resp
        return SuffStats(fields, axes={name: self._AXES[name] for name in fields})

    def _set(self, topics, order="C"):
        """Take the arrays of ``topics`` in memory order ``order``: sums over a
        topic axis follow it to the last bit."""
        rest = self.theta[:, -1]
        self.theta = np.empty((len(rest), topics.n_components + 1), order=order)
        self.theta[:, :-1], self.theta[:, -1] = topics["theta"], rest
        self.ndk, self.stats = np.asarray(topics["ndk"], order=order), np.asarray(topics["stats"], order=order)
        self.entropy = topics["entropy"]
        if self.resp is not None:
            self.resp = np.asarray(topics["resp"], order=order)

    def merge(self, ka, kb):
        self._set(self.topics().merge(ka, kb))

    def split(self, k, first, second):
        if self.resp is None:
            first, second = ({n: v for n, v in part.items() if n != "resp"} for part in (first, second))
        self._set(self.topics().split(k, first, second))

    def select(self, keep):
        self._set(self.topics().select(keep))

    def permute(self, order):
        # Fortran order, as the column indexing that sorted the topics before the moves were shared
        # left it: the bound of the iteration is then the same to the last bit
        self._set(self.topics().permute(order), order="F")


# ---------------------------------------------------------------------------
# the state
# ---------------------------------------------------------------------------

class DAState(PartitionedDA, BatchState):
    """Globals of the direct-assignment HDP: lambda (K, W), beta* (K + 1, rest
    last), alpha, gamma, eta; the minibatch stream (online) or the documents'
    theta (batch, warm starts); counters. One ``sweep`` is one iteration of
    [SM] Alg. 2 on a minibatch (online) or on all documents (batch)."""

    _transient = ("corpus", "_word_map")

    def __init__(self, corpus, settings, lam, beta, alpha, gamma, eta, n_total, rng):
        self.settings = settings
        self.lam, self.beta = lam, beta
        self.alpha, self.gamma, self.eta = float(alpha), float(gamma), float(eta)
        self.n_total = int(n_total)
        self.rng = rng
        self.updates = 0
        self.documents = 0
        self.order = None
        self.position = 0
        self.theta = None
        self.restore(corpus)

    def restore(self, corpus):
        self.corpus = corpus
        self._word_map = np.full(self.lam.shape[1], -1, dtype=np.int32)

    @property
    def n_components(self):
        return self.lam.shape[0]

    def invariants(self, corpus):
        positive = Number(np.finfo(float).tiny)
        D = corpus.n_docs
        if not isinstance(self.settings, dict):
            raise ValueError("settings must be a dict")
        specs = {"mode": OneOf("batch", "online"), "merge_prior": OneOf("double", "single"),
                 "gem_density": OneOf(*GEM_DENSITIES), "batch_size": Number(1, integer=True),
                 "n_threads": Number(1, integer=True), "max_merges": Number(0, integer=True, optional=True),
                 **{key: OneOf(True, False) for key in ("split_merge", "bound")},
                 **{key: Number(0, integer=True) for key in ("max_splits", "split_candidates", "merge_candidates",
                                                             "restricted_iter", "restricted_sweeps",
                                                             "estep_max_iter")},
                 "learning_decay": Number(np.finfo(float).tiny, 1.0), "estep_tol": Number(np.finfo(float).tiny),
                 **{key: Number(0.0) for key in ("learning_offset", "prune_threshold")},
                 "merge_threshold": Number()}
        for key, spec in specs.items():
            if key not in self.settings:
                raise ValueError(f"settings has no {key!r}")
            yield f"settings[{key!r}]", spec, self.settings[key]
        for key in ("learn", "split_inits"):
            value = self.settings.get(key)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"settings[{key!r}] must be a tuple of names, got {value!r}")
        yield "lam", Array("float64", (None, corpus.n_words), np.finfo(float).tiny)
        K = self.lam.shape[0]
        if K < 1:
            raise ValueError("lam has no topics")
        yield "beta", Array("float64", (K + 1,), 0.0, 1.0)
        for name in ("alpha", "gamma", "eta"):
            yield name, positive
        yield "n_total", Number(1, integer=True)
        yield "rng", RandomGenerator()
        yield "updates", Number(0, integer=True)
        yield "documents", Number(0, integer=True)
        yield "order", Array("int64", (D,), 0, D - 1, optional=True)
        yield "position", Number(0, D, integer=True)
        yield "theta", Array("float64", (D, K + 1), 0.0, optional=True)
        yield "_last_bound", Number(optional=True), self.__dict__.get("_last_bound")

    def check_counts(self, corpus):
        if self.order is not None and len(np.unique(self.order)) != corpus.n_docs:
            raise ValueError("order is not a permutation of the documents")

    # -- one iteration ------------------------------------------------------------
    def sweep(self):
        return self.step(self.next_ids())

    def next_ids(self):
        """The documents of the next iteration: all of them (batch mode) or the
        next minibatch of the current random order (a new order per epoch)."""
        if self.settings["mode"] == "batch":
            return np.arange(self.corpus.n_docs)
        if self.order is None or self.position >= len(self.order):
            self.order, self.position = self.rng.permutation(self.corpus.n_docs), 0
        ids = self.order[self.position:self.position + self.settings["batch_size"]]
        self.position += len(ids)
        return ids

    @property
    def warm(self):
        """Whether the E-step starts from the documents' theta of the previous iteration (batch mode)."""
        return self.settings["mode"] == "batch" and self.theta is not None

    def step(self, ids):
        """E-step, merges, global step, splits, hyperparameters on the documents
        ``ids`` of ``self.corpus``; returns the iteration's record."""
        return self.update(self.estep(Minibatch(self.corpus, ids, self._word_map), warm=self.warm))

    def update(self, local):
        """Everything after the E-step (``local``, a ``_Minibatch``): merges, the
        global step, splits, hyperparameters, prune, sort; returns the record."""
        cfg = self.settings
        batch = local.batch
        S = batch.n_docs
        scale = self.n_total / S
        batch_mode = cfg["mode"] == "batch"
        merges = moves.merge(self, local, scale) if cfg["split_merge"] else (0, 0)
        # (tau0 + t)^-kappa at most 1 (a learning_offset below 1 would step past the estimate) and, as [SM], with
        # no floor (a batch size of 0 to learning_rate)
        rho = 1.0 if batch_mode else learning_rate("robbins_monro", self.updates, self.documents + S, 0, self.n_total,
                                                   cfg["learning_offset"], cfg["learning_decay"])
        old_lam, old_beta = self.lam, self.beta
        lam_hat = np.full(self.lam.shape, self.eta)
        lam_hat[:, batch.vocab] += scale * local.stats.T
        self.lam = (1.0 - rho) * self.lam + rho * lam_hat if rho < 1.0 else lam_hat
        beta_hat = self._beta_step(local, scale)
        self.beta = (1.0 - rho) * self.beta + rho * beta_hat if rho < 1.0 else beta_hat
        splits = moves.split(self, local, scale, rho, old_lam, lam_hat, old_beta, beta_hat) \
            if cfg["split_merge"] else (0, 0)
        if cfg["learn"]:
            learn_hyperparameters(self, local, scale, rho)
        pruned = moves.prune(self, local)
        moves.sort(self, local)
        if batch_mode:
            self.theta = local.theta
        self.updates += 1
        self.documents += S
        record = {"n_documents": self.documents, "rho": rho, "alpha": self.alpha, "gamma": self.gamma,
                  "eta": self.eta, "splits": splits[0], "split_tries": splits[1], "merges": merges[0],
                  "merge_tries": merges[1], "pruned": pruned}
        if cfg["bound"]:
            record["bound"] = self.bound(local, scale)
            total = sum(record["bound"].values())
            if batch_mode:
                previous = getattr(self, "_last_bound", None)
                record["delta"] = math.inf if previous is None else abs(total - previous) / abs(total)
                self._last_bound = total
        return record

    # -- E-step -----------------------------------------------------------------------
    def estep(self, batch, warm=False):
        """Eqs. 3-4 on a minibatch with the current globals; the responsibilities
        are kept when moves need them."""
        theta = self.theta[batch.doc_ids] if warm else None
        return _Minibatch(batch, *estep_documents(batch, self.elogphi(batch.vocab), self.alpha * self.beta,
                                                  self.settings, theta))

    def elogphi(self, vocab):
        """E[log phi] of the words ``vocab`` (global ids) as the E-step reads it: (len(vocab), K), C-ordered."""
        return np.ascontiguousarray(expected_log_phi(self.lam, vocab).T)

    # -- bound ---------------------------------------------------------------------------
    def bound(self, local, scale, lam=None, beta=None):
        """The minibatch bound L_B (the bound itself in batch mode) as named terms,
        under the current globals or the given (lam, beta)."""
        lam = self.lam if lam is None else lam
        beta = self.beta if beta is None else beta
        tokens, documents = self.local_terms(local, scale, lam, beta)
        return {"tokens": tokens, "documents": documents, "topics": float(topic_terms(lam, self.eta).sum()),
                "beta_prior": float(self.log_prior(beta))}

    def local_terms(self, local, scale, lam, beta):
        """The ``tokens`` and ``documents`` terms of the bound under (lam, beta)."""
        tokens = local.tokens(expected_log_phi(lam, local.batch.vocab))
        docs = _Documents(local.theta, local.ndk, self.alpha * beta, self.alpha)
        return scale * float(tokens.sum()), scale * float(docs.value())

    def _beta_step(self, local, scale):
        theta = local.theta
        elogpi = digamma(theta) - digamma(theta.sum(axis=1))[:, None]
        return optimize_beta(self.beta, elogpi.sum(axis=0), len(theta), scale, self.alpha, self.gamma,
                             self.settings["gem_density"])

    def log_prior(self, beta):
        return gem_log_density(beta, self.gamma, self.settings["gem_density"])[0]

    def refit(self, batch, lam, beta):
        """The E-step of ``batch`` under the globals (lam, beta) and the current alpha: a ``_Minibatch``."""
        elogphi = np.ascontiguousarray(expected_log_phi(lam, batch.vocab).T)
        return _Minibatch(batch, *estep_documents(batch, elogphi, self.alpha * beta, self.settings))


# ---------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------

def batch_bytes_per_topic(X):
    """Bytes per topic of a batch fit's arrays: the responsibilities of every
    (document, word) pair, theta and n_jk per document (and a copy), lambda, its
    step's copies, E[log phi] and the statistics per word."""
    return 8 * (X.nnz + 3 * X.n_docs + 6 * X.n_words)


def largest_topics(lam, beta, eta, n_max):
    """The ``n_max`` largest topics of a start (lambda, beta*) by their counts
    lambda - eta, in their order; the weight of the others joins the rest cell."""
    keep = np.sort(np.argsort(-(lam - eta).sum(axis=1), kind="stable")[:n_max])
    rest = beta[-1] + beta[:-1].sum() - beta[keep].sum()
    return lam[keep], np.append(beta[keep], rest)


def sample_globals(sampler, X, eta, n_total):
    """(lambda, beta*) from the last sample of a fitted ``DirectAssignmentGibbs``:
    eta + its topic-word counts, scaled to n_total / X.n_docs times the corpus's
    tokens per document, and its weights with the new-topic weight as the rest cell."""
    if not isinstance(sampler, DirectAssignmentGibbs) or not hasattr(sampler, "topics_"):
        raise TypeError(f"init_from must be a fitted hdp.DirectAssignmentGibbs, got {type(sampler).__name__}")
    if sampler.topics_.shape[1] != X.n_words:
        raise ValueError(f"init_from has {sampler.topics_.shape[1]} words, the corpus {X.n_words}")
    if sampler.vocabulary_ is not None and X.vocabulary is not None \
            and list(sampler.vocabulary_) != list(X.vocabulary):
        raise ValueError("init_from was fitted with a different vocabulary")
    # topics_ = (n_kw + eta_g) / (n_k + W eta_g): the counts back from the sample's sizes n_k
    sizes = sampler._component_sizes().astype(float)
    eta_g = sampler.eta_tot / X.n_words
    counts = np.maximum(sampler.topics_ * (sizes + sampler.eta_tot)[:, None] - eta_g, 0.0)
    counts *= X.n_tokens * (n_total / X.n_docs) / max(counts.sum(), 1.0)
    beta = np.append(sampler.weights_, sampler.beta_new_)
    return eta + counts, beta / beta.sum()


class DirectAssignmentVB(InitFromMixin, ResultsMixin, TopicMixin, BatchEstimator):
    """HDP topic model by direct-assignment mean-field variational inference,
    batch (bHDP) or online (oHDP), with split and merge moves (oHDP-SM,
    bHDP-SM) that let the number of topics grow and shrink.

    M. Bryant and E. B. Sudderth, "Truly nonparametric online variational
    inference for hierarchical Dirichlet processes", NIPS 2012. The variational
    family keeps q(phi_k) = Dir(lambda_k) for K topics, q(pi_j) = Dir(theta_j)
    over the K topics and the rest of the mass, and a point estimate beta* of
    the global weights (section 2.2); the per-document E-step alternates
    eqs. 3 and 4 to convergence; online, the global step blends the minibatch
    estimates with rho_t = (tau0 + t)^-kappa (eqs. 6-8). Split moves (section
    3.1, Alg. 1) divide a topic into what the model had and what the minibatch
    adds and refine the halves by restricted iterations; merge moves (section
    3.2) join topics whose proportions co-vary across the minibatch. Both are
    accepted only when the minibatch estimate of the bound rises.
    ``bnpcore.distributed.fit`` runs it on a Dask cluster (the E-step on the
    workers, where the documents live; the rest on the client).

    Three details the paper leaves open, as implemented: q(pi_j) has a
    (K+1)-th cell for the rest of the mass (without it the prior of pi_j is not
    a proper Dirichlet); the restricted E-step keeps each token's total
    responsibility for the two halves fixed (the paper's displayed formula
    normalises over all topics while holding the others fixed, so
    responsibilities would no longer sum to 1); the restricted M-step runs
    once after the documents, not once per document.

    The default fit (``init="auto"``, ``mode="auto"``, ``n_components="auto"``)
    is a batch fit started from the last state of a short
    :class:`DirectAssignmentGibbs` run (``init_gibbs_iter`` sweeps, its
    defaults otherwise, the same ``random_state``), which also chooses the
    number of topics; splits and prunes change it from there. ``fit(X,
    init_from=sampler)`` starts from a given fitted
    :class:`DirectAssignmentGibbs` over the same vocabulary instead. Either
    way lambda_k = eta + the sample's word counts of topic k (scaled to the
    corpus size D when the sampler saw fewer tokens), beta* = its topic
    weights with its new-topic weight as the rest cell, and the learned
    hyperparameters start at its alpha and gamma. A batch fit from a
    sampler's topics ends better than random starts (docs/split_merge.md)
    and has more coherent topics: online fits from random topics make
    mid-sized topics that mix the corpus's common words with their theme
    (``mode="online"`` gives the old default). Online, rho_0 = 1 replaces a
    start by the first minibatch's estimate: raise ``learning_offset`` to
    keep it.

    Parameters
    ----------
    n_components : int or "auto", default "auto"
        Initial number of random topics K (splits, merges and prunes change
        it). "auto": the Gibbs start's topics when ``init`` picks it, else 60
        random topics (from 60 rather than 20, online fits of the standard
        library's docstrings score c_npmi 0.077 rather than 0.057, mean of
        seeds 0-2; from 100 not higher: ``benchmarks/results/bench_defaults_text.txt``).
    mode : {"auto", "online", "batch"}, default "auto"
        "online": minibatches of ``batch_size`` documents in random order;
        "batch": every iteration is an E-step over all documents (warm-started
        from the previous one) and the exact M-step (rho = 1); the bound never
        decreases without moves. "auto": "batch" when the fit starts from a
        sample (the Gibbs start or ``init_from``), else "online".
    init : {"auto", "gibbs", "random"}, default "auto"
        The start of ``fit``. "gibbs": the last state of a
        :class:`DirectAssignmentGibbs` run of ``init_gibbs_iter`` sweeps (from
        its 100 topics, ``eta_tot`` 100 and learned concentrations); "random":
        ``n_components`` random topics, lambda = eta + Gamma(1, 1) * 100 D /
        (K W) ([SM] leaves it open). "auto": "gibbs" when ``n_components`` is
        "auto" and ``mode`` is not "online", else "random". ``init_from``
        overrides it. ``partial_fit`` always starts from random topics (its
        first step, rho_0 = 1, replaces any start) and refuses "gibbs".
        With the defaults (a Gibbs start of 300 sweeps, then 5 batch
        iterations) the 20 largest topics of the standard library's
        docstrings are more coherent (c_npmi, mean of seeds 0-4) than those
        of tomotopy's HDPModel trained for the same time, where the old
        default (online from 60 random topics) and starts of 100 sweeps
        followed by 10-20 iterations scored below it
        (``benchmarks/results/bench_defaults_text.txt``); on KOS the default
        holds twice the old default's topics and scores a little better
        (``benchmarks/results/bench_defaults_kos.txt``).
        ``bnpcore.distributed.fit`` runs the Gibbs start on the client. A
        batch fit holds K doubles per (document, word) pair: a start from a
        sample with more topics than a quarter of the memory holds keeps the
        largest of them (the others' weight joins the rest cell) and warns.
    init_gibbs_iter : int in [1, 1000], default 300
        Sweeps of the Gibbs start.
    split_merge : bool, default True
        Propose splits and merges every iteration.
    alpha, gamma, eta : float, default 1.0, 1.0, 0.5
        Initial document concentration, top-level concentration and topic
        Dirichlet parameter ([SM] gives no values). eta = 0.5 rather than the
        0.01 usual for collapsed samplers: mean-field VB's exp(E[log phi])
        acts like counts minus about 0.5, so VB needs eta larger by about 0.5
        to smooth as a sampler with a small eta does (Asuncion, Welling,
        Smyth & Teh, "On smoothing and inference for topic models", UAI
        2009); batch fits started from a G-HDP sample's topics do better with
        the sampler's small eta (docs/split_merge.md has both comparisons).
        alpha and eta in [1e-100, 1e100], gamma in [1e-300, 1e300]
        (docs/numerics.md).
    learn_hyperparameters : bool or collection of {"alpha", "gamma", "eta"}, default ("alpha", "gamma")
        Which hyperparameters to learn: alpha and eta by Newton's method in log
        space, gamma in closed form (-K / log beta*_rest); True learns all three.
    batch_size : int, default 100
        Documents per minibatch (online).
    max_iter : int or "auto", default "auto"
        Passes over the corpus (epochs), as in scikit-learn's online LDA; one
        ``history_`` record per minibatch (online) or pass (batch). "auto": 5
        from a sample (the Gibbs start or ``init_from``), whose topics a few
        batch passes refine, else 10.
    total_samples : int, optional
        D, the corpus size the minibatch statistics are scaled to (default: the
        documents given to ``fit``; ``partial_fit`` streams need it).
    learning_offset, learning_decay : float, default 1.0, 0.5
        tau0 and kappa of rho_t = (tau0 + t)^-kappa ([SM] section 4 uses
        (1 + t)^-0.5 for every online run).
    moves : dict, optional
        Settings of the split and merge moves (``split_merge=True``), validated
        together; the keys not given keep their defaults:

        - ``max_splits`` (int, default 3): splits accepted per iteration
          ([SM]: 1).
        - ``max_merges`` (int or None, default 0): merges accepted per
          iteration (None: every candidate pair that gains and shares no topic
          with an accepted one, as the paper). 0 switches merges off: on KOS
          the paper's merges follow the bound down to a few topics and a worse
          held-out score, while the splits alone grow the topics and score
          better than no moves from any start (docs/split_merge.md).
        - ``split_candidates`` (int in [1, 1000], default 5): topics tried as
          splits per iteration, in decreasing order of their minibatch mass
          (the paper tries every topic; each try costs a pass over the
          minibatch tokens of one topic).
        - ``merge_candidates`` (int in [1, 1000], default 20): topic pairs
          tried as merges per iteration, in decreasing covariance.
        - ``merge_threshold`` (float, default 0.0): pairs whose covariance of
          theta over the minibatch is above this are merge candidates (Alg. 2:
          positive covariance).
        - ``merge_prior`` ("double" or "single", default "double"): lambda of
          a merged topic: lambda' + lambda'' (the paper; the exact inverse of
          a split) or lambda' + lambda'' - eta (one eta plus each topic's part
          above eta, where a split half holds less than eta).
        - ``split_inits`` (collection of "minibatch", "divide", "reassign",
          default ("minibatch", "divide")): split proposals tried for each
          candidate topic. "minibatch": the paper's, the halves start as what
          the model had and what the minibatch adds; "divide" (online only):
          the halves divide the topic's words as a fit of the minibatch alone
          divides them; of these two the one with the larger gain is tested.
          "reassign" (online only), tried when neither gains, for three
          candidates per iteration in turn: the "divide" halves, then every
          topic gives the new one the share of its words that the E-step of
          half the minibatch moves to it, judged on the other half (a true
          topic spread thinly over many topics is found only this way). On
          the bars data of [SM] section 4 (20 epochs), started from 2, 5 and
          10 topics, "minibatch" alone ends with 11, 7 and 10 of the 20 bars
          found, with "divide" 18, 17 and 18 (late in a run the paper's
          proposal gives the new half no tokens), with all three 20, as from
          20, 40, 50, 80 and 100 topics; a run takes about twice as long as
          with two (docs/split_merge.md).
        - ``restricted_iter`` (int in [0, 1000], default 5): rounds of
          (r, theta) of the restricted iteration per document and pass.
        - ``restricted_sweeps`` (int in [1, 1000], default 10): passes of the
          restricted iteration over the minibatch; the halves are updated
          after every document (Alg. 1), so that two halves that start alike
          separate (5 passes left more blended topics on bars).

        For the paper's moves pass ``moves={"max_merges": None, "max_splits":
        1, "split_candidates": 10, "split_inits": ("minibatch", "divide",
        "reassign")}``.
    prune_threshold : float, default 1.0
        Topics with fewer expected words leave after each iteration; their
        weight goes to the rest cell. 0 disables pruning.
    gem_density : {"beta", "stick"}, default "beta"
        The GEM density of the point beta* (the paper does not write it): in
        the coordinates beta (with the Jacobian of the stick-breaking map) or
        of the sticks.
    estep_tol, estep_max_iter : float, int, default 1e-3, 100
        Per-document stopping rule of the E-step: mean absolute change of
        theta_j (estep_max_iter in [1, 1000]).
    compute_bound : bool, optional
        Record the bound (the minibatch estimate, online) as ``bound`` in
        ``history_``. Default: True in batch mode (the stopping rule uses it),
        False online (it costs a pass over all K x W topic parameters).
    tol : float, default 1e-6
        Batch mode: stop when the relative change of the bound is below it.
    n_threads : int or None, default None
        Threads of the E-step (documents in parallel, then the statistics in
        parallel over topics, each summed in document order; None:
        OMP_NUM_THREADS or all cpus), and of the split proposals: those of
        the next ``n_threads`` candidate topics are made at once, one per
        thread, and read in order (on KOS they were three quarters of a batch
        iteration with moves). Merges run on one thread. Results are
        bit-identical for any number of threads.
    random_state : int, Generator or None

    Attributes
    ----------
    components_ : ndarray (K, W), lambda
    topics_ : ndarray (K, W), posterior mean topics, largest beta* first
    weights_ : ndarray (K,), beta*_k of the topics
    rest_weight_ : float, beta* of the rest cell
    alpha_, gamma_, eta_ : the (learned) hyperparameters
    n_components_ : int
    history_ : list of dict
        One record per iteration: the protocol keys, ``rho``, ``alpha``,
        ``gamma``, ``eta``, ``splits``, ``split_tries``, ``merges``,
        ``merge_tries``, ``pruned``, and ``bound`` (named terms ``tokens``,
        ``documents``, ``topics``, ``beta_prior``) when computed.
    """

    _persist = BatchEstimator._persist + ("_grow_total",)
    partitioned = True      # its state runs on partitions (hdp_da_partitioned; bnpcore.distributed)

    def __init__(self, n_components="auto", mode="auto", split_merge=True, alpha=1.0, gamma=1.0, eta=0.5,
                 learn_hyperparameters=("alpha", "gamma"), batch_size=100, max_iter="auto", total_samples=None,
                 learning_offset=1.0, learning_decay=0.5, moves=None, prune_threshold=1.0, gem_density="beta",
                 estep_tol=1e-3, estep_max_iter=100, compute_bound=None, tol=1e-6, init="auto",
                 init_gibbs_iter=INIT_GIBBS_ITER, n_threads=None, random_state=None):
        self._store_params(locals())

    # -- the start and the mode ------------------------------------------------------
    def _check_start(self):
        """Validate n_components, mode, init and init_gibbs_iter."""
        if isinstance(self.n_components, str):
            if self.n_components != "auto":
                raise ValueError(f"n_components must be 'auto' or a positive integer, got {self.n_components!r}")
        else:
            check_int(self.n_components, "n_components", minimum=1)
        if self.mode not in ("auto", "online", "batch"):
            raise ValueError(f"mode must be 'auto', 'online' or 'batch', got {self.mode!r}")
        if self.init not in ("auto", "gibbs", "random"):
            raise ValueError(f"init must be 'auto', 'gibbs' or 'random', got {self.init!r}")
        check_inner(self.init_gibbs_iter, "init_gibbs_iter", 1)
        if isinstance(self.max_iter, str) and self.max_iter != "auto":
            raise ValueError(f"max_iter must be 'auto' or a positive integer, got {self.max_iter!r}")

    def _from_sample(self):
        return self._start() == "gibbs" or getattr(self, "_init_from", None) is not None

    def _max_iter(self):
        if self.max_iter == "auto":
            return AUTO_ITER_FROM_SAMPLE if self._from_sample() else AUTO_ITER_RANDOM
        return self.max_iter

    def _start(self):
        """The start ``init`` names: "auto" is "gibbs" with ``n_components="auto"``
        outside online mode, else "random"."""
        if self.init != "auto":
            return self.init
        return "gibbs" if self.n_components == "auto" and self.mode != "online" else "random"

    def _mode(self):
        """The mode ``mode`` names: "auto" is "batch" when the fit starts from a
        sample (the Gibbs start or ``init_from``), else "online"."""
        if self.mode != "auto":
            return self.mode
        return "batch" if self._from_sample() else "online"

    # -- the batch protocol ------------------------------------------------------
    def _settings(self, mode=None):
        """Validate the parameters; the state's settings (in ``mode``, default the fit's)."""
        self._check_start()
        mode = self._mode() if mode is None else mode
        for name in ("split_merge",):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False")
        for name in ("alpha", "eta"):
            check_prior(getattr(self, name), name, bounds=PRODUCT_RANGE, reason=_PRODUCT_REASON)
        check_prior(self.gamma, "gamma")
        check_positive(self.learning_decay, "learning_decay")
        check_positive(self.learning_offset, "learning_offset", allow_zero=True)
        if self.learning_decay > 1:
            raise ValueError(f"learning_decay must be in (0, 1], got {self.learning_decay}")
        learn = self.learn_hyperparameters
        if isinstance(learn, (bool, np.bool_)):
            learn = HYPERPARAMETERS if learn else ()
        elif isinstance(learn, str) or not all(name in HYPERPARAMETERS for name in learn):
            raise ValueError(f"learn_hyperparameters must be True, False or a collection of {HYPERPARAMETERS}, "
                             f"got {learn!r}")
        check_int(self.batch_size, "batch_size")
        check_int(self._max_iter(), "max_iter")
        check_inner(self.estep_max_iter, "estep_max_iter")
        move_settings = moves.check_moves(self.moves)
        if self.total_samples is not None:
            check_int(self.total_samples, "total_samples", maximum=MAX_DOCUMENTS)
        if self.gem_density not in GEM_DENSITIES:
            raise ValueError(f"gem_density must be one of {GEM_DENSITIES}, got {self.gem_density!r}")
        check_positive(self.prune_threshold, "prune_threshold", allow_zero=True)
        check_positive(self.estep_tol, "estep_tol")
        check_positive(self.tol, "tol", allow_zero=True)
        bound = mode == "batch" if self.compute_bound is None else self.compute_bound
        if not isinstance(bound, (bool, np.bool_)):
            raise TypeError("compute_bound must be True, False or None")
        return {"mode": mode, "split_merge": bool(self.split_merge), "learn": tuple(learn),
                "batch_size": int(self.batch_size), "learning_offset": float(self.learning_offset),
                "learning_decay": float(self.learning_decay), **move_settings,
                "prune_threshold": float(self.prune_threshold),
                "gem_density": self.gem_density, "estep_tol": float(self.estep_tol),
                "estep_max_iter": int(self.estep_max_iter), "bound": bool(bound),
                "n_threads": effective_n_threads(self.n_threads)}

    def _check_params(self):
        mode = self._settings()["mode"]
        return {"max_iter": int(self._max_iter()), "tol": float(self.tol) if mode == "batch" else None}

    def _loop_settings(self, X):
        """Online, one iteration of the loop is a minibatch: max_iter epochs."""
        loop = self._check_params()
        if self._mode() == "online":
            loop["max_iter"] *= -(-X.n_docs // int(self.batch_size))
        return loop

    def _new_state(self, X, rng, n_total, start=None, mode=None):
        settings = self._settings(mode)
        alpha, gamma = self.alpha, self.gamma
        if start is None and mode is None and self._start() == "gibbs":      # fit, not partial_fit's mode="online"
            # the sampler's last state (burn_in: every sweep before it), from its default 100 topics
            start = DirectAssignmentGibbs(max_iter=self.init_gibbs_iter, burn_in=self.init_gibbs_iter - 1,
                                          store_doc_topic=False, random_state=rng).fit(X)
        if start is None:
            K = RANDOM_TOPICS if self.n_components == "auto" else int(self.n_components)
            W = X.n_words
            # lambda and its step's copies (K x W each), the documents' proportions and responsibilities
            check_memory(8 * K * (5 * W + 2 * X.n_docs), f"n_components={K}", X)
            # [SM] leaves the initial topics open: lambda = eta + Gamma(1, 1) * 100 D / (K W)
            lam = self.eta + rng.gamma(1.0, 1.0, size=(K, W)) * (100.0 * n_total / (K * W))
            beta = np.full(K + 1, 1.0 / (K + 1))
        else:
            lam, beta = sample_globals(start, X, self.eta, n_total)
            limit = memory_limit()
            n_max = None if limit is None else max(1, int(limit // 4 // batch_bytes_per_topic(X)))
            if settings["mode"] == "batch" and n_max is not None and len(lam) > n_max:
                # a batch fit holds K doubles per (document, word) pair: keep the topics a quarter of the memory holds
                held, n_start = (lam - self.eta).sum(), len(lam)
                lam, beta = largest_topics(lam, beta, self.eta, n_max)
                warnings.warn(f"DirectAssignmentVB: the start's {n_start} topics take more than a quarter of "
                              f"the memory in a batch fit on {X.nnz} (document, word) pairs; it starts from the "
                              f"{n_max} largest, which hold {(lam - self.eta).sum() / held:.1%} of the tokens "
                              "(mode='online' holds the pairs of one minibatch)", UserWarning, stacklevel=2)
            learn = settings["learn"]
            alpha = start.alpha_ if "alpha" in learn else alpha
            gamma = start.gamma_ if "gamma" in learn else gamma
        return DAState(X, settings, lam, beta, alpha, gamma, self.eta, n_total, rng)

    def _init_state(self, X, rng):
        return self._new_state(X, rng, self.total_samples if self.total_samples is not None else X.n_docs,
                               self._init_from)

    def _set_fitted(self, state, X):
        # the fitted view lists the topics by size (ResultsMixin), the state by beta* (_sort)
        order = np.argsort(-state.lam.sum(axis=1), kind="stable")
        lam = state.lam[order]
        self.components_ = lam
        self.topics_ = lam / lam.sum(axis=1, keepdims=True)
        self.weights_ = state.beta[:-1][order]
        self.rest_weight_ = float(state.beta[-1])
        self.alpha_, self.gamma_, self.eta_ = state.alpha, state.gamma, state.eta
        self.n_components_ = state.n_components
        self.n_features_in_ = X.n_words
        self.vocabulary_ = X.vocabulary
        self.n_updates_ = state.updates
        self.n_documents_seen_ = state.documents
        self.corpus_size_ = state.n_total

    def _check_heldout(self, heldout, X):
        """Held-out data are new documents, scored by document completion."""
        heldout = as_corpus(heldout, n_words=X.n_words)
        if heldout.n_tokens == 0:
            raise ValueError("heldout has no tokens")
        return heldout

    def _evaluate(self, state, heldout, sampling):
        self._set_fitted(state, state.corpus)
        return {"heldout_loglik": float(self.score(heldout))}

    # -- streaming ------------------------------------------------------------------
    @exclusive
    def partial_fit(self, X, y=None, *, total_samples=None):
        """One online iteration per ``batch_size`` documents of ``X``, in order
        (online updates in any ``mode``, as scikit-learn's online LDA).
        An unfitted estimator starts from random topics (``n_components``,
        "auto": 60), never from a Gibbs run: there ``init="gibbs"`` is a
        ValueError. A fitted model (from any start) continues online.

        D (the corpus size the statistics are scaled to) is ``total_samples``,
        else the constructor's, else that of the previous fit, else the
        documents seen so far including ``X``. The first call on an unfitted
        estimator starts from a fresh state; later calls continue the model's
        (also after ``bnpcore.load``). Each minibatch is one iteration of the
        batch loop (``bnpcore.inference.batch.run_iterations``): one ``history_``
        record, and a reporting callback that returns True stops the call after
        that minibatch, with the model fitted on the minibatches so far.
        """
        return self._partial_fit(X, total_samples)

    def _partial_fit(self, X, total_samples):
        settings = self._settings("online")
        fitted = bool(self._fitted_names())
        X = self._check_input(X) if fitted else as_corpus(X)
        if X.n_tokens == 0:
            raise ValueError("the documents have no tokens")
        total = next((check_int(v, "total_samples", maximum=MAX_DOCUMENTS) for v in (total_samples, self.total_samples) if v is not None),
                     None)
        if fitted:      # the fitted attributes are the whole online state
            state = DAState(X, settings, self.components_.copy(), np.append(self.weights_, self.rest_weight_),
                            self.alpha_, self.gamma_, self.eta_, self.corpus_size_, None)
            state.updates, state.documents = self.n_updates_, self.n_documents_seen_
            seconds = self.history_[-1]["fit_seconds"] if self.history_ else 0.0
        else:
            if self.init == "gibbs":
                raise ValueError("init='gibbs' starts fit() only: partial_fit's first step (rho_0 = 1) replaces any "
                                 "start by its first minibatch's estimate; use init='auto' or 'random'")
            state = self._new_state(X, check_random_state(self.random_state), total or X.n_docs, mode="online")
            self._grow_total, self.history_, seconds = total is None, [], 0.0
        if total is not None:
            state.n_total = total
        elif getattr(self, "_grow_total", False):      # D = the documents seen so far
            state.n_total = state.documents + X.n_docs
        # the batch loop of every estimator, one iteration per minibatch of X in order
        state.order, state.position = np.arange(X.n_docs), 0
        run_iterations(self, state, state.updates, state.updates - (-X.n_docs // settings["batch_size"]), seconds,
                       record=lambda it, seconds: {"n_components": state.n_components, "fit_seconds": seconds})
        self._set_fitted(state, X)
        return self

    # -- inference on new documents ---------------------------------------------------
    # the fitted attributes are the whole online state: a pruned model trains on
    _component_axes = {"topics_": 0, "weights_": 0, "components_": 0}
    _remainder = "rest_weight_"

    def _component_sizes(self):
        return self.components_.sum(axis=1) - self.n_features_in_ * self.eta_     # lambda = eta + counts

    def transform(self, X, *, batch_size=1000):
        """Topic proportions of (new) documents by the E-step (eqs. 3-4) with the
        fitted topics and beta* fixed: theta_jk normalised over the K topics
        (the rest cell's share, alpha beta*_rest / (alpha + N_j), is dropped).

        Returns
        -------
        ndarray of shape (n_docs, n_components_)
        """
        X = self._check_input(X)
        check_int(batch_size, "batch_size")
        settings = dict(self._settings(), split_merge=False)
        state = DAState(X, settings, self.components_, np.append(self.weights_, self.rest_weight_), self.alpha_,
                        self.gamma_, self.eta_, X.n_docs, None)
        # several batches: E[log phi] of every word once, each batch taking its rows (the same
        # values as state.elogphi of its vocabulary, without K digammas per word per batch)
        elogphi = state.elogphi(slice(None)) if X.n_docs > batch_size else None
        out = np.empty((X.n_docs, self.n_components_))
        for start in range(0, X.n_docs, batch_size):
            ids = np.arange(start, min(start + batch_size, X.n_docs))
            batch = Minibatch(X, ids, state._word_map)
            theta = (state.estep(batch).theta if elogphi is None else
                     estep_documents(batch, elogphi[batch.vocab], state.alpha * state.beta, settings)[0])[:, :-1]
            total = theta.sum(axis=1, keepdims=True)
            out[ids] = np.divide(theta, total, out=np.full_like(theta, 1.0 / theta.shape[1]), where=total > 0)
        return out
