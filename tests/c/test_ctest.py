"""Build tests/c/ctest.c against bnpcore's header as C99 and as C++ (warnings are
errors), run it, and run it again under valgrind and under ASan/UBSan.

ctest.c calls every function of bnpcore/bnpcore.h and of the kernels' internal
headers and checks the results; it prints the header's BNPCORE_ABI_VERSION, which
must match the version the installed extension modules were compiled with. The
public header comes from ``bnpcore.get_include()``, the internal ones (not
installed) from the source tree's include/.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import bnpcore
from bnpcore.kernels import special

SOURCE = Path(__file__).with_name("ctest.c")
INTERNAL = Path(__file__).resolve().parents[2] / "include"   # bnpcore/internal/*.h


def includes():
    return ["-I", bnpcore.get_include(), "-I", str(INTERNAL)]

FLAVOURS = {
    "c99": ("CC", "cc", ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]),
    "c++": ("CXX", "c++", ["-Wall", "-Wextra", "-Werror", "-pedantic", "-x", "c++"]),
}


def compiler(flavour):
    env, default, flags = FLAVOURS[flavour]
    exe = os.environ.get(env, default).split()
    if shutil.which(exe[0]) is None:
        pytest.skip(f"no {flavour} compiler ({exe[0]})")
    return exe + flags


def build(flavour, out, extra=()):
    cmd = compiler(flavour) + list(extra) + includes() + [str(SOURCE), "-o", str(out), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
    return proc.stdout


@pytest.mark.parametrize("flavour", ["c99", "c++"])
def test_header_compiles_without_warnings_and_ctest_passes(flavour, tmp_path):
    exe = build(flavour, tmp_path / "ctest", ["-O2"])
    out = run([str(exe)])
    assert f"abi {special.ABI_VERSION}\n" in out  # header == compiled modules


def test_ctest_passes_with_openmp(tmp_path):
    """With -fopenmp: bnp_once_claim's threads race for the same flags."""
    probe = subprocess.run(compiler("c99") + ["-fopenmp", "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="int main(void) { return 0; }\n", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the C compiler has no OpenMP")
    exe = build("c99", tmp_path / "ctest_omp", ["-O2", "-fopenmp"])
    run([str(exe)], env={**os.environ, "OMP_NUM_THREADS": "4"})


SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def run_sanitized(tmp_path):
    cmd = compiler("c99") + ["-O1", "-g"] + SANITIZE + includes() + [str(SOURCE), "-o", str(tmp_path / "ctest_san"),
                                                                      "-lm"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        pytest.skip("neither valgrind nor -fsanitize=address,undefined is available")
    run([str(tmp_path / "ctest_san")], env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})


def test_ctest_memory_clean(tmp_path):
    """Under valgrind (errors and leaks fail), or ASan/UBSan where valgrind is missing."""
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: running ctest under ASan/UBSan instead")
        run_sanitized(tmp_path)
        return
    exe = build("c99", tmp_path / "ctest", ["-O1", "-g"])
    run(["valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=all", "-q", str(exe)])


@pytest.mark.slow
def test_ctest_under_sanitizers(tmp_path):
    run_sanitized(tmp_path)
