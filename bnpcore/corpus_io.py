"""Reading and writing corpora: the UCI bag-of-words format, ``.npz`` files,
scikit-learn and gensim data, and on-disk corpus directories.

:class:`bnpcore.Corpus` is the container; this module moves it in and out of
files and other libraries. The ``Corpus`` class methods that do so
(:meth:`~bnpcore.Corpus.from_uci`, :meth:`~bnpcore.Corpus.to_uci`,
:meth:`~bnpcore.Corpus.save`, :meth:`~bnpcore.Corpus.load`,
:meth:`~bnpcore.Corpus.open`, :meth:`~bnpcore.Corpus.from_vectorizer`,
:meth:`~bnpcore.Corpus.from_gensim`, :meth:`~bnpcore.Corpus.to_gensim`) call the
functions here and are documented here.

An on-disk corpus is a directory written by :func:`write` (streaming, in
bounded memory) or, block by block, by a :class:`CorpusWriter`; ``Corpus.open``
maps its files without reading them (:func:`read_disk`). Its metadata file is
named :data:`META_FILE`.
"""
import contextlib
import gzip
import io
import json
import mmap
import os
import re
import shutil
import tempfile
import zlib

import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_iterable, check_memory, check_n_words
from bnpcore.corpus import Corpus
from bnpcore.text import write_texts, write_token_lists

__all__ = ["read_uci", "write_uci", "save_npz", "load_npz", "from_vectorizer", "from_gensim", "to_gensim",
           "write", "read_disk", "release_pages", "read_rows", "CorpusWriter", "remove_stale_leftovers"]

_DISK_FORMAT = "bnpcore-corpus"
_DISK_VERSION = 1
_DISK_DTYPES = {"indptr": "<i8", "indices": "<i4", "counts": "<i4"}
_VOCAB = "vocabulary.json"
_CHECK_BLOCK = 1 << 16  # entries per block of the checks of Corpus.open (64 KiB of scratch)
_WRITE_DOCS = 10000     # documents per block copied by write() from a Corpus source
_READ_BYTES = 1 << 24   # bytes per block of the UCI writer (about 1.5 M lines)
_FORMAT_VERSION = 1  # of Corpus.save files
_UCI_BODY_LINE = 4   # file line number of the first entry (after D, W, NNZ)
_MAX_ID = np.iinfo(np.int32).max     # word ids and counts are int32 in every kernel


# -- the UCI bag-of-words format ----------------------------------------------------
def read_uci(docword_path, vocab_path=None):
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
    >>> from bnpcore import Corpus
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
    return Corpus.from_csr(indptr, word - 1, count, n_words, vocabulary, check=False)


def write_uci(corpus, docword_path, vocab_path=None):
    """Write a corpus in the UCI bag-of-words format (:func:`read_uci` reads it back).

    Parameters
    ----------
    corpus : Corpus
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
        white space, which :func:`read_uci` would strip).
    """
    if vocab_path is not None:
        if corpus.vocabulary is None:
            raise ValueError("the corpus has no vocabulary to write")
        bad = [w for w in corpus.vocabulary if w != w.strip() or "\n" in w or "\r" in w or not w]
        if bad:
            raise ValueError(f"word {bad[0]!r} cannot be written as one line of a vocabulary file")
    doc = np.repeat(np.arange(1, corpus.n_docs + 1, dtype=np.int64), np.diff(corpus.indptr))
    body = np.column_stack([doc, corpus.indices.astype(np.int64) + 1, corpus.counts])
    out = io.BytesIO()
    out.write(f"{corpus.n_docs}\n{corpus.n_words}\n{corpus.nnz}\n".encode())
    np.savetxt(out, body, fmt="%d")
    _write_maybe_gzip(docword_path, out.getvalue())
    if vocab_path is not None:
        _write_maybe_gzip(vocab_path, "".join(w + "\n" for w in corpus.vocabulary).encode("utf-8"))


