"""The HDP estimators as a new user meets them: each constructed with nothing but
``random_state``, fitted, timed and scored.

``kos``: KOS with 10% of the documents held out (``split_documents(0.1)``), each
held-out document's tokens split 80/20, the proportions inferred from the 80% with
the topics fixed and the 20% scored per word (document completion, the protocol of
bench_budget.py and docs/choosing.md). Samplers are scored on their final sample.
"capacity" is the most topics the estimator can hold (its truncation:
``n_components`` of ``CollapsedVB`` and ``OnlineVB``, ``max_topics`` of
``PartiallyCollapsedGibbs``, and the truncation ``CollapsedVB`` chose; "-" for the
estimators that grow without bound), "used" the topics of at least one expected
token (``used_components()``), "cpu s" the process CPU time of the fit (one
thread: about its wall time on an idle core, whatever else the machine runs)::

    OMP_NUM_THREADS=1 python benchmarks/bench_defaults.py kos

``text``: a real-text corpus that ships with Python itself, the docstrings of the
standard library (every module, class and function docstring of the ``.py`` files
of the running interpreter's ``Lib`` directory outside the test packages, read with
``ast``, so nothing is imported; those of at least 20 words), counted by
``Corpus.from_texts(min_df=5, max_df=0.5)``. Every estimator is fitted with its
defaults on all documents, and tomotopy's ``HDPModel`` (its defaults, one worker)
is trained beside them, 10 iterations at a time, until the longest bnpcore fit's
time; each bnpcore row is compared with tomotopy's state at the end of the
iteration block that first passes that row's training time. The coherence is
``bnpcore.evaluation.coherence(..., "c_npmi")`` of the top 10 words of the 20
largest topics of each model (all of them when it has fewer), on the token lists of
the docstrings in reading order (windows of 10 tokens, gensim's default)::

    OMP_NUM_THREADS=1 python benchmarks/bench_defaults.py text

``--set NAME:param=value,...`` changes a default for a trial (e.g.
``--set OnlineVB:eta=0.5``; values are Python literals, commas inside brackets
stay in the value: ``--set "DirectAssignmentVB:learn_hyperparameters=('gamma',)"``); ``--only`` runs some estimators; ``--seed`` sets
``random_state`` (and tomotopy's seed): c_npmi moves by a few hundredths from
seed to seed, so compare several.
"""
import argparse
import ast
import os
import subprocess
import sys
import sysconfig
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import threads_note  # noqa: E402

from bnpcore import hdp  # noqa: E402

NAMES = ["DirectAssignmentGibbs", "CollapsedVB", "TruncationFreeSVI", "DirectAssignmentVB", "OnlineVB",
         "PartiallyCollapsedGibbs"]
CAPACITY = {"CollapsedVB": "n_components", "OnlineVB": "n_components", "PartiallyCollapsedGibbs": "max_topics"}
N_COHERENCE_TOPICS = 20


def parse_sets(items):
    out = {}
    for item in items:
        name, _, assignments = item.partition(":")
        # split at the commas outside brackets: a value may be a tuple, e.g. learn_hyperparameters=('gamma',)
        pairs, depth, start = [], 0, 0
        for i, char in enumerate(assignments + ","):
            depth += (char in "([{") - (char in ")]}")
            if char == "," and depth == 0:
                pairs.append(assignments[start:i])
                start = i + 1
        for pair in filter(None, pairs):
            key, _, text = pair.partition("=")
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text
            out.setdefault(name, {})[key] = value
    return out


def make(name, seed, sets):
    return getattr(hdp, name)(random_state=seed, **sets.get(name, {}))


