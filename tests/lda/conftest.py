"""Shared pieces of the LDA tests: the naive reference module and small corpora."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bnpcore.corpus import Corpus

_spec = importlib.util.spec_from_file_location("lda_reference", Path(__file__).with_name("_reference.py"))
reference_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference_module)


@pytest.fixture
def ref():
    """tests/lda/_reference.py: naive NumPy references."""
    return reference_module


def random_counts(seed, n_docs=20, n_words=15, density=0.35, max_count=4):
    """A dense random count matrix with repeated words and no empty row or column."""
    rng = np.random.default_rng(seed)
    C = rng.integers(1, max_count + 1, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < density)
    C[np.arange(n_docs), rng.integers(0, n_words, n_docs)] += 1
    C[rng.integers(0, n_docs, n_words), np.arange(n_words)] += 1
    return C.astype(np.int64)


@pytest.fixture
def make_counts():
    """random_counts(seed, n_docs=20, n_words=15, density=0.35, max_count=4)."""
    return random_counts


@pytest.fixture
def counts():
    return random_counts(0)


@pytest.fixture
def corpus(counts):
    return Corpus(counts)
