"""The moves of the direct-assignment HDP ([SM]: M. Bryant and E. B. Sudderth,
NIPS 2012): merges (section 3.2), splits (section 3.1, Alg. 1) with our
"divide" and "reassign" proposals, pruning and ordering of the topics.

Each move is proposed and judged on the minibatch (``_Minibatch``, its
per-topic quantities as :class:`~bnpcore.inference.stats.SuffStats`) and the
globals of a ``DAState`` (the topics lambda and beta*'s topic cells as a
:class:`~bnpcore.inference.moves.Components` table; beta*'s rest cell beside
it); an accepted move renumbers both through the shared moves
(``merge_pairs``, ``Components.split``, ``prune``, ``reorder``, and the
``SuffStats`` counterparts ``merge``, ``split``, ``select``, ``permute``).
"""
from collections.abc import Mapping

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import digamma, gammaln, xlogy

from bnpcore._threads import map_threads
from bnpcore._validation import check_inner, check_int, check_real
from bnpcore.inference import moves
from bnpcore.inference.moves import Components
from bnpcore.kernels import _dahdp
from bnpcore.models.hdp_da_bound import _Documents, expected_log_phi, topic_terms, topic_terms_change

SPLIT_INITS = ("minibatch", "divide", "reassign")
# the settings of the split and merge moves (``DirectAssignmentVB(moves=...)``) and their defaults
MOVE_DEFAULTS = {"max_splits": 3, "max_merges": 0, "split_candidates": 5, "merge_candidates": 20,
                 "merge_threshold": 0.0, "merge_prior": "double", "split_inits": ("minibatch", "divide"),
                 "restricted_iter": 5, "restricted_sweeps": 10}
REASSIGN_ROUNDS = 3
REASSIGN_TURNS = 3
# the fewest pairs (document, word) for which split proposals run on several threads: a proposal's
# restricted iteration releases the GIL, the rest holds it, so small minibatches gain nothing from threads
# (KOS: benchmarks/results/bench_threads_kos.txt)
SPLIT_THREADS_PAIRS = 50_000


def check_moves(moves):
    """The move settings: ``moves`` (None or a dict of some of ``MOVE_DEFAULTS``'s
    keys) over the defaults, validated; ValueError/TypeError naming the setting."""
    if moves is None:
        moves = {}
    if not isinstance(moves, Mapping):
        raise TypeError(f"moves must be None or a dict of move settings, got {type(moves).__name__}")
    unknown = sorted(set(moves) - set(MOVE_DEFAULTS))
    if unknown:
        raise ValueError(f"moves has unknown settings {unknown}; the settings are {sorted(MOVE_DEFAULTS)}")
    m = {**MOVE_DEFAULTS, **moves}
    name = "moves[{!r}]".format
    check_int(m["max_splits"], name("max_splits"), minimum=0)
    if m["max_merges"] is not None:
        check_int(m["max_merges"], name("max_merges"), minimum=0)
    for key in ("split_candidates", "merge_candidates"):
        check_inner(m[key], name(key))
    check_real(m["merge_threshold"], name("merge_threshold"))
    if m["merge_prior"] not in ("double", "single"):
        raise ValueError(f"{name('merge_prior')} must be 'double' or 'single', got {m['merge_prior']!r}")
    inits = m["split_inits"]
    if isinstance(inits, str) or not inits or not all(init in SPLIT_INITS for init in inits):
        raise ValueError(f"{name('split_inits')} must be a non-empty collection of {SPLIT_INITS}, got {inits!r}")
    check_inner(m["restricted_iter"], name("restricted_iter"), minimum=0)
    check_inner(m["restricted_sweeps"], name("restricted_sweeps"))
    return {"max_splits": int(m["max_splits"]), "max_merges": None if m["max_merges"] is None else int(m["max_merges"]),
            "split_candidates": int(m["split_candidates"]), "merge_candidates": int(m["merge_candidates"]),
            "merge_threshold": float(m["merge_threshold"]), "merge_prior": m["merge_prior"],
            "split_inits": tuple(dict.fromkeys(inits)), "restricted_iter": int(m["restricted_iter"]),
            "restricted_sweeps": int(m["restricted_sweeps"])}


def topics_table(state):
    """The topics of ``state`` as a Components table over its arrays (moves edit
    them in place): ``lam`` (K, W) and ``weight``, beta*'s K topic cells."""
    return Components({"lam": state.lam, "weight": state.beta[:-1]}, n=state.n_components)


