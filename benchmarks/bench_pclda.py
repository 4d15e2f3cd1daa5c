"""Partially collapsed LDA (``lda.PartiallyCollapsedGibbs``) on KOS against
bnpcore's sequential collapsed Gibbs and tomotopy's ``LDAModel``, side by side
in one run: tokens/s at 1 and 2 threads (workers) and the held-out per-word
log-likelihood after the same number of sweeps.

Every system fits the same 90% of each KOS document's tokens (``harness.token_split``)
with the same priors and is scored on the final sample's counts,
(n + prior) / (N + total prior), on the held-out 10% (document completion, as
``bench_lda.py``). Tokens/s = training tokens x sweeps / wall-clock fit time
(initialisation included for bnpcore, excluded for tomotopy). On a shared
machine wall-clock mostly measures the neighbours, so each run also reports
tokens per CPU-second of the process (all its threads): the per-thread speed,
which the neighbours disturb much less.

After the table, the time of each of the three kernels of one partially
collapsed sweep (Phi | z, the alias tables, z | Phi), run once more on the
final state, and the mean number of topics per document (the z-step's cost
per token) show where the time goes.

Issue #14 targets: K = 50: per-thread tokens/s >= sequential CGS; K = 1000,
2 threads: >= 2x sequential CGS, per-token cost sublinear in K, held-out
within 0.05.

Usage::

    python benchmarks/bench_pclda.py [--topics 50,1000] [--sweeps 50,20] [--out benchmarks/results/bench_pclda_kos.txt]
"""
import argparse
import contextlib
import io
import sys
import time

import numpy as np

from bnpcore.lda import PartiallyCollapsedGibbs
from bnpcore.kernels import _pclda
from bnpcore.models.lda_pc import token_blocks

try:
    from bench_lda import bnpcore_cgs, from_counts
    from harness import print_table, threads_note, timed_row, token_split
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.bench_lda import bnpcore_cgs, from_counts
    from benchmarks.harness import print_table, threads_note, timed_row, token_split

ALPHA, ETA = 0.1, 0.01


def bnpcore_pcgs(train, K, sweeps, threads, seed, keep):
    """(fit, extract) of PartiallyCollapsedGibbs; the fit leaves its final state in ``keep["state"]``."""
    est = PartiallyCollapsedGibbs(n_components=K, alpha=ALPHA, eta=ETA, max_iter=sweeps, burn_in=sweeps,
                                  n_threads=threads, random_state=seed)

    def fit():
        with est.reporting(lambda e, rec: keep.update(state=e._batch_state)):
            return est.fit(train)

    return fit, lambda m: (m.doc_topic_, m.topics_)


def tomotopy_lda(train, K, sweeps, workers, seed):
    """tomotopy's LDAModel with ``workers`` threads (its default parallel scheme)."""
    import tomotopy as tp
    mdl = tp.LDAModel(k=K, alpha=ALPHA, eta=ETA, seed=seed)
    mdl.optim_interval = 0
    words, ptr = train.tokens()
    kept = [j for j in range(train.n_docs) if ptr[j + 1] > ptr[j]]
    for j in kept:
        mdl.add_doc([str(w) for w in words[ptr[j]:ptr[j + 1]]])
    mdl.train(0, workers=workers)                # builds the model (not timed)

    def extract(m):
        ids = np.array([int(v) for v in m.used_vocabs])
        nkw = np.zeros((K, train.n_words))
        nkw[:, ids] = [np.asarray(m.get_topic_word_dist(k, normalize=False)) - m.eta for k in range(K)]
        ndk = np.zeros((train.n_docs, K))
        ndk[kept] = [np.asarray(d.get_topic_dist(normalize=False)) - ALPHA for d in m.docs]
        return from_counts(np.round(ndk), np.round(nkw), ALPHA, ETA)    # tomotopy stores float32

    return lambda: (mdl.train(sweeps, workers=workers), mdl)[1], extract


def cpu_timed(fit, out):
    """``fit`` that appends the process CPU seconds it took to ``out``."""
    def run():
        tick = time.process_time()
        model = fit()
        out.append(time.process_time() - tick)
        return model
    return run


