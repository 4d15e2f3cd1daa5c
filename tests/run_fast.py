"""The fast test subset: what .ci/release and cibuildwheel run against an installed
wheel on every supported Python (a few minutes; the full suite runs on one Python).

    cd <somewhere outside the source tree>
    python <source>/tests/run_fast.py [pytest options]

Run from outside the source tree so that ``import bnpcore`` finds the installed
package, not the checkout (the script checks). It covers the compiled kernels, the
C header (C/C++ compilers, OpenMP and the non-GCC paths), building other extensions
against the installed header and .pxd files, the README's quick start, the command
line, persistence, the numerical policy, corpus input and the metrics.
"""
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FAST = [
    "kernels",
    "c",
    "downstream",
    "api/test_version.py",
    "api/test_docs_api.py",
    "api/test_readme.py",
    "api/test_cli.py",
    "api/test_base.py",
    "api/test_numerics.py",
    "test_corpus.py",
    "test_evaluation.py",
    "test_text.py",
]


def main(argv):
    import bnpcore

    package = Path(bnpcore.__file__).resolve().parent
    if TESTS.parent in package.parents:
        print(f"run_fast.py: bnpcore is imported from the source tree ({package}); run from another "
              "directory to test the installed package", file=sys.stderr)
        return 2
    print(f"bnpcore {bnpcore.__version__} from {package}")
    code = pytest.main(["-p", "no:cacheprovider", *argv, *(str(TESTS / p) for p in FAST)])
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("run_fast.py: no test ran", file=sys.stderr)
        return 1
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
