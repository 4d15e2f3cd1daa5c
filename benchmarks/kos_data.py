"""The KOS corpus for the online benchmarks: ``bnpcore.datasets.load_kos`` when
the package bundles it, else the UCI files of the shared data directory."""
import gzip
import os

import numpy as np
import scipy.sparse as sp

from bnpcore.corpus import Corpus

SHARED = os.environ.get("BNPCORE_KOS_DIR", "/work/shared/data/kos")


def read_uci(docword, vocab=None):
    """A Corpus from UCI bag-of-words files (docword.*.txt[.gz], vocab.*.txt)."""
    opener = gzip.open if str(docword).endswith(".gz") else open
    with opener(docword, "rt") as fh:
        n_docs, n_words, nnz = (int(fh.readline()) for _ in range(3))
        data = np.loadtxt(fh, dtype=np.int64, ndmin=2)
    if len(data) != nnz:
        raise ValueError(f"{docword}: header says {nnz} entries, found {len(data)}")
    m = sp.csr_matrix((data[:, 2], (data[:, 0] - 1, data[:, 1] - 1)), shape=(n_docs, n_words))
    words = None
    if vocab is not None:
        with open(vocab) as fh:
            words = [line.strip() for line in fh]
    return Corpus(m, vocabulary=words)


def load_kos():
    try:
        from bnpcore.datasets import load_kos as bundled
    except ImportError:
        return read_uci(os.path.join(SHARED, "docword.kos.txt.gz"), os.path.join(SHARED, "vocab.kos.txt"))
    return bundled()


def load(path=None):
    """KOS, or the UCI corpus whose docword file is ``path`` (vocab.<name>.txt beside it if present)."""
    if path is None:
        return load_kos()
    base = os.path.basename(path).replace("docword.", "vocab.").replace(".gz", "")
    vocab = os.path.join(os.path.dirname(path), base)
    return read_uci(path, vocab if os.path.exists(vocab) else None)
