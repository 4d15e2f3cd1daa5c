"""One table for every speed/quality comparison: bnpcore and peer libraries on the
same split, scored by the same bnpcore evaluation function.

Each benchmark script builds ``Row``s (peers skipped with a message when not
installed) and prints them with ``print_table``.
"""
import dataclasses


@dataclasses.dataclass
class Row:
    system: str             # "bnpcore", "gensim", "tomotopy", "sklearn", "lda"
    algorithm: str          # e.g. "CGS", "CVB0", "HDP online VB"
    settings: str           # e.g. "K=100, 100 sweeps"
    threads: int
    train_seconds: float
    tokens_per_second: float
    topics_used: int
    heldout_loglik: float   # per held-out word, bnpcore.evaluation


def print_table(rows, reference="bnpcore"):
    """Print rows with the time ratio to the first row of the ``reference`` system."""
    ref = next((r.train_seconds for r in rows if r.system == reference), None)
    head = f"{'system':10} {'algorithm':22} {'settings':26} {'thr':>3} {'train s':>9} {'tokens/s':>11} " \
           f"{'topics':>6} {'heldout ll':>10} {'time/bnp':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = f"{r.train_seconds / ref:8.2f}" if ref else "       -"
        print(f"{r.system:10} {r.algorithm:22} {r.settings:26} {r.threads:3d} {r.train_seconds:9.2f} "
              f"{r.tokens_per_second:11.0f} {r.topics_used:6d} {r.heldout_loglik:10.4f} {ratio}")
