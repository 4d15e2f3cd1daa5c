/*
 * ctest.c -- exercises every function of include/bnpcore/bnpcore.h from plain C
 * (and, compiled with -x c++, from C++), and the kernels' internal headers
 * (include/bnpcore/internal/, not installed: the tests add the source tree's
 * include/ to the search path). Built and run by tests/c/test_ctest.py, also
 * under valgrind. Prints "abi <BNPCORE_ABI_VERSION>" and "ok <checks>"; exits
 * non-zero if any check fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bnpcore/bnpcore.h"
#include "bnpcore/internal/simd.h"
#include "bnpcore/internal/threads.h"

#ifndef BNPCORE_ABI_VERSION
#error "bnpcore.h must define BNPCORE_ABI_VERSION"
#endif

static int n_checks = 0, n_failures = 0;

static void check(int ok, const char *what, int line) {
    ++n_checks;
    if (!ok) {
        ++n_failures;
        fprintf(stderr, "ctest.c:%d: check failed: %s\n", line, what);
    }
}
#define CHECK(cond) check((cond) ? 1 : 0, #cond, __LINE__)
/* |a - b| <= rtol |b| + atol */
#define CLOSE(a, b, rtol, atol) CHECK(fabs((a) - (b)) <= (rtol) * fabs(b) + (atol))

