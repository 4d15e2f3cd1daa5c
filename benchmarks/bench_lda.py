"""LDA on KOS: bnpcore against the peer libraries (one thread each).

* collapsed Gibbs: bnpcore ``CollapsedGibbs`` vs ``lda.LDA`` and tomotopy
  ``LDAModel``, the same number of sweeps, scored on the final sample;
* variational: bnpcore ``CollapsedVB(order=0)`` (CVB0) vs scikit-learn's batch
  ``LatentDirichletAllocation`` and gensim's online ``LdaModel``.

All fit the same 90% of the KOS tokens (10% held out corpus-wide, as in
[HYB]) with the same priors, and are scored by ``bnpcore.evaluation``: the
per-word log-likelihood of the held-out tokens under each system's document
proportions and topics of the training documents ([HYB] eq 30; samplers from
their final counts, (n + prior) / (N + total prior)).

The CVB0 floor: a sweep must at least do nnz x K multiply-adds (every
(pair, topic) responsibility feeds the counts). We time that many multiply-adds
as plain loops over the same data with scipy's compiled CSR kernel (one
thread), two ways:

* compute floor: ``X @ B``, X the training counts (D x W, nnz non-zeros) and B
  a dense W x K matrix (the operand rows stay in cache);
* streaming floor: ``P @ R``, P the pair-to-document matrix (D x nnz, entry
  c_jw) and R a dense nnz x K matrix like CVB0's responsibilities, so the loop
  also reads the nnz x K doubles a CVB0 sweep must read (and write back).

CVB0's time per sweep (the shortest of 10 sweeps after the first, so neither
the initialisation nor the periodic recount of the counts; the floors are the
shortest of 7 runs, the same statistic) is reported against both. All three are process CPU times: wall-clock on a shared machine mostly
measures the neighbours.

Where CVB0's time goes (K = 100, CPU time, best of 15 sweeps, one thread; this
machine: 2 MB L2 per core, 260 MB L3): a sweep must read and write back the
nnz x K responsibilities (twice the streaming floor's bytes) besides the random
word-topic rows and three count updates per (pair, topic). Sharing 64
responsibility rows among all pairs (no nnz x K traffic) took 15 ms off a 55 ms
sweep; prefetching each row 8 pairs ahead now hides most of it (46 ms). The
division costs ~2 ms; float32 rows, an AVX-512 clone and a float reciprocal
with Newton steps were slower or no faster. At K = 50 the 130 MB operand of
``P @ R`` stays in the L3 between repetitions, so that floor is a cache floor
there (5.6–16 ms over runs on a shared machine) and its ratio is noisy.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_lda.py [--topics 50,100] [--sweeps 200]
        [--vb-iterations 50] [--gensim-passes 10] [--seeds 1] [--systems bnpcore,tomotopy,...] [--data kos]
"""
import argparse
import logging
import os
import time

import numpy as np
import scipy.sparse as sp

from bnpcore.cli import load_data
from bnpcore.kernels import _lda
from bnpcore.lda import CollapsedGibbs, CollapsedVB
from bnpcore.models.lda import SequentialState

try:
    from harness import normalize_rows, print_table, threads_note, timed_row
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import normalize_rows, print_table, threads_note, timed_row


def from_counts(ndk, nkw, alpha, eta):
    """(doc_topic, topic_word) of one sample's counts: (n + prior) / (N + total prior)."""
    return normalize_rows(ndk + alpha), normalize_rows(nkw + eta)


# -- collapsed Gibbs (scored on the final sample) ------------------------------

def bnpcore_cgs(train, K, sweeps, alpha, eta, seed):
    est = CollapsedGibbs(n_components=K, alpha=alpha, eta=eta, max_iter=sweeps, burn_in=sweeps, random_state=seed)
    return lambda: est.fit(train), lambda m: (m.doc_topic_, m.topics_)


