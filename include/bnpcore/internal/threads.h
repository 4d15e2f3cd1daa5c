/*
 * bnpcore/internal/threads.h -- counts that the OpenMP threads of bnpcore's own
 * kernels share.
 *
 * Internal: not part of the public C API (bnpcore/bnpcore.h), not installed
 * with the package, and free to change between releases. Like the public
 * header: C99, static inline, no global state; BNP_OPENMP (from bnpcore.h)
 * says whether the including translation unit is compiled with OpenMP.
 *
 *   bnp_atomic_add_i32 ..... thread-safe integer adds
 *   bnp_once_claim/done .... work done once, by the first thread that needs it
 */
#ifndef BNPCORE_INTERNAL_THREADS_H_
#define BNPCORE_INTERNAL_THREADS_H_

#include "../bnpcore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *p += v, atomically when the translation unit runs OpenMP threads (GCC and
 * Clang builtins; relaxed order: the sum is read only after the parallel loop).
 * Integer sums do not depend on the order of the additions, so counts that
 * threads update this way are the same for any thread count. */
static inline void bnp_atomic_add_i32(int32_t *p, int32_t v) {
#if BNP_OPENMP && (defined(__GNUC__) || defined(__clang__))
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#elif BNP_OPENMP
#pragma omp atomic
    *p += v;
#else
    *p += v;
#endif
}

/* Work that threads share and that the first thread to need it does, once:
 * *flag is 0 (not done), 1 (being done) or 2 (done), 0 at the start. The caller
 * that bnp_once_claim answers 1 does the work, then calls bnp_once_done; every
 * other caller is answered 0 once the work is done (it waits while another
 * thread does it) and then sees everything the worker wrote (acquire/release
 * order). The work must not itself wait on a flag of the same kind. */
static inline int bnp_once_claim(int32_t *flag) {
#if BNP_OPENMP && (defined(__GNUC__) || defined(__clang__))
    int32_t free_ = 0;
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 2) return 0;
    if (__atomic_compare_exchange_n(flag, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) return 1;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 2) {
    }
    return 0;
#elif BNP_OPENMP
    int claimed, state;
#pragma omp critical(bnp_once)
    {
        claimed = *flag == 0;
        if (claimed) *flag = 1;
    }
    for (state = claimed ? 2 : 1; state != 2;) {
#pragma omp critical(bnp_once)
        state = *flag;
    }
    return claimed;
#else
    if (*flag) return 0;
    *flag = 1;
    return 1;
#endif
}

static inline void bnp_once_done(int32_t *flag) {
#if BNP_OPENMP && (defined(__GNUC__) || defined(__clang__))
    __atomic_store_n(flag, 2, __ATOMIC_RELEASE);
#elif BNP_OPENMP
#pragma omp critical(bnp_once)
    *flag = 2;
#else
    *flag = 2;
#endif
}

#ifdef __cplusplus
}
#endif

#endif /* BNPCORE_INTERNAL_THREADS_H_ */
