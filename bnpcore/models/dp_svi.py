"""DP mixture of multinomials by truncation-free stochastic variational inference
(C. Wang and D. M. Blei, "Truncation-free online variational inference for
Bayesian nonparametric models", NIPS 2012, cited as [TF]; §2.3) and by truncated
stochastic mean-field VI (its baseline).

Model ([TF] §2.3): V_k ~ Beta(1, a), pi_k = V_k prod_{l<k}(1 - V_l),
phi_k ~ Dirichlet(eta 1_W), z_j ~ Cat(pi), every token of document j ~ Cat(phi_{z_j}).

``score`` of these mixtures is the per-word predictive log-likelihood of whole
documents (each document belongs to one component), not the document
completion of the topic models.
"""
import numpy as np
from scipy.special import logsumexp

from bnpcore._validation import check_init_scale, check_int, check_memory, check_prior, effective_n_threads
from bnpcore.base import TopicMixin
from bnpcore.evaluation import dp_heldout_log_likelihood
from bnpcore.inference.online import Minibatch, OnlineEstimator, check_local_sampler, minibatch_stats
from bnpcore.kernels._svi import dp_local_step, dp_log_weights, dp_meanfield_step
from bnpcore.results import ResultsMixin

__all__ = ["TruncationFreeSVI", "StochasticVB"]


class _OnlineDPMixture(ResultsMixin, OnlineEstimator, TopicMixin):
    """What both DP-mixture estimators share: sizes, scoring, parameters."""

    def _check_common(self):
        self._check_driver_params()
        check_prior(self.eta, "eta")
        check_prior(self.a, "a")
        effective_n_threads(self.n_threads)

    def _size_key(self):
        # u_k - 1: expected number of documents, what [TF] section 3 prunes and orders by
        return self._state.sizes

    _component_sizes = _size_key
    _size_unit = "documents"

    def score(self, X, y=None):
        """The mixtures' score: the held-out per-word log-likelihood of the whole
        documents X ([TF] supplement S.3, in closed form, the papers' metric),
        ``sum_j log sum_k pihat_k prod_w phihat_kw^{c_jw} / sum_j N_j`` with the
        variational means of the instantiated components. A document belongs to
        one component, so the whole document is scored, not a token split (the
        topic models' ``score`` is document completion instead); no random
        numbers are used."""
        X = self._check_input(X)
        return dp_heldout_log_likelihood(self.weights_, self.topics_, X, self.n_threads)


