"""Reproduce the KOS experiment of [HYB] (Welling, Teh & Kappen 2008, "Hybrid
variational/Gibbs collapsed inference in topic models", section 7).

K = 10, alpha = eta = 0.1, 10% of the tokens held out corpus-wide
(``split_tokens(0.1, mode="corpus_tokens")``), 300 iterations, test
perplexity after every iteration (eq 30; samplers and hybrids: online average
of samples after a burn-in of 10, eq 31), several seeds (one split per seed).
Prints the final perplexities of CGS, SVB, CVB, SVB/CGS and CVB/CGS and checks
the paper's orderings:

* T-HYB-1: SVB/CGS < SVB, CVB/CGS < CVB, CVB < SVB, CVB/CGS <= SVB/CGS, and
  CVB/CGS on par with CGS. Each comparison prints the ordering that holds: the
  per-seed paired difference of final perplexities, its mean +- standard error,
  "<" or ">" beyond two standard errors, "=" within them (a single seed
  cannot judge);
* T-HYB-2: the pure variational algorithms plateau in fewer iterations than
  CGS and the hybrids, at a worse perplexity.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/repro_004.py [--seeds 5] [--sweeps 300] [--json out.json]

Times are training seconds (``history_[-1]["fit_seconds"]``: sweeps only, the
per-iteration evaluation excluded).
"""
import argparse
import json
import math
from pathlib import Path

import numpy as np

from bnpcore.cli import load_data
from bnpcore.lda import CollapsedGibbs, CollapsedVB, Hybrid, StandardVB

try:
    from harness import Row, print_table
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import Row, print_table



def algorithms(sweeps):
    common = dict(n_components=10, alpha=0.1, eta=0.1)
    return {
        "CGS": CollapsedGibbs(max_iter=sweeps, burn_in=10, **common),
        "SVB": StandardVB(max_iter=sweeps, tol=None, n_threads=1, **common),
        "CVB": CollapsedVB(order=2, max_iter=sweeps, tol=None, **common),
        "SVB/CGS": Hybrid(variational="standard", threshold=1, max_iter=sweeps, burn_in=10, **common),
        "CVB/CGS": Hybrid(variational="collapsed", threshold=1, max_iter=sweeps, burn_in=10, **common),
    }


def plateau(curve, rel=0.01):
    """First iteration whose perplexity is within ``rel`` of the final one."""
    final = curve[-1]
    return next(i + 1 for i, p in enumerate(curve) if abs(p - final) <= rel * final)


def run(seeds, sweeps, names, data="kos", log=print):
    corpus = load_data(data)
    results = {name: [] for name in names}
    for seed in range(seeds):
        observed, heldout = corpus.split_tokens(0.1, random_state=seed, mode="corpus_tokens")
        for name in names:
            est = algorithms(sweeps)[name].set_params(random_state=1000 + seed)
            est.fit(observed, heldout=heldout)
            curve = [rec["perplexity"] for rec in est.history_]
            seconds = est.history_[-1]["fit_seconds"]    # training only, evaluation excluded
            results[name].append({"seed": seed, "seconds": seconds, "curve": curve})
            log(f"seed {seed} {name:8s} perplexity {curve[-1]:8.2f}  plateau@{plateau(curve):3d}  "
                f"{seconds:6.1f} s", flush=True)
    return corpus, observed, results


def check(results):
    """The paper's orderings on the per-seed final perplexities: a list of
    (claim, ok, verdict) where the verdict says which ordering holds."""
    final = {name: np.array([r["curve"][-1] for r in runs]) for name, runs in results.items()}
    checks = []

    def compare(a, b, expected):
        """``expected`` is the set of orderings of a vs b the paper allows ("<", "=", ">")."""
        if a in final and b in final:
            order, verdict = ordering(final[a] - final[b])
            claim = {frozenset("<"): "<", frozenset("<="): "<=", frozenset("="): "on par with"}[frozenset(expected)]
            checks.append((f"{a} {claim} {b}", order in expected, f"{a} {order} {b}: {verdict}"))

    compare("SVB/CGS", "SVB", "<")
    compare("CVB/CGS", "CVB", "<")
    compare("CVB", "SVB", "<")
    compare("CVB/CGS", "SVB/CGS", "<=")
    compare("CVB/CGS", "CGS", "=")
    plateaus = {name: np.mean([plateau(r["curve"]) for r in runs]) for name, runs in results.items()}
    for v in ("SVB", "CVB"):
        for s in ("CGS", "SVB/CGS", "CVB/CGS"):
            if v in final and s in final:
                order, verdict = ordering(final[v] - final[s])
                ok = plateaus[v] < plateaus[s] and order == ">"
                checks.append((f"{v} plateaus before {s} at a worse perplexity", ok,
                               f"plateau {plateaus[v]:.0f} vs {plateaus[s]:.0f} iterations; {v} {order} {s}: {verdict}"))
    return checks


def ordering(d, z=2.0):
    """Which ordering the paired differences ``d`` = a - b (one per seed) support:
    "<" or ">" when the mean is more than ``z`` standard errors from 0, "=" when
    it is within them; "?" with a single seed (no spread to judge by). Returns
    (ordering, "mean +- standard error over n seeds")."""
    n = len(d)
    if n < 2:
        return "?", f"{d.mean():+.2f} from one seed (run --seeds >= 2 to judge)"
    se = d.std(ddof=1) / math.sqrt(n)
    order = "=" if abs(d.mean()) <= z * se else ("<" if d.mean() < 0 else ">")
    return order, f"{d.mean():+.2f} +- {se:.2f} over {n} seeds"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sweeps", type=int, default=300)
    parser.add_argument("--algorithms", default="CGS,SVB,CVB,SVB/CGS,CVB/CGS")
    parser.add_argument("--json", help="write the perplexity curves here")
    parser.add_argument("--data", default="kos", help="'kos' (bundled) or a UCI docword file")
    args = parser.parse_args(argv)
    names = args.algorithms.split(",")
    corpus, observed, results = run(args.seeds, args.sweeps, names, args.data)

    print(f"\nKOS: {corpus.n_docs} docs, W = {corpus.n_words}, N = {corpus.n_tokens}; K = 10, alpha = eta = 0.1, "
          f"10% of tokens held out, {args.sweeps} iterations, {args.seeds} seeds\n")
    print(f"{'algorithm':10} {'perplexity':>12} {'sd':>7} {'plateau it':>10} {'s/iter':>7}")
    rows = []
    for name, runs in results.items():
        final = np.array([r["curve"][-1] for r in runs])
        per_iter = np.mean([r["seconds"] / len(r["curve"]) for r in runs])
        print(f"{name:10} {final.mean():12.2f} {final.std(ddof=1) if len(final) > 1 else 0:7.2f} "
              f"{np.mean([plateau(r['curve']) for r in runs]):10.1f} {per_iter:7.3f}")
        rows.append(Row("bnpcore", name, f"K=10, {args.sweeps} it", 1, float(np.mean([r["seconds"] for r in runs])),
                        observed.n_tokens * len(runs[0]["curve"]) / np.mean([r["seconds"] for r in runs]), 10,
                        -math.log(final.mean())))
    print()
    print_table(rows)
    print("\n[HYB] orderings (T-HYB-1, T-HYB-2):")
    checks = check(results)
    for claim, ok, verdict in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] paper: {claim}; measured: {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
