// The hardware ceilings the CPU kernels are reported against: how fast two threads can
// read memory (the limit for decode, which streams every weight once per token), how fast
// OpenBLAS multiplies f32 matrices on all cores (the limit for prefill), and the peak rates
// of the dot-product instructions the int8- and bf16-activation paths are built on.
// A separate executable from matmul_bench: matmul() pins OpenBLAS to one thread for the
// whole process, and this sgemm must run with its own threading.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_blas.hpp"

namespace {

constexpr int kThreads = 2;

// Independent partial sums in one fixed-size array let the compiler vectorize the
// reduction without reassociating floats, so the loop runs at the speed of the loads.
float sum_floats(const float* p, int64_t n) {
  constexpr int kLanes = 64;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  for (; i < n; ++i) acc[0] += p[i];
  float total = 0.0f;
  for (float a : acc) total += a;
  return total;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of floats: far beyond any cache
  orzo::ThreadPool pool(kThreads);
  std::vector<float> data(static_cast<size_t>(n));
  // First touch from the pool, so pages land where the readers run.
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) data[static_cast<size_t>(i)] = 1.0f;
  });
  float partial[kThreads] = {};
  for (auto _ : state) {
    pool.parallel_for(
        n, [&](int64_t begin, int64_t end, int t) { partial[t] = sum_floats(data.data() + begin, end - begin); },
        1024);
    benchmark::DoNotOptimize(partial);
  }
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_SgemmMultiThreaded(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  openblas_set_num_threads(kThreads);
  const auto size = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> a(size, 0.5f), b(size, 0.25f), c(size);
  // Same layout as matmul(): activations times the transposed [out, in] weight.
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * n * n * static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SgemmMultiThreaded)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

#if defined(__x86_64__) || defined(__i386__)
// The dot-product rates: vpdpbusd (AVX-512 VNNI: 64 u8 x s8 products summed into 16 int32
// lanes, what matmul_q8 runs on) and vdpbf16ps (AVX-512 BF16: 32 bf16 products into 16 f32
// lanes, what matmul_bf16 runs on with --bf16-activations), with operands in registers, so the
// figure is the issue rate of the instruction and nothing else: what a kernel built on it
// cannot pass. 16 chains of accumulation per thread, more than latency x throughput on the
// cores that have them (about 5 cycles x 1-2 a cycle), so no chain waits for its last result.
//
// One instruction per chain and step, written as asm rather than the intrinsic: g++ 12 does
// not tie an intrinsic's accumulator to its destination and surrounds each one with register
// copies (and spills, at 16 chains), which would be timed with it. Volatile, so that the
// compiler neither merges chains it can prove equal nor drops steps whose sums nobody reads.
// The chains are named variables, not an array: g++ keeps an array of vectors indexed in a
// loop in memory.
#define ORZO_DOT(insn, acc) asm volatile(insn " %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))
#define ORZO_DOT_16(insn)                                                              \
  {                                                                                    \
    ORZO_DOT(insn, c0); ORZO_DOT(insn, c1); ORZO_DOT(insn, c2); ORZO_DOT(insn, c3);    \
    ORZO_DOT(insn, c4); ORZO_DOT(insn, c5); ORZO_DOT(insn, c6); ORZO_DOT(insn, c7);    \
    ORZO_DOT(insn, c8); ORZO_DOT(insn, c9); ORZO_DOT(insn, c10); ORZO_DOT(insn, c11);  \
    ORZO_DOT(insn, c12); ORZO_DOT(insn, c13); ORZO_DOT(insn, c14); ORZO_DOT(insn, c15); \
  }
constexpr int kChains = 16;
constexpr int64_t kDotSteps = int64_t{1} << 16;  // per thread and iteration: 1M instructions

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void int8_dots(int32_t a_word, int32_t b_word) {
  const __m512i a = _mm512_set1_epi32(a_word), b = _mm512_set1_epi32(b_word);
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  __m512i c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
  for (int64_t s = 0; s < kDotSteps; ++s) ORZO_DOT_16("vpdpbusd");
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void bf16_dots(int32_t a_word, int32_t b_word) {
  const __m512i a = _mm512_set1_epi32(a_word), b = _mm512_set1_epi32(b_word);
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  __m512 c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
  for (int64_t s = 0; s < kDotSteps; ++s) ORZO_DOT_16("vdpbf16ps");
}
#undef ORZO_DOT_16
#undef ORZO_DOT

// And TDPBF16PS (AMX: 16 x 16 f32 sums of 32 bf16 products each, what matmul_tiles runs
// on), four accumulating tiles from two A and two B tiles in the tile registers, as its
// passes hold them. The tiles hold bf16 2^-7 (0x3c00) throughout, as bf16_dots' operands.
constexpr int64_t kTileSteps = int64_t{1} << 12;  // per thread and iteration: 16K instructions

__attribute__((target("amx-tile,amx-bf16"))) void amx_dots(int32_t a_word, int32_t) {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } config;
  // Not _tile_loadconfig, which names only 8 bytes of it as read (isa/matmul_amx.cpp).
  asm volatile("ldtilecfg %0" : : "m"(config));
  alignas(64) int32_t operand[256];
  std::fill(std::begin(operand), std::end(operand), a_word);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < kTileSteps; ++s) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_release();
}

// Both threads run the loop at once; OPS counts 2 per multiply-add, as FLOPS does for sgemm.
void dot_rate(benchmark::State& state, void (*dots)(int32_t, int32_t), int32_t a, int32_t b,
              double multiply_adds_per_call) {
  orzo::ThreadPool pool(kThreads);
  for (auto _ : state) pool.parallel_for(kThreads, [&](int64_t, int64_t, int) { dots(a, b); });
  state.counters["OPS"] =
      benchmark::Counter(2.0 * multiply_adds_per_call * kThreads, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Int8DotRate(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl")) {
    state.SkipWithError("this CPU has no AVX-512 VNNI");
    return;
  }
  // Bytes of 1 and -1: the int32 sums move by 4 a step, and would only wrap, harmlessly.
  dot_rate(state, int8_dots, 0x01010101, -1, 64.0 * kChains * kDotSteps);
}
BENCHMARK(BM_Int8DotRate)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

void BM_Bf16DotRate(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512bf16")) {
    state.SkipWithError("this CPU has no AVX-512 BF16");
    return;
  }
  // Pairs of bf16 2^-7 (0x3c00): products of 2^-14, so the f32 sums stay normal and finite.
  dot_rate(state, bf16_dots, 0x3c003c00, 0x3c003c00, 32.0 * kChains * kDotSteps);
}
BENCHMARK(BM_Bf16DotRate)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

void BM_AmxBf16Rate(benchmark::State& state) {
  const auto levels = orzo::cpu::runnable_isas();  // asks Linux for the tile state
  if (std::find(levels.begin(), levels.end(), orzo::cpu::Isa::Avx512Amx) == levels.end()) {
    state.SkipWithError("this CPU or OS gives no AMX tiles with BF16");
    return;
  }
  dot_rate(state, amx_dots, 0x3c003c00, 0, 16.0 * 16 * 32 * 4 * kTileSteps);
}
BENCHMARK(BM_AmxBf16Rate)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
#endif

}  // namespace

int main(int argc, char** argv) {
  orzo::cpu::rerun_with_suited_blas(argv);  // the sgemm ceiling is OpenBLAS's best on this CPU
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