def kernel_profile(st, train):
    """Seconds of each kernel of one more sweep of state ``st`` at 1 thread, and
    the mean number of topics per document."""
    c, out = train, {}
    tick = time.perf_counter()
    _pclda.sample_phi(st.nwk, st.eta, st.key, st.n_sweeps, st.phi, 1)
    out["phi"] = time.perf_counter() - tick
    tick = time.perf_counter()
    _pclda.build_alias(st.phi, st.alpha, st.prob, st.alias, st.mass, 1)
    out["alias"] = time.perf_counter() - tick
    tick = time.perf_counter()
    for start, chunk, tp, tokens in token_blocks(c, st.tok_ptr):      # as the sweep runs it
        _pclda.z_step(chunk.indptr, chunk.indices, chunk.counts, tp, st.phi, st.prob, st.alias, st.mass, st.key,
                      st.n_sweeps, st.z[tokens], st.nwk, st.nk, 1, start)
    out["z"] = time.perf_counter() - tick
    out["topics/doc"] = float((st.doc_counts() > 0).sum(axis=1).mean())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", default="50,1000")
    ap.add_argument("--sweeps", default="50,20", help="sweeps per K (one value or one per K)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the output to this file")
    args = ap.parse_args(argv)
    topics = [int(k) for k in args.topics.split(",")]
    sweeps = [int(s) for s in args.sweeps.split(",")]
    sweeps = sweeps * len(topics) if len(sweeps) == 1 else sweeps
    _, train, heldout = token_split("kos")
    buf = io.StringIO()
    with contextlib.redirect_stdout(Tee(sys.stdout, buf)):
        print(f"KOS: {train.n_docs} documents, {train.n_words} words, {train.n_tokens} training tokens; "
              f"alpha={ALPHA}, eta={ETA}; {threads_note()}")
        for K, S in zip(topics, sweeps):
            rows, keep, cpu = [], {}, []
            settings = f"K={K}, {S} sweeps"
            fit, extract = bnpcore_cgs(train, K, S, ALPHA, ETA, args.seed)
            rows.append(timed_row("bnpcore", "CGS (sequential)", settings, 1, cpu_timed(fit, cpu), extract, train,
                                  heldout, S))
            for threads in (1, 2):
                fit, extract = bnpcore_pcgs(train, K, S, threads, args.seed, keep)
                rows.append(timed_row("bnpcore", "PartiallyCollapsedGibbs", settings, threads, cpu_timed(fit, cpu),
                                      extract, train, heldout, S))
            for workers in (1, 2):
                try:
                    fit, extract = tomotopy_lda(train, K, S, workers, args.seed)
                except ImportError:
                    print("tomotopy not installed: skipped")
                    break
                rows.append(timed_row("tomotopy", "LDAModel (CGS)", settings, workers, cpu_timed(fit, cpu), extract,
                                      train, heldout, S))
            print()
            print_table(rows)
            per_cpu = [train.n_tokens * S / max(c, 1e-9) for c in cpu]
            print("tokens per CPU-second: " + ", ".join(f"{r.system} {r.algorithm} {r.threads} thr {p:.0f}"
                                                         for r, p in zip(rows, per_cpu)))
            cgs = rows[0].tokens_per_second
            for r, p in zip(rows[1:3], per_cpu[1:3]):
                print(f"PartiallyCollapsedGibbs {r.threads} thr: {r.tokens_per_second / cgs:.2f}x sequential CGS "
                      f"wall-clock ({r.tokens_per_second / r.threads / cgs:.2f}x per thread), "
                      f"{p / per_cpu[0]:.2f}x per CPU-second; held-out "
                      f"{r.heldout_loglik - rows[0].heldout_loglik:+.4f} vs CGS")
            prof = kernel_profile(keep["state"], train)
            print(f"profile, one more partially collapsed sweep at 1 thread: Phi | z {prof['phi']:.3f} s, "
                  f"alias tables {prof['alias']:.3f} s, z | Phi {prof['z']:.3f} s; "
                  f"{prof['topics/doc']:.1f} topics per document")
    if args.out:
        with open(args.out, "w") as f:
            f.write(buf.getvalue())


class Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            st.write(s)
        return len(s)


if __name__ == "__main__":
    main()
