/*
 * bnpcore.h -- the header-only C core of bnpcore.
 *
 * C99, every function `static inline`, no Python, no global or static state:
 * each translation unit that includes it gets its own copy, and the caller owns
 * all memory (structs plus init/grow/free functions).
 *
 *   special functions ... bnp_lgamma, bnp_digamma, bnp_trigamma, bnp_tetragamma,
 *                         bnp_dlgamma (lgamma(x+n)-lgamma(x)), bnp_dpsi
 *                         (psi(x+n)-psi(x)), bnp_xdpsi (x*bnp_dpsi, the expected
 *                         number of tables), bnp_log_rising, bnp_log_dirmult
 *   log space ........... bnp_logsumexp, bnp_logaddexp, bnp_sample_weights,
 *                         bnp_sample_logweights
 *   random numbers ...... bnp_bitgen_t (layout of numpy's bitgen_t), uniform,
 *                         normal, (log-)gamma, (log-)beta, (log-)Dirichlet,
 *                         categorical draws
 *   count matrices ...... bnp_csr_t (documents x words, int64 row pointers,
 *                         int32 word ids and counts)
 *   Stirling numbers .... bnp_stirling_t, a table of log(s(n, m) / n!) (unsigned,
 *                         first kind) grown on demand; the Antoniak distribution
 *
 * This is the whole public C API (BNPCORE_ABI_VERSION). The helpers of
 * bnpcore's own kernels (SIMD clones, prefetch hints, atomic counts shared by
 * threads) are in bnpcore/internal/, which is not installed.
 *
 * Accuracy: the special functions and their differences have relative error
 * below 1e-12 for x in [1e-10, 1e10] and n up to 1e7 (bnpcore tests/kernels).
 * Domain errors of special functions return NaN; functions that allocate
 * return 0 on success and -1 on failure (nothing is changed on failure).
 * Each function's comment states its method; docs/numerics.md the accepted ranges.
 */
#ifndef BNPCORE_BNPCORE_H_
#define BNPCORE_BNPCORE_H_

#define BNPCORE_ABI_VERSION 2

/* 1 when the including translation unit is compiled with OpenMP (-fopenmp). */
#ifdef _OPENMP
#define BNP_OPENMP 1
#else
#define BNP_OPENMP 0
#endif

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BNP_LOG_2PI_HALF 0.91893853320467274178 /* log(2 pi) / 2 */
/* Largest n whose Stirling row the table serves: n (n + 1) / 2 doubles,
 * 400 MB at the cap.  Beyond it use the O(n) CRP seating sampler
 * (bnp_antoniak_sample_crp) or bnp_stirling_scaled_row_compute (O(n) memory). */
#define BNP_STIRLING_MAX_N 10000

/* ------------------------------------------------------------------------- */
/* Special functions (x > 0).  Shift the argument up with the recurrence until
 * it is >= 10, then use the asymptotic (Stirling / Bernoulli) series.          */
/* ------------------------------------------------------------------------- */

/* Series tails for large y: lgamma(y) = (y-1/2) log y - y + log(2 pi)/2 + S(y). */
static inline double bnp__lgamma_tail(double y) {
    double r = 1.0 / y, r2 = r * r;
    return r * (1.0 / 12 + r2 * (-1.0 / 360 + r2 * (1.0 / 1260 + r2 * (-1.0 / 1680
           + r2 * (1.0 / 1188 + r2 * (-691.0 / 360360 + r2 * (1.0 / 156)))))));
}

/* psi(y) = log y - 1/(2y) - T(y) for large y. */
static inline double bnp__digamma_tail(double y) {
    double r2 = 1.0 / (y * y);
    return r2 * (1.0 / 12 + r2 * (-1.0 / 120 + r2 * (1.0 / 252 + r2 * (-1.0 / 240
           + r2 * (1.0 / 132 + r2 * (-691.0 / 32760 + r2 * (1.0 / 12)))))));
}

/* Differences of the series tails without cancellation, for y = x + n with
 * r = 1/x, s = 1/y: since s^p - r^p = (s - r) h_(p-1)(s, r), where
 * h_q(s, r) = sum_(j=0..q) s^j r^(q-j) has only positive terms,
 *   S(y) - S(x) = (s - r) * bnp__lgamma_tail_diff(r, s),
 *   T(y) - T(x) = (s - r) * bnp__digamma_tail_diff(r, s),
 * and s - r = -n / (x y) is exact to rounding however small n is. */
