"""Standard VB LDA (parallel schedule) on KOS: the local fit against
``bnpcore.distributed.fit`` on a LocalCluster of 1 and 2 worker processes
(one thread each, one partition per worker).

Prints seconds per iteration, the driver's overhead per iteration (the
iteration's wall time minus the slowest partition's kernel time: scheduling,
shipping the K x W word factor out and the K x W partial counts back, the
client's M-step and reduction) and the speed relative to the local
single-threaded fit, as medians over iterations 2..n (the first iteration,
shown apart, also ships the partitions to the workers), and checks that every distributed fit equals the local fit with as many
threads as partitions. Every row runs the same iterations from the same seed.

    python benchmarks/bench_distributed.py [--topics 20] [--iterations 20]
"""
import argparse

import numpy as np
from dask.distributed import Client, LocalCluster

from bnpcore import datasets, distributed, lda


def run(label, fit, n_iter):
    est = fit()
    hist = est.history_
    assert len(hist) == n_iter
    # medians over iterations 2..n: the first iteration of a distributed fit also ships the partitions
    per_it = np.median(np.diff([h["fit_seconds"] for h in hist]))
    driver = np.median([h["driver_seconds"] for h in hist[1:]]) if "driver_seconds" in hist[0] else float("nan")
    first = hist[0]["fit_seconds"]
    return label, per_it, driver, first, est


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    corpus = datasets.load_kos()
    params = {"n_components": args.topics, "max_iter": args.iterations, "tol": None, "random_state": args.seed}
    print(f"KOS: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.nnz} pairs, {corpus.n_tokens} tokens; "
          f"K = {args.topics}, {args.iterations} iterations")
    rows, local = [], {}
    for threads in (1, 2):
        rows.append(run(f"local, n_threads={threads}",
                        lambda: lda.StandardVB(**params, n_threads=threads).fit(corpus), args.iterations))
        local[threads] = rows[-1][-1]
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
                Client(cl) as client:
            rows.append(run(f"LocalCluster, {workers} worker(s)",
                            lambda: distributed.fit(lda.StandardVB(**params), corpus, client), args.iterations))
        same = np.array_equal(rows[-1][-1].components_, local[workers].components_)
        rows[-1] = rows[-1][:-1] + (same,)
    base = rows[0][1]
    print(f"{'run':<26} {'s/iteration':>12} {'driver s/it':>12} {'driver %':>9} {'speed':>7} {'1st it s':>9}"
          "  equals local")
    for label, per_it, driver, first, extra in rows:
        same = "" if not isinstance(extra, bool) else ("yes" if extra else "NO")
        share = f"{100 * driver / per_it:8.1f}%" if np.isfinite(driver) else f"{'':>9}"
        driver_text = f"{driver:12.4f}" if np.isfinite(driver) else f"{'':>12}"
        print(f"{label:<26} {per_it:12.4f} {driver_text} {share} {base / per_it:6.2f}x {first:9.3f}  {same}")


if __name__ == "__main__":
    main()
