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
"""
import math
import time

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import digamma, gammaln, polygamma, xlogy

from bnpcore._threads import map_threads
from bnpcore._validation import (MAX_DOCUMENTS, PRODUCT_RANGE, check_inner, check_int, check_memory, check_positive,
                                 check_prior, check_random_state, check_real, effective_n_threads)
from bnpcore.base import TopicMixin, exclusive
from bnpcore.corpus import as_corpus
from bnpcore.inference.batch import (Array, BatchEstimator, BatchState, InitFromMixin, Number, OneOf,
                                     RandomGenerator)
from bnpcore.inference.online import Minibatch
from bnpcore.kernels import _dahdp
from bnpcore.models.hdp_gibbs import DirectAssignmentGibbs
from bnpcore.results import ResultsMixin

__all__ = ["DirectAssignmentVB", "gem_log_density", "beta_objective"]

GEM_DENSITIES = ("beta", "stick")
HYPERPARAMETERS = ("alpha", "gamma", "eta")
SPLIT_INITS = ("minibatch", "divide", "reassign")
REASSIGN_ROUNDS = 3
REASSIGN_TURNS = 3
# the fewest pairs (document, word) for which split proposals run on several threads: a proposal's
# restricted iteration releases the GIL, the rest holds it. KOS, two threads against one: batch mode
# (353,000 pairs, 10 iterations with moves) 6.06 s against 10.10 s (benchmarks/results/bench_threads_kos.txt,
# session 18); online (minibatches of 100 documents, ~10,000 pairs, 2 epochs) 2.7-2.9 s against 2.4 s in
# one-off runs of 2026-11-28, so one thread is kept below this size
SPLIT_THREADS_PAIRS = 50_000
# logits of beta* stay in this box: beta*_k >= ~1e-180 / (K + 1), so with alpha >= 1e-100 the
# Dirichlet parameters alpha beta*_k stay normal numbers (lgamma and psi of them finite)
_LOGIT_BOUNDS = (-400.0, 10.0)
_PRODUCT_REASON = "alpha multiplies beta* (down to ~1e-180) and eta enters psi(eta) ~ -1/eta times counts"


# ---------------------------------------------------------------------------
# the point estimate beta* and its prior
# ---------------------------------------------------------------------------

def gem_log_density(beta, gamma, kind="beta"):
    """log p(beta | gamma) of a point on the (K+1)-simplex under GEM(gamma).

    ``beta`` holds the K topic weights and the rest mass last. "beta": the
    density of (beta_1..beta_K) by the change of variables from the sticks
    V_k = beta_k / R_{k-1}, R_k = sum_{l>k} beta_l::

        K log gamma + (gamma - 1) log beta_{K+1} - sum_{k=1}^{K-1} log R_k

    "stick": the density of the sticks, ``K log gamma + (gamma - 1) log
    beta_{K+1}`` (order-invariant; the paper does not say which it uses).

    Returns (value, gradient with respect to every coordinate of ``beta``).
    """
    beta = np.asarray(beta, dtype=np.float64)
    K = beta.size - 1
    grad = np.zeros(K + 1)
    value = K * math.log(gamma) + (gamma - 1.0) * math.log(beta[K])
    grad[K] = (gamma - 1.0) / beta[K]
    if kind == "beta" and K > 1:
        tails = np.cumsum(beta[::-1])[::-1][1:K]      # R_1 .. R_{K-1}
        value -= np.log(tails).sum()
        inv = np.cumsum(1.0 / tails)                   # beta_l enters R_k for 1 <= k <= l
        grad[1:] -= inv[np.minimum(np.arange(1, K + 1), K - 1) - 1]
    return value, grad


def beta_objective(beta, sum_elogpi, n_docs, scale, alpha, gamma, kind="beta"):
    """f(beta) of the beta* M-step ([SM] section 2.2) and its gradient::

        f = scale * sum_j sum_k [alpha beta_k E[log pi_jk] - lgamma(alpha beta_k)] + log p(beta | gamma)

    ``sum_elogpi`` = sum_j E[log pi_jk] over the ``n_docs`` documents (K + 1
    cells), ``scale`` = D / |B| (1 in batch mode)."""
    ab = alpha * beta
    lp, glp = gem_log_density(beta, gamma, kind)
    value = scale * (alpha * (beta @ sum_elogpi) - n_docs * gammaln(ab).sum()) + lp
    grad = scale * alpha * (sum_elogpi - n_docs * digamma(ab)) + glp
    return value, grad


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def optimize_beta(beta, sum_elogpi, n_docs, scale, alpha, gamma, kind="beta"):
    """argmax f by L-BFGS-B over logits (beta = softmax(zeta)), from ``beta``;
    returns the previous point when the optimum found is not better (f is not
    concave: the GEM Jacobian)."""
    def negative(z):
        b = _softmax(z)
        value, grad = beta_objective(b, sum_elogpi, n_docs, scale, alpha, gamma, kind)
        return -value, -(b * (grad - b @ grad))

    start = np.clip(np.log(beta), *_LOGIT_BOUNDS)
    before = negative(start)[0]
    result = minimize(negative, start, jac=True, method="L-BFGS-B", bounds=[_LOGIT_BOUNDS] * len(beta))
    if np.isfinite(result.fun) and result.fun < before:
        return _softmax(result.x)
    return beta


def _newton_log(objective, x, max_steps=20):
    """Maximise a smooth 1-D ``objective(x) -> (value, d, d2)`` over x > 0 by
    Newton steps in u = log x with step halving; only improving steps are taken."""
    value, d, d2 = objective(x)
    for _ in range(max_steps):
        gu, hu = x * d, x * x * d2 + x * d
        step = -gu / hu if hu < 0 else math.copysign(1.0, gu)
        step = max(-5.0, min(5.0, step))
        for _ in range(30):
            candidate = x * math.exp(step)
            new_value, new_d, new_d2 = objective(candidate)
            if np.isfinite(new_value) and new_value > value:
                break
            step *= 0.5
        else:
            return x
        gain = new_value - value
        x, value, d, d2 = candidate, new_value, new_d, new_d2
        if abs(step) < 1e-10 or gain <= 1e-12 * abs(value):
            break
    return x


# ---------------------------------------------------------------------------
# bound pieces
# ---------------------------------------------------------------------------

def expected_log_phi(lam, vocab=None):
    """E[log phi_kw] = psi(lambda_kw) - psi(Lambda_k) for rows of ``lam``,
    Lambda_k the row's total over all W words; ``vocab``: only the columns of
    those words (a minibatch's), still normalised by the whole row."""
    lam = np.atleast_2d(lam)
    return digamma(lam if vocab is None else lam[:, vocab]) - digamma(lam.sum(axis=1))[:, None]


def topic_terms(lam, eta):
    """The ``topics`` term per topic: E[log p(phi_k)] - E[log q(phi_k)]."""
    lam = np.atleast_2d(lam)
    W = lam.shape[1]
    return (gammaln(W * eta) - W * gammaln(eta) - gammaln(lam.sum(axis=1))
            + (gammaln(lam) + (eta - lam) * expected_log_phi(lam)).sum(axis=1))


def topic_terms_change(old, new, eta, cols):
    """sum(topic_terms(new)) - sum(topic_terms(old)) for rows that differ only in
    the columns ``cols``: the special functions of the other columns cancel, so
    they are evaluated only at ``cols`` and at the rows' totals."""
    W = old.shape[1]

    def part(lam):
        total, sub = lam.sum(axis=1), lam[:, cols]
        return (digamma(total) * (total - W * eta) - gammaln(total)).sum() \
            + (gammaln(sub) + (eta - sub) * digamma(sub)).sum()

    return float(part(new) - part(old))


class _Documents:
    """The ``documents`` term of a minibatch in a form a move updates in O(S):
    per document, the cells (n + ab - theta) psi(theta) + lgamma(theta) over the
    K + 1 cells, their coefficients' sum C_j and the total T_j of theta_j::

        documents_j = lgamma(alpha) - sum_k lgamma(ab_k) + sum_k cell_jk - C_j psi(T_j) - lgamma(T_j)
    """

    def __init__(self, theta, ndk, alpha_beta, alpha):
        self.theta, self.ab, self.alpha = theta, alpha_beta, alpha
        self.n = np.concatenate([ndk, np.zeros((len(ndk), 1))], axis=1)
        self.cells, coef = self.cell(theta, self.n, alpha_beta)
        self.cell_sum, self.coef, self.total = self.cells.sum(axis=1), coef.sum(axis=1), theta.sum(axis=1)

    @staticmethod
    def cell(theta, n, ab):
        coef = n + ab - theta
        return coef * digamma(theta) + gammaln(theta), coef

    @staticmethod
    def _per_doc(cell_sum, coef, total):
        return cell_sum - coef * digamma(total) - gammaln(total)

    def value(self):
        S = len(self.total)
        return S * (gammaln(self.alpha) - gammaln(self.ab).sum()) + \
            self._per_doc(self.cell_sum, self.coef, self.total).sum()

    def change(self, drop, add):
        """Change of the term when the cells ``drop`` (column indices) are replaced
        by the cells ``add``, a list of (theta column, n column, alpha beta)."""
        cell_sum = self.cell_sum - self.cells[:, drop].sum(axis=1)
        coef = self.coef - (self.n[:, drop] + self.ab[drop] - self.theta[:, drop]).sum(axis=1)
        total = self.total - self.theta[:, drop].sum(axis=1)
        prior = gammaln(self.ab[drop]).sum()
        for theta, n, ab in add:
            value, c = self.cell(theta, n, ab)
            cell_sum, coef, total = cell_sum + value, coef + c, total + theta
            prior -= gammaln(ab)
        return len(total) * prior + (self._per_doc(cell_sum, coef, total)
                                     - self._per_doc(self.cell_sum, self.coef, self.total)).sum()


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
    statistics (Vb, K), entropy H (K,) and responsibilities (nnz, K) or None."""

    def __init__(self, batch, theta, ndk, stats, entropy, resp):
        self.batch, self.theta, self.ndk, self.stats, self.entropy, self.resp = \
            batch, theta, ndk, stats, entropy, resp

    @property
    def n_docs(self):
        return self.batch.n_docs

    def tokens(self, elogphi_rows):
        """H_k + sum_w stats_wk E[log phi_kw] per topic, for E[log phi] (K, Vb)."""
        return self.entropy + np.einsum("wk,kw->k", self.stats, elogphi_rows)

    def drop(self, k):
        for name in ("theta", "ndk", "stats", "resp"):
            arr = getattr(self, name)
            if arr is not None:
                setattr(self, name, np.delete(arr, k, axis=1))
        self.entropy = np.delete(self.entropy, k)


# ---------------------------------------------------------------------------
# the state
# ---------------------------------------------------------------------------

class DAState(BatchState):
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
        merges = self.merge(local, scale) if cfg["split_merge"] else (0, 0)
        # (tau0 + t)^-kappa at most 1: a learning_offset below 1 would step past the estimate (rho = 1e150 at 1e-300)
        t = cfg["learning_offset"] + self.updates
        rho = 1.0 if batch_mode or t <= 1.0 else t ** (-cfg["learning_decay"])
        old_lam, old_beta = self.lam, self.beta
        lam_hat = np.full(self.lam.shape, self.eta)
        lam_hat[:, batch.vocab] += scale * local.stats.T
        self.lam = (1.0 - rho) * self.lam + rho * lam_hat if rho < 1.0 else lam_hat
        beta_hat = self._beta_step(local, scale)
        self.beta = (1.0 - rho) * self.beta + rho * beta_hat if rho < 1.0 else beta_hat
        splits = self.split(local, scale, rho, old_lam, lam_hat, old_beta, beta_hat) \
            if cfg["split_merge"] else (0, 0)
        if cfg["learn"]:
            self._hyperparameters(local, scale, rho)
        pruned = self._prune(local)
        self._sort(local)
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
        tokens, documents = self._local_terms(local, scale, lam, beta)
        return {"tokens": tokens, "documents": documents, "topics": float(topic_terms(lam, self.eta).sum()),
                "beta_prior": float(self._log_prior(beta))}

    def _local_terms(self, local, scale, lam, beta):
        """The ``tokens`` and ``documents`` terms of the bound under (lam, beta)."""
        tokens = local.tokens(expected_log_phi(lam, local.batch.vocab))
        docs = _Documents(local.theta, local.ndk, self.alpha * beta, self.alpha)
        return scale * float(tokens.sum()), scale * float(docs.value())

    def _beta_step(self, local, scale):
        theta = local.theta
        elogpi = digamma(theta) - digamma(theta.sum(axis=1))[:, None]
        return optimize_beta(self.beta, elogpi.sum(axis=0), len(theta), scale, self.alpha, self.gamma,
                             self.settings["gem_density"])

    def _log_prior(self, beta):
        return gem_log_density(beta, self.gamma, self.settings["gem_density"])[0]

    # -- merges ([SM] 3.2) -------------------------------------------------------------------
    def merge(self, local, scale):
        """Test pairs of topics with positive covariance of theta over the minibatch,
        largest first, with the current globals; accept at most ``max_merges``;
        returns (accepted, tried)."""
        cfg = self.settings
        K = self.n_components
        cap = cfg.get("max_merges")         # None: no cap (also in checkpoints from before the setting)
        if K < 2 or local.n_docs < 2 or cap == 0:
            return 0, 0
        cov = np.cov(local.theta[:, :K], rowvar=False)
        i, j = np.triu_indices(K, 1)
        values = cov[i, j]
        order = np.argsort(-values, kind="stable")
        order = order[values[order] > cfg["merge_threshold"]][:cfg["merge_candidates"]]
        current = np.arange(K)             # original topic -> current index (-1: merged away)
        touched = np.zeros(K, dtype=bool)
        accepted = tried = 0
        for p in order:
            if cap is not None and accepted >= cap:
                break
            a, b = i[p], j[p]
            if touched[a] or touched[b]:
                continue
            tried += 1
            ka, kb = current[a], current[b]
            if self._merge_gain(local, scale, ka, kb) > 0.0:
                self._apply_merge(local, ka, kb)
                touched[a] = touched[b] = True
                current[b] = -1
                current[current > kb] -= 1
                accepted += 1
        return accepted, tried

    def _merged_lambda(self, ka, kb):
        if self.settings["merge_prior"] == "double":
            return self.lam[ka] + self.lam[kb]
        # one eta and each topic's part above it: a "divide" half can hold less than eta at a word
        return self.eta + np.maximum(self.lam[ka] - self.eta, 0.0) + np.maximum(self.lam[kb] - self.eta, 0.0)

    def _merge_gain(self, local, scale, ka, kb):
        """L_B(merged) - L_B(current) for topics ka < kb, current globals."""
        pair = [ka, kb]
        vocab = local.batch.vocab
        lam_m = self._merged_lambda(ka, kb)
        r = local.resp[:, ka] + local.resp[:, kb]
        stats = local.stats[:, ka] + local.stats[:, kb]
        tokens_m = -float(local.batch.counts @ xlogy(r, r)) + stats @ expected_log_phi(lam_m, vocab)[0]
        tokens_old = (local.entropy[pair] + np.einsum("wk,kw->k", local.stats[:, pair],
                                                      expected_log_phi(self.lam[pair], vocab))).sum()
        ab = self.alpha * self.beta
        docs = _Documents(local.theta, local.ndk, ab, self.alpha)
        d_docs = docs.change(pair, [(local.theta[:, ka] + local.theta[:, kb], local.ndk[:, ka] + local.ndk[:, kb],
                                     ab[ka] + ab[kb])])
        d_topics = topic_terms(lam_m, self.eta)[0] - topic_terms(self.lam[pair], self.eta).sum()
        d_prior = self._log_prior(self._merged_beta(ka, kb)) - self._log_prior(self.beta)
        return scale * (tokens_m - tokens_old + d_docs) + d_topics + d_prior

    def _merged_beta(self, ka, kb):
        beta = np.delete(self.beta, kb)
        beta[ka] += self.beta[kb]
        return beta

    def _apply_merge(self, local, ka, kb):
        """Topic kb joins ka ([SM] 3.2: r, theta, beta*, lambda add); later topics shift down."""
        lam_m = self._merged_lambda(ka, kb)
        r = local.resp[:, ka] + local.resp[:, kb]
        local.entropy[ka] = -float(local.batch.counts @ xlogy(r, r))
        local.resp[:, ka] = r
        for name in ("theta", "ndk", "stats"):
            arr = getattr(local, name)
            arr[:, ka] += arr[:, kb]
        local.drop(kb)
        self.beta = self._merged_beta(ka, kb)
        self.lam[ka] = lam_m
        self.lam = np.delete(self.lam, kb, axis=0)

    # -- splits ([SM] 3.1, Alg. 1) -----------------------------------------------------------
    def split(self, local, scale, rho, old_lam, lam_hat, old_beta, beta_hat):
        """Propose splits of the topics in decreasing order of their minibatch
        mass, after the global step; accept at most ``max_splits``. For each
        topic the restricted proposals are tried first (the one with the larger
        gain is tested); when it does not gain and it is the topic's turn, the
        "reassign" proposal: REASSIGN_TURNS candidates per iteration, in turn,
        for each costs four E-steps of half the minibatch. The restricted
        proposals of ``n_threads`` candidates are made at once on the threads
        (each depends only on the state and its topic, its random numbers
        keyed by topic): the same splits for any thread count.
        Returns (accepted, tried)."""
        cfg = self.settings
        mass = local.ndk.sum(axis=0)
        order = np.argsort(-mass, kind="stable")[:cfg["split_candidates"]]
        online = rho < 1.0
        inits = cfg["split_inits"] if online else ("minibatch",)      # batch mode: one random division
        restricted = [init for init in inits if init != "reassign"]
        reassign = online and "reassign" in inits and local.n_docs >= 2 and len(order) > 0
        turns = order[(self.updates * REASSIGN_TURNS + np.arange(REASSIGN_TURNS)) % len(order)] if reassign else ()
        accepted = tried = 0
        halves = None                   # the reassign proposal's two halves of the minibatch, under the current globals
        key = None if online else int(self.rng.integers(2 ** 62))     # batch mode: the random divisions' stream

        def best_restricted(k):
            return max((self._split_proposal(local, scale, rho, k, old_lam, lam_hat, old_beta, beta_hat, init=init,
                                             key=key) for init in restricted), key=lambda p: p["gain"], default=None)

        # each proposal depends only on the state and its topic: the next n_threads candidates' proposals are
        # made at once, on the threads, and read in order; a split changes the state and drops the rest
        threads = cfg["n_threads"] if len(local.batch.words) >= SPLIT_THREADS_PAIRS else 1
        ahead = {}
        candidates = [k for k in order if mass[k] > 0.0]
        for i, k in enumerate(candidates):
            if accepted >= cfg["max_splits"]:
                break
            tried += 1
            if k not in ahead:
                batch = candidates[i:i + threads]
                ahead = dict(zip(batch, map_threads(best_restricted, batch, threads)))
            best = ahead.pop(k)
            if best is not None and best["gain"] > 0.0:
                self._apply_split(local, k, best)
                ahead = {}
            elif k in turns:
                if halves is None:
                    halves = [self._refit(half, self.lam, self.beta)
                              for half in (local.batch.take(np.arange(0, local.n_docs, 2)),
                                           local.batch.take(np.arange(1, local.n_docs, 2)))]
                if halves[0].ndk[:, k].sum() <= 0.0:         # nothing of k in the documents to fit
                    continue
                proposal = self._reassign_proposal(k, rho, *halves)
                if not proposal["gain"] > 0.0:         # also NaN: a proposal from underflowed halves
                    continue
                self._apply_reassign(local, proposal)
                return accepted + 1, tried      # every topic changed: old_lam and lam_hat no longer add up
            else:
                continue
            accepted += 1
            halves = None
        return accepted, tried

    def _refit(self, batch, lam, beta):
        """The E-step of ``batch`` under the globals (lam, beta) and the current alpha: a ``_Minibatch``."""
        elogphi = np.ascontiguousarray(expected_log_phi(lam, batch.vocab).T)
        return _Minibatch(batch, *estep_documents(batch, elogphi, self.alpha * beta, self.settings))

    def _reassign_proposal(self, k, rho, fit, check):
        """Split topic k, then let every topic give the new one what the E-step gives it.

        A true topic can be spread, in small proportions, over many topics.
        Dividing one of them (the restricted proposals) then loses in the
        bound: in every document the new half's weight tracks k's, so its own
        Dirichlet cell buys nothing; only a topic gathered from all the
        topics' shares would gain. This proposal starts from the "divide"
        halves of k fitted to the minibatch's even documents (``fit``, their
        E-step under the current globals) and, REASSIGN_ROUNDS times, runs
        their E-step over all K + 1 topics and moves from every other topic
        j to the new one max(0, lambda_jw - eta) times the fraction max(0, 1 -
        stats'_wj / stats_wj) of its statistic at word w that the E-step moved
        (the topics' total mass is kept). The gain is the change of the bound
        of the odd documents (``check``, likewise) between their E-steps under
        the current and the proposed globals: judged on documents the proposal
        did not see, for judged on its own documents such a proposal gains
        almost always (measured on bars: 136 topics instead of 20)."""
        K, vocab = self.n_components, fit.batch.vocab
        # the step's parts (old_lam, lam_hat, ...) are read only with restricted_iter = 0: the current globals stand in
        divided = self._split_proposal(fit, self.n_total / fit.n_docs, rho, k, self.lam, self.lam, self.beta, self.beta,
                                       init="divide")
        lam1, lam2 = divided["lam"]
        start = np.vstack([self.lam, lam2[None]])
        start[k] = lam1
        beta = divided["beta"]
        lam, before = start, fit.stats
        for _ in range(REASSIGN_ROUNDS):
            after = self._refit(fit.batch, lam, beta).stats
            moved = 1.0 - np.divide(after[:, :K], before, out=np.ones_like(before), where=before > 0.0)
            moved = np.clip(moved, 0.0, 1.0).T
            moved[k] = 0.0
            # a "divide" half can hold less than eta at a word: it has nothing there to give
            give = np.maximum(start[:K, vocab] - self.eta, 0.0) * moved
            lam = start.copy()
            # at least eta where a topic gives: start - (start - eta) rounds to 0 when eta << start
            lam[:K, vocab] = np.maximum(start[:K, vocab] - give, np.minimum(start[:K, vocab], self.eta))
            lam[K, vocab] += give.sum(axis=0)
        scale = self.n_total / check.n_docs
        proposed = self._refit(check.batch, lam, beta)
        # the topics other than k changed only at the minibatch's words (py-spy, KOS with 200 topics: the full
        # topics term of both sides took a fifth of an oHDP-SM iteration)
        others = np.flatnonzero(np.arange(K) != k)
        d_topics = topic_terms_change(self.lam[others], lam[others], self.eta, vocab) \
            + topic_terms(lam[[k, K]], self.eta).sum() - topic_terms(self.lam[k], self.eta)[0]
        before = sum(self._local_terms(check, scale, self.lam, self.beta)) + self._log_prior(self.beta)
        after = sum(self._local_terms(proposed, scale, lam, beta)) + self._log_prior(beta)
        return {"gain": after - before + d_topics, "lam": lam, "beta": beta}

    def _apply_reassign(self, local, proposal):
        """The proposed globals, and the minibatch's E-step under them: every topic changed."""
        self.lam, self.beta = proposal["lam"], proposal["beta"]
        whole = self._refit(local.batch, self.lam, self.beta)
        local.theta, local.ndk, local.stats, local.entropy, local.resp = \
            whole.theta, whole.ndk, whole.stats, whole.entropy, whole.resp

    def _split_proposal(self, local, scale, rho, k, old_lam, lam_hat, old_beta, beta_hat, restricted_iter=None,
                        init="minibatch", key=None):
        """Split topic k ([SM] Alg. 1) after the global step of this iteration.

        ``init="minibatch"`` (the paper): k' is what the global state had, k''
        what this minibatch adds: lambda' = (1 - rho) lambda_old_k, lambda'' =
        rho lambda_hat_k, beta* likewise, and r, theta divided in the proportion
        omega = beta*'/beta*_k (with ``restricted_iter=0`` this is the proposal;
        the halves sum to the updated topic). The restricted iteration
        (``_dahdp.restricted``) keeps (1 - rho) lambda_old_k as k''s memory and
        refits which minibatch tokens each half takes, updating the halves after
        every document. In batch mode (rho = 1) this would leave k' empty; the
        paper defines none for bHDP, so each word's tokens start divided at a
        random fraction u_w ~ U(0, 1) instead, from the stream keyed by
        (``key``, k): ``key`` is drawn once an iteration, so the proposal
        depends on the state and k alone, whichever thread makes it.

        ``init="divide"`` (online): once rho is small, k'' starts with a
        minibatch's worth of mass against k''s memory of the whole topic and
        the restricted iteration gives it no tokens, so a topic that blends
        several true topics is never divided. This proposal divides the
        topic's words instead: the halves first fit the minibatch alone (the
        restricted iteration with no memory, rho = 1), started from the tokens
        in the documents that contain an anchor word drawn in proportion to the
        topic's minibatch mass (``_anchor_shares``); then the updated lambda_k is divided word by word in the
        proportions s_w = (eta + n'_w) / (2 eta + n'_w + n''_w) of the fitted
        halves' counts, so that again lambda' + lambda'' = lambda_k."""
        cfg = self.settings
        batch, vocab = local.batch, local.batch.vocab
        n_iter = cfg["restricted_iter"] if restricted_iter is None else restricted_iter
        mass = np.ascontiguousarray(local.resp[:, k])
        counts = batch.counts
        V, W = len(vocab), self.lam.shape[1]
        divide = init == "divide" and rho < 1.0
        if rho < 1.0 and not divide:
            beta1, beta2 = (1.0 - rho) * old_beta[k], rho * beta_hat[k]
            omega = beta1 / (beta1 + beta2)
            r1 = omega * mass
        else:
            beta1 = beta2 = 0.5 * self.beta[k]
            omega = 0.5
            shares = self._anchor_shares(local, k) if divide else np.random.default_rng([key, int(k)]).random(V)
            r1 = shares[batch.words] * mass
        theta1, theta2 = omega * local.theta[:, k], (1.0 - omega) * local.theta[:, k]
        if n_iter == 0:
            lam1, lam2 = (1.0 - rho) * old_lam[k], rho * lam_hat[k]
            n1 = omega * local.ndk[:, k]
        else:
            # the halves' memory: the topic's past (paper), none (a fit of the minibatch alone)
            memory = (1.0 - rho) * old_lam[k] if not divide else np.zeros(W)
            fit_rho = 1.0 if divide else rho
            stats1 = np.bincount(batch.words, counts * r1, minlength=V)
            stats2 = np.bincount(batch.words, counts * (mass - r1), minlength=V)
            ab1, ab2 = self.alpha * beta1, self.alpha * beta2
            _dahdp.restricted(batch.ptr, batch.words, counts, mass, np.ascontiguousarray(memory[vocab]),
                              np.zeros(V), memory.sum() + fit_rho * self.eta * W, fit_rho * self.eta * W,
                              fit_rho * self.eta, fit_rho * scale, ab1, ab2, cfg["estep_tol"], n_iter,
                              cfg["restricted_sweeps"], theta1, theta2, r1, stats1, stats2)
            if divide:
                # each half's share by its own ratio: 1 - share rounds to 0 where eta << the counts
                share1, share2 = np.full(W, 0.5), np.full(W, 0.5)
                total = 2.0 * self.eta + stats1 + stats2
                share1[vocab], share2[vocab] = (self.eta + stats1) / total, (self.eta + stats2) / total
                lam1, lam2 = share1 * self.lam[k], share2 * self.lam[k]
            else:
                lam1 = memory + rho * (self.eta + scale * self._scatter(stats1, vocab))
                lam2 = rho * (self.eta + scale * self._scatter(stats2, vocab))
            n1 = theta1 - ab1
            beta1, beta2 = self._resplit_beta(local, scale, k, beta1 + beta2, theta1, theta2)
        r2 = mass - r1
        stats1 = np.bincount(batch.words, counts * r1, minlength=V)
        stats2 = np.bincount(batch.words, counts * r2, minlength=V)
        entropy = -np.array([counts @ xlogy(r1, r1), counts @ xlogy(r2, r2)])
        return self._split_gain(local, scale, k, lam1, lam2, beta1, beta2, theta1, theta2, r1, stats1, stats2,
                                entropy, n1)

    def _anchor_shares(self, local, k):
        """Per minibatch word, the fraction of topic k's minibatch mass that lies in
        the documents containing an anchor word, drawn in proportion to that mass
        from a stream keyed by (iteration, topic): reproducible, also when
        ``partial_fit`` continues a loaded model, and the minibatch order is untouched."""
        batch = local.batch
        V = len(batch.vocab)
        weight = batch.counts * local.resp[:, k]
        word_mass = np.bincount(batch.words, weight, minlength=V)
        anchor = np.random.default_rng([self.updates, int(k)]).choice(V, p=word_mass / word_mass.sum())
        doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.ptr))
        has_anchor = np.zeros(batch.n_docs, dtype=bool)
        has_anchor[doc[batch.words == anchor]] = True
        with_anchor = np.bincount(batch.words, weight * has_anchor[doc], minlength=V)
        return np.divide(with_anchor, word_mass, out=np.full(V, 0.5), where=word_mass > 0)

    def _scatter(self, stats, vocab):
        out = np.zeros(self.lam.shape[1])
        out[vocab] = stats
        return out

    def _split_beta(self, k, beta1, beta2):
        """beta* with topic k replaced by beta1 and beta2 appended after the last topic."""
        beta = np.insert(self.beta, self.n_components, beta2)
        beta[k] = beta1
        return beta

    def _resplit_beta(self, local, scale, k, total, theta1, theta2):
        """Split the fixed total weight of k', k'' by maximising f_B over the fraction."""
        others = np.delete(local.theta, k, axis=1).sum(axis=1)
        norm = digamma(others + theta1 + theta2)
        e1, e2 = (digamma(theta1) - norm).sum(), (digamma(theta2) - norm).sum()
        S = len(theta1)

        def negative(fraction):
            b1, b2 = fraction * total, (1.0 - fraction) * total
            ab1, ab2 = self.alpha * b1, self.alpha * b2
            value = scale * (ab1 * e1 + ab2 * e2 - S * (gammaln(ab1) + gammaln(ab2)))
            return -(value + self._log_prior(self._split_beta(k, b1, b2)))

        fraction = minimize_scalar(negative, bounds=(1e-9, 1.0 - 1e-9), method="bounded",
                                   options={"xatol": 1e-10}).x
        return fraction * total, (1.0 - fraction) * total

    def _split_gain(self, local, scale, k, lam1, lam2, beta1, beta2, theta1, theta2, r1, stats1, stats2, entropy,
                    n1):
        vocab = local.batch.vocab
        elog = expected_log_phi(np.stack([self.lam[k], lam1, lam2]), vocab)
        tokens_old = local.entropy[k] + local.stats[:, k] @ elog[0]
        tokens_new = entropy[0] + stats1 @ elog[1] + entropy[1] + stats2 @ elog[2]
        ab = self.alpha * self.beta
        docs = _Documents(local.theta, local.ndk, ab, self.alpha)
        n_k = local.ndk[:, k]
        d_docs = docs.change([k], [(theta1, n1, self.alpha * beta1), (theta2, n_k - n1, self.alpha * beta2)])
        d_topics = topic_terms(np.stack([lam1, lam2]), self.eta).sum() - topic_terms(self.lam[k], self.eta)[0]
        new_beta = self._split_beta(k, beta1, beta2)
        d_prior = self._log_prior(new_beta) - self._log_prior(self.beta)
        return {"gain": scale * (tokens_new - tokens_old + d_docs) + d_topics + d_prior, "lam": (lam1, lam2),
                "beta": new_beta, "theta": (theta1, theta2), "n1": n1, "r1": r1, "stats": (stats1, stats2),
                "entropy": entropy}

    def _apply_split(self, local, k, proposal):
        """k' takes k's place, k'' is appended after the last topic ([SM] footnote 2)."""
        K = self.n_components
        lam1, lam2 = proposal["lam"]
        self.lam = np.vstack([self.lam, lam2[None]])
        self.lam[k] = lam1
        self.beta = proposal["beta"]
        theta1, theta2 = proposal["theta"]
        local.theta = np.insert(local.theta, K, theta2, axis=1)
        local.theta[:, k] = theta1
        n1 = proposal["n1"]
        local.ndk = np.column_stack([local.ndk, local.ndk[:, k] - n1])
        local.ndk[:, k] = n1
        stats1, stats2 = proposal["stats"]
        local.stats = np.column_stack([local.stats, stats2])
        local.stats[:, k] = stats1
        local.entropy = np.append(local.entropy, proposal["entropy"][1])
        local.entropy[k] = proposal["entropy"][0]
        r1 = proposal["r1"]
        local.resp = np.column_stack([local.resp, local.resp[:, k] - r1])
        local.resp[:, k] = r1

    # -- hyperparameters, prune, order ------------------------------------------------------------
    def _hyperparameters(self, local, scale, rho):
        """Newton steps for alpha and eta, closed-form gamma ([SM] section 4 learns
        them "via Newton-Raphson updates"); online, the minibatch optimum is
        blended in log space with rho."""
        learn = self.settings["learn"]
        if "alpha" in learn:
            theta = local.theta
            e = (digamma(theta) - digamma(theta.sum(axis=1))[:, None]).sum(axis=0)
            S, beta = len(theta), self.beta

            def objective(a):
                ab = a * beta
                value = scale * (S * (gammaln(a) - gammaln(ab).sum()) + a * (beta @ e))
                d = scale * (S * (digamma(a) - beta @ digamma(ab)) + beta @ e)
                d2 = scale * S * (polygamma(1, a) - (beta * beta) @ polygamma(1, ab))
                return value, d, d2

            self.alpha = self._blend(self.alpha, _newton_log(objective, self.alpha), rho)
        if "eta" in learn:
            K, W = self.lam.shape
            total = expected_log_phi(self.lam).sum()

            def objective(eta):
                value = K * (gammaln(W * eta) - W * gammaln(eta)) + (eta - 1.0) * total
                d = K * W * (digamma(W * eta) - digamma(eta)) + total
                d2 = K * W * (W * polygamma(1, W * eta) - polygamma(1, eta))
                return value, d, d2

            self.eta = self._blend(self.eta, _newton_log(objective, self.eta), rho)
        if "gamma" in learn and self.n_components > 0:
            # log beta*_rest from the topics' weights: beta*_rest may round to 1 (gamma ~ 1e50)
            self.gamma = self._blend(self.gamma, -self.n_components / math.log1p(-self.beta[:-1].sum()), rho)

    @staticmethod
    def _blend(old, new, rho):
        return math.exp((1.0 - rho) * math.log(old) + rho * math.log(new))

    def _prune(self, local):
        """Topics with fewer than ``prune_threshold`` expected words leave; their
        weight goes to the rest cell (nested truncation)."""
        threshold = self.settings["prune_threshold"]
        if threshold <= 0.0 or self.n_components <= 1:
            return 0
        words = self.lam.sum(axis=1) - self.eta * self.lam.shape[1]
        drop = np.flatnonzero(words < threshold)
        if len(drop) == self.n_components:          # the largest topic stays
            drop = np.delete(drop, np.argmax(words[drop]))
        for k in drop[::-1]:
            self.beta[-1] += self.beta[k]
            self.beta = np.delete(self.beta, k)
            self.lam = np.delete(self.lam, k, axis=0)
            local.drop(k)
        return len(drop)

    def _sort(self, local):
        """Topics in decreasing order of beta*: the order of largest log p(beta* | gamma)
        under the "beta" density (every prefix sum is largest), the same bound otherwise."""
        K = self.n_components
        order = np.argsort(-self.beta[:K], kind="stable")
        if np.array_equal(order, np.arange(K)):
            return
        cells = np.append(order, K)
        self.beta, self.lam = self.beta[cells], self.lam[order]
        local.theta, local.ndk, local.stats = local.theta[:, cells], local.ndk[:, order], local.stats[:, order]
        local.entropy = local.entropy[order]
        if local.resp is not None:
            local.resp = local.resp[:, order]


