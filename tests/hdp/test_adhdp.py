"""AD-HDP: ``hdp.DirectAssignmentGibbs(schedule="delayed")`` (Newman, Asuncion, Smyth &
Welling 2009), the delayed-update approximation of the direct-assignment sampler."""
import numpy as np
import pytest

from bnpcore.corpus import Corpus
from bnpcore.hdp import DirectAssignmentGibbs
from bnpcore.kernels import _hdp_gibbs
from bnpcore.models.hdp_gibbs import _DelayedGibbsState

from hdp_reference import canonical, hdp_partition_posterior, make_bars

BARS = Corpus(make_bars(60, 40, np.random.default_rng(6))[0])
# a long document of distinct words and huge concentrations: the tables outgrow their capacity
GROWING = (Corpus([list(range(200)), [0, 1, 2], list(range(100, 180))], n_words=200),
           dict(n_components=1, eta_tot=0.01, alpha=50.0, gamma=50.0))


@pytest.mark.parametrize("X, params", [
    (BARS, dict(n_components=1, eta_tot=5.0)),
    (BARS, dict(n_components=40, eta_tot=0.5)),
    GROWING,
], ids=["from-1", "from-40", "growing"])
def test_one_block_is_the_sequential_sampler(X, params):
    """One block: the delayed driver runs the sequential sweep on the shared table with
    the estimator's generator (holes reused, the table grown in place): the same
    draws, bit for bit."""
    params = dict(params, max_iter=8, burn_in=3, random_state=2)
    sequential = DirectAssignmentGibbs(**params).fit(X)
    delayed = DirectAssignmentGibbs(schedule="delayed", n_threads=1, **params).fit(X)
    np.testing.assert_array_equal(delayed._z, sequential._z)
    np.testing.assert_array_equal(delayed.topics_, sequential.topics_)
    np.testing.assert_array_equal(delayed.doc_topic_, sequential.doc_topic_)
    assert [h["n_components"] for h in delayed.history_] == [h["n_components"] for h in sequential.history_]
    assert [h["alpha"] for h in delayed.history_] == [h["alpha"] for h in sequential.history_]


def test_repeatable_for_a_seed_and_block_count():
    params = dict(n_components=10, eta_tot=2.0, max_iter=6, burn_in=2, random_state=4, schedule="delayed")
    a = DirectAssignmentGibbs(n_threads=2, **params).fit(BARS)
    b = DirectAssignmentGibbs(n_threads=2, **params).fit(BARS)
    c = DirectAssignmentGibbs(n_threads=3, **params).fit(BARS)
    np.testing.assert_array_equal(a._z, b._z)
    np.testing.assert_array_equal(a.topics_, b.topics_)
    assert [h["n_components"] for h in a.history_] == [h["n_components"] for h in b.history_]
    assert not np.array_equal(a._z, c._z)


def _check_merged_table(model, record):
    """The shared table after a sweep: counts equal to those recounted from the labels
    (every block's moves, births and deaths merged, none lost or doubled), no empty
    topic, weights summing to 1, a table per topic."""
    state = model._batch_state
    comp, z = state.topics, state.z
    K, cap = comp.n, comp.capacity
    assert K == record["n_components"]
    words, _ = state.corpus.tokens()
    a = comp.arrays
    n_wk = np.zeros((state.corpus.n_words, cap), np.int64)
    np.add.at(n_wk, (words, z), 1)
    assert z.min() >= 0 and z.max() < K
    np.testing.assert_array_equal(a["n_wk"], n_wk)
    np.testing.assert_array_equal(a["n_k"], np.bincount(z, minlength=cap))
    assert a["n_k"].sum() == len(z) == state.corpus.n_tokens
    assert np.all(a["n_k"][:K] > 0) and np.all(np.diff(a["n_k"][:K]) <= 0)
    assert not a["beta"][K:].any() and np.all(a["beta"][:K] > 0)
    assert np.isclose(a["beta"][:K].sum() + state.beta_new, 1)
    assert np.all(a["m_k"][:K] >= 1) and np.all(a["m_k"][:K] <= a["n_k"][:K])
    return record["new_topics"], record["matched_topics"]


