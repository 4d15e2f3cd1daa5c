"""Direct-assignment Gibbs sampler for the HDP topic model (G-HDP).

Teh, Jordan, Beal & Blei (2006), section 5.3 and appendix A; used as G-HDP1 /
G-HDP100 by Teh, Kurihara & Welling (2007). Specification: ALGORITHMS.md 4.4.
"""
import hashlib
import time

import numpy as np
from scipy.special import gammaln

from bnpcore._validation import check_int, check_positive, check_random_state
from bnpcore.base import BaseEstimator, TopicMixin
from bnpcore.corpus import as_corpus
from bnpcore.evaluation import PredictiveAverage, token_log_likelihood
from bnpcore.kernels import _hdp_gibbs
from bnpcore.kernels.rng import dirichlet as _log_dirichlet_draw
from bnpcore.kernels.stirling import StirlingTable, MAX_N as _STIRLING_MAX_N

__all__ = ["DirectAssignmentGibbs", "resample_gamma", "resample_alpha"]


def corpus_digest(X):
    """A fingerprint of a corpus's counts (to recognise the training documents)."""
    h = hashlib.sha1()
    for arr in (X.indptr, X.indices, X.counts):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def check_gamma_prior(value, name):
    """A (shape, rate) pair of positive numbers."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (shape, rate) pair, got {value!r}") from None
    return check_positive(a, f"{name}[0] (shape)"), check_positive(b, f"{name}[1] (rate)")


def resample_gamma(gamma, n_topics, n_tables, prior, rng, n_rounds=1):
    """Escobar & West (1995) auxiliary-variable update of the top-level concentration.

    Given K topics and m.. tables (p(K | gamma, m..) ∝ gamma^K Gamma(gamma) /
    Gamma(gamma + m..)) and a Gamma(a, b) prior (shape, rate), each round draws
    ``xi ~ Beta(gamma + 1, m..)`` and then gamma from the two-component Gamma
    mixture ``odds = (a + K - 1) / (m.. (b - log xi))``:
    Gamma(a + K, b - log xi) with probability odds / (1 + odds), else
    Gamma(a + K - 1, b - log xi) (ALGORITHMS.md 4.4 step 4).
    """
    a, b = prior
    for _ in range(n_rounds):
        if n_tables == 0:
            return rng.gamma(a, 1.0 / b)
        log_xi = np.log(rng.beta(gamma + 1.0, n_tables))
        rate = b - log_xi
        odds = (a + n_topics - 1.0) / (n_tables * rate)
        shape = a + n_topics if rng.random() * (1.0 + odds) < odds else a + n_topics - 1.0
        gamma = rng.gamma(shape, 1.0 / rate)
    return gamma


def resample_alpha(alpha, n_tables, doc_lengths, prior, rng, n_rounds=1):
    """Teh et al. (2006) appendix A update of the document concentration shared by
    all documents: ``w_j ~ Beta(alpha + 1, N_j)``, ``s_j ~ Bernoulli(N_j / (N_j + alpha))``,
    ``alpha ~ Gamma(a + m.. - sum s_j, b - sum log w_j)`` (empty documents carry no
    information and are skipped; ALGORITHMS.md 4.4 step 5)."""
    a, b = prior
    n = np.asarray(doc_lengths, dtype=np.float64)
    n = n[n > 0]
    for _ in range(n_rounds):
        log_w = np.log(rng.beta(alpha + 1.0, n))
        s = rng.random(n.shape[0]) * (n + alpha) < n
        alpha = rng.gamma(a + n_tables - s.sum(), 1.0 / (b - log_w.sum()))
    return alpha


class DirectAssignmentGibbs(TopicMixin, BaseEstimator):
    """HDP topic model by the direct-assignment Gibbs sampler (G-HDP).

    Collapses the topic-word distributions and the document proportions and
    samples, per sweep: every token's topic (with the option of a new topic;
    topics are created and deleted as the sampler runs), the table counts m_jk
    from the Antoniak distribution, the global weights
    ``(beta_1..beta_K, beta_new) ~ Dir(m.1, ..., m.K, gamma)``, and the
    concentrations gamma (Escobar & West) and alpha (Teh et al., appendix A).
    Predictions average the per-token predictive probabilities of the samples
    after ``burn_in`` ([CVHDP] eq 17).

    Parameters
    ----------
    init_topics : int, default 1
        1: every token starts in one topic (G-HDP1); K > 1: tokens assigned
        uniformly at random to K topics (G-HDP100 uses 100).
    n_iter : int, default 200
        Number of sweeps.
    burn_in : int, default 100
        Sweeps before samples enter the predictive average (must be < n_iter).
    eta_tot : float, default 100.0
        Total strength of the symmetric topic-word prior; each word gets
        ``eta_tot / n_words`` ([CVHDP] beta = 100, tau_w = 1/W).
    alpha : float or None, default None
        Document concentration; None resamples it under ``alpha_prior``.
    gamma : float or None, default None
        Top-level concentration; None resamples it under ``gamma_prior``.
    alpha_prior, gamma_prior : (shape, rate), default (4.0, 4.0) and (7.5, 7.5)
        Gamma priors; a resampled concentration starts at the prior mean.
    n_concentration_rounds : int, default 5
        Auxiliary-variable rounds per sweep for each resampled concentration.
    random_state : int, numpy.random.Generator or None

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
        ``(alpha beta_k + n_jk) / (alpha + N_j)`` of the training documents, final sample.
    heldout_loglik_ : float or None
        Per-word held-out log-likelihood averaged over the samples after burn-in
        (eq 17), when ``fit`` was given ``heldout``.
    history_ : list of dict
        Per sweep: ``iteration``, ``n_topics``, ``alpha``, ``gamma``, ``n_tables``,
        ``log_lik`` (collapsed log p(x | z)), ``seconds`` and, with ``heldout``,
        ``heldout_loglik`` (running eq 17 average after burn-in, single sample before).
    vocabulary_ : list of str or None

    References
    ----------
    Teh, Jordan, Beal & Blei, "Hierarchical Dirichlet processes", JASA 2006, 5.3 and App. A.
    Escobar & West, "Bayesian density estimation and inference using mixtures", JASA 1995.
    Teh, Kurihara & Welling, "Collapsed variational inference for HDP", NIPS 2007 (G-HDP, eq 17).
    """

    _persist = ("_z", "_beta", "_beta_new", "_train_shape", "_train_digest")

    def __init__(self, init_topics=1, n_iter=200, burn_in=100, eta_tot=100.0, alpha=None, gamma=None,
                 alpha_prior=(4.0, 4.0), gamma_prior=(7.5, 7.5), n_concentration_rounds=5,
                 random_state=None):
        self.init_topics = init_topics
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.eta_tot = eta_tot
        self.alpha = alpha
        self.gamma = gamma
        self.alpha_prior = alpha_prior
        self.gamma_prior = gamma_prior
        self.n_concentration_rounds = n_concentration_rounds
        self.random_state = random_state

    # -- validation ------------------------------------------------------------
    def _validate(self):
        check_int(self.init_topics, "init_topics", 1)
        check_int(self.n_iter, "n_iter", 1)
        check_int(self.burn_in, "burn_in", 0)
        if self.burn_in >= self.n_iter:
            raise ValueError(f"burn_in={self.burn_in} must be smaller than n_iter={self.n_iter}")
        check_positive(self.eta_tot, "eta_tot")
        for name in ("alpha", "gamma"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        check_gamma_prior(self.alpha_prior, "alpha_prior")
        check_gamma_prior(self.gamma_prior, "gamma_prior")
        check_int(self.n_concentration_rounds, "n_concentration_rounds", 1)

    # -- fitting ---------------------------------------------------------------
    def fit(self, X, y=None, heldout=None):
        """Run the sampler on ``X``.

        Parameters
        ----------
        X : Corpus or anything :class:`bnpcore.Corpus` accepts
        heldout : Corpus, optional
            Held-out tokens of the same documents (e.g. from
            ``Corpus.split_tokens``); scored after every sweep, averaged over the
            samples after burn-in ([CVHDP] eq 17).

        Every sweep is recorded in ``history_`` through ``_report``; a callback
        installed with ``reporting`` sees the sampler state (``_z``) after each
        sweep and may stop the run by returning True.
        """
        self._validate()
        X = as_corpus(X)
        if X.n_tokens == 0:
            raise ValueError("the corpus has no tokens")
        if heldout is not None:
            heldout = as_corpus(heldout, n_words=X.n_words)
            if heldout.n_docs != X.n_docs:
                raise ValueError(f"heldout has {heldout.n_docs} documents, X has {X.n_docs}; "
                                 "give the held-out tokens of the same documents")
        self._rng = check_random_state(self.random_state)
        self._words, self._tok_ptr = X.tokens()
        self._doc_lengths = np.diff(self._tok_ptr)
        self._eta = self.eta_tot / X.n_words
        self._train_shape = [X.n_docs, X.n_words]
        self._train_digest = corpus_digest(X)
        self._table = StirlingTable(int(min(self._doc_lengths.max(), _STIRLING_MAX_N)))
        a_alpha, b_alpha = check_gamma_prior(self.alpha_prior, "alpha_prior")
        a_gamma, b_gamma = check_gamma_prior(self.gamma_prior, "gamma_prior")
        self._alpha = float(self.alpha) if self.alpha is not None else a_alpha / b_alpha
        self._gamma = float(self.gamma) if self.gamma is not None else a_gamma / b_gamma
        self._init_state(X.n_docs, X.n_words, self.init_topics)

        average = PredictiveAverage(heldout) if heldout is not None else None
        self.history_ = []
        self.heldout_loglik_ = None
        start = time.perf_counter()
        for it in range(self.n_iter):
            self._sweep()
            record = {"n_topics": self._K, "alpha": self._alpha, "gamma": self._gamma,
                      "n_tables": int(self._m_k[:self._K].sum()), "log_lik": self._log_likelihood()}
            if heldout is not None:
                theta, phi = self._predictive()
                if it >= self.burn_in:
                    average.add(theta, phi)
                    record["heldout_loglik"] = average.log_likelihood()
                else:
                    record["heldout_loglik"] = token_log_likelihood(theta, phi, heldout)
            record["seconds"] = time.perf_counter() - start
            if self._report(it + 1, **record):
                break
        if average is not None and average.n_samples:
            self.heldout_loglik_ = average.log_likelihood()
            self._heldout = heldout
        self._set_fitted(X.vocabulary)
        return self

    def _init_state(self, n_docs, n_words, k0):
        rng = self._rng
        n_tok = self._words.shape[0]
        self._kcap = max(16, 2 * k0)
        self._z = (np.zeros(n_tok, dtype=np.int32) if k0 == 1
                   else rng.integers(0, k0, size=n_tok).astype(np.int32))
        self._K = k0
        self._beta = np.zeros(self._kcap)
        self._beta[:k0] = 1.0 / (k0 + 1)
        self._beta_new = 1.0 / (k0 + 1)
        self._m_k = np.zeros(self._kcap, dtype=np.int64)
        self._counts_from_z(n_docs, n_words)
        # a random start can leave topics without tokens: their weight joins beta_new
        empty = self._n_k[:k0] == 0
        self._beta_new += self._beta[:k0][empty].sum()
        self._beta[:k0][empty] = 0.0
        self._compact(k0)

    def _counts_from_z(self, n_docs, n_words):
        kc = self._kcap
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), self._doc_lengths)
        z = self._z.astype(np.int64)
        self._n_jk = np.bincount(docs * kc + z, minlength=n_docs * kc).astype(np.int32).reshape(n_docs, kc)
        self._n_wk = np.bincount(self._words.astype(np.int64) * kc + z,
                                 minlength=n_words * kc).astype(np.int32).reshape(n_words, kc)
        self._n_k = np.bincount(z, minlength=kc).astype(np.int64)

    def _grow(self):
        new = 2 * self._kcap
        pad = new - self._kcap
        self._n_jk = np.pad(self._n_jk, ((0, 0), (0, pad)))
        self._n_wk = np.pad(self._n_wk, ((0, 0), (0, pad)))
        self._n_k = np.pad(self._n_k, (0, pad))
        self._beta = np.pad(self._beta, (0, pad))
        self._m_k = np.pad(self._m_k, (0, pad))
        self._kcap = new

    def _compact(self, k_used):
        """Drop empty slots and order topics by decreasing size (labels relabelled in z)."""
        sizes = self._n_k[:k_used]
        order = np.argsort(-sizes, kind="stable")
        order = order[sizes[order] > 0]
        K = order.shape[0]
        relabel = np.full(k_used, -1, dtype=np.int32)
        relabel[order] = np.arange(K, dtype=np.int32)
        self._z = relabel[self._z]
        for name in ("_n_jk", "_n_wk"):
            arr = getattr(self, name)
            arr[:, :K] = arr[:, order]
            arr[:, K:k_used] = 0
        self._n_k[:K] = self._n_k[order]
        self._n_k[K:k_used] = 0
        self._beta[:K] = self._beta[order]
        self._beta[K:k_used] = 0.0
        self._K = K

    def _sweep(self):
        rng = self._rng
        # 1. topic indicators (growing the slot arrays when the kernel runs out)
        next_tok, k_used, beta_new = 0, self._K, self._beta_new
        while True:
            next_tok, k_used, beta_new = _hdp_gibbs.gibbs_sweep(
                self._words, self._tok_ptr, self._z, self._n_jk, self._n_wk, self._n_k, self._beta,
                beta_new, k_used, self._alpha, self._gamma, self._eta, next_tok, rng)
            if next_tok == self._words.shape[0]:
                break
            self._grow()
        self._beta_new = beta_new
        self._compact(k_used)
        K = self._K
        # 2. tables, 3. global weights
        _hdp_gibbs.draw_tables(self._n_jk, self._alpha * self._beta, K, self._table, rng, self._m_k)
        shape = np.append(self._m_k[:K].astype(np.float64), self._gamma)
        beta = np.exp(_log_dirichlet_draw(shape, 1, rng, log=True)[0])
        self._beta[:K], self._beta_new = beta[:K], beta[K]
        n_tables = int(self._m_k[:K].sum())
        # 4. gamma, 5. alpha
        if self.gamma is None:
            self._gamma = resample_gamma(self._gamma, K, n_tables, self.gamma_prior, rng,
                                         self.n_concentration_rounds)
        if self.alpha is None:
            self._alpha = resample_alpha(self._alpha, n_tables, self._doc_lengths, self.alpha_prior, rng,
                                         self.n_concentration_rounds)

    def _predictive(self):
        """theta^s (n_docs x K) and phi^s (K x n_words) of the current sample ([CVHDP] eq 17)."""
        K = self._K
        theta = (self._n_jk[:, :K] + self._alpha * self._beta[:K]) / (self._doc_lengths + self._alpha)[:, None]
        phi = (self._n_wk[:, :K].T + self._eta) / (self._n_k[:K] + self.eta_tot)[:, None]
        return theta, phi

    def _log_likelihood(self):
        """Collapsed log p(x | z) = sum_k [log DM(n_k. | eta)] of the current sample."""
        K = self._K
        nwk = self._n_wk[:, :K]
        nz = nwk[nwk > 0]
        return float((gammaln(nz + self._eta) - gammaln(self._eta)).sum()
                     + (gammaln(self.eta_tot) - gammaln(self._n_k[:K] + self.eta_tot)).sum())

    def _set_fitted(self, vocabulary):
        theta, phi = self._predictive()
        order = np.argsort(-self._beta[:self._K], kind="stable")
        self.topics_ = phi[order]
        self.weights_ = self._beta[order].copy()
        self.doc_topic_ = theta[:, order]
        self.beta_new_ = float(self._beta_new)
        self.n_components_ = int(self._K)
        self.alpha_ = float(self._alpha)
        self.gamma_ = float(self._gamma)
        self.vocabulary_ = vocabulary
        # resume state, in the order of topics_
        relabel = np.empty(self._K, dtype=np.int32)
        relabel[order] = np.arange(self._K, dtype=np.int32)
        self._z = relabel[self._z]
        self._beta = self.weights_.copy()
        for name in ("_n_jk", "_n_wk", "_n_k", "_m_k", "_words", "_tok_ptr", "_table"):
            delattr(self, name)             # working arrays; topics_, doc_topic_ and _z keep the state

    # -- using a fitted model ----------------------------------------------------
    def transform(self, X, n_sweeps=50, burn_in=20):
        """Topic proportions of new documents with the topics held fixed.

        Per-document Gibbs sampling of the tokens' topics under
        ``p(z_i = k) ∝ (n_jk + alpha beta_k) topics_[k, w_i]``; the posterior means
        ``(n_jk + alpha beta_k) / (N_j + alpha sum_l beta_l)`` of the sweeps after
        ``burn_in`` are averaged (proportions over the instantiated topics: rows sum
        to 1; an empty document gets the normalised ``weights_``).

        Returns
        -------
        ndarray of shape (n_docs, n_components_)
        """
        self._check_fitted()
        X = as_corpus(X, n_words=np.asarray(self.topics_).shape[1])
        check_int(n_sweeps, "n_sweeps", 1)
        check_int(burn_in, "burn_in", 0)
        if burn_in >= n_sweeps:
            raise ValueError(f"burn_in={burn_in} must be smaller than n_sweeps={n_sweeps}")
        words, tok_ptr = X.tokens()
        prior = self.alpha_ * np.asarray(self.weights_, dtype=np.float64)
        theta = np.zeros((X.n_docs, self.n_components_))
        if self.n_components_:
            _hdp_gibbs.fold_in(words, tok_ptr, np.ascontiguousarray(np.asarray(self.topics_).T), prior,
                               n_sweeps, burn_in, check_random_state(self.random_state), theta)
        return theta

    def heldout_log_likelihood(self, observed, heldout):
        """Per-word log-likelihood of ``heldout`` given ``observed`` tokens of the same
        documents: when ``observed`` is the training corpus, the sampler's own
        predictive (:meth:`score`, eq 17); otherwise topic proportions inferred on
        ``observed`` by :meth:`transform`."""
        observed = as_corpus(observed)
        if getattr(self, "_train_digest", None) == corpus_digest(observed):
            return self.score(heldout)
        return super().heldout_log_likelihood(observed, heldout)

    def score(self, X):
        """Per-word log-likelihood of held-out tokens of the training documents.

        ``X`` holds, for each training document (same number and order), tokens
        that were not used for training ([CVHDP] section 4, ALGORITHMS.md 8.2).
        If ``X`` is the ``heldout`` corpus given to ``fit``, the value is the
        average over the samples after burn-in (eq 17); otherwise the final
        sample's predictive (eq 17 with one sample).
        """
        self._check_fitted()
        X = as_corpus(X, n_words=self.topics_.shape[1])
        if X.n_docs != self.doc_topic_.shape[0]:
            raise ValueError(f"X has {X.n_docs} documents, the model was trained on {self.doc_topic_.shape[0]}: "
                             "score takes the held-out tokens of the training documents")
        if self.heldout_loglik_ is not None and getattr(self, "_heldout", None) == X:
            return self.heldout_loglik_
        return token_log_likelihood(self.doc_topic_, self.topics_, X)