# -- .npz files ---------------------------------------------------------------------
def save_npz(corpus, path):
    """Write a corpus (counts and vocabulary) to a compressed ``.npz`` file.

    NumPy appends ``.npz`` to ``path`` if it has no such suffix. Read it back
    with :func:`load_npz`; no pickling is involved.
    """
    # the narrowest unsigned types that hold the ids and counts (widened again on load)
    arrays = dict(format_version=np.int64(_FORMAT_VERSION), indptr=corpus.indptr,
                  indices=corpus.indices.astype(np.min_scalar_type(corpus.n_words - 1)),
                  counts=corpus.counts.astype(np.min_scalar_type(int(corpus.counts.max(initial=0)))),
                  n_words=np.int64(corpus.n_words))
    if corpus.vocabulary is not None:
        arrays["vocabulary"] = np.array(corpus.vocabulary, dtype=np.str_)
    np.savez_compressed(path, **arrays)


def load_npz(path):
    """Read a corpus written by :func:`save_npz` (validated like any input)."""
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
    return Corpus(m, vocabulary=vocabulary)


# -- scikit-learn and gensim ----------------------------------------------------------
def from_vectorizer(X, vectorizer):
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
    return Corpus(X, vocabulary=words)


def from_gensim(bow_corpus, dictionary=None):
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
    for j, doc in enumerate(check_iterable(bow_corpus, "bow_corpus")):
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
    return Corpus(m, vocabulary=vocabulary)


def to_gensim(corpus):
    """A corpus in gensim's format: ``(bow_corpus, dictionary)``.

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
    ids, counts = corpus.indices.tolist(), corpus.counts.tolist()
    bow = [list(zip(ids[a:b], counts[a:b])) for a, b in zip(corpus.indptr[:-1].tolist(), corpus.indptr[1:].tolist())]
    dictionary = Dictionary.from_corpus(bow, id2word={w: corpus.word(w) for w in range(corpus.n_words)})
    dictionary.cfs = dict(enumerate(np.bincount(corpus.indices, weights=corpus.counts,
                                                minlength=corpus.n_words).astype(np.int64).tolist()))
    return bow, dictionary


# -- on-disk corpora ---------------------------------------------------------------------
# The metadata file of an on-disk corpus directory, written last: its presence marks a complete corpus.
META_FILE = "meta.json"
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
      :func:`read_uci` reads it (same checks, naming file and line),
      except that the entries must come sorted by docID (UCI files are;
      within a document any order);
    * raw text (a folder: one document per file, recursively, as in
      :func:`bnpcore.text.read_texts`; a file with ``lines=True``: one document
      per line): two passes, the first counting document frequencies so that
      ``tokenizer``, ``min_df``, ``max_df``, ``stop_words`` (default
      "english") and ``max_features`` give exactly the vocabulary and counts
      of :func:`bnpcore.text.count_texts` (sorted vocabulary);
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
        As in :func:`bnpcore.text.count_texts` (text sources; ``stop_words`` also
        for token lists).

    Returns
    -------
    Corpus
        ``Corpus.open(path)``.

    Raises
    ------
    ValueError
        ``path`` exists; the errors of :func:`read_uci` (malformed
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
    with CorpusWriter(path) as writer:
        if isinstance(source, Corpus):
            if stop_words is not _DEFAULT:
                raise ValueError("stop_words does not apply to a Corpus source")
            for chunk in source.iter_chunks(_WRITE_DOCS):
                writer.add(chunk.indptr, chunk.indices, chunk.counts)
            writer.finish(source.n_words, source.vocabulary, source.text_pipeline)
        elif text:
            write_texts(writer, source, lines=lines, stop_words="english" if stop_words is _DEFAULT else stop_words,
                        **text_options)
        elif isinstance(source, str):
            if stop_words is not _DEFAULT:
                raise ValueError("stop_words does not apply to a UCI source")
            n_words = _write_uci(writer, source)
            writer.finish(n_words, None if vocab_path is None else _read_uci_vocabulary(vocab_path, n_words, source))
        else:
            write_token_lists(writer, source, stop_words=None if stop_words is _DEFAULT else stop_words)
    return Corpus.open(path)


def read_disk(path):
    """The checked contents of an on-disk corpus directory (:func:`write`), mapped, not read.

    What :meth:`bnpcore.Corpus.open` builds its corpus from. The word ids and
    counts are memory-mapped, not loaded. The files are read once, in blocks
    with the pages released (:func:`release_pages`), to check what the
    kernels index by (row pointers, word ids, counts; see ``Raises``) and the
    CRC-32 checksums :func:`write` recorded: a truncated or altered file is
    a ValueError naming it, never a crash or a wrong model later (the cost:
    docs/numerics.md).

    Parameters
    ----------
    path : str or path-like
        A directory as :func:`write` leaves it.

    Returns
    -------
    dict
        ``indptr``, ``indices``, ``counts``: read-only arrays over the files
        (the CSR arrays of :class:`bnpcore.Corpus`); ``n_words``;
        ``vocabulary``: list of str or None; ``text_pipeline``: the
        :class:`bnpcore.text.TextPipeline` the text was counted with, or
        None; ``path``: the directory's absolute path; ``files``: the word-id
        and count files opened for :func:`read_rows`.

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
            raise ValueError(f"{file}: {'missing' if size is None else f'{size} bytes'}, but {path}/{META_FILE} "
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
            raise ValueError(f"{file} is missing, but {path}/{META_FILE} says the corpus has a vocabulary "
                             "(an incomplete or altered corpus)") from None
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            raise ValueError(f"{file}: unreadable vocabulary of the corpus {path} ({exc})") from None
        if not isinstance(vocabulary, list) or len(vocabulary) != meta["n_words"] \
                or not all(isinstance(w, str) for w in vocabulary):
            raise ValueError(f"{file}: expected a list of {meta['n_words']} words (strings)")
    _verify_files(arrays, path, meta)
    settings, pipeline = meta.get("text_pipeline"), None
    if settings is not None:
        from bnpcore.text import TextPipeline
        try:
            if vocabulary is None or not isinstance(settings, dict) or "tokenizer" in settings:
                raise TypeError("expected the settings of a text pipeline over the corpus's vocabulary")
            pipeline = TextPipeline(vocabulary, **settings)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}/{META_FILE}: text_pipeline is not a text pipeline ({exc})") from None
    files = {name: open(os.path.join(path, name + ".bin"), "rb", buffering=0) for name in ("indices", "counts")}
    return dict(arrays, n_words=meta["n_words"], vocabulary=vocabulary, text_pipeline=pipeline,
                path=os.path.abspath(path), files=files)