class TruncationFreeSVI(_OnlineDPMixture):
    """DP mixture of multinomials by truncation-free SVI ([TF] §2.3).

    Starts with no components. Each minibatch is labelled jointly by a collapsed
    Gibbs sampler whose "prior" is the current variational distribution
    (locally collapsed VI: q(phi_k) integrated out, sticks sampled); documents
    that choose the unrepresented stick mass create components on the fly.
    The global Dirichlet and Beta parameters then take a natural-gradient
    step; components are kept sorted by expected size and those with fewer
    than ``prune_threshold`` expected documents are removed every
    ``prune_every`` documents.

    Parameters
    ----------
    eta : float, default 0.5
        Symmetric Dirichlet prior of the components ([TF] §3: 0.5); at least
        1e-6 (smaller values are lost against the sampler's integer counts).
    a : float, default 1.0
        DP concentration, sticks V_k ~ Beta(1, a); at most 1000 with
        ``new_component="exact"`` (the walk over new sticks visits about 1 + a).
        Like every prior, at least 1e-300 (docs/numerics.md).
    batch_size : int, default 100
        S, documents per minibatch ([TF] compares S in {1, 2, 5, 10, 50, 100, 500}).
    n_epochs : int or "auto", default "auto"
        Passes over the corpus in ``fit``. "auto": as many as see about 5
        million training tokens (``bnpcore.inference.online.AUTO_EPOCH_TOKENS``;
        at least 1, at most 20 passes; 12 on KOS), so that a default fit costs
        about the same on a small corpus as on a large one.
    local_sweeps : int in [0, 100], default 5
        Gibbs sweeps of the local sampler after its sequential initialisation
        (unstated in [TF]).
    new_component : {"exact", "paper"}, default "exact"
        How a document taking the unrepresented mass picks its new component:
        "exact" walks down freshly drawn sticks (retrospective sampling: exact, where the literal
        rule is not with ordered sticks);
        "paper" takes the next stick, as printed in [TF] S.2.2 (not an exact
        Gibbs step).
    schedule : {"truncation_free", "robbins_monro"}, default "truncation_free"
        rho_t = S/n_t floored at S/n ([TF] §3), or (learning_offset + t)^-learning_decay.
    learning_offset, learning_decay : float, default 1.0, 0.6
        tau0 and kappa of the Robbins-Monro schedule.
    prune_every : int or None, default 20000
        Documents between prunings (None: never).
    prune_threshold : float, default 1.0
        Components with fewer expected documents (u_k - 1) are pruned.
    reorder : bool, default True
        Sort the sticks by expected size after every update.
    total_samples : int, optional
        n, the number of documents the data represent (default: the corpus
        size in ``fit``; see ``partial_fit`` for streams).
    random_state : int, Generator or None
    n_threads : int or None, default None
        OpenMP threads: None uses OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1 k threads (0, below -1 or not an integer:
        ValueError). The local step is one collapsed Gibbs sampler over the
        whole minibatch (each label conditions on the pooled counts of the
        other documents and on the sticks), so it is not exactly parallel and
        runs on one thread; ``transform``, ``log_weights`` and ``score`` run
        documents in parallel, with the same result for any number of threads.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_words)
        lambda, the variational Dirichlet parameters.
    topics_ : ndarray of shape (n_components_, n_words)
        Their means (rows sum to 1), largest component first.
    weights_ : ndarray of shape (n_components_,)
        E[pi_k] (the uninstantiated remainder is left out, E13).
    n_components_ : int
    history_ : list of dict
        One record per minibatch: iteration (updates so far), n_documents,
        fit_seconds, n_components, heldout_loglik (``score`` of the held-out
        documents given to ``fit``, when evaluated), and the diagnostics rho
        (step size) and n_used (components with at least one expected
        document).

    References
    ----------
    C. Wang and D. M. Blei. Truncation-free stochastic variational inference
    for Bayesian nonparametric models. NIPS 2012.
    """

    def __init__(self, eta=0.5, a=1.0, batch_size=100, n_epochs="auto", local_sweeps=5, new_component="exact",
                 schedule="truncation_free", learning_offset=1.0, learning_decay=0.6, prune_every=20000,
                 prune_threshold=1.0, reorder=True, total_samples=None, random_state=None, n_threads=None):
        self._store_params(locals())

    def _check_params(self):
        self._check_common()
        check_local_sampler(self.local_sweeps, self.new_component, self.a, "a", self.eta)

    def _state_prior(self):
        return float(self.eta), float(self.a), False

    def local_step(self, batch, st, rng):
        n_new, _, block, docs = dp_local_step(
            batch.ptr, batch.words, batch.counts, batch.vocab, st.words, st.row_tilde, st.slots, st.scale,
            st.sizes, float(self.eta), float(self.a), int(self.local_sweeps), self.new_component == "exact", rng)
        return n_new, minibatch_stats(batch, block, docs)

    def log_weights(self, X):
        """Unnormalised locally collapsed ``log q(z_j = k)`` ([TF] §2.3), shape
        (n_docs, n_components_ + 1); the last column is the new-component option."""
        X = self._check_input(X)
        st = self._state
        out = np.empty((X.n_docs, st.n_components + 1))
        dp_log_weights(X.indptr, X.indices, X.counts, st.words, st.row_tilde, st.slots, st.scale, st.sizes,
                       float(self.eta), float(self.a), out, effective_n_threads(self.n_threads))
        return out

    def transform(self, X):
        """Responsibilities q(z_j = k) over the instantiated components ([TF] §2.3,
        the analytic single-document local distribution), rows sum to 1."""
        lw = self.log_weights(X)[:, :-1]
        if lw.shape[1] == 0:
            return lw
        return np.exp(lw - logsumexp(lw, axis=1, keepdims=True))


