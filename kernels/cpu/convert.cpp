#include "kernels/cpu/convert.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/quantize.hpp"

namespace orzo::cpu {
namespace {

void check_blocks(DType t, int64_t n) {
  if (n % dtype_block_elems(t) != 0)
    throw std::invalid_argument(std::string(dtype_name(t)) + " row length " + std::to_string(n) +
                                " is not a multiple of " + std::to_string(dtype_block_elems(t)));
}

}  // namespace

void dequantize_row(DType t, const void* src, int64_t n, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16:
    case DType::BF16: kernels().half_row_to_f32(t, bytes, n, dst); return;
    default: check_blocks(t, n); dequantize_blocks(t, bytes, n, dst); return;
  }
}

void quantize_row(DType t, const float* src, int64_t n, void* dst) {
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16:
    case DType::BF16: kernels().f32_row_to_half(t, src, n, bytes); return;
    default: check_blocks(t, n); quantize_blocks(t, src, n, bytes); return;
  }
}

}  // namespace orzo::cpu
