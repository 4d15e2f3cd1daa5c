"""Results a person can use from a nonparametric fit: component sizes, a
summary table, conversion to LDA, topic proportions of new documents and the
input of pyLDAvis.

An HDP or DP fit instantiates many components, most of them tiny. Every
estimator of ``bnpcore.hdp`` and ``bnpcore.mixture`` lists its components in
decreasing order of size (``topic_sizes_``) after each ``fit`` and
``partial_fit``, so that component ``k`` has one index everywhere: row ``k`` of
``topics_``, ``weights_`` and ``topic_sizes_``, column ``k`` of ``transform``,
``top_words(k)``, and, among the *used* components (expected size at least
``min_size``, by default one token or one document, the threshold the
estimators' own ``n_used``/``n_active_`` counts use), which are therefore the
first ``n_used``: row ``k`` of :meth:`summary`, column ``k`` of
:meth:`document_topics` (``transform`` restricted to the first ``n_used``
columns) and topic ``k`` of :meth:`to_lda` and :meth:`export_pyldavis`.
:meth:`prune` removes the others from the fitted model itself.

An estimator declares what its sizes count (``_size_unit``: "tokens" for topic
models, "documents" for mixtures) and computes them from its fitted state in
``_component_sizes()`` (a line or two each; see ``topic_sizes_``).
"""
import numpy as np

from bnpcore._validation import check_positive
from bnpcore.corpus import Corpus

__all__ = ["ResultsMixin", "Summary"]


class Summary(list):
    """The rows of :meth:`ResultsMixin.summary` (a list of dicts) that print as a table."""

    def __str__(self):
        if not self:
            return "(no components)"
        coherent = "coherence" in self[0]
        head = f"{'rank':>4} {'component':>9} {'size':>10} {'share':>6}" + (f" {'coher.':>7}" if coherent else "")
        lines = [head + "  top words"]
        for row in self:
            line = f"{row['rank']:>4} {row['component']:>9} {row['size']:>10.1f} {row['share']:>6.1%}"
            if coherent:
                line += f" {row['coherence']:>7.3f}"
            lines.append(line + "  " + " ".join(row["top_words"]))
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle):    # IPython shows the table
        printer.text(str(self))


