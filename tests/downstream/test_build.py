"""The build itself (slow: each test compiles bnpcore from a copy of the source tree).

- ``pip wheel . -w <tmp> --no-deps --no-build-isolation`` gives a wheel holding the
  compiled modules, every public .pxd, the header and every Python package, with
  OpenMP on exactly when the compiler supports it;
- ``BNPCORE_NO_OPENMP=1 BNPCORE_CYTHON_DEBUG=1`` gives a serial build with Cython's
  bounds/wraparound/initialization checks on, and the kernel tests pass against it
  (the debug build of the CI job).
"""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (ROOT / "setup.py").is_file(), reason="needs the source tree"),
    pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc").split()[0]) is None, reason="no C compiler"),
]

OPENMP_PROGRAM = "#include <omp.h>\nint main(void){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\nreturn n<1;}\n"


def compiler_has_openmp(tmp):
    src, exe = tmp / "omp.c", tmp / "omp"
    src.write_text(OPENMP_PROGRAM)
    cc = os.environ.get("CC", "cc").split()
    built = subprocess.run(cc + ["-fopenmp", str(src), "-o", str(exe)], capture_output=True).returncode == 0
    return built and subprocess.run([str(exe)], capture_output=True).returncode == 0


def build_wheel(tmp, **env):
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "*.so", "__pycache__", ".pytest_cache", ".git"))
    out = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "-w", str(out), "--no-deps",
                           "--no-build-isolation"], cwd=src, capture_output=True, text=True,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (wheel,) = out.glob("bnpcore-*.whl")
    return src, wheel


def install(wheel, tmp):
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    return site


def run_python(site, code, cwd):
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_wheel_contents(tmp_path):
    src, wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for stem in ("special", "rng", "stirling", "sparse"):
        assert any(n.startswith(f"bnpcore/kernels/{stem}.") and n.endswith((".so", ".pyd")) for n in names), stem
    for pxd in (ROOT / "pyx").glob("*.pxd"):
        assert f"bnpcore/kernels/{pxd.name}" in names
    for pyx in (ROOT / "pyx").glob("*.pyx"):  # every kernel module is compiled
        assert any(n.startswith(f"bnpcore/kernels/{pyx.stem}.") and n.endswith((".so", ".pyd")) for n in names)
    assert "bnpcore/kernels/__init__.py" in names
    assert "bnpcore/include/bnpcore/bnpcore.h" in names
    assert not [n for n in names if "/internal/" in n]   # the kernels' private headers are not installed
    for init in ROOT.glob("bnpcore/**/__init__.py"):  # every Python package
        assert init.relative_to(ROOT).as_posix() in names

    site = install(wheel, tmp_path)
    out = run_python(site, "import bnpcore, bnpcore.kernels.special as s;"
                           "print(s.OPENMP, s.digamma(1.0), bnpcore.get_include())", cwd=tmp_path)
    openmp, psi1, include = out.split()
    assert openmp == str(compiler_has_openmp(tmp_path))
    assert float(psi1) == pytest.approx(-0.5772156649015329, rel=1e-15)
    assert Path(include) == site / "bnpcore" / "include"


def test_serial_debug_build_passes_the_kernel_tests(tmp_path):
    src, wheel = build_wheel(tmp_path, BNPCORE_NO_OPENMP="1", BNPCORE_CYTHON_DEBUG="1")
    generated = (src / "build" / "cysrc" / "bnpcore" / "kernels" / "special.c").read_text()
    assert "__Pyx_RaiseBufferIndexError" in generated  # bounds checks were compiled in
    site = install(wheel, tmp_path)
    assert run_python(site, "import bnpcore.kernels.special as s; print(s.OPENMP)", cwd=tmp_path) == "False"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "kernels")], cwd=run_dir, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
