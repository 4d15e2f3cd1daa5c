"""``bnpcore corpus`` builds an on-disk corpus; ``bnpcore fit --data DIR`` trains on it."""
import re

import pytest

from bnpcore import cli
from bnpcore.corpus import Corpus
from bnpcore.datasets import load_kos
from bnpcore.text import read_texts

THEMES = ["apple banana cherry orchard fruit harvest", "engine wheel motor road speed garage",
          "election vote senate campaign party ballot"]


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def lines_file(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("".join(f"{THEMES[i % 3]} {THEMES[i % 3].split()[i % 6]} rare{i}\n" for i in range(60)),
                    encoding="utf-8")
    return path


def test_corpus_from_lines_then_fit_on_the_directory(capsys, tmp_path, lines_file):
    code, out, err = run(capsys, "corpus", lines_file, tmp_path / "c", "--lines", "--min-df", "2")
    assert code == 0, err
    assert re.match(r"wrote .*c: 60 documents, 18 words, 420 tokens \(\d+\.\d MiB\)", out), out
    expected = Corpus.from_texts(read_texts(lines_file, lines=True), min_df=2)
    opened = Corpus.open(tmp_path / "c")
    assert opened == expected and opened.vocabulary == expected.vocabulary
    code, out, err = run(capsys, "fit", "--data", tmp_path / "c", "--model", "lda-cvb0", "--n-topics", "3",
                         "--iterations", "20", "--quiet")
    assert code == 0, err
    assert "60 documents, 18 words" in out
    topics = re.findall(r"^ +\d+ +\d+ +\S+ +\d+\.\d%  (.*)$", out, re.M)     # rows of the topic table
    assert topics and all(set(t.split()) <= set(" ".join(THEMES).split()) for t in topics)


def test_corpus_from_uci_equals_from_uci(capsys, tmp_path):
    load_kos()[:200].to_uci(tmp_path / "docword.txt.gz", tmp_path / "vocab.txt")
    code, out, err = run(capsys, "corpus", tmp_path / "docword.txt.gz", tmp_path / "c", "--vocab",
                         tmp_path / "vocab.txt")
    assert code == 0, err
    expected = Corpus.from_uci(tmp_path / "docword.txt.gz", tmp_path / "vocab.txt")
    assert Corpus.open(tmp_path / "c") == expected and f"{expected.n_tokens} tokens" in out


def assert_one_line_error(code, err, message):
    assert code == 2 and err.startswith("bnpcore: error: ") and message in err and "Traceback" not in err


def test_corpus_errors_are_one_line_and_leave_nothing(capsys, tmp_path, lines_file):
    (tmp_path / "docword.txt").write_text("2\n3\n1\n1 1 1\n")
    code, out, err = run(capsys, "corpus", tmp_path / "docword.txt", tmp_path / "c", "--min-df", "2")
    assert_one_line_error(code, err, "min_df apply to text sources only")
    code, out, err = run(capsys, "corpus", lines_file, tmp_path / "c", "--lines", "--vocab", "vocab.txt")
    assert_one_line_error(code, err, "vocab_path applies to a UCI docword source")
    assert not (tmp_path / "c").exists()


def test_fit_on_a_folder_that_is_not_a_corpus_is_a_clear_error(capsys, tmp_path):
    code, out, err = run(capsys, "fit", "--data", tmp_path, "--model", "lda-cvb0", "--quiet")
    assert_one_line_error(code, err, "is not an on-disk bnpcore corpus")
