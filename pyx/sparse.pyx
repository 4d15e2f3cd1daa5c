"""Count-matrix helpers of the C core: documents x words in CSR form, with int64
row pointers and int32 word ids and counts (bnpcore.Corpus holds exactly these).

Public names (stable; downstream code may rely on them):

``expand_tokens(indptr, indices, counts)``
    One word id per token, document by document, and the token offsets.

At C level (``cimport bnpcore.kernels.sparse``): ``bnp_csr_t`` (borrows the
caller's arrays) with ``bnp_csr_row_nnz``, ``bnp_csr_row_total`` and
``bnp_csr_expand``; and the inline ``csr_view(indptr, indices, counts, n_cols)``
that wraps three memoryviews in a ``bnp_csr_t``.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t

cnp.import_array()


def _check_array(a, name, dtype):
    arr = np.asarray(a)
    if arr.dtype != dtype:
        raise TypeError(f"{name} must be an array of {np.dtype(dtype).name}, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def expand_tokens(indptr, indices, counts):
    """Token-expanded view of a CSR count matrix.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_docs + 1,)
        Row pointers: 0 first, non-decreasing, ``len(indices)`` last.
    indices : ndarray of int32, shape (nnz,)
        Word ids.
    counts : ndarray of int32, shape (nnz,)
        Non-negative counts.

    Returns
    -------
    word_ids : ndarray of int32, shape (n_tokens,)
        One entry per token, document by document, words in CSR order:
        ``np.repeat(indices, counts)``.
    token_ptr : ndarray of int64, shape (n_docs + 1,)
        The tokens of document j are ``word_ids[token_ptr[j]:token_ptr[j + 1]]``:
        ``np.concatenate([[0], np.cumsum(np.add.reduceat(counts, ...))])``, that is
        the running total of the documents' token counts.
    """
    ip = _check_array(indptr, "indptr", np.int64)
    ix = _check_array(indices, "indices", np.int32)
    ct = _check_array(counts, "counts", np.int32)
    if ip.shape[0] < 1:
        raise ValueError("indptr must hold at least one entry (n_docs + 1)")
    if ix.shape[0] != ct.shape[0]:
        raise ValueError(f"indices and counts differ in length ({ix.shape[0]} != {ct.shape[0]})")
    if ip[0] != 0 or ip[ip.shape[0] - 1] != ix.shape[0] or np.any(np.diff(ip) < 0):
        raise ValueError("indptr must start at 0, never decrease and end at len(indices)")
    if np.any(ct < 0):
        raise ValueError("counts must be non-negative")
    total = int(ct.sum(dtype=np.int64))
    word_ids = np.empty(total, dtype=np.int32)
    token_ptr = np.empty(ip.shape[0], dtype=np.int64)
    cdef const int64_t[::1] ipv = ip
    cdef const int32_t[::1] ixv = ix, ctv = ct
    cdef int32_t[::1] wv = word_ids
    cdef int64_t[::1] tv = token_ptr
    cdef bnp_csr_t m = csr_view(ipv, ixv, ctv, 0)
    with nogil:
        bnp_csr_expand(&m, &wv[0] if total else NULL, &tv[0])
    return word_ids, token_ptr
