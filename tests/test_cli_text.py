"""The command line on raw text: ``bnpcore infer`` with a saved model, the
one-document warning of ``fit --texts FILE``, the Quick start's pruning
defaults, tokens/s, one topic table for ``fit`` and ``topics``, help and plurals."""
import csv
import re

import numpy as np
import pytest

import bnpcore
import bnpcore.lda
from bnpcore import cli, registry
from bnpcore.corpus import Corpus
from bnpcore.text import read_texts

THEMES = ["apple banana cherry orchard fruit harvest".split(), "engine wheel motor road speed garage".split(),
          "election vote senate campaign party ballot".split()]
ROW = re.compile(r"^ +\d+ +\d+ +\S+ +\d+\.\d%  .*$", re.M)     # a row of the topic table


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """A folder of 30 documents, the same as a file of lines, a file of new lines and a model fitted on the lines."""
    root = tmp_path_factory.mktemp("texts")
    rng = np.random.default_rng(0)
    folder = root / "folder"
    folder.mkdir()
    lines = []
    for i in range(30):
        # "rare{i}" is in one document (min_df=2 drops it); "common" in all (max_df=0.5 drops it)
        text = " ".join(rng.choice(THEMES[i % 3], size=25)).capitalize() + f". The common rare{i}!"
        (folder / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
        lines.append(text)
    (root / "lines.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "new.txt").write_text("An APPLE, a cherry and a pear.\nVote for the party!\nnothing known\n",
                                  encoding="utf-8")
    model = root / "model.npz"
    assert cli.main(["fit", "--texts", str(root / "lines.txt"), "--lines", "--model", "lda-cvb", "-p",
                     "n_components=3", "--iterations", "20", "-q", "-o", str(model)]) == 0
    return root


def test_fit_texts_uses_the_quick_start_pruning(capsys, texts):
    code, out, err = run(capsys, "fit", "--texts", texts / "folder", "--model", "lda-cvb", "-p", "n_components=3",
                         "--iterations", "2", "-q")
    assert code == 0, err
    expected = Corpus.from_texts(read_texts(texts / "folder"), min_df=2, max_df=0.5)
    assert expected.n_words == 18 and "common" not in expected.vocabulary and "rare0" not in expected.vocabulary
    assert "30 documents, 18 words" in out
    code, out, err = run(capsys, "fit", "--texts", texts / "folder", "--model", "lda-cvb", "-p", "n_components=3",
                         "--iterations", "2", "-q", "--min-df", "1", "--max-df", "1.0")
    assert code == 0 and "30 documents, 49 words" in out          # 18 + common + 30 rare words
    _, out, _ = run(capsys, "fit", "--help")
    assert "default 2)" in out and "default 0.5)" in out


def test_fit_texts_file_without_lines_warns_that_it_is_one_document(capsys, texts):
    code, out, err = run(capsys, "fit", "--texts", texts / "lines.txt", "--model", "lda-cvb", "--iterations", "2",
                         "-q", "--min-df", "1", "--max-df", "1.0")
    assert code == 0, err
    assert "1 document, " in out                                   # not "1 documents"
    assert re.search(r"warning: .*lines\.txt is read as 1 document, but it has 30 lines; add --lines", err)
    code, out, err = run(capsys, "fit", "--texts", texts / "lines.txt", "--lines", "--model", "lda-cvb",
                         "--iterations", "2", "-q")
    assert code == 0 and "warning" not in err and "30 documents" in out


def test_infer_prints_each_document_and_writes_csv_and_npy(capsys, texts, tmp_path):
    model = bnpcore.load(texts / "model.npz")
    new = list(read_texts(texts / "new.txt", lines=True))
    expected = model.transform(new)
    code, out, err = run(capsys, "infer", texts / "model.npz", "--texts", texts / "new.txt", "--lines")
    assert code == 0, err
    assert out.splitlines()[0].startswith("3 documents, 4 tokens of the model's words (1 document without any")
    rows = out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["new.txt:1", "new.txt:2", "new.txt:3"]
    first = int(np.argmax(expected[0]))
    assert re.match(rf"new\.txt:1 +topic {first} \d+% \((\w+ ?){{3}}\)", rows[0])
    assert "apple" in model.top_words(first, 3) or "cherry" in model.top_words(first, 3)

    code, out, err = run(capsys, "infer", texts / "model.npz", "--texts", texts / "new.txt", "--lines",
                         "-o", tmp_path / "theta.csv")
    assert code == 0, err
    assert "a column per topic (topics 0 to 2)" in out
    with open(tmp_path / "theta.csv", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0] == ["document", "topic_0", "topic_1", "topic_2"]
    assert [r[0] for r in table[1:]] == ["new.txt:1", "new.txt:2", "new.txt:3"]
    np.testing.assert_allclose(np.array([r[1:] for r in table[1:]], dtype=float), expected, rtol=1e-5)

    code, out, err = run(capsys, "infer", texts / "model.npz", "--texts", texts / "folder", "-o",
                         tmp_path / "theta.npy")
    assert code == 0, err
    theta = np.load(tmp_path / "theta.npy")
    np.testing.assert_allclose(theta, model.transform(list(read_texts(texts / "folder"))))
    assert theta.shape == (30, 3)

    # the documents may also follow the model without --texts
    code, out, err = run(capsys, "infer", texts / "model.npz", texts / "folder", "-o", tmp_path / "plain.npy")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npy"), theta)


def test_infer_errors(capsys, texts, tmp_path):
    model = texts / "model.npz"
    for argv, message in (([], "give the documents with --texts"),
                          (["--texts", texts / "new.txt", "-o", tmp_path / "x.txt"], "-o must name a .csv or .npy"),
                          (["--texts", texts / "new.txt", "--data", "kos"], "not both"),
                          ([texts / "new.txt", "--texts", texts / "new.txt"], "give the documents once"),
                          (["--texts", tmp_path / "none"], "no such file or folder"),
                          (["--data", "bars"], "the model has 18 words, the data 100")):
        code, out, err = run(capsys, "infer", model, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    counts = bnpcore.lda.CollapsedVB(n_components=2, max_iter=2).fit([[0, 1, 1], [2, 2]]).save(tmp_path / "c.npz")
    code, out, err = run(capsys, "infer", counts, "--texts", texts / "new.txt")
    assert code == 2 and "has no vocabulary, so texts cannot be counted" in err


def test_text_model_commands_do_not_fall_back_to_kos(capsys, texts):
    """A model fitted on text: ``evaluate`` without documents asks for --texts
    (not "the model has 18 words, the data 6906" from KOS), ``infer --help``
    names no default data, and the summary line mentions empty documents only
    when there are some."""
    code, out, err = run(capsys, "evaluate", texts / "model.npz")
    assert code == 2 and "fitted on text: give the documents to score with --texts" in err, err
    assert "6906" not in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "evaluate", texts / "model.npz", "--texts", texts / "lines.txt", "--lines")
    assert code == 0 and "held-out per-word log-likelihood" in out, err
    _, out, _ = run(capsys, "infer", "--help")
    assert "'kos' (bundled)" in out and "the default" not in out.split("--data", 2)[2].split("--vocab")[0]
    _, out, _ = run(capsys, "evaluate", "--help")
    assert "'kos' (bundled, the default)" in out
    code, out, err = run(capsys, "infer", texts / "model.npz", "--texts", texts / "folder" / "doc00.txt")
    assert code == 0, err
    assert re.match(r"1 document, \d+ tokens of the model's words, 3 topics$", out.splitlines()[0])


def test_topics_and_fit_show_print_the_same_table(capsys, texts, tmp_path):
    for name in ("lda-cvb", "hdp-online-vb"):
        path = tmp_path / f"{name}.npz"
        code, out, err = run(capsys, "fit", "--texts", texts / "folder", "--model", name, "-p", "n_components=6",
                             "--iterations", "3", "-q", "--show", "4", "-o", path)
        assert code == 0, err
        fitted_rows = ROW.findall(out)
        code, out2, err = run(capsys, "topics", path, "--show", "4")
        assert code == 0, err
        assert fitted_rows and ROW.findall(out2) == fitted_rows
        assert re.search(r"^ +rank +component +size +share +top words$", out2, re.M)
        shares = [float(r.split()[3].rstrip("%")) for r in fitted_rows]
        assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 100.05
        assert [int(r.split()[0]) for r in fitted_rows] == list(range(len(fitted_rows)))
        assert re.search(r"^\w+: 6 topics, \d+ used \(size >= 1 token\)", out2, re.M)


def test_tokens_per_second_counts_the_tokens_processed(capsys, texts, monkeypatch):
    corpus = Corpus.from_texts(read_texts(texts / "folder"), min_df=2, max_df=0.5)
    online = registry.get("hdp-online-vb").make(test=True, random_state=0, batch_size=5, n_epochs=2).fit(corpus)
    assert len(online.history_) == 12                             # 6 minibatches an epoch
    assert cli._tokens_processed(online.history_, corpus) == pytest.approx(2 * corpus.n_tokens)
    batch = registry.get("lda-cvb").make(test=True, random_state=0, max_iter=3).fit(corpus)
    assert cli._tokens_processed(batch.history_, corpus) == pytest.approx(3 * corpus.n_tokens)

    class Clock:                                                  # the command's clock: 4 s for the fit
        ticks = iter([100.0, 104.0])
        perf_counter = staticmethod(lambda: next(Clock.ticks))
    monkeypatch.setattr(cli, "time", Clock)
    code, out, err = run(capsys, "fit", "--texts", texts / "folder", "--model", "hdp-online-vb", "-p",
                         "batch_size=5", "--iterations", "2", "-q", "--heldout", "0", "--show", "0")
    assert code == 0, err
    rate = int(re.search(r"fitted in 4\.0 s \(12 iterations, ([\d,]+) tokens/s\)", out).group(1).replace(",", ""))
    assert rate == round(2 * corpus.n_tokens / 4)


def test_evaluate_help_offers_only_accepted_options(capsys):
    _, out, _ = run(capsys, "evaluate", "--help")
    assert "--texts" in out and "--min-df" not in out and "--max-df" not in out
    _, out, _ = run(capsys, "infer", "--help")
    assert "--lines" in out and "--min-df" not in out and "--heldout" not in out
    code, _, err = run(capsys, "evaluate", "m.npz", "--min-df", "2")
    assert code == 2 and "unrecognized arguments: --min-df" in err


def test_plurals():
    assert cli._plural(1, "document") == "1 document" and cli._plural(0, "document") == "0 documents"
    assert cli._plural(2, "held-out token") == "2 held-out tokens"