# ---------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------

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

    ``fit(X, init_from=sampler)`` starts from the last sample of a fitted
    :class:`DirectAssignmentGibbs` over the same vocabulary instead of
    ``n_components`` random topics: lambda_k = eta + the sample's word counts
    of topic k (scaled to the corpus size D when the sampler saw fewer
    tokens), beta* = its topic weights with its new-topic weight as the rest
    cell, and the learned hyperparameters start at its alpha and gamma. On
    KOS a batch fit from 300 sweeps of G-HDP (224 topics) with eta = 100 / W,
    G-HDP's, ends at 144 topics and -7.40 per held-out word, where random
    starts of 5 to 40 topics end near -7.68. Online, rho_0 = 1 replaces the
    start by the first minibatch's estimate: raise ``learning_offset`` to
    keep it.

    Parameters
    ----------
    n_components : int, default 20
        Initial number of topics K (splits, merges and prunes change it).
    mode : {"online", "batch"}, default "online"
        "online": minibatches of ``batch_size`` documents in random order;
        "batch": every iteration is an E-step over all documents (warm-started
        from the previous one) and the exact M-step (rho = 1); the bound never
        decreases without moves.
    split_merge : bool, default True
        Propose splits and merges every iteration.
    alpha, gamma, eta : float, default 1.0, 1.0, 0.5
        Initial document concentration, top-level concentration and topic
        Dirichlet parameter ([SM] gives no values). eta = 0.5 rather than the
        0.01 usual for collapsed samplers: mean-field VB's exp(E[log phi])
        acts like counts minus about 0.5, so VB needs eta larger by about 0.5
        to smooth as a sampler with a small eta does (Asuncion, Welling,
        Smyth & Teh, "On smoothing and inference for topic models", UAI
        2009). On KOS (30 s of one core, document completion, oHDP from 100
        topics, no moves): eta = 0.5 -7.50 with 27 topics left, eta = 0.0145
        -7.61 with 100. Batch fits started from a G-HDP sample's topics do
        better with the small eta, in bound and held-out (-7.40 against -7.50;
        docs/split_merge.md).
        alpha and eta in [1e-100, 1e100], gamma in [1e-300, 1e300]
        (docs/numerics.md).
    learn_hyperparameters : bool or collection of {"alpha", "gamma", "eta"}, default ("alpha", "gamma")
        Which hyperparameters to learn: alpha and eta by Newton's method in log
        space, gamma in closed form (-K / log beta*_rest); True learns all three.
    batch_size : int, default 100
        Documents per minibatch (online).
    max_iter : int, default 10
        Passes over the corpus (epochs), as in scikit-learn's online LDA; one
        ``history_`` record per minibatch (online) or pass (batch).
    total_samples : int, optional
        D, the corpus size the minibatch statistics are scaled to (default: the
        documents given to ``fit``; ``partial_fit`` streams need it).
    learning_offset, learning_decay : float, default 1.0, 0.5
        tau0 and kappa of rho_t = (tau0 + t)^-kappa ([SM] section 4 uses
        (1 + t)^-0.5 for every online run).
    max_splits : int, default 3
        Splits accepted per iteration ([SM]: 1).
    max_merges : int or None, default 0
        Merges accepted per iteration (None: every candidate pair that gains
        and shares no topic with an accepted one, as the paper). 0, the
        default, switches merges off: on KOS (30 s of one core, from 1, 10 or
        100 topics) the paper's merges follow the bound down to four topics
        (-7.68 per held-out word); the defaults (``max_merges=0,
        split_inits=("minibatch", "divide"), max_splits=3,
        split_candidates=5``) let the splits alone grow 50-60 topics and reach
        -7.445 to -7.452, better than without moves from any start
        (docs/split_merge.md). For the paper's moves set ``max_merges=None,
        max_splits=1, split_candidates=10`` and add "reassign" to
        ``split_inits``.
    split_candidates : int in [1, 1000], default 5
        Topics tried as splits per iteration, in decreasing order of their
        minibatch mass (the paper tries every topic; each try costs a pass
        over the minibatch tokens of one topic).
    merge_candidates : int in [1, 1000], default 20
        Topic pairs tried as merges per iteration, in decreasing covariance.
    merge_threshold : float, default 0.0
        Pairs whose covariance of theta over the minibatch is above this are
        merge candidates (Alg. 2: positive covariance).
    merge_prior : {"double", "single"}, default "double"
        lambda of a merged topic: lambda' + lambda'' (the paper; the exact
        inverse of a split) or lambda' + lambda'' - eta (one eta plus each
        topic's part above eta, where a split half holds less than eta).
    split_inits : collection of {"minibatch", "divide", "reassign"}, default ("minibatch", "divide")
        Split proposals tried for each candidate topic. "minibatch": the
        paper's, the halves start as what the model had and what the minibatch
        adds; "divide" (online only): the halves divide the topic's words as a
        fit of the minibatch alone divides them; of these two the one with the
        larger gain is tested. "reassign" (online only), tried when neither
        gains, for three candidates per iteration in turn: the "divide" halves,
        then every topic gives the new one the share of its words that the
        E-step of half the minibatch moves to it, judged on the other half (a
        true topic spread thinly over many topics is found only this way). On
        the bars data of [SM] section 4 (20 epochs), started from 2, 5 and 10
        topics, "minibatch" alone ends with 11, 7 and 10 of the 20 bars found,
        with "divide" 18, 17 and 18 (late in a run the paper's proposal gives
        the new half no tokens), with all three 20, as from 20, 40, 50, 80 and
        100 topics; a run takes about twice as long as with two (1.9x from 2
        topics, 2.3x from 20, measured side by side).
    restricted_iter : int in [0, 1000], default 5
        Rounds of (r, theta) of the restricted iteration per document and pass.
    restricted_sweeps : int in [1, 1000], default 10
        Passes of the restricted iteration over the minibatch; the halves are
        updated after every document (Alg. 1), so that two halves that start
        alike separate (5 passes left more blended topics on bars).
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

    def __init__(self, n_components=20, mode="online", split_merge=True, alpha=1.0, gamma=1.0, eta=0.5,
                 learn_hyperparameters=("alpha", "gamma"), batch_size=100, max_iter=10, total_samples=None,
                 learning_offset=1.0, learning_decay=0.5, max_splits=3, max_merges=0,
                 split_candidates=5,
                 merge_candidates=20, merge_threshold=0.0, merge_prior="double",
                 split_inits=("minibatch", "divide"),
                 restricted_iter=5, restricted_sweeps=10,
                 prune_threshold=1.0, gem_density="beta", estep_tol=1e-3, estep_max_iter=100,
                 compute_bound=None, tol=1e-6, n_threads=None, random_state=None):
        self._store_params(locals())

    # -- the batch protocol ------------------------------------------------------
    def _settings(self):
        """Validate the parameters; the state's settings."""
        check_int(self.n_components, "n_components", minimum=1)
        if self.mode not in ("online", "batch"):
            raise ValueError(f"mode must be 'online' or 'batch', got {self.mode!r}")
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
        for name in ("batch_size", "max_iter", "max_splits"):
            check_int(getattr(self, name), name, minimum=0 if name in ("max_splits",) else 1)
        for name in ("split_candidates", "merge_candidates", "estep_max_iter"):
            check_inner(getattr(self, name), name)
        inits = self.split_inits
        if isinstance(inits, str) or not inits or not all(init in SPLIT_INITS for init in inits):
            raise ValueError(f"split_inits must be a non-empty collection of {SPLIT_INITS}, got {inits!r}")
        check_inner(self.restricted_iter, "restricted_iter", minimum=0)
        check_inner(self.restricted_sweeps, "restricted_sweeps")
        if self.total_samples is not None:
            check_int(self.total_samples, "total_samples", maximum=MAX_DOCUMENTS)
        if self.max_merges is not None:
            check_int(self.max_merges, "max_merges", minimum=0)
        check_real(self.merge_threshold, "merge_threshold")
        if self.merge_prior not in ("double", "single"):
            raise ValueError(f"merge_prior must be 'double' or 'single', got {self.merge_prior!r}")
        if self.gem_density not in GEM_DENSITIES:
            raise ValueError(f"gem_density must be one of {GEM_DENSITIES}, got {self.gem_density!r}")
        check_positive(self.prune_threshold, "prune_threshold", allow_zero=True)
        check_positive(self.estep_tol, "estep_tol")
        check_positive(self.tol, "tol", allow_zero=True)
        bound = self.mode == "batch" if self.compute_bound is None else self.compute_bound
        if not isinstance(bound, (bool, np.bool_)):
            raise TypeError("compute_bound must be True, False or None")
        return {"mode": self.mode, "split_merge": bool(self.split_merge), "learn": tuple(learn),
                "batch_size": int(self.batch_size), "learning_offset": float(self.learning_offset),
                "learning_decay": float(self.learning_decay), "max_splits": int(self.max_splits),
                "max_merges": None if self.max_merges is None else int(self.max_merges),
                "split_candidates": int(self.split_candidates), "merge_candidates": int(self.merge_candidates),
                "merge_threshold": float(self.merge_threshold), "merge_prior": self.merge_prior,
                "split_inits": tuple(dict.fromkeys(self.split_inits)), "restricted_iter": int(self.restricted_iter),
                "restricted_sweeps": int(self.restricted_sweeps), "prune_threshold": float(self.prune_threshold),
                "gem_density": self.gem_density, "estep_tol": float(self.estep_tol),
                "estep_max_iter": int(self.estep_max_iter), "bound": bool(bound),
                "n_threads": effective_n_threads(self.n_threads)}

    def _check_params(self):
        self._settings()
        return {"max_iter": int(self.max_iter), "tol": float(self.tol) if self.mode == "batch" else None}

    def _loop_settings(self, X):
        """Online, one iteration of the loop is a minibatch: max_iter epochs."""
        loop = self._check_params()
        if self.mode == "online":
            loop["max_iter"] *= -(-X.n_docs // int(self.batch_size))
        return loop

    def _new_state(self, X, rng, n_total, start=None):
        settings = self._settings()
        alpha, gamma = self.alpha, self.gamma
        if start is None:
            K, W = int(self.n_components), X.n_words
            # lambda and its step's copies (K x W each), the documents' proportions and responsibilities
            check_memory(8 * K * (5 * W + 2 * X.n_docs), f"n_components={K}", X)
            # [SM] leaves the initial topics open: lambda = eta + Gamma(1, 1) * 100 D / (K W)
            lam = self.eta + rng.gamma(1.0, 1.0, size=(K, W)) * (100.0 * n_total / (K * W))
            beta = np.full(K + 1, 1.0 / (K + 1))
        else:
            lam, beta = sample_globals(start, X, self.eta, n_total)
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
        (online updates in either ``mode``, as scikit-learn's online LDA).

        D (the corpus size the statistics are scaled to) is ``total_samples``,
        else the constructor's, else that of the previous fit, else the
        documents seen so far including ``X``. The first call on an unfitted
        estimator starts from a fresh state; later calls continue the model's
        (also after ``bnpcore.load``).
        """
        return self._partial_fit(X, total_samples)

    def _partial_fit(self, X, total_samples):
        settings = dict(self._settings(), mode="online")
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
            state = self._new_state(X, check_random_state(self.random_state), total or X.n_docs)
            self._grow_total, self.history_, seconds = total is None, [], 0.0
        if total is not None:
            state.n_total = total
        elif getattr(self, "_grow_total", False):      # D = the documents seen so far
            state.n_total = state.documents + X.n_docs
        bs = settings["batch_size"]
        for start in range(0, X.n_docs, bs):
            tick = time.perf_counter()
            record = state.step(np.arange(start, min(start + bs, X.n_docs)))
            seconds += time.perf_counter() - tick
            self._report(state.updates, n_components=state.n_components, fit_seconds=seconds, **record)
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
        out = np.empty((X.n_docs, self.n_components_))
        for start in range(0, X.n_docs, batch_size):
            ids = np.arange(start, min(start + batch_size, X.n_docs))
            theta = state.estep(Minibatch(X, ids, state._word_map)).theta[:, :-1]
            total = theta.sum(axis=1, keepdims=True)
            out[ids] = np.divide(theta, total, out=np.full_like(theta, 1.0 / theta.shape[1]), where=total > 0)
        return out
