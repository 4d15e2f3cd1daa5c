"""Held-out metrics of the papers bnpcore implements (tags as in ``help(bnpcore)``).

All functions take fitted point estimates or samples as plain arrays, so any
estimator (or a peer library's output) is scored by the same code. The loops
over documents run in the compiled kernels of ``bnpcore.kernels._evaluation``
(parallel over documents, ``n_threads`` as everywhere in bnpcore: None means
``OMP_NUM_THREADS`` or all cores); per-document results are summed in a fixed
order, so every value is the same for any number of threads.

=============================  ==========================================  ====================
function                       metric                                      paper
=============================  ==========================================  ====================
token_log_likelihood           per-word log-lik. of held-out tokens        [HYB] (30), [CVHDP] (16)
perplexity                     exp(-token_log_likelihood)                  [HYB] (30)
PredictiveAverage              the same, probabilities averaged over       [HYB] (31), [CVHDP] (17)
                               samples
infer_doc_topic                document proportions with fixed topics      [SM] section 4
document_completion            per-word log-lik. of held-out tokens        [SM] section 4
                               after inferring proportions on the rest
mixture_log_likelihood         log p(document) under a mixture of          [TF] S.3
                               multinomials (point estimates)
dp_heldout_log_likelihood      its per-word total over held-out documents  [TF] S.3
hdp_heldout_log_likelihood     per-word log-lik. of held-out documents     [TF] S.3
                               under an HDP, by importance sampling
mixture_log_predictive         log p(document) under a mixture of          [NRM] section 4
                               Dirichlet-multinomials
=============================  ==========================================  ====================
"""
import numpy as np
import scipy.sparse

from bnpcore._validation import check_int, check_positive, check_random_state, effective_n_threads, spawn_generators
from bnpcore.corpus import as_corpus
from bnpcore.kernels import _evaluation
from bnpcore.kernels._evaluation import hdp_heldout

__all__ = ["token_log_likelihood", "perplexity", "PredictiveAverage", "infer_doc_topic",
           "document_completion", "mixture_log_likelihood", "dp_heldout_log_likelihood",
           "mixture_log_predictive", "hdp_heldout_log_likelihood", "coherence"]


# -- argument checks ------------------------------------------------------------