class StochasticVB(_OnlineDPMixture):
    """Truncated stochastic mean-field VI for the DP mixture of multinomials
    ([TF] §3's baseline; Blei & Jordan 2006 made stochastic as in Hoffman et
    al. 2013).

    ``n_components`` sticks with q(V_K = 1); mean-field responsibilities
    ``r_jk ∝ exp(E[log pi_k] + sum_w c_jw E[log phi_kw])``; natural-gradient
    steps with ``rho_t = (learning_offset + t)^-learning_decay`` floored at S/n.

    Parameters
    ----------
    n_components : int, default 300
        Truncation T ([TF] §3: 300).
    eta, a : float, default 0.5, 1.0
    batch_size : int, default 100
    n_epochs : int or "auto", default "auto"
        Passes over the corpus in ``fit``. "auto": as many as see about 5
        million training tokens (``bnpcore.inference.online.AUTO_EPOCH_TOKENS``;
        at least 1, at most 20 passes; 12 on KOS), so that a default fit costs
        about the same on a small corpus as on a large one.
    schedule : {"robbins_monro", "truncation_free"}, default "robbins_monro"
    learning_offset, learning_decay : float, default 1.0, 0.6
        tau0 and kappa ([TF] §3, after Wang et al. 2011).
    init_scale : float in [0, 1e100], default 100.0
        Initial lambda_kw = eta + Gamma(1, 1) * init_scale * n / (T W) (the
        initialisation of Wang et al.'s online HDP code; unstated in [TF]).
    prune_every : int or None, default 20000
        [TF] §3 prunes "components with fewer than 1 document ... each time
        when we process 20K documents"; the text does not say whether this
        applies to the truncated baseline. None keeps all T.
    prune_threshold : float, default 1.0
    reorder : bool, default True
    total_samples : int, optional
    random_state : int, Generator or None
    n_threads : int or None, default None
        OpenMP threads (None: OMP_NUM_THREADS if set, else every cpu; -1
        every cpu; k >= 1). The mean-field local step (responsibilities per
        document, then the statistics per component), ``transform`` and
        ``score`` run in parallel, with the same result for any number of
        threads: every sum keeps its serial order.

    Attributes
    ----------
    components_, topics_, weights_, n_components_, history_ : as in TruncationFreeSVI
        (``weights_`` sums to one: the last stick takes the rest).
    """

    additive_local_step = True      # per-document mean-field fits (bnpcore.distributed splits minibatches)

    def __init__(self, n_components=300, eta=0.5, a=1.0, batch_size=100, n_epochs="auto", schedule="robbins_monro",
                 learning_offset=1.0, learning_decay=0.6, init_scale=100.0, prune_every=20000,
                 prune_threshold=1.0, reorder=True, total_samples=None, random_state=None, n_threads=None):
        self._store_params(locals())

    def _check_params(self):
        self._check_common()
        check_int(self.n_components, "n_components")
        check_init_scale(self.init_scale)

    def _state_prior(self):
        return float(self.eta), float(self.a), True

    def _init_state(self, state, rng, n_docs):
        # lambda (its table grows by doubling) and the step's statistics; a minibatch's responsibilities
        check_memory(8 * int(self.n_components) * (4 * state.n_words + min(int(self.batch_size), n_docs)),
                     f"n_components={self.n_components}, batch_size={self.batch_size} ({state.n_words} words)")
        T, W = int(self.n_components), state.n_words
        rows = state.table.add(T)
        state.words[rows] = rng.gamma(1.0, 1.0, size=(T, W)) * (self.init_scale * n_docs / (T * W))
        state.row_tilde[rows] = state.words[rows].sum(axis=1)

    def _meanfield(self, batch, st, resp):
        K = st.n_components
        block = np.empty((K, len(batch.vocab)))
        docs = np.empty(K)
        dp_meanfield_step(batch.ptr, batch.words, batch.counts, batch.vocab, st.words, st.row_tilde, st.slots,
                          st.scale, st.expected_log_weights(), float(self.eta), block, docs, resp,
                          effective_n_threads(self.n_threads))
        return block, docs

    def local_step(self, batch, state, rng):
        block, docs = self._meanfield(batch, state, np.empty((0, state.n_components)))
        return 0, minibatch_stats(batch, block, docs)

    def transform(self, X):
        """Mean-field responsibilities r_jk (rows sum to 1)."""
        X = self._check_input(X)
        resp = np.empty((X.n_docs, self._state.n_components))
        self._meanfield(Minibatch(X, np.arange(X.n_docs), np.full(X.n_words, -1, dtype=np.int32)), self._state, resp)
        return resp
