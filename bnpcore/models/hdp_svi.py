"""HDP topic model by truncation-free stochastic variational inference (C. Wang
and D. M. Blei, "Truncation-free online variational inference for Bayesian
nonparametric models", NIPS 2012, cited as [TF]; supplement S.2) and by the
online variational inference of Wang, Paisley & Blei (2011), its truncated
baseline.

Model ([TF] S.2; Teh, Jordan, Beal & Blei 2006): V_k ~ Beta(1, gamma),
beta_k = V_k prod_{l<k}(1 - V_l), phi_k ~ Dirichlet(eta 1_W),
pi_j ~ DP(alpha, beta), z_ji ~ Cat(pi_j), x_ji ~ Cat(phi_{z_ji}).

Two held-out measures: ``score(X)`` is the document completion of every topic
model (``TopicMixin.score``: 20% of the tokens of each document of X scored
given ``transform`` on the other 80%), and
``heldout_document_log_likelihood(X)`` is the papers' metric, the
importance-sampling estimate of whole documents ([TF] supplement S.3).
"""
import threading

import numpy as np

from bnpcore._threads import map_threads
from bnpcore._validation import (LOCAL_SWEEPS_MAX, PRODUCT_RANGE, check_init_scale, check_inner, check_int, check_memory,
                                 blas_limited, check_positive, check_prior, effective_n_threads)
from bnpcore.base import TopicMixin
from bnpcore.evaluation import hdp_heldout_log_likelihood
from bnpcore.inference.online import Minibatch, OnlineEstimator, check_local_sampler, minibatch_stats
from bnpcore.kernels import _lda
from bnpcore.kernels._svi import hdp_local_step, hdp_online_vb_step, online_vb_elogphi
from bnpcore.kernels.stirling import StirlingTable
from bnpcore.results import ResultsMixin

__all__ = ["TruncationFreeSVI", "OnlineVB"]

# the lower bound of alpha, 1e-100: alpha = 1e-150 gives NaN proportions for a one-token document, 1e-100 finite ones
_ALPHA_REASON = "the document sticks' digammas psi(alpha) ~ -1/alpha overflow the E-step below it"

# OnlineVB.transform's documents per kernel call: as many as hold about this many bytes of atom
# responsibilities (documents x n_atoms x K); the kernel computes E[log phi] over each chunk's
# vocabulary, about 30% of the time at 256 documents a call; on 50,000 short texts the CPU time fell
# little beyond ~8,000 documents, this size at K = 69, n_atoms = 15 (benchmarks/results/bench_user_path.txt)
_TRANSFORM_CHUNK_BYTES = 1 << 26


class _OnlineHDP(ResultsMixin, OnlineEstimator, TopicMixin):
    """What both online HDP estimators share: sizes, scoring, parameters."""

    # export_pyldavis folds a whole corpus in with transform's tol=1e-3 instead of 1e-4 (TruncationFreeSVI's
    # default, OnlineVB's doc_tol): on 50,000 short texts a quarter less CPU time, the topic frequencies
    # moved by 0.03% of the tokens (benchmarks/results/bench_user_path.txt)
    _export_fold_in = {"tol": 1e-3}

    def _check_common(self):
        self._check_driver_params()
        for name in ("eta", "gamma", "alpha"):
            check_prior(getattr(self, name), name)
        check_int(self.heldout_burnin, "heldout_burnin", minimum=0)
        check_int(self.heldout_samples, "heldout_samples")
        effective_n_threads(self.n_threads)

    def _state_prior(self):
        return float(self.eta), float(self.gamma), self._truncated

    def _size_key(self):
        # expected number of words, sum_w (lambda_kw - eta): what [TF] section 3 prunes and orders by
        return self._state.word_mass()

    _component_sizes = _size_key

    def heldout_document_log_likelihood(self, X):
        """Held-out per-word log-likelihood of whole documents, the papers' metric
        ([TF] supplement S.3).

        ``sum_j log p(x_j | pihat, phihat) / sum_j N_j`` over the instantiated
        topics (the rest of the stick dropped, as [TF] S.3), the document proportions integrated out by importance
        sampling
        (:func:`bnpcore.evaluation.hdp_heldout_log_likelihood`):
        ``heldout_burnin`` Gibbs sweeps, then ``heldout_samples`` samples per
        document, from the scoring stream of ``random_state`` (the same value
        for the same documents and seed), ``n_threads`` threads. ``score`` is
        the library's document completion instead, comparable across topic
        models; use this method to compare with the papers' figures.

        Parameters
        ----------
        X : Corpus or anything ``Corpus`` accepts, of the training width

        Returns
        -------
        float
            Per-word log-likelihood (a ValueError when X has no tokens).
        """
        X = self._check_input(X)
        return hdp_heldout_log_likelihood(self.topics_, self.weights_, self.alpha, X, self.heldout_burnin,
                                          self.heldout_samples, self._scoring_rng(), self.n_threads)


