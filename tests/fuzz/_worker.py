"""Child process of the hypothesis suite (test_hypothesis.py): runs one case per
line of JSON on stdin and answers one line of JSON on stdout, under the memory
limit the parent set (a case that exhausts it dies here, and the parent sees it).

A case is ``{"kind": "estimator", "model": name, "params": {...}, "docs": [[count, ...], ...]}``
or ``{"kind": "corpus", "builder": name, "docs": ..., "args": {...}}``; the
answer is ``{"outcome": "error", "type": ..., "message": ...}`` for a
ValueError/TypeError, ``{"outcome": "ok", "problems": [...]}`` otherwise
(problems: what was not finite or not normalised). Any other exception is a
problem too (``outcome`` "unexpected").
"""
import importlib.util
import json
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bnpcore import registry
from bnpcore.corpus import Corpus


def _contract_conftest():
    """tests/api/conftest.py under a name of its own (pytest may hold another
    ``conftest``); its test-only models name their classes by that module name."""
    name = "bnpcore_contract_conftest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "api" / "conftest.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


TOY_MODELS = _contract_conftest().TOY_MODELS   # the contract suite's test-only models


def get_model(name):
    return TOY_MODELS[name] if name in TOY_MODELS else registry.get(name)


def normalised(name, rows, n_rows, problems):
    """Finite, non-negative rows summing to 1, ``n_rows`` of them."""
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] != n_rows:
        problems.append(f"{name} has shape {rows.shape}, expected {n_rows} rows")
    elif not np.all(np.isfinite(rows)):
        problems.append(f"{name} is not finite")
    elif rows.size and (rows.min() < 0 or not np.allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-8)):
        problems.append(f"{name} rows are not distributions (min {rows.min():.3g}, "
                        f"sums {rows.sum(axis=1).min():.6g}..{rows.sum(axis=1).max():.6g})")


def counts(case):
    """The case's document x word counts (``width`` columns, also without documents)."""
    return np.array(case["docs"], dtype=np.int64).reshape(len(case["docs"]), case["width"])


def run_estimator(case):
    X = Corpus(sp.csr_matrix(counts(case)))
    model = get_model(case["model"]).make(test=True, **case["params"])
    model.fit(X)
    # a fitted model must use its training documents: an error from here on is a problem
    problems = []
    try:
        normalised("transform", model.transform(X), X.n_docs, problems)
        normalised("get_topics", model.get_topics(), model.n_components_, problems)
        try:
            score = model.score(X)
        except ValueError as exc:   # documents too short to hold out 20% of a token: refused, named
            if "no tokens" not in str(exc):
                raise
        else:
            if not np.isfinite(score):
                problems.append(f"score is {score}")
    except (ValueError, TypeError, FloatingPointError) as exc:
        problems.append(f"after a successful fit: {type(exc).__name__}: {exc}")
    return problems


def run_corpus(case):
    docs, args = counts(case), case["args"]
    builder = case["builder"]
    with tempfile.TemporaryDirectory() as tmp:
        if builder == "tokens":
            data = [[w for w, c in enumerate(row) for _ in range(c)] for row in docs.tolist()]
            corpus = Corpus(data, **args)
        elif builder == "dense":
            corpus = Corpus(docs, **args)
        elif builder == "sparse":
            corpus = Corpus(sp.csr_matrix(docs), **args)
        elif builder == "uci":
            rows = [(j + 1, w + 1, c) for j, row in enumerate(docs.tolist()) for w, c in enumerate(row) if c]
            path = Path(tmp) / "docword.txt"
            path.write_text(f"{len(docs)}\n{docs.shape[1]}\n{len(rows)}\n" + "".join(f"{j} {w} {c}\n" for j, w, c in rows))
            corpus = Corpus.from_uci(path)
        elif builder == "saved":
            Corpus(docs).save(Path(tmp) / "c.npz")
            corpus = Corpus.load(Path(tmp) / "c.npz")
        else:
            raise AssertionError(builder)
        problems = []
        expected = docs
        got = corpus.matrix.toarray()
        width = min(got.shape[1], expected.shape[1])
        if (got.shape[0] != expected.shape[0] or not np.array_equal(got[:, :width], expected[:, :width])
                or got[:, width:].any() or expected[:, width:].any()):
            problems.append(f"{builder}: counts changed")
        if corpus.n_tokens:
            observed, held = corpus.split_tokens(0.2, random_state=0)
            if not np.array_equal((observed.matrix + held.matrix).toarray(), got):
                problems.append("split_tokens does not add up")
        for batch in corpus.minibatches(3, random_state=0):
            if batch.n_words != corpus.n_words:
                problems.append("minibatch changed the vocabulary")
    return problems


def main():
    warnings.simplefilter("ignore")      # convergence notes, capacity warnings
    for line in sys.stdin:
        case = json.loads(line)
        try:
            problems = (run_estimator if case["kind"] == "estimator" else run_corpus)(case)
            answer = {"outcome": "ok", "problems": problems}
        except (ValueError, TypeError) as exc:
            answer = {"outcome": "error", "type": type(exc).__name__, "message": str(exc)}
        except Exception as exc:    # noqa: BLE001  (reported to the parent as a failure)
            answer = {"outcome": "unexpected", "type": type(exc).__name__, "message": str(exc),
                      "traceback": traceback.format_exc()}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
