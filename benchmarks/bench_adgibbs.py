"""The delayed (AD-LDA / AD-HDP) Gibbs schedules at 2 threads against the sequential
samplers at 1 thread and tomotopy with ``workers=2``, side by side in one run, on
one of three corpora (``--corpus``):

* ``kos``: KOS (``bnpcore.datasets.load_kos``, 0.47 M tokens);
* ``synthetic``: ``bnpcore.datasets.write_synthetic`` with the fixed shape
  ``SYNTHETIC`` (5000 documents of 250 tokens on average, 8000 words, 100 HDP
  topics, seed 0: 1.2 M tokens), written to a temporary directory;
* ``text``: real text, the docstrings of the standard library and of the
  installed packages ``--text-packages`` (default numpy, scipy, sklearn,
  pandas, matplotlib; one that is not installed is left out and named), one
  document per docstring, in sorted file order (``bench_defaults.stdlib_docstrings``),
  counted by ``Corpus.from_texts(min_df=5, max_df=0.5)`` (1.16 M tokens with
  this machine's packages; the size and package versions are printed).

The sweep counts default to the KOS run's (1000 HDP and 300 LDA sweeps) on KOS
and to 250 and 100 on the two larger corpora, so that one corpus takes about
15 minutes on a loaded 2-core machine; the header says so when G-HDP's
reference is taken after fewer than 1000 sweeps.

Everything fits the same 90% of each document's tokens (``harness.token_split``)
and is scored by document completion on the other 10%: the current sample's
predictive (n_jk + prior) / (N_j + total prior) and (n_kw + eta) / (n_k + W eta)
on the held-out tokens (``bench_pchdp.run``'s callback for bnpcore, the same
formulas from tomotopy's counts), one sample, scoring time not counted.

* HDP: G-HDP (``hdp.DirectAssignmentGibbs``, 1 thread) for ``--hdp-sweeps``
  sweeps from ``--init-topics`` topics; AD-HDP (``schedule="delayed"``, 2
  threads) with each rule for new topics ("match", "separate"); tomotopy
  ``HDPModel`` with ``workers=2`` (its default parallel scheme). Reported: the
  time each needs to come within 0.02 per word of G-HDP's held-out after its
  last sweep, as a fraction of G-HDP's whole run (the issue's target: <= 0.6).
  The two rules run the same chain; the CPU seconds of the one step where they
  differ (placing the blocks' new topics) are printed with the births, so that
  a difference in their CPU s beyond it is the machine's.
* LDA, K = ``--lda-topics``: ``lda.CollapsedGibbs`` (1 thread) and AD-LDA
  (``schedule="delayed"``, 2 threads) for ``--lda-sweeps`` sweeps, tokens/s
  and held-out after the same sweeps (target: >= 1.7x CGS's tokens/s, held-out
  within 0.02); tomotopy ``LDAModel`` with ``workers=2`` alongside.
  ``--lda-repeats N`` fits the CGS / AD-LDA pair N times in turn (the fits are
  the same each time) and prints each pair's ratio and their median: on a VM
  whose cores change speed from run to run, one pair's ratio is not enough.
  ``--interleave N`` then times the kernels sweep by sweep, so that the VM's
  phases fall on all of them alike: from a state after ``INTERLEAVE_BURN_IN``
  sweeps, N rounds of one sweep each of CGS (``_lda.cgs_sweep``, one thread),
  AD-LDA (``_lda.cgs_delayed_sweep``, two blocks on two threads) and the two
  halves of the documents (AD-LDA's blocks) swept by ``cgs_sweep`` at once in
  two threads, each against its own copy of the counts and never merged: the
  machine's two-core ceiling for AD-LDA's block work. Printed: the medians of
  the per-sweep ratios CGS / AD-LDA, CGS / halves and halves / AD-LDA.

Fit times are the samplers' own (``history_``'s ``fit_seconds``; tomotopy's
``train`` calls). The machine is shared: the load average is printed at the
start and end, and CPU tokens/s (per CPU-second of the process, all threads) is
printed next to the wall-clock rate.

Usage::

    python benchmarks/bench_adgibbs.py [--corpus kos|synthetic|text] [--hdp-sweeps 1000]
        [--lda-sweeps 300] [--lda-repeats 1] [--interleave 0] [--eval-every 50] [--skip hdp,lda,tomotopy]
        [--out benchmarks/results/bench_adgibbs_kos.txt]
"""
import argparse
import contextlib
import importlib.metadata
import importlib.util
import io
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pchdp import run, time_to_reach  # noqa: E402
from harness import threads_note, token_split  # noqa: E402

