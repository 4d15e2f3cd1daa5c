"""Hypothesis suite over every registered estimator (the contract suite's list,
tests/api/conftest.py) and every Corpus builder: corpora of 0-20 documents and
1-20 words with counts 0-50, valid, extreme and invalid hyperparameters.

Each case runs in a child process (_worker.py) limited to 3 GB of address
space, so a crash or a kill is seen as the child's death, and a case that runs
past 60 s is a failure. A case passes with a ValueError/TypeError (for an
invalid value: one naming the parameter), or with finite, normalised results
(transform and get_topics rows sum to 1, score finite). A value outside the
documented range that is accepted is a silent acceptance and fails.

Run with ``pytest -m hypothesis -s`` (a fixed, derandomised budget of 2,000
cases, about half a minute on 2 cores; .ci/run runs it); ``BNPCORE_FUZZ_SCALE=3``
runs three times as many cases, ``BNPCORE_FUZZ_REPORT=path`` writes the counts.
"""
import collections
import importlib.util
import json
import math
import os
from pathlib import Path

import pytest

from bnpcore import registry

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.hypothesis

_spec = importlib.util.spec_from_file_location("bnpcore_fuzz_worker", Path(__file__).with_name("_worker.py"))
_worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_worker)
TOY_MODELS = _worker.TOY_MODELS

MODELS = registry.names() + sorted(TOY_MODELS)
MEMORY = 3 << 30
TIMEOUT = 60.0
_spec = importlib.util.spec_from_file_location("bnpcore_fuzz_isolated", Path(__file__).with_name("_isolated.py"))
_isolated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_isolated)
SCALE = float(os.environ.get("BNPCORE_FUZZ_SCALE", "1"))   # multiplies the number of cases
BUDGET = dict(deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Documented ranges of the priors (docs/numerics.md; written out, not imported, so
# that a changed range in the code fails here); a value outside must be refused.
PRIOR_RANGE = (1e-300, 1e300)
PRODUCT_RANGE = (1e-100, 1e100)
PRIORS = {"alpha", "eta", "gamma", "a", "tau", "eta_tot", "tau_prior", "alpha_prior", "gamma_prior", "eta_prior"}
NARROW = {("lda", name): PRODUCT_RANGE for name in ("alpha", "eta")}
NARROW.update({("hdp-cvb", name): PRODUCT_RANGE for name in ("alpha", "gamma", "eta_tot")})
NARROW.update({(model, name): PRODUCT_RANGE for model in ("hdp-da-sm", "hdp-da-batch") for name in ("alpha", "eta")})
NARROW.update({("tf-svi", "eta"): (1e-6, PRIOR_RANGE[1]), ("tf-svi", "a"): (PRIOR_RANGE[0], 1000.0),
               ("tf-svi", "gamma"): (PRIOR_RANGE[0], 1000.0)})
HYPERPRIOR_OF = {"alpha_prior": "alpha", "gamma_prior": "gamma", "eta_prior": "eta_tot"}
# parameters fuzzed as small integers (the others keep their registered values)
INTS = {"n_components", "n_atoms", "batch_size", "max_iter", "n_epochs", "burn_in", "n_samples", "threshold",
        "local_sweeps", "merge_every", "heldout_samples", "heldout_burnin", "n_concentration_rounds",
        "init_gibbs_iter", "max_doc_iter", "prune_every"}
NONE_ALLOWED = {"prune_every"}       # None: no pruning
SKIP = {"random_state", "n_threads", "total_samples"}


def prior_range(model, name):
    family = model.split("-")[0] if model.startswith("lda") else (
        "tf-svi" if model.endswith("tf-svi") else model)
    return NARROW.get((family, name), PRIOR_RANGE)


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# -- the child process ---------------------------------------------------------------
def Worker():
    """The long-lived child under the memory limit and timeout (``_isolated.Worker``)."""
    return _isolated.Worker(MEMORY, TIMEOUT, script=Path(__file__).with_name("_worker.py"), encode=json.dumps)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


STATS = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    print("\nhypothesis suite:", dict(STATS))
    if os.environ.get("BNPCORE_FUZZ_REPORT"):
        Path(os.environ["BNPCORE_FUZZ_REPORT"]).write_text(json.dumps(dict(STATS), indent=1))


def judge(kind, case, answer, invalid):
    """Count the answer; fail on a death, an unexpected exception, a non-finite
    or non-normalised result, a silent acceptance or an error not naming the
    invalid parameter (when the corpus has tokens: else the data may be what
    is refused first)."""
    STATS[f"{kind} cases"] += 1
    outcome = answer["outcome"]
    if outcome in ("died", "timeout", "unexpected"):
        STATS[outcome] += 1
        pytest.fail(f"{outcome}: {answer} for {case}")
    if outcome == "error":
        STATS[f"{kind} clear errors"] += 1
        named = case.get("params") or case.get("args") or {}
        has_tokens = any(any(row) for row in case["docs"])
        if invalid and has_tokens and not any(name in answer["message"] for name in named):
            STATS["unclear errors"] += 1
            pytest.fail(f"error does not name {sorted(invalid)}: {answer['message']} for {case}")
        return
    if answer["problems"]:
        STATS["non-finite or non-normalised"] += 1
        pytest.fail(f"{answer['problems']} for {case}")
    if invalid:
        STATS["silent acceptances"] += 1
        pytest.fail(f"accepted invalid {invalid} for {case}")
    STATS[f"{kind} clean runs"] += 1


# -- strategies --------------------------------------------------------------------
@st.composite
def count_matrices(draw):
    """(rows, width): 0-20 documents over 1-20 words, mostly zeros, counts up to 50."""
    width = draw(st.integers(1, 20))
    n_docs = draw(st.integers(0, 20))
    cell = st.one_of(st.just(0), st.integers(0, 3), st.integers(0, 50))
    return draw(st.lists(st.lists(cell, min_size=width, max_size=width), min_size=n_docs, max_size=n_docs)), width


NORMAL = st.floats(1e-3, 1e3)
EXTREME = st.sampled_from([1e-300, 1e-100, 1e-50, 1e-6, 1e6, 1e50, 1e100, 1e300])
OUTSIDE = st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf, 1e-320, 5e-324, 1e301, 1.7e308])
JUNK = st.sampled_from(["1", True, [1.0]])


