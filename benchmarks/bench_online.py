"""HDP on KOS: bnpcore's truncation-free SVI (Wang & Blei 2012) and online VB (Wang,
Paisley & Blei 2011) against gensim's ``HdpModel`` (the same online VB algorithm, in NumPy).

bnpcore's online VB runs from both document starts (``doc_init``): "uniform" is
gensim's (and the reference code's), so that row is the like-for-like speed
comparison. Every system sees the same training documents (a fixed 90/10 document split of
KOS, the same number of documents, minibatches of the same size) and is scored by
the same function: the [TF] S.3 held-out per-word log-likelihood of whole
documents (``bnpcore.evaluation.hdp_heldout_log_likelihood``, what bnpcore's
``heldout_document_log_likelihood`` computes; same burn-in, samples and seed
for every system), with each model's E[beta] over its topics and its topic
means. A second
block gives bnpcore's truncation-free SVI gensim's wall time ("equal wall time").

Run single-threaded on a quiet machine for timings::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_online.py

A second command, ``study``, is the parameter study of the truncation-free SVI
defaults on KOS: each configuration trains for the same single-core CPU time
(``time.process_time``, so a loaded machine slows the wall clock but not the
budget much), and is scored by document completion (the protocol of
``bench_budget.py``: 10% of the documents held out, 80/20 token split, the
held-out per-word log-likelihood of the 20%)::

    OMP_NUM_THREADS=1 python benchmarks/bench_online.py study --seconds 30 --out benchmarks/results/tfsvi_study_kos.txt

Options: --epochs (passes over the training documents, default 1),
--batch-size (100), --topics (corpus-level truncation T of the online VB
models, default 150 = gensim's default), --atoms (document-level K, 15),
--samples (importance samples per held-out document, 1000), --seed, --repeats
(training times are the shortest of this many identical seeded runs, 3; the
equal-wall-time run is done once).
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, print_table, timed  # noqa: E402

from bnpcore import hdp  # noqa: E402
from bnpcore.cli import load_data  # noqa: E402
from bnpcore.evaluation import hdp_heldout_log_likelihood  # noqa: E402

ETA, GAMMA, ALPHA, KAPPA, TAU0 = 0.01, 1.0, 1.0, 0.6, 1.0


def score(topics, weights, test, args):
    return hdp_heldout_log_likelihood(topics, weights, ALPHA, test, burnin=50, n_samples=args.samples,
                                      random_state=args.seed, n_threads=1)


def bnpcore_row(est, name, settings, train, test, args, **fit):
    seconds, _, _ = timed(lambda: est.fit(train, **fit), 1 if fit else args.repeats)
    docs = est.n_documents_seen_
    used = est.history_[-1]["n_used"]        # topics with at least one expected word
    ll = score(est.topics_, est.weights_, test, args)
    return Row("bnpcore", name, settings, 1, seconds, docs * train.n_tokens / train.n_docs / seconds, used, ll), docs


def gensim_row(train, test, args, n_docs):
    try:
        from gensim.corpora import Dictionary
        from gensim.models import HdpModel
    except ImportError:
        print("gensim is not installed: skipping its rows (pip install gensim)")
        return None, None
    order = np.random.default_rng(args.seed).permutation(train.n_docs)
    bows = [list(zip(train.indices[train.indptr[j]:train.indptr[j + 1]].tolist(),
                     train.counts[train.indptr[j]:train.indptr[j + 1]].tolist())) for j in order]
    vocab = Dictionary()
    vocab.token2id = {str(w): w for w in range(train.n_words)}
    seconds, _, model = timed(
        lambda: HdpModel(bows, id2word=vocab, chunksize=args.batch_size, max_chunks=math.ceil(n_docs / args.batch_size),
                         T=args.topics, K=args.atoms, kappa=KAPPA, tau=TAU0, eta=ETA, alpha=ALPHA, gamma=GAMMA,
                         random_state=args.seed), args.repeats)
    model.update_expectations()
    doc_prior, topics = model.hdp_to_lda()
    used = int((model.m_lambda.sum(axis=1) >= 1.0).sum())
    ll = score(topics, doc_prior / ALPHA, test, args)
    return Row("gensim", "HdpModel (online VB)", f"T={args.topics} K={args.atoms} S={args.batch_size}", 1, seconds,
               n_docs * train.n_tokens / train.n_docs / seconds, used, ll), seconds


# the study's configurations: changes from the [TF] settings (eta = 0.01, S = 100, 5 local sweeps, one sample)
PAPER_SETTINGS = dict(eta=0.01, gamma=1.0, alpha=1.0, batch_size=100, local_sweeps=5, n_samples=1)
STUDY = ({}, {"n_samples": 5}, {"batch_size": 500}, {"batch_size": 20}, {"local_sweeps": 2, "n_samples": 4},
         {"eta": 0.05}, {"gamma": 10.0}, {"gamma": 10.0, "n_samples": 5},
         {"eta": 0.05, "n_samples": 5}, {"gamma": 3.0, "eta": 0.05, "n_samples": 5},
         {"gamma": 10.0, "eta": 0.05, "n_samples": 5}, {"gamma": 3.0, "eta": 0.05, "local_sweeps": 2, "n_samples": 5},
         {"gamma": 30.0, "eta": 0.05, "n_samples": 5}, {"gamma": 10.0, "eta": 0.05, "n_samples": 10},
         {"gamma": 100.0, "eta": 0.05, "n_samples": 5}, {"gamma": 30.0, "eta": 0.05, "n_samples": 3},
         {"gamma": 30.0, "eta": 0.05, "n_samples": 5, "alpha": 3.0}, {"gamma": 30.0, "eta": 0.1, "n_samples": 5},
         {"gamma": 50.0, "eta": 0.05, "n_samples": 5}, {"gamma": 30.0, "eta": 0.05, "n_samples": 5, "alpha": 10.0})


def study(argv):
    """Truncation-free SVI on KOS for --seconds of CPU time per configuration (see the module docstring)."""
    parser = argparse.ArgumentParser(description=study.__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="CPU seconds of training per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="comma-separated row numbers of STUDY to run")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--append", action="store_true", help="append to --out instead of replacing it")
    args = parser.parse_args(argv)
    from bnpcore.datasets import load_kos
    train, test = load_kos().split_documents(0.1, random_state=args.seed)
    observed, heldout = test.split_tokens(0.2, random_state=args.seed)
    rows = STUDY if args.only is None else [STUDY[int(i)] for i in args.only.split(",")]
    only = "" if args.only is None else f" --only {args.only}"
    lines = [f"# OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} python benchmarks/bench_online.py study "
             f"--seconds {args.seconds:g}{only}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus",
             f"# KOS {train.n_docs} training documents; held-out: document completion of {test.n_docs} documents; "
             f"hdp.TruncationFreeSVI, n_threads=1, seed {args.seed}, {args.seconds:g} CPU s each",
             f"{'changes from eta=0.01 S=100 sweeps=5 samples=1':48} {'heldout':>8} {'topics':>6} {'documents':>9} "
             f"{'epochs':>6} {'cpu s':>6} {'wall s':>7}"]
    print("\n".join(lines), flush=True)
    for change in rows:
        est = hdp.TruncationFreeSVI(**{**PAPER_SETTINGS, **dict(n_epochs=10 ** 6, random_state=args.seed, n_threads=1),
                                       **change})
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with est.reporting(lambda e, rec: time.process_time() - cpu0 >= args.seconds):
            est.fit(train)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        ll = est.heldout_log_likelihood(observed, heldout)
        name = " ".join(f"{k}={v}" for k, v in change.items()) or "(the [TF] settings)"
        lines.append(f"{name:48} {ll:8.4f} {est.n_components_:6d} {est.n_documents_seen_:9d} "
                     f"{est.n_documents_seen_ / train.n_docs:6.1f} {cpu:6.1f} {wall:7.1f}")
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "a" if args.append else "w") as fh:
            fh.write("\n".join(lines) + "\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["study"]:
        return study(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--topics", type=int, default=150)
    parser.add_argument("--atoms", type=int, default=15)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="training times are the best of this many runs")
    parser.add_argument("--data", default="kos", help="'kos' or a UCI docword.*.txt[.gz] file")
    parser.add_argument("--vocab", default=None, help="vocab.*.txt of a UCI --data file")
    args = parser.parse_args(argv)
    corpus = load_data(args.data, args.vocab)
    train, test = corpus.split_documents(0.1, random_state=args.seed)
    n_docs = args.epochs * train.n_docs
    print(f"{corpus}: {train.n_docs} training, {test.n_docs} held-out documents; {n_docs} documents seen; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; held-out: [TF] S.3 importance "
          f"sampling, 50 burn-in sweeps, {args.samples} samples")
    S = args.batch_size
    common = dict(eta=ETA, gamma=GAMMA, alpha=ALPHA, batch_size=S, n_epochs=args.epochs, random_state=args.seed,
                  n_threads=1)
    rows, docs_per_second = [], {}
    row, docs = bnpcore_row(hdp.TruncationFreeSVI(**common), "HDP truncation-free SVI", f"S={S}", train, test, args)
    rows.append(row)
    docs_per_second[row.algorithm] = docs / row.train_seconds
    for doc_init in ("ranked", "uniform"):
        row, docs = bnpcore_row(hdp.OnlineVB(n_components=args.topics, n_atoms=args.atoms, learning_offset=TAU0,
                                             learning_decay=KAPPA, doc_init=doc_init, **common),
                                f"HDP online VB, {doc_init} start", f"T={args.topics} K={args.atoms} S={S}",
                                train, test, args)
        rows.append(row)
        docs_per_second[row.algorithm] = docs / row.train_seconds
    grow, gensim_seconds = gensim_row(train, test, args, n_docs)
    if grow is not None:
        rows.append(grow)
        docs_per_second[grow.algorithm] = n_docs / grow.train_seconds
    print("\nSame documents seen")
    print_table(rows)
    print()
    for name, rate in docs_per_second.items():
        ratio = f"  ({rate / docs_per_second['HdpModel (online VB)']:.1f}x gensim)" if grow is not None else ""
        print(f"{name:34} {rate:10.0f} documents/s{ratio}")
    if grow is not None:
        print(f"\nEqual wall time ({gensim_seconds:.1f} s, gensim's training time)")
        budget = dict(common, n_epochs=10 ** 6)
        row, docs = bnpcore_row(hdp.TruncationFreeSVI(**budget), "HDP truncation-free SVI", f"S={S}, time budget",
                                train, test, args, max_seconds=gensim_seconds)
        print_table([grow, row])
        print(f"truncation-free SVI saw {docs} documents in that time, gensim {n_docs}")


if __name__ == "__main__":
    main()
