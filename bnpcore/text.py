"""Raw text to tokens: the default tokenizer, the English stop words and
reading text files (the way in for :meth:`bnpcore.Corpus.from_texts`).

Only the standard library is used, so ``import bnpcore`` needs neither
scikit-learn nor gensim. The tokenizer is deliberately simple and documented
exactly, so that the same tokens can be produced elsewhere (scikit-learn's
``CountVectorizer(token_pattern=TOKEN_PATTERN, stop_words=sorted(ENGLISH_STOP_WORDS))``
gives the same vocabulary and counts).
"""
import os
import re
import unicodedata

__all__ = ["tokenize", "TOKEN_PATTERN", "ENGLISH_STOP_WORDS", "read_texts"]

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
    path = os.fspath(path)
    if os.path.isdir(path):
        files = _files_below(path)
        if not files:
            raise ValueError(f"{path}: the folder holds no text files")
    elif os.path.isfile(path):
        files = [path]
    else:
        raise ValueError(f"{path}: no such file or folder")
    for name in files:
        if lines:
            yield from _read_utf8_lines(name)
        else:
            yield _read_utf8(name)


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
