"""Compare topic models on your own data: each for the same time budget, scored
the same way.

    python examples/compare_estimators.py [--data kos | DOCWORD | --texts DIR] \
        [--models lda-cvb0 hdp-gibbs hdp-tf-svi] [--seconds 20] [--iterations N]

10% of the documents are held out; each held-out document's words are split
80/20, the topic proportions are inferred from the 80% with the topics fixed and
the 20% is scored (document completion: the per-word log-likelihood, higher is
better). Also printed: topics used (those with at least one expected token),
mean u_mass coherence of the ten largest and the time taken. Any model of
``bnpcore list`` can be named; each is built with its command-line settings.
"""
import argparse
import inspect
import time

import numpy as np

from bnpcore import cli, registry
from bnpcore.evaluation import coherence

DEFAULT_MODELS = ["lda-cvb0", "hdp-gibbs", "hdp-cvb", "hdp-tf-svi", "hdp-da-sm"]


def topic_sizes(model, corpus):
    """Expected tokens per topic: ``topic_sizes_`` of the nonparametric models,
    ``sum_j N_j theta_jk`` over ``corpus`` for the others."""
    if hasattr(type(model), "topic_sizes_"):
        return np.asarray(model.topic_sizes_)
    return corpus.doc_lengths @ model.transform(corpus)


def compare(corpus, names, seconds, seed=0, iterations=None):
    """Rows (name, topics used, held-out, coherence, seconds) for the models ``names``;
    each fit ends at ``seconds`` or after ``iterations`` (None: the time alone)."""
    train, test = corpus.split_documents(0.1, random_state=seed)
    observed, heldout = test.split_tokens(0.2, random_state=seed)
    rows = []
    for name in names:
        spec = registry.get(name)
        model = spec.make(random_state=seed, **{spec.iteration_param(): iterations or 10 ** 6})
        budget = {"max_seconds": seconds} if "max_seconds" in inspect.signature(model.fit).parameters else {}
        start = time.perf_counter()
        model.fit(train, **budget)
        elapsed = time.perf_counter() - start
        sizes = topic_sizes(model, train)
        largest = np.argsort(-sizes, kind="stable")[:10]
        top = [np.argsort(-model.get_topics()[k], kind="stable")[:10] for k in largest]
        rows.append((name, int((sizes >= 1).sum()), model.heldout_log_likelihood(observed, heldout),
                     float(np.mean(coherence(top, train, measure="u_mass", per_topic=True))), elapsed))
        print(f"{name:14} {rows[-1][1]:6d} {rows[-1][2]:9.4f} {rows[-1][3]:9.3f} {elapsed:8.1f}", flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="kos", help="'kos' (bundled, default), 'bars' or a UCI docword file")
    p.add_argument("--vocab", help="UCI vocabulary file for --data PATH")
    p.add_argument("--texts", help="a folder of text files (one document each) instead of --data")
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help=f"default: {' '.join(DEFAULT_MODELS)}")
    p.add_argument("--seconds", type=float, default=20.0, help="time budget per model (default 20)")
    p.add_argument("--iterations", type=int, help="also stop each fit after this many iterations (sweeps, "
                   "epochs): equal work instead of equal time")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.texts:
        from bnpcore import Corpus
        from bnpcore.text import read_texts
        corpus = Corpus.from_texts(read_texts(args.texts), min_df=2)
    else:
        corpus = cli.load_data(args.data, args.vocab)
    print(f"{corpus.n_docs} documents, {corpus.n_words} words; {args.seconds:g} s per model")
    print(f"{'model':14} {'topics':>6} {'held-out':>9} {'u_mass':>9} {'seconds':>8}")
    return compare(corpus, args.models, args.seconds, args.seed, args.iterations)


if __name__ == "__main__":
    main()