@pytest.mark.parametrize("T", [2, 3])
@pytest.mark.parametrize("rule", ["match", "separate"])
@pytest.mark.parametrize("X, params", [
    (BARS, dict(n_components=1, eta_tot=0.2, alpha=5.0, gamma=5.0)),     # many births (48 in 10 sweeps)
    GROWING,
], ids=["bars-from-1", "growing"])
def test_merge_conserves_every_count(X, params, rule, T):
    births, capacity = [], []

    def check(est, rec):
        births.append(_check_merged_table(est, rec))
        capacity.append(est._batch_state.copies["n_wk"].shape[2])

    model = DirectAssignmentGibbs(max_iter=10, burn_in=0, random_state=5, schedule="delayed", n_threads=T,
                                  new_topics=rule, **params)
    with model.reporting(check):
        model.fit(X)
    assert len(births) == 10
    born, matched = np.sum(births, axis=0)
    assert born > 0
    if rule == "separate":
        assert matched == 0
    elif X is BARS and T == 2:             # one pair of births matched (this seed)
        assert matched >= 1
    if params.get("alpha") == 50.0:        # the blocks' tables (16 slots) grew in the middle of the first sweep
        assert capacity[0] > 16


def test_merge_kernel_matches_numpy():
    """delayed_merge against its formula, with new topics placed in shared slots."""
    rng = np.random.default_rng(0)
    T, W, K, kcap, kcap_t = 3, 9, 4, 12, 16
    old = np.zeros((W, kcap), np.int32)
    old[:, :K] = rng.integers(0, 4, (W, K)) * (rng.random((W, K)) < 0.6)
    copies = np.zeros((T, W, kcap_t), np.int32)
    copies[:, :, :K] = np.maximum(old[:, :K] + rng.integers(-2, 3, (T, W, K)), 0)
    copies[:, :, K:K + 2] = rng.integers(0, 3, (T, W, 2))        # two new topics per block
    slot_map = np.full((T, kcap_t), -1, np.int64)
    slot_map[:, :K] = np.arange(K)
    slot_map[:, K:K + 2] = [[4, 5], [6, 4], [7, 8]]               # block 1's second birth matched block 0's first
    lists, wlen = _hdp_gibbs.word_lists(old, K)
    lists_t = np.zeros((T, 2, W, kcap_t), np.int32)
    wlen_t = np.zeros((T, W), np.int32)
    for t in range(T):
        lists_t[t], wlen_t[t] = _hdp_gibbs.word_lists(copies[t], K + 2)
    want = old.astype(np.int64)
    for t in range(T):
        want[:, :K] += copies[t, :, :K] - old[:, :K]
        for k in (K, K + 1):
            want[:, slot_map[t, k]] += copies[t, :, k]
    for n_threads in (1, 2):
        got = old.copy()
        _hdp_gibbs.delayed_merge(got, lists, wlen, copies, lists_t, wlen_t, slot_map, n_threads)
        np.testing.assert_array_equal(got, want)
    slot_map[1, K] = -1
    with pytest.raises(ValueError, match="without a shared slot"):
        _hdp_gibbs.delayed_merge(old.copy(), lists, wlen, copies, lists_t, wlen_t, slot_map)


def test_word_lists_fill_given_buffers_on_any_thread_count():
    """word_lists into reused buffers (stale contents from other counts) and on two
    threads: the same lists as fresh arrays, and each is np.flatnonzero of its row."""
    rng = np.random.default_rng(3)
    n_wk = (rng.integers(0, 3, (30, 16)) * (rng.random((30, 16)) < 0.4)).astype(np.int32)
    want_lists, want_wlen = _hdp_gibbs.word_lists(n_wk, 11)
    for w in range(30):
        np.testing.assert_array_equal(want_lists[0, w, :want_wlen[w]], np.flatnonzero(n_wk[w, :11]))
        np.testing.assert_array_equal(want_lists[1, w, want_lists[0, w, :want_wlen[w]]], np.arange(want_wlen[w]))
    stale = _hdp_gibbs.word_lists(np.ones_like(n_wk), 16)
    for n_threads in (1, 2):
        lists, wlen = _hdp_gibbs.word_lists(n_wk, 11, n_threads, stale)
        assert lists is stale[0] and wlen is stale[1]
        np.testing.assert_array_equal(wlen, want_wlen)
        for w in range(30):
            topics = lists[0, w, :wlen[w]]
            np.testing.assert_array_equal(topics, want_lists[0, w, :wlen[w]])
            np.testing.assert_array_equal(lists[1, w, topics], np.arange(wlen[w]))
    with pytest.raises(ValueError, match="shapes"):
        _hdp_gibbs.word_lists(n_wk, 11, 1, (np.zeros((2, 30, 8), np.int32), np.zeros(30, np.int32)))


