/*
 * bnpcore/internal/fastmath.h -- exp and log that vectorise, for the inner
 * loops of bnpcore's own kernels (libm's are a call per entry).
 *
 * Internal: not part of the public C API (bnpcore/bnpcore.h), not installed
 * with the package, and free to change between releases. C99, static inline,
 * no global state. Their selects vectorise only where comparisons may not
 * trap: with GCC, include this header after
 * `#pragma GCC optimize("no-trapping-math")` so that its functions get the
 * option of the loops that inline them (the results are the same).
 *
 *   bnp_exp_neg(x) ... exp(x) for x <= 0; 0 below -708 (no subnormals), NaN
 *                      stays NaN. Within 2 ulp of libm's exp.
 *   bnp_log(x) ....... log(x) for finite normal x > 0. Within 2 ulp of libm's.
 */
#ifndef BNPCORE_INTERNAL_FASTMATH_H_
#define BNPCORE_INTERNAL_FASTMATH_H_

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BNP_FM_SHIFT 6755399441055744.0          /* 0x1.8p52: x + SHIFT - SHIFT rounds x */
#define BNP_FM_LN2_HI 0.693145751953125          /* 0x1.62e4p-1: k * LN2_HI exact for |k| < 2^37 */
#define BNP_FM_LN2_LO 1.4286068203094173e-06     /* ln 2 - LN2_HI */

static inline double bnp_fm_from_bits(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline uint64_t bnp_fm_to_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

/* x = n ln2 + r, |r| <= ln2 / 2, exp(r) by its Taylor polynomial of degree 13
 * (truncation < 4e-18), 2^n put into the exponent bits. */
static inline double bnp_exp_neg(double x) {
    double xc = x > -708.0 ? x : -708.0;
    double t = xc * 1.4426950408889634 + BNP_FM_SHIFT;
    double n = t - BNP_FM_SHIFT;
    double r = (xc - n * BNP_FM_LN2_HI) - n * BNP_FM_LN2_LO;
    double p = 1.0 / 6227020800.0;
    double scale;
    p = p * r + 1.0 / 479001600.0; p = p * r + 1.0 / 39916800.0; p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0; p = p * r + 1.0 / 40320.0; p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0; p = p * r + 1.0 / 120.0; p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0; p = p * r + 0.5; p = p * r + 1.0; p = p * r + 1.0;
    /* bits(t) - bits(SHIFT) = n as a two's complement integer */
    scale = bnp_fm_from_bits((bnp_fm_to_bits(t) - bnp_fm_to_bits(BNP_FM_SHIFT) + 1023u) << 52);
    return x > -708.0 ? p * scale : (x == x ? 0.0 : x);
}

/* x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
 * log(1 + f) = 2 atanh(s) = f - hfsq + s (hfsq + R(s^2)) with hfsq = f^2 / 2 and
 * R the atanh series to s^22 (truncation < 1e-20). Only logical shifts and
 * selects (AVX2 has no 64-bit arithmetic shift). */
static inline double bnp_log(double x) {
    uint64_t u = bnp_fm_to_bits(x);
    double m1 = bnp_fm_from_bits((u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);   /* [1, 2) */
    int big = m1 > 1.4142135623730951;
    double m = big ? 0.5 * m1 : m1;
    /* k + 1023 = biased exponent (+ 1 when m was halved), as a double without cvtqq2pd */
    double kd = bnp_fm_from_bits(bnp_fm_to_bits(BNP_FM_SHIFT) + (u >> 52) + (big ? 1u : 0u)) - (BNP_FM_SHIFT + 1023.0);
    double f = m - 1.0, s = f / (2.0 + f), z = s * s, hfsq = 0.5 * f * f;
    double R = 2.0 / 23.0;
    R = R * z + 2.0 / 21.0; R = R * z + 2.0 / 19.0; R = R * z + 2.0 / 17.0; R = R * z + 2.0 / 15.0;
    R = R * z + 2.0 / 13.0; R = R * z + 2.0 / 11.0; R = R * z + 2.0 / 9.0; R = R * z + 2.0 / 7.0;
    R = R * z + 2.0 / 5.0; R = R * z + 2.0 / 3.0; R = R * z;
    return kd * BNP_FM_LN2_HI - ((hfsq - (s * (hfsq + R) + kd * BNP_FM_LN2_LO)) - f);
}

#ifdef __cplusplus
}
#endif

#endif /* BNPCORE_INTERNAL_FASTMATH_H_ */
