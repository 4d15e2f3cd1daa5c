"""Held-out metrics of the five papers (shared/ALGORITHMS.md section 8).

All functions take fitted point estimates or samples as plain arrays, so any
estimator (or a peer library's output) is scored by the same code.
"""
import numpy as np
from scipy.special import gammaln, logsumexp

from bnpcore._validation import check_int, check_positive, check_random_state, effective_n_threads, spawn_generators
from bnpcore.corpus import as_corpus
from bnpcore.kernels._svi import hdp_heldout

__all__ = ["token_log_likelihood", "PredictiveAverage", "mixture_log_predictive", "hdp_heldout_log_likelihood"]

_CHUNK = 1 << 16  # pairs per block (bounds memory at _CHUNK x K doubles)


def _pair_probabilities(doc_topic, topic_word, heldout):
    """p_jw = sum_k doc_topic[j, k] topic_word[k, w] for every non-zero (j, w) of heldout."""
    doc_topic = np.asarray(doc_topic, dtype=np.float64)
    topic_word = np.asarray(topic_word, dtype=np.float64)
    if doc_topic.ndim != 2 or topic_word.ndim != 2 or doc_topic.shape[1] != topic_word.shape[0]:
        raise ValueError(f"doc_topic {doc_topic.shape} and topic_word {topic_word.shape} do not match")
    if doc_topic.shape[0] != heldout.n_docs or topic_word.shape[1] != heldout.n_words:
        raise ValueError(f"held-out corpus {heldout.shape} does not match doc_topic {doc_topic.shape} "
                         f"and topic_word {topic_word.shape}")
    docs = np.repeat(np.arange(heldout.n_docs), np.diff(heldout.indptr))
    out = np.empty(heldout.nnz)
    for s in range(0, heldout.nnz, _CHUNK):
        d, w = docs[s:s + _CHUNK], heldout.indices[s:s + _CHUNK]
        out[s:s + _CHUNK] = np.einsum("ik,ki->i", doc_topic[d], topic_word[:, w])
    return out


def token_log_likelihood(doc_topic, topic_word, heldout):
    """Per-word log-likelihood of held-out tokens under per-document mixtures.

    ``log p = sum_{held-out (j, w)} c_jw log sum_k doc_topic[j, k] topic_word[k, w]``,
    divided by the number of held-out tokens ([HYB] eq 30 with the predictive
    doc_topic and topic_word; [CVHDP] eq 16). Perplexity is ``exp(-result)``.

    Parameters
    ----------
    doc_topic : ndarray of shape (n_docs, n_topics)
        Predictive topic proportions of each document (rows sum to at most 1).
    topic_word : ndarray of shape (n_topics, n_words)
        Predictive word distributions (rows sum to 1).
    heldout : Corpus
        Held-out tokens of the same documents.
    """
    heldout = as_corpus(heldout)
    p = _pair_probabilities(doc_topic, topic_word, heldout)
    n = heldout.n_tokens
    if n == 0:
        raise ValueError("the held-out corpus has no tokens")
    return float(np.dot(heldout.counts, np.log(p))) / n


class PredictiveAverage:
    """Online average of per-token predictive probabilities over samples
    ([HYB] eq 31, [CVHDP] eq 17): ``log pbar_i = log (1/S) sum_s p_i^s``.

    Examples
    --------
    >>> avg = PredictiveAverage(heldout)            # doctest: +SKIP
    >>> for sample in samples:                     # doctest: +SKIP
    ...     avg.add(doc_topic_s, topic_word_s)
    >>> avg.log_likelihood()                        # per held-out word  # doctest: +SKIP
    """

    def __init__(self, heldout):
        self.heldout = as_corpus(heldout)
        self.sum_p = np.zeros(self.heldout.nnz)
        self.n_samples = 0

    def add(self, doc_topic, topic_word):
        self.sum_p += _pair_probabilities(doc_topic, topic_word, self.heldout)
        self.n_samples += 1
        return self

    def log_likelihood(self):
        """Per-word log-likelihood of the averaged predictive probabilities."""
        if self.n_samples == 0:
            raise ValueError("no samples were added")
        return float(np.dot(self.heldout.counts, np.log(self.sum_p / self.n_samples))) / self.heldout.n_tokens