from bnpcore.evaluation import token_log_likelihood  # noqa: E402
from bnpcore.hdp import DirectAssignmentGibbs  # noqa: E402
from bnpcore.kernels import _lda  # noqa: E402
from bnpcore.lda import CollapsedGibbs  # noqa: E402
from bnpcore.models.lda import token_blocks  # noqa: E402

TOLERANCE = 0.02
# the synthetic corpus: about a million tokens in documents of KOS-like to news-like
# lengths, and a document concentration near the alpha G-HDP reaches on KOS
SYNTHETIC = dict(n_docs=5000, n_words=8000, n_topics=100, model="hdp", mean_length=250.0, alpha=5.0,
                 gamma=10.0, random_state=0)
TEXT_PACKAGES = "numpy,scipy,sklearn,pandas,matplotlib"
# (HDP sweeps, LDA sweeps, scoring interval) by corpus
SWEEPS = {"kos": (1000, 300, 50), "synthetic": (250, 100, 25), "text": (250, 100, 25)}
INTERLEAVE_BURN_IN = 100


def docstring_corpus(packages):
    """(corpus, description): the docstrings of the standard library and of the
    installed ``packages``, one document each, duplicates dropped."""
    from bench_defaults import stdlib_docstrings
    from bnpcore import Corpus
    texts, used, missing = stdlib_docstrings(), [], []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            missing.append(name)
            continue
        texts += stdlib_docstrings(root=os.path.dirname(spec.origin))
        dist = {"sklearn": "scikit-learn"}.get(name, name)
        used.append(f"{name} {importlib.metadata.version(dist)}")
    texts = list(dict.fromkeys(texts))
    note = f"docstrings of Python {sys.version.split()[0]}'s standard library and {', '.join(used) or 'no package'}"
    if missing:
        note += f" ({', '.join(missing)} not installed, left out)"
    return Corpus.from_texts(texts, min_df=5, max_df=0.5), note + ", Corpus.from_texts(min_df=5, max_df=0.5)"


def load_corpus(args, tmp):
    """(label, train, heldout) for ``args.corpus``; ``tmp`` holds the synthetic corpus."""
    if args.corpus == "kos":
        return "KOS", *token_split("kos")[1:]
    if args.corpus == "synthetic":
        from bnpcore.datasets import write_synthetic
        write_synthetic(os.path.join(tmp, "synthetic"), **SYNTHETIC)
        shape = ", ".join(f"{k}={v!r}" for k, v in SYNTHETIC.items())
        return f"synthetic (write_synthetic({shape}))", *token_split(os.path.join(tmp, "synthetic"))[1:]
    corpus, note = docstring_corpus([p for p in args.text_packages.split(",") if p])
    train, heldout = corpus.split_tokens(0.1, random_state=0)   # harness.token_split's split
    return f"text ({note})", train, heldout


def _tomotopy_docs(mdl, train):
    words, ptr = train.tokens()
    names = np.array([str(w) for w in range(train.n_words)])
    kept = [j for j in range(train.n_docs) if ptr[j + 1] > ptr[j]]
    for j in kept:
        mdl.add_doc(names[words[ptr[j]:ptr[j + 1]]].tolist())
    return kept


def _tomotopy_counts(mdl, train, kept, topics):
    """(n_jk, n_kw) of tomotopy's current sample over ``topics``."""
    ids = np.array([int(v) for v in mdl.used_vocabs])
    nkw = np.zeros((len(topics), train.n_words))
    for i, k in enumerate(topics):
        nkw[i, ids] = np.rint(np.asarray(mdl.get_topic_word_dist(k, normalize=False), dtype=np.float64) - mdl.eta)
    ndk = np.zeros((train.n_docs, mdl.k))
    for j, doc in zip(kept, mdl.docs):
        ndk[j] = np.bincount(np.asarray(doc.topics), minlength=mdl.k)
    return ndk[:, topics], np.maximum(nkw, 0.0)


