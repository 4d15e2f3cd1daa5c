"""Crafted checkpoints: every value of a batch checkpoint's resume record and
state altered (shapes, dtypes, out-of-range and inconsistent entries), then
``bnpcore.load(file).fit(X, resume=True)`` in a child process with a memory
limit and a timeout (_isolated.py). A case passes with a ValueError naming
the file, or, for an alteration that leaves a valid state (work space, values
every sweep overwrites), with a clean run; a crash, a kill, a hang, another
exception type, or an invalid state accepted fails.

The default run covers three samplers (lda.CollapsedGibbs,
hdp.DirectAssignmentGibbs, lda.PartiallyCollapsedGibbs); ``-m slow`` every
batch topic model whose state declares its invariants.
"""
import collections
import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from bnpcore import registry
from bnpcore.corpus import Corpus

_spec = importlib.util.spec_from_file_location("bnpcore_fuzz_isolated", Path(__file__).with_name("_isolated.py"))
_isolated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_isolated)
Worker = _isolated.Worker

DEFAULT = ["lda-cgs", "hdp-gibbs", "lda-pcgs"]
SLOW = ["lda-svb", "lda-cvb", "lda-cvb0", "lda-svb-cgs", "lda-cvb-cgs", "lda-pcgs-ppu", "hdp-pcgs", "hdp-cvb",
        "hdp-da-batch", "hdp-da-sm", "ep-nrm", "gibbs-nrm", "lda-cgs@delayed", "lda-cvb@delayed"]
# entries that only size work space (rebuilt when too short) or that every sweep overwrites
UNCHECKED = {"iscratch", "scratch", "wtopics", "m_k", "beta", "sum_dk", "sum_wk",
             "_V_jk", "_Z_jk", "_V_wk", "_Z_wk", "_G_beta", "_E_beta", "_sticks", "_a_tau", "_G_tau", "_E_tau",
             "_prior_doc", "_prior_word", "_prior_topic", "_entropy", "E_alpha", "G_alpha", "E_gamma",
             "Elog_gamma", "E_eta", "G_eta", "doc", "doc_topic", "topic", "topic_word", "kl_alpha", "kl_gamma",
             "kl_sticks", "entropy", "lam", "theta", "alpha", "gamma", "eta", "_last_bound", "learning_offset",
             "learning_decay", "merge_threshold", "prune_threshold", "estep_tol", "documents", "updates",
             "init_gibbs_iter", "restricted_iter", "restricted_sweeps", "max_splits", "max_merges",
             "split_candidates", "merge_candidates", "estep_max_iter", "logP", "S", "lam_tot", "epoch",
             "merge_threshold", "u_last", "change", "log_u", "n_obs", "position", "epsilon", "tau", "a", "sigma"}
UNCHECKED_IN = {"gibbs-nrm": {"n_sites"}}      # a counter of EP's sites, unused by the sampler
# integer arrays that must agree with the labels and the corpus
COUNTS = {"z", "labels", "nwk", "nk", "wlen", "cg_dk", "cg_wk", "cg_k", "n_wk", "n_k"}
STATS = collections.Counter()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    print("\ncrafted checkpoints:", dict(STATS))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """name -> (checkpoint of an interrupted fit, its corpus file), for every model."""
    tmp = tmp_path_factory.mktemp("checkpoints")
    rng = np.random.default_rng(0)
    X = Corpus(rng.poisson(0.8, size=(12, 9)))
    Corpus.save(X, tmp / "corpus.npz")
    out = {}
    for name in DEFAULT + SLOW:
        model, _, schedule = name.partition("@")       # "@delayed": the delayed schedule's state, two threads
        est = registry.get(model).make(test=True, random_state=0)
        est.set_params(**{est._iterations: 4}, **({"schedule": schedule, "n_threads": 2} if schedule else {}))
        est.fit(X, max_seconds=1e-9, checkpoint=tmp / f"{name}.npz")
        out[name] = tmp / f"{name}.npz", tmp / "corpus.npz"
    return out


def read(path):
    with np.load(path, allow_pickle=False) as f:
        return json.loads(str(f["__meta__"])), {k: f[k] for k in f.files if k != "__meta__"}


def write(path, meta, arrays):
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