def _probabilities(values, name, ndim):
    """Contiguous float64 copy of a finite, non-negative array of the given rank."""
    arr = np.ascontiguousarray(values, dtype=np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if arr.min() < 0:
        raise ValueError(f"{name} must be non-negative, found {arr.min()}")
    return arr


def _log_weights(log_weights):
    lw = np.ascontiguousarray(log_weights, dtype=np.float64)
    if lw.ndim != 1 or lw.size == 0:
        raise ValueError(f"log_weights must be a non-empty 1-d array, got shape {lw.shape}")
    if np.any(np.isnan(lw)) or np.any(lw == np.inf):
        raise ValueError("log_weights must not contain NaN or +inf")
    if np.all(lw == -np.inf):
        raise ValueError("every component has weight 0")
    return lw


def _topics_and_corpus(topic_word, docs, name="topic_word"):
    """(topic_word as float64, its word-major transpose, docs as a Corpus over the same words)."""
    topic_word = _probabilities(topic_word, name, 2)
    docs = as_corpus(docs)
    if docs.n_words != topic_word.shape[1]:
        raise ValueError(f"{name} has {topic_word.shape[1]} words, the corpus {docs.n_words}")
    return topic_word, np.ascontiguousarray(topic_word.T), docs


def _doc_topic(doc_topic, topic_word, docs):
    doc_topic = _probabilities(doc_topic, "doc_topic", 2)
    if doc_topic.shape != (docs.n_docs, topic_word.shape[0]):
        raise ValueError(f"doc_topic has shape {doc_topic.shape}, expected (n_docs, n_topics) = "
                         f"({docs.n_docs}, {topic_word.shape[0]}) from the corpus and topic_word")
    return doc_topic


def _n_tokens(docs, what):
    n = docs.n_tokens
    if n == 0:
        raise ValueError(f"the {what} corpus has no tokens")
    return n


# -- per-token likelihood of held-out tokens of the training documents -----------

def token_log_likelihood(doc_topic, topic_word, heldout, n_threads=None):
    """Per-word log-likelihood of held-out tokens under per-document mixtures.

    ``sum_{held-out (j, w)} c_jw log sum_k doc_topic[j, k] topic_word[k, w]``,
    divided by the number of held-out tokens ([HYB] eq 30 with the predictive
    doc_topic and topic_word; [CVHDP] eq 16). Perplexity is ``exp(-result)``.

    Parameters
    ----------
    doc_topic : ndarray of shape (n_docs, n_topics)
        Predictive topic proportions of each document (rows sum to at most 1;
        [CVHDP] drops the new-topic mass).
    topic_word : ndarray of shape (n_topics, n_words)
        Predictive word distributions (rows sum to 1).
    heldout : Corpus
        Held-out tokens of the same documents (empty documents allowed).
    n_threads : int, optional

    Returns
    -------
    float
        -inf if a held-out token has probability 0.
    """
    topic_word, word_topic, heldout = _topics_and_corpus(topic_word, heldout)
    doc_topic = _doc_topic(doc_topic, topic_word, heldout)
    n = _n_tokens(heldout, "held-out")
    per_doc = np.empty(heldout.n_docs)
    _evaluation.doc_token_log_likelihood(doc_topic, word_topic, heldout.indptr, heldout.indices,
                                         heldout.counts, per_doc, effective_n_threads(n_threads))
    return float(per_doc.sum()) / n


def perplexity(doc_topic, topic_word, heldout, n_threads=None):
    """``exp(-token_log_likelihood(doc_topic, topic_word, heldout))`` ([HYB] eq 30).

    A model that predicts every word with probability 1/W has perplexity W.
    """
    return float(np.exp(-token_log_likelihood(doc_topic, topic_word, heldout, n_threads)))


class PredictiveAverage:
    """Online average of per-token predictive probabilities over samples
    ([HYB] eq 31, [CVHDP] eq 17): ``log pbar_i = log (1/S) sum_s p_i^s``.

    Keeps one running sum per held-out (document, word) pair.

    Parameters
    ----------
    heldout : Corpus
    n_threads : int, optional

    Examples
    --------
    >>> avg = PredictiveAverage(heldout)            # doctest: +SKIP
    >>> for sample in samples:                     # doctest: +SKIP
    ...     avg.add(doc_topic_s, topic_word_s)
    >>> avg.log_likelihood()                        # per held-out word  # doctest: +SKIP
    """

    def __init__(self, heldout, n_threads=None):
        self.heldout = as_corpus(heldout)
        self.sum_p = np.zeros(self.heldout.nnz)
        self.n_samples = 0
        self.n_threads = n_threads

    def add(self, doc_topic, topic_word):
        """Add one sample's predictive ``doc_topic`` (n_docs, K) and ``topic_word`` (K, W)."""
        topic_word, word_topic, heldout = _topics_and_corpus(topic_word, self.heldout)
        doc_topic = _doc_topic(doc_topic, topic_word, heldout)
        _evaluation.pair_probabilities(doc_topic, word_topic, heldout.indptr, heldout.indices, self.sum_p,
                                       True, effective_n_threads(self.n_threads))
        self.n_samples += 1
        return self

    def log_likelihood(self):
        """Per-word log-likelihood of the averaged predictive probabilities."""
        if self.n_samples == 0:
            raise ValueError("no samples were added")
        n = _n_tokens(self.heldout, "held-out")
        with np.errstate(divide="ignore"):
            return float(np.dot(self.heldout.counts, np.log(self.sum_p / self.n_samples))) / n

    def perplexity(self):
        """``exp(-log_likelihood())``."""
        return float(np.exp(-self.log_likelihood()))


# -- document completion ------------------------------------------------------------

def infer_doc_topic(topic_word, alpha, docs, max_iter=100, tol=1e-4, n_threads=None):
    """Topic proportions of documents given fixed topics and a Dirichlet prior.

    Mean-field variational inference of LDA with the topics held fixed: per
    document, ``r_wk ∝ topic_word[k, w] exp(psi(gamma_k))`` and
    ``gamma_k = alpha_k + sum_w c_w r_wk``, iterated from
    ``gamma_k = alpha_k + N_j / K`` until the mean absolute change of gamma is
    below ``tol`` or ``max_iter`` iterations (the E-step of [SM] eqs. 3-4 with
    one topic per token cell, log topic_word standing for E[log phi]). Each iteration is a coordinate-ascent
    step, so it never lowers the document's evidence lower bound. Returns the
    posterior mean ``gamma / gamma.sum()``; an empty document gets the prior
    mean ``alpha / alpha.sum()``.

    Parameters
    ----------
    topic_word : ndarray of shape (n_topics, n_words)
        Fixed topics phi (rows normally sum to 1). To keep a "rest" cell
        ([SM] pairs it with the prior mean 1/W), add a row ``1/W`` with its prior.
    alpha : float or ndarray of shape (n_topics,)
        Dirichlet prior of the proportions, > 0 (e.g. ``alpha * beta*`` for [SM]).
    docs : Corpus
        The observed part of each document.
    max_iter : int, default 100
    tol : float, default 1e-4
    n_threads : int, optional

    Returns
    -------
    ndarray of shape (n_docs, n_topics)
        Rows sum to 1.
    """
    topic_word, word_topic, docs = _topics_and_corpus(topic_word, docs)
    n_topics = topic_word.shape[0]
    alpha = np.asarray(alpha, dtype=np.float64)
    alpha = np.full(n_topics, float(alpha)) if alpha.ndim == 0 else np.ascontiguousarray(alpha)
    if alpha.shape != (n_topics,):
        raise ValueError(f"alpha must be a number or have shape ({n_topics},), got {alpha.shape}")
    if not np.all(np.isfinite(alpha)) or not np.all(alpha > 0):
        raise ValueError("alpha must be positive and finite")
    max_iter = check_int(max_iter, "max_iter", minimum=0)
    tol = check_positive(tol, "tol", allow_zero=True)
    threads = effective_n_threads(n_threads)
    gamma = np.empty((docs.n_docs, n_topics))
    n_iter = np.empty(docs.n_docs, dtype=np.int64)
    _evaluation.infer_doc_topic(word_topic, alpha, docs.indptr, docs.indices, docs.counts, max_iter, tol,
                                gamma, n_iter, threads)
    return gamma / gamma.sum(axis=1, keepdims=True)


def document_completion(topic_word, alpha, observed, heldout, max_iter=100, tol=1e-4, n_threads=None):
    """Document-completion per-word log-likelihood ([SM] section 4).

    Infers each test document's proportions from its observed tokens with
    :func:`infer_doc_topic` (fixed ``topic_word``, Dirichlet ``alpha``), then
    scores the held-out tokens:
    ``sum_j sum_{w in heldout_j} log sum_k pibar_jk topic_word[k, w] / sum_j |heldout_j|``.

    Parameters
    ----------
    topic_word : ndarray of shape (n_topics, n_words)
    alpha : float or ndarray of shape (n_topics,)
    observed, heldout : Corpus
        The two parts of the same test documents, e.g.
        ``docs.split_tokens(0.2, random_state)`` (the 80/20 split of [SM]).
    max_iter, tol, n_threads
        As in :func:`infer_doc_topic`.

    Returns
    -------
    float
    """
    observed, heldout = as_corpus(observed), as_corpus(heldout)
    if observed.shape != heldout.shape:
        raise ValueError(f"observed {observed.shape} and heldout {heldout.shape} must be parts of the "
                         "same documents over the same words")
    pibar = infer_doc_topic(topic_word, alpha, observed, max_iter=max_iter, tol=tol, n_threads=n_threads)
    return token_log_likelihood(pibar, topic_word, heldout, n_threads)


# -- whole held-out documents under mixtures -----------------------------------------

def mixture_log_likelihood(log_weights, topic_word, docs, multinomial_coef=False, n_threads=None):
    """Log-probability of each document under a finite mixture of multinomials.

    ``log p(x_d) = [log MultCoef(c_d)] + logsumexp_k (log_weights[k] + sum_w c_dw log topic_word[k, w])``
    ([TF] supplement S.3 for DP mixtures, with the variational means).

    Parameters
    ----------
    log_weights : ndarray of shape (n_components,)
        Log mixture weights, used as given (not renormalised); -inf for weight 0.
    topic_word : ndarray of shape (n_components, n_words)
        Component word distributions.
    docs : Corpus
    multinomial_coef : bool, default False
        False (as in [TF] S.3): the probability of the token sequence.
        True: of the count vector, adding
        ``log MultCoef(c_d) = lgamma(N_d + 1) - sum_w lgamma(c_dw + 1)``.
    n_threads : int, optional

    Returns
    -------
    ndarray of shape (n_docs,)
    """
    log_weights = _log_weights(log_weights)
    topic_word, _, docs = _topics_and_corpus(topic_word, docs)
    if topic_word.shape[0] != log_weights.shape[0]:
        raise ValueError(f"topic_word has {topic_word.shape[0]} components, log_weights {log_weights.shape[0]}")
    with np.errstate(divide="ignore"):
        log_topics = np.log(topic_word)
    out = np.empty(docs.n_docs)
    _evaluation.mixture_doc_log_likelihood(log_weights, log_topics, np.zeros(len(log_weights)), docs.indptr,
                                           docs.indices, docs.counts, False, bool(multinomial_coef), out,
                                           effective_n_threads(n_threads))
    return out


def dp_heldout_log_likelihood(weights, topic_word, docs, n_threads=None):
    """[TF] S.3 held-out per-word log-likelihood of a DP mixture of multinomials.

    ``sum_j logsumexp_k [log pihat_k + sum_w c_jw log phihat_kw] / sum_j N_j``
    over the held-out documents, with the instantiated components only: the
    leftover stick mass ``1 - sum_k pihat_k`` is dropped, not renormalised
    (S.3 takes E[pi] of the instantiated components). Token-sequence probabilities (no multinomial
    coefficient), as in the paper.

    Parameters
    ----------
    weights : ndarray of shape (n_components,)
        pihat_k = E[pi_k] >= 0, summing to at most 1.
    topic_word : ndarray of shape (n_components, n_words)
        phihat_k = lambda_k / Lambda_k.
    docs : Corpus
        Held-out documents.
    n_threads : int, optional

    Returns
    -------
    float
    """
    weights = _probabilities(weights, "weights", 1)
    if weights.sum() > 1 + 1e-9:
        raise ValueError(f"weights must sum to at most 1 (the leftover mass is dropped), got {weights.sum()}")
    docs = as_corpus(docs)
    n = _n_tokens(docs, "held-out")
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights)
    return float(mixture_log_likelihood(log_weights, topic_word, docs, False, n_threads).sum()) / n


