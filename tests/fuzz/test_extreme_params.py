"""Extreme values of every constructor parameter of every registered estimator
(``bnpcore.registry``): zero, negative, subnormal, 1e-300, 1e300, 1.7e308,
inf, NaN, integers too large for a float (``10**400``), integers at and past
2**31, 10**7 (sizes and loop counts), and extreme gamma hyperpriors.

Each case fits a small corpus with ``max_seconds=1`` (where ``fit`` takes it)
in a child process limited to 3 GB of address space, with a 60 s timeout. A
case passes with a fit whose ``transform`` and ``get_topics`` rows are finite
distributions, or with a ValueError/TypeError naming the parameter. A death
(a crash or a kill), a timeout, a MemoryError (the memory estimate of ``fit``,
``bnpcore._validation.check_memory``, should have refused the setting), any
other exception or a NaN output fails.

The default run takes the most extreme values of every parameter of one
registry entry per class (about half a minute); ``pytest -m slow`` runs every
value on every registry entry. ``BNPCORE_FUZZ_REPORT=path`` writes the counts.

Run as a script, this file is the child process: it reads cases (pickled,
in hex) on stdin and answers one line of JSON per case.
"""
import collections
import importlib.util
import inspect
import json
import math
import os
import pickle
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest

from bnpcore import registry

MEMORY = 3 << 30
TIMEOUT = 60.0
_spec = importlib.util.spec_from_file_location("bnpcore_fuzz_isolated", Path(__file__).with_name("_isolated.py"))
_isolated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_isolated)
MAX_SECONDS = 1.0

FLOATS = [0.0, -1.0, 5e-324, 1e-300, 1e-100, 1e100, 1e300, 1.7e308, math.inf, -math.inf, math.nan, 10 ** 400,
          -10 ** 400]
INTS = [0, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 63, 10 ** 7, 10 ** 400, 2.5, math.nan]
GAMMA_PRIORS = [(1e-300, 1e-300), (1e300, 1e300), (1e-300, 1.0), (1.0, 1e-300), (1e300, 1.0), (1.0, 1e300),
                (1e-100, 1e-100), (10 ** 400, 1.0), (1.0, 10 ** 400), (math.nan, 1.0)]
# the extremes of the default run
FLOATS_QUICK = [1e-300, 1.7e308, math.nan, 10 ** 400]
INTS_QUICK = [2 ** 31, 10 ** 7, 2 ** 63]
GAMMA_QUICK = [(1e-300, 1e-300), (1e300, 1.0), (10 ** 400, 1.0)]
# parameters whose default is None: the kind of value they take otherwise
NONE_KINDS = {"alpha": "float", "gamma": "float", "epsilon": "float", "tau_prior": "float",
              "prune_every": "int", "total_samples": "int", "max_steps": "int", "max_merges": "int",
              "n_threads": "int"}
# integer parameters whose default is "auto" (chosen from the corpus)
AUTO_INTS = {"n_components", "n_epochs", "max_iter", "burn_in", "n_samples"}
SKIP = {"random_state"}


def kind_of(name, default):
    if default == "auto" and name in AUTO_INTS:
        return "int"
    if name in SKIP or isinstance(default, (bool, str)):
        return None
    if default is None:
        return NONE_KINDS.get(name)
    if isinstance(default, tuple) and len(default) == 2 and all(isinstance(v, float) for v in default):
        return "gamma"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    return None


def entries():
    """One registry name per class (the default run) and all of them."""
    seen, first = set(), []
    for name in registry.names():
        path = registry.get(name).path
        if path not in seen:
            seen.add(path)
            first.append(name)
    return first, registry.names()


def cases(full):
    """(model, parameter, value) of every case, in a fixed order."""
    quick, every = entries()
    values = {"float": FLOATS, "int": INTS, "gamma": GAMMA_PRIORS} if full else \
        {"float": FLOATS_QUICK, "int": INTS_QUICK, "gamma": GAMMA_QUICK}
    out = []
    for model in (every if full else quick):
        params = registry.get(model).load_class()().get_params()
        for name in sorted(params):
            kind = kind_of(name, params[name])
            if kind is not None:
                out.extend((model, name, value) for value in values[kind])
    return out


def corpus():
    """30 documents over 20 words, 1-40 tokens each."""
    from bnpcore.corpus import Corpus
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.6, size=(30, 20))
    counts[:, 0] += 1
    return Corpus(counts)


