"""Streaming a large file: text with one document per line -> on-disk corpus -> online HDP, chunk by chunk.

    python examples/stream_large_file.py                 # generates a 200,000-line file first
    python examples/stream_large_file.py posts.txt       # your own file, one document per line

Nothing here holds the file or the corpus in memory: ``bnpcore.corpus.write``
reads the text twice line by line (a first pass counts the words so that
``min_df`` can prune them, a second writes the counts) into a corpus directory
of memory-mapped arrays, and the truncation-free online HDP (Wang and Blei,
"Truncation-free online variational inference for Bayesian nonparametric
models", NIPS 2012) trains on it chunk by chunk with ``partial_fit``. Memory is
bounded by a chunk, the vocabulary and the topics, whatever the file size.
"""
import os
import sys
import tempfile

import numpy as np

from bnpcore.corpus import write
from bnpcore.datasets import write_synthetic
from bnpcore.hdp import TruncationFreeSVI


def generate_text_file(path, n_docs, random_state=0):
    """A text file of ``n_docs`` lines drawn from a synthetic HDP (words "w0", "w1", ...),
    written chunk by chunk through an on-disk synthetic corpus."""
    with tempfile.TemporaryDirectory() as scratch:
        data = write_synthetic(os.path.join(scratch, "synthetic"), n_docs, n_words=5000, n_topics=30,
                               mean_length=80, random_state=random_state)
        words = np.array(data.corpus.vocabulary)
        with open(path, "w", encoding="utf-8") as out:
            for chunk in data.corpus.iter_chunks(10000):
                tokens = words[np.repeat(chunk.indices, chunk.counts)]
                ends = np.cumsum(chunk.doc_lengths)
                out.writelines(" ".join(doc) + "\n" for doc in np.split(tokens, ends[:-1]))


def main(text_file=None, n_docs=200_000, chunk_size=10_000, batch_size=500, workdir=None, random_state=0):
    """Build the corpus from ``text_file`` (generated if None) and train an HDP on it; returns the estimator."""
    workdir = workdir or tempfile.mkdtemp(prefix="bnpcore-stream-")
    if text_file is None:
        text_file = os.path.join(workdir, "documents.txt")
        generate_text_file(text_file, n_docs, random_state)
        print(f"generated {text_file}: {os.path.getsize(text_file) / 2**20:.1f} MiB")
    corpus = write(text_file, os.path.join(workdir, "corpus"), lines=True, min_df=5, max_df=0.5)
    print(f"on-disk corpus: {corpus!r}")
    est = TruncationFreeSVI(batch_size=batch_size, total_samples=corpus.n_docs, random_state=random_state)
    for chunk in corpus.iter_chunks(chunk_size):
        est.partial_fit(chunk)
        print(f"  {est.n_documents_seen_:>9} documents, {est.n_components_} topics")
    print(est.summary(n=10, n_words=8))
    return est


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