def _store(state, table, rest):
    """The globals of ``state`` after a move on ``table``; beta*'s rest cell ``rest``."""
    state.lam, state.beta = table["lam"], np.append(table["weight"], rest)


# -- merges ([SM] 3.2) -------------------------------------------------------------------
def merge(state, local, scale):
    """Test pairs of topics with positive covariance of theta over the minibatch,
    largest first, with the current globals; accept at most ``max_merges``;
    returns (accepted, tried)."""
    cfg = state.settings
    K = state.n_components
    cap = cfg.get("max_merges")         # None: no cap (also in checkpoints from before the setting)
    if K < 2 or local.n_docs < 2 or cap == 0:
        return 0, 0
    cov = np.cov(local.theta[:, :K], rowvar=False)
    i, j = np.triu_indices(K, 1)
    values = cov[i, j]
    order = np.argsort(-values, kind="stable")
    order = order[values[order] > cfg["merge_threshold"]][:cfg["merge_candidates"]]
    current = np.arange(K)             # original topic -> current index (-1: merged away)
    touched = np.zeros(K, dtype=bool)
    accepted = tried = 0
    for p in order:
        if cap is not None and accepted >= cap:
            break
        a, b = i[p], j[p]
        if touched[a] or touched[b]:
            continue
        tried += 1
        ka, kb = current[a], current[b]
        if merge_gain(state, local, scale, ka, kb) > 0.0:
            apply_merge(state, local, ka, kb)
            touched[a] = touched[b] = True
            current[b] = -1
            current[current > kb] -= 1
            accepted += 1
    return accepted, tried


def merged_lambda(state, ka, kb):
    if state.settings["merge_prior"] == "double":
        return state.lam[ka] + state.lam[kb]
    # one eta and each topic's part above it: a "divide" half can hold less than eta at a word
    return state.eta + np.maximum(state.lam[ka] - state.eta, 0.0) + np.maximum(state.lam[kb] - state.eta, 0.0)


def merge_gain(state, local, scale, ka, kb):
    """L_B(merged) - L_B(current) for topics ka < kb, current globals."""
    pair = [ka, kb]
    vocab = local.batch.vocab
    lam_m = merged_lambda(state, ka, kb)
    r = local.resp[:, ka] + local.resp[:, kb]
    stats = local.stats[:, ka] + local.stats[:, kb]
    tokens_m = -float(local.batch.counts @ xlogy(r, r)) + stats @ expected_log_phi(lam_m, vocab)[0]
    tokens_old = (local.entropy[pair] + np.einsum("wk,kw->k", local.stats[:, pair],
                                                  expected_log_phi(state.lam[pair], vocab))).sum()
    ab = state.alpha * state.beta
    docs = _Documents(local.theta, local.ndk, ab, state.alpha)
    d_docs = docs.change(pair, [(local.theta[:, ka] + local.theta[:, kb], local.ndk[:, ka] + local.ndk[:, kb],
                                 ab[ka] + ab[kb])])
    d_topics = topic_terms(lam_m, state.eta)[0] - topic_terms(state.lam[pair], state.eta).sum()
    d_prior = state.log_prior(merged_beta(state, ka, kb)) - state.log_prior(state.beta)
    return scale * (tokens_m - tokens_old + d_docs) + d_topics + d_prior


def merged_beta(state, ka, kb):
    beta = np.delete(state.beta, kb)
    beta[ka] += state.beta[kb]
    return beta


def apply_merge(state, local, ka, kb):
    """Topic kb joins ka ([SM] 3.2: r, theta, beta*, lambda add); later topics shift down."""
    lam_m = merged_lambda(state, ka, kb)
    r = local.resp[:, ka] + local.resp[:, kb]
    entropy = -float(local.batch.counts @ xlogy(r, r))      # not additive: the merged topic's own
    local.merge(ka, kb)
    local.entropy[ka] = entropy
    table = topics_table(state)
    table.merge(ka, kb)
    table["lam"][ka] = lam_m                                 # the merge prior's lambda (the sum for "double")
    _store(state, table, state.beta[-1])