# -- the child process -------------------------------------------------------------
def distribution_problem(label, rows):
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2:
        return f"{label} has shape {rows.shape}"
    if not np.all(np.isfinite(rows)):
        return f"{label} is not finite"
    if rows.size and (rows.min() < 0 or not np.allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-8)):
        return f"{label} rows are not distributions"
    return None


def run_case(model, name, value, X):
    est = registry.get(model).make(test=True, **{name: value, "random_state": 0})
    takes = inspect.signature(est.fit).parameters.values()   # max_seconds, or **kwargs passed on to it
    kwargs = {"max_seconds": MAX_SECONDS} if any(p.name == "max_seconds" or p.kind == p.VAR_KEYWORD
                                                  for p in takes) else {}
    tick = time.perf_counter()
    est.fit(X, **kwargs)
    seconds = time.perf_counter() - tick
    problems = [p for p in (distribution_problem("transform", est.transform(X)),
                            distribution_problem("get_topics", est.get_topics())) if p]
    return {"outcome": "ok", "problems": problems, "seconds": seconds}


def child():
    warnings.simplefilter("ignore")
    X = corpus()
    for line in sys.stdin:
        model, name, value = pickle.loads(bytes.fromhex(line.strip()))
        try:
            answer = run_case(model, name, value, X)
        except (ValueError, TypeError) as exc:
            answer = {"outcome": "error", "type": type(exc).__name__, "message": str(exc)}
        except MemoryError as exc:
            answer = {"outcome": "memory", "type": "MemoryError", "message": str(exc)}
        except Exception as exc:    # noqa: BLE001  (reported to the parent as a failure)
            answer = {"outcome": "unexpected", "type": type(exc).__name__, "message": str(exc),
                      "traceback": traceback.format_exc(limit=-4)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


# -- the parent --------------------------------------------------------------------
def Worker():
    """The long-lived child under the memory limit and timeout (``_isolated.Worker``)."""
    return _isolated.Worker(MEMORY, TIMEOUT, script=Path(__file__), encode=lambda case: pickle.dumps(case).hex())


STATS = collections.Counter()


def sweep(full):
    """Run the cases; returns the failures (one line each) and fills STATS."""
    failures = []
    worker = Worker()
    try:
        for case in cases(full):
            answer = worker.run(case)
            STATS["cases"] += 1
            problem = judge(case, answer)
            if problem:
                failures.append(f"{case[0]} {case[1]}={case[2]!r}: {problem}")
    finally:
        worker.close()
    if os.environ.get("BNPCORE_FUZZ_REPORT"):
        Path(os.environ["BNPCORE_FUZZ_REPORT"]).write_text(json.dumps(dict(STATS), indent=1))
    return failures


def judge(case, answer):
    """None for a pass, else what went wrong (and STATS counts it)."""
    outcome = answer["outcome"]
    if outcome == "died":
        STATS["crashes" if answer["returncode"] < 0 and answer["returncode"] != -9 else "kills"] += 1
        return f"the child died ({answer['returncode']})"
    if outcome == "timeout":
        STATS["kills past the limits (timeouts)"] += 1
        return f"no answer within {TIMEOUT:g} s"
    if outcome == "memory":
        STATS["kills past the limits (MemoryError)"] += 1
        return f"MemoryError: {answer['message']}"
    if outcome == "unexpected":
        STATS["errors of an undocumented type"] += 1
        return f"{answer['type']}: {answer['message']}\n{answer['traceback']}"
    if outcome == "error":
        if case[1] not in answer["message"]:
            STATS["errors not naming the parameter"] += 1
            return f"{answer['type']} does not name {case[1]}: {answer['message']}"
        STATS["clear errors"] += 1
        return None
    if answer["problems"]:
        STATS["NaN or non-normalised outputs"] += 1
        return "; ".join(answer["problems"])
    STATS["fits"] += 1
    if answer["seconds"] > MAX_SECONDS + 1.0:
        STATS["fits past max_seconds + 1 s"] += 1      # counted, not failed (no timing assertions)
    return None


def check(full):
    failures = sweep(full)
    print("\nextreme-parameter suite:", dict(STATS))
    assert not failures, f"{len(failures)} of {STATS['cases']} cases failed:\n" + "\n".join(failures)


def test_extreme_values_of_every_parameter_quick():
    check(full=False)


@pytest.mark.slow
def test_extreme_values_of_every_parameter_full():
    check(full=True)


if __name__ == "__main__":
    child()
