"""A new bnpcore estimator in under 150 lines: a mixture of unigrams fitted by
MAP expectation-maximisation, written against the model protocol
(docs/architecture.md walks through it).

Model: each document picks one component z_d ~ Cat(pi), then all its tokens
from phi_z; priors pi ~ Dir(alpha + 1), phi_k ~ Dir(eta + 1), so the M-step
is the smoothed ratio of expected counts. Components whose expected number of
documents falls below half a document are removed (a move).

The E-step is a local step (documents -> additive statistics) and the M-step a
global step, so the same class also runs on a Dask cluster, with no code of
its own there: ``bnpcore.distributed.fit(UnigramMixture(), corpus, client)``.

Run it: ``python examples/unigram_mixture.py`` fits KOS and prints topics.
"""
import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from bnpcore._validation import check_int, check_positive, check_prior
from bnpcore.base import TopicMixin
from bnpcore.inference import moves
from bnpcore.inference.batch import BatchEstimator, BatchState
from bnpcore.inference.stats import SuffStats


class UnigramMixtureState(BatchState):
    """Component parameters (in a moves.Components table); one EM iteration is
    the E-step as the local step and the M-step as the global step."""

    def __init__(self, corpus, n_components, alpha, eta, rng):
        self.corpus, self.alpha, self.eta = corpus, alpha, eta
        self.last = -np.inf
        self.params = moves.Components({"log_phi": ((corpus.n_words,), np.float64), "log_pi": ((), np.float64)},
                                       capacity=n_components)
        self.params.add(n_components)
        # a random start: each document in one random component (the first M-step)
        resp = np.eye(n_components)[rng.integers(n_components, size=corpus.n_docs)]
        self.m_step(SuffStats({"words": np.asarray(corpus.matrix.T @ resp).T, "docs": resp.sum(axis=0)}))

    @property
    def n_components(self):
        return self.params.n

    def broadcast(self):
        """What every block's E-step reads: log phi (K, W) and log pi (K,)."""
        return self.params["log_phi"], self.params["log_pi"]

    @staticmethod
    def local_step(part, log_phi, log_pi):
        """The E-step on a block of documents: responsibilities, then their
        additive statistics (expected word counts and documents per component,
        and the block's log-likelihood)."""
        X = sp.csr_matrix((part["counts"], part["indices"], part["indptr"]), shape=(len(part["indptr"]) - 1,
                                                                                   log_phi.shape[1]))
        joint = X @ log_phi.T + log_pi
        loglik = logsumexp(joint, axis=1)
        resp = np.exp(joint - loglik[:, None])
        stats = {"words": np.asarray(X.T @ resp).T, "docs": resp.sum(axis=0), "log_likelihood": loglik.sum()}
        return part, SuffStats(stats)

    def global_step(self, stats, rho=1.0):
        """Prune components with under half a document, M-step; the MAP
        objective (its two terms) and its change per token ``delta`` (for ``tol``).
        EM is a batch algorithm: ``rho`` must be 1."""
        if rho != 1.0:
            raise ValueError("EM takes whole-corpus statistics (rho = 1)")
        keep = stats["docs"] >= 0.5
        if not keep.any():          # one document shared evenly by all components: keep the largest
            keep[np.argmax(stats["docs"])] = True
        if not keep.all():
            moves.prune(self.params, stats["docs"], 0.5, keep_largest=True)
            stats = stats.select(keep)
        self.m_step(stats)
        log_prior = self.alpha * self.params["log_pi"].sum() + self.eta * self.params["log_phi"].sum()
        bound = {"log_likelihood": float(stats["log_likelihood"]), "log_prior": float(log_prior)}
        total = sum(bound.values())
        delta, self.last = abs(total - self.last) / max(self.corpus.n_tokens, 1), total
        return {"bound": bound, "delta": delta}

    def m_step(self, stats):
        words = stats["words"] + self.eta
        self.params.arrays["log_phi"][:self.n_components] = np.log(words / words.sum(axis=1, keepdims=True))
        docs = stats["docs"] + self.alpha
        self.params.arrays["log_pi"][:self.n_components] = np.log(docs / docs.sum())

    def predictive(self):
        joint = self.corpus.matrix @ self.params["log_phi"].T + self.params["log_pi"]
        return np.exp(joint - logsumexp(joint, axis=1)[:, None]), np.exp(self.params["log_phi"])


class UnigramMixture(TopicMixin, BatchEstimator):
    """Mixture of unigrams by MAP EM (an example estimator).

    Parameters
    ----------
    n_components : int, default 10
        Initial number of components (fewer after pruning).
    alpha, eta : float, default 1.0, 0.1
        Pseudo-counts of the mixture weights and of the component word distributions.
    max_iter : int, default 50
    tol : float, default 1e-6
        Stop when the objective improves by less than ``tol`` per token.
    random_state : int, Generator or None
    """

    partitioned = True      # its state has local and global steps: bnpcore.distributed runs it

    def __init__(self, n_components=10, alpha=1.0, eta=0.1, max_iter=50, tol=1e-6, random_state=None):
        self._store_params(locals())

    def _check_params(self):
        check_int(self.n_components, "n_components")
        check_prior(self.alpha, "alpha")
        check_prior(self.eta, "eta")
        return {"max_iter": check_int(self.max_iter, "max_iter"), "tol": check_positive(self.tol, "tol")}

    def _init_state(self, X, rng):
        return UnigramMixtureState(X, int(self.n_components), float(self.alpha), float(self.eta), rng)

    def _set_fitted(self, state, X):
        order = np.argsort(-state.params["log_pi"], kind="stable")
        self.topics_ = np.exp(state.params["log_phi"][order])
        self.weights_ = np.exp(state.params["log_pi"][order])
        self.n_components_ = state.n_components
        self.vocabulary_ = X.vocabulary

    def transform(self, X):
        """Posterior probabilities of each document's component, shape (n_docs, n_components_)."""
        X = self._check_input(X)
        joint = X.matrix @ np.log(self.topics_).T + np.log(self.weights_)
        return np.exp(joint - logsumexp(joint, axis=1, keepdims=True))


if __name__ == "__main__":
    from bnpcore.datasets import load_kos
    model = UnigramMixture(n_components=20, random_state=0).fit(load_kos(), progress=True)
    print(f"{model.n_components_} components after {model.n_iter_} iterations")
    model.print_topics(5, 8)