/* A tiny bit generator (splitmix64) behind the bnp_bitgen_t interface. */
static uint64_t sm_next64(void *st) {
    uint64_t *s = (uint64_t *)st, z;
    z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint32_t sm_next32(void *st) { return (uint32_t)(sm_next64(st) >> 32); }
static double sm_next_double(void *st) { return (double)(sm_next64(st) >> 11) * (1.0 / 9007199254740992.0); }

static bnp_bitgen_t make_bitgen(uint64_t *state) {
    bnp_bitgen_t g;
    g.state = state;
    g.next_uint64 = sm_next64;
    g.next_uint32 = sm_next32;
    g.next_double = sm_next_double;
    g.next_raw = sm_next64;
    return g;
}

static const double EULER = 0.57721566490153286061, PI = 3.14159265358979323846;

static void test_special(void) {
    int i, n;
    double x;
    CHECK(bnp_lgamma(1.0) == 0.0 && bnp_lgamma(2.0) == 0.0);
    CLOSE(bnp_lgamma(0.5), 0.5 * log(PI), 1e-15, 0.0);
    CHECK(isinf(bnp_lgamma(0.0)) && isnan(bnp_lgamma(-1.0)) && isnan(bnp_lgamma(NAN)));
    for (x = 1e-9; x < 1e9; x *= 1.37) CLOSE(bnp_lgamma(x), lgamma(x), 1e-13, 1e-15);

    CLOSE(bnp_digamma(1.0), -EULER, 1e-15, 0.0);
    CLOSE(bnp_trigamma(1.0), PI * PI / 6, 1e-15, 0.0);
    CLOSE(bnp_tetragamma(1.0), -2.4041138063191885708, 1e-14, 0.0);  /* -2 zeta(3) */
    CHECK(isnan(bnp_digamma(0.0)) && isnan(bnp_trigamma(-1.0)) && isnan(bnp_tetragamma(NAN)));
    for (x = 1e-6; x < 1e6; x *= 1.71) {       /* recurrences */
        CLOSE(bnp_digamma(x + 1.0) - bnp_digamma(x), 1.0 / x, 1e-12, 1e-15 * (1.0 + fabs(bnp_digamma(x))));
        CLOSE(bnp_trigamma(x) - bnp_trigamma(x + 1.0), 1.0 / (x * x), 1e-10, 0.0);
        CLOSE(bnp_tetragamma(x + 1.0) - bnp_tetragamma(x), 2.0 / (x * x * x), 1e-9, 0.0);
    }

    /* differences: against lgamma/sums where those are accurate */
    for (x = 0.01; x < 100.0; x *= 1.9) {
        for (n = 0; n <= 40; n += 3) {
            double s = 0.0;
            for (i = 0; i < n; ++i) s += 1.0 / (x + i);
            CLOSE(bnp_dlgamma(x, n), lgamma(x + n) - lgamma(x), 1e-12, 1e-12);
            CLOSE(bnp_dpsi(x, n), s, 1e-13, 0.0);
            CLOSE(bnp_xdpsi(x, n), x * s, 1e-13, 0.0);
        }
        CLOSE(bnp_dlgamma(x, 2.5), lgamma(x + 2.5) - lgamma(x), 1e-12, 1e-12);
        CLOSE(bnp_dpsi(x, 2.5), bnp_digamma(x + 2.5) - bnp_digamma(x), 1e-11, 1e-14);
    }
    CLOSE(bnp_xdpsi(1e-12, 1000.0), 1.0, 1e-10, 0.0);  /* one table for a tiny concentration */
    CHECK(bnp_dlgamma(3.0, 0.0) == 0.0 && bnp_dpsi(3.0, 0.0) == 0.0 && bnp_xdpsi(3.0, 0.0) == 0.0);
    CHECK(isnan(bnp_dlgamma(0.0, 1.0)) && isnan(bnp_dpsi(1.0, -1.0)) && isnan(bnp_xdpsi(-1.0, 1.0)));
}

static void test_logspace(void) {
    const double w[6] = {0.0, 1.0, 0.0, 2.0, 3.0, 0.0};
    double lw[6], v[3] = {-1000.0, -1000.0, -INFINITY}, zeros[3] = {0.0, 0.0, 0.0};
    double ninf[2] = {-INFINITY, -INFINITY}, withnan[2] = {NAN, -INFINITY}, withinf[2] = {1.0, INFINITY};
    int hits[6] = {0, 0, 0, 0, 0, 0}, hits_log[6] = {0, 0, 0, 0, 0, 0};
    int i, k, grid = 6000;

    CLOSE(bnp_logsumexp(v, 3), -1000.0 + log(2.0), 1e-15, 0.0);
    CHECK(bnp_logsumexp(v, 0) == -INFINITY);
    CHECK(bnp_logsumexp(ninf, 2) == -INFINITY);
    CHECK(isnan(bnp_logsumexp(withnan, 2)));
    CHECK(bnp_logsumexp(withinf, 2) == INFINITY);
    CLOSE(bnp_logaddexp(log(2.0), log(3.0)), log(5.0), 1e-15, 0.0);
    CHECK(bnp_logaddexp(-INFINITY, -INFINITY) == -INFINITY);
    CHECK(bnp_logaddexp(2.0, -INFINITY) == 2.0);
    CHECK(isnan(bnp_logaddexp(NAN, -INFINITY)));

    /* inverse CDF: on a fine grid of u each index gets exactly its share */
    for (i = 0; i < grid; ++i) {
        double u = (i + 0.5) / grid;
        int64_t a = bnp_sample_weights(w, 6, u), b;
        for (k = 0; k < 6; ++k) lw[k] = log(w[k]);
        b = bnp_sample_logweights(lw, 6, u);
        CHECK(a >= 0 && b >= 0);
        if (a >= 0) ++hits[a];
        if (b >= 0) ++hits_log[b];
    }
    CHECK(hits[0] == 0 && hits[1] == 1000 && hits[2] == 0 && hits[3] == 2000 && hits[4] == 3000 && hits[5] == 0);
    CHECK(memcmp(hits, hits_log, sizeof hits) == 0);
    CHECK(bnp_sample_weights(w, 6, 0.0) == 1);
    CHECK(bnp_sample_weights(w, 6, 0.9999999999999999) == 4);   /* never a zero weight */
    CHECK(bnp_sample_weights(zeros, 3, 0.5) == -1);
    CHECK(bnp_sample_weights(w, 0, 0.5) == -1);
    CHECK(bnp_sample_logweights(ninf, 2, 0.5) == -1);
    for (k = 0; k < 6; ++k) lw[k] = log(w[k]) + 800.0;          /* large logs: no overflow */
    CHECK(bnp_sample_logweights(lw, 6, 0.4) == 3);
}

static void test_dirmult(void) {
    /* sum over all count vectors with W = 3, N = 4 of exp(log DM + log multinomial coefficient) = 1 */
    const double lam[3] = {0.5, 1.0, 1.5};
    double total = 0.0, lp;
    int c0, c1;
    for (c0 = 0; c0 <= 4; ++c0) {
        for (c1 = 0; c0 + c1 <= 4; ++c1) {
            int32_t ids[3], cnt[3], c[3];
            int64_t nnz = 0;
            int w;
            c[0] = c0; c[1] = c1; c[2] = 4 - c0 - c1;
            for (w = 0; w < 3; ++w) if (c[w] > 0) { ids[nnz] = w; cnt[nnz] = c[w]; ++nnz; }
            lp = bnp_log_dirmult(ids, cnt, nnz, lam, 3.0)
               + lgamma(5.0) - lgamma(c[0] + 1.0) - lgamma(c[1] + 1.0) - lgamma(c[2] + 1.0);
            total += exp(lp);
        }
    }
    CLOSE(total, 1.0, 1e-13, 0.0);
    {
        const int32_t ids[2] = {0, 2}, cnt[2] = {2, 1};
        double ref = lgamma(3.0) - lgamma(6.0) + lgamma(2.5) - lgamma(0.5) + lgamma(2.5) - lgamma(1.5);
        CLOSE(bnp_log_dirmult(ids, cnt, 2, lam, 3.0), ref, 1e-13, 0.0);
        CHECK(bnp_log_dirmult(ids, cnt, 0, lam, 3.0) == 0.0);      /* empty document */
        /* chain rule: the sequence 0, 2, 0 has p = prod_i (lam_w + c_w) / (Lambda + i) */
        CLOSE(bnp_log_dirmult(ids, cnt, 2, lam, 3.0), log(0.5 / 3.0 * 1.5 / 4.0 * 1.5 / 5.0), 1e-14, 0.0);
    }
    {   /* bnp_log_rising: offset + scale * row, row NULL, every branch (small and large counts,
         * tiny and huge x, a running product that must be rescaled) against the identity
         * lgamma(x + c) - lgamma(x) = sum_{r<c} log(x + r) */
        int32_t ids[40], cnt[40];
        double row[40], ref = 0.0, ref_const = 0.0, x;
        int i, r;
        for (i = 0; i < 40; ++i) {
            ids[i] = 39 - i;
            cnt[i] = 1 + (i * 7) % 12;                      /* 1..12: both sides of c <= 8 */
            row[i] = i % 5 == 0 ? 1e-120 : i % 7 == 0 ? 3e15 : 0.05 * (i + 1);
        }
        for (i = 0; i < 40; ++i) {
            x = 0.25 + 2.0 * row[ids[i]];
            for (r = 0; r < cnt[i]; ++r) {
                ref += log(x + r);
                ref_const += log(0.25 + r);
            }
        }
        CLOSE(bnp_log_rising(ids, cnt, 40, row, 0.25, 2.0), ref, 1e-14, 0.0);
        CLOSE(bnp_log_rising(ids, cnt, 40, NULL, 0.25, 2.0), ref_const, 1e-14, 0.0);
        CHECK(bnp_log_rising(ids, cnt, 0, row, 0.25, 2.0) == 0.0);
        for (i = 0, ref = 0.0; i < 40; ++i) {                /* x near 1e-120 and (0.05 i)^8: rescaled often */
            cnt[i] = 8;
            for (r = 0; r < 8; ++r) ref += log(row[ids[i]] + r);
        }
        CLOSE(bnp_log_rising(ids, cnt, 40, row, 0.0, 1.0), ref, 1e-14, 0.0);
    }
}

static void test_rng(void) {
    uint64_t state = 12345, state2 = 12345;
    bnp_bitgen_t g = make_bitgen(&state), g2 = make_bitgen(&state2);
    const int N = 10000;
    const double alpha[3] = {0.3, 1.0, 2.5}, tiny[2] = {1e-6, 1e-6};
    double s = 0, s2 = 0, x, out[3], lout[3], l1m, lb;
    int i;

    for (i = 0; i < N; ++i) {
        double u = bnp_rng_uniform(&g), up = bnp_rng_uniform_pos(&g);
        CHECK(u >= 0.0 && u < 1.0 && up > 0.0 && up < 1.0);
        s += u;
    }
    CLOSE(s / N, 0.5, 0.0, 5.0 * sqrt(1.0 / 12 / N));

    s = s2 = 0;
    for (i = 0; i < N; ++i) { x = bnp_rng_normal(&g); s += x; s2 += x * x; }
    CLOSE(s / N, 0.0, 0.0, 5.0 / sqrt((double)N));
    CLOSE(s2 / N, 1.0, 0.0, 5.0 * sqrt(2.0 / N));

    s = 0;
    for (i = 0; i < N; ++i) s += bnp_rng_gamma(&g, 7.5);
    CLOSE(s / N, 7.5, 0.0, 5.0 * sqrt(7.5 / N));
    s = 0;
    for (i = 0; i < N; ++i) { x = bnp_rng_log_gamma(&g, 1e-6); CHECK(isfinite(x)); s += x; }
    CLOSE(s / N, bnp_digamma(1e-6), 0.0, 5.0 * sqrt(bnp_trigamma(1e-6) / N));
    CHECK(isnan(bnp_rng_log_gamma(&g, 0.0)));

    s = 0;
    for (i = 0; i < N; ++i) {
        lb = bnp_rng_log_beta(&g, 2.0, 3.0, &l1m);
        CLOSE(exp(lb) + exp(l1m), 1.0, 1e-14, 0.0);
        s += bnp_rng_beta(&g, 2.0, 3.0);
    }
    CLOSE(s / N, 0.4, 0.0, 5.0 * sqrt(0.04 / N));                /* Var = ab / ((a+b)^2 (a+b+1)) */
    CHECK(isfinite(bnp_rng_log_beta(&g, 1e-6, 1e-6, NULL)));

    s = 0;
    for (i = 0; i < N; ++i) {
        bnp_rng_dirichlet(&g, alpha, 3, out);
        CLOSE(out[0] + out[1] + out[2], 1.0, 1e-14, 0.0);
        s += out[2];
    }
    CLOSE(s / N, 2.5 / 3.8, 0.0, 5.0 * sqrt((2.5 / 3.8) * (1.3 / 3.8) / 4.8 / N));
    bnp_rng_log_dirichlet(&g, tiny, 2, lout);
    CHECK(isfinite(lout[0]) && isfinite(lout[1]));
    CLOSE(bnp_logaddexp(lout[0], lout[1]), 0.0, 0.0, 1e-15);

    /* same state, same draws */
    state = state2 = 99;
    for (i = 0; i < 100; ++i) CHECK(bnp_rng_log_gamma(&g, 0.37) == bnp_rng_log_gamma(&g2, 0.37));
}

static void test_csr(void) {
    /* 3 documents x 4 words; the middle one is empty */
    const int64_t indptr[4] = {0, 2, 2, 5};
    const int32_t indices[5] = {1, 3, 0, 2, 3}, counts[5] = {2, 1, 1, 3, 1};
    const int32_t expect[8] = {1, 1, 3, 0, 2, 2, 2, 3};
    int32_t tokens[8];
    int64_t tok_ptr[4];
    bnp_csr_t m;
    m.n_rows = 3; m.n_cols = 4; m.indptr = indptr; m.indices = indices; m.counts = counts;
    CHECK(bnp_csr_row_nnz(&m, 0) == 2 && bnp_csr_row_nnz(&m, 1) == 0 && bnp_csr_row_nnz(&m, 2) == 3);
    CHECK(bnp_csr_row_total(&m, 0) == 3 && bnp_csr_row_total(&m, 1) == 0 && bnp_csr_row_total(&m, 2) == 5);
    bnp_csr_expand(&m, tokens, tok_ptr);
    CHECK(memcmp(tokens, expect, sizeof expect) == 0);
    CHECK(tok_ptr[0] == 0 && tok_ptr[1] == 3 && tok_ptr[2] == 3 && tok_ptr[3] == 8);
}

static void test_stirling(void) {
    bnp_stirling_t t;
    const double s5[5] = {24, 50, 35, 10, 1};
    double out[9], work[9], pmf[30], total, mean, var;
    uint64_t state = 7;
    bnp_bitgen_t g = make_bitgen(&state);
    const int N = 10000;
    int64_t m, n, i, draws_t, draws_c;
    double sum_t = 0, sum_c = 0;

    bnp_stirling_init(&t);
    CHECK(t.n_max == 0 && t.log_scaled == NULL);
    CHECK(bnp_stirling_grow(&t, 5) == 0 && t.n_max == 5);
    for (m = 1; m <= 5; ++m) {
        CLOSE(exp(bnp_stirling_scaled_row(&t, 5)[m - 1]) * 120.0, s5[m - 1], 1e-14, 0.0);
        CLOSE(bnp_stirling_log(&t, 5, m), log(s5[m - 1]), 1e-14, 1e-15);
    }
    CHECK(bnp_stirling_log(&t, 0, 0) == 0.0 && bnp_stirling_log(&t, 5, 0) == -INFINITY);
    CHECK(bnp_stirling_log(&t, 5, 6) == -INFINITY && isnan(bnp_stirling_log(&t, 6, 1)));
    CHECK(bnp_stirling_grow(&t, 3) == 0 && t.n_max == 5);                      /* no-op */
    CHECK(bnp_stirling_grow(&t, BNP_STIRLING_MAX_N + 1) == -1 && t.n_max == 5); /* the cap */
    CHECK(bnp_stirling_grow(&t, 30) == 0 && t.n_max == 30);
    CLOSE(bnp_stirling_log(&t, 30, 1), lgamma(30.0), 1e-15, 0.0);              /* (n-1)! */
    CLOSE(bnp_stirling_log(&t, 30, 29), log(435.0), 1e-13, 0.0);               /* C(n, 2) */

    /* rows computed alone equal the table's (odd and even n: buffers alternate) */
    for (n = 8; n <= 9; ++n) {
        bnp_stirling_scaled_row_compute(n, out, work);
        CHECK(memcmp(out, bnp_stirling_scaled_row(&t, n), (size_t)n * sizeof(double)) == 0);
    }

    /* Antoniak, n = 30, c = 2.5 */
    n = 30;
    CLOSE(bnp_antoniak_log_norm(n, 2.5), lgamma(32.5) - lgamma(2.5), 1e-13, 0.0);
    bnp_antoniak_logpmf(bnp_stirling_scaled_row(&t, n), n, 2.5, pmf);
    total = mean = var = 0.0;
    for (m = 1; m <= n; ++m) { total += exp(pmf[m - 1]); mean += m * exp(pmf[m - 1]); }
    for (m = 1; m <= n; ++m) var += (m - mean) * (m - mean) * exp(pmf[m - 1]);
    CLOSE(total, 1.0, 1e-13, 0.0);
    CLOSE(bnp_antoniak_mean(n, 2.5), mean, 1e-12, 0.0);
    CLOSE(bnp_antoniak_var(n, 2.5), var, 1e-10, 0.0);
    CLOSE(bnp_antoniak_var(3, 1e8), 1e8 / (1e8 + 1) / (1e8 + 1) + 2e8 / (1e8 + 2) / (1e8 + 2), 1e-12, 0.0);
    CHECK(bnp_antoniak_var(1, 3.0) == 0.0 && isnan(bnp_antoniak_var(3, 0.0)));
    for (i = 0; i < N; ++i) {
        draws_t = bnp_antoniak_sample_table(&t, n, 2.5, &g);
        draws_c = bnp_antoniak_sample_crp(n, 2.5, &g);
        CHECK(draws_t >= 1 && draws_t <= n && draws_c >= 1 && draws_c <= n);
        sum_t += (double)draws_t;
        sum_c += (double)draws_c;
    }
    CLOSE(sum_t / N, mean, 0.0, 5.0 * sqrt(var / N));
    CLOSE(sum_c / N, mean, 0.0, 5.0 * sqrt(var / N));
    CHECK(bnp_antoniak_sample_table(&t, 0, 2.5, &g) == 0 && bnp_antoniak_sample_crp(0, 2.5, &g) == 0);
    CHECK(bnp_antoniak_sample_crp(1, 1e-300, &g) == 1);

    bnp_stirling_free(&t);
    CHECK(t.log_scaled == NULL && t.n_max == 0);
}

/* The clone macro compiles on a definition (two clones on x86-64 Linux), and
 * both clones compute the same sum; the prefetch hint changes nothing. */
BNP_SIMD_CLONES
static double simd_sum(const double *x, int64_t n) {
    double s = 0.0;
    int64_t i;
    for (i = 0; i < n; ++i) s += x[i];
    return s;
}

static void test_simd(void) {
    double x[37];
    int i;
    for (i = 0; i < 37; ++i) x[i] = 0.5 * i;
    BNP_PREFETCH(x + 8);
    CHECK(simd_sum(x, 37) == 333.0);
    CHECK(simd_sum(x, 0) == 0.0);
}

/* bnp_atomic_add_i32 adds (the race under threads is test_header_flags.py's). */
static void test_atomic(void) {
    int32_t total = 5;
    bnp_atomic_add_i32(&total, 3);
    bnp_atomic_add_i32(&total, -10);
    CHECK(total == -2);
}

/* bnp_once_claim / bnp_once_done: one claim per flag; with OpenMP (-fopenmp) the
 * threads race for 2000 flags, the claimer writes a value after a while, every
 * thread that is answered 0 must then read it. */
static void test_once(void) {
    enum { N = 2000 };
    static int32_t flag[N], claims[N], value[N];
    int i, wrong = 0;
    memset(flag, 0, sizeof flag);
    memset(claims, 0, sizeof claims);
    CHECK(bnp_once_claim(&flag[0]) == 1);
    value[0] = 7;
    ++claims[0];
    bnp_once_done(&flag[0]);
    CHECK(bnp_once_claim(&flag[0]) == 0 && flag[0] == 2);
#ifdef _OPENMP
#pragma omp parallel for reduction(+:wrong) schedule(static, 1)
#endif
    for (i = 0; i < 4 * N; ++i) {
        int k = (i / 4) % N, rep;
        for (rep = 0; rep < 2; ++rep) {
            if (bnp_once_claim(&flag[k])) {
                volatile int spin = 0;            /* work that takes a while: the other */
                while (spin < 2000) ++spin;       /* threads arrive while it is done   */
                value[k] = 3 * k + 1;
                ++claims[k];
                bnp_once_done(&flag[k]);
            } else if (value[k] != 3 * k + 1 && k != 0) {
                ++wrong;
            }
        }
    }
    CHECK(wrong == 0);
    for (i = 0; i < N; ++i) wrong += claims[i] != 1 || flag[i] != 2;
    CHECK(wrong == 0);
}

int main(void) {
    test_special();
    test_logspace();
    test_dirmult();
    test_rng();
    test_csr();
    test_stirling();
    test_simd();
    test_atomic();
    test_once();
    printf("abi %d\n", BNPCORE_ABI_VERSION);
    printf("ok %d checks, %d failed\n", n_checks, n_failures);
    return n_failures ? 1 : 0;
}