def mixture_log_predictive(log_weights, lam, docs, multinomial_coef=True, n_threads=None):
    """Log predictive probability of each document under a mixture of
    Dirichlet-multinomials ([NRM] section 4, the predictive of eq. 23).

    ``log p(x_d) = [log MultCoef(c_d)] + logsumexp_k (log_weights[k] + log DM(c_d | lam[k]))``
    where ``log DM`` is the Dirichlet-multinomial probability of the token sequence:
    ``lgamma(L_k) - lgamma(L_k + N_d) + sum_w [lgamma(lam_kw + c_dw) - lgamma(lam_kw)]``.

    Parameters
    ----------
    log_weights : ndarray of shape (n_components,)
        Log mixture weights (need not be normalised: pass what the model defines).
    lam : ndarray of shape (n_components, n_words)
        Positive Dirichlet parameters of the components (a prior-only "new
        cluster" component is just a row equal to the prior).
    docs : Corpus
        Held-out documents.
    multinomial_coef : bool, default True
        True (the default: [NRM] does not define its Table 1 metric, and only
        this reading matches the scale of its totals): the probability of the
        count vector, i.e. including
        ``log MultCoef(c_d) = lgamma(N_d + 1) - sum_w lgamma(c_dw + 1)``.
        False: the probability of the token sequence.
    n_threads : int, optional

    Returns
    -------
    ndarray of shape (n_docs,)
    """
    docs = as_corpus(docs)
    log_weights = _log_weights(log_weights)
    lam = np.ascontiguousarray(lam, dtype=np.float64)
    if lam.ndim != 2 or lam.shape != (log_weights.shape[0], docs.n_words) or not np.all(lam > 0) \
            or not np.all(np.isfinite(lam)):
        raise ValueError(f"lam must be a positive finite array of shape ({log_weights.shape[0]}, {docs.n_words})")
    out = np.empty(docs.n_docs)
    _evaluation.mixture_doc_log_likelihood(log_weights, lam, lam.sum(axis=1), docs.indptr, docs.indices,
                                           docs.counts, True, bool(multinomial_coef), out,
                                           effective_n_threads(n_threads))
    return out


