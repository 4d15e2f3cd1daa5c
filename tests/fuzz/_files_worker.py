"""Child process of the crafted-file and corrupted-corpus suites (_isolated.py):
one case per line of JSON on stdin, one answer per line on stdout.

Cases: ``{"kind": "resume", "model": path, "corpus": path}`` (``bnpcore.load``
a checkpoint, then ``fit(corpus, resume=True)``), ``{"kind": "open", "corpus":
dir, "estimator": name}`` (``Corpus.open`` an on-disk corpus, then fit the
registered estimator ``name`` for two iterations), ``{"kind": "load",
"model": path}`` and ``{"kind": "use", "model": path, "corpus": path,
"resume": bool}`` (load, ``transform``, and ``fit(resume=True)``). The answer
is ``{"outcome": "error", "type": ..., "message": ...}`` for a documented
error (ValueError; FileNotFoundError and IsADirectoryError, which
``bnpcore.load`` raises for a missing file or a folder), ``{"outcome": "ok"}``
when the case ran through, ``{"outcome": "unexpected", ...}`` for any other
exception.
"""
import json
import sys
import traceback
import warnings

import numpy as np

import bnpcore
from bnpcore import registry
from bnpcore.corpus import Corpus


def run(case):
    kind = case["kind"]
    if kind == "resume":
        model = bnpcore.load(case["model"])
        model.fit(Corpus.load(case["corpus"]), resume=True)
    elif kind == "open":
        corpus = Corpus.open(case["corpus"])
        if case.get("estimator"):
            spec = registry.get(case["estimator"])
            est = spec.make(test=True, random_state=0)
            est.set_params(**{est._iterations: 2})
            if hasattr(est, "n_threads"):
                est.set_params(n_threads=1)
            est.fit(corpus)
            est.transform(corpus)
    elif kind == "load":
        bnpcore.load(case["model"])
    elif kind == "use":             # a loaded model predicts, and continues its fit if it can
        model = bnpcore.load(case["model"])
        corpus = Corpus.load(case["corpus"])
        outputs = [model.transform(corpus)]
        if case.get("resume"):
            model.fit(corpus, resume=True)
            outputs.append(model.transform(corpus))
        if not all(np.isfinite(out).all() for out in outputs):
            return {"outcome": "non-finite", "message": "transform gave NaN or infinite proportions"}
    else:
        raise AssertionError(kind)


def main():
    warnings.simplefilter("ignore")
    for line in sys.stdin:
        case = json.loads(line)
        try:
            answer = run(case) or {"outcome": "ok"}
        except (ValueError, FileNotFoundError, IsADirectoryError) as exc:     # the documented errors
            answer = {"outcome": "error", "type": type(exc).__name__, "message": str(exc)}
        except Exception as exc:    # noqa: BLE001  (reported to the parent as a failure)
            answer = {"outcome": "unexpected", "type": type(exc).__name__, "message": str(exc),
                      "traceback": traceback.format_exc()}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
