"""The topic-model libraries people use today, on the same KOS token split and
scored by the same bnpcore function as bnpcore's estimators.

    OMP_NUM_THREADS=1 python benchmarks/bench_peers.py                  # all peers
    python benchmarks/bench_peers.py --only tomotopy-lda lda --sweeps 500
    python benchmarks/bench_peers.py --bnpcore hdp-cvb --bnpcore-iterations 50   # add registered models

Peers (``pip install .[bench]``): gensim ``LdaModel`` (online VB) and
``HdpModel`` (online VB, Wang et al. 2011), scikit-learn
``LatentDirichletAllocation`` (batch VB), tomotopy ``LDAModel`` and
``HDPModel`` (collapsed Gibbs), ``lda.LDA`` (collapsed Gibbs). A missing one is
skipped with a message. LDA peers share K, alpha = 0.1 and eta = 0.01.

What is scored (``harness.timed_row``): the topic-word estimate of each system
(posterior mean; for tomotopy the final sample's counts smoothed by eta over the
full vocabulary) and its document-topic estimate for the observed tokens of each
document -- variational systems infer it after training (gensim ``inference``,
sklearn ``transform``), the samplers report the final sample of the training
documents (tomotopy ``get_topic_dist``, lda ``doc_topic_``). Held-out tokens
are scored with ``bnpcore.evaluation.token_log_likelihood``.

Also usable as asv-style benchmarks (``TimePeerFit``).
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (bnpcore_row, normalize_rows, print_table, threads_note,  # noqa: E402
                     timed_row, token_split)


def _words(corpus):
    return corpus.vocabulary or [str(w) for w in range(corpus.n_words)]


def _bow(corpus):
    """gensim's corpus format: one list of (word id, count) per document."""
    return [list(zip(corpus.indices[lo:hi].tolist(), corpus.counts[lo:hi].tolist()))
            for lo, hi in zip(corpus.indptr[:-1], corpus.indptr[1:])]


def gensim_lda(observed, heldout, cfg):
    from gensim.models import LdaModel
    bow = _bow(observed)
    id2word = dict(enumerate(_words(observed)))

    def fit():
        return LdaModel(bow, num_topics=cfg.topics, id2word=id2word, alpha=0.1, eta=0.01, passes=cfg.passes,
                        chunksize=2000, iterations=50, eval_every=None, random_state=cfg.seed, dtype=np.float64)

    def extract(model):
        return normalize_rows(model.inference(bow)[0]), model.get_topics()
    return timed_row("gensim", "LdaModel online VB", f"K={cfg.topics}, {cfg.passes} passes", 1,
                     fit, extract, observed, heldout, cfg.passes)


def gensim_hdp(observed, heldout, cfg):
    from gensim.models import HdpModel
    bow = _bow(observed)
    id2word = dict(enumerate(_words(observed)))
    chunksize = 256
    max_chunks = cfg.passes * math.ceil(observed.n_docs / chunksize)

    def fit():
        return HdpModel(bow, id2word, T=150, K=15, chunksize=chunksize, max_chunks=max_chunks, eta=0.01,
                        random_state=cfg.seed)

    def extract(model):
        alpha, beta = model.hdp_to_lda()
        model.lda_alpha, model.lda_beta = alpha, beta
        return normalize_rows(model.inference(bow), empty=alpha), beta
    return timed_row("gensim", "HdpModel online VB", f"T=150, {cfg.passes} passes", 1,
                     fit, extract, observed, heldout, cfg.passes)


def sklearn_lda(observed, heldout, cfg):
    from sklearn.decomposition import LatentDirichletAllocation
    X = observed.matrix

    def fit():
        return LatentDirichletAllocation(n_components=cfg.topics, doc_topic_prior=0.1, topic_word_prior=0.01,
                                         learning_method="batch", max_iter=cfg.passes, random_state=cfg.seed,
                                         n_jobs=cfg.threads).fit(X)

    def extract(model):
        return model.transform(X), normalize_rows(model.components_)
    return timed_row("sklearn", "LDA batch VB", f"K={cfg.topics}, {cfg.passes} iterations", cfg.threads,
                     fit, extract, observed, heldout, cfg.passes)


def _tomotopy_fit(model, observed, cfg):
    """Add the observed documents (as word strings) and train; returns the
    indices of the documents tomotopy kept (it drops empty ones)."""
    words = np.array(_words(observed), dtype=object)
    kept = []
    for j, (lo, hi) in enumerate(zip(observed.indptr[:-1], observed.indptr[1:])):
        if hi > lo:
            model.add_doc(np.repeat(words[observed.indices[lo:hi]], observed.counts[lo:hi]).tolist())
            kept.append(j)
    model.train(cfg.sweeps, workers=cfg.threads)
    return kept


def _tomotopy_extract(model, kept, observed, eta):
    """Document-topic rows for every observed document (prior mean where tomotopy
    has none) and topic-word estimates (n_kw + eta) / (n_k + W eta) over the full
    vocabulary, recovered from tomotopy's (n_kw + eta) / (n_k + V_used eta)."""
    k = model.k
    doc_topic = np.full((observed.n_docs, k), 1.0 / k)
    doc_topic[kept] = [doc.get_topic_dist() for doc in model.docs]   # (indexing docs is unreliable)
    n_k = np.asarray(model.get_count_by_topics(), dtype=float)
    used = list(model.used_vocabs)
    dist = np.array([model.get_topic_word_dist(t) for t in range(k)])
    n_kw_used = np.maximum(dist * (n_k[:, None] + len(used) * eta) - eta, 0.0)
    index = {w: i for i, w in enumerate(_words(observed))}
    n_kw = np.zeros((k, observed.n_words))
    n_kw[:, [index[w] for w in used]] = n_kw_used
    return doc_topic, normalize_rows(n_kw + eta)