def tomotopy_hdp(train, heldout, args, workers=2):
    import tomotopy as tp
    W = train.n_words
    eta = 100.0 / W
    mdl = tp.HDPModel(initial_k=args.init_topics, alpha=1.0, eta=eta, gamma=1.0, seed=args.seed)
    kept = _tomotopy_docs(mdl, train)
    mdl.train(0, workers=workers)
    trace, secs, cpu = [], 0.0, 0.0
    for it in range(args.eval_every, args.hdp_sweeps + 1, args.eval_every):
        t, c = time.perf_counter(), time.process_time()
        mdl.train(args.eval_every, workers=workers)
        secs, cpu = secs + time.perf_counter() - t, cpu + time.process_time() - c
        live = [k for k in range(mdl.k) if mdl.is_live_topic(k)]
        ndk, nkw = _tomotopy_counts(mdl, train, kept, live)
        # tomotopy exposes no global weights: n_k / N stands for them (as benchmarks/bench_hdp.py)
        n_k = ndk.sum(0)
        theta = (ndk + mdl.alpha * n_k / n_k.sum()) / (ndk.sum(1) + mdl.alpha)[:, None]
        phi = (nkw + eta) / (nkw.sum(1) + W * eta)[:, None]
        trace.append((it, secs, token_log_likelihood(theta, phi, heldout, 1), len(live), mdl.alpha, mdl.gamma))
    tokens = train.n_tokens * args.hdp_sweeps
    return {"name": "tomotopy HDPModel", "threads": workers, "seconds": secs, "tok_s": tokens / secs / workers,
            "cpu_tok_s": tokens / cpu, "heldout": trace[-1][2], "topics": trace[-1][3], "alpha": mdl.alpha,
            "gamma": mdl.gamma}, trace


def lda_row(name, est, train, heldout, threads):
    cpu = time.process_time()
    est.fit(train)
    cpu = time.process_time() - cpu
    secs = est.history_[-1]["fit_seconds"]
    tokens = train.n_tokens * len(est.history_)
    return {"name": name, "threads": threads, "seconds": secs, "tok_s": tokens / secs, "cpu_tok_s": tokens / cpu,
            "heldout": token_log_likelihood(est.doc_topic_, est.topics_, heldout, 1)}


def tomotopy_lda(train, heldout, args, alpha, eta, workers=2):
    import tomotopy as tp
    K = args.lda_topics
    mdl = tp.LDAModel(k=K, alpha=alpha, eta=eta, seed=args.seed)
    mdl.optim_interval = 0
    kept = _tomotopy_docs(mdl, train)
    mdl.train(0, workers=workers)
    t, c = time.perf_counter(), time.process_time()
    mdl.train(args.lda_sweeps, workers=workers)
    secs, cpu = time.perf_counter() - t, time.process_time() - c
    ndk, nkw = _tomotopy_counts(mdl, train, kept, list(range(K)))
    theta = (ndk + alpha) / (ndk.sum(1) + K * alpha)[:, None]
    phi = (nkw + eta) / (nkw.sum(1) + train.n_words * eta)[:, None]
    tokens = train.n_tokens * args.lda_sweeps
    return {"name": "tomotopy LDAModel", "threads": workers, "seconds": secs, "tok_s": tokens / secs,
            "cpu_tok_s": tokens / cpu, "heldout": token_log_likelihood(theta, phi, heldout, 1)}


@contextlib.contextmanager
def placing_seconds():
    """CPU seconds AD-HDP spends placing the blocks' new topics (``_place_births``,
    all the work in which the two ``new_topics`` rules differ), summed into the list yielded."""
    from bnpcore.models.hdp_gibbs import _DelayedGibbsState
    real, spent = _DelayedGibbsState._place_births, [0.0]

    def timed(self, births, K):
        start = time.process_time()
        try:
            return real(self, births, K)
        finally:
            spent[0] += time.process_time() - start
    _DelayedGibbsState._place_births = timed
    try:
        yield spent
    finally:
        _DelayedGibbsState._place_births = real


