"""Corpora shipped inside the package (bnpcore/datasets/data/, see its README.md)."""
from pathlib import Path

from bnpcore.corpus import Corpus

DATA_DIR = Path(__file__).resolve().parent / "data"


def load_kos():
    """The KOS blog corpus: 3430 documents, 6906 words, 467,714 tokens.

    Posts from the dailykos.com blog as bags of words (tokenized, stop words
    removed, words occurring more than ten times), with the vocabulary. The
    corpus of the LDA/HDP experiments of [CVHDP] section 4, [NRM] section 4.3
    and [HYB] section 7.

    Source and licence: David Newman, "Bag of Words" data set, UCI Machine
    Learning Repository, https://archive.ics.uci.edu/ml/datasets/Bag+of+Words,
    licensed under Creative Commons Attribution 4.0 International (CC BY 4.0).
    bnpcore ships it unchanged in content, converted from ``docword.kos.txt``
    and ``vocab.kos.txt`` to a compressed ``.npz`` (``bnpcore/datasets/data``).

    Returns
    -------
    Corpus
        ``n_docs=3430, n_words=6906``, vocabulary included; document j is the
        UCI docID j + 1 and word w the UCI wordID w + 1.

    Examples
    --------
    >>> from bnpcore.datasets import load_kos
    >>> kos = load_kos()
    >>> kos.n_docs, kos.n_words, kos.n_tokens
    (3430, 6906, 467714)
    """
    return Corpus.load(DATA_DIR / "kos.npz")
