"""Raw text to word counts: the default tokenizer, the English stop words,
reading text files, counting texts and token lists into a :class:`bnpcore.Corpus`
(:func:`count_texts` and :func:`count_token_lists`, which
:meth:`bnpcore.Corpus.from_texts` and :meth:`bnpcore.Corpus.from_token_lists`
call) or into an on-disk corpus (:func:`write_texts`, :func:`write_token_lists`),
and :class:`TextPipeline`, the tokenizer settings and vocabulary that a model
fitted on text keeps to count new text the same way.

Only the standard library is used, so ``import bnpcore`` needs neither
scikit-learn nor gensim. The tokenizer is deliberately simple and documented
exactly, so that the same tokens can be produced elsewhere (scikit-learn's
``CountVectorizer(token_pattern=TOKEN_PATTERN, stop_words=sorted(ENGLISH_STOP_WORDS))``
gives the same vocabulary and counts).
"""
import array
import itertools
import numbers
import os
import re
import unicodedata

import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_int, check_iterable

__all__ = ["tokenize", "TOKEN_PATTERN", "ENGLISH_STOP_WORDS", "read_texts", "TextPipeline", "count_texts",
           "count_token_lists", "write_texts", "write_token_lists"]

# A token: a run of Unicode word characters (letters, digits, connector
# punctuation; Python's ``\w``) of two or more characters between word
# boundaries, containing at least one letter: "covid19" and "état" are words,
# "2024", "a" and "__" are not. Apostrophes and hyphens separate tokens
# ("don't" -> "don"; "state-of-the-art" -> "state", "of", "the", "art").
TOKEN_PATTERN = r"(?u)\b(?=\w*[^\W\d_])\w\w+\b"
_TOKEN_RE = re.compile(TOKEN_PATTERN)

# English function words (articles, pronouns, auxiliaries, prepositions,
# conjunctions, common adverbs) and the pieces the tokenizer leaves of
# contractions ("doesn't" -> "doesn"; "we'll" -> "we", "ll"). Written for
# bnpcore; compared after lower-casing, so every entry is lower case.
ENGLISH_STOP_WORDS = frozenset("""
about above across after afterwards again against all almost alone along already also although always am
among an and another any anyhow anyone anything anyway anywhere are aren around as at be became because become
becomes been before beforehand behind being below beside besides between beyond both but by can cannot could
couldn did didn do does doesn doing don done down during each either else elsewhere enough etc even ever every
everyone everything everywhere except few for former formerly from further had hadn has hasn have haven having he
her here hereafter hereby herein hers herself him himself his how however if in indeed instead into is isn it its
itself just least less ll many may me meanwhile might mine more moreover most mostly much must mustn my myself
namely neither never nevertheless next no nobody none noone nor not nothing now nowhere of off often on once one
only onto or other others otherwise our ours ourselves out over own per perhaps rather re same several she
should shouldn since so some somehow someone something sometime sometimes somewhere still such than that the
their theirs them themselves then thence there thereafter thereby therefore therein thereupon these they this
those though through throughout thus to together too toward towards under unless until up upon us ve very via
was wasn we were weren what whatever when whence whenever where whereafter whereas whereby wherein whereupon
wherever whether which while whither who whoever whole whom whose why will with within without won would
wouldn yet you your yours yourself yourselves
""".split())


def tokenize(text):
    """The default tokenizer of :meth:`bnpcore.Corpus.from_texts`.

    ``text`` is put in Unicode normal form NFC (so a letter typed as base plus
    combining accent equals the precomposed letter), lower-cased with
    ``str.lower``, and split into the tokens matched by :data:`TOKEN_PATTERN`:
    runs of two or more word characters containing at least one letter. Stop
    words are removed later, by ``from_texts``.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str

    Examples
    --------
    >>> tokenize("The État's 2 new COVID19 rules — don't panic!")
    ['the', 'état', 'new', 'covid19', 'rules', 'don', 'panic']
    """
    return _TOKEN_RE.findall(unicodedata.normalize("NFC", text).lower())


