"""CV-HDP (hdp.CollapsedVB) against the project's CVB0 (lda.CollapsedVB, order=0)
per token and topic, at equal K, in one run (issue 17's target: within 3x).

Both fit the same KOS training tokens for ``--iters`` iterations; the time per
iteration is the median over iterations 2.. of the whole iteration (CV-HDP's
sweep plus its hyperparameter updates and bound, CVB0's sweep), divided by
tokens x K. CPU seconds of the process (between the fit's per-iteration reports)
are printed beside wall-clock ones: on a shared machine they are the less
disturbed measure, and the ratio is taken of them. CV-HDP's delayed-update
schedule at ``--threads`` threads is timed in the same run (its CPU seconds add
up the threads).

    OMP_NUM_THREADS=1 python benchmarks/bench_cvhdp.py --k 120 --iters 5
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import iteration_seconds, token_split  # noqa: E402

from bnpcore import hdp, lda  # noqa: E402


def per_iteration(make, observed):
    """(wall, CPU) seconds per iteration: medians over the iterations after the first."""
    model = make()
    stamps = []
    with model.reporting(lambda est, rec: stamps.append(time.process_time())):
        model.fit(observed)
    return float(np.median(iteration_seconds(model.history_)[1:])), float(np.median(np.diff(stamps)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="kos")
    ap.add_argument("--k", type=int, default=120)
    ap.add_argument("--iters", type=int, default=5, help="at least 3")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    _, observed, _ = token_split(args.data)
    K, n = args.k, args.iters
    runs = [
        ("CVB0 (lda.CollapsedVB order=0)", 1,
         lambda: lda.CollapsedVB(n_components=K, order=0, max_iter=n, tol=0.0, random_state=0)),
        ("CV-HDP sequential", 1, lambda: hdp.CollapsedVB(n_components=K, init="random", max_iter=n, random_state=0)),
        (f"CV-HDP delayed, {args.threads} thr", args.threads,
         lambda: hdp.CollapsedVB(n_components=K, init="random", max_iter=n, schedule="delayed", n_threads=args.threads,
                                 random_state=0)),
    ]
    scale = observed.n_tokens * K
    print(f"{args.data}: {observed.n_tokens} training tokens, {observed.nnz} (document, word) pairs, K = {K}, "
          f"{n} iterations each")
    print(f"{'algorithm':32} {'thr':>3} {'s/iter':>8} {'CPU s/iter':>10} {'CPU ns/(token*topic)':>20} "
          f"{'M token-it/CPU s':>16} {'CPU x CVB0':>10}")
    ref = None
    for name, threads, make in runs:
        wall, cpu = per_iteration(make, observed)
        ref = ref or cpu
        print(f"{name:32} {threads:3d} {wall:8.3f} {cpu:10.3f} {1e9 * cpu / scale:20.2f} "
              f"{observed.n_tokens / cpu / 1e6:16.3f} {cpu / ref:10.2f}")


if __name__ == "__main__":
    main()
