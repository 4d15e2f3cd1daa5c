"""On-disk corpora: bnpcore.corpus.write (streaming writers), Corpus.open,
iter_chunks, the estimators on opened corpora, and write_synthetic."""
import gzip
import json
import os
import re
import runpy
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import bnpcore.corpus as corpus_module
import bnpcore.corpus_io as corpus_io
import bnpcore.text as text_module
from bnpcore import registry
from bnpcore.corpus import Corpus, write
from bnpcore.datasets import load_kos, write_synthetic
from bnpcore.inference.online import OnlineEstimator
from bnpcore.text import read_texts


def leftovers(folder, keep):
    """Entries of ``folder`` besides the ``keep`` names (a partial corpus would show here)."""
    return sorted(set(os.listdir(folder)) - set(keep))


def is_memory_mapped(arr):
    while arr is not None and not isinstance(arr, np.memmap):
        arr = arr.base
    return arr is not None


@pytest.fixture
def small_blocks(monkeypatch):
    """Tiny read and write blocks, so that documents span blocks of the UCI reader."""
    monkeypatch.setattr(corpus_io, "_READ_BYTES", 4096)
    monkeypatch.setattr(corpus_io, "_WRITE_DOCS", 7)
    monkeypatch.setattr(text_module, "_WRITE_DOCS", 7)
    monkeypatch.setattr(corpus_module, "_BLOCK", 1000)


@pytest.fixture(scope="module")
def kos_uci(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kos")
    docword, vocab = folder / "docword.kos.txt.gz", folder / "vocab.kos.txt"
    load_kos().to_uci(docword, vocab)
    return docword, vocab


# -- UCI ----------------------------------------------------------------------------
@pytest.mark.parametrize("compressed", [True, False])
def test_kos_written_streaming_equals_from_uci(kos_uci, tmp_path, small_blocks, compressed):
    docword, vocab = kos_uci
    if not compressed:
        plain = tmp_path / "docword.kos.txt"
        plain.write_bytes(gzip.decompress(docword.read_bytes()))
        docword = plain
    expected = Corpus.from_uci(docword, vocab)
    disk = write(docword, tmp_path / "kos", vocab_path=vocab)
    assert disk == expected and disk.vocabulary == expected.vocabulary
    assert all(is_memory_mapped(a) for a in (disk.indptr, disk.indices, disk.counts))
    meta = json.loads((tmp_path / "kos" / "meta.json").read_text())
    assert (meta["n_docs"], meta["n_words"], meta["nnz"], meta["n_tokens"]) == (3430, 6906, expected.nnz, 467714)
    assert Corpus.open(tmp_path / "kos") == expected


def test_uci_entries_in_any_order_within_documents_and_empty_documents(tmp_path, small_blocks):
    lines = ["5", "4", "5", "2 3 1", "2 1 7", "4 4 2", "", "4 2 1", "4 1 1"]
    (tmp_path / "d.txt").write_text("\n".join(lines))     # no final newline; a blank line
    disk = write(tmp_path / "d.txt", tmp_path / "c")
    assert disk == Corpus.from_uci(tmp_path / "d.txt")
    assert disk.matrix.toarray().tolist() == [[0] * 4, [7, 0, 1, 0], [0] * 4, [1, 1, 0, 2], [0] * 4]


def test_truncated_gzip_is_a_clear_error_and_leaves_nothing(kos_uci, tmp_path, small_blocks):
    data = kos_uci[0].read_bytes()
    cut = tmp_path / "docword.cut.txt.gz"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"docword\.cut\.txt\.gz: not a valid gzip file, or truncated"):
        write(cut, tmp_path / "kos")
    assert leftovers(tmp_path, {cut.name}) == []
    with pytest.raises(ValueError, match="not an on-disk bnpcore corpus"):
        Corpus.open(tmp_path / "kos")