def hdp_part(train, heldout, args):
    common = dict(n_components=args.init_topics, max_iter=args.hdp_sweeps, burn_in=args.hdp_sweeps - 1,
                  eta_tot=100.0, random_state=args.seed)
    results = [run("G-HDP", DirectAssignmentGibbs(n_threads=1, **common), train, heldout, args.eval_every, 1)]
    births = {}
    for rule in ("match", "separate"):
        est = DirectAssignmentGibbs(schedule="delayed", new_topics=rule, n_threads=2, **common)
        with placing_seconds() as placing:
            results.append(run(f"AD-HDP {rule}", est, train, heldout, args.eval_every, 2))
        births[f"AD-HDP {rule}"] = (sum(h["new_topics"] for h in est.history_),
                                    sum(h["matched_topics"] for h in est.history_), placing[0])
    if "tomotopy" not in args.skip:
        results.append(tomotopy_hdp(train, heldout, args))
    print(f"\nHDP, {args.hdp_sweeps} sweeps from {args.init_topics} topics (eta = 100 / W; bnpcore resamples "
          f"alpha and gamma, tomotopy optimises them from 1)")
    if args.hdp_sweeps < 1000:
        print(f"G-HDP's reference below is its held-out after {args.hdp_sweeps} sweeps, not KOS's 1000 (a "
              f"shorter run, to keep this corpus within ~15 minutes)")
    print(f"{'system':<22} {'thr':>3} {'seconds':>8} {'CPU s':>7} {'tok/s/thread':>12} {'CPU tok/s':>10} "
          f"{'held-out':>9} {'topics':>6}")
    for r, _ in results:
        cpu = train.n_tokens * args.hdp_sweeps / r["cpu_tok_s"]
        print(f"{r['name']:<22} {r['threads']:3d} {r['seconds']:8.1f} {cpu:7.1f} {r['tok_s']:12.0f} "
              f"{r['cpu_tok_s']:10.0f} {r['heldout']:9.4f} {r['topics']:6d}")
    for name, (born, matched, placing) in births.items():
        print(f"{name}: {born} new topics born in the blocks over the run, {matched} merged by matching; "
              f"placing them took {placing:.2f} CPU s")
    base = results[0][0]
    target = base["heldout"] - TOLERANCE
    print(f"\ntime to come within {TOLERANCE} of G-HDP's held-out after {args.hdp_sweeps} sweeps "
          f"({base['heldout']:.4f}, so {target:.4f}), against G-HDP's {base['seconds']:.1f} s:")
    for r, trace in results:
        it, secs = time_to_reach(trace, target)
        print(f"  {r['name']:<22} {r['threads']} thr: " + (
            f"sweep {it}, {secs:.1f} s = {secs / base['seconds']:.2f} x" if it else "not reached"))
    print("\ntraces: sweep, fit seconds, held-out, topics, alpha, gamma")
    for r, trace in results:
        print(f"  {r['name']} ({r['threads']} thr)")
        for it, secs, ll, k, a, g in trace:
            print(f"    {it:5d} {secs:8.1f} {ll:9.4f} {k:5d} {a:6.3f} {g:7.3f}")