def test_log_likelihood_is_the_collapsed_formula():
    """The state's log p(x | z) (the per-word kernel of the partially collapsed sampler,
    small counts from a table) against gammaln over the positive counts."""
    from scipy.special import gammaln
    est = DirectAssignmentGibbs(n_components=5, max_iter=4, burn_in=2, eta_tot=3.0, random_state=0)
    box = {}
    real = _DelayedGibbsState.log_likelihood

    def grab(self):
        box["state"] = self
        return real(self)
    _DelayedGibbsState.log_likelihood = grab
    try:
        DirectAssignmentGibbs(schedule="delayed", n_threads=2, n_components=5, max_iter=4, burn_in=2,
                              eta_tot=3.0, random_state=0).fit(BARS)
    finally:
        _DelayedGibbsState.log_likelihood = real
    state = box["state"]
    t = state.topics
    nwk = t["n_wk"]
    nz = nwk[nwk > 0]
    want = (gammaln(nz + state.eta) - gammaln(state.eta)).sum() \
        + (gammaln(state.eta_tot) - gammaln(t["n_k"] + state.eta_tot)).sum()
    assert state.log_likelihood() == pytest.approx(want, rel=1e-12)
    assert est.fit(BARS).history_[-1]["log_lik"] < 0


def _births_state(rule):
    state = _DelayedGibbsState.__new__(_DelayedGibbsState)
    state.new_topics = rule
    W, K = 6, 2
    n_wk = np.zeros((2, W, 8), np.int32)
    n_wk[0, 0, K], n_wk[0, 1, K + 1] = 3, 2          # block 0: a topic of word 0, one of word 1
    n_wk[1, 1, K], n_wk[1, 0, K + 1], n_wk[1, 4, K + 1] = 1, 2, 1   # block 1: word 1; words 0 and 4
    n_wk[1, 5, K + 2] = 1                            # and one of word 5
    births = [np.array([K, K + 1]), np.array([K, K + 1, K + 2])]
    return state, [n_wk[t][:, b] for t, b in enumerate(births)], K


def test_new_topics_rules():
    """"match": block 1's topic of word 1 joins block 0's, its topic of words 0 and 4
    (cosine 0.89 with block 0's word-0 topic) joins that one, its word-5 topic
    (similarity 0) stays apart; "separate": five new topics."""
    state, births, K = _births_state("match")
    targets, n = state._place_births(births, K)
    assert n == K + 3
    assert targets[0].tolist() == [2, 3] and targets[1].tolist() == [3, 2, 4]
    state, births, K = _births_state("separate")
    targets, n = state._place_births(births, K)
    assert n == K + 5
    assert targets[0].tolist() == [2, 3] and targets[1].tolist() == [4, 5, 6]


def _match_dense(births, K, threshold):
    """The "match" rule on dense counts: every pair scored, pairs in decreasing cosine
    similarity (ties in row-major order), each topic in one pair."""
    targets, placed, n = [], [], K
    for counts in births:
        slots = np.full(counts.shape[1], -1, dtype=np.int64)
        if placed and counts.shape[1]:
            mine = counts.astype(np.float64)
            theirs = np.stack([v for _, v in placed], axis=1)
            sim = (mine.T @ theirs) / np.outer(np.linalg.norm(mine, axis=0), np.linalg.norm(theirs, axis=0))
            used = np.zeros(len(placed), dtype=bool)
            for flat in np.argsort(-sim, axis=None, kind="stable"):
                i, j = divmod(int(flat), len(placed))
                if sim[i, j] < threshold:
                    break
                if slots[i] < 0 and not used[j]:
                    slots[i], used[j] = placed[j][0], True
                    placed[j] = (placed[j][0], placed[j][1] + mine[:, i])
        for i in np.flatnonzero(slots < 0):
            slots[i] = n
            placed.append((n, counts[:, i].astype(np.float64)))
            n += 1
        targets.append(slots)
    return targets, n