def _make_tokenizer(lowercase=True, token_pattern=None):
    """The tokenizer of these settings: :func:`tokenize` for the defaults, else
    NFC, optional lower-casing and the matches of ``token_pattern``."""
    if not isinstance(lowercase, bool):
        raise TypeError(f"lowercase must be True or False, got {lowercase!r}")
    if token_pattern is None or (token_pattern == TOKEN_PATTERN and lowercase):
        if lowercase:
            return tokenize
        token_pattern = TOKEN_PATTERN
    if not isinstance(token_pattern, str):
        raise TypeError(f"token_pattern must be a str (a regular expression), got {type(token_pattern).__name__}")
    try:
        regex = re.compile(token_pattern)
    except re.error as exc:
        raise ValueError(f"token_pattern {token_pattern!r} is not a valid regular expression: {exc}") from None
    if regex.groups > 1:
        raise ValueError(f"token_pattern {token_pattern!r} has {regex.groups} capturing groups; "
                         "a token is the whole match or the one group")
    return _RegexTokenizer(regex, lowercase)


class _RegexTokenizer:
    """NFC, optional lower-casing, the matches of a compiled pattern (a class, not
    a closure, so that corpora holding a pipeline pickle)."""

    def __init__(self, regex, lowercase):
        self.regex, self.lowercase = regex, lowercase

    def __call__(self, text):
        text = unicodedata.normalize("NFC", text)
        return self.regex.findall(text.lower() if self.lowercase else text)


def _token_lists(texts, tokenizer):
    """The tokens of each text of ``texts`` (an iterable of str, read once),
    refusing items that are not text by position."""
    for j, text in enumerate(check_iterable(texts, "texts")):
        if not isinstance(text, str):
            hint = " (decode bytes first, e.g. with bnpcore.text.read_texts)" if isinstance(
                text, (bytes, bytearray)) else ""
            raise TypeError(f"texts[{j}] is of type {type(text).__name__}, not str{hint}")
        yield tokenizer(text)


def _name(function):
    """``module.qualname`` of a function (how errors name a tokenizer)."""
    qualname = getattr(function, "__qualname__", None) or type(function).__qualname__
    module = getattr(function, "__module__", None)
    return f"{module}.{qualname}" if module else qualname


