"""bnpcore: fast inference for Bayesian nonparametric topic and mixture models.

Truncation-free, streaming and collapsed algorithms for HDP, DP and NGGP mixtures
of multinomials and LDA, with typed Cython kernels over a header-only C core.

Estimators live in ``bnpcore.lda``, ``bnpcore.hdp``, ``bnpcore.mixture`` and
``bnpcore.bayesnet`` (discrete Bayesian networks) (imported on first use); data in ``bnpcore.Corpus`` and ``bnpcore.datasets``;
metrics in ``bnpcore.evaluation``; the command line is ``bnpcore`` /
``python -m bnpcore``.

Docstrings cite the papers by these tags, with their equation and section numbers:

* [HYB] M. Welling, Y. W. Teh and B. Kappen, "Hybrid variational/Gibbs collapsed
  inference in topic models", UAI 2008.
* [CVHDP] Y. W. Teh, K. Kurihara and M. Welling, "Collapsed variational inference
  for HDP", NIPS 2007.
* [TF] C. Wang and D. M. Blei, "Truncation-free stochastic variational inference
  for Bayesian nonparametric models", NIPS 2012 (S.1-S.3: its supplement).
* [NRM] A. Tank, N. Foti and E. Fox, "Streaming variational inference for
  Bayesian nonparametric mixture models", AISTATS 2015.
* [SM] M. Bryant and E. B. Sudderth, "Truly nonparametric online variational
  inference for hierarchical Dirichlet processes", NIPS 2012.
"""
import importlib
from pathlib import Path

from bnpcore._defaults import CapacityWarning
from bnpcore._version import __version__
from bnpcore.base import NotFittedError, load
from bnpcore.corpus import Corpus, as_corpus

__all__ = ["Corpus", "as_corpus", "load", "NotFittedError", "CapacityWarning", "get_include", "__version__",
           "lda", "hdp", "mixture", "bayesnet", "datasets", "evaluation"]

_SUBMODULES = {"lda", "hdp", "mixture", "bayesnet", "datasets", "evaluation", "corpus", "base", "cli", "plot", "text",
               "registry"}


def __getattr__(name):
    # Submodules on first use (PEP 562): ``import bnpcore; bnpcore.hdp.CollapsedVB``
    # without importing every estimator family at ``import bnpcore``.
    if name in _SUBMODULES:
        return importlib.import_module(f"bnpcore.{name}")
    raise AttributeError(f"module 'bnpcore' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)


def get_include():
    """Directory holding ``bnpcore/bnpcore.h``, for ``include_dirs`` of extensions
    that ``#include "bnpcore/bnpcore.h"`` or ``cimport bnpcore.kernels.*``."""
    installed = Path(__file__).resolve().parent / "include"
    if (installed / "bnpcore" / "bnpcore.h").is_file():
        return str(installed)
    return str(Path(__file__).resolve().parent.parent / "include")  # editable install
