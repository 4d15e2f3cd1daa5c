"""Reproduction of Bryant & Sudderth 2012 ([SM]) section 4 with ``hdp.DirectAssignmentVB``
(M. Bryant and E. B. Sudderth, "Truly nonparametric online variational inference
for hierarchical Dirichlet processes", NIPS 2012).

Seven experiments, each a sub-command that prints its table:

``bars``  T-SM-1 and T-SM-2 (Figure 2(a), (d)): the 10 x 10 bars data (20 bars,
          2000 training and 200 test documents of 250 words), oHDP-SM from eight
          initial K in {2, 5, 10, 20, 40, 50, 80, 100} and oHDP (no moves) from
          K = 20 and 50 over eight seeds; final topics, bars recovered (a true bar
          whose ten pixels are the ten most probable of some topic), held-out
          per-word log-likelihood by document completion, and the per-epoch
          trace of accepted splits and merges with the held-out value.
``kos``   T-SM-4 (the analogue of Figure 2(h)): KOS with a fixed 10% of the
          documents held out, oHDP-SM against oHDP from K in {1, 10, 100} for the
          same wall time; held-out vs number of topics over each run, as a table
          and (with matplotlib) a plot.
``bound``  Where the moves do not go on KOS: the batch bound (alpha, gamma learned)
          and held-out value of ``hdp.DirectAssignmentVB`` from random starts of
          5, 10 and 40 topics against a start from the final sample of G-HDP
          (``hdp.DirectAssignmentGibbs``, 300 sweeps), without and with moves,
          for eta = 100 / W (G-HDP's) and 0.5: the many-topic start ends at the
          largest bound. Then the greedy merge path from that start down to 3
          topics (the bound and held-out value at each K).
``start`` Online fits from that G-HDP sample (``fit(X, init_from=...)``) for the
          same wall time, oHDP and oHDP-SM with learning_offset 1, 30 and 300:
          how much of the start each keeps.
``audit``  Why the moves end at a handful of topics on KOS: at the first accepted
          restricted split and merge of each iteration of oHDP-SM from one topic, the gain
          on the minibatch that accepted it against the change of the bound of
          the whole training set (each side with every document's E-step).
``lda``   The mean-field level on the same KOS split: batch variational LDA
          (``lda.StandardVB``, Blei et al. 2003) over a grid of K, alpha and eta
          (held-out and wall time of each), the best setting run three times as
          long, and collapsed variational LDA (``lda.CollapsedVB``, CVB0) at the
          best K and alpha for comparison: what "tuned-LDA quality" is for a
          mean-field fit of the topics, against which oHDP-SM's held-out is read.
``peers`` The same KOS split and time budget for gensim ``HdpModel`` (online VB,
          Wang et al. 2011), tomotopy ``HDPModel`` (collapsed Gibbs), bnpcore's
          G-HDP (``hdp.DirectAssignmentGibbs``) and truncation-free SVI
          (``hdp.TruncationFreeSVI``), and oHDP / oHDP-SM.

The protocol is the same for every system: each test document's tokens are split
80/20 (``Corpus.split_tokens(0.2, random_state=seed)``), the system infers the
document's topic proportions from the 80% with its topics fixed, and the 20% are
scored per word with ``bnpcore.evaluation.token_log_likelihood``.

    OMP_NUM_THREADS=1 python benchmarks/repro_003.py bars --epochs 20
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py bars --bars-inits 2,20 --repeats 0 --split-inits minibatch,divide
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py kos --seconds 30 --plot kos_sm.png
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py peers --seconds 30
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py bound
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py start --seconds 30
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py audit --seconds 60
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py lda
    OMP_NUM_THREADS=1 python benchmarks/repro_003.py kos --max-merges 0 --split-inits minibatch,divide \
        --max-splits 3 --split-candidates 5
"""
import argparse
import contextlib
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import _bow, _tomotopy_extract, _words  # noqa: E402
from harness import normalize_rows  # noqa: E402

