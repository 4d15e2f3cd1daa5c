"""Collapsed variational inference for the HDP with hyperparameter posteriors (CV-HDP).

Teh, Kurihara & Welling, "Collapsed variational inference for HDP", NIPS 2007
([CVHDP]): update (15), the auxiliary expectations (10)-(14), the
hyperparameter posteriors (8) and the bound (18), with two corrections to the
printed text: V+ in (14) squares E+, and (18) gets -KL(q(gamma) || p(gamma))
and takes the stick term in expectation under q(gamma).
"""
# Speed: the sweep of (15) is vectorised (its own exp and log, no libm calls, two
# divisions per topic) and computes Z and the entropy in the same pass as the
# responsibilities, so that no second pass over r is needed for them. It stays
# several times as costly per token and topic as CVB0, which needs one division and
# no logarithm per topic and one count array per side where (15) keeps E, V and Z.
# `benchmarks/bench_cvhdp.py` compares the two; the profiles that led to this layout
# are in benchmarks/results/design_choices.txt.
import warnings

import numpy as np
from scipy.special import digamma, gammaln

from bnpcore._threads import map_rows
from bnpcore._defaults import CapacityWarning, warn_capacity
from bnpcore._validation import (PRODUCT_RANGE, check_inner, check_int, check_memory, check_prior, effective_n_threads,
                                 memory_limit)
from bnpcore.base import TopicMixin
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, InitFromMixin, Items, Number, OneOf,
                                     same_counts)
from bnpcore.kernels import _cvhdp
from bnpcore.kernels.special import dlgamma, dpsi, tetragamma, trigamma, xdpsi
from bnpcore.models.hdp_gibbs import DirectAssignmentGibbs, TrainingPredictive, check_gamma_prior
from bnpcore.results import ResultsMixin

__all__ = ["CollapsedVB", "positive_part", "improved_expectation", "expected_tables", "expected_log_g",
           "gamma_posterior", "stick_posteriors", "kl_gamma", "kl_dirichlet", "expected_stick_kl"]

_P_MIN = 1e-300
# Smallest prior of (15): the geometric means G[alpha] G[beta_k] of far sticks under a
# small gamma underflow to 0 (exp of sums of E[log(1 - V)] ~ -1 / gamma), where
# c (psi(c + n) - psi(c)) is 0 / 0 (NaN tables, then NaN weights: gamma = 2**-8 from a
# Gibbs start); the smallest normal double is what such a prior rounds to.
_PRIOR_FLOOR = np.finfo(np.float64).tiny
# why alpha, gamma and eta_tot are limited to PRODUCT_RANGE (docs/numerics.md)
_SQUARED = ("the updates divide by (alpha E[beta_k] + E[n_jk])^2, whose square underflows to 0 for "
            "smaller priors (NaN responsibilities) and overflows for larger ones")


# -- count statistics ([CVHDP] (13)-(14)) -------------------------------------------
def positive_part(E, V, Z):
    """P+[n] = q(n > 0), E+[n] = E[n | n > 0], V+[n] = Var[n | n > 0] of a sum of
    independent Bernoullis from its tracked E, V and Z = sum log(1 - q) ((14), where
    the printed V+ lost a square: V+ = V / P+ - e^Z E+^2). Entries with P+ < 1e-300
    are returned as exact zeros."""
    E, V, Z = np.asarray(E, dtype=np.float64), np.asarray(V, dtype=np.float64), np.asarray(Z, dtype=np.float64)
    P = -np.expm1(Z)
    ok = P >= _P_MIN
    Pd = np.where(ok, P, 1.0)
    Ep = np.where(ok, E / Pd, 0.0)
    Vp = np.where(ok, np.maximum(V / Pd - np.exp(Z) * Ep ** 2, 0.0), 0.0)
    return np.where(ok, P, 0.0), Ep, Vp


def improved_expectation(f, f2, E, V, Z):
    """F_n[f] = P+[n] (f(E+[n]) + V+[n] f''(E+[n]) / 2) for f with f(0) = 0 ([CVHDP] (10)-(12))."""
    P, Ep, Vp = positive_part(E, V, Z)
    ok = P > 0
    Es = np.where(ok, Ep, 1.0)              # any point >= 1 where P+ = 0 (masked out)
    return np.where(ok, P * (f(Es) + 0.5 * Vp * f2(Es)), 0.0)


def expected_tables(c, E, V, Z):
    """E[m] of (12): c P+ (psi(c + E+) - psi(c) + V+ psi''(c + E+) / 2), with
    c (psi(c + x) - psi(c)) by the C core's cancellation-free ``xdpsi`` (tiny c)."""
    c = np.asarray(c, dtype=np.float64)
    return improved_expectation(lambda x: xdpsi(c, x), lambda x: c * tetragamma(c + x), E, V, Z)


def expected_log_g(eta_mean, E, V, Z):
    """E[log g_k] of (11): P+ (psi(E[eta]) - psi(E[eta] + E+) - V+ psi''(E[eta] + E+) / 2)."""
    return improved_expectation(lambda x: -dpsi(eta_mean, x), lambda x: -tetragamma(eta_mean + x), E, V, Z)