@pytest.mark.parametrize("body, message", [
    (["1 1 1", "3 1 1", "2 2 1"], r"d\.txt, line 6: docID 2 comes after a larger docID"),
    (["1 1 1", "2 5 1"], r"d\.txt, line 5: wordID 5 is outside 1\.\.4"),
    (["1 1 1", "2 2 0"], r"d\.txt, line 5: count 0 is not positive"),
    (["1 1 -3"], r"d\.txt, line 4: count -3 is not positive"),
    (["1 2 1", "1 1 1", "1 2 4"], r"d\.txt, lines 4 and 6: \(docID, wordID\) = \(1, 2\) is listed twice"),
    (["1 1 1", "2 x 1"], r"d\.txt, line 5: expected 'docID wordID count'"),
    (["1 1 1"], r"the header says NNZ=3 but the body has 1 entries"),
])
def test_bad_uci_input_names_file_and_line_and_leaves_nothing(tmp_path, body, message, monkeypatch):
    monkeypatch.setattr(corpus_io, "_READ_BYTES", 8)      # every line its own block
    (tmp_path / "d.txt").write_text("\n".join(["3", "4", "3"] + body) + "\n")
    with pytest.raises(ValueError, match=message):
        write(tmp_path / "d.txt", tmp_path / "c")
    assert leftovers(tmp_path, {"d.txt"}) == []


def test_write_refuses_an_existing_path_and_options_of_other_sources(tmp_path, kos_uci):
    (tmp_path / "c").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        write([["a"]], tmp_path / "c")
    with pytest.raises(ValueError, match="min_df apply to text sources only"):
        write([["a"]], tmp_path / "d", min_df=2)
    with pytest.raises(ValueError, match="vocab_path applies to a UCI docword source"):
        write([["a"]], tmp_path / "d", vocab_path=kos_uci[1])
    with pytest.raises(ValueError, match="no such file or folder"):
        write(tmp_path / "missing.txt", tmp_path / "d")
    assert leftovers(tmp_path, {"c"}) == []


# -- text and token lists ---------------------------------------------------------------
TEXTS = ["The cat sat on the mat.", "", "A dog and a cat; the dog barked.", "Été: le chat et le chien!",
         "cat cat cat dog", "mat sat hat", "the the the", "dog hat cat mat sat"] * 3


def test_text_lines_equal_from_texts(tmp_path, small_blocks):
    path = tmp_path / "docs.txt"
    path.write_text("\r\n".join(TEXTS) + "\n", encoding="utf-8")
    for i, opts in enumerate([{}, {"min_df": 4, "max_df": 0.5}, {"max_features": 3, "stop_words": None}]):
        expected = Corpus.from_texts(read_texts(path, lines=True), **opts)
        disk = write(path, tmp_path / f"c{i}", lines=True, **opts)
        assert disk == expected and disk.vocabulary == expected.vocabulary
        assert disk.n_docs == len(TEXTS)