def tomotopy_cgs(train, K, sweeps, alpha, eta, seed):
    import tomotopy as tp
    mdl = tp.LDAModel(k=K, alpha=alpha, eta=eta, seed=seed)
    mdl.optim_interval = 0                       # fixed priors, as everywhere else
    words, ptr = train.tokens()
    names = np.array([str(w) for w in range(train.n_words)])
    kept = [j for j in range(train.n_docs) if ptr[j + 1] > ptr[j]]
    for j in kept:
        mdl.add_doc(names[words[ptr[j]:ptr[j + 1]]].tolist())
    mdl.train(0, workers=1)                      # builds the model (not timed)

    def fit():
        mdl.train(sweeps, workers=1, parallel=tp.ParallelScheme.NONE)
        return mdl

    def extract(m):
        ids = np.array([int(v) for v in m.used_vocabs])
        nkw = np.zeros((K, train.n_words))
        for k in range(K):
            nkw[k, ids] = np.asarray(m.get_topic_word_dist(k, normalize=False), dtype=np.float64) - m.eta
        ndk = np.zeros((train.n_docs, K))
        for j, doc in zip(kept, m.docs):
            ndk[j] = np.asarray(doc.get_topic_dist(normalize=False), dtype=np.float64) - alpha
        return from_counts(np.round(ndk), np.round(nkw), alpha, eta)   # tomotopy stores float32

    return fit, extract


def lda_cgs(train, K, sweeps, alpha, eta, seed):
    import lda
    logging.getLogger("lda").setLevel(logging.WARNING)
    X = train.matrix.astype(np.int64)
    mdl = lda.LDA(n_topics=K, n_iter=sweeps, alpha=alpha, eta=eta, random_state=seed, refresh=10 ** 9)
    return lambda: mdl.fit(X), lambda m: from_counts(m.ndz_, m.nzw_, alpha, eta)


# -- variational -----------------------------------------------------------------

def bnpcore_cvb0(train, K, iterations, alpha, eta, seed):
    est = CollapsedVB(order=0, n_components=K, alpha=alpha, eta=eta, max_iter=iterations, tol=None,
                      random_state=seed)
    return lambda: est.fit(train), lambda m: (m.doc_topic_, m.topics_)


def sklearn_vb(train, K, iterations, alpha, eta, seed):
    from sklearn.decomposition import LatentDirichletAllocation
    mdl = LatentDirichletAllocation(n_components=K, doc_topic_prior=alpha, topic_word_prior=eta,
                                    learning_method="batch", max_iter=iterations, evaluate_every=-1, n_jobs=1,
                                    random_state=seed)
    X = train.matrix.astype(np.float64)
    return lambda: mdl.fit(X), lambda m: (m.transform(X), normalize_rows(m.components_))


def gensim_vb(train, K, passes, alpha, eta, seed):
    from gensim.models import LdaModel
    logging.getLogger("gensim").setLevel(logging.WARNING)
    bows = [list(zip(train.indices[train.indptr[j]:train.indptr[j + 1]].tolist(),
                     train.counts[train.indptr[j]:train.indptr[j + 1]].tolist())) for j in range(train.n_docs)]
    id2word = {w: str(w) for w in range(train.n_words)}

    def fit():
        return LdaModel(corpus=bows, id2word=id2word, num_topics=K, alpha=np.full(K, alpha), eta=eta,
                        passes=passes, chunksize=2000, iterations=50, eval_every=None, random_state=seed,
                        dtype=np.float64)

    return fit, lambda m: (normalize_rows(m.inference(bows)[0]), m.get_topics())