# -- splits ([SM] 3.1, Alg. 1) -----------------------------------------------------------
def split(state, local, scale, rho, old_lam, lam_hat, old_beta, beta_hat):
    """Propose splits of the topics in decreasing order of their minibatch
    mass, after the global step; accept at most ``max_splits``. For each
    topic the restricted proposals are tried first (the one with the larger
    gain is tested); when it does not gain and it is the topic's turn, the
    "reassign" proposal: REASSIGN_TURNS candidates per iteration, in turn,
    for each costs four E-steps of half the minibatch. The restricted
    proposals of ``n_threads`` candidates are made at once on the threads
    (each depends only on the state and its topic, its random numbers
    keyed by topic): the same splits for any thread count.
    Returns (accepted, tried)."""
    cfg = state.settings
    mass = local.ndk.sum(axis=0)
    order = np.argsort(-mass, kind="stable")[:cfg["split_candidates"]]
    online = rho < 1.0
    inits = cfg["split_inits"] if online else ("minibatch",)      # batch mode: one random division
    restricted = [init for init in inits if init != "reassign"]
    reassign = online and "reassign" in inits and local.n_docs >= 2 and len(order) > 0
    turns = order[(state.updates * REASSIGN_TURNS + np.arange(REASSIGN_TURNS)) % len(order)] if reassign else ()
    accepted = tried = 0
    halves = None                   # the reassign proposal's two halves of the minibatch, under the current globals
    key = None if online else int(state.rng.integers(2 ** 62))     # batch mode: the random divisions' stream

    def best_restricted(k):
        return max((split_proposal(state, local, scale, rho, k, old_lam, lam_hat, old_beta, beta_hat, init=init,
                                   key=key) for init in restricted), key=lambda p: p["gain"], default=None)

    # each proposal depends only on the state and its topic: the next n_threads candidates' proposals are
    # made at once, on the threads, and read in order; a split changes the state and drops the rest
    threads = cfg["n_threads"] if len(local.batch.words) >= SPLIT_THREADS_PAIRS else 1
    ahead = {}
    candidates = [k for k in order if mass[k] > 0.0]
    for i, k in enumerate(candidates):
        if accepted >= cfg["max_splits"]:
            break
        tried += 1
        if k not in ahead:
            batch = candidates[i:i + threads]
            ahead = dict(zip(batch, map_threads(best_restricted, batch, threads)))
        best = ahead.pop(k)
        if best is not None and best["gain"] > 0.0:
            apply_split(state, local, k, best)
            ahead = {}
        elif k in turns:
            if halves is None:
                halves = [state.refit(half, state.lam, state.beta)
                          for half in (local.batch.take(np.arange(0, local.n_docs, 2)),
                                       local.batch.take(np.arange(1, local.n_docs, 2)))]
            if halves[0].ndk[:, k].sum() <= 0.0:         # nothing of k in the documents to fit
                continue
            proposal = reassign_proposal(state, k, rho, *halves)
            if not proposal["gain"] > 0.0:         # also NaN: a proposal from underflowed halves
                continue
            apply_reassign(state, local, proposal)
            return accepted + 1, tried      # every topic changed: old_lam and lam_hat no longer add up
        else:
            continue
        accepted += 1
        halves = None
    return accepted, tried


