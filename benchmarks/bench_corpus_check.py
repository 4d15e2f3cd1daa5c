"""What the checks of ``Corpus.open`` cost: open time with the streamed
checks (row pointers, word ids, counts, CRC-32 checksums) against open time
without them (the metadata and file sizes only, as before the checks), and
against one pass of ``Corpus.fingerprint`` (a CRC-32 of the same files) and
one sweep of ``lda.StandardVB`` for scale. KOS written to disk, and a
synthetic corpus from ``bnpcore.datasets.write_synthetic``; page cache warm
(each file read once first), best of 5.

    OMP_NUM_THREADS=1 python benchmarks/bench_corpus_check.py [n_docs]

With ``--checkpoints``: what the checks of a restored checkpoint state cost
(``BatchState.validate``, once per ``fit(X, resume=True)``) against one sweep
of the state, on KOS.

    OMP_NUM_THREADS=1 python benchmarks/bench_corpus_check.py --checkpoints
"""
import os
import sys
import tempfile
import time

from bnpcore import corpus_io, lda
from bnpcore.corpus import Corpus, write
from bnpcore.datasets import load_kos, write_synthetic


def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        tick = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tick)
    return min(times)


def unchecked_open(path):
    verify = corpus_io._verify_files
    corpus_io._verify_files = lambda arrays, path, meta: None
    try:
        return Corpus.open(path)
    finally:
        corpus_io._verify_files = verify


def checkpoints():
    from bnpcore import hdp, load
    from bnpcore.inference.batch import _STATE_CLASSES
    X = load_kos()
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.npz")
        for est in (lda.CollapsedGibbs(n_components=50, max_iter=5, random_state=0, n_threads=1),
                    lda.CollapsedVB(n_components=50, max_iter=5, random_state=0, n_threads=1),
                    lda.StandardVB(n_components=50, max_iter=5, random_state=0, n_threads=1),
                    hdp.DirectAssignmentGibbs(max_iter=5, random_state=0, n_threads=1),
                    hdp.CollapsedVB(max_iter=5, random_state=0, n_threads=1)):
            est.fit(X, max_seconds=1e-9, checkpoint=path)
            times = []
            for _ in range(3):          # the state as fit(X, resume=True) rebuilds it, then its checks
                resume = load(path)._resume
                state = object.__new__(_STATE_CLASSES[resume["state_class"]])
                state.__dict__.update(resume["state"])
                tick = time.perf_counter()
                state.validate(X)
                times.append(time.perf_counter() - tick)
            state.restore(X)
            sweep = best(state.sweep, repeat=2)
            print(f"{type(est).__module__.split('.')[-1] + '.' + type(est).__name__:<28} "
                  f"{type(state).__name__:<18} validate {min(times):.3f} s   one sweep {sweep:.3f} s")
    print(f"load: {os.getloadavg()}")


def main():
    if sys.argv[1:] == ["--checkpoints"]:
        return checkpoints()
    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        write(load_kos(), os.path.join(tmp, "kos"))
        write_synthetic(os.path.join(tmp, "synthetic"), n_docs, n_words=20000, n_topics=50, mean_length=100,
                        random_state=0)
        print(f"{'corpus':<12} {'nnz':>11} {'MB':>7} {'open, checked':>14} {'unchecked':>10} {'check MB/s':>10} "
              f"{'fingerprint':>11} {'SVB sweep':>10}")
        for name in ("kos", "synthetic"):
            path = os.path.join(tmp, name)
            size = sum(os.path.getsize(os.path.join(path, f + ".bin")) for f in ("indptr", "indices", "counts"))
            corpus = Corpus.open(path)
            checked = best(lambda: Corpus.open(path))
            unchecked = best(lambda: unchecked_open(path))
            fingerprint = best(corpus.fingerprint)
            est = lda.StandardVB(n_components=20, max_iter=1, n_threads=1, random_state=0)
            sweep = best(lambda: est.fit(corpus), repeat=2)
            print(f"{name:<12} {corpus.nnz:>11,} {size / 1e6:>7.1f} {checked:>13.3f}s {unchecked:>9.4f}s "
                  f"{size / 1e6 / (checked - unchecked):>10.0f} {fingerprint:>10.3f}s {sweep:>9.2f}s")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