def entries(value, label):
    """(label, container, key) of every array reference and number inside the state."""
    if isinstance(value, dict) and "__array__" in value:
        return
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        sub = f"{label}[{key!r}]" if label else str(key)
        if isinstance(item, dict) and "__array__" in item:
            yield sub, value, key
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            yield sub, value, key
        elif isinstance(item, (dict, list)) and "__generator__" not in item:
            yield from entries(item.get("__tuple__", item) if isinstance(item, dict) else item, sub)


def leaf(label):
    return label.split("[")[-1].strip("']") if "[" in label else label


def alterations(meta, arrays, model):
    """(label, must the file be refused?, alter(meta, arrays) in place) for every entry of the state."""
    resume = meta["attrs"]["_resume"]

    def set_resume(key, value):
        return lambda m, a: m["attrs"]["_resume"].__setitem__(key, value)
    yield "iteration=-1e9", True, set_resume("iteration", -10 ** 9)
    yield "iteration=1e12", True, set_resume("iteration", 10 ** 12)
    yield "iteration='3'", True, set_resume("iteration", "3")
    yield "fit_seconds=nan", True, set_resume("fit_seconds", math.nan)
    yield "fingerprint", True, set_resume("fingerprint", "1x1:1:00000000")
    yield "state_class", True, set_resume("state_class", "os:system")
    from bnpcore.inference.batch import _STATE_CLASSES
    for key in sorted(_STATE_CLASSES):          # every other state class: refused, or a clean run
        if key != resume["state_class"]:
            yield f"state_class={key}", False, set_resume("state_class", key)
    yield "state=None", True, set_resume("state", None)
    yield "state=[]", True, set_resume("state", [])
    yield "no state", True, lambda m, a: m["attrs"]["_resume"].pop("state")
    for label, container, key in list(entries(resume["state"], "")):
        name = leaf(label)
        checked = name not in UNCHECKED | UNCHECKED_IN.get(model, set())
        item = container[key]

        def on(fn, container=container, key=key, item=item):
            def alter(m, a):
                target = m["attrs"]["_resume"]["state"]
                for k in path_of[id(container)]:
                    target = target[k]
                if isinstance(item, dict):
                    a[item["__array__"]] = fn(a[item["__array__"]])
                else:
                    target[key] = fn(item)
            return alter
        if isinstance(item, dict):
            arr = arrays[item["__array__"]]
            if arr.ndim and len(arr):
                yield f"{label}: one row fewer", checked, on(lambda a: a[:-1])
                yield f"{label}: one row more", checked, on(lambda a: np.concatenate([a, a[-1:]]))
                yield f"{label}: a column fewer", checked and arr.ndim == 2, on(lambda a: a[..., :-1])
            if arr.dtype.names:         # a record of counters (NGGP states): each field out of range
                for field in arr.dtype.names:
                    for value in (2 ** 30, -5):
                        def put_field(a, field=field, value=value):
                            a = a.copy()
                            a[field] = value
                            return a
                        yield (f"{label}[{field!r}] = {value}", arr.dtype[field].kind == "i" and checked
                               and field not in UNCHECKED | UNCHECKED_IN.get(model, set()), on(put_field))
                continue
            other = {"i": np.int64, "u": np.int32, "f": np.float32}[arr.dtype.kind]
            if arr.dtype == np.int64:
                other = np.int32
            yield f"{label}: dtype {np.dtype(other).name}", checked, on(lambda a, o=other: a.astype(o))
            yield f"{label}: a 2-d array", checked, on(lambda a: np.atleast_2d(a).reshape(1, -1)[:, :, None])
            if arr.size:
                for text, value in (("2**30", 2 ** 30), ("-5", -5), ("+1", None), ("nan", math.nan)):
                    if arr.dtype.kind != "f" and text == "nan" or arr.dtype.kind == "f" and text == "+1":
                        continue
                    if arr.dtype.kind == "u" and text == "-5":
                        continue

                    def put(a, value=value):
                        a = a.copy()
                        flat = a.reshape(-1)
                        if value is not None and a.dtype.kind in "iu":
                            value = min(value, np.iinfo(a.dtype).max)
                        flat[0] = flat[0] + 1 if value is None else value
                        return a
                    refuse = checked and (value is not None or name in COUNTS) and not (
                        arr.dtype.kind == "f" and text == "2**30")
                    yield f"{label}: an entry {text}", refuse, on(put)
        else:
            yield f"{label}=-5", checked, on(lambda v: -5)
            yield f"{label}='x'", checked, on(lambda v: "x")
            if isinstance(item, float):
                yield f"{label}=nan", checked, on(lambda v: math.nan)

    path_of = {}

    def index(value, path):
        path_of[id(value)] = path
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for k, v in items:
            if isinstance(v, dict) and "__tuple__" in v:
                path_of[id(v["__tuple__"])] = path + [k, "__tuple__"]
                index(v["__tuple__"], path + [k, "__tuple__"])
            elif isinstance(v, (dict, list)):
                index(v, path + [k])
    index(resume["state"], [])


