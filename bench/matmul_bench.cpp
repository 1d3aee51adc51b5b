// CPU matmul throughput: GB/s of weight read for decode (m = 1), to hold against the
// read bandwidth from ceilings_bench, and GFLOP/s for batched rows, to hold against its
// multi-threaded sgemm. A decode step streams every layer's weights once, so each run
// cycles through copies of the weight that together overflow the last-level cache.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_pool.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_direct.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace {

using orzo::DType;
using orzo::TensorView;

constexpr size_t kMinWeightBytes = size_t{512} << 20;

// Two threads unless ORZO_BENCH_THREADS says otherwise.
orzo::ThreadPool& pool() { return orzo::bench::bench_pool(2); }

struct Weights {
  DType dtype;
  int64_t n, k;
  std::vector<std::vector<uint8_t>> copies;
  std::vector<std::vector<uint8_t>> packed;  // each copy packed (packed_rows.hpp), where asked
  std::vector<TensorView> views;
  size_t bytes_each() const { return copies.front().size(); }
};

std::unique_ptr<Weights> make_weights(DType t, int64_t n, int64_t k, size_t min_bytes, bool packed = false) {
  auto w = std::make_unique<Weights>(Weights{t, n, k, {}, {}, {}});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(k));
  const size_t row_bytes = orzo::dtype_row_bytes(t, k);
  std::vector<uint8_t> first(row_bytes * static_cast<size_t>(n));
  if (t == DType::Q4_K || t == DType::Q6_K) {
    // No quantizer writes the K-quants; speed does not depend on the codes, so they are
    // random bytes, with f16 scales of 1/64 (0x2400) so that no value is NaN or subnormal.
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : first) b = static_cast<uint8_t>(byte(rng));
    const size_t block = orzo::dtype_block_bytes(t);
    const std::vector<size_t> fields = t == DType::Q4_K ? std::vector<size_t>{offsetof(orzo::BlockQ4_K, d), offsetof(orzo::BlockQ4_K, dmin)}
                                                        : std::vector<size_t>{offsetof(orzo::BlockQ6_K, d)};
    for (size_t at = 0; at < first.size(); at += block)
      for (size_t f : fields) first[at + f + 1] = 0x24, first[at + f] = 0;
  } else {
    for (int64_t r = 0; r < n; ++r) {
      for (auto& v : row) v = uniform(rng);
      orzo::cpu::quantize_row(t, row.data(), k, first.data() + static_cast<size_t>(r) * row_bytes);
    }
  }
  const size_t count = std::max<size_t>(1, (min_bytes + first.size() - 1) / first.size());
  w->copies.assign(count, first);
  for (const auto& bytes : w->copies) {
    TensorView v;
    v.name = "bench.weight";
    v.dtype = t;
    v.shape = {n, k};
    v.data = bytes.data();
    v.nbytes = bytes.size();
    if (packed) {
      w->packed.emplace_back(orzo::cpu::packed_rows_bytes(v));
      orzo::cpu::pack_rows(v, w->packed.back().data());
      v.packed = w->packed.back().data();
    }
    w->views.push_back(v);
  }
  return w;
}

// Google Benchmark calls each function several times while it sizes the run; the last
// weight set is kept so it is generated once per benchmark, not once per call.
const Weights& weights(DType t, int64_t n, int64_t k, bool packed = false) {
  static std::unique_ptr<Weights> cached;
  if (cached && cached->dtype == t && cached->n == n && cached->k == k && cached->packed.empty() != packed) return *cached;
  cached.reset();
  cached = make_weights(t, n, k, kMinWeightBytes, packed);
  return *cached;
}

// The q8/ family runs interleaved at random, so every weight set it uses is kept; 64 MiB
// of copies each still overflow the last-level cache.
const Weights& kept_weights(DType t, int64_t n, int64_t k, bool packed = false) {
  static std::map<std::tuple<DType, int64_t, int64_t, bool>, std::unique_ptr<Weights>> kept;
  auto& w = kept[{t, n, k, packed}];
  if (!w) w = make_weights(t, n, k, size_t{64} << 20, packed);
  return *w;
}

using Kernel = void (*)(const float*, int64_t, const TensorView&, float*, orzo::ThreadPool&, const float*);

// matmul() as the CPU backend calls it by default.
void default_matmul(const float* x, int64_t m, const TensorView& w, float* y, orzo::ThreadPool& pool, const float* bias) {
  orzo::cpu::matmul(x, m, w, y, pool, bias);
}


// matmul() as the engine's stages call it: activations rounded to bf16 where the CPU's bf16
// products take the weights (MatmulOptions).
void bf16_matmul(const float* x, int64_t m, const TensorView& w, float* y, orzo::ThreadPool& pool, const float* bias) {
  orzo::cpu::MatmulOptions options;
  options.bf16_activations = true;
  orzo::cpu::matmul(x, m, w, y, pool, bias, options);
}

// The AMX tiles at any m, where the level has them: block types decoded to bf16.
void tiles_matmul(const float* x, int64_t m, const TensorView& w, float* y, orzo::ThreadPool& pool, const float* bias) {
  orzo::cpu::kernels().matmul_tiles(x, m, w, y, pool, bias);
}

