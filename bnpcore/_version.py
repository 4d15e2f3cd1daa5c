"""The version of bnpcore: the one place it is written.

``pyproject.toml`` reads it for the package metadata (``dynamic = ["version"]``,
``[tool.setuptools.dynamic]``), ``bnpcore.__version__`` and ``bnpcore --version``
import it. A release changes it together with CHANGELOG.md's newest heading
(tests/api/test_version.py checks that the two agree).
"""
__version__ = "0.1.0"