static inline double bnp__lgamma_tail_diff(double r, double s) {
    const double a[7] = {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188,
                         -691.0 / 360360, 1.0 / 156};
    double h = 1.0, rp = 1.0, acc = a[0];          /* h_0 = 1; term k uses h_(2k) */
    int k;
    for (k = 1; k < 7; ++k) {
        rp *= r; h = rp + s * h;
        rp *= r; h = rp + s * h;
        acc += a[k] * h;
    }
    return acc;
}

static inline double bnp__digamma_tail_diff(double r, double s) {
    const double b[7] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132,
                         -691.0 / 32760, 1.0 / 12};
    double h = 1.0, rp = 1.0, acc = 0.0;           /* term k uses h_(2k+1) */
    int k;
    for (k = 0; k < 7; ++k) {
        rp *= r; h = rp + s * h;
        acc += b[k] * h;
        rp *= r; h = rp + s * h;
    }
    return acc;
}

/* Trigamma psi'(x) for x > 0. */
static inline double bnp_trigamma(double x) {
    double acc = 0.0, r, r2;
    if (!(x > 0.0)) return NAN;
    if (isinf(x)) return 0.0;
    while (x < 10.0) { acc += 1.0 / (x * x); x += 1.0; }
    r = 1.0 / x; r2 = r * r;
    return acc + r + 0.5 * r2 + r * r2 * (1.0 / 6 + r2 * (-1.0 / 30 + r2 * (1.0 / 42
           + r2 * (-1.0 / 30 + r2 * (5.0 / 66 + r2 * (-691.0 / 2730 + r2 * (7.0 / 6)))))));
}

/* Tetragamma psi''(x) for x > 0. */
static inline double bnp_tetragamma(double x) {
    double acc = 0.0, r, r2;
    if (!(x > 0.0)) return NAN;
    if (isinf(x)) return 0.0;
    while (x < 10.0) { acc -= 2.0 / (x * x * x); x += 1.0; }
    r = 1.0 / x; r2 = r * r;
    return acc - r2 - r * r2 - r2 * r2 * (0.5 + r2 * (-1.0 / 6 + r2 * (1.0 / 6
           + r2 * (-0.3 + r2 * (5.0 / 6 + r2 * (-3.2904761904761904762 + r2 * 17.5))))));
}

/* lgamma(x + n) - lgamma(x) for x > 0, n >= 0, without cancellation.  Integer
 * n <= 16 (almost every count in a corpus) takes the log of a short product. */
static inline double bnp_dlgamma(double x, double n) {
    double shift = 0.0, y;
    if (!(x > 0.0) || !(n >= 0.0)) return NAN;
    if (n == 0.0) return 0.0;
    if (isinf(x) || isinf(n)) return INFINITY;
    if (n <= 16.0 && n == floor(n) && x < 1e17) {
        double prod = x;
        int r;
        for (r = 1; r < (int)n; ++r) prod *= x + r;
        return log(prod);
    }
    /* lgamma(x) = lgamma(x+s) - sum log(x+i): the shift terms of x and x+n
     * combine to sum_i log1p(a_i), a_i = n / (x+i), taken as one log1p(D) with
     * D = prod_i (1 + a_i) - 1 accumulated as D += a_i (1 + D) (positive terms:
     * no cancellation however small n is). */
    if (x < 10.0) {
        double x0 = x, d = 0.0;
        while (x < 10.0) { double a = n / x; d += a * (1.0 + d); x += 1.0; }
        if (isfinite(d)) {
            shift = log1p(d);
        } else {                    /* n / x beyond ~1e30: the product overflows */
            for (x = x0; x < 10.0; x += 1.0)    /* log1p(n / x), without overflowing n / x */
                shift += n > x ? log(n) - log(x) + log1p(x / n) : log1p(n / x);
        }
    }
    y = x + n;
    return (x - 0.5) * log1p(n / x) + n * log(y) - n
           - n / (x * y) * bnp__lgamma_tail_diff(1.0 / x, 1.0 / y) - shift;
}