from bnpcore import hdp, lda  # noqa: E402
from bnpcore.datasets import load_kos, make_bars  # noqa: E402
from bnpcore.evaluation import token_log_likelihood  # noqa: E402
from bnpcore.inference.online import Minibatch  # noqa: E402
from bnpcore.models import hdp_da_moves as da_moves  # noqa: E402
from bnpcore.models.hdp_da import DAState  # noqa: E402

BARS_INITS = (2, 5, 10, 20, 40, 50, 80, 100)


def completion(test, seed):
    """(observed 80%, held-out 20%) of every test document."""
    return test.split_tokens(0.2, random_state=seed)


def bars_recovered(topics, truth):
    """True bars that are the ten most probable pixels of some topic."""
    found = {frozenset(np.argsort(-t)[:10]) for t in topics}
    return sum(frozenset(np.flatnonzero(bar > bar.min())) in found for bar in truth)


def run_bars(args):
    data = make_bars("sm", random_state=args.seed)
    observed, heldout = completion(data.test, args.seed)
    runs = [("oHDP-SM", K, True, args.seed) for K in args.bars_inits]
    runs += [("oHDP", K, False, args.seed + s) for K in (20, 50) for s in range(args.repeats)]
    print(f"# bars: {args.epochs} epochs, minibatch {args.batch_size}, eta 0.5, alpha = gamma = 1 learned, "
          f"split_inits={args.split_inits}")
    print(f"{'method':8} {'K0':>4} {'seed':>4} {'K':>4} {'bars':>5} {'heldout':>9} {'seconds':>8}  "
          "splits/merges per epoch (held-out)")
    per_epoch = math.ceil(data.train.n_docs / args.batch_size)
    for name, K, sm, seed in runs:
        est = hdp.DirectAssignmentVB(n_components=K, split_merge=sm, eta=0.5, batch_size=args.batch_size,
                                     max_iter=args.epochs, moves={"split_inits": args.split_inits}, random_state=seed)
        est.fit(data.train, heldout=data.test, eval_every=range(per_epoch, args.epochs * per_epoch + 1, per_epoch))
        h = est.history_
        trace = []
        for e in range(args.epochs):
            chunk = h[e * per_epoch:(e + 1) * per_epoch]
            trace.append(f"{sum(r['splits'] for r in chunk)}/{sum(r['merges'] for r in chunk)}"
                         f"({chunk[-1].get('heldout_loglik', float('nan')):.3f})")
        print(f"{name:8} {K:4d} {seed:4d} {est.n_components_:4d} "
              f"{bars_recovered(est.topics_, data.topics):5d} "
              f"{est.heldout_log_likelihood(observed, heldout):9.4f} {h[-1]['fit_seconds']:8.1f}  {' '.join(trace)}",
              flush=True)


def kos_split(seed):
    train, test = load_kos().split_documents(0.1, random_state=seed)
    return train, test, *completion(test, seed)


def direct_assignment(K, sm, args):
    return hdp.DirectAssignmentVB(n_components=K, split_merge=sm, eta=args.eta, batch_size=args.batch_size,
                                  max_iter=10 ** 6, random_state=args.seed,
                                  moves={"split_inits": args.split_inits, "max_splits": args.max_splits,
                                         "max_merges": args.max_merges, "split_candidates": args.split_candidates})


