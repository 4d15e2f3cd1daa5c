"""Held-out metrics of the five papers (shared/ALGORITHMS.md section 8).

All functions take fitted point estimates or samples as plain arrays, so any
estimator (or a peer library's output) is scored by the same code.
"""
import numpy as np
from scipy.special import gammaln, logsumexp

from bnpcore.corpus import as_corpus

__all__ = ["token_log_likelihood", "PredictiveAverage", "mixture_log_predictive"]

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