class TextPipeline:
    """How raw text becomes the word counts of a fixed vocabulary: the
    tokenizer settings, the stop words and the vocabulary.

    :meth:`bnpcore.Corpus.from_texts` attaches the pipeline it used to the
    corpus it returns (``corpus.text_pipeline``; sub-corpora from indexing,
    ``split_tokens`` and ``iter_chunks`` keep it). An estimator fitted on such
    a corpus keeps the settings as its fitted attribute ``text_pipeline_`` (a
    dict of plain data, :meth:`settings`, saved in the model file; the
    vocabulary is ``vocabulary_``), and from then on takes raw text wherever
    it takes documents: ``transform``, ``score``, ``document_topics`` and
    ``partial_fit`` accept a list of strings, also after ``bnpcore.load``.
    ``min_df``, ``max_df`` and ``max_features`` are not part of a pipeline:
    they chose the vocabulary, which new text is counted in.

    Parameters
    ----------
    vocabulary : sequence of str
        The words counted (word id i is ``vocabulary[i]``); tokens outside it
        are dropped, as words unseen in training must be.
    lowercase : bool, default True
        Lower-case the text (``str.lower``, after Unicode normal form NFC)
        before matching ``token_pattern``.
    token_pattern : str, optional
        A regular expression (Python ``re``) whose matches are the tokens (the
        match, or its one capturing group); default :data:`TOKEN_PATTERN`.
    stop_words : "english", collection of str or None, default None
        Tokens removed before counting ("english":
        :data:`ENGLISH_STOP_WORDS`). Only the stop words that are words of the
        vocabulary change the counts (the others are dropped anyway), so only
        those are kept.
    tokenizer : callable, optional
        ``tokenizer(text) -> iterable of str`` replacing NFC, ``lowercase``
        and ``token_pattern``. It works in memory, but a model file holds data,
        never code: saving a model whose pipeline has a ``tokenizer`` raises
        ``TypeError`` naming the function. Save such a model after
        ``model.text_pipeline_ = None`` (the loaded model then takes token
        lists or counts), or express the tokenizer as ``token_pattern`` and
        ``lowercase``, which are saved.

    Raises
    ------
    ValueError
        ``token_pattern`` that is not a regular expression or has more than
        one capturing group; ``lowercase`` or ``token_pattern`` together with
        ``tokenizer``.
    TypeError
        A ``tokenizer`` that is not callable; a vocabulary or stop words that
        are not strings.

    Examples
    --------
    >>> from bnpcore import Corpus
    >>> corpus = Corpus.from_texts(["The cat sat.", "The cat and the hat."])
    >>> pipeline = corpus.text_pipeline
    >>> pipeline.transform(["A hat, a cat, a dog!"]).matrix.toarray().tolist()
    [[1, 1, 0]]
    >>> TextPipeline.from_dict(pipeline.to_dict()) == pipeline
    True
    """

    def __init__(self, vocabulary, *, lowercase=True, token_pattern=None, stop_words=None, tokenizer=None):
        if isinstance(vocabulary, str):
            raise TypeError("vocabulary must be a sequence of words, not one str")
        vocabulary = list(check_iterable(vocabulary, "vocabulary"))
        if not all(isinstance(w, str) for w in vocabulary):
            raise TypeError("the vocabulary must hold str words")
        if tokenizer is not None:
            if not callable(tokenizer):
                raise TypeError(f"tokenizer must be callable, got {type(tokenizer).__name__}")
            if lowercase is not True or token_pattern is not None:
                raise ValueError("lowercase and token_pattern set the default tokenizer; a tokenizer= callable "
                                 "does all the splitting and normalising itself")
            self._split = tokenizer
        else:
            self._split = _make_tokenizer(lowercase, token_pattern)
            token_pattern = TOKEN_PATTERN if token_pattern is None else token_pattern
        words = set(vocabulary)
        self.vocabulary = vocabulary
        self.lowercase = lowercase
        self.token_pattern = token_pattern
        self.stop_words = frozenset(w for w in _stop_words(stop_words) if w in words)
        self.tokenizer = tokenizer

    def tokenize(self, text):
        """The tokens of ``text`` (a str) before stop words and the vocabulary filter them."""
        return list(self._split(text))

    def transform(self, texts):
        """Count ``texts`` (an iterable of str, one per document, read once) in
        the vocabulary: tokens, minus stop words, minus words outside the
        vocabulary. Returns a :class:`bnpcore.Corpus` with this vocabulary and
        this pipeline; a text without known words is an empty document."""
        corpus = count_token_lists(_token_lists(texts, self._split), stop_words=self.stop_words,
                                   vocabulary=self.vocabulary)
        corpus.text_pipeline = self
        return corpus

    def settings(self):
        """The keyword arguments of the pipeline besides ``vocabulary``, as a
        dict: ``TextPipeline(vocabulary, **p.settings())`` rebuilds ``p``. Plain
        data (what a model file stores), except a ``tokenizer`` callable."""
        return {"lowercase": self.lowercase, "token_pattern": self.token_pattern,
                "stop_words": sorted(self.stop_words), "tokenizer": self.tokenizer}

    def to_dict(self):
        """:meth:`settings` and the vocabulary (key ``"vocabulary"``): plain data
        for JSON, unless the pipeline has a ``tokenizer`` callable (then
        ``TypeError`` naming it: code is never saved)."""
        if self.tokenizer is not None:
            raise TypeError(self._unsaveable())
        return {"vocabulary": list(self.vocabulary), **self.settings()}

    @classmethod
    def from_dict(cls, data):
        """The pipeline that :meth:`to_dict` described."""
        if not isinstance(data, dict) or "vocabulary" not in data:
            raise ValueError("a text pipeline is a dict with a 'vocabulary' and its settings")
        return cls(**data)

    def _unsaveable(self):
        return (f"the text pipeline's tokenizer {_name(self.tokenizer)} is Python code, which a model file does "
                "not hold; set model.text_pipeline_ = None to save the model without it (it then takes token "
                "lists or counts, not text), or count the texts with token_pattern= and lowercase=, which are "
                "saved")

    def __eq__(self, other):
        return (isinstance(other, TextPipeline) and self.vocabulary == other.vocabulary
                and self.settings() == other.settings())

    __hash__ = None

    def __repr__(self):
        how = f"tokenizer={_name(self.tokenizer)}" if self.tokenizer is not None else \
            f"lowercase={self.lowercase}, token_pattern={self.token_pattern!r}"
        return f"TextPipeline({len(self.vocabulary)} words, {how}, {len(self.stop_words)} stop words)"


