/*
 * bnpcore/internal/simd.h -- code generation helpers of bnpcore's own kernels.
 *
 * Internal: not part of the public C API (bnpcore/bnpcore.h), not installed
 * with the package, and free to change between releases.
 *
 *   BNP_SIMD_CLONES ... before a function definition: compile it twice, for
 *                       AVX2 and for the baseline ISA, and pick one at load
 *                       time (GCC/Clang function multiversioning on x86-64
 *                       Linux; nothing elsewhere). Neither clone uses FMA, so
 *                       a loop whose reduction order is written out gives the
 *                       same bits in both.
 *   restrict .......... C99's restrict under MSVC, which spells it __restrict
 *   BNP_PREFETCH(p) ... start loading the cache line of p (a hint, no effect
 *                       on results; a no-op without GCC or Clang)
 */
#ifndef BNPCORE_INTERNAL_SIMD_H_
#define BNPCORE_INTERNAL_SIMD_H_

#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && defined(__linux__)
#define BNP_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BNP_SIMD_CLONES
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BNP_PREFETCH(p) __builtin_prefetch(p)
#else
#define BNP_PREFETCH(p) ((void)0)
#endif

#endif /* BNPCORE_INTERNAL_SIMD_H_ */
