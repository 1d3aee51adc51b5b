#pragma once
// What one compilation of this folder's kernels may use. CMake compiles every .cpp here
// once per ISA level, with ORZO_ISA_LEVEL set (0 portable, 1 AVX2, 2 AVX-512 with VNNI)
// and ORZO_ISA_NS naming the level's namespace (isa_portable, isa_avx2, isa_avx512); a
// -march=native build, or a compiler other than GCC, compiles them once, for what the
// compiler's own macros say the target has.
//
// The instructions are switched on by `#pragma GCC target` between ORZO_TARGET_BEGIN and
// ORZO_TARGET_END, not by -m flags: the inline functions of every header included before
// the region (the standard library's, core's) stay compiled for the baseline, so the one
// copy of each that the linker keeps runs on every CPU. Hence each .cpp here includes all
// of its headers first, and inside the region only headers whose functions have internal
// linkage in the level's namespace (this folder's, and kernels/cpu/exp2.hpp, swiglu.hpp and
// geglu.hpp).
// The predefined __AVX2__ macros do not follow the pragma in C++, so kernels test the
// ORZO_SIMD_* macros below instead.

#if !defined(ORZO_ISA_NS)
#define ORZO_ISA_NS isa_native
#endif

#if defined(ORZO_ISA_LEVEL)
#define ORZO_SIMD_AVX2 (ORZO_ISA_LEVEL >= 1)
#define ORZO_SIMD_AVX512 (ORZO_ISA_LEVEL >= 2)
#define ORZO_SIMD_VNNI (ORZO_ISA_LEVEL >= 2)
// The AVX-512 compilation also holds the BF16 dot-product kernel, inside its own
// ORZO_TARGET_BF16 region; the avx512-bf16 level is that compilation plus it.
#define ORZO_SIMD_BF16_DOT (ORZO_ISA_LEVEL >= 2)
// And, in a region of its own again, the AMX tile kernel (matmul_amx.cpp): the avx512-amx
// level is the avx512-bf16 level plus it.
#define ORZO_SIMD_AMX (ORZO_ISA_LEVEL >= 2)
#else
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ORZO_SIMD_AVX2 1
#else
#define ORZO_SIMD_AVX2 0
#endif
// As the levels are cut: AVX-512 without VNNI (Skylake-SP) runs the AVX2 kernels.
#if ORZO_SIMD_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__AVX512VNNI__)
#define ORZO_SIMD_AVX512 1
#else
#define ORZO_SIMD_AVX512 0
#endif
#define ORZO_SIMD_VNNI ORZO_SIMD_AVX512
#if ORZO_SIMD_AVX512 && defined(__AVX512BF16__)
#define ORZO_SIMD_BF16_DOT 1
#else
#define ORZO_SIMD_BF16_DOT 0
#endif
#if ORZO_SIMD_BF16_DOT && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define ORZO_SIMD_AMX 1
#else
#define ORZO_SIMD_AMX 0
#endif
#endif

// Two steps, so that ORZO_TARGET_ISA is expanded before it is made a string.
#define ORZO_TARGET_PRAGMA(x) ORZO_TARGET_PRAGMA_STRING(x)
#define ORZO_TARGET_PRAGMA_STRING(x) _Pragma(#x)
#if defined(ORZO_ISA_LEVEL) && ORZO_ISA_LEVEL >= 1
#if ORZO_ISA_LEVEL >= 2
// prefer-vector-width: GCC's generic tuning would split vectorized loops to 256 bits.
#define ORZO_TARGET_ISA "avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,prefer-vector-width=512"
#define ORZO_TARGET_ISA_BF16 "avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,avx512bf16,prefer-vector-width=512"
#define ORZO_TARGET_ISA_AMX "avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,avx512bf16,amx-tile,amx-bf16,prefer-vector-width=512"
#else
#define ORZO_TARGET_ISA "avx2,fma,f16c,bmi,bmi2,popcnt"
#endif
#define ORZO_TARGET_BEGIN ORZO_TARGET_PRAGMA(GCC push_options) ORZO_TARGET_PRAGMA(GCC target(ORZO_TARGET_ISA))
#define ORZO_TARGET_END ORZO_TARGET_PRAGMA(GCC pop_options)
#else
#define ORZO_TARGET_BEGIN
#define ORZO_TARGET_END
#endif
// The same for code that also uses AVX-512 BF16 (matmul_bf16.cpp), or AMX as well
// (matmul_amx.cpp), used in place of ORZO_TARGET_BEGIN/END.
#if defined(ORZO_ISA_LEVEL) && ORZO_ISA_LEVEL >= 2
#define ORZO_TARGET_BF16_BEGIN ORZO_TARGET_PRAGMA(GCC push_options) ORZO_TARGET_PRAGMA(GCC target(ORZO_TARGET_ISA_BF16))
#define ORZO_TARGET_BF16_END ORZO_TARGET_PRAGMA(GCC pop_options)
#define ORZO_TARGET_AMX_BEGIN ORZO_TARGET_PRAGMA(GCC push_options) ORZO_TARGET_PRAGMA(GCC target(ORZO_TARGET_ISA_AMX))
#define ORZO_TARGET_AMX_END ORZO_TARGET_PRAGMA(GCC pop_options)
#else
#define ORZO_TARGET_BF16_BEGIN ORZO_TARGET_BEGIN
#define ORZO_TARGET_BF16_END ORZO_TARGET_END
#define ORZO_TARGET_AMX_BEGIN ORZO_TARGET_BEGIN
#define ORZO_TARGET_AMX_END ORZO_TARGET_END
#endif