# -- counting: text and token lists to a Corpus ---------------------------------------
def count_texts(texts, tokenizer=None, *, min_df=1, max_df=1.0, stop_words="english", max_features=None,
                vocabulary=None, lowercase=True, token_pattern=None):
    """Count the words of raw text documents.

    :meth:`bnpcore.Corpus.from_texts` calls this. Each text is tokenized (by
    default :func:`tokenize`: Unicode NFC, lower case, runs of two or more
    word characters holding a letter), stop words are removed, and the counts
    go through :func:`count_token_lists` (vocabulary in sorted order, rare and common
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
    >>> c = count_texts(["The cat sat.", "The cat and the hat."])
    >>> c.vocabulary, c.matrix.toarray().tolist()
    (['cat', 'hat', 'sat'], [[1, 0, 1], [1, 1, 0]])
    """
    if tokenizer is None:
        split = _make_tokenizer(lowercase, token_pattern)
    elif not callable(tokenizer):
        raise TypeError(f"tokenizer must be callable, got {type(tokenizer).__name__}")
    elif lowercase is not True or token_pattern is not None:
        raise ValueError("lowercase and token_pattern set the default tokenizer; a tokenizer= callable does "
                         "all the splitting and normalising itself")
    else:
        split = tokenizer
    corpus = count_token_lists(_token_lists(texts, split), min_df=min_df, max_df=max_df, stop_words=stop_words,
                               max_features=max_features, vocabulary=vocabulary)
    corpus.text_pipeline = TextPipeline(corpus.vocabulary, lowercase=lowercase, token_pattern=token_pattern,
                                        stop_words=stop_words, tokenizer=tokenizer)
    return corpus


def count_token_lists(docs, *, min_df=1, max_df=1.0, stop_words=None, max_features=None, vocabulary=None):
    """Count already tokenized documents (lists of word strings).

    :meth:`bnpcore.Corpus.from_token_lists` calls this. The vocabulary is
    every token kept, in sorted order, unless ``vocabulary`` fixes it.
    Parameters as in :func:`count_texts`, except
    that ``stop_words`` defaults to None (the tokens are taken as given).

    Parameters
    ----------
    docs : iterable of iterable of str
    min_df, max_df, stop_words, max_features, vocabulary
        See :func:`count_texts`.

    Returns
    -------
    Corpus

    Examples
    --------
    >>> c = count_token_lists([["b", "a", "b"], ["c"]])
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
    m = _count_documents(check_iterable(docs, "docs"), stop, index, grow=not fixed)
    _check_counted(m.shape[0], index, stop)
    if not fixed:
        words = np.array(list(index), dtype=object)
        keep = _prune(np.bincount(m.indices, minlength=m.shape[1]),
                      np.bincount(m.indices, weights=m.data, minlength=m.shape[1]),
                      words, m.shape[0], min_df, max_df, max_features)
        keep = keep[np.argsort(words[keep].astype(str), kind="stable")]
        m, vocabulary = m[:, keep], words[keep].tolist()
    from bnpcore.corpus import Corpus
    return Corpus(m, vocabulary=vocabulary)


# -- counting into an on-disk corpus (bnpcore.corpus_io.write) -----------------------------
def write_texts(writer, source, *, lines=False, tokenizer=None, min_df=1, max_df=1.0, stop_words="english",
                max_features=None):
    """Count the text of a file or folder into a :class:`bnpcore.corpus_io.CorpusWriter`
    and finish it, in two streamed passes: the vocabulary, counts and text
    pipeline are those of :func:`count_texts` on ``read_texts(source, lines)``.

    The first pass counts document frequencies, the second the kept words;
    memory is bounded by a block of documents and the vocabulary. Options as
    in :func:`count_texts` and :func:`read_texts`; :func:`bnpcore.corpus_io.write`
    calls this for text sources."""
    stop = _stop_words(stop_words)
    split = tokenize if tokenizer is None else tokenizer
    if not callable(split):
        raise TypeError(f"tokenizer must be callable, got {type(split).__name__}")

    def documents():
        return (split(text) for text in read_texts(source, lines=lines))

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
    keep = _prune(df, tokens, words, n_docs, min_df, max_df, max_features)
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
    writer.finish(len(vocabulary), vocabulary,
                  None if tokenizer is not None else TextPipeline(vocabulary, stop_words=stop))


def write_token_lists(writer, docs, *, stop_words=None):
    """Count documents given as lists of str tokens into a
    :class:`bnpcore.corpus_io.CorpusWriter` and finish it, in one streamed pass:
    word ids in order of first appearance, ``stop_words`` removed ("english",
    a collection of str or None), no pruning (that needs a second pass).
    :func:`bnpcore.corpus_io.write` calls this for token-list sources."""
    stop = _stop_words(stop_words)
    index = {}
    docs = check_iterable(docs, "source")
    while True:
        m = _count_documents(itertools.islice(docs, _WRITE_DOCS), stop, index, grow=True, start=writer.n_docs)
        if not m.shape[0]:
            break
        m.sort_indices()
        writer.add(m.indptr, m.indices, m.data)
    _check_counted(writer.n_docs, index, stop)
    writer.finish(len(index), list(index))


def read_texts(path, lines=False):
    """The documents of a text file or of a folder of text files, as strings.

    Parameters
    ----------
    path : str or path-like
        A file, or a folder: every file below it (recursively, in sorted order
        of the relative paths; names starting with "." are skipped) is one
        document, or holds one document per line when ``lines`` is set.
    lines : bool, default False
        One document per line (``"\\n"`` or ``"\\r\\n"``; a final newline does
        not start another document). Every line is a document, blank ones
        included, so document j is line j + 1 of the file.

    Yields
    ------
    str
        Files are read as UTF-8 (a leading byte-order mark is dropped); with
        ``lines`` one line at a time (a file of any size in bounded memory).

    Raises
    ------
    ValueError
        A path that does not exist, a folder without files, and a file that is
        not valid UTF-8 (naming the file, the byte offset and the line).
    """
    for _, text in _named_texts(path, lines):
        yield text


def _named_texts(path, lines=False):
    """``(name, text)`` of each document of :func:`read_texts`: the file's path
    relative to the folder (the file name for a file), plus ``:line`` with ``lines``."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = _files_below(path)
        if not files:
            raise ValueError(f"{path}: the folder holds no text files")
        names = [os.path.relpath(f, path) for f in files]
    elif os.path.isfile(path):
        files, names = [path], [os.path.basename(path)]
    else:
        raise ValueError(f"{path}: no such file or folder")
    for name, label in zip(files, names):
        if lines:
            for number, text in enumerate(_read_utf8_lines(name), start=1):
                yield f"{label}:{number}", text
        else:
            yield label, _read_utf8(name)