/* log Gamma(x) for x > 0 (NaN otherwise, +inf at 0). Thread-safe (no signgam).
 * Around its zeros x = 1 and x = 2 it is the difference from the zero,
 * lgamma(1 + t) = dlgamma(1, t), so that it keeps its relative accuracy there. */
static inline double bnp_lgamma(double x) {
    double prod = 1.0, shift = 0.0;
    if (!(x >= 0.0)) return NAN;
    if (x == 0.0) return INFINITY;
    if (isinf(x)) return INFINITY;
    if (x >= 0.5 && x < 3.0) {     /* x - 1, 1 - x, x - 2, 2 - x are exact here */
        if (x < 1.5) return x >= 1.0 ? bnp_dlgamma(1.0, x - 1.0) : -bnp_dlgamma(x, 1.0 - x);
        return x >= 2.0 ? bnp_dlgamma(2.0, x - 2.0) : -bnp_dlgamma(x, 2.0 - x);
    }
    while (x < 10.0) { prod *= x; x += 1.0; }
    if (prod != 1.0) shift = log(prod);
    return (x - 0.5) * log(x) - x + BNP_LOG_2PI_HALF + bnp__lgamma_tail(x) - shift;
}

/* psi(x + n) - psi(x) for x > 0, n >= 0, without cancellation (also for x tiny). */
static inline double bnp_dpsi(double x, double n) {
    double acc = 0.0, y;
    if (!(x > 0.0) || !(n >= 0.0)) return NAN;
    if (n == 0.0) return 0.0;
    if (isinf(n)) return INFINITY;
    if (n <= 16.0 && n == floor(n)) {
        int r;
        for (r = 0; r < (int)n; ++r) acc += 1.0 / (x + r);
        return acc;
    }
    /* n / (x (x + n)) = 1/x - 1/(x + n); below x = 1e-150, x (x + n) may underflow
     * (0 for x, n ~ 1e-200), so it is grouped to keep every step in range there */
    while (x < 10.0) {
        acc += x > 1e-150 ? n / (x * (x + n)) : n < x ? (n / x) / (x + n) : (n / (x + n)) / x;
        x += 1.0;
    }
    y = x + n;
    /* log(y/x) - (1/(2y) - 1/(2x)) - (T(y) - T(x)): three positive terms */
    return acc + log1p(n / x) + n / (x * y) * (0.5 + bnp__digamma_tail_diff(1.0 / x, 1.0 / y));
}

/* Digamma psi(x) for x > 0 (NaN for x <= 0).  On [1, 2] it is the difference
 * from its root, psi(x) = psi(r) + (psi(x) - psi(r)) with r the double nearest
 * the root, so that it keeps its relative accuracy where psi(x) is tiny. */
static inline double bnp_digamma(double x) {
    const double root = 1.4616321449683622, at_root = -9.2412655217294275e-17;
    double acc = 0.0;
    if (!(x > 0.0)) return NAN;
    if (isinf(x)) return INFINITY;
    if (x >= 1.0 && x <= 2.0)      /* x - root and root - x are exact here */
        return x >= root ? at_root + bnp_dpsi(root, x - root) : at_root - bnp_dpsi(x, root - x);
    while (x < 10.0) { acc -= 1.0 / x; x += 1.0; }
    return acc + log(x) - 0.5 / x - bnp__digamma_tail(x);
}

/* x * (psi(x + n) - psi(x)): the mean of the Antoniak distribution, exact as
 * x -> 0 (the first shift term x * n / (x (x + n)) is taken as n / (x + n)). */
static inline double bnp_xdpsi(double x, double n) {
    if (!(x > 0.0) || !(n >= 0.0)) return NAN;
    if (n == 0.0) return 0.0;
    if (x < 1.0) return n / (x + n) + x * bnp_dpsi(x + 1.0, n);
    return x * bnp_dpsi(x, n);
}

/* log-sum-exp of v[0..n); -inf when n == 0 or every entry is -inf, +inf if
 * an entry is +inf, NaN if an entry is NaN. */
static inline double bnp_logsumexp(const double *v, int64_t n) {
    double m = -INFINITY, s = 0.0;
    int64_t i;
    for (i = 0; i < n; ++i) if (v[i] > m) m = v[i];
    if (isinf(m)) {                         /* NaN entries were skipped by the max */
        for (i = 0; i < n; ++i) if (isnan(v[i])) return NAN;
        return m;
    }
    for (i = 0; i < n; ++i) s += exp(v[i] - m);
    return m + log(s);
}

