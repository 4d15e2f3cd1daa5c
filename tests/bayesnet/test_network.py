"""Declaring networks and data: every error names the node; the SVB bound never
decreases on random networks; estimator basics."""
import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from bnpcore.bayesnet import CollapsedGibbs, Hybrid, Network, Node, StandardVB
from bnpcore.bayesnet.junction import Plan, clique_tree, triangulate


def random_network(seed, n_nodes=10, n_hidden=4, max_parents=2):
    """A random DAG over n_nodes (parents among earlier nodes), the first
    ``n_hidden`` nodes hidden, 2-4 states each."""
    rng = np.random.default_rng(seed)
    nodes = []
    for i in range(n_nodes):
        k = int(rng.integers(0, min(i, max_parents) + 1))
        parents = [f"n{p}" for p in sorted(rng.choice(i, size=k, replace=False))] if k else []
        nodes.append(Node(f"n{i}", int(rng.integers(2, 5)), parents, observed=i >= n_hidden,
                          prior=float(rng.uniform(0.2, 1.5))))
    return Network(nodes)


def observed_sample(net, n_cases, seed):
    states, _ = net.sample(n_cases, random_state=seed)
    return states[:, [net.index[o] for o in net.observed]]


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_svb_bound_never_decreases(schedule, seed):
    net = random_network(seed)
    data = observed_sample(net, 150, seed)
    est = StandardVB(net, max_iter=25, tol=None, schedule=schedule, random_state=seed).fit(data)
    bounds = np.array([sum(r["bound"].values()) for r in est.history_])
    assert np.all(np.diff(bounds) >= -1e-10 * np.abs(bounds[1:]))
    assert bounds[-1] > bounds[0]


def test_errors_name_the_node():
    with pytest.raises(ValueError, match="cycle through node 'b'|cycle through node 'a'"):
        Network([Node("a", 2, ["b"]), Node("b", 2, ["a"])])
    with pytest.raises(ValueError, match="cycle"):
        Network([Node("a", 2), Node("b", 2, ["a", "c"]), Node("c", 2, ["b"])])
    with pytest.raises(ValueError, match="node 'z' has no states"):
        Network([Node("z", 0)])
    with pytest.raises(ValueError, match="node 'w': prior must be"):
        Network([Node("z", 2), Node("w", 3, ["z"], prior=np.ones((3, 2)))])
    with pytest.raises(ValueError, match="node 'w': prior must be"):
        Network([Node("z", 2), Node("w", 3, ["z"], prior=np.ones(2))])
    with pytest.raises(ValueError, match="node 'w': prior must be positive"):
        Network([Node("z", 2), Node("w", 3, ["z"], prior=[1.0, 0.0, 1.0])])
    with pytest.raises(ValueError, match="node 'w': unknown parent 'q'"):
        Network([Node("z", 2), Node("w", 3, ["q"])])
    net = Network([Node("z", 2), Node("w", 3, ["z"], observed=True), Node("v", 2, ["z"], observed=True)])
    with pytest.raises(ValueError, match="node 'w': state 3 in row 1 is out of range"):
        StandardVB(net).fit(np.array([[0, 1], [3, 0]]))
    with pytest.raises(ValueError, match="node 'v': state -1"):
        StandardVB(net).fit({"w": [0, 1], "v": [0, -1]})


def test_prior_shapes_broadcast_per_column():
    net = Network([Node("z", 2), Node("w", 3, ["z"], prior=[0.1, 0.2, 0.3]),
                   Node("v", 2, ["z", "w"], prior=np.arange(1, 13).reshape(2, 3, 2))])
    np.testing.assert_array_equal(net.priors[1], [[0.1, 0.2, 0.3]] * 2)
    assert net.priors[2].shape == (2, 3, 2)


def test_data_checks(naive_bayes):
    rows = np.array([[0, 1, 0], [2, 0, 1]])
    with pytest.raises(ValueError, match="distinct"):
        naive_bayes.check_data(np.vstack([rows, rows[:1]]), [1, 2, 3])
    with pytest.raises(ValueError, match="positive integers"):
        naive_bayes.check_data(rows, [1, 0])
    with pytest.raises(ValueError, match="shape"):
        naive_bayes.check_data(rows[:, :2])
    data, counts = naive_bayes.check_data(np.vstack([rows, rows[:1]]))
    np.testing.assert_array_equal(counts, [2, 1])


def test_triangulation_and_tree_of_a_cycle():
    # the 5-cycle a-b-c-d-e needs two chords: three triangles
    adj = {0: {1, 4}, 1: {0, 2}, 2: {1, 3}, 3: {2, 4}, 4: {3, 0}}
    cliques = triangulate(adj)
    assert len(cliques) == 3 and all(len(c) == 3 for c in cliques)
    order, parent = clique_tree(cliques)
    assert sorted(order) == [0, 1, 2] and parent[order[0]] == -1
    for c in order[1:]:
        assert len(set(cliques[c]) & set(cliques[parent[c]])) == 2


