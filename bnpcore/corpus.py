"""The one input type of bnpcore: a documents x words matrix of counts.

A :class:`Corpus` holds a CSR matrix (int64 row pointers, int32 word ids,
int32 counts; sorted, duplicate-free rows) and an optional vocabulary. It is
validated once, here, with errors that name the problem; kernels trust what it
hands them.

Besides the in-memory constructors it counts raw text
(:meth:`Corpus.from_texts`, :meth:`Corpus.from_token_lists`), takes over
scikit-learn and gensim data (:meth:`Corpus.from_vectorizer`,
:meth:`Corpus.from_gensim`, :meth:`Corpus.to_gensim`), reads and writes the UCI
bag-of-words format (:meth:`Corpus.from_uci`, :meth:`Corpus.to_uci`) and
saves/loads itself as ``.npz`` (:meth:`Corpus.save`, :meth:`Corpus.load`).
"""
import array
import contextlib
import gzip
import io
import itertools
import json
import mmap
import numbers
import os
import re
import shutil
import tempfile
import zlib

import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_int, check_memory, check_random_state

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
    Corpus.from_uci, Corpus.load, bnpcore.datasets.load_kos

    Examples
    --------
    >>> c = Corpus([[0, 1, 1], [2]], n_words=4)
    >>> c.n_docs, c.n_words, c.n_tokens
    (2, 4, 4)
    """

    _files = None     # an opened on-disk corpus: its files, for positioned reads (_documents)
    # How raw text became these counts (bnpcore.text.TextPipeline), set by from_texts and kept by
    # sub-corpora: fitted models keep it to take new text.
    text_pipeline = None
    _path = None      # an opened on-disk corpus: its directory's absolute path (bnpcore.distributed)

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
        _check_width(matrix.shape[1])
        self.indptr = np.ascontiguousarray(matrix.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(matrix.indices, dtype=np.int32)
        self.counts = np.ascontiguousarray(matrix.data, dtype=np.int32)
        self._shape = matrix.shape
        self.vocabulary = vocabulary
        for arr in (self.indptr, self.indices, self.counts):
            arr.flags.writeable = False

    @classmethod
    def _from_arrays(cls, indptr, indices, counts, n_words, vocabulary=None):
        """Trusted constructor for arrays that are already valid (no copies, no checks
        but the width of the word ids)."""
        _check_width(n_words)
        self = cls.__new__(cls)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.counts = np.ascontiguousarray(counts, dtype=np.int32)
        self._shape = (len(self.indptr) - 1, int(n_words))
        self.vocabulary = vocabulary
        return self

    # -- files ---------------------------------------------------------------
    @classmethod
    def from_uci(cls, docword_path, vocab_path=None):
        """Read a corpus in the UCI bag-of-words format.

        ``docword.*.txt`` (or the same gzip-compressed, recognised by its
        content, not its name) holds three header lines D, W and NNZ, then
        NNZ lines ``docID wordID count`` with 1-based ids; ``vocab.*.txt``
        (optional, also possibly gzipped) holds the W words, one per line,
        line i being word id i. Documents that have no line are empty.

        Parameters
        ----------
        docword_path : str or path-like
        vocab_path : str or path-like, optional

        Returns
        -------
        Corpus
            D documents over W words, with the vocabulary if one was given.

        Raises
        ------
        ValueError
            Naming the file and line: a malformed header or body line (not
            three integers), a header disagreeing with the body (NNZ lines),
            ids out of range, counts < 1, and a (docID, wordID) pair given on
            two lines — duplicates are rejected rather than summed, since the
            format lists every non-zero once and a repeat means a corrupt or
            concatenated file. Also a vocabulary file without exactly W words.

        Examples
        --------
        >>> c = Corpus.from_uci("docword.kos.txt.gz", "vocab.kos.txt")  # doctest: +SKIP
        """
        name = str(docword_path)
        raw = _read_maybe_gzip(docword_path)
        n_docs, n_words, nnz, body = _uci_header(raw, name)
        rows = _uci_body(body, name)
        if len(rows) != nnz:
            raise ValueError(f"{name}: the header says NNZ={nnz} but the body has {len(rows)} entries")
        doc, word, count = _uci_sorted(rows, body, name, _UCI_BODY_LINE, n_docs, n_words)
        indptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc - 1, minlength=n_docs), out=indptr[1:])
        vocabulary = None if vocab_path is None else _read_uci_vocabulary(vocab_path, n_words, name)
        return cls._from_arrays(indptr, word - 1, count, n_words, vocabulary)

    def to_uci(self, docword_path, vocab_path=None):
        """Write the corpus in the UCI bag-of-words format (:meth:`from_uci` reads it back).

        Parameters
        ----------
        docword_path : str or path-like
            Header lines D, W, NNZ, then one ``docID wordID count`` line per
            non-zero (1-based ids); gzip-compressed when the name ends in ``.gz``.
        vocab_path : str or path-like, optional
            The vocabulary, one word per line (same compression rule).

        Raises
        ------
        ValueError
            ``vocab_path`` for a corpus without a vocabulary, or a word that
            cannot be written on one line (a line break, or leading or trailing
            white space, which :meth:`from_uci` would strip).
        """
        if vocab_path is not None:
            if self.vocabulary is None:
                raise ValueError("the corpus has no vocabulary to write")
            bad = [w for w in self.vocabulary if w != w.strip() or "\n" in w or "\r" in w or not w]
            if bad:
                raise ValueError(f"word {bad[0]!r} cannot be written as one line of a vocabulary file")
        doc = np.repeat(np.arange(1, self.n_docs + 1, dtype=np.int64), np.diff(self.indptr))
        body = np.column_stack([doc, self.indices.astype(np.int64) + 1, self.counts])
        out = io.BytesIO()
        out.write(f"{self.n_docs}\n{self.n_words}\n{self.nnz}\n".encode())
        np.savetxt(out, body, fmt="%d")
        _write_maybe_gzip(docword_path, out.getvalue())
        if vocab_path is not None:
            _write_maybe_gzip(vocab_path, "".join(w + "\n" for w in self.vocabulary).encode("utf-8"))

    # -- text and other libraries ----------------------------------------------
    @classmethod
    def from_texts(cls, texts, tokenizer=None, *, min_df=1, max_df=1.0, stop_words="english", max_features=None,
                   vocabulary=None, lowercase=True, token_pattern=None):
        """Count the words of raw text documents.

        Each text is tokenized (by default :func:`bnpcore.text.tokenize`:
        Unicode NFC, lower case, runs of two or more word characters holding a
        letter), stop words are removed, and the counts go through
        :meth:`from_token_lists` (vocabulary in sorted order, rare and common
        words pruned by ``min_df``/``max_df``/``max_features``).

        The corpus keeps how its text was counted as ``text_pipeline`` (a
        :class:`bnpcore.text.TextPipeline`: tokenizer settings, stop words,
        vocabulary). A model fitted on it keeps that pipeline (``text_pipeline_``,
        saved with the model) and then takes new raw text in ``transform``,
        ``score``, ``document_topics`` and ``partial_fit``.

        Parameters
        ----------
        texts : iterable of str
            One string per document, read once (a generator is fine, e.g.
            :func:`bnpcore.text.read_texts`). Document j of the corpus is the
            j-th text, also when it is left empty.
        tokenizer : callable, optional
            ``tokenizer(text) -> iterable of str`` replacing the default; it does
            all the normalising (the default's lower-casing is not applied).
            A model file cannot hold it (code is never saved): saving a model
            fitted on this corpus raises ``TypeError`` naming the function;
            prefer ``token_pattern``/``lowercase``, which are saved.
        min_df, max_df : int or float, default 1 and 1.0
            Keep the words found in at least ``min_df`` and at most ``max_df``
            documents; a float is a fraction of the documents, an int a number
            of documents (scikit-learn's ``CountVectorizer`` meaning).
        stop_words : "english", collection of str or None, default "english"
            Tokens removed before counting; "english" is
            :data:`bnpcore.text.ENGLISH_STOP_WORDS`.
        max_features : int, optional
            Keep only the ``max_features`` words with the most tokens (after
            ``min_df``/``max_df``; ties go to the alphabetically first word).
        vocabulary : sequence of str, optional
            A fixed vocabulary, e.g. a fitted model's ``vocabulary_`` for new
            documents: tokens outside it are dropped and word ids follow its
            order; ``min_df``, ``max_df`` and ``max_features`` must be left at
            their defaults. With a fitted model, ``model.transform(texts)`` does
            this with the model's own tokenizer settings.
        lowercase : bool, default True
            Lower-case the text before matching ``token_pattern`` (default
            tokenizer only).
        token_pattern : str, optional
            Regular expression whose matches are the tokens (default tokenizer
            only; default :data:`bnpcore.text.TOKEN_PATTERN`).

        Returns
        -------
        Corpus
            With its ``vocabulary`` and ``text_pipeline``.

        Raises
        ------
        TypeError
            An item of ``texts`` that is not a ``str`` (naming its position).
        ValueError
            No texts; no tokens at all; pruning that removes every word; bad
            ``min_df``/``max_df``/``max_features``; a ``token_pattern`` that is
            not a regular expression; ``lowercase``/``token_pattern`` with a
            ``tokenizer``.

        See Also
        --------
        bnpcore.text.read_texts : texts from a file or a folder.

        Examples
        --------
        >>> c = Corpus.from_texts(["The cat sat.", "The cat and the hat."])
        >>> c.vocabulary, c.matrix.toarray().tolist()
        (['cat', 'hat', 'sat'], [[1, 0, 1], [1, 1, 0]])
        """
        from bnpcore.text import TextPipeline, _make_tokenizer, _token_lists
        if tokenizer is None:
            split = _make_tokenizer(lowercase, token_pattern)
        elif not callable(tokenizer):
            raise TypeError(f"tokenizer must be callable, got {type(tokenizer).__name__}")
        elif lowercase is not True or token_pattern is not None:
            raise ValueError("lowercase and token_pattern set the default tokenizer; a tokenizer= callable does "
                             "all the splitting and normalising itself")
        else:
            split = tokenizer
        corpus = cls.from_token_lists(_token_lists(texts, split), min_df=min_df, max_df=max_df,
                                      stop_words=stop_words, max_features=max_features, vocabulary=vocabulary)
        corpus.text_pipeline = TextPipeline(corpus.vocabulary, lowercase=lowercase, token_pattern=token_pattern,
                                            stop_words=stop_words, tokenizer=tokenizer)
        return corpus

    @classmethod
    def from_token_lists(cls, docs, *, min_df=1, max_df=1.0, stop_words=None, max_features=None, vocabulary=None):
        """Count already tokenized documents (lists of word strings).

        The vocabulary is every token kept, in sorted order, unless
        ``vocabulary`` fixes it. Parameters as in :meth:`from_texts`, except
        that ``stop_words`` defaults to None (the tokens are taken as given).

        Parameters
        ----------
        docs : iterable of iterable of str
        min_df, max_df, stop_words, max_features, vocabulary
            See :meth:`from_texts`.

        Returns
        -------
        Corpus

        Examples
        --------
        >>> c = Corpus.from_token_lists([["b", "a", "b"], ["c"]])
        >>> c.vocabulary, c.matrix.toarray().tolist()
        (['a', 'b', 'c'], [[1, 2, 0], [0, 0, 1]])
        """
        stop = _stop_words(stop_words)
        fixed = vocabulary is not None
        if fixed:
            if (min_df, max_df, max_features) != (1, 1.0, None):
                raise ValueError("min_df, max_df and max_features do not apply to a fixed vocabulary")
            vocabulary = [str(w) for w in vocabulary]
            index = {w: i for i, w in enumerate(vocabulary)}
        else:
            index = {}
        m = _count_documents(_iterate(docs, "docs"), stop, index, grow=not fixed)
        _check_counted(m.shape[0], index, stop)
        if not fixed:
            words = np.array(list(index), dtype=object)
            keep = _prune(np.bincount(m.indices, minlength=m.shape[1]),
                          np.bincount(m.indices, weights=m.data, minlength=m.shape[1]),
                          words, m.shape[0], min_df, max_df, max_features)
            keep = keep[np.argsort(words[keep].astype(str), kind="stable")]
            m, vocabulary = m[:, keep], words[keep].tolist()
        return cls(m, vocabulary=vocabulary)

    @classmethod
    def from_vectorizer(cls, X, vectorizer):
        """A corpus from scikit-learn's ``CountVectorizer`` output and its vocabulary.

        Parameters
        ----------
        X : sparse matrix of shape (n_docs, n_words)
            ``vectorizer.fit_transform(texts)`` or ``vectorizer.transform(texts)``.
        vectorizer : fitted ``CountVectorizer`` (or any object with
            ``get_feature_names_out()``)
            A ``TfidfVectorizer`` qualifies only with ``use_idf=False,
            norm=None`` (raw counts): topic models need counts.

        Raises
        ------
        ValueError
            ``X`` and the vocabulary differ in width; ``X`` holds non-integer
            values (TF-IDF weights).
        """
        words = [str(w) for w in vectorizer.get_feature_names_out()]
        if X.shape[1] != len(words):
            raise ValueError(f"X has {X.shape[1]} columns but the vectorizer's vocabulary {len(words)} words")
        values = X.data if sp.issparse(X) else np.asarray(X)
        if np.asarray(values).dtype.kind == "f" and np.any(values != np.round(values)):
            raise ValueError("X holds non-integer values (TF-IDF weights?): topic models need word counts; "
                             "use CountVectorizer, or TfidfVectorizer(use_idf=False, norm=None)")
        return cls(X, vocabulary=words)

    @classmethod
    def from_gensim(cls, bow_corpus, dictionary=None):
        """A corpus from gensim's bag-of-words format.

        Parameters
        ----------
        bow_corpus : iterable of list of (int, int)
            Documents as ``(word_id, count)`` pairs (``Dictionary.doc2bow``
            output, or any streamed gensim corpus); a pair repeated within a
            document is summed.
        dictionary : gensim ``Dictionary`` or mapping of int to str, optional
            Ids 0..n-1 (after ``dictionary.filter_extremes`` this holds; call
            ``compactify()`` after other removals). Without it the width is one
            more than the largest id and there is no vocabulary.

        Raises
        ------
        ValueError
            Malformed pairs, negative or non-integer counts, ids outside the
            dictionary, dictionary ids with gaps (naming the document).
        """
        vocabulary = None
        if dictionary is not None:
            ids = sorted(dictionary.keys())
            if ids != list(range(len(ids))):
                raise ValueError("the dictionary's ids must be 0..n-1 without gaps (call dictionary.compactify())")
            vocabulary = [str(dictionary[i]) for i in ids]
        rows, cols, counts = [], [], []
        for j, doc in enumerate(_iterate(bow_corpus, "bow_corpus")):
            try:
                pairs = np.asarray(list(doc), dtype=np.float64).reshape(-1, 2)
            except (TypeError, ValueError):
                raise ValueError(f"document {j} is not a list of (word_id, count) pairs") from None
            ids = pairs[:, 0]
            if np.any(ids != np.round(ids)) or np.any(ids < 0) or (vocabulary is not None and
                                                                   np.any(ids >= len(vocabulary))):
                bad = ids[(ids != np.round(ids)) | (ids < 0) | (ids >= (len(vocabulary) if vocabulary else np.inf))]
                raise ValueError(f"document {j}: word id {bad[0]:g} is not an id of the "
                                 + (f"{len(vocabulary)}-word dictionary" if vocabulary else "vocabulary"))
            rows.append(np.full(len(pairs), j, dtype=np.int64))
            cols.append(ids.astype(np.int64))
            counts.append(pairs[:, 1])
        if not rows:
            raise ValueError("no documents: bow_corpus is empty")
        cols = np.concatenate(cols)
        width = len(vocabulary) if vocabulary is not None else int(cols.max(initial=-1)) + 1
        if width == 0:
            raise ValueError("the documents hold no words and no dictionary gives the vocabulary size")
        m = sp.coo_matrix((np.concatenate(counts), (np.concatenate(rows), cols)), shape=(len(rows), width))
        return cls(m, vocabulary=vocabulary)

    def to_gensim(self):
        """The corpus in gensim's format: ``(bow_corpus, dictionary)``.

        Returns
        -------
        bow_corpus : list of list of (int, int)
            Document j as ``(word_id, count)`` pairs in word-id order.
        dictionary : gensim.corpora.Dictionary
            Word ``i`` of the vocabulary (its id as text without one) under id
            ``i``, with document frequencies, collection frequencies and
            counts of documents and tokens.

        Raises
        ------
        ImportError
            gensim is not installed (``pip install gensim``).
        """
        try:
            from gensim.corpora import Dictionary
        except ImportError as exc:
            raise ImportError("Corpus.to_gensim needs gensim (pip install gensim)") from exc
        ids, counts = self.indices.tolist(), self.counts.tolist()
        bow = [list(zip(ids[a:b], counts[a:b])) for a, b in zip(self.indptr[:-1].tolist(), self.indptr[1:].tolist())]
        dictionary = Dictionary.from_corpus(bow, id2word={w: self.word(w) for w in range(self.n_words)})
        dictionary.cfs = dict(enumerate(np.bincount(self.indices, weights=self.counts,
                                                    minlength=self.n_words).astype(np.int64).tolist()))
        return bow, dictionary

    def save(self, path):
        """Write the corpus (counts and vocabulary) to a compressed ``.npz`` file.

        NumPy appends ``.npz`` to ``path`` if it has no such suffix. Read it back
        with :meth:`Corpus.load`; no pickling is involved.
        """
        # the narrowest unsigned types that hold the ids and counts (widened again on load)
        arrays = dict(format_version=np.int64(_FORMAT_VERSION), indptr=self.indptr,
                      indices=self.indices.astype(np.min_scalar_type(self.n_words - 1)),
                      counts=self.counts.astype(np.min_scalar_type(int(self.counts.max(initial=0)))),
                      n_words=np.int64(self.n_words))
        if self.vocabulary is not None:
            arrays["vocabulary"] = np.array(self.vocabulary, dtype=np.str_)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path):
        """Read a corpus written by :meth:`Corpus.save` (validated like any input)."""
        with np.load(path, allow_pickle=False) as f:
            missing = {"format_version", "indptr", "indices", "counts", "n_words"} - set(f.files)
            if missing:
                raise ValueError(f"{path} is not a saved bnpcore Corpus (missing {sorted(missing)})")
            version = int(f["format_version"])
            if version > _FORMAT_VERSION:
                raise ValueError(f"{path} has corpus format {version}; this bnpcore reads up to "
                                 f"{_FORMAT_VERSION}")
            indptr, indices, counts = f["indptr"], f["indices"], f["counts"]
            n_words = int(f["n_words"])
            vocabulary = f["vocabulary"].tolist() if "vocabulary" in f.files else None
        if indptr.ndim != 1 or len(indptr) < 1:
            raise ValueError(f"{path}: bad row pointers")
        try:
            m = sp.csr_matrix((counts, indices, indptr), shape=(len(indptr) - 1, n_words))
            m.check_format(full_check=True)
        except ValueError as exc:
            raise ValueError(f"{path}: corrupt count matrix ({exc})") from None
        return cls(m, vocabulary=vocabulary)

    @classmethod
    def open(cls, path):
        """Open an on-disk corpus directory (written by :func:`bnpcore.corpus.write`)
        without reading it.

        The word ids and counts are memory-mapped, not loaded: the corpus
        occupies only the pages the estimators touch, and the ones bnpcore
        reads sequentially (``n_tokens``, ``fingerprint``, ``iter_chunks``, the
        online drivers' minibatches) are released as it goes, so the resident
        memory stays bounded on corpora larger than RAM. Opening reads the
        files once, in blocks with the pages released, to check
        what the kernels index by (row pointers, word ids, counts; see
        ``Raises``) and the CRC-32 checksums ``write`` recorded: a truncated
        or altered file is a ValueError naming it, never a crash or a wrong
        model later (the cost: docs/numerics.md). The format is described
        in :func:`bnpcore.corpus.write`.

        Parameters
        ----------
        path : str or path-like
            The corpus directory.

        Returns
        -------
        Corpus
            Read-only arrays over the files; the vocabulary if one was written.

        Raises
        ------
        ValueError
            Not a corpus directory (no ``meta.json``: e.g. an interrupted write),
            a newer format version, files whose sizes disagree with the
            metadata (truncated), or altered contents: row pointers that
            decrease, word ids outside ``0..n_words - 1`` or not increasing
            within a document, counts below 1, counts whose sum is not the
            metadata's ``n_tokens``, a checksum that differs (corpora written
            before checksums were recorded get every check but this one), a
            missing or unreadable ``vocabulary.json``.

        Examples
        --------
        >>> from bnpcore.corpus import write
        >>> write([["a", "b"], ["b", "c", "c"]], "corpus_dir")  # doctest: +SKIP
        >>> Corpus.open("corpus_dir")  # doctest: +SKIP
        Corpus(n_docs=2, n_words=3, n_tokens=5)
        """
        path = os.fspath(path)
        meta = _read_meta(path)
        lengths = {"indptr": meta["n_docs"] + 1, "indices": meta["nnz"], "counts": meta["nnz"]}
        arrays = {}
        for name, n in lengths.items():
            file = os.path.join(path, name + ".bin")
            dtype = np.dtype(_DISK_DTYPES[name])
            size = os.path.getsize(file) if os.path.isfile(file) else None
            if size != n * dtype.itemsize:
                raise ValueError(f"{file}: {'missing' if size is None else f'{size} bytes'}, but {path}/{_META} "
                                 f"says {n} entries of {dtype.itemsize} bytes (a truncated or altered corpus)")
            arrays[name] = np.memmap(file, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype)
        if arrays["indptr"][0] != 0 or arrays["indptr"][-1] != meta["nnz"]:
            raise ValueError(f"{path}: corrupt row pointers (indptr.bin must start at 0 and end at nnz)")
        vocabulary = None
        if meta["vocabulary"]:
            file = os.path.join(path, _VOCAB)
            if os.path.exists(file) and not os.path.isfile(file):        # a FIFO would block the read
                raise ValueError(f"{file} is not a regular file (an altered corpus)")
            try:
                with open(file, encoding="utf-8") as f:
                    vocabulary = json.load(f)
            except FileNotFoundError:
                raise ValueError(f"{file} is missing, but {path}/{_META} says the corpus has a vocabulary "
                                 "(an incomplete or altered corpus)") from None
            except (ValueError, UnicodeDecodeError, OSError) as exc:
                raise ValueError(f"{file}: unreadable vocabulary of the corpus {path} ({exc})") from None
            if not isinstance(vocabulary, list) or len(vocabulary) != meta["n_words"] \
                    or not all(isinstance(w, str) for w in vocabulary):
                raise ValueError(f"{file}: expected a list of {meta['n_words']} words (strings)")
        corpus = cls._from_arrays(arrays["indptr"], arrays["indices"], arrays["counts"], meta["n_words"], vocabulary)
        corpus._verify_files(path, meta)
        settings = meta.get("text_pipeline")
        if settings is not None:
            from bnpcore.text import TextPipeline
            try:
                if vocabulary is None or not isinstance(settings, dict) or "tokenizer" in settings:
                    raise TypeError("expected the settings of a text pipeline over the corpus's vocabulary")
                corpus.text_pipeline = TextPipeline(vocabulary, **settings)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}/{_META}: text_pipeline is not a text pipeline ({exc})") from None
        corpus._files = {name: open(os.path.join(path, name + ".bin"), "rb", buffering=0)
                         for name in ("indices", "counts")}
        corpus._path = os.path.abspath(path)
        return corpus

    def _verify_files(self, path, meta):
        """Check an opened on-disk corpus in one streamed pass (``_CHECK_BLOCK``
        entries at a time, pages released): the checksums ``write`` recorded
        and what the kernels index by: row pointers non-decreasing, word ids
        in 0..n_words-1, increasing within each document, counts >= 1, and
        their sum the metadata's ``n_tokens``. ValueError naming the file."""
        crc = meta.get("crc32")
        if crc is not None and not (isinstance(crc, dict) and all(isinstance(crc.get(k), int) for k in _DISK_DTYPES)):
            raise ValueError(f"{path}/{_META}: crc32 must map each file to an integer checksum")

        def file(name):
            return os.path.join(path, name + ".bin")
        found = {}
        indptr, nnz = self.indptr, meta["nnz"]
        last = 0
        for start in range(0, len(indptr), _CHECK_BLOCK):
            block = np.asarray(indptr[start:start + _CHECK_BLOCK])
            found["indptr"] = zlib.crc32(block.view(np.uint8), found.get("indptr", 0))
            if block[0] < last or not np.all(block[1:] >= block[:-1]) or block[-1] > nnz:
                raise ValueError(f"{file('indptr')}: row pointers decrease or exceed nnz = {nnz} near document "
                                 f"{start} (a corrupt or altered corpus)")
            last = int(block[-1])
            self._drop_pages()
        n_words, tokens, previous = self.n_words, 0, -1
        for start in range(0, nnz, _CHECK_BLOCK):
            stop = min(start + _CHECK_BLOCK, nnz)
            ids, counts = np.asarray(self.indices[start:stop]), np.asarray(self.counts[start:stop])
            found["indices"] = zlib.crc32(ids.view(np.uint8), found.get("indices", 0))
            found["counts"] = zlib.crc32(counts.view(np.uint8), found.get("counts", 0))
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= n_words:
                raise ValueError(f"{file('indices')}: word id {low if low < 0 else high} near entry {start} outside "
                                 f"0..{n_words - 1} (a corrupt or altered corpus)")
            if int(counts.min()) < 1:
                raise ValueError(f"{file('counts')}: count {int(counts.min())} near entry {start}; counts are >= 1 "
                                 "(a corrupt or altered corpus)")
            tokens += int(counts.sum(dtype=np.int64))
            # word ids increase within a document: each entry against the one before, except
            # the first entry of a document (one boolean per entry of scratch)
            rises = ids[1:] > ids[:-1]
            doc_starts = np.asarray(indptr[np.searchsorted(indptr, start + 1):np.searchsorted(indptr, stop)]) - start
            rises[doc_starts - 1] = True
            first_starts = indptr[np.searchsorted(indptr, start)] == start
            if not rises.all() or (not first_starts and ids[0] <= previous):
                at = start if rises.all() else start + 1 + int(np.argmin(rises))
                raise ValueError(f"{file('indices')}: word ids not increasing within a document near entry {at} "
                                 "(a corrupt or altered corpus)")
            previous = int(ids[-1])
            self._drop_pages()
        if tokens != meta["n_tokens"]:
            raise ValueError(f"{file('counts')}: the counts sum to {tokens}, but {path}/{_META} says n_tokens = "
                             f"{meta['n_tokens']} (a corrupt or altered corpus)")
        for name in _DISK_DTYPES if crc is not None else ():
            if found.get(name, 0) != crc[name]:
                raise ValueError(f"{file(name)}: checksum {found.get(name, 0):08x} differs from the {crc[name]:08x} "
                                 f"written in {path}/{_META} (a corrupt or altered corpus)")

    def iter_chunks(self, n_docs):
        """Consecutive sub-corpora of ``n_docs`` documents, in order (the last may be smaller).

        Every chunk has the full vocabulary (same ``n_words`` and
        ``vocabulary``); its word ids and counts are views of this corpus's
        arrays (no copy; only the row pointers are shifted). On an opened
        on-disk corpus the pages read are released after each chunk, so
        ``for chunk in corpus.iter_chunks(10000): est.partial_fit(chunk)``
        streams a corpus of any size in bounded memory.

        Parameters
        ----------
        n_docs : int >= 1

        Yields
        ------
        Corpus
        """
        n_docs = check_int(n_docs, "n_docs")
        for start in range(0, self.n_docs, n_docs):
            ptr = np.array(self.indptr[start:start + n_docs + 1])
            lo, hi = int(ptr[0]), int(ptr[-1])
            yield Corpus._from_arrays(ptr - lo, self.indices[lo:hi], self.counts[lo:hi], self.n_words,
                                      self.vocabulary)._with_pipeline(self)
            self._drop_pages()

    def _documents(self, doc_ids):
        """``(corpus, rows)``: where the online drivers read the documents ``doc_ids``.

        In memory: this corpus and ``doc_ids``. An opened on-disk corpus reads
        them with positioned reads (``os.pread``) into a small in-memory corpus
        (rows 0..n-1), not through its memory map: a page fault maps a whole
        page-cache folio, so gathering 500 random documents of a 440 MB corpus
        through the map made 171 MB resident (Linux 6.18), 400 times the
        minibatch."""
        if self._files is None:
            return self, doc_ids
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        starts, ends = self.indptr[doc_ids], self.indptr[doc_ids + 1]     # 8 bytes per document: mapped
        ptr = np.concatenate([[0], np.cumsum(ends - starts)])
        if len(doc_ids) and np.all(np.diff(doc_ids) == 1):      # a range: one read per file
            starts, ends = starts[:1], ends[-1:]
        spans = list(zip(starts.tolist(), ends.tolist()))
        read = {name: np.frombuffer(b"".join(os.pread(self._files[name].fileno(), 4 * (b - a), 4 * a)
                                             for a, b in spans), dtype=_DISK_DTYPES[name])
                for name in ("indices", "counts")}
        sub = Corpus._from_arrays(ptr, read["indices"], read["counts"], self.n_words)
        return sub, np.arange(len(doc_ids))

    def _doc_blocks(self):
        """``(first document, chunk)`` over chunks of about _BLOCK entries (iter_chunks)."""
        per_chunk = max(1, int(_BLOCK * self.n_docs // max(self.nnz, 1)))
        return zip(range(0, self.n_docs, per_chunk), self.iter_chunks(per_chunk))

    def _blocks(self, arr):
        """``arr`` in slices of _BLOCK entries, releasing the pages of a memory-mapped
        corpus after each (sequential reads in bounded resident memory)."""
        for start in range(0, max(len(arr), 1), _BLOCK):
            yield arr[start:start + _BLOCK]
            self._drop_pages()

    def _drop_pages(self):
        """Release the resident pages of a memory-mapped corpus (no-op in memory).

        Pages of a read-only file mapping are read again from the page cache or
        the file when next touched, so this changes nothing but the process's
        resident memory, which would otherwise grow to the size of the files
        as they are read (their pages count in RSS until the kernel needs them)."""
        for arr in (self.indptr, self.indices, self.counts):
            base = arr
            while base is not None and not isinstance(base, mmap.mmap):
                base = getattr(base, "base", None)
            if base is not None and hasattr(mmap, "MADV_DONTNEED"):
                base.madvise(mmap.MADV_DONTNEED)

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
        for start, chunk in self._doc_blocks():      # bounded scratch memory on corpora of any size
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
        return Corpus._from_arrays(sub.indptr, sub.indices, sub.data, self.n_words,
                                   self.vocabulary)._with_pipeline(self)

    def tokens(self):
        """Token-expanded view ``(word_ids, token_ptr)``: int32 word id of every token,
        document by document, and int64 offsets of each document (length n_docs + 1)."""
        from bnpcore.kernels.sparse import expand_tokens
        if self.nnz <= _BLOCK:
            return expand_tokens(self.indptr, self.indices, self.counts)
        words, ptr = np.empty(self.n_tokens, dtype=np.int32), np.empty(self.n_docs + 1, dtype=np.int64)
        ptr[0] = 0
        for start, chunk in self._doc_blocks():      # an on-disk corpus: pages released block by block
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
        return Corpus._from_arrays(indptr, self.indices[keep], counts[keep], self.n_words,
                                   self.vocabulary)._with_pipeline(self)

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


_DEFAULT = object()   # write(): the default of the source's kind


def write(source, path, *, vocab_path=None, lines=False, tokenizer=None, min_df=1, max_df=1.0,
          stop_words=_DEFAULT, max_features=None):
    """Build an on-disk corpus directory, streaming, in bounded memory.

    ``Corpus.open(path)`` then opens it without reading it, and every
    estimator's ``fit`` (and ``partial_fit`` over ``iter_chunks``) takes it.

    Sources, read once or twice in blocks (memory bounded by a block of
    documents, the vocabulary and 8 bytes per document, whatever the size):

    * a UCI docword file (path of a file, ``lines=False``; plain or gzip,
      recognised by content), with its vocabulary file ``vocab_path``: as
      :meth:`Corpus.from_uci` reads it (same checks, naming file and line),
      except that the entries must come sorted by docID (UCI files are;
      within a document any order);
    * raw text (a folder: one document per file, recursively, as in
      :func:`bnpcore.text.read_texts`; a file with ``lines=True``: one document
      per line): two passes, the first counting document frequencies so that
      ``tokenizer``, ``min_df``, ``max_df``, ``stop_words`` (default
      "english") and ``max_features`` give exactly the vocabulary and counts
      of :meth:`Corpus.from_texts` (sorted vocabulary);
    * an iterable of token lists (lists of str): one pass, so the vocabulary
      is in order of first appearance, ``stop_words`` (default none) removes
      tokens and the document-frequency pruning is not available;
    * a :class:`Corpus` (e.g. ``bnpcore.datasets.load_kos()``), written as is.

    The directory holds (little-endian, the in-memory dtypes, so that opening
    needs no conversion: a memory map is used as it is)::

        meta.json        {"format": "bnpcore-corpus", "format_version": 1, "n_docs": D,
                          "n_words": W, "nnz": NNZ, "n_tokens": N, "vocabulary": true|false,
                          "crc32": {"indptr": C1, "indices": C2, "counts": C3},
                          "text_pipeline": {...}}   (only for text counted by the default tokenizer)
        indptr.bin       int64 x (D + 1): offsets of each document's entries (nnz may exceed 2**31)
        indices.bin      int32 x NNZ: word ids, sorted and distinct within each document
        counts.bin       int32 x NNZ: positive counts
        vocabulary.json  a JSON list of the W words (only with a vocabulary)

    that is 8 bytes per non-zero (document, word) pair and 8 per document.
    ``text_pipeline`` records how text was counted (the settings of
    :class:`bnpcore.text.TextPipeline` but the vocabulary: lower-casing, token
    pattern, stop words): ``Corpus.open`` attaches it as the corpus's
    ``text_pipeline``, so a model fitted on the opened corpus takes raw text.
    Text counted by a ``tokenizer`` callable has none (code is not saved).
    int32 ids and counts are what every kernel takes (a narrower type on disk
    would cost a widening copy of every block read; a wider one would double
    the size for ids that cannot exceed 2**31 - 1 words anyway).

    The files are written into a temporary sibling directory
    (``.NAME.PID.*.partial``) that is renamed to ``path`` only when complete
    (``meta.json`` last, files synced first); any error removes it, so a
    directory named ``path`` is always a complete corpus. The next write in
    the same folder removes the temporary directories of writers that were
    killed (SIGKILL) before they could (PID no longer running).

    Parameters
    ----------
    source : path-like, iterable of list of str, or Corpus
    path : path-like
        The directory to create; it must not exist.
    vocab_path : path-like, optional
        UCI sources: the vocabulary file.
    lines : bool, default False
        A file ``source`` holds raw text, one document per line (otherwise
        it is read as a UCI docword file). With a folder: one document per
        line of each file.
    tokenizer, min_df, max_df, stop_words, max_features
        As in :meth:`Corpus.from_texts` (text sources; ``stop_words`` also
        for token lists).

    Returns
    -------
    Corpus
        ``Corpus.open(path)``.

    Raises
    ------
    ValueError
        ``path`` exists; the errors of :meth:`Corpus.from_uci` (malformed
        lines, ids out of range, counts < 1, repeated pairs, a header
        disagreeing with the body), UCI entries not sorted by docID, a gzip
        file that is truncated or corrupt, a text file that is not UTF-8 (file
        and byte), no documents, no tokens, options that do not apply to the
        source.
    TypeError
        Non-str tokens, a string instead of a list of tokens.

    Examples
    --------
    >>> from bnpcore.corpus import Corpus, write
    >>> write("docword.nytimes.txt.gz", "nytimes", vocab_path="vocab.nytimes.txt")  # doctest: +SKIP
    >>> write("posts.txt", "posts", lines=True, min_df=5)  # doctest: +SKIP
    >>> corpus = Corpus.open("posts")  # doctest: +SKIP
    """
    pruning = dict(min_df=min_df, max_df=max_df, max_features=max_features)
    text_options = dict(tokenizer=tokenizer, **pruning)
    text_defaults = dict(tokenizer=None, min_df=1, max_df=1.0, max_features=None)
    if isinstance(source, (str, bytes, os.PathLike)):
        source = os.fsdecode(source)
        if not os.path.exists(source):
            raise ValueError(f"{source}: no such file or folder")
        text = os.path.isdir(source) or lines
    else:
        text = False
        if lines:
            raise ValueError("lines=True applies to a text file or folder source")
    if not text:
        given = [k for k, v in text_options.items() if v != text_defaults[k]]
        if given:
            raise ValueError(f"{', '.join(given)} apply to text sources only (a token-list source is read in one "
                             "pass: its vocabulary cannot be pruned)")
    if vocab_path is not None and (text or not isinstance(source, str)):
        raise ValueError("vocab_path applies to a UCI docword source")
    with _DiskWriter(path) as writer:
        if isinstance(source, Corpus):
            if stop_words is not _DEFAULT:
                raise ValueError("stop_words does not apply to a Corpus source")
            for chunk in source.iter_chunks(_WRITE_DOCS):
                writer.add(chunk.indptr, chunk.indices, chunk.counts)
            pipeline = source.text_pipeline
            writer.finish(source.n_words, source.vocabulary,
                          None if pipeline is None or pipeline.tokenizer is not None else pipeline.settings())
        elif text:
            from bnpcore.text import TextPipeline
            stop = _stop_words("english" if stop_words is _DEFAULT else stop_words)
            vocabulary = _write_texts(writer, source, lines, tokenizer, stop, pruning)
            writer.finish(len(vocabulary), vocabulary,
                          None if tokenizer is not None else TextPipeline(vocabulary, stop_words=stop).settings())
        elif isinstance(source, str):
            if stop_words is not _DEFAULT:
                raise ValueError("stop_words does not apply to a UCI source")
            n_words = _write_uci(writer, source)
            writer.finish(n_words, None if vocab_path is None else _read_uci_vocabulary(vocab_path, n_words, source))
        else:
            stop = _stop_words(None if stop_words is _DEFAULT else stop_words)
            index = {}
            docs = _iterate(source, "source")
            while True:
                m = _count_documents(itertools.islice(docs, _WRITE_DOCS), stop, index, grow=True,
                                     start=writer.n_docs)
                if not m.shape[0]:
                    break
                m.sort_indices()
                writer.add(m.indptr, m.indices, m.data)
            _check_counted(writer.n_docs, index, stop)
            writer.finish(len(index), list(index))
    return Corpus.open(path)


def _write_texts(writer, source, lines, tokenizer, stop, pruning):
    """The two passes of a text source; returns the vocabulary (as Corpus.from_texts)."""
    from bnpcore.text import read_texts, tokenize
    tokenizer = tokenize if tokenizer is None else tokenizer
    if not callable(tokenizer):
        raise TypeError(f"tokenizer must be callable, got {type(tokenizer).__name__}")

    def documents():
        return (tokenizer(text) for text in read_texts(source, lines=lines))

    # pass 1: document frequency and tokens of every word (ids in first-appearance order)
    index, df, tokens, n_docs = {}, np.zeros(0, np.int64), np.zeros(0, np.float64), 0
    docs = documents()
    while True:
        m = _count_documents(itertools.islice(docs, _WRITE_DOCS), stop, index, grow=True, start=n_docs)
        if not m.shape[0]:
            break
        n_docs += m.shape[0]
        df = np.bincount(m.indices, minlength=len(index)) + np.pad(df, (0, len(index) - len(df)))
        tokens = np.bincount(m.indices, weights=m.data, minlength=len(index)) + np.pad(
            tokens, (0, len(index) - len(tokens)))
    _check_counted(n_docs, index, stop)
    words = np.array(list(index), dtype=object)
    keep = _prune(df, tokens, words, n_docs, **pruning)
    vocabulary = sorted(words[keep].tolist())
    # pass 2: the counts over the kept words
    index = {w: i for i, w in enumerate(vocabulary)}
    docs = documents()
    while True:
        m = _count_documents(itertools.islice(docs, _WRITE_DOCS), stop, index, grow=False)
        if not m.shape[0]:
            break
        m.sort_indices()
        writer.add(m.indptr, m.indices, m.data)
    if writer.n_docs != n_docs:
        raise ValueError(f"{source} changed between the two passes ({n_docs} then {writer.n_docs} documents)")
    return vocabulary


def _write_uci(writer, path):
    """Stream a UCI docword file into ``writer`` block by block; returns W.

    Each block of lines is parsed and checked like Corpus.from_uci; the entries
    of its last document are carried into the next block (a document may span
    blocks), so that every block written holds whole documents."""
    with _GzipAwareReader(path) as f:
        n_docs, n_words, nnz, _ = _uci_header(b"".join(f.readline() for _ in range(3)), path)
        carry, first_line, next_doc, seen = b"", _UCI_BODY_LINE, 1, 0
        while True:
            data = f.read(_READ_BYTES)
            final = not data
            text = carry + data
            cut = len(text) if final else text.rfind(b"\n") + 1
            text, rest = text[:cut], text[cut:]
            rows = _uci_body(text, path, first_line)
            if len(rows) and (rows[0, 0] < next_doc or np.any(np.diff(rows[:, 0]) < 0)):
                bad = 0 if rows[0, 0] < next_doc else int(np.argmax(np.diff(rows[:, 0]) < 0)) + 1
                raise ValueError(f"{path}, line {_uci_line_number(text, bad, first_line)}: docID {rows[bad, 0]} "
                                 "comes after a larger docID; streaming needs the entries sorted by docID "
                                 "(sort the file, or read it whole with Corpus.from_uci)")
            # whole documents only: the last one may continue in the next block
            n_whole = len(rows) if final else int(np.searchsorted(rows[:, 0], rows[-1, 0])) if len(rows) else 0
            tail = _last_lines_offset(text, len(rows) - n_whole)
            doc, word, count = _uci_sorted(rows[:n_whole], text, path, first_line, n_docs, n_words)
            last = n_docs if final else (int(doc[-1]) if n_whole else next_doc - 1)
            lengths = np.bincount(doc - next_doc, minlength=last - next_doc + 1)
            writer.add(np.concatenate([[0], np.cumsum(lengths)]), word - 1, count)
            seen += n_whole
            next_doc = last + 1
            first_line += text.count(b"\n", 0, tail)
            carry = text[tail:] + rest
            if final:
                break
    if seen != nnz:
        raise ValueError(f"{path}: the header says NNZ={nnz} but the body has {seen} entries")
    return n_words


def _last_lines_offset(text, n):
    """Byte offset of the start of the last ``n`` non-blank lines of ``text``."""
    pos = len(text)
    while n:
        start = text.rfind(b"\n", 0, pos - 1) + 1
        if text[start:pos].strip():
            n -= 1
        pos = start
    return pos


class _GzipAwareReader:
    """A binary file, gunzipped as it is read if it starts with the gzip magic
    number; a truncated or corrupt gzip stream is a ValueError naming the file."""

    def __init__(self, path):
        self.path = path
        self.raw = open(path, "rb")
        self.gzip = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0)
        self.f = gzip.GzipFile(fileobj=self.raw, mode="rb") if self.gzip else self.raw

    def _call(self, method, *args):
        try:
            return getattr(self.f, method)(*args)
        except (OSError, EOFError, zlib.error) as exc:
            if not self.gzip:
                raise
            raise ValueError(f"{self.path}: not a valid gzip file, or truncated ({exc})") from None

    def read(self, n):
        return self._call("read", n)

    def readline(self):
        return self._call("readline")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        self.raw.close()


class _DiskWriter:
    """Appends whole documents to the files of an on-disk corpus in a temporary
    sibling directory; ``finish`` writes the metadata and renames it to the
    final path, and leaving the ``with`` block on an error removes it."""

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        if os.path.lexists(self.path):
            raise ValueError(f"{path} already exists; write the corpus to a new path")
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise ValueError(f"{parent}: no such folder")
        remove_stale_leftovers(parent, ".partial")
        self.tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.{os.getpid()}.", suffix=".partial",
                                    dir=parent)
        self.files = {name: open(os.path.join(self.tmp, name + ".bin"), "wb") for name in _DISK_DTYPES}
        self.crc = dict.fromkeys(_DISK_DTYPES, 0)
        self._write("indptr", np.zeros(1))
        self.n_docs = self.nnz = self.n_tokens = 0

    def _write(self, name, values):
        """Append ``values`` to a file in its disk dtype, updating its CRC-32 (meta.json's crc32)."""
        values = np.ascontiguousarray(values, dtype=_DISK_DTYPES[name])
        self.crc[name] = zlib.crc32(values.view(np.uint8), self.crc[name])
        values.tofile(self.files[name])

    def add(self, indptr, indices, counts):
        """Documents given as CSR arrays (``indptr`` from 0; ids sorted and distinct,
        counts positive, as checked by the caller)."""
        indptr = np.asarray(indptr, dtype=np.int64)
        self._write("indptr", indptr[1:] + self.nnz)
        self._write("indices", indices)
        self._write("counts", counts)
        self.n_docs += len(indptr) - 1
        self.nnz += len(indices)
        self.n_tokens += int(np.sum(counts, dtype=np.int64))

    def finish(self, n_words, vocabulary, text_pipeline=None):
        if not self.n_docs:
            raise ValueError("no documents: the source is empty")
        _check_width(n_words)
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
        if vocabulary is not None:
            with open(os.path.join(self.tmp, _VOCAB), "w", encoding="utf-8") as f:
                f.write("[\n" + ",\n".join(json.dumps(w, ensure_ascii=False) for w in vocabulary) + "\n]\n")
        meta = {"format": _DISK_FORMAT, "format_version": _DISK_VERSION, "n_docs": self.n_docs,
                "n_words": int(n_words), "nnz": self.nnz, "n_tokens": self.n_tokens,
                "vocabulary": vocabulary is not None, "crc32": self.crc}
        if text_pipeline is not None:
            meta["text_pipeline"] = {k: v for k, v in text_pipeline.items() if k != "tokenizer"}
        with open(os.path.join(self.tmp, _META), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        if os.path.lexists(self.path):
            raise ValueError(f"{self.path} appeared while the corpus was written")
        os.rename(self.tmp, self.path)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        for f in self.files.values():
            f.close()
        if os.path.isdir(self.tmp):      # not renamed: an error happened
            shutil.rmtree(self.tmp, ignore_errors=True)


def remove_stale_leftovers(directory, suffix, name=None):
    """Remove the temporary files and folders (``.NAME.PID.XXXXXXXX<suffix>``, as
    ``tempfile`` names them, of any NAME or of ``name``) that writers killed
    before they could clean up (SIGKILL, a power cut) left in ``directory``:
    those whose writer's process id is no longer running. Errors are ignored:
    this is housekeeping, never a reason to fail a write."""
    pattern = re.compile(r"\.(%s)\.(\d+)\.[a-z0-9_]{8}%s" % (".+" if name is None else re.escape(name),
                                                         re.escape(suffix)))
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or int(match.group(2)) == os.getpid() or _running(int(match.group(2))):
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _running(pid):
    """Whether a process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True         # someone else's process, or an id we cannot ask about: leave its files alone
    return True


def _read_meta(path):
    """The checked metadata of an on-disk corpus directory."""
    file = os.path.join(path, _META)
    if not os.path.isfile(file):
        raise ValueError(f"{path} is not an on-disk bnpcore corpus (no {_META}; write one with "
                         "bnpcore.corpus.write)")
    try:
        with open(file, encoding="utf-8") as f:
            meta = json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{file}: unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != _DISK_FORMAT:
        raise ValueError(f"{file}: not the metadata of a bnpcore corpus")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > _DISK_VERSION:
        raise ValueError(f"{path} has on-disk corpus format {version!r}; this bnpcore reads up to {_DISK_VERSION}")
    for key, low in (("n_docs", 1), ("n_words", 1), ("nnz", 0), ("n_tokens", 0)):
        if not isinstance(meta.get(key), int) or meta[key] < low:
            raise ValueError(f"{file}: {key} must be an integer >= {low}, got {meta.get(key)!r}")
    return meta


_DISK_FORMAT = "bnpcore-corpus"
_DISK_VERSION = 1
_DISK_DTYPES = {"indptr": "<i8", "indices": "<i4", "counts": "<i4"}
_META = "meta.json"
_VOCAB = "vocabulary.json"
_BLOCK = 1 << 20        # entries per block of sequential reads of an opened corpus (4 MiB of int32)
_CHECK_BLOCK = 1 << 16  # entries per block of the checks of Corpus.open (64 KiB of scratch)
_WRITE_DOCS = 10000     # documents per block of the token and text writers
_READ_BYTES = 1 << 24   # bytes per block of the UCI writer (about 1.5 M lines)
_FORMAT_VERSION = 1  # of Corpus.save files
_EXPAND_MAX = 1 << 20   # split_tokens: longest document expanded token by token
_MAX_WORDS = np.iinfo(np.int32).max
_UCI_BODY_LINE = 4   # file line number of the first entry (after D, W, NNZ)


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


def _read_maybe_gzip(path):
    """Bytes of a file, gunzipped if it starts with the gzip magic number."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a valid gzip file ({exc})") from None


def _write_maybe_gzip(path, data):
    """Write bytes, gzip-compressed when the file name ends in ".gz"."""
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


def _iterate(items, what):
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} is a single {type(items).__name__}; give a list (or other iterable) of them")
    try:
        return iter(items)
    except TypeError:
        raise TypeError(f"{what} must be an iterable, got {type(items).__name__}") from None


def _stop_words(stop_words):
    """The set of stop words: None, "english" or a collection of strings."""
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise ValueError(f"stop_words must be 'english', a collection of words or None, got {stop_words!r}")
        from bnpcore.text import ENGLISH_STOP_WORDS
        return ENGLISH_STOP_WORDS
    words = frozenset(_iterate(stop_words, "stop_words"))
    if not all(isinstance(w, str) for w in words):
        raise TypeError("stop_words must hold strings")
    return words


def _document_count(value, name, n_docs):
    """min_df/max_df as a number of documents: an int >= 0 as is, a float in [0, 1] times n_docs."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
        return value * n_docs
    raise ValueError(f"{name} must be an int >= 0 (documents) or a float in [0, 1] (fraction), got {value!r}")


def _prune(df, tokens, words, n_docs, min_df, max_df, max_features):
    """Word ids kept by the document-frequency bounds and the max_features most
    frequent words (ties: alphabetical), given each word's document frequency
    ``df`` and number of ``tokens`` in a corpus of ``n_docs`` documents."""
    low, high = _document_count(min_df, "min_df", n_docs), _document_count(max_df, "max_df", n_docs)
    keep = np.flatnonzero((df >= low) & (df <= high))
    if max_features is not None:
        check_int(max_features, "max_features")
        order = np.lexsort((words[keep].astype(str), -tokens[keep]))
        keep = keep[order[:max_features]]
    if keep.size == 0:
        raise ValueError(f"no words are left: min_df={min_df!r} and max_df={max_df!r} keep the words found in "
                         f"{low:g} to {high:g} of the {n_docs} documents, and each of the {len(words)} distinct "
                         f"words is in {df.min()} to {df.max()} (every document would be empty); lower min_df or "
                         "raise max_df")
    return keep


def _count_documents(docs, stop, index, grow, start=0):
    """Count the documents of the iterator ``docs`` (lists of str tokens) into a
    CSR matrix of shape (documents, len(index)) with sorted, summed entries.

    Tokens in ``stop`` are dropped; word ids come from ``index`` (word -> id),
    which new words join when ``grow`` (first-appearance order) and which
    otherwise drops them. ``start`` numbers the first document in error messages."""
    cols, lengths = array.array("q"), array.array("q")
    for j, doc in enumerate(docs, start):
        if isinstance(doc, (str, bytes)):
            raise TypeError(f"document {j} is a {type(doc).__name__}; give each document as a list of tokens")
        n = len(cols)
        for tok in _iterate(doc, f"document {j}"):
            if not isinstance(tok, str):
                raise TypeError(f"document {j}: tokens must be str, got {type(tok).__name__} {tok!r}")
            if tok in stop:
                continue
            if grow:
                cols.append(index.setdefault(tok, len(index)))
            elif tok in index:
                cols.append(index[tok])
        lengths.append(len(cols) - n)
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), np.frombuffer(lengths, dtype=np.int64))
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.int32), (rows, np.frombuffer(cols, dtype=np.int64))),
                      shape=(len(lengths), len(index)))
    m.sum_duplicates()
    return m


def _check_counted(n_docs, index, stop):
    """The errors of counting no documents, or documents without a single word."""
    if not n_docs:
        raise ValueError("no documents: the iterable of documents is empty")
    if not index:
        raise ValueError(f"the {n_docs} documents hold no tokens" + (" besides stop words" if stop else ""))


def _check_width(n_words):
    """Word ids are int32 in every kernel: a wider vocabulary would wrap around."""
    if n_words > _MAX_WORDS:
        raise ValueError(f"a vocabulary of {n_words} words exceeds the largest supported, {_MAX_WORDS} "
                         "(word ids are 32-bit)")


def _uci_header(raw, name):
    """(D, W, NNZ, body bytes); the body starts on line _UCI_BODY_LINE."""
    parts = raw.split(b"\n", 3)
    if len(parts) < 3 or (len(parts) == 3 and not parts[2].strip()):
        raise ValueError(f"{name}: expected three header lines (D, W, NNZ) before the entries")
    values = []
    for i, (label, text) in enumerate(zip(("D", "W", "NNZ"), parts[:3])):
        try:
            values.append(int(text))
        except ValueError:
            raise ValueError(f"{name}, line {i + 1}: header {label} must be one integer, "
                             f"got {text.decode(errors='replace').strip()!r}") from None
    n_docs, n_words, nnz = values
    if n_docs < 1 or n_words < 1 or nnz < 0:
        raise ValueError(f"{name}: header D={n_docs}, W={n_words}, NNZ={nnz} must have D >= 1, W >= 1, NNZ >= 0")
    _check_width(n_words)
    check_memory(16 * (n_docs + 1), f"{name}: header D={n_docs}")     # the document offsets and their counts
    return n_docs, n_words, nnz, parts[3] if len(parts) == 4 else b""


def _uci_body(body, name, first_line=_UCI_BODY_LINE):
    """Body lines as an int64 array of shape (n, 3); blank lines are skipped.
    ``first_line`` is the file line number of the first line of ``body``."""
    if not body.strip():
        return np.zeros((0, 3), dtype=np.int64)
    try:
        rows = np.loadtxt(io.BytesIO(body), dtype=np.int64, comments=None, ndmin=2)
        if rows.shape[1] == 3:
            return rows
    except ValueError:
        pass
    # slow path, only to name the first bad line
    for number, line in enumerate(body.split(b"\n"), start=first_line):
        fields = line.split()
        if fields and (len(fields) != 3 or not all(_is_int64(f) for f in fields)):
            raise ValueError(f"{name}, line {number}: expected 'docID wordID count' (three integers), "
                             f"got {line.decode(errors='replace').strip()!r}")
    raise ValueError(f"{name}: unreadable body")


def _is_int64(text):
    try:
        return -2**63 <= int(text) < 2**63
    except ValueError:
        return False


def _uci_line_number(body, row, first_line=_UCI_BODY_LINE):
    """File line number of the row-th non-blank line of ``body``."""
    nonblank = [i for i, line in enumerate(body.split(b"\n")) if line.strip()]
    return first_line + nonblank[row]


def _uci_sorted(rows, body, name, first_line, n_docs, n_words):
    """Validate the (docID, wordID, count) rows parsed from ``body`` and return
    ``(doc, word, count)`` sorted by document, then word (1-based ids).

    Raises ValueError naming the file and line: ids outside the header's range,
    counts < 1 or beyond int32, and a (docID, wordID) pair listed twice."""
    doc, word, count = rows[:, 0], rows[:, 1], rows[:, 2]
    for what, ids, bound in (("docID", doc, n_docs), ("wordID", word, n_words)):
        bad = np.flatnonzero((ids < 1) | (ids > bound))
        if bad.size:
            line = _uci_line_number(body, bad[0], first_line)
            raise ValueError(f"{name}, line {line}: {what} {ids[bad[0]]} is outside 1..{bound} "
                             f"(header: D={n_docs}, W={n_words})")
    bad = np.flatnonzero(count < 1)
    if bad.size:
        line = _uci_line_number(body, bad[0], first_line)
        raise ValueError(f"{name}, line {line}: count {count[bad[0]]} is not positive")
    if np.any(count > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: counts exceed the int32 range of bnpcore counts")
    key = (doc - 1) * n_words + (word - 1)
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(np.diff(key[order]) == 0)
    if dup.size:
        a, b = sorted(order[dup[0]:dup[0] + 2])
        raise ValueError(f"{name}, lines {_uci_line_number(body, a, first_line)} and "
                         f"{_uci_line_number(body, b, first_line)}: (docID, wordID) = "
                         f"({doc[a]}, {word[a]}) is listed twice")
    return doc[order], word[order], count[order]


def _read_uci_vocabulary(path, n_words, name):
    vocabulary = _read_vocabulary(path)
    if len(vocabulary) != n_words:
        raise ValueError(f"{path}: the vocabulary has {len(vocabulary)} words but {name} says W={n_words}")
    return vocabulary


def _read_vocabulary(path):
    raw = _read_maybe_gzip(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not valid UTF-8 ({exc.reason})") from None
    # one word per line: split on newlines only (str.splitlines would also split
    # inside words at U+0085, U+2028, form feeds..., shifting every later word id)
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return [w.strip() for w in lines]


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
