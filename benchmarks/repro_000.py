"""Reproduction of Wang & Blei 2012 ([TF]) §3 (Figures 3 and 4) on KOS: truncation-free SVI against
truncated stochastic mean-field VI (truncation 300) for the DP mixture
(eta = 0.5, a = 1) and the HDP topic model (eta = 0.01, gamma = alpha = 1), over
minibatch sizes S in {1, 2, 5, 10, 50, 100, 500} (C. Wang and D. M. Blei,
"Truncation-free online variational inference for Bayesian nonparametric
models", NIPS 2012).

Metrics: the [TF] S.3 held-out per-word log-likelihood of whole documents of a
fixed 10% of the corpus (DP: closed form, the mixtures' ``score``; HDP:
importance sampling, ``heldout_document_log_likelihood``, 50 burn-in sweeps,
``--samples`` samples; the HDP's ``score`` is document completion instead;
do not compare DP with HDP numbers, T-TF-5), and the
number of components: for truncation-free SVI the instantiated ones (after
pruning), for the truncated models those with at least one expected document
(DP) / word (HDP) ("used"); the trajectory of that number over the run shows
growth from 0 and shrinkage from 300 (T-TF-3).

The paper ran every method for 10 hours on Nature / New York Times; here every
run sees the same number of documents (``--epochs`` passes over the training
set), or gets the same wall time (``--seconds``). Results are appended to a
JSON-lines file as each run finishes (``--out``), and the table is printed at
the end. Example (the shared machine: single-threaded, in the background)::

    OMP_NUM_THREADS=1 nohup python benchmarks/repro_000.py --epochs 10 > repro_000.txt &
    python benchmarks/repro_000.py --models hdp --doc-init uniform   # the HDP baseline as the reference code runs it
    python benchmarks/repro_000.py --models dp --batch-sizes 10,100 --epochs 2    # a quick subset
"""
import argparse
import json
import os
import time

from bnpcore import hdp, mixture
from bnpcore.cli import load_data

BATCH_SIZES = (1, 2, 5, 10, 50, 100, 500)


def estimators(model, S, args):
    """(name, estimator) pairs of one model family at minibatch size S ([TF] §3 settings)."""
    common = dict(batch_size=S, n_epochs=args.epochs, random_state=args.seed, prune_every=args.prune_every)
    if model == "dp":
        return [("truncation-free", mixture.TruncationFreeSVI(eta=0.5, a=1.0, **common)),
                ("truncated", mixture.StochasticVB(n_components=args.truncation, eta=0.5, a=1.0, **common))]
    heldout = dict(heldout_samples=args.samples, n_threads=1)
    return [("truncation-free", hdp.TruncationFreeSVI(eta=0.01, gamma=1.0, alpha=1.0, n_samples=1, **common,
                                                      **heldout)),
            ("truncated", hdp.OnlineVB(n_components=args.truncation, n_atoms=15, eta=0.01, gamma=1.0, alpha=1.0,
                                       doc_init=args.doc_init, **common, **heldout))]


def run(model, S, name, est, train, test, args):
    fit = {}
    if args.seconds is not None:
        est.set_params(n_epochs=10 ** 6)
        fit["max_seconds"] = args.seconds
    start = time.perf_counter()
    est.fit(train, **fit)
    seconds = time.perf_counter() - start
    t0 = time.perf_counter()
    # the papers' metric: whole held-out documents (S.3; in closed form for the DP mixtures' score)
    heldout = est.heldout_document_log_likelihood(test) if model == "hdp" else est.score(test)
    every = max(len(est.history_) // args.trajectory_points, 1)      # one record per minibatch: thin it
    return {"model": model, "S": S, "algorithm": name, "heldout_loglik": heldout,
            "n_components": est.n_components_, "n_used": est.history_[-1]["n_used"] if est.history_ else None,
            "documents": est.n_documents_seen_, "train_seconds": seconds, "score_seconds": time.perf_counter() - t0,
            "trajectory": [(r["n_documents"], r["n_components"], r["n_used"]) for r in est.history_[::every]]}


def print_table(results):
    print(f"\n{'model':5} {'S':>4}  {'algorithm':16} {'heldout/word':>12} {'K':>5} {'used':>5} "
          f"{'documents':>9} {'train s':>8}  used over the run")
    for r in results:
        traj = [u for _, _, u in r["trajectory"]]
        step = max(len(traj) // 8, 1)
        shown = " ".join(str(u) for u in traj[::step][:8] + traj[-1:]) if traj else ""
        print(f"{r['model']:5} {r['S']:4d}  {r['algorithm']:16} {r['heldout_loglik']:12.4f} {r['n_components']:5d} "
              f"{r['n_used'] if r['n_used'] is not None else '-':>5} {r['documents']:9d} {r['train_seconds']:8.1f}"
              f"  {shown}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="dp,hdp", help="comma-separated subset of dp,hdp")
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training documents")
    parser.add_argument("--seconds", type=float, default=None, help="wall time per run instead of --epochs")
    parser.add_argument("--truncation", type=int, default=300)
    parser.add_argument("--doc-init", default="ranked", choices=("ranked", "uniform"),
                        help="document start of hdp.OnlineVB: 'uniform' is the reference code's, which collapses "
                             "to one topic on KOS (a degenerate baseline); 'ranked' is bnpcore's default")
    parser.add_argument("--prune-every", type=int, default=20000)
    parser.add_argument("--samples", type=int, default=1000, help="HDP importance samples per held-out document")
    parser.add_argument("--trajectory-points", type=int, default=100,
                        help="records of the number of components kept per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="kos", help="'kos' or a UCI docword.*.txt[.gz] file")
    parser.add_argument("--vocab", default=None, help="vocab.*.txt of a UCI --data file")
    parser.add_argument("--out", default="repro_000.jsonl")
    args = parser.parse_args(argv)
    corpus = load_data(args.data, args.vocab)
    train, test = corpus.split_documents(0.1, random_state=args.seed)
    budget = (f"{args.seconds} s per run" if args.seconds
              else f"{args.epochs} epochs ({args.epochs * train.n_docs} documents)")
    print(f"[TF] reproduction on {corpus}: {train.n_docs} training / {test.n_docs} held-out documents; {budget}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}", flush=True)
    results = []
    for model in args.models.split(","):
        for S in (int(s) for s in args.batch_sizes.split(",")):
            for name, est in estimators(model, S, args):
                result = run(model, S, name, est, train, test, args)
                results.append(result)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(result) + "\n")
                print(f"{model} S={S} {name}: heldout {result['heldout_loglik']:.4f}, K={result['n_components']}, "
                      f"used={result['n_used']}, {result['train_seconds']:.1f} s", flush=True)
    print_table(results)


if __name__ == "__main__":
    main()
