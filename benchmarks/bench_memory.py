"""Peak memory of training from an on-disk corpus, against the corpus size on disk.

For generated HDP corpora of increasing size (``bnpcore.datasets.write_synthetic``:
log-normal document lengths with mean 100, Zipf word frequencies, 5000 words,
50 true topics), each estimator is trained in a fresh subprocess on
``Corpus.open(path)`` and the subprocess reports its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``; the memory-mapped pages it reads
count in it). The same is done for a subprocess that only imports bnpcore and
opens the corpus (the baseline). Columns:

* disk MiB: the corpus files (indptr, word ids, counts);
* peak MiB: peak RSS of the fit; over base: minus the baseline;
* B/token: the slope of peak RSS against the number of tokens over all sizes
  (a least-squares line per estimator), i.e. the memory each further token costs.

Estimators: ``hdp.TruncationFreeSVI`` (online, one pass, minibatches of 500
read from the memory map), the collapsed samplers ``lda.CollapsedGibbs``
(K = 20) and ``hdp.DirectAssignmentGibbs`` (from 20 topics), 2 sweeps each
(1 averaged), with their default ``doc_topic_`` (a topic per token and the
fitted D x K proportions), and the partially collapsed samplers ``lda.PartiallyCollapsedGibbs`` (K = 20) and
``hdp.PartiallyCollapsedGibbs`` (from 20 topics), 3 sweeps each (2 averaged),
``store_doc_topic=False``: a label per token, nothing per document, the corpus
swept block by block.

Usage::

    python benchmarks/bench_memory.py [--sizes 10000 30000 100000 300000 1000000] [--data DIR]
                                      [--estimators NAME ...]

Corpora are generated once into ``--data`` (default: a folder in the system
temporary directory) and reused by later runs. Results: benchmarks/results/bench_memory.txt.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ESTIMATORS = {
    "hdp.TruncationFreeSVI": "from bnpcore.hdp import TruncationFreeSVI as E; "
                             "est = E(batch_size=500, n_epochs=1, random_state=0)",
    "lda.CollapsedGibbs": "from bnpcore.lda import CollapsedGibbs as E; "
                          "est = E(n_components=20, max_iter=2, burn_in=1, random_state=0)",
    "hdp.DirectAssignmentGibbs": "from bnpcore.hdp import DirectAssignmentGibbs as E; "
                                 "est = E(n_components=20, max_iter=2, burn_in=1, random_state=0)",
    "lda.PartiallyCollapsed": "from bnpcore.lda import PartiallyCollapsedGibbs as E; "
                              "est = E(n_components=20, max_iter=3, burn_in=1, store_doc_topic=False, "
                              "random_state=0)",
    "hdp.PartiallyCollapsed": "from bnpcore.hdp import PartiallyCollapsedGibbs as E; "
                              "est = E(n_components=20, max_iter=3, burn_in=1, store_doc_topic=False, "
                              "random_state=0)",
}

CHILD = """
import json, resource, sys, time
from bnpcore.corpus import Corpus
corpus = Corpus.open(sys.argv[1])
{setup}
tick = time.perf_counter()
{fit}
print(json.dumps({{"seconds": time.perf_counter() - tick,
                   "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""


def run_child(path, setup="", fit="corpus.n_tokens"):
    code = CHILD.format(setup=setup, fit=fit)
    out = subprocess.run([sys.executable, "-c", code, path], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def corpus_for(n_docs, data):
    from bnpcore.corpus import Corpus
    from bnpcore.datasets import write_synthetic
    path = os.path.join(data, f"hdp_{n_docs}")
    if not os.path.isdir(path):
        tick = time.perf_counter()
        write_synthetic(path, n_docs, n_words=5000, n_topics=50, mean_length=100, random_state=0)
        print(f"generated {path} in {time.perf_counter() - tick:.0f} s", flush=True)
    return path, Corpus.open(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 30000, 100000, 300000, 1000000])
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "bnpcore-bench-memory"))
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    header = f"{'estimator':<22} {'docs':>8} {'tokens':>11} {'disk MiB':>9} {'peak MiB':>9} {'over base':>9} " \
             f"{'seconds':>8}"
    print(header)
    rows = []
    for n_docs in args.sizes:
        path, corpus = corpus_for(n_docs, args.data)
        disk = sum(os.path.getsize(os.path.join(path, f)) for f in ("indptr.bin", "indices.bin", "counts.bin"))
        base = run_child(path)["peak_kib"] * 1024
        for name in args.estimators:
            res = run_child(path, ESTIMATORS[name], "est.fit(corpus)")
            peak = res["peak_kib"] * 1024
            rows.append((name, n_docs, corpus.n_tokens, disk, peak, base))
            print(f"{name:<22} {n_docs:>8} {corpus.n_tokens:>11} {disk / 2**20:>9.1f} {peak / 2**20:>9.1f} "
                  f"{(peak - base) / 2**20:>9.1f} {res['seconds']:>8.1f}", flush=True)
    print("\nslope of peak RSS over tokens (least squares over the sizes above):")
    for name in args.estimators:
        mine = [r for r in rows if r[0] == name]
        if len(mine) >= 2:
            tokens = np.array([r[2] for r in mine], dtype=float)
            peaks = np.array([r[4] for r in mine], dtype=float)
            disk = np.array([r[3] for r in mine], dtype=float)
            print(f"  {name:<22} {np.polyfit(tokens, peaks, 1)[0]:6.2f} bytes/token "
                  f"(the corpus on disk: {np.polyfit(tokens, disk, 1)[0]:.2f} bytes/token)")


if __name__ == "__main__":
    main()
