"""Collapsed SVB, collapsed Gibbs and the hybrid on a 10-node Bayesian network
with synthetic data: held-out log-likelihood of the observed nodes against wall
time ([HYB] section 6).

The network: 10 discrete nodes in a random DAG (each node up to two parents
among the earlier ones, fixed seed), the first 4 hidden, 3-5 states each,
Dirichlet priors 0.5 on every CPT column. The data: CPTs drawn from Dirichlet
priors 0.3 (peaked, so that some configurations are frequent and many are
seen once), then ``--train`` training and ``--test`` held-out cases by
ancestral sampling; the observed columns are merged into distinct
configurations with counts (the N-hat of [HYB] section 6).

Every method is scored every ``--eval-every`` sweeps on the held-out cases:
mean per case of log p(observed) under the posterior-mean CPTs (samplers:
the probability averaged over the evaluated samples after burn-in, [HYB] eq 31).
Times are the fit's own (``fit_seconds``, scoring excluded), one thread.
The reference line scores the held-out cases under the true CPTs.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_bayesnet.py [--train 20000] [--test 2000]
        [--sweeps 100] [--eval-every 10] [--seed 0]
"""
import argparse

import numpy as np

from bnpcore.bayesnet import CollapsedGibbs, Hybrid, Network, Node, StandardVB
from bnpcore.bayesnet.inference import Scorer


def ten_node_network(seed, prior):
    """The benchmark's DAG: parents among earlier nodes, the first four hidden."""
    rng = np.random.default_rng(seed)
    nodes = []
    for i in range(10):
        k = int(rng.integers(1 if i else 0, min(i, 2) + 1))
        parents = [f"n{p}" for p in sorted(rng.choice(i, size=k, replace=False))]
        nodes.append(Node(f"n{i}", int(rng.integers(3, 6)), parents, observed=i >= 4, prior=prior))
    return Network(nodes)


def synthetic(seed, n_train, n_test):
    truth = ten_node_network(seed, 0.3)
    states, cpts = truth.sample(n_train + n_test, random_state=seed)
    observed = states[:, [truth.index[o] for o in truth.observed]]
    return truth, cpts, observed[:n_train], observed[n_train:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--sweeps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    truth, cpts, train, test = synthetic(args.seed, args.train, args.test)
    net = ten_node_network(args.seed, 0.5)
    data, counts = net.check_data(train)
    hdata, hcounts = net.check_data(test)
    true_log_cpts = np.concatenate([np.log(cpts[name]).ravel() for name in net.names])
    reference = float(np.dot(hcounts, Scorer(net, hdata).log_prob(true_log_cpts)) / hcounts.sum())
    print(f"network: {', '.join(f'{n.name}{list(n.parents)}:{n.n_states}' for n in net.nodes)}; "
          f"hidden {net.hidden}")
    print(f"train: {args.train} cases in {len(counts)} distinct configurations, "
          f"{np.mean(counts == 1):.0%} of them seen once ({counts[counts == 1].sum() / counts.sum():.1%} of cases); "
          f"test: {args.test} cases")
    print(f"held-out log-likelihood per case under the true CPTs: {reference:.4f}\n")
    methods = [
        ("SVB parallel", StandardVB(net, max_iter=args.sweeps, tol=None, random_state=args.seed)),
        ("SVB sequential", StandardVB(net, max_iter=args.sweeps, tol=None, schedule="sequential",
                                      random_state=args.seed)),
        ("Gibbs", CollapsedGibbs(net, max_iter=args.sweeps, burn_in=10, random_state=args.seed)),
        ("Hybrid r=1", Hybrid(net, threshold=1, max_iter=args.sweeps, burn_in=10, random_state=args.seed)),
        ("Hybrid r=3", Hybrid(net, threshold=3, max_iter=args.sweeps, burn_in=10, random_state=args.seed)),
    ]
    print(f"{'method':<16}{'sweep':>6}{'seconds':>10}{'heldout':>12}")
    for name, est in methods:
        est.fit(data, counts, heldout=hdata, heldout_counts=hcounts, eval_every=args.eval_every)
        for rec in est.history_:
            if "heldout_loglik" in rec:
                print(f"{name:<16}{rec['iteration']:>6}{rec['fit_seconds']:>10.3f}{rec['heldout_loglik']:>12.4f}")


if __name__ == "__main__":
    main()