def _verify_files(arrays, path, meta):
    """Check an opened on-disk corpus in one streamed pass (``_CHECK_BLOCK``
    entries at a time, pages released): the checksums ``write`` recorded
    and what the kernels index by: row pointers non-decreasing, word ids
    in 0..n_words-1, increasing within each document, counts >= 1, and
    their sum the metadata's ``n_tokens``. ValueError naming the file."""
    crc = meta.get("crc32")
    if crc is not None and not (isinstance(crc, dict) and all(isinstance(crc.get(k), int) for k in _DISK_DTYPES)):
        raise ValueError(f"{path}/{META_FILE}: crc32 must map each file to an integer checksum")

    def file(name):
        return os.path.join(path, name + ".bin")
    found = {}
    indptr, nnz = arrays["indptr"], meta["nnz"]
    last = 0
    for start in range(0, len(indptr), _CHECK_BLOCK):
        block = np.asarray(indptr[start:start + _CHECK_BLOCK])
        found["indptr"] = zlib.crc32(block.view(np.uint8), found.get("indptr", 0))
        if block[0] < last or not np.all(block[1:] >= block[:-1]) or block[-1] > nnz:
            raise ValueError(f"{file('indptr')}: row pointers decrease or exceed nnz = {nnz} near document "
                             f"{start} (a corrupt or altered corpus)")
        last = int(block[-1])
        release_pages(*arrays.values())
    n_words, tokens, previous = meta["n_words"], 0, -1
    for start in range(0, nnz, _CHECK_BLOCK):
        stop = min(start + _CHECK_BLOCK, nnz)
        ids, counts = np.asarray(arrays["indices"][start:stop]), np.asarray(arrays["counts"][start:stop])
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
        release_pages(*arrays.values())
    if tokens != meta["n_tokens"]:
        raise ValueError(f"{file('counts')}: the counts sum to {tokens}, but {path}/{META_FILE} says n_tokens = "
                         f"{meta['n_tokens']} (a corrupt or altered corpus)")
    for name in _DISK_DTYPES if crc is not None else ():
        if found.get(name, 0) != crc[name]:
            raise ValueError(f"{file(name)}: checksum {found.get(name, 0):08x} differs from the {crc[name]:08x} "
                             f"written in {path}/{META_FILE} (a corrupt or altered corpus)")


