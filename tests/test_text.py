"""Raw text in: the tokenizer, Corpus.from_texts / from_token_lists /
from_vectorizer / from_gensim / to_gensim / to_uci, reading files, and
``bnpcore fit --texts``."""
import gzip
import re
import unicodedata
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from bnpcore import cli
from bnpcore.corpus import Corpus
from bnpcore.text import ENGLISH_STOP_WORDS, TOKEN_PATTERN, read_texts, tokenize

# Raw documents with what real text has: case, punctuation, digits, accents in
# both Unicode forms, contractions, hyphens, non-Latin scripts, stop words.
DOCS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps!",
    "A fox, a dog and a CAT: 3 animals (in 2024) — don't they sleep?",
    "Cafe\u0301 au lait at the café; the cat drinks lait.",
    "State-of-the-art models: COVID19 models, topic models and fox models.",
    "Москва и Санкт-Петербург; the dog visits Москва.",
    "",
    "the and of to in is it",
    "Quick quick QUICK brown brown fox_fox dog's dogs",
]


def nfc_lower(text):
    return unicodedata.normalize("NFC", text).lower()


def counts_by_word(corpus):
    """Per-document {word: count}, independent of the word order of the vocabulary."""
    m = corpus.matrix
    return [{corpus.vocabulary[w]: int(c) for w, c in zip(m.indices[m.indptr[j]:m.indptr[j + 1]],
                                                          m.data[m.indptr[j]:m.indptr[j + 1]])}
            for j in range(corpus.n_docs)]


# -- tokenizer ------------------------------------------------------------------

def test_tokenize_by_hand():
    assert tokenize(DOCS[1]) == ["fox", "dog", "and", "cat", "animals", "in", "don", "they", "sleep"]
    assert tokenize(DOCS[2]) == ["café", "au", "lait", "at", "the", "café", "the", "cat", "drinks", "lait"]
    assert tokenize(DOCS[3])[:4] == ["state", "of", "the", "art"]
    assert "covid19" in tokenize(DOCS[3])
    assert tokenize(DOCS[4])[:3] == ["москва", "санкт", "петербург"]
    assert tokenize(DOCS[7]) == ["quick", "quick", "quick", "brown", "brown", "fox_fox", "dog", "dogs"]
    assert tokenize("") == [] and tokenize("12 3.5 __ a I") == []


def test_stop_words_are_lower_case_and_cover_function_words():
    assert all(w == w.lower() and tokenize(w) == [w] for w in ENGLISH_STOP_WORDS)
    assert {"the", "and", "of", "to", "is", "it", "don", "ll"} <= ENGLISH_STOP_WORDS
    assert not {"fox", "dog", "model", "election"} & ENGLISH_STOP_WORDS


# -- from_texts -----------------------------------------------------------------

def brute_force(docs, min_df, max_df):
    """Counts by Counter, document frequencies by sets, sorted vocabulary."""
    tokens = [[t for t in tokenize(d) if t not in ENGLISH_STOP_WORDS] for d in docs]
    df = Counter(w for toks in tokens for w in set(toks))
    low = min_df if isinstance(min_df, int) else min_df * len(docs)
    high = max_df if isinstance(max_df, int) else max_df * len(docs)
    vocab = sorted(w for w, n in df.items() if low <= n <= high)
    return vocab, [{w: c for w, c in Counter(toks).items() if w in vocab} for toks in tokens]


@pytest.mark.parametrize("min_df, max_df", [(1, 1.0), (2, 1.0), (1, 0.3), (2, 4), (0.2, 0.5)])
def test_from_texts_equals_brute_force(min_df, max_df):
    corpus = Corpus.from_texts(DOCS, min_df=min_df, max_df=max_df)
    vocab, counts = brute_force(DOCS, min_df, max_df)
    assert corpus.vocabulary == vocab
    assert counts_by_word(corpus) == counts
    assert corpus.n_docs == len(DOCS)          # empty documents keep their place


@pytest.mark.parametrize("kwargs", [{}, {"min_df": 2}, {"max_df": 0.3}, {"min_df": 2, "max_df": 0.5},
                                    {"max_features": 6}, {"stop_words": None}, {"stop_words": ["fox", "dog"]}])
