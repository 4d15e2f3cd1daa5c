"""bnpcore: fast inference for Bayesian nonparametric topic and mixture models.

Truncation-free, streaming and collapsed algorithms for HDP, DP and NGGP mixtures
of multinomials and LDA, with typed Cython kernels over a header-only C core.
"""
from pathlib import Path

__version__ = "0.1.0"


def get_include():
    """Directory holding ``bnpcore/bnpcore.h``, for ``include_dirs`` of extensions
    that ``#include "bnpcore/bnpcore.h"`` or ``cimport bnpcore.kernels.*``."""
    installed = Path(__file__).resolve().parent / "include"
    if (installed / "bnpcore" / "bnpcore.h").is_file():
        return str(installed)
    return str(Path(__file__).resolve().parent.parent / "include")  # editable install
