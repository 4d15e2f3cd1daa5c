"""Topic coherence: ``bnpcore.evaluation.coherence`` against gensim's
``CoherenceModel`` (one process), seconds (best of ``--repeats``, gensim's
dictionary and texts built beforehand) and the largest per-topic difference,
for u_mass, c_npmi and c_v; then c_v with bnpcore's exact windows.

``--corpus kos``: the topics of a 10-topic LDA on all of KOS, texts built from
the bags in word-id order. ``--corpus short``: 50,000 short documents
(``harness.short_documents``: 2.7 M tokens, 37,000 words, in their drawn
order) and the top words of ``--topics`` topics of an LDA fitted on them.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_coherence.py [--corpus kos|short] [--topics 10] [--repeats 3]
"""
import argparse

import numpy as np
from gensim.models import CoherenceModel

from bnpcore.corpus import Corpus
from bnpcore.datasets import load_kos
from bnpcore.evaluation import coherence
from bnpcore.lda import CollapsedVB

try:
    from harness import short_documents, timed
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import short_documents, timed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["kos", "short"], default="kos")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.corpus == "kos":
        corpus = load_kos()
        texts = [[corpus.vocabulary[w] for w in np.repeat(corpus.indices[a:b], corpus.counts[a:b])]
                 for a, b in zip(corpus.indptr[:-1], corpus.indptr[1:])]
    else:
        texts = short_documents()
        corpus = Corpus.from_token_lists(texts)
    model = CollapsedVB(n_components=args.topics, max_iter=30, random_state=0).fit(corpus)
    topics = [model.top_words(k, 10) for k in range(args.topics)]
    bow, dictionary = corpus.to_gensim()
    print(f"{args.corpus}: {corpus.n_docs} documents, {corpus.n_tokens} tokens, {corpus.n_words} words; topics of "
          f"lda.CollapsedVB(n_components={args.topics}, max_iter=30, random_state=0)")
    print(f"{'measure':8s} {'bnpcore s':>10s} {'gensim s':>9s} {'ratio':>6s} {'mean':>8s} {'max |diff|':>11s}")
    for measure in ("u_mass", "c_npmi", "c_v"):
        reference = corpus if measure == "u_mass" else texts
        ours_s, _, ours = timed(lambda: coherence(model, reference, measure, per_topic=True), args.repeats)
        theirs_s, _, theirs = timed(lambda: np.asarray(CoherenceModel(
            topics=topics, texts=texts, corpus=bow, dictionary=dictionary, coherence=measure,
            processes=1).get_coherence_per_topic()), args.repeats)
        print(f"{measure:8s} {ours_s:10.2f} {theirs_s:9.2f} {theirs_s / ours_s:6.1f} {ours.mean():8.4f} "
              f"{np.abs(ours - theirs).max():11.1e}")
    print(f"c_v with exact_windows=True (no gensim equivalent): "
          f"{coherence(model, texts, 'c_v', exact_windows=True):.4f}")


if __name__ == "__main__":
    main()