# -- [TF] S.3: HDP held-out likelihood by importance sampling ------------------

_IS_CHUNK = 4   # documents per random stream: results do not depend on the number of threads


def hdp_heldout_log_likelihood(topics, weights, alpha, docs, burnin=50, n_samples=1000, random_state=None,
                               n_threads=None, per_document=False, defensive=0.0):
    """[TF] S.3 held-out per-word log-likelihood of an HDP topic model.

    The fitted HDP is reduced to LDA with topics ``phihat`` and document prior
    Dirichlet(alpha * pihat) over the instantiated topics (the leftover stick
    mass is dropped, as in S.3), and each document's ``log p(x_j | phihat, pihat)``
    is estimated by importance sampling ([TF] S.3; Griffiths &
    Steyvers 2004, Wallach et al. 2009): ``burnin`` collapsed Gibbs sweeps on
    the topic assignments with the topics fixed build the proposal
    ``q(pi) = Dirichlet(alpha pihat + n)``, from which ``n_samples`` draws are
    weighted. The estimate is consistent but biased low in log space; compare
    models only under the same ``burnin`` and ``n_samples``.

    The weights grow like ``pi_k^-n_k`` near ``pi_k = 0``, so their variance
    is infinite when some ``alpha pihat_k < n_k`` (small concentrations, the
    usual case): the estimate then converges slowly and erratically. A
    defensive mixture proposal (Hesterberg 1995),
    ``defensive * Dir(alpha pihat) + (1 - defensive) * Dir(alpha pihat + n)``,
    bounds every weight by ``1 / defensive`` and restores finite variance at
    the price of at most ``1 / (1 - defensive)`` times the variance where the
    paper's proposal was already good.

    Parameters
    ----------
    topics : ndarray of shape (n_topics, n_words)
        phihat, rows sum to 1.
    weights : ndarray of shape (n_topics,)
        pihat = E[beta], non-negative, summing to at most 1.
    alpha : float
        Document-level concentration.
    docs : Corpus
        Held-out documents.
    burnin : int, default 50
    n_samples : int, default 1000
        Importance samples R per document.
    random_state : int, Generator or None
        Seeds one random stream per chunk of documents.
    n_threads : int, optional
    per_document : bool, default False
        Return the array of per-document log-likelihoods instead.
    defensive : float in [0, 1), default 0.0
        Weight of the prior in the proposal mixture; 0 is [TF] S.3's
        estimator (the default, for comparability with the paper).

    Returns
    -------
    float (per held-out word) or ndarray of shape (n_docs,)
    """
    docs = as_corpus(docs)
    topics = np.asarray(topics, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    alpha = check_positive(alpha, "alpha")
    check_int(burnin, "burnin", minimum=0)
    check_int(n_samples, "n_samples", minimum=1)
    if topics.ndim != 2 or topics.shape[1] != docs.n_words or weights.shape != (topics.shape[0],):
        raise ValueError(f"topics {topics.shape} and weights {weights.shape} do not match "
                         f"{docs.n_words} words")
    if topics.shape[0] == 0:
        raise ValueError("the model has no topics")
    if not (np.all(np.isfinite(topics)) and np.all(topics >= 0) and np.all(weights > 0)):
        raise ValueError("topics must be non-negative and weights positive")
    if not 0.0 <= defensive < 1.0:
        raise ValueError(f"defensive must be in [0, 1), got {defensive!r}")
    topics = np.ascontiguousarray(topics, dtype=np.float64)
    prior = np.ascontiguousarray(alpha * weights, dtype=np.float64)
    generators = spawn_generators(check_random_state(random_state), (docs.n_docs + _IS_CHUNK - 1) // _IS_CHUNK)
    loglik = np.empty(docs.n_docs)
    hdp_heldout(docs.indptr, docs.indices, docs.counts, topics, prior, int(burnin), int(n_samples), float(defensive),
                generators, _IS_CHUNK, loglik, effective_n_threads(n_threads))
    if per_document:
        return loglik
    if docs.n_tokens == 0:
        raise ValueError("the held-out documents have no tokens")
    return float(loglik.sum() / docs.n_tokens)


# -- topic coherence -------------------------------------------------------------

# measure -> (probability estimate, default sliding window; None: whole documents)
_COHERENCE = {"u_mass": None, "c_npmi": 10, "c_v": 110}
_COHERENCE_EPS = 1e-12   # added to joint probabilities inside the logarithms
_WINDOW_CHUNK = 1 << 22  # (word, window) entries per block of the presence matrix


def coherence(model_or_topics, corpus, measure="c_v", topn=10, window_size=None, exact_windows=False,
              per_topic=False):
    """Topic coherence: how often the top words of each topic occur together
    in a reference corpus (Röder, Both & Hinneburg, "Exploring the space of
    topic coherence measures", WSDM 2015; the measures and defaults of gensim's
    ``CoherenceModel``).

    Let ``W = (w_1, ..., w_n)`` be a topic's ``topn`` most probable words,
    most probable first. Probabilities are fractions of *windows*: for
    ``u_mass`` a window is a whole document (Mimno et al. 2011); for ``c_npmi``
    and ``c_v`` the windows are the ``window_size`` consecutive tokens starting
    at each position of a document (a document shorter than the window is one
    window). ``P(a)`` is the fraction of windows holding ``a``, ``P(a, b)`` of
    those holding both (``P(a, a) = P(a)``), and with ``eps = 1e-12``::

        NPMI(a, b) = log((P(a, b) + eps) / (P(a) P(b))) / -log(P(a, b) + eps)

    * ``u_mass``: mean over ``i > j`` of ``log((P(w_i, w_j) + eps) / P(w_j))``.
    * ``c_npmi``: mean of ``NPMI(w_i, w_j)`` over the pairs ``i != j``.
    * ``c_v``: mean over ``i`` of the cosine between the vectors
      ``v(w_i) = (NPMI(w_i, w_k))_k`` and ``v(W) = sum_l v(w_l)``.

    The coherence of a model is the mean over its topics.

    Bags of words have no word order, and ``c_npmi``/``c_v`` need one: a
    :class:`Corpus` is read as each document's tokens in word-id order (word
    0 repeated its count, then word 1, ...). Only ``u_mass`` and windows at
    least as long as every document are free of that arbitrary order (a
    window then holds the whole document); for faithful sliding windows pass
    the token lists of the texts in reading order.
    The same numbers come from gensim's ``CoherenceModel`` given, as
    ``texts``, each bag expanded in that order.

    Parameters
    ----------
    model_or_topics : fitted topic model, or sequence of topics
        A model's topics are its rows of ``get_topics()``, words from its
        ``vocabulary_``; or topics given as sequences of words (str, looked up
        in the corpus's vocabulary) or of word ids, most probable first.
    corpus : Corpus, or iterable of lists of str
        The reference documents: a corpus (bags of words, see above) or
        tokenized texts in reading order.
    measure : {"c_v", "c_npmi", "u_mass"}, default "c_v"
    topn : int, default 10
        Words per topic taken from a model (topics given as words are used
        whole).
    window_size : int, optional
        Sliding window of ``c_v`` (default 110) and ``c_npmi`` (default 10);
        not used by ``u_mass``.
    exact_windows : bool, default False
        How a word repeated within a window is counted. gensim (4.x) updates
        the window incrementally and marks a word absent as soon as one copy
        leaves, even when another copy is still inside, until a copy enters
        again; the default follows that rule, so that values compare with
        gensim's and with published numbers computed by it. True counts a
        window as holding a word while any copy is inside (the boolean sliding
        window as Röder et al. define it).
    per_topic : bool, default False
        Return the coherence of every topic instead of their mean.

    Returns
    -------
    float, or ndarray of shape (n_topics,)

    Raises
    ------
    ValueError
        An unknown measure; a topic word missing from the reference corpus
        (its probability would be 0); topics as words with a corpus without
        vocabulary; fewer than two words in a topic.

    Examples
    --------
    >>> from bnpcore.datasets import load_kos
    >>> kos = load_kos()
    >>> coherence([["bush", "kerry", "poll"], ["iraq", "war", "troops"]], kos,  # doctest: +SKIP
    ...           measure="u_mass")
    """
    if measure not in _COHERENCE:
        raise ValueError(f"measure must be one of {sorted(_COHERENCE)}, got {measure!r}")
    if measure == "u_mass":
        window_size = None
    else:
        window_size = _COHERENCE[measure] if window_size is None else check_int(window_size, "window_size")
    topics = _topic_words(model_or_topics, check_int(topn, "topn", minimum=2))
    relevant, tokens, token_ptr = _reference_windows(topics, corpus)
    ids = [[relevant[w] for w in topic] for topic in topics]
    occurrences, joint, n_windows = _cooccurrence(tokens, token_ptr, len(relevant), window_size, exact_windows)
    missing = [w for w, r in relevant.items() if occurrences[r] == 0]
    if missing:
        raise ValueError(f"topic word {missing[0]!r} does not occur in the reference corpus")
    p, pj = occurrences / n_windows, joint / n_windows
    scores = np.array([_topic_coherence(measure, p[t], pj[np.ix_(t, t)]) for t in ids])
    return scores if per_topic else float(scores.mean())


def _topic_coherence(measure, p, pj):
    """One topic's coherence from its words' probabilities p (n,) and joint
    probabilities pj (n, n), words in topic order."""
    n = len(p)
    if measure == "u_mass":
        later, earlier = np.tril_indices(n, -1)
        return float(np.mean(np.log((pj[later, earlier] + _COHERENCE_EPS) / p[earlier])))
    joint = pj + _COHERENCE_EPS
    npmi = np.log(joint / np.outer(p, p)) / -np.log(joint)
    if measure == "c_npmi":
        return float(npmi[~np.eye(n, dtype=bool)].mean())
    whole = npmi.sum(axis=0)
    return float(np.mean(npmi @ whole / (np.linalg.norm(npmi, axis=1) * np.linalg.norm(whole))))


def _topic_words(model_or_topics, topn):
    """Topics as lists of words (str) or word ids (int), most probable first."""
    if hasattr(model_or_topics, "get_topics"):
        topic_word = np.asarray(model_or_topics.get_topics())
        vocabulary = getattr(model_or_topics, "vocabulary_", None)
        order = np.argsort(-topic_word, axis=1, kind="stable")[:, :topn]
        return [[vocabulary[w] if vocabulary is not None else int(w) for w in row] for row in order]
    topics = []
    for k, topic in enumerate(model_or_topics):
        if isinstance(topic, str):
            raise TypeError(f"topic {k} is a string; give each topic as a list of words")
        topic = [w if isinstance(w, str) else _word_id(w, k) for w in topic]
        if len(topic) < 2:
            raise ValueError(f"topic {k} has {len(topic)} words; coherence needs at least 2")
        topics.append(topic)
    if not topics:
        raise ValueError("no topics")
    return topics


def _word_id(w, k):
    if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, np.integer)):
        raise TypeError(f"topic {k}: words must be str or word ids, got {type(w).__name__}")
    return int(w)


