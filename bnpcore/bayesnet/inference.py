"""Collapsed inference in discrete Bayesian networks: standard VB in collapsed
form, collapsed Gibbs sampling and their hybrid (Welling, Teh & Kappen 2008,
section 6).

The CPTs are integrated out, so the state is a set of counts per family (the
expected counts N_klm of the variational cases plus the counts of the current
sample of the sampled cases) and, per case, the clique marginals
(variational) or the clique states of each token (sampled). One sweep is one
call of ``bnpcore.kernels._bayesnet.sweep`` over the cases in data order.
"""
import math

import numpy as np
from scipy.special import gammaln

from bnpcore._validation import check_int, check_positive, check_random_state, effective_n_threads
from bnpcore.base import BaseEstimator, exclusive
from bnpcore.bayesnet.junction import Plan
from bnpcore.bayesnet.network import Network
from bnpcore.inference.batch import BatchState, run_iterations
from bnpcore.inference.stats import RECOUNT_EVERY, random_responsibilities
from bnpcore.kernels import _bayesnet
from bnpcore.kernels.special import digamma

__all__ = ["NetworkState", "Scorer", "StandardVB", "CollapsedGibbs", "Hybrid"]

_ALL_SAMPLED = np.iinfo(np.int64).max     # threshold that samples every case
_NONE_SAMPLED = -1                        # threshold that samples no case


