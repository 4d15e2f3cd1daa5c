"""KOS for the HDP benchmarks: bnpcore.datasets.load_kos when present, else the UCI files."""
import gzip
import os

import numpy as np
import scipy.sparse as sp

from bnpcore.corpus import Corpus

KOS_DIR = os.environ.get("BNPCORE_KOS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "kos"))


def load_kos():
    try:
        from bnpcore.datasets import load_kos as bundled
        return bundled()
    except ImportError:
        pass
    for base in (KOS_DIR, "/work/shared/data/kos"):
        path = os.path.join(base, "docword.kos.txt.gz")
        if os.path.exists(path):
            break
    else:
        raise FileNotFoundError("KOS not found: set BNPCORE_KOS to the folder of docword.kos.txt.gz")
    with gzip.open(path, "rt") as fh:
        n_docs, n_words = int(fh.readline()), int(fh.readline())
        fh.readline()
        rows = np.loadtxt(fh, dtype=np.int64)
    with open(os.path.join(base, "vocab.kos.txt")) as fh:
        vocab = fh.read().split()
    m = sp.csr_matrix((rows[:, 2], (rows[:, 0] - 1, rows[:, 1] - 1)), shape=(n_docs, n_words))
    return Corpus(m, vocabulary=vocab)