def _reference_windows(topics, corpus):
    """(relevant, tokens, token_ptr): ``relevant`` maps each topic word to
    0..R-1; ``tokens`` (int64) holds every document's tokens in order as their
    relevant index (-1 for other words), document j at ``token_ptr[j]`` to
    ``token_ptr[j + 1]``."""
    relevant = {}
    for topic in topics:
        for w in topic:
            relevant.setdefault(w, len(relevant))
    texts = isinstance(corpus, (list, tuple)) and any(
        isinstance(doc, str) or (len(doc) > 0 and isinstance(doc[0], str)) for doc in corpus)
    if texts:
        if any(not isinstance(w, str) for w in relevant):
            raise ValueError("topics given as word ids need a Corpus, not token lists")
        for j, doc in enumerate(corpus):
            if isinstance(doc, str):
                raise TypeError(f"document {j} is a string; give each document as a list of tokens")
        lengths = np.fromiter((len(doc) for doc in corpus), dtype=np.int64, count=len(corpus))
        get = relevant.get
        tokens = np.fromiter((get(t, -1) for doc in corpus for t in doc), dtype=np.int64, count=int(lengths.sum()))
        return relevant, tokens, np.concatenate([[0], np.cumsum(lengths)])
    corpus = as_corpus(corpus)
    key = np.full(corpus.n_words, -1, dtype=np.int64)
    index = {w: i for i, w in enumerate(corpus.vocabulary or ())}
    if corpus.vocabulary is None and any(isinstance(w, str) for w in relevant):
        raise ValueError("topics are words but the corpus has no vocabulary")
    for w, r in relevant.items():
        i = index.get(w) if isinstance(w, str) else w
        if i is None:
            raise ValueError(f"topic word {w!r} is not in the corpus's vocabulary")
        if not 0 <= i < corpus.n_words:
            raise ValueError(f"word id {i} is outside the corpus's {corpus.n_words} words")
        key[i] = r
    word_ids, token_ptr = corpus.tokens()
    return relevant, key[word_ids], np.asarray(token_ptr, dtype=np.int64)


