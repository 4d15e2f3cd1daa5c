"""bnpcore.distributed on KOS: each supported kind of estimator fitted locally
(1 and 2 threads) and by ``bnpcore.distributed.fit`` on a LocalCluster of 1
and 2 worker processes (one thread each, one partition per worker).

Models (``--models``): ``svb`` StandardVB (parallel schedule), ``pc`` the
partially collapsed LDA sampler, ``hdp-tfsvi`` HDP TF-SVI and ``dp-svb`` the
truncated DP mixture SVI (online: one iteration = one minibatch).

Prints seconds per iteration, the driver's overhead per iteration and the
speed relative to the local single-threaded fit, as medians over iterations
2..n (the first iteration, shown apart, also ships the partitions to the
workers), and checks that every distributed fit equals the local fit (with as
many threads as partitions for StandardVB; any for the others). The driver's
overhead is the iteration's wall time minus the slowest partition's kernel
time (batch: scheduling, shipping the broadcast out and the partial counts
back, the client's reduction) or minus the worker's local step (online:
cutting the minibatch out of the partitions, shipping the K x W global state
and the statistics). Every row runs the same iterations from the same seed.

    python benchmarks/bench_distributed.py [--models svb pc hdp-tfsvi dp-svb] [--topics 20] [--iterations 20]
"""
import argparse

import numpy as np
from dask.distributed import Client, LocalCluster

from bnpcore import datasets, distributed, hdp, lda, mixture


def models(args):
    """name -> (estimator with n_threads, whether the local twin needs n_threads = partitions)."""
    K, n, seed = args.topics, args.iterations, args.seed
    return {
        "svb": (lambda t: lda.StandardVB(n_components=K, max_iter=n, tol=None, random_state=seed, n_threads=t), True),
        "pc": (lambda t: lda.PartiallyCollapsedGibbs(n_components=K, max_iter=n, burn_in=n // 2, random_state=seed,
                                                     n_threads=t), False),
        "hdp-tfsvi": (lambda t: hdp.TruncationFreeSVI(batch_size=args.batch_size, random_state=seed, n_threads=t),
                      False),
        "dp-svb": (lambda t: mixture.StochasticVB(n_components=K, batch_size=args.batch_size, random_state=seed,
                                                  n_threads=t), False),
    }


def timing(est):
    hist = est.history_
    # medians over iterations 2..n: the first iteration of a distributed fit also ships the partitions
    per_it = np.median(np.diff([h["fit_seconds"] for h in hist]))
    driver = np.median([h["driver_seconds"] for h in hist[1:]]) if "driver_seconds" in hist[0] else float("nan")
    return per_it, driver, hist[0]["fit_seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["svb", "pc", "hdp-tfsvi", "dp-svb"])
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=20, help="of the batch models")
    ap.add_argument("--batch-size", type=int, default=256, help="of the online models (one epoch)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    corpus = datasets.load_kos()
    table = models(args)
    print(f"KOS: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.nnz} pairs, {corpus.n_tokens} tokens; "
          f"K = {args.topics}, {args.iterations} iterations (batch), minibatches of {args.batch_size} (online)")
    fits = {(name, "local", t): table[name][0](t).fit(corpus) for name in args.models for t in (1, 2)}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
                Client(cl) as client:
            for name in args.models:
                fits[name, "dask", workers] = distributed.fit(table[name][0](1), corpus, client)
    print(f"{'model':<10} {'run':<24} {'s/iteration':>12} {'driver s/it':>12} {'driver %':>9} {'speed':>7} "
          f"{'1st it s':>9}  equals local")
    for name in args.models:
        base = timing(fits[name, "local", 1])[0]
        for kind, n in ((k, n) for k in ("local", "dask") for n in (1, 2)):
            per_it, driver, first = timing(fits[name, kind, n])
            label = f"local, n_threads={n}" if kind == "local" else f"LocalCluster, {n} worker(s)"
            same = ""
            if kind == "dask":
                twin = fits[name, "local", n if table[name][1] else 1]
                same = "yes" if np.array_equal(fits[name, kind, n].components_, twin.components_) else "NO"
            share = f"{100 * driver / per_it:8.1f}%" if np.isfinite(driver) else f"{'':>9}"
            driver_text = f"{driver:12.4f}" if np.isfinite(driver) else f"{'':>12}"
            print(f"{name:<10} {label:<24} {per_it:12.4f} {driver_text} {share} {base / per_it:6.2f}x {first:9.3f}"
                  f"  {same}")


if __name__ == "__main__":
    main()