def run_kos(args):
    train, test, observed, heldout = kos_split(args.seed)
    every = max(1, int(args.eval_seconds))
    print(f"# KOS: {args.seconds:g} s per run, minibatch {args.batch_size}, eta {args.eta:g}; held-out by document "
          "completion")
    print(f"{'method':8} {'K0':>4} {'K':>4} {'heldout':>9} {'iters':>6}  trajectory (K: held-out) every ~{every} s")
    curves = {}
    for K in args.inits:
        for name, sm in (("oHDP-SM", True), ("oHDP", False)):
            est = direct_assignment(K, sm, args)
            points, spent = [], 0.0
            while spent < args.seconds - 1e-9:       # fit in slices of eval_seconds, resuming
                step = min(every, args.seconds - spent)
                est.fit(train, max_seconds=step, resume=bool(points))
                spent = est.history_[-1]["fit_seconds"]
                points.append((spent, est.n_components_, est.heldout_log_likelihood(observed, heldout)))
            curves[(name, K)] = points
            print(f"{name:8} {K:4d} {est.n_components_:4d} {points[-1][2]:9.4f} {len(est.history_):6d}  "
                  + " ".join(f"{k}:{v:.3f}" for _, k, v in points), flush=True)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for (name, K), points in curves.items():
            ax.plot([p[1] for p in points], [p[2] for p in points], "o-" if name == "oHDP-SM" else "x--",
                    label=f"{name}, K0={K}")
        ax.set_xlabel("number of topics")
        ax.set_ylabel("held-out log-likelihood per word")
        ax.set_title(f"KOS, document completion, {args.seconds:g} s per run")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"# plot: {args.plot}")


