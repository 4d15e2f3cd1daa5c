"""Every bnpcore estimator at 1 and 2 threads, and tomotopy's LDA and HDP at 1 and
2 workers, on the same token split in one run.

    python benchmarks/bench_threads.py                          # KOS, every registered model
    python benchmarks/bench_threads.py --path docword.nips.txt --vocab vocab.nips.txt
    python benchmarks/bench_threads.py --models lda-cvb0 lda-cvb0/delayed --iterations 50
    python benchmarks/bench_threads.py --path /tmp/nips --repeat 3   # NIPS-sized: bnpcore.datasets.write_synthetic

For each model: training seconds and tokens/s (training tokens x iterations /
seconds), the median seconds of one iteration (from ``fit_seconds`` in
``history_``: the steady state, without the setup before the first iteration
and the work after the last, which dominate short fits), the seconds of the held-out evaluation (``transform`` of the
observed tokens plus the scoring kernel: the per-document kernels every
estimator runs in parallel), the speed-up of the three at 2 threads over 1, and the
held-out per-word log-likelihood (document completion, ``harness``'s neutral
protocol: 10% of each document's tokens held out). ``name/delayed`` runs a
registered model with ``schedule="delayed"`` (the delayed-update CVB/CVB0
and CV-HDP); ``hdp-da-batch/no-moves`` is bHDP without split and merge moves
(this isolates the parallel E-step: of the moves only the split proposals
run on the threads).
Iterations: ``--iterations`` for every model with an iteration parameter
(burn-in and kept samples shrunk to fit), the registry's settings otherwise.

Timings on a machine shared with other work are only comparable within one
run (ratios side by side); the caption prints the load average. ``--no-eval``
skips bnpcore's held-out evaluation (a fit-only table: at K = 50 on a NIPS-sized
corpus CVB's ``transform``, pair by pair with a log and an exp per topic,
takes 37 s a fit on one thread, StandardVB's 4 s). ``--repeat R``
fits every model R times at 1 and 2 threads in turn and reports the median
seconds. The caption also gives the machine's own ceiling: the throughput of
two processes running a pure-Python loop that shares nothing, over one
process, as the median of ``--repeat`` trials (2.0 on two idle cores; on a
virtual machine whose second core is shared with other guests it is lower, and
no kernel can beat it).

``--kernels`` adds a second table: the seconds of every kernel call of each
fit and evaluation (``harness.KernelClock``: the functions of the
``bnpcore.kernels._*`` modules, timed where the Python code calls them) at 1
and 2 threads, their medians over the repeats and the speed-up, for the
kernels that took at least 1% of the model's time; "par" marks the kernels
with an ``n_threads`` parameter. This isolates the parallel kernels from the
serial steps between them (an iteration's "iter x" includes both).
"""
import argparse
import contextlib
import math
import multiprocessing
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import installed, tomotopy_hdp, tomotopy_lda  # noqa: E402
from harness import KernelClock, threads_note, token_split  # noqa: E402

THREADS = (1, 2)
# The settings of the recorded thread tables (benchmarks/results/bench_threads_*.txt) for the
# models whose registry entries now take the class defaults (chosen from the data, with a
# single-threaded Gibbs start for hdp-cvb): fixed, so that the rows measure the same fits.
PINNED = {"hdp-cvb": {"n_components": 120, "max_iter": 100, "eta_tot": 100.0, "init": "random"},
          "hdp-pcgs": {"n_components": 1, "max_iter": 1000, "burn_in": 200, "eta": 0.01},
          "hdp-online-vb": {"n_components": 300, "n_atoms": 15, "eta": 0.01, "gamma": 1.0, "alpha": 1.0,
                            "doc_init": "ranked", "batch_size": 100, "n_epochs": 20}}
# registered model with schedule="delayed" (delayed-update CVB / CVB0)
VARIANTS = {"lda-cvb0/delayed": ("lda-cvb0", {"schedule": "delayed"}),
            "lda-cvb/delayed": ("lda-cvb", {"schedule": "delayed"}),
            "hdp-cvb/delayed": ("hdp-cvb", {"schedule": "delayed"}),
            "hdp-da-batch/no-moves": ("hdp-da-batch", {"split_merge": False})}


def _spin(n):
    total = 0
    for i in range(n):
        total += i
    return total


def machine_ceiling(repeat, n=5_000_000):
    """Median over ``repeat`` trials of 2 x (seconds of one forked process
    running ``_spin(n)``) / (seconds of two at once): the speed-up two threads
    could get on this machine now, with nothing shared."""
    fork = multiprocessing.get_context("fork")

    def seconds(n_procs):
        procs = [fork.Process(target=_spin, args=(n,)) for _ in range(n_procs)]
        start = time.perf_counter()
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        return time.perf_counter() - start

    return statistics.median(2 * seconds(1) / seconds(2) for _ in range(repeat))