class ResultsMixin:
    """Component sizes, summaries, LDA conversion and pyLDAvis export for the
    nonparametric estimators (see the module docstring).

    Subclasses set ``_size_unit`` and implement ``_component_sizes()``: the
    expected number of ``_size_unit`` of each component of ``topics_``, in its
    order.
    """

    _size_unit = "tokens"
    # Fitted attributes indexed by component (name -> component axis), and the
    # attribute, if the model has one, holding the weight of the components it
    # has not instantiated: what :meth:`prune` slices and where removed weight goes.
    _component_axes = {"topics_": 0, "weights_": 0}
    _remainder = None
    # keyword arguments of ``transform`` in export_pyldavis's fold-in: an estimator whose fold-in of a
    # whole corpus is slow sets a looser tolerance there (listed in export_pyldavis's docstring)
    _export_fold_in = {}

    def _component_sizes(self):
        raise NotImplementedError(f"{type(self).__name__} does not provide component sizes")

    @property
    def topic_sizes_(self):
        """Expected number of tokens (topic models) or documents (mixtures)
        assigned to each component of ``topics_``, ndarray of shape
        (n_components_,).

        Computed from the fitted state, per estimator:

        * ``hdp.DirectAssignmentGibbs``: tokens per topic in the final sample;
        * ``hdp.CollapsedVB``: E[n_k] (``expected_counts_``);
        * ``hdp.DirectAssignmentVB``, ``hdp.TruncationFreeSVI``, ``hdp.OnlineVB``:
          ``sum_w (lambda_kw - eta)``, the expected words of topic k, scaled to
          the corpus size the updates assume (``total_samples``);
        * ``mixture.TruncationFreeSVI``, ``mixture.StochasticVB``: ``u_k - 1``,
          the expected documents (scaled likewise);
        * ``mixture.ADF``, ``mixture.EP``: the soft cluster masses ``cluster_mass_``;
        * ``mixture.CollapsedGibbs``: documents per cluster in the final state
          (``cluster_sizes_``).
        """
        self._check_fitted()
        return np.asarray(self._component_sizes(), dtype=np.float64)

    def used_components(self, min_size=1.0):
        """Indices (into ``topics_``) of the components of expected size at least
        ``min_size``, largest first (ties in ``topics_`` order)."""
        min_size = check_positive(min_size, "min_size", allow_zero=True)
        sizes = self.topic_sizes_
        order = np.argsort(-sizes, kind="stable")
        return order[sizes[order] >= min_size]

    def _used(self, min_size):
        used = self.used_components(min_size)
        if used.size == 0:
            raise ValueError(f"{type(self).__name__} has no component of size >= {min_size} {self._size_unit} "
                             f"(largest: {self.topic_sizes_.max(initial=0.0):.3g}); lower min_size")
        return used

    def summary(self, n=10, corpus=None, *, n_words=10, min_size=1.0, measure="u_mass"):
        """The used components by decreasing size: a table to read or print.

        Parameters
        ----------
        n : int or None, default 10
            Rows (the ``n`` largest components); None for every used one.
        corpus : Corpus or iterable of lists of str, optional
            Reference documents for per-topic coherence
            (:func:`bnpcore.evaluation.coherence`); typically the training
            corpus. A component with a top word absent from ``corpus`` gets NaN.
        n_words : int, default 10
            Top words per component.
        min_size : float, default 1.0
            Components smaller than this (in ``_size_unit``) are not used.
        measure : {"u_mass", "c_npmi", "c_v"}, default "u_mass"
            Coherence measure, when ``corpus`` is given. ``u_mass`` counts
            co-occurrence in whole documents, so it needs no word order; the
            sliding windows of ``c_npmi`` and ``c_v`` read a ``Corpus`` (bags
            of words) in word-id order: give those token lists in reading order.

        Returns
        -------
        Summary
            A list of dicts, one per component, with ``rank`` (0 for the
            largest), ``component`` (its row of ``topics_``), ``size`` (see
            ``topic_sizes_``), ``share`` (its fraction of the total size of all
            components), ``weight`` (its ``weights_``), ``top_words`` and, with
            ``corpus``, ``coherence``. ``print`` shows it as a table.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"n must be a positive integer or None, got {n!r}")
        if isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or n_words < 1:
            raise ValueError(f"n_words must be a positive integer, got {n_words!r}")
        sizes = self.topic_sizes_
        used = self.used_components(min_size)[:n]
        total = sizes.sum()
        rows = Summary({"rank": i, "component": int(k), "size": float(sizes[k]),
                        "share": float(sizes[k] / total) if total > 0 else 0.0,
                        "weight": float(self.weights_[k]), "top_words": self.top_words(int(k), n_words)}
                       for i, k in enumerate(used))
        if corpus is not None and rows:
            for row, value in zip(rows, self._coherence(used, corpus, n_words, measure)):
                row["coherence"] = float(value)
        return rows

    def _coherence(self, used, corpus, n_words, measure):
        """Per-topic coherence of the components ``used``, NaN for those with a top
        word that never occurs in ``corpus`` (coherence is undefined there).
        Topics go to :func:`~bnpcore.evaluation.coherence` as words when the
        model and a ``Corpus`` have vocabularies (or ``corpus`` is token lists),
        else as word ids."""
        from bnpcore.evaluation import coherence
        top = np.argsort(-np.asarray(self.topics_)[used], axis=1, kind="stable")[:, :max(n_words, 2)]
        vocab = getattr(self, "vocabulary_", None)
        if isinstance(corpus, Corpus):
            if corpus.vocabulary is None:     # the same word ids
                vocab = None
            present = np.flatnonzero(np.asarray(corpus.matrix.sum(axis=0)).ravel())
            seen = {corpus.vocabulary[w] if vocab is not None else int(w) for w in present}
        else:
            corpus = [list(doc) for doc in corpus]     # read twice: here and by coherence
            seen = {w for doc in corpus for w in doc}
        topics = [[vocab[w] if vocab is not None else int(w) for w in row] for row in top]
        ok = np.array([all(w in seen for w in topic) for topic in topics])
        out = np.full(len(used), np.nan)
        if ok.any():
            out[ok] = coherence([t for t, good in zip(topics, ok) if good], corpus, measure=measure, per_topic=True)
        return out

    # -- pruning -------------------------------------------------------------------
    def prune(self, min_size=1.0):
        """Remove the components of expected size below ``min_size`` from the
        fitted model, in place; returns ``self``.

        The kept components stay in their order (``topics_`` row ``i`` of the
        pruned model is the ``i``-th kept row); every component-indexed fitted
        attribute (``topics_``, ``weights_``, ``doc_topic_``, sizes, ...) is cut
        to them, and ``n_components_`` follows. The weight of the removed
        components goes where the model keeps the weight of the components it
        has not instantiated (an HDP's new-topic mass ``beta_new_`` or
        ``rest_weight_``, a mixture's new-cluster weight ``weight_new_`` or the
        remaining stick); a model without one drops it, as a truncation does.
        ``doc_topic_`` rows are rescaled to their former sums.

        Training continues from a pruned model where the algorithm's state is
        its components: the online estimators (``partial_fit``: the removal is
        their own periodic prune, [TF] section 3), ``hdp.DirectAssignmentVB``
        (the prune move of Bryant & Sudderth 2012, weight to the rest cell) and
        ``mixture.ADF``/``EP`` (their streaming state). The samplers and
        ``hdp.CollapsedVB`` keep assignments or expected counts over every
        component: their pruned model is for use (``transform``, ``score``,
        ``summary``, ``save``), an interrupted fit of it can no longer be
        resumed, and ``mixture.CollapsedGibbs``'s ``score`` still averages the
        kept posterior samples (its ``labels_`` are -1 for documents of removed
        clusters); ``hdp.DirectAssignmentGibbs`` forgets ``heldout_loglik_``,
        which averaged samples of the unpruned model.

        Parameters
        ----------
        min_size : float, default 1.0
            In ``_size_unit`` (tokens for topic models, documents for
            mixtures; see ``topic_sizes_``). At least one component must
            reach it: a ``min_size`` above every component's size is a
            ``ValueError``.
        """
        self._check_fitted()
        keep = np.zeros(self.n_components_, dtype=bool)
        keep[self._used(min_size)] = True
        if not keep.all():
            prune_state = getattr(self, "_prune_state", None)    # models whose state is their components
            if prune_state is not None:
                prune_state(keep)
            else:
                self._prune_fitted(keep)
        return self

    def _prune_fitted(self, keep):
        """Cut the fitted attributes of ``_component_axes`` to the components
        ``keep`` (boolean mask) and move the removed weight to ``_remainder``."""
        removed = float(np.asarray(self.weights_, dtype=np.float64)[~keep].sum())
        doc_topic = getattr(self, "doc_topic_", None)
        for name, axis in self._component_axes.items():
            value = getattr(self, name, None)
            if value is not None:
                setattr(self, name, np.compress(keep, value, axis=axis))
        if self._remainder is not None:
            setattr(self, self._remainder, float(getattr(self, self._remainder)) + removed)
        if doc_topic is not None:
            kept, total = self.doc_topic_, doc_topic.sum(axis=1, keepdims=True)
            mass = kept.sum(axis=1, keepdims=True)
            empty = mass[:, 0] <= 0
            kept[empty] = self.weights_ / self.weights_.sum()
            mass[empty] = 1.0
            self.doc_topic_ = kept * (total / mass)
        self.n_components_ = int(keep.sum())
        self.__dict__.pop("_resume", None)      # assignments of an interrupted fit name removed components

    # -- handing the topics on --------------------------------------------------
    def _topic_prior(self):
        """eta_w, the Dirichlet prior of the topics per word, ndarray of shape (n_words,):
        the estimator's (learned ``eta_`` or fixed ``eta``) symmetric prior, or
        for the collapsed HDPs ``eta_tot * E[tau_w]`` (tau_w = 1/W unless learned)."""
        n_words = int(self.n_features_in_)
        eta = getattr(self, "eta_", None)
        eta = getattr(self, "eta", None) if eta is None else eta
        if eta is not None:
            return np.full(n_words, float(eta))
        eta_tot = getattr(self, "eta_tot_", None)
        eta_tot = float(self.eta_tot if eta_tot is None else eta_tot)
        tau = getattr(self, "tau_posterior_", None)
        return eta_tot * (np.full(n_words, 1.0 / n_words) if tau is None else tau / np.sum(tau))

    def _dirichlet_parameters(self):
        """lambda_k, the Dirichlet parameters of the topic-word posteriors (K, W):
        ``components_`` where the estimator keeps them; for the collapsed HDPs
        the posterior behind their predictive ``topics_`` = (n_kw + eta_w) /
        (n_k + eta_tot), that is ``topics_ * (n_k + eta_tot)``."""
        lam = getattr(self, "components_", None)
        if lam is not None:
            return np.asarray(lam, dtype=np.float64)
        return np.asarray(self.topics_) * (self.topic_sizes_ + self._topic_prior().sum())[:, None]

    def _document_concentration(self):
        """alpha of the document proportions pi_j ~ DP(alpha, beta) (HDPs), None for mixtures."""
        if self._size_unit != "tokens":
            return None
        alpha = getattr(self, "alpha_", None)
        return float(self.alpha if alpha is None else alpha)

    def to_lda(self, min_size=1.0, concentration=None):
        """A :class:`bnpcore.lda.StandardVB` holding the used components, ready to
        ``transform``, ``score`` and print topics without fitting.

        Topic i is component ``used_components(min_size)[i]``: its Dirichlet
        posterior lambda_i (``components_``, or ``topics_ * (n_k + eta_tot)``
        for the collapsed HDPs), so that
        ``topics_`` are the same distributions. The document prior is
        ``alpha_i = a * weights_[k_i]``: for an HDP ``a`` is its document
        concentration alpha (``pi_j ~ DP(alpha, beta)`` restricted to the used
        topics, the prior the HDP's own ``transform`` uses); a mixture has none
        (it is the ``a -> 0`` limit, one component per document) and uses
        ``a = concentration`` (default 1.0) with the weights renormalised over
        the used components. This is gensim's ``HdpModel.hdp_to_lda`` and
        tomotopy's ``HDPModel.convert_to_lda``.

        Parameters
        ----------
        min_size : float, default 1.0
        concentration : float, optional
            ``a`` above, overriding the HDP's alpha.

        Returns
        -------
        bnpcore.lda.StandardVB
            Fitted attributes ``components_``, ``topics_``, ``alpha_``, ``eta_``
            (the topic prior per word), ``n_components_``,
            ``n_features_in_``, ``vocabulary_`` and an empty ``history_``; it
            has no ``doc_topic_`` (it saw no training documents). Its
            ``random_state`` is this estimator's.
        """
        from bnpcore.lda import StandardVB
        used = self._used(min_size)
        lam = self._dirichlet_parameters()[used]
        weights = np.asarray(self.weights_, dtype=np.float64)[used]
        a = self._document_concentration()
        if a is None:       # a mixture
            a, weights = 1.0, weights / weights.sum()
        a = check_positive(a if concentration is None else concentration, "concentration")
        alpha = a * weights
        if not np.all(alpha > 0):
            raise ValueError("a used component has zero weight; its LDA prior would be 0 (raise min_size)")
        eta = self._topic_prior()
        lda = StandardVB(n_components=len(used), alpha=alpha, eta=eta, random_state=self.random_state)
        lda.alpha_, lda.eta_ = alpha, eta
        lda.components_ = np.ascontiguousarray(lam)
        lda.topics_ = lda.components_ / lda.components_.sum(axis=1, keepdims=True)
        lda.n_components_ = len(used)
        lda.n_features_in_ = int(self.n_features_in_)
        lda.vocabulary_ = getattr(self, "vocabulary_", None)
        lda.history_ = []
        return lda

    def document_topics(self, X, min_size=1.0):
        """Topic proportions (cluster responsibilities for mixtures) of the
        documents ``X``, over the used components only: ``transform(X)``
        restricted to the columns ``used_components(min_size)`` and renormalised
        (a row with no mass on them gets the used components' ``weights_``,
        renormalised).

        Returns
        -------
        ndarray of shape (n_docs, n_used), rows sum to 1
        """
        used = self._used(min_size)
        return self._restrict(np.asarray(self.transform(X)), used)

    def _restrict(self, theta, used):
        """Rows of ``theta`` on the columns ``used``, renormalised (the used
        components' weights for a row without mass on them)."""
        theta = theta[:, used]
        total = theta.sum(axis=1, keepdims=True)
        empty = total[:, 0] <= 0
        weights = np.asarray(self.weights_, dtype=np.float64)[used]
        theta[empty] = weights / weights.sum()
        total[empty] = 1.0
        return theta / total

    def export_pyldavis(self, X, min_size=1.0):
        """The keyword arguments of ``pyLDAvis.prepare`` for the used components
        on the documents ``X``: ``pyLDAvis.prepare(**est.export_pyldavis(X))``.

        Returns
        -------
        dict
            ``topic_term_dists`` (n_used, n_words), rows of ``topics_``;
            ``doc_topic_dists`` (n_docs, n_used), :meth:`document_topics` (see
            Notes for the online estimators), or,
            when ``X`` is the corpus the model was fitted on and the fit kept
            ``doc_topic_``, its columns of the used components renormalised (the
            fitted proportions: no fold-in, which on a large corpus costs about
            as much as an iteration of the fit);
            ``doc_lengths`` (n_docs,), tokens per document; ``vocab``, the
            words (``vocabulary_``, or the word ids as strings);
            ``term_frequency`` (n_words,), tokens of each word in ``X``. Rows of
            the two distributions sum to 1.

        Notes
        -----
        pyLDAvis reads ``doc_topic_dists`` only through the topic frequencies
        ``sum_j doc_lengths[j] * doc_topic_dists[j]`` (its circle areas and
        red bars), but these are sums of per-document proportions, which
        the global statistics of a stochastic fit are not: ``topic_sizes_``
        of the online estimators is a running average over minibatches.
        So the proportions come, per estimator, from:

        * the fitted ``doc_topic_`` on the training corpus (same
          ``Corpus.fingerprint``) for the estimators that keep it
          (``hdp.DirectAssignmentGibbs``, ``hdp.PartiallyCollapsedGibbs``,
          ``hdp.CollapsedVB``);
        * ``transform`` otherwise, and always for the online estimators,
          which keep no proportions of their training stream (D x K numbers
          that would grow with the stream): ``hdp.TruncationFreeSVI`` by its
          CVB0 fold-in and ``hdp.OnlineVB`` by its document-level E-step
          (chunks of documents on ``n_threads`` threads), both with
          ``tol=1e-3`` instead of 1e-4 (the default of the former's
          ``transform``, the latter's ``doc_tol``), and
          ``hdp.DirectAssignmentVB`` by its E-step (E[log phi] computed once
          for the vocabulary; its ``estep_tol`` is 1e-3 already).

        So ``doc_topic_dists`` is :meth:`document_topics` except for the
        tolerance of those two. On 50,000 short texts the looser tolerance
        cut their fold-in's CPU time by about a quarter and moved the topic
        frequencies pyLDAvis shows by 0.03% of the tokens (about 100 tokens
        of a topic at most) and each document's proportions by 0.002 on
        average (L1 distance) (``benchmarks/results/bench_user_path.txt``).
        """
        corpus = self._check_input(X)
        vocab = getattr(self, "vocabulary_", None)
        used = self._used(min_size)
        fitted = getattr(self, "doc_topic_", None)
        if fitted is not None and getattr(self, "_train_fingerprint", None) == corpus.fingerprint():
            theta = self._restrict(np.array(fitted, dtype=np.float64), used)
        else:
            theta = self._restrict(np.asarray(self.transform(corpus, **self._export_fold_in)), used)
        return {"topic_term_dists": np.asarray(self.topics_)[used],
                "doc_topic_dists": theta,
                "doc_lengths": np.asarray(corpus.doc_lengths, dtype=np.int64),
                "vocab": list(vocab) if vocab is not None else [str(w) for w in range(corpus.n_words)],
                "term_frequency": np.asarray(corpus.matrix.sum(axis=0), dtype=np.int64).ravel()}