class TruncationFreeSVI(_OnlineHDP):
    """HDP topic model by truncation-free SVI ([TF] supplement S.2).

    Starts with no topics. The tokens of each minibatch are sampled jointly by
    a collapsed Gibbs sampler whose "prior" is the current variational
    distribution (q(phi_k) integrated out, counts pooled over the minibatch);
    a token may open a new topic. Table counts are drawn from the Antoniak
    distribution and the sticks from their Beta conditionals; the global
    parameters then take a natural-gradient step. Topics are kept sorted by
    expected word mass, and those with fewer than ``prune_threshold``
    expected words are removed every ``prune_every`` documents.

    ``score`` is document completion, as for every topic model; the papers'
    whole-document metric is ``heldout_document_log_likelihood``.

    The settings of [TF] §3 are ``TruncationFreeSVI(eta=0.01, gamma=1.0,
    alpha=1.0, n_samples=1)``. The defaults differ (a study on KOS for a
    fixed time on one core, document completion: ``benchmarks/bench_online.py study``,
    table in ``benchmarks/results/tfsvi_study_kos.txt``): with gamma = 1 the
    corpus-scaled table counts leave new topics almost no prior mass and the
    fit stays at a few topics; a larger gamma keeps more topics (the largest
    too slow to train in the study's time); averaging 5 samples per
    minibatch instead of keeping the last one reduces the noise of the
    statistics; eta = 0.05 helps once there are many topics; a document
    concentration alpha = 5 instead of 1 lets each document spread its
    tokens over more topics, so that the corpus's common words gather in a
    few topics and the others stay sharp (see ``alpha``). The defaults
    stay behind the collapsed Gibbs sampler ``hdp.DirectAssignmentGibbs``.
    Smaller and larger batches, and fewer burn-in sweeps, did worse.

    Parameters
    ----------
    eta : float, default 0.05
        Symmetric Dirichlet prior of the topics ([TF] §3: 0.01); at least 1e-6
        (smaller values are lost against the sampler's integer counts).
    gamma : float, default 30.0
        Top-level concentration ([TF]'s a, 1 in [TF] §3): sticks
        V_k ~ Beta(1, gamma); at most 1000 with ``new_component="exact"``
        (the walk over new sticks visits about 1 + gamma). The default suits
        corpora of thousands of documents (KOS); on a few dozen documents it
        splits themes into several topics, where gamma = 1 does not.
    alpha : float, default 5.0
        Document-level concentration ([TF]'s b, 1 in [TF] §3): pi_j ~
        DP(alpha, beta). Like every prior, in [1e-300, 1e300]
        (docs/numerics.md). With 1 each document keeps to very few topics,
        and the common words of a corpus end up mixed into its themes: on
        the docstrings of Python's standard library (documents of 32 tokens
        on average) the c_npmi of the 20 largest topics was 0.080 with 1,
        0.098 with 3, 0.106 with 5 and 0.119 with 10 (mean of seeds 0-2,
        ``benchmarks/results/bench_defaults_text.txt``), for 20-40% more CPU time;
        on KOS (seed 0, ``bench_defaults_kos.txt``) -7.436 held-out with 1,
        -7.382 with 5, -7.357 with 10 (1, 3 and 10 over seeds 0-2 in
        ``benchmarks/results/tfsvi_study_kos.txt``). A large alpha blends
        topics when each document holds only a few of them: on bars
        documents of 80 tokens drawn with Dirichlet(0.2) proportions over 10
        bars (seeds 0-2), alpha = 1, 3 and 5 found all 10 bars (cosine >
        0.95; 9 of 10 once with 5), alpha = 10 only 3-5 of them, and the
        held-out score fell by 0.005 (3), 0.016 (5) and 0.044 (10) nats
        per word from alpha = 1's. Lower it for such corpora. (Teh, Jordan,
        Beal & Blei 2006 sample it under a Gamma prior, as bnpcore's
        samplers do; here it stays fixed.)
    batch_size : int, default 100
    n_epochs : int or "auto", default "auto"
        Passes over the corpus. "auto": as many as see about 5 million
        training tokens (``bnpcore.inference.online.AUTO_EPOCH_TOKENS``; at
        least 1, at most 20 passes; 12 on KOS), so that a default fit costs
        about the same on a small corpus as on a large one; one pass left
        mixed topics on small corpora.
    local_sweeps : int in [0, 100], default 5
        Gibbs sweeps (sticks, tokens, tables) after the sequential
        initialisation, before the first sample (unstated in [TF]).
    n_samples : int in [1, 100], default 5
        Samples of the local sampler averaged into the minibatch statistics
        ([TF] §2.3: the empirical distribution of "one (or more) samples";
        [TF] §3 uses one): the state after ``local_sweeps`` sweeps and after
        each of ``n_samples - 1`` further sweeps, topics labelled by stick
        position.
    new_component : {"exact", "paper"}, default "exact"
        "exact": retrospective walk over fresh sticks (exact); "paper": the
        literal S.2.2 rule (next stick, not an exact Gibbs step).
    schedule, learning_offset, learning_decay : as in ``mixture.TruncationFreeSVI``
    prune_every : int or None, default 20000
    prune_threshold : float, default 1.0
        Topics with fewer expected words are pruned.
    reorder : bool, default True
        Sort topics by expected word mass after every update.
    total_samples : int, optional
        D, the number of documents the data represent.
    heldout_burnin, heldout_samples : int, default 50, 1000
        Gibbs sweeps and importance samples per document of
        ``heldout_document_log_likelihood`` ([TF] S.3).
    n_threads : int, optional
        Threads of ``transform``, ``score`` and
        ``heldout_document_log_likelihood`` (the local sampler is sequential).
    random_state : int, Generator or None

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_words)
        lambda, the variational Dirichlet parameters of the topics.
    topics_ : ndarray of shape (n_components_, n_words)
        Topic-word distributions (rows sum to 1), largest topic first.
    weights_ : ndarray of shape (n_components_,)
        E[beta_k] (the uninstantiated remainder is left out).
    n_components_ : int
    history_ : list of dict
        One record per minibatch: iteration (updates so far), n_documents,
        fit_seconds, n_components, heldout_loglik (``score`` of the held-out
        documents given to ``fit``, when evaluated), and the diagnostics rho
        (step size) and n_used (topics with at least one expected word).

    References
    ----------
    C. Wang and D. M. Blei. Truncation-free stochastic variational inference
    for Bayesian nonparametric models. NIPS 2012, supplement S.2.
    """

    _truncated = False

    def __init__(self, eta=0.05, gamma=30.0, alpha=5.0, batch_size=100, n_epochs="auto", local_sweeps=5, n_samples=5,
                 new_component="exact", schedule="truncation_free", learning_offset=1.0, learning_decay=0.6,
                 prune_every=20000, prune_threshold=1.0, reorder=True, total_samples=None, heldout_burnin=50,
                 heldout_samples=1000, n_threads=None, random_state=None):
        self._store_params(locals())

    def _check_params(self):
        self._check_common()
        check_local_sampler(self.local_sweeps, self.new_component, self.gamma, "gamma", self.eta)
        check_inner(self.n_samples, "n_samples", maximum=LOCAL_SWEEPS_MAX)

    def local_step(self, batch, st, rng):
        if getattr(self, "_stirling", None) is None:
            self._stirling = StirlingTable()        # cache of log Stirling numbers, never saved
        n_tokens = int(batch.counts.sum(dtype=np.int64))     # the local sampler's words and topics per token
        check_memory(16 * n_tokens, f"batch_size={self.batch_size} (a minibatch of {batch.n_docs} documents and "
                     f"{n_tokens} tokens)")
        settings = {"eta": float(self.eta), "gamma": float(self.gamma), "alpha": float(self.alpha),
                    "sweeps": int(self.local_sweeps), "exact": self.new_component == "exact",
                    "n_samples": int(self.n_samples)}
        n_new, block, sizes = hdp_local_step(
            batch.ptr, batch.words, batch.counts, batch.vocab, st.words, st.row_tilde, st.slots, st.scale, st.sizes,
            settings, rng, self._stirling)
        return n_new, minibatch_stats(batch, block, sizes)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_stirling", None)
        return state

    def transform(self, X, *, max_iter=100, tol=1e-4):
        """Document-topic proportions with the topics fixed, by zero-order
        collapsed variational inference (CVB0: Asuncion, Welling, Smyth & Teh,
        "On smoothing and inference for topic models", UAI 2009) under the
        document prior Dirichlet(alpha pihat): every token's topic distribution
        ``r_ik ∝ topics_[k, w_i] (n_jk - r_ik + alpha pihat_k)``, with ``n_jk`` the
        document's expected counts, until their mean absolute change per token
        is below ``tol`` (at most ``max_iter`` sweeps); returns
        ``(n_jk + alpha pihat_k) / (N_j + alpha sum_k pihat_k)`` (rows sum to 1;
        an empty document gets the normalised pihat). Deterministic, and each
        document is inferred on its own (``n_threads`` in parallel). The default
        ``tol`` moves the proportions by about ten times its own size from a
        tight tolerance's, at half the sweeps, and leaves the held-out score
        on KOS unchanged (``benchmarks/results/design_choices.txt``).

        It approximates the posterior mean of the proportions that the local
        Gibbs sampler would average over many sweeps: on KOS (document
        completion) it scores better than the last sample of the Gibbs sweeps
        and than their average (``benchmarks/results/design_choices.txt``).
        """
        X = self._check_input(X)
        max_iter = check_int(max_iter, "max_iter", minimum=1)
        tol = check_positive(tol, "tol", allow_zero=True)
        if self.n_components_ == 0:
            return np.empty((X.n_docs, 0))
        topics = np.ascontiguousarray(self.topics_.T)
        theta = np.empty((X.n_docs, self.n_components_))
        log_word = np.log(topics)                 # topics_ > 0: eta > 0 in every topic
        _lda.fold_in(X.indptr, X.indices, X.counts, np.ascontiguousarray(self.alpha * self.weights_),
                     _lda.MODE_CVB0, 0, log_word, topics, max_iter, 0, tol, *self._document_keys(X), theta,
                     effective_n_threads(self.n_threads))
        return theta


