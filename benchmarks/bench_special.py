"""Speed of the C core's special functions against scipy.special, and of the Stirling table.

Nanoseconds per element of bnpcore.kernels.special on 10^7 values (x log-uniform
in [1e-3, 1e3]; counts n integer in [0, 16] (99.98% of KOS document-word counts;
the short-product path), integer in [0, 50], or real in [0, 50]) against the scipy.special ufunc, or for the differences the SciPy
expression ``gammaln(x + n) - gammaln(x)`` / ``psi(x + n) - psi(x)``; and the
seconds to build the Stirling table to n = 10^4.

The classes follow asv's conventions (``params``, ``setup``, ``time_*``); run the
script to print the table (best of 3 repeats):

    OMP_NUM_THREADS=1 python benchmarks/bench_special.py [--size 10000000]
"""
import argparse
import time

import numpy as np
from scipy import special as sp

from bnpcore.kernels import special
from bnpcore.kernels.stirling import StirlingTable

SIZE = 10_000_000

UNARY = {
    "digamma": (special.digamma, sp.psi, "psi(x)"),
    "gammaln": (special.gammaln, sp.gammaln, "gammaln(x)"),
    "trigamma": (special.trigamma, lambda x: sp.polygamma(1, x), "polygamma(1, x)"),
}
BINARY = {
    "dlgamma": (special.dlgamma, lambda x, n: sp.gammaln(x + n) - sp.gammaln(x), "gammaln(x+n) - gammaln(x)"),
    "dpsi": (special.dpsi, lambda x, n: sp.psi(x + n) - sp.psi(x), "psi(x+n) - psi(x)"),
}


def make_inputs(size, seed=0):
    rng = np.random.default_rng(seed)
    x = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), size))
    counts = {
        "int 0-16": rng.integers(0, 17, size).astype(np.float64),
        "int 0-50": rng.integers(0, 51, size).astype(np.float64),
        "real 0-50": rng.uniform(0.0, 50.0, size),
    }
    return x, counts


class SpecialFunctions:
    params = [list(UNARY), ["bnpcore", "scipy"]]
    param_names = ["function", "library"]

    def setup(self, function, library):
        self.x = make_inputs(SIZE)[0]
        self.f = UNARY[function][0 if library == "bnpcore" else 1]

    def time_function(self, function, library):
        self.f(self.x)


class Differences:
    params = [list(BINARY), ["int 0-16", "int 0-50", "real 0-50"], ["bnpcore", "scipy"]]
    param_names = ["function", "counts", "library"]

    def setup(self, function, counts, library):
        self.x, all_counts = make_inputs(SIZE)
        self.n = all_counts[counts]
        self.f = BINARY[function][0 if library == "bnpcore" else 1]

    def time_difference(self, function, counts, library):
        self.f(self.x, self.n)


class Stirling:
    def time_build_table_10000(self):
        StirlingTable(10_000)


def best_of(f, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE, help="values per function (default 10^7)")
    args = parser.parse_args()
    x, counts = make_inputs(args.size)

    rows = []
    for name, (ours, theirs, expr) in UNARY.items():
        rows.append((name, "", expr, best_of(lambda: ours(x)), best_of(lambda: theirs(x))))
    for name, (ours, theirs, expr) in BINARY.items():
        for label, n in counts.items():
            rows.append((name, label, expr, best_of(lambda: ours(x, n)), best_of(lambda: theirs(x, n))))

    print(f"ns per element, {args.size:.0e} values, best of 3 (x log-uniform in [1e-3, 1e3])")
    head = f"{'function':10} {'counts':10} {'bnpcore':>9} {'scipy':>9} {'scipy/bnp':>9}  scipy expression"
    print(head)
    print("-" * len(head))
    for name, label, expr, ours_s, theirs_s in rows:
        ours_ns, theirs_ns = 1e9 * ours_s / args.size, 1e9 * theirs_s / args.size
        print(f"{name:10} {label:10} {ours_ns:9.1f} {theirs_ns:9.1f} {theirs_ns / ours_ns:9.2f}  {expr}")

    seconds = best_of(lambda: StirlingTable(10_000), repeats=2)
    print(f"\nStirling table to n = 10^4 (50,005,000 entries, {10_000 * 10_001 // 2 * 8 / 1e6:.0f} MB): "
          f"{seconds:.2f} s")


if __name__ == "__main__":
    main()