def test_match_rule_is_the_dense_formula():
    """"match" scores only the pairs of new topics that share a word, on sparse
    counts: the same slots as scoring every pair densely, on random births of 1-4
    blocks over a few words (small counts: many ties, many matches)."""
    from bnpcore.models.hdp_gibbs import _MATCH_MIN
    state, _, _ = _births_state("match")
    rng = np.random.default_rng(0)
    matched = 0
    for _ in range(300):
        T, W, K = int(rng.integers(1, 5)), int(rng.integers(1, 12)), int(rng.integers(0, 5))
        births = []
        for _ in range(T):
            m = int(rng.integers(0, 6))
            c = rng.integers(0, 3, (W, m)) * (rng.random((W, m)) < 0.3)
            c[rng.integers(0, W, m), np.arange(m)] += rng.integers(1, 3, m)    # every new topic holds a token
            births.append(c.astype(np.int32))
        want, got = _match_dense(births, K, _MATCH_MIN), state._place_births(births, K)
        assert got[1] == want[1]
        for a, b in zip(got[0], want[0]):
            np.testing.assert_array_equal(a, b)
        matched += sum(len(t) for t in want[0]) - (want[1] - K)
    assert matched > 100


def _coclustering(docs, n_words, alpha, gamma, eta_tot, n_sweeps, seed, **params):
    """Exact and sampled probabilities that tokens (0, 1), (2, 3), (0, 2) share a topic,
    and the total variation between the partitions' laws."""
    corpus = Corpus(docs, n_words=n_words)
    words, tok_ptr = corpus.tokens()
    doc_of = np.repeat(np.arange(len(docs)), np.diff(tok_ptr)).tolist()
    parts, probs, _ = hdp_partition_posterior(doc_of, words.tolist(), n_words, alpha, gamma, eta_tot / n_words)
    index = {p: i for i, p in enumerate(parts)}
    counts = np.zeros(len(parts))

    def record(model, rec):
        if rec["iteration"] % 2 == 0:
            counts[index[canonical(model._batch_state.z)]] += 1

    model = DirectAssignmentGibbs(n_components=2, max_iter=n_sweeps, burn_in=0, eta_tot=eta_tot, alpha=alpha,
                                  gamma=gamma, random_state=seed, **params)
    with model.reporting(record):
        model.fit(corpus)
    freq, P = counts / counts.sum(), np.array(parts)
    pairs = [(0, 1), (2, 3), (0, 2)]
    exact = np.array([probs[P[:, a] == P[:, b]].sum() for a, b in pairs])
    sampled = np.array([freq[P[:, a] == P[:, b]].sum() for a, b in pairs])
    return exact, sampled, 0.5 * np.abs(freq - probs).sum(), counts.sum()


@pytest.mark.slow
@pytest.mark.parametrize("rule, bias, tv_bound", [("match", 0.025, 0.10), ("separate", 0.09, 0.18)])
def test_two_blocks_against_exact_enumeration(rule, bias, tv_bound):
    """The corpus and concentrations of the sequential sampler's enumeration test
    (2 documents with (2, 3) tokens, W = 2, alpha = 0.7, gamma = 1.3 fixed, 52
    partitions), one document per block. AD-HDP's stationary law is not the
    posterior. Measured over 2e4 sweeps (1e4 samples, seed 3), the probabilities
    that tokens (0, 1), (2, 3) and (0, 2) share a topic, exact 0.646, 0.793, 0.480:

    * "match": 0.640, 0.788, 0.467 (bias <= 0.013; partitions 0.080 from the
      posterior in total variation);
    * "separate": 0.630, 0.784, 0.405: tokens of different blocks share a topic
      less often (bias 0.075; total variation 0.146), as the same topic born in
      both blocks at once stays two topics until one empties.

    The test allows a bias of 0.025 ("match") or 0.09 ("separate") plus four
    standard errors, and total variations of 0.10 and 0.18."""
    exact, sampled, tv, n = _coclustering([[0, 1], [0, 0, 1]], 2, 0.7, 1.3, 1.0, 20000, 3, schedule="delayed",
                                          n_threads=2, new_topics=rule)
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(sampled - exact) < bias + 4 * se), (sampled, exact)
    assert tv < tv_bound


def test_bad_parameters():
    with pytest.raises(ValueError, match="schedule"):
        DirectAssignmentGibbs(schedule="parallel").fit(BARS)
    with pytest.raises(ValueError, match="new_topics"):
        DirectAssignmentGibbs(schedule="delayed", new_topics="id").fit(BARS)