/* log(exp(a) + exp(b)), with the same conventions as bnp_logsumexp. */
static inline double bnp_logaddexp(double a, double b) {
    double m = a > b ? a : b;
    if (isinf(m)) return (isnan(a) || isnan(b)) ? NAN : m;   /* both -inf, or a +inf */
    return m + log1p(exp(-fabs(a - b)));
}

/* sum_i [lgamma(x_i + c_i) - lgamma(x_i)], the log rising factorials of the
 * counts c[0..nnz) at x_i = offset + scale * row[ids[i]]. A count c <= 8
 * multiplies x (x+1) ... (x+c-1) into a running product, logged when it leaves
 * [1e-150, 1e150] (no lgamma call: the hot loop of every Dirichlet-multinomial
 * likelihood); larger counts, and x outside (1e-100, 1e15), use bnp_dlgamma.
 * Relative error ~1e-15 per term. row NULL (the symmetric prior, x_i = offset;
 * ids is then not read): the plain sum of bnp_dlgamma terms, once per document
 * in the kernels, kept bit for bit as before (the ADF/EP thresholds amplify a
 * last-bit change of the new-cluster weight to 1e-4..1e-3 in the clusters). */
static inline double bnp_log_rising(const int32_t *ids, const int32_t *c, int64_t nnz,
                                    const double *row, double offset, double scale) {
    double s = 0.0, p = 1.0, x, t;
    int64_t i;
    int32_t r;
    if (!row) {
        for (i = 0; i < nnz; ++i) s += bnp_dlgamma(offset, (double)c[i]);
        return s;
    }
    for (i = 0; i < nnz; ++i) {
        x = offset + scale * row[ids[i]];
        if (c[i] <= 8 && x > 1e-100 && x < 1e15) {
            t = x;
            for (r = 1; r < c[i]; ++r) t *= x + r;
            p *= t;
            if (p > 1e150 || p < 1e-150) {
                s += log(p);
                p = 1.0;
            }
        } else {
            s += bnp_dlgamma(x, (double)c[i]);
        }
    }
    return s + log(p);
}

/* log Dirichlet-multinomial probability of the token *sequence* with counts
 * c[0..nnz) of word ids ids[0..nnz) under Dirichlet(lam) of total lam_total:
 * lgamma(L) - lgamma(L + n) + sum_w [lgamma(lam_w + c_w) - lgamma(lam_w)].
 * Add the log multinomial coefficient for the count vector. */
static inline double bnp_log_dirmult(const int32_t *ids, const int32_t *c, int64_t nnz,
                                     const double *lam, double lam_total) {
    double n = 0.0;
    int64_t i;
    for (i = 0; i < nnz; ++i) n += c[i];
    return bnp_log_rising(ids, c, nnz, lam, 0.0, 1.0) - bnp_dlgamma(lam_total, n);
}

/* Index drawn from non-negative weights w[0..n) with one uniform u in [0, 1);
 * -1 when every weight is zero. */
static inline int64_t bnp_sample_weights(const double *w, int64_t n, double u) {
    double total = 0.0, target, acc = 0.0;
    int64_t i, last = -1;
    for (i = 0; i < n; ++i) total += w[i];
    if (!(total > 0.0)) return -1;
    target = u * total;
    for (i = 0; i < n; ++i) {
        if (w[i] > 0.0) {
            last = i;
            acc += w[i];
            if (target < acc) return i;
        }
    }
    return last;                             /* u * total rounded up to total */
}

/* Index drawn from log-weights lw[0..n); overwrites lw with exp(lw - max). */
static inline int64_t bnp_sample_logweights(double *lw, int64_t n, double u) {
    double m = -INFINITY;
    int64_t i;
    for (i = 0; i < n; ++i) if (lw[i] > m) m = lw[i];
    if (!(m > -INFINITY) || isnan(m)) return -1;
    for (i = 0; i < n; ++i) lw[i] = exp(lw[i] - m);
    return bnp_sample_weights(lw, n, u);
}

