"""Reproduce [CVHDP] (Teh, Kurihara & Welling 2007) on KOS.

90% of each document's words for training, 10% held out (split_tokens(0.1,
mode="doc_tokens")); topic prior eta_tot = 100, tau_w = 1/W fixed for every
method. Runs, per seed:

* CV-LDA (CollapsedVB with learn_weights=False, alpha = 0.1, document prior
  0.1/K per topic, E22) and CV-HDP (learned alpha, gamma, sticks) at K in
  {40, 80, 120}: held-out per-word log-likelihood (eq 16) and the train bound (18);
* V-LDA (lda.StandardVB) and G-LDA (lda.CollapsedGibbs) at the same K with the
  same priors (alpha_k = 0.1/K, eta_w = 100/W): held-out by eq 16 from the fitted
  expected counts (V-LDA, with its bound) and by eq 17 averaged over the samples
  after burn-in (G-LDA);
* G-HDP1 and G-HDP100 (DirectAssignmentGibbs from 1 / 100 topics): held-out
  per-word log-likelihood averaged over samples after burn-in (eq 17), topics found;
* with ``--fig3``, Fig. 3: CV-LDA and CV-HDP started from the last G-HDP100
  state, against the same methods from the random initialisation at the same K.

``--ghdp-presets`` runs only G-HDP1 and G-HDP100, once with the estimator's
defaults for ``--gibbs-iter`` sweeps (``--burn-in``) and once as
``DirectAssignmentGibbs.paper_preset`` (a budget of steps, iterations x topics),
and prints held-out, topic counts and the topic-count trace every
``--trace-every`` sweeps (the command line first, for a results file):

    OMP_NUM_THREADS=1 python benchmarks/repro_001.py --ghdp-presets --seeds 3 --out ghdp.json

Results are appended to a JSON file as they arrive (a rerun continues it) and
summarised as a table (mean and standard error over seeds) beside the paper's
statements (its Figure 2 gives curves, not numbers, except the G-HDP topic counts).

    OMP_NUM_THREADS=1 python benchmarks/repro_001.py --seeds 2 --out repro_001.json
"""
import argparse
import json
import os
import shlex
import sys
import time

import numpy as np

from bnpcore.cli import load_data
from bnpcore.hdp import CollapsedVB, DirectAssignmentGibbs
from bnpcore.lda import CollapsedGibbs, StandardVB

# [CVHDP] Figure 2 caption: G-HDP topic counts on KOS (mean +- s.e. over 10 restarts)
PAPER_TOPICS = {"G-HDP1": "113.2 ± 11.4", "G-HDP100": "168.3 ± 3.9"}


def run_cv(name, train, test, K, n_iter, seed, init_from=None):
    lda = name.startswith("CV-LDA")
    kw = dict(alpha=0.1, learn_weights=False) if lda else {}
    t = time.perf_counter()
    m = CollapsedVB(n_components=K, init="random", max_iter=n_iter, eta_tot=100.0, random_state=seed, **kw)
    m.fit(train, init_from=init_from)
    return {"method": name, "K": m.n_components_, "seed": seed, "heldout": m.heldout_log_likelihood(train, test), "bound": m.bound_,
            "bound_per_token": m.bound_ / train.n_tokens, "topics": m.n_active_, "alpha": m.alpha_,
            "gamma": m.gamma_, "iterations": n_iter, "seconds": time.perf_counter() - t}