def prior_value(model, name, default):
    """(value, invalid?) for a prior."""
    low, high = prior_range(model, name)
    tau_zero = name == "tau"

    def verdict(v):
        if v is None:
            return v, default is not None
        if not is_number(v):
            return v, True
        if v == 0 and tau_zero:
            return v, False
        return v, not (low <= v <= high)
    return st.one_of(NORMAL, EXTREME, OUTSIDE, JUNK, st.none()).map(verdict)


@st.composite
def hyperparameters(draw, model):
    """Overrides of some parameters of ``model`` and the names of those that are invalid."""
    spec = TOY_MODELS[model] if model in TOY_MODELS else registry.get(model)
    cls = spec.load_class()
    current = {**cls().get_params(), **spec.kwargs,
               **(spec.test_kwargs or {})}
    params, invalid = {}, set()
    valid_only = draw(st.booleans())    # half the cases: only in-range priors and sizes
    for name in sorted(current):
        # each parameter changed with probability 1/6 (1/2 for the priors of in-range cases)
        if name in SKIP or draw(st.integers(0, 1 if valid_only and name in PRIORS else 5)) != 0:
            continue
        default = current[name]
        if valid_only and name in PRIORS and not isinstance(default, tuple):
            low, high = prior_range(model, name)
            value, bad = draw(st.one_of(NORMAL, EXTREME).filter(lambda v: low <= v <= high)), False
        elif valid_only and name in INTS:
            value, bad = draw(st.integers(1, 5 if name in ("n_epochs", "max_iter") else 20)), False
        elif valid_only:
            continue
        elif name in PRIORS and isinstance(default, tuple):
            # a gamma hyperprior (shape, rate): both in range, and the mean in the concentration's range
            (a, bad_a), (b, bad_b) = draw(prior_value(model, name, 1.0)), draw(prior_value(model, name, 1.0))
            low, high = prior_range(model, HYPERPRIOR_OF[name])
            value, bad = (a, b), bad_a or bad_b or not low <= a / b <= high
        elif name in PRIORS:
            value, bad = draw(prior_value(model, name, default))
        elif name in INTS:
            value = draw(st.one_of(st.integers(-1, 20), st.sampled_from([2.5, "3", None])))
            if value is None:       # None is an option of these, and of any parameter whose default it is
                bad = default is not None and name not in NONE_ALLOWED
            else:
                bad = not isinstance(value, int) or value < 0
            if isinstance(value, int) and value >= 0:
                bad = False     # 0 is valid for some (burn_in, threshold): judged by the estimator
        elif is_number(default):
            value = draw(st.one_of(st.sampled_from([0.0, 0.5, 0.9, 1.0, 10.0]),
                                   st.sampled_from([math.nan, math.inf, -1.0, "x"])))
            bad = not is_number(value) or not math.isfinite(value) or value < 0
        elif isinstance(default, str):
            value = draw(st.sampled_from([default, "bogus"]))
            bad = value == "bogus"
        else:
            continue
        params[name] = value
        if bad:
            invalid.add(name)
    return params, invalid


# -- the suites --------------------------------------------------------------------
@settings(max_examples=int(1500 * SCALE), **BUDGET)
@given(data=st.data())
def test_estimators_refuse_or_give_finite_normalised_results(worker, data):
    model = data.draw(st.sampled_from(MODELS), label="model")
    rows, width = data.draw(count_matrices(), label="counts")
    params, invalid = data.draw(hyperparameters(model), label="params")
    case = {"kind": "estimator", "model": model, "params": {**params, "random_state": 0}, "docs": rows,
            "width": width}
    judge("estimator", case, worker.run(case), invalid)


@st.composite
def corpus_args(draw, width):
    n_words = draw(st.one_of(st.none(), st.integers(width, width + 3), st.sampled_from([0, -1, 2.5, "3", True])))
    args, invalid = {}, set()
    if n_words is not None:
        args["n_words"] = n_words
        if not (isinstance(n_words, int) and not isinstance(n_words, bool) and n_words >= 1):
            invalid.add("n_words")
    if draw(st.booleans()):
        size = draw(st.sampled_from([width, width + 1]))
        args["vocabulary"] = [draw(st.sampled_from(["w", "é", "a\u2028b", "x\x0cy"])) + str(i) for i in range(size)]
    return args, invalid


@settings(max_examples=int(500 * SCALE), **BUDGET)
@given(data=st.data())
def test_corpus_builders_refuse_or_keep_the_counts(worker, data):
    builder = data.draw(st.sampled_from(["tokens", "dense", "sparse", "uci", "saved"]), label="builder")
    rows, width = data.draw(count_matrices(), label="counts")
    args, invalid = data.draw(corpus_args(width), label="args") if builder in ("tokens", "dense", "sparse") \
        else ({}, set())
    case = {"kind": "corpus", "builder": builder, "docs": rows, "width": width, "args": args}
    judge("corpus", case, worker.run(case), invalid)