def make_estimator(name, threads, cfg):
    """The registered model ``name`` (or a VARIANTS entry) with KOS defaults,
    ``cfg.iterations`` iterations and ``threads`` threads."""
    from bnpcore.registry import get as get_model
    base, extra = VARIANTS.get(name, (name, {}))
    spec = get_model(base)
    params = spec.load_class()._param_names()
    overrides = dict(PINNED.get(base, {}), **extra, n_threads=threads)
    if base.startswith("lda-") and cfg.topics:
        overrides["n_components"] = cfg.topics
    if "random_state" in params:
        overrides["random_state"] = cfg.seed
    it = spec.iteration_param()
    if it is not None and cfg.iterations:
        overrides[it] = cfg.iterations
        for keep in ("burn_in", "n_samples"):     # samplers: at most half of the sweeps
            if keep in params:
                given = overrides.get(keep, spec.kwargs.get(keep, cfg.iterations))
                overrides[keep] = min(given, cfg.iterations // 2)
    return spec.make(**overrides)


def iteration_seconds(history):
    """Median seconds of one iteration, from the cumulative ``fit_seconds`` of
    each record: the algorithm's steady state, without the setup before the
    first iteration or the work after the last."""
    ticks = [0.0] + [r["fit_seconds"] for r in history if "fit_seconds" in r]
    return statistics.median(b - a for a, b in zip(ticks, ticks[1:])) if len(ticks) > 1 else float("nan")


def run_model(name, observed, heldout, cfg, kernel_rows=None):
    """One row per thread count: (system, name, threads, iterations, fit s, tokens/s, iteration s,
    eval s, heldout), seconds the medians of ``cfg.repeat`` fits, thread counts in turn. With
    ``cfg.kernels``, appends the model's rows of the kernel table to ``kernel_rows``."""
    from bnpcore.cli import heldout_score
    runs = {threads: [] for threads in THREADS}
    clocks = {threads: [] for threads in THREADS}
    for _ in range(cfg.repeat):
        for threads in THREADS:
            est = make_estimator(name, threads, cfg)
            with KernelClock() if cfg.kernels else contextlib.nullcontext() as clock:
                start = time.perf_counter()
                est.fit(observed)
                fit_s = time.perf_counter() - start
                history = getattr(est, "history_", None) or ()
                iterations = max(1, len(history))
                start = time.perf_counter()
                ll = float("nan") if cfg.no_eval else heldout_score(est, observed, heldout, est.transform(observed))
                eval_s = float("nan") if cfg.no_eval else time.perf_counter() - start
            runs[threads].append((fit_s, eval_s, iteration_seconds(history), iterations, ll))
            clocks[threads].append(clock)
    if cfg.kernels:
        kernel_rows += kernel_table(name, runs, clocks)
    rows = []
    for threads, fits in runs.items():
        fit_s = statistics.median(f[0] for f in fits)
        iterations, ll = fits[0][3:]
        rows.append(("bnpcore", name, threads, iterations, fit_s, observed.n_tokens * iterations / fit_s,
                     statistics.median(f[2] for f in fits), statistics.median(f[1] for f in fits), ll))
    return rows


def kernel_table(name, runs, clocks, min_share=0.01):
    """Rows (name, kernel, parallel, calls, median seconds at each thread count) of the kernels
    that took at least ``min_share`` of the model's median 1-thread fit and evaluation at some
    thread count (a schedule may run another kernel on one thread: CollapsedVB's delayed
    schedule is the sequential sweep there), largest first; calls of the first fit that ran it."""
    one = THREADS[0]
    total = statistics.median(f[0] + (0.0 if math.isnan(f[1]) else f[1]) for f in runs[one])    # eval: nan if skipped
    rows = []
    for label in {k for t in THREADS for c in clocks[t] for k in c.seconds}:
        seconds = [statistics.median(c.seconds[label] for c in clocks[t]) for t in THREADS]
        first = next(c for t in THREADS for c in clocks[t] if c.calls[label])
        if max(seconds) >= min_share * total:
            rows.append((name, label, label in first.parallel, first.calls[label], *seconds))
    return sorted(rows, key=lambda row: -max(row[4:]))


def print_kernel_rows(rows, out=sys.stdout):
    head = (f"{'model':21} {'kernel':34} {'par':>3} {'calls':>6} " +
            " ".join(f"{f'{t} thr s':>8}" for t in THREADS) + f" {'x':>6}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, label, parallel, calls, *seconds in rows:
        speedup = f"{seconds[0] / seconds[-1]:6.2f}" if min(seconds) > 0.0 else f"{'-':>6}"
        print(f"{name:21} {label:34} {'yes' if parallel else 'no':>3} {calls:6d} "
              + " ".join(f"{x:8.3f}" if x > 0.0 else f"{'-':>8}" for x in seconds) + f" {speedup}", file=out)


def run_tomotopy(observed, heldout, cfg):
    rows = []
    for label, run, topics in (("tomotopy LDA", tomotopy_lda, cfg.topics), ("tomotopy HDP", tomotopy_hdp, 0)):
        for threads in THREADS:
            peer_cfg = argparse.Namespace(topics=topics, sweeps=cfg.sweeps, threads=threads, seed=cfg.seed)
            row = run(observed, heldout, peer_cfg)
            rows.append(("tomotopy", label, threads, cfg.sweeps, row.train_seconds, row.tokens_per_second,
                         float("nan"), float("nan"), row.heldout_loglik))
    return rows


def print_rows(rows, out=sys.stdout):
    head = (f"{'system':9} {'model':21} {'thr':>3} {'iters':>5} {'fit s':>8} {'tokens/s':>11} {'fit x':>6} "
            f"{'iter s':>7} {'iter x':>6} {'eval s':>7} {'eval x':>6} {'heldout':>8}")
    print(head, file=out)
    print("-" * len(head), file=out)
    first = {}
    for system, name, threads, iters, fit_s, tps, iter_s, eval_s, ll in rows:
        base = first.setdefault((system, name), (fit_s, iter_s, eval_s))
        fit_x, iter_x, eval_x = (b / t if t == t else float("nan") for b, t in zip(base, (fit_s, iter_s, eval_s)))
        print(f"{system:9} {name:21} {threads:3d} {iters:5d} {fit_s:8.2f} {tps:11.0f} {fit_x:6.2f} "
              f"{iter_s:7.3f} {iter_x:6.2f} {eval_s:7.2f} {eval_x:6.2f} {ll:8.4f}", file=out)


def parse_args(argv=None):
    from bnpcore.registry import names
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", default="kos", help="a UCI docword file (default: the bundled KOS)")
    p.add_argument("--vocab", help="UCI vocabulary file")
    p.add_argument("--models", nargs="+", default=names() + sorted(VARIANTS), metavar="MODEL",
                   help="registered models (bnpcore list) and the variants name/delayed, "
                        "hdp-da-batch/no-moves (default: all)")
    p.add_argument("--iterations", type=int, default=20,
                   help="iterations of every model with an iteration parameter (default 20; 0: the registry's)")
    p.add_argument("--topics", type=int, default=10,
                   help="K of every LDA model, bnpcore's (lda-*) and tomotopy's (default 10, the registry's)")
    p.add_argument("--sweeps", type=int, default=100, help="sweeps of tomotopy's samplers (default 100)")
    p.add_argument("--no-tomotopy", action="store_true", help="skip the tomotopy rows")
    p.add_argument("--no-eval", action="store_true",
                   help="skip bnpcore's held-out evaluation (eval s and heldout print nan): fits only")
    p.add_argument("--repeat", type=int, default=1,
                   help="fits per model and thread count, in turn; seconds are the medians (default 1)")
    p.add_argument("--kernels", action="store_true",
                   help="also print the seconds of every kernel call at each thread count (harness.KernelClock)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the table to this file")
    return p.parse_args(argv)


def main(argv=None):
    from bnpcore.registry import get as get_model
    cfg = parse_args(argv)
    corpus, observed, heldout = token_split(cfg.path, cfg.vocab, seed=cfg.seed)
    caption = (f"{cfg.path}: {corpus.n_docs} documents, {corpus.n_words} words, {observed.n_tokens} training "
               f"tokens; {threads_note()}; load average at start {os.getloadavg()[0]:.1f}; machine ceiling at "
               f"start {machine_ceiling(max(cfg.repeat, 3)):.2f}x")
    print(caption, flush=True)
    rows, kernel_rows = [], []
    for name in cfg.models:
        if "n_threads" not in get_model(VARIANTS.get(name, (name,))[0]).load_class()._param_names():
            print(f"skipping {name}: no n_threads parameter", file=sys.stderr)
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows += run_model(name, observed, heldout, cfg, kernel_rows)
    if not cfg.no_tomotopy:
        if installed("tomotopy"):
            rows += run_tomotopy(observed, heldout, cfg)
        else:
            print("skipping tomotopy: not installed (pip install .[bench])", file=sys.stderr)
    caption += (f"; load average at end {os.getloadavg()[0]:.1f}; machine ceiling at end "
                f"{machine_ceiling(max(cfg.repeat, 3)):.2f}x")
    print(caption)
    print_rows(rows)
    if cfg.kernels:
        print()
        print_kernel_rows(kernel_rows)
    if cfg.out:
        with open(cfg.out, "w") as fh:
            print("$ python benchmarks/bench_threads.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  file=fh)
            print(caption, file=fh)
            print_rows(rows, fh)
            if cfg.kernels:
                print(file=fh)
                print_kernel_rows(kernel_rows, fh)
    return rows


if __name__ == "__main__":
    main()