/* ------------------------------------------------------------------------- */
/* Random numbers through numpy's bit generator interface.                    */
/* ------------------------------------------------------------------------- */

/* Same layout as numpy/random/bitgen.h's bitgen_t, so a pointer taken from
 * numpy.random.BitGenerator.capsule ("BitGenerator") can be cast to it. */
typedef struct bnp_bitgen {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bnp_bitgen_t;

/* Uniform on [0, 1) (numpy's next_double: 53 random bits). */
static inline double bnp_rng_uniform(bnp_bitgen_t *g) { return g->next_double(g->state); }

/* Uniform on (0, 1): safe to take the log of. */
static inline double bnp_rng_uniform_pos(bnp_bitgen_t *g) {
    double u;
    do { u = g->next_double(g->state); } while (u <= 0.0);
    return u;
}

/* Standard normal, Marsaglia's polar method. */
static inline double bnp_rng_normal(bnp_bitgen_t *g) {
    double a, b, s;
    do {
        a = 2.0 * g->next_double(g->state) - 1.0;
        b = 2.0 * g->next_double(g->state) - 1.0;
        s = a * a + b * b;
    } while (s >= 1.0 || s == 0.0);
    return a * sqrt(-2.0 * log(s) / s);
}

/* log of a Gamma(shape, 1) draw, shape > 0.  Marsaglia & Tsang (2000) for
 * shape >= 1; Gamma(a) = Gamma(a + 1) U^(1/a) below, kept in log space so that
 * shapes like 1e-6 do not underflow to log(0). */
static inline double bnp_rng_log_gamma(bnp_bitgen_t *g, double shape) {
    double boost = 0.0, d, c, x, v, u;
    if (!(shape > 0.0)) return NAN;
    if (shape < 1.0) {
        boost = log(bnp_rng_uniform_pos(g)) / shape;
        shape += 1.0;
    }
    d = shape - 1.0 / 3.0;
    c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        do { x = bnp_rng_normal(g); v = 1.0 + c * x; } while (v <= 0.0);
        v = v * v * v;
        u = bnp_rng_uniform_pos(g);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return log(d * v) + boost;
    }
}

static inline double bnp_rng_gamma(bnp_bitgen_t *g, double shape) {
    return exp(bnp_rng_log_gamma(g, shape));
}

/* log of a Beta(a, b) draw (and of its complement, through *log1m if non-NULL). */
static inline double bnp_rng_log_beta(bnp_bitgen_t *g, double a, double b, double *log1m) {
    double la = bnp_rng_log_gamma(g, a), lb = bnp_rng_log_gamma(g, b);
    double lz = bnp_logaddexp(la, lb);
    if (log1m) *log1m = lb - lz;
    return la - lz;
}

static inline double bnp_rng_beta(bnp_bitgen_t *g, double a, double b) {
    return exp(bnp_rng_log_beta(g, a, b, NULL));
}

/* log of a Dirichlet(alpha[0..k)) draw into out[0..k) (alpha > 0). */
static inline void bnp_rng_log_dirichlet(bnp_bitgen_t *g, const double *alpha, int64_t k,
                                         double *out) {
    int64_t i;
    double lz;
    for (i = 0; i < k; ++i) out[i] = bnp_rng_log_gamma(g, alpha[i]);
    lz = bnp_logsumexp(out, k);
    for (i = 0; i < k; ++i) out[i] -= lz;
}

static inline void bnp_rng_dirichlet(bnp_bitgen_t *g, const double *alpha, int64_t k, double *out) {
    int64_t i;
    bnp_rng_log_dirichlet(g, alpha, k, out);
    for (i = 0; i < k; ++i) out[i] = exp(out[i]);
}

/* Keyed streams: a bnp_bitgen_t over xoshiro256** (Blackman & Vigna, "Scrambled
 * linear pseudorandom number generators", 2021) whose state is a function of three
 * integers, e.g. (seed, sweep, document).  A sampler that draws document j of sweep t
 * from stream (seed, t, j) gets the same draws on any thread and any machine, so its
 * result does not depend on the thread count or the partition of the corpus.
 * The state is filled by splitmix64 from a hash of the key (never all zero). */
typedef struct bnp_stream {
    bnp_bitgen_t bitgen;                  /* first member: &stream.bitgen is a bnp_bitgen_t */
    uint64_t s[4];
} bnp_stream_t;

