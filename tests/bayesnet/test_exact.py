"""Belief propagation, the SVB update and bound, and the Gibbs sampler against
brute-force enumeration on tiny networks (a naive-Bayes mixture, a chain of
three hidden nodes, and a loopy diamond that needs triangulation)."""
import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import digamma, gammaln, logsumexp

from bnpcore.bayesnet import CollapsedGibbs, Hybrid, Network, Node, StandardVB
from bnpcore.bayesnet.inference import NetworkState, _ALL_SAMPLED
from bnpcore.bayesnet.junction import Plan
from bnpcore.kernels import _bayesnet

from .conftest import enumerate_posterior, log_joint


def diamond():
    """h1 -> (h2, h3) -> h4: a loop, closed into triangles by moralisation (h2 - h3)."""
    return Network([Node("h1", 2, prior=0.8), Node("h2", 3, ["h1"], prior=0.6), Node("h3", 2, ["h1"], prior=0.9),
                    Node("h4", 2, ["h2", "h3"], prior=0.7), Node("o1", 3, ["h4"], observed=True, prior=0.5),
                    Node("o2", 2, ["h2", "h3"], observed=True, prior=0.4)])


def ring():
    """Hidden a, b, c, d with observed children of (a, b), (b, c), (c, d), (d, a): the
    moral graph is a chordless 4-cycle, which triangulation must fill in."""
    return Network([Node("a", 2, prior=0.8), Node("b", 3, prior=0.6), Node("c", 2, prior=0.9),
                    Node("d", 2, prior=0.7), Node("x", 2, ["a", "b"], observed=True, prior=0.5),
                    Node("y", 3, ["b", "c"], observed=True, prior=0.4), Node("u", 2, ["c", "d"], observed=True),
                    Node("v", 2, ["d", "a"], observed=True, prior=0.3)])


def networks(naive_bayes, chain):
    return {"naive_bayes": naive_bayes, "chain": chain, "diamond": diamond(), "ring": ring()}


def small_data(net, seed, n_cases=4):
    """Distinct random observed rows with counts 1..3."""
    rng = np.random.default_rng(seed)
    sizes = [int(net.states[net.index[o]]) for o in net.observed]
    rows = np.array(list(itertools.product(*[range(k) for k in sizes])))
    rows = rows[rng.choice(len(rows), size=min(n_cases, len(rows)), replace=False)]
    return np.ascontiguousarray(rows), rng.integers(1, 4, size=len(rows)).astype(np.int64)


def brute_case(net, plan, row, table, families):
    """Every hidden joint state of one case (rows of states in plan.hidden order) and
    its log potential sum_f table[entry_f] over ``families``."""
    hidden = list(itertools.product(*[range(int(net.states[v])) for v in plan.hidden]))
    full = np.zeros(len(net.nodes), dtype=np.int64)
    for i, name in enumerate(net.observed):
        full[net.index[name]] = row[i]
    logp = []
    for h in hidden:
        full[plan.hidden] = h
        logp.append(sum(table[plan.count_off[v] + np.dot(full[net.parents[v] + [v]], plan.family_strides(v))]
                        for v in families))
    return np.array(hidden), np.array(logp)


def clique_marginals(plan, hidden, p):
    """Brute-force clique marginal vector (the kernels' layout) from joint probabilities p."""
    out = np.zeros(int(plan.clique_off[-1]))
    for c, clique in enumerate(plan.cliques):
        idx = [plan.hidden.index(v) for v in clique]
        strides = [int(np.prod(plan.clique_states[c][i + 1:])) for i in range(len(clique))]
        np.add.at(out, plan.clique_off[c] + hidden[:, idx] @ strides, p)
    return out


