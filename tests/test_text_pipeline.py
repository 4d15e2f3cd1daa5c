"""Text in, text out: a corpus counted from text keeps its TextPipeline, a model
fitted on it keeps the pipeline's settings (``text_pipeline_``, saved with the
model) and then takes raw text and token lists wherever it takes documents."""
import inspect

import numpy as np
import pytest

import bnpcore
from bnpcore import lda, registry
from bnpcore.corpus import Corpus
from bnpcore.text import ENGLISH_STOP_WORDS, TOKEN_PATTERN, TextPipeline, tokenize

THEMES = ["apple banana cherry orchard fruit harvest", "engine wheel motor road speed garage",
          "election vote senate campaign party ballot"]
TEXTS = [f"The {THEMES[i % 3]} and the {THEMES[i % 3].split()[i % 6].upper()}: {THEMES[(i + 1) % 3].split()[i % 6]}!"
         for i in range(45)]
NEW = ["An Apple, a CHERRY and a pear in the orchard.", "Vote for the party, said the senate (zzz unknown).",
       "nothing known here", ""]


def text_corpus():
    return Corpus.from_texts(TEXTS, min_df=2, max_df=0.9)


# -- the pipeline ------------------------------------------------------------------

def test_from_texts_attaches_its_pipeline_and_sub_corpora_keep_it():
    corpus = text_corpus()
    pipeline = corpus.text_pipeline
    assert isinstance(pipeline, TextPipeline) and pipeline.vocabulary == corpus.vocabulary
    assert pipeline.settings() == {"lowercase": True, "token_pattern": TOKEN_PATTERN, "stop_words": [],
                                   "tokenizer": None}
    observed, heldout = corpus.split_tokens(0.2, random_state=0)
    for sub in (corpus[:5], observed, heldout, next(corpus.iter_chunks(7)),
                next(corpus.minibatches(4, random_state=0))):
        assert sub.text_pipeline is pipeline
    assert Corpus.from_token_lists([["a", "b"]]).text_pipeline is None
    assert Corpus([[0, 1]], n_words=2).text_pipeline is None


def test_transform_counts_new_text_like_from_texts_with_the_vocabulary():
    corpus = text_corpus()
    new = corpus.text_pipeline.transform(NEW)
    expected = Corpus.from_texts(NEW, vocabulary=corpus.vocabulary)
    assert new == expected and new.vocabulary == corpus.vocabulary and new.n_docs == len(NEW)
    assert new.text_pipeline is corpus.text_pipeline
    counted = dict(zip([corpus.vocabulary[w] for w in new[0].indices], new[0].counts))
    assert counted == {"apple": 1, "cherry": 1, "orchard": 1}     # pear and stop words dropped
    assert new.doc_lengths[2:].tolist() == [0, 0]


def test_to_dict_round_trip_and_settings_rebuild_the_pipeline():
    pipeline = text_corpus().text_pipeline
    data = pipeline.to_dict()
    import json
    assert json.loads(json.dumps(data)) == data                   # plain data
    assert TextPipeline.from_dict(data) == pipeline
    assert TextPipeline(pipeline.vocabulary, **pipeline.settings()) == pipeline
    assert "TextPipeline(" in repr(pipeline)


def test_stop_words_kept_are_those_of_the_vocabulary():
    # a fixed vocabulary holding a stop word: the stop word must stay removed from new text
    corpus = Corpus.from_texts(["the cat and the dog"], vocabulary=["and", "cat", "dog"])
    assert corpus.text_pipeline.stop_words == {"and"}
    assert corpus.matrix.toarray().tolist() == [[0, 1, 1]]
    assert corpus.text_pipeline.transform(["and and cat"]).matrix.toarray().tolist() == [[0, 1, 0]]
    assert text_corpus().text_pipeline.stop_words == frozenset()   # stop words outside the vocabulary: not kept
    assert len(ENGLISH_STOP_WORDS) > 100


def test_lowercase_and_token_pattern_options():
    texts = ["Apple pie-2024 APPLE", "apple TART tart"]
    cased = Corpus.from_texts(texts, lowercase=False, token_pattern=r"[A-Za-z0-9-]+", stop_words=None)
    assert cased.vocabulary == ["APPLE", "Apple", "TART", "apple", "pie-2024", "tart"]
    pipeline = cased.text_pipeline
    assert pipeline.settings()["lowercase"] is False and pipeline.settings()["token_pattern"] == r"[A-Za-z0-9-]+"
    assert pipeline.tokenize("Apple pie-2024") == ["Apple", "pie-2024"]
    group = Corpus.from_texts(["a=1 b=2 a=3"], token_pattern=r"(\w)=\d", stop_words=None)
    assert group.vocabulary == ["a", "b"] and group.matrix.toarray().tolist() == [[2, 1]]
    default = Corpus.from_texts(texts, lowercase=True, token_pattern=TOKEN_PATTERN)
    assert default == Corpus.from_texts(texts) and default.text_pipeline.tokenize(texts[0]) == tokenize(texts[0])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"token_pattern": "("}, ValueError, "not a valid regular expression"),
    ({"token_pattern": r"(\w)(\w)"}, ValueError, "2 capturing groups"),
    ({"token_pattern": 3}, TypeError, "token_pattern must be a str"),
    ({"lowercase": "yes"}, TypeError, "lowercase must be True or False"),
    ({"tokenizer": str.split, "lowercase": False}, ValueError, "tokenizer= callable"),
    ({"tokenizer": str.split, "token_pattern": r"\w+"}, ValueError, "tokenizer= callable"),
])
def test_bad_pipeline_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        Corpus.from_texts(TEXTS, **kwargs)
    with pytest.raises(error, match=match):
        TextPipeline(["a"], **kwargs)


