"""Build bnpcore: cythonize pyx/ into bnpcore.kernels.*, ship the .pxd files and the C header.

Cython resolves ``cimport bnpcore.kernels.special`` only through a package-shaped
directory, so the sources in pyx/ are first copied to build/cysrc/bnpcore/kernels/
and cythonized from there (numpy's meson build copies its .pxd files the same way).

Environment switches:
  BNPCORE_NO_OPENMP=1     build without OpenMP (prange loops then run serially)
  BNPCORE_CYTHON_DEBUG=1  turn bounds/wraparound/initialized checks back on
Changing either regenerates and recompiles every module (build/cysrc/build-config.json
records the configuration of the last build).
"""
import json
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
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
CYSRC = HERE / "build" / "cysrc"
OPENMP_TEST = """#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return !(n >= 1 && omp_get_max_threads() >= 1);
}
"""


def env_flag(name):
    return os.environ.get(name, "0") not in ("", "0")


def openmp_flags():
    """-fopenmp if the compiler builds and runs an OpenMP program, else no flags."""
    if env_flag("BNPCORE_NO_OPENMP"):
        return []
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    with tempfile.TemporaryDirectory() as tmp:
        c_file, exe = Path(tmp) / "omp.c", Path(tmp) / "omp"
        c_file.write_text(OPENMP_TEST)
        try:
            subprocess.run(cc.split() + ["-fopenmp", str(c_file), "-o", str(exe)], check=True,
                           capture_output=True)
            subprocess.run([str(exe)], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            print("bnpcore: OpenMP not available, building serial kernels", file=sys.stderr)
            return []
    return ["-fopenmp"]


def copy_cython_sources():
    """Mirror pyx/ as build/cysrc/bnpcore/kernels/ so cimports resolve; returns the
    mirrored .pyx files (stale copies of deleted sources are removed)."""
    dest = CYSRC / "bnpcore" / "kernels"
    dest.mkdir(parents=True, exist_ok=True)
    (CYSRC / "bnpcore" / "__init__.py").touch()
    sources = {src.name: src for src in (HERE / "pyx").iterdir() if src.suffix in (".pyx", ".pxd", ".py")}
    for old in dest.iterdir():
        if old.suffix in (".pyx", ".pxd", ".py") and old.name not in sources:
            old.unlink()
    for name, src in sorted(sources.items()):
        target = dest / name
        if not target.exists() or target.read_bytes() != src.read_bytes():
            shutil.copyfile(src, target)
    return sorted(dest / name for name in sources if name.endswith(".pyx"))


def build_config_changed(config):
    """True when this build's switches differ from the last build's (then every
    module is regenerated and recompiled)."""
    stamp = CYSRC / "build-config.json"
    old = json.loads(stamp.read_text()) if stamp.is_file() else None
    stamp.write_text(json.dumps(config, sort_keys=True))
    return old != config


def extensions():
    pyx_files = copy_cython_sources()
    omp = openmp_flags()
    debug = env_flag("BNPCORE_CYTHON_DEBUG")
    # regenerating the C files makes them newer than the built modules: all recompile
    changed = build_config_changed({"openmp": omp, "debug": debug})
    exts = [
        Extension(
            f"bnpcore.kernels.{pyx.stem}",
            [str(pyx.relative_to(HERE))],
            include_dirs=[str(HERE / "include"), numpy.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=["-O3"] + omp,
            extra_link_args=omp,
        )
        for pyx in pyx_files
    ]
    return cythonize(
        exts,
        include_path=[str(CYSRC)],
        force=changed,
        compiler_directives={
            "language_level": 3,
            "boundscheck": debug,
            "wraparound": debug,
            "initializedcheck": debug,
            "cdivision": not debug,
        },
    )


def metadata_only(argv):
    """True for the commands that build no module: ``sdist`` (MANIFEST.in lists the
    sources), ``egg_info``, ``dist_info``. They then skip cythonizing every kernel."""
    builds = {"build", "build_ext", "build_py", "bdist_wheel", "editable_wheel", "develop", "install", "bdist"}
    return bool({"sdist", "egg_info", "dist_info"} & set(argv)) and not builds & set(argv)


class BuildExt(build_ext):
    """MSVC takes /O2 where gcc and clang take -O3, and has no -fopenmp (the probe in
    openmp_flags finds no ``cc`` there, so the kernels are serial)."""

    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            for ext in self.extensions:
                ext.extra_compile_args = ["/O2" if a == "-O3" else a for a in ext.extra_compile_args
                                          if a != "-fopenmp"]
                ext.extra_link_args = [a for a in ext.extra_link_args if a != "-fopenmp"]
        super().build_extensions()


setup(
    cmdclass={"build_ext": BuildExt},
    packages=find_packages(include=["bnpcore", "bnpcore.*"]) + ["bnpcore.kernels", "bnpcore.include"],
    package_dir={"bnpcore.kernels": "pyx", "bnpcore.include": "include"},
    package_data={
        "bnpcore.kernels": ["*.pxd", "*.pyx"],
        "bnpcore.include": ["bnpcore/*.h"],
        "bnpcore.datasets": ["data/*"],
    },
    ext_modules=[] if metadata_only(sys.argv[1:]) else extensions(),
    zip_safe=False,
)
