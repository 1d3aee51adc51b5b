#include "kernels/cpu/matmul_blas.hpp"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace orzo::cpu {
namespace {

// The pool already runs one sgemm per thread; OpenBLAS threads on top would oversubscribe.
void use_single_threaded_blas() {
  static const bool done = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  static_cast<void>(done);
}

// Slice boundaries on whole cache lines of y, so threads never share one.
constexpr int64_t kGrain = 16;

// Every sgemm call packs all of x again, so a call must cover enough weight rows to
// amortize that: on Zen 4 at m = 512, 64-row tiles ran 6% (k = 2048) to 16% (k = 8192)
// slower than 512-row ones. The price is a scratch of 8 MiB per pool thread (more when
// k > 8192, where the 256-row floor applies).
constexpr int64_t kTileBytes = int64_t{8} << 20;
constexpr int64_t kMinTileRows = 256;

int64_t tile_rows(int64_t k) {
  const int64_t rows = kTileBytes / (k * static_cast<int64_t>(sizeof(float))) / kGrain * kGrain;
  return std::max(kMinTileRows, rows);
}

// y[:, 0..rows) (+)= x · wᵀ for `rows` f32 weight rows w of length k; y rows are ldy apart.
void sgemm_rows(const float* x, int64_t m, int64_t k, const float* w, int64_t rows, float* y,
                int64_t ldy, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(rows),
              static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), w, static_cast<blasint>(k), beta, y,
              static_cast<blasint>(ldy));
}

// The level a program will run: `asked` (its command line's), else ORZO_CPU_ISA's, else the
// CPU's best. A level this CPU does not run counts as the best: the command's parser or
// kernels() refuses it after.
Isa requested_level(std::optional<Isa> asked) {
  if (const char* env = std::getenv("ORZO_CPU_ISA"); !asked && env) asked = parse_isa(env);
  const std::vector<Isa> runnable = runnable_isas();
  return asked && std::find(runnable.begin(), runnable.end(), *asked) != runnable.end() ? *asked : runnable.back();
}

}  // namespace

const char* blas_core_for(std::string_view core, Isa level, CoreKind kind) {
  // OpenBLAS's x86 cores whose kernels use AVX2 and FMA, and those that use AVX-512.
  constexpr std::array<std::string_view, 4> kAvx2Cores = {"Haswell", "Zen", "Excavator", "Steamroller"};
  constexpr std::array<std::string_view, 3> kAvx512Cores = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  const auto among = [&](const auto& cores) { return std::find(cores.begin(), cores.end(), core) != cores.end(); };
  switch (level) {
    case Isa::Portable: return nullptr;
    case Isa::Avx2: return among(kAvx2Cores) ? nullptr : "Haswell";
    default:
      if (among(kAvx512Cores) || (among(kAvx2Cores) && kind == CoreKind::Other)) return nullptr;
      return level == Isa::Avx512Vnni ? "SkylakeX" : "Cooperlake";
  }
}

const BlasCore& blas_core() {
  static const BlasCore core = [] {
    BlasCore out{openblas_get_corename(), {}};
    while (!out.name.empty() && out.name.back() == ' ') out.name.pop_back();
    for (Isa level : kAllIsas) out.short_of[static_cast<size_t>(level)] = blas_core_for(out.name, level, core_kind());
    return out;
  }();
  return core;
}

// OpenBLAS exports it for its fork handlers, though no header declares it; weak, so a BLAS
// without it (a serial build) links and leaves this a no-op.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

void stop_blas_server_threads() {
  use_single_threaded_blas();
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

void rerun_with_suited_blas(char** argv, std::optional<Isa> level) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* suited = blas_core().suited(requested_level(level));
  if (!suited || setenv("OPENBLAS_CORETYPE", suited, 1) != 0) return;
  execv("/proc/self/exe", argv);
}

void matmul_blas(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                 const float* bias) {
  use_single_threaded_blas();
  const int64_t n = w.rows(), k = w.cols();
  // With a bias, y starts as the bias and sgemm accumulates onto it (beta = 1).
  const float beta = bias ? 1.0f : 0.0f;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end, int) {
        if (bias) {
          for (int64_t i = 0; i < m; ++i) std::copy(bias + begin, bias + end, y + i * n + begin);
        }
        if (w.dtype == DType::F32) {
          sgemm_rows(x, m, k, static_cast<const float*>(w.data) + begin * k, end - begin, y + begin, n, beta);
          return;
        }
        // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
        thread_local std::vector<float> tile;
        const int64_t rows = tile_rows(k);
        tile.resize(std::max(tile.size(), static_cast<size_t>(rows * k)));
        thread_local std::vector<uint8_t> unpacked;
        const size_t row_bytes = dtype_row_bytes(w.dtype, k);
        for (int64_t j = begin; j < end; j += rows) {
          const int64_t count = std::min(rows, end - j);
          // Packed rows (packed_rows.hpp) come unpacked, so the stored ones stay unread.
          const uint8_t* stored =
              w.packed ? unpacked_rows(w.dtype, w.packed, k, j, count, unpacked) : w.row(j);
          for (int64_t r = 0; r < count; ++r) dequantize_row(w.dtype, stored + r * row_bytes, k, tile.data() + r * k);
          sgemm_rows(x, m, k, tile.data(), count, y + j, n, beta);
        }
      },
      kGrain);
}

}  // namespace orzo::cpu
