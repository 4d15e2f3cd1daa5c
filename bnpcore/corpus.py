"""The one input type of bnpcore: a documents x words matrix of counts.

A :class:`Corpus` holds a CSR matrix (int64 row pointers, int32 word ids,
int32 counts; sorted, duplicate-free rows) and an optional vocabulary. It is
validated once, here, with errors that name the problem; kernels trust what it
hands them.
"""
import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_random_state

__all__ = ["Corpus", "as_corpus"]


class Corpus:
    """Bag-of-words documents as a CSR count matrix.

    Parameters
    ----------
    data : scipy.sparse matrix, ndarray of shape (n_docs, n_words), or list
        Counts as a sparse matrix or a dense NumPy array; or a list of
        documents, each a list of integer word ids (a list is always read as
        documents, never as a dense matrix), or of word strings when
        ``vocabulary`` is given.
    vocabulary : sequence of str, optional
        Word of each id. Required for documents given as strings (words not in
        it raise ``ValueError``).
    n_words : int, optional
        Vocabulary size when it cannot be read from ``data`` (lists of ids);
        defaults to ``len(vocabulary)`` or one more than the largest id.

    Attributes
    ----------
    indptr : ndarray of shape (n_docs + 1,), int64
    indices : ndarray of shape (nnz,), int32
        Word ids, sorted within each document.
    counts : ndarray of shape (nnz,), int32
        Positive counts.
    vocabulary : list of str or None

    Examples
    --------
    >>> c = Corpus([[0, 1, 1], [2]], n_words=4)
    >>> c.n_docs, c.n_words, c.n_tokens
    (2, 4, 4)
    """

    def __init__(self, data, vocabulary=None, n_words=None):
        vocabulary = None if vocabulary is None else [str(w) for w in vocabulary]
        if vocabulary is not None and n_words is not None and n_words != len(vocabulary):
            raise ValueError(f"n_words={n_words} disagrees with a vocabulary of {len(vocabulary)} words")
        if n_words is None and vocabulary is not None:
            n_words = len(vocabulary)
        if isinstance(data, Corpus):
            matrix = data.matrix
        elif sp.issparse(data):
            matrix = _from_sparse(data)
        elif isinstance(data, (list, tuple)):
            matrix = _from_token_lists(data, vocabulary, n_words)
        else:
            matrix = _from_dense(data)
        if n_words is not None:
            if matrix.shape[1] > n_words:
                raise ValueError(f"word id {matrix.shape[1] - 1} is outside a vocabulary of {n_words} words")
            matrix = sp.csr_matrix((matrix.data, matrix.indices, matrix.indptr), shape=(matrix.shape[0], n_words))
        if matrix.shape[0] == 0:
            raise ValueError("the corpus has no documents")
        if matrix.shape[1] == 0:
            raise ValueError("the corpus has an empty vocabulary")
        self._set(matrix, vocabulary)

    def _set(self, matrix, vocabulary):
        self.indptr = np.ascontiguousarray(matrix.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(matrix.indices, dtype=np.int32)
        self.counts = np.ascontiguousarray(matrix.data, dtype=np.int32)
        self._shape = matrix.shape
        self.vocabulary = vocabulary
        for arr in (self.indptr, self.indices, self.counts):
            arr.flags.writeable = False

    @classmethod
    def _from_arrays(cls, indptr, indices, counts, n_words, vocabulary=None):
        """Trusted constructor for arrays that are already valid (no copies, no checks)."""
        self = cls.__new__(cls)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.counts = np.ascontiguousarray(counts, dtype=np.int32)
        self._shape = (len(self.indptr) - 1, int(n_words))
        self.vocabulary = vocabulary
        return self

    # -- shape and summaries -------------------------------------------------
    @property
    def n_docs(self):
        return self._shape[0]

    @property
    def n_words(self):
        """Vocabulary size W."""
        return self._shape[1]

    @property
    def shape(self):
        return self._shape

    @property
    def nnz(self):
        return len(self.indices)

    @property
    def n_tokens(self):
        return int(self.counts.sum(dtype=np.int64))

    @property
    def doc_lengths(self):
        """Tokens per document, int64 array of shape (n_docs,)."""
        csum = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)])
        return csum[self.indptr[1:]] - csum[self.indptr[:-1]]

    @property
    def matrix(self):
        """The counts as a ``scipy.sparse.csr_matrix`` (shares memory)."""
        return sp.csr_matrix((self.counts, self.indices, self.indptr), shape=self._shape, copy=False)

    def __len__(self):
        return self.n_docs

    def __repr__(self):
        return f"Corpus(n_docs={self.n_docs}, n_words={self.n_words}, n_tokens={self.n_tokens})"

    def __eq__(self, other):
        return (isinstance(other, Corpus) and self.shape == other.shape
                and np.array_equal(self.indptr, other.indptr) and np.array_equal(self.indices, other.indices)
                and np.array_equal(self.counts, other.counts))

    __hash__ = None

    # -- views ---------------------------------------------------------------
    def __getitem__(self, docs):
        """Sub-corpus of the documents selected by an index array, slice or mask."""
        sub = self.matrix[docs]
        if not sp.issparse(sub) or sub.shape[0] == 0:
            raise IndexError("a corpus selection must keep at least one document")
        return Corpus._from_arrays(sub.indptr, sub.indices, sub.data, self.n_words, self.vocabulary)

    def tokens(self):
        """Token-expanded view ``(word_ids, token_ptr)``: int32 word id of every token,
        document by document, and int64 offsets of each document (length n_docs + 1)."""
        from bnpcore.kernels.sparse import expand_tokens
        return expand_tokens(self.indptr, self.indices, self.counts)

    # -- splits --------------------------------------------------------------
    def split_documents(self, test_fraction=0.2, random_state=None):
        """Random (train, test) split of the documents; returns two corpora."""
        _check_fraction(test_fraction, "test_fraction")
        rng = check_random_state(random_state)
        order = rng.permutation(self.n_docs)
        n_test = int(round(test_fraction * self.n_docs))
        if n_test == 0 or n_test == self.n_docs:
            raise ValueError(f"test_fraction={test_fraction} leaves one side of the split empty")
        return self[np.sort(order[n_test:])], self[np.sort(order[:n_test])]

    def split_tokens(self, test_fraction=0.1, random_state=None, mode="doc_tokens"):
        """Split the tokens of every document into (observed, held-out) corpora.

        Parameters
        ----------
        test_fraction : float in (0, 1)
        random_state : int, Generator or None
        mode : {"doc_tokens", "corpus_tokens"}
            "doc_tokens": each document holds out round(test_fraction * N_j) of
            its tokens, chosen uniformly ([CVHDP] 90/10, document completion 80/20);
            "corpus_tokens": every token is held out independently with
            probability test_fraction ([HYB] "a random 10% of the words").

        Both corpora keep all documents (some may be empty) and the vocabulary.
        """
        _check_fraction(test_fraction, "test_fraction")
        if mode not in ("doc_tokens", "corpus_tokens"):
            raise ValueError(f"mode must be 'doc_tokens' or 'corpus_tokens', got {mode!r}")
        rng = check_random_state(random_state)
        words, tok_ptr = self.tokens()
        held = np.zeros(len(words), dtype=bool)
        if mode == "corpus_tokens":
            held[:] = rng.random(len(words)) < test_fraction
        else:
            for j in range(self.n_docs):
                lo, hi = tok_ptr[j], tok_ptr[j + 1]
                k = int(round(test_fraction * (hi - lo)))
                if k:
                    held[lo + rng.choice(hi - lo, size=k, replace=False)] = True
        doc_of = np.repeat(np.arange(self.n_docs), np.diff(tok_ptr))
        return self._from_tokens(doc_of[~held], words[~held]), self._from_tokens(doc_of[held], words[held])

    def _from_tokens(self, doc_of, words):
        m = sp.csr_matrix((np.ones(len(words), dtype=np.int32), (doc_of, words)), shape=self.shape)
        m.sum_duplicates()
        m.sort_indices()
        return Corpus._from_arrays(m.indptr, m.indices, m.data, self.n_words, self.vocabulary)

    def minibatches(self, batch_size, random_state=None, shuffle=True):
        """Yield sub-corpora of ``batch_size`` documents (the last may be smaller),
        in a random order (``shuffle``) or in stream order."""
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        order = check_random_state(random_state).permutation(self.n_docs) if shuffle else np.arange(self.n_docs)
        for start in range(0, self.n_docs, int(batch_size)):
            yield self[order[start:start + int(batch_size)]]

    # -- words ---------------------------------------------------------------
    def word(self, w):
        """The vocabulary entry of word id ``w`` (its id as text without a vocabulary)."""
        return self.vocabulary[w] if self.vocabulary is not None else str(w)