def reassign_proposal(state, k, rho, fit, check):
    """Split topic k, then let every topic give the new one what the E-step gives it.

    A true topic can be spread, in small proportions, over many topics.
    Dividing one of them (the restricted proposals) then loses in the
    bound: in every document the new half's weight tracks k's, so its own
    Dirichlet cell buys nothing; only a topic gathered from all the
    topics' shares would gain. This proposal starts from the "divide"
    halves of k fitted to the minibatch's even documents (``fit``, their
    E-step under the current globals) and, REASSIGN_ROUNDS times, runs
    their E-step over all K + 1 topics and moves from every other topic
    j to the new one max(0, lambda_jw - eta) times the fraction max(0, 1 -
    stats'_wj / stats_wj) of its statistic at word w that the E-step moved
    (the topics' total mass is kept). The gain is the change of the bound
    of the odd documents (``check``, likewise) between their E-steps under
    the current and the proposed globals: judged on documents the proposal
    did not see, for judged on its own documents such a proposal gains
    almost always (docs/split_merge.md: on bars it split far past the true
    topics)."""
    K, vocab = state.n_components, fit.batch.vocab
    # the step's parts (old_lam, lam_hat, ...) are read only with restricted_iter = 0: the current globals stand in
    divided = split_proposal(state, fit, state.n_total / fit.n_docs, rho, k, state.lam, state.lam, state.beta,
                             state.beta, init="divide")
    lam1, lam2 = divided["lam"]
    start = np.vstack([state.lam, lam2[None]])
    start[k] = lam1
    beta = divided["beta"]
    lam, before = start, fit.stats
    for _ in range(REASSIGN_ROUNDS):
        after = state.refit(fit.batch, lam, beta).stats
        moved = 1.0 - np.divide(after[:, :K], before, out=np.ones_like(before), where=before > 0.0)
        moved = np.clip(moved, 0.0, 1.0).T
        moved[k] = 0.0
        # a "divide" half can hold less than eta at a word: it has nothing there to give
        give = np.maximum(start[:K, vocab] - state.eta, 0.0) * moved
        lam = start.copy()
        # at least eta where a topic gives: start - (start - eta) rounds to 0 when eta << start
        lam[:K, vocab] = np.maximum(start[:K, vocab] - give, np.minimum(start[:K, vocab], state.eta))
        lam[K, vocab] += give.sum(axis=0)
    scale = state.n_total / check.n_docs
    proposed = state.refit(check.batch, lam, beta)
    # the topics other than k changed only at the minibatch's words: their term's change costs O(K |vocab|),
    # not the two passes over K x W of the full term
    others = np.flatnonzero(np.arange(K) != k)
    d_topics = topic_terms_change(state.lam[others], lam[others], state.eta, vocab) \
        + topic_terms(lam[[k, K]], state.eta).sum() - topic_terms(state.lam[k], state.eta)[0]
    before = sum(state.local_terms(check, scale, state.lam, state.beta)) + state.log_prior(state.beta)
    after = sum(state.local_terms(proposed, scale, lam, beta)) + state.log_prior(beta)
    return {"gain": after - before + d_topics, "lam": lam, "beta": beta}


def apply_reassign(state, local, proposal):
    """The proposed globals, and the minibatch's E-step under them: every topic changed."""
    state.lam, state.beta = proposal["lam"], proposal["beta"]
    whole = state.refit(local.batch, state.lam, state.beta)
    local.theta, local.ndk, local.stats, local.entropy, local.resp = \
        whole.theta, whole.ndk, whole.stats, whole.entropy, whole.resp


