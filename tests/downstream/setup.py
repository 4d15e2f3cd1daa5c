"""Build the downstream example extension against the installed bnpcore:
``python setup.py build_ext --inplace`` (run by test_downstream.py in a copy of
this folder)."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

import bnpcore

ext = Extension(
    "bnp_downstream_ext",
    ["ext.pyx"],
    include_dirs=[bnpcore.get_include(), numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)
setup(name="bnp_downstream_ext", ext_modules=cythonize([ext], compiler_directives={"language_level": 3}))
