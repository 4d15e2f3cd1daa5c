"""What a user waits for after a fit, on a corpus of short texts
(``harness.short_documents``: 50,000 documents, 2.7 M tokens, 37,000 words):
``export_pyldavis`` on the training documents (its ``document_topics`` is the
estimator's ``transform``), and the size of the saved model file with and
without ``doc_topic_``, for each HDP estimator after a short fit.

Usage::

    python benchmarks/bench_user_path.py [--threads 2] [--models hdp-gibbs,hdp-cvb,...]
"""
import argparse
import os
import tempfile
import time
import warnings

import bnpcore
from bnpcore import hdp
from bnpcore.corpus import Corpus

try:
    from harness import short_documents
except ImportError:      # imported from elsewhere than benchmarks/
    from benchmarks.harness import short_documents

# short fits: the point is the cost of using a model of realistic size, not its quality
MODELS = {
    "hdp-gibbs": lambda t: hdp.DirectAssignmentGibbs(n_components=50, max_iter=20, burn_in=5, random_state=0,
                                                     n_threads=t),
    "hdp-pcgs": lambda t: hdp.PartiallyCollapsedGibbs(n_components=50, max_iter=20, burn_in=5, random_state=0,
                                                      n_threads=t),
    "hdp-cvb": lambda t: hdp.CollapsedVB(max_iter=3, random_state=0, n_threads=t),
    "hdp-tf-svi": lambda t: hdp.TruncationFreeSVI(n_epochs=1, random_state=0, n_threads=t),
    "hdp-da": lambda t: hdp.DirectAssignmentVB(max_iter=2, random_state=0, n_threads=t),
    "hdp-online-vb": lambda t: hdp.OnlineVB(n_epochs=1, random_state=0, n_threads=t),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    corpus = Corpus.from_token_lists(short_documents())
    print(f"short texts: {corpus.n_docs} documents, {corpus.n_tokens} tokens, {corpus.n_words} words; "
          f"{args.threads} threads; load {os.getloadavg()[0]:.1f}")
    print(f"{'model':14s} {'K':>5s} {'fit s':>7s} {'export s':>9s} {'file MB':>8s} {'+doc_topic MB':>14s}")
    for name in args.models.split(","):
        tick = time.perf_counter()
        model = MODELS[name](args.threads).fit(corpus)
        fit_s = time.perf_counter() - tick
        tick = time.perf_counter()
        model.export_pyldavis(corpus)
        export_s = time.perf_counter() - tick
        with tempfile.TemporaryDirectory() as tmp:
            light = os.path.getsize(model.save(os.path.join(tmp, "m.npz"))) / 2**20
            full = os.path.getsize(model.save(os.path.join(tmp, "m.npz"), doc_topic=True)) / 2**20
        print(f"{name:14s} {model.n_components_:5d} {fit_s:7.1f} {export_s:9.2f} {light:8.1f} {full:14.1f}")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
