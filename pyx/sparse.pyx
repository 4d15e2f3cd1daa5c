"""Count-matrix helpers of the C core (CSR documents x words, int64 row pointers,
int32 word ids and counts)."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t

cnp.import_array()


def expand_tokens(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts):
    """Token-expanded view of a CSR count matrix.

    Returns ``(word_ids, token_ptr)``: ``word_ids`` (int32, one entry per token,
    document by document, words in CSR order) and ``token_ptr`` (int64, length
    n_docs + 1; the tokens of document j are ``word_ids[token_ptr[j]:token_ptr[j+1]]``).
    Equivalent to ``np.repeat(indices, counts)`` with row offsets.
    """
    if indptr.shape[0] < 1 or indices.shape[0] != counts.shape[0] or indptr[indptr.shape[0] - 1] != indices.shape[0]:
        raise ValueError("inconsistent CSR arrays")
    total = int(np.asarray(counts, dtype=np.int64).sum())
    word_ids = np.empty(total, dtype=np.int32)
    token_ptr = np.empty(indptr.shape[0], dtype=np.int64)
    cdef int32_t[::1] wv = word_ids
    cdef int64_t[::1] tv = token_ptr
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, 0)
    with nogil:
        bnp_csr_expand(&m, &wv[0] if total else NULL, &tv[0])
    return word_ids, token_ptr