class _Counts:
    """Flat count arrays of all families in a plan's layout, and their priors."""

    def __init__(self, plan):
        net = plan.network
        self.prior = np.concatenate([p.ravel() for p in net.priors])
        self.prior_col = np.concatenate([p.sum(axis=-1).ravel() for p in net.priors])
        # column of every entry: the entries of family v are its columns repeated n_states times
        self.col_of = np.concatenate([plan.col_off[v] + np.arange(plan.count_off[v + 1] - plan.count_off[v])
                                      // int(net.states[v]) for v in range(len(net.nodes))])

    def column_sums(self, entries):
        return np.bincount(self.col_of, weights=entries, minlength=len(self.prior_col))


class NetworkState(BatchState):
    """Counts, clique marginals of the variational cases and clique states of the
    sampled tokens of one fit (the ``BatchState`` protocol: ``sweep``,
    ``collect``).

    Parameters
    ----------
    network : Network
    data : ndarray of shape (n_cases, n_observed)
        Distinct observed configurations (columns ``network.observed``).
    weights : ndarray of shape (n_cases,)
        Their counts (the N-hat of [HYB] section 6).
    rng : numpy.random.Generator
        Initialisation: first the hidden states of every sampled token (one
        ``integers`` draw per hidden node, in declaration order), then random
        marginals of the variational cases (per hidden node, uniforms + 1e-3
        normalised, multiplied into the cliques); then the Gibbs draws.
    threshold : int
        Cases with count > threshold are variational, the others sampled.
    schedule : {"sequential", "parallel"}
        "parallel" (no sampled cases only): all cases from the counts at the
        start of the sweep, then the counts recomputed.
    n_threads : int, default 1
        Threads of the parallel schedule (cases split statically, one count
        buffer per thread summed after the step).
    """

    _transient = ("corpus", "plan", "scratch", "thread_scratch", "vb_threads", "col_threads", "base", "colbase",
                  "counts_layout")
    # one sweep over the cases (not documents): the sequential schedule's updates read the previous case's counts
    sequential_sweep = True

    def __init__(self, network, data, weights, rng, threshold, schedule="sequential", n_threads=1):
        self.network, self.data, self.weights = network, data, weights
        self.rng, self.threshold, self.schedule, self.n_threads = rng, threshold, schedule, n_threads
        self.restore(None)
        plan = self.plan
        if not plan.hidden:
            raise ValueError("the network has no hidden nodes: nothing to infer")
        vb = weights > threshold
        if schedule == "parallel" and not vb.all():
            raise ValueError("the parallel schedule updates every case variationally")
        self.n_vb_tokens = int(weights[vb].sum())
        n_tokens = int(weights[~vb].sum())
        values = np.column_stack([rng.integers(0, network.states[v], size=n_tokens, dtype=np.int32)
                                  for v in plan.hidden])
        self.z = plan.encode(values)
        self.q = self._random_marginals(rng, int(vb.sum()))
        # families of observed nodes only: the same counts for every sweep
        self.fixed = np.zeros(plan.n_entries)
        entries, _ = plan.constant_entries(data)
        for a in range(entries.shape[1]):
            np.add.at(self.fixed, entries[:, a], weights)
        self.vb = np.zeros(plan.n_entries)
        self.cg = np.zeros(plan.n_entries)
        self._recount_expected()
        self._recount_sampled()
        self.n_sweeps = 0
        self.sum_counts = 0.0
        self.n_collected = 0

    def restore(self, corpus):
        """(Re)build the junction tree, its scratch and the per-case offsets (not saved)."""
        self.corpus = corpus        # unused: the data are the state's own ``data``
        self.plan = Plan(self.network, self.network.observed)
        self.scratch = self.plan.scratch()
        if self.schedule == "parallel":
            self.thread_scratch = [self.plan.scratch() for _ in range(self.n_threads)]
            self.vb_threads = np.zeros((self.n_threads, self.plan.n_entries))
            self.col_threads = np.zeros((self.n_threads, self.plan.n_columns))
        self.base, self.colbase = self.plan.bases(self.data)
        self.counts_layout = _Counts(self.plan)

    def _random_marginals(self, rng, n):
        """Product marginals from random rows per hidden node, as clique marginal rows."""
        plan = self.plan
        rows = {v: random_responsibilities(rng, n, int(self.network.states[v])) for v in plan.hidden}
        q = np.empty((n, max(int(plan.clique_off[-1]), 1)))
        for c, clique in enumerate(plan.cliques):
            block = np.ones((n, 1))
            for v in clique:
                block = (block[:, :, None] * rows[v][:, None, :]).reshape(n, block.shape[1] * rows[v].shape[1])
            q[:, plan.clique_off[c]:plan.clique_off[c + 1]] = block
        return q

    def _assigned(self):
        """(family, clique, entry offset of each clique state) of the assigned families."""
        t, plan = self.plan.tables, self.plan
        for a in range(plan.n_assigned):
            scope = t["scope"][t["aoff"][a]:t["aoff"][a + 1]]
            yield a, int(t["aclique"][a]), t["offtab"][t["soff"][a]:t["soff"][a + 1]][scope]

    def _recount_expected(self):
        """vb counts from the clique marginals (plus the all-observed families)."""
        vb = self.weights > self.threshold
        base, w = self.base[vb], self.weights[vb].astype(np.float64)
        self.vb[:] = self.fixed
        for a, c, offs in self._assigned():
            block = self.q[:, self.plan.clique_off[c]:self.plan.clique_off[c + 1]]
            np.add.at(self.vb, base[:, a, None] + offs[None, :], w[:, None] * block)
        self.vb_col = self.counts_layout.column_sums(self.vb)

    def _recount_sampled(self):
        """cg counts from the clique states of the sampled tokens."""
        sampled = np.flatnonzero(self.weights <= self.threshold)
        case = np.repeat(sampled, self.weights[sampled])
        self.cg[:] = 0.0
        for a, c, offs in self._assigned():
            np.add.at(self.cg, self.base[case, a] + offs[self.z[:, c]], 1.0)
        self.cg_col = self.counts_layout.column_sums(self.cg)

    def sweep(self):
        layout = self.counts_layout
        if self.schedule == "parallel":
            table = (digamma(self.vb + layout.prior)
                     - digamma(self.vb_col + layout.prior_col)[layout.col_of])
            delta, entropy = _bayesnet.parallel_step(self.plan.tables, self.thread_scratch, self.base, self.colbase,
                                                     self.weights, table, self.q, self.vb_threads,
                                                     self.col_threads)
            self.vb = self.fixed + self.vb_threads.sum(axis=0)
            self.vb_col = layout.column_sums(self.vb)
        else:
            delta, entropy = _bayesnet.sweep(self.plan.tables, self.scratch, self.base, self.colbase, self.weights,
                                             self.threshold, self.q, self.z, self.vb, self.cg, self.vb_col,
                                             self.cg_col, layout.prior, layout.prior_col, self.rng)
        self.n_sweeps += 1
        if self.schedule == "sequential" and self.n_sweeps % RECOUNT_EVERY == 0:
            self._recount_expected()
        record = {"delta": delta / (max(self.n_vb_tokens, 1) * self.plan.n_cliques)}
        if len(self.z) == 0:
            record["bound"] = self.bound(entropy)
        return record

    def counts(self):
        """Current counts (expectations plus sample), flat."""
        return self.vb + self.cg

    def bound(self, entropy):
        """The collapsed SVB bound as named terms: one ``family:<node>`` term per
        family, ``sum_columns [lgamma(A_l) - lgamma(N_l + A_l)] + sum [lgamma(N_kl +
        a_kl) - lgamma(a_kl)]`` of its expected counts, and the ``entropy`` of the
        posteriors of the cases ([HYB] eq 26 with the expectations moved inside)."""
        layout, plan, counts = self.counts_layout, self.plan, self.counts()
        cols = layout.column_sums(counts)
        terms = {}
        for v, name in enumerate(self.network.names):
            e, l = slice(plan.count_off[v], plan.count_off[v + 1]), slice(plan.col_off[v], plan.col_off[v + 1])
            a, A = layout.prior[e], layout.prior_col[l]
            terms[f"family:{name}"] = float((gammaln(A) - gammaln(cols[l] + A)).sum()
                                            + (gammaln(counts[e] + a) - gammaln(a)).sum())
        terms["entropy"] = float(entropy)
        return terms

    def log_cpts(self, counts=None):
        """Flat log posterior-mean CPTs ``log((N + a) / (N_col + A_col))``."""
        layout = self.counts_layout
        counts = self.counts() if counts is None else counts
        cols = layout.column_sums(counts)
        return np.log((counts + layout.prior) / (cols + layout.prior_col)[layout.col_of])

    def collect(self):
        self.sum_counts = self.sum_counts + self.counts()
        self.n_collected += 1

    def estimate(self):
        """Counts: the average of the collected samples, else the current ones."""
        return self.sum_counts / self.n_collected if self.n_collected else self.counts()

    def hidden_states(self):
        """Hidden node states of every sampled token, shape (n_tokens, n_hidden)."""
        return self.plan.decode(self.z)


class Scorer:
    """Log-probabilities of observed configurations under given CPTs, by belief
    propagation over the hidden nodes: ``log p(x_n)`` of every case n, or
    ``log p(x_n | x_n[given])`` when ``given`` names observed nodes to condition on.
    Hidden nodes without observed descendants are summed out analytically (the
    CPTs are normalised).

    Parameters
    ----------
    network : Network
    data : ndarray of shape (n_cases, n_observed)
    given : sequence of str, optional
    """

    def __init__(self, network, data, given=None):
        self.parts = [(1.0, network.observed, data)]
        if given:
            given = list(given)
            bad = [g for g in given if g not in network.observed]
            if bad:
                raise ValueError(f"given must name observed nodes; {bad} are not observed")
            cols = [network.observed.index(g) for g in given]
            self.parts.append((-1.0, given, np.ascontiguousarray(data[:, cols])))
        self.engines = []
        for sign, columns, d in self.parts:
            plan = Plan(network, columns, prune_barren=True)
            base, colbase = plan.bases(d)
            const, _ = plan.constant_entries(d)
            self.engines.append((sign, plan, plan.scratch(), base, colbase, const))

    def log_prob(self, log_cpts):
        """Per-case log-probabilities, shape (n_cases,), for flat log CPTs."""
        total = 0.0
        for sign, plan, scratch, base, colbase, const in self.engines:
            out = log_cpts[const].sum(axis=1)
            if plan.n_cliques:
                z = np.empty(len(base))
                _bayesnet.propagate(plan.tables, scratch, base, colbase, log_cpts, z)
                out = out + z
            total = total + sign * out
        return total


# ---------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------

class _NetworkEstimator(BaseEstimator):
    """The fit loop, scoring and fitted attributes shared by the three methods."""

    _iterations = "max_iter"

    def _check_network(self):
        if not isinstance(self.network, Network):
            raise TypeError(f"network must be a bnpcore.bayesnet.Network, got {type(self.network).__name__}")
        return self.network

    def _loop_settings(self):
        raise NotImplementedError

    def _make_state(self, data, weights, rng):
        raise NotImplementedError

    @exclusive
    def fit(self, data, counts=None, *, heldout=None, heldout_counts=None, given=None, eval_every=1):
        """Fit the network to observed configurations.

        Parameters
        ----------
        data : array-like of shape (n_cases, n_observed) or dict
            Observed states, columns in the order of ``network.observed`` (or a
            mapping from those names to arrays).
        counts : array-like of shape (n_cases,), optional
            How many data cases each (distinct) row stands for; without it
            every row is one case and repeated rows are merged.
        heldout, heldout_counts : optional
            Held-out configurations (same format), scored every ``eval_every``
            iterations into ``history_["heldout_loglik"]``: the mean per case of
            ``log p(observed | given)`` under the posterior-mean CPTs; for
            samplers past ``burn_in``, of the probability averaged over the
            evaluated samples ([HYB] eq 31).
        given : sequence of str, optional
            Observed nodes the held-out score conditions on (for LDA, the
            document node: the per-word held-out likelihood).
        eval_every : int, default 1

        Returns
        -------
        self
        """
        net = self._check_network()
        max_iter, burn_in, tol = self._loop_settings()
        eval_every = check_int(eval_every, "eval_every")
        data, weights = net.check_data(data, counts)
        rng = check_random_state(self.random_state)
        scorer = None
        if heldout is not None:
            hdata, hweights = net.check_data(heldout, heldout_counts)
            scorer, hweights = Scorer(net, hdata, given), hweights.astype(np.float64)
        for name in self._fitted_names():
            self.__dict__.pop(name)
        state = self._make_state(data, weights, rng)
        self.history_ = []
        average = {"log": None, "n": 0}

        def heldout_scores(it, sampling):
            if scorer is None or not (it % eval_every == 0 or it == max_iter):
                return {}
            logp = scorer.log_prob(state.log_cpts())
            if sampling:
                average["log"] = logp if average["log"] is None else np.logaddexp(average["log"], logp)
                average["n"] += 1
                logp = average["log"] - math.log(average["n"])
            loglik = float(np.dot(hweights, logp) / hweights.sum())
            return {"heldout_loglik": loglik, "perplexity": math.exp(-loglik)}

        def record(it, seconds):
            return {"n_cases": it * int(weights.sum()), "fit_seconds": seconds}

        # the batch loop of every estimator (records, callbacks, tol), with the cases for the documents
        it, _, _ = run_iterations(self, state, 0, max_iter, 0.0, burn_in=burn_in, tol=tol, record=record,
                                  evaluate=heldout_scores)
        self.n_iter_ = it
        self._set_fitted(state)
        return self

    def _set_fitted(self, state):
        net, plan = self.network, state.plan
        counts = state.estimate()
        log_cpts = state.log_cpts(counts)
        self.counts_ = {name: counts[plan.count_off[v]:plan.count_off[v + 1]].reshape(net.table_shape(v))
                        for v, name in enumerate(net.names)}
        self.cpts_ = {name: np.exp(log_cpts[plan.count_off[v]:plan.count_off[v + 1]]).reshape(net.table_shape(v))
                      for v, name in enumerate(net.names)}
        self._log_cpts = log_cpts

    _persist = ("_log_cpts",)

    def score(self, data, counts=None, given=None):
        """Mean log-probability per case of observed configurations under the
        fitted posterior-mean CPTs (``log p(observed | given)`` with ``given``)."""
        self._check_fitted()
        data, weights = self.network.check_data(data, counts)
        logp = Scorer(self.network, data, given).log_prob(self._log_cpts)
        return float(np.dot(weights, logp) / weights.sum())

    def transform(self, data):
        """Posterior marginals of the hidden nodes of each row under the fitted CPTs.

        Returns
        -------
        dict
            Hidden node name -> ndarray of shape (n_rows, n_states).
        """
        self._check_fitted()
        net = self.network
        data = net.check_rows(data)
        plan = Plan(net, net.observed)
        base, colbase = plan.bases(data)
        beliefs = np.empty((len(data), int(plan.clique_off[-1])))
        _bayesnet.propagate(plan.tables, plan.scratch(), base, colbase, self._log_cpts, np.empty(len(data)),
                            beliefs)
        out = {}
        for v in plan.hidden:
            c = next(c for c, clique in enumerate(plan.cliques) if v in clique)
            states = plan.clique_tables[c][:, plan.cliques[c].index(v)]
            block = beliefs[:, plan.clique_off[c]:plan.clique_off[c + 1]]
            out[net.names[v]] = np.stack([block[:, states == k].sum(axis=1) for k in range(net.states[v])], axis=1)
        return out


_PARAMS = """
    Parameters
    ----------
    network : Network
        The nodes, their parents and the Dirichlet priors of their CPTs.
"""

_ATTRS = """
    Attributes
    ----------
    counts_ : dict of ndarray
        Node name -> (expected or sample-averaged) counts of its family, shape
        ``(*parent_states, n_states)``.
    cpts_ : dict of ndarray
        Node name -> posterior-mean CPT ``(counts + prior) / column sums``.
    history_ : list of dict
        One record per sweep: ``iteration``, ``n_cases`` (cases processed so
        far), ``fit_seconds``, ``delta`` (mean absolute change of the clique marginals per variational
        case and clique), ``bound`` (without sampled cases: the named terms of
        the collapsed SVB bound), and with held-out data ``heldout_loglik``
        (mean per case) and ``perplexity``.
    n_iter_ : int

    References
    ----------
    M. Welling, Y. W. Teh and H. J. Kappen (2008). Hybrid variational/Gibbs
    collapsed inference in topic models. UAI, section 6.
"""


class StandardVB(_NetworkEstimator):
    __doc__ = """Standard variational Bayes for a discrete Bayesian network in collapsed
    form ([HYB] section 6, eq 28).

    Every distinct observed configuration gets the posterior of its hidden
    nodes by belief propagation on the junction tree of the hidden part, with
    the local potentials ``exp(psi(N_kl + a_kl) - psi(N_l + A_l))`` of the
    expected counts. Both schedules increase the collapsed bound (recorded as
    ``bound``). For LDA (the network d -> z -> w) this is
    ``bnpcore.lda.StandardVB`` on the same data and seed.
""" + _PARAMS + """
    max_iter : int, default 100
    tol : float or None, default 1e-6
        Stop when ``delta`` falls below ``tol``; None runs ``max_iter`` sweeps.
    schedule : {"parallel", "sequential"}, default "parallel"
        "parallel": every case from the counts at the start of the sweep, in
        ``n_threads`` threads; "sequential": case by case, counts updated after each.
    n_threads : int or None, default None
        Threads of the parallel schedule (None: OMP_NUM_THREADS or all cpus,
        -1: all cpus). Results agree with one thread up to the order of the
        final sums of the counts.
    random_state : int, Generator or None
        Seeds the random initial marginals.
""" + _ATTRS

    def __init__(self, network, max_iter=100, tol=1e-6, schedule="parallel", n_threads=None, random_state=None):
        self._store_params(locals())

    def _loop_settings(self):
        if self.schedule not in ("parallel", "sequential"):
            raise ValueError(f"schedule must be 'parallel' or 'sequential', got {self.schedule!r}")
        self._n_threads = effective_n_threads(self.n_threads)
        tol = None if self.tol is None else check_positive(self.tol, "tol", allow_zero=True)
        return check_int(self.max_iter, "max_iter"), None, tol

    def _make_state(self, data, weights, rng):
        return NetworkState(self.network, data, weights, rng, _NONE_SAMPLED, self.schedule, self._n_threads)


_SAMPLER = """
    max_iter : int, default 300
    burn_in : int, default 10
        Sweeps before samples enter the averages behind ``counts_``, ``cpts_``
        and the held-out score.
    random_state : int, Generator or None
        Seeds the initial states and every draw.
"""


class _Sampler(_NetworkEstimator):
    def _loop_settings(self):
        return check_int(self.max_iter, "max_iter"), check_int(self.burn_in, "burn_in", minimum=0), None

    def _threshold(self):
        raise NotImplementedError

    def _make_state(self, data, weights, rng):
        return NetworkState(self.network, data, weights, rng, self._threshold())


class CollapsedGibbs(_Sampler):
    __doc__ = """Collapsed Gibbs sampling for a discrete Bayesian network ([HYB] section
    6, eq 29).

    Each data case in turn is removed from the counts, all its hidden nodes
    are drawn jointly by forward filtering / backward sampling on the junction
    tree with the potentials ``(N_kl + a_kl) / (N_l + A_l)``, and it is added
    back. For LDA this is the collapsed Gibbs sampler of ``bnpcore.lda`` with a
    plain O(K) draw (``lda.Hybrid`` with a threshold at the largest count:
    the same states for the same seed).
""" + _PARAMS + _SAMPLER + _ATTRS

    def __init__(self, network, max_iter=300, burn_in=10, random_state=None):
        self._store_params(locals())

    def _threshold(self):
        return _ALL_SAMPLED


class Hybrid(_Sampler):
    __doc__ = """Hybrid collapsed VB / Gibbs inference for a discrete Bayesian network
    ([HYB] section 6, with the counts of eq 16).

    Cases with count <= ``threshold`` are sampled token by token (forward
    filtering / backward sampling), the others updated by belief propagation
    with the psi potentials of standard VB, all in data order against the same
    counts (expectations plus the current sample). ``threshold=0`` is
    sequential standard VB; a threshold at the largest count is collapsed
    Gibbs sampling. For LDA this is ``bnpcore.lda.Hybrid`` (standard
    variational part).
""" + _PARAMS + """
    threshold : int, default 1
        The r of [HYB] eq 14.
""" + _SAMPLER + _ATTRS

    def __init__(self, network, threshold=1, max_iter=300, burn_in=10, random_state=None):
        self._store_params(locals())

    def _threshold(self):
        return check_int(self.threshold, "threshold", minimum=0)
