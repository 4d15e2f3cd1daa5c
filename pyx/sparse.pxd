# Public C-level API: count matrices of include/bnpcore/bnpcore.h.
# bnp_csr_t borrows its arrays (the caller owns them). Nothing here needs the GIL.
from libc.stdint cimport int32_t, int64_t

cdef extern from "bnpcore/bnpcore.h" nogil:
    ctypedef struct bnp_csr_t:
        int64_t n_rows
        int64_t n_cols
        const int64_t *indptr
        const int32_t *indices
        const int32_t *counts
    int64_t bnp_csr_row_nnz(const bnp_csr_t *m, int64_t j)     # distinct words of document j
    int64_t bnp_csr_row_total(const bnp_csr_t *m, int64_t j)   # tokens of document j
    # word id of every token into out (caller-sized: total count); row offsets into tok_ptr (n_rows + 1)
    void bnp_csr_expand(const bnp_csr_t *m, int32_t *out, int64_t *tok_ptr)


# A bnp_csr_t view of three arrays (inline: memoryviews never cross module boundaries).
cdef inline bnp_csr_t csr_view(const int64_t[::1] indptr, const int32_t[::1] indices,
                               const int32_t[::1] counts, int64_t n_cols) noexcept nogil:
    cdef bnp_csr_t m
    m.n_rows = indptr.shape[0] - 1
    m.n_cols = n_cols
    m.indptr = &indptr[0]
    m.indices = &indices[0] if indices.shape[0] else NULL
    m.counts = &counts[0] if counts.shape[0] else NULL
    return m
