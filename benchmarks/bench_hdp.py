"""G-HDP (bnpcore DirectAssignmentGibbs) against tomotopy HDPModel and gensim HdpModel on KOS.

Same split for everyone: 10% of each document's tokens held out
(``split_tokens(0.1, mode="doc_tokens")``); the held-out per-word log-likelihood
of every system is computed by ``bnpcore.evaluation.token_log_likelihood`` from
that system's own document-topic proportions and topic-word distributions of
its final state (a single sample for both samplers). Topic prior 100/W per
word for the samplers (tomotopy's ``eta``), alpha and gamma resampled (bnpcore);
tomotopy with its default alpha/gamma optimisation and with alpha = gamma = 1 fixed. One thread everywhere;
tokens/s = training tokens x sweeps / training seconds (gensim: one online pass).

    OMP_NUM_THREADS=1 python benchmarks/bench_hdp.py --sweeps 200 --init-topics 100
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, print_table  # noqa: E402

from bnpcore.cli import load_data  # noqa: E402
from bnpcore.evaluation import token_log_likelihood  # noqa: E402
from bnpcore.hdp import DirectAssignmentGibbs  # noqa: E402


def bench_bnpcore(train, test, args):
    model = DirectAssignmentGibbs(n_components=args.init_topics, max_iter=args.sweeps, burn_in=args.sweeps - 1,
                                  eta_tot=100.0, random_state=args.seed)
    t = time.perf_counter()
    model.fit(train)
    secs = time.perf_counter() - t
    return Row("bnpcore", "G-HDP direct assign.", f"init {args.init_topics}, {args.sweeps} sweeps", 1, secs,
               train.n_tokens * args.sweeps / secs, model.n_components_, model.heldout_log_likelihood(train, test))


def bench_tomotopy(train, test, args):
    try:
        import tomotopy  # noqa: F401
    except ImportError:
        print("tomotopy not installed: skipped", file=sys.stderr)
        return None
    rows = []
    for optimise in ([True, False] if args.tomotopy_optim == "both" else [args.tomotopy_optim == "on"]):
        rows += _tomotopy_rows(train, test, args, optimise)
    return rows


def _tomotopy_rows(train, test, args, optimise):
    import tomotopy as tp
    W = train.n_words
    mdl = tp.HDPModel(initial_k=args.init_topics, alpha=1.0, eta=100.0 / W, gamma=1.0, seed=args.seed)
    if not optimise:
        mdl.optim_interval = 0            # alpha = gamma = 1 fixed (bnpcore's prior means)
    kept = []
    for j in range(train.n_docs):
        lo, hi = train.indptr[j], train.indptr[j + 1]
        toks = np.repeat(train.indices[lo:hi], train.counts[lo:hi]).astype(str).tolist()
        if toks:
            mdl.add_doc(toks)
            kept.append(j)
    mdl.train(0, workers=1)                     # builds the model (not timed as sampling)
    t = time.perf_counter()
    mdl.train(args.sweeps, workers=1, parallel=tp.ParallelScheme.NONE)
    secs = time.perf_counter() - t
    live = [k for k in range(mdl.k) if mdl.is_live_topic(k)]
    vocab_index = np.array([int(w) for w in mdl.used_vocabs])
    phi = np.full((len(live), W), 1e-12)
    for i, k in enumerate(live):
        phi[i, vocab_index] = np.asarray(mdl.get_topic_word_dist(k))
    phi /= phi.sum(1, keepdims=True)
    # get_topic_dist() is the unsmoothed n_jk / N_j (0 for topics absent from the document);
    # tomotopy exposes no global weights, so the smoothed row uses n_k / N in their place:
    # theta_jk = (n_jk + alpha n_k / N) / (N_j + alpha) with tomotopy's optimised alpha
    raw = np.full((train.n_docs, len(live)), 1.0 / len(live))
    n_jk = np.zeros((train.n_docs, len(live)))
    for doc, j in zip(mdl.docs, kept):
        dist = np.asarray(doc.get_topic_dist())[live]
        raw[j] = dist / dist.sum()
        n_jk[j] = np.bincount(np.asarray(doc.topics), minlength=mdl.k)[live]
    n_k = n_jk.sum(0)
    smooth = (n_jk + mdl.alpha * n_k / n_k.sum()) / (n_jk.sum(1) + mdl.alpha)[:, None]
    settings = f"init {args.init_topics}, {args.sweeps} sw" + (", opt a,g" if optimise else ", a=g=1")
    return [Row("tomotopy", "HDPModel get_topic_dist", settings, 1, secs, train.n_tokens * args.sweeps / secs,
                len(live), token_log_likelihood(raw, phi, test)),
            Row("tomotopy", "HDPModel smoothed theta", settings, 1, secs, train.n_tokens * args.sweeps / secs,
                len(live), token_log_likelihood(smooth, phi, test))]


def bench_gensim(train, test, args):
    try:
        from gensim.models import HdpModel
    except ImportError:
        print("gensim not installed: skipped", file=sys.stderr)
        return None
    bows = [list(zip(train.indices[train.indptr[j]:train.indptr[j + 1]].tolist(),
                     train.counts[train.indptr[j]:train.indptr[j + 1]].tolist())) for j in range(train.n_docs)]
    id2word = {w: str(w) for w in range(train.n_words)}
    t = time.perf_counter()
    hdp = HdpModel(bows, id2word=id2word, T=150, K=15, chunksize=256, random_state=args.seed)
    secs = time.perf_counter() - t
    # gensim's own document inference runs against its LDA conversion (lda_alpha, lda_beta)
    phi = hdp.lda_beta / hdp.lda_beta.sum(1, keepdims=True)
    gamma = hdp.inference(bows)
    gamma[gamma.sum(1) == 0] = hdp.lda_alpha             # empty documents: the prior
    theta = gamma / gamma.sum(1, keepdims=True)
    used = int(((theta * train.doc_lengths[:, None]).sum(0) >= 1.0).sum())   # >= 1 expected token
    return Row("gensim", "HdpModel (online VB)", "T=150, K=15, 1 pass", 1, secs, train.n_tokens / secs, used,
               token_log_likelihood(theta, phi, test))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", type=int, default=200)
    ap.add_argument("--init-topics", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", nargs="*", default=[], choices=["bnpcore", "tomotopy", "gensim"])
    ap.add_argument("--tomotopy-optim", default="both", choices=["on", "off", "both"],
                    help="tomotopy's own alpha/gamma optimisation (its default) or alpha = gamma = 1 fixed")
    args = ap.parse_args(argv)
    X = load_data("kos")
    train, test = X.split_tokens(0.1, random_state=args.seed, mode="doc_tokens")
    rows = []
    for name, fn in (("bnpcore", bench_bnpcore), ("tomotopy", bench_tomotopy), ("gensim", bench_gensim)):
        if name not in args.skip:
            got = fn(train, test, args)
            for row in ([] if got is None else got if isinstance(got, list) else [got]):
                rows.append(row)
                print(row, flush=True)
    print(f"\nKOS, {train.n_tokens} training tokens, {test.n_tokens} held out; one thread; shared machine")
    print_table(rows)


if __name__ == "__main__":
    main()
