"""Build bnpcore: cythonize pyx/ into bnpcore.kernels.*, ship the .pxd files and the C header.

Cython resolves ``cimport bnpcore.kernels.special`` only through a package-shaped
directory, so the sources in pyx/ are first copied to build/cysrc/bnpcore/kernels/
and cythonized from there (numpy's meson build copies its .pxd files the same way).

Environment switches:
  BNPCORE_NO_OPENMP=1     build without OpenMP (prange loops then run serially)
  BNPCORE_CYTHON_DEBUG=1  turn bounds/wraparound/initialized checks back on
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

HERE = Path(__file__).resolve().parent
CYSRC = HERE / "build" / "cysrc"


def openmp_flags():
    """-fopenmp if the compiler builds and runs an OpenMP program, else no flags."""
    if os.environ.get("BNPCORE_NO_OPENMP", "0") not in ("", "0"):
        return []
    cc = sysconfig.get_config_var("CC") or "cc"
    src = "#include <omp.h>\nint main(void){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\nreturn n<1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file, exe = Path(tmp) / "omp.c", Path(tmp) / "omp"
        c_file.write_text(src)
        try:
            subprocess.run(cc.split() + ["-fopenmp", str(c_file), "-o", str(exe)], check=True,
                           capture_output=True)
            subprocess.run([str(exe)], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            print("bnpcore: OpenMP not available, building serial kernels", file=sys.stderr)
            return []
    return ["-fopenmp"]


def copy_cython_sources():
    """Mirror pyx/ as build/cysrc/bnpcore/kernels/ so cimports resolve."""
    dest = CYSRC / "bnpcore" / "kernels"
    dest.mkdir(parents=True, exist_ok=True)
    (CYSRC / "bnpcore" / "__init__.py").touch()
    for src in sorted((HERE / "pyx").iterdir()):
        if src.suffix in (".pyx", ".pxd", ".py"):
            target = dest / src.name
            if not target.exists() or target.read_bytes() != src.read_bytes():
                shutil.copyfile(src, target)
    return dest


def extensions():
    dest = copy_cython_sources()
    omp = openmp_flags()
    debug = os.environ.get("BNPCORE_CYTHON_DEBUG", "0") not in ("", "0")
    exts = [
        Extension(
            f"bnpcore.kernels.{pyx.stem}",
            [str(pyx.relative_to(HERE))],
            include_dirs=[str(HERE / "include"), numpy.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=["-O3"] + omp,
            extra_link_args=omp,
        )
        for pyx in sorted(dest.glob("*.pyx"))
    ]
    return cythonize(
        exts,
        include_path=[str(CYSRC)],
        compiler_directives={
            "language_level": 3,
            "boundscheck": debug,
            "wraparound": debug,
            "initializedcheck": debug,
            "cdivision": not debug,
        },
    )


setup(
    packages=find_packages(include=["bnpcore", "bnpcore.*"]) + ["bnpcore.kernels", "bnpcore.include"],
    package_dir={"bnpcore.kernels": "pyx", "bnpcore.include": "include"},
    package_data={
        "bnpcore.kernels": ["*.pxd", "*.pyx"],
        "bnpcore.include": ["bnpcore/*.h"],
        "bnpcore.datasets": ["data/*"],
    },
    ext_modules=extensions(),
    zip_safe=False,
)
