"""The work inside one iteration at the limits of ``bnpcore._validation``
(``LOCAL_SWEEPS_MAX``, ``INNER_MAX``), where ``max_seconds`` is not checked:
on KOS, the first minibatch of 100 documents of ``hdp.TruncationFreeSVI`` at
``local_sweeps`` 5 (the default) and 1000, and a sweep of
``hdp.DirectAssignmentGibbs`` (20 starting topics) at ``n_concentration_rounds``
5 (the default) and 1000. One thread; prints the load average before and after.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_inner_caps.py
"""
import os
import time
import warnings

from bnpcore import datasets, hdp


def main():
    warnings.simplefilter("ignore")
    X = datasets.load_kos()
    print("load average", os.getloadavg())
    for sweeps in (5, 100, 1000):
        est = hdp.TruncationFreeSVI(local_sweeps=sweeps, n_samples=1, batch_size=100, random_state=0, n_threads=1)
        tick = time.perf_counter()
        try:
            est.fit(X, max_documents=100)
        except ValueError as exc:       # beyond the limit
            print(f"tf-svi local_sweeps={sweeps}: {exc}")
            continue
        print(f"tf-svi local_sweeps={sweeps}: first minibatch of 100 documents {time.perf_counter() - tick:.2f} s")
    for rounds in (5, 1000):
        est = hdp.DirectAssignmentGibbs(n_concentration_rounds=rounds, n_components=20, max_iter=3, burn_in=1,
                                        random_state=0, n_threads=1)
        tick = time.perf_counter()
        est.fit(X)
        print(f"hdp gibbs n_concentration_rounds={rounds}: {(time.perf_counter() - tick) / 3:.2f} s per sweep")
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