def release_pages(*arrays):
    """Release the resident pages of the memory maps under ``arrays`` (arrays in
    memory are left alone).

    Pages of a read-only file mapping are read again from the page cache or
    the file when next touched, so this changes nothing but the process's
    resident memory, which would otherwise grow to the size of the files
    as they are read (their pages count in RSS until the kernel needs them).
    :meth:`bnpcore.Corpus.release_pages` calls it on a corpus's arrays."""
    for arr in arrays:
        base = arr
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "base", None)
        if base is not None and hasattr(mmap, "MADV_DONTNEED"):
            base.madvise(mmap.MADV_DONTNEED)


def read_rows(files, indptr, doc_ids):
    """The documents ``doc_ids`` of an on-disk corpus, read with positioned
    reads (``os.pread``) into memory: ``(indptr, indices, counts)`` of those
    documents in that order (row pointers from 0).

    ``files`` are :func:`read_disk`'s open word-id and count files, ``indptr``
    the corpus's row pointers. :meth:`bnpcore.Corpus.read_documents` reads
    minibatches this way rather than through the memory map: a page fault
    maps a whole page-cache folio, so documents gathered through the map
    leave far more resident than the minibatch itself (docs/scaling.md)."""
    doc_ids = np.asarray(doc_ids, dtype=np.int64)
    starts, ends = indptr[doc_ids], indptr[doc_ids + 1]     # 8 bytes per document: mapped
    ptr = np.concatenate([[0], np.cumsum(ends - starts)])
    if len(doc_ids) and np.all(np.diff(doc_ids) == 1):      # a range: one read per file
        starts, ends = starts[:1], ends[-1:]
    spans = list(zip(starts.tolist(), ends.tolist()))
    read = {name: np.frombuffer(b"".join(os.pread(files[name].fileno(), 4 * (b - a), 4 * a)
                                         for a, b in spans), dtype=_DISK_DTYPES[name])
            for name in ("indices", "counts")}
    return ptr, read["indices"], read["counts"]


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


