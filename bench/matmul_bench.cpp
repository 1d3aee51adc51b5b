// CPU matmul throughput: GB/s of weight read for decode (m = 1), to hold against the
// read bandwidth from ceilings_bench, and GFLOP/s for batched rows, to hold against its
// multi-threaded sgemm. A decode step streams every layer's weights once, so each run
// cycles through copies of the weight that together overflow the last-level cache.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_direct.hpp"

namespace {

using orzo::DType;
using orzo::TensorView;

constexpr int kThreads = 2;
constexpr size_t kMinWeightBytes = size_t{512} << 20;

orzo::ThreadPool& pool() {
  static orzo::ThreadPool p(kThreads);
  return p;
}

struct Weights {
  DType dtype;
  int64_t n, k;
  std::vector<std::vector<uint8_t>> copies;
  std::vector<TensorView> views;
  size_t bytes_each() const { return copies.front().size(); }
};

// Google Benchmark calls each function several times while it sizes the run; the last
// weight set is kept so it is generated once per benchmark, not once per call.
const Weights& weights(DType t, int64_t n, int64_t k) {
  static std::unique_ptr<Weights> cached;
  if (cached && cached->dtype == t && cached->n == n && cached->k == k) return *cached;
  cached.reset();
  auto w = std::make_unique<Weights>(Weights{t, n, k, {}, {}});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(k));
  const size_t row_bytes = orzo::dtype_row_bytes(t, k);
  std::vector<uint8_t> first(row_bytes * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    for (auto& v : row) v = uniform(rng);
    orzo::cpu::quantize_row(t, row.data(), k, first.data() + static_cast<size_t>(r) * row_bytes);
  }
  const size_t count = std::max<size_t>(1, (kMinWeightBytes + first.size() - 1) / first.size());
  w->copies.assign(count, first);
  for (const auto& bytes : w->copies) {
    TensorView v;
    v.name = "bench.weight";
    v.dtype = t;
    v.shape = {n, k};
    v.data = bytes.data();
    v.nbytes = bytes.size();
    w->views.push_back(v);
  }
  cached = std::move(w);
  return *cached;
}

using Kernel = void (*)(const float*, int64_t, const TensorView&, float*, orzo::ThreadPool&, const float*);

void run(benchmark::State& state, Kernel kernel, DType t, int64_t m, int64_t n, int64_t k) {
  const Weights& w = weights(t, n, k);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  size_t next = 0;
  for (auto _ : state) {
    kernel(x.data(), m, w.views[next], y.data(), pool(), nullptr);
    next = (next + 1) % w.views.size();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes_each()));
  state.counters["FLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

struct Shape {
  int64_t n, k;
};

std::string shape_name(Shape s) { return std::to_string(s.n) + "x" + std::to_string(s.k); }

void register_all() {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
  for (Shape s : {Shape{8192, 2048}, Shape{2048, 8192}}) {
    for (DType t : all) {
      benchmark::RegisterBenchmark(("gemv/" + std::string(orzo::dtype_name(t)) + "/" + shape_name(s)).c_str(),
                                   [=](benchmark::State& st) { run(st, orzo::cpu::matmul, t, 1, s.n, s.k); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  for (Shape s : {Shape{2048, 8192}, Shape{8192, 2048}, Shape{1024, 2816}, Shape{2816, 1024}}) {
    for (int64_t m : {4, 16, 32, 512}) {
      benchmark::RegisterBenchmark(("matmul/F16/m" + std::to_string(m) + "/" + shape_name(s)).c_str(),
                                   [=](benchmark::State& st) { run(st, orzo::cpu::matmul, DType::F16, m, s.n, s.k); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  // Both kernels across the switch-over in matmul.cpp, to re-tune it on other hardware.
  for (Shape s : {Shape{8192, 2048}, Shape{2048, 8192}}) {
    for (int64_t m : {32, 128, 256, 512}) {
      const std::string tail = "F16/m" + std::to_string(m) + "/" + shape_name(s);
      const std::pair<const char*, Kernel> kernels[] = {{"direct", &orzo::cpu::matmul_direct},
                                                        {"blas", &orzo::cpu::matmul_blas}};
      for (const auto& named : kernels) {
        const Kernel kernel = named.second;
        benchmark::RegisterBenchmark(("threshold/" + std::string(named.first) + "/" + tail).c_str(),
                                     [=](benchmark::State& st) { run(st, kernel, DType::F16, m, s.n, s.k); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
