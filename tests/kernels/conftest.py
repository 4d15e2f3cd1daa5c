import pytest


@pytest.fixture
def mpmath():
    """mpmath working at 50 digits (the global precision is restored afterwards)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(50):
        yield mp
