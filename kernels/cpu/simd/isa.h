#pragma once
// Which SIMD path a kernel translation unit compiles, and the namespace that keeps the paths apart.
//
// The kernel sources are compiled once per ISA (kernels/CMakeLists.txt defines
// TANDEM_KERNELS_BUILD_GENERIC, _AVX2 or _AVX512 for each copy) and linked into one library; the
// backend picks a copy by CPUID at run time (cpu_backend.cc), so a portable binary runs the AVX-512
// kernels where the CPU has them. Two rules keep a copy's instructions from leaking into code that
// runs on other CPUs:
//  - Every kernel definition sits between TANDEM_KERNELS_ISA_BEGIN and _END: an inline namespace
//    per ISA (so the copies' inline functions never share a linker symbol and the linker cannot
//    keep one copy for all), and a target pragma rather than -m flags on the command line, so the
//    ISA applies to the kernel code alone. Standard-library and other templates are defined above
//    the pragma, in headers included before it, so their out-of-line instances stay baseline code
//    even when a kernel instantiates them (a COMDAT the linker may share with the whole program).
//  - The macros that select a path are TANDEM_SIMD_AVX512 and TANDEM_SIMD_AVX2, never __AVX2__
//    and friends: a target pragma does not define those.
// tests/unit/kernels/isa_leak_check.sh checks the compiled objects for vector instructions outside
// the ISA namespaces.
//
// A translation unit outside the per-ISA builds (the kernels' unit tests that compile simd.h
// themselves) gets the path its compiler flags allow, without a pragma.
#if defined(TANDEM_KERNELS_BUILD_AVX512)
#define TANDEM_SIMD_AVX512 1
#define TANDEM_KERNELS_ISA_NS avx512
#define TANDEM_KERNELS_ISA_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"
#elif defined(TANDEM_KERNELS_BUILD_AVX2)
#define TANDEM_SIMD_AVX2 1
#define TANDEM_KERNELS_ISA_NS avx2
#define TANDEM_KERNELS_ISA_TARGET "avx2,fma,f16c"
#elif defined(TANDEM_KERNELS_BUILD_GENERIC)
#define TANDEM_KERNELS_ISA_NS generic
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__)
#define TANDEM_SIMD_AVX512 1
#define TANDEM_KERNELS_ISA_NS avx512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TANDEM_SIMD_AVX2 1
#define TANDEM_KERNELS_ISA_NS avx2
#else
#define TANDEM_KERNELS_ISA_NS generic
#endif

#if defined(TANDEM_SIMD_AVX512) || defined(TANDEM_SIMD_AVX2)
// GCC 12 flags the _mm*_undefined_* placeholders inside its own intrinsic headers as uninitialised
// (a known false positive); the suppression covers those headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

// Two levels, so that TANDEM_KERNELS_ISA_TARGET is expanded before it is turned into a string.
#define TANDEM_KERNELS_PRAGMA_STRING(x) _Pragma(#x)
#define TANDEM_KERNELS_PRAGMA(x) TANDEM_KERNELS_PRAGMA_STRING(x)
#if !defined(TANDEM_KERNELS_ISA_TARGET)
#define TANDEM_KERNELS_TARGET_PUSH
#define TANDEM_KERNELS_TARGET_POP
#elif defined(__clang__)
#define TANDEM_KERNELS_TARGET_PUSH                                                               \
  TANDEM_KERNELS_PRAGMA(clang attribute push(__attribute__((target(TANDEM_KERNELS_ISA_TARGET))), \
                                             apply_to = function))
#define TANDEM_KERNELS_TARGET_POP _Pragma("clang attribute pop")
#else
#define TANDEM_KERNELS_TARGET_PUSH \
  _Pragma("GCC push_options") TANDEM_KERNELS_PRAGMA(GCC target(TANDEM_KERNELS_ISA_TARGET))
#define TANDEM_KERNELS_TARGET_POP _Pragma("GCC pop_options")
#endif

#define TANDEM_KERNELS_ISA_BEGIN   \
  TANDEM_KERNELS_TARGET_PUSH       \
  namespace tandem::kernels::cpu { \
  inline namespace TANDEM_KERNELS_ISA_NS {
#define TANDEM_KERNELS_ISA_END \
  }                            \
  }                            \
  TANDEM_KERNELS_TARGET_POP
