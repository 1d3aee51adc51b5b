// The product without a packed copy of the weight, for one ISA level (what it is and why:
// kernels/cpu/matmul_direct.hpp).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"
#include "kernels/cpu/isa/direct_product.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

RowsKernel kernel_for(DType t) {
  switch (t) {
    case DType::F32: return prepare_direct<F32Format>;
    case DType::F16: return prepare_direct<F16Format>;
    case DType::BF16: return prepare_direct<BF16Format>;
    case DType::Q8_0: return prepare_direct<Q8_0Format>;
    case DType::Q4_0: return prepare_direct<Q4_0Format>;
    case DType::Q4_1: return prepare_direct<Q4_1Format>;
    case DType::Q5_0: return prepare_direct<Q5_0Format>;
    case DType::Q5_1: return prepare_direct<Q5_1Format>;
    case DType::Q2_K: return prepare_direct<Q2_KFormat>;
    case DType::Q3_K: return prepare_direct<Q3_KFormat>;
    case DType::Q4_K: return prepare_direct<Q4_KFormat>;
    case DType::Q5_K: return prepare_direct<Q5_KFormat>;
    case DType::Q6_K: return prepare_direct<Q6_KFormat>;
    case DType::IQ4_NL: return prepare_direct<IQ4_NLFormat>;
    case DType::IQ4_XS: return prepare_direct<IQ4_XSFormat>;
  }
  throw std::logic_error("matmul_direct: unknown dtype");
}

}  // namespace

RowsJob matmul_direct(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                      int slot) {
  return kernel_for(w.dtype)(x, m, w, y, pool, bias, slot);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