# -- hyperparameter posteriors ([CVHDP] (8)) -----------------------------------------
def gamma_posterior(prior, expected_count, sum_expected_log):
    """Gamma(a + E[count], b - sum E[log aux]) (shape, rate): q(alpha) with E[m..] and
    sum_j E[log h_j]; q(eta_tot) with E[t..] and sum_k E[log g_k]; q(gamma) with K and
    sum_k E[log(1 - V_k)]."""
    a, b = prior
    return a + expected_count, b - sum_expected_log


def stick_posteriors(m_k, gamma_mean):
    """(u_k, v_k) of q(V_k) = Beta(1 + E[m.k], E[gamma] + E[m.>k]), shape (K, 2)."""
    m_k = np.asarray(m_k, dtype=np.float64)
    m_gt = np.append(np.cumsum(m_k[::-1])[::-1][1:], 0.0)
    return np.column_stack([1.0 + m_k, gamma_mean + m_gt])


def stick_expectations(sticks):
    """(log G[beta_k], E[beta_k], E[log(1 - V_k)]) of independent Beta sticks."""
    u, v = sticks[:, 0], sticks[:, 1]
    elog_v, elog_1mv = digamma(u) - digamma(u + v), digamma(v) - digamma(u + v)
    log_g = elog_v + np.concatenate([[0.0], np.cumsum(elog_1mv)[:-1]])
    ev = u / (u + v)
    return log_g, ev * np.concatenate([[1.0], np.cumprod(1.0 - ev)[:-1]]), elog_1mv


# -- KL divergences (closed forms) --------------------------------------------------
def kl_gamma(a1, b1, a0, b0):
    """KL(Gamma(a1, b1) || Gamma(a0, b0)), shape/rate."""
    return ((a1 - a0) * digamma(a1) - gammaln(a1) + gammaln(a0) + a0 * (np.log(b1) - np.log(b0))
            + a1 * (b0 - b1) / b1)


def kl_dirichlet(a1, a0):
    """KL(Dir(a1) || Dir(a0))."""
    A1, A0 = a1.sum(), a0.sum()
    return (gammaln(A1) - gammaln(a1).sum() - gammaln(A0) + gammaln(a0).sum()
            + ((a1 - a0) * (digamma(a1) - digamma(A1))).sum())


def expected_stick_kl(u, v, gamma_mean, gamma_log_mean):
    """E_q(gamma) KL(Beta(u_k, v_k) || Beta(1, gamma)) per stick: the stick term of [CVHDP] (18)
    with q(gamma) learned (E[gamma] in place of gamma, E[log gamma] for its lone factor)."""
    elog_v = digamma(u) - digamma(u + v)
    elog_1mv = digamma(v) - digamma(u + v)
    return (-gamma_log_mean - (gamma_mean - 1.0) * elog_1mv + gammaln(u + v) - gammaln(u) - gammaln(v)
            + (u - 1.0) * elog_v + (v - 1.0) * elog_1mv)


# The estimator's hyperparameters the state's methods read (as self.<name>).
_STATE_PARAMS = ("alpha", "gamma", "alpha_prior", "gamma_prior", "eta_tot", "learn_topic_prior",
                 "eta_prior", "tau_prior", "learn_weights", "init", "init_gibbs_iter", "r_dtype")
_GAMMA_PRIOR = (7.5, 7.5)

# n_components="auto": the truncation of a random start, and of a start from a
# G-HDP sample its topics plus room to grow (collapsed updates move tokens into
# empty slots when the data want them; slots left empty show the truncation was
# not binding, see CapacityWarning).
RANDOM_TRUNCATION = 40
# max_iter="auto": iterations after a start from a sample (the bound and the held-out
# score settle within a few on KOS: bench_defaults_kos.txt) and after a random start.
AUTO_ITER_FROM_SAMPLE, AUTO_ITER_RANDOM = 10, 100