static inline uint64_t bnp_mix64(uint64_t z) {  /* splitmix64's finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t bnp_rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t bnp_stream_next64(void *st) {
    uint64_t *s = (uint64_t *)st;
    uint64_t result = bnp_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = bnp_rotl64(s[3], 45);
    return result;
}

static inline uint32_t bnp_stream_next32(void *st) { return (uint32_t)(bnp_stream_next64(st) >> 32); }

static inline double bnp_stream_next_double(void *st) {       /* 53 bits, as numpy */
    return (double)(bnp_stream_next64(st) >> 11) * (1.0 / 9007199254740992.0);
}

static inline void bnp_stream_init(bnp_stream_t *r, uint64_t key, uint64_t a, uint64_t b) {
    const uint64_t golden = 0x9e3779b97f4a7c15ULL;
    uint64_t x = bnp_mix64(bnp_mix64(bnp_mix64(key) ^ (a + golden)) ^ (b + 2 * golden));
    int i;
    for (i = 0; i < 4; ++i) { x += golden; r->s[i] = bnp_mix64(x); }
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = golden;
    r->bitgen.state = r->s;
    r->bitgen.next_uint64 = bnp_stream_next64;
    r->bitgen.next_uint32 = bnp_stream_next32;
    r->bitgen.next_double = bnp_stream_next_double;
    r->bitgen.next_raw = bnp_stream_next64;
}

/* ------------------------------------------------------------------------- */
/* Count matrices.                                                            */
/* ------------------------------------------------------------------------- */

/* Documents x words counts in CSR form; the arrays belong to the caller.
 * Row j holds word ids indices[indptr[j] .. indptr[j+1]) with their counts. */
typedef struct bnp_csr {
    int64_t n_rows;
    int64_t n_cols;
    const int64_t *indptr;   /* n_rows + 1 */
    const int32_t *indices;  /* indptr[n_rows] word ids in [0, n_cols) */
    const int32_t *counts;   /* indptr[n_rows] positive counts */
} bnp_csr_t;

static inline int64_t bnp_csr_row_nnz(const bnp_csr_t *m, int64_t j) {
    return m->indptr[j + 1] - m->indptr[j];
}

/* Number of tokens of document j. */
static inline int64_t bnp_csr_row_total(const bnp_csr_t *m, int64_t j) {
    int64_t p, s = 0;
    for (p = m->indptr[j]; p < m->indptr[j + 1]; ++p) s += m->counts[p];
    return s;
}

/* Token-expanded view: word ids of every token, row by row, into out (which
 * holds the total count); tok_ptr (n_rows + 1) receives the row offsets. */
static inline void bnp_csr_expand(const bnp_csr_t *m, int32_t *out, int64_t *tok_ptr) {
    int64_t j, p, t = 0;
    int32_t c;
    for (j = 0; j < m->n_rows; ++j) {
        tok_ptr[j] = t;
        for (p = m->indptr[j]; p < m->indptr[j + 1]; ++p)
            for (c = 0; c < m->counts[p]; ++c) out[t++] = m->indices[p];
    }
    tok_ptr[m->n_rows] = t;
}

/* ------------------------------------------------------------------------- */
/* Unsigned Stirling numbers of the first kind and the Antoniak distribution. */
/* ------------------------------------------------------------------------- */

/* Table of the scaled numbers P(n, m) = log(s(n, m) / n!) = log p(m | n, c = 1),
 * 1 <= m <= n <= n_max, row n at offset n (n - 1) / 2.  Scaling by n! keeps the
 * entries that carry the probability mass of order 1, so that rounding errors
 * do not grow with log n! along the recurrence; log s(n, m) = P(n, m) + lgamma(n+1).
 * Grow it before a parallel region; read-only afterwards. */
typedef struct bnp_stirling {
    double *log_scaled;
    int64_t n_max;
} bnp_stirling_t;

static inline void bnp_stirling_init(bnp_stirling_t *t) { t->log_scaled = NULL; t->n_max = 0; }

static inline void bnp_stirling_free(bnp_stirling_t *t) {
    free(t->log_scaled);
    t->log_scaled = NULL; t->n_max = 0;
}