def test_disconnected_hidden_parts_and_barren_nodes():
    """Two unconnected hidden parts share one tree through an empty separator;
    scoring drops hidden nodes without observed descendants."""
    net = Network([Node("a", 2), Node("x", 2, ["a"], observed=True), Node("b", 3),
                   Node("y", 2, ["b"], observed=True), Node("dead", 2, ["a"])])
    plan = Plan(net, net.observed)
    assert sorted(map(len, plan.cliques)) == [1, 2] and plan.sep_size[1] == 1     # an empty separator
    assert net.index["dead"] not in Plan(net, net.observed, prune_barren=True).hidden
    data = observed_sample(net, 40, 0)
    for est in (StandardVB(net, random_state=0), CollapsedGibbs(net, max_iter=20, random_state=0)):
        est.fit(data)
        assert np.isfinite(est.score(data))


def test_same_seed_same_fit_and_transform(naive_bayes):
    data = observed_sample(naive_bayes, 60, 3)
    for cls in (StandardVB, CollapsedGibbs, Hybrid):
        a = cls(naive_bayes, max_iter=15, random_state=5).fit(data)
        b = cls(naive_bayes, max_iter=15, random_state=np.random.default_rng(5)).fit(data)
        for name in naive_bayes.names:
            np.testing.assert_array_equal(a.cpts_[name], b.cpts_[name])
            np.testing.assert_allclose(a.cpts_[name].sum(-1), 1.0)
        post = a.transform(data)["c"]
        assert post.shape == (len(data), 2)
        np.testing.assert_allclose(post.sum(1), 1.0)


def test_heldout_given_is_a_conditional(naive_bayes):
    """log p(x | x1) = log p(x) - log p(x1): scored in one go and in two."""
    data = observed_sample(naive_bayes, 80, 4)
    est = StandardVB(naive_bayes, random_state=0).fit(data)
    joint, counts = naive_bayes.check_data(data)
    x1_only = Network([Node("c", 2), Node("x1", 3, ["c"], observed=True)])
    est_x1 = StandardVB(x1_only)
    est_x1._log_cpts = est._log_cpts[:Plan(x1_only, x1_only.observed).n_entries]   # same leading layout
    est_x1.cpts_ = {}
    full = est.score(joint, counts)
    cond = est.score(joint, counts, given=["x1"])
    marginal = est_x1.score(np.repeat(joint[:, :1], counts, axis=0))
    np.testing.assert_allclose(full - cond, marginal, rtol=1e-12)


@pytest.mark.parametrize("fixture", ["naive_bayes", "chain"])
def test_transform_and_score_by_enumeration(request, fixture):
    """Posterior marginals and log p(observed) under the fitted CPTs, against
    summing the product of the CPTs over every hidden state."""
    net = request.getfixturevalue(fixture)
    data = observed_sample(net, 30, 1)
    est = CollapsedGibbs(net, max_iter=20, burn_in=5, random_state=0).fit(data)
    rows, counts = net.check_data(data)
    hidden = [net.index[h] for h in net.hidden]
    grid = np.array(list(itertools.product(*[range(int(net.states[v])) for v in hidden])))
    logp = np.zeros((len(rows), len(grid)))
    full = np.zeros((len(rows), len(grid), len(net.nodes)), dtype=np.int64)
    full[:, :, [net.index[o] for o in net.observed]] = rows[:, None, :]
    full[:, :, hidden] = grid[None, :, :]
    for v, name in enumerate(net.names):
        logp += np.log(est.cpts_[name][tuple(full[:, :, u] for u in net.parents[v] + [v])])
    evidence = logsumexp(logp, axis=1)
    np.testing.assert_allclose(est.score(rows, counts), np.dot(counts, evidence) / counts.sum(), rtol=1e-12)
    post = np.exp(logp - evidence[:, None])
    marginals = est.transform(rows)
    for i, h in enumerate(net.hidden):
        expect = np.stack([post[:, grid[:, i] == k].sum(axis=1) for k in range(int(net.states[hidden[i]]))], 1)
        np.testing.assert_allclose(marginals[h], expect, atol=1e-12)


def test_callback_stops_the_fit(naive_bayes):
    data = observed_sample(naive_bayes, 30, 2)
    est = StandardVB(naive_bayes, max_iter=50, tol=None, random_state=0)
    with est.reporting(lambda est, record: record["iteration"] == 3):
        est.fit(data)
    assert est.n_iter_ == 3 and len(est.history_) == 3


def test_parallel_schedule_threads_agree():
    """Two threads give the one-thread fit up to the order of the count sums."""
    net = random_network(3)
    data = observed_sample(net, 200, 3)
    fits = [StandardVB(net, max_iter=15, tol=None, n_threads=t, random_state=2).fit(data) for t in (1, 2)]
    for a, b in zip(*(f.history_ for f in fits)):
        np.testing.assert_allclose(list(a["bound"].values()), list(b["bound"].values()), rtol=1e-12)
    for name in net.names:
        np.testing.assert_allclose(fits[0].counts_[name], fits[1].counts_[name], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="n_threads"):
        StandardVB(net, n_threads=0).fit(data)