class CorpusWriter:
    """Write an on-disk corpus (the directory :func:`write` describes) block by block.

    The files go into a temporary sibling directory (``.NAME.PID.*.partial``,
    the attribute ``tmp``): :meth:`add` appends documents, :meth:`finish`
    writes the metadata and renames the directory to ``path``, and leaving the
    ``with`` block on an error removes it, so a directory named ``path`` is
    always a complete corpus. Other files written into ``tmp`` before
    ``finish`` travel with the corpus.

    Parameters
    ----------
    path : path-like
        The directory to create; it must not exist, its parent must.

    Attributes
    ----------
    n_docs, nnz, n_tokens : int
        Documents, (document, word) pairs and tokens added so far.

    Examples
    --------
    >>> with CorpusWriter("corpus_dir") as writer:  # doctest: +SKIP
    ...     writer.add([0, 2, 3], [0, 4, 1], [1, 2, 5])      # two documents
    ...     writer.finish(n_words=5)
    """

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
        self._max_id = -1

    def _write(self, name, values):
        """Append ``values`` to a file in its disk dtype, updating its CRC-32 (meta.json's crc32)."""
        values = np.ascontiguousarray(values, dtype=_DISK_DTYPES[name])
        self.crc[name] = zlib.crc32(values.view(np.uint8), self.crc[name])
        values.tofile(self.files[name])

    def add(self, indptr, indices, counts):
        """Append documents given as CSR arrays: ``indptr`` of length (documents + 1)
        from 0, and for each document its word ids (``indices``, increasing)
        and their counts (``counts``, positive integers).

        Raises
        ------
        ValueError
            Row pointers that do not start at 0, decrease or disagree with the
            lengths of ``indices`` and ``counts``; negative word ids, ids not
            increasing within a document; counts below 1 or beyond int32.
        """
        indptr, indices, counts = np.asarray(indptr), np.asarray(indices), np.asarray(counts)
        for name, arr in (("indptr", indptr), ("indices", indices), ("counts", counts)):
            if arr.ndim != 1 or arr.dtype.kind not in "iu" and arr.size:
                raise ValueError(f"{name} must be a 1-d array of integers, got {arr.dtype} of shape {arr.shape}")
        indptr = indptr.astype(np.int64)
        if len(indptr) < 1 or indptr[0] != 0 or np.any(indptr[1:] < indptr[:-1]) or indptr[-1] != len(indices) \
                or len(indices) != len(counts):
            raise ValueError(f"indptr must rise from 0 to len(indices) = len(counts); got {len(indptr)} row pointers "
                             f"ending at {indptr[-1] if len(indptr) else None}, {len(indices)} word ids and "
                             f"{len(counts)} counts")
        if len(indices):
            low, high = int(indices.min()), int(indices.max())
            if low < 0 or high > _MAX_ID:
                raise ValueError(f"word id {low if low < 0 else high} is outside 0..{_MAX_ID}")
            rises = indices[1:] > indices[:-1]
            starts = indptr[1:-1]
            rises[starts[(starts > 0) & (starts < len(indices))] - 1] = True     # a document's first id
            if not rises.all():
                raise ValueError(f"word ids must increase within a document (entry {int(np.argmin(rises)) + 1} "
                                 "of this block)")
            if int(counts.min()) < 1 or int(counts.max()) > _MAX_ID:
                raise ValueError(f"counts must be in 1..{_MAX_ID}, found {int(counts.min())} to {int(counts.max())}")
            self._max_id = max(self._max_id, high)
        self._write("indptr", indptr[1:] + self.nnz)
        self._write("indices", indices)
        self._write("counts", counts)
        self.n_docs += len(indptr) - 1
        self.nnz += len(indices)
        self.n_tokens += int(np.sum(counts, dtype=np.int64))

    def finish(self, n_words, vocabulary=None, text_pipeline=None):
        """Write the metadata and move the corpus to ``path``.

        Parameters
        ----------
        n_words : int
            The vocabulary size W (more than the largest word id added).
        vocabulary : sequence of str, optional
            The W words.
        text_pipeline : bnpcore.text.TextPipeline, optional
            How the text was counted, recorded so that ``Corpus.open`` attaches
            it; one with a ``tokenizer`` callable is not recorded (code is never
            saved).

        Raises
        ------
        ValueError
            No documents were added; ``n_words`` not above every word id
            added, or disagreeing with the vocabulary.
        """
        if not self.n_docs:
            raise ValueError("no documents: the source is empty")
        n_words = check_n_words(n_words)
        if n_words <= self._max_id:
            raise ValueError(f"word id {self._max_id} is outside a vocabulary of n_words={n_words} words")
        if vocabulary is not None and len(vocabulary) != n_words:
            raise ValueError(f"a vocabulary of {len(vocabulary)} words for n_words={n_words}")
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
        if text_pipeline is not None and text_pipeline.tokenizer is None:
            meta["text_pipeline"] = {k: v for k, v in text_pipeline.settings().items() if k != "tokenizer"}
        with open(os.path.join(self.tmp, META_FILE), "w", encoding="utf-8") as f:
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
    file = os.path.join(path, META_FILE)
    if not os.path.isfile(file):
        raise ValueError(f"{path} is not an on-disk bnpcore corpus (no {META_FILE}; write one with "
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


# -- helpers -------------------------------------------------------------------------


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
    check_n_words(n_words)
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