def split_proposal(state, local, scale, rho, k, old_lam, lam_hat, old_beta, beta_hat, restricted_iter=None,
                   init="minibatch", key=None):
    """Split topic k ([SM] Alg. 1) after the global step of this iteration.

    ``init="minibatch"`` (the paper): k' is what the global state had, k''
    what this minibatch adds: lambda' = (1 - rho) lambda_old_k, lambda'' =
    rho lambda_hat_k, beta* likewise, and r, theta divided in the proportion
    omega = beta*'/beta*_k (with ``restricted_iter=0`` this is the proposal;
    the halves sum to the updated topic). The restricted iteration
    (``_dahdp.restricted``) keeps (1 - rho) lambda_old_k as k''s memory and
    refits which minibatch tokens each half takes, updating the halves after
    every document. In batch mode (rho = 1) this would leave k' empty; the
    paper defines none for bHDP, so each word's tokens start divided at a
    random fraction u_w ~ U(0, 1) instead, from the stream keyed by
    (``key``, k): ``key`` is drawn once an iteration, so the proposal
    depends on the state and k alone, whichever thread makes it.

    ``init="divide"`` (online): once rho is small, k'' starts with a
    minibatch's worth of mass against k''s memory of the whole topic and
    the restricted iteration gives it no tokens, so a topic that blends
    several true topics is never divided. This proposal divides the
    topic's words instead: the halves first fit the minibatch alone (the
    restricted iteration with no memory, rho = 1), started from the tokens
    in the documents that contain an anchor word drawn in proportion to the
    topic's minibatch mass (``_anchor_shares``); then the updated lambda_k is divided word by word in the
    proportions s_w = (eta + n'_w) / (2 eta + n'_w + n''_w) of the fitted
    halves' counts, so that again lambda' + lambda'' = lambda_k."""
    cfg = state.settings
    batch, vocab = local.batch, local.batch.vocab
    rounds = cfg["restricted_iter"] if restricted_iter is None else restricted_iter
    mass = np.ascontiguousarray(local.resp[:, k])
    counts = batch.counts
    V, W = len(vocab), state.lam.shape[1]
    divide = init == "divide" and rho < 1.0
    if rho < 1.0 and not divide:
        beta1, beta2 = (1.0 - rho) * old_beta[k], rho * beta_hat[k]
        omega = beta1 / (beta1 + beta2)
        r1 = omega * mass
    else:
        beta1 = beta2 = 0.5 * state.beta[k]
        omega = 0.5
        shares = anchor_shares(state, local, k) if divide else np.random.default_rng([key, int(k)]).random(V)
        r1 = shares[batch.words] * mass
    theta1, theta2 = omega * local.theta[:, k], (1.0 - omega) * local.theta[:, k]
    if rounds == 0:
        lam1, lam2 = (1.0 - rho) * old_lam[k], rho * lam_hat[k]
        n1 = omega * local.ndk[:, k]
    else:
        # the halves' memory: the topic's past (paper), none (a fit of the minibatch alone)
        memory = (1.0 - rho) * old_lam[k] if not divide else np.zeros(W)
        fit_rho = 1.0 if divide else rho
        stats1 = np.bincount(batch.words, counts * r1, minlength=V)
        stats2 = np.bincount(batch.words, counts * (mass - r1), minlength=V)
        ab1, ab2 = state.alpha * beta1, state.alpha * beta2
        settings = {"base1": memory.sum() + fit_rho * state.eta * W, "base2": fit_rho * state.eta * W,
                    "rho_eta": fit_rho * state.eta, "rho_scale": fit_rho * scale, "ab1": ab1, "ab2": ab2,
                    "tol": cfg["estep_tol"], "max_iter": rounds, "n_sweeps": cfg["restricted_sweeps"]}
        _dahdp.restricted(batch.ptr, batch.words, counts, mass, np.ascontiguousarray(memory[vocab]), np.zeros(V),
                          settings, theta1, theta2, r1, stats1, stats2)
        if divide:
            # each half's share by its own ratio: 1 - share rounds to 0 where eta << the counts
            share1, share2 = np.full(W, 0.5), np.full(W, 0.5)
            total = 2.0 * state.eta + stats1 + stats2
            share1[vocab], share2[vocab] = (state.eta + stats1) / total, (state.eta + stats2) / total
            lam1, lam2 = share1 * state.lam[k], share2 * state.lam[k]
        else:
            lam1 = memory + rho * (state.eta + scale * _scatter(state, stats1, vocab))
            lam2 = rho * (state.eta + scale * _scatter(state, stats2, vocab))
        n1 = theta1 - ab1
        beta1, beta2 = resplit_beta(state, local, scale, k, beta1 + beta2, theta1, theta2)
    r2 = mass - r1
    stats1 = np.bincount(batch.words, counts * r1, minlength=V)
    stats2 = np.bincount(batch.words, counts * r2, minlength=V)
    entropy = -np.array([counts @ xlogy(r1, r1), counts @ xlogy(r2, r2)])
    return split_gain(state, local, scale, k, lam1, lam2, beta1, beta2, theta1, theta2, r1, stats1, stats2,
                      entropy, n1)


def anchor_shares(state, local, k):
    """Per minibatch word, the fraction of topic k's minibatch mass that lies in
    the documents containing an anchor word, drawn in proportion to that mass
    from a stream keyed by (iteration, topic): reproducible, also when
    ``partial_fit`` continues a loaded model, and the minibatch order is untouched."""
    batch = local.batch
    V = len(batch.vocab)
    weight = batch.counts * local.resp[:, k]
    word_mass = np.bincount(batch.words, weight, minlength=V)
    anchor = np.random.default_rng([state.updates, int(k)]).choice(V, p=word_mass / word_mass.sum())
    doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.ptr))
    has_anchor = np.zeros(batch.n_docs, dtype=bool)
    has_anchor[doc[batch.words == anchor]] = True
    with_anchor = np.bincount(batch.words, weight * has_anchor[doc], minlength=V)
    return np.divide(with_anchor, word_mass, out=np.full(V, 0.5), where=word_mass > 0)


def _scatter(state, stats, vocab):
    out = np.zeros(state.lam.shape[1])
    out[vocab] = stats
    return out


def split_beta(state, k, beta1, beta2):
    """beta* with topic k replaced by beta1 and beta2 appended after the last topic."""
    beta = np.insert(state.beta, state.n_components, beta2)
    beta[k] = beta1
    return beta


