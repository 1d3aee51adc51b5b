#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_blas.hpp"

namespace orzo::cpu {

int64_t one_digit_from_rows(MatmulOptions options) {
  if (options.int8_activations) return 1;
  return options.int8_batches && !options.batch_invariant ? kernels().one_digit_from_rows : 0;
}

int64_t tiles_from_rows(MatmulOptions options, DType t) {
  const KernelTable& kernel = kernels();
  return options.bf16_activations && !options.batch_invariant && kernel.matmul_tiles ? kernel.tiles_from_rows(t) : 0;
}

bool reads_packed_rows(const TensorView& w, MatmulOptions options) {
  return kernels().reads_packed_rows(w.dtype) && (w.dtype != DType::BF16 || options.bf16_activations);
}

namespace {

// The kernel matmul() takes for m rows of w: `rows` where it prepares a RowsJob, else `whole`.
struct Route {
  MatmulKernel whole = nullptr;
  RowsKernel rows = nullptr;
};

Route route(int64_t m, const TensorView& w, MatmulOptions options) {
  const int64_t k = w.cols();
  if (k % dtype_block_elems(w.dtype) != 0)
    throw std::invalid_argument("matmul: " + w.name + " has rows of " + std::to_string(k) +
                                " elements, not whole quant blocks");
  // The opt-in integer path is taken at every m or at none, decode included: one arithmetic
  // for a row whatever batch it rides in. The default two digits and bf16 products are too
  // under batch_invariant; otherwise bf16 products of many rows run on AMX tiles where the
  // level has them, their sums in another order, and int8 batches take one digit where it
  // has none.
  const KernelTable& kernel = kernels();
  const int64_t tiles_from = tiles_from_rows(options, w.dtype);
  const bool tiles = tiles_from > 0 && m >= tiles_from && k % kBf16TileDepth == 0;
  const int64_t one_digit_from = one_digit_from_rows(options);
  const bool one_digit = one_digit_from > 0 && m >= one_digit_from;
  if (one_digit && kernel.matmul_q8_supports(w.dtype)) return {kernel.matmul_q8};
  if (w.packed && w.dtype == DType::F16 && kernel.matmul_packed_f16) return {nullptr, kernel.matmul_packed_f16};
  if (w.packed && kernel.matmul_packed_words) return {nullptr, kernel.matmul_packed_words};
  if (tiles) return {kernel.matmul_tiles};
  const int64_t x_bytes = m * k * static_cast<int64_t>(sizeof(float));
  if (kernel.matmul_q16 && kernel.matmul_q8_supports(w.dtype) &&
      (options.batch_invariant || blas_core().suited(kernel.isa) || x_bytes <= kernel.q16_max_bytes)) {
    if (m >= kStripsFromRows || options.batch_invariant) return {kernel.matmul_q16};
    return {nullptr, kernel.matmul_q16_gemv};
  }
  if (options.bf16_activations && w.dtype == DType::BF16 && kernel.matmul_bf16) return {nullptr, kernel.matmul_bf16};
  // Packed BF16 rows in f32 (a backend packs them for bf16 activations alone): sgemm
  // unpacks them, where the direct kernel would read the stored ones.
  if (w.packed && w.dtype == DType::BF16) return {matmul_blas};
  if (options.batch_invariant || blas_core().suited(kernel.isa) || x_bytes <= kernel.direct_l2_bytes ||
      (m <= kernel.direct_max_rows && x_bytes <= kernel.direct_max_bytes))
    return {nullptr, kernel.matmul_direct};
  return {matmul_blas};
}

// The jobs' columns laid end to end, each weighed by its weight row's bytes, cut into
// pool.size() runs of equal weight at multiples of each job's grain: one run a thread, its
// columns contiguous in each weight, which the prefetchers stream (claiming pieces as they
// come instead ran SmolLM2's decode 0.9-0.98x as fast on a Zen 5).
void run_together(ThreadPool& pool, const RowsJob* jobs, size_t count) {
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) total += jobs[i].n * static_cast<int64_t>(jobs[i].row_bytes);
  const int64_t threads = pool.size();
  // Where weight `at` falls in job i's columns (which start at weight `first`), rounded to
  // its grain: the same cut for the threads on both sides of it.
  const auto column = [&](size_t i, int64_t first, int64_t at) {
    const int64_t bytes = static_cast<int64_t>(jobs[i].row_bytes), grain = jobs[i].grain;
    const int64_t c = std::clamp<int64_t>((at - first + bytes / 2) / bytes, 0, jobs[i].n);
    return c == jobs[i].n ? c : std::min(jobs[i].n, (c + grain / 2) / grain * grain);
  };
  pool.parallel_for(threads, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t lo = total * t / threads, hi = total * (t + 1) / threads;
      int64_t first = 0;
      for (size_t i = 0; i < count; ++i) {
        const int64_t from = column(i, first, lo), to = column(i, first, hi);
        if (from < to) jobs[i].rows(jobs[i].state, from, to);
        first += jobs[i].n * static_cast<int64_t>(jobs[i].row_bytes);
      }
    }
  });
}

}  // namespace

void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
            MatmulOptions options) {
  if (m <= 0) return;
  const Route r = route(m, w, options);
  if (r.rows)
    run_rows(pool, r.rows(x, m, w, y, pool, bias, 0));
  else
    r.whole(x, m, w, y, pool, bias);
}

void matmuls(const float* x, int64_t m, std::initializer_list<MatmulTarget> targets, ThreadPool& pool,
             MatmulOptions options) {
  if (m <= 0) return;
  if (targets.size() > static_cast<size_t>(kRowsJobSlots))
    throw std::logic_error("matmuls: " + std::to_string(targets.size()) + " products, past the " +
                           std::to_string(kRowsJobSlots) + " a thread prepares at once");
  Route routes[kRowsJobSlots];
  bool together = m < kStripsFromRows && pool.size() > 1;
  size_t count = 0;
  for (const MatmulTarget& t : targets) {
    routes[count] = route(m, t.w, options);
    together = together && routes[count].rows;
    ++count;
  }
  if (!together) {
    for (const MatmulTarget& t : targets) matmul(x, m, t.w, t.y, pool, t.bias, options);
    return;
  }
  RowsJob jobs[kRowsJobSlots];
  count = 0;
  for (const MatmulTarget& t : targets) {
    jobs[count] = routes[count].rows(x, m, t.w, t.y, pool, t.bias, static_cast<int>(count));
    ++count;
  }
  run_together(pool, jobs, count);
}

}  // namespace orzo::cpu
