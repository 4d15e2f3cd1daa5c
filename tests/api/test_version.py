"""One version everywhere: bnpcore/_version.py is the only place it is written, and
``bnpcore.__version__``, ``bnpcore --version``, ``python -m bnpcore --version``, the
installed distribution's metadata (the wheel's METADATA) and CHANGELOG.md's newest
release all say the same."""
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bnpcore

ROOT = Path(__file__).resolve().parents[2]
# PEP 440 public versions (no local part): 0.1.0, 1.2.0rc1, 1.2.0.post1, 2.0.0.dev3
PEP440 = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")


def test_version_is_a_pep440_release_string():
    assert PEP440.fullmatch(bnpcore.__version__), bnpcore.__version__


def test_version_matches_the_installed_metadata():
    assert importlib.metadata.version("bnpcore") == bnpcore.__version__


def test_command_line_version(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bnpcore", "--version"], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout      # cwd: not the source tree, which -m would import
    assert out.strip() == f"bnpcore {bnpcore.__version__}"


def test_console_script_version():
    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "bnpcore"]
    assert script.value == "bnpcore.cli:main"
    exe = Path(sys.executable).parent / ("bnpcore.exe" if sys.platform == "win32" else "bnpcore")
    if not exe.is_file():
        pytest.skip("the bnpcore script is not beside this Python (not a venv install)")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"bnpcore {bnpcore.__version__}"


needs_source = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the source tree")


@needs_source
def test_version_is_written_once():
    from bnpcore import _version

    assert _version.__version__ == bnpcore.__version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, flags=re.M)
    assert 'version = { attr = "bnpcore._version.__version__" }' in pyproject
    assert not re.search(r"^version\s*=", pyproject.split("[tool.")[0], flags=re.M)  # none in [project]
    for path in (ROOT / "bnpcore").rglob("*.py"):
        if path.name != "_version.py":
            assert not re.search(r"^__version__\s*=", path.read_text(), flags=re.M), path


@needs_source
def test_changelog_describes_this_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (\S+)", changelog, flags=re.M)
    assert releases and releases[0] == bnpcore.__version__, releases[:1]
    assert len(releases) == len(set(releases))
