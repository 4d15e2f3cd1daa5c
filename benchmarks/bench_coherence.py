"""Topic coherence on KOS: ``bnpcore.evaluation.coherence`` against gensim's
``CoherenceModel`` (one process), the topics of a 10-topic LDA on all of KOS,
texts built from the bags in word-id order: seconds (best of ``--repeats``,
gensim's dictionary and texts built beforehand) and the largest per-topic
difference, for u_mass, c_npmi and c_v; then c_v with bnpcore's exact windows.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_coherence.py [--repeats 3]
"""
import argparse

import numpy as np
from gensim.models import CoherenceModel

from bnpcore.datasets import load_kos
from bnpcore.evaluation import coherence
from bnpcore.lda import CollapsedVB

try:
    from harness import timed
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import timed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    kos = load_kos()
    model = CollapsedVB(n_components=10, max_iter=30, random_state=0).fit(kos)
    topics = [model.top_words(k, 10) for k in range(10)]
    bow, dictionary = kos.to_gensim()
    texts = [[kos.vocabulary[w] for w in np.repeat(kos.indices[a:b], kos.counts[a:b])]
             for a, b in zip(kos.indptr[:-1], kos.indptr[1:])]
    print(f"KOS: {kos.n_docs} documents; topics of CollapsedVB(n_components=10, max_iter=30, random_state=0)")
    print(f"{'measure':8s} {'bnpcore s':>10s} {'gensim s':>9s} {'mean':>8s} {'max |diff|':>11s}")
    for measure in ("u_mass", "c_npmi", "c_v"):
        ours_s, _, ours = timed(lambda: coherence(model, kos, measure, per_topic=True), args.repeats)
        theirs_s, _, theirs = timed(lambda: np.asarray(CoherenceModel(
            topics=topics, texts=texts, corpus=bow, dictionary=dictionary, coherence=measure,
            processes=1).get_coherence_per_topic()), args.repeats)
        print(f"{measure:8s} {ours_s:10.2f} {theirs_s:9.2f} {ours.mean():8.4f} {np.abs(ours - theirs).max():11.1e}")
    print(f"c_v with exact_windows=True (no gensim equivalent): {coherence(model, kos, 'c_v', exact_windows=True):.4f}")


if __name__ == "__main__":
    main()
