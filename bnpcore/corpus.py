"""The one input type of bnpcore: a documents x words matrix of counts.

A :class:`Corpus` holds a CSR matrix (int64 row pointers, int32 word ids,
int32 counts; sorted, duplicate-free rows) and an optional vocabulary. It is
validated once, here, with errors that name the problem; kernels trust what it
hands them. Besides the container this module holds its splits (documents,
tokens), minibatches and block iteration (:meth:`Corpus.blocks`, the one way
the samplers and drivers walk a corpus of any size).

Reading and writing live in :mod:`bnpcore.corpus_io` (UCI, ``.npz``, gensim,
scikit-learn, on-disk directories) and counting raw text in
:mod:`bnpcore.text`; the ``Corpus`` class methods of those jobs
(:meth:`Corpus.from_uci`, :meth:`Corpus.open`, :meth:`Corpus.from_texts`, ...)
call them. :func:`write` (an on-disk corpus) is :func:`bnpcore.corpus_io.write`.
"""
import zlib

import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_int, check_n_words, check_random_state

__all__ = ["Corpus", "as_corpus", "write"]


class Corpus:
    """Bag-of-words documents as a CSR count matrix.

    Parameters
    ----------
    data : scipy.sparse matrix, ndarray of shape (n_docs, n_words), or list
        Counts as a sparse matrix or a dense NumPy array (integer, boolean or
        whole-valued float); or a list of documents, each a list (or integer
        array) of word ids (a list is always read as documents, never as a
        dense matrix), or of word strings when ``vocabulary`` is given.
        Empty documents are allowed; a corpus without documents is not.
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

    Raises
    ------
    ValueError
        Negative, non-integer, NaN or infinite counts; word ids outside the
        vocabulary; a ragged or non-2-d array; no documents or no words;
        ``n_words`` disagreeing with ``vocabulary``.
    TypeError
        Counts of a non-numeric dtype, tokens that are neither ids nor strings.

    See Also
    --------
    Corpus.from_texts, Corpus.from_token_lists, Corpus.from_vectorizer, Corpus.from_gensim,
    Corpus.from_uci, Corpus.load, Corpus.open, bnpcore.datasets.load_kos

    Examples
    --------
    >>> c = Corpus([[0, 1, 1], [2]], n_words=4)
    >>> c.n_docs, c.n_words, c.n_tokens
    (2, 4, 4)
    """

    # How raw text became these counts (bnpcore.text.TextPipeline), set by from_texts and kept by
    # sub-corpora: fitted models keep it to take new text.
    text_pipeline = None
    _files = None     # an opened on-disk corpus: its word-id and count files, for read_documents
    _path = None      # an opened on-disk corpus: its directory's absolute path

    def __init__(self, data, vocabulary=None, n_words=None):
        vocabulary = None if vocabulary is None else [str(w) for w in vocabulary]
        if n_words is not None:
            n_words = check_int(n_words, "n_words")
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
        check_n_words(matrix.shape[1])
        self.indptr = np.ascontiguousarray(matrix.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(matrix.indices, dtype=np.int32)
        self.counts = np.ascontiguousarray(matrix.data, dtype=np.int32)
        self._shape = matrix.shape
        self.vocabulary = vocabulary
        for arr in (self.indptr, self.indices, self.counts):
            arr.flags.writeable = False

    @classmethod
    def from_csr(cls, indptr, indices, counts, n_words, vocabulary=None, *, check=True):
        """A corpus from its CSR arrays.

        Parameters
        ----------
        indptr : array of shape (n_docs + 1,)
            Offsets of each document's entries, from 0.
        indices, counts : arrays of shape (nnz,)
            Word ids and their counts, document after document.
        n_words : int
        vocabulary : sequence of str, optional
        check : bool, default True
            Validate as :class:`Corpus` does (repeated ids are summed, rows
            sorted; copies). ``check=False`` trusts arrays that are already
            valid (word ids increasing within each document and below
            ``n_words``, counts >= 1: e.g. another corpus's) and keeps them
            without a copy when they have the corpus dtypes (int64, int32,
            int32); the kernels index by them unchecked.

        Raises
        ------
        ValueError
            With ``check``: row pointers that do not fit the arrays, and the
            errors of :class:`Corpus`.
        """
        if not check:
            check_n_words(n_words)
            self = cls.__new__(cls)
            self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(indices, dtype=np.int32)
            self.counts = np.ascontiguousarray(counts, dtype=np.int32)
            self._shape = (len(self.indptr) - 1, int(n_words))
            self.vocabulary = vocabulary
            return self
        n_words = check_int(n_words, "n_words")
        try:
            matrix = sp.csr_matrix((counts, indices, indptr), shape=(len(indptr) - 1, n_words))
            matrix.check_format(full_check=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a CSR count matrix of {n_words} columns ({exc})") from None
        return cls(matrix, vocabulary=vocabulary)

    # -- files and other libraries (bnpcore.corpus_io) ---------------------------------
    @classmethod
    def from_uci(cls, docword_path, vocab_path=None):
        """Read a corpus in the UCI bag-of-words format (``docword.*.txt[.gz]``,
        ``vocab.*.txt``): :func:`bnpcore.corpus_io.read_uci`, which documents the
        format and errors."""
        return corpus_io.read_uci(docword_path, vocab_path)

    def to_uci(self, docword_path, vocab_path=None):
        """Write the corpus in the UCI bag-of-words format: :func:`bnpcore.corpus_io.write_uci`."""
        corpus_io.write_uci(self, docword_path, vocab_path)

    def save(self, path):
        """Write the corpus to a compressed ``.npz`` file: :func:`bnpcore.corpus_io.save_npz`."""
        corpus_io.save_npz(self, path)

    @classmethod
    def load(cls, path):
        """Read a corpus written by :meth:`save`: :func:`bnpcore.corpus_io.load_npz`."""
        return corpus_io.load_npz(path)

    @classmethod
    def from_vectorizer(cls, X, vectorizer):
        """A corpus from scikit-learn's ``CountVectorizer`` output and its vocabulary:
        :func:`bnpcore.corpus_io.from_vectorizer`."""
        return corpus_io.from_vectorizer(X, vectorizer)

    @classmethod
    def from_gensim(cls, bow_corpus, dictionary=None):
        """A corpus from gensim's bag-of-words format: :func:`bnpcore.corpus_io.from_gensim`."""
        return corpus_io.from_gensim(bow_corpus, dictionary)

    def to_gensim(self):
        """The corpus in gensim's format, ``(bow_corpus, dictionary)``: :func:`bnpcore.corpus_io.to_gensim`."""
        return corpus_io.to_gensim(self)

    @classmethod
    def open(cls, path):
        """Open an on-disk corpus directory (written by :func:`bnpcore.corpus_io.write`)
        without reading it.

        The word ids and counts are memory-mapped, not loaded
        (:func:`bnpcore.corpus_io.read_disk`, which checks the files and lists
        the errors): the corpus occupies only the pages the estimators touch,
        and the ones bnpcore reads sequentially (``n_tokens``, ``fingerprint``,
        :meth:`blocks`, :meth:`iter_chunks`, the online drivers' minibatches,
        :meth:`read_documents`) are released as it goes, so the resident memory
        stays bounded on corpora larger than RAM.

        Parameters
        ----------
        path : str or path-like
            The corpus directory.

        Returns
        -------
        Corpus
            Read-only arrays over the files, the vocabulary if one was written,
            and ``path``.

        Raises
        ------
        ValueError
            Not a complete corpus directory, a newer format, or truncated or
            altered files, naming the file (:func:`bnpcore.corpus_io.read_disk`).

        Examples
        --------
        >>> from bnpcore.corpus import write
        >>> write([["a", "b"], ["b", "c", "c"]], "corpus_dir")  # doctest: +SKIP
        >>> Corpus.open("corpus_dir")  # doctest: +SKIP
        Corpus(n_docs=2, n_words=3, n_tokens=5)
        """
        disk = corpus_io.read_disk(path)
        corpus = cls.from_csr(disk["indptr"], disk["indices"], disk["counts"], disk["n_words"], disk["vocabulary"],
                              check=False)
        corpus.text_pipeline = disk["text_pipeline"]
        corpus._files, corpus._path = disk["files"], disk["path"]
        return corpus

    @property
    def path(self):
        """The directory of an opened on-disk corpus (absolute), else None."""
        return self._path

    # -- text (bnpcore.text) -----------------------------------------------------------
    @classmethod
    def from_texts(cls, texts, tokenizer=None, *, min_df=1, max_df=1.0, stop_words="english", max_features=None,
                   vocabulary=None, lowercase=True, token_pattern=None):
        """Count the words of raw text documents: :func:`bnpcore.text.count_texts`,
        which documents the options (tokenizer, stop words, pruning).

        The corpus keeps how its text was counted as ``text_pipeline``; a model
        fitted on it then takes raw text.

        Examples
        --------
        >>> c = Corpus.from_texts(["The cat sat.", "The cat and the hat."])
        >>> c.vocabulary, c.matrix.toarray().tolist()
        (['cat', 'hat', 'sat'], [[1, 0, 1], [1, 1, 0]])
        """
        from bnpcore.text import count_texts
        return count_texts(texts, tokenizer, min_df=min_df, max_df=max_df, stop_words=stop_words,
                           max_features=max_features, vocabulary=vocabulary, lowercase=lowercase,
                           token_pattern=token_pattern)

    @classmethod
    def from_token_lists(cls, docs, *, min_df=1, max_df=1.0, stop_words=None, max_features=None, vocabulary=None):
        """Count already tokenized documents (lists of word strings):
        :func:`bnpcore.text.count_token_lists`.

        Examples
        --------
        >>> c = Corpus.from_token_lists([["b", "a", "b"], ["c"]])
        >>> c.vocabulary, c.matrix.toarray().tolist()
        (['a', 'b', 'c'], [[1, 2, 0], [0, 0, 1]])
        """
        from bnpcore.text import count_token_lists
        return count_token_lists(docs, min_df=min_df, max_df=max_df, stop_words=stop_words,
                                 max_features=max_features, vocabulary=vocabulary)

    # -- blocks of documents (a corpus of any size, in bounded memory) --------------------
    def blocks(self, n_entries=None, *, bounds=None):
        """Consecutive blocks of documents, in order: ``(start, chunk, tokens)``.

        The one way bnpcore walks a whole corpus in blocks: the samplers'
        sweeps over their per-token labels, and (``bounds``) given document
        ranges such as the partitions of a distributed fit.
        ``start`` is the block's first document, ``chunk`` a :class:`Corpus` of
        its documents (views of this corpus's word ids and counts, with the
        vocabulary and text pipeline; rows from 0) and ``tokens`` the
        ``slice`` of the block's tokens in the corpus's token order (the order
        of :meth:`tokens`), so ``labels[tokens]`` are the labels of the
        block's tokens. On an opened on-disk corpus the pages read are
        released after each block (:meth:`release_pages`), so a sweep does not
        leave the corpus resident.

        Parameters
        ----------
        n_entries : int, optional
            Blocks of about this many (document, word) pairs, at least one
            document each; default 2**20 (4 MiB of word ids).
        bounds : sequence of int, optional
            Instead, the blocks ``[bounds[i], bounds[i + 1])``: non-decreasing
            document numbers from 0 to ``n_docs`` (e.g.
            :func:`bnpcore.distributed.partition_bounds`); a block may be empty.

        Yields
        ------
        start : int
        chunk : Corpus
        tokens : slice

        Examples
        --------
        >>> c = Corpus([[0, 1, 1], [2], [3, 3]], n_words=4)
        >>> [(start, chunk.n_docs, tokens) for start, chunk, tokens in c.blocks(bounds=[0, 2, 3])]
        [(0, 2, slice(0, 4, None)), (2, 1, slice(4, 6, None))]
        """
        if bounds is None:
            n_entries = _BLOCK if n_entries is None else check_int(n_entries, "n_entries")
            per_block = max(1, int(n_entries * self.n_docs // max(self.nnz, 1)))
            bounds = list(range(0, self.n_docs, per_block)) + [self.n_docs]
        elif n_entries is not None:
            raise ValueError("give n_entries or bounds, not both")
        else:
            bounds = [int(b) for b in bounds]
            if len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != self.n_docs or any(
                    b > c for b, c in zip(bounds, bounds[1:])):
                raise ValueError(f"bounds must rise from 0 to n_docs = {self.n_docs}, got {bounds[:5]}...")
        token = 0
        for start, stop in zip(bounds, bounds[1:]):
            chunk = self._span(start, stop)
            n_tokens = int(np.sum(chunk.counts, dtype=np.int64))
            yield start, chunk, slice(token, token + n_tokens)
            token += n_tokens
            self.release_pages()

    def iter_chunks(self, n_docs):
        """Consecutive sub-corpora of ``n_docs`` documents, in order (the last may be smaller).

        Every chunk has the full vocabulary (same ``n_words`` and
        ``vocabulary``); its word ids and counts are views of this corpus's
        arrays (no copy; only the row pointers are shifted). On an opened
        on-disk corpus the pages read are released after each chunk, so
        ``for chunk in corpus.iter_chunks(10000): est.partial_fit(chunk)``
        streams a corpus of any size in bounded memory (:meth:`blocks` also
        gives each chunk's first document and tokens).

        Parameters
        ----------
        n_docs : int >= 1

        Yields
        ------
        Corpus
        """
        n_docs = check_int(n_docs, "n_docs")
        for start in range(0, self.n_docs, n_docs):
            yield self._span(start, min(start + n_docs, self.n_docs))
            self.release_pages()

    def _span(self, start, stop):
        """Documents [start, stop) as views of this corpus's arrays (row pointers from 0)."""
        ptr = np.array(self.indptr[start:stop + 1])
        lo, hi = int(ptr[0]), int(ptr[-1])
        return Corpus.from_csr(ptr - lo, self.indices[lo:hi], self.counts[lo:hi], self.n_words, self.vocabulary,
                               check=False)._with_pipeline(self)

    def read_documents(self, doc_ids):
        """``(source, rows)``: a corpus and its rows holding the documents ``doc_ids``.

        In memory: this corpus and ``doc_ids`` (no copy). An opened on-disk
        corpus reads those documents with positioned reads into a small
        in-memory corpus, in the order given, and ``rows`` is 0..n-1
        (:func:`bnpcore.corpus_io.read_rows`): nothing of the memory map is
        left resident. The online drivers read their minibatches this way.
        """
        if self._files is None:
            return self, doc_ids
        ptr, indices, counts = corpus_io.read_rows(self._files, self.indptr, doc_ids)
        return Corpus.from_csr(ptr, indices, counts, self.n_words, check=False), np.arange(len(ptr) - 1)

    def release_pages(self):
        """Release the resident pages of an opened on-disk corpus's memory maps
        (no-op in memory; :func:`bnpcore.corpus_io.release_pages`). Nothing but
        the process's resident memory changes: the pages are read again when
        next touched."""
        corpus_io.release_pages(self.indptr, self.indices, self.counts)

    def _blocks(self, arr):
        """``arr`` in slices of _BLOCK entries, releasing the pages of a memory-mapped
        corpus after each (sequential reads in bounded resident memory)."""
        for start in range(0, max(len(arr), 1), _BLOCK):
            yield arr[start:start + _BLOCK]
            self.release_pages()

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
        return sum(int(block.sum(dtype=np.int64)) for block in self._blocks(self.counts))

    @property
    def doc_lengths(self):
        """Tokens per document, int64 array of shape (n_docs,)."""
        lengths = np.empty(self.n_docs, dtype=np.int64)
        for start, chunk, _ in self.blocks():      # bounded scratch memory on corpora of any size
            csum = np.concatenate([[0], np.cumsum(chunk.counts, dtype=np.int64)])
            lengths[start:start + chunk.n_docs] = csum[chunk.indptr[1:]] - csum[chunk.indptr[:-1]]
        return lengths

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
        return Corpus.from_csr(sub.indptr, sub.indices, sub.data, self.n_words, self.vocabulary,
                               check=False)._with_pipeline(self)

    def tokens(self):
        """Token-expanded view ``(word_ids, token_ptr)``: int32 word id of every token,
        document by document, and int64 offsets of each document (length n_docs + 1)."""
        from bnpcore.kernels.sparse import expand_tokens
        if self.nnz <= _BLOCK:
            return expand_tokens(self.indptr, self.indices, self.counts)
        words, ptr = np.empty(self.n_tokens, dtype=np.int32), np.empty(self.n_docs + 1, dtype=np.int64)
        ptr[0] = 0
        for start, chunk, _ in self.blocks():      # an on-disk corpus: pages released block by block
            w, p = expand_tokens(chunk.indptr, chunk.indices, chunk.counts)
            words[ptr[start]:ptr[start] + len(w)] = w
            ptr[start + 1:start + chunk.n_docs + 1] = p[1:] + ptr[start]
        return words, ptr

    # -- splits --------------------------------------------------------------
    def fingerprint(self):
        """A short identity of the counts (shape and CRC-32 of the arrays): the
        drivers check it when a fit is resumed, and estimators use it to
        recognise their training documents."""
        crc = 0
        for arr in (self.indptr, self.indices, self.counts):
            for block in self._blocks(arr):
                crc = zlib.crc32(np.ascontiguousarray(block).view(np.uint8), crc)
        return f"{self.n_docs}x{self.n_words}:{self.nnz}:{crc:08x}"

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
            "doc_tokens": each document holds out exactly round(test_fraction * N_j)
            of its tokens (``np.rint``: halves round to even), a uniformly random
            subset ([CVHDP] 90/10, document completion 80/20);
            "corpus_tokens": every token is held out independently with
            probability test_fraction ([HYB] "a random 10% of the words").

        Returns
        -------
        observed, heldout : Corpus
            Both keep all documents (some may be empty) and the vocabulary; their
            counts add up to this corpus's counts. The same ``random_state``
            gives the same split.
        """
        _check_fraction(test_fraction, "test_fraction")
        if mode not in ("doc_tokens", "corpus_tokens"):
            raise ValueError(f"mode must be 'doc_tokens' or 'corpus_tokens', got {mode!r}")
        rng = check_random_state(random_state)
        if mode == "corpus_tokens":
            # Independent tokens: the held-out count of a pair is Binomial(c_jw, p).
            held = rng.binomial(self.counts, test_fraction).astype(np.int32)
        else:
            # A uniform subset of size k_j of each document's tokens: rank the
            # tokens of a document by i.i.d. random keys and keep the k_j smallest.
            # One integer sort: document id in the high bits, >= 32 random bits
            # below (ties, probability ~ N_j^2 / 2^33 at worst, only reorder two tokens).
            # Documents longer than _EXPAND_MAX tokens are not expanded: their
            # held-out counts are one multivariate hypergeometric draw (the same
            # distribution, in bounded memory), after the others.
            n_held = np.rint(test_fraction * self.doc_lengths).astype(np.int64)
            long_docs = np.flatnonzero(self.doc_lengths > _EXPAND_MAX)
            lengths = self.doc_lengths.copy()
            lengths[long_docs] = 0
            tok_doc = np.repeat(np.arange(self.n_docs, dtype=np.uint64), lengths)
            shift = np.uint64(63 - int(self.n_docs).bit_length())
            keys = (tok_doc << shift) | (rng.integers(0, 2**63, len(tok_doc), dtype=np.uint64,
                                                      endpoint=False) >> (np.uint64(63) - shift))
            order = np.argsort(keys)
            starts = np.concatenate([[0], np.cumsum(lengths)])
            tok_doc = tok_doc.astype(np.int64)
            rank = np.empty(len(tok_doc), dtype=np.int64)
            rank[order] = np.arange(len(tok_doc)) - starts[tok_doc]  # the sort keeps documents in place
            # tokens are laid out pair by pair (np.repeat order), so count per pair
            expanded = np.repeat(self.counts, np.repeat(lengths > 0, np.diff(self.indptr)))
            tok_pair = np.repeat(np.arange(self.nnz)[np.repeat(lengths > 0, np.diff(self.indptr))], expanded)
            held = np.bincount(tok_pair[rank < n_held[tok_doc]], minlength=self.nnz).astype(np.int32)
            for j in long_docs:
                lo, hi = self.indptr[j], self.indptr[j + 1]
                held[lo:hi] = _hypergeometric(self.counts[lo:hi].astype(np.int64), int(n_held[j]), rng)
        return self._with_counts(self.counts - held), self._with_counts(held)

    def _with_counts(self, counts):
        """Same pattern, new per-pair counts (entries that drop to zero are removed)."""
        keep = counts > 0
        indptr = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])[self.indptr]
        return Corpus.from_csr(indptr, self.indices[keep], counts[keep], self.n_words, self.vocabulary,
                               check=False)._with_pipeline(self)

    def _with_pipeline(self, source):
        """This corpus with the text pipeline of ``source`` (a corpus of the same words)."""
        if source.text_pipeline is not None:
            self.text_pipeline = source.text_pipeline
        return self

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
    shape = getattr(data, "shape", ())      # a Corpus or a matrix; token lists have no width
    if n_words is not None and len(shape) == 2 and shape[1] != n_words:
        # scikit-learn's wording, which its estimator checks look for
        raise ValueError(f"X has {shape[1]} features, but it is expecting {n_words} features as input "
                         "(the vocabulary size of the model)")
    if isinstance(data, Corpus):
        return data
    return Corpus(data, vocabulary=vocabulary, n_words=n_words)


_BLOCK = 1 << 20        # entries per block of Corpus.blocks and of sequential reads (4 MiB of int32)
_EXPAND_MAX = 1 << 20   # split_tokens: longest document expanded token by token


def _hypergeometric(counts, k, rng, limit=10 ** 9):
    """A multivariate hypergeometric draw: how many of each ``counts`` a uniformly
    random ``k``-subset of the ``counts.sum()`` items takes.

    NumPy's exact sampler (``method="marginals"``) needs fewer than ``limit`` =
    10**9 items; larger populations are reduced exactly, by symmetry: a uniform
    subset of a uniform random subset is uniform, and so is the complement of one.
    For k <= N/2, every item is kept with probability k/N (independent binomial
    counts), giving a uniform subset of s items; the draw is then a k-subset of
    those (s >= k) or those plus a (k - s)-subset of the rest. For k > N/2 the
    complement is drawn. Each step about halves the population or the sample.
    """
    total = int(counts.sum())
    if k == 0 or k == total:
        return counts * (k > 0)
    if total < limit:
        return rng.multivariate_hypergeometric(counts, k, method="marginals")
    if 2 * k > total:
        return counts - _hypergeometric(counts, total - k, rng, limit)
    kept = rng.binomial(counts, k / total)
    s = int(kept.sum())
    if s >= k:
        return _hypergeometric(kept, k, rng, limit)
    return kept + _hypergeometric(counts - kept, k - s, rng, limit)


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
    try:
        arr = np.asarray(data)
    except ValueError:  # NumPy refuses inhomogeneous nested sequences
        raise ValueError("ragged input: give documents as lists of word ids, or a rectangular count matrix") from None
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except TypeError as exc:      # e.g. a dict among the numbers
            raise TypeError(f"non-numeric entries in the count matrix ({exc})") from None
        except ValueError:
            raise ValueError("ragged or non-numeric input: give documents as lists of word ids, "
                             "or a rectangular count matrix") from None
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-d count matrix (n_docs, n_words), got shape {arr.shape}")
    return _from_sparse(sp.csr_matrix(_check_counts(arr, "counts")))


def _from_token_lists(docs, vocabulary, n_words):
    index = None if vocabulary is None else {w: i for i, w in enumerate(vocabulary)}
    ids = [_document_ids(j, doc, index) for j, doc in enumerate(docs)]
    lengths = np.array([len(d) for d in ids], dtype=np.int64)
    cols = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    if cols.size and cols.min() < 0:
        pos = int(np.argmax(cols < 0))
        j = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
        raise ValueError(f"document {j}: negative word id {cols[pos]}")
    width = n_words if n_words is not None else (int(cols.max()) + 1 if cols.size else 0)
    if cols.size and cols.max() >= width:
        pos = int(np.argmax(cols >= width))
        j = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
        raise ValueError(f"document {j}: word id {cols[pos]} is outside a vocabulary of {width} words")
    rows = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.int32), (rows, cols)), shape=(len(docs), width))
    m.sum_duplicates()
    m.sort_indices()
    return m


def _document_ids(j, doc, index):
    """Word ids (int64 array) of document ``j`` given as ids or as word strings."""
    if isinstance(doc, (str, bytes)):
        raise TypeError(f"document {j} is a string: count raw texts with Corpus.from_texts(texts) (a fitted "
                        "model's transform takes them directly), or give each document as a list of tokens")
    if isinstance(doc, np.ndarray) and doc.ndim == 1 and doc.dtype.kind in "iu":
        return doc.astype(np.int64)
    ids = []
    for tok in doc:
        if isinstance(tok, str):
            if index is None:
                raise ValueError(f"document {j} has word strings but no vocabulary was given: count token lists "
                                 "with Corpus.from_token_lists(docs), or pass vocabulary=")
            if tok not in index:
                raise ValueError(f"document {j}: word {tok!r} is not in the vocabulary")
            ids.append(index[tok])
        elif isinstance(tok, (int, np.integer)) and not isinstance(tok, (bool, np.bool_)):
            ids.append(int(tok))
        else:
            raise TypeError(f"document {j}: tokens must be word ids or strings, got {type(tok).__name__}")
    return np.array(ids, dtype=np.int64)


# The I/O module builds Corpus objects, so it is imported once the class exists.
from bnpcore import corpus_io  # noqa: E402
from bnpcore.corpus_io import write  # noqa: E402  (bnpcore.corpus.write, as before)
