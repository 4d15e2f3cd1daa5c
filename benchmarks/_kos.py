"""The KOS corpus for the benchmarks (bnpcore.datasets.load_kos when present)."""
import gzip
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bnpcore.corpus import Corpus

KOS_DIR = Path(__file__).resolve().parents[1].parent.parent / "shared" / "data" / "kos"


def load_kos(path=None):
    """KOS as a Corpus: bnpcore.datasets.load_kos() if available, else the UCI files."""
    if path is None:
        try:
            from bnpcore.datasets import load_kos as bundled
            return bundled()
        except ImportError:
            path = KOS_DIR if KOS_DIR.is_dir() else Path("/work/shared/data/kos")
    path = Path(path)
    with gzip.open(path / "docword.kos.txt.gz", "rt") as fh:
        n_docs, n_words, nnz = (int(fh.readline()) for _ in range(3))
        data = np.loadtxt(fh, dtype=np.int64).reshape(-1, 3)
    if len(data) != nnz:
        raise ValueError(f"{path}: header says {nnz} entries, found {len(data)}")
    m = sp.csr_matrix((data[:, 2], (data[:, 0] - 1, data[:, 1] - 1)), shape=(n_docs, n_words))
    vocab = (path / "vocab.kos.txt").read_text().split()
    return Corpus(m, vocabulary=vocab)