def test_text_folder_equals_from_texts(tmp_path, small_blocks):
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    for i, text in enumerate(TEXTS):
        (folder / ("sub" if i % 2 else "") / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    expected = Corpus.from_texts(read_texts(folder), min_df=2)
    disk = write(folder, tmp_path / "c", min_df=2)
    assert disk == expected and disk.vocabulary == expected.vocabulary


def test_text_that_is_not_utf8_names_file_and_byte_and_leaves_nothing(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_bytes(b"first line\nsecond \xff line\n")
    with pytest.raises(ValueError, match=r"docs\.txt: not valid UTF-8 at byte 18 \(line 2"):
        write(path, tmp_path / "c", lines=True)
    assert leftovers(tmp_path, {"docs.txt"}) == []


def test_token_lists_equal_from_token_lists_up_to_the_word_order(tmp_path, small_blocks):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    docs = [list(rng.choice(words, size=rng.integers(0, 30))) for _ in range(50)]
    disk = write(iter(docs), tmp_path / "c", stop_words={"w3"})       # a one-pass generator
    expected = Corpus.from_token_lists(docs, stop_words={"w3"})
    first_seen = list(dict.fromkeys(w for doc in docs for w in doc if w != "w3"))
    assert disk.vocabulary == first_seen
    columns = [expected.vocabulary.index(w) for w in disk.vocabulary]
    assert (disk.matrix != expected.matrix[:, columns]).nnz == 0 and disk.shape == expected.shape


@pytest.mark.parametrize("docs, error, message", [
    ([], ValueError, "no documents"),
    ([[], []], ValueError, "the 2 documents hold no tokens"),
    ([["a"], "b c"], TypeError, "document 1 is a str"),
    ([["a"], ["b", 3]], TypeError, "document 1: tokens must be str"),
])
def test_bad_token_lists_leave_nothing(tmp_path, docs, error, message):
    with pytest.raises(error, match=message):
        write(docs, tmp_path / "c")
    assert leftovers(tmp_path, set()) == []


# -- opening ----------------------------------------------------------------------------
def test_open_checks_the_metadata_and_the_file_sizes(tmp_path):
    write(load_kos()[:50], tmp_path / "c")
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    counts = tmp_path / "c" / "counts.bin"
    counts.write_bytes(counts.read_bytes()[:-4])
    with pytest.raises(ValueError, match=r"counts\.bin: \d+ bytes, but .* \(a truncated or altered corpus\)"):
        Corpus.open(tmp_path / "c")
    (tmp_path / "c" / "meta.json").write_text(json.dumps(dict(meta, format_version=2)))
    with pytest.raises(ValueError, match="format 2; this bnpcore reads up to 1"):
        Corpus.open(tmp_path / "c")


# -- chunks and estimators ------------------------------------------------------------------
@pytest.fixture(scope="module")
def kos_disk(tmp_path_factory):
    return write(load_kos()[:300], tmp_path_factory.mktemp("disk") / "kos300")


def test_iter_chunks_cover_the_corpus_exactly_with_views(kos_disk):
    chunks = list(kos_disk.iter_chunks(70))
    assert [c.n_docs for c in chunks] == [70, 70, 70, 70, 20]
    assert all(c.n_words == kos_disk.n_words and c.vocabulary is kos_disk.vocabulary for c in chunks)
    assert all(np.shares_memory(c.indices, kos_disk.indices) for c in chunks)
    assert (sp.vstack([c.matrix for c in chunks]) != kos_disk.matrix).nnz == 0
    assert sum(c.n_tokens for c in chunks) == kos_disk.n_tokens
    with pytest.raises(ValueError):
        next(kos_disk.iter_chunks(0))


def test_block_by_block_reads_equal_the_whole_arrays(kos_disk, monkeypatch):
    in_memory = Corpus(kos_disk.matrix.copy())
    expected = in_memory.tokens(), in_memory.doc_lengths, in_memory.fingerprint(), in_memory.n_tokens
    monkeypatch.setattr(corpus_module, "_BLOCK", 1000)          # blocks of about 7 documents
    words, ptr = kos_disk.tokens()
    np.testing.assert_array_equal(words, expected[0][0])
    np.testing.assert_array_equal(ptr, expected[0][1])
    np.testing.assert_array_equal(kos_disk.doc_lengths, expected[1])
    assert (kos_disk.fingerprint(), kos_disk.n_tokens) == expected[2:]
    for ids in (np.array([5, 3, 200, 4, 17]), np.arange(10, 20)):       # any order; a range
        sub, rows = kos_disk.read_documents(ids)
        assert (sub.matrix[rows] != in_memory.matrix[ids]).nnz == 0


def old_block_starts(corpus, n_entries):
    """The first documents of the blocks the samplers walked before ``Corpus.blocks``:
    a number of documents per block from the block size in entries."""
    per_block = max(1, int(n_entries * corpus.n_docs // max(corpus.nnz, 1)))
    return list(range(0, corpus.n_docs, per_block))


@pytest.mark.parametrize("on_disk", [False, True])
def test_blocks_walk_the_corpus_as_the_samplers_did(kos_disk, monkeypatch, on_disk):
    corpus = kos_disk if on_disk else Corpus(kos_disk.matrix.copy(), vocabulary=kos_disk.vocabulary)
    monkeypatch.setattr(corpus_module, "_BLOCK", 1000)          # blocks of about 7 documents
    tok_ptr = np.concatenate([[0], np.cumsum(np.asarray(corpus.matrix.sum(axis=1)).ravel())])
    labels = np.arange(corpus.n_tokens)         # a per-token array, as the samplers' labels
    blocks = list(corpus.blocks())
    assert [start for start, _, _ in blocks] == old_block_starts(corpus, 1000) and len(blocks) > 10
    for i, (start, chunk, tokens) in enumerate(blocks):
        stop = blocks[i + 1][0] if i + 1 < len(blocks) else corpus.n_docs
        assert chunk == corpus[start:stop] and chunk.vocabulary is corpus.vocabulary
        assert np.shares_memory(chunk.indices, corpus.indices)         # views, not copies
        np.testing.assert_array_equal(labels[tokens], labels[tok_ptr[start]:tok_ptr[stop]])
    (start, whole, tokens), = corpus.blocks(n_entries=10 ** 9)
    assert start == 0 and whole == corpus and tokens == slice(0, corpus.n_tokens)
    # given bounds (the partitions of a distributed fit), empty blocks included
    parts = [(start, chunk.n_docs, tokens) for start, chunk, tokens in corpus.blocks(bounds=[0, 0, 120, 120, 300])]
    t = int(tok_ptr[120])
    assert parts == [(0, 0, slice(0, 0)), (0, 120, slice(0, t)), (120, 0, slice(t, t)),
                     (120, 180, slice(t, corpus.n_tokens))]
    for bad in ([0, 200], [0, 200, 100, 300], [1, 300], [0]):
        with pytest.raises(ValueError, match="bounds must rise from 0 to n_docs"):
            next(corpus.blocks(bounds=bad))
    with pytest.raises(ValueError, match="not both"):
        next(corpus.blocks(1000, bounds=[0, 300]))
    with pytest.raises(ValueError, match="n_entries"):
        next(corpus.blocks(0))


def test_opened_corpus_has_its_path_and_reads_documents(kos_disk, tmp_path):
    assert kos_disk.path == kos_disk_path(kos_disk) and os.path.isabs(kos_disk.path)
    in_memory = Corpus(kos_disk.matrix.copy())
    assert in_memory.path is None and kos_disk[:10].path is None
    ids = np.array([7, 2, 2, 250])
    source, rows = in_memory.read_documents(ids)
    assert source is in_memory and rows is ids
    sub, rows = kos_disk.read_documents(ids)
    assert not np.shares_memory(sub.indices, kos_disk.indices) and (sub.matrix[rows] != in_memory.matrix[ids]).nnz == 0
    in_memory.release_pages()       # no-op in memory
    kos_disk.release_pages()
    assert kos_disk == in_memory


@pytest.mark.parametrize("block, message", [
    (([1, 2], [0, 1], [1, 1]), "indptr must rise from 0"),
    (([0, 2, 1], [0, 1], [1, 1]), "indptr must rise from 0"),
    (([0, 2], [0, 1, 2], [1, 1]), "indptr must rise from 0"),
    (([0, 2], [1, 1], [1, 1]), "word ids must increase within a document"),
    (([0, 2], [2, 1], [1, 1]), "word ids must increase within a document"),
    (([0, 2], [-1, 1], [1, 1]), "word id -1 is outside"),
    (([0, 2], [0, 1], [1, 0]), "counts must be in 1.."),
    (([0, 2], [0.5, 1], [1, 1]), "indices must be a 1-d array of integers"),
])
def test_corpus_writer_refuses_bad_blocks_and_leaves_nothing(tmp_path, block, message):
    from bnpcore.corpus_io import CorpusWriter
    with pytest.raises(ValueError, match=message):
        with CorpusWriter(tmp_path / "c") as writer:
            writer.add([0, 1, 1], [3], [2])             # a valid block first (an empty document)
            writer.add(*block)
    assert leftovers(tmp_path, set()) == []


def test_corpus_writer_writes_what_open_reads(tmp_path):
    from bnpcore.corpus_io import CorpusWriter
    with CorpusWriter(tmp_path / "c") as writer:
        writer.add([0, 2, 2], [0, 3], [1, 4])           # a document, then an empty one
        writer.add([0, 1], [1], [2])                    # a word id before the previous block's largest
        with pytest.raises(ValueError, match="word id 3 is outside a vocabulary of n_words=3"):
            writer.finish(3)
        writer.finish(4, ["a", "b", "c", "d"])
    assert Corpus.open(tmp_path / "c") == Corpus([[0, 3, 3, 3, 3], [], [1, 1]], n_words=4)
    with pytest.raises(ValueError, match="no documents"):
        with CorpusWriter(tmp_path / "d") as writer:
            writer.finish(4)
    assert leftovers(tmp_path, {"c"}) == []


def fitted_arrays(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name", registry.names())
def test_every_estimator_fits_an_opened_corpus_as_the_same_corpus_in_memory(kos_disk, name):
    spec = registry.get(name)
    in_memory = Corpus(kos_disk.matrix.copy(), vocabulary=kos_disk.vocabulary)
    a = spec.make(test=True, random_state=3).fit(kos_disk)
    b = spec.make(test=True, random_state=3).fit(in_memory)
    fa, fb = fitted_arrays(a), fitted_arrays(b)
    assert fa.keys() == fb.keys() and fa
    for key in fa:
        np.testing.assert_array_equal(fa[key], fb[key], err_msg=key)


def kos_disk_path(corpus):
    """The directory an opened corpus was read from."""
    arr = corpus.counts
    while not isinstance(arr, np.memmap):
        arr = arr.base
    return os.path.dirname(arr.filename)


ONLINE = sorted(n for n in registry.names() if issubclass(registry.get(n).load_class(), OnlineEstimator))


@pytest.mark.parametrize("name", ONLINE)
def test_partial_fit_over_chunks_equals_one_partial_fit(kos_disk, name):
    """partial_fit splits its input into minibatches in stream order: chunks of a
    multiple of batch_size give the same minibatches, hence the same model."""
    spec = registry.get(name)
    one = spec.make(test=True, random_state=1, total_samples=kos_disk.n_docs)
    one.partial_fit(Corpus(kos_disk.matrix.copy(), vocabulary=kos_disk.vocabulary))
    chunked = spec.make(test=True, random_state=1, total_samples=kos_disk.n_docs)
    for chunk in kos_disk.iter_chunks(4 * chunked.batch_size):
        chunked.partial_fit(chunk)
    assert one.history_[-1]["iteration"] == chunked.history_[-1]["iteration"] > 10
    fa, fb = fitted_arrays(one), fitted_arrays(chunked)
    assert fa.keys() == fb.keys()
    for key in fa:
        np.testing.assert_array_equal(fa[key], fb[key], err_msg=key)


# -- bounded memory -------------------------------------------------------------------------
def peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return write_synthetic(tmp_path_factory.mktemp("gen") / "c", 20000, n_words=2000, n_topics=20,
                           mean_length=60, random_state=0)


def test_reading_and_training_an_opened_corpus_allocate_far_less_than_its_size(generated):
    path = kos_disk_path(generated.corpus)
    size = sum(os.path.getsize(os.path.join(path, f)) for f in ("indptr.bin", "indices.bin", "counts.bin"))
    assert size > 4_000_000

    def read():
        corpus = Corpus.open(path)
        corpus.fingerprint(), corpus.n_tokens
        for chunk in corpus.iter_chunks(1000):
            chunk.n_tokens

    assert peak_bytes(read) < size / 20
    # the [TF] settings keep the model (K x W statistics) small beside the corpus,
    # so the peak measures what reading the corpus allocates
    est = registry.get("hdp-tf-svi").make(batch_size=200, n_epochs=1, gamma=1.0, eta=0.01, n_samples=1,
                                           random_state=0)
    assert peak_bytes(lambda: est.fit(Corpus.open(path))) < size / 4


def resident_file_bytes():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssFile of Linux's /proc")
def test_reading_an_opened_corpus_releases_its_pages(tmp_path):
    """The mapped pages read count in the resident set until released: one pass
    over a corpus must not leave it resident."""
    data = write_synthetic(tmp_path / "c", 20000, n_words=2000, n_topics=20, mean_length=60, random_state=0)
    size = sum(os.path.getsize(tmp_path / "c" / f) for f in ("indptr.bin", "indices.bin", "counts.bin"))
    before = resident_file_bytes()
    data.corpus.fingerprint()
    for chunk in data.corpus.iter_chunks(1000):
        chunk.n_tokens
    est = registry.get("hdp-tf-svi").make(batch_size=500, n_epochs=1, random_state=0)
    est.fit(data.corpus, max_documents=5000)
    assert resident_file_bytes() - before < size / 4


def test_writing_allocates_what_a_block_needs_whatever_the_corpus_size(tmp_path):
    """Four times the documents, about the same peak allocation (a block's)."""
    peaks = [peak_bytes(lambda n=n: write_synthetic(tmp_path / f"c{n}", n, n_words=500, n_topics=10,
                                                    mean_length=20, random_state=0)) for n in (10000, 40000)]
    assert peaks[1] < 1.3 * peaks[0], peaks

    def tokens(n):
        rng = np.random.default_rng(0)
        return ([f"w{w}" for w in rng.integers(0, 500, 20)] for _ in range(n))

    peaks = [peak_bytes(lambda n=n: write(tokens(n), tmp_path / f"t{n}")) for n in (20000, 80000)]
    assert peaks[1] < 1.3 * peaks[0], peaks


# -- write_synthetic --------------------------------------------------------------------------
def test_write_synthetic_is_reproducible_and_follows_its_model(tmp_path, generated):
    a = write_synthetic(tmp_path / "a", 12000, n_words=300, n_topics=8, model="lda", random_state=5)
    b = write_synthetic(tmp_path / "b", 12000, n_words=300, n_topics=8, model="lda", random_state=5)
    c = write_synthetic(tmp_path / "c", 12000, n_words=300, n_topics=8, model="lda", random_state=6)
    assert a.corpus == b.corpus and a.corpus != c.corpus
    np.testing.assert_array_equal(a.topics, b.topics)
    truth = np.load(tmp_path / "a" / "truth.npz")
    np.testing.assert_array_equal(truth["topics"], a.topics)
    np.testing.assert_allclose(a.weights, 1 / 8)
    # HDP truth: GEM weights summing to 1; log-normal lengths with the requested mean
    g = generated
    np.testing.assert_allclose([g.weights.sum(), *g.topics.sum(axis=1)], 1.0, rtol=1e-12)
    lengths = g.corpus.doc_lengths
    assert abs(lengths.mean() / 60 - 1) < 0.03 and lengths.max() > 8 * 60     # a heavy tail
    # Zipf word frequencies: log frequency against log rank has slope about -1
    freq = np.sort(np.bincount(g.corpus.indices, weights=g.corpus.counts, minlength=2000))[::-1]
    ranks = np.arange(1, 201)
    slope = np.polyfit(np.log(ranks), np.log(freq[:200]), 1)[0]
    assert -1.25 < slope < -0.75, slope


# -- the example ------------------------------------------------------------------------------
def test_stream_large_file_example_runs(tmp_path, capsys):
    example = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "stream_large_file.py"))
    est = example["main"](n_docs=3000, chunk_size=1000, batch_size=200, workdir=str(tmp_path))
    out = capsys.readouterr().out
    assert est.n_documents_seen_ == 3000 and "  3000 documents" in out
    assert re.search(r"w\d+", out.split("topics\n")[-1])          # the summary prints words
    assert sorted(os.listdir(tmp_path)) == ["corpus", "documents.txt"]