def resplit_beta(state, local, scale, k, total, theta1, theta2):
    """Split the fixed total weight of k', k'' by maximising f_B over the fraction."""
    others = np.delete(local.theta, k, axis=1).sum(axis=1)
    norm = digamma(others + theta1 + theta2)
    e1, e2 = (digamma(theta1) - norm).sum(), (digamma(theta2) - norm).sum()
    S = len(theta1)

    def negative(fraction):
        b1, b2 = fraction * total, (1.0 - fraction) * total
        ab1, ab2 = state.alpha * b1, state.alpha * b2
        value = scale * (ab1 * e1 + ab2 * e2 - S * (gammaln(ab1) + gammaln(ab2)))
        return -(value + state.log_prior(split_beta(state, k, b1, b2)))

    fraction = minimize_scalar(negative, bounds=(1e-9, 1.0 - 1e-9), method="bounded",
                               options={"xatol": 1e-10}).x
    return fraction * total, (1.0 - fraction) * total


def split_gain(state, local, scale, k, lam1, lam2, beta1, beta2, theta1, theta2, r1, stats1, stats2, entropy,
               n1):
    vocab = local.batch.vocab
    elog = expected_log_phi(np.stack([state.lam[k], lam1, lam2]), vocab)
    tokens_old = local.entropy[k] + local.stats[:, k] @ elog[0]
    tokens_new = entropy[0] + stats1 @ elog[1] + entropy[1] + stats2 @ elog[2]
    ab = state.alpha * state.beta
    docs = _Documents(local.theta, local.ndk, ab, state.alpha)
    n_k = local.ndk[:, k]
    d_docs = docs.change([k], [(theta1, n1, state.alpha * beta1), (theta2, n_k - n1, state.alpha * beta2)])
    d_topics = topic_terms(np.stack([lam1, lam2]), state.eta).sum() - topic_terms(state.lam[k], state.eta)[0]
    new_beta = split_beta(state, k, beta1, beta2)
    d_prior = state.log_prior(new_beta) - state.log_prior(state.beta)
    return {"gain": scale * (tokens_new - tokens_old + d_docs) + d_topics + d_prior, "lam": (lam1, lam2),
            "beta": new_beta, "theta": (theta1, theta2), "n1": n1, "r1": r1, "stats": (stats1, stats2),
            "entropy": entropy}


def apply_split(state, local, k, proposal):
    """k' takes k's place, k'' is appended after the last topic ([SM] footnote 2)."""
    K = state.n_components
    lam1, lam2 = proposal["lam"]
    beta = proposal["beta"]
    table = topics_table(state)
    table.split(k, {"lam": lam1, "weight": beta[k]}, {"lam": lam2, "weight": beta[K]})
    _store(state, table, beta[-1])
    n1, r1 = proposal["n1"], proposal["r1"]
    (theta1, theta2), (stats1, stats2), (entropy1, entropy2) = proposal["theta"], proposal["stats"], \
        proposal["entropy"]
    local.split(k, {"theta": theta1, "ndk": n1, "stats": stats1, "entropy": entropy1, "resp": r1},
                {"theta": theta2, "ndk": local.ndk[:, k] - n1, "stats": stats2, "entropy": entropy2,
                 "resp": local.resp[:, k] - r1})


# -- prune, order -------------------------------------------------------------------------------
def prune(state, local):
    """Topics with fewer than ``prune_threshold`` expected words leave; their
    weight goes to the rest cell (nested truncation). Returns how many left."""
    threshold = state.settings["prune_threshold"]
    if threshold <= 0.0 or state.n_components <= 1:
        return 0
    words = state.lam.sum(axis=1) - state.eta * state.lam.shape[1]
    beta = state.beta.copy()
    table = topics_table(state)
    mapping = moves.prune(table, words, threshold, keep_largest=True)
    if mapping is None:
        return 0
    gone = np.flatnonzero(mapping < 0)
    rest = beta[-1]
    for k in gone[::-1]:
        rest += beta[k]
    local.select(mapping >= 0)
    _store(state, table, rest)
    return len(gone)


def sort(state, local):
    """Topics in decreasing order of beta*: the order of largest log p(beta* | gamma)
    under the "beta" density (every prefix sum is largest), the same bound otherwise."""
    table = topics_table(state)
    order = moves.reorder(table, table["weight"].copy())
    if order is not None:
        local.permute(order)
        _store(state, table, state.beta[-1])