def judge(case, answer, refuse, label):
    STATS["cases"] += 1
    outcome = answer["outcome"]
    if outcome in ("died", "timeout", "unexpected"):
        STATS[outcome] += 1
        pytest.fail(f"{label}: {outcome}: {answer}")
    if outcome == "error":
        STATS["clear errors"] += 1
        if os.fspath(case["model"]) not in answer["message"]:
            STATS["unclear errors"] += 1
            pytest.fail(f"{label}: the error does not name the file: {answer}")
        return
    if refuse:
        STATS["silent acceptances"] += 1
        pytest.fail(f"{label}: the altered checkpoint was accepted")
    STATS["clean runs"] += 1


def run_all(model, worker, files, tmp_path):
    path, corpus = files[model]
    meta, arrays = read(path)
    gen = list(alterations(meta, arrays, model))
    assert len(gen) > 20
    failures = []
    for i, (label, refuse, alter) in enumerate(gen):
        m, a = json.loads(json.dumps(meta)), dict(arrays)
        alter(m, a)
        crafted = tmp_path / f"{model}-{i}.npz"
        write(crafted, m, a)
        case = {"kind": "resume", "model": os.fspath(crafted), "corpus": os.fspath(corpus)}
        try:
            judge(case, worker.run(case), refuse, f"{model} {label}")
        except pytest.fail.Exception as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


def set_state(name, value, key=None):
    """An alteration setting the state's array ``name`` (``key`` inside it) to ``value(array)``."""
    def alter(meta, arrays):
        ref = meta["attrs"]["_resume"]["state"][name]
        ref = ref[key] if key else ref
        arrays[ref["__array__"]] = value(arrays[ref["__array__"]])
    return alter


ISSUE_CASES = {     # the examples of the issue that crashed or hung fit(resume=True)
    "lda-cgs wtopics = 2**30": ("lda-cgs", set_state("wtopics", lambda a: np.full_like(a, 2 ** 30))),
    "lda-cgs wlen = 2**30": ("lda-cgs", set_state("wlen", lambda a: np.full_like(a, 2 ** 30))),
    "lda-cgs fewer nwk rows": ("lda-cgs", set_state("nwk", lambda a: a[:-3])),
    "hdp-gibbs fewer n_wk rows": ("hdp-gibbs", set_state("topics", lambda a: a[:-3], "n_wk")),
    "iteration -10**9": ("lda-cgs", lambda m, a: m["attrs"]["_resume"].__setitem__("iteration", -10 ** 9)),
}


@pytest.mark.parametrize("label", sorted(ISSUE_CASES))
def test_the_issues_checkpoints_are_refused(label, worker, files, tmp_path):
    model, alter = ISSUE_CASES[label]
    path, corpus = files[model]
    meta, arrays = read(path)
    alter(meta, arrays)
    write(tmp_path / "crafted.npz", meta, arrays)
    case = {"kind": "resume", "model": os.fspath(tmp_path / "crafted.npz"), "corpus": os.fspath(corpus)}
    judge(case, worker.run(case), True, label)


def test_the_untouched_checkpoints_resume(worker, files):
    for model in DEFAULT:
        path, corpus = files[model]
        answer = worker.run({"kind": "resume", "model": os.fspath(path), "corpus": os.fspath(corpus)})
        assert answer == {"outcome": "ok"}, (model, answer)


@pytest.mark.parametrize("model", DEFAULT)
def test_crafted_checkpoints_are_refused_by_name(model, worker, files, tmp_path):
    run_all(model, worker, files, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("model", SLOW)
def test_crafted_checkpoints_are_refused_by_name_slow(model, worker, files, tmp_path):
    run_all(model, worker, files, tmp_path)