def test_corpus_messages_point_to_from_texts_and_from_token_lists():
    with pytest.raises(TypeError, match=r"Corpus\.from_texts"):
        Corpus(["some raw text"])
    with pytest.raises(ValueError, match=r"no vocabulary was given: .*Corpus\.from_token_lists"):
        Corpus([["some", "tokens"]])


# -- models ------------------------------------------------------------------------

def topic_model_names():
    names = []
    for name in registry.names():
        cls = registry.get(name).load_class()
        if issubclass(cls, bnpcore.base.TopicMixin):
            names.append(name)
    return names


def make(name, **overrides):
    spec = registry.get(name)
    if "random_state" in inspect.signature(spec.load_class().__init__).parameters:
        overrides.setdefault("random_state", 0)
    return spec.make(test=True, **overrides)


@pytest.mark.parametrize("name", topic_model_names())
def test_every_topic_model_takes_raw_text_before_and_after_save_load(name, tmp_path):
    corpus = text_corpus()
    est = make(name).fit(corpus)
    assert est.text_pipeline_ == corpus.text_pipeline.settings()
    counted = corpus.text_pipeline.transform(NEW[:2])
    tokens = [[t for t in tokenize(x)] for x in NEW[:2]]          # token lists: unknown words dropped
    theta = est.transform(counted)
    np.testing.assert_allclose(est.transform(NEW[:2]), theta)
    np.testing.assert_allclose(est.transform(tokens), theta)
    assert est.score(NEW[:2]) == est.score(counted)
    path = est.save(tmp_path / "model.npz")
    loaded = bnpcore.load(path)
    assert loaded.text_pipeline_ == est.text_pipeline_
    np.testing.assert_allclose(loaded.transform(NEW[:2]), theta)
    np.testing.assert_allclose(loaded.transform(tuple(NEW[:2])), theta)
    np.testing.assert_allclose(loaded.transform(np.array(NEW[:2], dtype=object)), theta)
    assert loaded.score(NEW[:2]) == est.score(counted)
    if hasattr(loaded, "document_topics"):
        np.testing.assert_allclose(loaded.document_topics(NEW[:2]), est.document_topics(counted))
    if hasattr(loaded, "partial_fit"):
        loaded.partial_fit(NEW)
        assert loaded.text_pipeline_ == est.text_pipeline_          # partial_fit keeps it
        assert loaded.transform(NEW).shape[0] == len(NEW)


def test_a_new_fit_on_other_data_forgets_the_pipeline():
    est = lda.CollapsedVB(n_components=3, max_iter=3, random_state=0).fit(text_corpus())
    assert est.text_pipeline_ is not None
    est.fit(Corpus.from_token_lists([t.split() for t in THEMES * 4]))
    assert "text_pipeline_" not in vars(est)
    with pytest.raises(ValueError, match=r"not fitted on a corpus counted from text \(Corpus\.from_texts\)"):
        est.transform(NEW)
    assert est.transform([["apple", "vote", "unknown"]]).shape == (1, 3)     # token lists still work


def test_raw_text_errors():
    counts = lda.CollapsedVB(n_components=2, max_iter=2, random_state=0).fit([[0, 1, 1], [2, 2, 3]])
    with pytest.raises(ValueError, match="has no vocabulary"):
        counts.transform(["apple"])
    with pytest.raises(ValueError, match="has no vocabulary"):
        counts.transform([["apple"]])
    est = lda.CollapsedVB(n_components=2, max_iter=2, random_state=0).fit(text_corpus())
    with pytest.raises(TypeError, match="single str"):
        est.transform("one text")
    with pytest.raises(TypeError, match=r"texts\[1\] is of type int"):
        est.transform(["apple", 3])
    with pytest.raises(bnpcore.NotFittedError):
        lda.CollapsedVB().transform(["apple"])


def my_tokenizer(text):
    return text.lower().split()


