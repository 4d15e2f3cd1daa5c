"""Shared pieces of the Bayesian-network tests: LDA as a network, small networks,
and brute-force enumeration of the collapsed posterior."""
import itertools

import numpy as np
import pytest
from scipy.special import gammaln

from bnpcore.bayesnet import Network, Node


def lda_network(n_docs, n_words, n_topics, alpha, eta):
    """LDA as the network d -> z -> w ([HYB] fig 1): documents and words observed."""
    return Network([Node("d", n_docs, observed=True), Node("z", n_topics, ["d"], prior=alpha),
                    Node("w", n_words, ["z"], observed=True, prior=eta)])


def corpus_cases(corpus):
    """(data, counts) of a Corpus: one (document, word) row per non-zero, CSR order."""
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.indptr))
    return np.column_stack([docs, corpus.indices]).astype(np.int64), corpus.counts.astype(np.int64)


def log_joint(network, data, weights, hidden_tokens):
    """Collapsed log p(observed, hidden) ([HYB] eq 26 for every family) of the
    data cases expanded to tokens, with hidden states ``hidden_tokens`` (one row
    per token, columns in ``network.hidden`` order)."""
    rows = np.repeat(data, weights, axis=0)
    full = np.empty((len(rows), len(network.nodes)), dtype=np.int64)
    for i, name in enumerate(network.observed):
        full[:, network.index[name]] = rows[:, i]
    for i, name in enumerate(network.hidden):
        full[:, network.index[name]] = hidden_tokens[:, i]
    total = 0.0
    for v, ps in enumerate(network.parents):
        shape = network.table_shape(v)
        counts = np.zeros(shape)
        np.add.at(counts, tuple(full[:, u] for u in ps + [v]), 1)
        prior = network.priors[v]
        total += (gammaln(prior.sum(-1)) - gammaln(counts.sum(-1) + prior.sum(-1))).sum()
        total += (gammaln(counts + prior) - gammaln(prior)).sum()
    return total


def enumerate_posterior(network, data, weights):
    """Every joint hidden state of all tokens and its exact collapsed posterior
    probability: (states of shape (n_states, n_tokens, n_hidden), probabilities)."""
    n_tokens, H = int(weights.sum()), len(network.hidden)
    sizes = [int(network.states[network.index[h]]) for h in network.hidden]
    per_token = list(itertools.product(*[range(k) for k in sizes]))
    states = np.array(list(itertools.product(per_token, repeat=n_tokens))).reshape(-1, n_tokens, H)
    logp = np.array([log_joint(network, data, weights, s) for s in states])
    p = np.exp(logp - logp.max())
    return states, p / p.sum()


@pytest.fixture
def naive_bayes():
    """A hidden class with three observed children (a naive-Bayes mixture)."""
    return Network([Node("c", 2, prior=[0.7, 1.3]),
                    Node("x1", 3, ["c"], observed=True, prior=0.5),
                    Node("x2", 2, ["c"], observed=True, prior=[[0.4, 0.9], [1.1, 0.6]]),
                    Node("x3", 2, ["c"], observed=True, prior=0.8)])


@pytest.fixture
def chain():
    """A hidden-Markov-like chain h1 -> h2 -> h3 of hidden nodes, each with an
    observed child."""
    return Network([Node("h1", 2, prior=0.9), Node("h2", 2, ["h1"], prior=[[1.2, 0.5], [0.5, 1.2]]),
                    Node("h3", 2, ["h2"], prior=0.7),
                    Node("o1", 2, ["h1"], observed=True, prior=0.6),
                    Node("o2", 3, ["h2"], observed=True, prior=0.5),
                    Node("o3", 2, ["h3"], observed=True, prior=[0.3, 0.9])])