def interleave(train, K, alpha, eta, n_sweeps, seed):
    """Per-sweep seconds of CGS, AD-LDA and the two halves at once (see the module
    docstring), from one state after ``INTERLEAVE_BURN_IN`` CGS sweeps; the order of
    the three turns around every round."""
    rng = np.random.default_rng(seed)
    alpha, eta = np.full(K, alpha), np.full(train.n_words, eta)
    W, corpus = train.n_words, (train.indptr, train.indices, train.counts)
    z = rng.integers(0, K, train.n_tokens, dtype=np.int32)
    nwk, nk = np.zeros((W, K), np.int32), np.zeros(K, np.int64)
    _lda.count_word_topics(*corpus, z, nwk, nk)
    wtopics, wlen = np.empty((W, K), np.int32), np.empty(W, np.int32)
    _lda.word_topic_lists(nwk, wtopics, wlen)
    scratch = lambda: (np.empty(3 * K), np.empty(3 * K, np.int32))    # noqa: E731
    for _ in range(INTERLEAVE_BURN_IN):
        _lda.cgs_sweep(*corpus, alpha, eta, eta.sum(), z, nwk, nk, wtopics, wlen, *scratch(), rng)
    state = lambda: (z.copy(), (nwk.copy(), nk.copy(), wtopics.copy(), wlen.copy()))    # noqa: E731
    (z_c, counts_c), (z_a, counts_a) = state(), state()
    tok_ptr = np.concatenate([[0], np.cumsum(train.doc_lengths)])
    starts = token_blocks(tok_ptr, 2)
    blocks = starts, tok_ptr[starts].astype(np.int64)
    copies = (np.empty((2, W, K), np.int32), np.empty((2, W, K), np.int32), np.empty((2, W), np.int32),
              np.empty((2, 3 * K + 16)), np.empty((2, 3 * K + 16), np.int32))
    halves = []
    for b in range(2):
        (d0, d1), (t0, t1) = starts[b:b + 2], tok_ptr[starts[b:b + 2]]
        p0, p1 = train.indptr[d0], train.indptr[d1]
        z_h, counts_h = state()
        halves.append((train.indptr[d0:d1 + 1] - p0, train.indices[p0:p1], train.counts[p0:p1], alpha, eta,
                       eta.sum(), z_h[t0:t1].copy(), *counts_h, *scratch(), np.random.default_rng(seed + 1 + b)))
    pool = ThreadPoolExecutor(2)
    scratch_c = scratch()
    sweeps = {
        "CGS": lambda: _lda.cgs_sweep(*corpus, alpha, eta, eta.sum(), z_c, *counts_c, *scratch_c, rng),
        "AD-LDA": lambda: _lda.cgs_delayed_sweep(*corpus, blocks, alpha, eta, eta.sum(), z_a, counts_a, copies,
                                                 int(rng.integers(0, 1 << 63)), rng, 2),
        "halves": lambda: list(pool.map(lambda h: _lda.cgs_sweep(*h), halves)),
    }
    seconds = {name: [] for name in sweeps}
    with pool:
        for r in range(n_sweeps):
            for name in (list(sweeps) if r % 2 else list(sweeps)[::-1]):
                t = time.perf_counter()
                sweeps[name]()
                seconds[name].append(time.perf_counter() - t)
    return {name: np.array(v) for name, v in seconds.items()}