def _files_below(folder):
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(os.path.join(root, f) for f in files if not f.startswith("."))
    return sorted(found, key=lambda p: os.path.relpath(p, folder))


_BOM = b"\xef\xbb\xbf"


def _read_utf8(name):
    with open(name, "rb") as f:
        raw = f.read()
    skip = len(_BOM) if raw.startswith(_BOM) else 0
    return _decode(raw, skip, name, 0, 1)


def _read_utf8_lines(name):
    """The lines of a UTF-8 file without their "\\n" or "\\r\\n", read one at a time."""
    offset = 0
    with open(name, "rb") as f:
        for number, raw in enumerate(f, start=1):
            skip = len(_BOM) if number == 1 and raw.startswith(_BOM) else 0
            end = len(raw) - (2 if raw.endswith(b"\r\n") else 1 if raw.endswith(b"\n") else 0)
            yield _decode(raw[:end], skip, name, offset, number)
            offset += len(raw)


def _decode(raw, skip, name, offset, line):
    """``raw[skip:]`` as UTF-8; ``raw`` starts at byte ``offset`` and on line ``line`` of file ``name``."""
    try:
        return raw[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        line += raw[:at].count(b"\n")
        raise ValueError(f"{name}: not valid UTF-8 at byte {offset + at} (line {line}: {exc.reason}, "
                         f"byte {raw[at:at + 1].hex()}); convert the file to UTF-8") from None


# -- counting helpers -----------------------------------------------------------------
_WRITE_DOCS = 10000     # documents per block of write_texts and write_token_lists


def _stop_words(stop_words):
    """The set of stop words: None, "english" or a collection of strings."""
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise ValueError(f"stop_words must be 'english', a collection of words or None, got {stop_words!r}")
        return ENGLISH_STOP_WORDS
    words = frozenset(check_iterable(stop_words, "stop_words"))
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
        documents = f"{n_docs} document" + ("" if n_docs == 1 else "s")
        raise ValueError(f"no words are left: min_df={min_df!r} and max_df={max_df!r} keep the words found in at "
                         f"least {low:g} and at most {high:g} of the {documents}, and each of the {len(words)} "
                         f"distinct words is in {df.min()} to {df.max()} of them (every document would be empty); "
                         "lower min_df or raise max_df" + (", or split the text into documents" if n_docs == 1 else ""))
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
        for tok in check_iterable(doc, f"document {j}"):
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
