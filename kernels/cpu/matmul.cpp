#include "kernels/cpu/matmul.hpp"

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

void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
            MatmulOptions options) {
  if (m <= 0) return;
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
  if (one_digit && kernel.matmul_q8_supports(w.dtype))
    kernel.matmul_q8(x, m, w, y, pool, bias);
  else if (w.packed && kernel.matmul_packed_words)
    kernel.matmul_packed_words(x, m, w, y, pool, bias);
  else if (tiles)
    kernel.matmul_tiles(x, m, w, y, pool, bias);
  else if (const int64_t x_bytes = m * k * static_cast<int64_t>(sizeof(float));
           kernel.matmul_q16 && kernel.matmul_q8_supports(w.dtype) &&
           (options.batch_invariant || blas_core().suited(kernel.isa) || x_bytes <= kernel.q16_max_bytes))
    (m >= kStripsFromRows || options.batch_invariant ? kernel.matmul_q16 : kernel.matmul_q16_gemv)(x, m, w, y, pool, bias);
  else if (options.bf16_activations && w.dtype == DType::BF16 && kernel.matmul_bf16)
    kernel.matmul_bf16(x, m, w, y, pool, bias);
  else if (options.batch_invariant || blas_core().suited(kernel.isa) || x_bytes <= kernel.direct_l2_bytes ||
           (m <= kernel.direct_max_rows && x_bytes <= kernel.direct_max_bytes))
    kernel.matmul_direct(x, m, w, y, pool, bias);
  else
    matmul_blas(x, m, w, y, pool, bias);
}

}  // namespace orzo::cpu