def cvb0_against_floors(train, K, alpha, eta, repeats=7):
    """CPU seconds of one CVB0 sweep and of nnz x K multiply-adds done by scipy's
    compiled CSR kernel (one thread): ``X @ B`` (B dense W x K, cached) and
    ``P @ R`` (R dense nnz x K, streamed)."""
    rng = np.random.default_rng(0)
    state = SequentialState(train, K, np.full(K, alpha), np.full(train.n_words, eta), rng, _lda.MODE_CVB0, -1)
    state.sweep()
    sweeps = []
    for _ in range(10):
        start = time.process_time()
        state.sweep()
        sweeps.append(time.process_time() - start)
    X = train.matrix.astype(np.float64)
    B = rng.random((train.n_words, K))
    docs = np.repeat(np.arange(train.n_docs), np.diff(train.indptr))
    P = sp.csr_matrix((train.counts.astype(np.float64), (docs, np.arange(train.nnz))),
                      shape=(train.n_docs, train.nnz))
    R = rng.random((train.nnz, K))

    def best(product):
        out = np.inf
        for _ in range(repeats):
            start = time.process_time()
            product()
            out = min(out, time.process_time() - start)
        return out

    return min(sweeps), best(lambda: X @ B), best(lambda: P @ R)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="50,100")
    parser.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps (every sampler)")
    parser.add_argument("--vb-iterations", type=int, default=50, help="CVB0 and scikit-learn batch iterations")
    parser.add_argument("--gensim-passes", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--eta", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out split and first fit seed")
    parser.add_argument("--seeds", type=int, default=1, help="fits per system (seeds seed, seed+1, ...)")
    parser.add_argument("--systems", default="bnpcore,tomotopy,lda,sklearn,gensim")
    parser.add_argument("--data", default="kos", help="'kos' (bundled) or a UCI docword file")
    args = parser.parse_args(argv)
    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("note: set OMP_NUM_THREADS=1 for single-thread timings")
    print(threads_note())
    systems = args.systems.split(",")
    corpus = load_data(args.data)
    train, heldout = corpus.split_tokens(0.1, random_state=args.seed, mode="corpus_tokens")
    N = train.n_tokens
    print(f"KOS training part: {train.n_docs} docs, {N} tokens, nnz {train.nnz}; held out {heldout.n_tokens} "
          f"tokens; alpha = {args.alpha}, eta = {args.eta}")
    runs = [("bnpcore", "CGS", bnpcore_cgs, "sweeps"), ("tomotopy", "CGS (LDAModel)", tomotopy_cgs, "sweeps"),
            ("lda", "CGS", lda_cgs, "sweeps"), ("bnpcore", "CVB0", bnpcore_cvb0, "iterations"),
            ("sklearn", "batch VB", sklearn_vb, "iterations"),
            ("gensim", "online VB (LdaModel)", gensim_vb, "passes")]
    for K in (int(k) for k in args.topics.split(",")):
        rows = []
        for seed in range(args.seed, args.seed + args.seeds):
            for system, algorithm, make, kind in runs:
                if system not in systems:
                    continue
                its = {"sweeps": args.sweeps, "iterations": args.vb_iterations, "passes": args.gensim_passes}[kind]
                try:
                    fit, extract = make(train, K, its, args.alpha, args.eta, seed)
                except ImportError as exc:
                    print(f"skipping {system}: {exc}")
                    continue
                row = timed_row(system, algorithm, f"K={K}, {its} {kind}, seed {seed}", 1, fit, extract, train,
                                heldout, iterations=its)
                rows.append(row)
                print(f"  {system} {algorithm} seed {seed}: {row.train_seconds:.2f} s, held-out "
                      f"{row.heldout_loglik:.4f}", flush=True)
        print()
        print_table(rows)
        if args.seeds > 1:
            print(f"\nover {args.seeds} seeds (mean; held-out mean +- sd):")
            for key in dict.fromkeys((r.system, r.algorithm) for r in rows):
                group = [r for r in rows if (r.system, r.algorithm) == key]
                ll = np.array([r.heldout_loglik for r in group])
                print(f"  {key[0]:10} {key[1]:22} {np.mean([r.train_seconds for r in group]):8.2f} s "
                      f"{np.mean([r.tokens_per_second for r in group]):12.0f} tokens/s   held-out "
                      f"{ll.mean():.4f} +- {ll.std(ddof=1):.4f}")
        if "bnpcore" in systems:
            per_sweep, compute, stream = cvb0_against_floors(train, K, args.alpha, args.eta)
            print(f"\nCVB0 at K={K}, CPU time: {per_sweep * 1e3:.1f} ms per sweep. Floors of nnz x K = "
                  f"{train.nnz * K:.3g} multiply-adds (scipy CSR, 1 thread): X @ B {compute * 1e3:.1f} ms (ratio "
                  f"{per_sweep / compute:.2f}); P @ R streaming nnz x K doubles {stream * 1e3:.1f} ms "
                  f"(ratio {per_sweep / stream:.2f})")
        print()


if __name__ == "__main__":
    main()