/* Row n from row n - 1 (prev, n - 1 entries; NULL for n = 1) into out (n entries):
 * s(n, m) / n! = (1/n) s(n-1, m-1) / (n-1)! + ((n-1)/n) s(n-1, m) / (n-1)!. */
static inline void bnp__stirling_next_row(const double *prev, int64_t n, double *out) {
    int64_t m;
    double dn = (double)n, a = -log(dn), b = log1p(-1.0 / dn);
    if (n == 1) { out[0] = 0.0; return; }
    out[0] = a;                                           /* s(n, 1) = (n-1)! */
    for (m = 2; m < n; ++m) out[m - 1] = bnp_logaddexp(prev[m - 2] + a, prev[m - 1] + b);
    out[n - 1] = -bnp_lgamma(dn + 1.0);                   /* s(n, n) = 1 */
}

/* Grow the table to serve rows up to n; 0 on success, -1 if n exceeds
 * BNP_STIRLING_MAX_N or memory runs out (the table is then unchanged). */
static inline int bnp_stirling_grow(bnp_stirling_t *t, int64_t n) {
    double *p;
    int64_t r;
    if (n <= t->n_max) return 0;
    if (n > BNP_STIRLING_MAX_N) return -1;
    p = (double *)realloc(t->log_scaled, (size_t)(n * (n + 1) / 2) * sizeof(double));
    if (!p) return -1;
    t->log_scaled = p;
    for (r = t->n_max + 1; r <= n; ++r)
        bnp__stirling_next_row(r > 1 ? p + (r - 1) * (r - 2) / 2 : NULL, r, p + r * (r - 1) / 2);
    t->n_max = n;
    return 0;
}

/* Row n of P(n, m) = log(s(n, m) / n!), entries m = 1..n; n must be in [1, n_max]. */
static inline const double *bnp_stirling_scaled_row(const bnp_stirling_t *t, int64_t n) {
    return t->log_scaled + n * (n - 1) / 2;
}

/* log s(n, m) from the table: 0 for n = m = 0, -inf where s = 0, NaN if n > n_max.
 * The ends s(n, n) = 1 and s(n, 1) = (n-1)! are exact. */
static inline double bnp_stirling_log(const bnp_stirling_t *t, int64_t n, int64_t m) {
    if (n < 0 || m < 0 || n > t->n_max) return NAN;
    if (m > n || (m == 0) != (n == 0)) return -INFINITY;
    if (m == n) return 0.0;
    if (m == 1) return bnp_lgamma((double)n);
    return t->log_scaled[n * (n - 1) / 2 + (m - 1)] + bnp_lgamma((double)n + 1.0);
}

/* Row n of P(n, m) = log(s(n, m) / n!) without a table, for n beyond the cap:
 * O(n^2) time, O(n) memory; out and work hold n entries each. */
static inline void bnp_stirling_scaled_row_compute(int64_t n, double *out, double *work) {
    int64_t r;
    double *cur = (n % 2) ? out : work, *prev = (n % 2) ? work : out, *tmp;
    for (r = 1; r <= n; ++r) {      /* alternate buffers so row n lands in out */
        bnp__stirling_next_row(prev, r, cur);
        tmp = prev; prev = cur; cur = tmp;
    }
}

/* log of the Antoniak normaliser sum_m s(n,m) c^m = Gamma(c+n)/Gamma(c). */
static inline double bnp_antoniak_log_norm(int64_t n, double c) { return bnp_dlgamma(c, (double)n); }

/* The same for the scaled numbers: log sum_m (s(n,m)/n!) c^m
 * = lgamma(c+n) - lgamma(n+1) - lgamma(c), grouped so that the two large
 * terms that cancel are one difference: lgamma(c+n) - lgamma(c) when c >= n
 * (lgamma(c) ~ c log c: at c = 1e15 the other grouping lost every digit),
 * lgamma(c+n) - lgamma(n+1) when c < n (no cancellation when n is large). */
static inline double bnp__antoniak_log_scaled_norm(int64_t n, double c) {
    double dn = (double)n, d;
    if (c >= dn) return bnp_dlgamma(c, dn) - bnp_lgamma(dn + 1.0);
    d = c >= 1.0 ? bnp_dlgamma(dn + 1.0, c - 1.0) : -bnp_dlgamma(c + dn, 1.0 - c);
    return d - bnp_lgamma(c);
}

