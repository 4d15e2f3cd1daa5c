"""Every topic-model family of bnpcore on KOS for the same wall-clock budget: held-out
per-word log-likelihood by document completion, topics, iterations done.

The protocol of ``repro_003.py``: 10% of the documents held out
(``split_documents(0.1, random_state=seed)``), each held-out document's tokens split
80/20, proportions inferred from the 80% with the topics fixed, the 20% scored.
Samplers are scored on their final sample. The table behind docs/choosing.md::

    OMP_NUM_THREADS=1 python benchmarks/bench_budget.py --seconds 30
"""
import argparse

from bnpcore import hdp, lda
from bnpcore.datasets import load_kos

MANY = 10 ** 6      # iterations: the time budget ends every run


def estimators(seed):
    lda_prior = dict(alpha=0.1, eta=0.01, random_state=seed)
    return [
        ("lda.CollapsedGibbs K=50", lda.CollapsedGibbs(n_components=50, max_iter=MANY, burn_in=MANY - 1, **lda_prior)),
        ("lda.CollapsedVB CVB0 K=50", lda.CollapsedVB(n_components=50, order=0, max_iter=MANY, tol=0, **lda_prior)),
        ("lda.StandardVB K=50", lda.StandardVB(n_components=50, max_iter=MANY, tol=0, **lda_prior)),
        ("hdp.DirectAssignmentGibbs K0=100", hdp.DirectAssignmentGibbs(n_components=100, eta_tot=100.0, max_iter=MANY,
                                                                        burn_in=MANY - 1, random_state=seed)),
        ("hdp.CollapsedVB K=120", hdp.CollapsedVB(n_components=120, init="random", eta_tot=100.0,
                                                  max_iter=MANY, random_state=seed)),
        ("hdp.TruncationFreeSVI", hdp.TruncationFreeSVI(eta=0.01, batch_size=100, n_epochs=MANY, random_state=seed)),
        ("hdp.DirectAssignmentVB K=100", hdp.DirectAssignmentVB(n_components=100, split_merge=False, max_iter=MANY,
                                                                random_state=seed)),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="run only the estimators whose name contains this text")
    args = parser.parse_args(argv)
    train, test = load_kos().split_documents(0.1, random_state=args.seed)
    observed, heldout = test.split_tokens(0.2, random_state=args.seed)
    print(f"# KOS, {args.seconds:g} s per estimator, held-out by document completion")
    print(f"{'estimator':34} {'topics':>6} {'heldout':>9} {'iterations':>10}")
    for name, est in estimators(args.seed):
        if args.only not in name:
            continue
        est.fit(train, max_seconds=args.seconds)
        print(f"{name:34} {est.n_components_:6d} {est.heldout_log_likelihood(observed, heldout):9.4f} "
              f"{len(est.history_):10d}", flush=True)


if __name__ == "__main__":
    main()