def as_corpus(data, vocabulary=None, n_words=None):
    """``data`` if it is a :class:`Corpus` (checked against ``n_words``), else ``Corpus(data, ...)``."""
    if isinstance(data, Corpus):
        if n_words is not None and data.n_words != n_words:
            raise ValueError(f"the corpus has {data.n_words} words, the model expects {n_words}")
        return data
    return Corpus(data, vocabulary=vocabulary, n_words=n_words)


def _check_fraction(value, name):
    if not (isinstance(value, (float, int, np.floating)) and 0 < value < 1):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


def _check_counts(values, what):
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise TypeError(f"{what} must be numeric, got dtype {values.dtype}")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{what} contain NaN or infinite values")
        if np.any(values != np.round(values)):
            raise ValueError(f"{what} must be whole numbers")
    if values.size and values.min() < 0:
        raise ValueError(f"{what} must be non-negative, found {values.min()}")
    if values.size and values.max() > np.iinfo(np.int32).max:
        raise ValueError(f"{what} exceed the int32 range of bnpcore counts")
    return values.astype(np.int32)


def _from_sparse(data):
    m = sp.csr_matrix(data, copy=True)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-d matrix, got shape {m.shape}")
    m.data = _check_counts(m.data, "counts")
    m.sum_duplicates()
    m.eliminate_zeros()
    m.sort_indices()
    return m