def tomotopy_lda(observed, heldout, cfg):
    import tomotopy as tp

    def fit():
        model = tp.LDAModel(k=cfg.topics, alpha=0.1, eta=0.01, seed=cfg.seed)
        model.kept = _tomotopy_fit(model, observed, cfg)
        return model
    return timed_row("tomotopy", "LDAModel CGS", f"K={cfg.topics}, {cfg.sweeps} sweeps", cfg.threads, fit,
                     lambda m: _tomotopy_extract(m, m.kept, observed, 0.01), observed, heldout, cfg.sweeps)


def tomotopy_hdp(observed, heldout, cfg):
    import tomotopy as tp

    def fit():
        model = tp.HDPModel(initial_k=10, alpha=0.1, eta=0.01, gamma=0.1, seed=cfg.seed)
        model.kept = _tomotopy_fit(model, observed, cfg)
        return model
    return timed_row("tomotopy", "HDPModel CGS", f"K0=10, {cfg.sweeps} sweeps", cfg.threads, fit,
                     lambda m: _tomotopy_extract(m, m.kept, observed, 0.01), observed, heldout, cfg.sweeps)


def lda_cgs(observed, heldout, cfg):
    import logging

    import lda
    logging.getLogger("lda").setLevel(logging.WARNING)

    def fit():
        return lda.LDA(n_topics=cfg.topics, n_iter=cfg.sweeps, alpha=0.1, eta=0.01, random_state=cfg.seed,
                       refresh=10 ** 9).fit(observed.matrix)
    return timed_row("lda", "LDA CGS", f"K={cfg.topics}, {cfg.sweeps} sweeps", 1, fit,
                     lambda m: (m.doc_topic_, m.topic_word_), observed, heldout, cfg.sweeps)


PEERS = {
    "gensim-lda": ("gensim", gensim_lda),
    "gensim-hdp": ("gensim", gensim_hdp),
    "sklearn-lda": ("sklearn", sklearn_lda),
    "tomotopy-lda": ("tomotopy", tomotopy_lda),
    "tomotopy-hdp": ("tomotopy", tomotopy_hdp),
    "lda": ("lda", lda_cgs),
}


def installed(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


def run_peers(names, observed, heldout, cfg, out=sys.stdout):
    """Rows of the named peers that are installed (a message for the others)."""
    rows = []
    for name in names:
        module, run = PEERS[name]
        if not installed(module):
            print(f"skipping {name}: {module} is not installed (pip install .[bench])", file=out)
            continue
        print(f"running {name} ...", file=out, flush=True)
        rows.append(run(observed, heldout, cfg))
    return rows


def run_registered(names, observed, heldout, cfg):
    """Rows of bnpcore models registered in ``bnpcore.registry`` (KOS defaults)."""
    from bnpcore.registry import get as get_model
    rows = []
    for name in names:
        spec = get_model(name)
        params = spec.load_class()._param_names()
        overrides = {"random_state": cfg.seed} if "random_state" in params else {}
        if cfg.bnpcore_iterations is not None:
            if spec.iteration_param() is None:
                raise ValueError(f"model {name} has no iteration parameter")
            overrides[spec.iteration_param()] = cfg.bnpcore_iterations
        if "n_threads" in params:
            overrides["n_threads"] = cfg.threads
        print(f"running bnpcore {name} ...", flush=True)
        est = spec.make(**overrides)
        shown = [p for p in ("n_components", spec.iteration_param()) if p in params]
        settings = ", ".join(f"{p}={getattr(est, p)}" for p in shown) or None
        rows.append(bnpcore_row(est, observed, heldout, algorithm=name, settings=settings))
    return rows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="kos", help="'kos', 'bars' or a UCI docword file (as bnpcore fit)")
    p.add_argument("--vocab", help="UCI vocabulary file")
    p.add_argument("--topics", type=int, default=50, help="K of the LDA peers (default 50)")
    p.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps of the samplers (default 200)")
    p.add_argument("--passes", type=int, default=10, help="passes / iterations of the VB peers (default 10)")
    p.add_argument("--threads", type=int, default=1, help="threads where a peer has the option (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", nargs="+", choices=sorted(PEERS), default=list(PEERS), metavar="PEER",
                   help=f"peers to run (default all: {', '.join(PEERS)})")
    p.add_argument("--bnpcore", nargs="*", default=[], metavar="MODEL",
                   help="registered bnpcore models to run first (bnpcore list)")
    p.add_argument("--bnpcore-iterations", type=int, help="iterations of the bnpcore models (default: registry's)")
    return p.parse_args(argv)


def main(argv=None):
    cfg = parse_args(argv)
    corpus, observed, heldout = token_split(cfg.data, cfg.vocab, seed=cfg.seed)
    print(f"{cfg.data}: {corpus.n_docs} documents, {corpus.n_words} words; {observed.n_tokens} training and "
          f"{heldout.n_tokens} held-out tokens (10% of each document); {threads_note()}")
    rows = run_registered(cfg.bnpcore, observed, heldout, cfg) + run_peers(cfg.only, observed, heldout, cfg)
    print()
    print_table(rows)
    return rows


class TimePeerFit:
    """asv-style: training time of each peer on the KOS split (modest settings)."""
    params = sorted(PEERS)
    param_names = ["peer"]
    timeout = 600

    def setup(self, peer):
        module, self.run = PEERS[peer]
        if not installed(module):
            raise NotImplementedError(f"{module} not installed")   # asv: skip
        _, self.observed, self.heldout = token_split("kos")
        self.cfg = parse_args(["--sweeps", "50", "--passes", "3"])

    def time_fit(self, peer):
        self.run(self.observed, self.heldout, self.cfg)


if __name__ == "__main__":
    main()