def test_checkpoint_resume_continues_exactly(tmp_path):
    """The blocks' tables are scratch, not saved: a resumed fit repeats the uninterrupted one."""
    from bnpcore import base
    params = dict(n_components=5, eta_tot=1.0, max_iter=8, burn_in=1, schedule="delayed", n_threads=2,
                  random_state=0)
    full = DirectAssignmentGibbs(**params).fit(BARS)
    part = DirectAssignmentGibbs(**params)
    with part.reporting(lambda est, rec: rec["iteration"] == 4):
        part.fit(BARS, checkpoint=tmp_path / "ck.npz")
    resumed = base.load(tmp_path / "ck.npz").fit(BARS, resume=True)
    np.testing.assert_array_equal(resumed.topics_, full.topics_)
    np.testing.assert_array_equal(resumed._z, full._z)


# -- the schedule on partitions (bnpcore.distributed runs the same iterate on Dask workers:
#    tests/test_distributed_adhdp.py); here with the partitions in this process ------------------
def _partitioned_run(X, params, n_partitions, n_sweeps):
    """The state after each of ``n_sweeps`` iterations on ``n_partitions`` in-process
    partitions (labels gathered after each), and the records."""
    from bnpcore.inference.batch import Partitions, block_bounds
    est = DirectAssignmentGibbs(schedule="delayed", n_threads=1, random_state=2, **params)
    est._check_params()
    state = est._init_state(X, np.random.default_rng(2))
    for _ in range(n_sweeps):
        parts = Partitions(state, block_bounds(X.n_docs, n_partitions))
        record = state.iterate(parts, False)
        parts.gather()
        yield state, record


@pytest.mark.parametrize("X, params", [(BARS, dict(n_components=1, eta_tot=5.0)), GROWING], ids=["bars", "growing"])
def test_one_partition_is_the_sweep(X, params):
    """``iterate`` on one partition: the sequential sweep (the one-block schedule), draw for draw."""
    est = DirectAssignmentGibbs(schedule="delayed", n_threads=1, random_state=2, **params)
    est._check_params()
    state = est._init_state(X, np.random.default_rng(2))
    for part_state, record in _partitioned_run(X, params, 1, 6):
        want = state.sweep()
        np.testing.assert_array_equal(part_state.z, state.z)
        np.testing.assert_array_equal(part_state.topics["n_wk"], state.topics["n_wk"])
        assert record == want


@pytest.mark.parametrize("n_partitions", [2, 3])
@pytest.mark.parametrize("rule", ["match", "separate"])
def test_partitions_conserve_every_count(rule, n_partitions):
    """Every sweep on 2-3 partitions: the merged table equals the counts of the gathered labels."""
    params = dict(n_components=1, eta_tot=0.2, alpha=5.0, gamma=5.0, new_topics=rule)
    born = 0
    for state, record in _partitioned_run(BARS, params, n_partitions, 8):
        fitted = type("Fitted", (), {"_batch_state": state})()
        births = _check_merged_table(fitted, dict(record, n_components=state.n_components))
        born += births[0]
        assert rule == "match" or births[1] == 0
    assert born > 0


def _hole_table(kcap):
    """Slots 0..2 in use: topic 0 (5 tokens of word 1, almost no weight), a hole
    (slot 1), topic 2 (the one token of word 0 of the one document)."""
    W = 2
    n_wk, n_k, beta = np.zeros((W, kcap), np.int32), np.zeros(kcap, np.int64), np.zeros(kcap)
    n_wk[1, 0], n_wk[0, 2] = 5, 1
    n_k[[0, 2]], beta[[0, 2]] = (5, 1), (1e-12, 0.5)
    doc = (np.array([0, 1]), np.array([0], np.int32), np.array([1], np.int32))
    return doc, (n_wk, n_k, beta), 0.5 - 1e-12