def lda_part(train, heldout, args):
    alpha, eta, K, S = 0.1, 0.01, args.lda_topics, args.lda_sweeps
    common = dict(n_components=K, alpha=alpha, eta=eta, max_iter=S, burn_in=S - 1, random_state=args.seed)
    rows = [lda_row("CGS", CollapsedGibbs(n_threads=1, **common), train, heldout, 1),
            lda_row("AD-LDA", CollapsedGibbs(schedule="delayed", n_threads=2, **common), train, heldout, 2)]
    if "tomotopy" not in args.skip:
        rows.append(tomotopy_lda(train, heldout, args, alpha, eta))
    print(f"\nLDA, K = {K}, alpha = {alpha}, eta = {eta}, {S} sweeps (held-out: the final sample); "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')} (libgomp's idle threads spin by default, "
          f"which counts in the CPU columns)")
    print(f"{'system':<22} {'thr':>3} {'seconds':>8} {'CPU s':>7} {'tokens/s':>11} {'CPU tok/s':>10} "
          f"{'held-out':>9} {'x CGS tok/s':>11}")
    for r in rows:
        print(f"{r['name']:<22} {r['threads']:3d} {r['seconds']:8.2f} {train.n_tokens * S / r['cpu_tok_s']:7.1f} "
              f"{r['tok_s']:11.0f} {r['cpu_tok_s']:10.0f} {r['heldout']:9.4f} {r['tok_s'] / rows[0]['tok_s']:11.2f}")
    cgs, ad = rows[0], rows[1]
    print(f"AD-LDA: {ad['tok_s'] / cgs['tok_s']:.2f} x CGS's tokens/s (target >= 1.7), held-out "
          f"{ad['heldout'] - cgs['heldout']:+.4f} against CGS's (target within {TOLERANCE})")
    if args.lda_repeats > 1:
        ratios = [ad["tok_s"] / cgs["tok_s"]]
        print("repeats of the pair (CGS s, AD-LDA s, AD-LDA CPU s, x CGS tok/s, load):")
        print(f"   1 {cgs['seconds']:7.2f} {ad['seconds']:7.2f} {train.n_tokens * S / ad['cpu_tok_s']:7.1f} "
              f"{ratios[0]:5.2f}")
        for r in range(2, args.lda_repeats + 1):
            c = lda_row("CGS", CollapsedGibbs(n_threads=1, **common), train, heldout, 1)
            a = lda_row("AD-LDA", CollapsedGibbs(schedule="delayed", n_threads=2, **common), train, heldout, 2)
            ratios.append(a["tok_s"] / c["tok_s"])
            print(f"  {r:2d} {c['seconds']:7.2f} {a['seconds']:7.2f} {train.n_tokens * S / a['cpu_tok_s']:7.1f} "
                  f"{ratios[-1]:5.2f}   {os.getloadavg()[0]:.2f}", flush=True)
        print(f"AD-LDA over {len(ratios)} pairs: median {np.median(ratios):.2f} x CGS's tokens/s "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    if args.interleave:
        t = interleave(train, K, alpha, eta, args.interleave, args.seed)
        print(f"\nkernels interleaved sweep by sweep ({args.interleave} rounds after {INTERLEAVE_BURN_IN} CGS sweeps; "
              f"load {os.getloadavg()[0]:.2f} at the end): ms per sweep, median (min): "
              + ", ".join(f"{name} {1e3 * np.median(v):.2f} ({1e3 * v.min():.2f})" for name, v in t.items()))
        for num, den in (("CGS", "AD-LDA"), ("CGS", "halves"), ("halves", "AD-LDA")):
            r = t[num] / t[den]
            print(f"  {num} / {den}: median of the per-sweep ratios {np.median(r):.3f} (quartiles "
                  f"{np.quantile(r, 0.25):.3f}, {np.quantile(r, 0.75):.3f}); ratio of the sums "
                  f"{t[num].sum() / t[den].sum():.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=sorted(SWEEPS), default="kos")
    ap.add_argument("--text-packages", default=TEXT_PACKAGES,
                    help="--corpus text: the packages whose docstrings join the standard library's")
    ap.add_argument("--hdp-sweeps", type=int, default=None, help="default: 1000 on KOS, 250 on the others")
    ap.add_argument("--lda-sweeps", type=int, default=None, help="default: 300 on KOS, 100 on the others")
    ap.add_argument("--lda-topics", type=int, default=50)
    ap.add_argument("--lda-repeats", type=int, default=1,
                    help="fit the CGS / AD-LDA pair this many times in turn; print each ratio and the median")
    ap.add_argument("--interleave", type=int, default=0, metavar="N",
                    help="then time N rounds of CGS, AD-LDA and the two halves, sweep by sweep (see above)")
    ap.add_argument("--eval-every", type=int, default=None, help="default: 50 on KOS, 25 on the others")
    ap.add_argument("--init-topics", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", default="", help="comma-separated: hdp, lda, tomotopy")
    ap.add_argument("--out", default=None, help="also write the output to this file")
    args = ap.parse_args(argv)
    started = time.gmtime()
    args.skip = set(filter(None, args.skip.split(",")))
    for name, default in zip(("hdp_sweeps", "lda_sweeps", "eval_every"), SWEEPS[args.corpus]):
        if getattr(args, name) is None:
            setattr(args, name, default)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf) if args.out else contextlib.nullcontext(), \
            tempfile.TemporaryDirectory(prefix="bench_adgibbs_") as tmp:
        load = "load average {:.2f}, {:.2f}, {:.2f} (1, 5, 15 min)"
        print(f"{load.format(*os.getloadavg())} at the start")
        label, train, heldout = load_corpus(args, tmp)
        print(f"{label}: {train.n_docs} documents, {train.n_words} words, {train.n_tokens + heldout.n_tokens} "
              f"tokens, {train.n_tokens} of them for training; {threads_note()}")
        if "lda" not in args.skip:
            lda_part(train, heldout, args)
        if "hdp" not in args.skip:
            hdp_part(train, heldout, args)
        print(f"\n{load.format(*os.getloadavg())} at the end")
    if args.out:
        text = buf.getvalue()
        sys.stdout.write(text)
        with open(args.out, "w") as f:
            f.write(f"# python benchmarks/bench_adgibbs.py {' '.join(argv if argv is not None else sys.argv[1:])}"
                    f"   (started {time.strftime('%Y-%m-%d %H:%M', started)}, "
                    f"ended {time.strftime('%H:%M UTC', time.gmtime())})\n" + text)


if __name__ == "__main__":
    main()
