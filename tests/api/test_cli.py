"""The command line, run in-process on a tiny corpus with the test-only models
registered (conftest.py), plus ``python -m bnpcore`` in a subprocess."""
import re
import subprocess
import sys

import numpy as np
import pytest

import bnpcore.datasets
from bnpcore import cli, registry
from bnpcore.base import load
from bnpcore.evaluation import token_log_likelihood


# A row of the topic table (bnpcore.results.Summary): rank, component, size, share, then the top words.
ROW = r"^ +\d+ +\d+ +\S+ +\d+\.\d%  "

def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("bnpcore: error: "), err
    assert "Traceback" not in err
    for text in fragments:
        assert text in lines[-1], lines[-1]


def heldout_ll(out):
    return float(re.search(r"held-out per-word log-likelihood: (\S+)", out).group(1))


@pytest.fixture
def uci_files(tiny_corpus, tmp_path):
    """The tiny corpus as UCI docword + vocab files."""
    m = tiny_corpus.matrix.tocoo()
    docword, vocab = tmp_path / "docword.tiny.txt", tmp_path / "vocab.tiny.txt"
    lines = [str(m.shape[0]), str(m.shape[1]), str(m.nnz)]
    lines += [f"{d + 1} {w + 1} {c}" for d, w, c in zip(m.row, m.col, m.data)]
    docword.write_text("\n".join(lines) + "\n")
    vocab.write_text("\n".join(tiny_corpus.vocabulary) + "\n")
    return str(docword), str(vocab)


@pytest.fixture
def kos_is_tiny(monkeypatch, tiny_corpus):
    """``bnpcore.datasets.load_kos`` returning the tiny corpus."""
    monkeypatch.setattr(bnpcore.datasets, "load_kos", lambda: tiny_corpus, raising=False)


def test_fit_without_arguments_trains_the_flagship_on_kos(capsys, toy_registry, kos_is_tiny, tiny_corpus):
    code, out, err = run(capsys, "fit")
    assert code == 0, err
    assert "fitting toy-kmeans" in out and "on kos" in out
    assert re.search(ROW + r"w\d\d", out, re.M)
    # the printed score is the held-out token log-likelihood of the default split and seed
    observed, heldout = tiny_corpus.split_tokens(0.1, random_state=0)
    est = registry.get("toy-kmeans").make(random_state=0).fit(observed)
    expected = token_log_likelihood(est.transform(observed), est.topics_, heldout)
    assert heldout_ll(out) == pytest.approx(expected, abs=5e-5)
    assert "50/50" in err or "iteration" in err          # progress went to stderr


def test_fit_options_save_topics_and_evaluate(capsys, toy_registry, uci_files, tmp_path):
    docword, vocab = uci_files
    path = str(tmp_path / "model.npz")
    code, out, err = run(capsys, "fit", "--model", "toy-online-kmeans", "--data", docword, "--vocab", vocab,
                         "--iterations", "3", "--seed", "4", "-p", "alpha=0.5", "--show", "2",
                         "--n-words", "3", "--output", path, "--quiet")
    assert code == 0, err
    assert err == ""                                   # --quiet: no progress bar
    assert len(re.findall(ROW, out, re.M)) == 2
    est = load(path)
    assert (est.n_passes, est.random_state, est.alpha) == (3, 4, 0.5)
    assert est.vocabulary_[:2] == ["w00", "w01"]
    fit_score = heldout_ll(out)

    code, out, err = run(capsys, "topics", path, "--n-words", "3")
    assert code == 0, err
    assert len(re.findall(ROW + r"w\d\d w\d\d w\d\d$", out, re.M)) == est.topics_.shape[0]

    code, out, err = run(capsys, "evaluate", path, "--data", docword, "--vocab", vocab)
    assert code == 0, err
    assert heldout_ll(out) == fit_score                # same default split as fit
    code, out, err = run(capsys, "evaluate", path, "--data", docword, "--split-seed", "1", "--heldout", "0.3")
    assert code == 0 and heldout_ll(out) != fit_score


def test_list(capsys, toy_registry):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert re.search(r"^\* toy-kmeans .*conftest:DocumentKMeans +Test-only topic model", out, re.M)
    assert re.search(r"^  toy-online-kmeans ", out, re.M)