def auto_truncation(n_found, X=None, r_dtype="float64"):
    """Truncation K for a start from a sample with ``n_found`` topics: 10% more, at
    least 5 more, and no more than the arrays of a quarter of the memory a fit may
    have hold (``_state_bytes``; at least RANDOM_TRUNCATION)."""
    K = int(n_found + max(5, -(-n_found // 10)))
    limit = None if X is None else memory_limit()
    if limit is not None:
        K = min(K, max(RANDOM_TRUNCATION, int(limit // 4 // _state_bytes(X, 1, r_dtype))))
    return K


def _state_bytes(X, K, r_dtype):
    """Bytes of CV-HDP's arrays at truncation K: r per (document, word) pair, E, V, Z
    of the counts by document and by word."""
    return K * (np.dtype(r_dtype).itemsize * X.nnz + 48 * (X.n_docs + X.n_words))


class _CVState(BatchState):
    """CV-HDP's variational state: responsibilities r per (document, word) pair,
    the tracked E, V, Z of the counts, the hyperparameter posteriors and the
    stick order; one iteration = one sweep over the pairs (update (15)) plus
    steps 2-7 of the schedule."""

    _transient = ("corpus", "_lengths")
    sweep_threads = 1          # the delayed schedule's threads (states saved before it: sequential)
    sequential_sweep = True    # update (15) of a pair reads the counts after the previous pair's

    def __init__(self, corpus, params, rng, init_from=None):
        self.__dict__.update(params)
        self.restore(corpus)
        if init_from is None and self.init == "gibbs":
            init_from = DirectAssignmentGibbs(n_components=100, max_iter=self.init_gibbs_iter,
                                              burn_in=self.init_gibbs_iter - 1, eta_tot=self.eta_tot,
                                              alpha_prior=self.alpha_prior, gamma_prior=self.gamma_prior,
                                              random_state=rng).fit(corpus)
        if init_from is not None:
            self._init_from_gibbs(corpus, init_from)
        else:
            self._init_random(corpus, rng)

    def restore(self, corpus):
        super().restore(corpus)
        self._lengths = corpus.doc_lengths.astype(np.float64)

    @property
    def n_components(self):
        return int(self._K)

    def invariants(self, corpus):
        positive, optional = Number(np.finfo(float).tiny), Number(np.finfo(float).tiny, optional=True)
        D, W = corpus.n_docs, corpus.n_words
        for name in ("alpha", "gamma", "tau_prior"):
            yield name, optional
        yield "eta_tot", positive
        for name in ("alpha_prior", "gamma_prior", "eta_prior"):
            yield name, Items(positive, positive)
        for name in ("learn_topic_prior", "learn_weights", "_sticks_learned"):
            yield name, OneOf(True, False)
        yield "init", OneOf("random", "gibbs")
        yield "r_dtype", OneOf("float64", "float32")
        yield "sweep_threads", Number(1, integer=True), self.__dict__.get("sweep_threads", 1)
        yield "truncation", Number(1, integer=True, optional=True)
        yield "_K", Number(1, integer=True)
        K = self._K
        yield "_r", Array(self.r_dtype, (corpus.nnz, K), 0.0, 1.0)
        for s in "EVZ":
            yield f"_{s}_jk", Array("float64", (D, K))
            yield f"_{s}_wk", Array("float64", (W, K))
        for name in ("_a_tau", "_G_tau", "_E_tau", "_prior_word"):
            yield name, Array("float64", (W,), 0.0)
        yield "_tau_post", Array("float64", (W,), 0.0, optional=True)
        yield "_sticks", Array("float64", (K, 2), 0.0)
        for name in ("_G_beta", "_E_beta", "_prior_doc", "_E_k"):
            yield name, Array("float64", (K,), 0.0)
        yield "_order", Array("int64", (K,), 0, K - 1)
        yield "_prior_topic", positive
        yield "_entropy", Number()
        if not isinstance(self._h, dict) or not isinstance(self.bound_terms, dict):
            raise ValueError("_h and bound_terms must be dicts")
        for key, value in self._h.items():
            yield f"_h[{key!r}]", Number(), value
        if not isinstance(self._post, dict):
            raise ValueError("_post must be a dict")
        for key, value in self._post.items():
            yield f"_post[{key!r}]", OneOf(None) if value is None else Items(positive, positive), value

    def check_counts(self, corpus):
        if len(np.unique(self._order)) != self._K:
            raise ValueError("_order is not a permutation of the topics")
        atol = 1e-3 if self._r.dtype == np.float32 else 1e-6
        if not np.allclose(self._r.sum(axis=1), 1.0, rtol=0.0, atol=atol):
            raise ValueError("rows of _r are not distributions over topics")
        counted = [np.zeros_like(a) for a in (self._E_jk, self._V_jk, self._Z_jk, self._E_wk, self._V_wk,
                                              self._Z_wk)]
        _cvhdp.cv_statistics(corpus.indptr, corpus.indices, corpus.counts, self._r, *counted)
        same_counts("_E_jk", self._E_jk, counted[0], rtol=atol)
        same_counts("_E_wk", self._E_wk, counted[3], rtol=atol)
        same_counts("_E_k", self._E_k, self._E_wk.sum(axis=0), rtol=atol)

    def sweep(self):
        self._sweep()
        self._update_all()
        return {"bound": self.bound_terms, "n_active": int((self._E_k >= 1).sum()),
                "alpha": self._h["E_alpha"], "gamma": self._h["E_gamma"]}

    def predictive(self):
        return self._predictive()

    def _sweep(self):
        """Update (15) over all pairs (E and V carried incrementally, Z and the entropy
        accumulated from the new responsibilities), then E and V rebuilt from them:
        cv_statistics' values without its second pass of logarithms."""
        X = self.corpus
        E_k = self._E_wk.sum(0)
        V_k = self._V_wk.sum(0)
        self._entropy = _cvhdp.cv_sweep(X.indptr, X.indices, X.counts, self._r, self._E_jk, self._V_jk, self._Z_jk,
                                        self._E_wk, self._V_wk, self._Z_wk, E_k, V_k, self._prior_doc,
                                        self._prior_word, self._prior_topic, self.sweep_threads)
        if self._r.dtype == np.float64:
            _cvhdp.cv_moments(X.indptr, X.indices, X.counts, self._r, self._E_jk, self._V_jk, self._E_wk, self._V_wk,
                              self.sweep_threads)
        else:
            self._statistics()
        self._E_k = self._E_wk.sum(0)

    def _alloc(self, X, K):
        D, W = X.n_docs, X.n_words
        self._K = K
        for name, rows in (("jk", D), ("wk", W)):
            for s in "EVZ":
                setattr(self, f"_{s}_{name}", np.zeros((rows, K)))

    def _init_hyper(self, W, K):
        a_alpha, b_alpha = self.alpha_prior
        a_gamma, b_gamma = self.gamma_prior
        a_eta, b_eta = self.eta_prior
        h = {}
        if self.alpha is None:
            h["E_alpha"], h["G_alpha"] = a_alpha / b_alpha, np.exp(digamma(a_alpha)) / b_alpha
        else:
            h["E_alpha"] = h["G_alpha"] = float(self.alpha)
        if self.gamma is None:
            h["E_gamma"], h["Elog_gamma"] = a_gamma / b_gamma, digamma(a_gamma) - np.log(b_gamma)
        else:
            h["E_gamma"], h["Elog_gamma"] = float(self.gamma), np.log(self.gamma)
        h["E_eta"] = h["G_eta"] = float(self.eta_tot)
        self._a_tau = np.full(W, self.tau_prior if self.tau_prior is not None else 40.0 / W)
        self._tau_post = None
        self._G_tau = np.full(W, 1.0 / W)
        self._E_tau = np.full(W, 1.0 / W)
        self._h = h
        self._post = {"alpha": None, "gamma": None, "eta": None}
        self._sticks = np.column_stack([np.ones(K), np.full(K, h["E_gamma"])])
        self._G_beta = np.full(K, 1.0 / K)
        self._E_beta = np.full(K, 1.0 / K)
        self._sticks_learned = False
        self._order = np.arange(K)
        self._derived()

    def _init_random(self, X, rng):
        K = RANDOM_TRUNCATION if self.truncation is None else int(self.truncation)
        self._alloc(X, K)
        r = 1.0 + rng.random((X.nnz, K))
        r /= r.sum(axis=1, keepdims=True)
        self._r = np.ascontiguousarray(r, dtype=self.r_dtype)
        self._init_hyper(X.n_words, K)
        self._statistics()
        self.bound_terms = self._bound(as_dict=True)

    def _init_from_gibbs(self, X, model):
        if not isinstance(model, DirectAssignmentGibbs) or not hasattr(model, "_z"):
            raise TypeError("init_from must be a fitted DirectAssignmentGibbs")
        z = model._z
        if z is None:
            raise ValueError("init_from was fitted with store_doc_topic=False, which keeps no topic "
                             "assignments to start from: refit it with store_doc_topic=True")
        if model._train_fingerprint != X.fingerprint():
            raise ValueError("init_from was fitted on a different corpus")
        if (z < 0).any():
            raise ValueError("init_from was pruned: its assignments no longer cover every token")
        found = int(model.n_components_)
        if self.truncation is None:
            K = auto_truncation(found, X, self.r_dtype)
            if K < found:
                warnings.warn(f"CollapsedVB: the arrays of the start's {found} topics would not fit in a quarter of "
                              f"the memory; keeping its {K} largest (give n_components to choose)", CapacityWarning,
                              stacklevel=2)
        else:
            K = max(int(self.truncation), found)
        check_memory(_state_bytes(X, K, self.r_dtype), f"n_components={K}", X)
        self._alloc(X, K)
        pair = np.repeat(np.arange(X.nnz), X.counts)
        r = np.zeros((X.nnz, K))
        kept = z < K            # the sample's topics are largest first: a smaller K keeps the largest
        np.add.at(r, (pair[kept], z[kept]), 1.0)
        np.add.at(r, pair[~kept], 1.0 / K)      # tokens of the topics left out: spread evenly
        r /= X.counts[:, None]
        self._r = np.ascontiguousarray(r, dtype=self.r_dtype)
        self._init_hyper(X.n_words, K)
        # hyperparameters from the sample, then their variational posteriors from r
        h = self._h
        if self.alpha is None:
            h["E_alpha"] = h["G_alpha"] = float(model.alpha_)
        if self.learn_weights:
            if self.gamma is None:
                h["E_gamma"], h["Elog_gamma"] = float(model.gamma_), np.log(model.gamma_)
            w = np.zeros(K)
            n = min(K, found)          # the topics kept; the weight of those left out joins the rest
            w[:n] = model.weights_[:n]
            w[n:] = (model.beta_new_ + model.weights_[n:].sum()) / max(K - n, 1)
            self._G_beta = np.maximum(w, 1e-300)
            self._E_beta = self._G_beta.copy()
        self._prior_doc = np.maximum(h["G_alpha"] * self._G_beta, _PRIOR_FLOOR)
        self._statistics()
        self._update_all()

    def _statistics(self):
        X = self.corpus
        self._entropy = _cvhdp.cv_statistics(X.indptr, X.indices, X.counts, self._r, self._E_jk, self._V_jk,
                                             self._Z_jk, self._E_wk, self._V_wk, self._Z_wk, self.sweep_threads)
        self._E_k = self._E_wk.sum(0)

    def _reorder(self):
        """Step 3: order the topics by decreasing E[n_k] ([CVHDP] 3.1). Arrays over pairs,
        documents and words keep their physical columns (permuting r would copy
        n_pairs x K numbers every iteration); ``_order`` lists the physical column of the
        k-th stick, and stick-indexed quantities are scattered back through it."""
        self._order = np.argsort(-self._E_k, kind="stable")

    def _update_all(self):
        """Steps 3-7 of an iteration (the statistics are those the sweep or
        ``_statistics`` left): reorder, auxiliary expectations, hyperparameter
        posteriors, derived quantities, bound."""
        self._reorder()
        h = self._h
        K = self._K
        # 4. auxiliary expectations (10)-(12)
        elog_h = digamma(h["E_alpha"]) - digamma(h["E_alpha"] + self._lengths)
        T, c = self.sweep_threads, self._prior_doc[None, :]
        m_k = map_rows(lambda E, V, Z: expected_tables(c, E, V, Z), (self._E_jk, self._V_jk, self._Z_jk), T).sum(0)
        # 5. hyperparameter posteriors (8)
        if self.alpha is None:
            self._post["alpha"] = gamma_posterior(self.alpha_prior, m_k.sum(), elog_h.sum())
        if self.learn_weights:
            # q(V) and q(gamma) depend on each other: a few rounds
            m_sorted = m_k[self._order]
            for _ in range(3 if self.gamma is None else 1):
                self._sticks = stick_posteriors(m_sorted, h["E_gamma"])
                self._sticks_learned = True
                if self.gamma is None:
                    shape, rate = gamma_posterior(self.gamma_prior, K, stick_expectations(self._sticks)[2].sum())
                    self._post["gamma"] = (shape, rate)
                    h["Elog_gamma"] = digamma(shape) - np.log(rate)
                    done = abs(shape / rate - h["E_gamma"]) <= 1e-8 * shape / rate
                    h["E_gamma"] = shape / rate
                    if done:
                        break
            self._sticks = stick_posteriors(m_sorted, h["E_gamma"])
        if self.learn_topic_prior:
            E_k, V_k, Z_k = self._E_wk.sum(0), self._V_wk.sum(0), self._Z_wk.sum(0)
            elog_g = expected_log_g(h["E_eta"], E_k, V_k, Z_k)
            E_t = map_rows(lambda c, E, V, Z: expected_tables(c[:, None], E, V, Z),
                           (self._prior_word, self._E_wk, self._V_wk, self._Z_wk), T)
            self._post["eta"] = gamma_posterior(self.eta_prior, E_t.sum(), elog_g.sum())
            self._tau_post = self._a_tau + E_t.sum(1)
        self._derived()
        self.bound_terms = self._bound(as_dict=True)

    def _derived(self):
        """Step 6: E/G of every hyperparameter and the priors used by (15)."""
        h = self._h
        if self._post["alpha"] is not None:
            a, b = self._post["alpha"]
            h["E_alpha"], h["G_alpha"] = a / b, np.exp(digamma(a)) / b
        if self._sticks_learned:
            log_g, e_beta, _ = stick_expectations(self._sticks)
            self._G_beta = np.empty(self._K)
            self._E_beta = np.empty(self._K)
            self._G_beta[self._order] = np.exp(log_g)
            self._E_beta[self._order] = e_beta
        if self._post["eta"] is not None:
            a, b = self._post["eta"]
            h["E_eta"], h["G_eta"] = a / b, np.exp(digamma(a)) / b
        if self._tau_post is not None:
            self._G_tau = np.exp(digamma(self._tau_post) - digamma(self._tau_post.sum()))
            self._E_tau = self._tau_post / self._tau_post.sum()
        self._prior_doc = np.maximum(h["G_alpha"] * self._G_beta, _PRIOR_FLOOR)
        self._prior_word = np.maximum(h["G_eta"] * self._G_tau, _PRIOR_FLOOR)
        self._prior_topic = h["E_eta"]

    def _bound(self, as_dict=False):
        """Variational bound (18), with -KL(q(gamma) || p(gamma)) and the stick term
        in expectation under q(gamma) (the printed (18) treats gamma as a constant)."""
        h, T = self._h, self.sweep_threads
        c = self._prior_doc[None, :]
        doc_topic = map_rows(lambda E, V, Z: improved_expectation(lambda n: dlgamma(c, n), lambda n: trigamma(c + n),
                                                                  E, V, Z), (self._E_jk, self._V_jk, self._Z_jk), T)
        terms = {
            "doc": float((gammaln(h["E_alpha"]) - gammaln(h["E_alpha"] + self._lengths)).sum()),
            "doc_topic": float(doc_topic.sum()),
        }
        e = h["E_eta"]
        terms["topic"] = float(improved_expectation(lambda n: -dlgamma(e, n), lambda n: -trigamma(e + n),
                                                    self._E_wk.sum(0), self._V_wk.sum(0), self._Z_wk.sum(0)).sum())
        topic_word = map_rows(lambda cw, E, V, Z: improved_expectation(
            lambda n: dlgamma(cw[:, None], n), lambda n: trigamma(cw[:, None] + n), E, V, Z),
            (self._prior_word, self._E_wk, self._V_wk, self._Z_wk), T)
        terms["topic_word"] = float(topic_word.sum())
        terms["entropy"] = float(self._entropy)
        if self._post["alpha"] is not None:
            terms["kl_alpha"] = -float(kl_gamma(*self._post["alpha"], *self.alpha_prior))
        if self._post["gamma"] is not None:
            terms["kl_gamma"] = -float(kl_gamma(*self._post["gamma"], *self.gamma_prior))
        if self.learn_weights:
            terms["kl_sticks"] = -float(expected_stick_kl(self._sticks[:, 0], self._sticks[:, 1], h["E_gamma"],
                                                          h["Elog_gamma"]).sum())
        if self._post["eta"] is not None:
            terms["kl_eta"] = -float(kl_gamma(*self._post["eta"], *self.eta_prior))
        if self._tau_post is not None:
            terms["kl_tau"] = -float(kl_dirichlet(self._tau_post, self._a_tau))
        return terms if as_dict else sum(terms.values())

    def _predictive(self):
        """thetabar (n_docs x K) and phibar (K x n_words) of eq 16 with E[.] of every hyperparameter."""
        h = self._h
        prior = h["E_alpha"] * self._E_beta
        theta = (prior + self._E_jk) / (h["E_alpha"] + self._lengths)[:, None]
        phi = (h["E_eta"] * self._E_tau[None, :] + self._E_wk.T) / (h["E_eta"] + self._E_wk.sum(0))[:, None]
        return theta, phi



class CollapsedVB(InitFromMixin, ResultsMixin, TrainingPredictive, TopicMixin, BatchEstimator):
    """HDP topic model by collapsed variational Bayes (CV-HDP).

    The topic and document parameters are integrated out and the model is
    re-expanded with auxiliary Beta variables and table counts ([CVHDP] (6)),
    so that every hyperparameter gets a conjugate variational posterior:
    q(alpha), q(gamma) and q(eta_tot) Gamma, the sticks q(V_k) Beta, q(tau)
    Dirichlet ((8)). Topic assignments follow update (15) (second-order Gaussian
    corrections), the auxiliary expectations use the improved approximations
    (10)-(12) with P+, E+, V+ (14). The posterior is truncated at
    ``n_components`` topics, reordered by expected size every iteration; the
    variational bound (18) (with the gamma terms the printed version omits) is
    recorded every iteration. E and V of the counts are updated incrementally
    during a sweep (update (15) needs them) and rebuilt from scratch after it,
    together with Z, which only the auxiliary expectations and the bound use.

    With ``learn_weights=False`` and a fixed ``alpha`` the document prior is
    ``alpha / K`` per topic and no hyperparameter is learned: this is exactly
    collapsed variational LDA (CV-LDA, Teh, Newman & Welling 2006; the LDA
    special case of (15)), [CVHDP]'s baseline.

    Parameters
    ----------
    n_components : int or "auto", default "auto"
        Truncation level K (topics beyond K get no responsibility). "auto":
        chosen from the data: with a start from a sampler (``init="gibbs"``,
        which the default ``init="auto"`` picks, or ``fit(X,
        init_from=...)``) its topics plus 10% (at least 5) more slots, which
        the updates fill if the data want them; with ``init="random"`` 40.
        When every slot ends holding at least one expected token the fit
        warns (``CapacityWarning``): raise it.
    max_iter : int or "auto", default "auto"
        Iterations (one sweep over all pairs plus all hyperparameter updates).
        "auto": 10 from a sampler's state (the Gibbs start or ``init_from``),
        where the bound and the held-out score settle within a few (on KOS
        5 and 10 iterations score the same:
        ``benchmarks/results/bench_defaults_kos.txt``); 100 from a random
        start.
    alpha : float or None, default None
        Fixed document concentration in [1e-100, 1e100]; None learns q(alpha)
        under ``alpha_prior``. The second-order updates square
        ``alpha E[beta_k] + E[n_jk]``, which leaves double precision outside
        this range (docs/numerics.md).
    gamma : float or None, default None
        Fixed top-level concentration in [1e-100, 1e100]; None learns q(gamma)
        under ``gamma_prior``.
    alpha_prior, gamma_prior : (shape, rate), default (4.0, 4.0) and (7.5, 7.5)
        Gamma priors ([CVHDP]: in [2, 6] and [5, 10]).
    eta_tot : float, default 100.0
        Topic-word prior strength ([CVHDP] beta), in [1e-100, 1e100] (squared
        as alpha is); fixed unless ``learn_topic_prior``.
    learn_topic_prior : bool, default False
        Learn q(eta_tot) (prior ``eta_prior``) and q(tau) (prior Dir(``tau_prior``));
        off in all of [CVHDP]'s experiments (tau_w = 1/W fixed).
    eta_prior : (shape, rate), default (4.0, 4.0)
    tau_prior : float or None, default None
        Per-word Dirichlet parameter a_tau of the prior on tau; None: 40 / n_words.
    learn_weights : bool, default True
        Learn the sticks q(V_k); False fixes beta_k = 1/K (CV-LDA mode). There
        ``gamma`` has no role and must stay None, and ``gamma_prior`` only sets
        the prior of the initial sampler of ``init="gibbs"`` (a ValueError
        otherwise).
    init : {"auto", "gibbs", "random"}, default "auto"
        "auto": "gibbs" when ``n_components="auto"`` (the default), "random"
        when a truncation is given. "gibbs": start from the last state of a
        :class:`DirectAssignmentGibbs` run from 100 topics for
        ``init_gibbs_iter`` sweeps ([CVHDP] Fig. 3), which also chooses the
        number of topics; "random": r ∝ 1 + U[0, 1] ([CVHDP] section 4),
        which on KOS fills all 40 slots of the old default truncation and
        after 100 iterations stays behind 10 from the Gibbs start in held-out
        score (``benchmarks/results/bench_defaults_kos.txt``).
        ``fit(X, init_from=model)`` starts from a given
        :class:`DirectAssignmentGibbs` fitted on the same ``X`` instead (its
        last state); the truncation becomes max(n_components, its topics),
        or with "auto" its topics plus room.
    init_gibbs_iter : int in [1, 1000], default 200
    r_dtype : {"float64", "float32"}, default "float64"
        Storage of the responsibilities (statistics stay float64). float32
        halves the largest array of a fit (pairs x K) but costs speed: the
        sweep is bound by its arithmetic, not by reading the rows, and
        converts every row to double and back (docs/choosing.md, "On several cores").
    schedule : {"sequential", "delayed"}, default "sequential"
        "sequential": update (15) pair after pair, every update seeing all
        the previous ones (exact; one thread). "delayed": the standard
        delayed-update approximation of parallel collapsed inference: the
        documents are cut into ``n_threads`` blocks swept in parallel, each
        seeing the word and topic counts of the start of the sweep plus its
        own changes; the changes of all blocks are merged after the sweep. The
        result depends on ``n_threads`` (and is reproducible for a given
        one); with one thread it is the sequential schedule.
    n_threads : int or None, default None
        Threads of the delayed schedule, of ``transform`` and of ``score``
        (documents in parallel; ``transform`` gives the same bits for any
        count). None: OMP_NUM_THREADS or all cpus; -1: all cpus.
    random_state : int, numpy.random.Generator or None

    Attributes
    ----------
    topics_ : ndarray of shape (n_components_, n_words)
        phibar_kw = (E[eta_tot] E[tau_w] + E[n_kw]) / (E[eta_tot] + E[n_k]) (eq 16),
        topics ordered by decreasing E[n_k].
    weights_ : ndarray of shape (n_components_,)
        E[beta_k] = E[V_k] prod_{l<k} E[1 - V_l] (1/K in CV-LDA mode).
    n_components_ : int
        The truncation level K.
    n_active_ : int
        Topics with E[n_k] >= 1.
    doc_topic_ : ndarray of shape (n_docs, n_components_)
        thetabar_jk = (E[alpha] E[beta_k] + E[n_jk]) / (E[alpha] + N_j) (eq 16).
    alpha_posterior_, gamma_posterior_, eta_posterior_ : (shape, rate) or None
    sticks_ : ndarray of shape (n_components_, 2)
        (u_k, v_k) of q(V_k), in the order of topics_ (their initial values in CV-LDA mode).
    tau_posterior_ : ndarray of shape (n_words,) or None
    bound_ : float
        Final value of the bound (18).
    history_ : list of dict
        Per iteration: ``iteration``, ``n_documents``, ``fit_seconds``,
        ``n_components`` (the truncation), ``bound`` (the terms of (18) by name:
        ``doc``, ``doc_topic``, ``topic``, ``topic_word``, ``entropy`` and the
        ``kl_*`` terms of the learned hyperparameters; ``bound_`` is their sum),
        ``n_active``, ``alpha`` (E[alpha]), ``gamma`` (E[gamma]) and, every
        ``eval_every`` iterations with ``heldout``, ``heldout_loglik`` (eq 16)
        and ``perplexity``.
    vocabulary_ : list of str or None

    References
    ----------
    Teh, Kurihara & Welling, "Collapsed variational inference for HDP", NIPS 2007.
    Teh, Newman & Welling, "A collapsed variational Bayesian inference algorithm
    for latent Dirichlet allocation", NIPS 2006.
    """

    _persist = BatchEstimator._persist + ("_hyper", "_train_fingerprint")

    def __init__(self, n_components="auto", max_iter="auto", alpha=None, gamma=None, alpha_prior=(4.0, 4.0),
                 gamma_prior=_GAMMA_PRIOR, eta_tot=100.0, learn_topic_prior=False, eta_prior=(4.0, 4.0),
                 tau_prior=None, learn_weights=True, init="auto", init_gibbs_iter=200, r_dtype="float64",
                 schedule="sequential", n_threads=None, random_state=None):
        self._store_params(locals())

    # -- the batch protocol --------------------------------------------------------
    def _check_params(self):
        if not (isinstance(self.n_components, str) and self.n_components == "auto"):
            if isinstance(self.n_components, str):
                raise ValueError(f"n_components must be 'auto' or a positive integer, got {self.n_components!r}")
            check_int(self.n_components, "n_components", 1)
        if self.init not in ("auto", "random", "gibbs"):
            raise ValueError(f"init must be 'auto', 'gibbs' or 'random', got {self.init!r}")
        max_iter = self.max_iter
        if isinstance(max_iter, str):
            if max_iter != "auto":
                raise ValueError(f"max_iter must be 'auto' or a positive integer, got {max_iter!r}")
            max_iter = AUTO_ITER_FROM_SAMPLE if self._starts_from_sample() else AUTO_ITER_RANDOM
        max_iter = check_int(max_iter, "max_iter", 1)
        for name in ("alpha", "gamma"):
            if getattr(self, name) is not None:
                check_prior(getattr(self, name), name, bounds=PRODUCT_RANGE, reason=_SQUARED)
        for name in ("alpha_prior", "gamma_prior", "eta_prior"):
            check_gamma_prior(getattr(self, name), name, bounds=PRODUCT_RANGE, reason=_SQUARED)
        for name, learned in (("alpha_prior", self.alpha is None), ("eta_prior", self.learn_topic_prior)):
            if learned:     # the updates use G[alpha] = exp(E[log alpha]) = exp(psi(shape)) / rate as the prior
                shape, rate = getattr(self, name)
                geometric = float(np.exp(digamma(shape) - np.log(rate)))
                if geometric < PRODUCT_RANGE[0]:
                    raise ValueError(f"{name}={getattr(self, name)!r} has the geometric mean exp(psi(shape)) / rate "
                                     f"= {geometric:g}, below {PRODUCT_RANGE[0]:g}: the updates use it as the "
                                     "prior, and " + _SQUARED + " (psi(shape) ~ -1 / shape: use a larger shape)")
        check_prior(self.eta_tot, "eta_tot", bounds=PRODUCT_RANGE, reason=_SQUARED)
        if self.tau_prior is not None:
            check_prior(self.tau_prior, "tau_prior")
        check_inner(self.init_gibbs_iter, "init_gibbs_iter", 1)
        if self.r_dtype not in ("float64", "float32"):
            raise ValueError(f"r_dtype must be 'float64' or 'float32', got {self.r_dtype!r}")
        if not self.learn_weights:
            if self.alpha is None:
                raise ValueError("learn_weights=False (CV-LDA mode) needs a fixed alpha")
            if self.gamma is not None:
                raise ValueError("gamma has no effect with learn_weights=False (CV-LDA mode: beta_k = 1/K); "
                                 "leave it None")
            if self._start() != "gibbs" and tuple(np.ravel(self.gamma_prior)) != _GAMMA_PRIOR:
                raise ValueError("gamma_prior has no effect with learn_weights=False (CV-LDA mode) unless "
                                 "init='gibbs' (the initial sampler's prior); leave it at its default")
        if self.schedule not in ("sequential", "delayed"):
            raise ValueError(f"schedule must be 'sequential' or 'delayed', got {self.schedule!r}")
        n_threads = effective_n_threads(self.n_threads)
        return {"max_iter": max_iter, "n_threads": n_threads}

    def _start(self):
        """The start ``init`` names: "auto" is "gibbs" with ``n_components="auto"``, else "random"."""
        if self.init != "auto":
            return self.init
        return "gibbs" if isinstance(self.n_components, str) else "random"

    def _starts_from_sample(self):
        return self._start() == "gibbs" or getattr(self, "_init_from", None) is not None

    def _init_state(self, X, rng):
        params = {name: getattr(self, name) for name in _STATE_PARAMS}
        params["init"] = self._start()
        threads = effective_n_threads(self.n_threads) if self.schedule == "delayed" else 1
        truncation = None if self.n_components == "auto" else self.n_components
        K = int(truncation or 0)      # r per (document, word) pair; E, V, Z by document and by word
        check_memory(_state_bytes(X, K, self.r_dtype), f"n_components={K}", X)
        return _CVState(X, dict(params, truncation=truncation, sweep_threads=threads), rng, self._init_from)

    def _set_fitted(self, state, X):
        theta, phi = state.predictive()
        h = state._h
        order = state._order
        self.topics_ = phi[order]
        self.doc_topic_ = theta[:, order]
        self.weights_ = state._E_beta[order]
        self.n_components_ = int(state._K)
        self.n_active_ = int((state._E_k >= 1).sum())
        warn_capacity(self, self.n_active_, self.n_components_, "n_components")
        self.alpha_ = float(h["E_alpha"])
        self.gamma_ = float(h["E_gamma"])
        self.eta_tot_ = float(h["E_eta"])
        post = state._post
        self.alpha_posterior_ = None if post["alpha"] is None else [float(x) for x in post["alpha"]]
        self.gamma_posterior_ = None if post["gamma"] is None else [float(x) for x in post["gamma"]]
        self.eta_posterior_ = None if post["eta"] is None else [float(x) for x in post["eta"]]
        self.sticks_ = state._sticks.copy()
        self.tau_posterior_ = None if state._tau_post is None else state._tau_post.copy()
        self.expected_counts_ = state._E_k[order]
        self.bound_ = float(sum(state.bound_terms.values()))
        self.vocabulary_ = X.vocabulary
        self._hyper = {k: float(v) for k, v in h.items()}
        self._train_fingerprint = X.fingerprint()

    # -- using a fitted model ----------------------------------------------------
    _component_axes = {"topics_": 0, "weights_": 0, "doc_topic_": 1, "expected_counts_": 0, "sticks_": 0}

    def _component_sizes(self):
        return self.expected_counts_

    def _prune_fitted(self, keep):
        super()._prune_fitted(keep)
        self.n_active_ = int((self.expected_counts_ >= 1).sum())

    def transform(self, X, *, max_iter=20):
        """Topic proportions of new documents, topics held fixed: the document side of
        (15) iterated ``max_iter`` times per document; rows are
        ``(E[alpha] E[beta_k] + E[n_jk]) / (E[alpha] sum_k E[beta_k] + N_j)``.
        Documents in ``n_threads`` threads, with the same result for any number.

        Returns
        -------
        ndarray of shape (n_docs, n_components_)
        """
        X = self._check_input(X)
        check_int(max_iter, "max_iter", 1)
        theta = np.zeros((X.n_docs, self.n_components_))
        prior = self.alpha_ * np.asarray(self.weights_, dtype=np.float64)
        _cvhdp.cv_fold_in(X.indptr, X.indices, X.counts, np.ascontiguousarray(np.asarray(self.topics_).T),
                          prior, max_iter, theta, min(effective_n_threads(self.n_threads), max(X.n_docs, 1)))
        return theta