def timed_fit(est, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, cpu = time.perf_counter(), time.process_time()
        est.fit(X)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    names = sorted({type(w.message).__name__ for w in caught})
    return seconds, cpu, ",".join(names) or "-"


def capacity(est):
    """The truncation of a fitted estimator (None: it grows without bound)."""
    param = CAPACITY.get(type(est).__name__)
    if param is None:
        return None
    value = getattr(est, param)
    return est.n_components_ if value == "auto" else value       # CollapsedVB's truncation chosen from the data


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def header(args):
    print(f"# {' '.join(['python', 'benchmarks/bench_defaults.py'] + sys.argv[1:])}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {threads_note()}; start: {uptime()}")


def run_kos(args, sets):
    from bnpcore.datasets import load_kos
    train, test = load_kos().split_documents(0.1, random_state=args.seed)
    observed, heldout = test.split_tokens(0.2, random_state=args.seed)
    header(args)
    print(f"# KOS: {train.n_docs} training documents, {train.n_tokens} tokens; document completion of "
          f"{test.n_docs} held-out documents; defaults + random_state={args.seed}")
    print(f"{'estimator':24} {'train s':>8} {'cpu s':>7} {'heldout':>8} {'used':>5} {'capacity':>8} {'iters':>6}  "
          "warnings  changed")
    for name in NAMES:
        if args.only and not any(o in name for o in args.only):
            continue
        est = make(name, args.seed, sets)
        seconds, cpu, warned = timed_fit(est, train)
        score = est.heldout_log_likelihood(observed, heldout)
        cap = capacity(est)
        print(f"{name:24} {seconds:8.1f} {cpu:7.1f} {score:8.4f} {len(est.used_components()):5d} "
              f"{'-' if cap is None else cap:>8} {len(est.history_):6d}  {warned:8}  {sets.get(name, '')}",
              flush=True)
    print(f"# end: {uptime()}")


# -- the docstrings of the standard library ---------------------------------------
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3", "turtledemo"}


def stdlib_docstrings(min_words=20, root=None):
    """The module, class and function docstrings of the standard library's ``.py``
    files (test packages left out), in a fixed order, each at least ``min_words``
    whitespace-separated words, duplicates dropped; ``root``: the same from the
    ``.py`` files under another directory (e.g. an installed package's)."""
    root = sysconfig.get_paths()["stdlib"] if root is None else root
    seen, docs = set(), []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("test"))
        for filename in sorted(filenames):
            if not filename.endswith(".py") or filename.startswith("test_"):
                continue
            try:
                with open(os.path.join(dirpath, filename), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc and len(doc.split()) >= min_words and doc not in seen:
                        seen.add(doc)
                        docs.append(doc)
    return docs


def top_topics(topics, sizes, n=N_COHERENCE_TOPICS, topn=10):
    order = np.argsort(-np.asarray(sizes, dtype=float), kind="stable")[:n]
    return [list(np.argsort(-np.asarray(topics[k]), kind="stable")[:topn]) for k in order]


def run_text(args, sets):
    from bnpcore import Corpus
    from bnpcore.evaluation import coherence
    from bnpcore.text import tokenize, ENGLISH_STOP_WORDS
    texts = stdlib_docstrings()
    corpus = Corpus.from_texts(texts, min_df=5, max_df=0.5)
    index = set(corpus.vocabulary)
    reference = [[t for t in tokenize(text) if t in index and t not in ENGLISH_STOP_WORDS] for text in texts]
    vocabulary = corpus.vocabulary
    header(args)
    print(f"# the docstrings of Python {sys.version.split()[0]}'s standard library: {corpus.n_docs} documents, "
          f"{corpus.n_words} words, {corpus.n_tokens} tokens (min_df=5, max_df=0.5); c_npmi of the top 10 words "
          f"of the {N_COHERENCE_TOPICS} largest topics, windows of 10 tokens in reading order")

    def npmi(topics):       # topics as words: the reference is token lists in reading order
        return coherence([[vocabulary[w] for w in topic] for topic in topics], reference, "c_npmi", window_size=10)

    rows = []
    for name in NAMES:
        if args.only and not any(o in name for o in args.only):
            continue
        est = make(name, args.seed, sets)
        seconds, cpu, warned = timed_fit(est, corpus)
        used = est.used_components()
        rows.append((name, seconds, len(used), npmi(top_topics(est.get_topics(), est.topic_sizes_)), warned))
        print(f"# {name}: {seconds:.1f} s ({cpu:.1f} cpu s), {len(used)} topics, c_npmi {rows[-1][3]:.4f}",
              flush=True)
    tomotopy = tomotopy_trace(corpus, args.seed, max(r[1] for r in rows) if rows else 0.0, npmi)
    print(f"{'estimator':24} {'train s':>8} {'topics':>6} {'c_npmi':>7}   {'tomotopy s':>10} {'topics':>6} "
          f"{'c_npmi':>7}  warnings")
    for name, seconds, n_used, score, warned in rows:
        tp = next((t for t in tomotopy if t[0] >= seconds), tomotopy[-1]) if tomotopy else None
        tp_text = f"{tp[0]:10.1f} {tp[1]:6d} {tp[2]:7.4f}" if tp else f"{'-':>10} {'-':>6} {'-':>7}"
        print(f"{name:24} {seconds:8.1f} {n_used:6d} {score:7.4f}   {tp_text}  {warned}")
    print(f"# end: {uptime()}")


def tomotopy_trace(corpus, seed, seconds, npmi, block=10):
    """``(training seconds, live topics, c_npmi)`` of tomotopy's HDPModel after
    every ``block`` iterations until ``seconds`` have passed."""
    try:
        import tomotopy as tp
    except ImportError:
        print("# tomotopy not installed: no comparison", file=sys.stderr)
        return []
    model = tp.HDPModel(seed=seed)
    for j in range(corpus.n_docs):
        lo, hi = corpus.indptr[j], corpus.indptr[j + 1]
        words = np.repeat(corpus.indices[lo:hi], corpus.counts[lo:hi]).astype(str).tolist()
        if words:
            model.add_doc(words)
    model.train(0, workers=1)
    trace, spent = [], 0.0
    while not trace or spent < seconds:
        start = time.perf_counter()
        model.train(block, workers=1, parallel=tp.ParallelScheme.NONE)
        spent += time.perf_counter() - start
        live = [k for k in range(model.k) if model.is_live_topic(k)]
        ids = np.array([int(w) for w in model.used_vocabs])
        topics = np.zeros((len(live), corpus.n_words))
        for i, k in enumerate(live):
            topics[i, ids] = np.asarray(model.get_topic_word_dist(k))
        sizes = np.asarray(model.get_count_by_topics(), dtype=float)[live]
        trace.append((spent, len(live), npmi(top_topics(topics, sizes))))
    return trace


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", choices=["kos", "text"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=[],
                        help="run only the estimators whose name contains one of these")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:param=value,...",
                        help="change a default of one estimator (a trial)")
    args = parser.parse_args(argv)
    (run_kos if args.corpus == "kos" else run_text)(args, parse_sets(args.set))


if __name__ == "__main__":
    main()
