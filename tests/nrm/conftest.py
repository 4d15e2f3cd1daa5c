import sys
from pathlib import Path

import pytest

# the naive references (nrm_reference.py) are imported by name under --import-mode=importlib
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config, items):
    """Long statistical checks (@pytest.mark.slow) run only when selected with ``-m slow``."""
    if "slow" in (config.getoption("markexpr", "") or ""):
        return
    here = Path(__file__).resolve().parent
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords and here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
