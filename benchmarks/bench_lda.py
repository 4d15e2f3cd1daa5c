"""LDA on KOS: bnpcore against the peer libraries (one thread each).

* collapsed Gibbs: bnpcore ``CollapsedGibbs`` vs ``lda.LDA`` and tomotopy
  ``LDAModel``, the same number of sweeps, scored on the final sample;
* variational: bnpcore ``CollapsedVB(order=0)`` (CVB0) vs scikit-learn's batch
  ``LatentDirichletAllocation`` and gensim's online ``LdaModel``.

All fit the same 90% of the KOS tokens (10% held out corpus-wide, as in paper
004) with the same priors, and are scored by ``bnpcore.evaluation``: the
per-word log-likelihood of the held-out tokens under each system's document
proportions and topics of the training documents ([HYB] eq 30; samplers from
their final counts, (n + prior) / (N + total prior)).

The CVB0 floor: one sweep must at least do nnz x K multiply-adds (every
(pair, topic) responsibility feeds the counts). We time that many multiply-adds
as a plain loop over the same data: the sparse-dense product ``X @ B`` of the
training counts (D x W, nnz non-zeros) with a dense W x K matrix (scipy's
compiled CSR kernel, one thread), and report CVB0's time per sweep over it.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_lda.py [--topics 50,100] [--sweeps 200]
        [--vb-iterations 50] [--gensim-passes 10] [--kos DIR]
"""
import argparse
import os
import time

import numpy as np

from bnpcore.evaluation import token_log_likelihood
from bnpcore.lda import CollapsedGibbs, CollapsedVB

try:
    from harness import Row, print_table
    from repro_004 import load_kos_corpus
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import Row, print_table
    from benchmarks.repro_004 import load_kos_corpus


def eq30(ndk, nkw, alpha, eta, heldout):
    """Held-out per-word log-likelihood from document-topic (D x K) and
    topic-word (K x W) counts of one sample."""
    doc_topic = (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + alpha * ndk.shape[1])
    topic_word = (nkw + eta) / (nkw.sum(axis=1, keepdims=True) + eta * nkw.shape[1])
    return token_log_likelihood(doc_topic, topic_word, heldout)


def normalised(a):
    a = np.asarray(a, dtype=np.float64)
    return a / a.sum(axis=1, keepdims=True)


# -- collapsed Gibbs -----------------------------------------------------------

def bnpcore_cgs(train, heldout, K, sweeps, alpha, eta, seed):
    est = CollapsedGibbs(n_components=K, alpha=alpha, eta=eta, n_iter=sweeps, burn_in=sweeps, random_state=seed)
    start = time.perf_counter()
    est.fit(train)
    seconds = time.perf_counter() - start
    return seconds, token_log_likelihood(est.doc_topic_, est.topics_, heldout)


def tomotopy_cgs(train, heldout, K, sweeps, alpha, eta, seed):
    import tomotopy as tp
    mdl = tp.LDAModel(k=K, alpha=alpha, eta=eta, seed=seed)
    mdl.optim_interval = 0                       # fixed priors, as everywhere else
    words, ptr = train.tokens()
    names = np.array([str(w) for w in range(train.n_words)])
    kept = []
    for j in range(train.n_docs):
        if ptr[j + 1] > ptr[j]:
            mdl.add_doc(names[words[ptr[j]:ptr[j + 1]]].tolist())
            kept.append(j)
    mdl.train(0, workers=1)                      # builds the model (not timed)
    start = time.perf_counter()
    mdl.train(sweeps, workers=1, parallel=tp.ParallelScheme.NONE)
    seconds = time.perf_counter() - start
    ids = np.array([int(v) for v in mdl.used_vocabs])
    nkw = np.zeros((K, train.n_words))
    for k in range(K):
        nkw[k, ids] = np.asarray(mdl.get_topic_word_dist(k, normalize=False), dtype=np.float64) - mdl.eta
    ndk = np.zeros((train.n_docs, K))
    for j, doc in zip(kept, mdl.docs):
        ndk[j] = np.asarray(doc.get_topic_dist(normalize=False), dtype=np.float64) - alpha
    return seconds, eq30(np.round(ndk), np.round(nkw), alpha, eta, heldout)


def lda_cgs(train, heldout, K, sweeps, alpha, eta, seed):
    import lda
    X = train.matrix.astype(np.int64)
    mdl = lda.LDA(n_topics=K, n_iter=sweeps, alpha=alpha, eta=eta, random_state=seed, refresh=10 ** 9)
    import logging
    logging.getLogger("lda").setLevel(logging.WARNING)
    start = time.perf_counter()
    mdl.fit(X)
    seconds = time.perf_counter() - start
    return seconds, eq30(mdl.ndz_.astype(np.float64), mdl.nzw_.astype(np.float64), alpha, eta, heldout)


# -- variational ---------------------------------------------------------------