def _cooccurrence(tokens, token_ptr, n_relevant, window_size, exact_windows=False):
    """(occurrences (R,), joint (R, R), n_windows): windows holding each
    relevant word and each pair (the diagonal repeats occurrences), over the
    documents' sliding windows of ``window_size`` tokens (None: whole
    documents); ``tokens`` and ``token_ptr`` as :func:`_reference_windows`
    gives them.

    A document of n tokens has ``max(n - width + 1, 1)`` windows, ``width =
    min(window_size, n)`` (a document shorter than the window, an empty one
    too, is one window), numbered after those of the documents before it.
    The token at position p enters at window ``max(p - width + 1, 0)`` and
    leaves at window ``p + 1``; a word is in the windows of the union of its
    copies' presence intervals (:func:`_presence_intervals`), and ``joint =
    P P^T`` for the 0/1 presence matrix P (words x windows), built in blocks
    of windows holding at most ``_WINDOW_CHUNK`` entries each.
    """
    lengths = np.diff(token_ptr)
    width = lengths if window_size is None else np.minimum(window_size, lengths)
    n_win = lengths - width + 1                       # windows of each document
    first_window = np.concatenate([[0], np.cumsum(n_win)])
    n_windows = int(first_window[-1])
    word, start, stop = _presence_intervals(tokens, token_ptr, width, n_win, first_window, exact_windows)
    joint = np.zeros((n_relevant, n_relevant))
    if word.size == 0:
        return np.zeros(n_relevant), joint, n_windows
    # entries (word, window) per window, to cut the windows into blocks of bounded size
    cover = np.zeros(n_windows + 1, dtype=np.int64)
    np.add.at(cover, start, 1)
    np.add.at(cover, stop, -1)
    entries = np.cumsum(np.cumsum(cover[:-1]))
    cuts = np.searchsorted(entries, np.arange(_WINDOW_CHUNK, int(entries[-1]), _WINDOW_CHUNK), side="left")
    bounds = np.unique(np.concatenate([[0], cuts + 1, [n_windows]]))
    for t0, t1 in zip(bounds[:-1], bounds[1:]):
        m = (start < t1) & (stop > t0)
        lo, hi = np.maximum(start[m], t0), np.minimum(stop[m], t1)
        size = hi - lo
        offsets = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
        presence = scipy.sparse.csr_matrix((np.ones(offsets.size), (np.repeat(word[m], size),
                                            np.repeat(lo - t0, size) + offsets)), shape=(n_relevant, t1 - t0))
        presence.sum_duplicates()
        presence.data[:] = 1.0                         # a word counted once per window
        joint += (presence @ presence.T).toarray()
    return np.diag(joint).copy(), joint, n_windows