def test_from_texts_equals_the_count_vectorizer_route(kwargs):
    text = pytest.importorskip("sklearn.feature_extraction.text")
    stop = kwargs.get("stop_words", "english")
    vectorizer = text.CountVectorizer(
        token_pattern=TOKEN_PATTERN, preprocessor=nfc_lower,
        stop_words=sorted(ENGLISH_STOP_WORDS) if stop == "english" else stop,
        **{k: v for k, v in kwargs.items() if k != "stop_words"})
    X = vectorizer.fit_transform(DOCS)
    ours = Corpus.from_texts(DOCS, **kwargs)
    theirs = Corpus.from_vectorizer(X, vectorizer)
    assert ours == theirs and ours.vocabulary == theirs.vocabulary


def test_max_features_keeps_the_most_frequent_words_ties_alphabetical():
    corpus = Corpus.from_token_lists([["b", "a", "c", "c", "d"], ["d", "e"]], max_features=3)
    # c: 2 and d: 2 tokens, then a, b, e tie with 1: a wins alphabetically
    assert corpus.vocabulary == ["a", "c", "d"]
    assert counts_by_word(corpus) == [{"a": 1, "c": 2, "d": 1}, {"d": 1}]
    # many ties, words first seen in a shuffled order: rank by (-tokens, word)
    rng = np.random.default_rng(5)
    docs = [[f"w{w:02d}" for w in rng.integers(0, 40, size=8)] for _ in range(30)]
    totals = Counter(t for d in docs for t in d)
    expected = sorted(sorted(totals, key=lambda w: (-totals[w], w))[:17])
    assert Corpus.from_token_lists(docs, max_features=17).vocabulary == expected


def test_custom_tokenizer_fixed_vocabulary_and_generators():
    corpus = Corpus.from_texts((d for d in ["x-y x", "y z"]), tokenizer=lambda s: s.replace("-", " ").split(),
                               stop_words=None)
    assert corpus.vocabulary == ["x", "y", "z"] and counts_by_word(corpus) == [{"x": 2, "y": 1}, {"y": 1, "z": 1}]
    # new documents in a fitted vocabulary: unknown words dropped, ids in its order
    new = Corpus.from_texts(["Dogs and unicorns; the fox"], vocabulary=["fox", "dogs", "cat"])
    assert new.vocabulary == ["fox", "dogs", "cat"] and new.matrix.toarray().tolist() == [[1, 1, 0]]
    with pytest.raises(ValueError, match="fixed vocabulary"):
        Corpus.from_texts(DOCS, vocabulary=["fox"], min_df=2)


@pytest.mark.parametrize("texts, kwargs, error, match", [
    ([], {}, ValueError, "no documents"),
    (iter(()), {}, ValueError, "no documents"),
    (["fine", 3], {}, TypeError, r"texts\[1\] is of type int"),
    (["fine", b"bytes"], {}, TypeError, "decode bytes"),
    (["fine", None], {}, TypeError, r"texts\[1\]"),
    ("one document", {}, TypeError, "texts is a single str"),
    (42, {}, TypeError, "must be an iterable"),
    (["the and of", "it is"], {}, ValueError, "no tokens besides stop words"),
    (["fox dog", "fox cat"], {"min_df": 3}, ValueError, "no words are left: min_df=3"),
    (["fox dog", "fox cat"], {"min_df": 2, "max_df": 1}, ValueError, "no words are left"),
    (["fox dog fox cat"], {"min_df": 2, "max_df": 0.5}, ValueError,
     r"at least 2 and at most 0.5 of the 1 document, .* of them .* split the text into documents"),
    (DOCS, {"min_df": -1}, ValueError, "min_df must be"),
    (DOCS, {"max_df": 1.5}, ValueError, "max_df must be"),
    (DOCS, {"max_features": 0}, ValueError, "max_features"),
    (DOCS, {"stop_words": "french"}, ValueError, "stop_words"),
    (DOCS, {"tokenizer": "split"}, TypeError, "tokenizer must be callable"),
    (DOCS, {"tokenizer": lambda s: [1, 2]}, TypeError, "tokens must be str"),
])
def test_bad_text_input(texts, kwargs, error, match):
    with pytest.raises(error, match=match):
        Corpus.from_texts(texts, **kwargs)