def bnpcore_cvb0(train, heldout, K, iterations, alpha, eta, seed):
    est = CollapsedVB(order=0, n_components=K, alpha=alpha, eta=eta, max_iter=iterations, tol=None,
                      random_state=seed)
    start = time.perf_counter()
    est.fit(train)
    seconds = time.perf_counter() - start
    return seconds, token_log_likelihood(est.doc_topic_, est.topics_, heldout)


def sklearn_vb(train, heldout, K, iterations, alpha, eta, seed):
    from sklearn.decomposition import LatentDirichletAllocation
    mdl = LatentDirichletAllocation(n_components=K, doc_topic_prior=alpha, topic_word_prior=eta,
                                    learning_method="batch", max_iter=iterations, evaluate_every=-1, n_jobs=1,
                                    random_state=seed)
    X = train.matrix.astype(np.float64)
    start = time.perf_counter()
    mdl.fit(X)
    seconds = time.perf_counter() - start
    return seconds, token_log_likelihood(mdl.transform(X), normalised(mdl.components_), heldout)


def gensim_vb(train, heldout, K, passes, alpha, eta, seed):
    from gensim.models import LdaModel
    bows = [list(zip(train.indices[train.indptr[j]:train.indptr[j + 1]].tolist(),
                     train.counts[train.indptr[j]:train.indptr[j + 1]].tolist())) for j in range(train.n_docs)]
    id2word = {w: str(w) for w in range(train.n_words)}
    start = time.perf_counter()
    mdl = LdaModel(corpus=bows, id2word=id2word, num_topics=K, alpha=np.full(K, alpha), eta=eta, passes=passes,
                   chunksize=2000, iterations=50, eval_every=None, random_state=seed, dtype=np.float64)
    seconds = time.perf_counter() - start
    gamma, _ = mdl.inference(bows)
    return seconds, token_log_likelihood(normalised(gamma), mdl.get_topics(), heldout)


def multiply_add_floor(train, K, repeats=7):
    """Seconds for nnz x K multiply-adds: ``X @ B`` with X the training counts
    (CSR) and B dense W x K (scipy's compiled CSR kernel, single thread)."""
    X = train.matrix.astype(np.float64)
    B = np.random.default_rng(0).random((train.n_words, K))
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        X @ B
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="50,100")
    parser.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps (every sampler)")
    parser.add_argument("--vb-iterations", type=int, default=50, help="CVB0 and scikit-learn batch iterations")
    parser.add_argument("--gensim-passes", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--eta", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--systems", default="bnpcore,tomotopy,lda,sklearn,gensim")
    parser.add_argument("--kos", help="directory of docword.kos.txt.gz and vocab.kos.txt")
    args = parser.parse_args(argv)
    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("note: set OMP_NUM_THREADS=1 for single-thread timings")
    systems = args.systems.split(",")
    corpus = load_kos_corpus(args.kos)
    train, heldout = corpus.split_tokens(0.1, random_state=args.seed, mode="corpus_tokens")
    N = train.n_tokens
    print(f"KOS training part: {train.n_docs} docs, {N} tokens, nnz {train.nnz}; held out {heldout.n_tokens} "
          f"tokens; alpha = {args.alpha}, eta = {args.eta}")
    runs = [("bnpcore", "CGS", bnpcore_cgs, "sweeps"), ("tomotopy", "CGS (LDAModel)", tomotopy_cgs, "sweeps"),
            ("lda", "CGS", lda_cgs, "sweeps"), ("bnpcore", "CVB0", bnpcore_cvb0, "vb"),
            ("sklearn", "batch VB", sklearn_vb, "vb"), ("gensim", "online VB (LdaModel)", gensim_vb, "passes")]
    for K in (int(k) for k in args.topics.split(",")):
        rows = []
        for system, algorithm, fn, kind in runs:
            if system not in systems:
                continue
            its = {"sweeps": args.sweeps, "vb": args.vb_iterations, "passes": args.gensim_passes}[kind]
            try:
                seconds, ll = fn(train, heldout, K, its, args.alpha, args.eta, args.seed)
            except ImportError as exc:
                print(f"skipping {system}: {exc}")
                continue
            unit = "passes" if kind == "passes" else ("sweeps" if kind == "sweeps" else "iterations")
            rows.append(Row(system, algorithm, f"K={K}, {its} {unit}", 1, seconds, N * its / seconds, K, ll))
            print(f"  {system} {algorithm}: {seconds:.2f} s, held-out {ll:.4f}", flush=True)
        print()
        print_table(rows)
        cvb0 = next((r for r in rows if r.algorithm == "CVB0"), None)
        if cvb0 is not None:
            floor = multiply_add_floor(train, K)
            per_sweep = cvb0.train_seconds / args.vb_iterations
            print(f"\nCVB0 at K={K}: {per_sweep * 1e3:.1f} ms per sweep; floor (nnz x K = {train.nnz * K:.3g} "
                  f"multiply-adds as X @ B, scipy CSR, 1 thread): {floor * 1e3:.1f} ms; ratio {per_sweep / floor:.2f}")
        print()


if __name__ == "__main__":
    main()