def run_lda(name, train, test, K, n_iter, seed):
    """V-LDA or G-LDA with [CVHDP]'s LDA priors: alpha pi_k = 0.1 / K, eta_tot tau_w = 100 / W;
    G-LDA averages the samples of its second half."""
    prior = dict(n_components=K, alpha=0.1 / K, eta=100.0 / train.n_words, max_iter=n_iter, random_state=seed)
    m = StandardVB(tol=0.0, n_threads=1, **prior) if name == "V-LDA" else CollapsedGibbs(burn_in=n_iter // 2, **prior)
    t = time.perf_counter()
    m.fit(train, heldout=test, eval_every=n_iter)
    last = m.history_[-1]
    bound = sum(last["bound"].values()) if isinstance(last.get("bound"), dict) else last.get("bound")
    return {"method": name, "K": K, "seed": seed, "heldout": last["heldout_loglik"], "bound": bound,
            "bound_per_token": None if bound is None else bound / train.n_tokens, "topics": K,
            "iterations": len(m.history_), "seconds": time.perf_counter() - t}


def run_gibbs(name, train, test, init_topics, n_iter, burn_in, seed):
    t = time.perf_counter()
    m = DirectAssignmentGibbs(n_components=init_topics, max_iter=n_iter, burn_in=burn_in, eta_tot=100.0,
                              random_state=seed).fit(train, heldout=test)
    row = {"method": name, "K": init_topics, "seed": seed, "heldout": m.heldout_loglik_, "bound": None,
           "topics": m.n_components_, "alpha": m.alpha_, "gamma": m.gamma_, "iterations": n_iter,
           "seconds": time.perf_counter() - t,
           "topics_trace": [h["n_components"] for h in m.history_[::max(1, n_iter // 20)]]}
    return row, m


def run_ghdp_preset(preset, train, test, k0, n_iter, burn_in, seed):
    """G-HDP from ``k0`` topics: the estimator's defaults for ``n_iter`` sweeps, or its paper preset."""
    if preset == "paper":
        m = DirectAssignmentGibbs.paper_preset(k0, random_state=seed)
    else:
        m = DirectAssignmentGibbs(n_components=k0, max_iter=n_iter, burn_in=burn_in, random_state=seed)
    t = time.perf_counter()
    m.fit(train, heldout=test)
    h = m.history_
    return {"method": f"G-HDP{k0} {preset}", "K": k0, "seed": seed, "heldout": m.heldout_loglik_,
            "topics": m.n_components_, "alpha": m.alpha_, "gamma": m.gamma_, "iterations": len(h),
            "burn_in": m.burn_in, "steps": h[-1]["steps"], "seconds": time.perf_counter() - t,
            "topics_trace": [r["n_components"] for r in h], "steps_trace": [r["steps"] for r in h]}


def _mean_se(values):
    v = np.asarray(values, dtype=float)
    return v.mean(), (v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan"))


def summarise_presets(rows, every):
    """Held-out and topic counts per preset, then every run's topic-count trace."""
    budget = DirectAssignmentGibbs.paper_preset().max_steps
    print(f"{'run':22} {'seeds':>5} {'test ll/word':>18} {'topics':>14} {'sweeps':>7} {'steps':>7} "
          f"{'s/run':>6}  paper topics")
    groups = {}
    for r in rows:
        groups.setdefault(r["method"], []).append(r)
    for method, rs in sorted(groups.items()):
        ll, k = _mean_se([r["heldout"] for r in rs]), _mean_se([r["topics"] for r in rs])
        print(f"{method:22} {len(rs):5d} {ll[0]:9.4f} ± {ll[1]:.4f} {k[0]:7.1f} ± {k[1]:4.1f} "
              f"{np.mean([r['iterations'] for r in rs]):7.0f} {np.mean([r['steps'] for r in rs]):7.0f} "
              f"{np.mean([r['seconds'] for r in rs]):6.0f}  {PAPER_TOPICS.get(method.split()[0], '')}")
    print(f"\nTopics every {every} sweeps (per seed); 'at budget': topics when the steps first reach the "
          f"paper preset's {budget}; 'last 100': change over the last 100 sweeps")
    for r in sorted(rows, key=lambda r: (r["method"], r["seed"])):
        trace, steps = r["topics_trace"], np.array(r["steps_trace"])
        at = trace[int(np.searchsorted(steps, budget))] if steps[-1] >= budget else "-"
        last = trace[-1] - trace[max(0, len(trace) - 101)]
        points = " ".join(str(trace[i - 1]) for i in range(every, len(trace) + 1, every))
        print(f"{r['method']:22} seed {r['seed']}: at budget {at}, last 100 {last:+d}, trace {points}")


def summarise(rows):
    groups = {}
    for r in rows:
        # G-HDP and the Fig. 3 runs (K = the G-HDP100 state's topics) are grouped over seeds
        fixed_k = not (r["method"].startswith("G-HDP") or "fig3" in r["method"])
        groups.setdefault((r["method"], r["K"] if fixed_k else ""), []).append(r)
    print(f"{'method':24} {'K':>4} {'seeds':>5} {'test ll/word':>18} {'train bound/token':>20} {'topics':>14} "
          f"{'s/run':>7}  paper topics")
    means = {}
    for (method, K), rs in groups.items():
        def ms(key):
            v = np.array([r[key] for r in rs if r.get(key) is not None], dtype=float)
            if not v.size:
                return "-"
            se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
            means[method, K, key] = v.mean()
            return f"{v.mean():.4f} ± {se:.4f}"
        topics = np.array([r["topics"] for r in rs], dtype=float)
        tse = topics.std(ddof=1) / np.sqrt(topics.size) if topics.size > 1 else float("nan")
        print(f"{method:24} {str(K):>4} {len(rs):5d} {ms('heldout'):>18} {ms('bound_per_token'):>20} "
              f"{topics.mean():7.1f} ± {tse:4.1f} {np.mean([r['seconds'] for r in rs]):7.0f}  "
              f"{PAPER_TOPICS.get(method, '')}")
    print("\n[CVHDP] statements (Figure 2, section 4) against the means above:")
    ks = sorted({K for (_, K, _) in means if K != ""})

    def check(text, a, b):
        if a in means and b in means:
            print(f"  {text}: {means[a]:.4f} vs {means[b]:.4f}  ({'yes' if means[a] > means[b] else 'NO'})")
    for K in ks:
        check(f"K={K} test: CV-HDP > CV-LDA", ("CV-HDP", K, "heldout"), ("CV-LDA", K, "heldout"))
        check(f"K={K} bound: CV-HDP > CV-LDA", ("CV-HDP", K, "bound_per_token"), ("CV-LDA", K, "bound_per_token"))
        check(f"K={K} test: CV-LDA > V-LDA (Teh et al. 2006)", ("CV-LDA", K, "heldout"), ("V-LDA", K, "heldout"))
        check(f"K={K} bound: CV-LDA > V-LDA (Teh et al. 2006)", ("CV-LDA", K, "bound_per_token"),
              ("V-LDA", K, "bound_per_token"))
        check(f"K={K} test: G-HDP100 > CV-HDP", ("G-HDP100", "", "heldout"), ("CV-HDP", K, "heldout"))
        check(f"K={K} test: G-HDP100 > G-LDA", ("G-HDP100", "", "heldout"), ("G-LDA", K, "heldout"))
    check("test: G-HDP100 > G-HDP1", ("G-HDP100", "", "heldout"), ("G-HDP1", "", "heldout"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--ks", type=int, nargs="+", default=[40, 80, 120])
    ap.add_argument("--cv-iter", type=int, default=60)
    ap.add_argument("--gibbs-iter", type=int, default=600)
    ap.add_argument("--burn-in", type=int, default=200)
    ap.add_argument("--lda-iter", type=int, default=300, help="sweeps of G-LDA (the first half burn-in)")
    ap.add_argument("--vlda-iter", type=int, default=60, help="iterations of V-LDA")
    ap.add_argument("--fig3", action="store_true", help="also the Fig. 3 runs (G-HDP100 initialisation)")
    ap.add_argument("--fig3-iter", type=int, default=40)
    ap.add_argument("--ghdp-presets", action="store_true",
                    help="only G-HDP1/G-HDP100 with the defaults and with paper_preset (see above)")
    ap.add_argument("--trace-every", type=int, default=50, help="sweeps between trace points (--ghdp-presets)")
    ap.add_argument("--out", default="repro_001.json")
    ap.add_argument("--summary-only", action="store_true", help="print the table of an existing --out file")
    args = ap.parse_args(argv)
    rows = json.load(open(args.out)) if os.path.exists(args.out) else []
    if args.ghdp_presets:
        print("# OMP_NUM_THREADS=%s python %s" % (os.environ.get("OMP_NUM_THREADS", ""),
                                                 shlex.join(sys.argv if argv is None else [__file__, *argv])))
    if args.summary_only:
        if args.ghdp_presets:
            summarise_presets(rows, args.trace_every)
        else:
            summarise(rows)
        return
    done = {(r["method"], r["K"], r["seed"]) for r in rows}

    def record(row):
        rows.append(row)
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_trace")}), file=sys.stderr, flush=True)

    X = load_data("kos")
    if args.ghdp_presets:
        for seed in range(args.seeds):
            train, test = X.split_tokens(0.1, random_state=seed, mode="doc_tokens")
            for preset in ("paper", "default"):
                for k0 in (1, 100):
                    if (f"G-HDP{k0} {preset}", k0, seed) not in done:
                        record(run_ghdp_preset(preset, train, test, k0, args.gibbs_iter, args.burn_in, seed))
        summarise_presets(rows, args.trace_every)
        return
    for seed in range(args.seeds):
        train, test = X.split_tokens(0.1, random_state=seed, mode="doc_tokens")
        for K in args.ks:
            for name in ("CV-LDA", "CV-HDP"):
                if (name, K, seed) not in done:
                    record(run_cv(name, train, test, K, args.cv_iter, seed))
            for name, n_iter in (("V-LDA", args.vlda_iter), ("G-LDA", args.lda_iter)):
                if (name, K, seed) not in done:
                    record(run_lda(name, train, test, K, n_iter, seed))
        g100 = None
        for name, k0 in (("G-HDP100", 100), ("G-HDP1", 1)):
            if (name, k0, seed) not in done or (name == "G-HDP100" and args.fig3):
                row, model = run_gibbs(name, train, test, k0, args.gibbs_iter, args.burn_in, seed)
                if (name, k0, seed) not in done:
                    record(row)
                if name == "G-HDP100":
                    g100 = model
        if not args.fig3:
            continue
        K = g100.n_components_
        for name in ("CV-LDA", "CV-HDP"):
            for init in ("random", "G-HDP100"):
                label = f"{name} fig3 {init}"
                if (label, K, seed) not in done:
                    record(run_cv(label, train, test, K, args.fig3_iter, seed,
                                  init_from=g100 if init == "G-HDP100" else None))
    summarise(rows)


if __name__ == "__main__":
    main()