class OnlineVB(_OnlineHDP):
    """Online variational inference for the HDP (Wang, Paisley & Blei 2011),
    the truncated baseline of [TF] §3.

    Corpus level: ``n_components`` topics Dirichlet(lambda_k) and sticks
    Beta(u_k, v_k) with V_T = 1; document level: ``n_atoms`` atoms with their
    own sticks, each atom pointing to corpus topics (varphi), each word to
    atoms (zeta), fitted by coordinate ascent per document (the first three
    iterations without the stick terms); then natural-gradient steps with
    ``rho_t = (learning_offset + t)^-learning_decay`` floored at S/D. The
    same algorithm as gensim's ``HdpModel`` (T = n_components, K = n_atoms); the
    start of the document iterations is the one choice left open
    (``doc_init``). ``score`` is document completion, as for every topic
    model; the papers' whole-document metric is
    ``heldout_document_log_likelihood``.

    The baseline as [TF] §3 and the reference code run it is
    ``OnlineVB(n_components=300, eta=0.01, gamma=1.0, n_epochs=1,
    doc_init="uniform")`` (kappa = 0.6, tau0 = 1 are the defaults); on KOS
    it collapses to one topic (see ``doc_init``), which the default
    ``doc_init="ranked"`` avoids. The other defaults are those that did best
    on KOS (document completion, one core; ``benchmarks/bench_defaults.py``,
    ``benchmarks/results/bench_defaults_kos.txt``): T = 100 and eta = 0.5
    (with gamma = 10 or 30), which score better held-out after one pass than
    the [TF] settings with the ranked start, and use a few dozen topics. eta = 0.5 for
    the reason given for ``DirectAssignmentVB``'s eta (mean-field VB needs
    more smoothing than a sampler; eta = 0.1 did worse);
    gamma = 30 (as ``TruncationFreeSVI``) rather than 1 or 10 leaves the
    later topics prior mass (the sticks' prior Beta(1, gamma) has mean
    1 / (1 + gamma), so the prior weights fall more slowly along the
    topics), and more, narrower topics keep their documents. On the
    docstrings of the standard library (seeds 0-2,
    ``benchmarks/results/bench_defaults_text.txt``) gamma = 30 keeps about
    44 topics rather than 35 and their 20 largest score c_npmi 0.109 rather
    than 0.075 (tomotopy's HDPModel for the same time: 0.103, lower on two
    seeds of three), while KOS's held-out score moves by less than 0.01 per
    word (28 topics rather than 25). gensim's ``HdpModel`` defaults
    are ``OnlineVB(n_components=150, doc_init="uniform", learning_offset=65,
    learning_decay=1.0, batch_size=256)``.

    Parameters
    ----------
    n_components : int, default 100
        Corpus-level truncation ([TF] §3: 300; gensim's T). A document's
        iterations cost in proportion to it. When every topic ends holding
        at least one expected word the fit warns (``CapacityWarning``):
        raise it.
    n_atoms : int, default 15
        Document-level truncation (gensim's K).
    eta, gamma, alpha : float, default 0.5, 30.0, 1.0
        ([TF] §3: 0.01, 1, 1; see above.)
        ``alpha`` in [1e-100, 1e100], the others in [1e-300, 1e300]
        (docs/numerics.md).
    batch_size : int, default 100
    n_epochs : int or "auto", default "auto"
        Passes over the corpus. "auto": as many as see about 1.5 million
        training tokens (at least 1, at most 20 passes; 4 on KOS), so that a
        default fit costs about the same on a small corpus as on a large one.
    schedule : {"robbins_monro", "truncation_free"}, default "robbins_monro"
    learning_offset, learning_decay : float, default 1.0, 0.6
        tau0 and kappa (gensim's ``tau`` and ``kappa``).
    doc_init : {"ranked", "uniform"}, default "ranked"
        Start of the document iterations. "ranked": atom t starts on the
        document's t-th best topic (by sum_w c_w E[log phi_kw] + E[log beta_k]),
        so the document-level mixture is used; at least five iterations run
        (two with the stick terms). "uniform": a uniform word-to-atom
        distribution, as in Wang et al.'s reference code and gensim. Every atom
        is then the same mixture of topics and stays so until the stick terms
        enter (fourth iteration), but the document bound does not change
        between the first two iterations, so the convergence test ends them
        there: each document is fitted by one distribution over topics, the
        softmax of its log-likelihood tempered by 1/n_atoms (computed for one
        atom, n_atoms times cheaper than "ranked"). With a first step
        rho = 1 (the learning rate above), which replaces the random initial
        topics by the first minibatch's statistics, the larger topics then
        absorb the others (their E[log phi] is less penalised): on KOS
        (T = 300, 5 epochs) "uniform" ends with one used topic (document
        completion -7.91/word; gensim's ``HdpModel`` with kappa = 0.6 and
        tau = 1 likewise puts 99.98% of its stick weight and 98.8% of the
        documents' proportions in one topic), "ranked" keeps
        31 (-7.73; after one epoch -7.78 against -7.93;
        ``benchmarks/results/bench_online_kos.txt``). At T = 150 both keep
        40-42 topics (``benchmarks/bench_online.py``, same file).
        gensim's own defaults (tau = 64, kappa = 1, so rho starts at 1/65 and
        the random topics survive the first minibatches) avoid the collapse
        with the uniform start: ``learning_offset=65, learning_decay=1.0``.
    max_doc_iter : int in [1, 1000], default 100
    doc_tol : float, default 1e-4
        The document iterations stop when the relative change of the document
        bound is in [0, doc_tol).
    init_scale : float in [0, 1e100], default 100.0
        lambda_kw = eta + Gamma(1, 1) * init_scale * D / (T W) at the start.
    prune_every : int or None, default 20000
        Remove topics with fewer than ``prune_threshold`` expected words (the
        text of [TF] §3 may or may not apply this to the baseline; None keeps
        all T).
    prune_threshold : float, default 1.0
    reorder : bool, default True
        Sort topics by sum_w lambda_kw after every update (as Wang et al.).
    total_samples : int, optional
    heldout_burnin, heldout_samples : int, default 50, 1000
        Settings of ``heldout_document_log_likelihood`` (as in TruncationFreeSVI).
    n_threads : int, optional
        Threads over the documents of a minibatch, of ``transform`` and of the
        held-out measures (results do not depend on it).
    random_state : int, Generator or None

    Attributes
    ----------
    components_, topics_, weights_, n_components_, history_ : as in TruncationFreeSVI
        (``weights_`` sums to one: the last stick takes the rest).

    References
    ----------
    C. Wang, J. Paisley and D. M. Blei. Online variational inference for the
    hierarchical Dirichlet process. AISTATS 2011.
    """

    _truncated = True
    # n_epochs="auto": a pass costs several times TruncationFreeSVI's (4 passes on KOS)
    _auto_epoch_tokens = 1_500_000

    additive_local_step = True      # per-document mean-field fits (bnpcore.distributed splits minibatches)

    def __init__(self, n_components=100, n_atoms=15, eta=0.5, gamma=30.0, alpha=1.0, batch_size=100, n_epochs="auto",
                 schedule="robbins_monro", learning_offset=1.0, learning_decay=0.6, doc_init="ranked",
                 max_doc_iter=100, doc_tol=1e-4, init_scale=100.0, prune_every=20000, prune_threshold=1.0, reorder=True,
                 total_samples=None, heldout_burnin=50, heldout_samples=1000, n_threads=None, random_state=None):
        self._store_params(locals())

    def _check_params(self):
        self._check_common()
        check_prior(self.alpha, "alpha", bounds=PRODUCT_RANGE, reason=_ALPHA_REASON)
        self._n_topics = check_int(self.n_components, "n_components")
        check_int(self.n_atoms, "n_atoms")
        if self.doc_init not in ("ranked", "uniform"):
            raise ValueError(f"doc_init must be 'ranked' or 'uniform', got {self.doc_init!r}")
        check_inner(self.max_doc_iter, "max_doc_iter")
        check_positive(self.doc_tol, "doc_tol", allow_zero=True)
        check_init_scale(self.init_scale)

    def _init_state(self, state, rng, n_docs):
        T, W = self._n_topics, state.n_words
        # lambda (its table grows by doubling) and the step's statistics (the E-step checks its own arrays)
        check_memory(32 * T * W, f"n_components={T} ({W} words)")
        rows = state.table.add(T)
        state.words[rows] = rng.gamma(1.0, 1.0, size=(T, W)) * (self.init_scale * n_docs / (T * W))
        state.row_tilde[rows] = state.words[rows].sum(axis=1)

    def _estep(self, batch, st, doc_topic, n_threads=None, tol=None, stats=True, elogphi=None):
        K = st.n_components
        n_threads = effective_n_threads(self.n_threads) if n_threads is None else n_threads
        # the kernel's atom responsibilities (documents x n_atoms x K, pairs x n_atoms) and word statistics
        check_memory(8 * (int(self.n_atoms) * (batch.n_docs * K + len(batch.words)) + 2 * K * len(batch.vocab)),
                     f"n_atoms={self.n_atoms}, n_components={K}, batch_size={batch.n_docs}")
        block, sizes = np.empty((K if stats else 0, len(batch.vocab))), np.empty(K if stats else 0)
        bound, n_iter = np.empty(batch.n_docs), np.empty(batch.n_docs, dtype=np.int32)
        settings = {"eta": float(self.eta), "alpha": float(self.alpha), "n_atoms": int(self.n_atoms),
                    "ranked": self.doc_init == "ranked", "max_iter": int(self.max_doc_iter),
                    "tol": float(self.doc_tol if tol is None else tol), "stats": bool(stats)}
        hdp_online_vb_step(batch.ptr, batch.words, batch.counts, batch.vocab, st.words, st.row_tilde, st.slots,
                           st.scale, st.expected_log_weights(), settings, (block, sizes, doc_topic, bound, n_iter),
                           n_threads, elogphi=elogphi)
        return block, sizes

    def local_step(self, batch, state, rng):
        block, sizes = self._estep(batch, state, np.empty((0, state.n_components)))
        return 0, minibatch_stats(batch, block, sizes)

    def transform(self, X, chunk=None, *, tol=None):
        """Document-topic proportions from the document-level variational
        parameters: ``sum_t varphi_jtk N_jt`` normalised (an empty document
        gets ``weights_``).

        Each document is fitted on its own (the E-step of ``fit``), so the
        result does not depend on ``chunk`` nor on ``n_threads``: the
        documents go to the kernel ``chunk`` at a time (by default as many as
        keep its atom responsibilities near ``_TRANSFORM_CHUNK_BYTES``), the
        chunks on ``n_threads`` threads. The chunks share one E[log phi] over
        the words of X; the kernel skips the minibatch statistics of ``fit``
        (``stats=False``). ``tol``: the
        documents' stopping rule (relative change of the document bound),
        by default ``doc_tol``, the fit's.
        """
        X = self._check_input(X)
        tol = check_positive(self.doc_tol if tol is None else tol, "tol", allow_zero=True)
        K = self._state.n_components
        if chunk is None:
            chunk = max(256, _TRANSFORM_CHUNK_BYTES // (8 * int(self.n_atoms) * max(K, 1)))
        chunk = check_int(chunk, "chunk")
        out = np.empty((X.n_docs, K))
        starts = iter(range(0, X.n_docs, chunk))
        lock = threading.Lock()
        st = self._state
        elogphi = None
        if X.n_docs > chunk:        # several chunks: E[log phi] of the words of X once, its rows per chunk
            words = np.flatnonzero(np.bincount(X.indices, minlength=X.n_words))
            check_memory(8 * K * len(words), f"n_components={K} ({len(words)} words)")
            where = np.zeros(X.n_words, dtype=np.intp)
            where[words] = np.arange(len(words))
            elogphi = online_vb_elogphi(st.words, st.row_tilde, st.slots, st.scale, float(self.eta),
                                        words.astype(np.int32), effective_n_threads(self.n_threads))

        def worker(_):
            word_map = np.full(X.n_words, -1, dtype=np.int32)
            while True:
                with lock:      # the next chunk, and reading it (an on-disk corpus reads its pages)
                    start = next(starts, None)
                    if start is None:
                        return
                    batch = Minibatch(X, np.arange(start, min(start + chunk, X.n_docs)), word_map)
                self._estep(batch, st, out[start:start + batch.n_docs], n_threads=1, tol=tol, stats=False,
                            elogphi=None if elogphi is None else elogphi[where[batch.vocab]])

        n_threads = min(effective_n_threads(self.n_threads), -(-X.n_docs // chunk))
        with blas_limited():        # the kernel's small matrix products, one BLAS thread per worker
            map_threads(worker, range(n_threads), n_threads)
        total = out.sum(axis=1, keepdims=True)
        empty = total[:, 0] == 0
        out[empty] = self.weights_
        total[empty] = 1.0
        return out / total