def mixture_log_predictive(log_weights, lam, docs, multinomial_coef=True):
    """Log predictive probability of each document under a mixture of
    Dirichlet-multinomials ([NRM] section 4, [TF] S.3; ALGORITHMS.md 8.5).

    ``log p(x_d) = [log MultCoef(c_d)] + logsumexp_k (log_weights[k] + log DM(c_d | lam[k]))``
    where ``log DM`` is the probability of the token sequence (ALGORITHMS.md 2.3).

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
        Add log MultCoef(c_d) = lgamma(N_d + 1) - sum_w lgamma(c_dw + 1), i.e. score
        the count vector rather than the token sequence.

    Returns
    -------
    ndarray of shape (n_docs,)
    """
    docs = as_corpus(docs)
    log_weights = np.asarray(log_weights, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    if lam.ndim != 2 or lam.shape != (log_weights.shape[0], docs.n_words) or not np.all(lam > 0):
        raise ValueError(f"lam must be a positive array of shape ({log_weights.shape[0]}, {docs.n_words})")
    totals = lam.sum(axis=1)
    out = np.empty(docs.n_docs)
    lengths = docs.doc_lengths
    for d in range(docs.n_docs):
        lo, hi = docs.indptr[d], docs.indptr[d + 1]
        w, c = docs.indices[lo:hi], docs.counts[lo:hi]
        lw = lam[:, w]
        dm = (gammaln(lw + c) - gammaln(lw)).sum(axis=1) + gammaln(totals) - gammaln(totals + lengths[d])
        out[d] = logsumexp(log_weights + dm)
        if multinomial_coef:
            out[d] += gammaln(lengths[d] + 1) - gammaln(c + 1.0).sum()
    return out


# -- [TF] S.3: HDP held-out likelihood by importance sampling ------------------

_IS_CHUNK = 4   # documents per random stream: results do not depend on the number of threads


def _hdp_importance_sampling(topics, prior, docs, burnin, n_samples, random_state, n_threads, doc_counts=False):
    """Run the [TF] S.3 kernel: per-document log-likelihoods (and the topic counts
    of the final Gibbs sweep when ``doc_counts``)."""
    topics = np.ascontiguousarray(topics, dtype=np.float64)
    prior = np.ascontiguousarray(prior, dtype=np.float64)
    rng = check_random_state(random_state)
    generators = spawn_generators(rng, (docs.n_docs + _IS_CHUNK - 1) // _IS_CHUNK)
    loglik = np.empty(docs.n_docs)
    counts = np.empty((docs.n_docs if doc_counts else 0, topics.shape[0]))
    hdp_heldout(docs.indptr, docs.indices, docs.counts, topics, prior, int(burnin), int(n_samples), generators,
                _IS_CHUNK, loglik, counts, effective_n_threads(n_threads))
    return loglik, counts


def hdp_heldout_log_likelihood(topics, weights, alpha, docs, burnin=50, n_samples=1000, random_state=None,
                               n_threads=None, per_document=False):
    """[TF] S.3 held-out per-word log-likelihood of an HDP topic model.

    The fitted HDP is reduced to LDA with topics ``phihat`` and document prior
    Dirichlet(alpha * pihat) over the instantiated topics (the leftover stick
    mass is dropped, E13), and each document's ``log p(x_j | phihat, pihat)``
    is estimated by importance sampling (ALGORITHMS.md §8.4; Griffiths &
    Steyvers 2004, Wallach et al. 2009): ``burnin`` collapsed Gibbs sweeps on
    the topic assignments with the topics fixed build the proposal
    ``q(pi) = Dirichlet(alpha pihat + n)``, from which ``n_samples`` draws are
    weighted. The estimate is consistent but biased low in log space; compare
    models only under the same ``burnin`` and ``n_samples``.

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
    loglik, _ = _hdp_importance_sampling(topics, alpha * weights, docs, burnin, n_samples, random_state, n_threads)
    if per_document:
        return loglik
    if docs.n_tokens == 0:
        raise ValueError("the held-out documents have no tokens")
    return float(loglik.sum() / docs.n_tokens)
