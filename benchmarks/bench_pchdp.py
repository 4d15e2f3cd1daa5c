"""The partially collapsed HDP sampler (``hdp.PartiallyCollapsedGibbs``, PC-HDP)
at 1 and 2 threads against bnpcore's sequential direct-assignment sampler
(``hdp.DirectAssignmentGibbs``, G-HDP) on KOS, side by side in one run.

Every system fits the same 90% of each KOS document's tokens
(``harness.token_split``) with the same topic prior (eta = 100 / W per word,
G-HDP's eta_tot = 100), concentrations resampled under the same priors (or
fixed, the same for all, with ``--alpha`` and ``--gamma``), from the same
number of starting topics. Every ``--eval-every`` sweeps a callback
scores the current sample's predictive, (n_jk + alpha Psi_k) / (N_j + alpha)
and (n_kw + eta) / (n_k + W eta), on the held-out 10% (document completion,
one sample; the scoring time is not counted). Fit time is the sampler's own
(``history_``'s ``fit_seconds``); tokens/s per thread = training tokens x
sweeps / fit time / threads; CPU tokens/s = the same per CPU-second of the
process (all threads), which neighbours on a shared machine disturb less.

The table: per system tokens/s, held-out and topics at the end, the final
concentrations; then the time each system needs to reach G-HDP's held-out at
its last sweep (the issue's target: PC-HDP at 2 threads in at most half of
G-HDP's time), then the held-out, topic and concentration traces.
``--tail-mass`` compares PC-HDP's z-step splits (the stick mass at which its
tail starts; any split is exact, they differ in mixing and cost).

Usage::

    python benchmarks/bench_pchdp.py [--sweeps 1000] [--eval-every 50] [--threads 1,2]
        [--phi ppu[,dirichlet]] [--alpha A --gamma G] [--tail-mass M[,M2...]] [--init-topics 100]
        [--out FILE]
"""
import argparse
import contextlib
import io
import os
import sys
import time

import numpy as np

from bnpcore.evaluation import token_log_likelihood
from bnpcore.hdp import DirectAssignmentGibbs, PartiallyCollapsedGibbs
from bnpcore.models import hdp_pc

try:
    from harness import threads_note, token_split
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import threads_note, token_split


def run(name, est, train, heldout, every, threads):
    """Fit ``est`` with a scoring callback; returns the row and the trace (the
    row's CPU time leaves the scoring out, as ``fit_seconds`` does)."""
    trace, scoring = [], [0.0]

    def score(model, rec):
        if rec["iteration"] % every == 0:
            start = time.process_time()
            theta, phi = model._batch_state.predictive()
            ll = token_log_likelihood(theta, phi, heldout, 1)
            trace.append((rec["iteration"], rec["fit_seconds"], ll, rec["n_components"], rec["alpha"],
                          rec["gamma"]))
            scoring[0] += time.process_time() - start

    cpu = time.process_time()
    with est.reporting(score):
        est.fit(train)
    cpu = time.process_time() - cpu - scoring[0]
    h = est.history_
    secs = h[-1]["fit_seconds"]
    tokens = train.n_tokens * len(h)
    return {"name": name, "threads": threads, "seconds": secs, "tok_s": tokens / secs / threads,
            "cpu_tok_s": tokens / cpu, "heldout": trace[-1][2], "topics": est.n_components_,
            "alpha": est.alpha_, "gamma": est.gamma_}, trace


def time_to_reach(trace, target):
    for it, secs, ll, *_ in trace:
        if ll >= target:
            return it, secs
    return None, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=1000)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--init-topics", type=int, default=100)
    ap.add_argument("--phi", default="ppu", help="PC-HDP's Phi: ppu, dirichlet or both, comma-separated")
    ap.add_argument("--alpha", type=float, default=None, help="fixed document concentration (default: resampled)")
    ap.add_argument("--gamma", type=float, default=None, help="fixed top-level concentration (default: resampled)")
    ap.add_argument("--tail-mass", default=str(hdp_pc.TAIL_MASS),
                    help="PC-HDP's z-step split (hdp_pc.TAIL_MASS): one value or several, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the output to this file")
    args = ap.parse_args(argv)
    phis = args.phi.split(",")
    if not set(phis) <= {"ppu", "dirichlet"}:
        ap.error(f"--phi: ppu and/or dirichlet, got {args.phi!r}")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf) if args.out else contextlib.nullcontext():
        corpus, train, heldout = token_split("kos")
        fixed = ", ".join(f"{name} = {v:g}" for name, v in (("alpha", args.alpha), ("gamma", args.gamma))
                          if v is not None)
        print(f"KOS: {train.n_docs} documents, {train.n_words} words, {train.n_tokens} training tokens; "
              f"{args.sweeps} sweeps from {args.init_topics} topics; fixed concentrations: {fixed or 'none'}; "
              f"{threads_note()}; "
              f"load average {os.getloadavg()[0]:.1f} at the start")
        eta = 100.0 / train.n_words
        common = dict(n_components=args.init_topics, max_iter=args.sweeps, burn_in=args.sweeps - 1,
                      alpha=args.alpha, gamma=args.gamma, random_state=args.seed)
        results = [run("G-HDP", DirectAssignmentGibbs(eta_tot=100.0, n_threads=1, **common), train, heldout,
                       args.eval_every, 1)]
        masses = [float(m) for m in args.tail_mass.split(",")]
        for phi in phis:
            for mass in masses:
                hdp_pc.TAIL_MASS = mass
                for T in [int(t) for t in args.threads.split(",")]:
                    est = PartiallyCollapsedGibbs(eta=eta, phi=phi, n_threads=T, **common)
                    name = f"PC-HDP {phi}" + (f" {mass:g}" if len(masses) > 1 else "")
                    results.append(run(name, est, train, heldout, args.eval_every, T))
        print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
        print(f"{'system':<22} {'thr':>3} {'seconds':>8} {'tok/s/thread':>12} {'CPU tok/s':>10} "
              f"{'held-out':>9} {'topics':>6} {'alpha':>6} {'gamma':>6}")
        for row, _ in results:
            print(f"{row['name']:<22} {row['threads']:3d} {row['seconds']:8.1f} {row['tok_s']:12.0f} "
                  f"{row['cpu_tok_s']:10.0f} {row['heldout']:9.4f} {row['topics']:6d} {row['alpha']:6.2f} "
                  f"{row['gamma']:6.2f}")
        target = results[0][0]["heldout"]
        base = results[0][0]["seconds"]
        print(f"\ntime to reach G-HDP's held-out after {args.sweeps} sweeps ({target:.4f}):")
        for row, trace in results:
            it, secs = time_to_reach(trace, target)
            print(f"  {row['name']:<22} {row['threads']} thr: " + ("not reached" if it is None else
                  f"sweep {it}, {secs:.1f} s = {secs / base:.2f} x G-HDP's {base:.1f} s"))
        print("\ntraces: sweep, fit seconds, held-out, topics, alpha, gamma")
        for row, trace in results:
            print(f"  {row['name']} ({row['threads']} thr)")
            for it, secs, ll, k, a, g in trace:
                print(f"    {it:5d} {secs:8.1f} {ll:9.4f} {k:5d} {a:6.3f} {g:6.3f}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(buf.getvalue())
        sys.stdout.write(buf.getvalue())


if __name__ == "__main__":
    main()
