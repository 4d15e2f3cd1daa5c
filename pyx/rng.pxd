# Public C-level API: random draws through numpy's bit generator interface.
# bnp_bitgen_t has the layout of numpy's bitgen_t; get one from a numpy.random.Generator
# with bitgen_of() and draw inside `with generator.bit_generator.lock, nogil:`.
# All draws are nogil; the caller owns the generator (one per thread, from SeedSequence.spawn).
from libc.stdint cimport int64_t, uint64_t

cdef extern from "bnpcore/bnpcore.h" nogil:
    ctypedef struct bnp_bitgen_t:
        pass
    double bnp_rng_uniform(bnp_bitgen_t *g)          # [0, 1)
    double bnp_rng_uniform_pos(bnp_bitgen_t *g)      # (0, 1)
    double bnp_rng_normal(bnp_bitgen_t *g)
    double bnp_rng_gamma(bnp_bitgen_t *g, double shape)          # Gamma(shape, 1)
    double bnp_rng_log_gamma(bnp_bitgen_t *g, double shape)      # log of it; finite for tiny shapes
    double bnp_rng_beta(bnp_bitgen_t *g, double a, double b)
    double bnp_rng_log_beta(bnp_bitgen_t *g, double a, double b, double *log1m)  # log V (and log(1-V))
    void bnp_rng_dirichlet(bnp_bitgen_t *g, const double *alpha, int64_t k, double *out)
    void bnp_rng_log_dirichlet(bnp_bitgen_t *g, const double *alpha, int64_t k, double *out)
    # Keyed streams: stream (key, a, b), e.g. (seed, sweep, document), gives the same
    # draws on any thread; stack-allocate one per document and pass &stream.bitgen.
    ctypedef struct bnp_stream_t:
        bnp_bitgen_t bitgen
    void bnp_stream_init(bnp_stream_t *r, uint64_t key, uint64_t a, uint64_t b)

# Exported: the bit generator of a numpy.random.Generator (or BitGenerator); needs the GIL,
# raises TypeError for anything else. The pointer lives as long as the generator.
cdef bnp_bitgen_t *bitgen_of(object generator) except NULL