def run_bound(args):
    """The batch bound where the moves do not go: fits from random starts of K topics against fits started from
    the final sample of G-HDP, then the greedy merge path from that start; alpha and gamma learned."""
    train, test, observed, heldout = kos_split(args.seed)
    sampler = hdp.DirectAssignmentGibbs(n_components=100, max_iter=args.gibbs_sweeps, burn_in=args.gibbs_sweeps - 1,
                                        random_state=args.seed).fit(train)
    etas = args.etas or (sampler.eta_tot / train.n_words, 0.5)
    print(f"# KOS: batch DirectAssignmentVB, alpha and gamma learned, bound = sum of its terms; the G-HDP start is "
          f"its final sample after {args.gibbs_sweeps} sweeps ({sampler.n_components_} topics, its own held-out "
          f"{sampler.heldout_log_likelihood(observed, heldout):.4f})")
    print(f"{'eta':>7} {'start':>12} {'moves':>5} {'iters':>5} {'K':>4} {'bound':>12} {'tokens':>10} {'documents':>10} "
          f"{'topics':>9} {'alpha':>7} {'gamma':>7} {'heldout':>9}")
    for eta in etas:
        runs = [(f"random K={K}", K, None, False, args.bound_iters) for K in (5, 10, 40)]
        runs += [("G-HDP", sampler.n_components_, sampler, sm, args.bound_iters // 10 if sm else args.bound_iters)
                 for sm in (False, True)]
        for label, K, start, sm, iters in runs:
            est = hdp.DirectAssignmentVB(n_components=K, mode="batch", split_merge=sm, eta=eta, max_iter=iters,
                                         tol=None, random_state=args.seed)
            est.fit(train, init_from=start)
            terms = est.history_[-1]["bound"]
            print(f"{eta:7.4f} {label:>12} {'yes' if sm else 'no':>5} {iters:5d} {est.n_components_:4d} "
                  f"{sum(terms.values()):12.0f} {terms['tokens']:10.0f} {terms['documents']:10.0f} "
                  f"{terms['topics']:9.0f} {est.alpha_:7.3f} {est.gamma_:7.2f} "
                  f"{est.heldout_log_likelihood(observed, heldout):9.4f}", flush=True)
    for eta in etas:
        merge_path(sampler, train, eta, observed, heldout, args)


def merge_path(sampler, train, eta, observed, heldout, args):
    """From the G-HDP start (30 batch iterations), merge down to 3 topics: each step merges, of the 60 pairs of
    largest covariance of the documents' topic proportions, the pair whose merge loses least in the bound, then
    runs ``--refits`` batch iterations. Read backwards it is a path of splits from 3 topics up; where the bound
    falls at every merge, each of those splits raises it. Uses the estimator's state (``_init_state``) directly."""
    est = hdp.DirectAssignmentVB(mode="batch", split_merge=False, eta=eta, random_state=args.seed)
    est._init_from = sampler                       # as fit(train, init_from=sampler) starts
    state = est._init_state(train, np.random.default_rng(args.seed))
    for _ in range(30):
        record = state.sweep()
    print(f"\n# greedy merge path from the G-HDP start, eta {eta:.4f}, {args.refits} batch iterations after each merge")
    print(f"{'K':>4} {'merge gain':>11} {'bound':>12} {'alpha':>7} {'heldout':>9}")
    gain, everything = float("nan"), np.arange(train.n_docs)
    while True:
        K = state.n_components
        if K % 5 == 0 or K <= 12 or np.isnan(gain):
            est._set_fitted(state, train)
            print(f"{K:4d} {gain:11.0f} {sum(record['bound'].values()):12.0f} {state.alpha:7.3f} "
                  f"{est.heldout_log_likelihood(observed, heldout):9.4f}", flush=True)
        if K <= 3:
            break
        state.settings["split_merge"] = True          # the E-step keeps the responsibilities the merge reads ...
        local = state.estep(Minibatch(train, everything, state._word_map), warm=state.warm)
        state.settings["split_merge"] = False         # ... and the global step makes no moves of its own
        theta = local.theta[:, :K] / local.theta.sum(axis=1, keepdims=True)
        cov = np.cov(theta, rowvar=False)
        i, j = np.triu_indices(K, 1)
        pairs = np.argsort(-cov[i, j], kind="stable")[:60]
        gain, a, b = max((da_moves.merge_gain(state, local, 1.0, i[p], j[p]), i[p], j[p]) for p in pairs)
        da_moves.apply_merge(state, local, a, b)
        record = state.update(local)
        for _ in range(args.refits):
            record = state.sweep()


class _AuditedState(DAState):
    """oHDP-SM's state that, at the first accepted split (of the restricted
    proposals; a "reassign" split is not audited) and the first accepted merge
    of each iteration, also measures the move's change of the bound of the
    whole training set (every document's E-step under the globals before and
    after): the quantity the minibatch estimate stands for. The moves call
    ``hdp_da_moves.apply_split`` and ``merge_gain``: ``audited_moves`` wraps them."""

    def _whole(self, lam, beta):
        local = self.refit(Minibatch(self.corpus, np.arange(self.corpus.n_docs), self._word_map), lam, beta)
        return local, sum(self.bound(local, 1.0, lam, beta).values())

    def _first(self, kind):
        done = self.audit_seen.setdefault(kind, -1) == self.updates
        self.audit_seen[kind] = self.updates
        return not done


@contextlib.contextmanager
def audited_moves():
    """``hdp_da_moves.apply_split`` and ``merge_gain`` that audit an ``_AuditedState``'s moves."""
    apply_split, merge_gain = da_moves.apply_split, da_moves.merge_gain

    def audited_split(state, local, k, proposal):
        if isinstance(state, _AuditedState) and state._first("split"):
            lam1, lam2 = proposal["lam"]
            lam = np.vstack([state.lam, lam2[None]])
            lam[k] = lam1
            change = state._whole(lam, proposal["beta"])[1] - state._whole(state.lam, state.beta)[1]
            state.audit.append(("split", state.updates, state.n_components, proposal["gain"], change))
        apply_split(state, local, k, proposal)

    def audited_gain(state, local, scale, ka, kb):
        gain = merge_gain(state, local, scale, ka, kb)
        if isinstance(state, _AuditedState) and gain > 0.0 and state._first("merge"):
            whole = state._whole(state.lam, state.beta)[0]
            state.audit.append(("merge", state.updates, state.n_components, gain,
                                merge_gain(state, whole, 1.0, ka, kb)))
        return gain

    da_moves.apply_split, da_moves.merge_gain = audited_split, audited_gain
    try:
        yield
    finally:
        da_moves.apply_split, da_moves.merge_gain = apply_split, merge_gain


def run_audit(args):
    """Accepted moves of oHDP-SM from one topic: their minibatch gain against
    their change of the whole training set's bound."""
    train = kos_split(args.seed)[0]
    est = direct_assignment(1, True, args)
    state = est._init_state(train, np.random.default_rng(args.seed))
    state.__class__ = _AuditedState
    state.audit, state.audit_seen = [], {}
    start = time.perf_counter()
    with audited_moves():
        while time.perf_counter() - start < args.seconds:
            state.sweep()
    print(f"# KOS: oHDP-SM from 1 topic, eta {args.eta:g}, minibatch {args.batch_size}, {state.updates} iterations "
          f"in {args.seconds:g} s (with the audit); the first accepted split and merge of each iteration; "
          f"{state.n_components} topics at the end")
    print(f"{'move':6} {'audited':>7} {'whole gain > 0':>14} {'median minibatch gain':>22} {'median whole gain':>18}")
    for kind in ("split", "merge"):
        rows = np.array([row[3:] for row in state.audit if row[0] == kind]).reshape(-1, 2)
        if len(rows):
            print(f"{kind:6} {len(rows):7d} {int((rows[:, 1] > 0).sum()):14d} {np.median(rows[:, 0]):22.0f} "
                  f"{np.median(rows[:, 1]):18.0f}")


def run_start(args):
    """Online fits started from a G-HDP sample (``fit(X, init_from=...)``): how much of the start each
    learning_offset keeps, with and without moves, eta = G-HDP's 100 / W."""
    train, test, observed, heldout = kos_split(args.seed)
    tick = time.perf_counter()
    sampler = hdp.DirectAssignmentGibbs(n_components=100, max_iter=args.gibbs_sweeps, burn_in=args.gibbs_sweeps - 1,
                                        random_state=args.seed).fit(train)
    gibbs_seconds = time.perf_counter() - tick
    eta = sampler.eta_tot / train.n_words
    print(f"# KOS: online DirectAssignmentVB for {args.seconds:g} s from G-HDP's final sample after "
          f"{args.gibbs_sweeps} sweeps ({gibbs_seconds:.1f} s, {sampler.n_components_} topics, its own held-out "
          f"{sampler.heldout_log_likelihood(observed, heldout):.4f}); eta {eta:.4f}, minibatch {args.batch_size}")
    print(f"{'method':8} {'offset':>6} {'K':>4} {'iters':>6} {'heldout':>9}")
    for name, sm in (("oHDP", False), ("oHDP-SM", True)):
        for offset in args.offsets:
            est = hdp.DirectAssignmentVB(eta=eta, split_merge=sm, learning_offset=offset, batch_size=args.batch_size,
                                         max_iter=10 ** 6, moves={"split_inits": args.split_inits}, random_state=args.seed)
            est.fit(train, init_from=sampler, max_seconds=args.seconds)
            print(f"{name:8} {offset:6g} {est.n_components_:4d} {len(est.history_):6d} "
                  f"{est.heldout_log_likelihood(observed, heldout):9.4f}", flush=True)


def peer_gensim(train, observed, heldout, args):
    from gensim.models import HdpModel
    bow = _bow(train)
    model = HdpModel(bow, dict(enumerate(_words(train))), T=150, K=15, chunksize=256, eta=0.01,
                     max_time=args.seconds, max_chunks=10 ** 6, random_state=args.seed)
    alpha, beta = model.hdp_to_lda()
    model.lda_alpha, model.lda_beta = alpha, beta
    doc_topic = normalize_rows(model.inference(_bow(observed)), empty=alpha)
    return int((beta.max(axis=1) > 0).sum()), token_log_likelihood(doc_topic, beta, heldout)


def peer_tomotopy(train, observed, heldout, args):
    import tomotopy as tp
    words = np.array(_words(train), dtype=object)
    model = tp.HDPModel(initial_k=10, alpha=0.1, eta=0.01, gamma=0.1, seed=args.seed)
    kept = []
    for j, (lo, hi) in enumerate(zip(train.indptr[:-1], train.indptr[1:])):
        if hi > lo:
            model.add_doc(np.repeat(words[train.indices[lo:hi]], train.counts[lo:hi]).tolist())
            kept.append(j)
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        model.train(10, workers=1)
    _, topic_word = _tomotopy_extract(model, kept, train, 0.01)
    docs, rows = [], []
    for j, (lo, hi) in enumerate(zip(observed.indptr[:-1], observed.indptr[1:])):
        if hi > lo:
            docs.append(model.make_doc(np.repeat(words[observed.indices[lo:hi]], observed.counts[lo:hi]).tolist()))
            rows.append(j)
    doc_topic = np.full((observed.n_docs, model.k), 1.0 / model.k)
    if docs:
        inferred, _ = model.infer(docs, workers=1)          # one topic distribution per document
        doc_topic[rows] = np.asarray(inferred)
    return int(sum(model.is_live_topic(k) for k in range(model.k))), \
        token_log_likelihood(normalize_rows(doc_topic), topic_word, heldout)


def run_lda(args):
    """Batch variational LDA over the grid of K, alpha and eta, the best setting three times as long, and CVB0
    at the best K and alpha: the mean-field level of this split."""
    train, _, observed, heldout = kos_split(args.seed)
    print(f"# KOS: batch LDA, fixed alpha and eta, {args.lda_iters} iterations; held-out by document completion")
    print(f"{'method':10} {'K':>4} {'alpha':>6} {'eta':>6} {'iters':>5} {'seconds':>8} {'heldout':>9}", flush=True)

    def row(name, est):
        start = time.perf_counter()
        est.fit(train)
        seconds, value = time.perf_counter() - start, est.heldout_log_likelihood(observed, heldout)
        print(f"{name:10} {est.n_components:4d} {est.alpha:6.2f} {est.eta:6.2f} {est.max_iter:5d} {seconds:8.1f} "
              f"{value:9.4f}", flush=True)
        return value

    grid = {(K, a, e): row("StandardVB", lda.StandardVB(n_components=K, alpha=a, eta=e, max_iter=args.lda_iters,
                                                         tol=None, random_state=args.seed))
            for K in args.lda_topics for a in args.lda_alphas for e in args.lda_etas}
    K, a, e = max(grid, key=grid.get)
    row("StandardVB", lda.StandardVB(n_components=K, alpha=a, eta=e, max_iter=3 * args.lda_iters, tol=None,
                                     random_state=args.seed))
    for e in args.lda_etas:
        row("CVB0", lda.CollapsedVB(n_components=K, alpha=a, eta=e, order=0, max_iter=args.lda_iters, tol=None,
                                    random_state=args.seed))


def run_peers(args):
    train, test, observed, heldout = kos_split(args.seed)
    print(f"# KOS, {args.seconds:g} s of training per system, one thread; held-out by document completion")
    print(f"{'system':9} {'method':34} {'topics':>6} {'heldout':>9} {'seconds':>8}")
    rows = []
    for name, fn in (("gensim", peer_gensim), ("tomotopy", peer_tomotopy)):
        try:
            start = time.perf_counter()
            topics, value = fn(train, observed, heldout, args)
            rows.append((name, "HdpModel online VB" if name == "gensim" else "HDPModel collapsed Gibbs", topics,
                         value, time.perf_counter() - start))
        except ImportError:
            print(f"# {name} not installed: skipped")
    ours = [("G-HDP (DirectAssignmentGibbs)", hdp.DirectAssignmentGibbs(n_components=100, eta_tot=100.0,
                                                                         max_iter=10 ** 6, burn_in=10 ** 6 - 1,
                                                                         random_state=args.seed)),
            ("TF-SVI (TruncationFreeSVI)", hdp.TruncationFreeSVI(eta=0.01, batch_size=100, n_epochs=10 ** 4,
                                                                 random_state=args.seed))]
    ours += [(f"{name} K0={K} (DirectAssignmentVB)", direct_assignment(K, sm, args))
             for K in args.inits for name, sm in (("oHDP-SM", True), ("oHDP", False))]
    for name, est in ours:
        start = time.perf_counter()
        est.fit(train, max_seconds=args.seconds)
        rows.append(("bnpcore", name, est.n_components_, est.heldout_log_likelihood(observed, heldout),
                     time.perf_counter() - start))
    for system, method, topics, value, secs in rows:
        print(f"{system:9} {method:34} {topics:6d} {value:9.4f} {secs:8.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=("bars", "kos", "peers", "bound", "start", "audit", "lda"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=20, help="bars: passes over the training documents")
    parser.add_argument("--repeats", type=int, default=8, help="bars: seeds of each oHDP baseline")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0, help="kos, peers, start, audit: training time per run")
    parser.add_argument("--eta", type=float, default=0.5, help="kos, peers: eta of oHDP and oHDP-SM")
    parser.add_argument("--max-splits", type=int, default=1,
                        help="kos, peers: splits accepted per iteration by oHDP-SM (0: merges only)")
    parser.add_argument("--max-merges", type=int, default=None,
                        help="kos, peers: merges accepted per iteration by oHDP-SM (default: no cap; 0: splits only)")
    parser.add_argument("--split-candidates", type=int, default=10,
                        help="kos, peers: topics tried as splits per iteration by oHDP-SM")
    parser.add_argument("--eval-seconds", type=float, default=5.0, help="kos: training time between evaluations")
    parser.add_argument("--inits", type=lambda s: [int(v) for v in s.split(",")], default=[1, 10, 100],
                        help="kos: initial numbers of topics")
    parser.add_argument("--bars-inits", type=lambda s: [int(v) for v in s.split(",")], default=list(BARS_INITS),
                        help="bars: initial numbers of topics of oHDP-SM")
    parser.add_argument("--split-inits", type=lambda s: tuple(s.split(",")),
                        default=("minibatch", "divide", "reassign"),
                        help="bars, kos: the split proposals of oHDP-SM (comma-separated)")
    parser.add_argument("--gibbs-sweeps", type=int, default=300, help="bound, start: sweeps of the G-HDP start")
    parser.add_argument("--offsets", type=lambda s: [float(v) for v in s.split(",")], default=[1.0, 30.0, 300.0],
                        help="start: values of learning_offset")
    parser.add_argument("--bound-iters", type=int, default=200,
                        help="bound: batch iterations without moves (a tenth of them with moves)")
    parser.add_argument("--refits", type=int, default=2, help="bound: batch iterations after each merge of the path")
    parser.add_argument("--etas", type=lambda s: [float(v) for v in s.split(",")],
                        help="bound: values of eta (default: G-HDP's 100 / W and 0.5)")
    parser.add_argument("--lda-topics", type=lambda s: [int(v) for v in s.split(",")], default=[30, 50, 80],
                        help="lda: values of K")
    parser.add_argument("--lda-alphas", type=lambda s: [float(v) for v in s.split(",")], default=[0.1, 0.3, 0.5],
                        help="lda: values of alpha")
    parser.add_argument("--lda-etas", type=lambda s: [float(v) for v in s.split(",")], default=[0.1, 0.3, 0.5],
                        help="lda: values of eta")
    parser.add_argument("--lda-iters", type=int, default=100, help="lda: batch iterations of each grid fit")
    parser.add_argument("--plot", help="kos: save held-out vs topics to this image (needs matplotlib)")
    args = parser.parse_args(argv)
    {"bars": run_bars, "kos": run_kos, "peers": run_peers, "bound": run_bound,
     "start": run_start, "audit": run_audit, "lda": run_lda}[args.experiment](args)


if __name__ == "__main__":
    main()