void run_on(benchmark::State& state, Kernel kernel, const Weights& w, int64_t m) {
  const int64_t n = w.n, k = w.k;
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

void run(benchmark::State& state, Kernel kernel, DType t, int64_t m, int64_t n, int64_t k) {
  run_on(state, kernel, weights(t, n, k), m);
}

struct Shape {
  int64_t n, k;
};

// A view of the shape, for packs_rows().
TensorView kept_view(DType t, Shape s) {
  TensorView v;
  v.dtype = t;
  v.shape = {s.n, s.k};
  return v;
}

std::string shape_name(Shape s) { return std::to_string(s.n) + "x" + std::to_string(s.k); }

void register_all() {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
  for (Shape s : {Shape{8192, 2048}, Shape{2048, 8192}}) {
    for (DType t : all) {
      benchmark::RegisterBenchmark(("gemv/" + std::string(orzo::dtype_name(t)) + "/" + shape_name(s)).c_str(),
                                   [=](benchmark::State& st) { run(st, default_matmul, t, 1, s.n, s.k); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  // As the engine runs them, and BF16 also on its rows as stored where the level reads them
  // packed (matmul/BF16-stored/).
  orzo::cpu::MatmulOptions bf16_options;
  bf16_options.bf16_activations = true;
  for (Shape s : {Shape{2048, 8192}, Shape{8192, 2048}, Shape{1024, 2816}, Shape{2816, 1024}}) {
    for (DType t : {DType::F16, DType::BF16}) {
      const bool packed = orzo::cpu::packs_rows(kept_view(t, s)) && orzo::cpu::reads_packed_rows(kept_view(t, s), bf16_options);
      // One weight set at a time (weights() keeps the last): all row counts packed, then stored.
      for (const bool stored : {false, true}) {
        if (stored && !packed) continue;
        for (int64_t m : {1, 4, 8, 16, 32, 64, 128, 512}) {
          const std::string name = "matmul/" + std::string(orzo::dtype_name(t)) + (stored ? "-stored" : "") + "/m" +
                                   std::to_string(m) + "/" + shape_name(s);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            run_on(st, bf16_matmul, weights(t, s.n, s.k, packed && !stored), m);
          })->Unit(benchmark::kMicrosecond)->UseRealTime();
        }
      }
    }
  }
  // The f32 kernels (direct and sgemm) and the integer ones (one digit, two on strips, two
  // as stored for a few rows) for block types
  // on the small model's products (dim 1024, FFN 2816), run with
  // --benchmark_enable_random_interleaving so that they alternate on a shared machine.
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    for (Shape s : {Shape{1024, 1024}, Shape{2816, 1024}, Shape{1024, 2816}}) {
      for (int64_t m : {1, 2, 4, 8, 16, 32, 128, 512}) {
        const std::string tail = std::string(orzo::dtype_name(t)) + "/m" + std::to_string(m) + "/" + shape_name(s);
        const std::pair<const char*, Kernel> kernels[] = {{"direct", &orzo::cpu::matmul_direct},
                                                          {"blas", &orzo::cpu::matmul_blas},
                                                          {"q8", &orzo::cpu::matmul_q8},
                                                          {"q16", &orzo::cpu::matmul_q16},
                                                          {"gemv", &orzo::cpu::matmul_q16_gemv},
                                                          {"tiles", &tiles_matmul}};
        for (const auto& named : kernels) {
          const Kernel kernel = named.second;
          const bool two_digits = kernel == &orzo::cpu::matmul_q16 || kernel == &orzo::cpu::matmul_q16_gemv;
          if (two_digits && !orzo::cpu::has_matmul_q16()) continue;
          if (kernel == &orzo::cpu::matmul_q16_gemv && m > orzo::cpu::kGemvMaxRows) continue;
          if (kernel == &tiles_matmul && (!orzo::cpu::kernels().matmul_tiles || m < 4)) continue;
          benchmark::RegisterBenchmark(("q8/" + std::string(named.first) + "/" + tail).c_str(),
                                       [=](benchmark::State& st) { run_on(st, kernel, kept_weights(t, s.n, s.k), m); })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
        // matmul() and one digit on the rows packed, as the CPU backend gives them where the
        // level reads them: the gemv's packed tiles, or the strips decoded from them.
        if (orzo::cpu::kernels().reads_packed_rows(t) && orzo::cpu::packs_rows(kept_view(t, s)))
          for (const auto& named : {std::pair<const char*, Kernel>{"packed", &default_matmul},
                                    std::pair<const char*, Kernel>{"packed-q8", &orzo::cpu::matmul_q8}})
            benchmark::RegisterBenchmark(("q8/" + std::string(named.first) + "/" + tail).c_str(), [=](benchmark::State& st) {
              run_on(st, named.second, kept_weights(t, s.n, s.k, true), m);
            })->Unit(benchmark::kMicrosecond)->UseRealTime();
      }
    }
  }
  // Both kernels across the switch-over in matmul.cpp, to re-tune it on other hardware.
  for (Shape s : {Shape{8192, 2048}, Shape{2048, 8192}, Shape{1024, 2816}, Shape{2816, 1024}}) {
    for (int64_t m : {32, 64, 128, 256, 512, 1024}) {
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
  orzo::cpu::rerun_with_suited_blas(argv);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