def test_a_plain_string_is_not_a_list_of_documents():
    # iterating a str gives one-letter "documents": refuse the str itself
    with pytest.raises(TypeError):
        Corpus.from_token_lists("abc")


# -- files ----------------------------------------------------------------------

def test_read_texts_folder_and_lines(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.txt").write_text("second file", encoding="utf-8")
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbffirst file\r\nline two\n")
    (tmp_path / ".hidden").write_text("skipped")
    assert list(read_texts(tmp_path)) == ["first file\r\nline two\n", "second file"]
    assert list(read_texts(tmp_path, lines=True)) == ["first file", "line two", "second file"]
    (tmp_path / "c.txt").write_text("x\n\ny", encoding="utf-8")       # a blank line is an (empty) document
    assert list(read_texts(tmp_path / "c.txt", lines=True)) == ["x", "", "y"]
    with pytest.raises(ValueError, match="no such file"):
        list(read_texts(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no text files"):
        list(read_texts(tmp_path / "empty"))


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_non_utf8_file_names_file_and_byte(tmp_path, bom):
    path = tmp_path / "latin1.txt"
    raw = bom + "ok line\nna\u00efve\n".encode("latin-1")
    path.write_bytes(raw)
    offset = raw.index(b"\xef", len(bom))
    with pytest.raises(ValueError, match=rf"latin1.txt: not valid UTF-8 at byte {offset} \(line 2"):
        Corpus.from_texts(read_texts(path, lines=True))


# -- scikit-learn and gensim ----------------------------------------------------

def test_from_vectorizer_refuses_tfidf_and_width_mismatch():
    text = pytest.importorskip("sklearn.feature_extraction.text")
    tfidf = text.TfidfVectorizer()
    X = tfidf.fit_transform(DOCS)
    with pytest.raises(ValueError, match="TF-IDF"):
        Corpus.from_vectorizer(X, tfidf)
    raw = text.TfidfVectorizer(use_idf=False, norm=None)
    counts = text.CountVectorizer()
    assert Corpus.from_vectorizer(raw.fit_transform(DOCS), raw) == Corpus.from_vectorizer(
        counts.fit_transform(DOCS), counts)
    with pytest.raises(ValueError, match="columns"):
        Corpus.from_vectorizer(X[:, :3], tfidf)


def test_gensim_dictionary_round_trip():
    corpora = pytest.importorskip("gensim.corpora")
    tokens = [[t for t in tokenize(d) if t not in ENGLISH_STOP_WORDS] for d in DOCS]
    dictionary = corpora.Dictionary(tokens)
    bow = [dictionary.doc2bow(t) for t in tokens]
    from_gensim = Corpus.from_gensim(bow, dictionary)
    ours = Corpus.from_token_lists(tokens)
    assert counts_by_word(from_gensim) == counts_by_word(ours)
    # and back: the same bags, words and statistics as gensim's own dictionary
    bow2, dictionary2 = from_gensim.to_gensim()
    assert bow2 == [sorted(b) for b in bow]
    assert dictionary2.token2id == dictionary.token2id
    assert (dictionary2.dfs, dictionary2.cfs) == (dictionary.dfs, dictionary.cfs)
    assert (dictionary2.num_docs, dictionary2.num_pos, dictionary2.num_nnz) == (
        dictionary.num_docs, dictionary.num_pos, dictionary.num_nnz)
    assert Corpus.from_gensim(bow2, dictionary2) == from_gensim
    # after filter_extremes the ids are compacted: still 0..n-1
    dictionary.filter_extremes(no_below=2, no_above=1.0)
    small = Corpus.from_gensim([dictionary.doc2bow(t) for t in tokens], dictionary)
    assert counts_by_word(small) == counts_by_word(Corpus.from_token_lists(tokens, min_df=2))


def test_from_gensim_without_dictionary_and_bad_bags():
    c = Corpus.from_gensim([[(0, 2), (3, 1)], [], [(1, 1), (1, 2)]])
    assert c.vocabulary is None and c.matrix.toarray().tolist() == [[2, 0, 0, 1], [0, 0, 0, 0], [0, 3, 0, 0]]
    with pytest.raises(ValueError, match="document 1: word id 5"):
        Corpus.from_gensim([[(0, 1)], [(5, 1)]], {0: "a", 1: "b"})
    with pytest.raises(ValueError, match="document 0 is not a list of"):
        Corpus.from_gensim([[(0, 1, 2)]])
    with pytest.raises(ValueError, match="whole numbers"):
        Corpus.from_gensim([[(0, 0.5)]])
    with pytest.raises(ValueError, match="without gaps"):
        Corpus.from_gensim([[(0, 1)]], {0: "a", 2: "c"})
    with pytest.raises(ValueError, match="no documents"):
        Corpus.from_gensim([])


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_to_uci_round_trip(tmp_path, suffix):
    corpus = Corpus.from_texts(DOCS)
    docword, vocab = tmp_path / f"docword.txt{suffix}", tmp_path / f"vocab.txt{suffix}"
    corpus.to_uci(docword, vocab)
    back = Corpus.from_uci(docword, vocab)
    assert back == corpus and back.vocabulary == corpus.vocabulary
    if suffix:
        assert gzip.decompress(docword.read_bytes()).split(b"\n")[:3] == [
            str(corpus.n_docs).encode(), str(corpus.n_words).encode(), str(corpus.nnz).encode()]
    with pytest.raises(ValueError, match="no vocabulary"):
        Corpus(sp.eye(3, dtype=int)).to_uci(docword, vocab)
    with pytest.raises(ValueError, match="one line"):
        Corpus([[0]], vocabulary=["two\nlines"]).to_uci(docword, vocab)


# -- command line -----------------------------------------------------------------

def test_cli_fits_a_folder_of_text(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    themes = ["apple banana cherry orchard fruit harvest".split(), "engine wheel motor road speed garage".split()]
    folder = tmp_path / "texts"
    folder.mkdir()
    lines = []
    for i in range(24):
        words = " ".join(rng.choice(themes[i % 2], size=30)) + " and the of"
        (folder / f"doc{i:02d}.txt").write_text(words.capitalize() + ".", encoding="utf-8")
        lines.append(words)
    (tmp_path / "all.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(cli, "FLAGSHIP", "lda-cvb")
    argv = ["fit", "--model", "lda-cvb", "-p", "n_components=2", "--iterations", "20", "-q", "--n-words", "6",
            "--show", "2"]
    for source in (["--texts", str(folder)], ["--texts", str(tmp_path / "all.txt"), "--lines"]):
        code = cli.main(argv + source + ["-o", str(tmp_path / "m.npz")])
        out = capsys.readouterr().out
        assert code == 0 and "24 documents, 12 words" in out
        rows = [line for line in out.splitlines() if re.match(r" +\d+ +\d+ +\S+ +\d+\.\d%  ", line)]
        topics = [set(line.split("%")[-1].split()) for line in rows]       # the rows of the topic table
        assert sorted(map(sorted, topics)) == sorted(map(sorted, themes))   # real words, one theme per topic
    assert cli.main(["evaluate", str(tmp_path / "m.npz"), "--texts", str(folder)]) == 0
    assert "held-out per-word" in capsys.readouterr().out
    assert cli.main(["topics", str(tmp_path / "m.npz"), "--n-words", "6"]) == 0   # the vocabulary is saved
    printed = [set(line.split("%")[-1].split()) for line in capsys.readouterr().out.splitlines()[2:]]
    assert sorted(map(sorted, printed)) == sorted(map(sorted, themes))
    for extra, message in ((["--data", "kos"], "not both"), (["--min-df", "99"], "no words are left"),
                           (["--lines", "--min-df", "x"], "expected a number")):
        assert cli.main(argv + ["--texts", str(folder)] + extra) == 2
        assert message in capsys.readouterr().err
    assert cli.main(argv + ["--lines"]) == 2 and "apply to --texts" in capsys.readouterr().err


def test_example_text_to_topics(tmp_path, capsys):
    """examples/text_to_topics.py on three themes: the three largest topics are the themes."""
    from .api.conftest import _load_example, write_theme_texts
    themes = write_theme_texts(tmp_path)
    model, scores = _load_example("text_to_topics").main([str(tmp_path), "--min-df", "1", "--show", "3"])
    assert sorted(sorted(model.top_words(k, 6)) for k in range(3)) == sorted(map(sorted, themes))
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    assert "30 documents, 18 words" in capsys.readouterr().out