def _presence_intervals(tokens, token_ptr, width, n_win, first_window, exact):
    """(word, start, stop): for each relevant token, the global windows
    ``start .. stop - 1`` in which it marks its word present.

    ``exact``: while the copy is inside, ``[p - width + 1, p + 1)``, clipped to
    the document's windows. Otherwise gensim's rule (``WordOccurrenceAccumulator``):
    the window slides one token per step, and a word is marked absent when a
    copy leaves, even if another copy is still inside, until a copy enters
    again (at a step, the leaving token is unmarked before the entering one is
    marked). A copy entering at step ``e`` then marks its word until the first
    exit after ``e``: the exit ``p' + 1`` of the word's earliest copy inside
    the window (position ``p' > p - width``), which may be an earlier copy.
    This counts fewer windows for words repeated within a window.
    """
    pos = np.flatnonzero(tokens >= 0)
    word = tokens[pos]
    doc = np.searchsorted(token_ptr, pos, side="right") - 1
    p = pos - token_ptr[doc]                          # position in the document
    w = width[doc]
    enter = np.maximum(p - w + 1, 0)
    leave = p + 1
    if not exact:   # in documents of several windows: exit of the earliest copy inside the window
        sliding = np.flatnonzero(n_win[doc] > 1)
        sdoc, sword, sp, sw = doc[sliding], word[sliding], p[sliding], w[sliding]
        order = np.lexsort((sp, sword, sdoc))          # copies of a (document, word) pair, in order
        pair = np.concatenate([[0], np.cumsum((np.diff(sdoc[order]) != 0) | (np.diff(sword[order]) != 0))])
        span = 2 * int(width.max(initial=0)) + int(sp.max(initial=0)) + 1
        if pair.size and int(pair[-1]) >= np.iinfo(np.int64).max // span:
            raise ValueError("the reference corpus is too large for one coherence call")
        ordered = pair * span + sp[order] + sw[order]  # increasing: pair first, then position
        earliest = np.empty_like(order)
        earliest[order] = order[np.searchsorted(ordered, ordered - sw[order], side="right")]
        leave[sliding] = sp[earliest] + 1
    leave = np.minimum(leave, n_win[doc])
    keep = leave > enter
    base = first_window[doc]
    return word[keep], (base + enter)[keep], (base + leave)[keep]
