"""What a user waits for after a fit, on a corpus of short texts
(``harness.short_documents``: 50,000 documents, 2.7 M tokens, 37,000 words):
``export_pyldavis`` on the training documents (its ``document_topics`` is the
estimator's ``transform``), and the size of the saved model file with and
without ``doc_topic_``, for each HDP estimator after a short fit.

``--defaults`` fits the estimators with their default constructors instead
(``random_state=0`` and ``n_threads`` only). ``--cache DIR`` saves each fitted
model to ``DIR/<model>[-defaults].npz`` and loads it on the next run instead of
fitting, so that two versions of the code time the export of the same model.
The export is timed ``--repeats`` times: the shortest wall time, and the CPU
time (``time.process_time``, every thread of the process) of that run; on a
machine shared with other jobs the CPU time divided by the threads is the
better guide to the wall time on an idle one.

Usage::

    python benchmarks/bench_user_path.py [--threads 2] [--models hdp-gibbs,hdp-cvb,...] [--defaults]
                                         [--cache DIR] [--repeats 1]
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
DEFAULTS = {
    "hdp-gibbs": hdp.DirectAssignmentGibbs, "hdp-pcgs": hdp.PartiallyCollapsedGibbs, "hdp-cvb": hdp.CollapsedVB,
    "hdp-tf-svi": hdp.TruncationFreeSVI, "hdp-da": hdp.DirectAssignmentVB, "hdp-online-vb": hdp.OnlineVB,
}


def fitted(name, corpus, args):
    """(model, fit seconds or None when loaded from the cache)."""
    path = args.cache and os.path.join(args.cache, name + ("-defaults" if args.defaults else "") + ".npz")
    if path and os.path.exists(path):
        model = bnpcore.load(path)
        model.n_threads = args.threads
        return model, None
    make = (lambda t: DEFAULTS[name](random_state=0, n_threads=t)) if args.defaults else MODELS[name]
    tick = time.perf_counter()
    model = make(args.threads).fit(corpus)
    fit_s = time.perf_counter() - tick
    if path:
        os.makedirs(args.cache, exist_ok=True)
        model.save(path, doc_topic=True)     # as fitted: the samplers' export reuses doc_topic_
    return model, fit_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--defaults", action="store_true", help="default constructors (random_state=0)")
    parser.add_argument("--cache", help="directory of fitted models: load if present, else fit and save")
    parser.add_argument("--repeats", type=int, default=1, help="export runs (the shortest is shown)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    corpus = Corpus.from_token_lists(short_documents())
    print(f"short texts: {corpus.n_docs} documents, {corpus.n_tokens} tokens, {corpus.n_words} words; "
          f"{args.threads} threads; {'default constructors' if args.defaults else 'short fits'}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'model':14s} {'K':>5s} {'used':>5s} {'fit s':>7s} {'export s':>9s} {'cpu s':>6s} {'file MB':>8s} "
          f"{'+doc_topic MB':>14s}")
    for name in args.models.split(","):
        model, fit_s = fitted(name, corpus, args)
        runs = []
        for _ in range(args.repeats):
            tick, cpu = time.perf_counter(), time.process_time()
            data = model.export_pyldavis(corpus)
            runs.append((time.perf_counter() - tick, time.process_time() - cpu))
        export_s, cpu_s = min(runs)
        with tempfile.TemporaryDirectory() as tmp:
            light = os.path.getsize(model.save(os.path.join(tmp, "m.npz"))) / 2**20
            full = os.path.getsize(model.save(os.path.join(tmp, "m.npz"), doc_topic=True)) / 2**20
        fit = "cached" if fit_s is None else f"{fit_s:7.1f}"
        print(f"{name:14s} {model.n_components_:5d} {data['doc_topic_dists'].shape[1]:5d} {fit:>7s} {export_s:9.2f} "
              f"{cpu_s:6.2f} {light:8.1f} {full:14.1f}")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