def _from_dense(data):
    arr = np.asarray(data)
    if arr.dtype == object:
        raise ValueError("ragged input: give documents as lists of word ids, or a rectangular count matrix")
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-d count matrix (n_docs, n_words), got shape {arr.shape}")
    return _from_sparse(sp.csr_matrix(_check_counts(arr, "counts")))


def _from_token_lists(docs, vocabulary, n_words):
    index = None if vocabulary is None else {w: i for i, w in enumerate(vocabulary)}
    rows, cols = [], []
    for j, doc in enumerate(docs):
        if isinstance(doc, (str, bytes)):
            raise TypeError(f"document {j} is a string; give each document as a list of tokens")
        ids = []
        for tok in doc:
            if isinstance(tok, str):
                if index is None:
                    raise ValueError(f"document {j} has word strings but no vocabulary was given")
                if tok not in index:
                    raise ValueError(f"document {j}: word {tok!r} is not in the vocabulary")
                ids.append(index[tok])
            elif isinstance(tok, (int, np.integer)) and not isinstance(tok, (bool, np.bool_)):
                ids.append(int(tok))
            else:
                raise TypeError(f"document {j}: tokens must be word ids or strings, got {type(tok).__name__}")
        rows.extend([j] * len(ids))
        cols.extend(ids)
    cols = np.asarray(cols, dtype=np.int64)
    if cols.size and cols.min() < 0:
        raise ValueError(f"negative word id {cols.min()}")
    width = n_words if n_words is not None else (int(cols.max()) + 1 if cols.size else 0)
    if cols.size and cols.max() >= width:
        raise ValueError(f"word id {cols.max()} is outside a vocabulary of {width} words")
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.int32), (np.asarray(rows, dtype=np.int64), cols)),
                      shape=(len(docs), width))
    m.sum_duplicates()
    m.sort_indices()
    return m
