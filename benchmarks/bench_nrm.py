"""Speed of ADF-NRM, EP-NRM and the NGGP collapsed Gibbs sampler on KOS ([NRM]).

Targets (issue 7): an ADF epoch on KOS in <= 1 s on one thread, an EP epoch in
<= 2 s. [NRM] supp 4.2 reports 220 s per ADF epoch and 160 s per Gibbs epoch
for the authors' Python code (their machine; printed for scale only).

Setting: the IG prior of Table 1 (sigma = 0.5, a = 10, tau = 100) and the DP
(a = 100), eta = 0.1, on the 80% training split of KOS (2,744 documents), and
the ADF pass also on all 3,430 documents. Times are wall-clock, best and median
of ``--repeats`` runs, kernels single-threaded (run with OMP_NUM_THREADS=1).
The held-out column is the estimators' ``score``: the per-word log-likelihood
of the 686 held-out documents (token sequences, the [NRM] predictive without the
multinomial coefficient), comparable with the other benchmarks' per-word values.

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_nrm.py [--repeats 5] [--ep-epochs 5] [--gibbs-sweeps 5]
       [--data kos|bars|docword.txt [--vocab vocab.txt]]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Row, iteration_seconds, print_table, timed  # noqa: E402

from bnpcore.cli import load_data  # noqa: E402
from bnpcore.mixture import ADF, EP, CollapsedGibbs  # noqa: E402

PRIORS = {"IG": dict(sigma=0.5, a=10.0, tau=100.0), "DP": dict(sigma=0.0, a=100.0)}
PAPER_SECONDS = {"ADF": 220.0, "Gibbs": 160.0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ep-epochs", type=int, default=5, help="EP epochs timed after the ADF pass")
    ap.add_argument("--gibbs-sweeps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0, help="document split")
    ap.add_argument("--data", default="kos", help="kos, bars or a UCI docword file")
    ap.add_argument("--vocab", default=None, help="vocabulary file of a UCI docword file")
    args = ap.parse_args(argv)

    kos = load_data(args.data, args.vocab)
    train, test = kos.split_documents(0.2, random_state=args.seed)
    rows, summary = [], []
    for prior, kw in PRIORS.items():
        # ADF: one pass (the whole fit, including the final predictive state)
        for name, docs in (("train", train), ("all", kos)):
            best, med, model = timed(lambda: ADF(eta=0.1, **kw).fit(docs), args.repeats)
            ll = model.score(test) if name == "train" else float("nan")
            rows.append(Row("bnpcore", f"ADF-NRM {prior}", f"1 epoch, {docs.n_docs} docs", 1, best,
                            docs.n_tokens / best, model.n_components_, ll))
            summary.append((f"ADF {prior} epoch ({docs.n_docs} docs)", best, med, 1.0))
        # EP: epochs after the ADF pass
        ep = EP(eta=0.1, max_iter=1 + args.ep_epochs, tol=0.0, **kw).fit(train)
        ep_times = iteration_seconds(ep.history_)[1:]
        rows.append(Row("bnpcore", f"EP-NRM {prior}", f"epochs 2-{1 + args.ep_epochs}", 1, float(np.median(ep_times)),
                        train.n_tokens / float(np.median(ep_times)), ep.n_components_,
                        ep.score(test)))
        summary.append((f"EP {prior} epoch ({train.n_docs} docs)", float(np.min(ep_times)),
                        float(np.median(ep_times)), 2.0))
        # Gibbs sweeps
        g = CollapsedGibbs(eta=0.1, max_iter=args.gibbs_sweeps, n_samples=1, random_state=0, **kw).fit(train)
        g_times = iteration_seconds(g.history_)
        g_times = g_times[1:] if len(g_times) > 1 else g_times
        rows.append(Row("bnpcore", f"Gibbs {prior}", f"sweeps 2-{args.gibbs_sweeps}", 1, float(np.median(g_times)),
                        train.n_tokens / float(np.median(g_times)), g.n_components_, g.score(test)))
        summary.append((f"Gibbs {prior} sweep ({train.n_docs} docs)", float(np.min(g_times)),
                        float(np.median(g_times)), None))
    print_table(rows)
    print()
    print(f"{'per epoch (seconds)':34} {'best':>7} {'median':>7} {'target':>7}  paper's Python")
    for what, best, med, target in summary:
        paper = PAPER_SECONDS.get(what.split()[0])
        tgt = f"{target:7.1f}" if target else "      -"
        ok = "" if target is None else ("  ok" if med <= target else "  MISSED")
        print(f"{what:34} {best:7.3f} {med:7.3f} {tgt}  {paper if paper else '-'}{ok}")


if __name__ == "__main__":
    main()
