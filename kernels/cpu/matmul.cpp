#include "kernels/cpu/matmul.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_blas.hpp"

namespace orzo::cpu {
namespace {

// The direct kernel reads all of x again for every few weight rows, so it wins while x
// stays in cache and sgemm's blocking wins after. On Zen 4 (1 MiB L2 per core, 32 MiB
// L3 shared with other cores) the direct kernel still led by ~10% at 8 MiB of x and fell
// to half of sgemm's speed at 16 MiB (threshold/* in matmul_bench); 4 MiB keeps a margin
// for a busier L3. That is m <= 512 at k = 2048 and m <= 128 at k = 8192.
constexpr int64_t kDirectActivationBytes = int64_t{4} << 20;

}  // namespace

void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
            Activations activations) {
  if (m <= 0) return;
  const int64_t k = w.cols();
  if (k % dtype_block_elems(w.dtype) != 0)
    throw std::invalid_argument("matmul: " + w.name + " has rows of " + std::to_string(k) +
                                " elements, not whole quant blocks");
  // The integer and bf16 paths are taken at every m or at none, decode included: one arithmetic for a
  // row whatever batch it rides in.
  const KernelTable& kernel = kernels();
  if (activations.int8 && kernel.matmul_q8_supports(w.dtype))
    kernel.matmul_q8(x, m, w, y, pool, bias);
  else if (activations.bf16 && w.dtype == DType::BF16 && kernel.matmul_bf16)
    kernel.matmul_bf16(x, m, w, y, pool, bias);
  else if (m * k * static_cast<int64_t>(sizeof(float)) <= kDirectActivationBytes)
    kernel.matmul_direct(x, m, w, y, pool, bias);
  else
    matmul_blas(x, m, w, y, pool, bias);
}

}  // namespace orzo::cpu