@pytest.mark.parametrize("name", ["naive_bayes", "chain", "diamond", "ring"])
def test_belief_propagation_is_exact(naive_bayes, chain, name):
    net = networks(naive_bayes, chain)[name]
    plan = Plan(net, net.observed)
    data, _ = small_data(net, 3, n_cases=6)
    table = np.random.default_rng(0).normal(scale=2.0, size=plan.n_entries)
    base, colbase = plan.bases(data)
    logz, beliefs = np.empty(len(data)), np.empty((len(data), int(plan.clique_off[-1])))
    _bayesnet.propagate(plan.tables, plan.scratch(), base, colbase, table, logz, beliefs)
    logz_only = np.empty(len(data))
    _bayesnet.propagate(plan.tables, plan.scratch(), base, colbase, table, logz_only)
    np.testing.assert_array_equal(logz_only, logz)
    for n, row in enumerate(data):
        hidden, logp = brute_case(net, plan, row, table, plan.assigned)
        np.testing.assert_allclose(logz[n], logsumexp(logp), rtol=1e-12)
        p = np.exp(logp - logsumexp(logp))
        np.testing.assert_allclose(beliefs[n], clique_marginals(plan, hidden, p), atol=1e-12)


@pytest.mark.parametrize("make", [diamond, ring])
def test_junction_tree_structure(make):
    net = make()
    plan = Plan(net, net.observed)
    cliques = [set(c) for c in plan.cliques]
    assert len(cliques) == 2 and all(len(c) == 3 for c in cliques)     # two triangles (ring: one chord)
    # every family's hidden members lie in one clique
    for v in range(len(net.nodes)):
        members = {u for u in net.parents[v] + [v] if u in plan.hidden}
        assert any(members <= c for c in cliques)
    # running intersection: the cliques holding a node form a connected subtree
    for v in plan.hidden:
        holding = {c for c, cl in enumerate(cliques) if v in cl}
        roots = [c for c in holding if plan.parent[c] not in holding]
        assert len(roots) == 1


@pytest.mark.parametrize("name", ["naive_bayes", "chain", "diamond", "ring"])
def test_svb_update_and_bound_by_enumeration(naive_bayes, chain, name):
    """One parallel sweep: every case's new posterior is the normalised product of
    exp(psi(N + a) - psi(N_col + A)) over its hidden states ([HYB] eq 28), and the
    recorded bound is the lgamma terms of the new counts plus the entropies."""
    net = networks(naive_bayes, chain)[name]
    data, weights = small_data(net, 1)
    state = NetworkState(net, data, weights, np.random.default_rng(2), -1, "parallel")
    plan, layout = state.plan, state.counts_layout
    for _ in range(2):
        counts = state.vb.copy()
        cols = np.bincount(layout.col_of, weights=counts, minlength=plan.n_columns)
        table = digamma(counts + layout.prior) - digamma(cols + layout.prior_col)[layout.col_of]
        record = state.sweep()
        new_counts, entropy = np.zeros(plan.n_entries), 0.0
        for n, row in enumerate(data):
            hidden, logp = brute_case(net, plan, row, table, plan.assigned)
            p = np.exp(logp - logsumexp(logp))
            np.testing.assert_allclose(state.q[n], clique_marginals(plan, hidden, p), atol=1e-12)
            entropy -= weights[n] * np.sum(p * np.log(p))
            full = np.zeros(len(net.nodes), dtype=np.int64)
            full[[net.index[o] for o in net.observed]] = row
            for h, ph in zip(hidden, p):
                full[plan.hidden] = h
                for v in range(len(net.nodes)):
                    new_counts[plan.count_off[v] + np.dot(full[net.parents[v] + [v]], plan.family_strides(v))] \
                        += weights[n] * ph
        np.testing.assert_allclose(state.vb, new_counts, atol=1e-12)
        bound = record["bound"]
        np.testing.assert_allclose(bound["entropy"], entropy, rtol=1e-10)
        for v, node in enumerate(net.names):
            e = slice(plan.count_off[v], plan.count_off[v + 1])
            prior = net.priors[v]
            N = new_counts[e].reshape(prior.shape)
            expect = ((gammaln(prior.sum(-1)) - gammaln(N.sum(-1) + prior.sum(-1))).sum()
                      + (gammaln(N + prior) - gammaln(prior)).sum())
            np.testing.assert_allclose(bound[f"family:{node}"], expect, rtol=1e-10)