@pytest.mark.parametrize("reuse", [True, False])
def test_gibbs_sweep_reuse_holes(reuse):
    """The token leaves topic 2 (deleted: slots 1 and 2 are holes) and, topic 0
    having almost no weight, starts a new topic: ``reuse_holes`` true puts it in
    the first hole (slot 1, the sequential sampler), false after ``k_used``
    (slot 3, a delayed block: the slots below k_used keep their topics), with
    the same draws. With every slot taken, false stops before the token (no slot
    for a new topic) while true reuses a hole."""
    settings = {"alpha": 1.0, "gamma": 1.0, "eta": 0.1, "reuse_holes": reuse}
    doc, table, beta_new = _hole_table(4)
    z = np.array([2], np.int32)
    got = _hdp_gibbs.gibbs_sweep(*doc, z, table, beta_new, 3, settings, 0, _hdp_gibbs.word_lists(table[0], 3),
                                 np.random.default_rng(7))
    slot, k_used = (1, 3) if reuse else (3, 4)
    assert got[:2] == (1, k_used) and z.tolist() == [slot]
    n_wk, n_k, beta = table
    assert n_k.tolist() == ([5, 1, 0, 0] if reuse else [5, 0, 0, 1])
    assert n_wk[0].tolist() == ([0, 1, 0, 0] if reuse else [0, 0, 0, 1])
    assert beta[0] == 1e-12 and beta[2] == 0 and 0 < beta[slot] < 1 and beta[1 if reuse else 3] == beta[slot]
    drawn = dict(zip(("beta", "beta_new"), (beta[slot], got[2])))
    doc, table, beta_new = _hole_table(4)        # the other flag: the same draws in another slot
    _hdp_gibbs.gibbs_sweep(*doc, np.array([2], np.int32), table, beta_new, 3, dict(settings, reuse_holes=not reuse),
                           0, _hdp_gibbs.word_lists(table[0], 3), np.random.default_rng(7))
    assert table[2][3 if reuse else 1] == drawn["beta"]
    doc, table, beta_new = _hole_table(3)        # every slot in use
    z = np.array([2], np.int32)
    got = _hdp_gibbs.gibbs_sweep(*doc, z, table, beta_new, 3, settings, 0, _hdp_gibbs.word_lists(table[0], 3),
                                 np.random.default_rng(7))
    if reuse:
        assert got == (1, 3, drawn["beta_new"]) and z.tolist() == [1]
    else:
        assert got == (0, 3, beta_new) and z.tolist() == [2] and table[1].tolist() == [5, 0, 1]


@pytest.mark.parametrize("single", [True, False])
def test_local_step_appends_new_topics_after_the_shared_slots(single):
    """A block whose one token is the whole of shared topic 0: the token leaves it
    (topic 0 is deleted in the block's copy), topic 1 has almost no weight, so the
    token starts a new topic. Of several partitions, the kernel appends it at slot
    K = 2 (never the hole of slot 0), which the output counts as a new topic, and
    topic 0 as emptied (its move minus its counts). One partition (the generator
    travels) is the sequential sweep: the new topic takes the hole."""
    W, cap, K = 3, 16, 2
    n_wk, n_k, beta = np.zeros((W, cap), np.int32), np.zeros(cap, np.int64), np.zeros(cap)
    n_wk[0, 0], n_wk[1, 1] = 1, 5
    n_k[:K], beta[:K] = (1, 5), (0.5, 1e-12)
    part = {"indptr": np.array([0, 1]), "indices": np.array([0], np.int32), "counts": np.array([1], np.int32),
            "z": np.array([0], np.int32), "tok_ptr": np.array([0, 1]), "first_doc": 0}
    rng = np.random.default_rng(7) if single else 7
    new, out = _DelayedGibbsState.local_step(part, n_wk[:, :K].copy(), n_k[:K], beta[:K], 0.5 - 1e-12, cap,
                                             {"alpha": 1.0, "gamma": 1.0, "eta": 0.1}, rng)
    assert part["z"].tolist() == [0]                    # the input untouched
    if single:
        (copy_wk, copy_k, copy_beta), capacity, _, _ = out
        assert new["z"].tolist() == [0] and capacity == cap
        assert copy_k.tolist() == [1, 5] and copy_wk[:, 0].tolist() == [1, 0, 0]
        assert 0 < copy_beta[0] < 1 and copy_beta[0] != 0.5
        return
    moves_wk, moves_k, births, born_wk, born_k, born_beta = out
    assert new["z"].tolist() == [K]
    assert births.tolist() == [K]
    assert moves_wk[:, 0].tolist() == [-1, 0, 0] and not moves_wk[:, 1].any()
    assert moves_k.tolist() == [-1, 0]
    assert born_wk[:, 0].tolist() == [1, 0, 0] and born_k.tolist() == [1]
    assert 0 < born_beta[0] < 1 and born_beta[0] != 0.5      # a new stick of beta_new (0.5 + topic 0's 0.5)


def test_only_the_delayed_schedule_runs_on_partitions():
    from bnpcore.hdp import PartiallyCollapsedGibbs
    assert DirectAssignmentGibbs.partitioned
    DirectAssignmentGibbs(schedule="delayed").check_partitioned()
    PartiallyCollapsedGibbs().check_partitioned()        # no schedules: runs as it is
    with pytest.raises(ValueError, match="schedule='delayed' only.*got schedule='sequential'"):
        DirectAssignmentGibbs().check_partitioned()
