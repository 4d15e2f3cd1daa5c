# Kernels of the partially collapsed LDA sampler shared with the partially
# collapsed HDP sampler (_pchdp.pyx).
from libc.math cimport exp, log, pow
from libc.stdint cimport int32_t, int64_t

from bnpcore.kernels.rng cimport bnp_bitgen_t, bnp_rng_uniform, bnp_rng_uniform_pos


cdef inline double _log_gamma_small(bnp_bitgen_t *g, double a) noexcept nogil:
    """log of a Gamma(a, 1) draw for 0 < a < 1: Ahrens & Dieter's (1974) GS
    rejection sampler in log space. The Phi step's zero counts with eta < 1
    take this path: it halves the Phi step against bnp_rng_log_gamma (whose
    Gamma(a + 1) U^(1/a) costs a Marsaglia-Tsang draw, a normal and three logs):
    measured 3.4 s -> 1.6 s for a KOS-sized step (W = 6906, K = 1000, eta = 0.01,
    one thread of a loaded machine), the bottleneck of a sweep at that K.

    For x below exp(-38) < 2^-54, exp(-x) rounds to 1: the acceptance test of a
    draw this small always passes and is skipped."""
    cdef double b = 1.0 + a * 0.36787944117144233, p, lx, x    # (e + a) / e
    while True:
        p = b * bnp_rng_uniform_pos(g)
        if p <= 1.0:                             # density x^(a-1) on (0, 1], accept w.p. exp(-x)
            lx = log(p) / a
            if lx < -38.0 or bnp_rng_uniform(g) <= exp(-exp(lx)):
                return lx
        else:                                    # density exp(-x) on (1, inf), accept w.p. x^(a-1)
            x = -log((b - p) / a)
            if bnp_rng_uniform(g) <= pow(x, a - 1.0):
                return log(x)


cdef double _alias_row(const double *phi, const double *alpha, int64_t K, double *prob, int32_t *alias,
                       int32_t *small, int32_t *large) noexcept nogil