def test_empty_registry(capsys, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry(entry_points_read=True))
    monkeypatch.setattr(cli, "FLAGSHIP", None)
    assert run(capsys, "list")[:2] == (0, "no models are registered in this bnpcore build\n")
    code, out, err = run(capsys, "fit")
    assert_one_line_error(code, err, "no models are registered")
    assert err.count("\n") == 1


@pytest.mark.parametrize("argv, fragment", [
    (["fit", "--model", "nope"], "unknown model 'nope' (available: example-unigram-mixture, toy-kmeans, toy-online-kmeans)"),
    (["fit", "--data", "/no/such/docword.txt"], "--data must be"),
    (["fit", "--threads", "2"], "does not take --threads"),
    (["fit", "-p", "alpha=-1"], "alpha"),
    (["fit", "-p", "no_such=1"], "no parameter no_such"),
    (["fit", "-p", "novalue"], "expected NAME=VALUE"),
    (["fit", "--heldout", "1.5"], "test_fraction"),
    (["fit", "--bogus"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    (["topics", "/no/such/model.npz"], "does not exist"),
    (["evaluate"], "required"),
])
def test_errors_are_one_line(capsys, toy_registry, kos_is_tiny, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err, fragment)


def test_bad_model_files_are_one_line_errors(capsys, toy_registry, kos_is_tiny, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"junk")
    for argv in (["topics", str(bad)], ["evaluate", str(bad)]):
        assert_one_line_error(*run(capsys, *argv)[::2], "not a bnpcore model file")


def test_vocabulary_mismatch_in_evaluate(capsys, toy_registry, kos_is_tiny, uci_files, tmp_path, tiny_corpus,
                                         monkeypatch):
    path = str(tmp_path / "m.npz")
    assert run(capsys, "fit", "-q", "-o", path)[0] == 0
    from bnpcore.corpus import Corpus
    monkeypatch.setattr(bnpcore.datasets, "load_kos", lambda: Corpus(tiny_corpus.matrix[:, :10]))
    assert_one_line_error(*run(capsys, "evaluate", path)[::2], "the model has 24 words, the data 10")


def test_bundled_and_synthetic_data(capsys, toy_registry):
    code, out, err = run(capsys, "fit", "--data", "kos", "--iterations", "2", "-q", "--show", "1")
    assert code == 0, err
    assert "3430 documents, 6906 words" in out and re.search(ROW + r"\w+ \w+", out, re.M)
    code, out, err = run(capsys, "fit", "--data", "bars", "--iterations", "2", "-q")
    assert code == 0, err
    assert "100 words" in out and re.search(ROW + r"r\d+c\d+ r\d+c\d+", out, re.M)
    first = heldout_ll(out)
    assert heldout_ll(run(capsys, "fit", "--data", "bars", "--iterations", "2", "-q")[1]) == first  # seeded
    assert_one_line_error(*run(capsys, "fit", "--data", "bars", "--vocab", "v.txt")[::2], "--vocab applies")


def test_unexpected_exceptions_are_one_line_unless_debugging(capsys, toy_registry, kos_is_tiny, monkeypatch):
    def boom(self, X, y=None):
        raise RuntimeError("kaboom\nsecond line")
    monkeypatch.setattr(registry.get("toy-kmeans").load_class(), "fit", boom)
    assert_one_line_error(*run(capsys, "fit", "-q")[::2], "RuntimeError: kaboom")
    monkeypatch.setenv("BNPCORE_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["fit", "-q"])


def test_plain_progress_without_tqdm(monkeypatch, capsys, toy_registry, kos_is_tiny):
    monkeypatch.setitem(sys.modules, "tqdm", None)       # import tqdm -> ImportError
    code, out, err = run(capsys, "fit", "--iterations", "4")
    assert code == 0
    assert "\rtoy-kmeans: iteration 4/4  n_components=10  loglik=" in err and err.endswith("\n")


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "fit" in out and "evaluate" in out


def test_python_dash_m(tmp_path):
    """``python -m bnpcore`` is the same program (on the real registry). The
    subprocesses run in ``tmp_path``: ``-m`` puts the working directory first on
    sys.path, and a source checkout there would shadow the installed package."""
    proc = subprocess.run([sys.executable, "-m", "bnpcore", "topics", str(tmp_path / "none.npz")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("bnpcore: error: model file")
    proc = subprocess.run([sys.executable, "-m", "bnpcore", "list"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout


def test_default_test_kwargs_shrink_the_iterations(toy_models):
    spec = toy_models["toy-kmeans"]
    plain = registry.Model(spec.path, spec.kwargs)
    assert plain.make(test=True).max_iter == 5
    assert spec.make(test=True).get_params()["n_components"] == 3
    assert plain.iteration_param() == "max_iter" and toy_models["toy-online-kmeans"].iteration_param() == "n_passes"
    np.testing.assert_equal(plain.make(max_iter=2).max_iter, 2)


def test_heldout_score_reuses_transform_but_respects_overrides(tiny_corpus, toy_models):
    est = toy_models["toy-kmeans"].make(test=True, random_state=0).fit(tiny_corpus)
    observed, heldout = tiny_corpus.split_tokens(0.2, random_state=0)
    theta = est.transform(observed)
    assert cli.heldout_score(est, observed, heldout, theta) == est.heldout_log_likelihood(observed, heldout)
    assert cli.heldout_score(est, observed, heldout, np.full_like(theta, 1 / theta.shape[1])) != \
        est.heldout_log_likelihood(observed, heldout)

    class SampleAveraged(type(est)):
        def heldout_log_likelihood(self, observed, heldout):
            return -1.0
    est.__class__ = SampleAveraged
    assert cli.heldout_score(est, observed, heldout, theta) == -1.0


def test_models_without_topics_are_refused(capsys, tmp_path, kos_is_tiny):
    from bnpcore.base import BaseEstimator

    class Counter(BaseEstimator):
        def __init__(self, scale=1.0):
            self.scale = scale
    est = Counter()
    est.total_ = 3
    est.save(tmp_path / "c.npz")
    for command in ("topics", "evaluate"):
        code, _, err = run(capsys, command, str(tmp_path / "c.npz"))
        assert_one_line_error(code, err, "holds a Counter, which has no topics")


@pytest.mark.parametrize("argv, fragment", [
    (["fit", "--n-words", "-3"], "--n-words"), (["fit", "--show", "-1"], "--show"), (["fit", "--n-topics", "0"], "--n-topics"),
    (["topics", "m.npz", "--show", "-2"], "--show"), (["topics", "m.npz", "--n-words", "x"], "--n-words"),
])
def test_negative_counts_are_refused(capsys, toy_registry, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, fragment)


def test_output_path_checked_before_fitting_and_model_saved_before_scoring(capsys, toy_registry, kos_is_tiny,
                                                                          tmp_path, monkeypatch):
    code, out, err = run(capsys, "fit", "-q", "-o", str(tmp_path / "missing" / "m.npz"))
    assert_one_line_error(code, err, "no directory")
    assert "fitting" not in out                       # refused before the fit

    def broken_score(*args, **kwargs):
        raise RuntimeError("scoring failed")
    monkeypatch.setattr(cli, "heldout_score", broken_score)
    code, out, err = run(capsys, "fit", "-q", "-o", str(tmp_path / "m.npz"))
    assert code == 2 and (tmp_path / "m.npz").exists()   # the fit is on disk although scoring failed


def test_list_into_a_closed_pipe_exits_quietly(tmp_path):
    proc = subprocess.run(f"{sys.executable} -m bnpcore list | head -1", shell=True, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)      # not in a source checkout (test_python_dash_m)
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1 and "Error" not in proc.stderr, proc.stderr


def test_n_topics_sets_the_number_of_topics_fitted(capsys, tmp_path):
    """--n-topics is the model's n_components (it used to only limit the printing);
    --show limits the printing; settings that differ from Python's are printed."""
    path = str(tmp_path / "m.npz")
    code, out, err = run(capsys, "fit", "--model", "lda-cvb0", "--data", "bars", "--iterations", "2", "-q",
                         "--n-topics", "7", "--show", "3", "-o", path)
    assert code == 0, err
    assert load(path).n_components == 7 and load(path).topics_.shape[0] == 7
    assert re.search(r"^7 topics.*; the 3 largest:$", out, re.M) and len(re.findall(ROW, out, re.M)) == 3
    differing = re.search(r"settings differing from CollapsedVB\(\)'s defaults: (.*)", out).group(1)
    assert "n_components=7 (Python: 10)" in differing and "random_state=0 (Python: None)" in differing
    assert "max_iter=2" in differing and "eta=" not in differing.replace("beta", "")   # equal values are not listed
    code, _, err = run(capsys, "fit", "--model", "hdp-tf-svi", "--data", "bars", "--n-topics", "5")
    assert_one_line_error(code, err, "no fixed number of topics")


@pytest.mark.parametrize("suffix", [".html", ".png"])
def test_report(capsys, tmp_path, suffix):
    """--report writes a page with the topic table and the traces (a PNG whose
    panels are not blank), or the PNG alone."""
    plt = pytest.importorskip("matplotlib.pyplot")
    import base64
    import html.parser
    path = tmp_path / f"report{suffix}"
    code, out, err = run(capsys, "fit", "--model", "hdp-cvb", "--data", "bars", "--iterations", "10", "-q",
                         "-p", "n_components=12", "--report", str(path))
    assert code == 0, err
    assert f"report written to {path}" in out
    if suffix == ".png":
        png = path.read_bytes()
    else:
        class Page(html.parser.HTMLParser):
            cells, images = [], []

            def handle_starttag(self, tag, attrs):
                if tag == "img":
                    self.images.append(dict(attrs)["src"])

            def handle_data(self, data):
                self.cells.append(data)
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        text = " ".join(page.cells)
        assert "held-out per-word log-likelihood: -" in text and "coherence" in text
        assert re.search(r"r\d+c\d+ r\d+c\d+", text)                          # topic words in the table
        assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")
        png = base64.b64decode(page.images[0].split(",", 1)[1])
    image = plt.imread(__import__("io").BytesIO(png), format="png")
    assert image.shape[1] > 3.2 * image.shape[0]       # three panels side by side: held-out, topics, sizes
    thirds = np.array_split(image[..., :3].mean(axis=2), 3, axis=1)
    assert all(part.std() > 0.05 for part in thirds)                       # each panel has drawing on it
    assert_one_line_error(*run(capsys, "fit", "--report", str(tmp_path / "r.pdf"))[::2], ".html or .png")


def test_init_from_starts_a_fit_from_a_saved_sampler(capsys, tmp_path):
    """--init-from passes a saved model to fit(init_from=...): hdp-da-batch keeps the
    sampler's topics (its own preset starts from 10); models whose fit has no
    init_from, a cluster, and a sampler of another vocabulary are one-line errors."""
    sampler, model = str(tmp_path / "g.npz"), str(tmp_path / "da.npz")
    code, _, err = run(capsys, "fit", "--model", "hdp-gibbs", "--data", "bars", "--iterations", "30", "-q",
                       "-p", "n_components=30", "-p", "burn_in=20", "-o", sampler)
    assert code == 0, err
    code, out, err = run(capsys, "fit", "--model", "hdp-da-batch", "--data", "bars", "--iterations", "2", "-q",
                         "--init-from", sampler, "-o", model)
    assert code == 0, err
    assert load(model).n_components_ > 20 and load(sampler).n_components_ > 20
    for argv, fragment in [(("--model", "lda-cvb0", "--data", "bars"), "lda-cvb0 does not take --init-from"),
                           (("--model", "hdp-da-batch", "--data", "bars", "--scheduler", "tcp://127.0.0.1:1"),
                            "--init-from does not run with --scheduler"),
                           (("--model", "hdp-da-batch", "--data", "kos"), "init_from has 100 words, the corpus"),
                           (("--model", "hdp-da-batch", "--init-from", str(tmp_path / "none.npz")), "does not exist")]:
        code, _, err = run(capsys, "fit", "-q", "--init-from", sampler, *argv)
        assert_one_line_error(code, err, fragment)
