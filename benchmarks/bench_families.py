"""Every estimator family, seeded, on KOS: time, components and held-out score,
to compare two bnpcore builds side by side (a refactoring must keep results and
speed).

Run it with each build's Python, alternating, and compare the tables; ``--save``
writes the fitted ``topics_`` of every fit and ``--compare`` reports, fit by
fit, whether another run's are bit-identical (or their largest difference)::

    OMP_NUM_THREADS=1 /old/venv/bin/python benchmarks/bench_families.py --save old.npz
    OMP_NUM_THREADS=1 python benchmarks/bench_families.py --compare old.npz

Parameter names are looked up in the installed build (round-1 builds call the
iteration count ``n_iter``, ``n_sweeps`` or ``max_passes``), so the same script
runs on both. Held-out: topic models by ``heldout_log_likelihood`` on a 10%
token split of the training documents, mixtures by ``score`` on 10% held-out
documents. Times: shortest of ``--repeats`` fits, wall-clock.
"""
import argparse
import time

import numpy as np

from bnpcore import hdp, lda, mixture
from bnpcore.datasets import load_kos


def make(cls, iterations=None, components=None, **params):
    """``cls(**params)`` with the iteration and component counts under whatever
    names this build gives them."""
    names = cls._param_names()
    if iterations is not None:
        params[next(n for n in ("max_iter", "n_iter", "n_sweeps", "max_passes") if n in names)] = iterations
    if components is not None:
        params[next(n for n in ("n_components", "init_topics", "n_topics") if n in names)] = components
    return cls(**params)


# name -> (estimator factory, is a topic model)
FITS = {
    "LDA CGS K=100, 20 sweeps": (lambda: make(lda.CollapsedGibbs, 20, 100, burn_in=5, random_state=0), True),
    "LDA CVB0 K=100, 20": (lambda: make(lda.CollapsedVB, 20, 100, order=0, tol=None, random_state=0), True),
    "LDA SVB parallel K=50, 20": (lambda: make(lda.StandardVB, 20, 50, tol=None, n_threads=1, random_state=0),
                                  True),
    "LDA SVB/CGS K=50, 20": (lambda: make(lda.Hybrid, 20, 50, burn_in=5, random_state=0), True),
    "G-HDP from 1 topic, 20 sweeps": (lambda: make(hdp.DirectAssignmentGibbs, 20, 1, burn_in=10, random_state=0),
                                      True),
    "G-HDP from 100 topics, 20": (lambda: make(hdp.DirectAssignmentGibbs, 20, 100, burn_in=10, random_state=0),
                                  True),
    "CV-HDP K=120, 10": (lambda: make(hdp.CollapsedVB, 10, 120, random_state=0), True),
    "HDP TF-SVI, 3 epochs": (lambda: hdp.TruncationFreeSVI(n_epochs=3, random_state=0), True),
    "HDP online VB T=150, 1 epoch": (lambda: make(hdp.OnlineVB, None, 150, random_state=0), True),
    "HDP DA-VB online, 2 epochs": (lambda: make(hdp.DirectAssignmentVB, 2, 20, random_state=0), True),
    "HDP DA-VB batch, 4 iterations": (lambda: make(hdp.DirectAssignmentVB, 4, 20, mode="batch", random_state=0),
                                      True),
    "DP TF-SVI, 3 epochs": (lambda: mixture.TruncationFreeSVI(n_epochs=3, random_state=0), False),
    "DP SVB T=100, 3 epochs": (lambda: mixture.StochasticVB(n_components=100, n_epochs=3, random_state=0), False),
    "ADF-NRM IG prior": (lambda: mixture.ADF(a=10.0, sigma=0.5, tau=100.0, eta=0.1), False),
    "EP-NRM IG, 4 passes": (lambda: make(mixture.EP, 4, None, a=10.0, sigma=0.5, tau=100.0, eta=0.1, tol=0.0),
                            False),
    "NGGP Gibbs IG, 6 sweeps": (lambda: make(mixture.CollapsedGibbs, 6, None, a=10.0, sigma=0.5, tau=100.0,
                                             eta=0.1, n_samples=2, random_state=0), False),
}


def _compared(reference, name, est):
    if reference is None or name not in reference.files:
        return "-"
    old, new = reference[name], est.topics_
    if old.shape != new.shape:
        return f"shapes differ {old.shape} vs {new.shape}"
    if np.array_equal(old, new):
        return "identical"
    return f"max relative difference {np.abs(old - new).max() / np.abs(old).max():.1e}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", nargs="*", help="substrings of the fits to run")
    p.add_argument("--save", help="write every fit's topics_ to this .npz")
    p.add_argument("--compare", help="compare with the topics_ of a --save file")
    args = p.parse_args(argv)
    corpus = load_kos()
    docs_train, docs_test = corpus.split_documents(0.1, random_state=0)
    observed, heldout = corpus.split_tokens(0.1, random_state=0)
    saved = {}
    print(f"{'fit':32} {'seconds':>8} {'K':>5} {'held-out/word':>13}  topics_ vs --compare")
    reference = np.load(args.compare) if args.compare else None
    for name, (factory, topic_model) in FITS.items():
        if args.only and not any(s in name for s in args.only):
            continue
        train = observed if topic_model else docs_train
        best, est = np.inf, None
        for _ in range(args.repeats):
            est = factory()
            start = time.perf_counter()
            est.fit(train)
            best = min(best, time.perf_counter() - start)
        ll = est.heldout_log_likelihood(observed, heldout) if topic_model else est.score(docs_test)
        saved[name] = est.topics_
        print(f"{name:32} {best:8.3f} {est.n_components_:5d} {ll:13.6f}  {_compared(reference, name, est)}",
              flush=True)
    if args.save:
        np.savez(args.save, **saved)


if __name__ == "__main__":
    main()