/* Mean and variance of the number of tables m | n customers, concentration c. */
static inline double bnp_antoniak_mean(int64_t n, double c) { return bnp_xdpsi(c, (double)n); }

/* log(1 + t) - t for 0 <= t <= 0.1, by its series (no cancellation). */
static inline double bnp__log1pmx_small(double t) {
    double s = 0.0, p = t;
    int k;
    for (k = 2; k <= 24; ++k) { p *= -t; s += p / k; }
    return s;
}

/* Var = sum_(i=1..n-1) c i / (c + i)^2, which the closed form
 * c (psi(c+n) - psi(c)) + c^2 (psi'(c+n) - psi'(c)) gets by cancellation: of
 * the i = 0 term when c is tiny (so it is left out below), and of psi against
 * c psi' when c >> n (so for c >= 10 n the asymptotic series of
 * F = psi + c psi' is differenced term by term, leading terms cancelled by hand:
 * with x = c + j, u = 1/x, F(x) = log x + 1 - j u - j u^2/2
 *   + sum_k B_2k ((1 - 1/(2k)) u^2k - j u^(2k+1)), Var = c (F(c+n) - F(c+1))). */
static inline double bnp_antoniak_var(int64_t n, double c) {
    const double b[7] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
    double nn = (double)n, un, u1, un2, u12, pn = 1.0, p1 = 1.0, t, f;
    int k;
    if (!(c > 0.0) || n < 0) return NAN;
    if (n <= 1) return 0.0;
    if (c >= 10.0 * nn) {
        un = 1.0 / (c + nn); u1 = 1.0 / (c + 1.0);
        un2 = un * un; u12 = u1 * u1;
        t = (nn - 1.0) * u1;               /* (c + n) / (c + 1) = 1 + t, t <= 0.1 */
        f = bnp__log1pmx_small(t) + t * nn * un - 0.5 * (nn * un2 - u12);
        for (k = 1; k <= 7; ++k) {
            pn *= un2; p1 *= u12;
            f += b[k - 1] * ((1.0 - 0.5 / k) * (pn - p1) - (nn * pn * un - p1 * u1));
        }
        return c * f;
    }
    return c * bnp_dpsi(c + 1.0, nn - 1.0) + c * c * (bnp_trigamma(c + nn) - bnp_trigamma(c + 1.0));
}

/* p(m | n, c) = s(n, m) c^m Gamma(c) / Gamma(c + n) for m = 1..n, as log
 * probabilities into out[0..n) (out[m-1]), from a scaled row (bnp_stirling_scaled_row
 * or bnp_stirling_scaled_row_compute). */
static inline void bnp_antoniak_logpmf(const double *scaled_row, int64_t n, double c, double *out) {
    double lz = bnp__antoniak_log_scaled_norm(n, c), lc = log(c);
    int64_t m;
    for (m = 1; m <= n; ++m) out[m - 1] = scaled_row[m - 1] + (double)m * lc - lz;
}

/* Exact draw by inverse CDF with one uniform (the table must serve row n). */
static inline int64_t bnp_antoniak_sample_table(const bnp_stirling_t *t, int64_t n, double c,
                                                bnp_bitgen_t *g) {
    const double *row;
    double lz, lc, target, acc = 0.0;
    int64_t m;
    if (n <= 0) return 0;
    row = bnp_stirling_scaled_row(t, n);
    lz = bnp__antoniak_log_scaled_norm(n, c);
    lc = log(c);
    target = bnp_rng_uniform(g);
    for (m = 1; m < n; ++m) {
        acc += exp(row[m - 1] + (double)m * lc - lz);
        if (target < acc) return m;
    }
    return n;
}

/* Exact draw by seating n customers: m = sum_i Bernoulli(c / (c + i)), i = 0..n-1. */
static inline int64_t bnp_antoniak_sample_crp(int64_t n, double c, bnp_bitgen_t *g) {
    int64_t i, m = 0;
    for (i = 0; i < n; ++i) m += bnp_rng_uniform(g) * (c + (double)i) < c;
    return m;
}

#ifdef __cplusplus
}
#endif

#endif /* BNPCORE_BNPCORE_H_ */
