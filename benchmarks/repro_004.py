"""Reproduce paper 004's KOS experiment (Welling, Teh & Kappen 2008, section 7;
ALGORITHMS.md 11.1).

K = 10, alpha = eta = 0.1, 10% of the tokens held out corpus-wide
(``split_tokens(0.1, mode="corpus_tokens")``), 300 iterations, test
perplexity after every iteration (eq 30; samplers and hybrids: online average
of samples after a burn-in of 10, eq 31), several seeds (one split per seed).
Prints the final perplexities of CGS, SVB, CVB, SVB/CGS and CVB/CGS and checks
the paper's orderings:

* T-HYB-1: SVB/CGS < SVB, CVB/CGS < CVB, CVB < SVB, CVB/CGS <= SVB/CGS, and
  CVB/CGS on par with CGS (paired difference within run-to-run noise);
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
    """The paper's orderings (ALGORITHMS.md 11.1) on the per-seed final perplexities."""
    final = {name: np.array([r["curve"][-1] for r in runs]) for name, runs in results.items()}
    checks = []

    def less(a, b, strict=True):
        if a in final and b in final:
            d = final[a] - final[b]
            ok = bool(np.all(d < 0)) if strict else bool(d.mean() <= 0 or _on_par(d))
            checks.append((f"{a} {'<' if strict else '<='} {b}", ok, d))

    less("SVB/CGS", "SVB")
    less("CVB/CGS", "CVB")
    less("CVB", "SVB")
    less("CVB/CGS", "SVB/CGS", strict=False)
    if "CVB/CGS" in final and "CGS" in final:
        d = final["CVB/CGS"] - final["CGS"]
        checks.append(("CVB/CGS on par with CGS", _on_par(d), d))
    plateaus = {name: np.mean([plateau(r["curve"]) for r in runs]) for name, runs in results.items()}
    for v in ("SVB", "CVB"):
        for s in ("CGS", "SVB/CGS", "CVB/CGS"):
            if v in final and s in final:
                ok = plateaus[v] < plateaus[s] and final[v].mean() > final[s].mean()
                checks.append((f"{v} plateaus before {s} at a worse perplexity", ok,
                               np.array([plateaus[v] - plateaus[s]])))
    return checks


def _on_par(d):
    """Paired differences within run-to-run noise: |mean| <= 2 standard errors,
    or below 0.5% of a typical perplexity when there is a single seed."""
    if len(d) < 2:
        return bool(abs(d.mean()) < 8.0)
    return bool(abs(d.mean()) <= 2 * d.std(ddof=1) / math.sqrt(len(d)) + 1e-9)


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
    print("\npaper 004 orderings (T-HYB-1, T-HYB-2):")
    checks = check(results)
    for text, ok, d in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] {text}   (differences: {np.round(d, 2).tolist()})")
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