@pytest.mark.parametrize("name", ["naive_bayes", "chain"])
def test_svb_bound_is_below_the_exact_evidence(naive_bayes, chain, name):
    net = networks(naive_bayes, chain)[name]
    data, weights = small_data(net, 4, n_cases=2)
    weights[:] = [2, 1]
    states, _ = enumerate_posterior(net, data, weights)
    evidence = logsumexp([log_joint(net, data, weights, s) for s in states])
    for schedule in ("parallel", "sequential"):
        est = StandardVB(net, max_iter=50, tol=None, schedule=schedule, random_state=0).fit(data, weights)
        bounds = [sum(r["bound"].values()) for r in est.history_]
        assert max(bounds) <= evidence + 1e-10


def test_svb_bound_is_the_evidence_when_hidden_nodes_have_one_state():
    """A single joint hidden state: q is exact and the bound is log p(x)."""
    net = Network([Node("h", 1, prior=0.5), Node("g", 1, ["h"], prior=2.0),
                   Node("x", 3, ["h", "g"], observed=True, prior=[0.2, 0.5, 0.9]),
                   Node("y", 2, ["x", "g"], observed=True, prior=0.3)])
    data, weights = np.array([[0, 1], [2, 0], [1, 1]]), np.array([3, 1, 2])
    evidence = log_joint(net, data, weights, np.zeros((weights.sum(), 2), dtype=np.int64))
    est = StandardVB(net, max_iter=2, tol=None, random_state=0).fit(data, weights)
    np.testing.assert_allclose(sum(est.history_[-1]["bound"].values()), evidence, rtol=1e-12)


@pytest.mark.parametrize("name, weights", [("naive_bayes", [2, 1, 1]), ("chain", [1, 1]), ("diamond", [1, 1])])
def test_gibbs_samples_the_exact_posterior(naive_bayes, chain, name, weights):
    net = networks(naive_bayes, chain)[name]
    weights = np.array(weights, dtype=np.int64)
    data, _ = small_data(net, 5, n_cases=len(weights))
    states, exact = enumerate_posterior(net, data, weights)
    n_tokens, H = states.shape[1:]
    sizes = [int(net.states[net.index[h]]) for h in net.hidden]
    # index of a joint state: tokens and hidden nodes in mixed radix, as itertools.product lists them
    radix = np.array([int(np.prod(sizes[i + 1:])) for i in range(H)])
    per_token = int(np.prod(sizes))
    powers = per_token ** np.arange(n_tokens)[::-1]
    state = NetworkState(net, data, weights, np.random.default_rng(9), _ALL_SAMPLED)
    n_sweeps = 30000
    draws = np.empty(n_sweeps, dtype=np.int64)
    for s in range(n_sweeps):
        state.sweep()
        draws[s] = (state.hidden_states() @ radix) @ powers
    observed = np.bincount(draws, minlength=len(exact))
    keep = exact * n_sweeps > 5
    expected = exact[keep] * n_sweeps
    chi2 = np.sum((observed[keep] - expected) ** 2 / expected)
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-6


def test_hybrid_limits(chain):
    data, weights = small_data(chain, 6, n_cases=5)
    kw = dict(max_iter=6, random_state=4)
    hybrid = Hybrid(chain, threshold=0, burn_in=10, **kw).fit(data, weights)
    svb = StandardVB(chain, schedule="sequential", tol=None, **kw).fit(data, weights)
    timeless = [[{k: v for k, v in r.items() if k != "fit_seconds"} for r in e.history_] for e in (hybrid, svb)]
    assert timeless[0] == timeless[1]
    states = [NetworkState(chain, data, weights, np.random.default_rng(3), t) for t in (int(weights.max()),
                                                                                       _ALL_SAMPLED)]
    for _ in range(5):
        for s in states:
            s.sweep()
        np.testing.assert_array_equal(states[0].z, states[1].z)


def test_gibbs_counts_match_a_recount(chain):
    data, weights = small_data(chain, 7, n_cases=6)
    state = NetworkState(chain, data, weights, np.random.default_rng(1), 2)
    for _ in range(4):
        state.sweep()
        cg, vb = state.cg.copy(), state.vb.copy()
        state._recount_sampled()
        state._recount_expected()
        np.testing.assert_array_equal(state.cg, cg)
        np.testing.assert_allclose(state.vb, vb, atol=1e-12)
