"""The README's quick start is the first code a user copies: it must run as
printed, without warnings of renamed parameters, and do what its comments say."""
import re
import warnings
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_block(containing):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    matches = [b for b in blocks if containing in b]
    assert len(matches) == 1, f"{len(matches)} README python blocks contain {containing!r}"
    return matches[0]


def test_quick_start_runs_as_printed(tmp_path, monkeypatch, capsys):
    code = _python_block("load_kos()")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)          # no deprecated API in the quick start
        exec(compile(code, "README.md quick start", "exec"), namespace)
    model, same, train = namespace["model"], namespace["same"], namespace["train"]
    printed = capsys.readouterr().out.split("\n")
    assert int(printed[0]) == model.n_components_ > 1
    assert -8.5 < float(printed[1]) < -6.5                   # per-word log-likelihood of KOS
    theta = namespace["theta"]
    assert theta.shape == (train.n_docs, model.n_components_)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-10)
    np.testing.assert_array_equal(same.transform(train), theta)   # the saved model is the fitted one
    streaming = namespace["streaming"]
    assert streaming.n_components_ > 1 and streaming.n_documents_seen_ == train.n_docs