def test_a_custom_tokenizer_works_in_memory_and_is_named_at_save(tmp_path):
    corpus = Corpus.from_texts(TEXTS, my_tokenizer, stop_words=None)
    est = lda.CollapsedVB(n_components=3, max_iter=3, random_state=0).fit(corpus)
    assert est.text_pipeline_["tokenizer"] is my_tokenizer
    np.testing.assert_allclose(est.transform(["apple cherry"]), est.transform([["apple", "cherry"]]))
    with pytest.raises(TypeError, match=r"is the function \S*test_text_pipeline\.my_tokenizer.* never code"):
        est.save(tmp_path / "m.npz")
    with pytest.raises(TypeError, match=r"tokenizer \S*test_text_pipeline\.my_tokenizer is Python code"):
        corpus.text_pipeline.to_dict()
    est.text_pipeline_ = None                     # the documented way to save it without the tokenizer
    loaded = bnpcore.load(est.save(tmp_path / "m.npz"))
    np.testing.assert_allclose(loaded.transform([["apple", "cherry"]]), est.transform([["apple", "cherry"]]))
    with pytest.raises(ValueError, match="does not know how to tokenize"):
        loaded.transform(["apple cherry"])


def test_a_distributed_fit_keeps_the_pipeline_too():
    pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")
    from dask.distributed import Client, LocalCluster

    from bnpcore import distributed
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        est = distributed.fit(lda.StandardVB(n_components=3, max_iter=3, random_state=0), text_corpus(), client)
    assert est.text_pipeline_ == text_corpus().text_pipeline.settings()
    assert est.transform(NEW).shape == (len(NEW), 3)


@pytest.mark.parametrize("bad", [["lowercase"], {"lowercase": True, "colour": "red"}, {"tokenizer": "str.split"},
                                 {"token_pattern": "("}])
def test_a_damaged_text_pipeline_is_a_clear_error(bad):
    est = lda.CollapsedVB(n_components=2, max_iter=2, random_state=0).fit(text_corpus())
    est.text_pipeline_ = bad
    with pytest.raises(ValueError, match="text_pipeline_ is not a text pipeline"):
        est.transform(NEW)


def test_corpora_and_models_with_a_pipeline_pickle():
    import pickle
    corpus = Corpus.from_texts(TEXTS, lowercase=False, token_pattern=r"[A-Za-z]{3,}")
    again = pickle.loads(pickle.dumps(corpus))
    assert again == corpus and again.text_pipeline == corpus.text_pipeline
    assert again.text_pipeline.transform(NEW) == corpus.text_pipeline.transform(NEW)
    est = pickle.loads(pickle.dumps(lda.CollapsedVB(n_components=2, max_iter=2, random_state=0).fit(corpus)))
    assert est.transform(NEW).shape == (len(NEW), 2)


# -- on-disk corpora ------------------------------------------------------------------

def test_an_on_disk_corpus_written_from_text_keeps_the_pipeline(tmp_path):
    """bnpcore.corpus.write records the pipeline in meta.json; Corpus.open attaches
    it, so a model fitted on the opened corpus takes raw text, also after save/load."""
    from bnpcore.corpus import write
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "all.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    disk = write(folder / "all.txt", tmp_path / "corpus", lines=True, min_df=2, max_df=0.9)
    assert disk.text_pipeline == text_corpus().text_pipeline
    assert Corpus.open(tmp_path / "corpus")[:5].text_pipeline == disk.text_pipeline
    model = lda.StandardVB(n_components=3, max_iter=5, random_state=0).fit(disk)
    expected = model.transform(disk.text_pipeline.transform(NEW))
    np.testing.assert_array_equal(model.transform(NEW), expected)
    np.testing.assert_array_equal(bnpcore.load(model.save(tmp_path / "m.npz")).transform(NEW), expected)
    copy = write(disk, tmp_path / "copy")             # a Corpus source keeps it too
    assert copy.text_pipeline == disk.text_pipeline
    tokens = write([["a", "b"], ["b", "c"]], tmp_path / "tokens")      # token lists were not counted from text
    assert tokens.text_pipeline is None


def test_a_custom_tokenizer_leaves_no_pipeline_on_disk(tmp_path):
    from bnpcore.corpus import write
    (tmp_path / "t.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    disk = write(tmp_path / "t.txt", tmp_path / "corpus", lines=True, tokenizer=str.split)
    assert disk.text_pipeline is None


@pytest.mark.parametrize("bad", [["lowercase"], {"lowercase": "yes"}, {"tokenizer": "os.system"},
                                 {"stop_words": 3}, {"token_pattern": "("}])
def test_a_damaged_pipeline_on_disk_is_a_clear_error(tmp_path, bad):
    import json
    from bnpcore.corpus import write
    (tmp_path / "t.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    write(tmp_path / "t.txt", tmp_path / "corpus", lines=True)
    meta_file = tmp_path / "corpus" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["text_pipeline"] = bad
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="text_pipeline"):
        Corpus.open(tmp_path / "corpus")
