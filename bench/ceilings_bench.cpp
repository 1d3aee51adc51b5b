// The two hardware ceilings the CPU kernels are reported against: how fast two threads
// can read memory (the limit for decode, which streams every weight once per token) and
// how fast OpenBLAS multiplies f32 matrices on all cores (the limit for prefill).
// A separate executable from matmul_bench: matmul() pins OpenBLAS to one thread for the
// whole process, and this sgemm must run with its own threading.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <vector>

#include "core/thread_pool.hpp"

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

}  // namespace

BENCHMARK_MAIN();
